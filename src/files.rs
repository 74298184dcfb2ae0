//! Files: a text, `.gz` or `.jsonl` corpus streamed through the encoder into a `.npy` of ids.
//! Blocks come from `crate::corpus::read` (the same reader as training, cut where the result cannot
//! change) and go through `crate::batch`; the output is written to a temporary file and renamed
//! into place at the end, so an interrupted run leaves no output file.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::batch::encode_docs;
use crate::encode::Encoder;
use crate::corpus::read::{read_corpus, Block, CutRule, Progress, ReadOptions, Utf8Errors};
use crate::specials::SpecialSet;

/// Marks an error string as the OS error `e` (its errno): the bindings raise it as Python's
/// `OSError`, whose errno picks the subclass (`PermissionError`, `IsADirectoryError`, ...).
pub fn os_error(e: &std::io::Error, msg: String) -> String {
    match e.raw_os_error() {
        Some(n) => format!("{OS_ERROR}{n}:{msg}"),
        None => msg,
    }
}

/// The prefix of [`os_error`]'s strings.
pub const OS_ERROR: &str = "\u{1}os-error:";

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

/// The output while it is written. Where the system allows it (Linux `O_TMPFILE`) the file has
/// no name until it is complete, so a killed run leaves nothing behind; else it is a hidden
/// temporary file beside the output, which a later call removes once its process is gone.
struct Output {
    file: Option<File>,
    /// The temporary name, when the file has one while it is written.
    named: Option<PathBuf>,
    done: bool,
}

impl Drop for Output {
    fn drop(&mut self) {
        if let (false, Some(t)) = (self.done, &self.named) {
            let _ = std::fs::remove_file(t);
        }
    }
}

/// `dir/.name.tmp-PID` for the output `dir/name`.
fn temp_name(path_out: &Path, pid: u32) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(path_out.file_name().unwrap_or_default());
    name.push(format!(".tmp-{pid}"));
    path_out.with_file_name(name)
}

/// Removes the temporary files of `path_out` left by processes that no longer exist.
fn remove_stale_temps(p: &Path) {
    let (Some(name), Some(dir)) = (p.file_name(), p.parent()) else { return };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let dir = if dir.as_os_str().is_empty() { std::path::Path::new(".") } else { dir };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = n.strip_prefix(&prefix).and_then(|s| s.parse::<i32>().ok()) else { continue };
        if pid > 0 && pid as u32 != std::process::id() && !process_alive(pid) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn process_alive(pid: i32) -> bool {
    #[cfg(unix)]
    {
        // SAFETY: signal 0 only checks that the process exists.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

impl Output {
    fn create(path_out: &Path) -> Result<Output, String> {
        remove_stale_temps(path_out);
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let dir = match path_out.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => std::path::Path::new("."),
            };
            let unnamed = std::fs::OpenOptions::new().read(true).write(true).mode(0o666).custom_flags(libc::O_TMPFILE).open(dir);
            if let Ok(file) = unnamed {
                return Ok(Output { file: Some(file), named: None, done: false });
            }
        }
        let tmp = temp_name(path_out, std::process::id());
        let file = File::create(&tmp).map_err(|e| os_error(&e, format!("{}: cannot create it: {e}", path_out.display())))?;
        Ok(Output { file: Some(file), named: Some(tmp), done: false })
    }

    /// Syncs the file and gives it its name (replacing any older file there).
    fn finish(mut self, file: File, path_out: &Path) -> Result<(), String> {
        let shown = path_out.display();
        file.sync_all().map_err(|e| os_error(&e, format!("{shown}: {e}")))?;
        let tmp = match &self.named {
            Some(t) => t.clone(),
            None => {
                // Linked in under a temporary name, then renamed over the output (a link cannot
                // replace an existing file).
                let t = temp_name(path_out, std::process::id());
                let _ = std::fs::remove_file(&t);
                link_unnamed(&file, &t).map_err(|e| os_error(&e, format!("{shown}: cannot link the written file in: {e}")))?;
                self.named = Some(t.clone());
                t
            }
        };
        drop(file);
        std::fs::rename(&tmp, path_out).map_err(|e| os_error(&e, format!("{shown}: cannot move the written file there: {e}")))?;
        self.done = true;
        Ok(())
    }
}

#[cfg(target_os = "linux")]
fn link_unnamed(file: &File, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap();
    let to = std::ffi::CString::new(to.as_os_str().as_bytes()).map_err(|_| std::io::Error::other("a NUL byte in the path"))?;
    // SAFETY: two valid C strings; linkat only reads them.
    let r = unsafe { libc::linkat(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::AT_SYMLINK_FOLLOW) };
    if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

#[cfg(not(target_os = "linux"))]
fn link_unnamed(_file: &File, _to: &Path) -> std::io::Result<()> {
    unreachable!("unnamed files are only made on Linux")
}

/// Streams a text / `.gz` / `.jsonl` file into a `.npy` of token ids (uint16 if every id fits,
/// else uint32), written unnamed (or under a hidden temporary name) and named at the end. Returns
/// `(tokens, text_bytes)`. `progress` receives the number of file bytes read.
pub fn encode_file(
    enc: &Encoder,
    path_in: &Path,
    path_out: &Path,
    opt: &FileOptions,
    progress: Progress,
) -> Result<(u64, u64), String> {
    // Fail on a missing input before creating anything.
    File::open(path_in).map_err(|e| os_error(&e, format!("{}: cannot open: {e}", path_in.display())))?;
    let wide = enc.n_vocab() > 1 << 16;

    let mut output = Output::create(path_out)?;
    let tmp_path = path_out.display().to_string();
    let mut w = BufWriter::with_capacity(1 << 20, output.file.take().expect("a new output has its file"));
    w.write_all(&[0u8; NPY_HEADER]).map_err(|e| os_error(&e, format!("{tmp_path}: {e}")))?;

    // Built-in patterns: never cut inside any special token (the disallowed check must see it
    // whole). Custom patterns: cut only after specials that are encoded as specials (the
    // allowed ones); others are ordinary text a regex may match across.
    let ropt = ReadOptions {
        errors: opt.errors,
        text_field: opt.text_field,
        cut: if enc.is_generic() { CutRule::AfterSpecial } else { CutRule::of(&enc.pattern) },
        specials: enc.specials(),
        allowed: &opt.allowed,
        range: None,
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
        w.write_all(&buf16).map_err(|e| os_error(&e, format!("{tmp_path}: write failed: {e}")))
    })?;
    let mut f = w.into_inner().map_err(|e| os_error(e.error(), format!("{tmp_path}: write failed: {}", e.error())))?;
    f.seek(SeekFrom::Start(0)).map_err(|e| os_error(&e, format!("{tmp_path}: {e}")))?;
    f.write_all(&npy_header(if wide { "<u4" } else { "<u2" }, n_tokens)).map_err(|e| os_error(&e, format!("{tmp_path}: {e}")))?;
    output.finish(f, path_out)?;
    Ok((n_tokens, n_bytes))
}
