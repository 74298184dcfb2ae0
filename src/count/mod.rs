//! Counting distinct pre-tokens over a corpus, in parallel and in bounded memory.
//!
//! The corpus arrives as in-memory documents or as files (plain text, gzip, JSON lines). Each
//! document is split on the special tokens first, then cut into pre-tokens by the [`Pattern`];
//! every distinct pre-token is counted once with a 64-bit count.
//!
//! * **Work units.** Documents are cut into segments of about [`SEGMENT_BYTES`] at *safe cuts*
//!   (`crate::corpus::cuts::safe_cut`: places where every built-in pattern ends a piece). A custom
//!   regex may match across anything but a special token, so its documents are cut only after
//!   special tokens. Segments are counted on the threads of a fork-aware pool (`crate::pool`).
//! * **No merging until training.** Each pool thread owns one shard of counts (indexed by
//!   `rayon::current_thread_index`), merged once by [`Counter::flat`].
//! * **Packed keys, prefetched.** Pieces of at most 15 bytes are packed into a `u128` and
//!   counted in an open-addressing table ([`tables`]); the update trails the scanner by a queue
//!   of 64 keys whose slots were prefetched. Why, and what was tried:
//!   [log](../../docs/performance.md#counting).
//! * **Files in a pipeline** ([`stream`]): a text file's next block is read, cut and decoded
//!   while the pool counts the one before (built-in patterns, two threads or more).
//! * **Bounded memory.** Files are streamed by `crate::corpus::read` (at most a few blocks in flight),
//!   so memory is the distinct words plus a few blocks, whatever the corpus size (with a custom
//!   pattern: plus the text up to the next special token). The tables hold a distinct word in
//!   32-40 bytes (short) or ~27 plus its bytes (long), and gathering them into the flat form
//!   frees them as it goes ([`Counter::take_flat`]).
//! * **Spans for the split alone** ([`Counter::split_only`]): superword spans of up to 4 words
//!   counted as their words' ids ([`span_words`]), which [`Counter::take_split`] reads out.

mod gather;
pub(crate) mod span_words;
mod split;
mod stream;
mod tables;
pub(crate) mod tally;

use std::sync::Mutex;

use rayon::prelude::*;

use crate::counts::Flat;
use crate::keys::pack_in;
use crate::pretok::Pattern;
use crate::corpus::cuts::segments_keeping;
use crate::corpus::read::{read_corpus, Block, CutRule, ReadOptions};
use crate::specials::{SpecialSet, Specials};
use span_words::SpanWords;
use tables::{LongTable, ShortTable};
pub use span_words::MAX_SPAN_WORDS;
pub use span_words::Gathering;
pub use split::{split, Split};
pub use crate::corpus::read::{Progress, Utf8Errors, INTERRUPTED};

/// Target size of one unit of parallel work.
pub const SEGMENT_BYTES: usize = 1 << 20;

/// How many pre-tokens a shard's table update trails behind the scanner (see [`Shard`]).
const BATCH: usize = 64;

/// One thread's counts. Short keys are packed, their slots prefetched and the keys queued;
/// every [`BATCH`] pieces a tight loop applies the queue, where the independent probes overlap
/// (an update of a word outside the hottest few thousand is a cache miss). The queue is drained
/// at the end of every unit of work, so it is empty whenever counts are read. Aligned to 128
/// bytes so that one thread's writes never bounce a line another thread's shard uses.
#[repr(align(128))]
struct Shard {
    short: ShortTable,
    long: LongTable,
    queue: [u128; BATCH],
    queued: usize,
    /// Long pieces of the text being counted, `(start, end, hash)`, their first slots asked
    /// for (superword spans are millions of distinct long words, each update a cache miss).
    long_queue: [(u32, u32, u64); LONG_BATCH],
    long_queued: usize,
    /// A counter of spans as words: this thread's words and spans (made on first use).
    words: Option<Box<SpanWords>>,
}

/// How many long pieces a shard's table update trails behind the scanner.
const LONG_BATCH: usize = 16;

impl Default for Shard {
    fn default() -> Self {
        Shard { short: ShortTable::default(), long: LongTable::default(), queue: [0; BATCH], queued: 0, long_queue: [(0, 0, 0); LONG_BATCH], long_queued: 0, words: None }
    }
}

