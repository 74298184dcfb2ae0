//! Words cut into an encoder's tokens by its merges alone (each word one piece, no
//! pre-tokenization), on all cores: extending a vocabulary cuts the new corpus's words so
//! (`hf_bpe/training/extending.py`), superword training its spans ([`spans`]), the viz page a
//! word with its first merges.

use rayon::prelude::*;

use super::Encoder;
use crate::counts::rising;
use crate::keys::{pack, pack_in};

pub mod pieces;

/// Words per unit of parallel work.
const RUN: usize = 1 << 14;
/// How far ahead of the span being cut its words' records are asked for (in words), and how
/// many each span asks for (about the words of a span, so the asking keeps pace).
const AHEAD_WORDS: usize = 16;
const ASKED_PER_SPAN: usize = 4;

/// The words of flat `b`/`o` (checked by the caller: `o` rises from 0 to `b.len()`) cut into
/// tokens: `(ids, offsets)`. With `max_rank`, only pairs of lower rank merge (the first
/// `max_rank` merges; tiktoken: tokens of lower rank) and no piece is looked up whole.
pub fn words(enc: &Encoder, b: &[u8], o: &[i64], max_rank: Option<u64>) -> (Vec<u32>, Vec<i64>) {
    let piece = |w: usize| &b[o[w] as usize..o[w + 1] as usize];
    runs(o.len().saturating_sub(1), |a, z| (o[z] - o[a]) as usize / 4, || (), |_, w, ids| match max_rank {
        None => enc.bpe_piece(piece(w), ids),
        Some(limit) => enc.bpe_piece_upto(piece(w), limit, ids),
    })
}

/// [`words`] of superword spans by stage 1's encoder (pattern gpt2, its tokens all trained
/// inside gpt2 pieces), from the spans' words (`crate::count::split`: `words` their flat bytes
/// and offsets, span `i`'s words `span_words[span_ends[i]..span_ends[i + 1]]`): each distinct
/// word is cut once, and a span is cut at the word boundaries no stage-1 merge can cross
/// ([`may_join`]): a part of one word is that word's tokens, a longer part (words a merge may
/// join) merges as one piece, and so does a span given no words. Equal to [`words`]: no merge
/// crosses a cut, so the merges on either side never meet
/// ([log](../../docs/performance.md#superword-training)).
///
/// `spans`: the spans' own flat bytes and offsets, to check the words against (a span its words
/// do not spell is an error; with `check` every word is compared, else only their lengths,
/// enough to stay in bounds, for words `split` just gave: the full comparison costs a fifth of
/// the call). Without them a span is its words (`Counter::take_split` gives no span bytes), and
/// one given no words is empty.
pub fn spans(enc: &Encoder, spans: Option<(&[u8], &[i64])>, words: (&[u8], &[i64]), span_words: &[u32], span_ends: &[i64], check: bool) -> Result<(Vec<u32>, Vec<i64>), String> {
    if spans.is_some_and(|(_, o)| span_ends.len() != o.len()) {
        return Err("segment_spans: span_ends must rise from 0 to len(span_words), one per span and one more".into());
    }
    let wt = WordTokens::new(enc, words, span_words, span_ends, spans.is_some())?;
    wt.spans(spans, span_words, span_ends, check)
}

/// Stage 1's tokens of each word of a split, cut once, and what cutting spans at their words
/// reads of each word (see [`spans`]).
pub(super) struct WordTokens<'a> {
    enc: &'a Encoder,
    wb: &'a [u8],
    wo: &'a [i64],
    tok: Vec<u32>,
    ends: Vec<i64>,
    rec: Vec<W>,
    /// With span bytes to check against: each word's bytes packed when it has fewer than 16
    /// (zero for a longer one).
    keys: Vec<u128>,
}

/// Per word, in 8 bytes: its one token, or where its tokens start (`n` of them; 0: too many
/// to say here, see `ends`), its first byte and what [`may_join`] reads of its last char
/// ([`last_of`]).
#[derive(Clone, Copy)]
struct W {
    tok: u32,
    n: u16,
    first: u8,
    last: u8,
}

