//! Superword spans counted as their words' ids, for training from text (a counter that only
//! `Counter::take_split` reads, `Counter::split_only`): each thread looks every word up once
//! where the scanner cuts it (its local id, its count) and keys each span by its words' ids,
//! four `u32`s packed in a `u128` ([`key`]), so nothing is split again: the spans' words and
//! counts come straight out ([`gather`], after the threads' words are joined by
//! `split::join_words`).
//!
//! * **Exact.** A span's words are the word pattern's pieces where the scanner found them, the
//!   pieces the split would cut the span into again (every span boundary is a word boundary),
//!   and stage 1's word counts are the pieces of the text.
//! * **Counted in parts** ([`Spans`]): most spans are seen once, so a table of them is a cache
//!   miss per span; keys are appended to one of [`PARTS`] parts and each part counted in a
//!   table that stays in the cache when the waiting keys reach [`COUNT_AT`] (bounded memory);
//!   the last waiting keys are counted once, by the gather. A span of one word is counted by
//!   its word's id, never keyed.
//! * **Each span once.** A span's part is a hash of its words' bytes, the same in every thread,
//!   so at the end each part of all threads is counted together under the words' sorted ids:
//!   memory and the training after it stay with the distinct spans, whatever the threads.
//! * **Gathered beside stage 1** ([`Gathering`]): superword training takes the words first and
//!   gathers the spans on threads of their own while stage 1 trains on the words.
//! * **Span patterns of up to [`MAX_SPAN_WORDS`] words**, the default; a counter of longer
//!   spans counts them all as bytes.
//!
//! Why and the figures: [log](../../docs/performance.md#superword-training).

use rayon::prelude::*;

use super::split::Share;
use super::tally::Tally;
use crate::pretok::spans::SpanSink;

/// The most words of a span counted by its words' ids (four `u32`s in a `u128`).
pub const MAX_SPAN_WORDS: usize = 4;

/// Spans wait in batches of this many: their words' ids are known once the share's lookups are
/// drained, then the spans' keys go to their parts.
const BATCH: usize = 64;

/// The key of a span of 1..=4 words: `id + 1` of each (at most `u32::MAX`), the first word in
/// the top bits and 0 past the last, so the key's high half is never 0 (an empty slot); the low
/// half is then scrambled with the high one, a bijection ([`ids_of`] undoes it): the hash of
/// the parts and tables ([`mix128`](crate::keys::mix128)) folds the halves together with a shift, under which keys
/// of small ids in neighbouring places collide outright.
#[inline(always)]
pub(crate) fn key(ids: &[u32]) -> u128 {
    debug_assert!((1..=MAX_SPAN_WORDS).contains(&ids.len()));
    let mut k = 0u128;
    for (i, &id) in ids.iter().enumerate() {
        k |= ((id as u128) + 1) << (96 - 32 * i);
    }
    let (hi, lo) = ((k >> 64) as u64, k as u64);
    ((hi as u128) << 64) | (lo.wrapping_mul(K1) ^ hi.wrapping_mul(K2)) as u128
}

/// The ids of a span's [`key`], pushed onto `out`.
#[inline(always)]
pub(crate) fn ids_of(k: u128, out: &mut Vec<u32>) {
    let (ids, n) = ids_in(k);
    out.extend_from_slice(&ids[..n]);
}

/// The ids of a span's [`key`]: the first `n` of the array.
#[inline(always)]
fn ids_in(k: u128) -> ([u32; MAX_SPAN_WORDS], usize) {
    let hi = (k >> 64) as u64;
    let lo = ((k as u64) ^ hi.wrapping_mul(K2)).wrapping_mul(K1_INV);
    let mut ids = [0u32; MAX_SPAN_WORDS];
    for (n, v) in [(hi >> 32) as u32, hi as u32, (lo >> 32) as u32, lo as u32].into_iter().enumerate() {
        if v == 0 {
            return (ids, n);
        }
        ids[n] = v - 1;
    }
    (ids, MAX_SPAN_WORDS)
}

