//! Counting distinct pre-tokens over a corpus, in parallel and in bounded memory.
//!
//! The corpus arrives as in-memory documents or as files (plain text, gzip, JSON lines). Each
//! document is split on the special tokens first, then cut into pre-tokens by the [`Pattern`];
//! every distinct pre-token is counted once with a 64-bit count.
//!
//! Performance notes:
//! * Work is split into segments of about [`SEGMENT_BYTES`] at *safe cuts* (see [`safe_cut`]):
//!   places where every built-in pattern is known to end a piece, so cutting there changes nothing.
//!   Segments are counted on all threads of the counter's pool.
//! * Each pool thread owns one shard of counts (a mutex that is never contended, indexed by
//!   `rayon::current_thread_index`), so there is no merging of maps until training starts.
//! * Pre-tokens of at most 15 bytes (almost all of them in natural text) are packed into a
//!   `u128` key: one hash of two words, no allocation, no pointer chasing. Longer ones go to a
//!   map keyed by boxed bytes.
//! * Files are read by a separate thread into blocks of [`BLOCK_BYTES`] (at most two in flight),
//!   so memory is bounded by a few blocks plus the distinct words, whatever the corpus size.

use std::fs::File;
use std::io::{BufReader, Read};
use std::sync::mpsc::sync_channel;
use std::sync::Mutex;

use aho_corasick::{AhoCorasick, MatchKind};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::pretok::Pattern;

/// Target size of one unit of parallel work.
pub const SEGMENT_BYTES: usize = 1 << 20;
/// Size of one read from a file.
pub const BLOCK_BYTES: usize = 8 << 20;

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

#[derive(Default)]
struct Shard {
    short: FxHashMap<u128, u64>,
    long: FxHashMap<Box<[u8]>, u64>,
}

#[inline]
fn pack(b: &[u8]) -> u128 {
    debug_assert!(b.len() < 16);
    let mut buf = [0u8; 16];
    buf[..b.len()].copy_from_slice(b);
    buf[15] = b.len() as u8;
    u128::from_le_bytes(buf)
}

#[inline]
fn unpack(k: u128) -> Vec<u8> {
    let buf = k.to_le_bytes();
    buf[..buf[15] as usize].to_vec()
}

impl Shard {
    #[inline]
    fn add(&mut self, piece: &[u8], n: u64) {
        if piece.len() < 16 {
            *self.short.entry(pack(piece)).or_insert(0) += n;
        } else if let Some(c) = self.long.get_mut(piece) {
            *c += n;
        } else {
            self.long.insert(piece.into(), n);
        }
    }
}

/// Distinct pre-tokens and their counts, built incrementally.
pub struct Counter {
    pattern: Pattern,
    specials: Vec<String>,
    special_ac: Option<AhoCorasick>,
    pool: rayon::ThreadPool,
    shards: Vec<Mutex<Shard>>,
    /// Bytes of text counted so far (after decoding).
    pub bytes: u64,
    /// Documents counted so far (files count their lines for JSON lines, else one each).
    pub documents: u64,
}

/// A callback told how far a long job has got; returning `false` stops the job (e.g. Ctrl-C).
pub type Progress<'a> = &'a mut dyn FnMut(u64) -> bool;

pub const INTERRUPTED: &str = "interrupted";

