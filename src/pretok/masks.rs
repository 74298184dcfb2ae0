//! Class bitmasks of a 64-byte window, for the scanners' block paths.
//!
//! A scanner that decides piece boundaries one piece at a time has a serial dependency from
//! each piece's start to the next (load the byte, classify it, find the run end), which on
//! English (4–5 bytes per piece) costs ~13 cycles per piece however short the run tests are.
//! The block paths instead classify 64 bytes at once into one `u64` per class (bit `j` =
//! byte `p + j`), derive *all* piece starts of the window with a few shifts and ands, and
//! then only pop bits. The classification is SSE2 intrinsics (x86-64 baseline; in the copies
//! compiled for x86-64-v3, see `pretok::v3`, the same intrinsics get the 3-operand AVX forms);
//! elsewhere a byte loop over the ASCII class table gives the same masks.
//!
//! The SIMD step classifies ASCII only; [`add_non_ascii`] then decodes the window's non-ASCII
//! chars one by one, as far as the pattern allows, and the window is trusted only up to a few
//! bytes before the first char it could not take (the scanners' per-char path goes on there).

use super::chars::*;
use crate::unicode_tables::fold_non_ascii_contraction_letter;

/// Class masks of the 64 bytes at `p`: bit `j` describes byte `p + j`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Masks {
    /// `[A-Za-z]`
    pub letter: u64,
    /// `[a-z]`
    pub lower: u64,
    /// `[0-9]`
    pub digit: u64,
    /// ASCII whitespace: `\t \n \v \f \r` and space (the ASCII members of `\s`).
    pub ws: u64,
    /// `' '`
    pub space: u64,
    /// `'\''`
    pub apos: u64,
    /// `\r` or `\n`
    pub crlf: u64,
    /// `'/'` (o200k's "other"-run tail `[\r\n/]*`; a scanner that does not read it pays nothing:
    /// `classify` is inlined and the unused compare is dropped)
    pub slash: u64,
    /// ASCII control chars that are not whitespace (`\0`..`\x08`, `\x0e`..`\x1f`, `\x7f`):
    /// none of DeepSeek-V3's classes, so its window stops there (unused elsewhere, and dropped)
    pub ctl: u64,
    /// bytes >= 0x80 (parts of non-ASCII chars)
    pub high: u64,
    /// bytes 0x80..=0xBF (UTF-8 continuation bytes)
    pub cont: u64,
    /// bytes >= 0x80, as classified (`high` loses the chars [`add_non_ascii`] takes)
    pub high0: u64,
}

/// Classifies the 64 bytes at `p` (`p + 64 <= b.len()`).
#[inline(always)]
pub fn classify(b: &[u8], p: usize) -> Masks {
    assert!(p + 64 <= b.len());
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of the x86-64 baseline; the 64 bytes at `p` are in bounds
        // (asserted above) and `_mm_loadu_si128` has no alignment requirement.
        unsafe { classify_sse2(b, p) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        classify_table(b, p)
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn classify_sse2(b: &[u8], p: usize) -> Masks {
    use std::arch::x86_64::*;
    // Unsigned `v - lo < len` as a signed compare: `(v - lo) ^ 0x80 < len ^ 0x80`.
    #[inline(always)]
    unsafe fn below(t: __m128i, len: i8) -> __m128i {
        _mm_cmplt_epi8(_mm_xor_si128(t, _mm_set1_epi8(-128)), _mm_set1_epi8(len ^ -128))
    }
    let mut m = Masks { letter: 0, lower: 0, digit: 0, ws: 0, space: 0, apos: 0, crlf: 0, slash: 0, ctl: 0, high: 0, cont: 0, high0: 0 };
    for k in 0..4 {
        let v = _mm_loadu_si128(b.as_ptr().add(p + 16 * k) as *const __m128i);
        let sh = 16 * k;
        let mask = |x: __m128i| ((_mm_movemask_epi8(x) as u32 & 0xffff) as u64) << sh;
        let lower = below(_mm_sub_epi8(v, _mm_set1_epi8(b'a' as i8)), 26);
        let letter = below(_mm_sub_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8(b'a' as i8)), 26);
        let digit = below(_mm_sub_epi8(v, _mm_set1_epi8(b'0' as i8)), 10);
        let space = _mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8));
        let ctl = below(_mm_sub_epi8(v, _mm_set1_epi8(9)), 5); // \t \n \v \f \r
        let crlf = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8)), _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\r' as i8)));
        m.letter |= mask(letter);
        m.lower |= mask(lower);
        m.digit |= mask(digit);
        m.space |= mask(space);
        m.ws |= mask(_mm_or_si128(space, ctl));
        m.apos |= mask(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\'' as i8)));
        m.crlf |= mask(crlf);
        m.slash |= mask(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'/' as i8)));
        // Signed `v < 0x20` also holds for bytes >= 0x80, cleared below.
        m.ctl |= mask(_mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)), _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f))));
        m.high |= mask(v);
        // 0x80..=0xBF are -128..=-65 as i8.
        m.cont |= mask(_mm_cmplt_epi8(v, _mm_set1_epi8(-64)));
    }
    m.ctl &= !(m.high | m.ws);
    m.high0 = m.high;
    m
}

