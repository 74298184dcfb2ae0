//! One merge applied: `a b` becomes `c` in every word listed for the pair, and the pair counts
//! change by the deltas each word's merge returns ([`merge_slots`]); the result never depends
//! on the threads.
//!
//! * **Runs.** The walk is bound by cache misses: a word's record, then its symbols (a
//!   dependent load), then each delta's slot in the pair index. So the words are merged a run
//!   at a time ([`Chunk`]), records and symbols asked for ahead, and then the run's deltas are
//!   applied, each slot asked for ahead. Each run has its words' slots as a slice of its own
//!   ([`Words::runs_mut`]), so runs can be merged on any thread.
//! * **Formed pairs summed apart.** The pairs a merge forms with a new token `c` (`x c`,
//!   `c y`) exist nowhere else yet, so their deltas are summed where the words are merged, in
//!   two dense arrays by `x` and `y` ([`Formed`]); only those that end at or above the quiet
//!   threshold become pairs of the index, listed for the words that formed them
//!   ([`Pairs::add_formed`]), the rest are logged quiet. What is left to apply only lowers the
//!   counts of pairs that existed, to the same result in any order: so a big merge's runs go
//!   to whichever of two threads is free, this one applying both threads' runs between its
//!   own ([`merge_shared`]).
//! * **Reused tokens.** A merge whose token existed before may raise a pair and lower it in
//!   the same merge; its deltas are applied in the order of the list, on two threads as a
//!   pipeline (one merges the runs, the other applies them: [`merge_in_order`]).
//!
//! Measurements: [log](../../docs/performance.md#superword-training).

use super::pairs::Pairs;
use super::tokens::Tokens;
use super::words::{merge_slots, Delta, Shape, Sym, Words};
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
    /// `formed` (and the other thread's in `formed_too`).
    pub new_token: bool,
    formed: Formed,
    formed_too: Formed,
    runs: Vec<(usize, usize)>,
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

    /// Adds another thread's sums and words of the same merge (emptied).
    fn absorb(&mut self, other: &mut Formed) {
        for k in 0..other.keys.len() {
            let key = other.keys[k];
            let v = other.take(key);
            if v != 0 {
                let s = &mut self.sum[key as usize];
                if *s == 0 {
                    self.keys.push(key);
                }
                *s += v;
            }
        }
        self.words.append(&mut other.words);
        other.keys.clear();
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
/// ([`merge_shared`], or [`merge_in_order`] for a reused token), else on this one, a run at a
/// time.
pub(super) fn merge_in_words<S: Sym>(
    words: &mut Words<S>,
    pairs: &mut Pairs,
    toks: &Tokens,
    rules: &Rules,
    abc: (u32, u32, u32),
    s: &mut Scratch,
    pool: Option<&rayon::ThreadPool>,
) {
    let Scratch { words: list, chunk, touched, merge_no, new_token, formed, formed_too, runs, .. } = s;
    // Runs of about CHUNK words (the copies of a word, if listed twice, in one run).
    runs.clear();
    let mut a = 0;
    while a < list.len() {
        let mut z = (a + CHUNK).min(list.len());
        while z < list.len() && list[z] == list[z - 1] {
            z += 1;
        }
        runs.push((a, z));
        a = z;
    }
    let mut formed = new_token.then(|| {
        formed.begin(abc.2, toks.count());
        formed
    });
    let (shape, slices) = words.runs_mut(list, runs);
    let task = Task { shape: &shape, list, abc, toks, rules };
    let two = pool.filter(|p| list.len() >= TWO_THREADS_FROM && p.current_num_threads() >= 2);
    let stale = match (two, formed.as_deref_mut()) {
        (Some(pool), Some(f)) => {
            formed_too.begin(abc.2, toks.count());
            let stale = merge_shared(&task, runs, slices, pairs, (f, formed_too), (chunk, touched, *merge_no), pool);
            f.absorb(formed_too);
            stale
        }
        (Some(pool), None) => merge_in_order(&task, runs, slices, pairs, touched, *merge_no, pool),
        (None, mut f) => {
            let mut stale = 0;
            for (&run, slice) in runs.iter().zip(slices) {
                stale += task.merge_run(run, slice, chunk, f.as_deref_mut());
                apply_chunk(pairs, chunk, *merge_no, touched);
            }
            stale
        }
    };
    drop(shape);
    words.add_stale(stale);
    if let Some(f) = formed {
        pairs.add_formed(f, *merge_no, touched);
    }
}

/// What every run of a merge shares: where the words are, the list, the merge, the rules.
struct Task<'a> {
    shape: &'a Shape<'a>,
    list: &'a [u32],
    abc: (u32, u32, u32),
    toks: &'a Tokens,
    rules: &'a Rules,
}

