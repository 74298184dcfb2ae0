//! Scanner for DeepSeek-V3's pre-tokenizer: a Sequence of three `Split`s, all `Isolated`
//! (each split's pieces are split again by the next regex; the text between two matches stays
//! a piece), see `pretok::spec` for the exact strings:
//! 1. `\p{N}{1,3}`, 2. `[一-龥぀-ゟ゠-ヿ]+` (U+4E00..U+9FA5, U+3040..U+30FF), 3. R3 =
//!    A `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+` B `[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+`
//!    C ` ?[\p{P}\p{S}]+[\r\n]*` D `\s*[\r\n]+` E `\s+(?!\S)` F `\s+`.
//!
//! Invariant: the three splits amount to *segments* (a chunk of up to three numbers from the
//! start of a number run; a maximal run of the CJK ranges, which holds no number; a maximal
//! stretch of other chars), and R3 runs on each segment as on a whole text, so a segment's
//! end acts as the end of the text (`"a  1"` is `a`, `  `, `1`: E takes the run whole). A
//! number chunk is one piece (no alternative of R3 matches a number, and a number may only
//! prefix a letter, which a chunk holds none of). Within a segment, at position i:
//! * A: ASCII punctuation/symbol followed by an ASCII letter: it and the ASCII letter run
//!   (`"'s"`, `".com"`, `"'café"` is `'caf`, `é`);
//! * B: a letter/mark run, led by a prefix char (not CR/LF, letter, P or S: whitespace, a mark,
//!   a control or format char) if the char after it is a letter or mark;
//! * C: a P/S run (led by a space if one is there), then any CR/LF run;
//! * D/E/F as in cl100k without `\s++$` (after the last CR/LF of a run; else the run minus its
//!   last char before non-whitespace; else one char);
//! * nothing matches a char that is none of L, M, P, S, whitespace and does not prefix a
//!   letter (a control or format char, an unassigned one): it joins the gap piece before the
//!   next match.
//!
//! Design: the window path of cl100k with the differences in [`window_starts`]; the per-char
//! path finds a segment's end first and runs R3 on the segment as a slice, so the shared run
//! helpers stop at its end ([log](../../docs/performance.md#model-scanners)).

use super::chars::*;
use super::masks::*;
use super::PieceSink;

/// Whether the char at `i` (lead byte `c >= 0x80`) is in split 2's CJK ranges.
#[inline(always)]
fn is_cjk(b: &[u8], i: usize, c: u8) -> bool {
    // U+3040..U+30FF is E3 81 80..E3 83 BF; U+4E00..U+9FA5 is E4 B8 80..E9 BE A5.
    if c == 0xE3 {
        let c1 = at(b, i + 1);
        return (0x81..=0x83).contains(&c1);
    }
    if (0xE4..=0xE9).contains(&c) {
        let (cp, _) = decode_non_ascii(b, i, c);
        return (0x4E00..=0x9FA5).contains(&cp);
    }
    false
}

#[inline(always)]
pub fn scan(text: &str, f: &mut impl PieceSink) {
    let mut state = State { blk: Blocks::new(Swar::Letter), seg_end: 0 };
    scan_windows!(text.as_bytes(), f, LOOKAHEAD, NonAscii::DeepSeek, window_starts, piece_end, state);
}

/// A start at `j` depends on the byte after it (a whitespace run gives its last char back
/// before non-whitespace that is not a number).
const LOOKAHEAD: u32 = 1;

/// The per-char path's state: the word blocks, and the end of the segment it is in.
pub struct State {
    blk: Blocks,
    seg_end: usize,
}

/// Piece starts of a window (see `cl100k::window_starts`, whose rules these are but for):
/// no contractions (`"'s"` is A: punctuation prefixing a word); a whitespace run keeps its
/// last char before a number (the number ends the segment, where `\s+(?!\S)` takes the run
/// whole); only ASCII punctuation prefixes a word, and only one that starts with an ASCII
/// letter, and then the word ends at its first non-ASCII letter or mark (A's `[A-Za-z]+`; B's
/// prefix excludes P/S); and trust ends before a control char.
#[inline(always)]
fn window_starts(_b: &[u8], _p: usize, m: &Masks, lim: u32) -> (u64, u32) {
    let lim = lim.min(m.ctl.trailing_zeros().saturating_sub(LOOKAHEAD + 1));
    let lim = crlf_run_limit(m, lim);
    let w = m.ws;
    let t = w & !m.crlf;
    let o = !(m.letter | m.digit | w);
    let word = m.letter & !prev(m.letter);
    // First bytes of O runs not led by a space: at a lead byte, so a multi-byte char's bit is
    // not right before the word it precedes.
    let first_o = o & !prev(o) & !prev(m.space);
    let ascii_letter = m.letter & !m.high0;
    let by_a = word & ascii_letter & prev(first_o);
    // Where the ASCII letters of an A word end (carry through the run), a non-ASCII letter
    // or mark starts B's piece.
    let a_ends = ascii_letter.wrapping_add(by_a) & !ascii_letter & m.letter;
    let mut st = (w & !prev(w))
        | (t & (prev(m.crlf) | (prev(w) & next(!w & !m.digit))))
        | (word & !(prev(t) | by_a))
        | a_ends
        | (m.digit & !prev(m.digit))
        | first_o
        | 1;
    other_run_tails(m, o, m.crlf, &mut st);
    digit_chunks(m.digit, &mut st);
    (st, lim)
}

