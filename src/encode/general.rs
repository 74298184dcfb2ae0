//! The general encode path: text through an imported `tokenizer.json`'s components
//! ([`Pipeline`], parsed and checked in `crate::pipeline`), for what the hot path cannot take:
//! a normalizer, a pre-tokenizer of several steps, a second group of added tokens, or a byte
//! without a token. `tokenizers` runs, per text: split at the raw-matched added tokens ->
//! normalize each stretch -> split at the normalized added tokens -> pre-tokenize -> BPE each
//! piece; this path does the same, with the same ids, and hands every piece to the encoder
//! (its cache and merge).
//!
//! A byte without a token becomes what the parse decided ([`Missing`]: its `<0xNN>` tokens,
//! the unk token, or nothing), in the order `tokenizers` builds its word ([`General::encode_symbols`]).

use std::borrow::Cow;

use super::Encoder;
use crate::alphabet::alphabet_byte;
use crate::cache::WordCache;
use crate::pipeline::{Missing, Piece, Pipeline};
use crate::specials::{Automaton, Item};

/// A symbol of a piece with missing tokens: a byte (and what its token is), or a char outside
/// the byte alphabet.
#[derive(Clone, Copy)]
enum Sym {
    Byte(u8, Missing),
    Char(char),
}

/// The encoder with its pipeline, for one call of the general path.
pub(super) struct General<'a> {
    pub enc: &'a Encoder,
    pub pipe: &'a Pipeline,
}

