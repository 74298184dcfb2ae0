//! The pairs a run starts from, in one go: byte pairs counted in dense tables ([`Pairs::build`]),
//! pairs of any tokens from their occurrences sorted by pair ([`Pairs::build_general`]); a pair
//! at or above the quiet threshold gets its id and its initial list of words, the others are
//! quiet (see the parent module).

use rayon::prelude::*;

use super::{Index, Pairs, QUIET};
use crate::train::words::{Sym, Words};
use crate::varint::{put, varint_len};

/// A byte pair's weighted count and number of words, while the initial pairs are counted.
#[derive(Clone, Copy, Default)]
struct Tally {
    count: i64,
    occ: u64,
}

/// A stretch of sorted occurrences, walked ([`walk`]): each full pair for the index (its
/// value its place in `full`), each quiet one with its count, the full pairs' counts and
/// their initial lists, one after another in `bytes`.
#[derive(Default)]
struct Walked {
    groups: Vec<(u32, u32, u32)>,
    quiet: Vec<(u32, u32, u32)>,
    full: Vec<(u32, u32, i64)>,
    bytes: Vec<u8>,
    lens: Vec<u32>,
}

/// The pairs of occurrences sorted by pair (`key`), each pair's words ascending: a pair at or
/// above `threshold` is full (its count and its list of words), the others quiet (kept with
/// `keep_quiet`, else only skipped).
fn walk<O: Copy>(occ: &[O], key: impl Fn(O) -> u64, pair: impl Fn(O) -> (u32, u32), word: impl Fn(O) -> usize, count: impl Fn(O) -> i64, threshold: i64, keep_quiet: bool) -> Walked {
    let mut out = Walked::default();
    let mut i = 0;
    while i < occ.len() {
        let k = key(occ[i]);
        let mut end = i + 1;
        while end < occ.len() && key(occ[end]) == k {
            end += 1;
        }
        let (a, b) = pair(occ[i]);
        let group = &occ[i..end];
        i = end;
        let count = group.iter().fold(0i64, |c, &o| c.saturating_add(count(o)));
        if count >= threshold || count >= QUIET as i64 {
            out.groups.push((a, b, out.full.len() as u32));
            out.full.push((a, b, count));
            let start = out.bytes.len();
            let mut last = -1i64;
            for &o in group {
                let w = word(o) as i64;
                if w != last {
                    let mut buf = [0u8; 10];
                    let n = put((w - last) as u64, &mut buf);
                    out.bytes.extend_from_slice(&buf[..n]);
                    last = w;
                }
            }
            out.lens.push(u32::try_from(out.bytes.len() - start).unwrap_or(u32::MAX));
        } else if count > 0 && keep_quiet {
            out.quiet.push((a, b, count as u32));
        }
    }
    out
}

/// `f(make(left, right, word))` for each counted pair of the words `ws`, in order.
#[inline(always)]
fn each_occurrence<S: Sym, O>(words: &Words<S>, counted: &impl Fn(u32, u32) -> bool, make: &impl Fn(u32, u32, usize) -> O, ws: std::ops::Range<usize>, mut f: impl FnMut(O)) {
    for w in ws {
        for p in words.syms_of(w).windows(2) {
            let (x, y) = (p[0].id(), p[1].id());
            if counted(x, y) {
                f(make(x, y, w));
            }
        }
    }
}

/// Occurrences are bucketed by this many top bits of their pair ([`Pairs::build_general`]).
const BUCKET_BITS: u32 = 11;

