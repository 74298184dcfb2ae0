//! Encoding text to token ids, exact to GPT-2/`tokenizers` (merges) or tiktoken (ranks).
//!
//! An [`Encoder`] is immutable and shared by every thread: the checked tables ([`vocab`]),
//! the merge ([`merge`]), the decoder table (`crate::decode`), the special tokens
//! (`crate::specials`), the pre-tokenizer (`crate::pretok`) and the word caches
//! (`crate::cache`). A piece of text goes: scanner -> queue -> cache lookup -> on a miss, the
//! merge; the hot loop is [`queue`]. Text the hot path cannot take (an imported
//! `tokenizer.json`'s normalizer or pre-tokenizer steps, missing byte tokens, a second group
//! of added tokens) takes the general path, [`general`], over the parsed `crate::pipeline`.
//!
//! Design drivers, each measured ([log](../../docs/performance.md#encoder)):
//! * **Cache first.** After warm-up nearly every piece is one lookup in a table entry that holds
//!   the ids inline; BPE runs only on misses (about 1% of pieces on natural text).
//! * **No shared mutable state on the hot path.** A worker borrows one cache slot per unit of
//!   work, never per word; nothing blocks (`try_lock`), which also keeps a forked child safe.
//! * **FxHash** everywhere: keys are integers or short byte strings from trusted tables.
//! * **Bounded memory.** `cache_bytes` bounds all slots together; `0` disables caching.

mod dropout;
mod fold;
mod general;
mod long;
mod merge;
mod pairs;
mod queue;
pub mod segment;
mod state;
mod vocab;
mod whole;

#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cache::{CacheGuard, Caches, WordCache, MAX_CACHED_LEN};
use crate::decode::TokenBytes;
use std::sync::Arc;

use crate::pipeline::{Lookup, Pipeline};
use crate::pretok::{Builtin, Pattern};
use crate::specials::{disallowed_error, AddedToken, Automaton, Item, SpecialSet, Specials};

pub use crate::cache::DEFAULT_CACHE_BYTES;
pub use merge::LARGE_PIECE;
pub use whole::{Seed, SEED_TOKENS};
pub use vocab::{py_bytes, Merges};

/// An immutable, shareable encoder: tables, pattern, special tokens and cache slots.
pub struct Encoder {
    tables: vocab::Tables,
    ranks: merge::Ranks,
    tokens: TokenBytes,
    specials: Specials,
    pub pattern: Pattern,
    pattern_spec: String,
    caches: Caches,
    /// The imported tokenizer.json components (always present; plain for our own vocabularies).
    pipeline: Pipeline,
    /// Whether ordinary text takes the general path (`general.rs`) instead of the hot path.
    generic: bool,
    /// The normalized group's matcher with no special allowed (see `Specials::inner_automaton`).
    inner_plain: Option<Arc<Automaton>>,
    /// Ids per 1024 input bytes of the last batch (see [`Self::output_estimate`]).
    ids_per_kib: AtomicUsize,
    /// Every merge, for BPE-dropout ([`dropout`]), built on first use.
    dropout: std::sync::OnceLock<dropout::DropoutTable>,
}

impl Encoder {
    /// Builds an encoder, checking every input (see `vocab.rs`). `merges = None` selects
    /// tiktoken (rank) semantics.
    pub fn new(
        vocab: Vec<(u32, Box<[u8]>)>,
        merges: Option<Merges>,
        specials: Vec<(String, u32)>,
        pattern_spec: &str,
        cache_bytes: usize,
    ) -> Result<Self, String> {
        let added = specials.into_iter().map(|(s, i)| AddedToken::special(s, i)).collect();
        Self::build(vocab, merges, added, pattern_spec, None, cache_bytes)
    }

