//! Character classification and run scanning shared by the hand-written scanners.
//!
//! All functions take the text as bytes of a valid `&str` and a byte position that is a char
//! boundary (`i <= b.len()`); they return byte positions that are char boundaries too.
//!
//! Performance notes (figures: thread CPU time, 8 MB of each corpus, on a busy 2-core VM):
//! * Each scanner starts a piece with a few byte tests for the common ASCII shapes (" word",
//!   "word", "\n", punctuation, digits) written as *branches*: the branch predictor then
//!   speculates the piece shape and the only serial dependency from one piece start to the
//!   next is "find the end of the run". A `cmov`/select on the first byte instead put a load
//!   on that chain and cost ~40% on word-only text.
//! * Word ends come from [`Blocks`]: member bits of an aligned 64-byte block computed once
//!   (SSE2 compares + movemask; SWAR elsewhere) and then `tzcnt(!bits >> offset)` per word.
//!   This took GPT-2 on English from ~770 to ~1000 MB/s versus 8-byte SWAR per word, whose
//!   load -> arithmetic -> `tzcnt` latency (~14 cycles) sat on the chain for every piece.
//! * Other runs of ASCII letters, lowercase/uppercase letters and spaces use SWAR on a `u64`
//!   (one unaligned load, a few adds/ands, `trailing_zeros`), tried only after an ASCII
//!   member so that runs of CJK or Cyrillic do not pay for a load that always fails.
//! * ASCII is classified by one 128-entry table lookup; only bytes >= 0x80 decode a UTF-8
//!   sequence and go through the two-level Unicode table (~40 KB, unchecked indexing: the
//!   code point of a valid `&str` is always in range).
//! * Rare work (the contraction after an apostrophe) is out of line so the hot paths stay small.
//! * Bounds: we index with `get_unchecked` only where the index was checked against `b.len()`
//!   just before, or where UTF-8 validity of `&str` guarantees continuation bytes exist.

pub use crate::unicode_tables::{L, LO, M, N, PS, UP, WS};
use crate::unicode_tables::{fold_non_ascii_contraction_letter, ASCII, BLOCKS, BLOCK_INDEX};
pub use crate::unicode_tables::is_han;
#[cfg(test)]
use crate::unicode_tables::class_of;

/// Byte `i` of `b`; `i < b.len()` must hold (callers check it).
#[inline(always)]
pub fn at(b: &[u8], i: usize) -> u8 {
    debug_assert!(i < b.len());
    // SAFETY: every caller checks `i < b.len()` first.
    unsafe { *b.get_unchecked(i) }
}

/// Decodes the code point starting at byte `i` (a char boundary, `i < b.len()`), whose lead
/// byte `c0 >= 0x80`. Returns (code point, byte length).
#[inline(always)]
pub fn decode_non_ascii(b: &[u8], i: usize, c0: u8) -> (u32, usize) {
    // `b` is valid UTF-8 and `i` a boundary, so the continuation bytes exist.
    let c1 = (at(b, i + 1) & 0x3f) as u32;
    if c0 < 0xE0 {
        (((c0 as u32 & 0x1f) << 6) | c1, 2)
    } else if c0 < 0xF0 {
        let c2 = (at(b, i + 2) & 0x3f) as u32;
        (((c0 as u32 & 0x0f) << 12) | (c1 << 6) | c2, 3)
    } else {
        let c2 = (at(b, i + 2) & 0x3f) as u32;
        let c3 = (at(b, i + 3) & 0x3f) as u32;
        (((c0 as u32 & 0x07) << 18) | (c1 << 12) | (c2 << 6) | c3, 4)
    }
}

/// Class bits and byte length of the char at `i` (`i < b.len()`).
#[inline(always)]
pub fn class_at(b: &[u8], i: usize) -> (u8, usize) {
    let c = at(b, i);
    if c < 0x80 {
        (ASCII[c as usize], 1)
    } else {
        class_non_ascii(b, i, c)
    }
}

