//! Streaming a corpus file (plain text, gzip, JSON lines) as decoded blocks, for both training
//! (`count.rs`) and file encoding (`batch.rs`).
//!
//! * The file is opened and sniffed: gzip by its magic bytes (whatever the name), JSON lines by
//!   the name (`.jsonl`, `.jsonl.gz`).
//! * A reader thread reads (and gunzips) [`BLOCK_BYTES`] at a time and sends the blocks over a
//!   bounded channel (two in flight), so reading overlaps the work and memory stays bounded.
//! * Bytes wait in a *carry* buffer until they can be cut off without changing the result:
//!   - JSON lines: after the last `'\n'`; the sink gets the documents of complete lines;
//!   - text with a built-in pattern ([`CutRule::Safe`]): at [`last_safe_cut`], a place where every
//!     built-in pattern ends a piece and no special token straddles;
//!   - text with a custom regex ([`CutRule::AfterSpecial`]): a regex may match across anything
//!     except a special token, so only right after an allowed special token (found by the one
//!     matcher, `crate::specials`). The carry then holds all text up to the next special token:
//!     a file without special tokens is held whole in memory.
//! * Text is decoded under a [`Utf8Errors`] policy; errors name the file and the byte offset
//!   (text) or the line (JSON lines).
//! * `progress` receives the number of file bytes read (compressed bytes for gzip) after each
//!   block; returning `false` stops with the [`INTERRUPTED`] error.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;
use std::sync::Arc;

use crate::pretok::{char_class, L, N, WS};
use crate::specials::{SpecialSet, Specials};

/// Size of one read from a file. Up to four blocks are alive at once (two queued, one being
/// read, one being counted plus its carry-over), so this sets the reader's memory. 2 MiB keeps
/// both cores busy (two 1 MiB segments per block) and measured as fast as 8 MiB on the 191 MB
/// English corpus while lowering peak RSS of training by ~15 MiB (20 MB) to ~28 MiB (191 MB).
pub const BLOCK_BYTES: usize = 2 << 20;

/// A callback told how far a long job has got; returning `false` stops the job (e.g. Ctrl-C).
pub type Progress<'a> = &'a mut dyn FnMut(u64) -> bool;

/// The error of a job stopped by its progress callback.
pub const INTERRUPTED: &str = "interrupted";

/// What to do with bytes that are not valid UTF-8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Utf8Errors {
    /// Fail, naming the file and the byte offset.
    Strict,
    /// Replace each bad sequence with U+FFFD.
    Replace,
    /// Drop bad sequences.
    Ignore,
}

impl Utf8Errors {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "strict" => Ok(Self::Strict),
            "replace" => Ok(Self::Replace),
            "ignore" => Ok(Self::Ignore),
            _ => Err(format!("errors must be 'strict', 'replace' or 'ignore', not {s:?}")),
        }
    }
}

/// Where plain text may be cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutRule {
    /// Built-in patterns: at [`last_safe_cut`].
    Safe,
    /// Custom regex: only right after a special token.
    AfterSpecial,
}

pub struct ReadOptions<'a> {
    pub errors: Utf8Errors,
    /// Field of a JSON-lines record that holds the document.
    pub text_field: &'a str,
    pub cut: CutRule,
    /// Special tokens: never cut inside one ([`CutRule::Safe`]); cut after an allowed one
    /// ([`CutRule::AfterSpecial`]).
    pub specials: &'a Specials,
    pub allowed: &'a SpecialSet,
    /// Read only the bytes `start..end` of a plain file (a shard cut by [`shard_cuts`]).
    pub range: Option<(u64, u64)>,
}

/// What the reader hands to its sink.
pub enum Block<'a> {
    /// The next piece of the file's text (the whole file is one document).
    Text(&'a str),
    /// The documents of complete JSON lines (lines with a `null` field are skipped).
    Docs(&'a [String]),
}

/// True for a JSON-lines file name.
pub fn is_jsonl(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".jsonl") || lower.ends_with(".jsonl.gz")
}