    /// [`Self::new`] with added tokens and their flags, and the components of an imported
    /// `tokenizer.json` (`pipeline`, see `crate::pipeline`); with a pipeline whose
    /// pre-tokenizer is not one pattern, `pattern_spec` is ignored.
    pub fn build(
        vocab: Vec<(u32, Box<[u8]>)>,
        merges: Option<Merges>,
        added: Vec<AddedToken>,
        pattern_spec: &str,
        pipeline: Option<&str>,
        cache_bytes: usize,
    ) -> Result<Self, String> {
        let (pipeline, from_pipeline) = {
            let added_ids: rustc_hash::FxHashSet<u32> = added.iter().map(|t| t.id).collect();
            let by_bytes: rustc_hash::FxHashMap<&[u8], u32> =
                vocab.iter().filter(|(i, _)| !added_ids.contains(i)).map(|(i, b)| (&b[..], *i)).collect();
            let unbyte = crate::alphabet::unbyte_table();
            let id_of = |s: &str| -> Option<u32> {
                if let Some(t) = added.iter().find(|t| t.content == s) {
                    return Some(t.id);
                }
                let b: Option<Vec<u8>> = s.chars().map(|c| unbyte.get(&c).copied()).collect();
                by_bytes.get(&b?[..]).copied()
            };
            let known = |id: u32| added_ids.contains(&id) || vocab.iter().any(|(i, _)| *i == id);
            let has_byte = |b: u8| by_bytes.contains_key(&[b][..]);
            Pipeline::parse(pipeline, &Lookup { id_of: &id_of, known: &known, has_byte: &has_byte })?
        };
        let (pattern, pattern_spec) = match (from_pipeline, &pipeline.pre) {
            (Some(p), _) => {
                let spec = p.spec_name().map(str::to_string).unwrap_or_else(|| p.regex_source().to_string());
                (p, spec)
            }
            (None, Some(pre)) => (Pattern::Builtin(Builtin::Gpt2), pre.json.clone()),
            (None, None) => (Pattern::from_spec(pattern_spec)?, pattern_spec.to_string()),
        };
        // Two groups of added tokens when tokenizers' two passes can differ from one.
        let has_normalized = added.iter().any(|t| t.normalized);
        let has_raw = added.iter().any(|t| !t.normalized);
        let norm = |s: &str| pipeline.normalize(s);
        let two = has_normalized && (pipeline.normalizer.is_some() || has_raw);
        let specials = Specials::with_tokens(added, if two { Some(&norm) } else { None })?;
        let tables = vocab::Tables::new(vocab, merges, &specials)?;
        let ranks = merge::Ranks::new(&tables.mergeable(&specials)?, &tables.vocab, tables.merges.as_deref(), pipeline.ignore_merges)?;
        let caches = Caches::new(cache_bytes, Some(ranks.seed()));
        let forms: rustc_hash::FxHashMap<u32, &str> = specials.normalized_forms().collect();
        let all = tables.vocab.iter().map(|(i, b)| (*i, &b[..])).chain(
            specials
                .list()
                .iter()
                .filter(|(_, i)| tables.vocab.binary_search_by_key(i, |(v, _)| *v).is_err())
                .map(|(s, i)| (*i, forms.get(i).copied().unwrap_or(s).as_bytes())),
        );
        let tokens = TokenBytes::new(all);
        drop(forms);
        let generic = pipeline.is_needed() || specials.has_inner();
        let inner_plain = specials.inner_automaton(&SpecialSet::None);
        Ok(Encoder {
            tables,
            ranks,
            tokens,
            specials,
            pattern,
            pattern_spec,
            caches,
            pipeline,
            generic,
            inner_plain,
            ids_per_kib: AtomicUsize::new(1024),
            dropout: std::sync::OnceLock::new(),
        })
    }

    /// Whether ordinary text takes the general path ([`general`]) rather than the hot
    /// path: batches then never cut a text, and the disallowed check is never fused.
    pub fn is_generic(&self) -> bool {
        self.generic
    }

    /// Whether the general path's text may still be cut at ASCII safe cuts
    /// ([`crate::pipeline::Pipeline::cuts_at_ascii`]).
    pub fn cuts_at_ascii(&self) -> bool {
        self.pipeline.cuts_at_ascii(self.specials.normalized_forms().map(|(_, s)| s))
    }

    /// The imported components as JSON (None for a vocabulary of our own).
    pub fn pipeline_json(&self) -> Option<&str> {
        self.pipeline.json.as_deref()
    }

    /// The id of `piece` as one whole token, where the vocabulary encodes whole pieces
    /// directly (tiktoken ranks, `ignore_merges`).
    pub fn whole_token(&self, piece: &[u8]) -> Option<u32> {
        self.ranks.whole(piece)
    }

    /// The normalized group's matcher for `allowed` (None when there is none: one pass).
    pub fn inner_automaton(&self, allowed: &SpecialSet) -> Option<Arc<Automaton>> {
        if !self.specials.has_inner() {
            return None;
        }
        if allowed.is_empty() {
            return self.inner_plain.clone();
        }
        self.specials.inner_automaton(allowed)
    }

    /// The hot path on ordinary text, whatever the pipeline (for the general path's own stretches).
    pub fn encode_plain(&self, cache: &mut WordCache, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        self.encode_text_inner(cache, text, out, false)
    }

