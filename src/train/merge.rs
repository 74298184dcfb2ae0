//! One merge applied: `a b` becomes `c` in every word listed for the pair, and the pair counts
//! change by the deltas each word's merge returns ([`Words::merge`]), applied in the order of
//! the list however the work is split, so the result never depends on the threads.
//!
//! The walk is bound by cache misses: a word's record, then its symbols (a dependent load),
//! then each delta's slot in the pair index. So the words are merged a run at a time
//! ([`Chunk`]), records and symbols asked for ahead, and then the run's deltas are applied,
//! each slot asked for ahead. A merge of many words runs on two threads: one merges the runs,
//! the other applies them ([`merge_on_two_threads`]).
//!
//! The pairs a merge forms with a new token `c` (`x c` and `c y`) exist nowhere else yet, so
//! their deltas are summed where the words are merged, in two dense arrays by `x` and `y`
//! ([`Formed`]), and only those that end at or above the quiet threshold become pairs of the
//! index, listed for the words that formed them ([`Pairs::add_formed`]); the rest are logged
//! quiet. The applying half is left with the falling counts of pairs that existed before.
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
    /// Whether the merge's token is new (no pair holds it yet): its pairs are then summed in
    /// `formed`.
    pub new_token: bool,
    formed: Formed,
}

/// The pairs a merge forms with its new token `c`, summed by key (`x c`: `2x`; `c y`, `c c`
/// included: `2y + 1`), with each key's words in merge order.
#[derive(Default)]
pub(super) struct Formed {
    c: u32,
    sum: Vec<i64>,
    /// Keys in the order their sum left 0 (a key may be here twice).
    pub keys: Vec<u32>,
    /// `(key, word)` for each delta that raised a key, in merge order.
    pub words: Vec<(u32, u32)>,
    /// Each key's full pair id, while [`Pairs::add_formed`] lists their words.
    pub ids: Vec<u32>,
}

impl Formed {
    /// Ready for a merge forming `c`, `tokens` ids in all.
    fn begin(&mut self, c: u32, tokens: usize) {
        self.c = c;
        if self.sum.len() < 2 * tokens {
            self.sum.resize(2 * tokens, 0);
            self.ids.resize(2 * tokens, u32::MAX);
        }
        self.keys.clear();
        self.words.clear();
    }

    /// The key of pair `(l, r)` if it holds `c`.
    #[inline]
    fn key(&self, l: u32, r: u32) -> Option<u32> {
        if l == self.c {
            Some(2 * r + 1)
        } else if r == self.c {
            Some(2 * l)
        } else {
            None
        }
    }

    /// The pair of `key`.
    #[inline]
    pub fn pair(&self, key: u32) -> (u32, u32) {
        if key & 1 == 1 { (self.c, key >> 1) } else { (key >> 1, self.c) }
    }

    /// Takes the sum of `key` (leaving 0).
    #[inline]
    pub fn take(&mut self, key: u32) -> i64 {
        std::mem::take(&mut self.sum[key as usize])
    }

    #[inline]
    fn add(&mut self, key: u32, d: i64, w: u32) {
        let s = &mut self.sum[key as usize];
        if *s == 0 {
            self.keys.push(key);
        }
        *s += d;
        if d > 0 && self.words.last() != Some(&(key, w)) {
            self.words.push((key, w));
        }
    }
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
    let Scratch { words: list, chunk, touched, merge_no, new_token, formed, .. } = s;
    let mut formed = new_token.then(|| {
        formed.begin(abc.2, toks.count());
        formed
    });
    for start in (0..list.len()).step_by(CHUNK) {
        merge_run(words, list, start, abc, chunk, (toks, rules), formed.as_deref_mut());
        apply_chunk(pairs, chunk, *merge_no, touched);
    }
    if let Some(f) = formed {
        pairs.add_formed(f, *merge_no, touched);
    }
}

/// Merges the words `list[start..start + CHUNK]` into `ch` (emptied first): the record of the
/// word 16 places ahead and the symbols of the one 8 ahead are asked for as each is merged.
/// Deltas that do not count by the rules are dropped; with `formed`, those of pairs holding
/// `c` are summed there.
fn merge_run<S: Sym>(
    words: &mut Words<S>,
    list: &[u32],
    start: usize,
    (a, b, c): (u32, u32, u32),
    ch: &mut Chunk,
    (toks, rules): (&Tokens, &Rules),
    mut formed: Option<&mut Formed>,
) {
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
        let from = ch.deltas.len();
        if words.merge(w as usize, a, b, c, &mut ch.deltas) > 0 {
            let wc = words.count(w as usize);
            let mut kept = from;
            for i in from..ch.deltas.len() {
                let d = ch.deltas[i];
                if !rules.counts(toks, &d) {
                    continue;
                }
                match formed.as_deref_mut().and_then(|f| f.key(d.left, d.right).map(|key| (f, key))) {
                    Some((f, key)) => f.add(key, d.sign * wc, w),
                    None => {
                        ch.deltas[kept] = d;
                        kept += 1;
                    }
                }
            }
            ch.deltas.truncate(kept);
            if kept > from {
                ch.ends.push((w, wc, kept));
            }
        }
    }
}

/// Applies a chunk's deltas in order, each pair's index slot asked for 16 deltas ahead.
fn apply_chunk(pairs: &mut Pairs, ch: &Chunk, merge_no: u32, touched: &mut Vec<u32>) {
    const AHEAD: usize = 16;
    let d = &ch.deltas;
    d.iter().take(AHEAD).for_each(|x| pairs.prefetch(x.left, x.right));
    let mut i = 0;
    for &(w, wc, end) in &ch.ends {
        while i < end {
            if let Some(x) = d.get(i + AHEAD) {
                pairs.prefetch(x.left, x.right);
            }
            pairs.apply(d[i].left, d[i].right, d[i].sign * wc, w, merge_no, touched);
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
    let Scratch { words: list, touched, merge_no, new_token, formed, .. } = s;
    let merge_no = *merge_no;
    let mut formed = new_token.then(|| {
        formed.begin(abc.2, toks.count());
        formed
    });
    let (full, merged) = std::sync::mpsc::sync_channel::<Chunk>(4);
    let (empty, spare) = std::sync::mpsc::channel::<Chunk>();
    let list: &[u32] = list;
    pool.in_place_scope(|scope| {
        let formed = formed.as_deref_mut();
        scope.spawn(move |_| {
            let mut formed = formed;
            for start in (0..list.len()).step_by(CHUNK) {
                let mut ch = spare.try_recv().unwrap_or_default();
                merge_run(words, list, start, abc, &mut ch, (toks, rules), formed.as_deref_mut());
                if full.send(ch).is_err() {
                    return; // (the applying side is gone: it panicked)
                }
            }
        });
        // Ends when the merging side is done (or gone) and every chunk is applied.
        for ch in merged.iter() {
            apply_chunk(pairs, &ch, merge_no, touched);
            let _ = empty.send(ch);
        }
    });
    if let Some(f) = formed {
        pairs.add_formed(f, merge_no, touched);
    }
}
