//! Gathering the shards' tables into the flat form (sorted by bytes, each word once), on the
//! counter's threads. Short words are sorted as integers (their byte-swapped packed keys order
//! like the bytes); long ones by their first 16 bytes as a big-endian integer, the rest compared
//! only on equal prefixes; equal neighbours (a word counted in several shards) are summed. The
//! two sorted runs are then merged in parts, cut at pivot words, each part written into its own
//! stretch of the output, sized beforehand from the lengths kept with the words. Superword spans
//! make millions of long words, whose gathering was serial
//! ([log](../../docs/performance.md#superword-training)).

use std::mem::MaybeUninit;
use std::sync::MutexGuard;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::tables::{LongPart, Short, MARK_SHIFT, OFFSET_BITS};
use super::{Counter, Shard};
use crate::counts::Flat;
use crate::keys::unpack_into;

/// A gathered long word: its first 16 bytes as a big-endian integer, where it lies (`at`: the
/// shard's mark above [`MARK_SHIFT`], the length in the bits from [`OFFSET_BITS`] up, all ones
/// for a length that does not fit, the arena offset below) and its count.
type Keyed = (u128, u64, u64);

/// How many words ahead [`part_words`] asks for a word's bytes.
const AHEAD: usize = 8;
/// Words per part of the merge, at least.
const PART_WORDS: usize = 1 << 16;
/// The length bits of a [`Keyed`] `at`.
const LEN_MAX: u64 = (1 << (MARK_SHIFT - OFFSET_BITS)) - 1;

impl Counter {
    /// The flat form, sorted by bytes.
    pub(super) fn flat_here(&self, free_tables: bool) -> Flat {
        debug_assert!(!self.split_only, "a split_only counter is read by take_split alone");
        let par = crate::pool::in_pool();
        let mut shards: Vec<_> = self.shards.iter().map(|s| s.lock().unwrap_or_else(|e| e.into_inner())).collect();
        let mut short = short_words(&mut shards, free_tables, par);
        // Each long word with its prefix and length, read once, the tables' parts on all
        // threads, each into its own stretch (the arena reads are scattered: asked for 8 words
        // ahead); then the tables are freed.
        let keyed = {
            let shards = &shards;
            let tasks: Vec<_> = shards.iter().enumerate().flat_map(|(k, s)| s.long.parts(k as u16)).collect();
            let n = tasks.iter().map(|t| t.0).sum();
            let mut keyed: Vec<Keyed> = Vec::with_capacity(n);
            let mut rest = &mut keyed.spare_capacity_mut()[..n];
            let mut jobs = Vec::with_capacity(tasks.len());
            for (m, words) in tasks {
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(m);
                jobs.push((head, words));
                rest = tail;
            }
            let (word, ask) = (|at| long_word(shards, at), |at| ask_long_word(shards, at));
            each(par, jobs, |(dst, words): (&mut [MaybeUninit<Keyed>], _)| key_part(dst, words, &word, &ask));
            // SAFETY: `key_part` wrote every element of its stretch (it asserts so), and the
            // stretches tile the first `n` elements of the spare capacity.
            unsafe { keyed.set_len(n) };
            keyed
        };
        if free_tables {
            shards.iter_mut().for_each(|s| s.long.free_slots());
        }
        let mut keyed = keyed;
        let shards = &shards;
        let (word, ask) = (|at| long_word(shards, at), |at| ask_long_word(shards, at));
        let order = |a: &Keyed, b: &Keyed| a.0.cmp(&b.0).then_with(|| word(a.1)[16..].cmp(&word(b.1)[16..]));
        if par {
            keyed.par_sort_unstable_by(order);
        } else {
            keyed.sort_unstable_by(order);
        }
        keyed.dedup_by(|next, kept| {
            if next.0 == kept.0 && word(next.1)[16..] == word(kept.1)[16..] {
                kept.2 = kept.2.saturating_add(next.2);
                true
            } else {
                false
            }
        });
        merge_runs(&mut short, &keyed, &word, &ask, par)
    }
}

