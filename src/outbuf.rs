//! Recycled output buffers for batch ids.
//!
//! A batch's ids go to numpy as one flat array. A fresh multi-MB buffer costs a page fault per
//! 4 KiB touched (above glibc's 32 MB mmap threshold every call gets fresh pages): GPT-2 on 20
//! MB of code writes 38 MB of ids, and faulting them was a fifth of the call. Advising huge
//! pages made the faults cheap but not predictable: the first two timed calls of a fresh process
//! ran at a third of the speed (code 450 -> 160 MB/s; the kernel counted no compaction stalls,
//! so the cause was not pinned down) before settling.
//!
//! So a big output buffer is handed to numpy inside an owner object (`IdBuffer` in `lib.rs`)
//! that gives it back here when the array (and every view of it) is gone, and the next batch
//! reuses its already-mapped pages. The pool keeps at most [`KEEP`] buffers of at most [`MAX_BYTES`] each
//! (their touched pages stay resident: bounded, and released by `clear`). It is only ever
//! `try_lock`ed: a busy pool (or one locked by a thread that did not survive a `fork`) just
//! means a fresh allocation.

use std::sync::Mutex;

/// Buffers kept for reuse.
pub const KEEP: usize = 2;
/// Larger buffers are freed, not kept (bytes of capacity).
pub const MAX_BYTES: usize = 1 << 30;
/// Smaller buffers are not worth recycling (malloc's heap serves them without fresh pages).
pub const MIN_BYTES: usize = 1 << 20;

/// Whether a buffer of `capacity` ids is worth keeping (between [`MIN_BYTES`] and [`MAX_BYTES`]).
pub fn keepable(capacity: usize) -> bool {
    (MIN_BYTES..=MAX_BYTES).contains(&capacity.saturating_mul(4))
}

/// An empty buffer with room for `n` ids, or `None` if the system refuses the room (instead of
/// aborting the process, as `Vec::with_capacity` would).
pub fn with_capacity(n: usize) -> Option<Vec<u32>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    Some(v)
}

/// The process's pool (see the module docs).
pub static POOL: Pool = Pool::new();

/// Kept buffers, at most [`KEEP`].
pub struct Pool(Mutex<Vec<Vec<u32>>>);

impl Pool {
    pub const fn new() -> Self {
        Pool(Mutex::new(Vec::new()))
    }

    /// An empty buffer with room for at least `n` ids: the smallest kept one that fits, else a
    /// new one (`None` if the system refuses the room).
    pub fn take(&self, n: usize) -> Option<Vec<u32>> {
        if keepable(n) {
            if let Ok(mut pool) = self.0.try_lock() {
                let fit = (0..pool.len()).filter(|&k| pool[k].capacity() >= n).min_by_key(|&k| pool[k].capacity());
                if let Some(k) = fit {
                    let mut v = pool.swap_remove(k);
                    v.clear();
                    return Some(v);
                }
            }
        }
        with_capacity(n)
    }

    /// Gives a buffer back: kept if it is worth it and the pool has room (a bigger buffer
    /// replaces the smallest kept one), else freed.
    pub fn give(&self, v: Vec<u32>) {
        if !keepable(v.capacity()) {
            return;
        }
        if let Ok(mut pool) = self.0.try_lock() {
            if pool.len() < KEEP {
                pool.push(v);
            } else if let Some(k) = (0..pool.len()).min_by_key(|&k| pool[k].capacity()) {
                if pool[k].capacity() < v.capacity() {
                    pool[k] = v;
                }
            }
        }
    }

    /// Frees every kept buffer.
    pub fn clear(&self) {
        let kept = match self.0.try_lock() {
            Ok(mut pool) => std::mem::take(&mut *pool),
            Err(_) => return,
        };
        drop(kept);
    }

    /// Capacities (in ids) of the kept buffers.
    pub fn kept(&self) -> Vec<usize> {
        self.0.try_lock().map(|p| p.iter().map(|v| v.capacity()).collect()).unwrap_or_default()
    }
}

impl Default for Pool {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_bounded_and_smallest_fit_first() {
        let pool = Pool::new();
        let mb = MIN_BYTES / 4;
        let a = pool.take(2 * mb).unwrap();
        let b = pool.take(4 * mb).unwrap();
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        pool.give(a);
        pool.give(b);
        pool.give(vec![0u32; 16]); // too small to keep
        assert_eq!(pool.kept().len(), 2);
        // Smallest that fits: a request of 1 MiB of ids gets `a`'s memory back, emptied.
        let c = pool.take(mb).unwrap();
        assert_eq!((c.as_ptr(), c.len()), (pa, 0));
        // Too big for any kept buffer: a new one.
        let d = pool.take(8 * mb).unwrap();
        assert!(d.as_ptr() != pb && d.capacity() >= 8 * mb);
        // A bigger one replaces the smallest kept when the pool is full.
        pool.give(c);
        pool.give(d);
        let mut caps = pool.kept();
        caps.sort();
        assert!(caps.len() == KEEP && caps[0] >= 4 * mb && caps[1] >= 8 * mb, "{caps:?}");
        // A refused size is an error value, not an abort.
        assert!(pool.take(usize::MAX / 8).is_none());
        pool.clear();
        assert!(pool.kept().is_empty());
    }
}