const K1: u64 = 0x9E37_79B9_7F4A_7C15;
const K2: u64 = 0xD6E8_FEB8_6659_FD93;
/// `K1`'s inverse modulo 2^64 (K1 is odd): Newton's iteration, each step doubling the bits.
const K1_INV: u64 = {
    let mut x = K1;
    let mut i = 0;
    while i < 6 {
        x = x.wrapping_mul(2u64.wrapping_sub(K1.wrapping_mul(x)));
        i += 1;
    }
    x
};

/// How many parts a thread's spans are spread over, by their hash's top bits: a part's
/// spans are counted in a table that stays in the L2 cache.
const PART_BITS: u32 = 10;
const PARTS: usize = 1 << PART_BITS;
/// A thread's spans wait as keys until this many, and at least as many as it has counted,
/// then are counted (bounded memory: 16 bytes a waiting span, 32 a counted one; a part's table
/// fits the L2 cache up to ~2^23 spans a thread, L3 beyond).
const COUNT_AT: usize = if cfg!(test) { 1 << 12 } else { 1 << 24 };

/// One thread's spans: those of one word counted by the word's local id; the others by part
/// (the top bits of a hash of their words' bytes, so a span is in the same part in every
/// thread): keys met since the last count, and the counted keys with their counts apart (the
/// keys where the waiting ones were).
/// Most spans are seen once, so a table of them would take a cache miss per span; appended to
/// their part, they are counted part by part in a table that stays in the cache.
pub(super) struct Spans {
    /// Spans of one word, by the word's local id: most are a newline or a word after a stop,
    /// few distinct and a third of all spans, counted here and never keyed.
    single: Vec<u64>,
    /// How many of `single` are not 0.
    singles: usize,
    waiting: Vec<Vec<u128>>,
    counted: Vec<(Vec<u128>, Vec<u64>)>,
    waiting_len: usize,
    counted_len: usize,
}

impl Default for Spans {
    fn default() -> Self {
        Spans { single: Vec::new(), singles: 0, waiting: vec![Vec::new(); PARTS], counted: vec![Default::default(); PARTS], waiting_len: 0, counted_len: 0 }
    }
}

impl Spans {
    #[inline(always)]
    fn add(&mut self, key: u128, part: usize) {
        self.waiting[part].push(key);
        self.waiting_len += 1;
        if self.waiting_len >= COUNT_AT.max(self.counted_len) {
            self.count_waiting();
        }
    }

    #[inline(always)]
    fn add_single(&mut self, id: u32) {
        let i = id as usize;
        if i >= self.single.len() {
            self.single.resize((i + 1).next_power_of_two().max(1 << 10), 0);
        }
        self.singles += (self.single[i] == 0) as usize;
        self.single[i] += 1;
    }

    /// Counts the waiting keys into the counted ones, part by part.
    fn count_waiting(&mut self) {
        // (A table of this call's own: one a panic left keys in is never used again.)
        let mut table = Vec::new();
        for p in 0..PARTS {
            let (mut keys, (was, counts)) = (std::mem::take(&mut self.waiting[p]), std::mem::take(&mut self.counted[p]));
            let mut tally = Tally::new(&mut table, keys.len() + was.len());
            was.iter().zip(&counts).for_each(|(&k, &c)| tally.add(k, c));
            keys.iter().for_each(|&k| tally.add(k, 1));
            let n = tally.distinct;
            drop((was, counts));
            // (The distinct keys where the waiting ones were: no new pages for them.)
            keys.clear();
            keys.reserve(n);
            let mut counts = Vec::with_capacity(n);
            tally.drain(|k, c| {
                keys.push(k);
                counts.push(c);
            });
            keys.shrink_to_fit();
            self.counted[p] = (keys, counts);
        }
        self.waiting_len = 0;
        self.counted_len = self.counted.iter().map(|c| c.0.len()).sum();
    }

    fn len(&self) -> usize {
        self.waiting_len + self.counted_len + self.singles
    }
}

/// One part's spans out of all threads, with the words' sorted ids: the ids, where each span
/// ends among them, the counts.
type Out = (Vec<u32>, Vec<u32>, Vec<u64>);