impl Pairs {
    /// Every byte pair of the words with its weighted count and its words (in word order,
    /// once per word), in key order.
    pub fn build<S: Sym>(words: &Words<S>, pool: Option<&rayon::ThreadPool>, quiet_below: i64) -> Pairs {
        let nwords = words.len();
        let byte_pair = |p: &[S]| (p[0].id() << 8 | p[1].id()) as usize;
        // One 1 MiB table per piece of work: mapped while the merge loop's allocator setting
        // holds (`crate::memory`), so a pool thread's heap keeps no hole of it.
        let tally = |ws: std::ops::Range<usize>| {
            let mut t = vec![Tally::default(); 1 << 16];
            for w in ws {
                let c = words.count(w);
                for p in words.syms_of(w).windows(2) {
                    let k = &mut t[byte_pair(p)];
                    k.count = k.count.saturating_add(c);
                    k.occ += 1;
                }
            }
            t
        };
        let tallies = match pool {
            Some(pool) => pool.install(|| {
                let chunk = (nwords / (pool.current_num_threads() * 4)).max(4096);
                (0..nwords.div_ceil(chunk)).into_par_iter().map(|i| tally(i * chunk..((i + 1) * chunk).min(nwords))).reduce(
                    || vec![Tally::default(); 1 << 16],
                    |mut t1, t2| {
                        for (a, b) in t1.iter_mut().zip(&t2) {
                            a.count = a.count.saturating_add(b.count);
                            a.occ += b.occ;
                        }
                        t1
                    },
                )
            }),
            None => tally(0..nwords),
        };
        let mut pairs = Pairs::empty(quiet_below);
        // The bytes of each byte pair's list (gaps between the ids of the words holding it).
        let mut last = vec![-1i64; 1 << 16];
        let mut size = vec![0u64; 1 << 16];
        for w in 0..nwords {
            for p in words.syms_of(w).windows(2) {
                let k = byte_pair(p);
                if last[k] != w as i64 {
                    size[k] += varint_len((w as i64 - last[k]) as u64) as u64;
                    last[k] = w as i64;
                }
            }
        }
        // Pair ids for the byte pairs that occur, in key order; `fill[k]` = next free byte.
        let mut fill = vec![0u64; 1 << 16];
        let mut total = 0u64;
        for k in 0..1usize << 16 {
            if tallies[k].occ == 0 {
                continue;
            }
            let (a, b) = ((k >> 8) as u32, (k & 255) as u32);
            let id = pairs.new_id(a, b, tallies[k].count);
            pairs.index.put(a, b, id as u32);
            pairs.init_start.push(total);
            pairs.init_len.push(u32::try_from(size[k]).unwrap_or(u32::MAX));
            fill[k] = total;
            total += size[k];
        }
        pairs.init_bytes = vec![0; total as usize + 10];
        last.iter_mut().for_each(|l| *l = -1);
        for w in 0..nwords {
            for p in words.syms_of(w).windows(2) {
                let k = byte_pair(p);
                if last[k] != w as i64 {
                    let f = fill[k] as usize;
                    fill[k] += put((w as i64 - last[k]) as u64, &mut pairs.init_bytes[f..]) as u64;
                    last[k] = w as i64;
                }
            }
        }
        pairs.init_bytes.truncate(total as usize);
        pairs
    }

    /// Every pair of words whose symbols are any tokens (a base vocabulary's segmentation),
    /// from their occurrences sorted by pair ([`walked`]); `counted(left, right)` says which
    /// pairs count at the start. The quiet pairs are forgotten when there are more than
    /// `forget_above` occurrences (the parent module's doc).
    pub fn build_general<S: Sym>(words: &Words<S>, n_tokens: usize, counted: impl Fn(u32, u32) -> bool + Sync, quiet_below: i64, forget_above: usize, pool: Option<&rayon::ThreadPool>) -> Pairs {
        let (walked, kept) = walked(words, n_tokens, counted, quiet_below.max(1), forget_above, pool);
        Self::join(quiet_below, walked, kept, pool)
    }

    /// The counts of the quiet pairs, forgotten by the build, again: counted from the words as
    /// they are now (`n_tokens`, `counted`: as for the build), each pair that is not full.
    pub fn recount_quiet<S: Sym>(&mut self, words: &Words<S>, n_tokens: usize, counted: impl Fn(u32, u32) -> bool + Sync, pool: Option<&rayon::ThreadPool>) {
        debug_assert!(!self.quiet_known && self.log.is_empty());
        // (No pair is full for the walk but the few whose counts do not fit a quiet slot: those
        // are at or above the threshold, so full here already.)
        let quiet: Vec<Vec<(u32, u32, u32)>> = walked(words, n_tokens, counted, i64::MAX, usize::MAX, pool)
            .0
            .into_iter()
            .map(|w| w.quiet.into_iter().filter(|&(a, b, _)| self.index.value(a, b).is_none()).collect())
            .collect();
        debug_assert!(quiet.iter().flatten().all(|&(_, _, c)| (c as i64) < self.quiet_below));
        self.quiet = Index::of_new(&quiet, pool);
        self.quiet_known = true;
    }

