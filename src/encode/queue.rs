//! The encoder's hot loop: scan, pack, prefetch, queue, then look up.
//!
//! The scanner (`pretok/`) hands each piece to a [`PieceQueue`]: a piece of 1..=15 bytes is
//! packed into its `u128` key, its short-table slot is computed and prefetched, and the piece is
//! queued; every [`QUEUE`] pieces [`Encoder::drain`] looks the queue up in order, by when the
//! lines have (mostly) arrived. A warm short table is tens of MB, far past L2: without the
//! queue nearly every lookup stalled on one cache miss after another.
//!
//! * A window's pieces (`PieceSink::window`) are queued in one loop with the table's address,
//!   the shift and the queue position in registers; the rare piece of 16+ bytes takes an
//!   out-of-line path (its mid-table slot prefetched).
//! * The drain is a tight loop for the common case, a short piece found in the short table;
//!   anything else (a miss, a long piece, an arena result with no room) leaves it for one piece.
//! * With the disallowed check fused in ([`Encoder::encode_text_checked`]), the special-token
//!   search rides on the scan instead of reading the text a second time.
//! * These loops are long on purpose: each line was measured, see
//!   [the log](../../docs/performance.md#encoder-hot-loop), and "where the time goes now" there.

use std::mem::MaybeUninit;
use crate::cache::{pack32, Entry, Key32, Table, TableKey, WordCache, ARENA_SLACK, LONG_FLAG};
use crate::keys::{pack_in, pack_in_unchecked};
use crate::memory::prefetch;
use crate::pretok::{eq_mask, PieceSink};
use crate::specials::{disallowed_error, SpecialSet};

use super::Encoder;

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
    /// Entries `..n` are written; the rest are not initialised (zeroing 4 KB per text cost a
    /// tenth of the time on texts cut into short stretches).
    q: [MaybeUninit<Queued>; 2 * QUEUE],
    n: usize,
    /// Whether to look for special tokens in the pieces (the disallowed check, fused into the
    /// scan: see [`Encoder::encode_text_checked`]), and the byte every special starts with.
    check: bool,
    lead: u8,
    /// The first special token found (its index in the specials' list).
    found: Option<usize>,
}

