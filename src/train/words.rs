//! The distinct words of a training run, flat: one `Vec<u32>` of symbols with a 24-byte record
//! per word (start, current length, count), so merging inside a word compacts its slice in
//! place (no allocation per word, good locality) and one record is one cache miss. Words of a
//! single byte or with count 0 are dropped up front: they never hold a pair.

/// One distinct word: its symbols are `syms[start..start + len]` (len shrinks as merges apply).
pub struct Word {
    pub start: usize,
    pub len: u32,
    pub count: i64,
}

/// A change of one pair's count in one word, by one occurrence: `sign` is +1 or -1.
#[derive(Clone, Copy)]
pub struct Delta {
    pub left: u32,
    pub right: u32,
    pub sign: i64,
}

pub struct Words {
    pub syms: Vec<u32>,
    pub list: Vec<Word>,
}

impl Words {
    /// The words worth training on, with their bytes as the first symbols. Sized exactly up
    /// front (no doubling slack: peak memory matters); the boxed words are freed here.
    pub fn from_counts(words: Vec<(Box<[u8]>, u64)>) -> Words {
        let keep = |w: &[u8], c: u64| w.len() >= 2 && c != 0 && w.len() <= u32::MAX as usize;
        let (n_keep, n_syms) =
            words.iter().filter(|(w, c)| keep(w, *c)).fold((0usize, 0usize), |(n, s), (w, _)| (n + 1, s + w.len()));
        let mut syms: Vec<u32> = Vec::with_capacity(n_syms);
        let mut list: Vec<Word> = Vec::with_capacity(n_keep);
        for (w, c) in &words {
            if !keep(w, *c) {
                continue;
            }
            // Saturate: counts near u64::MAX would overflow the i64 deltas.
            let count = (*c).min(i64::MAX as u64 / 4) as i64;
            list.push(Word { start: syms.len(), len: w.len() as u32, count });
            syms.extend(w.iter().map(|&b| b as u32));
        }
        Words { syms, list }
    }

    /// Words already cut into tokens (a base vocabulary's segmentation): word `i` is
    /// `syms[offsets[i]..offsets[i + 1]]`; words of one token or with count 0 are dropped.
    pub fn from_segmented(mut syms: Vec<u32>, offsets: &[i64], counts: &[u64]) -> Words {
        let mut list = Vec::with_capacity(counts.len());
        let mut kept = 0usize;
        for (i, &c) in counts.iter().enumerate() {
            let (a, b) = (offsets[i] as usize, offsets[i + 1] as usize);
            if b - a < 2 || c == 0 {
                continue;
            }
            syms.copy_within(a..b, kept);
            list.push(Word { start: kept, len: (b - a) as u32, count: c.min(i64::MAX as u64 / 4) as i64 });
            kept += b - a;
        }
        syms.truncate(kept);
        syms.shrink_to_fit();
        Words { syms, list }
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Asks for the cache lines of word `w`'s record (`record`) or of its symbols (a dependent
    /// load: ask once its record has arrived).
    #[inline(always)]
    pub fn prefetch(&self, w: u32, record: bool) {
        if record {
            prefetch(&self.list[w as usize] as *const Word as *const u8);
        } else {
            let st = self.list[w as usize].start;
            if st < self.syms.len() {
                prefetch(&self.syms[st] as *const u32 as *const u8);
            }
        }
    }

    /// Merges every occurrence of `a b` in word `w` into `c` (left to right, non-overlapping),
    /// appending the pair changes next to each occurrence: `x a b y` loses (x, a) and (b, y) and
    /// gains (x, c) and (c, y). (The merged pair's own count is the caller's.) Returns whether
    /// the word held the pair.
    #[inline]
    pub fn merge(&mut self, w: usize, a: u32, b: u32, c: u32, deltas: &mut Vec<Delta>) -> bool {
        let (st, len) = (self.list[w].start, self.list[w].len as usize);
        let s = &mut self.syms[st..st + len];
        let d = |left, right, sign| Delta { left, right, sign };
        let (mut r, mut wr) = (0usize, 0usize);
        while r < len {
            if r + 1 < len && s[r] == a && s[r + 1] == b {
                if wr > 0 {
                    let x = s[wr - 1];
                    deltas.push(d(x, a, -1));
                    deltas.push(d(x, c, 1));
                }
                if r + 2 < len {
                    let y = s[r + 2];
                    deltas.push(d(b, y, -1));
                    deltas.push(d(c, y, 1));
                }
                s[wr] = c;
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
