//! Adjacent pairs of a training run: their counts and, for each pair, the words that hold it.
//!
//! * **Full and quiet pairs.** One [`Index`] maps a *full* pair to its dense `u32` id (counts,
//!   list heads and "touched in this merge" stamps are plain vectors indexed by it), another
//!   holds only the count of each *quiet* one. A pair formed in a merge is full while the
//!   merge runs; if it ends below [`Pairs::quiet_below`] it turns quiet (its id and list are
//!   freed, it has no heap entry). Every pair at or above the threshold is full, so while the
//!   heap's best is at or above it, it is the best of all. When the best falls below it, the
//!   threshold is lowered and the quiet pairs above the new one become full with their lists
//!   rebuilt by one walk over the words ([`Pairs::complete`]); the same walk completes a pair
//!   that turned full by rising (a reused token) when it is picked. The index lookups are the
//!   only hashing of the merge loop.
//! * **Quiet changes logged.** A merge whose token is new forms only new pairs, so a quiet
//!   count can only fall; its changes (and the pairs turning quiet) go to a log, applied in
//!   bulk by parts of the quiet index, so the merge's lookups stay in the small index of full
//!   pairs (a few MiB where the quiet one is ~100 MiB for superword spans). A merge whose
//!   token existed before (a reused string) applies the log first and changes quiet counts in
//!   place ([`Pairs::begin_merge`]).
//! * **Quiet counts forgotten** in big builds ([`FORGET_QUIET_ABOVE`]; superword spans hold
//!   millions of rare pairs): a run whose best pairs stay far above the threshold never reads
//!   them, so the build drops them and nothing is logged. They are counted again from the words
//!   as they are then ([`Pairs::recount_quiet`]) the first time they are needed: the threshold
//!   lowered, or a reused token. Exact either way: every pair at or above the threshold is full.
//!   ([Log](../../docs/performance.md#superword-training).)
//! * **Lazy lists.** A word stays listed after it lost the pair; the merge checks it (about half
//!   the visits on English find an occurrence). A pair whose count falls to 0 drops its lists.
//! * **Lists as varint gaps.** The lists are most of the merge loop's memory, so word ids are
//!   stored as LEB128 varints of the gap from the previous id (1-3 bytes instead of 4). The
//!   initial lists are one byte vector laid out by a counting sort (ids ascending); words added
//!   later (when a pair's count rises in them) go to the pair's later list ([`super::lists`]:
//!   one id in the head, then unrolled nodes of zigzag gaps), so adding is an append.
//! * **Built in one go** ([`build`]): byte pairs in dense 65,536-slot tables, pairs of any
//!   tokens (extending, superword spans) from their occurrences sorted by pair, on the pool.

use super::index::{Index, QUIET};
use super::lists::{Lists, NIL};
use super::merge::Formed;
use crate::varint::get;
use super::words::{Sym, Words};

mod build;

/// The quiet threshold a run starts with (see the module doc).
pub const QUIET_BELOW: i64 = 64;
/// More pair occurrences than this at the start, and the quiet counts are forgotten (see the
/// module doc).
pub const FORGET_QUIET_ABOVE: usize = 1 << 22;
/// Logged changes of quiet counts applied together ([`Pairs::settle`]; the tests': a few).
#[cfg(not(test))]
const LOG_OPS: usize = 1 << 21;
#[cfg(test)]
const LOG_OPS: usize = 50;

/// All mutable pair state.
pub struct Pairs {
    /// The full pairs (and this merge's new ones): their ids.
    index: Index,
    /// The quiet pairs: their counts, up to the changes in `log`.
    quiet: Index,
    /// False while the quiet counts are forgotten (`quiet` and `log` empty; see the module doc).
    quiet_known: bool,
    /// Changes to quiet counts not yet in `quiet` (`(left, right, delta)`, in order; a new quiet
    /// pair is its count added), applied in bulk ([`Index::add_all`]).
    log: Vec<(u32, u32, i64)>,
    log_sorted: Vec<(u32, u32, i64)>,
    /// Whether this merge's token existed before it (a reused string): a pair it forms may
    /// then be quiet already ([`Pairs::begin_merge`]).
    reusing: bool,
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
}