#[inline(always)]
pub fn class_non_ascii(b: &[u8], i: usize, c0: u8) -> (u8, usize) {
    class_non_ascii_h::<false>(b, i, c0)
}

/// [`class_non_ascii`]; with `HAN` (Kimi's letter classes, `[..&&[^\p{Han}]]`), a Han char
/// is in neither `UP` nor `LO` (its other bits stay: it is still `\p{L}` for the prefix and
/// "other" classes). Only chars with `UP` or `LO` are looked up, so punctuation pays nothing.
#[inline(always)]
pub fn class_non_ascii_h<const HAN: bool>(b: &[u8], i: usize, c0: u8) -> (u8, usize) {
    let (cp, len) = decode_non_ascii(b, i, c0);
    let cls = class_of_valid(cp);
    if HAN && cls & (UP | LO) != 0 && is_han(cp) {
        return (cls & !(UP | LO), len);
    }
    (cls, len)
}

/// [`class_or_end`] with [`class_non_ascii_h`]'s `HAN` rule.
#[inline(always)]
pub fn class_or_end_h<const HAN: bool>(b: &[u8], i: usize) -> (u8, usize) {
    if i >= b.len() {
        return (0, 0);
    }
    let c = at(b, i);
    if c < 0x80 {
        (ASCII[c as usize], 1)
    } else {
        class_non_ascii_h::<HAN>(b, i, c)
    }
}

/// End of the run of `\p{Han}` chars starting at `i`.
#[inline(always)]
pub fn han_run(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        let c = at(b, i);
        if c < 0x80 {
            break;
        }
        let (cp, len) = decode_non_ascii(b, i, c);
        if !is_han(cp) {
            break;
        }
        i += len;
    }
    i
}

/// Class bits of the char at `i`, or 0 past the end (0 = "none of the classes", which every
/// caller treats like "the run / optional element stops here").
#[inline(always)]
pub fn class_or_end(b: &[u8], i: usize) -> (u8, usize) {
    if i < b.len() {
        class_at(b, i)
    } else {
        (0, 0)
    }
}

/// [`class_of`] without bounds checks, for code points decoded from a valid `&str`.
#[inline(always)]
pub fn class_of_valid(cp: u32) -> u8 {
    debug_assert!(cp < 0x110000);
    // SAFETY: a `&str` decodes to cp <= 0x10FFFF, so `cp >> 8` < 0x1100 = BLOCK_INDEX.len();
    // the generator only writes block numbers < BLOCKS.len() into BLOCK_INDEX.
    unsafe {
        let blk = *BLOCK_INDEX.get_unchecked((cp >> 8) as usize) as usize;
        *BLOCKS.get_unchecked(blk).get_unchecked((cp & 0xff) as usize)
    }
}

const LO7: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

#[inline(always)]
fn load8(b: &[u8], i: usize) -> u64 {
    debug_assert!(i + 8 <= b.len());
    // SAFETY: callers check `i + 8 <= b.len()`; `read_unaligned` has no alignment needs.
    u64::from_le(unsafe { (b.as_ptr().add(i) as *const u64).read_unaligned() })
}

/// High bit of each byte set iff that byte is in `lo..=hi` (all bytes must be < 0x80 for the
/// result to be meaningful; bytes with the high bit set are masked out by the caller).
#[inline(always)]
fn in_range(x: u64, lo: u8, hi: u8) -> u64 {
    // For a byte v < 0x80: v + (0x80 - lo) has its high bit set iff v >= lo, and no carry
    // crosses into the next byte (v + 0x80 - lo <= 0xff). Same for `> hi` with hi + 1.
    let ge_lo = x.wrapping_add(LO7 * (0x80 - lo) as u64);
    let gt_hi = x.wrapping_add(LO7 * (0x80 - (hi + 1)) as u64);
    ge_lo & !gt_hi & HI
}