/// The short words of all shards in the gathered form (key byte-swapped), sorted, each once
/// (counts summed); with `free`, the tables are freed as they are read.
pub(super) fn short_words(shards: &mut [MutexGuard<'_, Shard>], free: bool, par: bool) -> Vec<Short> {
    let mut short: Vec<Short> = Vec::with_capacity(shards.iter().map(|s| s.short.len()).sum());
    for s in shards.iter_mut() {
        s.short.gather(&mut short, free);
    }
    if par {
        short.par_sort_unstable_by_key(|e| e.key());
    } else {
        short.sort_unstable_by_key(|e| e.key());
    }
    if shards.len() > 1 {
        short.dedup_by(|next, kept| {
            if next.key() == kept.key() {
                kept.count = kept.count.saturating_add(next.count);
                true
            } else {
                false
            }
        });
    }
    short
}

/// The long words of hash part `j` of all shards, each once with its summed count, to `f`, in no
/// order: `part` is the first shard's part `j`, probed for the same part's words of the others
/// (the `rest`); the counts of those it holds are added, the rest are new (with more than two
/// shards, looked up again in a map of the part's new words). The tables are not modified.
/// For superword spans, millions of long words whose order training does not need
/// ([log](../../docs/performance.md#superword-training)).
pub(super) fn part_words<'a>(j: usize, part: &LongPart<'a>, rest: &'a [MutexGuard<'_, Shard>], mut f: impl FnMut(&[u8], u64)) {
    let mut more = vec![0u64; part.slots()];
    let mut seen: FxHashMap<&[u8], usize> = FxHashMap::default();
    let mut extra: Vec<(&[u8], u64)> = Vec::new();
    for (k, other) in rest.iter().enumerate() {
        let theirs: Vec<(u64, u64, u64)> = other.long.part_words(j).collect();
        for (m, &(tag, at, n)) in theirs.iter().enumerate() {
            if let Some(&(_, ahead, _)) = theirs.get(m + AHEAD) {
                other.long.prefetch_word(ahead);
            }
            let w = other.long.word_at(at);
            if let Some(i) = part.find(tag, w) {
                more[i] = more[i].saturating_add(n);
                continue;
            }
            if rest.len() > 1 {
                if let Some(&i) = seen.get(w) {
                    extra[i].1 = extra[i].1.saturating_add(n);
                    continue;
                }
                if k + 1 < rest.len() {
                    seen.insert(w, extra.len());
                }
            }
            extra.push((w, n));
        }
    }
    // (Each word's bytes asked for a few words ahead: `f` has much to do between two, so their
    // cache misses would not overlap.)
    for (i, w, n) in part.words() {
        part.ask(i + AHEAD);
        f(w, n.saturating_add(more[i]));
    }
    for (k, &(w, n)) in extra.iter().enumerate() {
        if let Some(&(x, _)) = extra.get(k + AHEAD) {
            crate::memory::prefetch(x.as_ptr());
        }
        f(w, n);
    }
}

/// Runs `f` on every job: on the pool's threads when `par`, else here in order.
fn each<T: Send>(par: bool, jobs: Vec<T>, f: impl Fn(T) + Sync + Send) {
    if par {
        jobs.into_par_iter().for_each(f);
    } else {
        jobs.into_iter().for_each(f);
    }
}

/// The long word at a gathered `at` (its shard's mark above [`MARK_SHIFT`]).
fn long_word<'a>(shards: &'a [MutexGuard<'_, Shard>], at: u64) -> &'a [u8] {
    shards[(at >> MARK_SHIFT) as usize].long.word_at(at)
}

/// Asks for the first bytes of the long word at a gathered `at` (a hint).
fn ask_long_word(shards: &[MutexGuard<'_, Shard>], at: u64) {
    shards[(at >> MARK_SHIFT) as usize].long.prefetch_word(at)
}

/// Writes a part's long words into `dst` as [`Keyed`] (exactly `dst.len()` of them).
fn key_part<'a>(dst: &mut [MaybeUninit<Keyed>], words: impl Iterator<Item = (u64, u64)>, word: &impl Fn(u64) -> &'a [u8], ask: &impl Fn(u64)) {
    let mut k = 0;
    for (at, n) in words {
        assert!(k < dst.len(), "more long words in a part than it counted");
        dst[k].write((0, at, n));
        k += 1;
    }
    assert!(k == dst.len(), "fewer long words in a part than it counted");
    // SAFETY: every element was just written.
    let dst = unsafe { &mut *(dst as *mut [MaybeUninit<Keyed>] as *mut [Keyed]) };
    for i in 0..dst.len() {
        if let Some(&(_, ahead, _)) = dst.get(i + 8) {
            ask(ahead);
        }
        let w = word(dst[i].1);
        dst[i].0 = u128::from_be_bytes(w[..16].try_into().expect("long words have 16 bytes"));
        dst[i].1 |= (w.len() as u64).min(LEN_MAX) << OFFSET_BITS;
    }
}

/// The length of the long word at `at` (see [`Keyed`]).
fn long_len<'a>(at: u64, word: &impl Fn(u64) -> &'a [u8]) -> usize {
    match (at >> OFFSET_BITS) & LEN_MAX {
        LEN_MAX => word(at).len(),
        n => n as usize,
    }
}

/// The length of a short word from its sort key (a byte-swapped key's low byte is the length).
fn short_len(e: &Short) -> usize {
    (e.key() as u8).min(15) as usize
}

/// One part of the merge: ranges of both runs and the stretches of the output they fill.
struct Part<'a> {
    short: &'a mut [Short],
    long: &'a [Keyed],
    bytes: &'a mut [MaybeUninit<u8>],
    ends: &'a mut [MaybeUninit<i64>],
    counts: &'a mut [MaybeUninit<u64>],
    /// Output bytes before this part.
    base: usize,
}

