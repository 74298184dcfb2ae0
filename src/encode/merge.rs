//! The merge itself: one piece's bytes to token ids, by rank (as tiktoken's byte-pair merge).
//!
//! One table, `pairs: (left_id, right_id) -> (rank << 32 | result_id)`, serves both semantics:
//! * **Merges** (GPT-2 / `tokenizers`): a piece starts as single bytes and the adjacent pair
//!   with the lowest merge rank is merged, leftmost first on ties.
//! * **Ranks** (tiktoken): ids are ranks and the pair whose *concatenated bytes* have the lowest
//!   rank is merged; a piece that is itself a token is emitted directly. Every part of a piece
//!   is always a token, so the rank of a concatenation is a function of the two part ids: every
//!   split of every token into two tokens is enumerated once at construction.
//! In both, two pairs of equal rank merge into the same token, so the lowest packed `u64` orders
//! pairs exactly as the reference algorithms do.
//!
//! Short pieces (at most [`LARGE_PIECE`] bytes) merge on two stack arrays with a linear scan for
//! the minimum (for a dozen parts this beats any heap); long ones (base64 blobs, `"a" * 10**6`)
//! use a binary heap of `(rank, position)` over a linked list, O(n log n), with lazy
//! invalidation of stale entries.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

/// Pieces longer than this (in bytes) use the O(n log n) heap merge.
pub const LARGE_PIECE: usize = 128;
const NO_PAIR: u64 = u64::MAX;
const DEAD: u32 = u32::MAX;

/// The tables of the merge: the one-byte tokens, the pair table, and in tiktoken mode the
/// whole-token lookup.
pub struct Ranks {
    /// The id of the one-byte token of each byte.
    pub byte_ids: [u32; 256],
    /// `(left << 32 | right) -> (rank << 32 | result)`.
    pairs: FxHashMap<u64, u64>,
    /// Whole-piece lookup of the mergeable tokens: tiktoken mode, and merges mode with
    /// `ignore_merges` (as `tokenizers`: a piece that is a token is that token).
    direct: Option<FxHashMap<Box<[u8]>, u32>>,
    tiktoken: bool,
}

impl Ranks {
    /// Builds the tables from the mergeable tokens (`by_bytes`: bytes -> id, specials left out)
    /// and, in merges mode, the merges in rank order (their ids; checked here).
    /// A byte without a token (merges mode only, see `vocab.rs`) keeps `u32::MAX`: such
    /// bytes never reach the merge (`crate::pipeline` takes them out first).
    pub fn new(by_bytes: &FxHashMap<&[u8], u32>, vocab: &[(u32, Box<[u8]>)], merges: Option<&[(u32, u32)]>, ignore_merges: bool) -> Result<Self, String> {
        let token = |id: u32| vocab.binary_search_by_key(&id, |(v, _)| *v).ok().map(|i| &*vocab[i].1);
        let mut byte_ids = [u32::MAX; 256];
        for b in 0..=255u8 {
            match by_bytes.get(&[b][..]) {
                Some(&id) => byte_ids[b as usize] = id,
                None if merges.is_some() => {}
                None => return Err(format!("no token for byte 0x{b:02x}")),
            }
        }
        let whole = || Some(by_bytes.iter().map(|(b, id)| (Box::<[u8]>::from(*b), *id)).collect());
        let mut pairs: FxHashMap<u64, u64> = FxHashMap::default();
        let direct = match merges {
            Some(m) => {
                pairs.reserve(m.len());
                let mut cat = Vec::new();
                for (rank, &(a, b)) in m.iter().enumerate() {
                    let (Some(ba), Some(bb)) = (token(a), token(b)) else {
                        let bad = if token(a).is_none() { a } else { b };
                        return Err(format!("merge {rank} ({a}, {b}) uses id {bad}, which is not in the vocab"));
                    };
                    cat.clear();
                    cat.extend_from_slice(ba);
                    cat.extend_from_slice(bb);
                    let Some(&r) = by_bytes.get(&cat[..]) else {
                        return Err(format!("merge {rank} ({a}, {b}) makes {:?}, which is not in the vocab", String::from_utf8_lossy(&cat)));
                    };
                    // Keep the first (lowest-rank) occurrence of a repeated merge.
                    pairs.entry(((a as u64) << 32) | b as u64).or_insert(((rank as u64) << 32) | r as u64);
                }
                if ignore_merges { whole() } else { None }
            }
            None => {
                // Every split of every token into two tokens is a pair whose merge makes it.
                for (&bytes, &id) in by_bytes {
                    for k in 1..bytes.len() {
                        if let (Some(&a), Some(&b)) = (by_bytes.get(&bytes[..k]), by_bytes.get(&bytes[k..])) {
                            pairs.insert(((a as u64) << 32) | b as u64, ((id as u64) << 32) | id as u64);
                        }
                    }
                }
                whole()
            }
        };
        Ok(Ranks { byte_ids, pairs, direct, tiktoken: merges.is_none() })
    }

    pub fn is_tiktoken(&self) -> bool {
        self.tiktoken
    }

    /// The token that is all of `piece`, where whole pieces are looked up (see `direct`).
    pub fn whole(&self, piece: &[u8]) -> Option<u32> {
        self.direct.as_ref()?.get(piece).copied()
    }

    #[inline]
    pub fn pair(&self, a: u32, b: u32) -> u64 {
        match self.pairs.get(&(((a as u64) << 32) | b as u64)) {
            Some(&v) => v,
            None => NO_PAIR,
        }
    }