    /// The pairs of walked stretches of occurrences, in order (ids in key order); without
    /// `quiet_kept`, the quiet counts forgotten.
    fn join(quiet_below: i64, walked: Vec<Walked>, quiet_kept: bool, pool: Option<&rayon::ThreadPool>) -> Pairs {
        let mut pairs = Pairs::empty(quiet_below);
        let (mut groups, mut quiet) = (Vec::with_capacity(walked.len()), Vec::with_capacity(walked.len()));
        pairs.init_bytes.reserve_exact(walked.iter().map(|w| w.bytes.len()).sum());
        for mut w in walked {
            let first = pairs.init_len.len() as u32;
            let mut start = pairs.init_bytes.len() as u64;
            for (&(a, b, count), &len) in w.full.iter().zip(&w.lens) {
                let id = pairs.new_id(a, b, count);
                debug_assert_eq!(id, pairs.init_len.len());
                pairs.init_start.push(start);
                pairs.init_len.push(len);
                start += len as u64;
            }
            pairs.init_bytes.extend_from_slice(&w.bytes);
            drop(w.bytes);
            w.groups.iter_mut().for_each(|g| g.2 += first);
            groups.push(w.groups);
            quiet.push(w.quiet);
        }
        pairs.index = Index::of_new(&groups, pool);
        drop(groups);
        match quiet_kept {
            true => pairs.quiet = Index::of_new(&quiet, pool),
            false => pairs.quiet_known = false,
        }
        pairs
    }
}

