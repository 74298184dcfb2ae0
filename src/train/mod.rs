//! The BPE merge loop: distinct words with their counts in, merges in training order out.
//!
//! Each step picks the most frequent adjacent pair (ties by [`TieBreak`]), records it, and
//! replaces its occurrences (left to right, non-overlapping) by the merged token. The stages,
//! one module each: [`words`] (the words, flat), [`pairs`] (pair counts and the pair -> words
//! index), [`heap`] (the lazy max-heap), [`tokens`] (token strings), [`merge`] (one merge
//! applied). A merge touches only the words listed for its pair, and in them only the pairs
//! next to each occurrence ([`words::Words::merge`] returns those deltas).
//!
//! HF parity (`TieBreak::Hf`): the tie rule is the smallest (rank(left), rank(right)) with the
//! ByteLevel alphabet's order for single bytes and creation order after; merged strings are
//! reused; the merged pair's own count is not decremented (only its neighbours', as HF's
//! `Word::merge`); `max_token_length` filters only newly formed pairs, with
//! `len(x) + len(y) < max_token_length`. Known differences, outside realistic data: HF counts
//! in `i32` (we use `i64`), and when a reused string re-forms an old pair HF merges it only in
//! the words of the heap entry it pops, we in all listed words.
//!
//! Measurements (time per stage, what was tried): [log](../../docs/performance.md#training).

mod filter;
mod heap;
mod index;
mod lists;
mod merge;
mod pairs;
mod parity;
mod tokens;
mod words;

pub use parity::{train_parity, DevText, ParityConfig, Variant};

pub use filter::{regex_filter, MergeFilter};
use filter::Vetoes;
use heap::{Entry, Heap};
use merge::{merge_in_words, Scratch};
use pairs::Pairs;
use tokens::Tokens;
use words::{Delta, Sym, Words};

use crate::counts::{Flat, FlatRef};

/// How to choose among pairs with the same count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TieBreak {
    /// The pair whose (left bytes, right bytes) tuple is greatest in dictionary order.
    Lexicographic,
    /// Exactly what HF `tokenizers`' `BpeTrainer` picks (ByteLevel alphabet order).
    Hf,
}

pub struct TrainConfig {
    /// How many new token strings to create (vocab_size - 256 - specials).
    pub max_new_tokens: usize,
    pub tie_break: TieBreak,
    /// Stop when the best pair's count is below this (and always below 1).
    pub min_frequency: u64,
    /// Never form a token longer than this many bytes.
    pub max_token_length: Option<usize>,
    /// Merges a caller vetoes ([`MergeFilter`]); `None`: every merge may happen.
    pub filter: Option<MergeFilter>,
}

/// How pairs of equal count are ordered (a [`TieBreak`] as the trainer applies it).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ties {
    /// The greatest (left bytes, right bytes).
    Bytes,
    /// The smallest (rank(left), rank(right)) ([`Tokens::hf_rank`]): HF's `BpeTrainer`.
    HfRank,
    /// The greatest (left, right) as strings of the ByteLevel alphabet (each byte by its rank):
    /// HF's `ParityBpeTrainer`.
    HfStrings,
}

/// What a merge may form, from the config: which pairs count, and when to stop.
struct Rules {
    hf: bool,
    ties: Ties,
    /// Lexicographic: a pair is eligible iff len(x) + len(y) <= max_len (ineligible pairs are
    /// never counted). HF: a *newly formed* pair counts only if len(x) + len(y) < max_len; the
    /// initial counts and all decrements are unfiltered (as `tokenizers`' word.rs).
    max_len: u64,
    min_count: i64,
    /// The quiet threshold to start with, and from how many pair occurrences a build forgets
    /// the quiet counts (`pairs`' module doc).
    quiet_below: i64,
    forget_quiet_above: usize,
}