impl<'a> WordTokens<'a> {
    /// The words' tokens by `enc` (checked: an encoder of the gpt2 pattern whose tokens come
    /// from its merges, word offsets rising, every span's word a word given); `packed`: span
    /// bytes will be checked against the words.
    pub(super) fn new(enc: &'a Encoder, words: (&'a [u8], &'a [i64]), span_words: &[u32], span_ends: &[i64], packed: bool) -> Result<Self, String> {
        if enc.pattern_spec() != "gpt2" || enc.is_generic() {
            return Err(format!("segment_spans needs an encoder of the gpt2 pattern, not {:?}", enc.pattern_spec()));
        }
        if enc.is_tiktoken() || enc.pipeline.ignore_merges {
            // (A word looked up whole may differ from its merge inside the span.)
            return Err("segment_spans needs an encoder whose tokens come from its merges (not tiktoken ranks or ignore_merges)".into());
        }
        let (wb, wo) = words;
        let n = wo.len().saturating_sub(1);
        if !rising(wo, wb.len()) || wo.windows(2).any(|w| w[0] == w[1]) {
            return Err("segment_spans: word offsets must rise from 0 to len(word bytes), every word one byte or more".into());
        }
        if !rising(span_ends, span_words.len()) {
            return Err("segment_spans: span_ends must rise from 0 to len(span_words), one per span and one more".into());
        }
        if let Some(&bad) = span_words.iter().find(|&&w| w as usize >= n) {
            return Err(format!("segment_spans: word id {bad} is not below the {n} words given"));
        }
        let (tok, ends) = self::words(enc, wb, wo, None);
        let far = tok.len() > u32::MAX as usize;
        let word = |w: usize| &wb[wo[w] as usize..wo[w + 1] as usize];
        let rec: Vec<W> = (0..n)
            .map(|w| {
                let (s, e) = (ends[w] as usize, ends[w + 1] as usize);
                let n = if far || e - s > u16::MAX as usize { 0 } else { (e - s) as u16 };
                let x = word(w);
                W { tok: if n == 1 { tok[s] } else { s as u32 }, n, first: x[0], last: last_of(x) }
            })
            .collect();
        let keys = match packed {
            true => (0..n).map(|w| if word(w).len() < 16 { pack(word(w)) } else { 0 }).collect(),
            false => Vec::new(),
        };
        Ok(WordTokens { enc, wb, wo, tok, ends, rec, keys })
    }

