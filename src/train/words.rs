//! The distinct words of a training run, flat: one vector of symbols (`u16` when every token
//! id of the run fits, else `u32`) and an 8-byte record per word (where its symbols start, its
//! count). Merging inside a word compacts its slice in place and marks the new end with
//! [`Sym::END`] (a word runs to that mark or to the next word's start), so there is no
//! allocation per word, one record is one cache miss, and no length is stored. Starts are the
//! low 32 bits; the ids of the words where they wrap around are kept aside. Words of a single
//! symbol or with count 0 are dropped up front: they never hold a pair. Counts of 2³² - 1 or
//! more live in a side table.
//! Bytes per word: [log](../../docs/performance.md#memory-of-the-merge-loop).

use std::mem::MaybeUninit;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::{Input, Segmented};
use crate::counts::FlatRef;

/// A token id as the words store it.
pub trait Sym: Copy + Eq + Send + Sync + 'static {
    /// Marks the end of a word that merges shortened (never a token id: see `small_ids`).
    const END: Self;
    fn of(id: u32) -> Self;
    fn id(self) -> u32;
}

impl Sym for u16 {
    const END: u16 = u16::MAX;
    #[inline(always)]
    fn of(id: u32) -> Self {
        id as u16
    }
    #[inline(always)]
    fn id(self) -> u32 {
        self as u32
    }
}

impl Sym for u32 {
    const END: u32 = u32::MAX;
    #[inline(always)]
    fn of(id: u32) -> Self {
        id
    }
    #[inline(always)]
    fn id(self) -> u32 {
        self
    }
}

/// One distinct word: its symbols start at `start` (the low 32 bits; see `Words::wraps`).
#[derive(Clone, Copy)]
pub struct Word {
    start: u32,
    /// The count, or [`BIG`]: look it up in `Words::big`.
    count: u32,
}

const BIG: u32 = u32::MAX;

/// A count as a word record holds it, and the count itself when the record holds [`BIG`]
/// instead (saturated: counts near `u64::MAX` would overflow the `i64` deltas).
fn record_count(count: u64) -> (u32, Option<i64>) {
    let count = count.min(i64::MAX as u64 / 4);
    match count < BIG as u64 {
        true => (count as u32, None),
        false => (BIG, Some(count as i64)),
    }
}

/// A change of one pair's count in one word, by one occurrence: `sign` is +1 or -1.
#[derive(Clone, Copy)]
pub struct Delta {
    pub left: u32,
    pub right: u32,
    pub sign: i64,
}

/// Where word `w`'s symbols start, by its record and the wraps (see `Words::wraps`).
#[inline(always)]
fn start(list: &[Word], wraps: &[u32], w: usize) -> usize {
    let lo = list[w].start as usize;
    if wraps.is_empty() {
        lo
    } else {
        lo + (wraps.partition_point(|&x| x as usize <= w) << 32)
    }
}

#[inline]
fn count(list: &[Word], big: &FxHashMap<u32, i64>, w: usize) -> i64 {
    match list[w].count {
        BIG => big[&(w as u32)],
        c => c as i64,
    }
}

/// Merges every occurrence of `a b` in a word's slots `s` into `c` (see [`Words::merge`]),
/// returning how many merged.
#[inline]
pub fn merge_slots<S: Sym>(s: &mut [S], a: u32, b: u32, c: u32, deltas: &mut Vec<Delta>) -> usize {
    let (sa, sb, sc) = (S::of(a), S::of(b), S::of(c));
    let d = |left, right, sign| Delta { left, right, sign };
    let (n, end) = (s.len(), S::END);
    let (mut r, mut wr) = (0usize, 0usize);
    // (`b` and `y` are never the end mark, so reading one past the word's end is harmless.)
    while r < n && s[r] != end {
        if s[r] == sa && r + 1 < n && s[r + 1] == sb {
            if wr > 0 {
                let x = s[wr - 1].id();
                deltas.push(d(x, a, -1));
                deltas.push(d(x, c, 1));
            }
            if r + 2 < n && s[r + 2] != end {
                let y = s[r + 2].id();
                deltas.push(d(b, y, -1));
                deltas.push(d(c, y, 1));
            }
            s[wr] = sc;
            wr += 1;
            r += 2;
        } else {
            s[wr] = s[r];
            wr += 1;
            r += 1;
        }
    }
    if wr < r {
        s[wr] = end;
    }
    r - wr
}