#[cfg(test)]
thread_local! {
    /// The tests' quiet threshold (1: no pair is ever quiet).
    static QUIET_START: std::cell::Cell<i64> = const { std::cell::Cell::new(pairs::QUIET_BELOW) };
    /// The tests' [`pairs::FORGET_QUIET_ABOVE`].
    static FORGET_ABOVE: std::cell::Cell<usize> = const { std::cell::Cell::new(pairs::FORGET_QUIET_ABOVE) };
}

impl Rules {
    /// Which pairs of a base's segmentation count when the pairs are built (HF: all).
    fn counted_at_start<'a>(&self, toks: &'a Tokens) -> impl Fn(u32, u32) -> bool + Sync + 'a {
        let (hf, max_len) = (self.hf, self.max_len);
        move |a, b| hf || max_len == u64::MAX || toks.len[a as usize] as u64 + toks.len[b as usize] as u64 <= max_len
    }

    #[inline]
    fn counts(&self, toks: &Tokens, d: &Delta) -> bool {
        let l = toks.len[d.left as usize] as u64 + toks.len[d.right as usize] as u64;
        if self.hf {
            d.sign < 0 || l < self.max_len
        } else {
            l <= self.max_len
        }
    }
}

/// Whether pair entry `x` must come out of the heap before `y`: the higher count, then the
/// tie rule.
#[inline]
fn better(x: &Entry, y: &Entry, toks: &Tokens, pairs: &Pairs, ties: Ties) -> bool {
    let (xc, yc) = (x.count, y.count);
    if xc != yc {
        return xc > yc;
    }
    let (xa, xb) = (pairs.left[x.pair as usize], pairs.right[x.pair as usize]);
    let (ya, yb) = (pairs.left[y.pair as usize], pairs.right[y.pair as usize]);
    match ties {
        Ties::HfRank => {
            let r = &toks.hf_rank;
            (r[xa as usize], r[xb as usize]) < (r[ya as usize], r[yb as usize])
        }
        Ties::Bytes => (toks.get(xa), toks.get(xb)) > (toks.get(ya), toks.get(yb)),
        Ties::HfStrings => {
            let ranked = |t: u32| toks.get(t).iter().map(|&b| toks.hf_rank[b as usize]);
            match ranked(xa).cmp(ranked(ya)) {
                std::cmp::Ordering::Equal => ranked(xb).gt(ranked(yb)),
                o => o.is_gt(),
            }
        }
    }
}

/// The heap of every pair with a positive count that may form a token.
fn initial_heap(pairs: &Pairs, toks: &Tokens, rules: &Rules) -> Heap {
    let mut heap = Heap { v: Vec::with_capacity(pairs.len() * 2) };
    let len = |t: u32| toks.len[t as usize] as u64;
    for p in 0..pairs.len() {
        let c = pairs.count[p];
        if c > 0 && (rules.hf || len(pairs.left[p]) + len(pairs.right[p]) <= rules.max_len) {
            heap.v.push(Entry { count: c, pair: p as u32 });
        }
    }
    heap.heapify(&|x, y| better(x, y, toks, pairs, rules.ties));
    heap
}

/// The best pair whose entry is current; stale entries are pushed again with their count.
fn pop_best(heap: &mut Heap, pairs: &Pairs, toks: &Tokens, ties: Ties) -> Option<Entry> {
    let order = |x: &Entry, y: &Entry| better(x, y, toks, pairs, ties);
    while let Some(e) = heap.pop(&order) {
        let cur = pairs.count[e.pair as usize];
        if cur == e.count {
            return Some(e);
        }
        if cur > 0 {
            heap.push(Entry { count: cur, pair: e.pair }, &order);
        }
    }
    None
}

/// Pushes the pairs whose count rose in this merge (once each).
fn push_touched(heap: &mut Heap, pairs: &Pairs, toks: &Tokens, ties: Ties, touched: &mut Vec<u32>) {
    for &id in touched.iter() {
        let cnt = pairs.count[id as usize];
        if cnt > 0 {
            heap.push(Entry { count: cnt, pair: id }, &|x, y| better(x, y, toks, pairs, ties));
        }
    }
    touched.clear();
}

