//! Span counts split into word counts and, for each span, the ids of its words: superword
//! training counts spans of several words once (`hf_bpe/training/superword.py`); stage 1 trains
//! on the words (each piece of the word pattern counted with its span's count: exact where every
//! span boundary is a piece boundary, as the span patterns are built), and stage 2 cuts each span
//! into stage 1's tokens from its words' (`crate::encode::segment::spans`) instead of splitting
//! and looking the words up again ([log](../../docs/performance.md#superword-training)).
//!
//! Each thread splits a contiguous share of the spans with its own table (packed keys for words
//! of at most 15 bytes, byte slices of the spans for longer ones) and local ids; the tables are
//! joined once, the words sorted by bytes, and the local ids rewritten to the sorted ones.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::counts::{rising, Flat, FlatRef};
use crate::keys::{mix128, pack_in};
use crate::pretok::Pattern;

/// The words of some span counts, and each span's words.
pub struct Split {
    /// Distinct words of the spans of positive count, sorted by bytes (the flat form of word
    /// counts, as counting the text with the word pattern gives).
    pub words: Flat,
    /// Span `i`'s words are `span_words[span_ends[i]..span_ends[i + 1]]`, ids into `words` (none
    /// for a span of count 0).
    pub span_words: Vec<u32>,
    pub span_ends: Vec<i64>,
}

/// Most distinct words (ids are `u32`; a share stops giving new ids past it and fails).
const MAX_WORDS: usize = u32::MAX as usize - 1;

/// How many short pieces the id lookups trail the scanner by (their slots prefetched).
const QUEUE: usize = 32;

/// A short word's slot: its packed key (0: empty), id and count.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Slot {
    key: u128,
    id: u32,
    count: u64,
}

/// One thread's share: its distinct words (where they first occur in the span bytes) with
/// local ids, and its spans' words by local id. Short words sit in an open-addressing table
/// (linear probing, grown at load 1/2) looked up [`QUEUE`] pieces behind the scanner.
struct Share<'a> {
    slots: Vec<Slot>,
    shift: u32,
    short: usize,
    long: FxHashMap<&'a [u8], (u32, u64)>,
    at: Vec<(usize, usize)>,
    ids: Vec<u32>,
    ends: Vec<i64>,
    /// (key, start, end, index in `ids`, count) of the queued pieces.
    queue: Vec<(u128, usize, usize, usize, u64)>,
}

impl<'a> Share<'a> {
    /// Splits spans `a..z`.
    fn split(spans: FlatRef<'a>, pattern: &Pattern, a: usize, z: usize, utf8: bool) -> Result<Self, String> {
        let mut sh = Share {
            slots: vec![Slot::default(); 1 << 12],
            shift: 64 - 12,
            short: 0,
            long: FxHashMap::default(),
            at: Vec::new(),
            ids: Vec::with_capacity((spans.offsets[z] - spans.offsets[a]) as usize / 5),
            ends: Vec::with_capacity(z - a),
            queue: Vec::with_capacity(QUEUE),
        };
        let b = spans.bytes;
        for i in a..z {
            let n = spans.counts[i];
            if n > 0 {
                let base = spans.offsets[i] as usize;
                let w = spans.word(i);
                // SAFETY: checked by the caller when `utf8` (the bytes are UTF-8 and every span
                // starts and ends on a character boundary).
                let text = if utf8 {
                    unsafe { std::str::from_utf8_unchecked(w) }
                } else {
                    std::str::from_utf8(w).map_err(|e| {
                        format!("span {i} ({:?}) is not UTF-8 ({e}): it cannot be split into words", String::from_utf8_lossy(w))
                    })?
                };
                pattern.for_each_piece(text, |s, e| sh.add(b, base + s, base + e, n))?;
            }
            sh.ends.push(sh.ids.len() as i64);
        }
        sh.drain();
        if sh.at.len() > MAX_WORDS {
            return Err(format!("split_spans: more than {MAX_WORDS} distinct words"));
        }
        Ok(sh)
    }

    #[inline(always)]
    fn home(&self, key: u128) -> usize {
        (mix128(key) >> self.shift) as usize
    }

