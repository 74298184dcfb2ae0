//! Encoding text to token ids (and back), exact to GPT-2/HF or tiktoken semantics.
//!
//! Two flavours of the same merge loop:
//! * **Merges** (GPT-2 / HF `tokenizers`): each pre-token starts as single bytes, and the adjacent
//!   pair with the lowest *merge rank* is merged, leftmost first on ties.
//! * **Ranks** (tiktoken, `merges=None`): ids are ranks; the adjacent pair whose *concatenated
//!   bytes* have the lowest rank is merged, leftmost first; a piece that is itself a token is
//!   emitted directly.
//!
//! Both reduce to one table, `pairs: (left_id, right_id) -> (rank, result_id)`. In tiktoken mode
//! every part of a piece is always a token (it starts as a byte and only ever becomes a ranked
//! concatenation), so the rank of the concatenation of two parts is a function of the two part
//! ids; we enumerate, for every token, every split into two tokens once at construction. In both
//! modes two pairs of equal rank merge into the same token, so "lowest (rank, result)" packed in
//! one `u64` orders pairs exactly like the reference algorithms.
//!
//! Performance notes (why it looks like this):
//! * **Cache first.** Natural text is dominated by a few hundred thousand distinct pre-tokens,
//!   so after warm-up nearly every piece is one hash lookup. Pieces of at most 15 bytes are
//!   packed into a `u128` key (no allocation, two-word FxHash); the value holds up to three ids
//!   inline (98% of pieces encode to at most two tokens), longer results live in an arena.
//!   Pieces of 16..=31 bytes (common in Cyrillic, Greek, Arabic: 2 bytes per letter) get a
//!   second table with 32-byte packed keys; pieces up to [`MAX_CACHED_LEN`] bytes (Thai or CJK
//!   runs without spaces) a hashbrown map keyed by boxed bytes; longer ones are not cached.
//! * **Bounded memory.** `cache_bytes` is the total budget of one encoder, shared by its slots
//!   (2 x cores + 2) through one atomic counter that a slot draws on before it grows (so an
//!   atomic per growth step, never per piece). It used to be split evenly (256 MiB / 6 slots =
//!   43 MiB each): o200k on the multilingual corpus needs ~37 MB per slot, so a table doubling
//!   past the share wiped the slot over and over and 2 threads ran at *half* the speed of one.
//!   Now the busy slots may take all of it and idle ones cost nothing. Measured with
//!   `scripts/bench_encode.py`, whose worker encodes English, code, then multilingual with one
//!   encoder (so each slot holds all three vocabularies): o200k multilingual 2 threads 64 MB/s
//!   before (66.6 at the base commit; 64 with the prefetch queue in), 439 after; a fresh encoder on the multilingual corpus
//!   alone stayed under 43 MiB per slot and did not show it (422 vs 438, noise). The slow
//!   2-thread runs that remain are *cold* runs: each thread's slot learns the corpus's words on
//!   its own, so after one warm-up run the other slot still misses; now a word one slot had to
//!   encode goes to a shared second-level cache too ([`Shared`], at most a quarter of the
//!   budget), and batches give each stretch of units the same slot on every call
//!   (`batch::run_units_static`). A slot keeps what it drew until
//!   `clear_cache` or the encoder drops. A slot charges what it really holds — table capacities, arena capacity, long-map keys plus an allowance per
//!   entry — and checks every growth against the pool *before* growing; if the growth does not
//!   fit, the slot is wiped (allocations kept) and refilled, as gigatoken does after its
//!   unbounded cache exhausted RAM on TB-scale corpora. So the slots together never exceed the
//!   budget; `cache_bytes=0` disables caching.
//! * **No shared mutable state on the hot path.** The encoder owns a few cache slots behind
//!   mutexes; a worker `try_lock`s one slot *once per work unit* (64 KiB to 1 MiB of text),
//!   never per word, so there are no atomics per lookup (HF moved its cache to thread-local for
//!   the same reason). A worker that finds every slot busy uses a private throw-away cache
//!   (budget / slots, capped at 16 MiB, outside the pool, freed when the unit ends), so
//!   nothing ever blocks — this also makes a forked child safe when a parent thread held a slot.
//! * **FxHash** everywhere: keys are integers or short byte strings from trusted tables; SipHash
//!   would cost 5–10% overall (tiktoken measured the same).
//! * **Short pieces** (≤ [`LARGE_PIECE`] bytes) merge on two fixed stack arrays with a linear
//!   scan for the minimum: for a dozen parts this beats any heap. **Long pieces** (base64 blobs,
//!   `"a" * 1_000_000`) use a binary heap of `(rank, position)` over a doubly linked list,
//!   O(n log n), with lazy invalidation of stale heap entries.
//! * **Prefetch, queue, then look up** ([`Encoder::encode_text`]): the scanner packs each
//!   piece of 1..=15 bytes, prefetches its short-table slot and queues it; every 64 pieces an
//!   out-of-line loop looks the queue up in order. Measured (gpt2, one thread, MB per CPU
//!   second, 20 MB corpora): English 279 -> 364, multilingual 135 -> 166, o200k multilingual
//!   167 -> 232; code unchanged (~200, its time is mostly the scanner and per-piece work, not
//!   memory). An earlier attempt (prefetch 16 pieces ahead) had measured ~35% slower, for
//!   reasons never pinned down; this one follows the counter's recipe (`count.rs`: packed keys,
//!   a 64-piece queue, entries with the ids inline so a hit is the one prefetched line). Then one-byte pieces through the table too
//!   (no length branch in the lookup loop; 386 -> 407), the lookup loop `#[inline(never)]`
//!   (-> 420), huge pages for the tables (small, see [`Slots`]), and the per-piece step
//!   as a `PieceSink` method with `#[inline(always)]` instead of a closure, which the compiler
//!   had left out of line (a call, 5 register saves/restores per piece): English 420 -> 446,
//!   code 228 -> 246, multilingual 175 -> 189 MB per CPU second.
//! * **Later steps** (MB per CPU second, one thread, 20 MB; English / code / multilingual,
//!   gpt2 unless said): the scanners' 64-byte window path (`pretok/`): 490 / 236 / 184 ->
//!   630 / 316 / 182, o200k 442 / 282 -> 575 / 435; the queue keeps the slot computed for the
//!   prefetch, so the lookup does not hash again (+1-5%); the mid table (16..=31 bytes) is
//!   prefetched as well, both lines of its 48-byte entries (multilingual 195 -> 209, o200k
//!   272 -> 305; on English, where such pieces are 0.1%, it had measured as noise);
//!   `keys::pack_in` masks with a 16-entry table instead of a 128-bit variable shift (+5-10%:
//!   English 709 -> 767); a window's pieces queued in one loop (`PieceSink::window`: queue
//!   position in a register, one drain check per window, no bounds check per packed piece):
//!   English 694 -> 753, code 349 -> 367, o200k English 603 -> 629, code 495 -> 527.
//!   The drain's hit path as a tight loop ([`Encoder::drain`]: table and output in registers,
//!   one 16-byte copy per hit, probes and arena results inside the loop, hits counted from
//!   the slow path): it had been ~40 instructions per piece, with the output's length and the
//!   hit counter loaded and stored through memory on every piece. ab_encode: English 749 ->
//!   825, code 544 -> 592, multilingual 275 -> 284; o200k 661 -> 769, 553 -> 629, 260 -> 274.
//!   Tables grow at 1/4 load while the budget has room (and fill to 1/2 when it has not):
//!   fewer second probes, which were often a line the prefetch had not asked for. ab_encode:
//!   GPT-2 English 908 -> 977, code 664 -> 684, multilingual 297 -> 324; o200k 869 -> 907,
//!   698 -> 741, 272 -> 300 (twice the table memory for the same words, within the budget).
//!   Moving a key found past its home slot into it on a hit measured as noise (English -3%,
//!   multilingual +3-5%), also when only taking slots their occupant does not own.
//!   Outside this file: the batch output is sized from the last batch's ids per byte and
//!   recycled (`batch.rs`, `outbuf.rs`), which took page faults and a regrowth copy out of
//!   every call (GPT-2 code 355 -> 460 MB/s wall, multilingual 200 -> 245).
//! * **Tried and dropped** (within noise or worse, gpt2 1t): queue of 32 or 128 vs 64 (again
//!   after the window scanners: 32 was 5-15% slower, 128 mixed); a double-buffered queue (one
//!   half looked up while the other fills, for a longer prefetch distance: 5-10% slower); a
//!   two-pass drain that prefetches the arena of >3-id results before copying them (~10%
//!   slower; and with the arena reads replaced by constants nothing got faster, so they are not
//!   the cost); copying arena ids in fixed blocks of 8 instead of `extend_from_slice`; the
//!   short table's pointer and mask copied into the queue; a struct whose method the closure
//!   calls (the closure itself still was not inlined); reserving 3 ids per queued piece once
//!   per drain instead of per hit; huge pages for a single unit's output; reserving the
//!   output's upper bound (`bytes + items` ids) to avoid a regrowth copy (20% slower on
//!   English: above glibc's 32 MB mmap threshold every call gets fresh pages; the learned
//!   estimate and the recycled buffers do it right); a 3/4 instead of 1/2 table load factor.
//!   Later (ab_encode, MB per CPU second): AVX-512 classification of the windows (one compare
//!   per class into a mask register instead of four SSE2 compare/movemask pairs: no gain, the
//!   classification is not the bottleneck); `prefetcht1` instead of `prefetcht0`; a real load
//!   instead of the prefetch (English 655 -> 450: prefetches do get through); keeping the 16
//!   newest pieces queued at a drain, so their prefetches have time to land (a ring, no copy:
//!   2-4% slower everywhere); a tight drain loop writing each hit's 4 words with one 16-byte
//!   copy into room reserved once per drain (English +2%, o200k -3 to -8%); the tables' address
//!   and mask hoisted out of the window loop (the compiler spilled them anyway: noise); huge
//!   pages for 2 MB tables too (noise). A warm table that fits L2 (1 MiB) instead of L3 runs
//!   ~20% faster on the same text, so about a fifth of the time is still the L2 misses that the
//!   prefetch does not fully hide.
//!
//! Where the time goes now (o200k, English, one thread, ~900-950 MB per CPU second, ~4.8 ns
//! per piece): with the drain stubbed out, scanning, packing, hashing, prefetching and queueing
//! ran at ~1,380 MB/s (~3.3 ns; without the prefetch 1,410), so the drain's lookups are about a
//! third. With a cache that fits L2 (English cut to 0.5 MB and repeated) the same code runs at
//! ~1,030 MB/s against ~840 for the whole 20 MB: a fifth of the time is the table's memory, the
//! rest instructions. Making the o200k scanner alone 8% faster (`crlf_run_limit` without
//! branches) changed nothing end to end, and cutting the per-piece push loop from 33 to 27
//! instructions gained ~5%: the hot loops' instruction counts are what is left to work on. On
//! the multilingual corpus the lookups dominate (~17 ns per piece: a warm cache of 35 MB is
//! past L3, and the entry loads wait on memory). End to end see `README.md`; tiktoken runs at
//! 10–20 MB/s per core. A 44-character `encode` call costs ~0.3 µs (tiktoken 1.7 µs).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::FxHashMap;

use crate::keys::{load15, mix128, pack, pack_in, pack_in_unchecked};
use crate::pretok::{eq_mask, Pattern, PieceSink};

/// Pieces queued (and their cache slots prefetched) before they are looked up; a power of two.
/// The queue holds up to twice this: a window's pieces (at most 63) are queued in one go and
/// the queue is drained once it holds at least `QUEUE`.
const QUEUE: usize = 64;
/// Bytes of a short-table entry: the queue holds a short piece's slot as its byte offset in the
/// table (`push_window` makes it from the hash with a shift 5 less than the table's).
const ENTRY_BYTES: usize = std::mem::size_of::<Entry<u128>>();
const _: () = assert!(ENTRY_BYTES == 1 << 5);

/// The pieces of a text waiting for their cache lookup (see [`Encoder::encode_text`]).
struct PieceQueue<'a> {
    enc: &'a Encoder,
    cache: &'a mut WordCache,
    b: &'a [u8],
    out: &'a mut Vec<u32>,
    q: [Queued; 2 * QUEUE],
    n: usize,
    /// Whether to look for special tokens in the pieces (the disallowed check, fused into the
    /// scan: see [`Encoder::encode_text_checked`]), and the byte every special starts with.
    check: bool,
    lead: u8,
    /// The first special token found (its index in `enc.specials`).
    found: Option<usize>,
}

