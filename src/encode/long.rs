//! The merge of a long piece (more than `LARGE_PIECE` symbols: base64 blobs, CJK lines,
//! `"a" * 10**6`), O(n log n) in its symbols, with the same order as the short merge: lowest
//! rank first, leftmost first on ties.
//!
//! A linked list of symbols holds each one's pair rank (`rank_at`: a popped key is stale unless
//! it still holds, no pair lookup), and two queues of `rank << 32 | position` keys: the first
//! pairs sorted once (a stable radix sort on the rank for big pieces) and read in order, and the
//! pairs merges make in [`Hot`], runs of positions per rank. Merges sweep a rank's pairs left
//! to right, so the pairs they make arrive in order and most pops and pushes cost no heap work
//! ([log](../../docs/performance.md#the-miss-path)).
//! Memory: 24 bytes per symbol and 8 per queued pair (a 100 MB single piece needs about 3 GB).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rustc_hash::FxHashMap;

use super::pairs::NO_RANK;

/// Merges `toks` (< 4 Gi symbols: positions are u32) by `pair` (the rank of two adjacent ids,
/// `NO_RANK` for none) into `out`; `result` is the token a pair of a rank makes.
pub(super) fn merge(mut toks: Vec<u32>, pair: impl Fn(u32, u32) -> u32, result: impl Fn(u32) -> u32, out: &mut Vec<u32>) {
    let n = toks.len();
    if n < 2 {
        out.extend_from_slice(&toks);
        return;
    }
    let mut next: Vec<u32> = (1..=n as u32).collect();
    let mut prev: Vec<u32> = (0..n as u32).map(|i| i.wrapping_sub(1)).collect();
    let none = n as u32;
    let mut rank_at: Vec<u32> = (0..n).map(|i| if i + 1 < n { pair(toks[i], toks[i + 1]) } else { NO_RANK }).collect();
    let cold = sorted_keys(&rank_at);
    let mut ci = 0;
    let mut hot = Hot::new();
    loop {
        let c = cold.get(ci).copied().unwrap_or(u64::MAX);
        let key = match hot.min() {
            Some(h) if h < c => hot.pop(),
            _ if c != u64::MAX => {
                ci += 1;
                c
            }
            _ => break,
        };
        let (want, p) = ((key >> 32) as u32, key as u32 as usize);
        // Stale? A pair whose rank changed was queued again; one of the same rank is
        // interchangeable with the live pair (equal ranks always merge into the same token).
        if rank_at[p] != want {
            continue;
        }
        let q = next[p] as usize;
        toks[p] = result(want);
        rank_at[q] = NO_RANK;
        let nq = next[q];
        next[p] = nq;
        rank_at[p] = NO_RANK;
        if nq != none {
            prev[nq as usize] = p as u32;
            rank_at[p] = pair(toks[p], toks[nq as usize]);
            if rank_at[p] != NO_RANK {
                hot.push(((rank_at[p] as u64) << 32) | p as u64);
            }
        }
        let pp = prev[p];
        if pp != u32::MAX {
            let r = pair(toks[pp as usize], toks[p]);
            rank_at[pp as usize] = r;
            if r != NO_RANK {
                hot.push(((r as u64) << 32) | pp as u64);
            }
        }
    }
    let mut i = 0usize;
    while i < n {
        out.push(toks[i]);
        i = next[i] as usize;
    }
}

/// The queue of the pairs a long piece's merges make (see [`merge`]): per rank, a run of
/// positions in the order they were pushed, kept while they rise (merges sweep a rank's pairs
/// left to right, so the pairs they make mostly arrive in position order), the ranks with a
/// run in a binary heap, and a binary heap of keys for a push that would break a run's order.
/// A push is one map probe and an append; a pop reads a run's front.
#[derive(Default)]
struct Hot {
    /// rank -> index in `runs`.
    index: FxHashMap<u32, u32>,
    runs: Vec<VecDeque<u32>>,
    /// Ranks whose run is not empty, each once.
    ranks: BinaryHeap<Reverse<u32>>,
    /// The smallest key of the runs (u64::MAX for none).
    head: u64,
    low: BinaryHeap<Reverse<u64>>,
}

impl Hot {
    fn new() -> Self {
        Hot { head: u64::MAX, ..Default::default() }
    }

    fn push(&mut self, key: u64) {
        let (rank, pos) = ((key >> 32) as u32, key as u32);
        let n = self.runs.len() as u32;
        let i = *self.index.entry(rank).or_insert(n) as usize;
        if i == self.runs.len() {
            self.runs.push(VecDeque::new());
        }
        let run = &mut self.runs[i];
        match run.back() {
            Some(&b) if pos <= b => self.low.push(Reverse(key)),
            back => {
                if back.is_none() {
                    self.ranks.push(Reverse(rank));
                }
                run.push_back(pos);
                self.head = self.head.min(key);
            }
        }
    }

    /// The smallest key, if any.
    #[inline]
    fn min(&self) -> Option<u64> {
        let low = self.low.peek().map_or(u64::MAX, |r| r.0);
        let m = self.head.min(low);
        (m != u64::MAX).then_some(m)
    }

    /// Removes and returns the smallest key; call after [`Self::min`] returned one.
    fn pop(&mut self) -> u64 {
        if let Some(&Reverse(l)) = self.low.peek() {
            if l < self.head {
                return self.low.pop().expect("a key").0;
            }
        }
        let key = self.head;
        let rank = (key >> 32) as u32;
        let run = &mut self.runs[self.index[&rank] as usize];
        run.pop_front();
        self.head = match run.front() {
            Some(&p) => ((rank as u64) << 32) | p as u64,
            None => {
                self.ranks.pop();
                match self.ranks.peek() {
                    Some(&Reverse(r)) => ((r as u64) << 32) | *self.runs[self.index[&r] as usize].front().expect("a run") as u64,
                    None => u64::MAX,
                }
            }
        };
        key
    }
}

/// The keys `rank << 32 | position` of the pairs with a rank, in key order: `sort_unstable`
/// for a few thousand, else a stable radix sort on the rank (16 bits a pass) of the keys made
/// in position order.
pub(super) fn sorted_keys(rank_at: &[u32]) -> Vec<u64> {
    let mut keys: Vec<u64> = rank_at.iter().enumerate().filter(|(_, &r)| r != NO_RANK).map(|(i, &r)| ((r as u64) << 32) | i as u64).collect();
    if keys.len() < 1 << 12 {
        keys.sort_unstable();
        return keys;
    }
    let top = keys.iter().map(|k| k >> 32).max().unwrap_or(0);
    let mut tmp = vec![0u64; keys.len()];
    let mut shift = 32;
    while shift < 64 && (shift == 32 || top >> (shift - 32) != 0) {
        let mut count = vec![0usize; 1 << 16];
        for &k in &keys {
            count[(k >> shift) as usize & 0xFFFF] += 1;
        }
        let mut sum = 0;
        for c in count.iter_mut() {
            (*c, sum) = (sum, sum + *c);
        }
        for &k in &keys {
            let d = &mut count[(k >> shift) as usize & 0xFFFF];
            tmp[*d] = k;
            *d += 1;
        }
        std::mem::swap(&mut keys, &mut tmp);
        shift += 16;
    }
    keys
}