    /// Word `w`'s bytes.
    fn word(&self, w: usize) -> &'a [u8] {
        &self.wb[self.wo[w] as usize..self.wo[w + 1] as usize]
    }

    /// Word `w`'s tokens.
    pub(super) fn tokens(&self, w: usize) -> &[u32] {
        let r = &self.rec[w];
        match r.n {
            1 => std::slice::from_ref(&r.tok),
            0 => &self.tok[self.ends[w] as usize..self.ends[w + 1] as usize],
            n => &self.tok[r.tok as usize..r.tok as usize + n as usize],
        }
    }

    /// Asks for word `w`'s record (a hint: a record is a cache miss).
    #[inline(always)]
    fn prefetch(&self, w: u32) {
        crate::memory::prefetch(self.rec.as_ptr().wrapping_add(w as usize));
    }

    /// The spans of [`spans`] cut into tokens (`span_words`, `span_ends` checked by [`new`](Self::new)).
    pub(super) fn spans(&self, spans: Option<(&[u8], &[i64])>, span_words: &[u32], span_ends: &[i64], check: bool) -> Result<(Vec<u32>, Vec<i64>), String> {
        let span_of = |i: usize| spans.map(|(b, o)| &b[o[i] as usize..o[i + 1] as usize]);
        let hint = |a: usize, z: usize| match spans {
            Some((_, o)) => (o[z] - o[a]) as usize / 4,
            None => (span_ends[z] - span_ends[a]) as usize * 5 / 4,
        };
        // The first span whose words do not spell it (cutting it at them would be wrong, or out of
        // bounds): checked as each span is cut (a short word as its packed key; only the lengths
        // without `check`), the error given after.
        let bad = std::sync::atomic::AtomicUsize::new(usize::MAX);
        let out = runs(span_ends.len() - 1, hint, Vec::<u8>::new, |joined, i, ids| {
            let ws = &span_words[span_ends[i] as usize..span_ends[i + 1] as usize];
            // The records of the words a few spans ahead, asked for now (a record is a cache miss).
            let ahead = &span_words[span_ends[i + 1] as usize..];
            ahead.iter().skip(AHEAD_WORDS).take(ASKED_PER_SPAN).for_each(|&w| self.prefetch(w));
            if !self.span(ws, span_of(i), check, joined, ids) {
                bad.fetch_min(i, std::sync::atomic::Ordering::Relaxed);
            }
        });
        match bad.into_inner() {
            usize::MAX => Ok(out),
            i => Err(format!("segment_spans: the words given for span {i} do not spell it")),
        }
    }

    /// One span of words `ws` (its bytes `span`, if given) cut into tokens pushed onto `ids`
    /// (`joined`: scratch); false if its words do not spell it.
    pub(super) fn span(&self, ws: &[u32], span: Option<&[u8]>, check: bool, joined: &mut Vec<u8>, ids: &mut Vec<u32>) -> bool {
        if ws.is_empty() {
            if let Some(span) = span {
                self.enc.bpe_piece(span, ids);
            }
            return true;
        }
        let len = |w: usize| match self.keys[w] {
            0 => self.word(w).len(),
            k => (k >> 120) as usize,
        };
        // One walk over the words: each checked against the span as it comes, and cut into runs
        // joined where a merge may cross, each a word's tokens or merged whole.
        let (mut k, mut from, mut at, mut last) = (0, 0, 0, 0u8);
        let mut flush = |k: usize, j: usize, from: usize, at: usize, ids: &mut Vec<u32>| {
            if j == k + 1 {
                match self.rec[ws[k] as usize] {
                    W { n: 1, tok, .. } => ids.push(tok),
                    _ => ids.extend_from_slice(self.tokens(ws[k] as usize)),
                }
            } else if let Some(span) = span {
                self.enc.bpe_piece(&span[from..at], ids);
            } else {
                joined.clear();
                ws[k..j].iter().for_each(|&w| joined.extend_from_slice(self.word(w as usize)));
                self.enc.bpe_piece(joined, ids);
            }
        };
        for (j, &w) in ws.iter().enumerate() {
            let r = self.rec[w as usize];
            let mut e = at;
            if let Some(span) = span {
                let w = w as usize;
                e = at + len(w);
                let keys = &self.keys;
                let spelled = e <= span.len() && (!check || if keys[w] != 0 { pack_in(span, at, e) == keys[w] } else { span[at..e] == *self.word(w) });
                if !spelled {
                    return false;
                }
            }
            if j > 0 && !may_join(last, r.first) {
                flush(k, j, from, at, ids);
                (k, from) = (j, at);
            }
            (at, last) = (e, r.last);
        }
        if span.is_some_and(|span| at != span.len()) {
            return false;
        }
        flush(k, ws.len(), from, at, ids);
        true
    }
}

/// Items `0..n` cut into ids by `cut(state, index, ids)`, in runs of [`RUN`] items on all cores
/// (a `state()` per run; `hint(a, z)`: about how many ids items `a..z` make), joined in order:
/// `(ids, offsets)`.
pub(super) fn runs<S>(n: usize, hint: impl Fn(usize, usize) -> usize + Sync, state: impl Fn() -> S + Sync, cut: impl Fn(&mut S, usize, &mut Vec<u32>) + Sync) -> (Vec<u32>, Vec<i64>) {
    let runs: Vec<(usize, usize)> = (0..n).step_by(RUN).map(|a| (a, (a + RUN).min(n))).collect();
    // (Without a pool, everything runs here: never on rayon's global pool.)
    let pool = crate::pool::get(crate::pool::default_threads());
    let run = |&(a, z): &(usize, usize)| {
        let mut st = state();
        // (Few runs grow their array past the hint.)
        let mut ids = Vec::with_capacity(hint(a, z) + 64);
        let mut ends = Vec::with_capacity(z - a);
        for w in a..z {
            cut(&mut st, w, &mut ids);
            ends.push(ids.len() as i64);
        }
        (ids, ends)
    };
    let parts: Vec<(Vec<u32>, Vec<i64>)> = match &pool {
        Some(p) => p.install(|| runs.par_iter().map(run).collect()),
        None => runs.iter().map(run).collect(),
    };
    // Joined on all cores, each part copied into its stretch and freed (`pool::concat`): an
    // item's end among all ids is its part's first id plus its end there.
    let mut bases = vec![0i64];
    let (mut ids, mut ends) = (Vec::with_capacity(parts.len()), vec![vec![0i64]]);
    for (i, e) in parts {
        bases.push(bases[bases.len() - 1] + i.len() as i64);
        ids.push(i);
        ends.push(e);
    }
    let par = pool.is_some();
    crate::pool::install(pool.as_deref(), || {
        let offs = crate::pool::concat(par, ends, |k, e| if k == 0 { 0 } else { bases[k - 1] + e });
        (crate::pool::concat(par, ids, |_, v| v), offs)
    })
}