impl PieceQueue<'_> {
    /// Queues the piece `s..e` (the per-char path; a window's pieces go through
    /// [`Self::push_window`], which does the same): a piece of 1..=15 bytes is packed and its
    /// short-table slot prefetched; one of 16..=31 bytes has its mid-table slot prefetched.
    /// With the disallowed check on, the piece is checked here too (a window's pieces are
    /// checked together, in `window`).
    #[inline(always)]
    fn push(&mut self, s: usize, e: usize) {
        let len = e - s;
        // One-byte pieces ("," "." "\n") go through the table too (their key is non-zero:
        // the length byte), so the drain loop has no hard-to-predict branch on the length.
        let (key, e) = if (1..16).contains(&len) {
            let k = pack_in(self.b, s, e);
            // The disallowed check on the packed key (bytes past the length are 0 and the
            // length byte is at most 15, neither of which is a lead byte, see
            // `Encoder::special_lead`).
            if self.check && has_byte(k, self.lead) {
                self.verify_range(s, e);
            }
            // The slot's byte offset goes in place of `e` (which the key's length byte gives
            // back).
            (k, self.cache.short.prefetch(&k) * ENTRY_BYTES)
        } else {
            if self.check {
                self.verify_range(s, e);
            }
            prefetch_mid(&self.cache.mid, self.b, s, e);
            (NOT_SHORT, e)
        };
        // The mask drops the bound check (n < 2 x QUEUE anyway).
        self.q[self.n & (2 * QUEUE - 1)] = Queued { key, s, e };
        self.n += 1;
    }

    /// Queues the pieces of a window (see [`PieceSink::window`]), packing each with
    /// `pack(start, len)`; returns the last start.
    ///
    /// The short pieces' path is written out here with the table's address and shift and the
    /// queue's write position in locals (registers): through `self` the compiler reloaded them
    /// for every piece, since the queue writes might alias them.
    #[inline(always)]
    fn push_window(&mut self, base: usize, mut cur: usize, mut starts: u64, pack: impl Fn(usize, usize) -> u128) -> usize {
        // A window has at most 63 pieces and the queue is drained once it holds QUEUE.
        debug_assert!(self.n < QUEUE);
        let (b, mid) = (self.b, &self.cache.mid);
        // The slot's byte offset straight from the hash: its top bits, shifted 5 less and
        // masked to a multiple of 32 (two instructions, where slot then offset took three).
        let (entries, shift) = (self.cache.short.entries.as_ptr() as *const u8, self.cache.short.shift - 5);
        let q = self.q.as_mut_ptr();
        // SAFETY: n < QUEUE, in the queue.
        let mut qp = unsafe { q.add(self.n) };
        while starts != 0 {
            let s = base + starts.trailing_zeros() as usize;
            let len = s - cur;
            if len.wrapping_sub(1) < 15 {
                let key = pack(cur, len);
                // `Table::slot` without its mask, as a byte offset: the top bits are below the
                // capacity, except in the 1-slot table, where this may be one entry past it
                // (the prefetch address is only a hint, and the drain masks the offset).
                let slot = (key.mix() >> shift) as usize & !(ENTRY_BYTES - 1);
                prefetch(entries.wrapping_add(slot));
                // SAFETY: the queue holds fewer than QUEUE + 63 < 2 * QUEUE pieces.
                unsafe { qp.write(Queued { key, s: cur, e: slot }) };
            } else {
                // Out of line: inlined, this rare path made the loop slower (o200k English 847
                // -> 801 MB per CPU second).
                prefetch_mid(mid, b, cur, s);
                // SAFETY: as above.
                unsafe { qp.write(Queued { key: NOT_SHORT, s: cur, e: s }) };
            }
            // SAFETY: as above (at most one past the last piece written).
            qp = unsafe { qp.add(1) };
            cur = s;
            starts &= starts - 1;
        }
        // SAFETY: both in the queue.
        self.n = unsafe { qp.offset_from(q) } as usize;
        cur
    }

    /// The disallowed check over `s..e`: each lead byte there verified.
    #[inline(never)]
    fn verify_range(&mut self, s: usize, e: usize) {
        for j in memchr::memchr_iter(self.lead, &self.b[s..e]) {
            self.verify_at(s + j);
        }
    }

    #[cold]
    #[inline(never)]
    fn verify_marks(&mut self, base: usize, mut m: u64) {
        while m != 0 {
            self.verify_at(base + m.trailing_zeros() as usize);
            m &= m - 1;
        }
    }

    /// Records the special token that starts at `pos`, if any and if none was found before
    /// (pieces come in text order, so the first found is the first in the text; of two that
    /// start at `pos`, the shorter, which also ends first).
    fn verify_at(&mut self, pos: usize) {
        if self.found.is_some() {
            return;
        }
        // Most lead bytes start no special (`<` in HTML, code): the byte after them rules
        // them out without comparing the specials (every special has >= 2 bytes).
        match self.b.get(pos + 1) {
            Some(&c) if self.enc.special_second[c as usize] => {}
            _ => return,
        }
        let rest = &self.b[pos..];
        self.found = (0..self.enc.specials.len())
            .filter(|&k| rest.starts_with(self.enc.specials[k].0.as_bytes()))
            .min_by_key(|&k| self.enc.specials[k].0.len());
    }

    #[inline(always)]
    fn drain_if_full(&mut self) {
        if self.n >= QUEUE {
            self.enc.drain(self.cache, self.b, &self.q[..self.n], self.out);
            self.n = 0;
        }
    }
}

impl PieceSink for &mut PieceQueue<'_> {
    #[inline(always)]
    fn piece(&mut self, s: usize, e: usize) {
        // (With the disallowed check, when on.)
        self.push(s, e);
        self.drain_if_full();
    }

    /// A window's pieces in one loop: the queue position stays in a register, the drain check
    /// is made once per window, and when 16 bytes past the window are in the text (all but the
    /// last window or so) the pieces are packed without a bounds check each.
    #[inline(always)]
    fn window(&mut self, base: usize, cur: usize, starts: u64) -> usize {
        let b = self.b;
        let cur = if base + 64 + 16 <= b.len() {
            // SAFETY: every piece starts at c < base + 64, so c + 16 <= base + 79 < b.len().
            self.push_window(base, cur, starts, |c, len| unsafe { pack_in_unchecked(b, c, len) })
        } else {
            self.push_window(base, cur, starts, |c, len| pack_in(b, c, c + len))
        };
        if self.check {
            // The pieces emitted tile base..cur (the next window starts at cur), and a window
            // is only made where 64 bytes remain.
            let m = eq_mask(b, base, self.lead) & low_bits(cur - base);
            if m != 0 {
                self.verify_marks(base, m);
            }
        }
        self.drain_if_full();
        cur
    }
}

/// The key of a queued piece that is not short: never a table key (its length byte is 255).
const NOT_SHORT: u128 = u128::MAX;

/// The mid-table slot of the piece `b[s..e]` prefetched, if it has 16..=31 bytes (2-4% of
/// multilingual pieces: Cyrillic, Greek, Arabic words; their lookup in `mid` was a cache miss
/// that cost a fifth of the time there).
#[cold]
#[inline(never)]
fn prefetch_mid(mid: &Table<Key32>, b: &[u8], s: usize, e: usize) {
    if (16..32).contains(&(e - s)) {
        mid.prefetch(&pack32(&b[s..e]));
    }
}

/// The error for a disallowed special token found in a text (tiktoken's wording).
fn disallowed_error(s: &str) -> String {
    format!(
        "Encountered text corresponding to disallowed special token {s:?}. Pass it in \
         allowed_special to encode it as a special token, or in disallowed_special=() \
         (or use encode_ordinary) to encode it as ordinary text."
    )
}

/// Whether any byte of a packed key is `x` (exact: the classic zero-byte test on `key ^ x..x`,
/// whose false positives can only sit above a true zero byte).
#[inline(always)]
fn has_byte(key: u128, x: u8) -> bool {
    const ONES: u128 = u128::MAX / 255;
    let v = key ^ (ONES * x as u128);
    (v.wrapping_sub(ONES) & !v & (ONES << 7)) != 0
}

/// `(1 << n) - 1` for `n <= 64`.
#[inline(always)]
fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        !0
    } else {
        (1u64 << n) - 1
    }
}

/// Asks for the cache line at `p` (a hint: never faults, changes nothing).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it does not fault or write.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A queued piece: its byte range and, for 1..=15 bytes, its packed short-table key (else
/// [`NOT_SHORT`]);
/// with a key, `e` holds the byte offset of the key's table slot (`slot * ENTRY_BYTES`) instead
/// of the end (see [`Encoder::drain`]).
#[derive(Clone, Copy, Default)]
struct Queued {
    key: u128,
    s: usize,
    e: usize,
}

/// At most this many special tokens for the check fused into the scan: each lead byte whose
/// next byte fits is compared with every special (a vocabulary with hundreds of reserved
/// specials uses the separate Aho-Corasick pass instead).
const FUSED_CHECK_MAX_SPECIALS: usize = 8;

/// Pieces longer than this (in bytes) use the O(n log n) heap merge.
pub const LARGE_PIECE: usize = 128;
/// Pieces longer than this (in bytes) are never cached.
pub const MAX_CACHED_LEN: usize = 255;
/// Default total cache budget of one encoder.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

const NO_PAIR: u64 = u64::MAX;
const DEAD: u32 = u32::MAX;

/// Merges as given to [`Encoder::new`]: pairs of token ids, or pairs of token bytes (resolved
/// against the vocabulary, which is checked to hold both parts and their concatenation).
pub enum Merges {
    Ids(Vec<(u32, u32)>),
    Bytes(Vec<(Box<[u8]>, Box<[u8]>)>),
}