impl Pairs {
    fn empty(quiet_below: i64) -> Pairs {
        Pairs {
            index: Index::new(),
            quiet: Index::new(),
            quiet_known: true,
            log: Vec::new(),
            log_sorted: Vec::new(),
            reusing: false,
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
    /// again is listed again then). A quiet pair's change is logged; one that rises (only
    /// through a reused token) turns full, its list partial.
    #[inline]
    pub fn apply(&mut self, x: u32, y: u32, delta: i64, w: u32, merge_no: u32, touched: &mut Vec<u32>) {
        let id = match self.index.find(x, y) {
            Ok(at) => {
                let id = self.index.get(at) as usize;
                self.count[id] = self.count[id].saturating_add(delta);
                if delta <= 0 {
                    if delta < 0 && self.count[id] <= 0 {
                        self.forget(id);
                    }
                    return;
                }
                id
            }
            Err(at) => {
                // A quiet pair, or one that never counted (by `max_token_length`), or a new one.
                if delta <= 0 {
                    if delta < 0 && self.reusing {
                        self.quiet.add_one(x, y, delta);
                    } else if delta < 0 && !(self.quiet.is_empty() && self.log.is_empty()) {
                        self.log.push((x, y, delta));
                    }
                    return;
                }
                // Only a reused token can form a pair that was there before (see `begin_merge`).
                let before = if self.reusing { self.quiet.take(x, y).map_or(0, |c| c as i64) } else { 0 };
                let id = self.new_id(x, y, before + delta);
                self.index.insert(at, x, y, id as u32);
                if before > 0 {
                    self.partial[id] = true;
                    self.partials += 1;
                }
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

    /// At the end of a merge that formed a new token: its pairs summed in `f` at or above the
    /// threshold become full pairs listed for the words that formed them (stamped into
    /// `touched`), those below are logged quiet, those at 0 or below were never there.
    pub fn add_formed(&mut self, f: &mut Formed, merge_no: u32, touched: &mut Vec<u32>) {
        for k in 0..f.keys.len() {
            let key = f.keys[k];
            let c = f.take(key);
            let (a, b) = f.pair(key);
            if c >= self.quiet_below {
                let id = self.new_id(a, b, c);
                self.index.put(a, b, id as u32);
                self.touched[id] = merge_no;
                touched.push(id as u32);
                f.ids[key as usize] = id as u32;
            } else if c > 0 && self.quiet_known {
                self.log.push((a, b, c));
            }
        }
        for &(key, w) in &f.words {
            let id = f.ids[key as usize];
            if id != u32::MAX {
                self.later.add(&mut self.head[id as usize], w);
            }
        }
        for &key in &f.keys {
            f.ids[key as usize] = u32::MAX;
        }
    }

    /// Before a merge: whether its token existed before (a reused string). Then a pair it
    /// forms may be quiet already (and lose occurrences in the same merge), so the log is
    /// applied first and quiet counts change in place during the merge; otherwise every pair
    /// a merge forms is new, and quiet counts only ever fall, which is what lets their changes
    /// wait in the log.
    pub fn begin_merge(&mut self, reused: bool, pool: Option<&rayon::ThreadPool>) {
        assert!(!reused || self.quiet_known, "the quiet counts are recounted before a reused token's merge");
        self.reusing = reused;
        if reused {
            self.flush(pool);
        }
    }

    /// Applies the logged changes to the quiet counts.
    fn flush(&mut self, pool: Option<&rayon::ThreadPool>) {
        if !self.log.is_empty() {
            self.quiet.add_all(&mut self.log, &mut self.log_sorted, pool);
        }
    }

    /// At the end of a merge: the pairs it gave an id that stayed below the threshold turn
    /// quiet (logged), or leave, at 0; their ids are freed. They were never in the heap. The
    /// log is applied once it holds [`LOG_OPS`] changes.
    pub fn settle(&mut self, pool: Option<&rayon::ThreadPool>) {
        for k in 0..self.fresh.len() {
            let id = self.fresh[k] as usize;
            let c = self.count[id];
            if c >= self.quiet_below {
                continue;
            }
            let (a, b) = (self.left[id], self.right[id]);
            let at = self.index.find(a, b).unwrap_or_else(|_| unreachable!("a full pair is in the index"));
            self.index.remove(at);
            if c > 0 && self.quiet_known {
                self.log.push((a, b, c));
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
        self.reusing = false;
        if self.log.len() >= LOG_OPS {
            self.flush(pool);
        }
    }

    /// Whether the quiet counts are kept (else [`recount_quiet`](Self::recount_quiet) before
    /// [`any_quiet`](Self::any_quiet) or a reused token's merge).
    pub fn quiet_known(&self) -> bool {
        self.quiet_known
    }

    /// Whether quiet pairs remain (the log applied first).
    pub fn any_quiet(&mut self, pool: Option<&rayon::ThreadPool>) -> bool {
        assert!(self.quiet_known, "the quiet counts are recounted before they are asked for");
        self.flush(pool);
        !self.quiet.is_empty()
    }

    /// Lowers the threshold to `to` (at least 1): the quiet pairs at or above it turn full,
    /// with partial lists, and their ids are returned (for the heap). [`complete`](Self::complete)
    /// must run before any of them is merged.
    pub fn lower_threshold(&mut self, to: i64, pool: Option<&rayon::ThreadPool>) -> Vec<u32> {
        self.flush(pool);
        self.quiet_below = to.max(1);
        let mut rising = Vec::new();
        let below = self.quiet_below;
        self.quiet.for_each(|a, b, v| {
            if *v as i64 >= below {
                rising.push((a, b, *v as i64));
            }
        });
        rising
            .into_iter()
            .map(|(a, b, c)| {
                let q = self.quiet.find(a, b).unwrap_or_else(|_| unreachable!("a quiet pair is in its index"));
                self.quiet.remove(q);
                let id = self.new_id(a, b, c);
                self.index.put(a, b, id as u32);
                self.partial[id] = true;
                self.partials += 1;
                id as u32
            })
            .collect()
    }

    /// The id of `(a, b)` if it is a full pair.
    pub fn id_of(&self, a: u32, b: u32) -> Option<usize> {
        self.index.value(a, b).map(|v| v as usize)
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
                    if self.partial[v as usize] {
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
        let quiet = match self.quiet_known {
            true => format!(
                "{} quiet below {} (quiet {:.1} MiB, log {:.1} MiB)",
                self.quiet.len(),
                self.quiet_below,
                mb(self.quiet.bytes()),
                mb((self.log.capacity() + self.log_sorted.capacity()) * std::mem::size_of::<(u32, u32, i64)>())
            ),
            false => format!("quiet ones below {} forgotten", self.quiet_below),
        };
        format!(
            "{} pairs, {quiet}; index {:.1} MiB, tables {:.1} MiB, later lists {:.1} MiB ({:.1} MiB free), initial lists {:.1} MiB",
            self.index.len() + self.quiet.len(),
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
}
