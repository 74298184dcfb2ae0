//! Word counts re-split by a finer pattern: every distinct word cut into that pattern's pieces,
//! each piece counted with the word's count. Superword training counts spans of several words
//! once (`hf_bpe/training/superword.py`) and derives the plain word counts of stage 1 from them
//! this way, exact where every span boundary is a piece boundary of the finer pattern (the
//! span patterns are built so; `tests/test_superword.py` compares with counting the text).
//! The pieces go into a [`Counter`]'s shards as counting's own do (packed keys, prefetched).

use rayon::prelude::*;

use super::{Counter, Shard};
use crate::counts::{Flat, FlatRef};
use crate::pretok::Pattern;

/// Words per unit of parallel work, at least.
const RUN: usize = 1 << 14;

/// The pieces of `words` under `pattern`, weighted by the words' counts, in the flat form
/// (sorted, distinct). A word that is not UTF-8 is an error naming it.
pub fn recount(words: FlatRef<'_>, pattern: &Pattern) -> Result<Flat, String> {
    let counter = Counter::new(pattern.clone(), Vec::new(), 0)?;
    let runs: Vec<(usize, usize)> = (0..words.len()).step_by(RUN).map(|a| (a, (a + RUN).min(words.len()))).collect();
    let count_run = |&(a, z): &(usize, usize)| {
        let i = rayon::current_thread_index().unwrap_or(0) % counter.shards.len();
        let mut shard = counter.shards[i].lock().unwrap_or_else(|e| e.into_inner());
        let r = (a..z).try_for_each(|i| recount_word(&mut shard, words, i, pattern));
        shard.flush();
        r
    };
    match counter.pool() {
        Some(p) => p.install(|| runs.par_iter().try_for_each(count_run))?,
        None => runs.iter().try_for_each(count_run)?,
    }
    Ok(counter.flat())
}

/// Counts the pieces of word `i` with its count.
fn recount_word(shard: &mut Shard, words: FlatRef<'_>, i: usize, pattern: &Pattern) -> Result<(), String> {
    let w = words.word(i);
    let text = std::str::from_utf8(w)
        .map_err(|e| format!("word {i} ({:?}) is not UTF-8 ({e}): it cannot be re-split by a pattern", String::from_utf8_lossy(w)))?;
    let n = words.counts[i];
    pattern.for_each_piece(text, |s, e| shard.add_n(w, s, e, n))
}