/// `b` as Python writes a bytes literal (`b'ab\\xff'`), for error messages.
pub fn py_bytes(b: &[u8]) -> String {
    let mut s = String::from("b'");
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'\'' => s.push_str("\\'"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('\'');
    s
}

/// An immutable, shareable encoder: tables + pattern + special tokens + cache slots.
pub struct Encoder {
    /// Decoder: bytes of token `id` are `dec_bytes[dec_off[id]..dec_off[id+1]]`, if `present[id]`.
    dec_off: Vec<u64>,
    dec_bytes: Vec<u8>,
    present: Vec<bool>,
    /// id of the one-byte token for each byte.
    byte_ids: [u32; 256],
    /// (left << 32 | right) -> (rank << 32 | result).
    pairs: FxHashMap<u64, u64>,
    /// tiktoken mode: whole-piece lookup (mergeable tokens only). None in merges mode.
    direct: Option<FxHashMap<Box<[u8]>, u32>>,
    /// The inputs, kept for serialization.
    vocab: Vec<(u32, Box<[u8]>)>,
    merges: Option<Vec<(u32, u32)>>,
    specials: Vec<(String, u32)>,
    special_ids: FxHashMap<String, u32>,
    /// Leftmost-longest automaton over all special tokens (for splitting).
    special_ac: Option<AhoCorasick>,
    /// Standard automaton for overlapping search (for the disallowed check).
    special_ac_all: Option<AhoCorasick>,
    /// The byte every special token starts with, when there is one and the specials allow the
    /// check fused into the scan (see [`Self::can_fuse_check`]): at least 0x10 (a packed key's
    /// padding and length bytes are below), not whitespace, at most
    /// [`FUSED_CHECK_MAX_SPECIALS`] specials of 2 bytes or more, none holding a space or a
    /// newline.
    special_lead: Option<u8>,
    /// The bytes that follow the lead byte in some special (a quick rejection).
    special_second: [bool; 256],
    /// The longest special's length in bytes.
    max_special_len: usize,
    pub pattern: Pattern,
    pattern_spec: String,
    cache_bytes: usize,
    slots: Vec<Slot>,
    /// Words any slot had to encode, for the other slots (see [`Shared`]).
    shared: Shared,
    /// Ids per 1024 input bytes of the last batch (see [`Self::output_estimate`]).
    ids_per_kib: AtomicUsize,
}

/// A second-level cache shared by the slots: a slot that misses looks here before running BPE,
/// and a word it had to encode is put here too.
///
/// Why: each worker thread has its own slot (no locks on the hot path), so a word learned by
/// one thread was still a miss, and ~2 µs of BPE, in every other thread's slot. Misses are ~1%
/// of pieces but they were most of the time of the first runs over a corpus with 2 threads
/// (GPT-2 English, whole documents: the 2nd and 3rd calls at ~600 MB/s with 12-17k misses,
/// against ~1,200 once every slot knew every word). A lookup here is a lock and a hash map
/// probe, ~100-200 ns.
///
/// 16 shards of a mutex-protected map. Only ever `try_lock`ed: a busy shard reads as a miss
/// (lookup) or is skipped (insert), so nothing blocks, and a child forked while a parent thread
/// held a shard cannot deadlock. Memory: at most a quarter of `cache_bytes`, drawn from the
/// same pool as the slots (key bytes + 4 per id + [`SHARED_ENTRY_COST`] per entry: the map's
/// bucket and two small heap allocations).
type SharedShard = Mutex<FxHashMap<Box<[u8]>, Box<[u32]>>>;

struct Shared {
    shards: Vec<SharedShard>,
    /// Bytes held here (also counted in `pool`).
    bytes: AtomicUsize,
    limit: usize,
    pool: Arc<AtomicUsize>,
    budget: usize,
}

const SHARED_SHARDS: usize = 16;
/// Bytes charged per shared entry besides its key and ids: a hash-map bucket (~40 B with the
/// load factor) and two heap allocations (>= 32 B each with malloc's overhead).
const SHARED_ENTRY_COST: usize = 112;

impl Shared {
    fn new(budget: usize, pool: Arc<AtomicUsize>) -> Self {
        Shared {
            shards: (0..SHARED_SHARDS).map(|_| Mutex::new(FxHashMap::default())).collect(),
            bytes: AtomicUsize::new(0),
            limit: budget / 4,
            pool,
            budget,
        }
    }

    fn shard(&self, piece: &[u8]) -> &SharedShard {
        use std::hash::{BuildHasher, Hasher};
        let mut h = rustc_hash::FxBuildHasher.build_hasher();
        h.write(piece);
        &self.shards[(h.finish() >> 59) as usize % SHARED_SHARDS]
    }

    /// Appends the ids of `piece` and returns true if it is here.
    fn get(&self, piece: &[u8], out: &mut Vec<u32>) -> bool {
        if self.limit == 0 {
            return false;
        }
        let Ok(m) = self.shard(piece).try_lock() else { return false };
        match m.get(piece) {
            Some(ids) => {
                out.extend_from_slice(ids);
                true
            }
            None => false,
        }
    }

    fn put(&self, piece: &[u8], ids: &[u32]) {
        let cost = piece.len() + 4 * ids.len() + SHARED_ENTRY_COST;
        if self.bytes.load(Ordering::Relaxed) + cost > self.limit {
            return;
        }
        // Reserve without ever passing the budget, even for a moment (a slot's `fits` could
        // fail in between and wipe that slot).
        let budget = self.budget;
        if self.pool.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| (u + cost <= budget).then_some(u + cost)).is_err() {
            return;
        }
        let Ok(mut m) = self.shard(piece).try_lock() else {
            self.pool.fetch_sub(cost, Ordering::Relaxed);
            return;
        };
        if m.insert(piece.into(), ids.into()).is_some() {
            // Already there (another slot put it first): nothing new is held.
            self.pool.fetch_sub(cost, Ordering::Relaxed);
            return;
        }
        self.bytes.fetch_add(cost, Ordering::Relaxed);
    }

    fn clear(&self) {
        for s in &self.shards {
            if let Ok(mut m) = s.try_lock() {
                let freed: usize = m.iter().map(|(k, v)| k.len() + 4 * v.len() + SHARED_ENTRY_COST).sum();
                *m = FxHashMap::default();
                self.bytes.fetch_sub(freed, Ordering::Relaxed);
                self.pool.fetch_sub(freed, Ordering::Relaxed);
            }
        }
    }
}

/// One cache slot, alone on its cache lines: the slots sit side by side in a Vec and each
/// worker bumps its slot's hit counter per piece, so without the padding two workers would
/// write to the same line all the time (false sharing).
#[repr(align(128))]
struct Slot(Mutex<WordCache>);

/// Which special tokens may appear in a text, tiktoken style.
#[derive(Clone, Debug)]
pub enum SpecialSet {
    None,
    All,
    Some(Vec<String>),
}

impl SpecialSet {
    pub fn contains(&self, s: &str) -> bool {
        match self {
            SpecialSet::None => false,
            SpecialSet::All => true,
            SpecialSet::Some(v) => v.iter().any(|x| x == s),
        }
    }
    pub fn is_empty(&self) -> bool {
        match self {
            SpecialSet::None => true,
            SpecialSet::All => false,
            SpecialSet::Some(v) => v.is_empty(),
        }
    }
}

/// A span of a document after special-token splitting.
#[derive(Clone, Copy, Debug)]
pub enum Item {
    /// Ordinary text: byte range of the document.
    Text(usize, usize),
    /// An allowed special token: its id and byte range.
    Special(u32, usize, usize),
}

// ---------------------------------------------------------------------------------------------
// Cache
// ---------------------------------------------------------------------------------------------

/// Packed key of a piece of 16..=31 bytes: the bytes, zero padded, length in the last byte.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Key32([u64; 4]);

#[inline(always)]
fn pack32(b: &[u8]) -> Key32 {
    debug_assert!(b.len() >= 16 && b.len() < 32);
    let w0 = u64::from_le_bytes(b[..8].try_into().unwrap());
    let w1 = u64::from_le_bytes(b[8..16].try_into().unwrap());
    let (w2, w3) = load15(&b[16..]);
    Key32([w0, w1, w2, w3 | ((b.len() as u64) << 56)])
}

/// Keys of the open-addressing tables. The all-zero key marks an empty slot (a cached piece
/// has length >= 2, so its packed key always has a non-zero length byte).
trait TableKey: Copy + Default + PartialEq {
    fn mix(&self) -> u64;
    fn is_empty(&self) -> bool;
}

impl TableKey for u128 {
    #[inline(always)]
    fn mix(&self) -> u64 {
        mix128(*self)
    }
    #[inline(always)]
    fn is_empty(&self) -> bool {
        *self == 0
    }
}

impl TableKey for Key32 {
    #[inline(always)]
    fn mix(&self) -> u64 {
        let [a, b, c, d] = self.0;
        let x = (a ^ b.rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (x ^ c.rotate_left(41) ^ d.rotate_left(7)).wrapping_mul(0xBF58_476D_1CE4_E5B9)
    }
    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.0[3] == 0
    }
}

/// Open-addressing table (linear probing) from packed piece keys to inline results.
///
/// Why not hashbrown: the probe here is a multiply, a shift and (almost always) a single entry
/// holding both the key and the inline ids (32 bytes for short keys, half a cache line), so a
/// hit costs one memory access and no pointer chase; long-key hashbrown lookups additionally
/// memcmp a boxed key elsewhere in memory. A table grows at 1/4 load while the cache budget
/// allows it, and never passes 1/2 (see [`WordCache::put`]).
struct Table<K: TableKey> {
    entries: Slots<Entry<K>>,
    mask: usize,
    /// 64 - log2(capacity) (63 for the 1-slot table, whose mask makes every slot 0).
    shift: u32,
    len: usize,
}

#[derive(Clone, Copy, Default)]
#[repr(C, align(16))]
struct Entry<K: TableKey> {
    key: K,
    val: [u32; 4],
}

impl<K: TableKey> Table<K> {
    /// `cap` is rounded up to a power of two; a capacity of 1 is a disabled (always empty) table.
    fn with_capacity_pow2(cap: usize) -> Self {
        let cap = cap.next_power_of_two().max(1);
        // SAFETY: an all-zero `Entry` is the empty entry (zero key, zero ids; no padding).
        let shift = 64 - cap.trailing_zeros().max(1);
        Table { entries: unsafe { Slots::zeroed(cap) }, mask: cap - 1, shift, len: 0 }
    }

    /// The home slot: the top bits of the multiplicative hash (its best-mixed bits; two
    /// instructions, where the previous fold of two bit ranges took five).
    #[inline(always)]
    fn slot(&self, key: &K) -> usize {
        (key.mix() >> self.shift) as usize & self.mask
    }