/// Streams `path` into `sink` block by block (see the module notes).
pub fn read_corpus(
    path: &str,
    opt: &ReadOptions,
    progress: Progress,
    mut sink: impl FnMut(Block) -> Result<(), String>,
) -> Result<ReadStats, String> {
    let mut file = File::open(path).map_err(|e| format!("{path}: cannot open: {e}"))?;
    let gz = {
        let mut head = [0u8; 2];
        let mut f = File::open(path).map_err(|e| format!("{path}: cannot open: {e}"))?;
        f.read(&mut head).unwrap_or(0) == 2 && head == [0x1f, 0x8b]
    };
    let (start, len) = match opt.range {
        Some(_) if gz => return Err(format!("{path}: a gzip file is read whole, not by byte ranges")),
        Some((s, e)) => (s, e.saturating_sub(s)),
        None => (0, u64::MAX),
    };
    if start > 0 {
        file.seek(SeekFrom::Start(start)).map_err(|e| format!("{path}: cannot seek to byte {start}: {e}"))?;
    }
    let jsonl = is_jsonl(path);
    // Custom patterns: cut only after an allowed special (none allowed: never cut).
    let after_special = matches!(opt.cut, CutRule::AfterSpecial) && !jsonl;
    let cuts = if after_special { opt.specials.automaton(opt.allowed) } else { None };

    let read_bytes = Arc::new(AtomicU64::new(0));
    let (rx, reader_thread) = spawn_reader(CountingReader { inner: file.take(len), n: read_bytes.clone() }, gz);

    let mut carry: Vec<u8> = Vec::new();
    let mut stats = ReadStats::default();
    // carry[..searched] was searched for a cut already; the search goes on from `MARGIN` bytes
    // before it (a cut needs a few bytes of context on each side, and no special may straddle),
    // so each byte is searched about once however long no cut comes.
    let margin = CUT_CONTEXT + opt.specials.list().iter().map(|(t, _)| t.len()).max().unwrap_or(0);
    let mut searched = 0usize;
    let mut offset: u64 = start; // decoded-byte offset of carry[0] in the file
    // JSON lines of a shard are numbered from its start, so name the shard with the line.
    let shown = if start > 0 { format!("{path} (the shard from byte {start})") } else { path.to_string() };
    let mut line: u64 = 1; // line number of carry[0] (JSON lines)
    let mut docs: Vec<String> = Vec::new();
    let mut result = Ok(());
    let mut eof = false;
    while !eof {
        match rx.recv() {
            Ok(Ok(block)) => {
                if carry.is_empty() {
                    carry = block; // no copy when nothing is left over
                } else {
                    carry.extend_from_slice(&block);
                }
            }
            Ok(Err(e)) => {
                let what = if gz { "corrupt gzip data or a read error" } else { "read error" };
                result = Err(format!("{path}: {what} at byte {} (decompressed): {e}", offset + carry.len() as u64));
                break;
            }
            Err(_) => eof = true,
        }
        stats.max_carry = stats.max_carry.max(carry.len());
        let from = if after_special { 0 } else { searched.saturating_sub(margin) };
        stats.rescanned += (searched - from) as u64;
        let cut = if eof {
            Some(carry.len())
        } else if jsonl {
            memchr::memrchr(b'\n', &carry[from..]).map(|p| from + p + 1)
        } else if after_special {
            cuts.as_ref().and_then(|a| a.last_cut(&carry))
        } else {
            last_safe_cut_from(&carry, Some(opt.specials), from)
        };
        let Some(cut) = cut else {
            searched = carry.len();
            if !progress(read_bytes.load(Ordering::Relaxed)) {
                result = Err(INTERRUPTED.to_string());
                break;
            }
            continue;
        };
        searched = carry.len() - cut;
        let chunk = &carry[..cut];
        let step = if chunk.is_empty() {
            Ok(()) // end of file with nothing left over
        } else if jsonl {
            docs.clear();
            jsonl_docs(chunk, &shown, line, opt, &mut docs).and_then(|n| {
                line += n;
                sink(Block::Docs(&docs))
            })
        } else {
            decode(chunk, opt.errors, path, offset)
                .map_err(|e| if gz { format!("{e}; the file is gzip-compressed: it may be corrupt (the offset counts decompressed bytes)") } else { e })
                .and_then(|text| sink(Block::Text(&text)))
        };
        if let Err(e) = step {
            result = Err(e);
            break;
        }
        offset += cut as u64;
        carry.drain(..cut);
        if !progress(read_bytes.load(Ordering::Relaxed)) {
            result = Err(INTERRUPTED.to_string());
            break;
        }
    }
    drop(rx);
    let _ = reader_thread.join();
    result.map(|()| stats)
}

/// What the reader did with one file: deterministic for a file and its options, so tests can
/// check that memory stays flat and the work linear without timing anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// The most bytes held at once (a block plus what was carried over from the ones before).
    pub max_carry: usize,
    /// Bytes searched for a cut more than once.
    pub rescanned: u64,
}

/// Bytes of context a cut rule looks at on each side of the cut (one char each way).
const CUT_CONTEXT: usize = 8;

