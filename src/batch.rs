//! Parallel, fork-safe driving of an [`Encoder`]: batches, huge single texts, offsets, files.
//!
//! Performance notes:
//! * Documents are first split at allowed special tokens into *items*; text items bigger than
//!   [`SEGMENT_BYTES`] are cut at safe places (`count::segments`, valid for the built-in
//!   patterns only), so one 100 MB line is spread over all cores like a batch of documents.
//! * Consecutive items are grouped into *units* of roughly equal size (64 KiB–1 MiB); each unit
//!   borrows one cache slot once, encodes into its own `Vec<u32>`, and the vectors are joined in
//!   order at the end. Flat output (ids + offsets) avoids one Python list per document, which
//!   costs more than the encoding itself for short documents.
//! * All of it runs with the GIL released (the binding does that), on a rayon pool owned by this
//!   module, not the global one.
//! * **Fork safety.** A rayon pool does not survive `fork()` (its threads are gone in the child,
//!   so the first `install` would hang forever). Pools are stored with the pid that built them;
//!   a child sees a different pid, leaks the parent's pool object (dropping it would try to talk
//!   to threads that do not exist) and builds a fresh one. The registry mutex is only ever
//!   `try_lock`ed: if a parent thread held it at fork time, the child runs single-threaded
//!   instead of deadlocking.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use crate::count::{last_safe_cut, segments, Progress, INTERRUPTED};
use crate::encode::{Encoder, Item, SpecialSet};

/// Text items longer than this are cut at safe places.
pub const SEGMENT_BYTES: usize = 1 << 20;
/// Batches smaller than this run on the calling thread (thread hand-off costs more).
pub const PARALLEL_MIN_BYTES: usize = 256 << 10;
/// Size of one read from a file.
pub const BLOCK_BYTES: usize = 16 << 20;

// ---------------------------------------------------------------------------------------------
// Thread pools (fork-aware)
// ---------------------------------------------------------------------------------------------

struct Pools {
    pid: u32,
    pools: Vec<(usize, Arc<rayon::ThreadPool>)>,
}

static POOLS: Mutex<Option<Pools>> = Mutex::new(None);

pub fn default_threads() -> usize {
    if let Ok(s) = std::env::var("RAYON_NUM_THREADS") {
        if let Ok(n) = s.trim().parse::<usize>() {
            if n > 0 {
                return n;
            }
        }
    }
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// A pool of `n` threads (0 = default), or None to run on the calling thread.
pub fn pool(n: usize) -> Option<Arc<rayon::ThreadPool>> {
    let n = if n == 0 { default_threads() } else { n };
    if n <= 1 {
        return None;
    }
    let pid = std::process::id();
    let mut guard = POOLS.try_lock().ok()?;
    if guard.as_ref().is_some_and(|p| p.pid != pid) {
        // Forked child: the parent's threads do not exist here. Never drop those pools.
        if let Some(old) = guard.take() {
            std::mem::forget(old);
        }
    }
    let pools = guard.get_or_insert_with(|| Pools { pid, pools: Vec::new() });
    if let Some((_, p)) = pools.pools.iter().find(|(k, _)| *k == n) {
        return Some(p.clone());
    }
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("hf_bpe-encode-{i}"))
        .build()
        .ok()?;
    let p = Arc::new(p);
    pools.pools.push((n, p.clone()));
    Some(p)
}

// ---------------------------------------------------------------------------------------------
// Batches
// ---------------------------------------------------------------------------------------------

/// One work unit's output: its ids and the number of ids of each of its items.
type UnitOut = (Vec<u32>, Vec<u32>);
/// Token ids and their `(start, end)` ranges.
pub type IdsAndSpans = (Vec<u32>, Vec<(usize, usize)>);

/// Result of a batch: all ids in document order and each document's number of ids.
pub struct Flat {
    pub ids: Vec<u32>,
    pub lens: Vec<usize>,
}

fn item_bytes(it: &Item) -> usize {
    match *it {
        Item::Text(s, e) => e - s,
        Item::Special(..) => 16,
    }
}

