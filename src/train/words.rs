//! The distinct words of a training run, flat: one vector of symbols (`u16` when every token
//! id of the run fits, else `u32`) and a 16-byte record per word (start, current length,
//! count), so merging inside a word compacts its slice in place (no allocation per word, good
//! locality) and one record is one cache miss. Words of a single symbol or with count 0 are
//! dropped up front: they never hold a pair. Counts of 2³² - 1 or more live in a side table.
//! Bytes per word: [log](../../docs/performance.md#memory-of-the-merge-loop).

use rustc_hash::FxHashMap;

use crate::counts::FlatRef;

/// A token id as the words store it.
pub trait Sym: Copy + Eq + Send + Sync + 'static {
    fn of(id: u32) -> Self;
    fn id(self) -> u32;
}

impl Sym for u16 {
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
    #[inline(always)]
    fn of(id: u32) -> Self {
        id
    }
    #[inline(always)]
    fn id(self) -> u32 {
        self
    }
}

/// One distinct word: its symbols are `syms[start..start + len]` (len shrinks as merges apply).
pub struct Word {
    pub start: u64,
    pub len: u32,
    /// The count, or [`BIG`]: look it up in `Words::big`.
    count: u32,
}

const BIG: u32 = u32::MAX;

/// A change of one pair's count in one word, by one occurrence: `sign` is +1 or -1.
#[derive(Clone, Copy)]
pub struct Delta {
    pub left: u32,
    pub right: u32,
    pub sign: i64,
}

pub struct Words<S> {
    pub syms: Vec<S>,
    pub list: Vec<Word>,
    big: FxHashMap<u32, i64>,
}

impl<S: Sym> Words<S> {
    fn with_capacity(words: usize, syms: usize) -> Self {
        Words { syms: Vec::with_capacity(syms), list: Vec::with_capacity(words), big: FxHashMap::default() }
    }

    fn push(&mut self, start: usize, len: usize, count: u64) {
        // Saturate: counts near u64::MAX would overflow the i64 deltas.
        let count = count.min(i64::MAX as u64 / 4);
        let small = if count < BIG as u64 {
            count as u32
        } else {
            self.big.insert(self.list.len() as u32, count as i64);
            BIG
        };
        self.list.push(Word { start: start as u64, len: len as u32, count: small });
    }

    /// The words worth training on, with their bytes as the first symbols. Sized exactly up
    /// front (no doubling slack: peak memory matters).
    pub fn from_flat(f: FlatRef<'_>) -> Words<S> {
        let keep = |i: usize| {
            let n = (f.offsets[i + 1] - f.offsets[i]) as usize;
            n >= 2 && f.counts[i] != 0 && n <= u32::MAX as usize
        };
        let (n_keep, n_syms) = (0..f.len())
            .filter(|&i| keep(i))
            .fold((0usize, 0usize), |(n, s), i| (n + 1, s + (f.offsets[i + 1] - f.offsets[i]) as usize));
        let mut out = Words::with_capacity(n_keep, n_syms);
        for i in (0..f.len()).filter(|&i| keep(i)) {
            let w = f.word(i);
            out.push(out.syms.len(), w.len(), f.counts[i]);
            out.syms.extend(w.iter().map(|&b| S::of(b as u32)));
        }
        out
    }

    /// Words already cut into tokens (a base vocabulary's segmentation): word `i` is
    /// `syms[offsets[i]..offsets[i + 1]]`; words of one token or with count 0 are dropped.
    pub fn from_segmented(syms: &[u32], offsets: &[i64], counts: &[u64]) -> Words<S> {
        let keep = |i: usize| offsets[i + 1] - offsets[i] >= 2 && counts[i] != 0;
        let (n_keep, n_syms) = (0..counts.len())
            .filter(|&i| keep(i))
            .fold((0usize, 0usize), |(n, s), i| (n + 1, s + (offsets[i + 1] - offsets[i]) as usize));
        let mut out = Words::with_capacity(n_keep, n_syms);
        for i in (0..counts.len()).filter(|&i| keep(i)) {
            let (a, b) = (offsets[i] as usize, offsets[i + 1] as usize);
            out.push(out.syms.len(), b - a, counts[i]);
            out.syms.extend(syms[a..b].iter().map(|&t| S::of(t)));
        }
        out
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// The count of word `w`.
    #[inline]
    pub fn count(&self, w: usize) -> i64 {
        match self.list[w].count {
            BIG => self.big[&(w as u32)],
            c => c as i64,
        }
    }

    /// The symbols of word `w`.
    #[inline]
    pub fn syms_of(&self, w: &Word) -> &[S] {
        &self.syms[w.start as usize..w.start as usize + w.len as usize]
    }

    /// Asks for the cache lines of word `w`'s record (`record`) or of its symbols (a dependent
    /// load: ask once its record has arrived).
    #[inline(always)]
    pub fn prefetch(&self, w: u32, record: bool) {
        if record {
            prefetch(&self.list[w as usize] as *const Word as *const u8);
        } else {
            let st = self.list[w as usize].start as usize;
            if st < self.syms.len() {
                prefetch(&self.syms[st] as *const S as *const u8);
            }
        }
    }

    /// Merges every occurrence of `a b` in word `w` into `c` (left to right, non-overlapping),
    /// appending the pair changes next to each occurrence: `x a b y` loses (x, a) and (b, y) and
    /// gains (x, c) and (c, y). (The merged pair's own count is the caller's.) Returns whether
    /// the word held the pair.
    #[inline]
    pub fn merge(&mut self, w: usize, a: u32, b: u32, c: u32, deltas: &mut Vec<Delta>) -> bool {
        let (st, len) = (self.list[w].start as usize, self.list[w].len as usize);
        let s = &mut self.syms[st..st + len];
        let (sa, sb, sc) = (S::of(a), S::of(b), S::of(c));
        let d = |left, right, sign| Delta { left, right, sign };
        let (mut r, mut wr) = (0usize, 0usize);
        while r < len {
            if r + 1 < len && s[r] == sa && s[r + 1] == sb {
                if wr > 0 {
                    let x = s[wr - 1].id();
                    deltas.push(d(x, a, -1));
                    deltas.push(d(x, c, 1));
                }
                if r + 2 < len {
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
        self.list[w].len = wr as u32;
        wr != len
    }
}

#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is only a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