/// Bit `j` set iff byte `p + j` is `x`, for the 64 bytes at `p` (`p + 64 <= b.len()`): the
/// encoder's check for special tokens, on a window the scanner just classified.
#[inline(always)]
pub fn eq_mask(b: &[u8], p: usize, x: u8) -> u64 {
    assert!(p + 64 <= b.len());
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86-64 baseline; the 64 bytes at `p` are in bounds (asserted
    // above) and `_mm_loadu_si128` has no alignment requirement.
    unsafe {
        use std::arch::x86_64::*;
        let xs = _mm_set1_epi8(x as i8);
        let mut m = 0u64;
        for k in 0..4 {
            let v = _mm_loadu_si128(b.as_ptr().add(p + 16 * k) as *const __m128i);
            m |= ((_mm_movemask_epi8(_mm_cmpeq_epi8(v, xs)) as u32 & 0xffff) as u64) << (16 * k);
        }
        m
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (0..64).filter(|&j| b[p + j] == x).fold(0u64, |m, j| m | 1u64 << j)
    }
}

/// Portable [`classify`] (also the test oracle for the SSE2 version).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub fn classify_table(b: &[u8], p: usize) -> Masks {
    let mut m = Masks { letter: 0, lower: 0, digit: 0, ws: 0, space: 0, apos: 0, crlf: 0, slash: 0, ctl: 0, high: 0, cont: 0, high0: 0 };
    for j in 0..64 {
        let c = b[p + j];
        let bit = 1u64 << j;
        if c >= 0x80 {
            m.high |= bit;
            m.high0 |= bit;
            if c < 0xC0 {
                m.cont |= bit;
            }
            continue;
        }
        let cls = ascii_class(c);
        if cls & L != 0 {
            m.letter |= bit;
        }
        if cls & LO != 0 {
            m.lower |= bit;
        }
        if cls & N != 0 {
            m.digit |= bit;
        }
        if cls & WS != 0 {
            m.ws |= bit;
        }
        if c == b' ' {
            m.space |= bit;
        }
        if c == b'\'' {
            m.apos |= bit;
        }
        if c == b'\n' || c == b'\r' {
            m.crlf |= bit;
        }
        if c == b'/' {
            m.slash |= bit;
        }
        if (c < 0x20 && cls & WS == 0) || c == 0x7f {
            m.ctl |= bit;
        }
    }
    m
}

/// Bit `j` of the result is bit `j - 1` of `m` (bit 0 reads 0): "the byte before is in `m`".
#[inline(always)]
pub fn prev(m: u64) -> u64 {
    m << 1
}

