//! Superword span patterns (`hf_bpe/training/superword.py`): regexes whose pieces are spans of
//! 1 to N consecutive non-whitespace pieces of a word pattern (gpt2 so far), each with its one
//! leading space; other whitespace is a piece of its own, and a piece holding `.`, `!` or `?`
//! ends a span. Built here, the one source of the spellings: the trainer saves them, and the
//! counter and the file encoder recognize them to cut text at lines (`corpus::cuts::Rule::Lines`:
//! a span never holds a `'\n'`), and [`super::Pattern`] splits them with [`scan`] (gpt2's
//! scanner, its pieces grouped), not with the regex.

use super::chars::{ascii_class, class_at, L, N, NON_ASCII, WS};
use super::{Builtin, PieceSink};

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

/// The pieces of the span pattern of at most `max` words over gpt2 (`max` in 1..=[`MAX_WORDS`]):
/// gpt2's pieces, the consecutive ones that are not whitespace grouped into one, up to `max`,
/// a group closed by a piece holding `.`, `!` or `?` and by a whitespace piece (a piece of its
/// own). Equal to the regex, whose alternatives are gpt2's: its lead pieces are gpt2's but that
/// a punctuation run stops at a sentence stop, where the last piece then takes the rest of the
/// run, so a run holding a stop ends its span either way (the property tests compare the two).
pub fn scan(text: &str, max: usize, f: &mut impl PieceSink) {
    scan_words(text, max, &mut Joined { out: f, start: None, end: 0 });
}

/// What [`scan_words`] reports: each word of a span, then the span's end.
pub trait SpanSink {
    /// The next word of the open span (gpt2's piece `start..end`; the first word opens a span).
    fn word(&mut self, start: usize, end: usize);
    /// The open span ends after its last word.
    fn close(&mut self);
}

/// The spans of [`scan`] as their words: every gpt2 piece of `text` in order through
/// [`SpanSink::word`], and [`SpanSink::close`] after the last word of each span (a whitespace
/// piece is a span of one word). Superword counting keys a span by its words' ids this way
/// (`crate::count::span_words`).
pub fn scan_words(text: &str, max: usize, f: &mut impl SpanSink) {
    let mut g = Group { b: text.as_bytes(), out: f, max: max.max(1), n: 0 };
    Builtin::Gpt2.scan(text, &mut g);
    if g.n > 0 {
        g.out.close();
    }
}

/// A [`SpanSink`] that reports each span as one piece.
struct Joined<'a, F> {
    out: &'a mut F,
    /// The open span's start and its last word's end.
    start: Option<usize>,
    end: usize,
}

impl<F: PieceSink> SpanSink for Joined<'_, F> {
    #[inline(always)]
    fn word(&mut self, s: usize, e: usize) {
        self.start.get_or_insert(s);
        self.end = e;
    }

    #[inline(always)]
    fn close(&mut self) {
        if let Some(s) = self.start.take() {
            self.out.piece(s, self.end);
        }
    }
}

/// The sink that groups gpt2's pieces into spans (see [`scan`]).
struct Group<'a, F> {
    b: &'a [u8],
    out: &'a mut F,
    max: usize,
    /// How many words the open span holds (0: none open).
    n: usize,
}

impl<F: SpanSink> PieceSink for Group<'_, F> {
    #[inline(always)]
    fn piece(&mut self, s: usize, e: usize) {
        // A piece is whitespace iff its last char is (the others end in a letter, digit, mark
        // or punctuation), and only a punctuation piece can hold a stop: most pieces are told
        // by their last byte, an ASCII letter or digit.
        let b = self.b;
        let has_stop = || b[s..e].iter().any(|&c| matches!(c, b'.' | b'!' | b'?'));
        let (space, stop) = match ascii_class(b[e - 1]) {
            NON_ASCII => {
                let mut last = e - 1;
                while b[last] & 0xC0 == 0x80 {
                    last -= 1;
                }
                (class_at(b, last).0 & WS != 0, has_stop())
            }
            k if k & (L | N) != 0 => (false, false),
            k if k & WS != 0 => (true, false),
            _ => (false, has_stop()),
        };
        if space {
            if self.n > 0 {
                self.out.close();
                self.n = 0;
            }
            self.out.word(s, e);
            self.out.close();
            return;
        }
        self.out.word(s, e);
        self.n += 1;
        if self.n == self.max || stop {
            self.out.close();
            self.n = 0;
        }
    }
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

    #[test]
    fn spans_are_gpt2_pieces_grouped() {
        let split = |max: usize, text: &str| {
            let p = super::super::Pattern::from_spec(&span_pattern("gpt2", max).unwrap()).unwrap();
            assert!(matches!(p, super::super::Pattern::Spans { .. }));
            let mut v = Vec::new();
            p.for_each_piece(text, |s, e| v.push(text[s..e].to_string())).unwrap();
            v
        };
        assert_eq!(split(4, " of the cat sat on the mat. The end"), [" of the cat sat", " on the mat.", " The end"]);
        // A stop inside a punctuation run ends the span with the run; whitespace other than one
        // space before a word is a piece of its own; a contraction is a word.
        assert_eq!(split(3, "a ,.b c  d\n\te's"), ["a ,.", "b c", " ", " d", "\n", "\t", "e's"]);
        assert_eq!(split(1, "x y"), ["x", " y"]);
        assert_eq!(split(2, " \u{3000}日本 語!? ok"), [" ", "\u{3000}", "日本 語", "!?", " ok"]);
    }
}
