//! Adjacent pairs of a training run: their counts and, for each pair, the words that hold it.
//!
//! * **Full and quiet pairs.** The [`Index`] maps a pair to its dense `u32` id, for a *full*
//!   pair (counts, list heads and "touched in this merge" stamps are plain vectors indexed by
//!   it), or holds only the count of a *quiet* one. A pair formed in a merge is full while the
//!   merge runs; if it ends below [`Pairs::quiet_below`] it turns quiet (its id and list are
//!   freed, it has no heap entry). Every pair at or above the threshold is full, so while the
//!   heap's best is at or above it, it is the best of all. When the best falls below it, the
//!   threshold is lowered and the quiet pairs above the new one become full with their lists
//!   rebuilt by one walk over the words ([`Pairs::complete`]); the same walk completes a pair
//!   that turned full by rising (a reused token) when it is picked. The index lookup is the
//!   only hashing of the merge loop.
//! * **Lazy lists.** A word stays listed after it lost the pair; the merge checks it (about half
//!   the visits on English find an occurrence). A pair whose count falls to 0 drops its lists.
//! * **Lists as varint gaps.** The lists are most of the merge loop's memory, so word ids are
//!   stored as LEB128 varints of the gap from the previous id (1-3 bytes instead of 4). The
//!   initial lists are one byte vector laid out by a counting sort (ids ascending); words added
//!   later (when a pair's count rises in them) go to the pair's later list ([`super::lists`]:
//!   one id in the head, then unrolled nodes of zigzag gaps), so adding is an append.
//! * **Initial pairs are byte pairs**, so dense 65,536-slot tables replace hashing and sorting;
//!   they are counted in parallel per chunk of words when a pool is there.

use rayon::prelude::*;

use super::index::{Index, QUIET};
use super::lists::{Lists, NIL};
use crate::varint::{get, put, varint_len};
use super::words::{Sym, Words};

/// The quiet threshold a run starts with (see the module doc).
pub const QUIET_BELOW: i64 = 64;

/// A byte pair's weighted count and number of words, while the initial pairs are counted.
#[derive(Clone, Copy, Default)]
struct Tally {
    count: i64,
    occ: u64,
}

/// A stretch of sorted occurrences, walked ([`Pairs::from_sorted`]): each pair for the index
/// (a full pair's value is its place in `full`), the full pairs' counts and their initial
/// lists, one after another in `bytes`.
#[derive(Default)]
struct Walked {
    groups: Vec<(u32, u32, u32)>,
    full: Vec<(u32, u32, i64)>,
    bytes: Vec<u8>,
    lens: Vec<u32>,
}

/// The pairs of occurrences sorted by pair (`key`), each pair's words ascending: a pair at or
/// above `threshold` is full (its count and its list of words), the others quiet.
fn walk<O: Copy>(occ: &[O], key: impl Fn(O) -> u64, pair: impl Fn(O) -> (u32, u32), word: impl Fn(O) -> usize, count: impl Fn(O) -> i64, threshold: i64) -> Walked {
    let mut out = Walked::default();
    let mut i = 0;
    while i < occ.len() {
        let k = key(occ[i]);
        let mut end = i + 1;
        while end < occ.len() && key(occ[end]) == k {
            end += 1;
        }
        let (a, b) = pair(occ[i]);
        let group = &occ[i..end];
        i = end;
        let count = group.iter().fold(0i64, |c, &o| c.saturating_add(count(o)));
        if count >= threshold || count >= QUIET as i64 {
            out.groups.push((a, b, out.full.len() as u32));
            out.full.push((a, b, count));
            let start = out.bytes.len();
            let mut last = -1i64;
            for &o in group {
                let w = word(o) as i64;
                if w != last {
                    let mut buf = [0u8; 10];
                    let n = put((w - last) as u64, &mut buf);
                    out.bytes.extend_from_slice(&buf[..n]);
                    last = w;
                }
            }
            out.lens.push(u32::try_from(out.bytes.len() - start).unwrap_or(u32::MAX));
        } else if count > 0 {
            out.groups.push((a, b, QUIET | count as u32));
        }
    }
    out
}

/// `f` of each item, in order: on `pool`'s threads, or on the calling thread without one.
fn on<T: Sync, R: Send>(pool: Option<&rayon::ThreadPool>, items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    match pool {
        Some(pool) => pool.install(|| items.par_iter().map(&f).collect()),
        None => items.iter().map(f).collect(),
    }
}