/// The occurrences of the pairs of `words` (their symbols `n_tokens` tokens at most; the pairs
/// `counted` says count), sorted by pair and walked ([`walk`], full at or above `threshold`),
/// and whether the quiet ones were kept (`forget_above` occurrences at most).
///
/// The occurrences `(pair, word)` are gathered and sorted (on `pool`'s threads when there is
/// one), so each pair's words come together, ascending: a pair at or above the threshold gets
/// its id and its initial list in one go, the others are quiet from the start
/// (superword spans hold millions of pairs, most of them rare). Adding each occurrence through
/// the index and a later list instead was a random access per occurrence
/// ([log](../../../docs/performance.md#superword-training)).
fn walked<S: Sym>(words: &Words<S>, n_tokens: usize, counted: impl Fn(u32, u32) -> bool + Sync, threshold: i64, forget_above: usize, pool: Option<&rayon::ThreadPool>) -> (Vec<Walked>, bool) {
    // An occurrence packed in a u64, `(left, right, word, count)`, when the pair and the word
    // fit (up to a few million tokens and spans), sorted on the pair's bits in word order.
    // The low bits left hold the word's count if it fits (most are 1), so summing a pair's
    // count reads no word record; a count that does not fit is looked up.
    let sym_bits = usize::BITS - n_tokens.saturating_sub(1).leading_zeros();
    let word_bits = usize::BITS - words.len().saturating_sub(1).leading_zeros();
    if 2 * sym_bits + word_bits > 64 {
        return walked_wide(words, counted, threshold, forget_above, pool);
    }
    let count_bits = (64 - 2 * sym_bits - word_bits).min(32);
    let big = (1u64 << count_bits) - 1; // (0 when there are no bits: always looked up)
    let at = word_bits + count_bits;
    let pack = |x: u32, y: u32, w: usize| {
        let c = (words.count(w) as u64).min(big);
        (((x as u64) << sym_bits | y as u64) << at) | (w as u64) << count_bits | if c == big { 0 } else { c }
    };
    // Sorted in two steps: the occurrences are written straight into buckets by the top
    // bits of their pair (each stretch of words counts its own first, so each bucket is in
    // word order), then each bucket is sorted on the rest of the pair and walked while it
    // is in the caches.
    let key_bits = 2 * sym_bits;
    let top = key_bits.min(BUCKET_BITS);
    let bucket = |o: u64| (o >> (at + key_bits - top)) as usize;
    let pair_bucket = |x: u32, y: u32| (((x as u64) << sym_bits | y as u64) >> (key_bits - top)) as usize;
    let n = words.len();
    let step = n.div_ceil(pool.map_or(1, |p| p.current_num_threads() * 4)).max(1);
    let stretches: Vec<_> = (0..n).step_by(step).map(|s| s..(s + step).min(n)).collect();
    let counts: Vec<Vec<usize>> = crate::pool::map(pool, &stretches, |ws| {
        let mut c = vec![0usize; 1 << top];
        each_occurrence(words, &counted, &|x, y, _| pair_bucket(x, y), ws.clone(), |d| c[d] += 1);
        c
    });
    // Where each stretch's occurrences of each bucket go: buckets in order, stretches in order.
    let mut bounds = vec![0usize; (1 << top) + 1];
    let mut starts = vec![vec![0usize; 1 << top]; counts.len()];
    let mut next = 0;
    for d in 0..1 << top {
        bounds[d] = next;
        for (s, c) in starts.iter_mut().zip(&counts) {
            s[d] = next;
            next += c[d];
        }
    }
    bounds[1 << top] = next;
    let mut occ: Vec<u64> = Vec::with_capacity(next);
    let out = occ.spare_capacity_mut().as_mut_ptr() as usize;
    let jobs: Vec<_> = stretches.into_iter().zip(starts).zip(counts).collect();
    crate::pool::map(pool, &jobs, |((ws, pos), count)| {
        let mut pos = pos.clone();
        let ends: Vec<usize> = pos.iter().zip(count).map(|(p, c)| p + c).collect();
        each_occurrence(words, &counted, &pack, ws.clone(), |o| {
            let d = bucket(o);
            assert!(pos[d] < ends[d], "the pairs counted twice agree");
            // SAFETY: the stretches' ranges of positions are disjoint and within the capacity
            // (the counts partition 0..next), and the assert keeps each within its own.
            unsafe { (out as *mut u64).add(pos[d]).write(o) };
            pos[d] += 1;
        });
        assert!(pos == ends, "the pairs counted twice agree");
    });
    // SAFETY: every one of the `next` positions was written once (asserted above).
    unsafe { occ.set_len(next) };
    // Runs of whole buckets of about equal size, sorted and walked on the pool's threads.
    let runs = pool.map_or(1, |p| p.current_num_threads() * 4);
    let mut pieces = Vec::new();
    let (mut rest, mut from, mut d) = (&mut occ[..], 0, 0);
    while d < 1 << top {
        let first = d;
        while d < 1 << top && (d == first || bounds[d] - from < next.div_ceil(runs)) {
            d += 1;
        }
        let (piece, r) = std::mem::take(&mut rest).split_at_mut(bounds[d] - from);
        pieces.push((piece, first..d));
        (rest, from) = (r, bounds[d]);
    }
    let word = |o: u64| ((o >> count_bits) & ((1 << word_bits) - 1)) as usize;
    let count = |o: u64| match o & big {
        0 => words.count(word(o)),
        c => c as i64,
    };
    let pair_of = |o: u64| ((o >> (at + sym_bits)) as u32, ((o >> at) & ((1 << sym_bits) - 1)) as u32);
    let keep = next <= forget_above;
    let sort_and_walk = |(occ, ds): (&mut [u64], std::ops::Range<usize>)| {
        let mut scratch = Vec::new();
        let base = bounds[ds.start];
        for d in ds {
            crate::radix::sort_by_bits(&mut occ[bounds[d] - base..bounds[d + 1] - base], &mut scratch, at, at + key_bits - top);
        }
        walk(occ, |o| o >> at, pair_of, word, count, threshold, keep)
    };
    let walked = match pool {
        Some(pool) => pool.install(|| pieces.into_par_iter().map(sort_and_walk).collect()),
        None => pieces.into_iter().map(sort_and_walk).collect(),
    };
    (walked, keep)
}

