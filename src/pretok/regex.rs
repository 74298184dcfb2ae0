//! The regex engine behind every pattern that no hand-written scanner covers: a `pattern=`
//! regex, and the `Split` steps of an imported `tokenizer.json`. Semantics are those of the
//! Python `regex` module and Oniguruma for the patterns tokenizers use: leftmost-first
//! alternation, greedy and possessive quantifiers, look-around, `\p{..}` classes; an empty
//! match advances the search by one char.

/// A compiled regex, shared by all threads.
pub struct Regex {
    source: String,
    re: fancy_regex::Regex,
}

impl Regex {
    /// Compiles `source`; the error names the pattern.
    pub fn new(source: &str) -> Result<Regex, String> {
        let re = fancy_regex::Regex::new(source).map_err(|e| format!("pattern {source:?} does not compile: {e}"))?;
        Ok(Regex { source: source.to_string(), re })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Calls `f(start, end)` for each match, left to right, non-overlapping (empty ones too).
    pub fn for_each_match(&self, text: &str, mut f: impl FnMut(usize, usize)) -> Result<(), String> {
        for m in self.re.find_iter(text) {
            let m = m.map_err(|e| format!("pattern {:?} failed while matching: {e}", self.source))?;
            f(m.start(), m.end());
        }
        Ok(())
    }
}
