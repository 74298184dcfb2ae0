//! Characters whose bytes may start the merge as one token ("folded"), and the proof that
//! this never changes a result.
//!
//! A piece starts as its bytes, so a Cyrillic or Han character costs one or two merges (and
//! their pair lookups) before the merges that matter. Where the vocabulary has a token `T` for
//! a character `c`, the merge may start from `T` instead, *if* that gives the same result in
//! the piece at hand. It does when, with `r_1 .. r_k` the ranks of the merges that turn `c`'s
//! bytes alone into one symbol, `p` the byte before `c` in the piece and `q` the byte after it:
//!
//! 1. `c`'s bytes alone end as the one token `T`;
//! 2. `r_1 < r_2 < .. < r_k`;
//! 3. before each step `t`, no pair of a symbol ending in `p` and the current leftmost symbol,
//!    or of the current rightmost symbol and a symbol starting with `q`, has a rank `<= r_t`
//!    (so no neighbour can take a part of `c` first: the pending step inside `c` always wins);
//! 4. no such pair with `T` in place of the edge symbols has a rank `<= r_k`.
//!
//! Why: symbols tile the piece, so whatever `c`'s left neighbour is at any moment it ends with
//! `p`, and its right neighbour starts with `q`. By (3) no merge crosses `c`'s edges before `T`
//! exists, and inside `c` the merges run in their order alone; every merge made before `T`
//! exists has a rank `<= r_k` (the pending step inside `c` has one, by 2), so by (4) a run that
//! starts from `T` makes the same merges outside `c` before any merge touches `T`, and reaches
//! the same state as the run from bytes right after `T` is made. From there both are the same
//! run. Nothing here assumes how ranks relate elsewhere, so it holds for merges lists and
//! tiktoken ranks alike, for any bytes around `c`, and for each character of a piece in turn.
//! The bytes `p` and `q` that break (3) or (4) are kept per character ([`Folded`]); a piece's
//! edge has no neighbour. Without them (any neighbour), GPT-2 folds 48 characters: a space
//! before a Cyrillic word takes its first byte, but inside the word nothing can.

use rustc_hash::FxHashMap;

use super::pairs::{PairTable, NO_RANK};

const NONE: u32 = u32::MAX;

/// A folded character: its token, and the bytes before / after it that forbid folding it.
#[derive(Clone, Copy)]
pub struct Folded {
    pub id: u32,
    bad_prev: [u64; 4],
    bad_next: [u64; 4],
}

impl Folded {
    /// Whether the character folds between the bytes `prev` and `next` (None: the piece's edge).
    #[inline(always)]
    pub fn ok(&self, prev: Option<u8>, next: Option<u8>) -> bool {
        let has = |set: &[u64; 4], b: Option<u8>| b.is_some_and(|b| set[b as usize >> 6] >> (b & 63) & 1 != 0);
        !has(&self.bad_prev, prev) && !has(&self.bad_next, next)
    }
}

/// The characters of 2 and 3 UTF-8 bytes (U+0080..=U+FFFF) that may fold: a direct table of
/// indices for the two-byte ones, a bitmap with a popcount index for the three-byte ones (few
/// of the 63,488 have a token).
pub struct Fold {
    two: Box<[u32]>,
    rows: Box<[u64]>,
    row_start: Box<[u32]>,
    three: Box<[u32]>,
    folded: Box<[Folded]>,
}

/// A character's merge alone: `(leftmost, rightmost, rank)` before each step, and its token.
struct Assembly {
    steps: Vec<(u32, u32, u32)>,
    token: u32,
}

