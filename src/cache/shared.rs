//! The encoder's cache slots (one per pool worker plus spares, sharing one budget) and the
//! second-level cache they share.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::WordCache;
use crate::encode::Seed;

/// A second-level cache shared by the slots: a slot that misses looks here before running BPE,
/// and a word it had to encode is put here too.
///
/// Why: each worker thread has its own slot (no locks on the hot path), so a word learned by
/// one thread was still a miss, and ~2 µs of BPE, in every other thread's slot. Misses are ~1%
/// of pieces but they were most of the time of the first runs over a corpus with 2 threads
/// (GPT-2 English, whole documents: the 2nd and 3rd calls at ~600 MB/s with 12-17k misses,
/// against ~1,200 once every slot knew every word). A lookup here is a lock and a hash map
/// probe, ~100-200 ns.
///
/// 16 shards of a mutex-protected map. Only ever `try_lock`ed: a busy shard reads as a miss
/// (lookup) or is skipped (insert), so nothing blocks, and a child forked while a parent thread
/// held a shard cannot deadlock. Memory: at most a quarter of `cache_bytes`, drawn from the
/// same pool as the slots (key bytes + 4 per id + [`SHARED_ENTRY_COST`] per entry: the map's
/// bucket and two small heap allocations).
type SharedShard = Mutex<FxHashMap<Box<[u8]>, Box<[u32]>>>;

pub struct Shared {
    pub(crate) shards: Vec<SharedShard>,
    /// Bytes held here (also counted in `pool`).
    pub(crate) bytes: AtomicUsize,
    limit: usize,
    pool: Arc<AtomicUsize>,
    budget: usize,
}

const SHARED_SHARDS: usize = 16;
/// Bytes charged per shared entry besides its key and ids: a hash-map bucket (~40 B with the
/// load factor) and two heap allocations (>= 32 B each with malloc's overhead).
const SHARED_ENTRY_COST: usize = 112;

impl Shared {
    fn new(budget: usize, pool: Arc<AtomicUsize>) -> Self {
        Shared {
            shards: (0..SHARED_SHARDS).map(|_| Mutex::new(FxHashMap::default())).collect(),
            bytes: AtomicUsize::new(0),
            limit: budget / 4,
            pool,
            budget,
        }
    }

    fn shard(&self, piece: &[u8]) -> &SharedShard {
        use std::hash::{BuildHasher, Hasher};
        let mut h = rustc_hash::FxBuildHasher.build_hasher();
        h.write(piece);
        &self.shards[(h.finish() >> 59) as usize % SHARED_SHARDS]
    }

    /// Appends the ids of `piece` and returns true if it is here.
    pub fn get(&self, piece: &[u8], out: &mut Vec<u32>) -> bool {
        if self.limit == 0 {
            return false;
        }
        let Ok(m) = self.shard(piece).try_lock() else { return false };
        match m.get(piece) {
            Some(ids) => {
                out.extend_from_slice(ids);
                true
            }
            None => false,
        }
    }

    pub fn put(&self, piece: &[u8], ids: &[u32]) {
        let cost = piece.len() + 4 * ids.len() + SHARED_ENTRY_COST;
        if self.bytes.load(Ordering::Relaxed) + cost > self.limit {
            return;
        }
        // Reserve without ever passing the budget, even for a moment (a slot's `fits` could
        // fail in between and wipe that slot).
        let budget = self.budget;
        if self.pool.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| (u + cost <= budget).then_some(u + cost)).is_err() {
            return;
        }
        let Ok(mut m) = self.shard(piece).try_lock() else {
            self.pool.fetch_sub(cost, Ordering::Relaxed);
            return;
        };
        if m.insert(piece.into(), ids.into()).is_some() {
            // Already there (another slot put it first): nothing new is held.
            self.pool.fetch_sub(cost, Ordering::Relaxed);
            return;
        }
        self.bytes.fetch_add(cost, Ordering::Relaxed);
    }

    fn clear(&self) {
        for s in &self.shards {
            if let Ok(mut m) = s.try_lock() {
                let freed: usize = m.iter().map(|(k, v)| k.len() + 4 * v.len() + SHARED_ENTRY_COST).sum();
                *m = FxHashMap::default();
                self.bytes.fetch_sub(freed, Ordering::Relaxed);
                self.pool.fetch_sub(freed, Ordering::Relaxed);
            }
        }
    }
}

