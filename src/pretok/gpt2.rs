//! Scanner for the GPT-2 / r50k pattern:
//! `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//!
//! Derivation (leftmost alternative that matches at the current position wins):
//! * `'` followed by `s t m d` (2 chars) or `re ve ll` (3 chars), case-sensitive.
//! * The three ` ?X+` alternatives are mutually exclusive at a given position: a leading
//!   space is taken only when the next char is of class X, and the classes L, N and "other"
//!   (`[^\s\p{L}\p{N}]`) are disjoint. Nothing follows `X+`, so greed never backtracks.
//! * Whitespace: `\s+(?!\S)` takes the maximal run `i..k` if it reaches the end of the text,
//!   else gives back the run's last char (the look-ahead then sees whitespace), provided at
//!   least one char remains; otherwise `\s+` takes the single whitespace char.
//!   So `"  x"` → `" "`, `" x"` and `"\n\nx"` → `"\n"`, `"\n"`, `"x"`.
//!
//! Every char is in exactly one of `'`/L/N/other/whitespace, so the pieces tile the text.
//!
//! Performance: the first byte is dispatched through the ASCII class table; letter runs use
//! the SWAR scan of [`run`]. A typical English piece (" word") is: one compare for the space,
//! one table lookup for the next byte, one SWAR load for the letters.

use super::chars::*;
use super::masks::*;
use super::PieceSink;

#[inline(always)]
pub fn scan(text: &str, f: &mut impl PieceSink) {
    let mut blk = Blocks::new(Swar::Letter);
    scan_windows!(text.as_bytes(), f, LOOKAHEAD, NonAscii::Gpt2, |b: &[u8], p: usize, m: &Masks, lim: u32| (window_starts(b, p, m), lim), piece_end, blk);
}

/// A start at `j` depends on bytes up to `j + 2` (the longest contraction suffix, `'re`).
const LOOKAHEAD: u32 = 2;

/// Bit `j` set iff a piece starts at byte `p + j`, for a window whose byte `p` starts a piece
/// and whose bytes are ASCII (bits past [`trusted`] are not meaningful). From the derivation
/// above, with X = any non-whitespace class (letter, digit, other):
/// * a change of class (letter / digit / whitespace / other) starts a piece, except that an X
///   char after a space belongs to that space's piece (` ?X+`);
/// * a space before an X char starts a piece (it joins that X run);
/// * the last char of a whitespace run followed by X starts a piece (`\s+(?!\S)` gives it
///   back), unless it is also the first;
/// * an apostrophe that starts a piece and is followed by `s t m d re ve ll` is a contraction:
///   nothing starts inside it and a piece starts right after it.
#[inline(always)]
fn window_starts(b: &[u8], p: usize, m: &Masks) -> u64 {
    let x = !m.ws;
    let change = (m.letter ^ prev(m.letter)) | (m.digit ^ prev(m.digit)) | (m.ws ^ prev(m.ws));
    let mut st = (change & !(prev(m.space) & x)) | (m.space & next(x)) | (m.ws & prev(m.ws) & next(x)) | 1;
    let mut c = m.apos & st;
    while c != 0 {
        let j = c.trailing_zeros() as usize;
        c &= c - 1;
        let len = contraction_len(b, p + j);
        if len != 0 && j + len < 64 {
            st &= !(((1u64 << (len - 1)) - 1) << (j + 1));
            st |= 1u64 << (j + len);
        }
    }
    st
}

/// Length of the case-sensitive contraction `'s 't 'm 'd 're 've 'll` at `i` (an apostrophe),
/// or 0 (also when the text ends first).
#[inline(always)]
fn contraction_len(b: &[u8], i: usize) -> usize {
    let after = |k: usize| b.get(i + k).copied().unwrap_or(0);
    match after(1) {
        b's' | b't' | b'm' | b'd' => 2,
        b'r' | b'v' => 3 * (after(2) == b'e') as usize,
        b'l' => 3 * (after(2) == b'l') as usize,
        _ => 0,
    }
}

#[inline(always)]
fn piece_end(b: &[u8], i: usize, blk: &mut Blocks) -> usize {
    let n = b.len();
    let c = at(b, i);
    // Fast paths for the two most common pieces of English and code: " word" and "word".
    // Both are decided by one or two byte tests, then a SWAR letter run.
    if c == b' ' {
        if i + 1 < n && is_ascii_letter(at(b, i + 1)) {
            return blk.run(b, i + 2, L);
        }
    } else if is_ascii_letter(c) {
        return blk.run(b, i + 1, L);
    } else if c == b'\n' {
        // "\n" before a non-whitespace ASCII byte: the whitespace run is this one char and
        // does not reach the end, so `\s+(?!\S)` fails and `\s+` takes it alone.
        if i + 1 < n && ascii_class(at(b, i + 1)) & (WS | NON_ASCII) == 0 {
            return i + 1;
        }
    } else if c != b'\'' && ascii_class(c) & (L | N | WS | NON_ASCII) == 0 {
        // ASCII punctuation (not a possible contraction start): ` ?[^\s\p{L}\p{N}]+`.
        return run_not(b, i + 1, L | N | WS);
    }
    if c == b'\'' {
        let len = contraction_len(b, i);
        if len != 0 {
            return i + len;
        }
    }
    let (cls, len) = class_at(b, i);
    if c == b' ' {
        // ` ?X+`: the space joins the run that follows if it is a letter/number/other run.
        let (next, nlen) = class_or_end(b, i + 1);
        if next & L != 0 {
            return run(b, i + 1 + nlen, L, Swar::Letter);
        }
        if next & N != 0 {
            return run(b, i + 1 + nlen, N, Swar::None);
        }
        if nlen != 0 && next & WS == 0 {
            return run_not(b, i + 1 + nlen, L | N | WS);
        }
        // else: whitespace handling below
    }
    if cls & L != 0 {
        return run(b, i + len, L, Swar::Letter);
    }
    if cls & N != 0 {
        return run(b, i + len, N, Swar::None);
    }
    if cls & WS == 0 {
        return run_not(b, i + len, L | N | WS);
    }
    let r = ws_run(b, i);
    if r.end == n || r.last == i {
        // `\s+(?!\S)` at the end of the text, or the single-char `\s+` fallback.
        r.end
    } else {
        r.last
    }
}
