//! The word cache: each distinct piece's ids, looked up before running BPE (natural text is
//! dominated by a few hundred thousand distinct pre-tokens, so after warm-up nearly every piece
//! is one lookup).
//!
//! * **Three tables by length.** 2..=15 bytes: the `short` table (keys packed in a `u128`);
//!   16..=31: `mid` (32-byte keys); 32..=[`MAX_CACHED_LEN`]: a hash map of boxed bytes; longer
//!   pieces are not cached. Up to three ids sit inline in the entry (98% of pieces), more in
//!   the arena.
//! * **Arena invariant.** The arena keeps [`ARENA_SLACK`] spare ids allocated past its end, so
//!   the encoder's drain copies a short piece's arena ids as one fixed block of 16.
//! * **Bounded memory.** A cache charges what it really holds (table capacities, arena
//!   capacity, long keys plus an allowance each) and checks every growth against its budget
//!   *before* growing; slots draw on one pool shared by the encoder's slots ([`Caches`]). A
//!   table grows at 1/4 load while that fits and fills to 1/2 when it does not; a growth that
//!   must happen and does not fit wipes the cache (allocations kept), and a piece that still
//!   does not fit is not cached. Why 1/4 and the history: [log](../../docs/performance.md#word-cache).
//! * **No shared mutable state on the hot path.** A worker borrows one slot per unit of work
//!   (`try_lock`, never blocking: a busy slot set means a private throw-away cache). Slots do
//!   not share words: a miss costs less than a shared lookup ([log](../../docs/performance.md#the-miss-path)).

mod pages;
mod shared;
mod table;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::encode::Seed;
use crate::keys::pack;
pub use shared::{CacheGuard, Caches};
pub use table::{pack32, Entry, Key32, Table, TableKey};

/// Pieces longer than this (in bytes) are never cached.
pub const MAX_CACHED_LEN: usize = 255;
/// Default total cache budget of one encoder.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// Per-slot word cache.
///
/// * pieces of 2..=15 bytes: `short` table, key packed in a u128;
/// * pieces of 16..=31 bytes: `mid` table, key packed in 32 bytes;
/// * pieces of 32..=[`MAX_CACHED_LEN`] bytes: `long` hashbrown map keyed by boxed bytes.
///
/// Table values are `[a, b, c, n]`: if `n <= 3` the ids are inline, otherwise `a` is an offset
/// into `arena` and `n & 0x7fff_ffff` the count.
///
/// Memory (`used()`): table capacities (entry size x slots) + arena capacity x 4 + long-map
/// entries (key bytes + 48). Before anything grows, the growth is checked against `budget`.
/// A table grows at 1/4 load if that fits, else it fills on to 1/2; a growth that must happen
/// and does not fit wipes the cache (allocations kept, so the total never passes the budget),
/// and if it still would not fit, the piece is simply not cached.
pub struct WordCache {
    /// The short table; read through [`Self::table`] (a disabled cache reads `seed` instead).
    pub short: Table<u128>,
    pub mid: Table<Key32>,
    long: FxHashMap<Box<[u8]>, (u32, u32)>,
    pub arena: Vec<u32>,
    long_bytes: usize,
    /// Most bytes this cache may use: the encoder's whole budget for a slot, a small private
    /// budget for a throw-away cache.
    pub(crate) budget: usize,
    /// Slots only: bytes used by all slots of the encoder together (at most `budget`).
    pub(crate) pool: Option<Arc<AtomicUsize>>,
    /// Bytes this cache has added to `pool` (>= `used()`; given back when the cache drops).
    pub(crate) charged: usize,
    pub hits: u64,
    pub misses: u64,
    /// The vocabulary's frequent whole tokens of 2..=15 bytes, as a short table
    /// (`crate::encode::Seed`): a slot's short table starts as a copy of it, so those pieces
    /// are hits from the start.
    seed: Option<Arc<Seed>>,
    /// Whether the short table holds the seed's words (until a wipe), or the cache is disabled
    /// and reads all whole tokens: a short piece it misses is a whole token only if the seed
    /// left it out (`Ranks::maybe_unseeded`).
    pub seeded: bool,
    /// A disabled cache (budget below 4 KiB) looks short pieces up in all whole tokens.
    pub view: bool,
}

pub const LONG_FLAG: u32 = 0x8000_0000;
/// Spare ids kept allocated past the arena's end (see `WordCache::put`).
pub const ARENA_SLACK: usize = 16;
const LONG_ENTRY_COST: usize = 48;
const SHORT_INITIAL: usize = 1 << 12;
/// A budget below this disables the cache (nothing is learned).
const MIN_BUDGET: usize = 4096;

