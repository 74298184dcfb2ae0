//! Span counts split into word counts and, for each span, the ids of its words: superword
//! training counts spans of several words once (`hf_bpe/training/superword.py`); stage 1 trains
//! on the words (each piece of the word pattern counted with its span's count: exact where every
//! span boundary is a piece boundary, as the span patterns are built), and stage 2 cuts each span
//! into stage 1's tokens from its words' (`crate::encode::segment::spans`) instead of splitting
//! and looking the words up again ([log](../../docs/performance.md#superword-training)).
//!
//! The spans come from their flat form ([`split`]) or straight from a counter's tables
//! ([`Counter::take_split`]: the spans are never gathered into bytes of their own, only their
//! words and counts come out). Each thread splits its share of the spans with its own table
//! (packed keys for words of at most 15 bytes, a map for longer ones; each new word's bytes
//! copied once) and local ids; the shares are joined once, the words sorted by bytes, and the
//! local ids rewritten to the sorted ones.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::span_words::Gathering;
use super::{gather, Counter};
use crate::counts::{rising, Flat, FlatRef};
use crate::keys::{mix128, pack_in, unpack_into};
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

/// One thread's share: its distinct words with local ids (their bytes, in id order, in
/// `bytes`), and its spans' words by local id. Short words sit in an open-addressing table
/// (linear probing, grown at load 1/2) looked up [`QUEUE`] pieces behind the scanner.
pub(super) struct Share {
    slots: Vec<Slot>,
    shift: u32,
    short: usize,
    long: FxHashMap<Box<[u8]>, (u32, u64)>,
    bytes: Vec<u8>,
    /// Where each local id's bytes end in `bytes`.
    word_ends: Vec<usize>,
    /// Each local id's hash of its bytes (`tables::hash_bytes`: the same in every share).
    pub(super) hashes: Vec<u64>,
    pub(super) ids: Vec<u32>,
    pub(super) ends: Vec<i64>,
    /// (key, index in `ids`, count) of the queued pieces.
    queue: Vec<(u128, usize, u64)>,
}

impl Default for Share {
    fn default() -> Self {
        Share::new(0, 0)
    }
}

impl Share {
    /// An empty share for about `bytes` bytes of `spans` spans.
    fn new(bytes: usize, spans: usize) -> Self {
        Share {
            slots: vec![Slot::default(); 1 << 12],
            shift: 64 - 12,
            short: 0,
            long: FxHashMap::default(),
            bytes: Vec::new(),
            word_ends: Vec::new(),
            hashes: Vec::new(),
            ids: Vec::with_capacity(bytes / 5),
            ends: Vec::with_capacity(spans),
            queue: Vec::with_capacity(QUEUE),
        }
    }

    /// One span, of count `n` (a span of count 0 has no words).
    #[inline]
    fn span(&mut self, text: &str, n: u64, pattern: &Pattern) -> Result<(), String> {
        if n > 0 {
            let b = text.as_bytes();
            pattern.for_each_piece(text, |s, e| self.add(b, s, e, n))?;
        }
        self.ends.push(self.ids.len() as i64);
        Ok(())
    }

    /// After the last span: the queue drained, the number of words checked.
    pub(super) fn finish(&mut self) -> Result<(), String> {
        self.drain();
        if self.word_ends.len() > MAX_WORDS {
            return Err(format!("split_spans: more than {MAX_WORDS} distinct words"));
        }
        Ok(())
    }

    #[inline(always)]
    fn home(&self, key: u128) -> usize {
        (mix128(key) >> self.shift) as usize
    }

    /// A new word's local id (its bytes kept); past [`MAX_WORDS`], [`finish`](Self::finish) fails.
    #[inline]
    fn new_word(&mut self, w: &[u8]) -> u32 {
        let id = self.word_ends.len().min(MAX_WORDS) as u32;
        if self.word_ends.len() <= MAX_WORDS {
            self.bytes.extend_from_slice(w);
            self.word_ends.push(self.bytes.len());
            self.hashes.push(super::tables::hash_bytes(w));
        }
        id
    }

