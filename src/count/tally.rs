//! A counting table of 128-bit keys, each with its count ([`Tally`]): open addressing,
//! reused and left empty between uses, so no use clears a whole table first. Superword span
//! counts (`super::span_words`) and the pieces of stage 2 (`crate::encode::segment`) count their
//! keys, part by part, in tables that stay in the cache.
//!
//! Figures: [log](../../docs/performance.md#superword-training).

use super::span_words::ids_of;
use crate::keys::mix128;

/// Counts keys, each with its count, in a table (reused, empty between uses): each distinct
/// key with its summed count in a slot of its own; `distinct` of them. The table is read by
/// [`drain`](Tally::drain), which empties it again, so no use clears a whole table first.
pub(crate) struct Tally<'a> {
    table: &'a mut [(u128, u64)],
    shift: u32,
    mask: usize,
    pub distinct: usize,
}

impl<'a> Tally<'a> {
    /// A tally of `n` keys at most in `table` (empty: as [`drain`](Tally::drain) leaves it), at
    /// most 2/3 full.
    pub(crate) fn new(table: &'a mut Vec<(u128, u64)>, n: usize) -> Self {
        let cap = (n + n / 2 + 1).next_power_of_two().max(16);
        if table.len() < cap {
            table.resize(cap, (0, 0));
        }
        // (Slots past `cap` are never written: a dirty one shows in a later, larger use.)
        debug_assert!(table[..cap].iter().all(|s| s.0 == 0), "a tally's table is empty between uses");
        Tally { table: &mut table[..cap], shift: 64 - cap.trailing_zeros(), mask: cap - 1, distinct: 0 }
    }

    #[inline(always)]
    pub(crate) fn add(&mut self, k: u128, c: u64) {
        let mut i = (mix128(k) >> self.shift) as usize;
        loop {
            let s = &mut self.table[i];
            if s.0 == k {
                s.1 = s.1.saturating_add(c);
                return;
            }
            if s.0 == 0 {
                *s = (k, c);
                self.distinct += 1;
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The distinct keys ([`key`]s of ids) in a flat form: their ids one after another,
    /// `end(n)` where each ends among them, their counts; the table is empty after.
    pub(crate) fn drain_ids<E>(self, end: impl Fn(usize) -> E) -> (Vec<u32>, Vec<E>, Vec<u64>) {
        let d = self.distinct;
        let mut out = (Vec::with_capacity(d * 3), Vec::with_capacity(d), Vec::with_capacity(d));
        self.drain(|k, c| {
            ids_of(k, &mut out.0);
            out.1.push(end(out.0.len()));
            out.2.push(c);
        });
        out
    }

    /// Each distinct key with its count, in table order; the table is empty after.
    pub(crate) fn drain(self, mut f: impl FnMut(u128, u64)) {
        for s in self.table.iter_mut().filter(|s| s.0 != 0) {
            let (k, c) = std::mem::take(s);
            f(k, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn a_tally_counts_each_key_once_and_leaves_its_table_empty() {
        // A large use, a small one in the same table, then a large one again: duplicates summed,
        // every key once, and the table all zero after each.
        let mut table = Vec::new();
        for (n, distinct) in [(5_000usize, 700u128), (10, 3), (9_000, 9_000)] {
            let keys: Vec<(u128, u64)> = (0..n as u128).map(|i| (((i % distinct) + 1) << 64 | (i % distinct) * 7, 1 + (i % 3) as u64)).collect();
            let mut want = std::collections::HashMap::new();
            keys.iter().for_each(|&(k, c)| *want.entry(k).or_insert(0u64) += c);
            let mut tally = Tally::new(&mut table, n);
            keys.iter().for_each(|&(k, c)| tally.add(k, c));
            assert_eq!(tally.distinct, want.len());
            let mut got = std::collections::HashMap::new();
            tally.drain(|k, c| assert!(got.insert(k, c).is_none(), "a key twice"));
            assert_eq!(got, want);
            assert!(table.iter().all(|s| *s == (0, 0)));
        }
    }
}
