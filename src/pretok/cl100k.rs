//! Scanner for the cl100k_base pattern and its relatives in released models' tokenizer.json
//! files, one generic body (`scan::<DIGITS, END_RUN, MARKS>`; see `pretok::spec` for the regexes):
//! * cl100k `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
//!   = `<3, true, false>`; Llama-3/OLMo-2 (no `\s++$`) `<3, false, false>`; Qwen2 (`\p{N}`)
//!   `<1, false, false>`; Qwen3.5 (`[\p{L}\p{M}]+` words, marks out of the "other" class)
//!   `<1, false, true>`. Their quantifiers are not possessive, which changes nothing: nothing
//!   after each one can fail.
//!
//! Derivation, alternative by alternative at position i (first match wins):
//! 1. `'` + a contraction, case-insensitive with the `regex` module's simple case folding
//!    (so `'ſ` matches like `'s`; see `unicode_tables::fold_non_ascii_contraction_letter`).
//! 2. `[^\r\n\p{L}\p{N}]?+\p{L}++`: a letter run (`MARKS`: letters and marks), optionally led
//!    by one char that is not CR/LF/letter/number. Dropping the prefix could only help if it
//!    were a letter, which it cannot be (a mark is, with `MARKS`, and then the run from it is
//!    the same piece), so: "c is L" or "c is a prefix char and the next char is L". The prefix
//!    may be whitespace (`"\tfoo"`, `"\u3000字"`).
//! 3. `\p{N}{1,3}+`: up to `DIGITS` numbers.
//! 4. ` ?[^\s\p{L}\p{N}]++[\r\n]*+`: an "other" run (optionally led by a space that is then
//!    followed by "other"), then any CR/LF run. Possessive, and nothing can fail after it.
//! 5. `\s++$` (only with `END_RUN`): the whole whitespace run if it reaches the end of the
//!    text. (Python's `$` also matches before a final `\n`, but the run would have eaten it.)
//!    Without it, a run reaching the end with a CR/LF inside ends after its last CR/LF (6),
//!    and the rest is one piece (7 at the end): `"a \n "` is `a`, ` \n`, ` `.
//! 6. `\s*[\r\n]`: `\s*` backtracks to the run's last CR/LF; the piece ends right after it
//!    (`\s*[\r\n]+` ends there too: no CR/LF follows the last one).
//! 7. `\s+(?!\S)`: the run minus its last char (the run does not reach the end here).
//! 8. `\s`: one whitespace char.
//!
//! Every char is L, N, whitespace or "other", so some alternative always matches.

use super::chars::*;
use super::masks::*;
use super::PieceSink;

#[inline(always)]
pub fn scan<const DIGITS: usize, const END_RUN: bool, const MARKS: bool>(text: &str, f: &mut impl PieceSink) {
    let mut blk = Blocks::new(Swar::Letter);
    let policy = if MARKS { NonAscii::Qwen35 } else { NonAscii::Cl100k };
    scan_windows!(
        text.as_bytes(),
        f,
        LOOKAHEAD,
        policy,
        window_starts::<DIGITS>,
        piece_end::<DIGITS, END_RUN, MARKS>,
        blk
    );
}

/// A start at `j` depends on bytes up to `j + 3` (a contraction `'re` at `j` and the start
/// right after it).
const LOOKAHEAD: u32 = 3;

/// Piece starts of an ASCII window whose byte `p` starts a piece (bit `j` = byte `p + j`), and
/// how far they can be trusted (at most `lim`). For ASCII (O = other, i.e. not letter, digit or
/// whitespace; T = whitespace other than `\r\n`):
/// * a letter run is one piece; the char before it joins it as its prefix if it is a T char,
///   or an O char that starts a piece itself (not after another O, whose run 4 takes whole,
///   nor after a space, which 4 takes along: `" (a"` is `" ("`, `"a"`);
/// * an apostrophe that starts a piece and is followed by a contraction (any case) is a piece
///   of its own (alternative 1 comes first: `"'tis"` is `"'t"`, `"is"`);
/// * numbers come in pieces of up to three digits from the start of their run (one with
///   `DIGITS == 1`); with `MARKS`, marks are letters here (`add_non_ascii` sets their bits);
/// * an O run starts a piece (with the space before it, if any) and takes the CR/LF right
///   after it;
/// * whitespace as in o200k (see [`crlf_run_limit`] for the shapes left to the per-char path).
#[inline(always)]
fn window_starts<const DIGITS: usize>(b: &[u8], p: usize, m: &Masks, lim: u32) -> (u64, u32) {
    let (mut st, o) = prefix_word_starts(m, m.letter & !prev(m.letter));
    let lim = crlf_run_limit(m, lim);
    // The tail ends at a non-CR/LF char: an O there is preceded by CR/LF, so `attach` saw it.
    other_run_tails(m, o, m.crlf, &mut st);
    // Contractions: apostrophes that start a piece (in order: one may start right after another).
    let mut cands = m.apos & st;
    while cands != 0 {
        let j = cands.trailing_zeros() as usize;
        cands &= cands - 1;
        if j + 3 >= 64 || st >> j & 1 == 0 {
            continue;
        }
        let len = window_contraction_ci(b, p + j);
        if len != 0 {
            st &= !(((1u64 << len) - 1) << (j + 1));
            st |= 1u64 << (j + len);
            cands |= m.apos & (1u64 << (j + len));
        }
    }
    if DIGITS == 1 {
        st |= m.digit;
    } else {
        digit_chunks(m.digit, &mut st);
    }
    (st, lim)
}

