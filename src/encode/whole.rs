//! Whole pieces: the tokens a piece may be by itself ([`Whole`], the miss path's first probe,
//! see `super::merge`) and what a word cache starts from ([`Seed`]).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::cache::Table;
use crate::keys::pack;

/// Pieces that are one token by themselves: the short ones (2..=15 bytes) in a packed-key
/// table of the word cache's kind, longer ones in a map.
///
/// The short table is kept at most a quarter full, the word cache's own load: a cache slot's
/// short table starts as a copy of it (the seed, see `crate::cache`), and a disabled cache
/// looks short pieces up in it directly.
pub struct Whole {
    pub(super) short: Arc<Table<u128>>,
    long: FxHashMap<Box<[u8]>, u32>,
}

impl Whole {
    pub(super) fn new<'a>(tokens: impl Iterator<Item = (&'a [u8], u32)> + Clone) -> Self {
        let n = tokens.clone().filter(|(b, _)| (2..16).contains(&b.len())).count();
        let mut short = Table::with_capacity_pow2((4 * n + 4).max(16));
        let mut long = FxHashMap::default();
        for (b, id) in tokens {
            match b.len() {
                0 | 1 => {}
                2..=15 => short.insert(pack(b), [id, 0, 0, 1]),
                _ => {
                    long.insert(b.into(), id);
                }
            }
        }
        Whole { short: Arc::new(short), long }
    }

    #[inline(always)]
    pub fn get(&self, piece: &[u8]) -> Option<u32> {
        match piece.len() {
            0 | 1 => None,
            2..=15 => self.short.get(&pack(piece)).map(|v| v[0]),
            _ => self.long.get(piece).copied(),
        }
    }

    pub fn len(&self) -> usize {
        self.short.len + self.long.len()
    }
}

/// What a word cache starts from: the whole tokens of 2..=15 bytes with the lowest ids (at
/// most [`SEED_TOKENS`]: the frequent ones of a trained vocabulary) as a short table at a
/// quarter load, which a slot's short table starts as a copy of, so they are hits from the
/// first piece; all of them (`all`, which a disabled cache reads in place); and a filter of
/// those left out (so a miss looks in `all` only when it may be one of them).
///
/// Why capped: o200k's 195 k short tokens make a 32 MiB table, and a slot holding all of them
/// spread a corpus's few tens of thousands of words over it: o200k English primed ran at
/// 519 MB/s against 716 with the lowest 32 k ([log](../../docs/performance.md#the-miss-path)).
pub struct Seed {
    pub table: Table<u128>,
    pub all: Arc<Table<u128>>,
    pub(super) unseeded: Filter,
}

/// Whole tokens in a cache's seed, at most.
pub const SEED_TOKENS: usize = 1 << 15;

/// A set of packed keys with false positives: two bits of one 64-bit word per key, in 2^20
/// bits (128 KiB); about 4% false positives for 150 k keys.
pub(super) struct Filter {
    words: Box<[u64]>,
}

impl Filter {
    const BITS: u32 = 20;

    fn new(keys: impl Iterator<Item = u128>) -> Self {
        let mut words = vec![0u64; 1 << (Self::BITS - 6)];
        for k in keys {
            let (w, m) = Self::at(k);
            words[w] |= m;
        }
        Filter { words: words.into_boxed_slice() }
    }

    #[inline(always)]
    fn at(key: u128) -> (usize, u64) {
        use crate::cache::TableKey;
        let h = key.mix();
        ((h >> (64 - (Self::BITS - 6))) as usize, (1u64 << (h & 63)) | (1u64 << ((h >> 6) & 63)))
    }

    #[inline(always)]
    pub(super) fn may_hold(&self, key: u128) -> bool {
        let (w, m) = Self::at(key);
        self.words[w] & m == m
    }
}

impl Seed {
    pub(super) fn new(all: Arc<Table<u128>>) -> Self {
        let mut ids: Vec<u32> = all.entries.iter().filter(|e| e.key != 0).map(|e| e.val[0]).collect();
        ids.sort_unstable();
        let below = ids.get(SEED_TOKENS).copied().unwrap_or(u32::MAX);
        let seeded = |e: &&crate::cache::Entry<u128>| e.key != 0 && e.val[0] < below;
        let table = if below == u32::MAX {
            all.copy()
        } else {
            let mut t = Table::with_capacity_pow2(4 * SEED_TOKENS + 4);
            all.entries.iter().filter(seeded).for_each(|e| t.insert(e.key, e.val));
            t
        };
        let unseeded = Filter::new(all.entries.iter().filter(|e| e.key != 0 && e.val[0] >= below).map(|e| e.key));
        Seed { table, all, unseeded }
    }
}