impl Counter {
    pub fn new(pattern: Pattern, specials: Vec<String>, num_threads: usize) -> Result<Self, String> {
        let special_ac = if specials.is_empty() {
            None
        } else {
            if let Some(s) = specials.iter().find(|s| s.is_empty()) {
                return Err(format!("special token {s:?} is empty"));
            }
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&specials)
                    .map_err(|e| e.to_string())?,
            )
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(num_threads)
            .thread_name(|i| format!("hf_bpe-count-{i}"))
            .build()
            .map_err(|e| e.to_string())?;
        let n = pool.current_num_threads();
        Ok(Counter {
            pattern,
            specials,
            special_ac,
            pool,
            shards: (0..n).map(|_| Mutex::new(Shard::default())).collect(),
            bytes: 0,
            documents: 0,
        })
    }

    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    pub fn specials(&self) -> &[String] {
        &self.specials
    }

    /// Counts one piece of a document: special tokens split it, the pattern cuts the rest.
    fn count_text(&self, shard: &mut Shard, text: &str) -> Result<(), String> {
        let mut count = |t: &str| {
            let b = t.as_bytes();
            self.pattern.for_each_piece(t, |s, e| shard.add(&b[s..e], 1))
        };
        match &self.special_ac {
            None => count(text),
            Some(ac) => {
                let mut last = 0;
                for m in ac.find_iter(text) {
                    count(&text[last..m.start()])?;
                    last = m.end();
                }
                count(&text[last..])
            }
        }
    }

    /// Counts a batch of documents on all threads. Big documents are cut at safe places.
    pub fn add_texts(&mut self, docs: &[&str]) -> Result<(), String> {
        self.documents += docs.len() as u64;
        self.count_docs(docs)
    }

    fn count_docs(&mut self, docs: &[&str]) -> Result<(), String> {
        let mut work: Vec<Vec<&str>> = Vec::new();
        let mut cur: Vec<&str> = Vec::new();
        let mut cur_len = 0;
        for &d in docs {
            for seg in segments(d, SEGMENT_BYTES) {
                cur_len += seg.len();
                cur.push(seg);
                if cur_len >= SEGMENT_BYTES {
                    work.push(std::mem::take(&mut cur));
                    cur_len = 0;
                }
            }
            self.bytes += d.len() as u64;
        }
        if !cur.is_empty() {
            work.push(cur);
        }
        let this = &*self;
        this.pool.install(|| {
            work.par_iter().try_for_each(|group| {
                let i = rayon::current_thread_index().unwrap_or(0) % this.shards.len();
                let mut shard = this.shards[i].lock().unwrap();
                group.iter().try_for_each(|t| this.count_text(&mut shard, t))
            })
        })
    }

    /// Streams one file (plain text, `.gz`, `.jsonl`/`.jsonl.gz` with a `text` field) into the
    /// counts. `progress` receives the number of file bytes read so far.
    pub fn add_file(
        &mut self,
        path: &str,
        errors: Utf8Errors,
        text_field: &str,
        progress: Progress,
    ) -> Result<(), String> {
        let file = File::open(path).map_err(|e| format!("{path}: cannot open: {e}"))?;
        let mut head = [0u8; 2];
        let gz = {
            let mut f = File::open(path).map_err(|e| format!("{path}: cannot open: {e}"))?;
            let n = f.read(&mut head).unwrap_or(0);
            n == 2 && head == [0x1f, 0x8b]
        };
        let lower = path.to_ascii_lowercase();
        let jsonl = lower.ends_with(".jsonl") || lower.ends_with(".jsonl.gz");
        let (read_bytes, reader) = counting_reader(file);
        let reader: Box<dyn Read + Send> = if gz {
            Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, reader)))
        } else {
            Box::new(reader)
        };
        let (tx, rx) = sync_channel::<std::io::Result<Vec<u8>>>(2);
        let reader_thread = std::thread::spawn(move || {
            let mut reader = reader;
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

        let mut carry: Vec<u8> = Vec::new();
        let mut offset: u64 = 0; // decoded-byte offset of carry[0] in the file
        let mut line: u64 = 1; // line number of carry[0] (JSON lines)
        let mut result = Ok(());
        let mut eof = false;
        while !eof {
            match rx.recv() {
                Ok(Ok(block)) => carry.extend_from_slice(&block),
                Ok(Err(e)) => {
                    result = Err(format!("{path}: read error at byte {}: {e}", offset + carry.len() as u64));
                    break;
                }
                Err(_) => eof = true,
            }
            let cut = if eof {
                carry.len()
            } else if jsonl {
                match memchr::memrchr(b'\n', &carry) {
                    Some(p) => p + 1,
                    None => continue,
                }
            } else {
                match last_safe_cut(&carry, &self.specials) {
                    Some(p) => p,
                    None => continue,
                }
            };
            let chunk = &carry[..cut];
            let step = if jsonl {
                self.count_jsonl(chunk, path, line, errors, text_field)
                    .map(|n| line += n)
            } else {
                decode(chunk, errors, path, offset).and_then(|text| self.count_docs(&[&text]))
            };
            if let Err(e) = step {
                result = Err(e);
                break;
            }
            offset += cut as u64;
            carry.drain(..cut);
            if !progress(read_bytes.load(std::sync::atomic::Ordering::Relaxed)) {
                result = Err(INTERRUPTED.to_string());
                break;
            }
        }
        if !jsonl && result.is_ok() {
            self.documents += 1;
        }
        drop(rx);
        let _ = reader_thread.join();
        result
    }

    /// Parses complete JSON lines and counts their text fields. Returns the number of lines.
    fn count_jsonl(
        &mut self,
        chunk: &[u8],
        path: &str,
        first_line: u64,
        errors: Utf8Errors,
        field: &str,
    ) -> Result<u64, String> {
        let mut docs: Vec<String> = Vec::new();
        for (i, raw) in chunk.split(|&b| b == b'\n').enumerate() {
            let lineno = first_line + i as u64;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            let text = decode(raw, errors, path, 0)
                .map_err(|_| format!("{path}: line {lineno}: invalid UTF-8"))?;
            let v: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| format!("{path}: line {lineno}: invalid JSON: {e}"))?;
            match v.get(field) {
                Some(serde_json::Value::String(s)) => docs.push(s.clone()),
                Some(serde_json::Value::Null) => {}
                Some(_) => return Err(format!("{path}: line {lineno}: field {field:?} is not a string")),
                None => return Err(format!("{path}: line {lineno}: no field {field:?}")),
            }
        }
        let refs: Vec<&str> = docs.iter().map(|s| s.as_str()).collect();
        self.add_texts(&refs)?;
        Ok(memchr::memchr_iter(b'\n', chunk).count() as u64)
    }

    /// Number of distinct pre-tokens so far.
    pub fn len(&self) -> usize {
        // Shards may share keys, so this is an upper bound until `words` merges them.
        self.shards.iter().map(|s| {
            let s = s.lock().unwrap();
            s.short.len() + s.long.len()
        }).sum()
    }

    /// All distinct pre-tokens with their counts, merged across shards, sorted by bytes.
    pub fn words(&self) -> Vec<(Box<[u8]>, u64)> {
        let mut short: FxHashMap<u128, u64> = FxHashMap::default();
        let mut long: FxHashMap<Box<[u8]>, u64> = FxHashMap::default();
        for s in &self.shards {
            let s = s.lock().unwrap();
            if short.is_empty() {
                short = s.short.clone();
            } else {
                for (&k, &v) in &s.short {
                    *short.entry(k).or_insert(0) += v;
                }
            }
            for (k, &v) in &s.long {
                *long.entry(k.clone()).or_insert(0) += v;
            }
        }
        let mut out: Vec<(Box<[u8]>, u64)> = short
            .into_iter()
            .map(|(k, v)| (unpack(k).into_boxed_slice(), v))
            .chain(long)
            .collect();
        out.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// Decodes bytes as UTF-8 under the chosen policy; `offset` locates `b` in the file for errors.
fn decode<'a>(b: &'a [u8], errors: Utf8Errors, path: &str, offset: u64) -> Result<std::borrow::Cow<'a, str>, String> {
    match std::str::from_utf8(b) {
        Ok(s) => Ok(std::borrow::Cow::Borrowed(s)),
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
                Ok(std::borrow::Cow::Owned(out))
            }
        },
    }
}

