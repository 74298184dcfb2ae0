//! Word counts as data: the distinct words of a corpus with their counts, as three flat arrays
//! sorted by the words' bytes (`bytes`, `offsets` with word `i` at `bytes[offsets[i]..offsets[i+1]]`,
//! `counts`). This is the form that is saved, pickled, shipped between processes and merged.
//!
//! Invariants (checked by [`check`] on anything read from outside): offsets start at 0, never
//! decrease and end at `bytes.len()`; words are non-empty and strictly increasing (so distinct);
//! counts are at least 1. A merge of sorted runs keeps them without hashing: a k-way merge that
//! sums the counts of equal words.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Owned word counts in the flat form.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Flat {
    pub bytes: Vec<u8>,
    pub offsets: Vec<i64>,
    pub counts: Vec<u64>,
}

/// Borrowed word counts in the flat form (e.g. numpy arrays' memory).
#[derive(Clone, Copy)]
pub struct FlatRef<'a> {
    pub bytes: &'a [u8],
    pub offsets: &'a [i64],
    pub counts: &'a [u64],
}

impl<'a> FlatRef<'a> {
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Word `i` (valid after [`check`]).
    pub fn word(&self, i: usize) -> &'a [u8] {
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

impl Flat {
    pub fn as_ref(&self) -> FlatRef<'_> {
        FlatRef { bytes: &self.bytes, offsets: &self.offsets, counts: &self.counts }
    }

    /// Appends a word and its count.
    pub fn push(&mut self, word: &[u8], count: u64) {
        self.bytes.extend_from_slice(word);
        self.offsets.push(self.bytes.len() as i64);
        self.counts.push(count);
    }
}

/// Whether `offsets` run from 0 to `len` without going down (flat rows of `len` items).
pub fn rising(offsets: &[i64], len: usize) -> bool {
    offsets.first() == Some(&0) && offsets.windows(2).all(|w| w[0] <= w[1]) && offsets.last().is_some_and(|&e| e as usize == len)
}

/// Checks the invariants of the flat form; the error names the first word that breaks one.
pub fn check(f: FlatRef<'_>) -> Result<(), String> {
    let n = f.counts.len();
    if f.offsets.len() != n + 1 {
        return Err(format!("{} offsets for {n} words (expected {})", f.offsets.len(), n + 1));
    }
    if f.offsets[0] != 0 || f.offsets[n] != f.bytes.len() as i64 {
        return Err(format!(
            "offsets run from {} to {}, not from 0 to the {} bytes of the words",
            f.offsets[0],
            f.offsets[n],
            f.bytes.len()
        ));
    }
    for i in 0..n {
        if f.offsets[i + 1] <= f.offsets[i] || f.offsets[i + 1] > f.bytes.len() as i64 {
            return Err(format!("word #{i} is empty or its offsets decrease"));
        }
        if f.counts[i] == 0 {
            return Err(format!("word #{i} ({:?}) has count 0", String::from_utf8_lossy(f.word(i))));
        }
        if i > 0 && f.word(i - 1) >= f.word(i) {
            return Err(format!(
                "word #{i} ({:?}) is not after word #{} ({:?}): words must be distinct and sorted by bytes",
                String::from_utf8_lossy(f.word(i)),
                i - 1,
                String::from_utf8_lossy(f.word(i - 1))
            ));
        }
    }
    Ok(())
}

/// Merges checked runs into one: every word once, its counts summed. Linear in the input
/// (times log k for k runs); an overflowing count is an error, never a wrap.
pub fn merge(runs: &[FlatRef<'_>]) -> Result<Flat, String> {
    let mut out = Flat::default();
    out.offsets.push(0);
    let mut heap: BinaryHeap<Reverse<(&[u8], usize)>> = BinaryHeap::with_capacity(runs.len());
    let mut next = vec![0usize; runs.len()];
    for (r, run) in runs.iter().enumerate() {
        if !run.is_empty() {
            heap.push(Reverse((run.word(0), r)));
        }
    }
    out.bytes.reserve(runs.iter().map(|r| r.bytes.len()).max().unwrap_or(0));
    while let Some(Reverse((word, r))) = heap.pop() {
        let i = next[r];
        let count = runs[r].counts[i];
        next[r] += 1;
        if next[r] < runs[r].len() {
            heap.push(Reverse((runs[r].word(next[r]), r)));
        }
        let n = out.counts.len();
        if n > 0 && out.bytes[out.offsets[n - 1] as usize..] == *word {
            out.counts[n - 1] = out.counts[n - 1]
                .checked_add(count)
                .ok_or_else(|| format!("the count of {:?} overflows 64 bits", String::from_utf8_lossy(word)))?;
        } else {
            out.push(word, count);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(words: &[(&str, u64)]) -> Flat {
        let mut f = Flat { bytes: Vec::new(), offsets: vec![0], counts: Vec::new() };
        for (w, c) in words {
            f.push(w.as_bytes(), *c);
        }
        f
    }

    #[test]
    fn merge_sums_equal_words_and_keeps_order() {
        let a = flat(&[("a", 1), ("ab", 2), ("c", 5)]);
        let b = flat(&[("ab", 3), ("b", 1)]);
        let c = flat(&[]);
        let m = merge(&[a.as_ref(), b.as_ref(), c.as_ref()]).unwrap();
        assert_eq!(m, flat(&[("a", 1), ("ab", 5), ("b", 1), ("c", 5)]));
        assert!(check(m.as_ref()).is_ok());
    }

    #[test]
    fn check_names_the_broken_word() {
        let mut f = flat(&[("a", 1), ("b", 2)]);
        f.counts[1] = 0;
        assert!(check(f.as_ref()).unwrap_err().contains("word #1"));
        let g = Flat { bytes: b"ba".to_vec(), offsets: vec![0, 1, 2], counts: vec![1, 1] };
        assert!(check(g.as_ref()).unwrap_err().contains("sorted"));
        let h = Flat { bytes: b"ab".to_vec(), offsets: vec![0, 1], counts: vec![1, 1] };
        assert!(check(h.as_ref()).unwrap_err().contains("offsets"));
    }

    #[test]
    fn merge_refuses_an_overflow() {
        let a = flat(&[("a", u64::MAX)]);
        let b = flat(&[("a", 1)]);
        assert!(merge(&[a.as_ref(), b.as_ref()]).unwrap_err().contains("overflows"));
    }
}