impl Shard {
    /// Counts one occurrence of the piece `text[s..e]`.
    #[inline(always)]
    fn add(&mut self, text: &[u8], s: usize, e: usize) {
        let n = e.wrapping_sub(s);
        if n.wrapping_sub(1) < 15 {
            // 1..=15 bytes
            let key = pack_in(text, s, e);
            self.short.prefetch(key);
            // `queued` < BATCH always (drained when it gets there); the mask lets the compiler
            // drop the bounds check.
            self.queue[self.queued & (BATCH - 1)] = key;
            self.queued += 1;
            if self.queued == BATCH {
                self.drain();
            }
        } else if n != 0 {
            self.add_long(text, s, e);
        }
    }

    /// Queues a long piece of `text` (the queue holds pieces of one text: see
    /// [`drain_long`](Self::drain_long)); pieces past 4 GiB into a text are counted at once.
    #[inline(never)]
    fn add_long(&mut self, text: &[u8], s: usize, e: usize) {
        let h = tables::hash_bytes(&text[s..e]);
        if e > u32::MAX as usize {
            self.long.add_hashed(&text[s..e], h, 1);
            return;
        }
        self.long.prefetch(h);
        self.long_queue[self.long_queued] = (s as u32, e as u32, h);
        self.long_queued += 1;
        if self.long_queued == LONG_BATCH {
            self.drain_long(text);
        }
    }

    /// Applies the queued long pieces, which are pieces of `text`; called before the shard
    /// counts another text.
    fn drain_long(&mut self, text: &[u8]) {
        // Emptied first: a panic while applying them (caught at the bindings, the shard then
        // reused) must not leave them to be applied to another text.
        let k = std::mem::take(&mut self.long_queued);
        for &(s, e, h) in &self.long_queue[..k] {
            self.long.add_hashed(&text[s as usize..e as usize], h, 1);
        }
    }

    /// Applies the queued keys.
    #[inline(never)]
    fn drain(&mut self) {
        for &k in &self.queue[..self.queued] {
            self.short.add(k, 1);
        }
        self.queued = 0;
    }

    fn flush(&mut self) {
        self.drain();
        if let Some(w) = &mut self.words {
            w.flush();
        }
    }
}

/// Distinct pre-tokens and their counts, built incrementally.
pub struct Counter {
    pattern: Pattern,
    specials: std::sync::Arc<Specials>,
    pool: Option<crate::pool::Pool>,
    shards: Vec<Mutex<Shard>>,
    /// Read only by [`Counter::take_split`] ([`Counter::split_only`]).
    split_only: bool,
    /// Bytes of text counted so far (after decoding).
    pub bytes: u64,
    /// Documents counted so far (files count their lines for JSON lines, else one each).
    pub documents: u64,
    /// What the reader did with the last file (see `ReadStats`).
    pub last_read: crate::corpus::read::ReadStats,
}

impl Counter {
    /// A counter on `num_threads` threads of the shared pools (0 = the default).
    pub fn new(pattern: Pattern, specials: Vec<String>, num_threads: usize) -> Result<Self, String> {
        let specials = std::sync::Arc::new(Specials::from_texts(&specials)?);
        let pool = crate::pool::get(crate::pool::check_threads(num_threads)?);
        let n = pool.as_ref().map_or(1, |p| p.current_num_threads());
        Ok(Counter {
            pattern,
            specials,
            pool,
            shards: (0..n).map(|_| Mutex::new(Shard::default())).collect(),
            split_only: false,
            bytes: 0,
            documents: 0,
            last_read: Default::default(),
        })
    }

    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    /// Declares that only [`take_split`](Self::take_split) will read this counter of spans (a
    /// span pattern), before it counts: with a span pattern of at most [`MAX_SPAN_WORDS`] words
    /// its spans are then counted as their words' ids (`span_words`), with more as bytes. An error for another pattern or a counter
    /// that has counted already.
    pub fn split_only(&mut self) -> Result<(), String> {
        let Pattern::Spans { .. } = self.pattern else {
            return Err("split_only: only a counter of superword spans (a span pattern) is read by split_spans".into());
        };
        if self.bytes != 0 || self.documents != 0 {
            return Err("split_only: the counter has counted text already".into());
        }
        self.split_only = true;
        Ok(())
    }