    /// Asks for the cache line of `key`'s first probe (a hint: no effect on the contents), and
    /// returns that slot.
    #[inline(always)]
    fn prefetch(&self, key: &K) -> usize {
        let i = self.slot(key);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `i` is masked to the table; a prefetch never faults or writes anyway.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let p = self.entries.as_ptr().add(i) as *const i8;
            _mm_prefetch::<_MM_HINT_T0>(p);
            if std::mem::size_of::<Entry<K>>() > 32 {
                // A 48-byte entry may straddle two cache lines.
                _mm_prefetch::<_MM_HINT_T0>(p.add(std::mem::size_of::<Entry<K>>() - 1));
            }
        }
        i
    }

    #[inline(always)]
    fn get(&self, key: &K) -> Option<&[u32; 4]> {
        self.get_from(key, self.slot(key))
    }

    /// [`Self::get`] with the slot already computed. A stale slot (the table grew or was wiped
    /// since) is harmless: the probe from there finds the key or an empty entry, so at worst a
    /// present key reads as missing and is encoded and inserted again (at its right slot).
    #[inline(always)]
    fn get_from(&self, key: &K, slot: usize) -> Option<&[u32; 4]> {
        let mut i = slot & self.mask;
        loop {
            // SAFETY: i is masked by `mask` = entries.len() - 1 (a power of two minus one).
            let e = unsafe { self.entries.get_unchecked(i) };
            if e.key == *key {
                return Some(&e.val);
            }
            if e.key.is_empty() {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    fn insert(&mut self, key: K, val: [u32; 4]) {
        debug_assert!(!key.is_empty() && (self.len + 1) * 2 <= self.entries.len());
        let mut i = self.slot(&key);
        loop {
            let e = &mut self.entries[i];
            if e.key == key {
                e.val = val;
                return;
            }
            if e.key.is_empty() {
                e.key = key;
                e.val = val;
                self.len += 1;
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// At 1/4 load: grow now if the budget allows it. Linear probing at loads up to 1/2 took a
    /// second probe (often on the next cache line, which the prefetch did not ask for) often
    /// enough to matter: growing at 1/4 measured (ab_encode, MB per CPU second) English
    /// 962 -> 972 (GPT-2) and 910 -> 926 (o200k), code 692 -> 706 and 715 -> 742,
    /// multilingual 296 -> 338 and 284 -> 304; 1/3 fell in between.
    fn sparse_full(&self) -> bool {
        (self.len + 1) * 4 > self.entries.len()
    }

    /// At 1/2 load: grow or wipe, whatever the budget (the hard limit).
    fn full(&self) -> bool {
        (self.len + 1) * 2 > self.entries.len()
    }

    fn bytes(&self) -> usize {
        if self.entries.len() <= 1 {
            return 0; // the disabled sentinel
        }
        self.entries.len() * std::mem::size_of::<Entry<K>>()
    }

    /// Doubles the table; the disabled 1-slot sentinel grows straight to `first` slots.
    fn grow(&mut self, first: usize) {
        let cap = if self.entries.len() <= 1 { first } else { self.entries.len() * 2 };
        let mut bigger = Table::with_capacity_pow2(cap);
        for e in self.entries.iter() {
            if !e.key.is_empty() {
                bigger.insert(e.key, e.val);
            }
        }
        *self = bigger;
    }

    fn clear(&mut self) {
        self.entries.iter_mut().for_each(|e| *e = Entry::default());
        self.len = 0;
    }
}

/// The entries of a [`Table`]: `len` default (all-zero) values. Big ones (>= 4 MiB) are their
/// own anonymous mapping, 2 MiB aligned and advised to use huge pages before anything touches
/// them (this machine's THP mode is `madvise`: nothing happens without asking); smaller ones
/// (and any the system will not map) are a boxed slice. A warm short table is 8–32 MB: with
/// 4 KiB pages a lookup may also miss the TLB, and the page walk is something a prefetch has to
/// wait for; with 2 MiB pages the whole table fits the second-level TLB.
///
/// Why not a `Vec` with the advice (as before): malloc serves sizes below its mmap threshold
/// (which rises up to 32 MB as big blocks are freed) from memory it already had, whose pages
/// are faulted in 4 KiB at a time, so the advice was often void (`AnonHugePages` 0 for a
/// 16 MiB table). Measured with huge pages guaranteed: ab_encode GPT-2 English 714 -> 753,
/// code 537 -> 551, the rest within noise; o200k code after English (one encoder) 475 -> 489.
/// The kernel's zero pages also make a new table free until it is written.
struct Slots<T> {
    ptr: *mut T,
    len: usize,
    /// The mapping (start, length) when mapped, else the slice is a `Box<[T]>`.
    map: Option<(usize, usize)>,
}

// SAFETY: `Slots` owns its memory exclusively, like a `Box<[T]>`.
unsafe impl<T: Send> Send for Slots<T> {}
unsafe impl<T: Sync> Sync for Slots<T> {}

impl<T: Copy + Default> Slots<T> {
    /// `len` values of `T::default()`.
    ///
    /// # Safety
    /// All-zero bytes must be a valid `T` equal to `T::default()` (true of the table entries:
    /// zero keys, zero ids, no padding), because a mapped slice is the kernel's zero pages.
    unsafe fn zeroed(len: usize) -> Self {
        #[cfg(target_os = "linux")]
        {
            const HUGE: usize = 2 << 20;
            let bytes = len * std::mem::size_of::<T>();
            if bytes >= 2 * HUGE {
                extern "C" {
                    fn mmap(addr: *mut std::ffi::c_void, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut std::ffi::c_void;
                    fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
                }
                const PROT_READ_WRITE: i32 = 0x1 | 0x2;
                const MAP_PRIVATE_ANONYMOUS: i32 = 0x02 | 0x20;
                const MADV_HUGEPAGE: i32 = 14;
                let map_len = bytes + HUGE;
                // SAFETY: a fresh private anonymous mapping (zero-filled), checked for failure;
                // the aligned range lies inside it; madvise only changes how it is backed.
                unsafe {
                    let p = mmap(std::ptr::null_mut(), map_len, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS, -1, 0);
                    if p as isize != -1 {
                        let start = (p as usize + HUGE - 1) & !(HUGE - 1);
                        madvise(start as *mut std::ffi::c_void, bytes, MADV_HUGEPAGE);
                        return Slots { ptr: start as *mut T, len, map: Some((p as usize, map_len)) };
                    }
                }
            }
        }
        let b: Box<[T]> = vec![T::default(); len].into_boxed_slice();
        Slots { ptr: Box::into_raw(b) as *mut T, len, map: None }
    }
}

impl<T> std::ops::Deref for Slots<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialized values (zero bytes are a valid `T`, see `zeroed`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T> std::ops::DerefMut for Slots<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T> Drop for Slots<T> {
    fn drop(&mut self) {
        match self.map {
            #[cfg(target_os = "linux")]
            Some((start, len)) => {
                extern "C" {
                    fn munmap(addr: *mut std::ffi::c_void, len: usize) -> i32;
                }
                // SAFETY: the mapping made in `zeroed`, unmapped once.
                unsafe { munmap(start as *mut std::ffi::c_void, len) };
            }
            #[cfg(not(target_os = "linux"))]
            Some(_) => unreachable!(),
            // SAFETY: made by `Box::into_raw` of a `Box<[T]>` of `len` values in `zeroed`.
            None => drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) }),
        }
    }
}

/// Per-slot word cache.
///
/// * pieces of 2..=15 bytes: `short` table, key packed in a u128;
/// * pieces of 16..=31 bytes: `mid` table, key packed in 32 bytes;
/// * pieces of 32..=[`MAX_CACHED_LEN`] bytes: `long` hashbrown map keyed by boxed bytes.
///
/// Table values are `[a, b, c, n]`: if `n <= 3` the ids are inline, otherwise `a` is an offset
/// into `arena` and `n & 0x7fff_ffff` the count.
///
/// Memory (`used()`): table capacities (entry size x slots) + arena capacity x 4 + long-map
/// entries (key bytes + 48). Before anything grows, the growth is checked against `budget`.
/// A table grows at 1/4 load if that fits, else it fills on to 1/2; a growth that must happen
/// and does not fit wipes the cache (allocations kept, so the total never passes the budget),
/// and if it still would not fit, the piece is simply not cached.
pub struct WordCache {
    short: Table<u128>,
    mid: Table<Key32>,
    long: FxHashMap<Box<[u8]>, (u32, u32)>,
    arena: Vec<u32>,
    long_bytes: usize,
    /// Most bytes this cache may use: the encoder's whole budget for a slot, a small private
    /// budget for a throw-away cache.
    budget: usize,
    /// Slots only: bytes used by all slots of the encoder together (at most `budget`).
    pool: Option<Arc<AtomicUsize>>,
    /// Bytes this cache has added to `pool` (>= `used()`; given back when the cache drops).
    charged: usize,
    pub hits: u64,
    pub misses: u64,
}

const LONG_FLAG: u32 = 0x8000_0000;
/// Spare ids kept allocated past the arena's end (see `WordCache::put`).
const ARENA_SLACK: usize = 16;
const LONG_ENTRY_COST: usize = 48;
const SHORT_INITIAL: usize = 1 << 12;

impl WordCache {
    /// Allocates nothing: the tables start as 1-slot sentinels and get their first real
    /// allocation on the first insert (so idle slots and idle encoders cost no memory).
    fn new(budget: usize, pool: Option<Arc<AtomicUsize>>) -> Self {
        WordCache {
            pool,
            charged: 0,
            short: Table::with_capacity_pow2(1),
            mid: Table::with_capacity_pow2(1),
            long: FxHashMap::default(),
            arena: Vec::new(),
            long_bytes: 0,
            budget,
            hits: 0,
            misses: 0,
        }
    }

    /// Slots of a table's first allocation.
    fn first_cap(&self) -> usize {
        if self.budget >= SHORT_INITIAL * 80 * 2 {
            SHORT_INITIAL
        } else {
            16
        }
    }

    pub fn used(&self) -> usize {
        self.short.bytes() + self.mid.bytes() + self.arena.capacity() * 4 + self.long_bytes
    }

    #[inline(always)]
    fn emit(&self, v: &[u32; 4], out: &mut Vec<u32>) {
        let n = v[3];
        if n & LONG_FLAG == 0 {
            // Fixed 3-id copy into spare capacity, then set the length to the real count: no
            // variable-length memcpy call for the 1–3 ids of almost every piece.
            out.reserve(3);
            let len = out.len();
            // SAFETY: capacity >= len + 3 after reserve; n <= 3 and v[..n] are initialized ids.
            unsafe {
                std::ptr::copy_nonoverlapping(v.as_ptr(), out.as_mut_ptr().add(len), 3);
                out.set_len(len + n as usize);
            }
        } else {
            let (o, n) = (v[0] as usize, (n & !LONG_FLAG) as usize);
            out.extend_from_slice(&self.arena[o..o + n]);
        }
    }

    /// Looks `piece` (2..=MAX_CACHED_LEN bytes) up; appends its ids and returns true on a hit.
    #[inline(always)]
    fn get(&self, piece: &[u8], out: &mut Vec<u32>) -> bool {
        let len = piece.len();
        let v = if len < 16 {
            self.short.get(&pack(piece))
        } else if len < 32 {
            self.mid.get(&pack32(piece))
        } else {
            return match self.long.get(piece) {
                Some(&(o, n)) => {
                    out.extend_from_slice(&self.arena[o as usize..(o + n) as usize]);
                    true
                }
                None => false,
            };
        };
        match v {
            Some(v) => {
                self.emit(v, out);
                true
            }
            None => false,
        }
    }

    fn wipe(&mut self) {
        self.short.clear();
        self.mid.clear();
        self.long.clear();
        self.arena.clear();
        self.long_bytes = 0;
    }

    /// May this cache grow to `want` bytes? Slots draw on the encoder's shared pool.
    fn fits(&mut self, want: usize) -> bool {
        if want > self.budget {
            return false;
        }
        if want <= self.charged {
            return true;
        }
        let Some(pool) = &self.pool else { return true };
        let (extra, total) = (want - self.charged, self.budget);
        let ok = pool
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| (u + extra <= total).then_some(u + extra))
            .is_ok();
        if ok {
            self.charged = want;
        }
        ok
    }

    /// Can `delta` more bytes be used? Wipes once if that makes it fit.
    fn room_for(&mut self, delta: usize) -> bool {
        if self.fits(self.used() + delta) {
            return true;
        }
        self.wipe();
        let want = self.used() + delta;
        self.fits(want)
    }

    /// Makes sure the table `pick` selects has a free slot: it grows at 1/4 load when the budget
    /// has room for that, else it fills up to 1/2 before the slot is wiped (so a tight budget
    /// holds as many words as before). False if the word cannot be cached.
    fn make_room<K: TableKey>(&mut self, pick: fn(&mut WordCache) -> &mut Table<K>) -> bool {
        if !pick(self).sparse_full() {
            return true;
        }
        let first = self.first_cap();
        let d = pick(self).bytes().max(first * std::mem::size_of::<Entry<K>>());
        if self.fits(self.used() + d) {
            pick(self).grow(first);
        } else if pick(self).full() {
            if !self.room_for(d) {
                return false;
            }
            // (A wipe empties the table, unless it was already empty.)
            if pick(self).full() {
                pick(self).grow(first);
            }
        }
        true
    }

    fn put(&mut self, piece: &[u8], ids: &[u32]) {
        let len = piece.len();
        if self.budget < 4096 || len > MAX_CACHED_LEN || ids.len() > (u32::MAX >> 2) as usize {
            return;
        }
        // Make sure the target table has a free slot.
        let room = match len {
            ..16 => self.make_room(|c| &mut c.short),
            16..32 => self.make_room(|c| &mut c.mid),
            _ => true,
        };
        if !room {
            return;
        }
        let in_arena = ids.len() > 3 || len >= 32;
        if in_arena {
            // ARENA_SLACK spare ids past the end: the drain copies a short piece's arena ids
            // as one fixed block of 16 (see `Encoder::drain`).
            let need = self.arena.len() + ids.len() + ARENA_SLACK;
            let mut delta = if need > self.arena.capacity() { (need.max(self.arena.capacity() * 2) - self.arena.capacity()) * 4 } else { 0 };
            if len >= 32 {
                delta += LONG_ENTRY_COST + len;
            }
            if !self.room_for(delta) {
                return;
            }
            if self.arena.len() + ids.len() > (u32::MAX >> 1) as usize {
                self.wipe();
            }
            // A wipe may have emptied a table we checked above; it still has free slots.
            let need = self.arena.len() + ids.len() + ARENA_SLACK;
            if need > self.arena.capacity() {
                let target = need.max(self.arena.capacity() * 2);
                self.arena.reserve_exact(target - self.arena.len());
            }
        }
        if len < 32 {
            let v = if !in_arena {
                let mut v = [0u32; 4];
                v[..ids.len()].copy_from_slice(ids);
                v[3] = ids.len() as u32;
                v
            } else {
                let o = self.arena.len() as u32;
                self.arena.extend_from_slice(ids);
                [o, 0, 0, ids.len() as u32 | LONG_FLAG]
            };
            if len < 16 {
                self.short.insert(pack(piece), v);
            } else {
                self.mid.insert(pack32(piece), v);
            }
        } else {
            let o = self.arena.len() as u32;
            self.arena.extend_from_slice(ids);
            self.long.insert(piece.into(), (o, ids.len() as u32));
            self.long_bytes += LONG_ENTRY_COST + len;
        }
    }
}

impl Drop for WordCache {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            pool.fetch_sub(self.charged, Ordering::Relaxed);
        }
    }
}

/// A cache slot borrowed for one unit of work: a locked slot, or a private one.
pub enum CacheGuard<'a> {
    Slot(std::sync::MutexGuard<'a, WordCache>),
    Private(WordCache),
}

impl std::ops::Deref for CacheGuard<'_> {
    type Target = WordCache;
    fn deref(&self) -> &WordCache {
        match self {
            CacheGuard::Slot(g) => g,
            CacheGuard::Private(c) => c,
        }
    }
}
impl std::ops::DerefMut for CacheGuard<'_> {
    fn deref_mut(&mut self) -> &mut WordCache {
        match self {
            CacheGuard::Slot(g) => g,
            CacheGuard::Private(c) => c,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Construction
// ---------------------------------------------------------------------------------------------

/// Cache slots per encoder: one per pool worker plus spares for Python threads calling
/// `encode` concurrently (GIL released), so that they rarely fall back to a cold private
/// cache. Slots allocate lazily, so unused ones cost nothing; they share one budget.
fn slot_count() -> usize {
    2 * std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) + 2
}

impl Encoder {
    /// Builds an encoder. `merges = None` selects tiktoken (rank) semantics.
    pub fn new(
        mut vocab: Vec<(u32, Box<[u8]>)>,
        merges: Option<Merges>,
        mut specials: Vec<(String, u32)>,
        pattern_spec: &str,
        cache_bytes: usize,
    ) -> Result<Self, String> {
        let pattern = Pattern::from_spec(pattern_spec)?;
        vocab.sort_by_key(|(id, _)| *id);
        specials.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        for w in vocab.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(format!("vocab has id {} twice", w[0].0));
            }
        }
        if vocab.iter().any(|(id, _)| *id == u32::MAX) {
            return Err(format!("token id {} is too large", u32::MAX));
        }
        let special_ids: FxHashMap<String, u32> = specials.iter().cloned().collect();
        if special_ids.len() != specials.len() {
            return Err("special_tokens has a token twice".into());
        }
        for (s, id) in &specials {
            if s.is_empty() {
                return Err(format!("special token with id {id} is the empty string"));
            }
            if *id == u32::MAX {
                return Err(format!("special token {s:?} has an id that is too large"));
            }
            if let Ok(i) = vocab.binary_search_by_key(id, |(v, _)| *v) {
                if &*vocab[i].1 != s.as_bytes() {
                    return Err(format!(
                        "special token {s:?} has id {id}, which the vocab gives to different bytes {:?}",
                        String::from_utf8_lossy(&vocab[i].1)
                    ));
                }
            }
        }
        let is_special_id: rustc_hash::FxHashSet<u32> = specials.iter().map(|(_, id)| *id).collect();
        {
            let mut ids: Vec<u32> = specials.iter().map(|(_, i)| *i).collect();
            ids.sort();
            if ids.windows(2).any(|w| w[0] == w[1]) {
                return Err("two special tokens share an id".into());
            }
        }

        // Decoder table.
        let max_id = vocab
            .iter()
            .map(|(i, _)| *i)
            .chain(specials.iter().map(|(_, i)| *i))
            .max()
            .map(|m| m as usize + 1)
            .unwrap_or(0);
        // Ids index dense tables; refuse absurdly sparse ones instead of allocating gigabytes.
        if max_id > (1 << 28) && max_id > 16 * (vocab.len() + specials.len()) {
            return Err(format!("token ids go up to {}, far beyond the {} tokens given; ids must be dense", max_id - 1, vocab.len() + specials.len()));
        }
        let mut present = vec![false; max_id];
        let mut lens = vec![0u64; max_id];
        for (id, b) in &vocab {
            if b.is_empty() {
                return Err(format!("token {id} has empty bytes"));
            }
            present[*id as usize] = true;
            lens[*id as usize] = b.len() as u64;
        }
        for (s, id) in &specials {
            present[*id as usize] = true;
            lens[*id as usize] = s.len() as u64;
        }
        let mut dec_off = Vec::with_capacity(max_id + 1);
        let mut acc = 0u64;
        dec_off.push(0);
        for l in &lens {
            acc += l;
            dec_off.push(acc);
        }
        let mut dec_bytes = vec![0u8; acc as usize];
        for (id, b) in &vocab {
            let o = dec_off[*id as usize] as usize;
            dec_bytes[o..o + b.len()].copy_from_slice(b);
        }
        for (s, id) in &specials {
            let o = dec_off[*id as usize] as usize;
            dec_bytes[o..o + s.len()].copy_from_slice(s.as_bytes());
        }

        // Mergeable tokens: the vocab minus special ids (tiktoken keeps specials out of ranks).
        let mut by_bytes: FxHashMap<&[u8], u32> = FxHashMap::default();
        by_bytes.reserve(vocab.len());
        for (id, b) in &vocab {
            if is_special_id.contains(id) {
                continue;
            }
            if let Some(old) = by_bytes.insert(b, *id) {
                return Err(format!(
                    "vocab gives the same bytes {:?} to ids {old} and {id}",
                    String::from_utf8_lossy(b)
                ));
            }
        }
        let mut byte_ids = [u32::MAX; 256];
        let missing: Vec<u8> = (0..=255u8).filter(|b| !by_bytes.contains_key(&[*b][..])).collect();
        if let Some(b) = missing.first() {
            return Err(format!(
                "the vocabulary lacks {} of the 256 byte tokens (e.g. byte 0x{b:02x}); byte-level BPE needs all 256",
                missing.len()
            ));
        }
        for b in 0..=255u8 {
            byte_ids[b as usize] = by_bytes[&[b][..]];
        }
        let merges = match merges {
            None => None,
            Some(Merges::Ids(m)) => Some(m),
            Some(Merges::Bytes(m)) => Some(
                m.iter()
                    .enumerate()
                    .map(|(n, (a, b))| {
                        let id = |t: &[u8]| {
                            by_bytes.get(t).copied().ok_or_else(|| {
                                format!("merge #{n} ({}, {}) uses {}, which is not in the vocabulary", py_bytes(a), py_bytes(b), py_bytes(t))
                            })
                        };
                        let (x, y) = (id(a)?, id(b)?);
                        id(&[&a[..], &b[..]].concat())?;
                        Ok((x, y))
                    })
                    .collect::<Result<Vec<_>, String>>()?,
            ),
        };

        let mut pairs: FxHashMap<u64, u64> = FxHashMap::default();
        let direct = match &merges {
            Some(m) => {
                pairs.reserve(m.len());
                let lookup = |id: u32| -> Option<&[u8]> { vocab.binary_search_by_key(&id, |(v, _)| *v).ok().map(|i| &*vocab[i].1) };
                let mut cat = Vec::new();
                for (rank, &(a, b)) in m.iter().enumerate() {
                    let (ba, bb) = match (lookup(a), lookup(b)) {
                        (Some(x), Some(y)) => (x, y),
                        _ => {
                            let bad = if lookup(a).is_none() { a } else { b };
                            return Err(format!("merge {rank} ({a}, {b}) uses id {bad}, which is not in the vocab"));
                        }
                    };
                    cat.clear();
                    cat.extend_from_slice(ba);
                    cat.extend_from_slice(bb);
                    let Some(&r) = by_bytes.get(&cat[..]) else {
                        return Err(format!(
                            "merge {rank} ({a}, {b}) makes {:?}, which is not in the vocab",
                            String::from_utf8_lossy(&cat)
                        ));
                    };
                    // Keep the first (lowest-rank) occurrence of a repeated merge.
                    pairs.entry(((a as u64) << 32) | b as u64).or_insert(((rank as u64) << 32) | r as u64);
                }
                None
            }
            None => {
                // Every split of every token into two tokens is a pair whose merge makes it.
                for (&bytes, &id) in &by_bytes {
                    for k in 1..bytes.len() {
                        if let (Some(&a), Some(&b)) = (by_bytes.get(&bytes[..k]), by_bytes.get(&bytes[k..])) {
                            pairs.insert(((a as u64) << 32) | b as u64, ((id as u64) << 32) | id as u64);
                        }
                    }
                }
                Some(by_bytes.iter().map(|(b, id)| (Box::<[u8]>::from(*b), *id)).collect())
            }
        };

        let (special_ac, special_ac_all) = if specials.is_empty() {
            (None, None)
        } else {
            let pats: Vec<&str> = specials.iter().map(|(s, _)| s.as_str()).collect();
            let a = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&pats).map_err(|e| e.to_string())?;
            let b = AhoCorasick::builder().match_kind(MatchKind::Standard).build(&pats).map_err(|e| e.to_string())?;
            (Some(a), Some(b))
        };

        let special_lead = specials.first().and_then(|(s, _)| s.as_bytes().first().copied()).filter(|&x| {
            x >= 0x10
                && !x.is_ascii_whitespace()
                && specials.len() <= FUSED_CHECK_MAX_SPECIALS
                && specials.iter().all(|(s, _)| {
                    s.len() >= 2 && s.as_bytes()[0] == x && !s.bytes().any(|c| c == b' ' || c == b'\n')
                })
        });
        let max_special_len = specials.iter().map(|(s, _)| s.len()).max().unwrap_or(0);
        let mut special_second = [false; 256];
        for (s, _) in &specials {
            if let Some(&c) = s.as_bytes().get(1) {
                special_second[c as usize] = true;
            }
        }
        let n_slots = slot_count();
        let pool = Arc::new(AtomicUsize::new(0));
        Ok(Encoder {
            dec_off,
            dec_bytes,
            present,
            byte_ids,
            pairs,
            direct,
            vocab,
            merges,
            specials,
            special_ids,
            special_ac,
            special_ac_all,
            special_lead,
            special_second,
            max_special_len,
            pattern,
            pattern_spec: pattern_spec.to_string(),
            cache_bytes,
            slots: (0..n_slots).map(|_| Slot(Mutex::new(WordCache::new(cache_bytes, Some(pool.clone()))))).collect(),
            shared: Shared::new(cache_bytes, pool),
            ids_per_kib: AtomicUsize::new(1024),
        })
    }

    /// Room to reserve for the ids of `bytes` bytes of text: 1/8 more than the last batch's
    /// ratio would need, never more than the upper bound (one id per byte, the first estimate).
    /// Reserving the upper bound every time costs fresh pages on every call (above glibc's 32 MB
    /// mmap threshold): English, 5.4M ids from 20 MB, then ran ~3% slower than with a 24 MB
    /// buffer that malloc reuses; a short estimate only costs one regrowth.
    pub fn output_estimate(&self, bytes: usize) -> usize {
        let per_kib = self.ids_per_kib.load(Ordering::Relaxed);
        (bytes / 1024 * per_kib / 8 * 9).min(bytes) + 64
    }

    /// Records the ids-per-byte ratio of a batch for [`Self::output_estimate`].
    pub fn learn_output_ratio(&self, bytes: usize, ids: usize) {
        if bytes >= 1 << 16 {
            let per_kib = (ids as u128 * 1024 / bytes as u128).min(1024) as usize;
            self.ids_per_kib.store(per_kib, Ordering::Relaxed);
        }
    }

    pub fn n_vocab(&self) -> usize {
        self.present.len()
    }

    pub fn cache_bytes(&self) -> usize {
        self.cache_bytes
    }

    pub fn pattern_spec(&self) -> &str {
        &self.pattern_spec
    }

    pub fn specials(&self) -> &[(String, u32)] {
        &self.specials
    }

    pub fn special_id(&self, s: &str) -> Option<u32> {
        self.special_ids.get(s).copied()
    }

    pub fn is_tiktoken(&self) -> bool {
        self.direct.is_some()
    }

    /// The vocabulary as given (sorted by id).
    pub fn vocab(&self) -> &[(u32, Box<[u8]>)] {
        &self.vocab
    }

    /// The merges as id pairs in rank order (None in tiktoken mode).
    pub fn merges(&self) -> Option<&[(u32, u32)]> {
        self.merges.as_deref()
    }

    /// Drops every cached word (e.g. after changing nothing but wanting memory back).
    pub fn clear_cache(&self) {
        self.shared.clear();
        for s in &self.slots {
            if let Ok(mut c) = s.0.try_lock() {
                let (b, pool) = (c.budget, c.pool.clone());
                *c = WordCache::new(b, pool);
            }
        }
    }

    /// (hits, misses, approximate bytes used) summed over the slots that are not busy.
    pub fn cache_stats(&self) -> (u64, u64, usize) {
        let mut t = (0, 0, 0);
        for s in &self.slots {
            if let Ok(c) = s.0.try_lock() {
                t.0 += c.hits;
                t.1 += c.misses;
                t.2 += c.used();
            }
        }
        t.2 += self.shared.bytes.load(Ordering::Relaxed);
        t
    }

    /// Borrows a cache slot, preferring `hint`; never blocks.
    pub fn cache(&self, hint: usize) -> CacheGuard<'_> {
        let n = self.slots.len();
        for k in 0..n {
            if let Ok(g) = self.slots[(hint + k) % n].0.try_lock() {
                return CacheGuard::Slot(g);
            }
        }
        // Everything busy (or poisoned): a private cache with a small budget.
        CacheGuard::Private(WordCache::new((self.cache_bytes / n).min(16 << 20), None))
    }

    // -----------------------------------------------------------------------------------------
    // Merging
    // -----------------------------------------------------------------------------------------

    #[inline]
    fn pair(&self, a: u32, b: u32) -> u64 {
        match self.pairs.get(&(((a as u64) << 32) | b as u64)) {
            Some(&v) => v,
            None => NO_PAIR,
        }
    }

    /// BPE of one piece, appended to `out` (no cache).
    pub fn bpe_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        if piece.len() == 1 {
            out.push(self.byte_ids[piece[0] as usize]);
            return;
        }
        if let Some(d) = &self.direct {
            if let Some(&id) = d.get(piece) {
                out.push(id);
                return;
            }
        }
        if piece.len() <= LARGE_PIECE {
            self.merge_small(piece, out)
        } else {
            self.merge_large(piece, out)
        }
    }

    /// Quadratic merge on stack arrays; for pieces of at most LARGE_PIECE bytes.
    fn merge_small(&self, piece: &[u8], out: &mut Vec<u32>) {
        let mut toks = [0u32; LARGE_PIECE];
        let mut ranks = [NO_PAIR; LARGE_PIECE];
        let mut n = piece.len();
        for (i, &b) in piece.iter().enumerate() {
            toks[i] = self.byte_ids[b as usize];
        }
        for i in 0..n - 1 {
            ranks[i] = self.pair(toks[i], toks[i + 1]);
        }
        while n > 1 {
            // Leftmost minimum: rank first, and equal ranks always have equal results.
            let mut best = NO_PAIR;
            let mut at = 0;
            for (i, &r) in ranks[..n - 1].iter().enumerate() {
                if r < best {
                    best = r;
                    at = i;
                }
            }
            if best == NO_PAIR {
                break;
            }
            toks[at] = best as u32;
            toks.copy_within(at + 2..n, at + 1);
            if at + 2 < n {
                ranks.copy_within(at + 2..n - 1, at + 1);
            }
            n -= 1;
            if at + 1 < n {
                ranks[at] = self.pair(toks[at], toks[at + 1]);
            }
            ranks[n - 1] = NO_PAIR;
            if at > 0 {
                ranks[at - 1] = self.pair(toks[at - 1], toks[at]);
            }
        }
        out.extend_from_slice(&toks[..n]);
    }

    /// Heap + linked-list merge, O(n log n); for long pieces (< 4 GiB: positions are u32).
    ///
    /// Memory is 20 bytes per input byte at most (token, next, prev: 12; heap entry: 8), so a
    /// 100 MB single piece needs about 2 GB; heap entries pack `rank << 32 | position` into one
    /// u64 (equal ranks then pop leftmost first, because positions are byte offsets of each
    /// node's first byte and so increase left to right).
    fn merge_large(&self, piece: &[u8], out: &mut Vec<u32>) {
        let n = piece.len();
        let mut toks: Vec<u32> = piece.iter().map(|&b| self.byte_ids[b as usize]).collect();
        let mut next: Vec<u32> = (1..=n as u32).collect();
        let mut prev: Vec<u32> = (0..n as u32).map(|i| i.wrapping_sub(1)).collect();
        let none = n as u32;
        let rank = |r: u64| r >> 32;
        let mut heap: BinaryHeap<Reverse<u64>> = BinaryHeap::with_capacity(n);
        for i in 0..n - 1 {
            let r = self.pair(toks[i], toks[i + 1]);
            if r != NO_PAIR {
                heap.push(Reverse((rank(r) << 32) | i as u64));
            }
        }
        while let Some(Reverse(key)) = heap.pop() {
            let (want, pos) = (key >> 32, key as u32);
            let p = pos as usize;
            if toks[p] == DEAD {
                continue;
            }
            let q = next[p];
            if q == none {
                continue;
            }
            // Stale entry? If the pair at `pos` changed, its new rank was pushed separately. A
            // stale entry whose rank equals the live pair's is interchangeable with it (equal
            // ranks always merge into the same token).
            let r = self.pair(toks[p], toks[q as usize]);
            if r == NO_PAIR || rank(r) != want {
                continue;
            }
            toks[p] = r as u32;
            toks[q as usize] = DEAD;
            let nq = next[q as usize];
            next[p] = nq;
            if nq != none {
                prev[nq as usize] = pos;
                let r2 = self.pair(toks[p], toks[nq as usize]);
                if r2 != NO_PAIR {
                    heap.push(Reverse((rank(r2) << 32) | pos as u64));
                }
            }
            let pp = prev[p];
            if pp != u32::MAX {
                let r2 = self.pair(toks[pp as usize], toks[p]);
                if r2 != NO_PAIR {
                    heap.push(Reverse((rank(r2) << 32) | pp as u64));
                }
            }
        }
        let mut i = 0usize;
        while i < n {
            out.push(toks[i]);
            i = next[i] as usize;
        }
    }

    /// BPE of one piece through the cache.
    #[inline(always)]
    pub fn encode_piece(&self, cache: &mut WordCache, piece: &[u8], out: &mut Vec<u32>) {
        let len = piece.len();
        if len == 1 {
            out.push(self.byte_ids[piece[0] as usize]);
            return;
        }
        if len > MAX_CACHED_LEN {
            self.bpe_piece(piece, out);
            return;
        }
        if cache.get(piece, out) {
            cache.hits += 1;
            return;
        }
        self.encode_miss(cache, piece, out);
    }

    #[inline(never)]
    fn encode_miss(&self, cache: &mut WordCache, piece: &[u8], out: &mut Vec<u32>) {
        cache.misses += 1;
        let start = out.len();
        if self.shared.get(piece, out) {
            cache.put(piece, &out[start..]);
            return;
        }
        self.bpe_piece(piece, out);
        cache.put(piece, &out[start..]);
        self.shared.put(piece, &out[start..]);
    }

    /// Encodes ordinary text (no special-token handling), appending to `out`.
    ///
    /// Pieces are not looked up as the scanner finds them: a piece of 2..=15 bytes is packed
    /// and its table slot prefetched, and the pieces are queued; every [`QUEUE`] pieces
    /// [`Self::drain`] looks the queue up in order, when the lines are (mostly) there. The
    /// short table of a warm cache is tens of MB, far past L2, so without this nearly every
    /// lookup stalled on one cache miss, one after the other.
    pub fn encode_text(&self, cache: &mut WordCache, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        self.encode_text_inner(cache, text, out, false)
    }

    /// [`Self::encode_text`] that fails, as [`Self::check_disallowed`] would on this text, if
    /// the text holds any special token. Only where [`Self::can_fuse_check`] says so.
    ///
    /// Why: the separate check read the whole batch once more before encoding it (an
    /// Aho-Corasick pass, memchr for the lead byte, at memory speed). `ab_encode --check`
    /// (MB per CPU second): GPT-2 English 961 -> 1,016, o200k English 914 -> 951, code 767 ->
    /// 788; but o200k multilingual 310 -> 298, whose pieces mostly take the per-char path,
    /// tested one by one. Here a window's 64 bytes, already in L1, are compared with the lead byte
    /// (one mask per window), and a piece of the per-char path is tested by its packed key.
    /// The pieces tile the text, so every byte is looked at once; a special is then verified
    /// at each lead byte found.
    pub fn encode_text_checked(&self, cache: &mut WordCache, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        debug_assert!(self.pattern.is_builtin() && self.special_lead.is_some());
        self.encode_text_inner(cache, text, out, true)
    }

    #[inline(always)]
    fn encode_text_inner(&self, cache: &mut WordCache, text: &str, out: &mut Vec<u32>, check: bool) -> Result<(), String> {
        let b = text.as_bytes();
        let lead = self.special_lead.unwrap_or(0);
        let mut pq = PieceQueue { enc: self, cache, b, out, q: [Queued::default(); 2 * QUEUE], n: 0, check, lead, found: None };
        let r = self.pattern.for_each_piece(text, &mut pq);
        let n = pq.n;
        self.drain(pq.cache, b, &pq.q[..n], pq.out);
        if let Some(k) = pq.found {
            return Err(disallowed_error(&self.specials[k].0));
        }
        r
    }

    /// Whether batches may use [`Self::encode_text_checked`] instead of a separate
    /// [`Self::check_disallowed`] pass: a built-in pattern (its pieces tile the text), no
    /// special allowed and all of them disallowed (the default), and specials that all start
    /// with one lead byte and hold no space or newline (so a batch's cuts, which are made
    /// after a newline or at a space, never split one).
    pub fn can_fuse_check(&self, allowed: &SpecialSet, disallowed: &Option<SpecialSet>) -> bool {
        self.pattern.is_builtin()
            && self.special_lead.is_some()
            && allowed.is_empty()
            && matches!(disallowed, None | Some(SpecialSet::All))
    }

    /// Looks the queued pieces up (see [`Self::encode_text`]), appending their ids in order.
    ///
    /// The loop is written for the common case, a short piece found in the short table: the
    /// table's address and mask, the output's pointer and length stay in registers, inline ids
    /// go out as one 16-byte copy and arena ids as one 64-byte block (room for 4 ids per piece
    /// is reserved up front; the words past a piece's ids are overwritten or left past the
    /// end), and hits are counted as the pieces that did not take the slow path. A miss, a
    /// piece that is not short, or an arena result with no room left leaves the loop for one
    /// piece, then the registers are reloaded (the table may have grown).
    #[inline(never)]
    fn drain(&self, cache: &mut WordCache, b: &[u8], q: &[Queued], out: &mut Vec<u32>) {
        let mut slow = 0u64;
        let mut i = 0;
        while i < q.len() {
            out.reserve(4 * (q.len() - i));
            let mut len = out.len();
            let dst = out.as_mut_ptr();
            let (entries, mask) = (cache.short.entries.as_ptr() as *const u8, cache.short.mask * ENTRY_BYTES);
            let cap = out.capacity();
            let arena = &cache.arena;
            // (A slice iterator: the queue is walked by pointer, no index arithmetic.)
            let mut it = q[i..].iter();
            let broke = 'fast: loop {
                let Some(p) = it.next() else { break false };
                // Linear probing from the prefetched slot, by byte offsets (a stale or
                // non-slot `e` only makes a miss).
                let mut j = p.e;
                let en = loop {
                    // SAFETY: masked to the table.
                    let en = unsafe { &*(entries.add(j & mask) as *const Entry<u128>) };
                    if en.key == p.key {
                        break en;
                    }
                    if en.key == 0 || p.key == NOT_SHORT {
                        break 'fast true;
                    }
                    j += ENTRY_BYTES;
                };
                let n = en.val[3];
                if n & LONG_FLAG == 0 {
                    debug_assert!(len + 4 <= cap);
                    // SAFETY: room for 4 ids per remaining piece (see below); the first
                    // `n` (<= 3) words are the ids.
                    unsafe { std::ptr::copy_nonoverlapping(en.val.as_ptr(), dst.add(len), 4) };
                    len += n as usize;
                } else {
                    let (o, c) = (en.val[0] as usize, (n & !LONG_FLAG) as usize);
                    // Keep room for 4 ids per piece after this one.
                    if len + ARENA_SLACK + 4 * it.len() > cap {
                        break true;
                    }
                    // A short piece (< 16 bytes) has at most 15 ids: copied as one block of 16
                    // (a fixed-size copy, where a memcpy call of `c` ids cost ~20% of the time on
                    // multilingual text, whose pieces often take 4 ids or more). The arena keeps
                    // ARENA_SLACK spare ids allocated past its end, so the block stays inside its
                    // allocation; the words past `c` land in the output's spare room.
                    debug_assert!(c < ARENA_SLACK && o + c <= arena.len() && arena.capacity() >= o + ARENA_SLACK);
                    // SAFETY: o + c <= arena.len() (an entry only points at ids pushed before
                    // it) and the arena's allocation holds ARENA_SLACK ids past its length; the
                    // output has room for ARENA_SLACK ids at `len` (checked above); the block
                    // is copied as bytes (the words past `c` may be uninitialized and are never
                    // read as ids: `len` only counts `c`).
                    unsafe { std::ptr::copy_nonoverlapping(arena.as_ptr().add(o), dst.add(len), ARENA_SLACK) };
                    len += c;
                }
            };
            // The piece that left the loop, if any, is the one before what the iterator has left.
            i = q.len() - it.len() - broke as usize;
            // SAFETY: the first `len` ids are initialized.
            unsafe { out.set_len(len) };
            if i == q.len() {
                break;
            }
            let p = &q[i];
            slow += 1;
            if p.key != NOT_SHORT {
                if let Some(v) = cache.short.get_from(&p.key, p.e / ENTRY_BYTES) {
                    // (An arena result that did not fit the room.)
                    cache.emit(v, out);
                    slow -= 1;
                } else {
                    let e = p.s + (p.key >> 120) as usize;
                    self.encode_miss(cache, &b[p.s..e], out);
                }
            } else {
                // (Counts its own hits.)
                self.encode_piece(cache, &b[p.s..p.e], out);
            }
            i += 1;
        }
        cache.hits += q.len() as u64 - slow;
    }

    /// Like [`encode_text`] but also reports the byte range of every token.
    pub fn encode_text_spans(
        &self,
        cache: &mut WordCache,
        text: &str,
        base: usize,
        out: &mut Vec<u32>,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<(), String> {
        let b = text.as_bytes();
        self.pattern.for_each_piece(text, |s, e| {
            let k = out.len();
            self.encode_piece(cache, &b[s..e], out);
            let mut p = base + s;
            for &id in &out[k..] {
                let l = self.token_len(id);
                spans.push((p, p + l));
                p += l;
            }
        })
    }

    #[inline]
    pub fn token_len(&self, id: u32) -> usize {
        (self.dec_off[id as usize + 1] - self.dec_off[id as usize]) as usize
    }

    // -----------------------------------------------------------------------------------------
    // Special tokens
    // -----------------------------------------------------------------------------------------

    /// Fails if `text` contains a special token that is neither allowed nor excluded from the
    /// check. `disallowed = None` means "all specials not allowed" (tiktoken's default).
    pub fn check_disallowed(&self, text: &str, allowed: &SpecialSet, disallowed: &Option<SpecialSet>) -> Result<(), String> {
        let found = match disallowed {
            None => {
                if matches!(allowed, SpecialSet::All) {
                    return Ok(());
                }
                let Some(ac) = &self.special_ac_all else { return Ok(()) };
                self.leftmost_special(ac, text, |s| !allowed.contains(s))
            }
            Some(SpecialSet::None) => None,
            Some(SpecialSet::All) => {
                // Every special, even allowed ones (tiktoken would do the same).
                let Some(ac) = &self.special_ac_all else { return Ok(()) };
                self.leftmost_special(ac, text, |_| true)
            }
            Some(SpecialSet::Some(list)) => {
                // Literal search, like tiktoken's regex of the given strings (earliest wins).
                list.iter()
                    .filter(|s| !s.is_empty())
                    .filter_map(|s| text.find(s.as_str()).map(|p| (p, s)))
                    .min_by_key(|(p, _)| *p)
                    .map(|(_, s)| s.clone())
            }
        };
        match found {
            Some(s) => Err(disallowed_error(&s)),
            None => Ok(()),
        }
    }

    /// The special token (among those `keep` accepts) that starts first in `text`, the shorter
    /// of two that start at the same byte; as [`Self::encode_text_checked`] reports it. The
    /// overlapping search gives matches by their end, so one that starts earlier (`"<<x>>"`
    /// around `"<x>"`) may come later: the search goes on until no match can start earlier.
    fn leftmost_special(&self, ac: &AhoCorasick, text: &str, keep: impl Fn(&str) -> bool) -> Option<String> {
        let mut best: Option<(usize, usize, usize)> = None; // (start, len, index)
        for m in ac.find_overlapping_iter(text) {
            if let Some((start, _, _)) = best {
                if m.end() > start + self.max_special_len {
                    break;
                }
            }
            let k = m.pattern().as_usize();
            if keep(&self.specials[k].0) && best.is_none_or(|(s, l, _)| (m.start(), m.len()) < (s, l)) {
                best = Some((m.start(), m.len(), k));
            }
        }
        best.map(|(_, _, k)| self.specials[k].0.clone())
    }

    /// Splits a document at the allowed special tokens (leftmost-longest among allowed ones).
    pub fn split_specials(&self, text: &str, allowed: &SpecialSet, base: usize, items: &mut Vec<Item>) {
        let ac = match (&self.special_ac, allowed.is_empty()) {
            (Some(ac), false) => ac,
            _ => {
                if !text.is_empty() {
                    items.push(Item::Text(base, base + text.len()));
                }
                return;
            }
        };
        let mut last = 0;
        let mut from = 0;
        while from < text.len() {
            let input = aho_corasick::Input::new(text).span(from..text.len());
            let Some(m) = ac.find(input) else { break };
            let (name, id) = &self.specials[m.pattern().as_usize()];
            if !allowed.contains(name) {
                // Not allowed: it stays text; look for a special starting one byte later.
                from = m.start() + 1;
                continue;
            }
            if m.start() > last {
                items.push(Item::Text(base + last, base + m.start()));
            }
            items.push(Item::Special(*id, base + m.start(), base + m.end()));
            last = m.end();
            from = m.end();
        }
        if last < text.len() {
            items.push(Item::Text(base + last, base + text.len()));
        }
    }

    // -----------------------------------------------------------------------------------------
    // Decoding
    // -----------------------------------------------------------------------------------------

    #[inline]
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        if i < self.present.len() && self.present[i] {
            Some(&self.dec_bytes[self.dec_off[i] as usize..self.dec_off[i + 1] as usize])
        } else {
            None
        }
    }

    /// Concatenated bytes of `ids`; the error names the first unknown id.
    pub fn decode_bytes<I: IntoIterator<Item = i64>>(&self, ids: I, out: &mut Vec<u8>) -> Result<(), String> {
        for id in ids {
            match u32::try_from(id).ok().and_then(|i| self.token_bytes(i)) {
                Some(b) => out.extend_from_slice(b),
                None => return Err(format!("unknown token id {id} (vocab has ids below {})", self.n_vocab())),
            }
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Serialization (deterministic; tables only, never the cache)
    // -----------------------------------------------------------------------------------------

    pub fn to_state(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.dec_bytes.len() + 8 * self.vocab.len() + 64);
        v.extend_from_slice(STATE_MAGIC);
        put_bytes(&mut v, self.pattern_spec.as_bytes());
        v.extend_from_slice(&(self.cache_bytes as u64).to_le_bytes());
        v.extend_from_slice(&(self.vocab.len() as u32).to_le_bytes());
        for (id, b) in &self.vocab {
            v.extend_from_slice(&id.to_le_bytes());
            put_bytes(&mut v, b);
        }
        match &self.merges {
            None => v.push(0),
            Some(m) => {
                v.push(1);
                v.extend_from_slice(&(m.len() as u32).to_le_bytes());
                for (a, b) in m {
                    v.extend_from_slice(&a.to_le_bytes());
                    v.extend_from_slice(&b.to_le_bytes());
                }
            }
        }
        v.extend_from_slice(&(self.specials.len() as u32).to_le_bytes());
        for (s, id) in &self.specials {
            v.extend_from_slice(&id.to_le_bytes());
            put_bytes(&mut v, s.as_bytes());
        }
        v
    }

    pub fn from_state(b: &[u8]) -> Result<Self, String> {
        let mut r = StateReader { b, p: 0 };
        if r.take(STATE_MAGIC.len())? != STATE_MAGIC {
            return Err("not an hf_bpe Encoder state (bad magic)".into());
        }
        let pattern = String::from_utf8(r.bytes()?.to_vec()).map_err(|_| "bad pattern in state".to_string())?;
        let cache_bytes = r.u64()? as usize;
        let n = r.u32()? as usize;
        let mut vocab = Vec::with_capacity(n);
        for _ in 0..n {
            let id = r.u32()?;
            vocab.push((id, Box::<[u8]>::from(r.bytes()?)));
        }
        let merges = match r.take(1)?[0] {
            0 => None,
            1 => {
                let m = r.u32()? as usize;
                let mut v = Vec::with_capacity(m);
                for _ in 0..m {
                    v.push((r.u32()?, r.u32()?));
                }
                Some(v)
            }
            _ => return Err("bad merges flag in state".into()),
        };
        let k = r.u32()? as usize;
        let mut specials = Vec::with_capacity(k);
        for _ in 0..k {
            let id = r.u32()?;
            let s = String::from_utf8(r.bytes()?.to_vec()).map_err(|_| "bad special token in state".to_string())?;
            specials.push((s, id));
        }
        if r.p != b.len() {
            return Err("trailing bytes in Encoder state".into());
        }
        Encoder::new(vocab, merges.map(Merges::Ids), specials, &pattern, cache_bytes)
    }
}