/// Encodes documents: each is checked for disallowed specials, split at allowed ones, and
/// `sep` (if any) is appended after each document.
pub fn encode_docs(
    enc: &Encoder,
    docs: &[&str],
    allowed: &SpecialSet,
    disallowed: &Option<SpecialSet>,
    sep: Option<u32>,
    num_threads: usize,
) -> Result<Flat, String> {
    let total: usize = docs.iter().map(|d| d.len()).sum();
    if docs.len() == 1 && total < PARALLEL_MIN_BYTES && sep.is_none() {
        return encode_small(enc, docs[0], allowed, disallowed);
    }
    // Check first: an error must not depend on thread timing.
    for d in docs {
        enc.check_disallowed(d, allowed, disallowed)?;
    }
    let pool = if total >= PARALLEL_MIN_BYTES { pool(num_threads) } else { None };

    // Items, tagged with their document.
    let mut items: Vec<(u32, Item)> = Vec::with_capacity(docs.len());
    let mut scratch = Vec::new();
    let builtin = enc.pattern.is_builtin();
    for (di, d) in docs.iter().enumerate() {
        scratch.clear();
        enc.split_specials(d, allowed, 0, &mut scratch);
        for it in scratch.drain(..) {
            match it {
                Item::Text(s, e) if pool.is_some() && builtin && e - s > SEGMENT_BYTES + SEGMENT_BYTES / 2 => {
                    let mut p = s;
                    for seg in segments(&d[s..e], SEGMENT_BYTES) {
                        items.push((di as u32, Item::Text(p, p + seg.len())));
                        p += seg.len();
                    }
                }
                it => items.push((di as u32, it)),
            }
        }
        if let Some(id) = sep {
            items.push((di as u32, Item::Special(id, 0, 0)));
        }
    }

    let run_unit = |range: std::ops::Range<usize>, hint: usize| -> Result<UnitOut, String> {
        let mut cache = enc.cache(hint);
        let bytes: usize = items[range.clone()].iter().map(|(_, it)| item_bytes(it)).sum();
        let mut ids = Vec::with_capacity(bytes / 3 + 16);
        let mut lens = Vec::with_capacity(range.len());
        for (di, it) in &items[range] {
            let k = ids.len();
            match *it {
                Item::Text(s, e) => enc.encode_text(&mut cache, &docs[*di as usize][s..e], &mut ids)?,
                Item::Special(id, _, _) => ids.push(id),
            }
            lens.push((ids.len() - k) as u32);
        }
        Ok((ids, lens))
    };

    let parts: Vec<UnitOut> = match &pool {
        None => vec![run_unit(0..items.len(), 0)?],
        Some(pool) => {
            let threads = pool.current_num_threads();
            let unit = (total / (threads * 8)).clamp(64 << 10, SEGMENT_BYTES);
            let mut units = Vec::new();
            let mut start = 0;
            let mut acc = 0;
            for (i, (_, it)) in items.iter().enumerate() {
                acc += item_bytes(it);
                if acc >= unit {
                    units.push(start..i + 1);
                    start = i + 1;
                    acc = 0;
                }
            }
            if start < items.len() {
                units.push(start..items.len());
            }
            pool.install(|| {
                units
                    .into_par_iter()
                    .map(|r| run_unit(r, rayon::current_thread_index().map_or(0, |i| i + 1)))
                    .collect::<Result<Vec<_>, String>>()
            })?
        }
    };

    let mut lens = vec![0usize; docs.len()];
    let mut k = 0;
    for (_, ls) in &parts {
        for &l in ls {
            lens[items[k].0 as usize] += l as usize;
            k += 1;
        }
    }
    let ids = if parts.len() == 1 {
        parts.into_iter().next().unwrap().0
    } else {
        join_parts(&parts, pool.as_deref())
    };
    Ok(Flat { ids, lens })
}