/// Learns merges from distinct words with their counts (the flat form, sorted or not).
/// Returns the merges in training order, each as (left bytes, right bytes). `progress(done)` is
/// called about every 1% with the number of new tokens made so far; when it returns `false`,
/// training stops with the merges so far. The initial pair count, big merges and the quiet
/// pairs' logged changes run on `pool` (on the calling thread without one).
pub fn train(
    words: FlatRef<'_>,
    cfg: &TrainConfig,
    pool: Option<&rayon::ThreadPool>,
    progress: &mut dyn FnMut(usize) -> bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    train_input(Input::Borrowed(words), cfg, pool, progress)
}

/// [`train`] on owned word counts, freed once the merge loop has its own copy.
pub fn train_owned(
    words: Flat,
    cfg: &TrainConfig,
    pool: Option<&rayon::ThreadPool>,
    progress: &mut dyn FnMut(usize) -> bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    train_input(Input::Owned(words), cfg, pool, progress)
}

enum Input<'a> {
    Borrowed(FlatRef<'a>),
    Owned(Flat),
}

impl Input<'_> {
    /// The merge loop's words (an owned input is freed here).
    fn words<S: Sym>(mut self) -> Words<S> {
        Words::of_input(&mut self)
    }

    fn as_ref(&self) -> FlatRef<'_> {
        match self {
            Input::Borrowed(f) => *f,
            Input::Owned(f) => f.as_ref(),
        }
    }
}

fn train_input(input: Input<'_>, cfg: &TrainConfig, pool: Option<&rayon::ThreadPool>, progress: &mut dyn FnMut(usize) -> bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let _mapped = crate::memory::MapBigAllocations::new();
    if small_ids(256, cfg) {
        train_words(input.words::<u16>(), cfg, pool, progress)
    } else {
        train_words(input.words::<u32>(), cfg, pool, progress)
    }
}

/// Whether every token id of the run fits 16 bits (`known` tokens, then the new ones), with
/// one value left for the end mark.
fn small_ids(known: usize, cfg: &TrainConfig) -> bool {
    known.saturating_add(cfg.max_new_tokens) < 1 << 16
}

fn train_words<S: Sym>(
    words: Words<S>,
    cfg: &TrainConfig,
    pool: Option<&rayon::ThreadPool>,
    progress: &mut dyn FnMut(usize) -> bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let rules = Rules::of(cfg);
    if cfg.max_new_tokens == 0 || (!rules.hf && rules.max_len < 2) || words.len() > u32::MAX as usize - 1 {
        return Vec::new(); // (more distinct words than ids cannot happen with real data)
    }
    let pairs = Pairs::build(&words, pool, rules.quiet_below);
    merge_loop(words, pairs, Tokens::new(), &rules, cfg, None, None, pool, progress).0
}

impl Rules {
    fn of(cfg: &TrainConfig) -> Rules {
        let max_len = cfg.max_token_length.unwrap_or(usize::MAX) as u64;
        #[cfg(test)]
        let (quiet_below, forget_quiet_above) = (QUIET_START.with(|q| q.get()), FORGET_ABOVE.with(|f| f.get()));
        #[cfg(not(test))]
        let (quiet_below, forget_quiet_above) = (pairs::QUIET_BELOW, pairs::FORGET_QUIET_ABOVE);
        let hf = cfg.tie_break == TieBreak::Hf;
        // (HF's counts of long pairs depend on how they formed, which a recount cannot tell.)
        let forget_quiet_above = if hf && max_len != u64::MAX { usize::MAX } else { forget_quiet_above };
        let ties = if hf { Ties::HfRank } else { Ties::Bytes };
        Rules { hf, ties, max_len, min_count: cfg.min_frequency.max(1).min(i64::MAX as u64) as i64, quiet_below, forget_quiet_above }
    }
}