    /// One occurrence of the word `b[s..e]` in a span of count `n` (its id written when the
    /// queue is drained).
    #[inline(always)]
    fn add(&mut self, b: &'a [u8], s: usize, e: usize, n: u64) {
        if e - s > 15 {
            let next = self.at.len().min(MAX_WORDS) as u32;
            let v = self.long.entry(&b[s..e]).or_insert((next, 0));
            v.1 = v.1.saturating_add(n);
            let id = v.0;
            if id == next && self.at.len() <= MAX_WORDS {
                self.at.push((s, e));
            }
            self.ids.push(id);
            return;
        }
        let key = pack_in(b, s, e);
        if (self.short + self.queue.len() + 1) * 2 > self.slots.len() {
            self.drain();
            self.grow();
        }
        let h = self.home(key);
        crate::memory::prefetch(&self.slots[h]);
        self.queue.push((key, s, e, self.ids.len(), n));
        self.ids.push(0);
        if self.queue.len() == QUEUE {
            self.drain();
        }
    }

    /// Looks the queued pieces up, giving new words the next ids.
    fn drain(&mut self) {
        let mask = self.slots.len() - 1;
        for k in 0..self.queue.len() {
            let (key, s, e, out, n) = self.queue[k];
            let mut j = self.home(key);
            let id = loop {
                let slot = &mut self.slots[j];
                if slot.key == key {
                    slot.count = slot.count.saturating_add(n);
                    break slot.id;
                }
                if slot.key == 0 {
                    let id = self.at.len().min(MAX_WORDS) as u32;
                    *slot = Slot { key, id, count: n };
                    if self.at.len() <= MAX_WORDS {
                        self.at.push((s, e));
                    }
                    self.short += 1;
                    break id;
                }
                j = (j + 1) & mask;
            };
            self.ids[out] = id;
        }
        self.queue.clear();
    }

    /// Doubles the short table.
    fn grow(&mut self) {
        let cap = 2 * self.slots.len();
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); cap]);
        self.shift -= 1;
        let mask = self.slots.len() - 1;
        for slot in old.into_iter().filter(|s| s.key != 0) {
            let mut j = self.home(slot.key);
            while self.slots[j].key != 0 {
                j = (j + 1) & mask;
            }
            self.slots[j] = slot;
        }
    }

    /// Each local id's count.
    fn counts(&self) -> Vec<u64> {
        let mut c = vec![0u64; self.at.len()];
        for slot in self.slots.iter().filter(|s| s.key != 0) {
            c[slot.id as usize] = slot.count;
        }
        for &(id, n) in self.long.values() {
            c[id as usize] = n;
        }
        c
    }
}

