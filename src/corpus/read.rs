//! Streaming a corpus file (plain text, gzip, JSON lines) as decoded blocks, for both training
//! (`crate::count`) and file encoding (`crate::files`).
//!
//! * The file is opened and sniffed: gzip by its magic bytes (whatever the name), JSON lines by
//!   the name (`.jsonl`, `.jsonl.gz`).
//! * A reader thread reads (and gunzips) [`BLOCK_BYTES`] at a time and sends the blocks over a
//!   bounded channel (two in flight), so reading overlaps the work and memory stays bounded.
//! * Bytes wait in a *carry* buffer until they can be cut off without changing the result:
//!   - JSON lines: after the last `'\n'`; the sink gets the documents of complete lines;
//!   - text with a built-in pattern ([`CutRule::Safe`]): at [`super::cuts::last_safe_cut`], a
//!     place where every built-in pattern ends a piece and no special token straddles; with a
//!     superword span pattern ([`CutRule::Lines`]) only such places at a `'\n'`;
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

use super::cuts::{last_cut_from, last_safe_cut_from, Rule, CUT_CONTEXT};
use crate::specials::{SpecialSet, Specials};

/// Size of one read from a file. Up to four blocks are alive at once (two queued, one being
/// read, one being cut plus its carry-over; counting holds copies of two more,
/// `crate::count::stream`), so this sets the reader's memory. 2 MiB measured as fast as 8 MiB
/// on the 191 MB English corpus while lowering peak RSS of training by ~15 MiB (20 MB) to
/// ~28 MiB (191 MB).
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
    /// Built-in patterns: at [`super::cuts::last_safe_cut`].
    Safe,
    /// Superword span patterns: at [`super::cuts::line_cut`]s.
    Lines,
    /// Custom regex: only right after a special token.
    AfterSpecial,
}

impl CutRule {
    /// The rule for text of `pattern` (see `Pattern::cut_rule`).
    pub fn of(pattern: &crate::pretok::Pattern) -> CutRule {
        match pattern.cut_rule() {
            Some(super::cuts::Rule::Lines) => CutRule::Lines,
            Some(_) => CutRule::Safe,
            None => CutRule::AfterSpecial,
        }
    }
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
    /// Read only the bytes `start..end` of a plain file (a shard cut by [`super::cuts::shard_cuts`]).
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
pub fn is_jsonl(path: &std::path::Path) -> bool {
    let lower = path.to_string_lossy().to_ascii_lowercase();
    lower.ends_with(".jsonl") || lower.ends_with(".jsonl.gz")
}

/// Streams `path` into `sink` block by block (see the module notes).
pub fn read_corpus(
    file_path: &std::path::Path,
    opt: &ReadOptions,
    progress: Progress,
    mut sink: impl FnMut(Block) -> Result<(), String>,
) -> Result<ReadStats, String> {
    // (The name in messages; the file itself is opened by its bytes.)
    let path = &*file_path.display().to_string();
    let mut file = File::open(file_path).map_err(|e| format!("{path}: cannot open: {e}"))?;
    let gz = {
        let mut head = [0u8; 2];
        let mut f = File::open(file_path).map_err(|e| format!("{path}: cannot open: {e}"))?;
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
    let jsonl = is_jsonl(file_path);
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
        } else if opt.cut == CutRule::Lines {
            last_cut_from(&carry, Rule::Lines, Some(opt.specials), from)
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