#[inline(always)]
fn piece_end<const DIGITS: usize, const END_RUN: bool, const MARKS: bool>(b: &[u8], i: usize, blk: &mut Blocks) -> usize {
    // The word class and what an "other" run stops at.
    let word = if MARKS { L | M } else { L };
    let not_other = word | N | WS;
    let n = b.len();
    let c = at(b, i);
    // Fast paths for " word" and "word" (alternative 2 with and without the prefix): one or
    // two byte tests, then a SWAR letter run. `'` never takes these, so alternative 1 is safe.
    if c == b' ' {
        if i + 1 < n && is_ascii_letter(at(b, i + 1)) {
            return blk.run(b, i + 2, word);
        }
    } else if is_ascii_letter(c) {
        return blk.run(b, i + 1, word);
    } else if c.is_ascii_digit() {
        // Alternative 3 with ASCII digits; a non-ASCII byte may be a number: general path.
        let mut e = i + 1;
        while e < n && e < i + DIGITS && at(b, e).is_ascii_digit() {
            e += 1;
        }
        if e == n || e == i + DIGITS || at(b, e) < 0x80 {
            return e;
        }
    } else if c < 0x80 {
        let next = if i + 1 < n { ascii_class(at(b, i + 1)) } else { 0 };
        if c == b'\n' && next & (WS | NON_ASCII) == 0 {
            // Lone "\n" before ASCII non-whitespace: alternative 6 takes just it.
            return i + 1;
        }
        if c != b'\'' && ascii_class(c) & (L | N | WS) == 0 {
            if next & (L | NON_ASCII) == 0 {
                // ASCII punctuation that cannot start a contraction or prefix a letter run:
                // alternative 4 without the space.
                let e = run_not(b, i + 1, not_other);
                return run_crlf(b, e, false);
            }
            if next & L != 0 {
                // ASCII punctuation prefixing an ASCII letter run ("(a", "_name", ".x"):
                // alternative 2 with its prefix.
                return blk.run(b, i + 2, word);
            }
        }
    }
    if c == b'\'' {
        let k = contraction_ci(b, i);
        if k != 0 {
            return i + k;
        }
    }
    let (cls, len) = class_at(b, i);
    if cls & word != 0 {
        return run(b, i + len, word, Swar::Letter);
    }
    if cls & N != 0 {
        // `\p{N}{1,3}`
        let mut e = i + len;
        for _ in 1..DIGITS {
            let (c2, l2) = class_or_end(b, e);
            if c2 & N == 0 {
                break;
            }
            e += l2;
        }
        return e;
    }
    // c is whitespace or "other" here.
    if c != b'\r' && c != b'\n' {
        let (next, nlen) = class_or_end(b, i + len);
        if next & word != 0 {
            return run(b, i + len + nlen, word, Swar::Letter);
        }
        if c == b' ' && nlen != 0 && next & (WS | N) == 0 {
            let e = run_not(b, i + 1 + nlen, not_other);
            return run_crlf(b, e, false);
        }
    }
    if cls & WS == 0 {
        let e = run_not(b, i + len, not_other);
        return run_crlf(b, e, false);
    }
    let r = ws_run(b, i);
    if END_RUN && r.end == n {
        r.end
    } else if r.crlf_end != 0 {
        r.crlf_end
    } else if r.end == n {
        r.end
    } else if r.last > i {
        r.last
    } else {
        i + len
    }
}