/// The records of [`Words`] while runs of their slots are merged apart ([`Words::runs_mut`]).
pub struct Shape<'a> {
    list: &'a [Word],
    wraps: &'a [u32],
    big: &'a FxHashMap<u32, i64>,
}

impl Shape<'_> {
    /// Where word `w`'s symbols start.
    #[inline(always)]
    pub fn start(&self, w: usize) -> usize {
        start(self.list, self.wraps, w)
    }

    /// The count of word `w`.
    #[inline]
    pub fn count(&self, w: usize) -> i64 {
        count(self.list, self.big, w)
    }

    /// Asks for the cache line of word `w`'s record (a hint).
    #[inline]
    pub fn prefetch(&self, w: u32) {
        crate::memory::prefetch(&self.list[w as usize]);
    }
}

pub struct Words<S> {
    pub syms: Vec<S>,
    /// One record per word and one more whose start is the end of the last word.
    list: Vec<Word>,
    /// The words whose start is 2³² or more symbols past the previous entry's (ascending; a
    /// word may appear more than once): word `w` starts at its low bits plus 2³² times the
    /// number of entries `<= w`. Empty below 4 Gi symbols.
    wraps: Vec<u32>,
    big: FxHashMap<u32, i64>,
    /// Slots that merges have left stale since the last [`compact`](Words::compact).
    stale: usize,
}

impl<S: Sym> Words<S> {
    fn with_capacity(words: usize, syms: usize) -> Self {
        let mut list = Vec::with_capacity(words + 1);
        list.push(Word { start: 0, count: 0 });
        Words { syms: Vec::with_capacity(syms), list, wraps: Vec::new(), big: FxHashMap::default(), stale: 0 }
    }

    /// Adds a word whose symbols `self.syms` already ends with.
    fn push(&mut self, count: u64) {
        let w = self.list.len() - 1;
        let (small, large) = record_count(count);
        if let Some(c) = large {
            self.big.insert(w as u32, c);
        }
        self.list[w].count = small;
        let (prev, end) = (self.start(w), self.syms.len());
        for _ in 0..(end >> 32) - (prev >> 32) {
            self.wraps.push(w as u32 + 1);
        }
        self.list.push(Word { start: end as u32, count: 0 });
    }

    /// The words worth training on, with their bytes as the first symbols. Sized exactly up
    /// front (no doubling slack: peak memory matters); owned counts give back their pages as
    /// their words are copied (so the two are never whole at once).
    pub(super) fn of_input(src: &mut Input<'_>) -> Words<S> {
        let keep = |f: FlatRef<'_>, i: usize| f.offsets[i + 1] - f.offsets[i] >= 2 && f.counts[i] != 0;
        let f = src.as_ref();
        let (n_keep, n_syms) = (0..f.len())
            .filter(|&i| keep(f, i))
            .fold((0usize, 0usize), |(n, s), i| (n + 1, s + (f.offsets[i + 1] - f.offsets[i]) as usize));
        let mut out = Words::with_capacity(n_keep, n_syms);
        let (n, mut done) = (f.len(), 0);
        while done < n {
            let end = (done + (1 << 16)).min(n);
            let f = src.as_ref();
            for i in (done..end).filter(|&i| keep(f, i)) {
                out.syms.extend(f.word(i).iter().map(|&b| S::of(b as u32)));
                out.push(f.counts[i]);
            }
            if let Input::Owned(f) = src {
                let (a, b) = (f.offsets[done] as usize, f.offsets[end] as usize);
                crate::memory::release_pages(&mut f.bytes[a..b]);
                crate::memory::release_pages(&mut f.offsets[done..end]);
                crate::memory::release_pages(&mut f.counts[done..end]);
            }
            done = end;
        }
        out
    }

