//! Token spans: where each token lies in its document and which *word* it belongs to.
//!
//! * **Words** are the pieces the text is cut into before BPE, numbered from 0 in each document:
//!   every pre-tokenizer piece and every special or added token is one word (`tokenizers`
//!   numbers its splits the same way, which gives `word_ids()`).
//! * **Ranges** are laid token by token from the piece's start, each token's bytes, kept inside
//!   the piece (exact where the pieces tile the text; a piece whose bytes lack tokens keeps its
//!   tokens inside it). Char offsets follow one of two policies ([`CharPolicy`]).
//! * Text that the pipeline rewrites (a normalizer that changes it) has no ranges in the
//!   document: that is an error, never an approximate answer.

use crate::encode::Encoder;
use crate::specials::{Item, SpecialSet};

/// Ids, byte ranges and word indices of a batch, flat, with each document's number of tokens.
#[derive(Default)]
pub struct Spans {
    pub ids: Vec<u32>,
    pub ranges: Vec<(usize, usize)>,
    pub words: Vec<u32>,
    pub lens: Vec<usize>,
}

/// How a byte range becomes a char range.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum CharPolicy {
    /// A char belongs to the token holding its first byte; a token of continuation bytes only
    /// gets an empty range (`text[s:e]` is the token's text whenever it is whole chars).
    FirstByte,
    /// A token spans every char its bytes touch (`tokenizers`' offsets).
    Touched,
}

/// Appends one document's tokens to `out` (not its `lens` entry).
fn document(enc: &Encoder, text: &str, allowed: &SpecialSet, disallowed: &Option<SpecialSet>, out: &mut Spans) -> Result<(), String> {
    enc.check_disallowed(text, allowed, disallowed)?;
    let mut items = Vec::new();
    enc.split_specials(text, allowed, 0, &mut items);
    let inner = enc.inner_automaton(allowed);
    let mut cache = enc.cache(0);
    let mut word = 0u32;
    for it in items {
        match it {
            Item::Special(id, s, e) => {
                out.ids.push(id);
                out.ranges.push((s, e));
                out.words.push(word);
                word += 1;
            }
            Item::Text(s, e) => enc.encode_pieces(&mut cache, &text[s..e], inner.as_deref(), &mut |a, b, ids, added| {
                let (mut p, end) = (s + a, s + b);
                if added {
                    out.ids.extend_from_slice(ids);
                    out.ranges.push((p, end));
                    out.words.push(word);
                    word += 1;
                    return;
                }
                for &id in ids {
                    let q = (p + enc.token_bytes(id).map_or(0, <[u8]>::len)).min(end);
                    out.ids.push(id);
                    out.ranges.push((p, q));
                    out.words.push(word);
                    p = q;
                }
                word += 1;
            })?,
        }
    }
    Ok(())
}

/// Byte ranges `ranges[from..]` of `text` (increasing) turned into char ranges in place.
fn to_chars(text: &str, ranges: &mut [(usize, usize)], policy: CharPolicy) {
    let b = text.as_bytes();
    let (mut pos, mut chars) = (0usize, 0usize);
    // chars whose first byte lies before `to`; ranges are increasing, so one forward walk.
    let mut before = |to: usize| -> usize {
        while pos < to {
            chars += usize::from(b[pos] & 0xC0 != 0x80);
            pos += 1;
        }
        chars
    };
    for r in ranges.iter_mut() {
        let inside = policy == CharPolicy::Touched && r.0 < b.len() && b[r.0] & 0xC0 == 0x80;
        let s = before(r.0) - usize::from(inside);
        *r = (s, before(r.1));
    }
}

/// The tokens of each document with char ranges under `policy` and word indices; the error
/// names the document.
pub fn encode_spans(enc: &Encoder, docs: &[&str], allowed: &SpecialSet, disallowed: &Option<SpecialSet>, policy: CharPolicy) -> Result<Spans, String> {
    let mut out = Spans::default();
    for (k, d) in docs.iter().enumerate() {
        let from = out.ids.len();
        document(enc, d, allowed, disallowed, &mut out).map_err(|e| if docs.len() > 1 { format!("text {k}: {e}") } else { e })?;
        to_chars(d, &mut out.ranges[from..], policy);
        out.lens.push(out.ids.len() - from);
    }
    Ok(out)
}