/// Bit `j` of the result is bit `j + 1` of `m` (bit 63 reads 0): "the byte after is in `m`".
#[inline(always)]
pub fn next(m: u64) -> u64 {
    m >> 1
}

/// What a scanner's window path can take of a non-ASCII char (everything else stops the
/// window's trusted part at that char).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum NonAscii {
    /// GPT-2: letters, numbers and "other" (marks, punctuation, symbols); not whitespace.
    Gpt2,
    /// cl100k: letters that cannot be part of a contraction (`ſ` can), and "other" (marks
    /// too); not numbers (`\p{N}{1,3}` counts chars, the window bytes) or whitespace.
    Cl100k,
    /// Qwen3.5: as cl100k, with marks as letters (its words are `[\p{L}\p{M}]+`).
    Qwen35,
    /// DeepSeek-V3: letters, marks (as letters) and P/S chars outside its CJK ranges (CJK
    /// chars and numbers end segments); not whitespace or chars of none of its classes.
    DeepSeek,
    /// o200k: only "other" (not letters or marks, whose upper/lower classes overlap; not
    /// numbers or whitespace).
    O200k,
    /// Kimi: as o200k, and not Han chars (their runs are pieces of their own, and a Han
    /// symbol such as a radical is no "other" char at a piece's start).
    Kimi,
}

/// Classifies the non-ASCII chars of a window one by one (decode + class table): letters and
/// numbers set the `letter`/`digit` bits of all their bytes, "other" chars set nothing (as
/// ASCII punctuation). Clears their bytes from `high`, up to the first char that `policy`
/// cannot take, so [`trusted`] stops there.
///
/// Why: English has a curly quote or dash in one window of five; without this each of them
/// cut a window short and sent a few pieces down the per-char path.
#[inline(always)]
pub fn add_non_ascii(b: &[u8], p: usize, m: &mut Masks, policy: NonAscii) {
    let mut leads = m.high & !m.cont;
    while leads != 0 {
        let j = leads.trailing_zeros() as usize;
        leads &= leads - 1;
        let (cp, len) = decode_non_ascii(b, p + j, at(b, p + j));
        let cls = class_of_valid(cp);
        let take = match policy {
            NonAscii::Gpt2 => cls & WS == 0,
            NonAscii::Cl100k | NonAscii::Qwen35 => {
                cls & (WS | N) == 0 && (cls & L == 0 || fold_non_ascii_contraction_letter(cp) == 0)
            }
            NonAscii::O200k => cls & (WS | N | L | M) == 0,
            NonAscii::Kimi => cls & (WS | N | L | M) == 0 && !is_han(cp),
            NonAscii::DeepSeek => {
                cls & (PS | L | M) != 0 && !(0x3040..=0x30FF).contains(&cp) && !(0x4E00..=0x9FA5).contains(&cp)
            }
        };
        if !take {
            return;
        }
        let bits = if j + len >= 64 { !0u64 << j } else { ((1u64 << len) - 1) << j };
        if cls & L != 0 || (matches!(policy, NonAscii::Qwen35 | NonAscii::DeepSeek) && cls & M != 0) {
            m.letter |= bits;
        } else if cls & N != 0 {
            m.digit |= bits;
        }
        m.high &= !bits;
    }
}

/// The bytes of the chars that begin at the bits of `seed` (lead bytes or ASCII): extends each
/// seed over the run of continuation bytes in `cont` that follows it. By carry propagation, as
/// in [`other_run_tails`]: adding the bit after each seed to `cont` clears the run it starts
/// (4 operations, where three shift-and-or rounds took 9; both give the same bits on valid
/// UTF-8, whose runs have at most three bytes, see the test).
#[inline(always)]
pub fn whole_chars(seed: u64, cont: u64) -> u64 {
    seed | (cont & !cont.wrapping_add(prev(seed)))
}

