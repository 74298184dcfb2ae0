//! Where text may be cut without changing its pre-tokens: the safe-cut rule shared by the
//! reader (blocks of a file), batches and counting (segments of a long document), and shards of
//! a file for counting apart (`shard_cuts`). The rule is checked against every scanner on random
//! text of every script (the tests below).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use crate::pretok::{char_class, L, N, WS};
use crate::specials::Specials;

/// Bytes of context a cut rule looks at on each side of the cut (one char each way).
pub const CUT_CONTEXT: usize = 8;

/// Is `p` a place where every built-in pattern ends a piece, whatever comes before or after?
///
/// Three shapes qualify, in any script (X, Y are the chars next to the `'\n'` or space):
/// * `X '\n' | Y`, X and Y not whitespace, Y not `'/'`: X's piece ends at X or takes the
///   `'\n'` with it (a punctuation run's `[\r\n]*` tail), the `'\n'` is otherwise a whitespace
///   run of one, and no piece starts with a `'\n'` and goes on into Y (o200k's punctuation tail
///   `[\r\n/]*` would take a `'/'`).
/// * `X | '\n'`, X a letter or digit: X's letter or digit run ends at X in every pattern (no
///   contraction or tail follows a run that a `'\n'` ends), and a piece that starts at the
///   `'\n'` never depends on what came before.
/// * `a | ' ' b` with a and b ASCII letters: a letter run ends at the space, and the space
///   starts the next letter piece in every pattern.
///
/// A special token must not straddle the cut either. Bytes that are not valid UTF-8 never
/// qualify as X or Y. The rule is checked against the scanners on random text of every class
/// (`cuts_do_not_change_pieces_in_any_script`).
pub fn safe_cut(b: &[u8], p: usize, specials: Option<&Specials>) -> bool {
    if p < 2 || p + 1 >= b.len() {
        return false;
    }
    let ok = at_line(b, p) || (b[p] == b' ' && b[p - 1].is_ascii_alphabetic() && b[p + 1].is_ascii_alphabetic());
    ok && !specials.is_some_and(|s| s.straddles(b, p))
}

/// [`safe_cut`]'s two shapes at a `'\n'` only: the cuts of superword spans, which run on across
/// spaces but never over a `'\n'` (`crate::pretok::spans`).
pub fn line_cut(b: &[u8], p: usize, specials: Option<&Specials>) -> bool {
    p >= 2 && p + 1 < b.len() && at_line(b, p) && !specials.is_some_and(|s| s.straddles(b, p))
}

fn at_line(b: &[u8], p: usize) -> bool {
    (b[p - 1] == b'\n' && b[p] != b'/' && class_before(b, p - 1).is_some_and(|c| c & WS == 0)
        && class_after(b, p).is_some_and(|c| c & WS == 0))
        || (b[p] == b'\n' && class_before(b, p).is_some_and(|c| c & (L | N) != 0))
}

/// Which cuts a text may take: every [`safe_cut`] (the built-in patterns), only the ASCII ones
/// ([`ascii_safe_cut`]), or only those at a `'\n'` ([`line_cut`]: superword spans).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Safe,
    Ascii,
    Lines,
}

impl Rule {
    fn ok(self, b: &[u8], p: usize, specials: Option<&Specials>) -> bool {
        match self {
            Rule::Safe => safe_cut(b, p, specials),
            Rule::Ascii => ascii_safe_cut(b, p) && !specials.is_some_and(|s| s.straddles(b, p)),
            Rule::Lines => line_cut(b, p, specials),
        }
    }
}

/// The class bits of the char that ends just before `q` (None if `b[..q]` does not end with a
/// valid UTF-8 char).
fn class_before(b: &[u8], q: usize) -> Option<u8> {
    let mut s = q.checked_sub(1)?;
    while s > 0 && q - s < 4 && b[s] & 0xC0 == 0x80 {
        s -= 1;
    }
    let c = std::str::from_utf8(&b[s..q]).ok()?.chars().next()?;
    Some(char_class(c))
}

/// The class bits of the char that starts at `p` (None if there is no valid one).
fn class_after(b: &[u8], p: usize) -> Option<u8> {
    let n = match *b.get(p)? {
        c if c < 0x80 => 1,
        c if c >= 0xF0 => 4,
        c if c >= 0xE0 => 3,
        _ => 2,
    };
    let c = std::str::from_utf8(b.get(p..p + n)?).ok()?.chars().next()?;
    Some(char_class(c))
}