/// `f(make(left, right, word))` for each counted pair of the words `ws`, in order.
#[inline(always)]
fn each_occurrence<S: Sym, O>(words: &Words<S>, counted: &impl Fn(u32, u32) -> bool, make: &impl Fn(u32, u32, usize) -> O, ws: std::ops::Range<usize>, mut f: impl FnMut(O)) {
    for w in ws {
        for p in words.syms_of(w).windows(2) {
            let (x, y) = (p[0].id(), p[1].id());
            if counted(x, y) {
                f(make(x, y, w));
            }
        }
    }
}

/// Occurrences are bucketed by this many top bits of their pair ([`Pairs::build_general`]).
const BUCKET_BITS: u32 = 11;

/// All mutable pair state.
pub struct Pairs {
    index: Index,
    pub left: Vec<u32>,
    pub right: Vec<u32>,
    pub count: Vec<i64>,
    /// Words listed at the start, for the initial pairs (ids `0..init_len.len()`): varint gaps
    /// (the first from -1) at `init_bytes[init_start..init_start + init_len]`, ids ascending.
    init_start: Vec<u64>,
    init_len: Vec<u32>,
    init_bytes: Vec<u8>,
    /// Words added later (when the pair's count rose in them): the heads of their lists.
    head: Vec<u32>,
    later: Lists,
    /// Merge number in which this pair's count last rose (to push it once per merge).
    touched: Vec<u32>,
    /// Full pairs whose lists may miss words (they were quiet); see [`Pairs::complete`].
    partial: Vec<bool>,
    partials: usize,
    /// Ids given out in this merge (they turn quiet at its end if below the threshold), and ids
    /// free for reuse (never in the heap).
    fresh: Vec<u32>,
    free_ids: Vec<u32>,
    /// Pairs below this count are quiet after a merge; lowered when the heap falls below it.
    pub quiet_below: i64,
    quiet: usize,
}

impl Pairs {
    fn empty(quiet_below: i64) -> Pairs {
        Pairs {
            index: Index::new(),
            left: Vec::new(),
            right: Vec::new(),
            count: Vec::new(),
            init_start: Vec::new(),
            init_len: Vec::new(),
            init_bytes: Vec::new(),
            head: Vec::new(),
            later: Lists::new(),
            touched: Vec::new(),
            partial: Vec::new(),
            partials: 0,
            fresh: Vec::new(),
            free_ids: Vec::new(),
            quiet_below: quiet_below.max(1),
            quiet: 0,
        }
    }

    /// A new full pair's id (a freed one if there is one), with `count` and empty lists.
    fn new_id(&mut self, a: u32, b: u32, count: i64) -> usize {
        let id = match self.free_ids.pop() {
            Some(id) => {
                let i = id as usize;
                (self.left[i], self.right[i], self.count[i], self.touched[i]) = (a, b, count, u32::MAX);
                i
            }
            None => {
                self.left.push(a);
                self.right.push(b);
                self.count.push(count);
                self.head.push(NIL);
                self.touched.push(u32::MAX);
                self.partial.push(false);
                self.left.len() - 1
            }
        };
        assert!(id < QUIET as usize, "more than 2^31 pairs with their own entry");
        id
    }

