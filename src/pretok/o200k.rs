//! Scanner for the o200k_base pattern, the `|`-join of
//! A `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
//! B `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
//! C `\p{N}{1,3}`
//! D ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
//! E `\s*[\r\n]+`
//! F `\s+(?!\S)`
//! G `\s+`
//!
//! Write UP = `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, LO = `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`, P = the
//! optional prefix class `[^\r\n\p{L}\p{N}]`. UP and LO overlap in Lm, Lo and marks; marks
//! are also in P. This is a backtracking regex, so we follow the engine's search order:
//!
//! A(s) = A after the prefix decision, starting at s. `UP*` first takes the maximal UP run
//! s..e; then `LO+` needs one LO char, so the engine gives UP chars back one at a time until
//! the position j it stands on holds a LO char: j is the *largest* position in s..=e with a
//! LO char. If j == e (the char after the run is LO, i.e. Ll), `LO+` takes the maximal LO run
//! from e. If j < e, j is the last Lm/Lo/M char inside the run and every char after it up to
//! and including e is not LO, so `LO+` takes exactly that one char. If there is no such j,
//! A(s) fails. The optional contraction then never fails, so that is the match.
//!
//! B(s): `UP+` takes the maximal UP run (needs >= 1 char); `LO*` and the contraction can
//! always match, so no backtracking: maximal LO run after it, then the optional contraction.
//!
//! Prefix order: `P?` is greedy, so when c is in P the engine tries A(i+len(c)), then A(i)
//! (c itself may be a mark, which is UP and LO: `"\u{301}'s"` is one piece via A(i)), then
//! B(i+len(c)), then B(i). C–G are as in cl100k: E ends after the run's last CR/LF, F is the
//! run minus its last char unless it reaches the end, G takes the single char left.
//!
//! Performance: ASCII lowercase words (" the") hit A with a one-char prefix, an empty UP run,
//! and a SWAR lowercase run. Capitalised words take one extra ASCII uppercase step.
//!
//! Kimi-K2 (`H`, see `pretok::spec`) is this pattern with a first alternative `[\p{Han}]+`,
//! Han taken out of UP and LO (`[..&&[^\p{Han}]]`), and D's tail `[\r\n]*` (no `/`). So a piece
//! that starts at a Han char is the Han run; elsewhere Han chars keep their other classes
//! (letters for P and D, so `" 中"` is `" "`, `"中"`; a Han radical, `So`, is "other" inside a
//! D run, `"!⺀"`; a Han `Nl` char such as `〇` is a number inside C's run, `"1〇"`). The
//! window path takes no Han char (non-ASCII, so the per-char path decides there).

use super::chars::*;
use super::masks::*;
use super::PieceSink;

/// `C`: the optional contraction after a word; `DIGITS`: the `\p{N}{1,3}` limit; `H`: Kimi's
/// Han rules (above). o200k is `<true, 3, false>`; Mistral's Tekken (Nemotron) has neither
/// contraction nor number runs, `<false, 1, false>`; Kimi-K2 is `<true, 3, true>` (see
/// `pretok::spec`).
#[inline(always)]
pub fn scan<const C: bool, const DIGITS: usize, const H: bool>(text: &str, f: &mut impl PieceSink) {
    let mut blk = Blocks::new(Swar::Lower);
    let policy = if H { NonAscii::Kimi } else { NonAscii::O200k };
    scan_windows!(text.as_bytes(), f, LOOKAHEAD, policy, window_starts::<C, DIGITS, H>, piece_end::<C, DIGITS, H>, blk);
}

/// A word ending at `e`, with the optional contraction (`C`) after it.
#[inline(always)]
fn tail<const C: bool>(b: &[u8], e: usize) -> usize {
    if C {
        e + contraction_ci(b, e)
    } else {
        e
    }
}

/// A start at `j` depends on bytes up to `j + 3` (the apostrophe and letters of `'re`, and the
/// start right after it).
const LOOKAHEAD: u32 = 3;

