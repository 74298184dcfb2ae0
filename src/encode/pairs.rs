//! The merge's pair table: `(left id, right id) -> rank`, one `u64` per slot.
//!
//! A slot holds the pair's key (`left << id_bits | right`) above its rank, so a lookup is a
//! multiply, a shift and (almost always) one load that answers both "is this the pair?" and
//! "what rank?": no control bytes, no pointer, no second line. The widths are the vocabulary's
//! own (ids below 2^21 and ranks below 2^22 for every released vocabulary), and the table is
//! at most half full, so a probe ends within a slot or two. Half the bytes of a `(u64, u64)`
//! map, so more of a big vocabulary's pairs stay in the cache on a miss path that looks up a
//! pair per merge ([log](../../docs/performance.md#the-miss-path)). In merges mode a parallel
//! array at the same indices holds the token each pair makes ([`PairTable::keep_made`]): the
//! short merge reads it with the rank (a second line, but not a lookup that waits for the rank).
//!
//! **Only pairs that can ever merge are kept** ([`reachable`]). A token `t` made by merging
//! `(a, b)` over some span of a piece: every earlier merge touching the span stayed inside it
//! (else a symbol would cross its edge), and merges inside a span run in the order they run in
//! the span alone (the rank order, leftmost first, is the same among them). So the span went
//! through the states of `t`'s bytes merged alone, and `(a, b)` is the last merge of that run.
//! Every other split of `t` (tiktoken ranks list all of them: 446,189 pairs for o200k's 199,998
//! tokens) and every merge of a token its own run does not make never happens, and a run with
//! only the kept pairs makes the same choices (each chosen pair is kept, and is still the
//! lowest, leftmost one among the kept). A token whose own run gives itself is also the one
//! answer for a piece that spells it (the whole-piece lookup of merges mode).

/// The rank of a pair that does not merge.
pub const NO_RANK: u32 = u32::MAX;
const EMPTY: u64 = u64::MAX;
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;
/// Ids below this (bytes and the first merges of a trained vocabulary: the pairs a miss looks
/// up most) are looked up in a dense grid of 2-byte cells (512 KiB) that stays in the L2 cache.
pub const GRID: u32 = 512;

/// Where a pair is in a [`PairTable`] (see `PairTable::find`).
enum Found {
    Grid(usize),
    Slot(usize, u64),
    No,
}

pub struct PairTable {
    /// Pairs of two ids below [`GRID`]: an index into `grid_ranks` per cell (0: no pair).
    grid: Box<[u16]>,
    grid_ranks: Box<[u32]>,
    /// Whether the grid ran out of indices (some pairs of small ids are in the slots then).
    grid_full: bool,
    slots: Box<[u64]>,
    /// Merges mode: the token each pair makes, beside its rank (`grid_ranks`' and `slots`'
    /// indices), so the short merge reads it with the rank instead of after it (see
    /// [`Self::get_made`]); empty in tiktoken mode, where the token is the rank.
    grid_made: Box<[u32]>,
    slot_made: Box<[u32]>,
    /// Two bits per pair of the slots (about 8 bits a pair): most pairs a merge looks up after
    /// joining two tokens do not exist (40-77% on the corpora), and this answers them from the
    /// L2 cache instead of a probe of the table.
    filter: Box<[u64]>,
    filter_shift: u32,
    mask: usize,
    /// 64 - log2(capacity).
    shift: u32,
    id_bits: u32,
    rank_bits: u32,
}

impl PairTable {
    /// The table of `pairs` `(left, right, rank)`; a pair given twice keeps its lowest rank.
    /// `max_id` bounds every id the table will be asked about (larger ones never match).
    pub fn new(pairs: &[(u32, u32, u32)], max_id: u32) -> Result<Self, String> {
        // The all-ones id of `id_bits` is never a token, so no key is all ones (the empty slot).
        let id_bits = (64 - (max_id as u64 + 1).leading_zeros()).max(1);
        let max_rank = pairs.iter().map(|p| p.2).max().unwrap_or(0);
        let rank_bits = 64u32.saturating_sub(2 * id_bits);
        if rank_bits < 1 || (max_rank as u64) >> rank_bits != 0 {
            return Err(format!(
                "a vocabulary with token ids up to {max_id} and {} merges is too large for the encoder's pair table \
                 (2 x {id_bits} bits of ids and {} of ranks must fit 64)",
                max_rank as u64 + 1,
                64 - (max_rank as u64 + 1).leading_zeros()
            ));
        }
        let mut grid = vec![0u16; (GRID * GRID) as usize];
        let mut grid_ranks = vec![NO_RANK];
        let mut rest = Vec::with_capacity(pairs.len());
        for &(a, b, r) in pairs {
            if (a | b) < GRID && grid_ranks.len() < u16::MAX as usize {
                let cell = &mut grid[((a * GRID) | b) as usize];
                if *cell == 0 {
                    *cell = grid_ranks.len() as u16;
                    grid_ranks.push(r);
                } else {
                    let k = *cell as usize;
                    grid_ranks[k] = grid_ranks[k].min(r);
                }
            } else {
                rest.push((a, b, r));
            }
        }
        let cap = (2 * rest.len()).next_power_of_two().max(16);
        let words = (rest.len() / 8).next_power_of_two().max(64);
        let grid_full = grid_ranks.len() >= u16::MAX as usize;
        let mut t = PairTable {
            grid_full,
            grid: grid.into_boxed_slice(),
            grid_ranks: grid_ranks.into_boxed_slice(),
            slots: vec![EMPTY; cap].into_boxed_slice(),
            grid_made: Box::default(),
            slot_made: Box::default(),
            filter: vec![0; words].into_boxed_slice(),
            filter_shift: 64 - words.trailing_zeros(),
            mask: cap - 1,
            shift: 64 - cap.trailing_zeros(),
            id_bits,
            rank_bits,
        };
        for (a, b, r) in rest {
            t.insert(a, b, r);
        }
        Ok(t)
    }