    /// Every byte pair of the words with its weighted count and its words (in word order,
    /// once per word), in key order.
    pub fn build<S: Sym>(words: &Words<S>, pool: Option<&rayon::ThreadPool>, quiet_below: i64) -> Pairs {
        let nwords = words.len();
        let byte_pair = |p: &[S]| (p[0].id() << 8 | p[1].id()) as usize;
        // One 1 MiB table per piece of work: mapped while the merge loop's allocator setting
        // holds (`crate::memory`), so a pool thread's heap keeps no hole of it.
        let tally = |ws: std::ops::Range<usize>| {
            let mut t = vec![Tally::default(); 1 << 16];
            for w in ws {
                let c = words.count(w);
                for p in words.syms_of(w).windows(2) {
                    let k = &mut t[byte_pair(p)];
                    k.count = k.count.saturating_add(c);
                    k.occ += 1;
                }
            }
            t
        };
        let tallies = match pool {
            Some(pool) => pool.install(|| {
                let chunk = (nwords / (pool.current_num_threads() * 4)).max(4096);
                (0..nwords.div_ceil(chunk)).into_par_iter().map(|i| tally(i * chunk..((i + 1) * chunk).min(nwords))).reduce(
                    || vec![Tally::default(); 1 << 16],
                    |mut t1, t2| {
                        for (a, b) in t1.iter_mut().zip(&t2) {
                            a.count = a.count.saturating_add(b.count);
                            a.occ += b.occ;
                        }
                        t1
                    },
                )
            }),
            None => tally(0..nwords),
        };
        let mut pairs = Pairs::empty(quiet_below);
        // The bytes of each byte pair's list (gaps between the ids of the words holding it).
        let mut last = vec![-1i64; 1 << 16];
        let mut size = vec![0u64; 1 << 16];
        for w in 0..nwords {
            for p in words.syms_of(w).windows(2) {
                let k = byte_pair(p);
                if last[k] != w as i64 {
                    size[k] += varint_len((w as i64 - last[k]) as u64) as u64;
                    last[k] = w as i64;
                }
            }
        }
        // Pair ids for the byte pairs that occur, in key order; `fill[k]` = next free byte.
        let mut fill = vec![0u64; 1 << 16];
        let mut total = 0u64;
        for k in 0..1usize << 16 {
            if tallies[k].occ == 0 {
                continue;
            }
            let (a, b) = ((k >> 8) as u32, (k & 255) as u32);
            let id = pairs.new_id(a, b, tallies[k].count);
            pairs.index.put(a, b, id as u32);
            pairs.init_start.push(total);
            pairs.init_len.push(u32::try_from(size[k]).unwrap_or(u32::MAX));
            fill[k] = total;
            total += size[k];
        }
        pairs.init_bytes = vec![0; total as usize + 10];
        last.iter_mut().for_each(|l| *l = -1);
        for w in 0..nwords {
            for p in words.syms_of(w).windows(2) {
                let k = byte_pair(p);
                if last[k] != w as i64 {
                    let f = fill[k] as usize;
                    fill[k] += put((w as i64 - last[k]) as u64, &mut pairs.init_bytes[f..]) as u64;
                    last[k] = w as i64;
                }
            }
        }
        pairs.init_bytes.truncate(total as usize);
        pairs
    }