impl WordCache {
    /// Allocates nothing: the tables start as 1-slot sentinels and get their first real
    /// allocation on the first insert (so idle slots and idle encoders cost no memory).
    pub fn new(budget: usize, pool: Option<Arc<AtomicUsize>>, seed: Option<Arc<Seed>>) -> Self {
        let view = budget < MIN_BUDGET && seed.is_some();
        WordCache {
            seed,
            seeded: view,
            view,
            pool,
            charged: 0,
            short: Table::with_capacity_pow2(1),
            mid: Table::with_capacity_pow2(1),
            long: FxHashMap::default(),
            arena: Vec::new(),
            long_bytes: 0,
            budget,
            hits: 0,
            misses: 0,
        }
    }

    /// Slots of a table's first allocation.
    fn first_cap(&self) -> usize {
        if self.budget >= SHORT_INITIAL * 80 * 2 {
            SHORT_INITIAL
        } else {
            16
        }
    }

    /// The table short pieces are looked up in: the short table, or for a disabled cache the
    /// vocabulary's whole tokens (never written).
    #[inline(always)]
    pub fn table(&self) -> &Table<u128> {
        match (&self.seed, self.view) {
            (Some(seed), true) => &seed.all,
            _ => &self.short,
        }
    }

    pub fn used(&self) -> usize {
        self.short.bytes() + self.mid.bytes() + self.arena.capacity() * 4 + self.long_bytes
    }

    #[inline(always)]
    pub fn emit(&self, v: &[u32; 4], out: &mut Vec<u32>) {
        let n = v[3];
        if n & LONG_FLAG == 0 {
            // Fixed 3-id copy into spare capacity, then set the length to the real count: no
            // variable-length memcpy call for the 1–3 ids of almost every piece.
            out.reserve(3);
            let len = out.len();
            // SAFETY: capacity >= len + 3 after reserve; n <= 3 and v[..n] are initialized ids.
            unsafe {
                std::ptr::copy_nonoverlapping(v.as_ptr(), out.as_mut_ptr().add(len), 3);
                out.set_len(len + n as usize);
            }
        } else {
            let (o, n) = (v[0] as usize, (n & !LONG_FLAG) as usize);
            out.extend_from_slice(&self.arena[o..o + n]);
        }
    }

    /// Looks `piece` (2..=MAX_CACHED_LEN bytes) up; appends its ids and returns true on a hit.
    #[inline(always)]
    pub fn get(&self, piece: &[u8], out: &mut Vec<u32>) -> bool {
        let len = piece.len();
        let v = if len < 16 {
            self.table().get(&pack(piece))
        } else if len < 32 {
            self.mid.get(&pack32(piece))
        } else {
            return match self.long.get(piece) {
                Some(&(o, n)) => {
                    out.extend_from_slice(&self.arena[o as usize..(o + n) as usize]);
                    true
                }
                None => false,
            };
        };
        match v {
            Some(v) => {
                self.emit(v, out);
                true
            }
            None => false,
        }
    }

    /// Forgets every word (allocations kept).
    pub fn clear_words(&mut self) {
        self.wipe()
    }

    fn wipe(&mut self) {
        self.seeded = self.view;
        self.short.clear();
        self.mid.clear();
        self.long.clear();
        self.arena.clear();
        self.long_bytes = 0;
    }

