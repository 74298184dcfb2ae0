//! BPE-dropout (Provilkov et al., 2020), as `tokenizers`' `BPE(dropout=p)` runs it: the merges
//! of a piece come off a queue by rank (then position), and each one popped is skipped with
//! probability `p`; the skipped ones go back on the queue as soon as a merge is applied. So
//! `p = 1` leaves the bytes, and ids always decode to the text.
//!
//! * **Every merge, not only the reachable ones.** The encoder's pair table keeps only the pairs
//!   that can merge when no merge is skipped (`pairs.rs`); dropout reaches others, so it has a
//!   table of every merge of its own, built on first use.
//! * **Reproducible.** Each piece draws from its own generator, seeded by the seed, the text it
//!   is in and its byte offset there: the ids depend on the text and the seed only, never on the
//!   batch, its order or the threads.
//! * No word cache (a cached piece would drop the same merges every time), no `ignore_merges`
//!   (as `tokenizers`, whose dropout path skips both).
//!
//! Speed against `tokenizers`: [log](../../docs/performance.md#pruning-and-dropout-issue-35).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

/// Every merge: `(left, right) -> (rank, result)` (the first rank of a repeated pair).
pub struct DropoutTable {
    merges: FxHashMap<(u32, u32), (u32, u32)>,
}

impl DropoutTable {
    /// From the merges in rank order with their results (merges mode), or, with ranks
    /// (`merges = None`), every split of every token into two tokens, ranked by the token.
    pub fn new(tokens: &[(u32, &[u8])], merges: Option<&[(u32, u32)]>) -> Self {
        let by_bytes: FxHashMap<&[u8], u32> = tokens.iter().map(|&(id, b)| (b, id)).collect();
        let bytes_of: FxHashMap<u32, &[u8]> = tokens.iter().copied().collect();
        let mut table: FxHashMap<(u32, u32), (u32, u32)> = FxHashMap::default();
        match merges {
            Some(m) => {
                let mut cat = Vec::new();
                for (rank, &(a, b)) in m.iter().enumerate() {
                    let (Some(x), Some(y)) = (bytes_of.get(&a), bytes_of.get(&b)) else { continue };
                    cat.clear();
                    cat.extend_from_slice(x);
                    cat.extend_from_slice(y);
                    if let Some(&t) = by_bytes.get(&cat[..]) {
                        table.entry((a, b)).or_insert((rank as u32, t));
                    }
                }
            }
            None => {
                for &(id, b) in tokens {
                    for k in 1..b.len() {
                        if let (Some(&x), Some(&y)) = (by_bytes.get(&b[..k]), by_bytes.get(&b[k..])) {
                            let e = table.entry((x, y)).or_insert((id, id));
                            if id < e.0 {
                                *e = (id, id);
                            }
                        }
                    }
                }
            }
        }
        DropoutTable { merges: table }
    }