    /// One occurrence of the word `b[s..e]` in a span of count `n` (its id written when the
    /// queue is drained).
    #[inline(always)]
    pub(super) fn add(&mut self, b: &[u8], s: usize, e: usize, n: u64) {
        if e - s > 15 {
            let id = match self.long.get_mut(&b[s..e]) {
                Some(v) => {
                    v.1 = v.1.saturating_add(n);
                    v.0
                }
                None => {
                    let id = self.new_word(&b[s..e]);
                    self.long.insert(b[s..e].into(), (id, n));
                    id
                }
            };
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
        self.queue.push((key, self.ids.len(), n));
        self.ids.push(0);
        if self.queue.len() == QUEUE {
            self.drain();
        }
    }

    /// Looks the queued pieces up, giving new words the next ids.
    pub(super) fn drain(&mut self) {
        let mask = self.slots.len() - 1;
        let mut buf = [0u8; 16];
        for k in 0..self.queue.len() {
            let (key, out, n) = self.queue[k];
            let mut j = self.home(key);
            let id = loop {
                let slot = &mut self.slots[j];
                if slot.key == key {
                    slot.count = slot.count.saturating_add(n);
                    break slot.id;
                }
                if slot.key == 0 {
                    slot.key = key;
                    slot.count = n;
                    self.short += 1;
                    let id = self.new_word(unpack_into(key, &mut buf));
                    self.slots[j].id = id;
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

    /// Local id `i`'s bytes.
    fn word(&self, i: usize) -> &[u8] {
        &self.bytes[if i == 0 { 0 } else { self.word_ends[i - 1] }..self.word_ends[i]]
    }

    /// Each local id's count.
    fn counts(&self) -> Vec<u64> {
        let mut c = vec![0u64; self.word_ends.len()];
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
    let share = |&(a, z): &(usize, usize)| -> Result<Share, String> {
        let mut sh = Share::new((spans.offsets[z] - spans.offsets[a]) as usize, z - a);
        for i in a..z {
            let w = spans.word(i);
            // SAFETY: checked above when `utf8` (the bytes are UTF-8 and every span starts and
            // ends on a character boundary).
            let text = if utf8 { unsafe { std::str::from_utf8_unchecked(w) } } else { utf8_span(w, Some(i))? };
            sh.span(text, spans.counts[i], pattern)?;
        }
        sh.finish()?;
        Ok(sh)
    };
    match &pool {
        Some(p) => p.install(|| join(cuts.par_iter().map(share).collect::<Result<Vec<Share>, String>>()?, true)),
        None => join(cuts.iter().map(share).collect::<Result<Vec<Share>, String>>()?, false),
    }
}

/// A span's bytes as text, or an error naming the span (and its index `i`, where there is one).
fn utf8_span(w: &[u8], i: Option<usize>) -> Result<&str, String> {
    std::str::from_utf8(w).map_err(|e| {
        let at = i.map_or(String::new(), |i| format!(" {i}"));
        format!("span{at} ({:?}) is not UTF-8 ({e}): it cannot be split into words", String::from_utf8_lossy(w))
    })
}

impl Counter {
    /// The counted spans split by `pattern` (see [`Split`]), with each span's count, straight
    /// from the tables (freed as they are read; the counter is then empty): the spans' order is
    /// the tables' (training does not depend on it), and their bytes are never gathered. A
    /// span that is not UTF-8 is an error naming it. A counter of short spans as words
    /// ([`Counter::split_only`]) has their words already: `pattern` must be their word pattern,
    /// gpt2.
    pub fn take_split(&mut self, pattern: &Pattern) -> Result<(Split, Vec<u64>), String> {
        let (words, spans) = self.take_split_words(pattern, false)?;
        let (span_words, span_ends, counts) = spans.wait()?;
        Ok((Split { words, span_words, span_ends }, counts))
    }

    /// [`take_split`](Self::take_split), the words first: with `background`, a counter of
    /// spans as words ([`Counter::split_only`]) gathers its spans on threads of their own
    /// while the caller goes on (superword training runs stage 1 on the words meanwhile).
    pub fn take_split_words(&mut self, pattern: &Pattern, background: bool) -> Result<(Flat, Gathering), String> {
        let _mapped = crate::memory::MapBigAllocations::new();
        if self.words_of_spans().is_some() {
            if pattern.name() != Some("gpt2") {
                return Err("split_spans: spans counted as words are split by their word pattern, gpt2".into());
            }
            let out = crate::pool::install(self.pool(), || self.words_here(background));
            self.release();
            return out;
        }
        let out = crate::pool::install(self.pool(), || self.split_here(pattern));
        self.release();
        let (s, counts) = out?;
        Ok((s.words, Gathering::Done((s.span_words, s.span_ends, counts))))
    }

    /// [`take_split_words`](Self::take_split_words) of spans counted as words: the threads'
    /// words joined, then their spans, each once, with the words' sorted ids (here, or on
    /// threads of their own with `background`).
    fn words_here(&self, background: bool) -> Result<(Flat, Gathering), String> {
        let par = crate::pool::in_pool();
        let taken: Vec<_> = self.shards.iter().filter_map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).words.take()).collect();
        let done: Result<Vec<_>, String> = if par { taken.into_par_iter().map(|w| w.into_parts()).collect() } else { taken.into_iter().map(|w| w.into_parts()).collect() };
        let (shares, spans): (Vec<Share>, Vec<_>) = done?.into_iter().unzip();
        let (words, maps) = join_words(&shares, par)?;
        drop(shares);
        if background {
            let threads = if par { rayon::current_num_threads().max(1) } else { 1 };
            return Ok((words, Gathering::start(spans, maps, threads)?));
        }
        Ok((words, Gathering::Done(super::span_words::gather(spans, &maps, par))))
    }

    fn split_here(&self, pattern: &Pattern) -> Result<(Split, Vec<u64>), String> {
        let par = crate::pool::in_pool();
        let threads = if par { rayon::current_num_threads().max(1) } else { 1 };
        let mut shards: Vec<_> = self.shards.iter().map(|s| s.lock().unwrap_or_else(|e| e.into_inner())).collect();
        let short = gather::short_words(&mut shards, true, par);
        let out = {
            let (first, rest) = (&shards[0], &shards[1..]);
            let parts: Vec<_> = first.long.part_refs().collect();
            // Each thread a share of the short spans and one of the long tables' parts.
            let share = |k: usize| -> Result<(Share, Vec<u64>), String> {
                let (sa, sz) = (short.len() * k / threads, short.len() * (k + 1) / threads);
                let (pa, pz) = (parts.len() * k / threads, parts.len() * (k + 1) / threads);
                let mut sh = Share::new(0, sz - sa);
                let mut counts = Vec::with_capacity(sz - sa);
                let mut buf = [0u8; 16];
                for e in &short[sa..sz] {
                    let w = unpack_into(e.key().swap_bytes(), &mut buf);
                    sh.span(utf8_span(w, None)?, e.count, pattern)?;
                    counts.push(e.count);
                }
                let mut failed = None;
                for j in pa..pz {
                    gather::part_words(j, &parts[j], rest, |w, n| {
                        if failed.is_none() {
                            if let Err(e) = utf8_span(w, None).and_then(|t| sh.span(t, n, pattern)) {
                                failed = Some(e);
                            }
                            counts.push(n);
                        }
                    });
                }
                if let Some(e) = failed {
                    return Err(e);
                }
                sh.finish()?;
                Ok((sh, counts))
            };
            let shares: Result<Vec<_>, String> = if par { (0..threads).into_par_iter().map(share).collect() } else { (0..threads).map(share).collect() };
            shares
        };
        // The shares own their words: the tables (the spans' bytes) go before the join.
        drop(short);
        shards.iter_mut().for_each(|s| **s = super::Shard::default());
        drop(shards);
        let (shares, counts): (Vec<Share>, Vec<Vec<u64>>) = out?.into_iter().unzip();
        Ok((join(shares, par)?, counts.concat()))
    }
}

/// The shares joined: each distinct word once, sorted by bytes, and the shares' spans one after
/// the other with their ids rewritten (on the current pool's threads when `par`).
fn join(shares: Vec<Share>, par: bool) -> Result<Split, String> {
    let (words, local) = join_words(&shares, par)?;
    // Each share's ids rewritten in place, then joined onto the first share's array (grown in
    // place where the allocator can: the ids are the biggest output, ~4 bytes per byte of spans).
    let mut shares = shares;
    let rewrite = |(sh, map): (&mut Share, &Vec<u32>)| sh.ids.iter_mut().for_each(|l| *l = map[*l as usize]);
    if par {
        shares.par_iter_mut().zip(&local).for_each(rewrite);
    } else {
        shares.iter_mut().zip(&local).for_each(rewrite);
    }
    let total: usize = shares.iter().map(|sh| sh.ids.len()).sum();
    let mut span_ends = Vec::with_capacity(shares.iter().map(|sh| sh.ends.len()).sum::<usize>() + 1);
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

/// The shares' words joined: each distinct word once, sorted by bytes, with its counts summed,
/// and for each share the sorted id of each of its local ids.
pub(super) fn join_words(shares: &[Share], par: bool) -> Result<(Flat, Vec<Vec<u32>>), String> {
    let mut first: FxHashMap<&[u8], u32> = FxHashMap::default();
    let mut words_g: Vec<&[u8]> = Vec::new();
    let mut counts: Vec<u64> = Vec::new();
    let mut local: Vec<Vec<u32>> = Vec::with_capacity(shares.len());
    for sh in shares {
        let mut map = Vec::with_capacity(sh.word_ends.len());
        for (i, c) in sh.counts().into_iter().enumerate() {
            let w = sh.word(i);
            let next = words_g.len().min(MAX_WORDS) as u32;
            let g = *first.entry(w).or_insert(next);
            if g == next && words_g.len() <= MAX_WORDS {
                words_g.push(w);
                counts.push(0);
            }
            counts[g as usize] = counts[g as usize].saturating_add(c);
            map.push(g);
        }
        local.push(map);
    }
    drop(first);
    if words_g.len() > MAX_WORDS {
        return Err(format!("split_spans: more than {MAX_WORDS} distinct words"));
    }
    // Sorted by their first 8 bytes as a number (most words differ there), then by bytes.
    let prefix = |w: &[u8]| {
        let mut b = [0u8; 8];
        let n = w.len().min(8);
        b[..n].copy_from_slice(&w[..n]);
        u64::from_be_bytes(b)
    };
    let mut keyed: Vec<(u64, u32)> = words_g.iter().enumerate().map(|(g, w)| (prefix(w), g as u32)).collect();
    let by_bytes = |x: &(u64, u32), y: &(u64, u32)| x.0.cmp(&y.0).then_with(|| words_g[x.1 as usize].cmp(words_g[y.1 as usize]));
    if par {
        keyed.par_sort_unstable_by(by_bytes);
    } else {
        keyed.sort_unstable_by(by_bytes);
    }
    let order: Vec<u32> = keyed.into_iter().map(|(_, g)| g).collect();
    let mut rank = vec![0u32; order.len()];
    let mut words = Flat { bytes: Vec::with_capacity(words_g.iter().map(|w| w.len()).sum()), offsets: Vec::with_capacity(order.len() + 1), counts: Vec::with_capacity(order.len()) };
    words.offsets.push(0);
    for (r, &g) in order.iter().enumerate() {
        rank[g as usize] = r as u32;
        words.push(words_g[g as usize], counts[g as usize]);
    }
    drop(words_g);
    for map in &mut local {
        map.iter_mut().for_each(|g| *g = rank[*g as usize]);
    }
    Ok((words, local))
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

    #[test]
    fn a_counters_spans_split_in_place_as_their_flat_form_does() {
        // Spans of up to 4 words, short and long, shared by the documents (so by the shards)
        // and of one document only, counted on 1, 2 and 3 threads.
        let spans = crate::pretok::spans::span_pattern("gpt2", 4).unwrap();
        let docs: Vec<String> = (0..48u32)
            .map(|d| (0..2_000u32).map(|i| format!(" w{} {} {}. z{}", i % 300, "x".repeat(1 + (i % 30) as usize), "y".repeat(1 + ((i * 48 + d) % 700) as usize), i % 7)).collect())
            .collect();
        let word = Pattern::from_spec("gpt2").unwrap();
        for threads in [1, 2, 3] {
            let (mut c, _) = super::super::tests::counted_with(&docs, threads, &spans);
            let flat = c.flat();
            let want = split(flat.as_ref(), &word).unwrap();
            let (got, counts) = c.take_split(&word).unwrap();
            assert_eq!(c.len(), 0);
            assert_eq!((got.words.bytes.len(), &got.words.offsets, &got.words.counts), (want.words.bytes.len(), &want.words.offsets, &want.words.counts));
            assert_eq!(got.words.bytes, want.words.bytes);
            // The same spans, in another order: each as its words' bytes, with its count.
            let rows = |s: &Split, counts: &[u64]| {
                let mut r: Vec<(Vec<u8>, u64)> = (0..counts.len())
                    .map(|i| (s.span_words[s.span_ends[i] as usize..s.span_ends[i + 1] as usize].iter().flat_map(|&w| s.words.as_ref().word(w as usize).to_vec()).collect(), counts[i]))
                    .collect();
                r.sort();
                r
            };
            assert!(flat.counts.len() > 10_000 && flat.counts.len() == counts.len(), "{} spans", counts.len());
            let long = (0..flat.counts.len()).filter(|&i| flat.as_ref().word(i).len() > 15).count();
            assert!(long > 1_000 && long < flat.counts.len() - 1_000, "{long} long spans");
            assert_eq!(rows(&got, &counts), rows(&want, &flat.counts), "{threads} threads");
        }
    }
}