/// Which SWAR run test to use for ASCII.
#[derive(Clone, Copy)]
pub enum Swar {
    /// `[A-Za-z]`
    Letter,
    /// `[a-z]`
    Lower,
    /// `[A-Z]`
    Upper,
    /// no SWAR fast path
    None,
}

/// Number of leading bytes of the 8 at `i` that belong to the ASCII run kind `k`.
#[inline(always)]
fn swar_prefix(w: u64, k: Swar) -> u32 {
    let ascii = !w & HI; // high bit set where the byte is ASCII
    let m = match k {
        Swar::Letter => in_range(w | (LO7 * 0x20), b'a', b'z'),
        Swar::Lower => in_range(w, b'a', b'z'),
        Swar::Upper => in_range(w, b'A', b'Z'),
        Swar::None => 0,
    } & ascii;
    // First byte (little endian = lowest) whose high bit is clear in `m` ends the run.
    (!m & HI).trailing_zeros() / 8
}

/// Class bits of an ASCII byte (`c < 0x80`), or `NON_ASCII` for a UTF-8 lead byte.
#[inline(always)]
pub fn ascii_class(c: u8) -> u8 {
    ASCII_OR_MARKER[c as usize]
}

/// A bit no Unicode class uses, marking bytes >= 0x80 in [`ascii_class`].
pub const NON_ASCII: u8 = 0x80;

static ASCII_OR_MARKER: [u8; 256] = {
    let mut t = [NON_ASCII; 256];
    let mut i = 0;
    while i < 128 {
        t[i] = ASCII[i];
        i += 1;
    }
    t
};

/// True for ASCII letters `[A-Za-z]`.
#[inline(always)]
pub fn is_ascii_letter(c: u8) -> bool {
    (c | 0x20).wrapping_sub(b'a') < 26
}

/// End of the maximal run starting at `i` of chars whose class has a bit of `mask`.
/// `k` must describe exactly the ASCII members of `mask` (or be `Swar::None`).
#[inline(always)]
pub fn run(b: &[u8], i: usize, mask: u8, k: Swar) -> usize {
    run_h::<false>(b, i, mask, k)
}

/// [`run`] with [`class_non_ascii_h`]'s `HAN` rule (Han chars are not in `UP` or `LO`).
#[inline(always)]
pub fn run_h<const HAN: bool>(b: &[u8], mut i: usize, mask: u8, k: Swar) -> usize {
    let n = b.len();
    // SWAR first (the caller usually just consumed an ASCII member), then per char. After a
    // non-ASCII char we go straight to the next char instead of trying SWAR on bytes that
    // are probably non-ASCII too (multilingual text), which would always stop at 0.
    loop {
        if !matches!(k, Swar::None) {
            while i + 8 <= n {
                let adv = swar_prefix(load8(b, i), k);
                i += adv as usize;
                if adv < 8 {
                    break;
                }
            }
        }
        loop {
            if i >= n {
                return n;
            }
            let c = at(b, i);
            if c < 0x80 {
                if ASCII[c as usize] & mask == 0 {
                    return i;
                }
                i += 1;
                break; // back to SWAR
            }
            let (cls, len) = class_non_ascii_h::<HAN>(b, i, c);
            if cls & mask == 0 {
                return i;
            }
            i += len;
        }
    }
}

/// Skips bytes of the ASCII run kind `k` eight at a time; stops at the first 8-byte window
/// that is not entirely of that kind (the caller continues per char from there).
#[inline(always)]
pub fn swar_skip(b: &[u8], mut i: usize, k: Swar) -> usize {
    while i + 8 <= b.len() {
        let adv = swar_prefix(load8(b, i), k);
        i += adv as usize;
        if adv < 8 {
            break;
        }
    }
    i
}