/// How far (bit index, exclusive) the piece starts of a window at `p` may be trusted, given
/// that a start at `j` depends on bytes up to `j + lookahead`: the window end, or the first
/// non-ASCII byte, minus the look-ahead. 0 or 1 means "nothing useful here".
#[inline(always)]
pub fn trusted(m: &Masks, lookahead: u32) -> u32 {
    let h = if m.high == 0 { 64 } else { m.high.trailing_zeros() };
    h.saturating_sub(lookahead + 1)
}

/// Index just past the highest bit below `k` that is clear in `m` (0 if none): where the run
/// of set bits that ends at bit `k - 1` starts (`k` itself if bit `k - 1` is clear).
#[inline(always)]
pub fn run_start_below(m: u64, k: u32) -> u32 {
    let below = !m & if k >= 64 { !0 } else { (1u64 << k) - 1 };
    if below == 0 {
        0
    } else {
        64 - below.leading_zeros()
    }
}

/// The piece starts cl100k and o200k share (they differ in where a word begins, `word`, and in
/// what an "other" run and a word may take after them), and the mask of "other" (O) bytes:
/// * a whitespace run starts a piece; a non-CR/LF char right after CR/LF starts one (the
///   `\s*[\r\n]` piece ends there); the last char before non-whitespace is given back
///   (`\s+(?!\S)`) unless it is the run's first;
/// * a word starts a piece unless its prefix joins it: a non-CR/LF whitespace char, or the
///   first char of an O run that is not led by a space (not after another O, whose run is
///   taken whole, nor after a space, which the O run takes along: `" (a"` is `" ("`, `"a"`);
/// * a run of digits starts a piece; an O run starts one unless a space leads it.
#[inline(always)]
pub fn prefix_word_starts(m: &Masks, word: u64) -> (u64, u64) {
    let w = m.ws;
    let t = w & !m.crlf;
    let o = !(m.letter | m.digit | w);
    // (The prefix's bytes: it may be a multi-byte char such as `“`.)
    let first_o = whole_chars(o & !prev(o) & !prev(m.space), m.cont & o);
    let attach = word & (prev(t) | prev(first_o));
    let st = (w & !prev(w))
        | (t & (prev(m.crlf) | (prev(w) & next(!w))))
        | (word & !attach)
        | (m.digit & !prev(m.digit))
        | (o & !prev(o) & !prev(m.space))
        | 1;
    (st, o)
}

/// Shared whitespace limits of cl100k and o200k, whose `\s*[\r\n]` alternative ends after
/// the *last* CR/LF of a whitespace run: trust only starts before a run that has CR/LF after
/// other whitespace (`" \n"`, rare; left to the per-char path), before a run that reaches the
/// window's end (it may still end with a CR/LF), and before a run that reaches a non-ASCII char
/// the window did not take (it may be whitespace, `\x85` or `\u3000`, and continue the run).
///
/// Without branches: each limit is [`run_start_below`] at a bit index that is 64 when the
/// shape is absent, which then gives the start of a run reaching the window's end (or 64), a
/// limit that applies anyway. At a non-ASCII char at `h` after a non-whitespace byte it gives
/// `h`, above any `lim` (trust stops `lookahead + 1` bytes before `h`). The version with a
/// branch per shape mispredicted on the window's last byte being whitespace (about one English
/// window in five) and on non-ASCII chars: o200k's scanner alone ran 2,225 -> 2,385 MB/s on
/// English with the limit left out, and this form takes most of that back (see
/// [`crlf_run_limit_branchy`], its test oracle).
#[inline(always)]
pub fn crlf_run_limit(m: &Masks, lim: u32) -> u32 {
    let t = m.ws & !m.crlf;
    let bad = (m.crlf & prev(t)).trailing_zeros(); // bit 0 of `prev` is clear: 1..=64
    // 64 without non-ASCII bytes: then the start of a run reaching the window's end. With one
    // at h, such a run starts above h (bytes >= 0x80 are not in `ws`), past `lim`.
    let high = m.high.trailing_zeros().max(1); // 0 leaves `lim` < 2 anyway
    lim.min(run_start_from(m.ws, bad)).min(run_start_from(m.ws, high))
}