impl Task<'_> {
    /// Merges the words `list[a..z]`, whose slots are `slice` (from slot `base` on), into `ch`
    /// (emptied first), returning the slots left stale: the record of the word 16 places ahead
    /// and the symbols of the one 8 ahead are asked for as each is merged. Deltas that do not
    /// count by the rules are dropped; with `formed`, those of pairs holding `c` are summed there.
    fn merge_run<S: Sym>(&self, (a, z): (usize, usize), (base, slice): (usize, &mut [S]), ch: &mut Chunk, mut formed: Option<&mut Formed>) -> usize {
        let (Task { shape, list, toks, rules, .. }, (ta, tb, tc)) = (self, self.abc);
        ch.deltas.clear();
        ch.ends.clear();
        let mut stale = 0;
        for k in a..z {
            if let Some(&w16) = list.get(k + 16) {
                shape.prefetch(w16);
            }
            if k + 8 < z {
                // (A word of this run: its slots are in the run's slice.)
                crate::memory::prefetch(slice[shape.start(list[k + 8] as usize) - base..].as_ptr());
            }
            let w = list[k];
            let (st, end) = (shape.start(w as usize) - base, shape.start(w as usize + 1) - base);
            let from = ch.deltas.len();
            let n = merge_slots(&mut slice[st..end], ta, tb, tc, &mut ch.deltas);
            if n == 0 {
                continue;
            }
            stale += n;
            let wc = shape.count(w as usize);
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
        stale
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

type Slices<'a, S> = Vec<(usize, &'a mut [S])>;

/// A merge forming a new token, on two threads that both merge runs: each takes the next run
/// not taken; a pool thread hands its merged runs over, and this thread applies them between
/// its own (what is left to apply only lowers counts, in any order to the same result: see
/// the module doc). Each thread sums its formed pairs apart (`formed.0`, this one's, and
/// `formed.1`). Returns the slots left stale.
fn merge_shared<S: Sym>(
    task: &Task<'_>,
    runs: &[(usize, usize)],
    slices: Slices<'_, S>,
    pairs: &mut Pairs,
    (mine, theirs): (&mut Formed, &mut Formed),
    (chunk, touched, merge_no): (&mut Chunk, &mut Vec<u32>, u32),
    pool: &rayon::ThreadPool,
) -> usize {
    let queue = std::sync::Mutex::new(runs.iter().copied().zip(slices));
    let next = || queue.lock().unwrap_or_else(|e| e.into_inner()).next();
    let (full, merged) = std::sync::mpsc::sync_channel::<Chunk>(8);
    let (empty, spare) = std::sync::mpsc::channel::<Chunk>();
    let (mut stale_there, mut stale_here) = (0, 0);
    pool.in_place_scope(|scope| {
        let (next, stale_there) = (&next, &mut stale_there);
        scope.spawn(move |_| {
            while let Some((run, slice)) = next() {
                let mut ch = spare.try_recv().unwrap_or_default();
                *stale_there += task.merge_run(run, slice, &mut ch, Some(&mut *theirs));
                if full.send(ch).is_err() {
                    return; // (the applying side is gone: it panicked)
                }
            }
        });
        let merged = merged; // (dropped here if this side panics, so the other never waits on it)
        loop {
            while let Ok(ch) = merged.try_recv() {
                apply_chunk(pairs, &ch, merge_no, touched);
                let _ = empty.send(ch);
            }
            let Some((run, slice)) = next() else { break };
            stale_here += task.merge_run(run, slice, chunk, Some(&mut *mine));
            apply_chunk(pairs, chunk, merge_no, touched);
        }
        for ch in merged.iter() {
            apply_chunk(pairs, &ch, merge_no, touched);
        }
    });
    stale_here + stale_there
}

/// A merge of a reused token as a pipeline of two threads: a pool thread merges the runs (it
/// alone touches the words) and hands each over; this thread applies them, in order, to the
/// pairs (it alone touches those). Returns the slots left stale.
fn merge_in_order<S: Sym>(
    task: &Task<'_>,
    runs: &[(usize, usize)],
    slices: Slices<'_, S>,
    pairs: &mut Pairs,
    touched: &mut Vec<u32>,
    merge_no: u32,
    pool: &rayon::ThreadPool,
) -> usize {
    let (full, merged) = std::sync::mpsc::sync_channel::<Chunk>(4);
    let (empty, spare) = std::sync::mpsc::channel::<Chunk>();
    let mut stale = 0;
    pool.in_place_scope(|scope| {
        let stale = &mut stale;
        scope.spawn(move |_| {
            for (&run, slice) in runs.iter().zip(slices) {
                let mut ch = spare.try_recv().unwrap_or_default();
                *stale += task.merge_run(run, slice, &mut ch, None);
                if full.send(ch).is_err() {
                    return; // (the applying side is gone: it panicked)
                }
            }
        });
        // Ends when the merging side is done (or gone) and every chunk is applied.
        let merged = merged;
        for ch in merged.iter() {
            apply_chunk(pairs, &ch, merge_no, touched);
            let _ = empty.send(ch);
        }
    });
    stale
}