    /// Words already cut into a base vocabulary's tokens, their ids mapped to internal ones
    /// (every id maps: checked by the caller); words of one token or with count 0 are dropped.
    /// Copied on `pool`'s threads, each stretch of words into its own place.
    pub fn from_segmented(seg: Segmented<'_>, pool: Option<&rayon::ThreadPool>) -> Words<S> {
        let Segmented { ids, offsets, counts, internal } = seg;
        let n = counts.len();
        let keep = |i: usize| offsets[i + 1] - offsets[i] >= 2 && counts[i] != 0;
        let step = n.div_ceil(pool.map_or(1, |p| p.current_num_threads() * 4)).max(1 << 14);
        let stretches: Vec<_> = (0..n).step_by(step).map(|a| a..(a + step).min(n)).collect();
        let sizes = crate::pool::map(pool, &stretches, |r| {
            r.clone().filter(|&i| keep(i)).fold((0usize, 0usize), |(n, s), i| (n + 1, s + (offsets[i + 1] - offsets[i]) as usize))
        });
        let (n_keep, n_syms) = sizes.iter().fold((0, 0), |(n, s), &(a, b)| (n + a, s + b));
        let mut out = Words::with_capacity(n_keep, n_syms);
        out.list.clear();
        let (mut sym_rest, mut rec_rest) = (&mut out.syms.spare_capacity_mut()[..n_syms], &mut out.list.spare_capacity_mut()[..n_keep]);
        let (mut jobs, mut at, mut first) = (Vec::with_capacity(stretches.len()), 0usize, 0usize);
        for (r, &(nw, ns)) in stretches.iter().zip(&sizes) {
            let (sy, more) = std::mem::take(&mut sym_rest).split_at_mut(ns);
            let (re, rest) = std::mem::take(&mut rec_rest).split_at_mut(nw);
            (sym_rest, rec_rest) = (more, rest);
            jobs.push((r.clone(), sy, re, at, first));
            (at, first) = (at + ns, first + nw);
        }
        type Job<'a, S> = (std::ops::Range<usize>, &'a mut [MaybeUninit<S>], &'a mut [MaybeUninit<Word>], usize, usize);
        // Each stretch's words: their symbols, their records, and the counts too big for them.
        let copy = |(r, sy, re, at, first): Job<'_, S>| {
            let (mut s, mut big) = (0usize, Vec::new());
            for (k, i) in r.filter(|&i| keep(i)).enumerate() {
                let word = &ids[offsets[i] as usize..offsets[i + 1] as usize];
                let to = &mut sy[s..s + word.len()];
                match internal {
                    None => to.iter_mut().zip(word).for_each(|(x, &t)| _ = x.write(S::of(t))),
                    Some(m) => to.iter_mut().zip(word).for_each(|(x, &t)| _ = x.write(S::of(m[t as usize]))),
                }
                let (count, large) = record_count(counts[i]);
                re[k].write(Word { start: (at + s) as u32, count });
                if let Some(c) = large {
                    big.push(((first + k) as u32, c));
                }
                s += word.len();
            }
            big
        };
        let big: Vec<Vec<(u32, i64)>> = match pool {
            Some(p) => p.install(|| jobs.into_par_iter().map(copy).collect()),
            None => jobs.into_iter().map(copy).collect(),
        };
        // SAFETY: each stretch wrote every one of its symbols and records (`sizes` counted
        // them with the same `keep`), and the stretches tile the capacity reserved.
        unsafe {
            out.syms.set_len(n_syms);
            out.list.set_len(n_keep);
        }
        out.list.push(Word { start: n_syms as u32, count: 0 });
        out.big.extend(big.into_iter().flatten());
        if n_syms >> 32 != 0 {
            let mut start = 0usize;
            for (w, i) in (0..n).filter(|&i| keep(i)).enumerate() {
                let end = start + (offsets[i + 1] - offsets[i]) as usize;
                out.wraps.extend(std::iter::repeat_n(w as u32 + 1, (end >> 32) - (start >> 32)));
                start = end;
            }
        }
        out
    }

    pub fn len(&self) -> usize {
        self.list.len() - 1
    }

    /// Bytes of the word records (for the timing report).
    pub fn record_bytes(&self) -> usize {
        self.list.len() * std::mem::size_of::<Word>()
    }

    /// Where word `w`'s symbols start.
    #[inline(always)]
    fn start(&self, w: usize) -> usize {
        start(&self.list, &self.wraps, w)
    }

    /// The count of word `w`.
    #[inline]
    pub fn count(&self, w: usize) -> i64 {
        count(&self.list, &self.big, w)
    }

    /// The slots of word `w`: its symbols, then [`Sym::END`] and stale ones if merges shortened it.
    #[inline(always)]
    fn slots(&self, w: usize) -> (usize, usize) {
        (self.start(w), self.start(w + 1))
    }

    /// The symbols of word `w`.
    #[inline]
    pub fn syms_of(&self, w: usize) -> &[S] {
        let (a, b) = self.slots(w);
        let s = &self.syms[a..b];
        &s[..s.iter().position(|&x| x == S::END).unwrap_or(s.len())]
    }

    /// Merges every occurrence of `a b` in word `w` into `c` (left to right, non-overlapping),
    /// appending the pair changes next to each occurrence: `x a b y` loses (x, a) and (b, y) and
    /// gains (x, c) and (c, y). (The merged pair's own count is the caller's.) Returns how many
    /// occurrences merged (the word's tokens fewer by that).
    #[inline]
    pub fn merge(&mut self, w: usize, a: u32, b: u32, c: u32, deltas: &mut Vec<Delta>) -> usize {
        let (st, end) = self.slots(w);
        let n = merge_slots(&mut self.syms[st..end], a, b, c, deltas);
        self.stale += n;
        n
    }

    /// The words of runs of `list` (ascending), to be merged on several threads at once: run
    /// `(a, z)` is the words `list[a..z]` (no word in two runs), and each run gets the slots of
    /// its words as a slice of its own, with the slot where it starts; [`Shape`] finds a word's
    /// slots and count in it. Merges there leave their stale slots to [`add_stale`](Self::add_stale).
    pub fn runs_mut<'a>(&'a mut self, list: &[u32], runs: &[(usize, usize)]) -> (Shape<'a>, Vec<(usize, &'a mut [S])>) {
        let Words { syms, list: records, wraps, big, .. } = self;
        let shape = Shape { list: records, wraps, big };
        let (mut rest, mut at): (&mut [S], usize) = (syms, 0);
        let mut out = Vec::with_capacity(runs.len());
        for &(a, z) in runs {
            let (lo, hi) = (shape.start(list[a] as usize), shape.start(list[z - 1] as usize + 1));
            let skip = lo.checked_sub(at).expect("runs of ascending words, none in two runs");
            let (mine, more) = std::mem::take(&mut rest)[skip..].split_at_mut(hi - lo);
            out.push((lo, mine));
            (rest, at) = (more, hi);
        }
        (shape, out)
    }

    /// Counts slots left stale by merges of [`runs_mut`](Self::runs_mut)' slices.
    pub fn add_stale(&mut self, n: usize) {
        self.stale += n;
    }

    /// Whether merges have left stale a quarter of the slots.
    #[inline]
    pub fn worth_compacting(&self) -> bool {
        self.stale * 4 > self.syms.len()
    }

    /// Moves every word's symbols down to close the gaps merges left (in place, in word order:
    /// a word never moves up) and gives the freed tail back to the system.
    pub fn compact(&mut self) {
        let n = self.len();
        // `wraps` anew: word `w` is listed once per multiple of 2^32 its start passes.
        let (mut at, mut prev, mut wraps) = (0usize, 0usize, Vec::new());
        for w in 0..=n {
            let len = if w < n {
                let (a, b) = self.slots(w);
                let len = self.syms[a..b].iter().position(|&x| x == S::END).unwrap_or(b - a);
                self.syms.copy_within(a..a + len, at);
                len
            } else {
                0
            };
            wraps.extend(std::iter::repeat_n(w as u32, (at >> 32) - (prev >> 32)));
            self.list[w].start = at as u32;
            (prev, at) = (at, at + len);
        }
        self.wraps = wraps;
        self.syms.truncate(at);
        self.syms.shrink_to_fit();
        self.stale = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_past_4_gi_symbols_count_the_wraps() {
        let rec = |start| Word { start, count: 1 };
        let words = Words::<u16> {
            syms: Vec::new(),
            list: vec![rec(0), rec(10), rec(5), rec(7), rec(3), rec(9)],
            wraps: vec![2, 4, 4],
            big: FxHashMap::default(),
            stale: 0,
        };
        let starts: Vec<usize> = (0..6).map(|w| words.start(w)).collect();
        assert_eq!(starts, [0, 10, 5 + (1 << 32), 7 + (1 << 32), 3 + (3 << 32), 9 + (3 << 32)]);
        assert_eq!(words.len(), 5);
    }

    #[test]
    fn merges_shorten_words_behind_an_end_mark() {
        let mut words = Words::<u16>::from_segmented(Segmented::of(&[1, 2, 1, 2, 3, 1, 2], &[0, 5, 7], &[4, 1 << 40]), None);
        let mut deltas = Vec::new();
        let pairs = |d: &mut Vec<Delta>| d.drain(..).map(|d| (d.left, d.right, d.sign)).collect::<Vec<_>>();
        assert!(words.merge(0, 1, 2, 9, &mut deltas) > 0);
        assert_eq!(pairs(&mut deltas), [(2, 1, -1), (9, 1, 1), (9, 1, -1), (9, 9, 1), (2, 3, -1), (9, 3, 1)]);
        assert_eq!(words.syms_of(0), [9, 9, 3]);
        assert_eq!(words.syms[..5], [9, 9, 3, u16::MAX, 3]);
        assert!(words.merge(0, 9, 9, 8, &mut deltas) > 0);
        assert_eq!(words.syms_of(0), [8, 3]);
        assert_eq!(pairs(&mut deltas), [(9, 3, -1), (8, 3, 1)]);
        assert_eq!(words.merge(0, 1, 2, 9, &mut deltas), 0);
        // The right neighbour of the last pair is the end mark: no pair with it.
        assert!(words.merge(0, 8, 3, 7, &mut deltas) > 0);
        assert_eq!((words.syms_of(0), pairs(&mut deltas)), (&[7u16][..], vec![]));
        assert!(words.merge(1, 1, 2, 9, &mut deltas) > 0);
        assert_eq!((words.syms_of(1), words.count(1)), (&[9u16][..], 1 << 40));
        // 4 of the 7 slots are stale: compacting keeps the words and drops the rest.
        assert!(words.worth_compacting());
        words.compact();
        assert_eq!((words.syms.len(), words.syms_of(0), words.syms_of(1)), (2, &[7u16][..], &[9u16][..]));
        assert!(!words.worth_compacting());
    }

    #[test]
    fn compacting_keeps_every_word() {
        let mut words = Words::<u16>::from_segmented(Segmented::of(&[1, 2, 3, 1, 2, 1, 2, 3], &[0, 3, 5, 8], &[1, 1, 1]), None);
        let mut deltas = Vec::new();
        assert!(words.merge(0, 2, 3, 9, &mut deltas) > 0 && words.merge(2, 1, 2, 9, &mut deltas) > 0);
        words.compact();
        assert_eq!(words.wraps, Vec::<u32>::new());
        assert_eq!((words.syms_of(0), words.syms_of(1), words.syms_of(2)), (&[1u16, 9][..], &[1u16, 2][..], &[9u16, 3][..]));
        assert_eq!((0..4).map(|w| words.start(w)).collect::<Vec<_>>(), [0, 2, 4, 6]);
    }

    #[test]
    fn segmented_words_are_copied_alike_on_any_threads() {
        // 100,000 words of 0 to 5 ids through a map (a few of count 0 or too big for a
        // record): every word of two ids or more with a count is kept, in order, mapped.
        let mut next = crate::train::tests::draws(0x9E37_79B9_7F4A_7C15);
        let (mut ids, mut offsets, mut counts) = (Vec::new(), vec![0i64], Vec::new());
        for w in 0..100_000u64 {
            ids.extend((0..next(6)).map(|_| next(300) as u32));
            offsets.push(ids.len() as i64);
            counts.push(match w % 101 {
                0 => 0,
                1 => 1 << 33,
                2 => u64::MAX,
                _ => 1 + next(9),
            });
        }
        let map: Vec<u32> = (0..300).map(|i| 299 - i).collect();
        let seg = Segmented { ids: &ids, internal: Some(&map), offsets: &offsets, counts: &counts };
        let want: Vec<(Vec<u16>, i64)> = (0..counts.len())
            .filter(|&i| offsets[i + 1] - offsets[i] >= 2 && counts[i] != 0)
            .map(|i| (ids[offsets[i] as usize..offsets[i + 1] as usize].iter().map(|&t| 299 - t as u16).collect(), counts[i].min(i64::MAX as u64 / 4) as i64))
            .collect();
        assert!(want.iter().any(|w| w.1 == 1 << 33) && want.len() > 50_000);
        let pools: Vec<_> = [2, 3].iter().map(|&n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap()).collect();
        for pool in [None, Some(&pools[0]), Some(&pools[1])] {
            let words = Words::<u16>::from_segmented(seg, pool);
            let got: Vec<(Vec<u16>, i64)> = (0..words.len()).map(|w| (words.syms_of(w).to_vec(), words.count(w))).collect();
            assert!(got == want, "words differ on {:?} threads", pool.map(|p| p.current_num_threads()));
            assert_eq!((words.syms.len(), words.start(words.len())), (want.iter().map(|w| w.0.len()).sum(), words.syms.len()));
        }
    }
}