/// A thread that reads (and gunzips) [`BLOCK_BYTES`] at a time into a channel of two blocks.
fn spawn_reader(raw: CountingReader, gz: bool) -> (Receiver<std::io::Result<Vec<u8>>>, JoinHandle<()>) {
    let (tx, rx) = sync_channel::<std::io::Result<Vec<u8>>>(2);
    let handle = std::thread::spawn(move || {
        let mut reader: Box<dyn Read> = if gz {
            Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, raw)))
        } else {
            Box::new(raw)
        };
        loop {
            let mut block = Vec::with_capacity(BLOCK_BYTES);
            match reader.by_ref().take(BLOCK_BYTES as u64).read_to_end(&mut block) {
                Ok(0) => break,
                Ok(_) => {
                    if tx.send(Ok(block)).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    break;
                }
            }
        }
    });
    (rx, handle)
}

/// Parses complete JSON lines into `docs`. Returns the number of lines.
fn jsonl_docs(chunk: &[u8], path: &str, first_line: u64, opt: &ReadOptions, docs: &mut Vec<String>) -> Result<u64, String> {
    let field = opt.text_field;
    for (i, raw) in chunk.split(|&b| b == b'\n').enumerate() {
        let lineno = first_line + i as u64;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let text = decode(raw, opt.errors, path, 0).map_err(|_| format!("{path}: line {lineno}: invalid UTF-8"))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{path}: line {lineno}: invalid JSON: {e}"))?;
        match v.get(field) {
            Some(serde_json::Value::String(s)) => docs.push(s.clone()),
            Some(serde_json::Value::Null) => {}
            Some(_) => return Err(format!("{path}: line {lineno}: field {field:?} is not a string")),
            None => return Err(format!("{path}: line {lineno}: no field {field:?}")),
        }
    }
    Ok(memchr::memchr_iter(b'\n', chunk).count() as u64)
}

/// Decodes bytes as UTF-8 under the chosen policy; `offset` locates `b` in the file for errors.
pub fn decode<'a>(b: &'a [u8], errors: Utf8Errors, path: &str, offset: u64) -> Result<Cow<'a, str>, String> {
    match std::str::from_utf8(b) {
        Ok(s) => Ok(Cow::Borrowed(s)),
        Err(e) => match errors {
            Utf8Errors::Strict => Err(format!(
                "{path}: invalid UTF-8 at byte offset {} (pass errors='replace' or errors='ignore' to read it anyway)",
                offset + e.valid_up_to() as u64
            )),
            Utf8Errors::Replace => Ok(String::from_utf8_lossy(b)),
            Utf8Errors::Ignore => {
                let mut out = String::with_capacity(b.len());
                for chunk in b.utf8_chunks() {
                    out.push_str(chunk.valid());
                }
                Ok(Cow::Owned(out))
            }
        },
    }
}

struct CountingReader {
    inner: std::io::Take<File>,
    n: Arc<AtomicU64>,
}

impl Read for CountingReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.fetch_add(k as u64, Ordering::Relaxed);
        Ok(k)
    }
}

// ---------------------------------------------------------------------------------------------
// Cut rules
// ---------------------------------------------------------------------------------------------

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
    let ok = (b[p - 1] == b'\n' && b[p] != b'/' && class_before(b, p - 1).is_some_and(|c| c & WS == 0)
        && class_after(b, p).is_some_and(|c| c & WS == 0))
        || (b[p] == b'\n' && class_before(b, p).is_some_and(|c| c & (L | N) != 0))
        || (b[p] == b' ' && b[p - 1].is_ascii_alphabetic() && b[p + 1].is_ascii_alphabetic());
    ok && !specials.is_some_and(|s| s.straddles(b, p))
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
pub fn shard_cuts(path: &str, targets: &[u64], jsonl: bool, specials: &Specials) -> Result<Vec<u64>, String> {
    let mut f = File::open(path).map_err(|e| format!("{path}: cannot open: {e}"))?;
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
            let found = (from..last).find(|&p| if jsonl { buf[p - 1] == b'\n' } else { safe_cut(&buf, p, Some(specials)) });
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

/// [`segments`] of a whole document: never inside one of `specials` (which split it later).
pub fn segments_keeping<'t>(text: &'t str, size: usize, specials: &Specials) -> Vec<&'t str> {
    segments_by(text, size, false, Some(specials))
}

/// [`segments`]; with `ascii`, only at [`ascii_safe_cut`]s.
pub fn segments_where(text: &str, size: usize, ascii: bool) -> Vec<&str> {
    segments_by(text, size, ascii, None)
}

fn segments_by<'t>(text: &'t str, size: usize, ascii: bool, specials: Option<&Specials>) -> Vec<&'t str> {
    let b = text.as_bytes();
    let ok = |p: usize| {
        (if ascii { ascii_safe_cut(b, p) } else { safe_cut(b, p, None) }) && !specials.is_some_and(|s| s.straddles(b, p))
    };
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