    #[inline(always)]
    fn key(&self, a: u32, b: u32) -> u64 {
        // An id of u32::MAX (a byte without a token) sets bits above the key's width, or makes
        // the right id all ones: neither is in the table.
        ((a as u64) << self.id_bits) | b as u64
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(MIX) >> self.shift) as usize
    }

    /// The filter's word and two bits of a key (bits from the middle of the product: its low
    /// bits depend only on the key's low bits).
    #[inline(always)]
    fn filter_bits(&self, key: u64) -> (usize, u64) {
        let h = key.wrapping_mul(MIX);
        ((h >> self.filter_shift) as usize, (1u64 << ((h >> 20) & 63)) | (1u64 << ((h >> 26) & 63)))
    }

    fn insert(&mut self, a: u32, b: u32, rank: u32) {
        if (a | b) < GRID {
            // (The grid is full: a pair whose cell is set keeps it.)
            let k = self.grid[((a * GRID) | b) as usize] as usize;
            if k != 0 {
                self.grid_ranks[k] = self.grid_ranks[k].min(rank);
                return;
            }
        }
        let key = self.key(a, b);
        let (w, m) = self.filter_bits(key);
        self.filter[w] |= m;
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                self.slots[i] = (key << self.rank_bits) | rank as u64;
                return;
            }
            if s >> self.rank_bits == key {
                if self.rank_of(s) > rank {
                    self.slots[i] = (key << self.rank_bits) | rank as u64;
                }
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Where the pair `(a, b)` is: its grid cell's index into `grid_ranks`, or its slot and
    /// the slot's word.
    #[inline(always)]
    fn find(&self, a: u32, b: u32) -> Found {
        if (a | b) < GRID {
            // SAFETY: both ids are below GRID.
            let k = unsafe { *self.grid.get_unchecked(((a * GRID) | b) as usize) };
            if k != 0 || !self.grid_full {
                return Found::Grid(k as usize);
            }
        }
        let key = self.key(a, b);
        let (w, m) = self.filter_bits(key);
        // SAFETY: w < filter.len() (the top bits of the product).
        if unsafe { *self.filter.get_unchecked(w) } & m != m {
            return Found::No;
        }
        let mut i = self.home(key);
        loop {
            // SAFETY: i <= mask < slots.len().
            let s = unsafe { *self.slots.get_unchecked(i) };
            if s >> self.rank_bits == key {
                return Found::Slot(i, s);
            }
            if s == EMPTY {
                return Found::No;
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline(always)]
    fn rank_of(&self, s: u64) -> u32 {
        (s & !(EMPTY << self.rank_bits)) as u32
    }

    /// The rank of the pair `(a, b)`, or [`NO_RANK`].
    #[inline(always)]
    pub fn get(&self, a: u32, b: u32) -> u32 {
        match self.find(a, b) {
            // SAFETY: a cell holds an index into `grid_ranks` (0: its NO_RANK).
            Found::Grid(k) => unsafe { *self.grid_ranks.get_unchecked(k) },
            Found::Slot(_, s) => self.rank_of(s),
            Found::No => NO_RANK,
        }
    }

    /// Stores the token each pair makes (`result(rank)`, merges mode) for [`Self::get_made`].
    pub fn keep_made(&mut self, result: &dyn Fn(u32) -> u32) {
        self.grid_made = self.grid_ranks.iter().map(|&r| if r == NO_RANK { 0 } else { result(r) }).collect();
        self.slot_made = self.slots.iter().map(|&s| if s == EMPTY { 0 } else { result(self.rank_of(s)) }).collect();
    }

    /// The rank of the pair `(a, b)` and the token it makes, or `(NO_RANK, _)`: both from the
    /// same index, so the token is not a second lookup that waits for the rank.
    ///
    /// # Safety
    /// [`Self::keep_made`] must have run (the token arrays are read unchecked).
    #[inline(always)]
    pub unsafe fn get_made(&self, a: u32, b: u32) -> (u32, u32) {
        debug_assert!(self.grid_made.len() == self.grid_ranks.len() && self.slot_made.len() == self.slots.len());
        match self.find(a, b) {
            // SAFETY: `keep_made` (the caller's contract) made `grid_made` and `slot_made` as
            // long as `grid_ranks` and `slots`.
            Found::Grid(k) => unsafe { (*self.grid_ranks.get_unchecked(k), *self.grid_made.get_unchecked(k)) },
            Found::Slot(i, s) => (self.rank_of(s), unsafe { *self.slot_made.get_unchecked(i) }),
            Found::No => (NO_RANK, 0),
        }
    }

    /// Every pair with its rank, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
        let id_mask = (1u64 << self.id_bits) - 1;
        let grid = self.grid.iter().enumerate().filter(|(_, &k)| k != 0).map(|(c, &k)| (c as u32 / GRID, c as u32 % GRID, self.grid_ranks[k as usize]));
        grid.chain(self.slots.iter().filter(|&&s| s != EMPTY).map(move |&s| {
            let key = s >> self.rank_bits;
            ((key >> self.id_bits) as u32, (key & id_mask) as u32, self.rank_of(s))
        }))
    }

    pub fn bytes(&self) -> usize {
        self.slots.len() * 8 + self.filter.len() * 8 + self.grid.len() * 2 + self.grid_ranks.len() * 4 + (self.grid_made.len() + self.slot_made.len()) * 4
    }
}

/// The pairs of `full` that can ever merge (module doc) with their ranks, and the tokens whose
/// own run from bytes gives themselves. `result(rank)` is the token a pair of that rank makes.
pub fn reachable<'a>(
    full: &PairTable,
    result: &dyn Fn(u32) -> u32,
    byte_ids: &[u32; 256],
    tokens: impl Iterator<Item = (u32, &'a [u8])>,
) -> (Vec<(u32, u32, u32)>, Vec<u32>) {
    let (mut kept, mut proven) = (Vec::new(), Vec::new());
    let mut syms = Vec::new();
    for (id, bytes) in tokens {
        if bytes.len() < 2 {
            continue;
        }
        syms.clear();
        syms.extend(bytes.iter().map(|&b| byte_ids[b as usize]));
        let mut last = None;
        // The plain merge (construction only): lowest rank, leftmost.
        while syms.len() > 1 {
            let (mut best, mut at) = (NO_RANK, 0);
            for i in 0..syms.len() - 1 {
                let r = full.get(syms[i], syms[i + 1]);
                if r < best {
                    (best, at) = (r, i);
                }
            }
            if best == NO_RANK {
                break;
            }
            last = Some((syms[at], syms[at + 1], best));
            syms[at] = result(best);
            syms.remove(at + 1);
        }
        if syms[..] == [id] {
            kept.extend(last);
            proven.push(id);
        }
    }
    (kept, proven)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_pair_and_no_other() {
        let mut seed = 3u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        // (511 with 100,000 pairs: more than the grid's 65,535 cells can index.)
        for (max_id, n) in [(1u32, 2000), (255, 2000), (511, 100_000), (50_000, 2000), (1 << 20, 2000)] {
            let pairs: Vec<(u32, u32, u32)> = (0..n).map(|r| (next() % (max_id + 1), next() % (max_id + 1), r)).collect();
            let t = PairTable::new(&pairs, max_id).unwrap();
            let mut want = std::collections::HashMap::new();
            for &(a, b, r) in &pairs {
                let w = want.entry((a, b)).or_insert(r);
                *w = (*w).min(r);
            }
            let mut t = t;
            t.keep_made(&|r| r * 3 + 1);
            for (&(a, b), &r) in &want {
                assert_eq!(t.get(a, b), r, "({a}, {b}) of max id {max_id}");
                // SAFETY: keep_made ran.
                assert_eq!(unsafe { t.get_made(a, b) }, (r, r * 3 + 1), "({a}, {b}) of max id {max_id}");
            }
            let mut got: Vec<_> = t.iter().collect();
            got.sort();
            let mut all: Vec<_> = want.iter().map(|(&(a, b), &r)| (a, b, r)).collect();
            all.sort();
            assert_eq!(got, all);
            for _ in 0..2000 {
                let (a, b) = (next() % (max_id + 1), next() % (max_id + 1));
                assert_eq!(t.get(a, b), want.get(&(a, b)).copied().unwrap_or(NO_RANK));
            }
            // Ids of bytes without a token never match.
            assert_eq!(t.get(u32::MAX, 0), NO_RANK);
            assert_eq!(t.get(0, u32::MAX), NO_RANK);
            assert_eq!(t.get(u32::MAX, u32::MAX), NO_RANK);
        }
    }

    #[test]
    fn too_wide_is_an_error() {
        assert!(PairTable::new(&[(0, 1, 1 << 23)], (1 << 21) - 2).is_err());
        assert!(PairTable::new(&[(0, 1, (1 << 22) - 1)], (1 << 21) - 2).is_ok());
    }
}