    /// Ordinary text (between raw-matched added tokens) with the normalized group's matcher
    /// `inner`: the general path when the encoder needs it, else [`Self::encode_text`].
    pub fn encode_text_with(&self, cache: &mut WordCache, text: &str, inner: Option<&Automaton>, out: &mut Vec<u32>) -> Result<(), String> {
        if self.generic {
            self.general().encode(cache, text, inner, out)
        } else {
            self.encode_text_inner(cache, text, out, false)
        }
    }

    /// The general path (`general.rs`): this encoder with its pipeline.
    fn general(&self) -> general::General<'_> {
        general::General { enc: self, pipe: &self.pipeline }
    }

    /// Room to reserve for the ids of `bytes` bytes of text: 1/8 more than the last batch's
    /// ratio would need, never more than the upper bound (one id per byte, the first estimate).
    /// Reserving the upper bound every time costs fresh pages on every call; a short estimate
    /// costs one regrowth ([log](../../docs/performance.md#batches)).
    pub fn output_estimate(&self, bytes: usize) -> usize {
        let per_kib = self.ids_per_kib.load(Ordering::Relaxed);
        (bytes / 1024 * per_kib / 8 * 9).min(bytes) + 64
    }

    /// Records the ids-per-byte ratio of a batch for [`Self::output_estimate`].
    pub fn learn_output_ratio(&self, bytes: usize, ids: usize) {
        if bytes >= 1 << 16 {
            let per_kib = (ids as u128 * 1024 / bytes as u128).min(1024) as usize;
            self.ids_per_kib.store(per_kib, Ordering::Relaxed);
        }
    }

    pub fn n_vocab(&self) -> usize {
        self.tokens.n_vocab()
    }

    pub fn cache_bytes(&self) -> usize {
        self.caches.budget()
    }

    pub fn pattern_spec(&self) -> &str {
        &self.pattern_spec
    }

    pub fn specials(&self) -> &Specials {
        &self.specials
    }

    pub fn is_tiktoken(&self) -> bool {
        self.ranks.is_tiktoken()
    }

    /// The vocabulary as given (sorted by id).
    pub fn vocab(&self) -> &[(u32, Box<[u8]>)] {
        &self.tables.vocab
    }

    /// The merges as id pairs in rank order (None in tiktoken mode).
    pub fn merges(&self) -> Option<&[(u32, u32)]> {
        self.tables.merges.as_deref()
    }

    /// Drops every cached word.
    pub fn clear_cache(&self) {
        self.caches.clear()
    }

    /// (hits, misses, approximate bytes used) summed over the slots that are not busy.
    pub fn cache_stats(&self) -> (u64, u64, usize) {
        self.caches.stats()
    }

    /// Borrows a cache slot, preferring `hint`; never blocks.
    pub fn cache(&self, hint: usize) -> CacheGuard<'_> {
        self.caches.borrow(hint)
    }

    /// (folded characters, whole-piece tokens, pair-table bytes) of the merge's tables.
    pub fn merge_stats(&self) -> (usize, usize, usize) {
        self.ranks.stats()
    }

    /// BPE of one piece known not to be a whole token (see `Ranks::bpe_piece_not_whole`).
    pub fn bpe_piece_not_whole(&self, piece: &[u8], out: &mut Vec<u32>) {
        self.ranks.bpe_piece_not_whole(piece, out)
    }

    /// BPE of one piece, appended to `out` (no cache).
    pub fn bpe_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        self.ranks.bpe_piece(piece, out)
    }

    /// BPE of one piece with only pairs of rank below `limit` (see `Ranks::bpe_piece_upto`).
    pub fn bpe_piece_upto(&self, piece: &[u8], limit: u64, out: &mut Vec<u32>) {
        self.ranks.bpe_piece_upto(piece, limit, out)
    }

    /// BPE of one piece through the cache.
    #[inline(always)]
    pub fn encode_piece(&self, cache: &mut WordCache, piece: &[u8], out: &mut Vec<u32>) {
        let len = piece.len();
        if len == 1 {
            out.push(self.ranks.byte_ids[piece[0] as usize]);
            return;
        }
        if len > MAX_CACHED_LEN {
            self.ranks.bpe_piece(piece, out);
            return;
        }
        if cache.get(piece, out) {
            cache.hits += 1;
            return;
        }
        self.encode_miss(cache, piece, out);
    }

    #[inline(never)]
    fn encode_miss(&self, cache: &mut WordCache, piece: &[u8], out: &mut Vec<u32>) {
        cache.misses += 1;
        let start = out.len();
        // A short piece that missed a seeded table is a whole token only if it is one of those
        // left out of the seed (`Ranks::seed`).
        if piece.len() < 16 && (cache.view || cache.seeded && !self.ranks.maybe_unseeded(piece)) {
            self.ranks.bpe_piece_not_whole(piece, out);
        } else {
            self.ranks.bpe_piece(piece, out);
        }
        cache.put(piece, &out[start..]);
    }

    /// Ordinary text (between raw-matched added tokens) cut into the pre-tokenizer's pieces,
    /// each with its ids: `f(start, end, ids, added)` in order, byte ranges of `text` (`added`:
    /// a token of the normalized group, whose range is its own)
    /// ([`crate::spans`]). The ids are those of [`Self::encode_text_with`].
    pub fn encode_pieces(&self, cache: &mut WordCache, text: &str, inner: Option<&Automaton>, f: &mut dyn FnMut(usize, usize, &[u32], bool)) -> Result<(), String> {
        if self.generic {
            return self.general().encode_pieces(cache, text, inner, f);
        }
        let b = text.as_bytes();
        let mut ids = Vec::new();
        self.pattern.for_each_piece_dyn(text, &mut |s, e| {
            ids.clear();
            self.encode_piece(cache, &b[s..e], &mut ids);
            f(s, e, &ids, false);
        })
    }

    /// Ids of `text` with BPE-dropout ([`dropout`]): each merge skipped with probability `p`,
    /// reproducibly from `seed` and the text. Special tokens as in [`Self::check_disallowed`]
    /// and [`Self::split_specials`]; the pre-tokenizer must be one pattern (no general path).
    pub fn encode_dropout(&self, text: &str, allowed: &SpecialSet, disallowed: &Option<SpecialSet>, p: f32, seed: u64, out: &mut Vec<u32>) -> Result<(), String> {
        if p.is_nan() || !(0.0..=1.0).contains(&p) {
            return Err(format!("dropout must be between 0 and 1, not {p}"));
        }
        if self.pipeline.is_needed() {
            return Err("dropout needs a tokenizer whose pre-tokenization is one pattern over bytes; this tokenizer.json's pipeline (a normalizer, several pre-tokenizer steps or missing byte tokens) is not".into());
        }
        self.check_disallowed(text, allowed, disallowed)?;
        let table = match self.dropout.get() {
            Some(t) => t,
            None => {
                let by_bytes = self.tables.mergeable(&self.specials)?;
                let tokens: Vec<(u32, &[u8])> = by_bytes.iter().map(|(b, i)| (*i, *b)).collect();
                let _ = self.dropout.set(dropout::DropoutTable::new(&tokens, self.merges()));
                self.dropout.get().ok_or("dropout table")?
            }
        };
        let text_seed = dropout::text_seed(seed, text.as_bytes());
        let (mut items, mut inner_items) = (Vec::new(), Vec::new());
        self.split_specials(text, allowed, 0, &mut items);
        // (Added tokens of the normalized group match in the text between the raw group's.)
        let inner = self.inner_automaton(allowed);
        let b = text.as_bytes();
        for it in items {
            inner_items.clear();
            match (it, inner.as_deref()) {
                (Item::Text(s, e), Some(a)) => self.specials.split_with(Some(a), &text[s..e], s, &mut inner_items),
                (it, _) => inner_items.push(it),
            }
            for it in &inner_items {
                match *it {
                    Item::Text(s, e) => self.pattern.for_each_piece_dyn(&text[s..e], &mut |ps, pe| {
                        table.merge(&b[s + ps..s + pe], &self.ranks.byte_ids, p, &mut dropout::Rng::at(text_seed, s + ps), out)
                    })?,
                    Item::Special(id, _, _) => out.push(id),
                }
            }
        }
        Ok(())
    }

    /// Fails if `text` holds a special token that is neither allowed nor left out of the check
    /// (`disallowed = None`: every special that is not allowed, tiktoken's default).
    pub fn check_disallowed(&self, text: &str, allowed: &SpecialSet, disallowed: &Option<SpecialSet>) -> Result<(), String> {
        match self.specials.first_disallowed(text, allowed, disallowed) {
            Some(s) => Err(disallowed_error(&s)),
            None => Ok(()),
        }
    }

    /// Splits a document at the allowed special tokens (see `crate::specials` for the rule).
    pub fn split_specials(&self, text: &str, allowed: &SpecialSet, base: usize, items: &mut Vec<Item>) {
        self.specials.split(text, allowed, base, items)
    }

    #[inline]
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.tokens.get(id)
    }

    /// Concatenated bytes of `ids`; the error names the first unknown id.
    pub fn decode_bytes<I: IntoIterator<Item = i64>>(&self, ids: I, out: &mut Vec<u8>) -> Result<(), String> {
        self.tokens.decode(ids, out)
    }
}
