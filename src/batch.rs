//! Batches: many documents (or one huge one) encoded in parallel, in three steps.
//!
//! * **Plan.** Each document is split at its allowed special tokens into *items*; with a pool,
//!   text items longer than 1.5 units are cut at safe places (`corpus::cuts::segments`, built-in
//!   patterns only), so one 100 MB line spreads over all cores like a batch of documents.
//! * **Units.** Consecutive items are grouped into units of roughly equal size (64 KiB-1 MiB,
//!   about 32 per thread) so the last ones finish close together.
//! * **Run.** Each thread encodes one stretch of units front to back with its own cache slot
//!   (the same slot on every call, so a warm slot sees the same texts again), stealing from
//!   the back of other stretches when done ([`run_units_static`]). The first thread writes
//!   straight into the batch's output; the other units' ids are copied in at the end.
//!
//! Output is flat (ids + per-document counts): one Python list per document costs more than
//! the encoding for short documents. Everything here runs with the GIL released, on the
//! fork-aware pools of `crate::pool`. Measurements: [log](../docs/performance.md#batches).

use std::sync::Mutex;

use rayon::prelude::*;

use crate::encode::Encoder;
use crate::corpus::cuts::segments_where;
use crate::specials::{Item, SpecialSet};

/// Largest work unit; text items longer than 1.5 units are cut at safe places.
pub const SEGMENT_BYTES: usize = 1 << 20;
/// Work units per pool thread in a batch (see `encode_docs`).
const UNITS_PER_THREAD: usize = 32;
/// Batches smaller than this run on the calling thread (thread hand-off costs more).
pub const PARALLEL_MIN_BYTES: usize = 256 << 10;

/// One work unit's output: its ids and the number of ids of each of its items.
type UnitOut = (Vec<u32>, Vec<u32>);

/// Result of a batch: all ids in document order and each document's number of ids.
pub struct Flat {
    pub ids: Vec<u32>,
    pub lens: Vec<usize>,
}

fn item_bytes(it: &Item) -> usize {
    match *it {
        Item::Text(s, e) => e - s,
        Item::Special(..) => 16,
    }
}

/// A pool for `n` threads (0 = default), or None to run on the calling thread.
fn threads_pool(n: usize) -> Option<crate::pool::Pool> {
    let n = if n == 0 { crate::pool::default_threads() } else { n };
    if n <= 1 {
        return None;
    }
    crate::pool::get(n)
}

/// The plan of a batch: its items in order, each tagged with its document. Documents are split at
/// their allowed special tokens; with `cut = Some(seg)` (a pool runs the batch) text items longer
/// than 1.5 `seg` are cut at safe places (built-in patterns only); `sep` follows each document.
fn plan(enc: &Encoder, docs: &[&str], allowed: &SpecialSet, sep: Option<u32>, cut: Option<usize>) -> Vec<(u32, Item)> {
    let mut items: Vec<(u32, Item)> = Vec::with_capacity(docs.len());
    let mut scratch = Vec::new();
    // The general path is cut only where normalizing the two sides apart changes nothing.
    let ascii = enc.is_generic();
    let cut = cut.filter(|_| enc.pattern.is_builtin() && (!ascii || enc.cuts_at_ascii()));
    let auto = enc.specials().automaton(allowed);
    for (di, d) in docs.iter().enumerate() {
        scratch.clear();
        enc.specials().split_with(auto.as_deref(), d, 0, &mut scratch);
        for it in scratch.drain(..) {
            match (it, cut) {
                (Item::Text(s, e), Some(seg)) if e - s > seg + seg / 2 => {
                    let mut p = s;
                    for piece in segments_where(&d[s..e], seg, ascii) {
                        items.push((di as u32, Item::Text(p, p + piece.len())));
                        p += piece.len();
                    }
                }
                (it, _) => items.push((di as u32, it)),
            }
        }
        if let Some(id) = sep {
            items.push((di as u32, Item::Special(id, 0, 0)));
        }
    }
    items
}