    /// BPE of one piece, appended to `out` (no cache).
    pub fn bpe_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        if piece.len() == 1 {
            out.push(self.byte_ids[piece[0] as usize]);
            return;
        }
        if let Some(d) = &self.direct {
            if let Some(&id) = d.get(piece) {
                out.push(id);
                return;
            }
        }
        if piece.len() <= LARGE_PIECE {
            self.merge_small(piece, out)
        } else {
            self.merge_large(piece, u64::MAX, out)
        }
    }

    /// BPE of one piece with only the pairs of rank below `limit` (merges mode: the first
    /// `limit` merges; tiktoken mode: tokens of rank below `limit`), appended to `out`, with no
    /// whole-piece lookup: the steps of the merge, for showing them.
    pub fn bpe_piece_upto(&self, piece: &[u8], limit: u64, out: &mut Vec<u32>) {
        match piece.len() {
            0 => {}
            1 => out.push(self.byte_ids[piece[0] as usize]),
            _ => self.merge_large(piece, limit, out),
        }
    }

    /// Quadratic merge on stack arrays; for pieces of at most LARGE_PIECE bytes.
    pub(super) fn merge_small(&self, piece: &[u8], out: &mut Vec<u32>) {
        let mut toks = [0u32; LARGE_PIECE];
        let mut ranks = [NO_PAIR; LARGE_PIECE];
        let mut n = piece.len();
        for (i, &b) in piece.iter().enumerate() {
            toks[i] = self.byte_ids[b as usize];
        }
        for i in 0..n - 1 {
            ranks[i] = self.pair(toks[i], toks[i + 1]);
        }
        while n > 1 {
            // Leftmost minimum: rank first, and equal ranks always have equal results.
            let mut best = NO_PAIR;
            let mut at = 0;
            for (i, &r) in ranks[..n - 1].iter().enumerate() {
                if r < best {
                    best = r;
                    at = i;
                }
            }
            if best == NO_PAIR {
                break;
            }
            toks[at] = best as u32;
            toks.copy_within(at + 2..n, at + 1);
            if at + 2 < n {
                ranks.copy_within(at + 2..n - 1, at + 1);
            }
            n -= 1;
            if at + 1 < n {
                ranks[at] = self.pair(toks[at], toks[at + 1]);
            }
            ranks[n - 1] = NO_PAIR;
            if at > 0 {
                ranks[at - 1] = self.pair(toks[at - 1], toks[at]);
            }
        }
        out.extend_from_slice(&toks[..n]);
    }

    /// Heap + linked-list merge, O(n log n); for long pieces (< 4 GiB: positions are u32), and
    /// for any piece with a rank `limit` (pairs of rank `limit` or more never merge).
    ///
    /// Memory is 20 bytes per input byte at most (token, next, prev: 12; heap entry: 8), so a
    /// 100 MB single piece needs about 2 GB; heap entries pack `rank << 32 | position` into one
    /// u64 (equal ranks then pop leftmost first, because positions are byte offsets of each
    /// node's first byte and so increase left to right).
    pub(super) fn merge_large(&self, piece: &[u8], limit: u64, out: &mut Vec<u32>) {
        let n = piece.len();
        let mut toks: Vec<u32> = piece.iter().map(|&b| self.byte_ids[b as usize]).collect();
        let mut next: Vec<u32> = (1..=n as u32).collect();
        let mut prev: Vec<u32> = (0..n as u32).map(|i| i.wrapping_sub(1)).collect();
        let none = n as u32;
        let rank = |r: u64| r >> 32;
        let pair = |a: u32, b: u32| match self.pair(a, b) {
            r if r != NO_PAIR && rank(r) < limit => r,
            _ => NO_PAIR,
        };
        let mut heap: BinaryHeap<Reverse<u64>> = BinaryHeap::with_capacity(n);
        for i in 0..n - 1 {
            let r = pair(toks[i], toks[i + 1]);
            if r != NO_PAIR {
                heap.push(Reverse((rank(r) << 32) | i as u64));
            }
        }
        while let Some(Reverse(key)) = heap.pop() {
            let (want, pos) = (key >> 32, key as u32);
            let p = pos as usize;
            if toks[p] == DEAD {
                continue;
            }
            let q = next[p];
            if q == none {
                continue;
            }
            // Stale entry? If the pair at `pos` changed, its new rank was pushed separately. A
            // stale entry whose rank equals the live pair's is interchangeable with it (equal
            // ranks always merge into the same token).
            let r = pair(toks[p], toks[q as usize]);
            if r == NO_PAIR || rank(r) != want {
                continue;
            }
            toks[p] = r as u32;
            toks[q as usize] = DEAD;
            let nq = next[q as usize];
            next[p] = nq;
            if nq != none {
                prev[nq as usize] = pos;
                let r2 = pair(toks[p], toks[nq as usize]);
                if r2 != NO_PAIR {
                    heap.push(Reverse((rank(r2) << 32) | pos as u64));
                }
            }
            let pp = prev[p];
            if pp != u32::MAX {
                let r2 = pair(toks[pp as usize], toks[p]);
                if r2 != NO_PAIR {
                    heap.push(Reverse((rank(r2) << 32) | pp as u64));
                }
            }
        }
        let mut i = 0usize;
        while i < n {
            out.push(toks[i]);
            i = next[i] as usize;
        }
    }

}
