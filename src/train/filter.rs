//! Vetoed merges (`merge_filter=`): the caller's filter, or one from a regex over the merged
//! bytes, asked once per pair of tokens when it first comes out on top.

use super::tokens::Tokens;

/// Says whether the merge of two tokens (their bytes) may happen: `Some(true)` yes, `Some(false)`
/// a veto (the pair never merges; the best allowed pair merges instead), `None` stop training
/// (the caller keeps the reason, e.g. a Python exception). Asked once per pair of tokens, when it
/// first comes out on top; never for a base's merge that re-forms while extending (the encoder
/// applies those at their rank whatever a filter says).
pub type MergeFilter = Box<dyn Fn(&[u8], &[u8]) -> Option<bool> + Send + Sync>;

/// A [`MergeFilter`] that vetoes the merges whose result holds a match of `pattern` (a regex over
/// bytes: `\p{..}` classes match UTF-8, `(?-u:\xFF)` a raw byte); an error names the regex.
pub fn regex_filter(pattern: &str) -> Result<MergeFilter, String> {
    use regex_automata::dfa::regex::Regex;
    let re = Regex::builder()
        .syntax(regex_automata::util::syntax::Config::new().utf8(false))
        .build(pattern)
        .map_err(|e| {
            // (The build error's own text is generic; the syntax error is its source.)
            let (mut msg, mut src) = (e.to_string(), std::error::Error::source(&e));
            while let Some(x) = src {
                msg = format!("{msg}: {x}");
                src = x.source();
            }
            format!("merge_filter regex {pattern:?}: {msg}")
        })?;
    if re.find(&b""[..]).is_some() {
        return Err(format!("merge_filter regex {pattern:?} matches the empty string, so it would veto every merge"));
    }
    Ok(Box::new(move |a: &[u8], b: &[u8]| {
        let mut t = Vec::with_capacity(a.len() + b.len());
        t.extend_from_slice(a);
        t.extend_from_slice(b);
        Some(re.find(&t[..]).is_none())
    }))
}

/// The filter's answers so far, by pair of token ids (a token's bytes never change).
#[derive(Default)]
pub(super) struct Vetoes {
    asked: rustc_hash::FxHashMap<(u32, u32), bool>,
    pub(super) stopped: bool,
}

impl Vetoes {
    pub(super) fn allowed(&mut self, f: &MergeFilter, toks: &Tokens, a: u32, b: u32) -> bool {
        if let Some(&ok) = self.asked.get(&(a, b)) {
            return ok;
        }
        match f(toks.get(a), toks.get(b)) {
            Some(ok) => {
                self.asked.insert((a, b), ok);
                ok
            }
            None => {
                self.stopped = true;
                false
            }
        }
    }
}