/// Consecutive items grouped into units of at least `unit` bytes (the last may be smaller).
fn units(items: &[(u32, Item)], unit: usize) -> Vec<std::ops::Range<usize>> {
    let mut units = Vec::new();
    let (mut start, mut acc) = (0, 0);
    for (i, (_, it)) in items.iter().enumerate() {
        acc += item_bytes(it);
        if acc >= unit {
            units.push(start..i + 1);
            start = i + 1;
            acc = 0;
        }
    }
    if start < items.len() {
        units.push(start..items.len());
    }
    units
}

/// Largest text (bytes) whose single-unit output reserves its upper bound (see `encode_docs`).
const UPPER_BOUND_MAX: usize = 256 << 20;

/// Encodes documents: each is checked for disallowed specials, split at allowed ones, and
/// `sep` (if any) is appended after each document.
pub fn encode_docs(
    enc: &Encoder,
    docs: &[&str],
    allowed: &SpecialSet,
    disallowed: &Option<SpecialSet>,
    sep: Option<u32>,
    num_threads: usize,
) -> Result<Flat, String> {
    let total: usize = docs.iter().map(|d| d.len()).sum();
    if docs.len() == 1 && total < PARALLEL_MIN_BYTES && sep.is_none() {
        return encode_small(enc, docs[0], allowed, disallowed);
    }
    // Check first: an error must not depend on thread timing. Or, where the encoder allows it,
    // during the scan (`Encoder::encode_text_checked`): every unit is then encoded, and the
    // error is that of the first unit in order that found a special (the first in the text).
    let fused = enc.can_fuse_check(allowed, disallowed);
    if !fused {
        for d in docs {
            enc.check_disallowed(d, allowed, disallowed)?;
        }
    }
    let pool = if total >= PARALLEL_MIN_BYTES { threads_pool(num_threads) } else { None };
    // Work unit size: small enough that the last units finish close together (see the log),
    // and text items are cut to it, so one big document is no long tail either.
    let unit = match &pool {
        Some(p) => (total / (p.current_num_threads() * UNITS_PER_THREAD)).clamp(64 << 10, SEGMENT_BYTES),
        None => usize::MAX,
    };
    let seg = unit.min(SEGMENT_BYTES);

    let items = plan(enc, docs, allowed, sep, pool.is_some().then_some(seg));
    let inner = enc.inner_automaton(allowed);

    // Encodes the items of `range` with cache slot `hint`, appending to `ids`; returns the
    // number of ids of each item.
    let run_unit = |range: std::ops::Range<usize>, hint: usize, ids: &mut Vec<u32>| -> Result<Vec<u32>, String> {
        let mut cache = enc.cache(hint);
        let mut lens = Vec::with_capacity(range.len());
        for (di, it) in &items[range] {
            let k = ids.len();
            match *it {
                Item::Text(s, e) if fused => enc.encode_text_checked(&mut cache, &docs[*di as usize][s..e], ids)?,
                Item::Text(s, e) => enc.encode_text_with(&mut cache, &docs[*di as usize][s..e], inner.as_deref(), ids)?,
                Item::Special(id, _, _) => ids.push(id),
            }
            lens.push((ids.len() - k) as u32);
        }
        Ok(lens)
    };
    // Room for the ids of `bytes` of text (a piece of n bytes makes at most n ids, a special
    // counted as 16 bytes one): what the last batch's ratio says (`Encoder::output_estimate`),
    // so a buffer is rarely regrown into fresh pages; only pages written are touched. Past
    // 256 MB of text, or where the system refuses the room, it starts at a third and regrows.
    let room = |bytes: usize| if bytes > UPPER_BOUND_MAX { bytes / 3 + 16 } else { enc.output_estimate(bytes) };
    // The batch's output, a recycled buffer (see `outbuf`). The first units are encoded straight
    // into it (all of them on one thread; with a pool, the first thread's stretch), so only the
    // other units' ids are copied in at the end.
    let mut out = crate::outbuf::POOL.take(room(total)).unwrap_or_else(|| Vec::with_capacity(total / 3 + 16));

    let (in_place, parts): (usize, Vec<UnitOut>) = match &pool {
        None => {
            let lens = run_unit(0..items.len(), 0, &mut out)?;
            (1, vec![(Vec::new(), lens)])
        }
        Some(pool) => {
            let units = units(&items, unit);
            let unit_bytes = |r: &std::ops::Range<usize>| items[r.clone()].iter().map(|(_, it)| item_bytes(it)).sum::<usize>();
            let own = |range: std::ops::Range<usize>, hint: usize| -> Result<UnitOut, String> {
                let bytes = unit_bytes(&range);
                let mut ids = crate::outbuf::with_capacity(room(bytes)).unwrap_or_else(|| Vec::with_capacity(bytes / 3 + 16));
                let lens = run_unit(range, hint, &mut ids)?;
                Ok((ids, lens))
            };
            run_units_static(pool, &units, &mut out, &|r, h, ids| run_unit(r, h, ids), &own)?
        }
    };

    let mut lens = vec![0usize; docs.len()];
    let mut k = 0;
    for (_, ls) in &parts {
        for &l in ls {
            lens[items[k].0 as usize] += l as usize;
            k += 1;
        }
    }
    let ids = join_parts(out, &parts[in_place..], pool.as_deref());
    enc.learn_output_ratio(total, ids.len());
    Ok(Flat { ids, lens })
}

