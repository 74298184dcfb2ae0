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
/// (sorted, distinct; a word of count 0 adds nothing). A word that is not UTF-8 is an error
/// naming it.
pub fn recount(words: FlatRef<'_>, pattern: &Pattern) -> Result<Flat, String> {
    let mut counter = Counter::new(pattern.clone(), Vec::new(), 0)?;
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
    // (Each table freed as soon as its words are gathered.)
    Ok(counter.take_flat())
}

/// Counts the pieces of word `i` with its count.
fn recount_word(shard: &mut Shard, words: FlatRef<'_>, i: usize, pattern: &Pattern) -> Result<(), String> {
    let w = words.word(i);
    let text = std::str::from_utf8(w)
        .map_err(|e| format!("word {i} ({:?}) is not UTF-8 ({e}): it cannot be re-split by a pattern", String::from_utf8_lossy(w)))?;
    let n = words.counts[i];
    pattern.for_each_piece(text, |s, e| shard.add_n(w, s, e, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_weigh_their_words_counts_and_a_zero_count_adds_nothing() {
        let mut f = Flat { bytes: Vec::new(), offsets: vec![0], counts: Vec::new() };
        let long = "a".repeat(20);
        f.push(long.as_bytes(), 0);
        f.push(b"ab cd", 3);
        f.push(format!("x {long}").as_bytes(), 2);
        let out = recount(f.as_ref(), &Pattern::from_spec("gpt2").unwrap()).unwrap();
        let got = super::super::tests::rows(&out);
        let want: Vec<(Vec<u8>, u64)> = vec![(format!(" {long}").into_bytes(), 2), (b" cd".to_vec(), 3), (b"ab".to_vec(), 3), (b"x".to_vec(), 2)];
        assert_eq!(got, want);
    }
}