/// One piece at `i` by the per-char rules: a number chunk, or R3's match (or gap) in the
/// segment at `i`, whose end is kept in `state` while the scan is inside it.
#[inline(always)]
fn piece_end(b: &[u8], i: usize, state: &mut State) -> usize {
    let c = at(b, i);
    if c.is_ascii_digit() || (c >= 0x80 && class_at(b, i).0 & N != 0) {
        let mut e = i;
        for _ in 0..3 {
            let (cls, len) = class_or_end(b, e);
            if cls & N == 0 {
                break;
            }
            e += len;
        }
        return e;
    }
    if i >= state.seg_end {
        state.seg_end = if c >= 0x80 && is_cjk(b, i, c) { cjk_end(b, i) } else { plain_end(b, i) };
    }
    let seg = &b[..state.seg_end];
    if let Some(e) = r3(seg, i, &mut state.blk) {
        return e;
    }
    // A gap: it ends where R3 matches again (or at the segment's end).
    let mut j = i + class_at(seg, i).1;
    while j < seg.len() && r3(seg, j, &mut state.blk).is_none() {
        j += class_at(seg, j).1;
    }
    j
}

/// End of the CJK run at `i`.
#[inline(always)]
fn cjk_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        let c = at(b, i);
        if c < 0x80 || !is_cjk(b, i, c) {
            break;
        }
        i += 3;
    }
    i
}

/// End of the stretch of chars at `i` that are neither numbers nor CJK.
#[inline(always)]
fn plain_end(b: &[u8], mut i: usize) -> usize {
    let n = b.len();
    while i < n {
        let c = at(b, i);
        if c < 0x80 {
            if c.is_ascii_digit() {
                break;
            }
            i += 1;
            continue;
        }
        let (cls, len) = class_non_ascii(b, i, c);
        if cls & N != 0 || is_cjk(b, i, c) {
            break;
        }
        i += len;
    }
    i
}

/// ASCII punctuation and symbols (A's class: every ASCII char that is none of letter, digit,
/// whitespace or control).
#[inline(always)]
fn is_ascii_ps(c: u8) -> bool {
    c.is_ascii_punctuation()
}

/// End of the ASCII letter run at `i`.
#[inline(always)]
fn ascii_letters(b: &[u8], i: usize) -> usize {
    let mut e = swar_skip(b, i, Swar::Letter);
    while e < b.len() && is_ascii_letter(at(b, e)) {
        e += 1;
    }
    e
}

/// The end of R3's match at `i`, or `None` if no alternative matches there.
#[inline(always)]
fn r3(b: &[u8], i: usize, blk: &mut Blocks) -> Option<usize> {
    const WORD: u8 = L | M;
    let n = b.len();
    let c = at(b, i);
    if c == b' ' {
        if i + 1 < n && is_ascii_letter(at(b, i + 1)) {
            return Some(blk.run(b, i + 2, WORD));
        }
    } else if is_ascii_letter(c) {
        return Some(blk.run(b, i + 1, WORD));
    } else if is_ascii_ps(c) {
        if i + 1 < n {
            let d = at(b, i + 1);
            if is_ascii_letter(d) {
                return Some(ascii_letters(b, i + 2));
            }
        }
        let e = run_ps(b, i + 1);
        return Some(run_crlf(b, e, false));
    }
    let (cls, len) = class_at(b, i);
    if cls & WORD != 0 {
        return Some(run(b, i + len, WORD, Swar::Letter));
    }
    if cls & PS != 0 {
        let e = run_ps(b, i + len);
        return Some(run_crlf(b, e, false));
    }
    let (next, nlen) = class_or_end(b, i + len);
    if c != b'\r' && c != b'\n' && next & WORD != 0 {
        return Some(run(b, i + len + nlen, WORD, Swar::Letter));
    }
    if c == b' ' && next & PS != 0 {
        let e = run_ps(b, i + 1 + nlen);
        return Some(run_crlf(b, e, false));
    }
    if cls & WS == 0 {
        return None;
    }
    let r = ws_run(b, i);
    Some(if r.crlf_end != 0 {
        r.crlf_end
    } else if r.end == n || r.last == i {
        r.end
    } else {
        r.last
    })
}

/// End of the run of `[\p{P}\p{S}]` chars at `i`.
#[inline(always)]
fn run_ps(b: &[u8], mut i: usize) -> usize {
    let n = b.len();
    while i < n {
        let (cls, len) = class_at(b, i);
        if cls & PS == 0 {
            break;
        }
        i += len;
    }
    i
}