impl General<'_> {
    /// Encodes one stretch of text between raw-matched added tokens; `inner` matches the
    /// normalized group.
    pub(super) fn encode(&self, cache: &mut WordCache, text: &str, inner: Option<&Automaton>, out: &mut Vec<u32>) -> Result<(), String> {
        let norm: Cow<str> = match &self.pipe.normalizer {
            Some(n) => n.apply_cow(text)?,
            None => Cow::Borrowed(text),
        };
        if inner.is_none() {
            return self.encode_stretch(cache, &norm, out);
        }
        let mut items = Vec::new();
        self.enc.specials().split_with(inner, &norm, 0, &mut items);
        for it in items {
            match it {
                Item::Special(id, _, _) => out.push(id),
                Item::Text(s, e) => self.encode_stretch(cache, &norm[s..e], out)?,
            }
        }
        Ok(())
    }

    /// One stretch cut as [`Self::encode`] cuts it, each piece with its ids: `f(start, end, ids)`
    /// in text order, byte ranges of `text`; an added token of the normalized group is a piece
    /// of its own (`f`'s last argument: the range is the token's). Fails when the normalizer changes this text or the pre-tokenizer adds to it
    /// (the ranges would not lie in the text).
    pub(super) fn encode_pieces(&self, cache: &mut WordCache, text: &str, inner: Option<&Automaton>, f: &mut dyn FnMut(usize, usize, &[u32], bool)) -> Result<(), String> {
        if let Some(n) = &self.pipe.normalizer {
            if n.apply_cow(text)? != text {
                return Err(format!("offsets and words are not available for this text: the tokenizer.json normalizer changes it ({:?}...)", text.chars().take(40).collect::<String>()));
            }
        }
        let mut items = Vec::new();
        self.enc.specials().split_with(inner, text, 0, &mut items);
        let mut ids = Vec::new();
        for it in items {
            let (s, e) = match it {
                Item::Special(id, s, e) => {
                    f(s, e, &[id], true);
                    continue;
                }
                Item::Text(s, e) => (s, e),
            };
            let t = &text[s..e];
            match &self.pipe.pre {
                None => self.enc.pattern.for_each_piece_dyn(t, &mut |a: usize, b: usize| {
                    ids.clear();
                    self.encode_piece(cache, &t.as_bytes()[a..b], &mut ids);
                    f(s + a, s + b, &ids, false);
                })?,
                Some(pre) => {
                    let mut pos = 0;
                    for p in pre.pieces(t)? {
                        let b = match &p {
                            Piece::Bytes(b) => &b[..],
                            Piece::Text(s) => s.as_bytes(),
                        };
                        let a = pos + memchr::memmem::find(&t.as_bytes()[pos..], b).ok_or_else(|| {
                            format!("offsets and words are not available for this text: the tokenizer.json pre_tokenizer adds to it (piece {:?})", String::from_utf8_lossy(b))
                        })?;
                        ids.clear();
                        self.encode_model_piece(cache, &p, &mut ids);
                        f(s + a, s + a + b.len(), &ids, false);
                        pos = a + b.len();
                    }
                }
            }
        }
        Ok(())
    }

    fn encode_stretch(&self, cache: &mut WordCache, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        match &self.pipe.pre {
            // One pattern and every byte a token: the encoder's hot loop.
            None if !self.pipe.missing_any => self.enc.encode_plain(cache, text, out),
            None => self.enc.pattern.for_each_piece_dyn(text, &mut |s: usize, e: usize| self.encode_piece(cache, &text.as_bytes()[s..e], out)),
            Some(pre) => {
                for p in pre.pieces(text)? {
                    self.encode_model_piece(cache, &p, out);
                }
                Ok(())
            }
        }
    }

    /// One piece of the pre-tokenizer's: its bytes, or text with chars the model lacks.
    fn encode_model_piece(&self, cache: &mut WordCache, piece: &Piece, out: &mut Vec<u32>) {
        match piece {
            Piece::Bytes(b) => self.encode_piece(cache, b, out),
            // A char outside the byte alphabet is not in the vocabulary: as a missing byte token,
            // it becomes the `<0xNN>` tokens of its UTF-8 bytes, or unk, or nothing.
            Piece::Text(s) => {
                let syms = s.chars().map(|c| match alphabet_byte(c) {
                    Some(b) => Sym::Byte(b, self.pipe.missing[b as usize]),
                    None => Sym::Char(c),
                });
                self.encode_symbols(cache, syms, out);
            }
        }
    }

    /// One piece: as the encoder does, but a missing byte token is handled as the parse decided ([`Missing`]).
    fn encode_piece(&self, cache: &mut WordCache, piece: &[u8], out: &mut Vec<u32>) {
        if piece.iter().all(|&b| self.pipe.missing[b as usize] == Missing::Present) {
            self.enc.encode_piece(cache, piece, out);
            return;
        }
        if self.pipe.ignore_merges {
            if let Some(id) = self.enc.whole_token(piece) {
                out.push(id);
                return;
            }
        }
        self.encode_symbols(cache, piece.iter().map(|&b| Sym::Byte(b, self.pipe.missing[b as usize])), out);
    }

    /// A piece with missing tokens, symbol by symbol, in the order `tokenizers` builds its word:
    /// dropped symbols leave their neighbours adjacent; fallback tokens stand between their
    /// neighbours at once, while an unk token waits until the next token of the vocabulary or
    /// the piece's end (so fallback tokens met meanwhile come before it, and `fuse_unk` joins
    /// unks across them).
    fn encode_symbols(&self, cache: &mut WordCache, syms: impl Iterator<Item = Sym>, out: &mut Vec<u32>) {
        let mut run: Vec<u8> = Vec::new();
        let mut pending: Option<u32> = None;
        let mut char_ids: Vec<u32> = Vec::new();
        let flush = |run: &mut Vec<u8>, cache: &mut WordCache, out: &mut Vec<u32>| {
            if !run.is_empty() {
                self.enc.encode_piece(cache, run, out);
                run.clear();
            }
        };
        for sym in syms {
            // what the symbol becomes: a byte of the run, tokens at once, an unk, or nothing
            let ids: &[u32] = match sym {
                Sym::Byte(b, Missing::Present) => {
                    if let Some(u) = pending.take() {
                        out.push(u);
                    }
                    run.push(b);
                    continue;
                }
                Sym::Byte(_, Missing::Drop) => continue,
                Sym::Byte(_, Missing::Unk(u)) => {
                    flush(&mut run, cache, out);
                    self.unk_after(&mut pending, u, out);
                    continue;
                }
                Sym::Byte(_, Missing::Fallback(k)) => &self.pipe.fallback[k as usize],
                Sym::Char(c) => {
                    let mut utf8 = [0u8; 4];
                    char_ids.clear();
                    let fallback = self.pipe.byte_fallback
                        && c.encode_utf8(&mut utf8).bytes().all(|x| self.pipe.byte_ids[x as usize].map(|id| char_ids.push(id)).is_some());
                    match (fallback, self.pipe.unk) {
                        (true, _) => &char_ids,
                        (false, Some(u)) => {
                            flush(&mut run, cache, out);
                            self.unk_after(&mut pending, u, out);
                            continue;
                        }
                        (false, None) => continue,
                    }
                }
            };
            flush(&mut run, cache, out);
            out.extend_from_slice(ids);
        }
        flush(&mut run, cache, out);
        out.extend(pending);
    }
}

impl General<'_> {
    /// An unk token becomes pending (see [`Self::encode_symbols`]); one already pending is
    /// written first, or fused with it.
    fn unk_after(&self, pending: &mut Option<u32>, u: u32, out: &mut Vec<u32>) {
        match *pending {
            Some(_) if self.pipe.fuse_unk => {}
            Some(p) => {
                out.push(p);
                *pending = Some(u);
            }
            None => *pending = Some(u),
        }
    }
}