/// The first `n` entries of a queue, which are written (`push`, `push_window`).
#[inline(always)]
fn written(q: &[MaybeUninit<Queued>; 2 * QUEUE], n: usize) -> &[Queued] {
    assert!(n <= q.len());
    // SAFETY: entries `..n` are initialised, and `MaybeUninit<Queued>` has `Queued`'s layout.
    unsafe { std::slice::from_raw_parts(q.as_ptr() as *const Queued, n) }
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
            (k, self.cache.table().prefetch(&k) * ENTRY_BYTES)
        } else {
            if self.check {
                self.verify_range(s, e);
            }
            prefetch_mid(&self.cache.mid, self.b, s, e);
            (NOT_SHORT, e)
        };
        // The mask drops the bound check (n < 2 x QUEUE anyway).
        self.q[self.n & (2 * QUEUE - 1)] = MaybeUninit::new(Queued { key, s, e });
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
        let table = self.cache.table();
        let (entries, shift) = (table.entries.as_ptr() as *const u8, table.shift - 5);
        let q = self.q.as_mut_ptr() as *mut Queued;
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
        if self.found.is_none() {
            self.found = self.enc.specials.shortest_at(self.b, pos);
        }
    }

    #[inline(always)]
    fn drain_if_full(&mut self) {
        if self.n >= QUEUE {
            self.enc.drain(self.cache, self.b, written(&self.q, self.n), self.out);
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
/// Why `drain`'s fast loop stopped at a piece: missing from the short table (or not short), or
/// found with no room left for its arena ids.
const MISSED: u8 = 1;
const NO_ROOM: u8 = 2;

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

impl Encoder {
    /// Encodes ordinary text (no special-token handling), appending to `out`.
    ///
    /// Pieces are not looked up as the scanner finds them: a piece of 2..=15 bytes is packed
    /// and its table slot prefetched, and the pieces are queued; every [`QUEUE`] pieces
    /// [`Self::drain`] looks the queue up in order, when the lines are (mostly) there. The
    /// short table of a warm cache is tens of MB, far past L2, so without this nearly every
    /// lookup stalled on one cache miss, one after the other.
    pub fn encode_text(&self, cache: &mut WordCache, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        if self.is_generic() {
            return self.encode_text_with(cache, text, self.inner_automaton(&SpecialSet::None).as_deref(), out);
        }
        self.encode_text_inner(cache, text, out, false)
    }

    /// [`Self::encode_text`] that fails, as [`Self::check_disallowed`] would on this text, if
    /// the text holds any special token. Only where [`Self::can_fuse_check`] says so.
    ///
    /// The pieces tile the text, so every byte is looked at once: a window's 64 bytes, already
    /// in L1, are compared with the lead byte (one mask per window), a per-char piece is tested
    /// by its packed key, and a special is verified at each lead byte found
    /// ([log](../../docs/performance.md#special-tokens)).
    pub fn encode_text_checked(&self, cache: &mut WordCache, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        debug_assert!(self.pattern.is_builtin() && self.specials.fused_lead().is_some());
        self.encode_text_inner(cache, text, out, true)
    }

    #[inline(always)]
    pub(super) fn encode_text_inner(&self, cache: &mut WordCache, text: &str, out: &mut Vec<u32>, check: bool) -> Result<(), String> {
        let b = text.as_bytes();
        let lead = self.specials.fused_lead().unwrap_or(0);
        let mut pq = PieceQueue { enc: self, cache, b, out, q: [const { MaybeUninit::uninit() }; 2 * QUEUE], n: 0, check, lead, found: None };
        let r = self.pattern.for_each_piece(text, &mut pq);
        self.drain(pq.cache, b, written(&pq.q, pq.n), pq.out);
        if let Some(k) = pq.found {
            return Err(disallowed_error(&self.specials.list()[k].0));
        }
        r
    }

    /// Whether batches may use [`Self::encode_text_checked`] instead of a separate
    /// [`Self::check_disallowed`] pass: a built-in pattern (its pieces tile the text), no
    /// special allowed and all of them disallowed (the default), and specials that all start
    /// with one lead byte and hold no space or newline (so a batch's cuts, which are made
    /// after a newline or at a space, never split one).
    pub fn can_fuse_check(&self, allowed: &SpecialSet, disallowed: &Option<SpecialSet>) -> bool {
        !self.is_generic()
            && self.pattern.is_builtin()
            && self.specials.fused_lead().is_some()
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
            let table = cache.table();
            let (entries, mask) = (table.entries.as_ptr() as *const u8, table.mask * ENTRY_BYTES);
            let cap = out.capacity();
            let arena = &cache.arena;
            // (A slice iterator: the queue is walked by pointer, no index arithmetic.)
            let mut it = q[i..].iter();
            // 0: the queue is done; MISSED: a miss or a piece that is not short; NO_ROOM.
            let broke: u8 = 'fast: loop {
                let Some(p) = it.next() else { break 0 };
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
                        break 'fast MISSED;
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
                        break NO_ROOM;
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
            i = q.len() - it.len() - (broke != 0) as usize;
            // SAFETY: the first `len` ids are initialized.
            unsafe { out.set_len(len) };
            if i == q.len() {
                break;
            }
            slow += self.drain_slow(cache, b, &q[i], broke == NO_ROOM, out) as u64;
            i += 1;
        }
        cache.hits += q.len() as u64 - slow;
    }

    /// The one piece that left the drain's fast loop: a miss, a piece that is not short, or an
    /// arena result with no room left. Out of line, so the fast loop keeps its registers.
    /// `found`: the piece is in the short table (an arena result with no room left); else the
    /// fast loop saw it missing. Returns whether it counts as a slow piece (not a hit).
    #[inline(never)]
    fn drain_slow(&self, cache: &mut WordCache, b: &[u8], p: &Queued, found: bool, out: &mut Vec<u32>) -> bool {
        if p.key == NOT_SHORT {
            // (Counts its own hits.)
            self.encode_piece(cache, &b[p.s..p.e], out);
            return true;
        }
        if found {
            let v = cache.table().get_from(&p.key, p.e / ENTRY_BYTES).expect("a piece the fast loop found");
            cache.emit(v, out);
            return false;
        }
        let e = p.s + (p.key >> 120) as usize;
        self.encode_miss(cache, &b[p.s..e], out);
        true
    }
}