    /// Every pair of words whose symbols are any tokens (a base vocabulary's segmentation);
    /// `counted(left, right)` says which pairs count at the start.
    ///
    /// The occurrences `(pair, word)` are gathered and sorted (on `pool`'s threads when there is
    /// one), so each pair's words come together, ascending: a pair at or above the quiet
    /// threshold gets its id and its initial list in one go, the others are quiet from the
    /// start (superword spans hold millions of pairs, most of them rare). Adding each
    /// occurrence through the index and a later list instead was a random access per
    /// occurrence ([log](../../docs/performance.md#superword-training)).
    pub fn build_general<S: Sym>(words: &Words<S>, n_tokens: usize, counted: impl Fn(u32, u32) -> bool + Sync, quiet_below: i64, pool: Option<&rayon::ThreadPool>) -> Pairs {
        // An occurrence packed in a u64, `(left, right, word, count)`, when the pair and the word
        // fit (up to a few million tokens and spans), sorted on the pair's bits in word order.
        // The low bits left hold the word's count if it fits (most are 1), so summing a pair's
        // count reads no word record; a count that does not fit is looked up.
        let sym_bits = usize::BITS - n_tokens.saturating_sub(1).leading_zeros();
        let word_bits = usize::BITS - words.len().saturating_sub(1).leading_zeros();
        if 2 * sym_bits + word_bits > 64 {
            return Self::build_general_wide(words, counted, quiet_below, pool);
        }
        let count_bits = (64 - 2 * sym_bits - word_bits).min(32);
        let big = (1u64 << count_bits) - 1; // (0 when there are no bits: always looked up)
        let at = word_bits + count_bits;
        let pack = |x: u32, y: u32, w: usize| {
            let c = (words.count(w) as u64).min(big);
            (((x as u64) << sym_bits | y as u64) << at) | (w as u64) << count_bits | if c == big { 0 } else { c }
        };
        // Sorted in two steps: the occurrences are written straight into buckets by the top
        // bits of their pair (each stretch of words counts its own first, so each bucket is in
        // word order), then each bucket is sorted on the rest of the pair and walked while it
        // is in the caches.
        let key_bits = 2 * sym_bits;
        let top = key_bits.min(BUCKET_BITS);
        let bucket = |o: u64| (o >> (at + key_bits - top)) as usize;
        let n = words.len();
        let step = n.div_ceil(pool.map_or(1, |p| p.current_num_threads() * 4)).max(1);
        let stretches: Vec<_> = (0..n).step_by(step).map(|s| s..(s + step).min(n)).collect();
        let counts: Vec<Vec<usize>> = on(pool, &stretches, |ws| {
            let mut c = vec![0usize; 1 << top];
            each_occurrence(words, &counted, &pack, ws.clone(), |o| c[bucket(o)] += 1);
            c
        });
        // Where each stretch's occurrences of each bucket go: buckets in order, stretches in order.
        let mut bounds = vec![0usize; (1 << top) + 1];
        let mut starts = vec![vec![0usize; 1 << top]; counts.len()];
        let mut next = 0;
        for d in 0..1 << top {
            bounds[d] = next;
            for (s, c) in starts.iter_mut().zip(&counts) {
                s[d] = next;
                next += c[d];
            }
        }
        bounds[1 << top] = next;
        let mut occ: Vec<u64> = Vec::with_capacity(next);
        let out = occ.spare_capacity_mut().as_mut_ptr() as usize;
        let jobs: Vec<_> = stretches.into_iter().zip(starts).zip(counts).collect();
        on(pool, &jobs, |((ws, pos), count)| {
            let mut pos = pos.clone();
            let ends: Vec<usize> = pos.iter().zip(count).map(|(p, c)| p + c).collect();
            each_occurrence(words, &counted, &pack, ws.clone(), |o| {
                let d = bucket(o);
                assert!(pos[d] < ends[d], "the pairs counted twice agree");
                // SAFETY: the stretches' ranges of positions are disjoint and within the capacity
                // (the counts partition 0..next), and the assert keeps each within its own.
                unsafe { (out as *mut u64).add(pos[d]).write(o) };
                pos[d] += 1;
            });
            assert!(pos == ends, "the pairs counted twice agree");
        });
        // SAFETY: every one of the `next` positions was written once (asserted above).
        unsafe { occ.set_len(next) };
        // Runs of whole buckets of about equal size, sorted and walked on the pool's threads.
        let runs = pool.map_or(1, |p| p.current_num_threads() * 4);
        let mut pieces = Vec::new();
        let (mut rest, mut from, mut d) = (&mut occ[..], 0, 0);
        while d < 1 << top {
            let first = d;
            while d < 1 << top && (d == first || bounds[d] - from < next.div_ceil(runs)) {
                d += 1;
            }
            let (piece, r) = std::mem::take(&mut rest).split_at_mut(bounds[d] - from);
            pieces.push((piece, first..d));
            (rest, from) = (r, bounds[d]);
        }
        let word = |o: u64| ((o >> count_bits) & ((1 << word_bits) - 1)) as usize;
        let count = |o: u64| match o & big {
            0 => words.count(word(o)),
            c => c as i64,
        };
        let pair_of = |o: u64| ((o >> (at + sym_bits)) as u32, ((o >> at) & ((1 << sym_bits) - 1)) as u32);
        let threshold = quiet_below.max(1);
        let sort_and_walk = |(occ, ds): (&mut [u64], std::ops::Range<usize>)| {
            let mut scratch = Vec::new();
            let base = bounds[ds.start];
            for d in ds {
                crate::radix::sort_by_bits(&mut occ[bounds[d] - base..bounds[d + 1] - base], &mut scratch, at, at + key_bits - top);
            }
            walk(occ, |o| o >> at, pair_of, word, count, threshold)
        };
        let walked: Vec<Walked> = match pool {
            Some(pool) => pool.install(|| pieces.into_par_iter().map(sort_and_walk).collect()),
            None => pieces.into_iter().map(sort_and_walk).collect(),
        };
        Self::join(quiet_below, walked, pool)
    }

    /// [`Self::build_general`] where a packed occurrence would not fit in 64 bits.
    fn build_general_wide<S: Sym>(words: &Words<S>, counted: impl Fn(u32, u32) -> bool + Sync, quiet_below: i64, pool: Option<&rayon::ThreadPool>) -> Pairs {
        let mut occ: Vec<(u64, u32)> = Vec::new();
        each_occurrence(words, &counted, &|x, y, w| ((x as u64) << 32 | y as u64, w as u32), 0..words.len(), |o| occ.push(o));
        match pool {
            Some(pool) => pool.install(|| occ.par_sort_unstable()),
            None => occ.sort_unstable(),
        }
        let pair_of = |o: (u64, u32)| ((o.0 >> 32) as u32, o.0 as u32);
        let walked = walk(&occ, |o| o.0, pair_of, |o| o.1 as usize, |o| words.count(o.1 as usize), quiet_below.max(1));
        Self::join(quiet_below, vec![walked], pool)
    }