/// End of the run of chars that have none of the bits of `mask` (e.g. `[^\s\p{L}\p{N}]+`).
#[inline(always)]
pub fn run_not(b: &[u8], mut i: usize, mask: u8) -> usize {
    let n = b.len();
    while i < n {
        let (cls, len) = class_at(b, i);
        if cls & mask != 0 {
            return i;
        }
        i += len;
    }
    n
}

/// End of the run of `\r`/`\n` bytes (and `/` too if `slash`) starting at `i`.
/// (Not `set.contains(..)`: for `[u8]` that is a memchr call per byte.)
#[inline(always)]
pub fn run_crlf(b: &[u8], mut i: usize, slash: bool) -> usize {
    while i < b.len() {
        let c = at(b, i);
        if !(c == b'\n' || c == b'\r' || (slash && c == b'/')) {
            break;
        }
        i += 1;
    }
    i
}

/// Per-64-byte-block bitmask of ASCII run members, for the hot word paths.
///
/// Why: with [`run`], the end of a word is found by loading 8 bytes at the word start and
/// doing SWAR arithmetic on them, and the next piece's start depends on that result, so each
/// piece pays load latency + SWAR + `tzcnt` on a serial dependency chain (~14 cycles, which
/// is most of the time of a 4-5 byte English piece). Here the member bits of a whole aligned
/// 64-byte block are computed once (SSE2 on x86-64, SWAR elsewhere) off the critical path,
/// and a word end is just `tzcnt(!bits >> offset)`: a shift and a `tzcnt`.
pub struct Blocks {
    base: usize,
    bits: u64,
    kind: Swar,
}

impl Blocks {
    /// `kind` must be `Swar::Letter` or `Swar::Lower`.
    pub fn new(kind: Swar) -> Blocks {
        Blocks { base: usize::MAX, bits: 0, kind }
    }

    /// Same result as `run(b, p, mask, self.kind)`, where `mask` has the same ASCII members
    /// as `self.kind` (L for `Letter`, LO for `Lower`).
    #[inline(always)]
    pub fn run(&mut self, b: &[u8], p: usize, mask: u8) -> usize {
        self.run_h::<false>(b, p, mask)
    }

    /// [`Self::run`] with [`class_non_ascii_h`]'s `HAN` rule.
    #[inline(always)]
    pub fn run_h<const HAN: bool>(&mut self, b: &[u8], mut p: usize, mask: u8) -> usize {
        let n = b.len();
        loop {
            let base = p & !63;
            if base != self.base {
                if base + 64 > n {
                    // Tail of the text: the per-byte/SWAR path.
                    return run_h::<HAN>(b, p, mask, self.kind);
                }
                self.base = base;
                self.bits = block_bits(b, base, self.kind);
            }
            let off = p - base;
            // Bit 0 of `stop` is byte p; zeros shifted in at the top read as "member", so a
            // result past the block end means the run continues into the next block.
            let stop = !self.bits >> off;
            let z = stop.trailing_zeros() as usize;
            if off + z < 64 {
                p += z;
                break;
            }
            p = base + 64;
        }
        // b[p] is not an ASCII member; a non-ASCII char may still be one (e.g. "café").
        if p < n && at(b, p) >= 0x80 {
            return run_h::<HAN>(b, p, mask, self.kind);
        }
        p
    }
}