/// The spans of all threads, counted or waiting (`maps[t]`: thread `t`'s local word ids to the
/// sorted ones), each span once: `(span_words, span_ends, counts)`, part by part (on the
/// pool's threads when `par`), each part's keys freed as it is counted; the spans of one word
/// last.
pub(super) fn gather(spans: Vec<Spans>, maps: &[Vec<u32>], par: bool) -> Gathered {
    // Spans of one word, each word once: its sorted id, its count summed over the threads.
    let mut single = vec![0u64; maps.iter().flatten().max().map_or(0, |&m| m as usize + 1)];
    for (t, s) in spans.iter().enumerate() {
        s.single.iter().zip(&maps[t]).filter(|(&c, _)| c > 0).for_each(|(&c, &m)| single[m as usize] += c);
    }
    let mut ones: Out = Default::default();
    for (w, &c) in single.iter().enumerate().filter(|(_, &c)| c > 0) {
        ones.0.push(w as u32);
        ones.1.push(ones.0.len() as u32);
        ones.2.push(c);
    }
    drop(single);
    // Each part of every thread: its counted keys with their counts, and its waiting keys.
    let mut parts: Vec<Vec<(usize, (Vec<u128>, Vec<u64>), Vec<u128>)>> = (0..PARTS).map(|_| Vec::new()).collect();
    for (t, s) in spans.into_iter().enumerate() {
        for (p, (c, w)) in s.counted.into_iter().zip(s.waiting).enumerate() {
            parts[p].push((t, c, w));
        }
    }
    let one = |table: &mut Vec<(u128, u64)>, part: Vec<(usize, (Vec<u128>, Vec<u64>), Vec<u128>)>| -> Out {
        let n = part.iter().map(|(_, c, w)| c.0.len() + w.len()).sum();
        let rekey = |t: usize, k: u128| {
            let (mut ids, len) = ids_in(k);
            ids[..len].iter_mut().for_each(|l| *l = maps[t][*l as usize]);
            key(&ids[..len])
        };
        let mut tally = Tally::new(table, n);
        for (t, (ks, cs), w) in &part {
            ks.iter().zip(cs).for_each(|(&k, &c)| tally.add(rekey(*t, k), c));
            w.iter().for_each(|&k| tally.add(rekey(*t, k), 1));
        }
        drop(part);
        tally.drain_ids(|n| n as u32)
    };
    let mut outs: Vec<Out> = if par {
        parts.into_par_iter().map_init(Vec::new, one).collect()
    } else {
        let mut t = Vec::new();
        parts.into_iter().map(|p| one(&mut t, p)).collect()
    };
    outs.push(ones);
    // Joined on the pool's threads (each part into its stretch, then freed): a span's end among
    // all words is its part's first word plus its end there.
    let mut bases = vec![0i64];
    outs.iter().for_each(|o| bases.push(bases[bases.len() - 1] + o.0.len() as i64));
    let (mut ids, mut ends, mut counts) = (Vec::with_capacity(outs.len()), vec![vec![0u32]], Vec::with_capacity(outs.len()));
    for (i, e, c) in outs {
        ids.push(i);
        ends.push(e);
        counts.push(c);
    }
    let span_ends = crate::pool::concat(par, ends, |k, e| if k == 0 { 0 } else { bases[k - 1] + e as i64 });
    (crate::pool::concat(par, ids, |_, v| v), span_ends, crate::pool::concat(par, counts, |_, c| c))
}

/// A span's words and each span's end among them, and the spans' counts (the rest of a
/// `Split`, apart from its words), as [`gather`] gives them.
pub type Gathered = (Vec<u32>, Vec<i64>, Vec<u64>);

/// The spans of `Counter::take_split_words`: ready, or being gathered on threads of their own
/// while the caller trains stage 1 on the words.
pub enum Gathering {
    Done(Gathered),
    Running { handle: std::thread::JoinHandle<Gathered>, pid: u32 },
}