/// Concatenates the units' ids. With a pool the copies (and the page faults of the fresh
/// output buffer, which cost as much as the copy) run in parallel, each unit into its own
/// disjoint slice of the output.
fn join_parts(parts: &[UnitOut], pool: Option<&rayon::ThreadPool>) -> Vec<u32> {
    let n: usize = parts.iter().map(|p| p.0.len()).sum();
    let mut ids: Vec<u32> = Vec::with_capacity(n);
    {
        let spare = &mut ids.spare_capacity_mut()[..n];
        let mut slices = Vec::with_capacity(parts.len());
        let mut rest = spare;
        for (p, _) in parts {
            let (head, tail) = rest.split_at_mut(p.len());
            slices.push(head);
            rest = tail;
        }
        let copy = |(dst, src): (&mut [std::mem::MaybeUninit<u32>], &UnitOut)| {
            for (d, s) in dst.iter_mut().zip(&src.0) {
                d.write(*s);
            }
        };
        match pool {
            Some(pool) => pool.install(|| slices.into_par_iter().zip(parts.par_iter()).for_each(copy)),
            None => slices.into_iter().zip(parts.iter()).for_each(copy),
        }
    }
    // SAFETY: every one of the first n elements was written above (the slices tile them).
    unsafe { ids.set_len(n) };
    ids
}

/// One small text on the calling thread, without the item/unit bookkeeping (per-call overhead
/// matters for `datasets.map` without batching and for chat-sized inputs).
fn encode_small(enc: &Encoder, text: &str, allowed: &SpecialSet, disallowed: &Option<SpecialSet>) -> Result<Flat, String> {
    enc.check_disallowed(text, allowed, disallowed)?;
    let mut cache = enc.cache(0);
    let mut ids = Vec::with_capacity(text.len() / 3 + 4);
    if allowed.is_empty() {
        enc.encode_text(&mut cache, text, &mut ids)?;
    } else {
        let mut items = Vec::new();
        enc.split_specials(text, allowed, 0, &mut items);
        for it in items {
            match it {
                Item::Text(s, e) => enc.encode_text(&mut cache, &text[s..e], &mut ids)?,
                Item::Special(id, _, _) => ids.push(id),
            }
        }
    }
    let n = ids.len();
    Ok(Flat { ids, lens: vec![n] })
}

/// Ids and the character range of each token in `text`.
///
/// Policy: a character belongs to the token that holds its *first* byte. A token's range is
/// the characters whose first byte lies inside the token, so slicing the text by the range
/// gives back the token's text whenever the token is made of whole characters; a token made
/// only of continuation bytes (the tail of a character split across tokens) gets an empty
/// range `(k, k)` at the character that follows. Special tokens get their full span.
pub fn encode_with_offsets(
    enc: &Encoder,
    text: &str,
    allowed: &SpecialSet,
    disallowed: &Option<SpecialSet>,
) -> Result<IdsAndSpans, String> {
    enc.check_disallowed(text, allowed, disallowed)?;
    let mut items = Vec::new();
    enc.split_specials(text, allowed, 0, &mut items);
    let mut cache = enc.cache(0);
    let mut ids = Vec::new();
    let mut spans = Vec::new();
    for it in items {
        match it {
            Item::Text(s, e) => enc.encode_text_spans(&mut cache, &text[s..e], s, &mut ids, &mut spans)?,
            Item::Special(id, s, e) => {
                ids.push(id);
                spans.push((s, e));
            }
        }
    }
    // Byte offsets -> char offsets: chars_before(p) = char starts in text[..p]. Spans are
    // increasing, so one forward walk does it.
    let b = text.as_bytes();
    let mut pos = 0usize;
    let mut chars = 0usize;
    let mut advance = |to: usize| -> usize {
        while pos < to {
            if b[pos] & 0xC0 != 0x80 {
                chars += 1;
            }
            pos += 1;
        }
        chars
    };
    let offsets = spans
        .into_iter()
        .map(|(s, e)| {
            let cs = advance(s);
            let ce = advance(e);
            (cs, ce)
        })
        .collect();
    Ok((ids, offsets))
}

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