fn counting_reader(f: File) -> (std::sync::Arc<std::sync::atomic::AtomicU64>, CountingReader) {
    let n = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    (n.clone(), CountingReader { inner: f, n })
}

struct CountingReader {
    inner: File,
    n: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Read for CountingReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.fetch_add(k as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(k)
    }
}

#[inline]
fn is_ascii_graphic(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

/// Is `p` a place where every built-in pattern ends a piece, whatever comes before or after?
///
/// Two shapes qualify:
/// * `X '\n' | Y` with X and Y printable ASCII: the `'\n'` is a whitespace run of one, which
///   every pattern emits alone (or as the tail of a punctuation piece) both mid-text and at the
///   end of a text, and Y starts a new piece.
/// * `a | ' ' b` with a and b ASCII letters: a letter run ends at the space, and the space
///   starts the next letter piece in every pattern.
/// A special token must not straddle the cut either.
pub fn safe_cut(b: &[u8], p: usize, specials: &[String]) -> bool {
    if p < 2 || p + 1 >= b.len() {
        return false;
    }
    // Not before '/': o200k's ` ?[^\s\p{L}\p{N}]+[\r\n/]*` makes ";\n//" one piece.
    let ok = (b[p - 1] == b'\n' && is_ascii_graphic(b[p - 2]) && is_ascii_graphic(b[p]) && b[p] != b'/')
        || (b[p] == b' ' && b[p - 1].is_ascii_alphabetic() && b[p + 1].is_ascii_alphabetic());
    ok && !specials.iter().any(|s| straddles(b, p, s.as_bytes()))
}

fn straddles(b: &[u8], p: usize, s: &[u8]) -> bool {
    (1..s.len()).any(|k| p >= k && p - k + s.len() <= b.len() && &b[p - k..p - k + s.len()] == s)
}

/// The last safe cut in `b`, looking back at most a few blocks' worth.
pub fn last_safe_cut(b: &[u8], specials: &[String]) -> Option<usize> {
    let mut end = b.len();
    while let Some(i) = memchr::memrchr(b'\n', &b[..end]) {
        if safe_cut(b, i + 1, specials) {
            return Some(i + 1);
        }
        end = i;
    }
    let mut end = b.len();
    while let Some(i) = memchr::memrchr(b' ', &b[..end]) {
        if safe_cut(b, i, specials) {
            return Some(i);
        }
        end = i;
    }
    None
}

/// Cuts `text` into pieces of about `size` bytes at safe cuts (one piece if there is none).
pub fn segments(text: &str, size: usize) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    while b.len() - start > size + size / 2 {
        let target = start + size;
        // Look back from the target first, then forward.
        let cut = last_safe_cut(&b[..target], &[]).filter(|&p| p > start).or_else(|| {
            let mut from = target;
            while let Some(i) = memchr::memchr2(b'\n', b' ', &b[from..]) {
                let i = from + i;
                let p = if b[i] == b'\n' { i + 1 } else { i };
                if safe_cut(b, p, &[]) {
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
                if safe_cut(text.as_bytes(), cut, &[]) {
                    let mut parts = pieces(&p, &text[..cut]);
                    parts.extend(pieces(&p, &text[cut..]));
                    assert_eq!(parts, whole, "{spec} cut at {cut}");
                }
            }
        }
    }

    #[test]
    fn segments_tile_the_text() {
        let text = "word another\nLine ".repeat(1000);
        let segs = segments(&text, 100);
        assert!(segs.len() > 10);
        assert_eq!(segs.concat(), text);
    }

    #[test]
    fn packing_round_trips() {
        for s in [&b""[..], b"a", b"hello world!!!!"] {
            assert_eq!(unpack(pack(s)), s);
        }
    }
}
