//! Superword span patterns (`hf_bpe/training/superword.py`): regexes whose pieces are spans of
//! 1 to N consecutive non-whitespace pieces of a word pattern (gpt2 so far), each with its one
//! leading space; other whitespace is a piece of its own, and a piece holding `.`, `!` or `?`
//! ends a span. Built here, the one source of the spellings: the trainer saves them, and the
//! counter and the file encoder recognize them to cut text at lines (`corpus::cuts::Rule::Lines`:
//! a span never holds a `'\n'`).

/// The most words a span may hold.
pub const MAX_WORDS: usize = 16;

// gpt2's pieces that are not whitespace, in its order; `NO_STOP` leaves the sentence stops out of
// the punctuation piece. A span is up to N-1 pieces without a stop, then one piece of any kind.
const GPT2_PIECES: &str = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+";
const GPT2_NO_STOP: &str = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}.!?]+";
const GPT2_SPACE: &str = r"\s+(?!\S)|\s+";

/// The span pattern of `words` (a pattern spec) with at most `max_words` words per span.
pub fn span_pattern(words: &str, max_words: usize) -> Result<String, String> {
    if !(1..=MAX_WORDS).contains(&max_words) {
        return Err(format!("superword_max_words must be in 1..{MAX_WORDS}, not {max_words}"));
    }
    let name = super::Pattern::from_spec(words).ok().and_then(|p| p.name());
    if name != Some("gpt2") {
        return Err(format!(
            "superword training builds its spans from the gpt2 pattern's pieces; pattern={words:?} has no span pattern yet (train with pattern='gpt2')"
        ));
    }
    let lead = if max_words > 1 { format!("(?:{GPT2_NO_STOP}){{0,{}}}", max_words - 1) } else { String::new() };
    Ok(format!("{lead}(?:{GPT2_PIECES})|{GPT2_SPACE}"))
}

/// `(word pattern, max_words)` if `source` is a span pattern as [`span_pattern`] spells it.
pub fn span_of(source: &str) -> Option<(&'static str, usize)> {
    if !source.ends_with(GPT2_SPACE) {
        return None;
    }
    (1..=MAX_WORDS).find(|&n| span_pattern("gpt2", n).is_ok_and(|p| p == source)).map(|n| ("gpt2", n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip_and_others_are_refused() {
        for n in 1..=MAX_WORDS {
            assert_eq!(span_of(&span_pattern("gpt2", n).unwrap()), Some(("gpt2", n)));
        }
        assert!(span_pattern("gpt2", 0).is_err() && span_pattern("gpt2", MAX_WORDS + 1).is_err());
        assert!(span_pattern("cl100k", 4).unwrap_err().contains("gpt2 pattern"));
        assert_eq!(span_of(GPT2_SPACE), None);
    }
}