    /// The span pattern's most words, where its spans are counted as their words' ids
    /// (`span_words`: a split-only counter of spans of at most [`MAX_SPAN_WORDS`] words).
    fn words_of_spans(&self) -> Option<usize> {
        match self.pattern {
            Pattern::Spans { max, .. } if self.split_only && max <= MAX_SPAN_WORDS => Some(max),
            _ => None,
        }
    }

    /// Whether only [`take_split`](Self::take_split) may read this counter ([`split_only`](Self::split_only)).
    pub fn is_split_only(&self) -> bool {
        self.split_only
    }

    /// The pool the counter (and the training after it) runs on.
    pub fn pool(&self) -> Option<&rayon::ThreadPool> {
        self.pool.as_deref()
    }

    /// Counts one piece of a document: special tokens split it, the pattern cuts the rest.
    fn count_text(&self, shard: &mut Shard, text: &str) -> Result<(), String> {
        if let Some(max) = self.words_of_spans() {
            let words = shard.words.get_or_insert_with(Default::default);
            return self.specials.for_each_text(text, |t| {
                words.start_text();
                crate::pretok::spans::scan_words(t, max, &mut words.sink(t.as_bytes()));
                Ok(())
            });
        }
        self.specials.for_each_text(text, |t| {
            let b = t.as_bytes();
            shard.long_queued = 0; // (pieces of another text only if a panic cut one short)
            let r = self.pattern.for_each_piece(t, |s, e| shard.add(b, s, e));
            shard.drain_long(b);
            r
        })
    }

    /// Counts a batch of documents on all threads. Big documents are cut at safe places.
    pub fn add_texts(&mut self, docs: &[&str]) -> Result<(), String> {
        self.documents += docs.len() as u64;
        self.count_docs(docs)
    }

    fn count_docs(&mut self, docs: &[&str]) -> Result<(), String> {
        self.bytes += docs.iter().map(|d| d.len() as u64).sum::<u64>();
        let work = self.units(docs);
        let this = &*self;
        let count_group = |group: &Vec<&str>| this.count_unit(group);
        match this.pool() {
            Some(p) => p.install(|| work.par_iter().try_for_each(count_group)),
            None => work.iter().try_for_each(count_group),
        }
    }

