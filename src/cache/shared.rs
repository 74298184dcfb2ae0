//! The encoder's cache slots: one per pool worker plus spares, sharing one budget.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use super::WordCache;
use crate::encode::Seed;

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

/// The cache slots of one encoder, within one budget.
pub struct Caches {
    budget: usize,
    seed: Option<Arc<Seed>>,
    pub(crate) slots: Vec<Slot>,
}

impl Caches {
    /// Slots within `budget` bytes, their short tables seeded with `seed` (see `WordCache`).
    pub fn new(budget: usize, seed: Option<Arc<Seed>>) -> Self {
        let pool = Arc::new(AtomicUsize::new(0));
        Caches {
            budget,
            slots: (0..slot_count()).map(|_| Slot(Mutex::new(WordCache::new(budget, Some(pool.clone()), seed.clone())))).collect(),
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
            if let Ok(g) = self.slots[(hint + k) % n].0.try_lock() {
                return CacheGuard::Slot(g);
            }
        }
        // Everything busy (or poisoned): a private cache with a small budget.
        CacheGuard::Private(WordCache::new((self.budget / n).min(16 << 20), None, self.seed.clone()))
    }

    /// Drops every cached word (of the slots that are not busy).
    pub fn clear(&self) {
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
