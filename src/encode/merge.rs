//! The merge itself: one piece's bytes to token ids, by rank (as tiktoken's byte-pair merge).
//!
//! One table, `pairs: (left id, right id) -> rank` ([`PairTable`]), serves both semantics, with
//! `result(rank)` the token a pair of that rank makes:
//! * **Merges** (GPT-2 / `tokenizers`): a piece starts as single bytes and the adjacent pair
//!   with the lowest merge rank is merged, leftmost first on ties; `result` is the merge's token.
//! * **Ranks** (tiktoken): ids are ranks and the pair whose *concatenated bytes* have the lowest
//!   rank is merged; a piece that is itself a token is emitted directly. Every part of a piece
//!   is always a token, so the rank of a concatenation is a function of the two part ids: every
//!   split of every token into two tokens is enumerated once at construction; `result` is the
//!   rank itself.
//! In both, two pairs of equal rank merge into the same token, so comparing ranks orders pairs
//! exactly as the reference algorithms do.
//!
//! The miss path of the encoder ([log](../../docs/performance.md#the-miss-path)):
//! * **Whole pieces first** ([`Whole`]): a piece that is a token whose own merge gives that
//!   token (tiktoken: every token; merges: those proven so at construction) is one probe of a
//!   packed-key table.
//! * **Characters, not bytes** ([`Fold`]): a character of 2 or 3 bytes with a token starts as
//!   that token where the module doc of `fold` proves it changes nothing.
//! * **Short pieces** (at most [`LARGE_PIECE`] symbols) merge on stack arrays with a linear
//!   scan for the minimum (for a dozen parts this beats any heap); long ones (base64 blobs,
//!   `"a" * 10**6`) go to `super::long`, O(n log n).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::fold::Fold;
use super::pairs::{reachable, PairTable, NO_RANK};
use super::whole::{Seed, Whole};
use crate::keys::pack;

/// Pieces of more symbols than this use the O(n log n) merge of `super::long`.
pub const LARGE_PIECE: usize = 128;
/// The short merge's arrays: LARGE_PIECE symbols and room for blocks of 8 read past them.
const SYMS: usize = LARGE_PIECE + 8;
/// Pieces of at most this many bytes merge on arrays of `TINY + 8` (initializing the big
/// arrays cost a memset call each per piece).
const TINY: usize = 16;
/// Up to this many pairs, [`argmin`] scans one by one.
const SCALAR_ARGMIN: usize = 8;
/// The short merge's arrays: `S - 8` symbols at most and room for blocks of 8 read past them.
pub(super) type Syms<const S: usize> = [u32; S];

/// `a[from..end - 1] = a[from + 1..end]`, in fixed blocks of 8 (no memmove call): the blocks
/// may copy up to 7 values past `end - 1`, from the slack at the arrays' end.
#[inline(always)]
fn shift_left<const S: usize>(a: &mut Syms<S>, from: usize, end: usize) {
    let mut j = from;
    while j + 1 < end {
        let block: [u32; 8] = a[j + 1..j + 9].try_into().unwrap();
        a[j..j + 8].copy_from_slice(&block);
        j += 8;
    }
}

