//! Adjacent pairs of a training run: their counts and, for each pair, the words that hold it.
//!
//! * Each pair gets a dense `u32` id the first time it is seen (one `FxHashMap<u64, u32>`
//!   lookup, the key `left << 32 | right`); counts, list heads and "touched in this merge"
//!   stamps are plain vectors indexed by it. That lookup is the only hashing of the merge loop.
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
use rustc_hash::FxHashMap;

use super::lists::{get, put, varint_len, Lists, NIL};
use super::words::{Sym, Words};

#[inline]
fn key(a: u32, b: u32) -> u64 {
    ((a as u64) << 32) | b as u64
}

/// A byte pair's weighted count and number of words, while the initial pairs are counted.
#[derive(Clone, Copy, Default)]
struct Tally {
    count: i64,
    occ: u64,
}

/// All mutable pair state.
pub struct Pairs {
    ids: FxHashMap<u64, u32>,
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
}

impl Pairs {
    #[inline]
    fn id(&mut self, a: u32, b: u32) -> usize {
        let n = self.left.len() as u32;
        let id = *self.ids.entry(key(a, b)).or_insert(n);
        if id == n {
            self.left.push(a);
            self.right.push(b);
            self.count.push(0);
            self.head.push(NIL);
            self.touched.push(u32::MAX);
        }
        id as usize
    }

    /// Every byte pair of the words with its weighted count and its words (in word order,
    /// once per word), in key order.
    pub fn build<S: Sym>(words: &Words<S>, pool: Option<&rayon::ThreadPool>) -> Pairs {
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
        let mut pairs = Pairs {
            ids: FxHashMap::default(),
            left: Vec::new(),
            right: Vec::new(),
            count: Vec::new(),
            init_start: Vec::new(),
            init_len: Vec::new(),
            init_bytes: Vec::new(),
            head: Vec::new(),
            later: Lists::new(),
            touched: Vec::new(),
        };
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
            let id = pairs.id((k >> 8) as u32, (k & 255) as u32);
            pairs.count[id] = tallies[k].count;
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

    /// Every pair of words whose symbols are any tokens (a base vocabulary's segmentation),
    /// through the hash map; `counted(left, right)` says which pairs count at the start.
    pub fn build_general<S: Sym>(words: &Words<S>, counted: impl Fn(u32, u32) -> bool) -> Pairs {
        let mut pairs = Pairs::build(&Words::<S>::from_segmented(&[], &[0], &[]), None);
        let mut scratch = Vec::new();
        for w in 0..words.len() {
            let c = words.count(w);
            for p in words.syms_of(w).windows(2) {
                let (x, y) = (p[0].id(), p[1].id());
                if counted(x, y) {
                    pairs.apply(x, y, c, w as u32, 0, &mut scratch);
                }
            }
            scratch.clear();
        }
        pairs.reset_stamps();
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
            self.init_len[p] = 0;
        }
        self.later.clear(&mut self.head[p]);
    }

    /// Changes the count of `(x, y)` by `delta` (a word's count, signed) for word `w`; a pair
    /// whose count rises lists `w` and is stamped once per merge into `touched`. A pair whose
    /// count falls to 0 is in no word any more: its lists are freed (a word that forms it again
    /// is listed again then).
    #[inline]
    pub fn apply(&mut self, x: u32, y: u32, delta: i64, w: u32, merge_no: u32, touched: &mut Vec<u32>) {
        let id = self.id(x, y);
        self.count[id] = self.count[id].saturating_add(delta);
        if delta <= 0 {
            if delta < 0 && self.count[id] <= 0 {
                self.forget(id);
            }
            return;
        }
        self.later.add(&mut self.head[id], w);
        if self.touched[id] != merge_no {
            self.touched[id] = merge_no;
            touched.push(id as u32);
        }
    }

    /// Forgets every stamp (when the merge counter wraps around).
    pub fn reset_stamps(&mut self) {
        self.touched.iter_mut().for_each(|s| *s = u32::MAX);
    }

    /// What the pair state holds, for the timing report.
    pub fn sizes(&self) -> String {
        let mb = |b: usize| b as f64 / (1 << 20) as f64;
        format!(
            "{} pairs (map {:.1} MiB, tables {:.1} MiB), later lists {:.1} MiB, initial lists {:.1} MiB",
            self.left.len(),
            mb(self.ids.capacity() * 13),
            mb(self.left.len() * 24),
            mb(self.later.bytes()),
            mb(self.init_bytes.len())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_lists_each_word_once_in_order() {
        let mut pairs = Pairs::build(&Words::<u16>::from_segmented(&[], &[0], &[]), None);
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