/// Piece starts of an ASCII window whose byte `p` starts a piece (bit `j` = byte `p + j`), and
/// how far they can be trusted (at most `lim`). For ASCII the alternatives reduce to (U/L =
/// upper/lower letter, O = other, i.e. not letter, digit or whitespace; T = whitespace other
/// than `\r\n`):
/// * a word is `U*L*` with at least one letter; a U right after an L starts a new word
///   (`"camelCase"`: A takes `"camel"`); the char before a word joins it as its prefix if it is
///   a T char, or an O char that starts a piece itself (not after another O, whose run D takes
///   whole, nor after a space, which D takes along: `" (a"` is `" ("`, `"a"`);
/// * a contraction (`'s`, `'T`, `'re`, ..., any case) right after a word's last letter belongs
///   to that word, and a piece starts right after it;
/// * numbers come in pieces of up to three digits from the start of their run;
/// * an O run starts a piece (with the space before it, if any); the `\r\n` (and then `/`)
///   chars right after it join it (D's `[\r\n/]*`);
/// * whitespace: a run starts a piece, `\r\n` chars at its start form one (E), then F/G as in
///   GPT-2 (the last char before non-whitespace is given back). A run with `\r\n` after other
///   whitespace (`" \n"`) is rare and left to the per-char path: `lim` stops before it.
#[inline(always)]
fn window_starts<const C: bool, const DIGITS: usize, const H: bool>(b: &[u8], p: usize, m: &Masks, lim: u32) -> (u64, u32) {
    let le = m.letter;
    let up = le & !m.lower;
    let (mut st, o) = prefix_word_starts(m, le & (!prev(le) | (up & prev(m.lower))));
    let lim = crlf_run_limit(m, lim);
    // D's tail; an O char right after a tail starts a piece, so it is the prefix of a word that
    // follows (`"//\r\n//'a"` is `"//\r\n//"`, `"'a"`), which `attach` did not see when the
    // tail ended with `/`. No branch on whether the window has a tail: that branch was taken
    // in about a third of English windows, unpredictably, and cost more than the bit operations
    // (which change nothing without one).
    // (Kimi's tail is `[\r\n]*`: then the line below changes nothing, as in cl100k.)
    let tail = if H { m.crlf } else { m.crlf | m.slash };
    let ends = other_run_tails(m, o, tail, &mut st);
    st &= !(prev(whole_chars(ends & o, m.cont & o)) & le);
    // Contractions after a word (not after a contraction: `"it's's"` is `"it's"`, `"'s"`).
    let mut cands = if C { m.apos & prev(le) } else { 0 };
    let mut last_end = usize::MAX;
    while cands != 0 {
        let j = cands.trailing_zeros() as usize;
        cands &= cands - 1;
        if j == last_end || j + 3 >= 64 {
            continue;
        }
        let len = window_contraction_ci(b, p + j);
        if len != 0 {
            st &= !(((1u64 << len) - 1) << j);
            st |= 1u64 << (j + len);
            last_end = j + len;
        }
    }
    if DIGITS == 1 {
        st |= m.digit;
    } else {
        digit_chunks(m.digit, &mut st);
    }
    (st, lim)
}

/// Alternative A starting after the prefix decision at `s`.
#[inline(always)]
fn alt_a<const C: bool, const H: bool>(b: &[u8], s: usize) -> Option<usize> {
    // Maximal UP run s..e, remembering the end of its last LO char.
    let mut e = s;
    let mut last_lo_end = 0;
    loop {
        let (cls, len) = class_or_end_h::<H>(b, e);
        if cls & UP == 0 {
            if cls & LO != 0 {
                // j == e: LO run from e.
                let e_l = run_h::<H>(b, e + len, LO, Swar::Lower);
                return Some(tail::<C>(b, e_l));
            }
            break;
        }
        e += len;
        if cls & LO != 0 {
            last_lo_end = e;
        } else if len == 1 {
            // An ASCII uppercase letter (UP, not LO): skip any that follow eight at a time
            // (all-caps words). Not tried after non-ASCII chars (CJK runs would always fail).
            e = swar_skip(b, e, Swar::Upper);
        }
    }
    if last_lo_end == 0 {
        return None;
    }
    Some(tail::<C>(b, last_lo_end))
}