/// [`last_of`] a non-ASCII char that is not whitespace, and one that is (or bytes that are not
/// UTF-8).
const NOT_SPACE: u8 = 0x80;
const SPACE: u8 = 0xFF;

/// What [`may_join`] reads of a word's last char: its byte if ASCII, else [`NOT_SPACE`] or
/// [`SPACE`] (whitespace to the scanners' Unicode table).
fn last_of(word: &[u8]) -> u8 {
    let b = word[word.len() - 1];
    if b < 0x80 {
        return b;
    }
    let start = (word.len().saturating_sub(4)..word.len()).rev().find(|&i| word[i] & 0xC0 != 0x80);
    match start.and_then(|i| std::str::from_utf8(&word[i..]).ok()).and_then(|s| s.chars().next()) {
        Some(c) if crate::unicode_tables::class_of(c as u32) & crate::unicode_tables::WS == 0 => NOT_SPACE,
        _ => SPACE,
    }
}

/// Whether a stage-1 merge may join a gpt2 piece ending in `last` ([`last_of`]) to the byte
/// `first` starting the next one inside a span. Such a merge makes a token that holds both,
/// and every stage-1 token lies inside some gpt2 piece, whose bytes are one class (ASCII
/// letters, digits, or punctuation and controls), a leading space, whitespace only, or a
/// contraction (`'` then letters). So a space after a char that is not whitespace never joins
/// (only a whitespace piece holds a space past its start), nor does an ASCII letter, digit or
/// punctuation mark followed by a byte of another class, but for `'` before a letter; anything
/// else (non-ASCII, whitespace, controls) is taken as joinable.
fn may_join(last: u8, first: u8) -> bool {
    #[derive(PartialEq)]
    enum C {
        Letter,
        Digit,
        Punct,
        Other,
    }
    let class = |b: u8| match b {
        b'a'..=b'z' | b'A'..=b'Z' => C::Letter,
        b'0'..=b'9' => C::Digit,
        0x21..=0x7e => C::Punct,
        _ => C::Other,
    };
    // (Every ASCII byte any `\s` matches, and more: only joinable is safe.)
    if first == b' ' && last != SPACE && !matches!(last, 0x09..=0x0d | 0x1c..=0x20) {
        return false;
    }
    let (l, f) = (class(last), class(first));
    if l == C::Other {
        return true;
    }
    f == C::Other || l == f || (last == b'\'' && f == C::Letter)
}

#[cfg(test)]
mod tests {
    use super::{last_of, may_join, NOT_SPACE, SPACE};

    #[test]
    fn boundaries_that_no_gpt2_piece_holds_never_join() {
        let (e_acute, ideographic_space) = (last_of("caf\u{e9}".as_bytes()), last_of(" \u{3000}".as_bytes()));
        assert_eq!((e_acute, ideographic_space, last_of(b"ab\xC3"), last_of(b"a\x01")), (NOT_SPACE, SPACE, SPACE, 1));
        for (last, first) in [(b'd', b' '), (b'd', b','), (b',', b'a'), (b'3', b'a'), (b'a', b'3'), (b'.', b' '), (e_acute, b' '), (1, b' ')] {
            assert!(!may_join(last, first), "{:?}", (last as char, first as char));
        }
        for (last, first) in [(b'\'', b's'), (b's', b'u'), (b',', b'.'), (b'1', b'2'), (ideographic_space, b' '), (b'a', 0xC3), (b'\t', b' '), (e_acute, b'a'), (0x1c, b' ')] {
            assert!(may_join(last, first), "{:?}", (last, first));
        }
    }
}