/// [`walked`] where a packed occurrence would not fit in 64 bits.
fn walked_wide<S: Sym>(words: &Words<S>, counted: impl Fn(u32, u32) -> bool + Sync, threshold: i64, forget_above: usize, pool: Option<&rayon::ThreadPool>) -> (Vec<Walked>, bool) {
    let mut occ: Vec<(u64, u32)> = Vec::new();
    each_occurrence(words, &counted, &|x, y, w| ((x as u64) << 32 | y as u64, w as u32), 0..words.len(), |o| occ.push(o));
    match pool {
        Some(pool) => pool.install(|| occ.par_sort_unstable()),
        None => occ.sort_unstable(),
    }
    let pair_of = |o: (u64, u32)| ((o.0 >> 32) as u32, o.0 as u32);
    let keep = occ.len() <= forget_above;
    (vec![walk(&occ, |o| o.0, pair_of, |o| o.1 as usize, |o| words.count(o.1 as usize), threshold, keep)], keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_and_wide_occurrences_build_the_same_pairs() {
        // Words of random tokens (a few with big counts: looked up, not packed), some pairs
        // repeated in a word, some not counted; both builds on none, two and three threads.
        // A second set of words has tokens below 16 (the pair's bits fewer than a bucket's,
        // the packed count capped at 32 bits); a third counts no pair at all.
        let pools: Vec<_> = [2, 3].iter().map(|&n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap()).collect();
        for (kinds, n_tokens, none) in [(3000, 3000, false), (16, 16, false), (3000, 3000, true)] {
            let mut next = crate::train::tests::draws(0x2545_F491_4F6C_DD1D);
            let (mut syms, mut offsets, mut counts) = (Vec::new(), vec![0i64], Vec::new());
            for w in 0..30_000 {
                let len = 1 + next(7) as usize;
                syms.extend((0..len).map(|_| if next(2) == 0 { next(kinds.min(40)) } else { next(kinds) } as u32));
                offsets.push(syms.len() as i64);
                counts.push(if w % 97 == 0 { 1 << 40 } else { 1 + next(5) });
            }
            let words = Words::<u32>::from_segmented(crate::train::Segmented::of(&syms, &offsets, &counts), None);
            let counted = |a: u32, b: u32| !none && a + b != 11;
            let dump = |p: &Pairs| {
                let mut full: Vec<(u32, u32, i64, Vec<u8>)> = (0..p.init_len.len())
                    .map(|i| {
                        let s = p.init_start[i] as usize;
                        (p.left[i], p.right[i], p.count[i], p.init_bytes[s..s + p.init_len[i] as usize].to_vec())
                    })
                    .collect();
                full.sort();
                let entries = |ix: &Index| {
                    let mut out = Vec::new();
                    ix.clone_for_test().for_each(|a, b, v| out.push((a, b, *v)));
                    out.sort();
                    out
                };
                (full, entries(&p.index), entries(&p.quiet), p.quiet.len())
            };
            let wide = |pool| {
                let (walked, kept) = walked_wide(&words, counted, 20, usize::MAX, pool);
                Pairs::join(20, walked, kept, pool)
            };
            let want = dump(&wide(None));
            match none {
                false => assert!(want.0.len() > 10 && (kinds < 100 || want.3 > 10), "full pairs (and quiet ones of many tokens)"),
                true => assert!(want.0.is_empty() && want.1.is_empty() && want.2.is_empty(), "no pairs"),
            }
            for pool in [None, Some(&pools[0]), Some(&pools[1])] {
                // (2^24 tokens: one bit left for counts, all looked up; 2^25: too wide to pack.)
                for n in [n_tokens, 1 << 24, 1 << 25] {
                    assert_eq!(dump(&Pairs::build_general(&words, n, counted, 20, usize::MAX, pool)), want);
                    // Forgotten, the quiet counts come back the same.
                    let mut forgot = Pairs::build_general(&words, n, counted, 20, 0, pool);
                    assert_eq!(forgot.quiet_known(), want.0.is_empty() && want.3 == 0);
                    if !forgot.quiet_known() {
                        assert_eq!(forgot.quiet.len(), 0);
                        forgot.recount_quiet(&words, n, counted, pool);
                    }
                    assert_eq!(dump(&forgot), want);
                }
                assert_eq!(dump(&wide(pool)), want);
            }
        }
    }
}
