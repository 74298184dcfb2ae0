//! The vocabulary, checked once: every rule a byte-level BPE vocabulary must satisfy is here,
//! with an error that names the token, id or merge at fault. Python does not repeat these.
//!
//! Invariants after [`Tables::new`]: ids are unique and dense enough to index tables; no token
//! is empty; a special's id is either absent from the vocabulary or holds the special's bytes;
//! the mergeable tokens (the vocabulary minus special ids) have distinct bytes and, for tiktoken
//! ranks, include all 256 single bytes; every merge names two mergeable tokens whose concatenation is one too.

use rustc_hash::FxHashMap;

use crate::specials::Specials;

/// Ids beyond the tokens' count that a vocabulary may leave unused (holes such as cl100k's).
pub const SPARE_IDS: u64 = 1 << 20;

/// The first id refused for a vocabulary of `tokens` tokens.
pub fn max_id_for(tokens: usize) -> u64 {
    4 * tokens as u64 + SPARE_IDS
}

/// Merges as given to the encoder: pairs of token ids, or pairs of token bytes.
pub enum Merges {
    Ids(Vec<(u32, u32)>),
    Bytes(Vec<(Box<[u8]>, Box<[u8]>)>),
}

/// The checked inputs of an encoder, kept for serialization and the Python getters.
pub struct Tables {
    /// Sorted by id.
    pub vocab: Vec<(u32, Box<[u8]>)>,
    /// Id pairs in rank order; None for tiktoken ranks.
    pub merges: Option<Vec<(u32, u32)>>,
    merges_mode: bool,
}

impl Tables {
    /// Checks `vocab`, `merges` and their agreement with `specials`.
    pub fn new(mut vocab: Vec<(u32, Box<[u8]>)>, merges: Option<Merges>, specials: &Specials) -> Result<Self, String> {
        vocab.sort_by_key(|(id, _)| *id);
        if let Some(w) = vocab.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(format!("vocab has id {} twice", w[0].0));
        }
        // An empty token is no piece's and no merge's part: `tokenizers` keeps such an entry
        // (Whisper's id 50256) and decodes it to nothing; in tiktoken ranks it is an error.
        let empty: Vec<u32> = vocab.iter().filter(|(_, b)| b.is_empty()).map(|(i, _)| *i).collect();
        if let Some(id) = empty.first().filter(|_| merges.is_none() || empty.len() > 1) {
            return Err(format!("token {id} has empty bytes"));
        }
        let given = vocab.len() + specials.list().len();
        let max_id = vocab.iter().map(|(i, _)| *i).chain(specials.list().iter().map(|(_, i)| *i)).max().unwrap_or(0);
        if max_id == u32::MAX {
            return Err(format!("token id {} is too large", u32::MAX));
        }
        // Ids index dense tables (9 bytes per id): refuse sparse ones instead of allocating
        // gigabytes for one stray id.
        if max_id as u64 >= max_id_for(given) {
            return Err(format!(
                "token ids go up to {max_id}, far beyond the {given} tokens given; ids must be dense \
                 (below 4 x tokens + {})",
                SPARE_IDS
            ));
        }
        // (In merges mode an added token may take the id of the vocabulary entry spelled like
        // it, as `tokenizers` gives it: it matches its content and decodes as that entry.)
        for (s, id) in specials.list().iter().filter(|_| merges.is_none()) {
            if let Ok(i) = vocab.binary_search_by_key(id, |(v, _)| *v) {
                // (Specials sharing an id: the vocab holds one of them.)
                let shared = |b: &[u8]| specials.list().iter().any(|(t, j)| j == id && t.as_bytes() == b);
                if &*vocab[i].1 != s.as_bytes() && !shared(&vocab[i].1) {
                    return Err(format!(
                        "special token {s:?} has id {id}, which the vocab gives to different bytes {}",
                        py_bytes(&vocab[i].1)
                    ));
                }
            }
        }
        let t = Tables { vocab, merges: None, merges_mode: merges.is_some() };
        let by_bytes = t.mergeable(specials)?;
        let merges = match merges {
            None => None,
            Some(Merges::Ids(m)) => Some(m),
            Some(Merges::Bytes(m)) => Some(resolve(&by_bytes, &m)?),
        };
        Ok(Tables { vocab: t.vocab, merges, merges_mode: t.merges_mode })
    }

    /// The mergeable tokens (the vocabulary; minus special ids for tiktoken ranks), bytes -> id; checked for repeated bytes and the 256 single bytes.
    pub fn mergeable(&self, specials: &Specials) -> Result<FxHashMap<&[u8], u32>, String> {
        let special_ids: rustc_hash::FxHashSet<u32> = specials.list().iter().map(|(_, id)| *id).collect();
        let mut by_bytes: FxHashMap<&[u8], u32> = FxHashMap::default();
        by_bytes.reserve(self.vocab.len());
        for (id, b) in &self.vocab {
            // tiktoken keeps specials out of the ranks; in merges mode an added token that is
            // also a vocabulary entry (its own bytes at its id) stays one, as in `tokenizers`.
            if special_ids.contains(id) && !self.merges_mode {
                continue;
            }
            if let Some(old) = by_bytes.insert(b, *id) {
                // An added token listed by its literal content beside the byte-level spelling of
                // the same bytes (`"\n\n"` and `"ĊĊ"`): the model only ever makes the spelled
                // entry; the added token is matched by its content before the model, as in
                // `tokenizers`. (Two spelled entries never share bytes: the alphabet is 1:1.)
                match (special_ids.contains(&old), special_ids.contains(id)) {
                    (false, true) if self.merges_mode => {
                        by_bytes.insert(b, old);
                    }
                    (true, false) if self.merges_mode => {}
                    _ => return Err(format!("vocab gives the same bytes {} to ids {old} and {id}", py_bytes(b))),
                }
            }
        }
        // Merges mode takes a vocabulary without some byte tokens, as `tokenizers` does
        // (`crate::pipeline` says what such a byte becomes); tiktoken's ranks need all 256.
        let missing: Vec<u8> = (0..=255u8).filter(|b| !by_bytes.contains_key(&[*b][..])).collect();
        if let Some(b) = missing.first().filter(|_| !self.merges_mode) {
            return Err(format!(
                "the vocabulary lacks {} of the 256 byte tokens (e.g. byte 0x{b:02x}); byte-level BPE needs all 256",
                missing.len()
            ));
        }
        Ok(by_bytes)
    }
}

/// Byte merges as id pairs; the error names the merge and the bytes that are not a token.
fn resolve(by_bytes: &FxHashMap<&[u8], u32>, merges: &[(Box<[u8]>, Box<[u8]>)]) -> Result<Vec<(u32, u32)>, String> {
    let mut cat = Vec::new();
    merges
        .iter()
        .enumerate()
        .map(|(n, (a, b))| {
            let id = |t: &[u8]| {
                by_bytes.get(t).copied().ok_or_else(|| {
                    format!("merge #{n} ({}, {}) uses {}, which is not in the vocabulary", py_bytes(a), py_bytes(b), py_bytes(t))
                })
            };
            let (x, y) = (id(a)?, id(b)?);
            cat.clear();
            cat.extend_from_slice(a);
            cat.extend_from_slice(b);
            id(&cat)?;
            Ok((x, y))
        })
        .collect()
}

/// `b` as Python writes a bytes literal (`b'ab\xff'`), for error messages.
pub fn py_bytes(b: &[u8]) -> String {
    let mut s = String::from("b'");
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'\'' => s.push_str("\\'"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('\'');
    s
}