/// Runs the units on the pool, deterministically per cache slot: the units are cut into one
/// stretch per thread, and the thread of stretch `g` encodes it front to back with slot
/// `g + 1`; a thread that finishes early takes units from the *back* of the other stretches
/// (still with its own slot), so the load stays balanced. The first thread appends its
/// stretch's units straight to `out` (they are units `0..n` in order); every other unit gets
/// its own buffer (`own`). Returns `n` and all units' results in unit order (those in `out`
/// with an empty id vector).
///
/// Why not `par_iter` over the units: rayon then decides which thread (so which slot) meets
/// which texts, differently on every call, so a second call over the same texts still missed
/// in the slot that had not seen them (2 threads, GPT-2 English, whole documents: the 2nd
/// and 3rd calls ran at ~600 MB/s with 12-17k misses, the 4th at ~1,200 with none, when a
/// miss cost ~2 µs of BPE; it now costs ~0.1-0.2 µs, [log](../docs/performance.md#the-miss-path)).
fn run_units_static(
    pool: &rayon::ThreadPool,
    units: &[std::ops::Range<usize>],
    out: &mut Vec<u32>,
    append: &(dyn Fn(std::ops::Range<usize>, usize, &mut Vec<u32>) -> Result<Vec<u32>, String> + Sync),
    own: &(dyn Fn(std::ops::Range<usize>, usize) -> Result<UnitOut, String> + Sync),
) -> Result<(usize, Vec<UnitOut>), String> {
    let threads = pool.current_num_threads().clamp(1, units.len().max(1));
    // (front, back) of each stretch still to do.
    let stretches: Vec<Mutex<(usize, usize)>> =
        (0..threads).map(|g| Mutex::new((g * units.len() / threads, (g + 1) * units.len() / threads))).collect();
    let results: Vec<std::sync::OnceLock<Result<UnitOut, String>>> = units.iter().map(|_| std::sync::OnceLock::new()).collect();
    let take = |h: usize, front: bool| -> Option<usize> {
        let mut q = stretches[h].lock().unwrap_or_else(|e| e.into_inner());
        if q.0 >= q.1 {
            return None;
        }
        Some(if front {
            q.0 += 1;
            q.0 - 1
        } else {
            q.1 -= 1;
            q.1
        })
    };
    let out_slot = Mutex::new((std::mem::take(out), 0usize));
    pool.install(|| {
        (0..threads).into_par_iter().for_each(|g| {
            if g == 0 {
                // Only this thread touches `out` until the pool is done.
                let mut guard = out_slot.lock().unwrap_or_else(|e| e.into_inner());
                let (buf, n) = &mut *guard;
                while let Some(k) = take(0, true) {
                    debug_assert_eq!(k, *n);
                    let r = append(units[k].clone(), 1, buf).map(|lens| (Vec::new(), lens));
                    let failed = r.is_err();
                    let _ = results[k].set(r);
                    *n = k + 1;
                    if failed {
                        break;
                    }
                }
            } else {
                while let Some(k) = take(g, true) {
                    let _ = results[k].set(own(units[k].clone(), g + 1));
                }
            }
            for h in (1..threads).map(|d| (g + d) % threads) {
                while let Some(k) = take(h, false) {
                    let _ = results[k].set(own(units[k].clone(), g + 1));
                }
            }
        })
    });
    let (buf, n) = out_slot.into_inner().unwrap_or_else(|e| e.into_inner());
    *out = buf;
    let parts = results
        .into_iter()
        .map(|r| r.into_inner().unwrap_or_else(|| Err("internal error: a work unit was not run".into())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((n, parts))
}

/// Appends the units' ids to `out` (which already holds those of the units before them). With
/// a pool the copies run in parallel, each unit into its own disjoint slice of the output.
fn join_parts(mut out: Vec<u32>, parts: &[UnitOut], pool: Option<&rayon::ThreadPool>) -> Vec<u32> {
    let n: usize = parts.iter().map(|p| p.0.len()).sum();
    if n == 0 {
        return out;
    }
    out.reserve(n);
    {
        let spare = &mut out.spare_capacity_mut()[..n];
        let mut slices = Vec::with_capacity(parts.len());
        let mut rest = spare;
        for (p, _) in parts {
            let (head, tail) = rest.split_at_mut(p.len());
            slices.push(head);
            rest = tail;
        }
        let copy = |(dst, src): (&mut [std::mem::MaybeUninit<u32>], &UnitOut)| {
            assert_eq!(dst.len(), src.0.len());
            // SAFETY: `dst` and `src.0` have the same length and are distinct allocations;
            // `MaybeUninit<u32>` has the layout of `u32`. (A memcpy: the element loop this
            // replaces was ~5% of a 2-thread batch of English.)
            unsafe { std::ptr::copy_nonoverlapping(src.0.as_ptr(), dst.as_mut_ptr().cast::<u32>(), dst.len()) };
        };
        match pool {
            Some(pool) => pool.install(|| slices.into_par_iter().zip(parts.par_iter()).for_each(copy)),
            None => slices.into_iter().zip(parts.iter()).for_each(copy),
        }
    }
    let len = out.len();
    // SAFETY: the n elements after `len` were written above (the slices tile them).
    unsafe { out.set_len(len + n) };
    out
}

/// One small text on the calling thread, without the item/unit bookkeeping (per-call overhead
/// matters for `datasets.map` without batching and for chat-sized inputs).
fn encode_small(enc: &Encoder, text: &str, allowed: &SpecialSet, disallowed: &Option<SpecialSet>) -> Result<Flat, String> {
    let mut cache = enc.cache(0);
    let mut ids = Vec::with_capacity(text.len() / 3 + 4);
    if enc.can_fuse_check(allowed, disallowed) {
        enc.encode_text_checked(&mut cache, text, &mut ids)?;
    } else if enc.specials().matches_none(allowed) && !enc.specials().has_inner() {
        enc.check_disallowed(text, allowed, disallowed)?;
        enc.encode_text(&mut cache, text, &mut ids)?;
    } else {
        enc.check_disallowed(text, allowed, disallowed)?;
        let mut items = Vec::new();
        enc.split_specials(text, allowed, 0, &mut items);
        let inner = enc.inner_automaton(allowed);
        for it in items {
            match it {
                Item::Text(s, e) => enc.encode_text_with(&mut cache, &text[s..e], inner.as_deref(), &mut ids)?,
                Item::Special(id, _, _) => ids.push(id),
            }
        }
    }
    let n = ids.len();
    Ok(Flat { ids, lens: vec![n] })
}