const STATE_MAGIC: &[u8] = b"hf_bpe.Encoder/1\0";

fn put_bytes(v: &mut Vec<u8>, b: &[u8]) {
    v.extend_from_slice(&(b.len() as u32).to_le_bytes());
    v.extend_from_slice(b);
}

struct StateReader<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> StateReader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.p + n > self.b.len() {
            return Err("truncated Encoder state".into());
        }
        let s = &self.b[self.p..self.p + n];
        self.p += n;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_slots_are_zeroed_writable_and_freed() {
        for len in [0usize, 1, 1000, (8 << 20) / 32] {
            // SAFETY: an all-zero `Entry<u128>` is its default.
            let mut s: Slots<Entry<u128>> = unsafe { Slots::zeroed(len) };
            assert_eq!(s.len(), len);
            assert!(s.iter().all(|e| e.key == 0 && e.val == [0; 4]));
            if len > 0 {
                s[len - 1] = Entry { key: 7, val: [1, 2, 3, 4] };
                assert_eq!(s[len - 1].val, [1, 2, 3, 4]);
            }
            // A big one is its own 2 MiB-aligned mapping.
            assert_eq!(s.map.is_some(), cfg!(target_os = "linux") && len * 32 >= 4 << 20);
            if s.map.is_some() {
                assert_eq!(s.as_ptr() as usize % (2 << 20), 0);
            }
        }
    }

    /// A toy tiktoken-style vocab: all bytes, then a few merged tokens over 'a'..'d'.
    fn toy_ranks() -> Vec<(u32, Box<[u8]>)> {
        let mut v: Vec<(u32, Box<[u8]>)> = (0..=255u8).map(|b| (b as u32, vec![b].into_boxed_slice())).collect();
        let extra = ["ab", "aa", "bc", "abc", "aaaa", "ba", "cd", "abcd", "aab", "dd", "ddd", "bcd", "aaaaaaaa"];
        for (i, t) in extra.iter().enumerate() {
            v.push((256 + i as u32, t.as_bytes().into()));
        }
        v
    }

    /// Reference: merge the adjacent pair whose concatenation has the lowest rank, leftmost.
    fn naive(ranks: &[(u32, Box<[u8]>)], piece: &[u8]) -> Vec<u32> {
        let rank_of = |b: &[u8]| ranks.iter().find(|(_, t)| &**t == b).map(|(r, _)| *r);
        if let Some(r) = rank_of(piece) {
            return vec![r];
        }
        let mut parts: Vec<Vec<u8>> = piece.iter().map(|&b| vec![b]).collect();
        loop {
            let mut best: Option<(u32, usize)> = None;
            for i in 0..parts.len().saturating_sub(1) {
                let cat = [parts[i].clone(), parts[i + 1].clone()].concat();
                if let Some(r) = rank_of(&cat) {
                    if best.map_or(true, |(br, _)| r < br) {
                        best = Some((r, i));
                    }
                }
            }
            match best {
                None => break,
                Some((_, i)) => {
                    let right = parts.remove(i + 1);
                    parts[i].extend(right);
                }
            }
        }
        parts.iter().map(|p| rank_of(p).unwrap()).collect()
    }

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn small_and_large_paths_match_the_reference() {
        let ranks = toy_ranks();
        let enc = Encoder::new(ranks.clone(), None, vec![], r"[a-d]+|[^a-d]+", 1 << 20).unwrap();
        let mut seed = 7;
        for round in 0..400 {
            let n = 2 + (lcg(&mut seed) % if round % 4 == 0 { 400 } else { 40 }) as usize;
            let piece: Vec<u8> = (0..n).map(|_| b"aabcd"[(lcg(&mut seed) % 5) as usize]).collect();
            let want = naive(&ranks, &piece);
            let mut a = Vec::new();
            enc.bpe_piece(&piece, &mut a);
            assert_eq!(a, want, "bpe_piece on {:?}", String::from_utf8_lossy(&piece));
            let mut b = Vec::new();
            enc.merge_large(&piece, &mut b);
            assert_eq!(b, want, "merge_large on {:?}", String::from_utf8_lossy(&piece));
            if piece.len() <= LARGE_PIECE {
                let mut c = Vec::new();
                enc.merge_small(&piece, &mut c);
                assert_eq!(c, want, "merge_small");
            }
        }
    }

    #[test]
    fn merges_mode_equals_ranks_mode_on_a_consistent_vocab() {
        // With merges in rank order that build each token the way rank order would (here
        // "aab" = a + ab, since ab outranks aa), both semantics agree. (With ("aa", "b") they
        // differ on "abaab": the real GPT-2 vs tiktoken subtlety, see hf-integration.md 3.3.)
        let ranks = toy_ranks();
        let id = |s: &str| ranks.iter().find(|(_, t)| &**t == s.as_bytes()).unwrap().0;
        let merges: Vec<(u32, u32)> = [("a", "b"), ("a", "a"), ("b", "c"), ("ab", "c"), ("aa", "aa"), ("b", "a"), ("c", "d"), ("abc", "d"), ("a", "ab"), ("d", "d"), ("dd", "d"), ("bc", "d"), ("aaaa", "aaaa")]
            .iter()
            .map(|(a, b)| (id(a), id(b)))
            .collect();
        let m = Encoder::new(ranks.clone(), Some(Merges::Ids(merges)), vec![], "gpt2", 1 << 20).unwrap();
        let r = Encoder::new(ranks, None, vec![], "gpt2", 1 << 20).unwrap();
        let mut seed = 11;
        for _ in 0..300 {
            let n = 2 + (lcg(&mut seed) % 200) as usize;
            let piece: Vec<u8> = (0..n).map(|_| b"abcd"[(lcg(&mut seed) % 4) as usize]).collect();
            let (mut x, mut y) = (Vec::new(), Vec::new());
            m.bpe_piece(&piece, &mut x);
            r.bpe_piece(&piece, &mut y);
            assert_eq!(x, y);
        }
    }

    #[test]
    fn queued_lookups_match_piece_by_piece() {
        // `encode_text`'s drain: inline hits, arena results (words of x/y/z do not merge, so
        // they encode to one id per byte), probes past the first slot, pieces of 16+ bytes
        // and misses, on a cold then warm cache, into outputs that start empty (so the room
        // reserved per piece runs out on arena results and the slow path takes them).
        let enc = Encoder::new(toy_ranks(), None, vec![], "gpt2", 1 << 20).unwrap();
        let mut cache = enc.cache(0);
        let mut seed = 5;
        let words: Vec<String> = (0..3000)
            .map(|_| {
                let n = 1 + (lcg(&mut seed) % 20) as usize;
                let abc: &[u8] = if lcg(&mut seed) % 2 == 0 { b"abcd" } else { b"xyzab" };
                (0..n).map(|_| abc[(lcg(&mut seed) % abc.len() as u64) as usize] as char).collect()
            })
            .collect();
        // `text` into a fresh output: queued lookups vs BPE of each piece.
        let check = |text: &str, cache: &mut WordCache| {
            let mut got = Vec::new();
            enc.encode_text(cache, text, &mut got).unwrap();
            let mut want = Vec::new();
            enc.pattern.for_each_piece(text, |s: usize, e: usize| enc.bpe_piece(&text.as_bytes()[s..e], &mut want)).unwrap();
            assert_eq!(got, want, "{text:?}");
        };
        let mut random_text = |n: usize| -> String { (0..n).map(|_| format!(" {}", words[(lcg(&mut seed) % 3000) as usize])).collect() };
        for _ in 0..3 {
            check(&random_text(4000), &mut cache);
            // Short texts: the room reserved for 4 ids per piece is exact.
            for k in 0..200 {
                check(&random_text(1 + k % 70), &mut cache);
            }
        }
        // An arena result (15 ids) that takes most of the room, then inline hits: the room
        // check must keep 4 ids for every piece after it (debug builds assert the room).
        for n in 1..16 {
            let text = format!(" xyzxyzxyzxyzx{}", " abc".repeat(n));
            check(&text, &mut cache);
            check(&text, &mut cache);
        }
        assert!(cache.hits > 0 && cache.misses > 0);
    }

    #[test]
    fn cache_respects_budget_and_stays_correct() {
        let ranks = toy_ranks();
        for budget in [0usize, 4096, 10_000, 1 << 16] {
            let enc = Encoder::new(ranks.clone(), None, vec![], r"\S+|\s+", budget).unwrap();
            let mut cache = enc.cache(0);
            let mut seed = 3;
            for _ in 0..5000 {
                let n = 2 + (lcg(&mut seed) % 60) as usize;
                let piece: Vec<u8> = (0..n).map(|_| b"abcdxyz"[(lcg(&mut seed) % 7) as usize]).collect();
                let mut a = Vec::new();
                enc.encode_piece(&mut cache, &piece, &mut a);
                let mut b = Vec::new();
                enc.bpe_piece(&piece, &mut b);
                assert_eq!(a, b);
                assert!(cache.used() <= budget.max(0), "used {} > budget {budget}", cache.used());
            }
        }
    }

    #[test]
    fn the_check_fused_into_the_scan_finds_what_the_separate_check_finds() {
        // ("<y>": in GPT-2's split its `<` is a piece of its own, the last byte of a piece.)
        // ("<<x>>" around "<x>": both checks name the one that starts first.)
        let specials: Vec<(String, u32)> =
            ["<|x|>", "<|endoftext|>", "<y>", "<<x>>", "<x>"].iter().enumerate().map(|(k, s)| (s.to_string(), 1000 + k as u32)).collect();
        // Parts that put specials (whole, cut short, or glued to other pieces) in windows, at
        // their edges, in the per-char path (after non-ASCII letters, in long pieces) and at
        // the text's end.
        let parts = [
            "a", " the", "Zebra", "  ", "\n", "\r\n", "12345", "\u{e9}t\u{e9}", "\u{65e5}\u{672c}", " \u{201c}",
            "\u{1f600}", "<", "<|", "<|x", "<|x|", "<|x|>", "<|endoftext|>", "x<|x|>y", "\u{e9}<|x|>", "<<|x|>",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", ";;;;;;;;;;;;;;;;;;;;;;;;", "<|endoftext", "|>",
            "<y>", "x<y>", "<y", "\u{e9}<y>", "\u{65e5}<y", ">", "<<x>>", "<x>", "<<x>", "a<<x>>b",
        ];
        let mut seed = 11u64;
        for spec in ["gpt2", "cl100k", "o200k"] {
            let enc = Encoder::new(toy_ranks(), None, specials.clone(), spec, 1 << 20).unwrap();
            assert!(enc.can_fuse_check(&SpecialSet::None, &None));
            assert!(!enc.can_fuse_check(&SpecialSet::Some(vec!["<|x|>".into()]), &None));
            let mut cache = enc.cache(0);
            let (mut found, mut clean) = (0, 0);
            for _ in 0..4000 {
                let mut t = String::new();
                for _ in 0..(lcg(&mut seed) % 40 + 1) {
                    let k = lcg(&mut seed) as usize % parts.len();
                    // Specials are rare, so that many texts have none.
                    if parts[k].contains('>') && lcg(&mut seed) % 8 != 0 {
                        continue;
                    }
                    t.push_str(parts[k]);
                }
                let want = enc.check_disallowed(&t, &SpecialSet::None, &None);
                let mut got = Vec::new();
                let r = enc.encode_text_checked(&mut cache, &t, &mut got);
                assert_eq!(r, want, "{spec} {t:?}");
                if r.is_ok() {
                    let mut plain = Vec::new();
                    enc.encode_text(&mut cache, &t, &mut plain).unwrap();
                    assert_eq!(got, plain, "{spec} {t:?}");
                    clean += 1;
                } else {
                    found += 1;
                }
            }
            assert!(found > 500 && clean > 500, "{spec}: {found} with specials, {clean} without");
        }
        // Specials that do not share a lead byte, or hold a space: the separate check.
        let nested = Encoder::new(toy_ranks(), None, specials, "gpt2", 1 << 20).unwrap();
        let e = nested.check_disallowed("a<<x>>", &SpecialSet::Some(vec!["<q>".into()]), &None).unwrap_err();
        assert!(e.contains("\"<<x>>\""), "{e}");
        // Or more than FUSED_CHECK_MAX_SPECIALS of them.
        let many: Vec<(String, u32)> = (0..9).map(|k| (format!("<|r{k}|>"), 1000 + k)).collect();
        let odd = [vec![("<|x|>".to_string(), 1000), ("[y]".to_string(), 1001)], vec![("<|x y|>".to_string(), 1000)], many];
        for sp in odd {
            let enc = Encoder::new(toy_ranks(), None, sp, "gpt2", 1 << 20).unwrap();
            assert!(!enc.can_fuse_check(&SpecialSet::None, &None));
        }
    }

    #[test]
    fn tables_grow_at_a_quarter_and_fill_to_half_under_a_tight_budget() {
        let word = |k: usize| format!("w{k:05}").into_bytes();
        // Room to spare: the short table doubles whenever it would pass 1/4 load.
        let mut c = WordCache::new(1 << 24, None);
        for k in 0..5000 {
            c.put(&word(k), &[k as u32]);
            assert!(c.short.len * 4 <= c.short.entries.len(), "{} in {}", c.short.len, c.short.entries.len());
        }
        // 4096 bytes: 128 slots (4 KiB) is the biggest table that fits, so it fills to 64
        // words (1/2) instead of wiping at 32, and every one of them is still found.
        let mut c = WordCache::new(4096, None);
        for k in 0..64 {
            c.put(&word(k), &[k as u32]);
        }
        assert_eq!((c.short.len, c.short.entries.len()), (64, 128));
        for k in 0..64 {
            let mut out = Vec::new();
            assert!(c.get(&word(k), &mut out) && out == [k as u32], "{k}");
        }
        assert!(c.used() <= 4096);
        // The 65th word would pass 1/2: the slot is wiped (that word is not cached: even the
        // emptied table has no room to double) and the next one starts it over.
        c.put(&word(64), &[64]);
        assert_eq!((c.short.len, c.short.entries.len()), (0, 128));
        c.put(&word(65), &[65]);
        assert_eq!(c.short.len, 1);
    }

    #[test]
    fn slots_share_one_budget() {
        let ranks = toy_ranks();
        let budget = 1 << 16;
        let enc = Encoder::new(ranks, None, vec![], r"\S+|\s+", budget).unwrap();
        {
            let mut a = enc.cache(0);
            let mut b = enc.cache(1);
            assert!(matches!((&a, &b), (CacheGuard::Slot(_), CacheGuard::Slot(_))));
            let mut seed = 5;
            for k in 0..20_000 {
                let n = 2 + (lcg(&mut seed) % 40) as usize;
                let piece: Vec<u8> = (0..n).map(|_| b"abcdxyz"[(lcg(&mut seed) % 7) as usize]).collect();
                let (mut x, mut y) = (Vec::new(), Vec::new());
                let c = if k % 2 == 0 { &mut a } else { &mut b };
                enc.encode_piece(c, &piece, &mut x);
                enc.bpe_piece(&piece, &mut y);
                assert_eq!(x, y);
                let shared = enc.shared.bytes.load(Ordering::Relaxed);
                assert!(shared <= budget / 4);
                assert!(a.used() + b.used() + shared <= budget, "{} + {} + {shared} > {budget}", a.used(), b.used());
                assert!(a.charged + b.charged + shared <= budget);
            }
        }
        // clear_cache gives every slot's share back to the pool.
        enc.clear_cache();
        let pool = enc.slots[0].0.lock().unwrap().pool.clone().unwrap();
        assert_eq!(pool.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_word_one_slot_encoded_is_shared_with_the_others() {
        let enc = Encoder::new(toy_ranks(), None, vec![], r"\S+|\s+", 1 << 20).unwrap();
        let mut a = enc.cache(1);
        let mut b = enc.cache(2);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        enc.encode_piece(&mut a, b"abcdxyzabcd", &mut x);
        assert!(enc.shared.bytes.load(Ordering::Relaxed) > 0);
        // Slot b misses, but finds the ids in the shared cache: no BPE (so a wrong entry planted
        // there would show), and b caches them too.
        enc.shared.shards.iter().for_each(|s| {
            for v in s.lock().unwrap().values_mut() {
                v[0] = 7;
            }
        });
        enc.encode_piece(&mut b, b"abcdxyzabcd", &mut y);
        assert_eq!(y[0], 7);
        assert_eq!(&y[1..], &x[1..]);
        assert_eq!((b.misses, b.used() > 0), (1, true));
    }

    #[test]
    fn packing32_matches_a_plain_copy() {
        for n in 16..32usize {
            let b: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(91).wrapping_add(3)).collect();
            let mut buf = [0u8; 32];
            buf[..n].copy_from_slice(&b);
            buf[31] = n as u8;
            let w = |i: usize| u64::from_le_bytes(buf[8 * i..8 * i + 8].try_into().unwrap());
            assert!(pack32(&b) == Key32([w(0), w(1), w(2), w(3)]), "n={n}");
        }
    }

    #[test]
    fn state_round_trips_deterministically() {
        let mut ranks = toy_ranks();
        let specials = vec![("<|x|>".to_string(), 1000), ("<|y|>".to_string(), 999)];
        let a = Encoder::new(ranks.clone(), None, specials.clone(), "cl100k", 12345).unwrap();
        ranks.reverse();
        let b = Encoder::new(ranks, None, specials.into_iter().rev().collect(), "cl100k", 12345).unwrap();
        assert_eq!(a.to_state(), b.to_state());
        let c = Encoder::from_state(&a.to_state()).unwrap();
        assert_eq!(c.to_state(), a.to_state());
        assert_eq!(c.n_vocab(), 1001);
        assert!(Encoder::from_state(&a.to_state()[..20]).is_err());
    }

    #[test]
    fn specials_split_and_check() {
        let specials = vec![("<|e|>".to_string(), 500), ("<|f|>".to_string(), 501)];
        let enc = Encoder::new(toy_ranks(), None, specials, "gpt2", 1 << 20).unwrap();
        let t = "ab<|e|>cd<|f|>";
        let mut items = Vec::new();
        enc.split_specials(t, &SpecialSet::Some(vec!["<|f|>".into()]), 0, &mut items);
        assert!(matches!(items[..], [Item::Text(0, 9), Item::Special(501, 9, 14)]));
        assert!(enc.check_disallowed(t, &SpecialSet::Some(vec!["<|f|>".into()]), &None).unwrap_err().contains("<|e|>"));
        assert!(enc.check_disallowed(t, &SpecialSet::All, &None).is_ok());
        assert!(enc.check_disallowed(t, &SpecialSet::None, &Some(SpecialSet::None)).is_ok());
    }
}