/// One cache slot, alone on its cache lines: the slots sit side by side in a Vec and each
/// worker bumps its slot's hit counter per piece, so without the padding two workers would
/// write to the same line all the time (false sharing).
#[repr(align(128))]
pub(crate) struct Slot(pub(crate) Mutex<WordCache>);

/// Cache slots per encoder: one per pool worker plus spares for Python threads calling
/// `encode` concurrently (GIL released), so that they rarely fall back to a cold private
/// cache. Slots allocate lazily, so unused ones cost nothing; they share one budget.
fn slot_count() -> usize {
    2 * std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) + 2
}

/// The cache slots of one encoder and their shared second level, within one budget.
pub struct Caches {
    budget: usize,
    seed: Option<Arc<Seed>>,
    pub(crate) slots: Vec<Slot>,
    pub shared: Shared,
}

impl Caches {
    /// Slots within `budget` bytes, their short tables seeded with `seed` (see `WordCache`).
    pub fn new(budget: usize, seed: Option<Arc<Seed>>) -> Self {
        let pool = Arc::new(AtomicUsize::new(0));
        Caches {
            budget,
            slots: (0..slot_count()).map(|_| Slot(Mutex::new(WordCache::new(budget, Some(pool.clone()), seed.clone())))).collect(),
            shared: Shared::new(budget, pool),
            seed,
        }
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Borrows a slot, preferring `hint`; never blocks.
    pub fn borrow(&self, hint: usize) -> CacheGuard<'_> {
        let n = self.slots.len();
        for k in 0..n {
            if let Ok(mut g) = self.slots[(hint + k) % n].0.try_lock() {
                g.share = false;
                return CacheGuard::Slot(g);
            }
        }
        // Everything busy (or poisoned): a private cache with a small budget.
        CacheGuard::Private(WordCache::new((self.budget / n).min(16 << 20), None, self.seed.clone()))
    }

    /// Drops every cached word (of the slots that are not busy).
    pub fn clear(&self) {
        self.shared.clear();
        for s in &self.slots {
            if let Ok(mut c) = s.0.try_lock() {
                let (b, pool) = (c.budget, c.pool.clone());
                *c = WordCache::new(b, pool, self.seed.clone());
            }
        }
    }

    /// (hits, misses, approximate bytes used) summed over the slots that are not busy.
    pub fn stats(&self) -> (u64, u64, usize) {
        let mut t = (0, 0, 0);
        for s in &self.slots {
            if let Ok(c) = s.0.try_lock() {
                // A disabled cache reads whole tokens from the vocabulary: not cache hits.
                t.0 += if c.view { 0 } else { c.hits };
                t.1 += c.misses;
                t.2 += c.used();
            }
        }
        t.2 += self.shared.bytes.load(Ordering::Relaxed);
        t
    }
}

/// A cache slot borrowed for one unit of work: a locked slot, or a private one.
pub enum CacheGuard<'a> {
    Slot(std::sync::MutexGuard<'a, WordCache>),
    Private(WordCache),
}

impl std::ops::Deref for CacheGuard<'_> {
    type Target = WordCache;
    fn deref(&self) -> &WordCache {
        match self {
            CacheGuard::Slot(g) => g,
            CacheGuard::Private(c) => c,
        }
    }
}
impl std::ops::DerefMut for CacheGuard<'_> {
    fn deref_mut(&mut self) -> &mut WordCache {
        match self {
            CacheGuard::Slot(g) => g,
            CacheGuard::Private(c) => c,
        }
    }
}