/// Where shards of a plain file start: for each target byte offset, the first place at or after
/// it where the reader itself may cut (JSON lines: a line start; text: a [`safe_cut`]), or the
/// end of the file. Shards `cuts[i]..cuts[i + 1]` then tile the file, and counting them apart
/// gives the counts of the whole. Only the bytes around each target are read.
pub fn shard_cuts(file_path: &std::path::Path, targets: &[u64], jsonl: bool, rule: Rule, specials: &Specials) -> Result<Vec<u64>, String> {
    let path = file_path.display();
    let mut f = File::open(file_path).map_err(|e| format!("{path}: cannot open: {e}"))?;
    let size = f.metadata().map_err(|e| format!("{path}: {e}"))?.len();
    let longest = specials.list().iter().map(|(t, _)| t.len()).max().unwrap_or(0);
    let back = (CUT_CONTEXT + longest) as u64;
    let mut out = Vec::with_capacity(targets.len());
    let mut no_cut_after = size; // a search that reached the end found no cut from here on
    for &x in targets {
        if x >= no_cut_after {
            out.push(size);
            continue;
        }
        if x == 0 || x >= size {
            out.push(x.min(size));
            continue;
        }
        let lo = x.saturating_sub(back);
        let mut want = 1u64 << 16;
        let cut = loop {
            let mut buf = Vec::new();
            f.seek(SeekFrom::Start(lo)).map_err(|e| format!("{path}: cannot seek: {e}"))?;
            (&mut f).take(want).read_to_end(&mut buf).map_err(|e| format!("{path}: read error: {e}"))?;
            let at_end = lo + buf.len() as u64 >= size;
            let from = (x - lo) as usize;
            // A special token must fit whole in the window to be seen straddling a cut.
            let last = if at_end { buf.len() } else { buf.len().saturating_sub(longest) };
            let found = (from..last).find(|&p| if jsonl { buf[p - 1] == b'\n' } else { rule.ok(&buf, p, Some(specials)) });
            match found {
                Some(p) => break lo + p as u64,
                None if at_end => {
                    no_cut_after = x;
                    break size;
                }
                None => want *= 4,
            }
        };
        out.push(cut);
    }
    Ok(out)
}

/// The last safe cut in `b` (see [`safe_cut`]).
pub fn last_safe_cut(b: &[u8], specials: Option<&Specials>) -> Option<usize> {
    last_safe_cut_from(b, specials, 0)
}

/// The last safe cut in `b` at or after `from` (the bytes before were searched already).
pub fn last_safe_cut_from(b: &[u8], specials: Option<&Specials>, from: usize) -> Option<usize> {
    last_cut_by(b, from, |p| safe_cut(b, p, specials))
}

/// The last cut of `rule` in `b` at or after `from`.
pub fn last_cut_from(b: &[u8], rule: Rule, specials: Option<&Specials>, from: usize) -> Option<usize> {
    last_cut_by(b, from, |p| rule.ok(b, p, specials))
}

/// The last place `p >= from` next to a `'\n'` or at a space where `ok(p)`.
fn last_cut_by(b: &[u8], from: usize, ok: impl Fn(usize) -> bool) -> Option<usize> {
    let mut end = b.len();
    while let Some(i) = memchr::memrchr(b'\n', &b[from..end]).map(|i| from + i) {
        if ok(i + 1) {
            return Some(i + 1);
        }
        if i >= from.max(1) && ok(i) {
            return Some(i);
        }
        end = i;
    }
    let mut end = b.len();
    while let Some(i) = memchr::memrchr(b' ', &b[from..end]).map(|i| from + i) {
        if ok(i) {
            return Some(i);
        }
        end = i;
    }
    None
}

/// A [`safe_cut`] whose chars on both sides are ASCII (for `'\n' | Y`, the char before the
/// `'\n'` too). The local normalizers (the Unicode forms, Lowercase, StripAccents) map ASCII
/// to ASCII, letters to letters, and compose or reorder nothing across an ASCII char next to a
/// `'\n'` or a space: the normalized text has the same cut, and normalizing the two sides
/// apart changes nothing.
pub fn ascii_safe_cut(b: &[u8], p: usize) -> bool {
    safe_cut(b, p, None) && b[p - 1] < 0x80 && b[p] < 0x80 && (b[p - 1] != b'\n' || b[p - 2] < 0x80)
}

/// Cuts `text` into pieces of about `size` bytes at safe cuts (one piece if there is none).
/// Valid for the built-in patterns only.
pub fn segments(text: &str, size: usize) -> Vec<&str> {
    segments_where(text, size, false)
}

/// [`segments`] of a whole document by `rule`: never inside one of `specials` (which split it
/// later).
pub fn segments_keeping<'t>(text: &'t str, size: usize, rule: Rule, specials: &Specials) -> Vec<&'t str> {
    segments_by(text, size, rule, Some(specials))
}

/// [`segments`]; with `ascii`, only at [`ascii_safe_cut`]s.
pub fn segments_where(text: &str, size: usize, ascii: bool) -> Vec<&str> {
    segments_by(text, size, if ascii { Rule::Ascii } else { Rule::Safe }, None)
}

