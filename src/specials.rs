//! Special tokens: where a text splits into ordinary text and special tokens. One matcher, with
//! one rule, serves counting, reading files, encoding and the disallowed check.
//!
//! * **The rule.** Left to right, at the leftmost position where an *allowed* special starts,
//!   the longest allowed special that starts there is taken, and the search goes on after it.
//!   A special that is not allowed is ordinary text and never hides an allowed one: with `<a>`
//!   allowed and `<a><b>` not, `x<a><b>y` is `x`, `<a>`, `<b>y`. Training allows every special.
//! * **Where tiktoken differs.** tiktoken searches every special with one regex alternation and
//!   skips a match that is not allowed. Where two specials start at one position it takes the
//!   alternative listed first, an order that comes from a hash map: it may take the shorter of
//!   two allowed ones, or a disallowed one that then hides an allowed one. Elsewhere it agrees.
//! * **The disallowed check** reports the special that starts first in the text (the shorter of
//!   two that start at one byte), as tiktoken's search does when at most one of them is listed.
//! * **How.** A leftmost-longest Aho-Corasick automaton over the allowed specials: over all of
//!   them, or over a subset, built on first use and kept (a few subsets at a time); and an
//!   overlapping automaton over the `special` tokens alone for the check (a non-special added
//!   token is never disallowed, and runs of spaces among them would stop it everywhere). The encoder's check fused into
//!   the scan (`encode/queue.rs`) asks [`Specials::fused_lead`] and [`Specials::shortest_at`].

use std::sync::{Arc, Mutex};

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input, MatchKind};

/// Which special tokens may appear in a text, tiktoken style.
#[derive(Clone, Debug)]
pub enum SpecialSet {
    None,
    All,
    /// Sorted.
    Some(Vec<String>),
}

impl SpecialSet {
    pub fn contains(&self, s: &str) -> bool {
        match self {
            SpecialSet::None => false,
            SpecialSet::All => true,
            SpecialSet::Some(v) => v.binary_search_by(|x| x.as_str().cmp(s)).is_ok(),
        }
    }
    pub fn is_empty(&self) -> bool {
        match self {
            SpecialSet::None => true,
            SpecialSet::All => false,
            SpecialSet::Some(v) => v.is_empty(),
        }
    }
}

/// A span of a document after splitting at special tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    /// Ordinary text: a byte range of the document.
    Text(usize, usize),
    /// An allowed special token: its id and byte range.
    Special(u32, usize, usize),
}

/// A token matched in the text before the model sees it, with the flags of `tokenizers`'
/// `AddedToken`: `special` ones follow `allowed_special`/`disallowed_special`, the others always
/// match; `lstrip`/`rstrip` take the whitespace on that side into the token; `single_word` only
/// matches where no word character touches either end; `normalized` ones are matched in the
/// normalized text (see `crate::pipeline`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedToken {
    pub content: String,
    pub id: u32,
    pub special: bool,
    pub lstrip: bool,
    pub rstrip: bool,
    pub single_word: bool,
    pub normalized: bool,
}

impl AddedToken {
    /// A special token as tiktoken has them: matched as is, no flags.
    pub fn special(content: String, id: u32) -> Self {
        AddedToken { content, id, special: true, lstrip: false, rstrip: false, single_word: false, normalized: false }
    }

    fn has_edges(&self) -> bool {
        self.lstrip || self.rstrip || self.single_word
    }
}

/// At most this many specials for the check fused into the encoder's scan: each lead byte whose
/// next byte fits is compared with every special (hundreds of reserved specials use the
/// separate automaton pass instead).
const FUSED_MAX_SPECIALS: usize = 8;
/// Subset automata kept for reuse.
const SUBSETS_KEPT: usize = 8;

/// A leftmost-longest automaton over some of the specials.
pub struct Automaton {
    ac: AhoCorasick,
    /// Pattern index -> index in [`Specials::list`].
    index: Vec<usize>,
    max_len: usize,
}

impl Automaton {
    fn build(list: &[(String, u32)], index: Vec<usize>) -> Result<Self, String> {
        let pats: Vec<&str> = index.iter().map(|&i| list[i].0.as_str()).collect();
        Self::of(&pats, index)
    }