/// The words of `spans` under `pattern` (see [`Split`]). A span that is not UTF-8 is an error
/// naming it.
pub fn split(spans: FlatRef<'_>, pattern: &Pattern) -> Result<Split, String> {
    if spans.offsets.len() != spans.counts.len() + 1 || !rising(spans.offsets, spans.bytes.len()) {
        return Err("split_spans: offsets must rise from 0 to len(bytes), one more than counts".into());
    }
    // (Without a pool, everything runs here: never on rayon's global pool.)
    let pool = crate::pool::get(crate::pool::default_threads());
    let parts = pool.as_ref().map_or(1, |p| p.current_num_threads()).max(1);
    let len = spans.len();
    // Checked once for all spans where it can be (else span by span, to name the one).
    let utf8 = std::str::from_utf8(spans.bytes).is_ok_and(|t| spans.offsets.iter().all(|&o| t.is_char_boundary(o as usize)));
    let cuts: Vec<(usize, usize)> = (0..parts).map(|k| (len * k / parts, len * (k + 1) / parts)).collect();
    let share = |&(a, z): &(usize, usize)| Share::split(spans, pattern, a, z, utf8);
    let shares = match &pool {
        Some(p) => p.install(|| cuts.par_iter().map(share).collect::<Result<Vec<Share>, String>>()),
        None => cuts.iter().map(share).collect(),
    }?;
    let b = spans.bytes;
    // Joined: each distinct word once (first-seen order), then sorted by bytes.
    let mut first: FxHashMap<&[u8], u32> = FxHashMap::default();
    let mut at: Vec<(usize, usize)> = Vec::new();
    let mut counts: Vec<u64> = Vec::new();
    let mut local: Vec<Vec<u32>> = Vec::with_capacity(shares.len());
    for sh in &shares {
        let mut map = Vec::with_capacity(sh.at.len());
        for (&(s, e), c) in sh.at.iter().zip(sh.counts()) {
            let next = at.len().min(MAX_WORDS) as u32;
            let g = *first.entry(&b[s..e]).or_insert(next);
            if g == next && at.len() <= MAX_WORDS {
                at.push((s, e));
                counts.push(0);
            }
            counts[g as usize] = counts[g as usize].saturating_add(c);
            map.push(g);
        }
        local.push(map);
    }
    drop(first);
    if at.len() > MAX_WORDS {
        return Err(format!("split_spans: more than {MAX_WORDS} distinct words"));
    }
    let mut order: Vec<u32> = (0..at.len() as u32).collect();
    let by_bytes = |&x: &u32, &y: &u32| b[at[x as usize].0..at[x as usize].1].cmp(&b[at[y as usize].0..at[y as usize].1]);
    match &pool {
        Some(p) => p.install(|| order.par_sort_unstable_by(by_bytes)),
        None => order.sort_unstable_by(by_bytes),
    }
    let mut rank = vec![0u32; order.len()];
    let mut words = Flat { bytes: Vec::with_capacity(at.iter().map(|&(s, e)| e - s).sum()), offsets: Vec::with_capacity(order.len() + 1), counts: Vec::with_capacity(order.len()) };
    words.offsets.push(0);
    for (r, &g) in order.iter().enumerate() {
        rank[g as usize] = r as u32;
        let (s, e) = at[g as usize];
        words.push(&b[s..e], counts[g as usize]);
    }
    for map in &mut local {
        map.iter_mut().for_each(|g| *g = rank[*g as usize]);
    }
    // Each share's ids rewritten in place, then joined onto the first share's array (grown in
    // place where the allocator can: the ids are the biggest output, ~4 bytes per byte of spans).
    let mut shares = shares;
    let rewrite = |(sh, map): (&mut Share, &Vec<u32>)| sh.ids.iter_mut().for_each(|l| *l = map[*l as usize]);
    match &pool {
        Some(p) => p.install(|| shares.par_iter_mut().zip(&local).for_each(rewrite)),
        None => shares.iter_mut().zip(&local).for_each(rewrite),
    }
    let total: usize = shares.iter().map(|sh| sh.ids.len()).sum();
    let mut span_ends = Vec::with_capacity(len + 1);
    span_ends.push(0i64);
    let mut span_words = Vec::new();
    for mut sh in shares {
        let base = span_words.len() as i64;
        span_ends.extend(sh.ends.iter().map(|e| base + e));
        if span_words.is_empty() {
            span_words = std::mem::take(&mut sh.ids);
            span_words.reserve_exact(total - span_words.len());
        } else {
            span_words.extend_from_slice(&sh.ids);
        }
    }
    Ok(Split { words, span_words, span_ends })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_weigh_their_spans_counts_and_a_span_of_count_zero_has_none() {
        let mut f = Flat { bytes: Vec::new(), offsets: vec![0], counts: Vec::new() };
        let long = "a".repeat(20);
        f.push(long.as_bytes(), 0);
        f.push(b"ab cd", 3);
        f.push(format!("x {long}").as_bytes(), 2);
        f.push(b"ab", 1);
        let out = split(f.as_ref(), &Pattern::from_spec("gpt2").unwrap()).unwrap();
        let got = super::super::tests::rows(&out.words);
        let want: Vec<(Vec<u8>, u64)> = vec![(format!(" {long}").into_bytes(), 2), (b" cd".to_vec(), 3), (b"ab".to_vec(), 4), (b"x".to_vec(), 2)];
        assert_eq!(got, want);
        assert_eq!(out.span_ends, vec![0, 0, 2, 4, 5]);
        assert_eq!(out.span_words, vec![2, 1, 3, 0, 2]);
    }
}