    /// The pairs of walked stretches of occurrences, in order (ids in key order).
    fn join(quiet_below: i64, walked: Vec<Walked>, pool: Option<&rayon::ThreadPool>) -> Pairs {
        let mut pairs = Pairs::empty(quiet_below);
        let mut groups = Vec::with_capacity(walked.len());
        pairs.init_bytes.reserve_exact(walked.iter().map(|w| w.bytes.len()).sum());
        for mut w in walked {
            let first = pairs.init_len.len() as u32;
            let mut start = pairs.init_bytes.len() as u64;
            for (&(a, b, count), &len) in w.full.iter().zip(&w.lens) {
                let id = pairs.new_id(a, b, count);
                debug_assert_eq!(id, pairs.init_len.len());
                pairs.init_start.push(start);
                pairs.init_len.push(len);
                start += len as u64;
            }
            pairs.init_bytes.extend_from_slice(&w.bytes);
            pairs.quiet += w.groups.len() - w.full.len();
            drop(w.bytes);
            w.groups.iter_mut().filter(|g| g.2 & QUIET == 0).for_each(|g| g.2 += first);
            groups.push(w.groups);
        }
        pairs.index = Index::of_new(&groups, pool);
        pairs
    }

    pub fn len(&self) -> usize {
        self.left.len()
    }

    /// The words listed for pair `p`, into `buf` (sorted and deduped when the later list had
    /// any: forward memory order, which the hardware prefetcher likes); the lists are emptied.
    pub fn take_words(&mut self, p: usize, buf: &mut Vec<u32>) {
        buf.clear();
        if p < self.init_len.len() {
            let (ist, iln) = (self.init_start[p] as usize, self.init_len[p] as usize);
            let b = &self.init_bytes[ist..ist + iln];
            let (mut pos, mut w) = (0, -1i64);
            while pos < b.len() {
                w += get(b, &mut pos) as i64;
                buf.push(w as u32);
            }
            self.drop_initial(p);
        }
        let later = self.head[p] != NIL;
        self.later.drain(&mut self.head[p], buf);
        if later {
            buf.sort_unstable();
            buf.dedup();
        }
    }

    /// Empties the lists of pair `p`.
    fn forget(&mut self, p: usize) {
        if p < self.init_len.len() {
            self.drop_initial(p);
        }
        self.later.clear(&mut self.head[p]);
    }

    /// Empties initial list `p` and gives back the pages that no live list shares any more (the
    /// lists lie in id order; a live list is never empty). The scan stops at the pages `p`
    /// touches: a page is given back when its last list dies.
    fn drop_initial(&mut self, p: usize) {
        if self.init_len[p] == 0 {
            return;
        }
        let base = self.init_bytes.as_ptr() as usize;
        let (n, total) = (self.init_len.len(), self.init_bytes.len());
        let start = |i: usize| if i < n { self.init_start[i] as usize } else { total };
        let (first, last) = (start(p), start(p) + self.init_len[p] as usize);
        let page = crate::memory::page_size();
        let page_lo = ((base + first) / page * page).saturating_sub(base);
        let page_hi = ((base + last).div_ceil(page) * page).saturating_sub(base);
        self.init_len[p] = 0;
        let (mut lo, mut hi) = (p, p + 1);
        while lo > 0 && self.init_len[lo - 1] == 0 && start(lo) > page_lo {
            lo -= 1;
        }
        while hi < n && self.init_len[hi] == 0 && start(hi) < page_hi {
            hi += 1;
        }
        let (a, b) = (start(lo), start(hi));
        crate::memory::release_pages(&mut self.init_bytes[a..b]);
    }

    /// Asks for the index slot of `(x, y)` ahead of an [`apply`](Self::apply) (a hint).
    #[inline]
    pub fn prefetch(&self, x: u32, y: u32) {
        self.index.prefetch(x, y)
    }