    /// Over `pats`, whose `k`-th pattern stands for entry `index[k]` of the list.
    fn of(pats: &[&str], index: Vec<usize>) -> Result<Self, String> {
        // A token that starts with a byte common in text (a space, a letter: GPT-NeoX's space
        // runs) makes a prefilter stop at nearly every position; the DFA alone is then faster
        // ([log](../docs/performance.md#special-tokens)).
        let common = pats.iter().any(|p| p.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric() || b.is_ascii_whitespace()));
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .kind(common.then_some(AhoCorasickKind::DFA))
            .prefilter(!common)
            .build(pats)
            .map_err(|e| e.to_string())?;
        let max_len = pats.iter().map(|s| s.len()).max().unwrap_or(0);
        Ok(Automaton { ac, index, max_len })
    }

    /// The matches in `hay[from..]` by the rule: `(start, end, index in the list)`.
    pub fn find_iter<'a>(&'a self, hay: &'a [u8], from: usize) -> impl Iterator<Item = (usize, usize, usize)> + 'a {
        self.ac.find_iter(Input::new(hay).span(from..hay.len())).map(|m| (m.start(), m.end(), self.index[m.pattern().as_usize()]))
    }

    /// The end of the last match in `b` that more text after `b` cannot change (None if there
    /// is none, or if it ends `b`). A match is trusted only if it starts at least the longest
    /// special's length before the end: a longer or earlier-starting one that runs past the end
    /// could otherwise win once more text arrives.
    pub fn last_cut(&self, b: &[u8]) -> Option<usize> {
        let limit = b.len().checked_sub(self.max_len)?;
        // Searched forward from the start: the rule is defined by a forward scan, so a backward
        // search could land inside a different match.
        let mut last = None;
        for (s, e, _) in self.find_iter(b, 0) {
            if s > limit {
                break;
            }
            last = Some(e);
        }
        last.filter(|&p| p < b.len())
    }

    /// `text` cut after each match (a match ends its segment).
    pub fn segments<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut out = Vec::new();
        let mut start = 0;
        for (_, e, _) in self.find_iter(text.as_bytes(), 0) {
            out.push(&text[start..e]);
            start = e;
        }
        if start < text.len() || out.is_empty() {
            out.push(&text[start..]);
        }
        out
    }
}

/// The special tokens of a vocabulary (or of a training run) and how to find them.
pub struct Specials {
    /// Sorted by id, then text.
    list: Vec<(String, u32)>,
    /// The flags of each entry of `list`.
    tokens: Vec<AddedToken>,
    /// The normalized group: (normalized content, index in `list`), when it is matched apart.
    inner: Vec<(String, usize)>,
    any_edges: bool,
    all: Option<Arc<Automaton>>,
    /// Over the special tokens only, with each pattern's index in `list`.
    overlapping: Option<(AhoCorasick, Vec<usize>)>,
    subsets: Mutex<Vec<Arc<Automaton>>>,
    max_len: usize,
    /// The byte every special starts with, when the check may be fused into the scan (see
    /// [`Self::fused_lead`]), and the bytes that follow it in some special.
    lead: Option<u8>,
    second: [bool; 256],
}

impl Specials {
    /// Checks the list: no empty special, no text twice (an id twice: see [`Self::with_tokens`]).
    pub fn new(list: Vec<(String, u32)>) -> Result<Self, String> {
        Self::with_tokens(list.into_iter().map(|(s, i)| AddedToken::special(s, i)).collect(), None)
    }

