//! Superword spans cut where no stage-2 merge can cross, and identical pieces counted once
//! ([`pieces`]): stage 2 then trains on ~2 M distinct pieces instead of ~8 M distinct spans.
//!
//! * **Why it is exact.** While every merge makes a new token, a token's make-up out of the
//!   first segmentation's tokens is fixed by its merges, so every occurrence of a pair `x y`
//!   lies at a boundary between the last first-segmentation token of `x` and the first of `y`,
//!   and the count of `x y` never exceeds the first count of that boundary's pair. Cutting
//!   every boundary whose first pair counts less than a floor `f` therefore only removes
//!   occurrences of pairs that count less than `f`, in the whole spans as in the pieces: pairs
//!   of `f` or more have the same count in both, and a merge loop that only ever merges such
//!   pairs makes the same merges on both (ties too: the same pairs tie). The trainer is told
//!   `f` and gives up when its best pair falls below it or a merge reuses a token (whose
//!   occurrences would then have two make-ups); the caller then trains on the whole spans.
//! * **Counts as upper bounds.** The first pairs are summed into a sketch of 2^20 slots by a
//!   hash of the pair (saturating `u16`s: a slot is at least the count of every pair in it);
//!   a boundary is cut when its slot is below the floor. The words' own pairs are counted by
//!   distinct word (its count in all spans: the caller's `word_counts`, as the split gives
//!   them). A span whose words a stage-1 merge may join ([`super::may_join`]) is cut into tokens
//!   whole and all its pairs counted; it is cut only between two words that no merge may join
//!   to any neighbour (where its first pair is the two words' edge tokens).
//! * **The floor** is half the `2 K`-th highest slot (`K`: the merges asked for); on 185 MB of
//!   English, stage 2's last merge counts 2.2-2.3x the floor at 16k-64k. A floor set too high
//!   costs a second stage 2, never a different result.
//!
//! Figures: [log](../../../docs/performance.md#superword-training).

use super::{WordTokens, AHEAD_WORDS, ASKED_PER_SPAN};
use crate::count::span_words::{key, MAX_SPAN_WORDS};
use crate::count::tally::Tally;
use crate::encode::Encoder;
use crate::keys::mix128;

const SKETCH_BITS: u32 = 20;
const SLOTS: usize = 1 << SKETCH_BITS;
/// Multi-word pieces are spread over this many parts by their key's hash, each counted apart.
const PART_BITS: u32 = 8;
const PARTS: usize = 1 << PART_BITS;

/// Pieces in a flat form: their ids, where each ends among them (from the part's start, the
/// first end past the first piece), their counts.
type Flat = (Vec<u32>, Vec<i64>, Vec<u64>);

/// The parts one after another (on the pool's threads, each part freed once copied): `(ids,
/// offsets from 0, counts)`.
fn joined(pool: Option<&rayon::ThreadPool>, parts: Vec<Flat>) -> (Vec<u32>, Vec<i64>, Vec<u64>) {
    let mut bases = vec![0i64];
    let (mut ids, mut ends, mut counts) = (Vec::with_capacity(parts.len()), vec![vec![0i64]], Vec::with_capacity(parts.len()));
    for (i, e, c) in parts {
        bases.push(bases[bases.len() - 1] + i.len() as i64);
        ids.push(i);
        ends.push(e);
        counts.push(c);
    }
    let par = pool.is_some();
    crate::pool::install(pool, || {
        let offsets = crate::pool::concat(par, ends, |k, e| if k == 0 { 0 } else { bases[k - 1] + e });
        (crate::pool::concat(par, ids, |_, v| v), offsets, crate::pool::concat(par, counts, |_, c| c))
    })
}

/// The distinct pieces cut into stage 1's tokens, as [`super::spans`] gives them, with their
/// counts, and the floor the trainer must not merge below.
pub struct Pieces {
    pub ids: Vec<u32>,
    pub offsets: Vec<i64>,
    pub counts: Vec<u64>,
    pub floor: u64,
}

