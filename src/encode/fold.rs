//! Characters whose bytes may start the merge as one token ("folded"), and the proof that
//! this never changes a result.
//!
//! A piece starts as its bytes, so a Cyrillic or Han character costs one or two merges (and
//! their pair lookups) before the merges that matter. Where the vocabulary has a token `T` for
//! a character `c`, the merge may start from `T` instead, *if* that gives the same result in
//! every context. It does when, with `r_1 .. r_k` the ranks of the merges that turn `c`'s
//! bytes alone into one symbol:
//!
//! 1. `c`'s bytes alone end as the one token `T`;
//! 2. `r_1 < r_2 < .. < r_k`;
//! 3. before each step `t`, no pair with the current leftmost symbol on its right, or the
//!    current rightmost on its left, has a rank `<= r_t` (so no neighbour can take a part of
//!    `c` first: the pending step inside `c` always wins);
//! 4. no pair with `T` on either side has a rank `<= r_k`.
//!
//! Why: by (3) no merge crosses `c`'s edges before `T` exists, and inside `c` the merges run
//! in their order alone; every merge made before `T` exists has a rank `<= r_k` (the pending
//! step inside `c` has one, by 2), so by (4) a run that starts from `T` makes the same merges
//! outside `c` before any merge touches `T`, and reaches the same state as the run from bytes
//! right after `T` is made. From there both are the same run. Nothing here assumes how ranks
//! relate elsewhere, so it holds for merges lists and tiktoken ranks alike, and for each
//! character of a piece in turn. A character that fails any test is simply merged from bytes.

use super::pairs::{PairTable, NO_RANK};

const NONE: u32 = u32::MAX;

/// The folded characters of 2 and 3 UTF-8 bytes (U+0080..=U+FFFF): a direct table for the
/// two-byte ones, a bitmap with a popcount index for the three-byte ones (few of the 63,488
/// have a token).
pub struct Fold {
    two: Box<[u32]>,
    rows: Box<[u64]>,
    row_start: Box<[u32]>,
    three: Box<[u32]>,
    count: usize,
}

impl Fold {
    /// The characters of `tokens` (id, bytes: one character of 2 or 3 bytes) that pass the
    /// tests of the module doc, given the merge's pairs and the byte tokens.
    /// `result(rank)` is the token a pair of that rank makes.
    pub fn build<'a>(tokens: impl Iterator<Item = (u32, &'a [u8])>, pairs: &PairTable, result: &dyn Fn(u32) -> u32, byte_ids: &[u32; 256], max_id: u32) -> Self {
        // The lowest rank at which a token is taken by a neighbour on its right / left.
        let mut min_as_left = vec![NO_RANK; max_id as usize + 1];
        let mut min_as_right = vec![NO_RANK; max_id as usize + 1];
        for (a, b, r) in pairs.iter() {
            min_as_left[a as usize] = min_as_left[a as usize].min(r);
            min_as_right[b as usize] = min_as_right[b as usize].min(r);
        }
        let mut two = vec![NONE; 0x800];
        let mut three: Vec<(u32, u32)> = Vec::new();
        for (id, bytes) in tokens {
            let Some(cp) = single_char(bytes) else { continue };
            if folds(bytes, id, pairs, result, byte_ids, &min_as_left, &min_as_right) {
                if cp < 0x800 {
                    two[cp as usize] = id;
                } else {
                    three.push((cp, id));
                }
            }
        }
        three.sort_unstable();
        let mut rows = vec![0u64; 1024];
        for &(cp, _) in &three {
            rows[(cp >> 6) as usize] |= 1 << (cp & 63);
        }
        let mut row_start = vec![0u32; 1024];
        let mut seen = 0;
        for (i, r) in rows.iter().enumerate() {
            row_start[i] = seen;
            seen += r.count_ones();
        }
        let count = two.iter().filter(|&&i| i != NONE).count() + three.len();
        Fold {
            two: two.into_boxed_slice(),
            rows: rows.into_boxed_slice(),
            row_start: row_start.into_boxed_slice(),
            three: three.into_iter().map(|(_, id)| id).collect(),
            count,
        }
    }

    /// How many characters fold.
    pub fn len(&self) -> usize {
        self.count
    }

    /// The token of the two-byte character `cp` (0x80..=0x7FF), or `u32::MAX`.
    #[inline(always)]
    pub fn two(&self, cp: u32) -> u32 {
        self.two[cp as usize & 0x7FF]
    }

    /// The token of the three-byte character `cp` (0x800..=0xFFFF), or `u32::MAX`.
    #[inline(always)]
    pub fn three(&self, cp: u32) -> u32 {
        let (row, col) = ((cp >> 6) as usize & 1023, cp & 63);
        let bits = self.rows[row];
        if (bits >> col) & 1 == 0 {
            return NONE;
        }
        self.three[self.row_start[row] as usize + (bits & ((1u64 << col) - 1)).count_ones() as usize]
    }
}

/// The code point of `bytes` if they are exactly one character of 2 or 3 UTF-8 bytes.
fn single_char(bytes: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(bytes).ok()?;
    let mut it = s.chars();
    let c = it.next()?;
    (it.next().is_none() && (2..=3).contains(&bytes.len())).then_some(c as u32)
}

/// Tests 1-4 of the module doc for the character `bytes` and its token `id`.
fn folds(bytes: &[u8], id: u32, pairs: &PairTable, result: &dyn Fn(u32) -> u32, byte_ids: &[u32; 256], min_as_left: &[u32], min_as_right: &[u32]) -> bool {
    let mut syms: Vec<u32> = bytes.iter().map(|&b| byte_ids[b as usize]).collect();
    if syms.contains(&NONE) {
        return false;
    }
    let taken = |t: u32, v: &[u32]| v.get(t as usize).copied().unwrap_or(NO_RANK);
    let mut last = None;
    while syms.len() > 1 {
        let (mut best, mut at) = (NO_RANK, 0);
        for i in 0..syms.len() - 1 {
            let r = pairs.get(syms[i], syms[i + 1]);
            if r < best {
                (best, at) = (r, i);
            }
        }
        if best == NO_RANK || last.is_some_and(|l| best <= l) {
            return false;
        }
        if taken(syms[0], min_as_right) <= best || taken(syms[syms.len() - 1], min_as_left) <= best {
            return false;
        }
        last = Some(best);
        syms[at] = result(best);
        syms.remove(at + 1);
    }
    let r = last.unwrap_or(NO_RANK);
    syms[0] == id && taken(id, min_as_right) > r && taken(id, min_as_left) > r
}