    /// Specials with `tokenizers`' flags. With `normalize` (a normalizer, or `Some(identity)`
    /// when both groups exist), the `normalized` tokens form a second group matched in the
    /// normalized text, by their normalized content ([`Self::inner`]); otherwise all are
    /// matched in one pass.
    pub fn with_tokens(mut tokens: Vec<AddedToken>, normalize: Option<&dyn Fn(&str) -> Result<String, String>>) -> Result<Self, String> {
        tokens.sort_by(|a, b| a.id.cmp(&b.id).then_with(|| a.content.cmp(&b.content)));
        let list: Vec<(String, u32)> = tokens.iter().map(|t| (t.content.clone(), t.id)).collect();
        if let Some((_, id)) = list.iter().find(|(s, _)| s.is_empty()) {
            return Err(format!("special token with id {id} is the empty string"));
        }
        // Two plain special tokens may share an id (tiktoken's o200k_harmony names 200018 twice);
        // the id decodes as the first by text. Tokens with flags may not.
        let plain_token = |t: &AddedToken| t.special && !t.has_edges() && !t.normalized;
        if let Some(w) = tokens.windows(2).find(|w| w[0].id == w[1].id && !(plain_token(&w[0]) && plain_token(&w[1]))) {
            return Err(format!("special tokens {:?} and {:?} share the id {}", w[0].content, w[1].content, w[0].id));
        }
        let mut texts: Vec<&str> = list.iter().map(|(s, _)| s.as_str()).collect();
        texts.sort_unstable();
        if let Some(w) = texts.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("special token {:?} is listed twice", w[0]));
        }
        // Whether each entry is matched in the raw text (else in the normalized text: `inner`).
        let mut inner = Vec::new();
        let outer: Vec<bool> = match normalize {
            None => vec![true; tokens.len()],
            Some(f) => {
                for (i, t) in tokens.iter().enumerate().filter(|(_, t)| t.normalized) {
                    let n = f(&t.content).map_err(|e| format!("added token {:?}: {e}", t.content))?;
                    if !n.is_empty() {
                        inner.push((n, i));
                    }
                }
                tokens.iter().map(|t| !t.normalized).collect()
            }
        };
        let any_edges = tokens.iter().any(|t| t.has_edges());
        let outer_index: Vec<usize> = (0..list.len()).filter(|&i| outer[i]).collect();
        let (all, overlapping) = if list.is_empty() {
            (None, None)
        } else {
            let specials: Vec<usize> = (0..list.len()).filter(|&i| tokens[i].special).collect();
            let pats: Vec<&str> = specials.iter().map(|&i| list[i].0.as_str()).collect();
            let o = if pats.is_empty() {
                None
            } else {
                Some((AhoCorasick::builder().match_kind(MatchKind::Standard).build(&pats).map_err(|e| e.to_string())?, specials))
            };
            let all = if outer_index.is_empty() { None } else { Some(Arc::new(Automaton::build(&list, outer_index)?)) };
            (all, o)
        };
        let plain = tokens.iter().all(|t| t.special && !t.has_edges()) && inner.is_empty();
        let lead = list.first().and_then(|(s, _)| s.as_bytes().first().copied()).filter(|&x| {
            // >= 0x10: a packed key's padding and length bytes are below (see `encode/queue.rs`).
            x >= 0x10
                && plain
                && !x.is_ascii_whitespace()
                && list.len() <= FUSED_MAX_SPECIALS
                && list.iter().all(|(s, _)| s.len() >= 2 && s.as_bytes()[0] == x && !s.bytes().any(|c| c == b' ' || c == b'\n'))
        });
        let mut second = [false; 256];
        for (s, _) in &list {
            if let Some(&c) = s.as_bytes().get(1) {
                second[c as usize] = true;
            }
        }
        let max_len = list.iter().zip(&tokens).filter(|(_, t)| t.special).map(|((s, _), _)| s.len()).max().unwrap_or(0);
        Ok(Specials { list, tokens, inner, any_edges, all, overlapping, subsets: Mutex::new(Vec::new()), max_len, lead, second })
    }

    /// Specials given by their text only (training): ids are their positions.
    pub fn from_texts(texts: &[String]) -> Result<Self, String> {
        Self::new(texts.iter().enumerate().map(|(i, s)| (s.clone(), i as u32)).collect())
    }

    /// `(text, id)`, sorted by id.
    pub fn list(&self) -> &[(String, u32)] {
        &self.list
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn id(&self, s: &str) -> Option<u32> {
        self.list.iter().find(|(t, _)| t == s).map(|(_, id)| *id)
    }

    /// The automaton of the tokens matched in the raw text with `allowed` specials: the
    /// allowed specials and every non-special token (None when there is none).
    pub fn automaton(&self, allowed: &SpecialSet) -> Option<Arc<Automaton>> {
        let all = self.all.as_ref()?;
        match allowed {
            SpecialSet::All => return Some(all.clone()),
            SpecialSet::None if all.index.iter().all(|&i| self.tokens[i].special) => return None,
            _ => {}
        }
        let index: Vec<usize> = all.index.iter().copied().filter(|&i| !self.tokens[i].special || allowed.contains(&self.list[i].0)).collect();
        self.subset(index, all, |ix| Automaton::build(&self.list, ix))
    }

    /// The automaton of the normalized group (see [`Self::with_tokens`]) with `allowed`
    /// specials, matched in normalized text; None when there is none.
    pub fn inner_automaton(&self, allowed: &SpecialSet) -> Option<Arc<Automaton>> {
        let ix: Vec<usize> = (0..self.inner.len()).filter(|&k| {
            let t = &self.tokens[self.inner[k].1];
            !t.special || allowed.contains(&t.content)
        }).collect();
        if ix.is_empty() {
            return None;
        }
        // Keyed apart from the raw group's subsets by an offset.
        let key: Vec<usize> = ix.iter().map(|&k| self.list.len() + self.inner[k].1).collect();
        let build = |key: Vec<usize>| {
            let pats: Vec<&str> = ix.iter().map(|&k| self.inner[k].0.as_str()).collect();
            Automaton::of(&pats, key.iter().map(|&i| i - self.list.len()).collect()).map(|mut a| {
                a.index = key;
                a
            })
        };
        self.kept_or_build(key, build)
    }

    /// `(id, normalized content)` of the normalized group: what such a token decodes to (as
    /// `tokenizers`: it stands for that text in the normalized string).
    pub fn normalized_forms(&self) -> impl Iterator<Item = (u32, &str)> + '_ {
        self.inner.iter().map(|(n, i)| (self.list[*i].1, n.as_str()))
    }

    /// Whether some tokens are matched in the normalized text (a second pass).
    pub fn has_inner(&self) -> bool {
        !self.inner.is_empty()
    }

    /// Whether nothing is matched in the raw text with `allowed`.
    pub fn matches_none(&self, allowed: &SpecialSet) -> bool {
        match &self.all {
            None => true,
            Some(all) => allowed.is_empty() && all.index.iter().all(|&i| self.tokens[i].special),
        }
    }

    /// Every token with its flags, sorted by id.
    pub fn tokens(&self) -> &[AddedToken] {
        &self.tokens
    }

    fn subset(&self, index: Vec<usize>, all: &Arc<Automaton>, build: impl FnOnce(Vec<usize>) -> Result<Automaton, String>) -> Option<Arc<Automaton>> {
        if index.is_empty() {
            return None;
        }
        if index == all.index {
            return Some(all.clone());
        }
        self.kept_or_build(index, build)
    }

    /// The kept automaton with this index, or a new one (then kept, the oldest dropped).
    fn kept_or_build(&self, key: Vec<usize>, build: impl FnOnce(Vec<usize>) -> Result<Automaton, String>) -> Option<Arc<Automaton>> {
        // A busy (or poisoned) cache only means building one more.
        let mut kept = self.subsets.try_lock().ok();
        if let Some(a) = kept.as_ref().and_then(|k| k.iter().find(|a| a.index == key).cloned()) {
            return Some(a);
        }
        let a = Arc::new(build(key).ok()?);
        if let Some(k) = kept.as_mut() {
            if k.len() >= SUBSETS_KEPT {
                k.remove(0);
            }
            k.push(a.clone());
        }
        Some(a)
    }

    /// Splits `text` by the rule, appending its items (ranges offset by `base`).
    pub fn split(&self, text: &str, allowed: &SpecialSet, base: usize, items: &mut Vec<Item>) {
        self.split_with(self.automaton(allowed).as_deref(), text, base, items)
    }

    /// [`Self::split`] with the automaton of the allowed set already in hand (a batch looks it
    /// up once, not per document).
    pub fn split_with(&self, auto: Option<&Automaton>, text: &str, base: usize, items: &mut Vec<Item>) {
        let mut last = 0;
        if let Some(a) = auto {
            let inner = a.index.first().is_some_and(|&i| i >= self.list.len());
            for (mut s, mut e, k) in a.find_iter(text.as_bytes(), 0) {
                let k = if inner { k - self.list.len() } else { k };
                if self.any_edges && !self.edges(text, k, last, &mut s, &mut e) {
                    continue;
                }
                if s > last {
                    items.push(Item::Text(base + last, base + s));
                }
                items.push(Item::Special(self.list[k].1, base + s.max(last), base + e));
                last = e.max(last);
            }
        }
        if last < text.len() {
            items.push(Item::Text(base + last, base + text.len()));
        }
    }

    /// `tokenizers`' edge rules for the match `s..e` of token `k` after a split at `last`:
    /// false if `single_word` refuses it; else `lstrip`/`rstrip` widen it over whitespace.
    fn edges(&self, text: &str, k: usize, last: usize, s: &mut usize, e: &mut usize) -> bool {
        let t = &self.tokens[k];
        if t.single_word {
            let before = text[..*s].chars().next_back().is_some_and(is_word_char);
            let after = text[*e..].chars().next().is_some_and(is_word_char);
            if before || after {
                return false;
            }
        }
        if t.lstrip {
            let ws: usize = text[..*s].chars().rev().take_while(|c| c.is_whitespace()).map(char::len_utf8).sum();
            *s = (*s - ws).max(last);
        }
        if t.rstrip {
            *e += text[*e..].chars().take_while(|c| c.is_whitespace()).map(char::len_utf8).sum::<usize>();
        }
        true
    }

    /// Calls `f` on each stretch of ordinary text between the specials (all allowed).
    pub fn for_each_text(&self, text: &str, mut f: impl FnMut(&str) -> Result<(), String>) -> Result<(), String> {
        let mut last = 0;
        if let Some(a) = &self.all {
            for (s, e, _) in a.find_iter(text.as_bytes(), 0) {
                f(&text[last..s])?;
                last = e;
            }
        }
        f(&text[last..])
    }

    /// Whether a special token straddles byte `p` of `b` (starts before it and ends after it).
    pub fn straddles(&self, b: &[u8], p: usize) -> bool {
        self.list.iter().any(|(s, _)| {
            let s = s.as_bytes();
            (1..s.len()).any(|k| p >= k && p - k + s.len() <= b.len() && &b[p - k..p - k + s.len()] == s)
        })
    }

    /// The special found in `text` that is neither allowed nor left out of the check, if any.
    /// `disallowed = None` means every special that is not allowed (tiktoken's default); a list
    /// is searched literally, like tiktoken's regex of the given strings.
    pub fn first_disallowed(&self, text: &str, allowed: &SpecialSet, disallowed: &Option<SpecialSet>) -> Option<String> {
        match disallowed {
            None if matches!(allowed, SpecialSet::All) => None,
            None => self.leftmost(text, |s| !allowed.contains(s)),
            Some(SpecialSet::None) => None,
            // Every special, even allowed ones (as tiktoken).
            Some(SpecialSet::All) => self.leftmost(text, |_| true),
            Some(SpecialSet::Some(list)) => list
                .iter()
                .filter(|s| !s.is_empty())
                .filter_map(|s| text.find(s.as_str()).map(|p| (p, s.len(), s)))
                .min_by_key(|&(p, l, _)| (p, l))
                .map(|(_, _, s)| s.clone()),
        }
    }

    /// The special (among those `keep` accepts; never a non-special token) that starts first in `text`, the shorter of two
    /// that start at one byte. The overlapping search gives matches by their end, so one that
    /// starts earlier (`<<x>>` around `<x>`) may come later: it goes on until none can start
    /// earlier.
    fn leftmost(&self, text: &str, keep: impl Fn(&str) -> bool) -> Option<String> {
        let (ac, index) = self.overlapping.as_ref()?;
        let mut best: Option<(usize, usize, usize)> = None; // (start, len, index)
        for m in ac.find_overlapping_iter(text) {
            if let Some((start, _, _)) = best {
                if m.end() > start + self.max_len {
                    break;
                }
            }
            let k = index[m.pattern().as_usize()];
            if keep(&self.list[k].0) && best.is_none_or(|(s, l, _)| (m.start(), m.len()) < (s, l)) {
                best = Some((m.start(), m.len(), k));
            }
        }
        best.map(|(_, _, k)| self.list[k].0.clone())
    }

    /// The byte every special starts with, when the disallowed check may run inside the
    /// encoder's scan: at most [`FUSED_MAX_SPECIALS`] specials of 2+ bytes, one lead byte (not
    /// whitespace, at least 0x10), no space or newline in any (a batch's cuts, made at a space
    /// or after a newline, then never split one).
    pub fn fused_lead(&self) -> Option<u8> {
        self.lead
    }

    /// The shortest special that starts at `pos` of `b`, if any (its index in the list). The
    /// byte after the lead rules most places out before any comparison.
    #[inline]
    pub fn shortest_at(&self, b: &[u8], pos: usize) -> Option<usize> {
        match b.get(pos + 1) {
            Some(&c) if self.second[c as usize] => {}
            _ => return None,
        }
        let rest = &b[pos..];
        (0..self.list.len()).filter(|&k| rest.starts_with(self.list[k].0.as_bytes())).min_by_key(|&k| self.list[k].0.len())
    }
}

