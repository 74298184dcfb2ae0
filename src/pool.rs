//! Thread pools for counting, training and encoding: fork-aware, bounded, reused.
//!
//! * **One registry per process.** `get(n)` hands out a shared rayon pool of `n` threads,
//!   building it on first use. At most [`KEPT`] pools are kept (the least recently used one is
//!   let go when a new size is asked for; its threads end once the calls using it return), so
//!   any sequence of `num_threads` values leaves a few pools alive, never one per value.
//! * **Never rayon's global pool.** Every parallel loop of the core runs inside `install` of
//!   one of these pools; the global pool would not survive a `fork()`.
//! * **Fork safety.** A rayon pool's threads do not exist in a forked child, so its first
//!   `install` would hang forever. The registry remembers the pid that filled it: a child sees
//!   another pid, forgets (leaks) the parent's pools without dropping them (dropping would try
//!   to reach threads that are not there) and builds its own. The registry's mutex is only
//!   `try_lock`ed: if a parent thread held it at fork time, the child runs on one thread.
//! * **Limits.** `num_threads` above [`MAX_THREADS`] is refused before anything starts.

use std::sync::{Arc, Mutex};

/// Most threads a call may ask for.
pub const MAX_THREADS: usize = 1024;
/// Pools kept alive at once.
pub const KEPT: usize = 3;

pub type Pool = Arc<rayon::ThreadPool>;

struct Registry {
    pid: u32,
    /// Most recently used last.
    pools: Vec<(usize, Pool)>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// Threads for `n = 0`: `RAYON_NUM_THREADS` if set, else the cores available.
pub fn default_threads() -> usize {
    if let Ok(s) = std::env::var("RAYON_NUM_THREADS") {
        if let Ok(n) = s.trim().parse::<usize>() {
            if n > 0 {
                return n.min(MAX_THREADS);
            }
        }
    }
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Refuses an absurd thread count (0 means the default).
pub fn check_threads(n: usize) -> Result<usize, String> {
    if n > MAX_THREADS {
        return Err(format!("num_threads={n} is more than {MAX_THREADS} threads"));
    }
    Ok(n)
}

/// A pool of `n` threads (0 = [`default_threads`]); None when it cannot be had (a registry held
/// by a thread that did not survive a fork, or the system refusing threads): run on the calling
/// thread then.
pub fn get(n: usize) -> Option<Pool> {
    let n = if n == 0 { default_threads() } else { n.min(MAX_THREADS) };
    let pid = std::process::id();
    let mut guard = REGISTRY.try_lock().ok()?;
    if guard.as_ref().is_some_and(|r| r.pid != pid) {
        // Forked child: the parent's threads do not exist here. Never drop those pools.
        if let Some(old) = guard.take() {
            std::mem::forget(old);
        }
    }
    let reg = guard.get_or_insert_with(|| Registry { pid, pools: Vec::new() });
    if let Some(i) = reg.pools.iter().position(|(k, _)| *k == n) {
        let entry = reg.pools.remove(i);
        let p = entry.1.clone();
        reg.pools.push(entry);
        return Some(p);
    }
    let p = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(n).thread_name(|i| format!("hf_bpe-{i}")).build().ok()?);
    if reg.pools.len() >= KEPT {
        reg.pools.remove(0);
    }
    reg.pools.push((n, p.clone()));
    Some(p)
}

/// Runs `f` on `pool`, or on the calling thread without one. Inside `f`, rayon's parallel
/// iterators use that pool; without a pool they must not be used (see [`in_pool`]).
pub fn install<R: Send>(pool: Option<&rayon::ThreadPool>, f: impl FnOnce() -> R + Send) -> R {
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// `f` of every item, in order: on `pool`'s threads, or on the calling thread without one
/// (never on rayon's global pool).
pub fn map<T: Sync, U: Send>(pool: Option<&rayon::ThreadPool>, items: &[T], f: impl Fn(&T) -> U + Send + Sync) -> Vec<U> {
    use rayon::prelude::*;
    match pool {
        Some(p) => p.install(|| items.par_iter().map(f).collect()),
        None => items.iter().map(f).collect(),
    }
}

/// The parts one after another in one vector, each item through `f(part, item)`: each part
/// copied into its own stretch and freed, on the current pool's threads when `par` (call it
/// inside [`install`]), so the new pages are faulted in on all of them while the parts'
/// pages go back.
pub fn concat<T: Send, U: Send>(par: bool, parts: Vec<Vec<T>>, f: impl Fn(usize, T) -> U + Sync) -> Vec<U> {
    use rayon::prelude::*;
    let total = parts.iter().map(|p| p.len()).sum();
    let mut out = Vec::with_capacity(total);
    let mut rest = &mut out.spare_capacity_mut()[..total];
    let mut jobs = Vec::with_capacity(parts.len());
    for (k, part) in parts.into_iter().enumerate() {
        let (to, more) = std::mem::take(&mut rest).split_at_mut(part.len());
        rest = more;
        jobs.push((k, to, part));
    }
    let copy = |(k, to, part): (usize, &mut [std::mem::MaybeUninit<U>], Vec<T>)| {
        to.iter_mut().zip(part).for_each(|(x, v)| _ = x.write(f(k, v)));
    };
    match par {
        true => jobs.into_par_iter().for_each(copy),
        false => jobs.into_iter().for_each(copy),
    }
    // SAFETY: the stretches tile the first `total` slots and each was written in full (a
    // stretch is as long as its part).
    unsafe { out.set_len(total) };
    out
}

/// Whether the calling thread is a worker of one of our pools (parallel iterators are safe).
pub fn in_pool() -> bool {
    rayon::current_thread_index().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_reused_and_bounded() {
        let a = get(3).unwrap();
        let b = get(3).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        for n in 1..=8 {
            assert_eq!(get(n).unwrap().current_num_threads(), n);
        }
        let kept = REGISTRY.lock().unwrap().as_ref().unwrap().pools.len();
        assert!(kept <= KEPT);
        assert!(check_threads(MAX_THREADS + 1).is_err());
        assert_eq!(check_threads(4), Ok(4));
    }

    #[test]
    fn parts_are_joined_in_order_on_any_threads() {
        // Parts of every length (empty ones too), each item tagged with its part's index.
        let parts: Vec<Vec<u32>> = (0..200u32).map(|k| (0..(k * 7) % 23).map(|i| k * 100 + i).collect()).collect();
        let want: Vec<(usize, u32)> = parts.iter().enumerate().flat_map(|(k, p)| p.iter().map(move |&v| (k, v))).collect();
        assert!(want.len() > 1000);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap(); // (not `get`: its test counts)
        for par in [false, true] {
            assert_eq!(install(Some(&pool), || concat(par, parts.clone(), |k, v| (k, v))), want);
        }
        assert_eq!(concat(false, Vec::<Vec<u8>>::new(), |_, v| v), Vec::<u8>::new());
    }
}