/// Options of [`encode_file`].
pub struct FileOptions<'a> {
    pub allowed: SpecialSet,
    pub disallowed: Option<SpecialSet>,
    /// Special token appended after each JSON-lines document.
    pub separator: Option<u32>,
    pub text_field: &'a str,
    /// "strict" fails on bad UTF-8; "replace" substitutes U+FFFD.
    pub replace_errors: bool,
    pub num_threads: usize,
}

const NPY_HEADER: usize = 128;

fn npy_header(dtype: &str, n: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(NPY_HEADER);
    h.extend_from_slice(b"\x93NUMPY\x01\x00");
    let dict = format!("{{'descr': '{dtype}', 'fortran_order': False, 'shape': ({n},), }}");
    let len = NPY_HEADER - 10;
    h.extend_from_slice(&(len as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    while h.len() < NPY_HEADER - 1 {
        h.push(b' ');
    }
    h.push(b'\n');
    h
}

struct TempFile {
    path: String,
    done: bool,
}
impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Streams a text / `.gz` / `.jsonl` file into a `.npy` of token ids (uint16 if every id fits,
/// else uint32), written to a temporary file and renamed into place at the end. Returns
/// `(tokens, text_bytes)`. `progress` receives the number of file bytes read.
pub fn encode_file(
    enc: &Encoder,
    path_in: &str,
    path_out: &str,
    opt: &FileOptions,
    progress: Progress,
) -> Result<(u64, u64), String> {
    let file = File::open(path_in).map_err(|e| format!("{path_in}: cannot open: {e}"))?;
    let gz = {
        let mut head = [0u8; 2];
        let mut f = File::open(path_in).map_err(|e| format!("{path_in}: cannot open: {e}"))?;
        f.read(&mut head).unwrap_or(0) == 2 && head == [0x1f, 0x8b]
    };
    let lower = path_in.to_ascii_lowercase();
    let jsonl = lower.ends_with(".jsonl") || lower.ends_with(".jsonl.gz");
    let wide = enc.n_vocab() > 1 << 16;

    let tmp_path = format!("{path_out}.tmp{}", std::process::id());
    let mut tmp = TempFile { path: tmp_path.clone(), done: false };
    let out = File::create(&tmp_path).map_err(|e| format!("{tmp_path}: cannot create: {e}"))?;
    let mut w = BufWriter::with_capacity(1 << 20, out);
    w.write_all(&[0u8; NPY_HEADER]).map_err(|e| format!("{tmp_path}: {e}"))?;

    let read_bytes = Arc::new(AtomicU64::new(0));
    let counter = read_bytes.clone();
    let (tx, rx) = sync_channel::<std::io::Result<Vec<u8>>>(2);
    let reader_thread = std::thread::spawn(move || {
        let raw = CountingReader { inner: file, n: counter };
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

    let special_names: Vec<String> = enc.specials().iter().map(|(s, _)| s.clone()).collect();
    let mut carry: Vec<u8> = Vec::new();
    let mut offset: u64 = 0;
    let mut line: u64 = 1;
    let mut n_tokens: u64 = 0;
    let mut n_bytes: u64 = 0;
    let mut eof = false;
    let mut buf16: Vec<u8> = Vec::new();
    let mut result: Result<(), String> = Ok(());
    while !eof {
        match rx.recv() {
            Ok(Ok(block)) => carry.extend_from_slice(&block),
            Ok(Err(e)) => {
                result = Err(format!("{path_in}: read error at byte {}: {e}", offset + carry.len() as u64));
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
        } else if enc.pattern.is_builtin() {
            match last_safe_cut(&carry, &special_names) {
                Some(p) => p,
                None => continue,
            }
        } else {
            // A custom pattern may match across anything except a special token.
            match last_special_end(enc, &carry) {
                Some(p) => p,
                None => continue,
            }
        };
        let chunk = &carry[..cut];
        let step: Result<Flat, String> = if jsonl {
            jsonl_docs(chunk, path_in, line, opt).and_then(|docs| {
                line += memchr::memchr_iter(b'\n', chunk).count() as u64;
                let refs: Vec<&str> = docs.iter().map(|s| s.as_str()).collect();
                n_bytes += refs.iter().map(|s| s.len() as u64).sum::<u64>();
                encode_docs(enc, &refs, &opt.allowed, &opt.disallowed, opt.separator, opt.num_threads)
            })
        } else {
            to_text(chunk, opt.replace_errors, path_in, offset).and_then(|text| {
                n_bytes += text.len() as u64;
                encode_docs(enc, &[&text], &opt.allowed, &opt.disallowed, None, opt.num_threads)
            })
        };
        let flat = match step {
            Ok(f) => f,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        n_tokens += flat.ids.len() as u64;
        buf16.clear();
        if wide {
            buf16.reserve(flat.ids.len() * 4);
            for id in &flat.ids {
                buf16.extend_from_slice(&id.to_le_bytes());
            }
        } else {
            buf16.reserve(flat.ids.len() * 2);
            for id in &flat.ids {
                buf16.extend_from_slice(&(*id as u16).to_le_bytes());
            }
        }
        if let Err(e) = w.write_all(&buf16) {
            result = Err(format!("{tmp_path}: write failed: {e}"));
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
    result?;
    let mut f = w.into_inner().map_err(|e| format!("{tmp_path}: write failed: {e}"))?;
    f.seek(SeekFrom::Start(0)).map_err(|e| format!("{tmp_path}: {e}"))?;
    f.write_all(&npy_header(if wide { "<u4" } else { "<u2" }, n_tokens)).map_err(|e| format!("{tmp_path}: {e}"))?;
    f.sync_all().map_err(|e| format!("{tmp_path}: {e}"))?;
    drop(f);
    std::fs::rename(&tmp_path, path_out).map_err(|e| format!("cannot rename {tmp_path} to {path_out}: {e}"))?;
    tmp.done = true;
    Ok((n_tokens, n_bytes))
}

fn last_special_end(enc: &Encoder, b: &[u8]) -> Option<usize> {
    let names: Vec<&str> = enc.specials().iter().map(|(s, _)| s.as_str()).collect();
    names
        .iter()
        .filter_map(|s| memchr::memmem::rfind(b, s.as_bytes()).map(|p| p + s.len()))
        .max()
        .filter(|&p| p < b.len())
}

fn to_text<'a>(b: &'a [u8], replace: bool, path: &str, offset: u64) -> Result<std::borrow::Cow<'a, str>, String> {
    match std::str::from_utf8(b) {
        Ok(s) => Ok(std::borrow::Cow::Borrowed(s)),
        Err(_) if replace => Ok(String::from_utf8_lossy(b)),
        Err(e) => Err(format!(
            "{path}: invalid UTF-8 at byte offset {} (pass errors='replace' to read it anyway)",
            offset + e.valid_up_to() as u64
        )),
    }
}

fn jsonl_docs(chunk: &[u8], path: &str, first_line: u64, opt: &FileOptions) -> Result<Vec<String>, String> {
    let mut docs = Vec::new();
    for (i, raw) in chunk.split(|&b| b == b'\n').enumerate() {
        let lineno = first_line + i as u64;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let text = to_text(raw, opt.replace_errors, path, 0).map_err(|_| format!("{path}: line {lineno}: invalid UTF-8"))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{path}: line {lineno}: invalid JSON: {e}"))?;
        match v.get(opt.text_field) {
            Some(serde_json::Value::String(s)) => docs.push(s.clone()),
            Some(serde_json::Value::Null) => {}
            Some(_) => return Err(format!("{path}: line {lineno}: field {:?} is not a string", opt.text_field)),
            None => return Err(format!("{path}: line {lineno}: no field {:?}", opt.text_field)),
        }
    }
    Ok(docs)
}

struct CountingReader {
    inner: File,
    n: Arc<AtomicU64>,
}

impl Read for CountingReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.fetch_add(k as u64, Ordering::Relaxed);
        Ok(k)
    }
}