/// `\w` as the `regex` crate (and so `tokenizers`' `single_word`) defines it: alphabetic,
/// marks, decimal digits, connector punctuation and the joiners.
pub fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    regex_syntax::is_word_character(c)
}

/// The error for a disallowed special token found in a text (tiktoken's wording).
pub fn disallowed_error(s: &str) -> String {
    format!(
        "Encountered text corresponding to disallowed special token {s:?}. Pass it in \
         allowed_special to encode it as a special token, or in disallowed_special=() \
         (or use encode_ordinary) to encode it as ordinary text."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(names: &[&str]) -> Specials {
        Specials::new(names.iter().enumerate().map(|(i, s)| (s.to_string(), 1000 + i as u32)).collect()).unwrap()
    }

    fn split(s: &Specials, text: &str, allowed: &SpecialSet) -> Vec<String> {
        let mut items = Vec::new();
        s.split(text, allowed, 0, &mut items);
        items
            .iter()
            .map(|it| match *it {
                Item::Text(a, b) => text[a..b].to_string(),
                Item::Special(_, a, b) => format!("[{}]", &text[a..b]),
            })
            .collect()
    }

    #[test]
    fn a_disallowed_special_never_hides_an_allowed_one() {
        let s = sp(&["<a>", "<a><b>"]);
        let only_a = SpecialSet::Some(vec!["<a>".into()]);
        assert_eq!(split(&s, "x<a><b>y", &only_a), ["x", "[<a>]", "<b>y"]);
        assert_eq!(split(&s, "x<a><b>y", &SpecialSet::All), ["x", "[<a><b>]", "y"]);
        assert_eq!(split(&s, "x<a><b>y", &SpecialSet::None), ["x<a><b>y"]);
        let only_ab = SpecialSet::Some(vec!["<a><b>".into()]);
        assert_eq!(split(&s, "<a>x<a><b>", &only_ab), ["<a>x", "[<a><b>]"]);
    }

    #[test]
    fn the_check_names_the_special_that_starts_first() {
        let s = sp(&["<x>", "<<x>>"]);
        assert_eq!(s.first_disallowed("a<<x>>", &SpecialSet::None, &None).as_deref(), Some("<<x>>"));
        let allowed = SpecialSet::Some(vec!["<<x>>".into()]);
        assert_eq!(s.first_disallowed("a<<x>>", &allowed, &None).as_deref(), Some("<x>"));
        assert_eq!(s.first_disallowed("a<<x>>", &SpecialSet::All, &None), None);
    }

    #[test]
    fn cuts_wait_for_longer_specials() {
        let s = Specials::from_texts(&["<s>".to_string(), "<s>>>".to_string()]).unwrap();
        let a = s.automaton(&SpecialSet::All).unwrap();
        // "<s>" near the end might still grow into "<s>>>".
        assert_eq!(a.last_cut(b"ab<s>c"), None);
        assert_eq!(a.last_cut(b"ab<s>cdefg"), Some(5));
        assert_eq!(a.last_cut(b"ab<s>>>cdefgh"), Some(7));
        // A special at the very end leaves nothing to cut off.
        assert_eq!(a.last_cut(b"abcdefgh<s>>>"), None);
        assert_eq!(a.segments("a<s>b<s>>>c"), ["a<s>", "b<s>>>", "c"]);
        assert_eq!(a.segments("abc"), ["abc"]);
        assert!(Specials::from_texts(&[]).unwrap().automaton(&SpecialSet::All).is_none());
    }

    #[test]
    fn bad_lists_are_refused() {
        assert!(Specials::from_texts(&["".to_string()]).is_err());
        assert!(Specials::from_texts(&["<a>".to_string(), "<a>".to_string()]).is_err());
        // Plain specials may share an id (tiktoken's o200k_harmony); tokens with flags may not.
        let shared = Specials::new(vec![("<b>".into(), 5), ("<a>".into(), 5)]).unwrap();
        assert_eq!(shared.list(), &[("<a>".to_string(), 5), ("<b>".to_string(), 5)]);
        let mut edged = AddedToken::special("<b>".into(), 5);
        edged.lstrip = true;
        assert!(Specials::with_tokens(vec![AddedToken::special("<a>".into(), 5), edged], None).is_err());
    }

    #[test]
    fn subset_automata_are_kept_and_reused() {
        let s = sp(&["<a>", "<b>", "<c>"]);
        let ab = SpecialSet::Some(vec!["<a>".into(), "<b>".into()]);
        let x = s.automaton(&ab).unwrap();
        let y = s.automaton(&ab).unwrap();
        assert!(Arc::ptr_eq(&x, &y));
        assert!(Arc::ptr_eq(&s.automaton(&SpecialSet::All).unwrap(), &s.automaton(&SpecialSet::Some(vec!["<a>".into(), "<b>".into(), "<c>".into()])).unwrap()));
    }
}