impl Gathering {
    /// Gathers `spans` (by thread, counted or waiting, `maps[t]` thread `t`'s local word ids to
    /// the sorted ones) on a pool of `threads` threads of its own, apart from the pools the training
    /// after it runs on (on one thread, if the system refuses more).
    pub(super) fn start(spans: Vec<Spans>, maps: Vec<Vec<u32>>, threads: usize) -> Result<Gathering, String> {
        let run = move || {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("hf_bpe-spans-{i}")).build().ok();
            let par = threads > 1 && pool.is_some();
            crate::pool::install(pool.as_ref(), || gather(spans, &maps, par))
        };
        let handle = std::thread::Builder::new()
            .name("hf_bpe-spans".into())
            .spawn(run)
            .map_err(|e| format!("split_spans: no thread to gather the spans on ({e})"))?;
        Ok(Gathering::Running { handle, pid: std::process::id() })
    }

    /// The spans, once gathered. In a process forked while they were gathered, an error (the
    /// thread gathering them is the parent's).
    pub fn wait(self) -> Result<Gathered, String> {
        match self {
            Gathering::Done(s) => Ok(s),
            Gathering::Running { handle, pid } if pid == std::process::id() => {
                handle.join().map_err(|p| {
                    let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
                    format!("internal error in hf_bpe (please report): gathering the spans: {}", msg.unwrap_or_default())
                })
            }
            Gathering::Running { handle, .. } => {
                std::mem::forget(handle); // (its thread is the parent's)
                Err("split_spans: the spans were being gathered when this process was forked; gather them in the parent".into())
            }
        }
    }
}

/// One thread's words (local ids, counts) and spans (by their words' ids, [`Spans`]).
#[derive(Default)]
pub(super) struct SpanWords {
    words: Share,
    spans: Spans,
}

impl SpanWords {
    /// Before a text: a span a panic cut short in the last one is dropped (its words' ids
    /// stay counted).
    pub(super) fn start_text(&mut self) {
        self.words.drain();
        let end = self.words.ends.last().map_or(0, |&e| e as usize);
        self.words.ids.truncate(end);
    }

    /// A sink for `text`'s spans ([`crate::pretok::spans::scan_words`]).
    pub(super) fn sink<'a>(&'a mut self, text: &'a [u8]) -> Sink<'a> {
        Sink { to: self, text }
    }

    /// Counts the spans of the batch: one of one word by its word, any other as a key in the
    /// part of its words' hashes.
    pub(super) fn flush(&mut self) {
        let w = &mut self.words;
        w.drain();
        let mut from = 0;
        for &end in &w.ends {
            let ids = &w.ids[from..end as usize];
            from = end as usize;
            if let [id] = *ids {
                self.spans.add_single(id);
                continue;
            }
            let h = ids.iter().fold(0u64, |h, &id| (h.rotate_left(29) ^ w.hashes.get(id as usize).copied().unwrap_or(0)).wrapping_mul(K1));
            self.spans.add(key(ids), (h >> (64 - PART_BITS)) as usize);
        }
        w.ids.clear();
        w.ends.clear();
    }

    /// Number of spans counted (by this thread; an upper bound).
    pub(super) fn len(&self) -> usize {
        self.spans.len()
    }

    /// The words with local ids and the spans (the last waiting ones counted by [`gather`]).
    pub(super) fn into_parts(mut self) -> Result<(Share, Spans), String> {
        self.flush();
        self.words.finish()?;
        Ok((self.words, self.spans))
    }
}

/// [`SpanWords`] fed one text's spans.
pub(super) struct Sink<'a> {
    to: &'a mut SpanWords,
    text: &'a [u8],
}

