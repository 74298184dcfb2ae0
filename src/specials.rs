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
//!   overlapping automaton over every special for the check. The encoder's check fused into
//!   the scan (`encode/queue.rs`) asks [`Specials::fused_lead`] and [`Specials::shortest_at`].

use std::sync::{Arc, Mutex};

use aho_corasick::{AhoCorasick, Input, MatchKind};

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
        let ac = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&pats).map_err(|e| e.to_string())?;
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
    all: Option<Arc<Automaton>>,
    overlapping: Option<AhoCorasick>,
    subsets: Mutex<Vec<Arc<Automaton>>>,
    max_len: usize,
    /// The byte every special starts with, when the check may be fused into the scan (see
    /// [`Self::fused_lead`]), and the bytes that follow it in some special.
    lead: Option<u8>,
    second: [bool; 256],
}

impl Specials {
    /// Checks the list: no empty special, no text or id twice.
    pub fn new(mut list: Vec<(String, u32)>) -> Result<Self, String> {
        list.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        if let Some((_, id)) = list.iter().find(|(s, _)| s.is_empty()) {
            return Err(format!("special token with id {id} is the empty string"));
        }
        if let Some(w) = list.windows(2).find(|w| w[0].1 == w[1].1) {
            return Err(format!("special tokens {:?} and {:?} share the id {}", w[0].0, w[1].0, w[0].1));
        }
        let mut texts: Vec<&str> = list.iter().map(|(s, _)| s.as_str()).collect();
        texts.sort_unstable();
        if let Some(w) = texts.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("special token {:?} is listed twice", w[0]));
        }
        let (all, overlapping) = if list.is_empty() {
            (None, None)
        } else {
            let pats: Vec<&str> = list.iter().map(|(s, _)| s.as_str()).collect();
            let o = AhoCorasick::builder().match_kind(MatchKind::Standard).build(&pats).map_err(|e| e.to_string())?;
            (Some(Arc::new(Automaton::build(&list, (0..list.len()).collect())?)), Some(o))
        };
        let lead = list.first().and_then(|(s, _)| s.as_bytes().first().copied()).filter(|&x| {
            // >= 0x10: a packed key's padding and length bytes are below (see `encode/queue.rs`).
            x >= 0x10
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
        let max_len = list.iter().map(|(s, _)| s.len()).max().unwrap_or(0);
        Ok(Specials { list, all, overlapping, subsets: Mutex::new(Vec::new()), max_len, lead, second })
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

    /// The automaton of the `allowed` specials (None when none is allowed).
    pub fn automaton(&self, allowed: &SpecialSet) -> Option<Arc<Automaton>> {
        let all = self.all.as_ref()?;
        let SpecialSet::Some(_) = allowed else {
            return if allowed.is_empty() { None } else { Some(all.clone()) };
        };
        let index: Vec<usize> = (0..self.list.len()).filter(|&i| allowed.contains(&self.list[i].0)).collect();
        if index.is_empty() {
            return None;
        }
        if index.len() == self.list.len() {
            return Some(all.clone());
        }
        // A busy (or poisoned) cache only means building one more.
        let mut kept = self.subsets.try_lock().ok();
        if let Some(a) = kept.as_ref().and_then(|k| k.iter().find(|a| a.index == index).cloned()) {
            return Some(a);
        }
        let a = Arc::new(Automaton::build(&self.list, index).ok()?);
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
            for (s, e, k) in a.find_iter(text.as_bytes(), 0) {
                if s > last {
                    items.push(Item::Text(base + last, base + s));
                }
                items.push(Item::Special(self.list[k].1, base + s, base + e));
                last = e;
            }
        }
        if last < text.len() {
            items.push(Item::Text(base + last, base + text.len()));
        }
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

    /// The special (among those `keep` accepts) that starts first in `text`, the shorter of two
    /// that start at one byte. The overlapping search gives matches by their end, so one that
    /// starts earlier (`<<x>>` around `<x>`) may come later: it goes on until none can start
    /// earlier.
    fn leftmost(&self, text: &str, keep: impl Fn(&str) -> bool) -> Option<String> {
        let ac = self.overlapping.as_ref()?;
        let mut best: Option<(usize, usize, usize)> = None; // (start, len, index)
        for m in ac.find_overlapping_iter(text) {
            if let Some((start, _, _)) = best {
                if m.end() > start + self.max_len {
                    break;
                }
            }
            let k = m.pattern().as_usize();
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
        assert!(Specials::new(vec![("<a>".into(), 5), ("<b>".into(), 5)]).is_err());
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
