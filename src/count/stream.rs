//! A text file counted in a pipeline: while the pool counts one block's units, the calling
//! thread receives the next block, finds its cut and decodes it (`crate::corpus::read`).
//!
//! * **Why.** Counted one block at a time, both counting threads wait at the end of every block
//!   for the slower of them and for the next block's cut and decoding (how long: the log).
//! * **Bounded.** A block's text is copied out of the reader's carry (the carry moves on) and
//!   held until its units are counted; at most [`IN_FLIGHT`] blocks are, so memory stays a few
//!   blocks, as in the reader. Only for built-in patterns, whose blocks the reader cuts a few
//!   MiB long (a custom regex's block is the text up to a special token); a longer one (a long
//!   line under a span pattern, cut only at line ends) is counted in place, as before.
//! * **The same counts.** Units are cut as [`Counter::count_docs`] cuts them and counted in the
//!   shard of the thread that runs them; counts do not depend on the order.
//! * **Errors.** A unit's error stops the reading one or two blocks later (when the sink next
//!   looks) and is returned before the reader's; with several, whichever came first in time. A
//!   panic in a unit still releases its block ([`Release`]); the scope hands it to the caller
//!   once the reading ends.
//! * **Never on a pool's own thread** (the caller checks): the spawned units would sit in the
//!   waiting thread's own queue.
//!
//! Figures: [log](../../docs/performance.md#counting).

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

use rayon::prelude::*;

use super::Counter;
use crate::corpus::read::{read_corpus, Block, Progress, ReadOptions, ReadStats};

/// Blocks whose units may be counted at once (the one being read waits for the oldest).
const IN_FLIGHT: usize = 2;
/// A longer block (a long line under a span pattern) is not copied but counted in place, alone.
const COPIED_AT_MOST: usize = 4 * crate::corpus::read::BLOCK_BYTES;

/// How many units of a block are still being counted.
struct Pending {
    left: Mutex<usize>,
    zero: Condvar,
}

impl Pending {
    fn wait(&self) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        while *left > 0 {
            left = self.zero.wait(left).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Counts a unit of a block done when dropped (also when the unit panics).
struct Release(Arc<Pending>);

impl Drop for Release {
    fn drop(&mut self) {
        let mut left = self.0.left.lock().unwrap_or_else(|e| e.into_inner());
        *left -= 1;
        if *left == 0 {
            self.0.zero.notify_all();
        }
    }
}

/// Reads the text file `path` into `counter`'s shards on `pool`: what the reader did and the
/// bytes of text counted.
pub(super) fn count_file(counter: &Counter, pool: &rayon::ThreadPool, path: &Path, opt: &ReadOptions, progress: Progress) -> (Result<ReadStats, String>, u64) {
    let failed: Mutex<Option<String>> = Mutex::new(None);
    let mut bytes = 0u64;
    let read = pool.in_place_scope(|scope| {
        let mut waiting: std::collections::VecDeque<Arc<Pending>> = Default::default();
        read_corpus(path, opt, progress, |block| {
            let Block::Text(t) = block else {
                return Err("internal error in hf_bpe (please report): a text file read as JSON lines".to_string());
            };
            if let Some(e) = failed.lock().unwrap_or_else(|e| e.into_inner()).clone() {
                return Err(e);
            }
            bytes += t.len() as u64;
            if t.len() > COPIED_AT_MOST {
                // (A long line under a span pattern, cut only at line ends: counted in place.)
                waiting.drain(..).for_each(|p| p.wait());
                let units = counter.units(&[t]);
                return pool.install(|| units.par_iter().try_for_each(|u| counter.count_unit(u)));
            }
            let text: Arc<str> = Arc::from(t);
            let units: Vec<Vec<(usize, usize)>> = counter
                .units(&[&text])
                .iter()
                .map(|u| u.iter().map(|s| (s.as_ptr() as usize - text.as_ptr() as usize, s.len())).collect())
                .collect();
            let pending = Arc::new(Pending { left: Mutex::new(units.len()), zero: Condvar::new() });
            for unit in units {
                let (text, done, failed) = (text.clone(), Release(pending.clone()), &failed);
                scope.spawn(move |_| {
                    let _done = done;
                    let pieces: Vec<&str> = unit.iter().map(|&(a, n)| &text[a..a + n]).collect();
                    if let Err(e) = counter.count_unit(&pieces) {
                        failed.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                    }
                });
            }
            waiting.push_back(pending);
            if waiting.len() >= IN_FLIGHT {
                if let Some(oldest) = waiting.pop_front() {
                    oldest.wait();
                }
            }
            Ok(())
        })
    });
    let failed = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    (failed.map_or(read, Err), bytes)
}