/// Words cut into a base vocabulary's tokens: word `i` is `ids[offsets[i]..offsets[i + 1]]`
/// (offsets checked by the caller), each id an internal one or, with `internal`, mapped by it;
/// its count `counts[i]`.
#[derive(Clone, Copy)]
pub struct Segmented<'a> {
    pub ids: &'a [u32],
    pub internal: Option<&'a [u32]>,
    pub offsets: &'a [i64],
    pub counts: &'a [u64],
}

impl<'a> Segmented<'a> {
    /// Words of internal ids.
    #[cfg(test)]
    pub fn of(ids: &'a [u32], offsets: &'a [i64], counts: &'a [u64]) -> Self {
        Segmented { ids, internal: None, offsets, counts }
    }

    /// The internal id of `id`, if `internal` maps it.
    #[inline(always)]
    fn id(&self, id: u32) -> Option<u32> {
        match self.internal {
            None => Some(id),
            Some(t) => t.get(id as usize).copied(),
        }
    }
}

/// Learns merges that extend a vocabulary: `base` are its tokens of two bytes or more (in its
/// id order, internal ids 256..), the words are already cut into tokens by its merges, and
/// only new token strings count towards `max_new_tokens`. `base_merges` are the base's merges:
/// when one re-forms (a new token rebuilt a string it joins), it is applied in the words, as
/// the encoder applies it at its own rank, but not emitted again. The rules are those of
/// [`train`]. An id that `internal` does not map, or not of the base, is an error.
///
/// `floor`: the words are pieces cut where only pairs counting less than this could form
/// (`crate::encode::segment::pieces`), so the merges are those of the whole words only while
/// the best pair counts at least this and every merge makes a new token (a reused token's
/// occurrences would have two make-ups, which the cut's bound does not cover): `None` as soon
/// as either fails (a floor at or below `min_frequency` only for the latter). 0: no floor. A
/// floor with HF's tie rule and `max_token_length` is an error (long pairs' counts there
/// depend on how they formed).
pub fn train_extending(
    base: &[Box<[u8]>],
    base_merges: &[(Vec<u8>, Vec<u8>)],
    words: Segmented<'_>,
    cfg: &TrainConfig,
    floor: u64,
    progress: &mut dyn FnMut(usize) -> bool,
) -> Result<Option<Vec<(Vec<u8>, Vec<u8>)>>, String> {
    let _mapped = crate::memory::MapBigAllocations::new();
    let timing = std::env::var_os("HF_BPE_TRAIN_TIMING").is_some();
    let t0 = std::time::Instant::now();
    if timing {
        eprintln!("train: extending: {} words, {} symbols, RSS {}", words.counts.len(), words.ids.len(), crate::memory::rss_mib());
    }
    let toks = Tokens::with_base(base)?;
    let pool = crate::pool::get(crate::pool::default_threads());
    let pool = pool.as_deref();
    let stretches: Vec<&[u32]> = words.ids.chunks(1 << 20).collect();
    let outside = |t: &&u32| words.id(**t).is_none_or(|i| i as usize >= toks.count());
    if let Some(bad) = crate::pool::map(pool, &stretches, |s| s.iter().find(outside).copied()).into_iter().flatten().next() {
        return Err(match words.internal {
            Some(t) if bad as usize >= t.len() => format!("token id {bad} is not below len(internal) = {}", t.len()),
            _ => format!("token id {bad} of a word is not in the base vocabulary ({} tokens)", toks.count()),
        });
    }
    let rules = Rules::of(cfg);
    if cfg.max_new_tokens == 0 || words.counts.len() > u32::MAX as usize - 1 {
        return Ok(Some(Vec::new()));
    }
    let mut known = rustc_hash::FxHashSet::default();
    for (a, b) in base_merges {
        if let (Some(x), Some(y)) = (toks.id_of(a), toks.id_of(b)) {
            known.insert((x, y));
        }
    }
    if floor > 0 && rules.hf && rules.max_len != u64::MAX {
        return Err("a floor needs counts that do not depend on how pairs formed: not with tie_break='hf' and max_token_length".into());
    }
    // (Below `min_count`, the loop stops on the pieces as on the whole words: only a reused
    // token gives up then.)
    let floor = (floor > 0).then(|| if floor > rules.min_count as u64 { floor.min(i64::MAX as u64) as i64 } else { 0 });
    let (merges, below) = if small_ids(toks.count(), cfg) {
        extending_loop(Words::<u16>::from_segmented(words, pool), toks, &rules, cfg, known, floor, pool, progress, t0)
    } else {
        extending_loop(Words::<u32>::from_segmented(words, pool), toks, &rules, cfg, known, floor, pool, progress, t0)
    };
    Ok((!below).then_some(merges))
}