    /// The documents cut into units of work of about half a segment (big documents at safe
    /// places).
    fn units<'t>(&self, docs: &[&'t str]) -> Vec<Vec<&'t str>> {
        let mut work: Vec<Vec<&str>> = Vec::new();
        let mut cur: Vec<&str> = Vec::new();
        let mut cur_len = 0;
        let rule = self.pattern.cut_rule();
        let after_special = if rule.is_some() { None } else { self.specials.automaton(&SpecialSet::All) };
        for &d in docs {
            let segs = match (&after_special, rule) {
                (_, Some(rule)) => segments_keeping(d, SEGMENT_BYTES, rule, &self.specials),
                (Some(a), None) => a.segments(d),
                (None, None) => vec![d],
            };
            for seg in segs {
                cur_len += seg.len();
                cur.push(seg);
                // Half a segment per unit: a block of the file reader (2 MiB) is then two units
                // (its two segments were one, counted on one thread: superword spans' counting
                // ran on one core).
                if cur_len >= SEGMENT_BYTES / 2 {
                    work.push(std::mem::take(&mut cur));
                    cur_len = 0;
                }
            }
        }
        if !cur.is_empty() {
            work.push(cur);
        }
        work
    }

    /// Counts one unit of work in the shard of the thread it runs on.
    fn count_unit(&self, unit: &[&str]) -> Result<(), String> {
        let i = rayon::current_thread_index().unwrap_or(0) % self.shards.len();
        let mut shard = self.shards[i].lock().unwrap_or_else(|e| e.into_inner());
        let r = unit.iter().try_for_each(|t| self.count_text(&mut shard, t));
        shard.flush();
        r
    }

    /// Streams one file (plain text, `.gz`, `.jsonl`/`.jsonl.gz` with a `text` field) into the
    /// counts. `progress` receives the number of file bytes read so far.
    /// `range`: only the bytes `start..end` of a plain file, a shard cut by `corpus::cuts::shard_cuts`
    /// (the file counts as one document in the shard that starts at 0).
    pub fn add_file(&mut self, file_path: &std::path::Path, errors: Utf8Errors, text_field: &str, range: Option<(u64, u64)>, progress: Progress) -> Result<(), String> {
        let path = file_path.display();
        if let Some((s, e)) = range {
            if e < s {
                return Err(format!("{path}: byte range {s}..{e} ends before it starts"));
            }
            if self.pattern.cut_rule().is_none() && !crate::corpus::read::is_jsonl(file_path) {
                return Err(format!("{path}: text counted with a custom regex is read whole, not in byte ranges"));
            }
        }
        let specials = self.specials.clone();
        let opt = ReadOptions {
            errors,
            text_field,
            cut: CutRule::of(&self.pattern),
            specials: &specials,
            allowed: &SpecialSet::All,
            range,
        };
        let jsonl = crate::corpus::read::is_jsonl(file_path);
        // (Not for JSON lines, a custom regex (a block is the text up to a special token, held
        // once, not twice), one thread, or a caller on a pool's thread.)
        let piped = !jsonl && self.pattern.cut_rule().is_some() && !crate::pool::in_pool();
        let r = match self.pool.clone() {
            Some(pool) if piped && pool.current_num_threads() > 1 => {
                let (r, bytes) = stream::count_file(self, &pool, file_path, &opt, progress);
                self.bytes += bytes;
                r
            }
            _ => read_corpus(file_path, &opt, progress, |block| match block {
                Block::Text(t) => self.count_docs(&[t]),
                Block::Docs(docs) => {
                    let refs: Vec<&str> = docs.iter().map(|s| s.as_str()).collect();
                    self.add_texts(&refs)
                }
            }),
        };
        self.last_read = r?;
        if !jsonl && range.is_none_or(|(s, _)| s == 0) {
            self.documents += 1; // the whole file is one document
        }
        Ok(())
    }

    /// Where shards of `path` start, for byte offsets `targets` (`corpus::cuts::shard_cuts` with this
    /// counter's special tokens). A custom regex may match across any cut but a special token,
    /// so its text files are counted whole (an error here).
    pub fn shard_cuts(&self, path: &std::path::Path, targets: &[u64]) -> Result<Vec<u64>, String> {
        let jsonl = crate::corpus::read::is_jsonl(path);
        let Some(rule) = self.pattern.cut_rule().or(jsonl.then_some(crate::corpus::cuts::Rule::Safe)) else {
            return Err(format!("{}: text counted with a custom regex is read whole, not in byte ranges", path.display()));
        };
        crate::corpus::cuts::shard_cuts(path, targets, jsonl, rule, &self.specials)
    }

    /// Number of distinct pre-tokens so far (a [`split_only`](Self::split_only) counter of spans
    /// as words: an upper bound on its spans).
    pub fn len(&self) -> usize {
        // Shards may share keys, so this is an upper bound until `words` merges them.
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock().unwrap_or_else(|e| e.into_inner());
                s.short.len() + s.long.len() + s.words.as_ref().map_or(0, |w| w.len())
            })
            .sum()
    }

    /// Frees the counts (the per-thread tables). Training calls this once it has the words, so
    /// the counting tables and the merge loop's tables are never alive at the same time: on the
    /// 20 MB English slice that lowers training's peak RSS by ~17 MiB, on 191 MB by ~40 MiB.
    pub fn release(&mut self) {
        for s in &self.shards {
            *s.lock().unwrap_or_else(|e| e.into_inner()) = Shard::default();
        }
        // glibc keeps freed memory of its (per-thread) arenas mapped; without a trim the freed
        // tables stay in RSS and the merge loop's tables come on top of them.
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        unsafe {
            libc::malloc_trim(0);
        }
    }

    /// All distinct pre-tokens with their counts, merged across shards, sorted by bytes.
    ///
    /// Performance: short words of all shards are gathered as (byte-swapped key, count) and
    /// sorted as integers, then equal neighbours (the same word from several shards) are
    /// summed: no hashing, no boxed-slice comparisons through pointers. The byte-swapped packed
    /// key orders like the bytes (first the zero-padded bytes, big-endian, then the length, so
    /// a prefix sorts first). Only the few long words are sorted as bytes; the two
    /// sorted runs are then merged.
    pub fn flat(&self) -> Flat {
        // On the counter's pool (the threads the user asked for), never rayon's global one.
        crate::pool::install(self.pool(), || self.flat_here(false))
    }

    /// [`flat`](Self::flat), then [`release`](Self::release); each table is freed as soon as
    /// its words are gathered, so the tables and the flat form are not all alive at once.
    /// (`HF_BPE_TRAIN_TIMING=1` prints the memory before and after.)
    pub fn take_flat(&mut self) -> Flat {
        let timing = std::env::var_os("HF_BPE_TRAIN_TIMING").is_some();
        if timing {
            eprintln!("train: counted, RSS {}", crate::memory::rss_mib());
        }
        let _mapped = crate::memory::MapBigAllocations::new();
        let flat = crate::pool::install(self.pool(), || self.flat_here(true));
        self.release();
        if timing {
            eprintln!("train: counts gathered, RSS {}", crate::memory::rss_mib());
        }
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documents counted on two threads, and their pieces counted one by one.
    fn counted(docs: &[String]) -> (Counter, Vec<(Vec<u8>, u64)>) {
        counted_on(docs, 2)
    }

    /// [`counted`] on `threads` threads.
    pub(super) fn counted_on(docs: &[String], threads: usize) -> (Counter, Vec<(Vec<u8>, u64)>) {
        counted_with(docs, threads, "gpt2")
    }

    /// [`counted_on`] with the pattern `spec`.
    pub(super) fn counted_with(docs: &[String], threads: usize, spec: &str) -> (Counter, Vec<(Vec<u8>, u64)>) {
        let refs: Vec<&str> = docs.iter().map(|s| s.as_str()).collect();
        let mut c = Counter::new(Pattern::from_spec(spec).unwrap(), vec![], threads).unwrap();
        c.add_texts(&refs).unwrap();
        let mut expect: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
        for d in docs {
            c.pattern().for_each_piece(d, |s, e| *expect.entry(d.as_bytes()[s..e].to_vec()).or_insert(0) += 1).unwrap();
        }
        (c, expect.into_iter().collect())
    }

    /// The words of the flat form with their counts.
    pub(super) fn rows(f: &Flat) -> Vec<(Vec<u8>, u64)> {
        (0..f.counts.len()).map(|i| (f.as_ref().word(i).to_vec(), f.counts[i])).collect()
    }

    #[test]
    fn words_are_merged_and_sorted_by_bytes() {
        let long = "x".repeat(20);
        let text = format!("a b a\0 ab {long} {long}a Zz zzé 123 a");
        let docs: Vec<String> = (0..50).map(|i| format!("{text} w{i} {long}")).collect();
        let (c, expect) = counted(&docs);
        assert_eq!(rows(&c.flat()), expect);
    }

    #[test]
    fn many_words_gather_the_same_whether_or_not_tables_are_freed() {
        // Over 3 x 65,536 short words (the gathered keys' pages are given back in steps of
        // that many) and long ones, on two threads (shards that share words).
        let docs: Vec<String> = (0..8)
            .map(|d| (0..40_000u32).map(|i| format!(" w{} {}", i * 8 + d, "x".repeat(16 + (i % 300) as usize))).collect())
            .collect();
        let (mut c, expect) = counted(&docs);
        let kept = c.flat();
        let taken = c.take_flat();
        assert!(expect.len() > 3 << 16);
        assert_eq!(rows(&taken), expect);
        assert_eq!((kept, c.len()), (taken, 0));
    }

    /// `n` as four lowercase letters.
    fn letters(n: u32) -> String {
        (0..4).map(|k| (b'a' + (n / 26u32.pow(3 - k) % 26) as u8) as char).collect()
    }

    #[test]
    fn mostly_long_words_gather_in_parts_cut_at_long_pivots() {
        // More long words than short ones (the parts are cut at long words), many sharing their
        // first 16 bytes (ordered by the rest), counted on two threads (shards that share words).
        let docs: Vec<String> = (0..6u32)
            .map(|d| (0..50_000u32).map(|i| format!(" sharedprefixes{}{} s{} y", letters((i * 7 + d) % 150_000), "z".repeat((i % 5) as usize), i % 97)).collect())
            .collect();
        let (mut c, expect) = counted(&docs);
        let long = expect.iter().filter(|(w, _)| w.len() >= 16).count();
        assert!(long > 2 << 16 && long > 2 * (expect.len() - long), "{long} of {}", expect.len());
        assert_eq!(rows(&c.take_flat()), expect);
    }
}
