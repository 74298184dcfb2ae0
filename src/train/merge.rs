//! One merge applied: `a b` becomes `c` in every word listed for the pair, and the pair counts
//! change by the deltas each word's merge returns ([`Words::merge`]), applied in the order of
//! the list however the work is split, so the result never depends on the threads.
//!
//! The walk is bound by cache misses: a word's record, then its symbols (a dependent load),
//! then each delta's slot in the pair index. So the words are merged a run at a time
//! ([`Chunk`]), records and symbols asked for ahead, and then the run's deltas are applied,
//! each slot asked for ahead. A merge of many words runs on two threads: one merges the runs,
//! the other applies them ([`merge_on_two_threads`]).
//! Measurements: [log](../../docs/performance.md#superword-training).

use super::pairs::Pairs;
use super::tokens::Tokens;
use super::words::{Delta, Sym, Words};
use super::Rules;

/// Scratch of the merge loop, reused across merges.
#[derive(Default)]
pub(super) struct Scratch {
    /// The words listed for the pair being merged.
    pub words: Vec<u32>,
    /// One word's deltas (for callers that apply them themselves).
    pub deltas: Vec<Delta>,
    chunk: Chunk,
    /// The pairs whose count rose in this merge.
    pub touched: Vec<u32>,
    pub merge_no: u32,
}

/// Merged words of a run, each with its count and the end of its deltas.
#[derive(Default)]
struct Chunk {
    deltas: Vec<Delta>,
    ends: Vec<(u32, i64, usize)>,
}

/// Words per run (the tests': a few, so that merges of a few dozen words make several).
#[cfg(not(test))]
const CHUNK: usize = 1024;
#[cfg(test)]
const CHUNK: usize = 16;
/// Merges of at least this many listed words run on two threads (the tests': a few).
#[cfg(not(test))]
const TWO_THREADS_FROM: usize = 4096;
#[cfg(test)]
const TWO_THREADS_FROM: usize = 40;

/// Merges `a b` into `c` in every word of `s.words`, applying the deltas to `pairs`: on two
/// threads for a merge of at least [`TWO_THREADS_FROM`] words when `pool` has two or more
/// ([`merge_on_two_threads`]), else on this one, a [`Chunk`] at a time.
pub(super) fn merge_in_words<S: Sym>(
    words: &mut Words<S>,
    pairs: &mut Pairs,
    toks: &Tokens,
    rules: &Rules,
    abc: (u32, u32, u32),
    s: &mut Scratch,
    pool: Option<&rayon::ThreadPool>,
) {
    if let Some(pool) = pool.filter(|p| s.words.len() >= TWO_THREADS_FROM && p.current_num_threads() >= 2) {
        return merge_on_two_threads(words, pairs, toks, rules, abc, s, pool);
    }
    let Scratch { words: list, chunk, touched, merge_no, .. } = s;
    for start in (0..list.len()).step_by(CHUNK) {
        merge_run(words, list, start, abc, chunk);
        apply_chunk(pairs, toks, rules, chunk, *merge_no, touched);
    }
}

/// Merges the words `list[start..start + CHUNK]` into `ch` (emptied first): the record of the
/// word 16 places ahead and the symbols of the one 8 ahead are asked for as each is merged.
fn merge_run<S: Sym>(words: &mut Words<S>, list: &[u32], start: usize, (a, b, c): (u32, u32, u32), ch: &mut Chunk) {
    ch.deltas.clear();
    ch.ends.clear();
    for k in start..(start + CHUNK).min(list.len()) {
        if let Some(&w16) = list.get(k + 16) {
            words.prefetch(w16, true);
        }
        if let Some(&w8) = list.get(k + 8) {
            words.prefetch(w8, false);
        }
        let w = list[k];
        if words.merge(w as usize, a, b, c, &mut ch.deltas) > 0 {
            ch.ends.push((w, words.count(w as usize), ch.deltas.len()));
        }
    }
}

/// Applies a chunk's deltas in order, each pair's index slot asked for 16 deltas ahead.
fn apply_chunk(pairs: &mut Pairs, toks: &Tokens, rules: &Rules, ch: &Chunk, merge_no: u32, touched: &mut Vec<u32>) {
    const AHEAD: usize = 16;
    let d = &ch.deltas;
    d.iter().take(AHEAD).for_each(|x| pairs.prefetch(x.left, x.right));
    let mut i = 0;
    for &(w, wc, end) in &ch.ends {
        while i < end {
            if let Some(x) = d.get(i + AHEAD) {
                pairs.prefetch(x.left, x.right);
            }
            if rules.counts(toks, &d[i]) {
                pairs.apply(d[i].left, d[i].right, d[i].sign * wc, w, merge_no, touched);
            }
            i += 1;
        }
    }
}

/// [`merge_in_words`] as a pipeline of two threads: a pool thread merges the words (it alone
/// touches them) and hands each run over; this thread applies them, in order, to the pairs (it
/// alone touches those). The merging hides behind the applying, the longer half
/// ([log](../../docs/performance.md#superword-training)).
fn merge_on_two_threads<S: Sym>(
    words: &mut Words<S>,
    pairs: &mut Pairs,
    toks: &Tokens,
    rules: &Rules,
    abc: (u32, u32, u32),
    s: &mut Scratch,
    pool: &rayon::ThreadPool,
) {
    let Scratch { words: list, touched, merge_no, .. } = s;
    let merge_no = *merge_no;
    let (full, merged) = std::sync::mpsc::sync_channel::<Chunk>(4);
    let (empty, spare) = std::sync::mpsc::channel::<Chunk>();
    let list: &[u32] = list;
    pool.in_place_scope(|scope| {
        scope.spawn(move |_| {
            for start in (0..list.len()).step_by(CHUNK) {
                let mut ch = spare.try_recv().unwrap_or_default();
                merge_run(words, list, start, abc, &mut ch);
                if full.send(ch).is_err() {
                    return; // (the applying side is gone: it panicked)
                }
            }
        });
        // Ends when the merging side is done (or gone) and every chunk is applied.
        for ch in merged.iter() {
            apply_chunk(pairs, toks, rules, &ch, merge_no, touched);
            let _ = empty.send(ch);
        }
    });
}