/// The pairs of the base's segmentation, then the merge loop.
#[allow(clippy::too_many_arguments)]
fn extending_loop<S: Sym>(
    words: Words<S>,
    toks: Tokens,
    rules: &Rules,
    cfg: &TrainConfig,
    known: rustc_hash::FxHashSet<(u32, u32)>,
    floor: Option<i64>,
    pool: Option<&rayon::ThreadPool>,
    progress: &mut dyn FnMut(usize) -> bool,
    t0: std::time::Instant,
) -> (Vec<(Vec<u8>, Vec<u8>)>, bool) {
    let timing = std::env::var_os("HF_BPE_TRAIN_TIMING").is_some();
    if timing {
        eprintln!("train: extending: words built in {:?}", t0.elapsed());
    }
    let pairs = Pairs::build_general(&words, toks.count(), rules.counted_at_start(&toks), rules.quiet_below, rules.forget_quiet_above, pool);
    if timing {
        eprintln!("train: extending: pairs built in {:?}", t0.elapsed());
    }
    merge_loop(words, pairs, toks, rules, cfg, Some(known), floor, pool, progress)
}

/// The merge loop proper, from the words, their pairs and the tokens so far; and whether it
/// gave up under `floor` ([`train_extending`]).
#[allow(clippy::too_many_arguments)]
fn merge_loop<S: Sym>(
    mut words: Words<S>,
    mut pairs: Pairs,
    mut toks: Tokens,
    rules: &Rules,
    cfg: &TrainConfig,
    mut known: Option<rustc_hash::FxHashSet<(u32, u32)>>,
    floor: Option<i64>,
    pool: Option<&rayon::ThreadPool>,
    progress: &mut dyn FnMut(usize) -> bool,
) -> (Vec<(Vec<u8>, Vec<u8>)>, bool) {
    // `known`: merges not to emit again (extending: the base's, then each new one).
    // HF_BPE_TRAIN_TIMING=1 prints the time of each stage to stderr (for profiling).
    let timing = std::env::var_os("HF_BPE_TRAIN_TIMING").is_some();
    let t0 = std::time::Instant::now();
    let (hf, ties) = (rules.hf, rules.ties);
    let mut merges = Vec::new();
    let mut heap = initial_heap(&pairs, &toks, rules);
    if timing {
        eprintln!("train: words and initial pairs {:?} ({} words, {} pairs), RSS {}", t0.elapsed(), words.len(), pairs.len(), crate::memory::rss_mib());
    }
    let mut s = Scratch::default();
    let mut veto = Vetoes::default();
    let (mut new_tokens, mut gave_up) = (0usize, false);
    let step = (cfg.max_new_tokens / 100).max(1);
    while new_tokens < cfg.max_new_tokens {
        let best = pop_best(&mut heap, &pairs, &toks, ties);
        // Every quiet pair is below the threshold: the heap's best is the best of all unless it
        // is below too (and the threshold could still matter for `min_count`).
        let below = best.as_ref().is_none_or(|e| e.count < pairs.quiet_below);
        if below && pairs.quiet_below > rules.min_count && !pairs.quiet_known() {
            pairs.recount_quiet(&words, toks.count(), rules.counted_at_start(&toks), pool);
        }
        if below && pairs.quiet_below > rules.min_count && pairs.any_quiet(pool) {
            let order = |x: &Entry, y: &Entry| better(x, y, &toks, &pairs, ties);
            if let Some(e) = best {
                heap.push(e, &order);
            }
            let to = match best {
                Some(e) => (pairs.quiet_below / 8).min(e.count),
                None => pairs.quiet_below / 8,
            };
            for id in pairs.lower_threshold(to, pool) {
                let e = Entry { count: pairs.count[id as usize], pair: id };
                heap.push(e, &|x, y| better(x, y, &toks, &pairs, ties));
            }
            pairs.complete(&words);
            continue;
        }
        if floor.is_some_and(|f| f > 0 && best.as_ref().is_none_or(|e| e.count < f)) {
            gave_up = true;
            break;
        }
        let Some(top) = best else { break };
        if top.count < rules.min_count {
            break;
        }
        let p = top.pair as usize;
        let (a, b) = (pairs.left[p], pairs.right[p]);
        if let Some(f) = &cfg.filter {
            let base = known.as_ref().is_some_and(|k| k.contains(&(a, b)));
            if !base && !veto.allowed(f, &toks, a, b) {
                if veto.stopped {
                    break;
                }
                continue; // (dropped from the heap; pushed again if it rises, dropped again)
            }
        }
        if pairs.is_partial(p) {
            pairs.complete(&words);
        }
        let (c, is_new) = toks.merge(a, b);
        if floor.is_some() && !is_new {
            gave_up = true;
            break;
        }
        if !is_new && !pairs.quiet_known() {
            // (The words as they are before this merge; a reused token adds no token.)
            pairs.recount_quiet(&words, toks.count(), rules.counted_at_start(&toks), pool);
        }
        pairs.begin_merge(!is_new, pool);
        if known.as_mut().is_none_or(|k| k.insert((a, b))) {
            merges.push((toks.get(a).to_vec(), toks.get(b).to_vec()));
        }
        pairs.take_words(p, &mut s.words);
        s.new_token = is_new;
        merge_in_words(&mut words, &mut pairs, &toks, rules, (a, b, c), &mut s, pool);
        // The merged pair is gone from every word. HF's trainer never decrements it (only its
        // neighbours), which only matters if the pair re-forms through a reused token.
        if !hf {
            pairs.count[p] = 0;
        }
        pairs.settle(pool);
        if words.worth_compacting() {
            words.compact();
        }
        push_touched(&mut heap, &pairs, &toks, ties, &mut s.touched);
        s.merge_no = s.merge_no.wrapping_add(1);
        if s.merge_no == u32::MAX {
            // Stamps would collide with "never" (only after 4 billion merges).
            pairs.reset_stamps();
            s.merge_no = 0;
        }
        if is_new {
            new_tokens += 1;
            if new_tokens % step == 0 && !progress(new_tokens) {
                break;
            }
        }
    }
    if timing {
        let mb = |b: usize| b as f64 / (1 << 20) as f64;
        eprintln!(
            "train: merge loop done at {:?} (RSS {}): {} merges; {} words ({:.1} MiB symbols, {:.1} MiB records); {}; heap {} entries ({:.1} MiB) (in use)",
            t0.elapsed(),
            crate::memory::rss_mib(),
            merges.len(),
            words.len(),
            mb(words.syms.len() * std::mem::size_of::<S>()),
            mb(words.record_bytes()),
            pairs.sizes(),
            heap.v.len(),
            mb(heap.v.len() * std::mem::size_of::<Entry>())
        );
    }
    (merges, gave_up)
}

#[cfg(test)]
mod tests;