#[inline(always)]
fn slot(a: u32, b: u32) -> usize {
    ((((a as u64) << 32) | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SKETCH_BITS)) as usize
}

#[inline(always)]
fn add(sketch: &mut [u16], a: u32, b: u32, c: u16) {
    let s = &mut sketch[slot(a, b)];
    *s = s.saturating_add(c);
}

/// A key's part: bits of its hash apart from the top ones, which place it in its part's table.
#[inline(always)]
fn part(k: u128) -> usize {
    (mix128(k) >> 32) as usize & (PARTS - 1)
}

/// One stretch's pieces: single words by word (their summed counts), longer pieces of up to
/// [`MAX_SPAN_WORDS`] words as keys by part, longer ones as they are.
struct Cut {
    single: Vec<u64>,
    /// Keys and counts apart (24 bytes a piece, not 32: a `(u128, u64)` is padded).
    parts: Vec<(Vec<u128>, Vec<u64>)>,
    long: Flat,
}

/// The spans (`span_words`, `span_ends`, `span_counts`, as [`super::spans`] takes them; the
/// words' counts `word_counts`) cut into distinct pieces for a stage 2 of `merges` merges, or
/// `None` when no floor of 2 or more can be set (too few spans or merges for cuts to pay).
pub fn pieces(enc: &Encoder, words: (&[u8], &[i64]), word_counts: &[u64], span_words: &[u32], span_ends: &[i64], span_counts: &[u64], merges: usize) -> Result<Option<Pieces>, String> {
    let timing = std::env::var_os("HF_BPE_TRAIN_TIMING").is_some();
    let t0 = std::time::Instant::now();
    let wt = WordTokens::new(enc, words, span_words, span_ends, false)?;
    let t_words = t0.elapsed();
    let n_spans = span_ends.len() - 1;
    if span_counts.len() != n_spans || word_counts.len() != wt.rec.len() {
        return Err(format!(
            "segment_pieces: {} span counts for {n_spans} spans, {} word counts for {} words",
            span_counts.len(),
            word_counts.len(),
            wt.rec.len()
        ));
    }
    if merges == 0 || merges > SLOTS / 16 {
        return Ok(None);
    }
    let pool = crate::pool::get(crate::pool::default_threads());
    let pool = pool.as_deref();
    // (At most 8 stretches: each holds a sketch and a count per word until they are summed.)
    let k = pool.map_or(1, |p| (p.current_num_threads() * 2).min(8));
    let stretches: Vec<(usize, usize)> = (0..k).map(|t| (n_spans * t / k, n_spans * (t + 1) / k)).collect();
    let ws_of = |i: usize| &span_words[span_ends[i] as usize..span_ends[i + 1] as usize];
    // Per word, in 8 bytes: its first and last token (24 bits each) and its first and last byte.
    let n_words = wt.rec.len();
    let edges = (0..n_words).map(|w| {
        let (t, r) = (wt.tokens(w), wt.rec[w]);
        let (first, last) = (t[0] as u64, t[t.len() - 1] as u64);
        (first.max(last) < 1 << 24).then_some(first << 40 | last << 16 | (r.first as u64) << 8 | r.last as u64)
    });
    let Some(edges) = edges.collect::<Option<Vec<u64>>>() else { return Ok(None) };
    let join: Vec<bool> = (0..1usize << 16).map(|i| super::may_join((i >> 8) as u8, i as u8)).collect();
    // Whether a stage-1 merge may join the words of edges `a` and `b`, and the slot of their pair.
    let joins = |a: u64, b: u64| join[(a as u8 as usize) << 8 | (b >> 8) as u8 as usize];
    let slot_of = |a: u64, b: u64| slot((a >> 16) as u32 & 0xFF_FFFF, (b >> 40) as u32);
    let ahead = |i: usize| {
        let next = &span_words[span_ends[i + 1] as usize..];
        next.iter().skip(AHEAD_WORDS).take(ASKED_PER_SPAN).for_each(|&w| crate::memory::prefetch(edges.as_ptr().wrapping_add(w as usize)));
    };

    // The sketch of the first pairs' counts (a span of words a merge may join: all its pairs,
    // on top of the boundaries before the first such pair: an upper bound all the same).
    let sketches = crate::pool::map(pool, &stretches, |&(a, z)| {
        let (mut sk, mut scratch, mut ids) = (vec![0u16; SLOTS], Vec::new(), Vec::new());
        for i in a..z {
            ahead(i);
            let (ws, c) = (ws_of(i), span_counts[i].min(u16::MAX as u64) as u16);
            if c == 0 || ws.len() < 2 {
                continue;
            }
            let mut e = edges[ws[0] as usize];
            for &w in &ws[1..] {
                let f = edges[w as usize];
                if joins(e, f) {
                    ids.clear();
                    wt.span(ws, None, false, &mut scratch, &mut ids);
                    ids.windows(2).for_each(|p| add(&mut sk, p[0], p[1], c));
                    break;
                }
                let s = &mut sk[slot_of(e, f)];
                *s = s.saturating_add(c);
                e = f;
            }
        }
        sk
    });
    let mut sketch = vec![0u16; SLOTS];
    for sk in sketches {
        sketch.iter_mut().zip(sk).for_each(|(s, x)| *s = s.saturating_add(x));
    }
    for (w, &c) in word_counts.iter().enumerate() {
        let c = c.min(u16::MAX as u64) as u16;
        wt.tokens(w).windows(2).for_each(|p| add(&mut sketch, p[0], p[1], c));
    }
    let floor = {
        let mut v = sketch.clone();
        let (_, nth, _) = v.select_nth_unstable_by(2 * merges - 1, |a, b| b.cmp(a));
        *nth as u64 / 2
    };
    let t_sketch = t0.elapsed();
    if floor < 2 {
        return Ok(None);
    }
    // The cut reads one bit a slot (at or above the floor): 128 KiB, which stays in the cache
    // where the sketch's 2 MiB did not.
    let mut kept = vec![0u64; SLOTS / 64];
    sketch.iter().enumerate().filter(|&(_, &c)| c as u64 >= floor).for_each(|(s, _)| kept[s / 64] |= 1 << (s % 64));
    drop(sketch);
    let below = |s: usize| kept[s / 64] >> (s % 64) & 1 == 0;

    // The pieces: each span cut where its boundary's slot is below the floor (single words
    // counted by word; those of one token dropped when joined).
    let cuts = crate::pool::map(pool, &stretches, |&(a, z)| {
        let part_of = || (Vec::with_capacity((z - a) / PARTS), Vec::with_capacity((z - a) / PARTS));
        let mut cut = Cut { single: vec![0; n_words], parts: (0..PARTS).map(|_| part_of()).collect(), long: Default::default() };
        let mut emit = |piece: &[u32], c: u64| match piece.len() {
            1 => cut.single[piece[0] as usize] = cut.single[piece[0] as usize].saturating_add(c),
            2..=MAX_SPAN_WORDS => {
                let k = key(piece);
                let p = &mut cut.parts[part(k)];
                p.0.push(k);
                p.1.push(c);
            }
            _ => {
                cut.long.0.extend_from_slice(piece);
                cut.long.1.push(cut.long.0.len() as i64);
                cut.long.2.push(c);
            }
        };
        for i in a..z {
            ahead(i);
            let (ws, c) = (ws_of(i), span_counts[i]);
            if c == 0 || ws.is_empty() {
                continue;
            }
            // A boundary is cut only between two words that are each cut into their own tokens
            // (no merge may join either to its other neighbour): its first pair is their edges'.
            let e = |j: usize| edges[ws[j] as usize];
            let (mut from, mut before, mut joined_before) = (0, e(0), false);
            for j in 1..ws.len() {
                let next = e(j);
                let joined = joins(before, next);
                let free = !joined && !joined_before && (j + 1 == ws.len() || !joins(next, e(j + 1)));
                if free && below(slot_of(before, next)) {
                    emit(&ws[from..j], c);
                    from = j;
                }
                (before, joined_before) = (next, joined);
            }
            emit(&ws[from..], c);
        }
        cut
    });
    let t_cut = t0.elapsed();
    // Each part of all stretches counted together, then every piece in one flat form.
    let mut by_part: Vec<Vec<(Vec<u128>, Vec<u64>)>> = (0..PARTS).map(|_| Vec::new()).collect();
    let (mut single, mut long) = (vec![0u64; n_words], Vec::new());
    for cut in cuts {
        single.iter_mut().zip(&cut.single).for_each(|(s, &x)| *s = s.saturating_add(x));
        cut.parts.into_iter().enumerate().for_each(|(p, v)| by_part[p].push(v));
        long.push(cut.long);
    }
    // Every piece in one flat form, a part at a time: the single words, each part's distinct
    // keys (counted and written out on the pool's threads), the long pieces; then joined there.
    let mut ones: Flat = (Vec::new(), Vec::new(), Vec::new());
    for (w, &c) in single.iter().enumerate().filter(|&(w, &c)| c > 0 && wt.tokens(w).len() >= 2) {
        ones.0.push(w as u32);
        ones.1.push(ones.0.len() as i64);
        ones.2.push(c);
    }
    drop(single);
    let mut flats = vec![ones];
    flats.extend(crate::pool::install(pool, || {
        use rayon::prelude::*;
        let one = |table: &mut Vec<(u128, u64)>, part: Vec<(Vec<u128>, Vec<u64>)>| -> Flat {
            let n = part.iter().map(|v| v.0.len()).sum();
            let mut tally = Tally::new(table, n);
            part.iter().for_each(|(k, c)| k.iter().zip(c).for_each(|(&k, &c)| tally.add(k, c)));
            drop(part);
            tally.drain_ids(|n| n as i64)
        };
        match pool {
            Some(_) => by_part.into_par_iter().map_init(Vec::new, one).collect::<Vec<_>>(),
            None => {
                let mut table = Vec::new();
                by_part.into_iter().map(|p| one(&mut table, p)).collect()
            }
        }
    }));
    flats.extend(long);
    let (pw, pe, pc) = joined(pool, flats);
    let t_count = t0.elapsed();
    let (ids, offsets) = wt.spans(None, &pw, &pe, false)?;
    if timing {
        eprintln!("pieces: words {t_words:?} sketch {t_sketch:?} (floor {floor}) cut {t_cut:?} counted {t_count:?} ({} pieces) segmented {:?}", pc.len(), t0.elapsed());
    }
    Ok(Some(Pieces { ids, offsets, counts: pc, floor }))
}

#[cfg(test)]
mod tests {
    use super::{joined, Flat};

    #[test]
    fn parts_join_in_order_with_their_offsets_empty_ones_too() {
        let part = |ids: &[u32], ends: &[i64], counts: &[u64]| -> Flat { (ids.to_vec(), ends.to_vec(), counts.to_vec()) };
        let parts = || vec![part(&[], &[], &[]), part(&[1, 2, 3], &[2, 3], &[5, 6]), part(&[], &[], &[]), part(&[4, 5], &[2], &[7]), part(&[], &[], &[])];
        let want = (vec![1, 2, 3, 4, 5], vec![0, 2, 3, 5], vec![5, 6, 7]);
        assert_eq!(joined(None, parts()), want);
        let pool = crate::pool::get(2);
        assert_eq!(joined(pool.as_deref(), parts()), want);
    }
}