    /// Changes the count of `(x, y)` by `delta` (a word's count, signed) for word `w`; a pair
    /// whose count rises lists `w` and is stamped once per merge into `touched`. A full pair
    /// whose count falls to 0 is in no word any more: its lists are freed (a word that forms it
    /// again is listed again then). A quiet pair that rises turns full, its list partial.
    #[inline]
    pub fn apply(&mut self, x: u32, y: u32, delta: i64, w: u32, merge_no: u32, touched: &mut Vec<u32>) {
        let id = match self.index.find(x, y) {
            Ok(at) => {
                let v = self.index.get(at);
                if v & QUIET != 0 {
                    let c = (v & !QUIET) as i64 + delta;
                    if delta <= 0 {
                        if c <= 0 {
                            self.index.remove(at);
                            self.quiet -= 1;
                        } else {
                            self.index.set(at, QUIET | c as u32);
                        }
                        return;
                    }
                    let id = self.new_id(x, y, c);
                    self.index.set(at, id as u32);
                    self.quiet -= 1;
                    self.partial[id] = true;
                    self.partials += 1;
                    self.fresh.push(id as u32);
                    id
                } else {
                    let id = v as usize;
                    self.count[id] = self.count[id].saturating_add(delta);
                    if delta <= 0 {
                        if delta < 0 && self.count[id] <= 0 {
                            self.forget(id);
                        }
                        return;
                    }
                    id
                }
            }
            Err(at) => {
                if delta <= 0 {
                    return; // (a pair that never counted, by `max_token_length`)
                }
                let id = self.new_id(x, y, delta);
                self.index.insert(at, x, y, id as u32);
                self.fresh.push(id as u32);
                id
            }
        };
        self.later.add(&mut self.head[id], w);
        if self.touched[id] != merge_no {
            self.touched[id] = merge_no;
            touched.push(id as u32);
        }
    }

    /// At the end of a merge: the pairs it gave an id that stayed below the threshold turn
    /// quiet (or leave the index, at 0); their ids are freed. They were never in the heap.
    pub fn settle(&mut self) {
        // (Each pair's index slot asked for a few pairs ahead: a bulk of them, a cache miss each.)
        const AHEAD: usize = 8;
        for k in 0..self.fresh.len() {
            if let Some(&next) = self.fresh.get(k + AHEAD) {
                self.index.prefetch(self.left[next as usize], self.right[next as usize]);
            }
            let id = self.fresh[k] as usize;
            let c = self.count[id];
            if c >= self.quiet_below {
                continue;
            }
            let at = self.index.find(self.left[id], self.right[id]).unwrap_or_else(|_| unreachable!("a full pair is in the index"));
            if c > 0 {
                self.index.set(at, QUIET | c as u32);
                self.quiet += 1;
            } else {
                self.index.remove(at);
            }
            self.later.clear(&mut self.head[id]);
            if self.partial[id] {
                self.partial[id] = false;
                self.partials -= 1;
            }
            self.count[id] = 0;
            self.free_ids.push(id as u32);
        }
        self.fresh.clear();
    }

    /// Whether quiet pairs remain.
    pub fn any_quiet(&self) -> bool {
        self.quiet > 0
    }

    /// Lowers the threshold to `to` (at least 1): the quiet pairs at or above it turn full,
    /// with partial lists, and their ids are returned (for the heap). [`complete`](Self::complete)
    /// must run before any of them is merged.
    pub fn lower_threshold(&mut self, to: i64) -> Vec<u32> {
        self.quiet_below = to.max(1);
        let mut rising = Vec::new();
        let below = self.quiet_below;
        self.index.for_each(|a, b, v| {
            if *v & QUIET != 0 && (*v & !QUIET) as i64 >= below {
                rising.push((a, b, (*v & !QUIET) as i64));
            }
        });
        rising
            .into_iter()
            .map(|(a, b, c)| {
                let id = self.new_id(a, b, c);
                self.index.put(a, b, id as u32);
                self.quiet -= 1;
                self.partial[id] = true;
                self.partials += 1;
                id as u32
            })
            .collect()
    }

    /// The id of `(a, b)` if it is a full pair.
    pub fn id_of(&self, a: u32, b: u32) -> Option<usize> {
        self.index.value(a, b).filter(|v| v & QUIET == 0).map(|v| v as usize)
    }

    /// Whether pair `p`'s lists may miss words.
    pub fn is_partial(&self, p: usize) -> bool {
        self.partial[p]
    }