/// Bit j set iff byte `base + j` is an ASCII member of `kind` (`base + 64 <= b.len()`).
#[inline(always)]
fn block_bits(b: &[u8], base: usize, kind: Swar) -> u64 {
    debug_assert!(base + 64 <= b.len());
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86-64 baseline; the 64 bytes are in bounds (checked by
        // the caller) and `_mm_loadu_si128` has no alignment requirement.
        unsafe {
            let fold = match kind {
                Swar::Letter => _mm_set1_epi8(0x20),
                _ => _mm_setzero_si128(),
            };
            let a = _mm_set1_epi8(b'a' as i8);
            let flip = _mm_set1_epi8(-128);
            // unsigned (v - 'a') < 26  <=>  signed ((v - 'a') ^ 0x80) < (26 ^ 0x80) = -102.
            // Bytes >= 0x80 give v - 'a' >= 0x1f, so they never count.
            let lim = _mm_set1_epi8(-102);
            let mut bits = 0u64;
            for k in 0..4 {
                let v = _mm_loadu_si128(b.as_ptr().add(base + 16 * k) as *const __m128i);
                let t = _mm_sub_epi8(_mm_or_si128(v, fold), a);
                let m = _mm_cmplt_epi8(_mm_xor_si128(t, flip), lim);
                bits |= ((_mm_movemask_epi8(m) as u32 & 0xffff) as u64) << (16 * k);
            }
            bits
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        block_bits_swar(b, base, kind)
    }
}

/// Portable version of [`block_bits`].
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn block_bits_swar(b: &[u8], base: usize, kind: Swar) -> u64 {
    let mut bits = 0u64;
    for k in 0..8 {
        let w = load8(b, base + 8 * k);
        let ascii = !w & HI;
        let m = match kind {
            Swar::Letter => in_range(w | (LO7 * 0x20), b'a', b'z'),
            Swar::Lower => in_range(w, b'a', b'z'),
            Swar::Upper => in_range(w, b'A', b'Z'),
            Swar::None => 0,
        } & ascii;
        // Gather the eight high bits into one byte (bit j = byte j).
        let packed = (((m >> 7) & LO7).wrapping_mul(0x0102_0408_1020_4080)) >> 56;
        bits |= packed << (8 * k);
    }
    bits
}

/// Facts about a maximal whitespace run starting at `i` (which must be whitespace).
pub struct WsRun {
    /// End of the run.
    pub end: usize,
    /// Start of the run's last char.
    pub last: usize,
    /// End of the last `\r` or `\n` in the run, or 0 if there is none.
    pub crlf_end: usize,
}

#[inline(always)]
pub fn ws_run(b: &[u8], mut i: usize) -> WsRun {
    let n = b.len();
    let mut last = i;
    let mut crlf_end = 0;
    while i < n {
        let c = at(b, i);
        if c == b' ' {
            // Long runs of spaces (indentation in code): skip 8 at a time. `w ^ 0x2020..`
            // has a zero byte exactly where `w` has a space.
            let mut j = i + 1;
            while j + 8 <= n {
                let adv = ((load8(b, j) ^ (LO7 * 0x20)).trailing_zeros() / 8) as usize;
                j += adv;
                if adv < 8 {
                    break;
                }
            }
            while j < n && at(b, j) == b' ' {
                j += 1;
            }
            last = j - 1;
            i = j;
            continue;
        }
        let (cls, len) = if c < 0x80 { (ASCII[c as usize], 1) } else { class_non_ascii(b, i, c) };
        if cls & WS == 0 {
            break;
        }
        if c == b'\n' || c == b'\r' {
            crlf_end = i + 1;
        }
        last = i;
        i += len;
    }
    WsRun { end: i, last, crlf_end }
}

/// The lowercase ASCII letter that the char at `i` matches case-insensitively among the
/// contraction letters, or 0; plus the char's byte length.
#[inline(always)]
pub fn fold_at(b: &[u8], i: usize) -> (u8, usize) {
    if i >= b.len() {
        return (0, 0);
    }
    let c = at(b, i);
    if c < 0x80 {
        // `| 0x20` lowercases ASCII letters and maps no other byte into `a..=z`.
        let l = c | 0x20;
        (if l.is_ascii_lowercase() { l } else { 0 }, 1)
    } else {
        let (cp, len) = decode_non_ascii(b, i, c);
        (fold_non_ascii_contraction_letter(cp), len)
    }
}

/// Length in bytes of `'(?i:s|t|m|d|re|ve|ll)` at `i` (the contraction suffix of cl100k and
/// o200k), or 0 if there is none. All alternatives start with different letters, so the
/// first letter decides which one can match.
#[inline(always)]
pub fn contraction_ci(b: &[u8], i: usize) -> usize {
    // The apostrophe test is inlined into the hot word paths; the rest is rare and out of line.
    if i >= b.len() || at(b, i) != b'\'' {
        return 0;
    }
    contraction_ci_after_apostrophe(b, i)
}

#[inline(never)]
fn contraction_ci_after_apostrophe(b: &[u8], i: usize) -> usize {
    let (l1, n1) = fold_at(b, i + 1);
    match l1 {
        b's' | b't' | b'm' | b'd' => 1 + n1,
        b'r' | b'v' | b'l' => {
            let want = if l1 == b'l' { b'l' } else { b'e' };
            let (l2, n2) = fold_at(b, i + 1 + n1);
            if l2 == want {
                1 + n1 + n2
            } else {
                0
            }
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swar_runs() {
        let s = b"abcdefghijklmnopQRS tuv";
        assert_eq!(run(s, 0, L, Swar::Letter), 19);
        assert_eq!(run(s, 0, LO, Swar::Lower), 16);
        assert_eq!(run(s, 16, UP, Swar::Upper), 19);
        let s = "abcdefgh\u{e9}ijklmnop\u{2014}x".as_bytes();
        assert_eq!(run(s, 0, L, Swar::Letter), 18);
        let s = b"@[`{abcdefgh";
        assert_eq!(run(s, 0, L, Swar::Letter), 0);
        assert_eq!(run(s, 4, L, Swar::Letter), 12);
    }

    #[test]
    fn unchecked_lookup_matches_checked() {
        for cp in (0..0x110000u32).filter(|c| !(0xD800..0xE000).contains(c)) {
            assert_eq!(class_of_valid(cp), class_of(cp));
            let s = char::from_u32(cp).unwrap().to_string();
            assert_eq!(class_at(s.as_bytes(), 0), (class_of(cp), s.len()));
        }
    }

    #[test]
    fn blocks_match_run() {
        let text = "The quick brown fox jumps over the lazy dog, caf\u{e9} na\u{ef}ve \
                    abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzABCDEFGHIJ \
                    x1y2 Zz\u{3b1}\u{3b2}end"
            .repeat(7);
        let b = text.as_bytes();
        for (kind, mask) in [(Swar::Letter, L), (Swar::Lower, LO)] {
            let mut blocks = Blocks::new(kind);
            for p in (0..b.len()).filter(|&p| text.is_char_boundary(p)) {
                assert_eq!(blocks.run(b, p, mask), run(b, p, mask, kind), "p={p}");
            }
        }
    }

    #[test]
    fn block_bits_sse2_and_swar_agree() {
        let bytes: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).chain(b"aZ{`@[".iter().copied()).collect();
        for base in 0..bytes.len() - 64 {
            for kind in [Swar::Letter, Swar::Lower] {
                let want: u64 = (0..64)
                    .filter(|&j| {
                        let c = bytes[base + j];
                        match kind {
                            Swar::Letter => c.is_ascii_alphabetic(),
                            _ => c.is_ascii_lowercase(),
                        }
                    })
                    .map(|j| 1u64 << j)
                    .sum();
                assert_eq!(block_bits(&bytes, base, kind), want);
                assert_eq!(block_bits_swar(&bytes, base, kind), want);
            }
        }
    }

    #[test]
    fn ws_runs() {
        let s = b"            x";
        let r = ws_run(s, 0);
        assert_eq!((r.end, r.last, r.crlf_end), (12, 11, 0));
        let s = b"  \n        \n      ";
        let r = ws_run(s, 0);
        assert_eq!((r.end, r.last, r.crlf_end), (s.len(), s.len() - 1, 12));
    }
}