/// The lowest of `r[..m]` and its leftmost position (m >= 1; `r[m..]` is NO_RANK): four at a
/// time with SSE2 (signed compares of the values with their top bit flipped), then the first
/// block holding it. A few pairs are scanned one by one: the ranks were just stored one by
/// one, and a 16-byte load of them waits for the stores to retire (no store forwarding).
#[inline(always)]
fn argmin<const S: usize>(r: &Syms<S>, m: usize) -> (u32, usize) {
    if m <= SCALAR_ARGMIN {
        let (mut best, mut at) = (r[0], 0);
        for (i, &x) in r[1..m].iter().enumerate() {
            if x < best {
                (best, at) = (x, i + 1);
            }
        }
        return (best, at);
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64; loads of 4 from `c < m <= S - 8` stay in the slack.
    unsafe {
        use std::arch::x86_64::*;
        let p = r.as_ptr() as *const __m128i;
        let bias = _mm_set1_epi32(i32::MIN);
        let mut best = _mm_set1_epi32(i32::MAX);
        let mut c = 0;
        while c < m {
            let v = _mm_xor_si128(_mm_loadu_si128(p.byte_add(4 * c)), bias);
            let gt = _mm_cmpgt_epi32(best, v);
            best = _mm_or_si128(_mm_and_si128(gt, v), _mm_andnot_si128(gt, best));
            c += 4;
        }
        for shuf in [0b01_00_11_10, 0b10_11_00_01] {
            let o = if shuf == 0b01_00_11_10 { _mm_shuffle_epi32::<0b01_00_11_10>(best) } else { _mm_shuffle_epi32::<0b10_11_00_01>(best) };
            let gt = _mm_cmpgt_epi32(best, o);
            best = _mm_or_si128(_mm_and_si128(gt, o), _mm_andnot_si128(gt, best));
        }
        let min = (_mm_cvtsi128_si32(best) ^ i32::MIN) as u32;
        if min == NO_RANK {
            return (NO_RANK, 0);
        }
        let want = _mm_xor_si128(best, bias);
        let mut c = 0;
        loop {
            let mask = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_loadu_si128(p.byte_add(4 * c)), want)));
            if mask != 0 {
                return (min, c + mask.trailing_zeros() as usize);
            }
            c += 4;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let (mut best, mut at) = (NO_RANK, 0);
        for (i, &x) in r[..m].iter().enumerate() {
            if x < best {
                (best, at) = (x, i);
            }
        }
        (best, at)
    }
}

/// The tables of the merge: the one-byte tokens, the pair table with each rank's token, the
/// folded characters and the whole-piece lookup.
pub struct Ranks {
    /// The id of the one-byte token of each byte.
    pub byte_ids: [u32; 256],
    pairs: PairTable,
    /// Merges mode: the token a pair of each rank makes (tiktoken: the rank itself).
    results: Box<[u32]>,
    fold: Fold,
    whole: Whole,
    seed: Arc<Seed>,
    tiktoken: bool,
}