    /// May this cache grow to `want` bytes? Slots draw on the encoder's shared pool.
    fn fits(&mut self, want: usize) -> bool {
        if want > self.budget {
            return false;
        }
        if want <= self.charged {
            return true;
        }
        let Some(pool) = &self.pool else { return true };
        let (extra, total) = (want - self.charged, self.budget);
        let ok = pool
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| (u + extra <= total).then_some(u + extra))
            .is_ok();
        if ok {
            self.charged = want;
        }
        ok
    }

    /// Can `delta` more bytes be used? Wipes once if that makes it fit.
    fn room_for(&mut self, delta: usize) -> bool {
        if self.fits(self.used() + delta) {
            return true;
        }
        self.wipe();
        let want = self.used() + delta;
        self.fits(want)
    }

    /// Makes sure the table `pick` selects has a free slot: it grows at 1/4 load when the budget
    /// has room for that, else it fills up to 1/2 before the slot is wiped (so a tight budget
    /// holds as many words as before). False if the word cannot be cached.
    fn make_room<K: TableKey>(&mut self, pick: fn(&mut WordCache) -> &mut Table<K>) -> bool {
        if !pick(self).sparse_full() {
            return true;
        }
        let first = self.first_cap();
        let d = pick(self).bytes().max(first * std::mem::size_of::<Entry<K>>());
        if self.fits(self.used() + d) {
            pick(self).grow(first);
        } else if pick(self).full() {
            if !self.room_for(d) {
                return false;
            }
            // (A wipe empties the table, unless it was already empty.)
            if pick(self).full() {
                pick(self).grow(first);
            }
        }
        true
    }

    pub fn put(&mut self, piece: &[u8], ids: &[u32]) {
        let len = piece.len();
        if self.budget < MIN_BUDGET || len > MAX_CACHED_LEN || ids.len() > (u32::MAX >> 2) as usize {
            return;
        }
        // A fresh short table starts as a copy of the seed, where the budget has room for it.
        if len < 16 && self.short.entries.len() <= 1 {
            if let Some(seed) = self.seed.clone() {
                if self.fits(self.used() + seed.table.bytes()) {
                    self.short = seed.table.copy();
                    self.seeded = true;
                }
            }
        }
        // Make sure the target table has a free slot.
        let room = match len {
            ..16 => self.make_room(|c| &mut c.short),
            16..32 => self.make_room(|c| &mut c.mid),
            _ => true,
        };
        if !room {
            return;
        }
        let in_arena = ids.len() > 3 || len >= 32;
        if in_arena {
            // ARENA_SLACK spare ids past the end: the drain copies a short piece's arena ids
            // as one fixed block of 16 (see `Encoder::drain`).
            let need = self.arena.len() + ids.len() + ARENA_SLACK;
            let mut delta = if need > self.arena.capacity() { (need.max(self.arena.capacity() * 2) - self.arena.capacity()) * 4 } else { 0 };
            if len >= 32 {
                delta += LONG_ENTRY_COST + len;
            }
            if !self.room_for(delta) {
                return;
            }
            if self.arena.len() + ids.len() > (u32::MAX >> 1) as usize {
                self.wipe();
            }
            // A wipe may have emptied a table we checked above; it still has free slots.
            let need = self.arena.len() + ids.len() + ARENA_SLACK;
            if need > self.arena.capacity() {
                let target = need.max(self.arena.capacity() * 2);
                self.arena.reserve_exact(target - self.arena.len());
            }
        }
        if len < 32 {
            let v = if !in_arena {
                let mut v = [0u32; 4];
                v[..ids.len()].copy_from_slice(ids);
                v[3] = ids.len() as u32;
                v
            } else {
                let o = self.arena.len() as u32;
                self.arena.extend_from_slice(ids);
                [o, 0, 0, ids.len() as u32 | LONG_FLAG]
            };
            if len < 16 {
                self.short.insert(pack(piece), v);
            } else {
                self.mid.insert(pack32(piece), v);
            }
        } else {
            let o = self.arena.len() as u32;
            self.arena.extend_from_slice(ids);
            self.long.insert(piece.into(), (o, ids.len() as u32));
            self.long_bytes += LONG_ENTRY_COST + len;
        }
    }
}

impl Drop for WordCache {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            pool.fetch_sub(self.charged, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_grow_at_a_quarter_and_fill_to_half_under_a_tight_budget() {
        let word = |k: usize| format!("w{k:05}").into_bytes();
        // Room to spare: the short table doubles whenever it would pass 1/4 load.
        let mut c = WordCache::new(1 << 24, None, None);
        for k in 0..5000 {
            c.put(&word(k), &[k as u32]);
            assert!(c.short.len * 4 <= c.short.entries.len(), "{} in {}", c.short.len, c.short.entries.len());
        }
        // 4096 bytes: 128 slots (4 KiB) is the biggest table that fits, so it fills to 64
        // words (1/2) instead of wiping at 32, and every one of them is still found.
        let mut c = WordCache::new(4096, None, None);
        for k in 0..64 {
            c.put(&word(k), &[k as u32]);
        }
        assert_eq!((c.short.len, c.short.entries.len()), (64, 128));
        for k in 0..64 {
            let mut out = Vec::new();
            assert!(c.get(&word(k), &mut out) && out == [k as u32], "{k}");
        }
        assert!(c.used() <= 4096);
        // The 65th word would pass 1/2: the slot is wiped (that word is not cached: even the
        // emptied table has no room to double) and the next one starts it over.
        c.put(&word(64), &[64]);
        assert_eq!((c.short.len, c.short.entries.len()), (0, 128));
        c.put(&word(65), &[65]);
        assert_eq!(c.short.len, 1);
    }
}
