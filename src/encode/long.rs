//! The merge of a long piece (more than `LARGE_PIECE` symbols: base64 blobs, CJK lines,
//! `"a" * 10**6`), O(n log n) in its symbols, with the same order as the short merge: lowest
//! rank first, leftmost first on ties.
//!
//! A linked list of symbols holds each one's pair rank (`rank_at`: a popped key is stale unless
//! it still holds, no pair lookup), and two queues of `rank << 32 | position` keys: the first
//! pairs sorted once (a stable radix sort on the rank for big pieces) and read in order, and the
//! pairs merges make in [`Hot`], a radix heap. Most merges of a long piece are of its first
//! pairs, so most pops cost no heap work ([log](../../docs/performance.md#the-miss-path)).
//! Memory: 24 bytes per symbol and 8 per queued pair (a 100 MB single piece needs about 3 GB).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

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
        let mut hot = Hot::default();
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

/// The queue of the pairs a long piece's merges make (see [`merge`]): a radix
/// heap (keys in 65 buckets by the highest bit where they differ from `last`, the minimum when
/// it last gave one up; a push is O(1), a key moves down a bucket at most 64 times), which needs
/// every key pushed to be at least `last`, and a binary heap for the rare key below it (a merge
/// can make a pair of a lower rank than its own). A long run ("a" * 10**6) first merges its
/// first pairs, from the sorted queue, while the pairs they make wait here: a binary heap paid
/// a sift for each of them.
struct Hot {
    last: u64,
    buckets: [Vec<u64>; 65],
    len: usize,
    /// The smallest key in the buckets (when `len > 0`).
    min: u64,
    low: BinaryHeap<Reverse<u64>>,
}

impl Default for Hot {
    fn default() -> Self {
        Hot { last: 0, buckets: std::array::from_fn(|_| Vec::new()), len: 0, min: u64::MAX, low: BinaryHeap::new() }
    }
}

impl Hot {
    #[inline]
    fn bucket(&self, key: u64) -> usize {
        (64 - (key ^ self.last).leading_zeros()) as usize
    }

    fn push(&mut self, key: u64) {
        if key < self.last {
            self.low.push(Reverse(key));
        } else {
            let b = self.bucket(key);
            self.buckets[b].push(key);
            self.len += 1;
            self.min = self.min.min(key);
        }
    }

    /// The smallest key, if any.
    #[inline]
    fn min(&self) -> Option<u64> {
        let radix = (self.len > 0).then_some(self.min);
        match (radix, self.low.peek()) {
            (Some(r), Some(&Reverse(l))) => Some(r.min(l)),
            (r, l) => r.or(l.map(|x| x.0)),
        }
    }

    /// Removes and returns the smallest key; call after [`Self::min`] returned one.
    fn pop(&mut self) -> u64 {
        if let Some(&Reverse(l)) = self.low.peek() {
            if self.len == 0 || l < self.min {
                return self.low.pop().expect("a key").0;
            }
        }
        if self.buckets[0].is_empty() {
            // The minimum's bucket, redistributed around it: its keys all go lower.
            let i = self.buckets.iter().position(|b| !b.is_empty()).expect("a key");
            let mut moved = std::mem::take(&mut self.buckets[i]);
            self.last = self.min;
            for &k in &moved {
                let b = self.bucket(k);
                self.buckets[b].push(k);
            }
            moved.clear();
            self.buckets[i] = moved;
        }
        self.len -= 1;
        let key = self.buckets[0].pop().expect("the minimum");
        if self.buckets[0].is_empty() {
            self.min = self.buckets.iter().find(|b| !b.is_empty()).map_or(u64::MAX, |b| *b.iter().min().expect("a key"));
        }
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