impl Ranks {
    /// Builds the tables from the mergeable tokens (`by_bytes`: bytes -> id, specials left out)
    /// and, in merges mode, the merges in rank order (their ids; checked here).
    /// A byte without a token (merges mode only, see `vocab.rs`) keeps `u32::MAX`: such
    /// bytes never reach the merge (the general path, `general.rs`, takes them out first).
    /// With `ignore_merges` (merges mode, as `tokenizers`), a piece that is a token is that token.
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
        let max_id = vocab.last().map_or(0, |(i, _)| *i);
        let tiktoken = merges.is_none();
        let all = (tiktoken || ignore_merges).then(|| Whole::new(by_bytes.iter().map(|(b, id)| (*b, *id))));
        let (pairs, results) = match merges {
            Some(m) => {
                let mut pairs = Vec::with_capacity(m.len());
                let mut results = Vec::with_capacity(m.len());
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
                    // (A repeated merge keeps its first, lowest rank: see `PairTable::new`.)
                    pairs.push((a, b, rank as u32));
                    results.push(r);
                }
                (pairs, results)
            }
            None => {
                // Every split of every token into two tokens is a pair whose merge makes it.
                let all = all.as_ref().expect("built in tiktoken mode");
                let mut pairs = Vec::with_capacity(by_bytes.len() * 3);
                for (&bytes, &id) in by_bytes {
                    for k in 1..bytes.len() {
                        if let (Some(a), Some(b)) = (one_token(all, &byte_ids, &bytes[..k]), one_token(all, &byte_ids, &bytes[k..])) {
                            pairs.push((a, b, id));
                        }
                    }
                }
                (pairs, Vec::new())
            }
        };
        // Only the pairs that can ever merge (see `pairs.rs`), found with all of them.
        let full = PairTable::new(&pairs, max_id)?;
        let results = results.into_boxed_slice();
        let result = |r: u32| if tiktoken { r } else { results[r as usize] };
        let (kept, proven) = reachable(&full, &result, &byte_ids, by_bytes.iter().map(|(b, id)| (*id, *b)));
        drop(full);
        let mut pairs = PairTable::new(&kept, max_id)?;
        if !tiktoken {
            pairs.keep_made(&result);
        }
        let fold = Fold::build(by_bytes.iter().map(|(b, id)| (*id, *b)), &pairs, &result, &byte_ids, max_id);
        // Merges mode: a token is emitted whole only where its own merge gives it.
        let whole = all.unwrap_or_else(|| {
            let proven: rustc_hash::FxHashSet<u32> = proven.into_iter().collect();
            Whole::new(by_bytes.iter().filter(|(_, id)| proven.contains(id)).map(|(b, id)| (*b, *id)))
        });
        let seed = Arc::new(Seed::new(whole.short.clone()));
        let ranks = Ranks { byte_ids, pairs, results, fold, whole, seed, tiktoken };
        Ok(ranks)
    }

    pub fn is_tiktoken(&self) -> bool {
        self.tiktoken
    }

    /// The token that is all of `piece`, where whole pieces are emitted directly (tiktoken
    /// ranks, `ignore_merges`; in merges mode also any token whose merge gives itself).
    pub fn whole(&self, piece: &[u8]) -> Option<u32> {
        self.whole.get(piece)
    }

    /// The word caches' seed (see [`Seed`]).
    pub fn seed(&self) -> Arc<Seed> {
        self.seed.clone()
    }

    /// Whether `piece` (2..=15 bytes) may be a whole token left out of the seed (false: it is
    /// not; true: it may be).
    #[inline]
    pub fn maybe_unseeded(&self, piece: &[u8]) -> bool {
        self.seed.unseeded.may_hold(pack(piece))
    }

    /// (folded characters, whole-piece tokens, pair-table bytes), for tests and the log.
    pub fn stats(&self) -> (usize, usize, usize) {
        (self.fold.len(), self.whole.len(), self.pairs.bytes())
    }

    #[inline(always)]
    fn result(&self, rank: u32) -> u32 {
        if self.tiktoken {
            rank
        } else {
            // SAFETY: every rank in the pair table indexes `results` (merges mode).
            unsafe { *self.results.get_unchecked(rank as usize) }
        }
    }

    /// BPE of one piece, appended to `out` (no cache).
    pub fn bpe_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        if piece.len() == 1 {
            out.push(self.byte_ids[piece[0] as usize]);
            return;
        }
        if let Some(id) = self.whole.get(piece) {
            out.push(id);
            return;
        }
        self.merge(piece, out)
    }

    /// [`Self::bpe_piece`] of a piece known not to be a whole token (or of one byte).
    pub fn bpe_piece_not_whole(&self, piece: &[u8], out: &mut Vec<u32>) {
        if piece.len() == 1 {
            out.push(self.byte_ids[piece[0] as usize]);
            return;
        }
        self.merge(piece, out)
    }

    /// The merge of a piece from its first symbols (folded characters), short or long.
    fn merge(&self, piece: &[u8], out: &mut Vec<u32>) {
        if piece.len() <= TINY {
            let mut toks: Syms<{ TINY + 8 }> = [0; TINY + 8];
            let n = self.initial(piece, |i, t| toks[i] = t);
            self.merge_small(&mut toks, n, out)
        } else if piece.len() <= LARGE_PIECE {
            let mut toks: Syms<SYMS> = [0; SYMS];
            let n = self.initial(piece, |i, t| toks[i] = t);
            self.merge_small(&mut toks, n, out)
        } else {
            let mut toks = Vec::with_capacity(piece.len());
            self.initial(piece, |_, t| toks.push(t));
            if toks.len() <= LARGE_PIECE {
                let mut small: Syms<SYMS> = [0; SYMS];
                small[..toks.len()].copy_from_slice(&toks);
                self.merge_small(&mut small, toks.len(), out)
            } else {
                self.merge_large(toks, NO_RANK, out)
            }
        }
    }

    /// BPE of one piece with only the pairs of rank below `limit` (merges mode: the first
    /// `limit` merges; tiktoken mode: tokens of rank below `limit`), appended to `out`, from
    /// bytes and with no whole-piece lookup: the steps of the merge, for showing them.
    pub fn bpe_piece_upto(&self, piece: &[u8], limit: u64, out: &mut Vec<u32>) {
        match piece.len() {
            0 => {}
            1 => out.push(self.byte_ids[piece[0] as usize]),
            _ => self.merge_large(piece.iter().map(|&b| self.byte_ids[b as usize]).collect(), limit.min(NO_RANK as u64) as u32, out),
        }
    }

    /// Writes the first symbols of `piece` through `put(index, id)`: a byte's token, or a
    /// folded character's; returns how many.
    #[inline(always)]
    fn initial(&self, piece: &[u8], mut put: impl FnMut(usize, u32)) -> usize {
        let (mut n, mut i) = (0, 0);
        let cont = |b: u8| b & 0xC0 == 0x80;
        while i < piece.len() {
            let b = piece[i];
            let mut id = u32::MAX;
            let mut w = 1;
            let f = if b >= 0xC2 && b < 0xE0 && i + 1 < piece.len() && cont(piece[i + 1]) {
                w = 2;
                self.fold.two(((b as u32 & 0x1F) << 6) | (piece[i + 1] as u32 & 0x3F))
            } else if b & 0xF0 == 0xE0 && i + 2 < piece.len() && cont(piece[i + 1]) && cont(piece[i + 2]) {
                let cp = ((b as u32 & 0x0F) << 12) | ((piece[i + 1] as u32 & 0x3F) << 6) | (piece[i + 2] as u32 & 0x3F);
                w = 3;
                if cp >= 0x800 { self.fold.three(cp) } else { None }
            } else {
                None
            };
            if let Some(f) = f {
                if f.ok(i.checked_sub(1).map(|j| piece[j]), piece.get(i + w).copied()) {
                    id = f.id;
                }
            }
            if id == u32::MAX {
                id = self.byte_ids[b as usize];
                w = 1;
            }
            put(n, id);
            n += 1;
            i += w;
        }
        n
    }

    /// Quadratic merge on stack arrays of `n` (at most LARGE_PIECE) first symbols: the lowest
    /// rank found by [`argmin`], the arrays shifted in fixed blocks ([`shift_left`]; a call of
    /// memmove per merge and array was a third of the instructions), the two pairs around the
    /// merge looked up again. Each pair's token is kept beside its rank (merges mode:
    /// `PairTable::get_made`), so a merge does not wait on a lookup of the rank's token.
    pub(super) fn merge_small<const S: usize>(&self, toks: &mut Syms<S>, n: usize, out: &mut Vec<u32>) {
        if self.tiktoken {
            self.merge_small_by::<S>(toks, n, out, |a, b| { let r = self.pairs.get(a, b); (r, r) })
        } else {
            // SAFETY: `Ranks::new` ran `keep_made` in merges mode.
            self.merge_small_by::<S>(toks, n, out, |a, b| unsafe { self.pairs.get_made(a, b) })
        }
    }

    #[inline(always)]
    fn merge_small_by<const S: usize>(&self, toks: &mut Syms<S>, mut n: usize, out: &mut Vec<u32>, pair: impl Fn(u32, u32) -> (u32, u32)) {
        // Past the pairs, every rank is NO_RANK (what `argmin` and `shift_left` rely on).
        let mut ranks: Syms<S> = [NO_RANK; S];
        let mut made: Syms<S> = [0; S];
        for i in 0..n.saturating_sub(1) {
            (ranks[i], made[i]) = pair(toks[i], toks[i + 1]);
        }
        while n > 1 {
            // Leftmost minimum: rank first, and equal ranks always have equal results.
            let (best, at) = argmin(&ranks, n - 1);
            if best == NO_RANK {
                break;
            }
            toks[at] = made[at];
            shift_left(toks, at + 1, n);
            shift_left(&mut ranks, at + 1, n);
            shift_left(&mut made, at + 1, n);
            n -= 1;
            (ranks[at], made[at]) = if at + 1 < n { pair(toks[at], toks[at + 1]) } else { (NO_RANK, 0) };
            if at > 0 {
                (ranks[at - 1], made[at - 1]) = pair(toks[at - 1], toks[at]);
            }
        }
        out.extend_from_slice(&toks[..n]);
    }

    /// The merge of a long piece (see [`super::long::merge`]); pairs of rank `limit` or more
    /// never merge.
    pub(super) fn merge_large(&self, toks: Vec<u32>, limit: u32, out: &mut Vec<u32>) {
        let pair = |a: u32, b: u32| match self.pairs.get(a, b) {
            r if r < limit => r,
            _ => NO_RANK,
        };
        super::long::merge(toks, pair, |r| self.result(r), out)
    }
}

/// The token of `b` if it is one: a byte's token, or a whole token (`all` holds every one).
fn one_token(all: &Whole, byte_ids: &[u32; 256], b: &[u8]) -> Option<u32> {
    match b.len() {
        1 => Some(byte_ids[b[0] as usize]).filter(|&i| i != u32::MAX),
        _ => all.get(b),
    }
}
