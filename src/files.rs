//! Files: a text, `.gz` or `.jsonl` corpus streamed through the encoder into a `.npy` of ids.
//! Blocks come from `crate::reader` (the same reader as training, cut where the result cannot
//! change) and go through `crate::batch`; the output is written to a temporary file and renamed
//! into place at the end, so an interrupted run leaves no output file.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};

use crate::batch::encode_docs;
use crate::encode::Encoder;
use crate::reader::{read_corpus, Block, CutRule, Progress, ReadOptions, Utf8Errors};
use crate::specials::SpecialSet;

/// Options of [`encode_file`].
pub struct FileOptions<'a> {
    pub allowed: SpecialSet,
    pub disallowed: Option<SpecialSet>,
    /// Special token appended after each JSON-lines document.
    pub separator: Option<u32>,
    pub text_field: &'a str,
    /// What to do with bytes that are not valid UTF-8.
    pub errors: Utf8Errors,
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
    // Fail on a missing input before creating anything.
    File::open(path_in).map_err(|e| format!("{path_in}: cannot open: {e}"))?;
    let wide = enc.n_vocab() > 1 << 16;

    let tmp_path = format!("{path_out}.tmp{}", std::process::id());
    let mut tmp = TempFile { path: tmp_path.clone(), done: false };
    let out = File::create(&tmp_path).map_err(|e| format!("{tmp_path}: cannot create: {e}"))?;
    let mut w = BufWriter::with_capacity(1 << 20, out);
    w.write_all(&[0u8; NPY_HEADER]).map_err(|e| format!("{tmp_path}: {e}"))?;

    // Built-in patterns: never cut inside any special token (the disallowed check must see it
    // whole). Custom patterns: cut only after specials that are encoded as specials (the
    // allowed ones); others are ordinary text a regex may match across.
    let ropt = ReadOptions {
        errors: opt.errors,
        text_field: opt.text_field,
        cut: if enc.pattern.is_builtin() { CutRule::Safe } else { CutRule::AfterSpecial },
        specials: enc.specials(),
        allowed: &opt.allowed,
    };
    let mut n_tokens: u64 = 0;
    let mut n_bytes: u64 = 0;
    let mut buf16: Vec<u8> = Vec::new();
    read_corpus(path_in, &ropt, progress, |block| {
        let flat = match block {
            Block::Docs(docs) => {
                let refs: Vec<&str> = docs.iter().map(|s| s.as_str()).collect();
                n_bytes += refs.iter().map(|s| s.len() as u64).sum::<u64>();
                encode_docs(enc, &refs, &opt.allowed, &opt.disallowed, opt.separator, opt.num_threads)?
            }
            Block::Text(text) => {
                n_bytes += text.len() as u64;
                encode_docs(enc, &[text], &opt.allowed, &opt.disallowed, None, opt.num_threads)?
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
        // The next block reuses this block's buffer (see `outbuf`).
        crate::outbuf::POOL.give(flat.ids);
        w.write_all(&buf16).map_err(|e| format!("{tmp_path}: write failed: {e}"))
    })?;
    let mut f = w.into_inner().map_err(|e| format!("{tmp_path}: write failed: {e}"))?;
    f.seek(SeekFrom::Start(0)).map_err(|e| format!("{tmp_path}: {e}"))?;
    f.write_all(&npy_header(if wide { "<u4" } else { "<u2" }, n_tokens)).map_err(|e| format!("{tmp_path}: {e}"))?;
    f.sync_all().map_err(|e| format!("{tmp_path}: {e}"))?;
    drop(f);
    std::fs::rename(&tmp_path, path_out).map_err(|e| format!("cannot rename {tmp_path} to {path_out}: {e}"))?;
    tmp.done = true;
    Ok((n_tokens, n_bytes))
}
