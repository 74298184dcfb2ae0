//! Word counts re-split by a finer pattern: every distinct word cut into that pattern's pieces,
//! each piece counted with the word's count. Superword training counts spans of several words
//! once (`hf_bpe/training/superword.py`) and derives the plain word counts of stage 1 from them
//! this way, exact where every span boundary is a piece boundary of the finer pattern (the
//! span patterns are built so; `tests/test_superword.py` compares with counting the text).

use rustc_hash::FxHashMap;

use crate::counts::{Flat, FlatRef};
use crate::pretok::Pattern;

/// The pieces of `words` under `pattern`, weighted by the words' counts, in the flat form
/// (sorted, distinct). A word that is not UTF-8 is an error naming it.
pub fn recount(words: FlatRef<'_>, pattern: &Pattern) -> Result<Flat, String> {
    use rayon::prelude::*;
    // Runs of words on all cores, each into a table of its own, then summed into the first.
    let run = RUN.max(words.len().div_ceil(64));
    let runs: Vec<(usize, usize)> = (0..words.len()).step_by(run.max(1)).map(|a| (a, (a + run).min(words.len()))).collect();
    let pool = crate::pool::get(crate::pool::default_threads());
    let tables = crate::pool::install(pool.as_deref(), || {
        runs.par_iter().map(|&(a, z)| recount_run(words, pattern, a..z)).collect::<Result<Vec<_>, String>>()
    })?;
    let mut tables = tables.into_iter();
    let mut table = tables.next().unwrap_or_default();
    for t in tables {
        for (p, n) in t {
            let c = table.entry(p).or_insert(0);
            *c = c.saturating_add(n);
        }
    }
    let mut pieces: Vec<(&[u8], u64)> = table.into_iter().collect();
    pieces.par_sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut out = Flat { bytes: Vec::new(), offsets: vec![0], counts: Vec::with_capacity(pieces.len()) };
    for (p, n) in pieces {
        out.push(p, n);
    }
    Ok(out)
}

/// Words per unit of parallel work, at least.
const RUN: usize = 1 << 16;

fn recount_run<'a>(words: FlatRef<'a>, pattern: &Pattern, range: std::ops::Range<usize>) -> Result<FxHashMap<&'a [u8], u64>, String> {
    let mut table: FxHashMap<&[u8], u64> = FxHashMap::default();
    for i in range {
        let w = words.word(i);
        let text = std::str::from_utf8(w).map_err(|e| {
            format!("word {i} ({:?}) is not UTF-8 ({e}): it cannot be re-split by a pattern", String::from_utf8_lossy(w))
        })?;
        let n = words.counts[i];
        pattern.for_each_piece_dyn(text, &mut |s, e| {
            let c = table.entry(&w[s..e]).or_insert(0);
            *c = c.saturating_add(n);
        })?;
    }
    Ok(table)
}