/// The two sorted runs merged into the flat form, in parts on the pool's threads (`par`).
/// The pages of the gathered short keys already written are given back as the merge goes.
fn merge_runs<'a, W, A>(short: &mut [Short], long: &[Keyed], word: &W, ask: &A, par: bool) -> Flat
where
    W: Fn(u64) -> &'a [u8] + Sync,
    A: Fn(u64) + Sync,
{
    let n = short.len() + long.len();
    let parts = if par { (n / PART_WORDS).clamp(1, 8 * rayon::current_num_threads()) } else { 1 };
    // Part boundaries at pivot words of the longer run: every word before a pivot, in both
    // runs, belongs to an earlier part (a short and a long word are never equal).
    let mut cuts = vec![(0, 0)];
    for k in 1..parts {
        let mut buf = [0u8; 16];
        cuts.push(if long.len() >= short.len() {
            let l = k * long.len() / parts;
            let pivot = word(long[l].1);
            (short.partition_point(|e| unpack_into(e.key().swap_bytes(), &mut buf) < pivot), l)
        } else {
            let s = k * short.len() / parts;
            let pivot = unpack_into(short[s].key().swap_bytes(), &mut buf);
            (s, long.partition_point(|e| word(e.1) < pivot))
        });
    }
    cuts.push((short.len(), long.len()));
    let size = |c: &[(usize, usize)]| {
        let ((s0, l0), (s1, l1)) = (c[0], c[1]);
        (short[s0..s1].iter().map(short_len).sum::<usize>() + long[l0..l1].iter().map(|e| long_len(e.1, word)).sum::<usize>(), s1 - s0 + l1 - l0)
    };
    let sizes: Vec<(usize, usize)> = if par { cuts.par_windows(2).map(size).collect() } else { cuts.windows(2).map(size).collect() };
    let nbytes = sizes.iter().map(|s| s.0).sum();
    let mut out = Flat { bytes: Vec::with_capacity(nbytes), offsets: Vec::with_capacity(n + 1), counts: Vec::with_capacity(n) };
    out.offsets.push(0);
    {
        let (mut bytes, mut ends, mut counts) = (&mut out.bytes.spare_capacity_mut()[..nbytes], &mut out.offsets.spare_capacity_mut()[..n], &mut out.counts.spare_capacity_mut()[..n]);
        let mut rest = short;
        let mut jobs = Vec::with_capacity(parts);
        let mut base = 0;
        for (c, &(b, w)) in cuts.windows(2).zip(&sizes) {
            let ((s0, l0), (s1, l1)) = (c[0], c[1]);
            let (s, r) = std::mem::take(&mut rest).split_at_mut(s1 - s0);
            let (bh, bt) = std::mem::take(&mut bytes).split_at_mut(b);
            let (eh, et) = std::mem::take(&mut ends).split_at_mut(w);
            let (ch, ct) = std::mem::take(&mut counts).split_at_mut(w);
            jobs.push(Part { short: s, long: &long[l0..l1], bytes: bh, ends: eh, counts: ch, base });
            (rest, bytes, ends, counts, base) = (r, bt, et, ct, base + b);
        }
        each(par, jobs, |p: Part<'_>| write_part(p, word, ask));
    }
    // SAFETY: every part wrote all of its stretches (`write_part` asserts it), and the
    // stretches tile the first `nbytes` / `n` elements of the spare capacities.
    unsafe {
        out.bytes.set_len(nbytes);
        out.offsets.set_len(n + 1);
        out.counts.set_len(n);
    }
    out
}

/// Merges one part's words into its stretches of the output.
fn write_part<'a>(p: Part<'_>, word: &impl Fn(u64) -> &'a [u8], ask: &impl Fn(u64)) {
    let (mut b, mut w) = (0, 0);
    let mut put = |x: &[u8], c: u64| {
        assert!(b + x.len() <= p.bytes.len() && w < p.ends.len(), "a word past its part's stretch");
        // SAFETY: `x` and the stretch are distinct memory; the bounds are checked above.
        unsafe { std::ptr::copy_nonoverlapping(x.as_ptr(), p.bytes.as_mut_ptr().add(b).cast::<u8>(), x.len()) };
        b += x.len();
        p.ends[w].write((p.base + b) as i64);
        p.counts[w].write(c);
        w += 1;
    };
    let mut li = p
        .long
        .iter()
        .enumerate()
        .map(|(i, &(_, at, c))| {
            // The words are read in sorted order, scattered in the arenas: ask ahead.
            if let Some(&(_, ahead, _)) = p.long.get(i + 8) {
                ask(ahead);
            }
            (word(at), c)
        })
        .peekable();
    let mut buf = [0u8; 16];
    let mut released = 0;
    for i in 0..p.short.len() {
        if i - released == 1 << 16 {
            crate::memory::release_pages(&mut p.short[released..i]);
            released = i;
        }
        let e = p.short[i];
        let x = unpack_into(e.key().swap_bytes(), &mut buf);
        while let Some((lw, lc)) = li.next_if(|(lw, _)| *lw < x) {
            put(lw, lc);
        }
        put(x, e.count);
    }
    for (lw, lc) in li {
        put(lw, lc);
    }
    assert!(b == p.bytes.len() && w == p.ends.len(), "a part's words did not fill its stretch");
}