/// [`run_start_below`] for `1 <= k <= 64`, without a branch.
#[inline(always)]
fn run_start_from(m: u64, k: u32) -> u32 {
    debug_assert!((1..=64).contains(&k));
    64 - (!m & (u64::MAX >> (64 - k))).leading_zeros()
}

/// [`crlf_run_limit`] written with a branch per shape (the test oracle).
#[cfg(test)]
pub fn crlf_run_limit_branchy(m: &Masks, lim: u32) -> u32 {
    let mut lim = lim;
    let t = m.ws & !m.crlf;
    let bad = m.crlf & prev(t);
    if bad != 0 {
        lim = lim.min(run_start_below(m.ws, bad.trailing_zeros()));
    }
    if m.ws >> 63 != 0 {
        lim = lim.min(run_start_below(m.ws, 64));
    }
    if m.high != 0 {
        let h = m.high.trailing_zeros();
        if h > 0 && (m.ws >> (h - 1)) & 1 != 0 {
            lim = lim.min(run_start_below(m.ws, h));
        }
    }
    lim
}

/// The tail of an "other" run (`[\r\n]*` in cl100k, `[\r\n/]*` in o200k; `tail` holds the
/// bytes it may contain): CR/LF right after an "other" char, and then more of `tail`, belong to
/// that piece. Clears the starts inside each such tail, sets one right after it, and returns
/// the tails' end positions (bits).
///
/// With bits, no byte loop (code ends most lines with `;` `{` `)` and a newline, so most
/// windows there have one or two tails): adding the seeds to `tail` carries each seed through
/// the rest of its run of tail bytes, so the sum has a bit just past every seeded run (the
/// carry out of bit 63 is dropped: a tail reaching the window's end has no end in it), and the
/// tail bits the carry cleared, with the seeds themselves, are the bytes inside the tails.
#[inline(always)]
pub fn other_run_tails(m: &Masks, other: u64, tail: u64, st: &mut u64) -> u64 {
    let seeds = m.crlf & prev(other);
    debug_assert!(seeds & !tail == 0);
    let sum = tail.wrapping_add(seeds);
    let inside = ((sum ^ tail) & tail) | seeds;
    let ends = sum & !tail;
    *st = (*st & !inside) | ends;
    ends
}

/// [`contraction_ci`] for the window paths: the length (2 or 3) of `'s 't 'm 'd 're 've 'll`,
/// any case, at `i` (an apostrophe), or 0, from one 4-byte load (`i + 4 <= b.len()`). Exact
/// there because a window trusts a start only while the bytes up to 3 past it are ASCII or
/// chars it took, and no taken char folds to a contraction letter (`ſ` does, and no window
/// takes it). The general version decodes and folds chars and is out of line: a call per
/// apostrophe cost the o200k window path ~5% on English.
#[inline(always)]
pub fn window_contraction_ci(b: &[u8], i: usize) -> usize {
    // OR-ing 0x20 lowercases an ASCII letter and maps no other byte onto a lowercase letter.
    let w = u32::from_le_bytes(b[i..i + 4].try_into().unwrap()) | 0x2020_2000;
    debug_assert_eq!(w as u8, b'\'');
    let c1 = (w >> 8) as u8;
    let c12 = (w >> 8) as u16;
    if matches!(c1, b's' | b't' | b'm' | b'd') {
        2
    } else if c12 == u16::from_le_bytes(*b"re") || c12 == u16::from_le_bytes(*b"ve") || c12 == u16::from_le_bytes(*b"ll") {
        3
    } else {
        0
    }
}