    /// Rebuilds the lists of every partial pair from one walk over the words.
    pub fn complete<S: Sym>(&mut self, words: &Words<S>) {
        if self.partials == 0 {
            return;
        }
        for id in 0..self.partial.len() {
            if self.partial[id] {
                self.later.clear(&mut self.head[id]);
            }
        }
        for w in 0..words.len() {
            for p in words.syms_of(w).windows(2) {
                if let Some(v) = self.index.value(p[0].id(), p[1].id()) {
                    if v & QUIET == 0 && self.partial[v as usize] {
                        self.later.add(&mut self.head[v as usize], w as u32);
                    }
                }
            }
        }
        self.partial.iter_mut().for_each(|p| *p = false);
        self.partials = 0;
    }

    /// Forgets every stamp (when the merge counter wraps around).
    pub fn reset_stamps(&mut self) {
        self.touched.iter_mut().for_each(|s| *s = u32::MAX);
    }

    /// What the pair state holds, for the timing report.
    pub fn sizes(&self) -> String {
        let mb = |b: usize| b as f64 / (1 << 20) as f64;
        format!(
            "{} pairs, {} quiet below {} (index {:.1} MiB, tables {:.1} MiB), later lists {:.1} MiB ({:.1} MiB free), initial lists {:.1} MiB",
            self.index.len(),
            self.quiet,
            self.quiet_below,
            mb(self.index.bytes()),
            mb(self.left.len() * 25),
            mb(self.later.bytes()),
            mb(self.later.free_bytes()),
            mb(self.init_bytes.len())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_lists_each_word_once_in_order() {
        let mut pairs = Pairs::empty(1);
        let ids: Vec<u32> = (0..500u32).map(|i| (i * 7919) % 100_003).chain([5, 5, u32::MAX - 1, 0]).collect();
        let mut touched = Vec::new();
        for &w in &ids {
            pairs.apply(1, 2, 1, w, 0, &mut touched);
        }
        assert_eq!(touched, [0]);
        let mut got = Vec::new();
        pairs.take_words(0, &mut got);
        let mut want = ids.clone();
        want.sort_unstable();
        want.dedup();
        assert_eq!(got, want);
        pairs.take_words(0, &mut got);
        assert!(got.is_empty());
    }

    #[test]
    fn packed_and_wide_occurrences_build_the_same_pairs() {
        // Words of random tokens (a few with big counts: looked up, not packed), some pairs
        // repeated in a word, some not counted; both builds on two threads and on none.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let (mut syms, mut offsets, mut counts) = (Vec::new(), vec![0i64], Vec::new());
        for w in 0..30_000 {
            let len = 1 + next(7) as usize;
            syms.extend((0..len).map(|_| if next(2) == 0 { next(40) } else { next(3000) } as u32));
            offsets.push(syms.len() as i64);
            counts.push(if w % 97 == 0 { 1 << 40 } else { 1 + next(5) });
        }
        let words = Words::<u32>::from_segmented(&syms, &offsets, &counts);
        let counted = |a: u32, b: u32| a + b != 41;
        let n_tokens = 3000;
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let dump = |p: &Pairs| {
            let mut full: Vec<(u32, u32, i64, Vec<u8>)> = (0..p.init_len.len())
                .map(|i| {
                    let s = p.init_start[i] as usize;
                    (p.left[i], p.right[i], p.count[i], p.init_bytes[s..s + p.init_len[i] as usize].to_vec())
                })
                .collect();
            full.sort();
            let mut quiet = Vec::new();
            let mut ix = Index::new();
            std::mem::swap(&mut ix, &mut p.index.clone_for_test());
            ix.for_each(|a, b, v| quiet.push((a, b, *v)));
            quiet.sort();
            (full, quiet, p.quiet)
        };
        let want = dump(&Pairs::build_general_wide(&words, counted, 20, None));
        assert!(want.0.len() > 10 && want.2 > 10, "both full and quiet pairs");
        for pool in [Some(&pool), None] {
            // (2^24 tokens: one bit left for counts, all looked up; 2^25: too wide to pack.)
            for n in [n_tokens, 1 << 24, 1 << 25] {
                assert_eq!(dump(&Pairs::build_general(&words, n, counted, 20, pool)), want);
            }
            assert_eq!(dump(&Pairs::build_general_wide(&words, counted, 20, pool)), want);
        }
    }
}