/// Alternative B starting after the prefix decision at `s`.
#[inline(always)]
fn alt_b<const C: bool, const H: bool>(b: &[u8], s: usize) -> Option<usize> {
    let (cls, len) = class_or_end_h::<H>(b, s);
    if cls & UP == 0 {
        return None;
    }
    let e = run_h::<H>(b, s + len, UP, Swar::Upper);
    let e = run_h::<H>(b, e, LO, Swar::Lower);
    Some(tail::<C>(b, e))
}

/// A word that starts with an ASCII uppercase letter (already consumed; `s` is just after
/// it), as long as it stays ASCII. Let e be the end of the ASCII uppercase run:
/// * b[e] lowercase: A's UP run is s-1..e and b[e] is LO (Ll), so LO+ runs from e.
/// * b[e] other ASCII or the end: no LO char anywhere in A's reach, so A fails; B takes the
///   uppercase run, its LO* is empty, then the optional contraction (`"HTTP'S"`).
/// * b[e] non-ASCII: `None`, the general path decides (it may be an Lm/Lo/M char).
#[inline(always)]
fn ascii_upper_word<const C: bool, const H: bool>(b: &[u8], s: usize, blk: &mut Blocks) -> Option<usize> {
    let n = b.len();
    // "The": the common capitalised word. Checked first so that the lowercase run starts at
    // a constant offset from the piece start (no SWAR result on the dependency chain).
    if s < n && at(b, s).is_ascii_lowercase() {
        let e = blk.run_h::<H>(b, s + 1, LO);
        return Some(tail::<C>(b, e));
    }
    let mut e = swar_skip(b, s, Swar::Upper);
    while e < n && at(b, e).is_ascii_uppercase() {
        e += 1;
    }
    if e == n {
        return Some(n);
    }
    let d = at(b, e);
    if d.is_ascii_lowercase() {
        let e = blk.run_h::<H>(b, e + 1, LO);
        return Some(tail::<C>(b, e));
    }
    if d < 0x80 {
        return Some(tail::<C>(b, e));
    }
    None
}