/// Numbers in pieces of up to three digits from the start of their run (`\p{N}{1,3}`): adds a
/// start every three digits in runs longer than three. Bit 0 must be a piece start.
#[inline(always)]
pub fn digit_chunks(digit: u64, st: &mut u64) {
    let mut long = digit & prev(digit) & prev(prev(digit)) & prev(prev(prev(digit)));
    while long != 0 {
        let j = long.trailing_zeros();
        let run_start = run_start_below(digit, j);
        // First non-digit at or after j (64 if the run reaches the window's end).
        let run_end = (j + (!digit >> j).trailing_zeros()).min(64);
        let mut k = run_start + 3;
        while k < run_end {
            *st |= 1u64 << k;
            k += 3;
        }
        long &= if run_end >= 64 { 0 } else { !0u64 << run_end };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_chars_by_carry_equals_three_rounds() {
        let rounds = |seed: u64, cont: u64| {
            let mut x = seed;
            for _ in 0..3 {
                x |= prev(x) & cont;
            }
            x
        };
        let mut r = 1u64;
        for _ in 0..200_000 {
            r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // A window of UTF-8 byte kinds: ASCII, lead, or up to three continuation bytes
            // after a lead; seeds on some ASCII and lead bytes.
            let (mut cont, mut lead, mut j, mut x) = (0u64, 0u64, 0, r);
            while j < 64 {
                x = x.rotate_left(7) ^ 0x9E37_79B9_7F4A_7C15;
                if x & 3 == 0 {
                    lead |= 1 << j;
                    let n = (x >> 2) as usize % 4;
                    for k in 1..=n {
                        if j + k < 64 {
                            cont |= 1 << (j + k);
                        }
                    }
                    j += n + 1;
                } else {
                    j += 1;
                }
            }
            let seed = !cont & (r ^ lead);
            assert_eq!(whole_chars(seed, cont), rounds(seed, cont), "seed {seed:x} cont {cont:x}");
        }
    }

    #[test]
    fn branchless_crlf_run_limit_equals_the_branchy_one() {
        let mut r = 7u64;
        let mut rnd = || {
            r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            r ^ (r >> 29)
        };
        for _ in 0..300_000 {
            // Windows of whitespace-heavy random bytes, with CR/LF among the whitespace and a
            // first non-ASCII byte somewhere (or none), and `lim` as `trusted` makes it.
            let (a, b, c) = (rnd(), rnd(), rnd());
            let ws = a | (b & c);
            let crlf = ws & rnd() & rnd();
            let h = rnd() % 80;
            let high = if h >= 64 { 0 } else { (!0u64 << h) & (rnd() | 1u64 << h) & !ws };
            let mut m = classify_table(&[b'a'; 64], 0);
            m.ws = ws;
            m.crlf = crlf;
            m.high = high;
            for look in [2, 3] {
                let lim = trusted(&m, look);
                assert_eq!(crlf_run_limit(&m, lim), crlf_run_limit_branchy(&m, lim), "ws {ws:x} crlf {crlf:x} high {high:x} lim {lim}");
            }
        }
    }

    #[test]
    fn sse2_and_table_classifications_agree() {
        let bytes: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).chain(b"a'Z{ /\r\n`@[".iter().copied()).collect();
        for p in 0..bytes.len() - 64 {
            let m = classify(&bytes, p);
            assert_eq!(m, classify_table(&bytes, p), "p={p}");
            let slash = (0..64).filter(|&j| bytes[p + j] == b'/').fold(0u64, |m, j| m | 1u64 << j);
            assert_eq!(m.slash, slash, "p={p}");
            for x in [b'<', 0, 0x80, 0xff, b'/'] {
                let want = (0..64).filter(|&j| bytes[p + j] == x).fold(0u64, |m, j| m | 1u64 << j);
                assert_eq!(eq_mask(&bytes, p, x), want, "p={p} x={x}");
            }
        }
    }
}