fn segments_by<'t>(text: &'t str, size: usize, rule: Rule, specials: Option<&Specials>) -> Vec<&'t str> {
    let b = text.as_bytes();
    let ok = |p: usize| rule.ok(b, p, specials);
    let mut out = Vec::new();
    let mut start = 0;
    while b.len() - start > size + size / 2 {
        let target = start + size;
        // Look back from the target first, then forward.
        let cut = last_cut_by(&b[..target], 0, |p| p + 1 < target && ok(p)).filter(|&p| p > start).or_else(|| {
            let mut from = target;
            while let Some(i) = memchr::memchr2(b'\n', b' ', &b[from..]) {
                let i = from + i;
                let p = if b[i] == b'\n' { i + 1 } else { i };
                if ok(p) {
                    return Some(p);
                }
                from = i + 1;
            }
            None
        });
        match cut {
            Some(p) => {
                out.push(&text[start..p]);
                start = p;
            }
            None => break,
        }
    }
    out.push(&text[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretok::Pattern;

    fn pieces(p: &Pattern, t: &str) -> Vec<String> {
        let mut v = Vec::new();
        p.for_each_piece(t, |s, e| v.push(t[s..e].to_string())).unwrap();
        v
    }

    #[test]
    fn cuts_do_not_change_pieces() {
        let text = "Hello world!\nThe cat's hat  \n\nA dog.\nx  y\n 12345 ab cd\n\tz\nq";
        for spec in ["gpt2", "cl100k", "o200k"] {
            let p = Pattern::from_spec(spec).unwrap();
            let whole = pieces(&p, text);
            for cut in 0..=text.len() {
                if safe_cut(text.as_bytes(), cut, None) {
                    let mut parts = pieces(&p, &text[..cut]);
                    parts.extend(pieces(&p, &text[cut..]));
                    assert_eq!(parts, whole, "{spec} cut at {cut}");
                }
            }
        }
    }

    #[test]
    fn cuts_do_not_change_pieces_in_any_script() {
        // Every class the patterns tell apart, in every script, glued at random.
        let parts = [
            "a", "Zebra", "\u{e9}t\u{e9}", "\u{df}", "\u{42f}\u{437}", "\u{65e5}\u{672c}", "\u{30fc}", "\u{1f642}",
            "\u{301}", "1", "12345", "\u{663}", "!", ".", "/", "//", "'s", "'S", "'ll", " ", "  ", "\n", "\n\n", "\r\n",
            "\r", "\t", "\u{a0}", "\u{3000}", "\u{2028}", "\u{85}", "-", "\"", "\u{3002}", "{", ";\n//", " x",
        ];
        let mut seed = 1u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        let mut cuts = 0;
        for spec in ["gpt2", "cl100k", "o200k"] {
            let p = Pattern::from_spec(spec).unwrap();
            for _ in 0..6000 {
                let n = 1 + next() % 32;
                let text: String = (0..n).map(|_| parts[next() % parts.len()]).collect();
                let whole = pieces(&p, &text);
                for cut in 0..=text.len() {
                    if text.is_char_boundary(cut) && safe_cut(text.as_bytes(), cut, None) {
                        let mut parts = pieces(&p, &text[..cut]);
                        parts.extend(pieces(&p, &text[cut..]));
                        assert_eq!(parts, whole, "{spec} cut at {cut} of {text:?}");
                        cuts += 1;
                    }
                }
            }
        }
        assert!(cuts > 8_000, "only {cuts} cuts tried");
    }

    #[test]
    fn cuts_come_in_every_script() {
        // Lines of CJK, Cyrillic and indented code all have cuts (where the old ASCII-only rule
        // had none), so a file of them is never held whole.
        for text in ["\u{65e5}\u{672c}\u{8a9e}\u{3002}\n\u{6587}\u{5b57}\n", "\u{41f}\u{440}\u{438}\n\u{432}\u{435}\u{442}\n", "    x = f(y)\n        return z1\n    }\n"] {
            let big = text.repeat(100);
            assert!(last_safe_cut(big.as_bytes(), None).is_some_and(|c| c + 64 > big.len()), "{text:?}");
        }
    }

    #[test]
    fn ascii_cuts_have_ascii_on_both_sides() {
        let t = "ab\nc\u{e9}\nd x\n\u{301}y ab cd";
        let b = t.as_bytes();
        let cuts: Vec<usize> = (0..b.len()).filter(|&p| ascii_safe_cut(b, p)).collect();
        let safe: Vec<usize> = (0..b.len()).filter(|&p| safe_cut(b, p, None)).collect();
        assert!(cuts.iter().all(|&p| safe.contains(&p) && b[p - 1] < 0x80 && b[p] < 0x80));
        assert!(cuts.contains(&3) && !cuts.contains(&7), "{cuts:?} {safe:?}");
    }

    #[test]
    fn segments_tile_the_text() {
        let text = "word another\nLine ".repeat(1000);
        let segs = segments(&text, 100);
        assert!(segs.len() > 10);
        assert_eq!(segs.concat(), text);
    }
}