impl Fold {
    /// The characters of `tokens` (id, bytes: one character of 2 or 3 bytes) that pass tests 1
    /// and 2 of the module doc, with the neighbour bytes that break 3 or 4, given the merge's
    /// pairs, `result(rank)` (the token a pair of that rank makes) and the byte tokens.
    pub fn build<'a>(tokens: impl Iterator<Item = (u32, &'a [u8])> + Clone, pairs: &PairTable, result: &dyn Fn(u32) -> u32, byte_ids: &[u32; 256], max_id: u32) -> Self {
        let mut edges = vec![(0u8, 0u8); max_id as usize + 1];
        for (id, b) in tokens.clone() {
            if let (Some(&f), Some(&l)) = (b.first(), b.last()) {
                edges[id as usize] = (f, l);
            }
        }
        let chars: Vec<(u32, Assembly)> = tokens
            .filter_map(|(id, bytes)| Some((single_char(bytes)?, assemble(bytes, id, pairs, result, byte_ids)?)))
            .collect();
        // For the symbols at a character's edges: the pairs that could take them, by the
        // neighbour's edge byte, lowest rank first.
        let mut takers: FxHashMap<(u32, bool), Vec<(u32, u8)>> = FxHashMap::default();
        for (_, a) in &chars {
            for &(l, r, _) in &a.steps {
                takers.insert((l, true), Vec::new());
                takers.insert((r, false), Vec::new());
            }
            takers.insert((a.token, true), Vec::new());
            takers.insert((a.token, false), Vec::new());
        }
        for (a, b, r) in pairs.iter() {
            // (b, true): `b` taken by a left neighbour `a`, which ends with a byte `p`.
            if let Some(v) = takers.get_mut(&(b, true)) {
                v.push((r, edges[a as usize].1));
            }
            if let Some(v) = takers.get_mut(&(a, false)) {
                v.push((r, edges[b as usize].0));
            }
        }
        takers.values_mut().for_each(|v| v.sort_unstable());
        let bad = |set: &mut [u64; 4], sym: u32, left: bool, below: u32| {
            for &(r, b) in takers[&(sym, left)].iter().take_while(|(r, _)| *r <= below) {
                let _ = r;
                set[b as usize >> 6] |= 1 << (b & 63);
            }
        };
        let mut two = vec![NONE; 0x800];
        let mut three: Vec<(u32, u32)> = Vec::new();
        let mut folded = Vec::with_capacity(chars.len());
        for (cp, a) in chars {
            let mut f = Folded { id: a.token, bad_prev: [0; 4], bad_next: [0; 4] };
            for &(l, r, rank) in &a.steps {
                bad(&mut f.bad_prev, l, true, rank);
                bad(&mut f.bad_next, r, false, rank);
            }
            let last = a.steps.last().map_or(0, |s| s.2);
            bad(&mut f.bad_prev, a.token, true, last);
            bad(&mut f.bad_next, a.token, false, last);
            if cp < 0x800 {
                two[cp as usize] = folded.len() as u32;
            } else {
                three.push((cp, folded.len() as u32));
            }
            folded.push(f);
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
        Fold {
            two: two.into_boxed_slice(),
            rows: rows.into_boxed_slice(),
            row_start: row_start.into_boxed_slice(),
            three: three.into_iter().map(|(_, i)| i).collect(),
            folded: folded.into_boxed_slice(),
        }
    }

    /// How many characters may fold (in some context).
    pub fn len(&self) -> usize {
        self.folded.len()
    }

    /// The two-byte character `cp` (0x80..=0x7FF), if it may fold.
    #[inline(always)]
    pub fn two(&self, cp: u32) -> Option<&Folded> {
        self.folded.get(self.two[cp as usize & 0x7FF] as usize)
    }

    /// The three-byte character `cp` (0x800..=0xFFFF), if it may fold.
    #[inline(always)]
    pub fn three(&self, cp: u32) -> Option<&Folded> {
        let (row, col) = ((cp >> 6) as usize & 1023, cp & 63);
        let bits = self.rows[row];
        if (bits >> col) & 1 == 0 {
            return None;
        }
        self.folded.get(self.three[self.row_start[row] as usize + (bits & ((1u64 << col) - 1)).count_ones() as usize] as usize)
    }
}

/// The code point of `bytes` if they are exactly one character of 2 or 3 UTF-8 bytes.
fn single_char(bytes: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(bytes).ok()?;
    let mut it = s.chars();
    let c = it.next()?;
    (it.next().is_none() && (2..=3).contains(&bytes.len())).then_some(c as u32)
}

/// Tests 1 and 2 of the module doc: the merge of the character `bytes` alone, if it ends as
/// its token `id` with increasing ranks.
fn assemble(bytes: &[u8], id: u32, pairs: &PairTable, result: &dyn Fn(u32) -> u32, byte_ids: &[u32; 256]) -> Option<Assembly> {
    let mut syms: Vec<u32> = bytes.iter().map(|&b| byte_ids[b as usize]).collect();
    if syms.contains(&NONE) {
        return None;
    }
    let mut steps: Vec<(u32, u32, u32)> = Vec::new();
    while syms.len() > 1 {
        let (mut best, mut at) = (NO_RANK, 0);
        for i in 0..syms.len() - 1 {
            let r = pairs.get(syms[i], syms[i + 1]);
            if r < best {
                (best, at) = (r, i);
            }
        }
        if best == NO_RANK || steps.last().is_some_and(|s| best <= s.2) {
            return None;
        }
        steps.push((syms[0], syms[syms.len() - 1], best));
        syms[at] = result(best);
        syms.remove(at + 1);
    }
    (syms[0] == id).then_some(Assembly { steps, token: id })
}