#[inline(always)]
fn piece_end<const C: bool, const DIGITS: usize, const H: bool>(b: &[u8], i: usize, blk: &mut Blocks) -> usize {
    let n = b.len();
    let c = at(b, i);
    // Fast paths for the common ASCII shapes of A: " word", "word", " Word", "Word". With an
    // ASCII uppercase letter followed by an ASCII lowercase one, the UP run is that one
    // letter and LO+ starts right after it (see A above); with a lowercase start the UP run
    // is empty. Then a lowercase run (`Blocks`: bitmask + tzcnt) and the optional contraction.
    // An all-caps ASCII word ("HTTP", "HTTPServer") is settled by `ascii_upper_word`.
    // Written as branches on purpose, not `s = if c == b' ' { i + 1 } else { i }`: the compiler
    // turns that into a cmov, which puts the load of b[i] on the data-dependency chain from one
    // piece's start to the next (load -> cmov -> SWAR load -> tzcnt -> end). With branches, the
    // predictor speculates the shape and the only chain left is SWAR load -> tzcnt -> end.
    // Measured: ~+40% on a text of only " word" pieces.
    // Known cost: the lowercase/uppercase branch mispredicts when capitalised words are
    // frequent and irregular (English ~10%: o200k ~750 MB/s vs GPT-2 ~970 on the English
    // corpus; 50% capitalised synthetic text: ~570 vs ~1900). A case-blind variant (letter
    // run end by one tzcnt on lower|upper block masks, shape checked off the chain) removed
    // that but was slower on real English (~710), so it was not kept.
    if c == b' ' {
        if i + 1 < n {
            let c1 = at(b, i + 1);
            if c1.is_ascii_lowercase() {
                let e = blk.run_h::<H>(b, i + 2, LO);
                return tail::<C>(b, e);
            }
            if c1.is_ascii_uppercase() {
                if let Some(e) = ascii_upper_word::<C, H>(b, i + 2, blk) {
                    return e;
                }
            }
        }
    } else if c.is_ascii_lowercase() {
        let e = blk.run_h::<H>(b, i + 1, LO);
        return tail::<C>(b, e);
    } else if c.is_ascii_uppercase() {
        if let Some(e) = ascii_upper_word::<C, H>(b, i + 1, blk) {
            return e;
        }
    } else if c.is_ascii_digit() {
        // C: up to three numbers; fall back to the general path at a non-ASCII byte (which
        // may be a non-ASCII number).
        let mut e = i + 1;
        while e < n && e < i + DIGITS && at(b, e).is_ascii_digit() {
            e += 1;
        }
        if e == n || e == i + DIGITS || at(b, e) < 0x80 {
            return e;
        }
    }
    // ASCII punctuation not followed by a letter or a mark (the next byte is ASCII and not a
    // letter): A and B cannot use it as a prefix, C needs a number, so it is D directly.
    // A single "\n" before ASCII non-whitespace is E with one char.
    if c < 0x80 {
        let next = if i + 1 < n { ascii_class(at(b, i + 1)) } else { 0 };
        let this = ascii_class(c) & (L | N | WS);
        if this == 0 {
            if next & (L | NON_ASCII) == 0 {
                let e = run_not(b, i + 1, L | N | WS);
                return run_crlf(b, e, !H);
            }
            // ASCII punctuation as the optional prefix of A/B before an ASCII word ("(a",
            // "_name", ".method", "'tis"): same shapes as after a space.
            let c1 = at(b, i + 1); // next != 0, so i + 1 < n
            if c1.is_ascii_lowercase() {
                let e = blk.run_h::<H>(b, i + 2, LO);
                return tail::<C>(b, e);
            }
            if c1.is_ascii_uppercase() {
                if let Some(e) = ascii_upper_word::<C, H>(b, i + 2, blk) {
                    return e;
                }
            }
        }
        if c == b'\n' && next & (WS | NON_ASCII) == 0 {
            return i + 1;
        }
    }
    if H && c >= 0x80 {
        // Kimi's first alternative: a Han run (Han chars are non-ASCII).
        let (cp, len) = decode_non_ascii(b, i, c);
        if is_han(cp) {
            return han_run(b, i + len);
        }
    }
    let (cls, len) = class_at(b, i);
    if cls & L != 0 {
        // No prefix possible (a letter is not in P).
        if let Some(e) = alt_a::<C, H>(b, i) {
            return e;
        }
        if let Some(e) = alt_b::<C, H>(b, i) {
            return e;
        }
        unreachable_letter();
        return i + len;
    }
    if cls & N != 0 {
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
    let is_prefix = c != b'\r' && c != b'\n';
    if is_prefix {
        if let Some(e) = alt_a::<C, H>(b, i + len) {
            return e;
        }
    }
    if cls & M != 0 {
        if let Some(e) = alt_a::<C, H>(b, i) {
            return e;
        }
    }
    if is_prefix {
        if let Some(e) = alt_b::<C, H>(b, i + len) {
            return e;
        }
    }
    // B(i) cannot match here: c is not a letter, and a mark would have matched A(i).
    if c == b' ' {
        let (next, nlen) = class_or_end(b, i + 1);
        if nlen != 0 && next & (L | N | WS) == 0 {
            let e = run_not(b, i + 1 + nlen, L | N | WS);
            return run_crlf(b, e, !H);
        }
    }
    if cls & WS == 0 {
        let e = run_not(b, i + len, L | N | WS);
        return run_crlf(b, e, !H);
    }
    let r = ws_run(b, i);
    if r.crlf_end != 0 {
        r.crlf_end
    } else if r.end == n || r.last == i {
        r.end
    } else {
        r.last
    }
}

#[cold]
fn unreachable_letter() {
    // Every letter is UP or LO (asserted by the table generator), so A or B always matches a
    // letter. Should regenerated tables ever break that, the caller emits the letter as a
    // one-char piece rather than looping or panicking.
}