    /// The ids of `piece` (bytes as `byte_ids`) with each merge skipped with probability `p`.
    pub fn merge(&self, piece: &[u8], byte_ids: &[u32; 256], p: f32, rng: &mut Rng, out: &mut Vec<u32>) {
        let n = piece.len();
        let mut c: Vec<u32> = piece.iter().map(|&b| byte_ids[b as usize]).collect();
        if n < 2 {
            out.extend_from_slice(&c);
            return;
        }
        let mut prev: Vec<isize> = (0..n as isize).map(|i| i - 1).collect();
        let mut next: Vec<isize> = (0..n as isize).map(|i| if i + 1 < n as isize { i + 1 } else { -1 }).collect();
        let mut alive = vec![true; n];
        let mut queue = BinaryHeap::with_capacity(n);
        let mut skipped = Vec::new();
        for i in 0..n - 1 {
            if let Some(&(rank, t)) = self.merges.get(&(c[i], c[i + 1])) {
                queue.push(Reverse((rank, i, t)));
            }
        }
        while let Some(Reverse(top)) = queue.pop() {
            if rng.below(p) {
                skipped.push(top);
                continue;
            }
            queue.extend(skipped.drain(..).map(Reverse));
            let (_, pos, t) = top;
            if !alive[pos] || next[pos] < 0 {
                continue;
            }
            let right = next[pos] as usize;
            if self.merges.get(&(c[pos], c[right])).is_none_or(|&(_, made)| made != t) {
                continue; // (an entry gone stale)
            }
            c[pos] = t;
            alive[right] = false;
            next[pos] = next[right];
            if next[right] >= 0 {
                prev[next[right] as usize] = pos as isize;
            }
            if prev[pos] >= 0 {
                let left = prev[pos] as usize;
                if let Some(&(rank, t2)) = self.merges.get(&(c[left], c[pos])) {
                    queue.push(Reverse((rank, left, t2)));
                }
            }
            if next[pos] >= 0 {
                if let Some(&(rank, t2)) = self.merges.get(&(c[pos], c[next[pos] as usize])) {
                    queue.push(Reverse((rank, pos, t2)));
                }
            }
        }
        let mut i = 0isize;
        while i >= 0 {
            out.push(c[i as usize]);
            i = next[i as usize];
        }
    }
}

/// A small, fast generator (SplitMix64), one per piece.
pub struct Rng(u64);

impl Rng {
    /// The generator of the piece at byte `offset` of a text (`text_seed`: [`text_seed`]).
    pub fn at(text_seed: u64, offset: usize) -> Rng {
        Rng(text_seed ^ (offset as u64).wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `p` (a 24-bit uniform draw below `p`, as an `f32`).
    fn below(&mut self, p: f32) -> bool {
        p > 0.0 && ((self.next() >> 40) as f32 / (1u32 << 24) as f32) < p
    }
}

/// The seed of a text's generators: the caller's seed mixed with the text's bytes.
pub fn text_seed(seed: u64, text: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write_u64(seed);
    h.write(text);
    let mut r = Rng(h.finish() ^ seed.rotate_left(17));
    r.next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> (DropoutTable, [u32; 256]) {
        // a b c: "ab" = 256 (rank 0), "bc" = 257 (rank 1), "abc" = 258 from (a, bc) (rank 2).
        let toks: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).chain([(256, b"ab".to_vec()), (257, b"bc".to_vec()), (258, b"abc".to_vec())]).collect();
        let refs: Vec<(u32, &[u8])> = toks.iter().map(|(i, b)| (*i, &b[..])).collect();
        let merges = [(97, 98), (98, 99), (97, 257)];
        let byte_ids = std::array::from_fn(|b| b as u32);
        (DropoutTable::new(&refs, Some(&merges)), byte_ids)
    }

    #[test]
    fn no_dropout_is_plain_bpe_and_full_dropout_is_bytes() {
        let (t, ids) = table();
        let mut out = Vec::new();
        t.merge(b"abc", &ids, 0.0, &mut Rng::at(1, 0), &mut out);
        assert_eq!(out, [256, 99]); // (a, b) first: (a, bc) never happens without dropout
        out.clear();
        t.merge(b"abc", &ids, 1.0, &mut Rng::at(1, 0), &mut out);
        assert_eq!(out, [97, 98, 99]);
    }

    #[test]
    fn dropout_reaches_merges_plain_bpe_never_makes() {
        let (t, ids) = table();
        let mut seen = std::collections::HashSet::new();
        for s in 0..200u64 {
            let mut out = Vec::new();
            t.merge(b"abc", &ids, 0.5, &mut Rng::at(text_seed(s, b"abc"), 0), &mut out);
            seen.insert(out);
        }
        assert!(seen.contains(&vec![258]), "{seen:?}");
        assert!(seen.contains(&vec![256, 99]) && seen.contains(&vec![97, 98, 99]));
    }
}