impl SpanSink for Sink<'_> {
    #[inline(always)]
    fn word(&mut self, s: usize, e: usize) {
        self.to.words.add(self.text, s, e, 1);
    }

    #[inline(always)]
    fn close(&mut self) {
        let w = &mut self.to.words;
        w.ends.push(w.ids.len() as i64);
        if w.ends.len() == BATCH {
            self.to.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::{Counter, Split};
    use crate::pretok::Pattern;

    /// Each span as its words' bytes, with its count summed over the entries holding it.
    fn spans(s: &Split, counts: &[u64]) -> std::collections::BTreeMap<Vec<u8>, u64> {
        let mut out = std::collections::BTreeMap::new();
        for (i, &c) in counts.iter().enumerate() {
            let ids = &s.span_words[s.span_ends[i] as usize..s.span_ends[i + 1] as usize];
            let b: Vec<u8> = ids.iter().flat_map(|&w| s.words.as_ref().word(w as usize).to_vec()).collect();
            *out.entry(b).or_insert(0) += c;
        }
        out
    }

    #[test]
    fn spans_counted_as_words_split_as_spans_counted_as_bytes() {
        // Spans of 1 to 4 words, short and long, shared by the documents (so by the threads) and
        // of one document only, past the count that makes a thread count its waiting spans
        // (COUNT_AT); on 1, 2 and 3 threads; a special token ends a span.
        let docs: Vec<String> = (0..24u32)
            .map(|d| (0..1_500u32).map(|i| format!(" w{} {} {}<|x|>{}. z{}\n  q", i % 300, "x".repeat(1 + (i % 30) as usize), "y".repeat(1 + ((i * 24 + d) % 700) as usize), i % 11, i % 7)).collect())
            .collect();
        let refs: Vec<&str> = docs.iter().map(|s| s.as_str()).collect();
        let word = Pattern::from_spec("gpt2").unwrap();
        for max in [1, 4, 5] {
            let spans_of = crate::pretok::spans::span_pattern("gpt2", max).unwrap();
            for threads in [1, 2, 3] {
                let counter = |split_only: bool| {
                    let mut c = Counter::new(Pattern::from_spec(&spans_of).unwrap(), vec!["<|x|>".into()], threads).unwrap();
                    if split_only {
                        c.split_only().unwrap();
                    }
                    c.add_texts(&refs).unwrap();
                    c
                };
                let (mut bytes, mut words) = (counter(false), counter(true));
                assert_eq!(words.words_of_spans().is_some(), max <= MAX_SPAN_WORDS);
                let (want, want_counts) = bytes.take_split(&word).unwrap();
                let (got, got_counts) = words.take_split(&word).unwrap();
                assert_eq!(words.len(), 0);
                assert!(got.words == want.words, "{max} words, {threads} threads");
                let (g, w) = (spans(&got, &got_counts), spans(&want, &want_counts));
                assert!(w.len() > 1_000, "{} spans", w.len());
                assert_eq!(got_counts.len(), g.len(), "each span once");
                let first = g.iter().zip(&w).find(|(a, b)| a != b).map(|(a, b)| (String::from_utf8_lossy(a.0).into_owned(), *a.1, String::from_utf8_lossy(b.0).into_owned(), *b.1));
                assert!(g == w, "{max} words, {threads} threads: {} spans against {}, first difference {first:?}", g.len(), w.len());
            }
        }
    }

    #[test]
    fn only_a_fresh_counter_of_spans_is_split_only() {
        assert!(Counter::new(Pattern::from_spec("gpt2").unwrap(), vec![], 1).unwrap().split_only().is_err());
        let spans = crate::pretok::spans::span_pattern("gpt2", 4).unwrap();
        let mut c = Counter::new(Pattern::from_spec(&spans).unwrap(), vec![], 1).unwrap();
        c.add_texts(&["a b"]).unwrap();
        assert!(c.split_only().unwrap_err().contains("counted text already"));
    }

    #[test]
    fn a_key_holds_one_to_four_ids_and_its_high_half_is_never_zero() {
        assert_eq!(K1.wrapping_mul(K1_INV), 1);
        let cases: [&[u32]; 6] = [&[0], &[u32::MAX - 1], &[0, 0], &[7, 0, 3], &[3, 0, 7], &[u32::MAX - 1, 1, 2, u32::MAX - 1]];
        let keys: Vec<u128> = cases.iter().map(|c| key(c)).collect();
        for (c, &k) in cases.iter().zip(&keys) {
            assert_ne!(k >> 64, 0);
            let mut back = Vec::new();
            ids_of(k, &mut back);
            assert_eq!(&back, c);
        }
        let distinct: std::collections::HashSet<u128> = keys.iter().copied().collect();
        assert_eq!(distinct.len(), keys.len());
    }

    #[test]
    fn spans_of_small_ids_hash_apart() {
        // Every span of 2 to 4 words over 24 ids: the table's hashes of their keys all differ.
        let mut hashes = std::collections::HashSet::new();
        let mut n = 0;
        for len in 2..=4u32 {
            for t in 0..24u32.pow(len) {
                let ids: Vec<u32> = (0..len).map(|i| t / 24u32.pow(i) % 24).collect();
                hashes.insert(crate::keys::mix128(key(&ids)));
                n += 1;
            }
        }
        assert_eq!(hashes.len(), n);
    }
}
