//! The parts of a `tokenizer.json` around the model, for byte-level BPE, parsed and checked:
//! the normalizer (`normalize.rs`), the pre-tokenizer (`split.rs`), the model's options, what
//! each byte without a token becomes ([`Missing`]), and (checked here, applied by the Python
//! adapter) the post-processor and decoder. This is data: the encoder runs it (its general
//! path, `encode/general.rs`), and nothing here calls the encoder.
//!
//! * **Fast when it can be.** A pre-tokenizer that amounts to one scanner or regex
//!   ([`PreTokenizer::as_pattern`]) becomes the encoder's pattern, and a tokenizer with nothing
//!   else to do (no normalizer, one group of added tokens, every byte token that UTF-8 text can
//!   need) never takes the general path: it runs on the encoder's hot path.
//! * **Nothing ignored.** A component or option the general path cannot reproduce exactly fails
//!   to load with an error naming it (a `continuing_subword_prefix`, Metaspace, ...). A model's
//!   `dropout` stays in the canonical JSON (the default of the Python API's `encode*(dropout=)`).
//! * **Missing byte tokens** (vocabularies that leave out bytes, as GPT-NeoX's): as
//!   `tokenizers`, such a byte becomes its `<0xNN>` token with `byte_fallback`, else the
//!   `unk_token` (consecutive ones fused with `fuse_unk`), else it is dropped and its
//!   neighbours may merge across it.

mod normalize;
mod split;

use serde_json::Value;

use crate::pretok::{Pattern, Regex};

pub use normalize::Normalizer;
pub use split::{Piece, PreTokenizer};

/// A `{"String": ..}` or `{"Regex": ..}` pattern of a Split or Replace: a regex is compiled as
/// Oniguruma reads it (`crate::pretok::from_oniguruma`), its source as written kept beside.
pub enum Literal {
    Text(String),
    Regex(Regex, String),
}

pub(crate) fn kind<'a>(v: &'a Value, what: &str) -> Result<&'a str, String> {
    v.get("type").and_then(Value::as_str).ok_or_else(|| format!("{what} {v} has no 'type'"))
}

pub(crate) fn field_bool(v: &Value, key: &str, default: bool, what: &str) -> Result<bool, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(x) => Err(format!("{what}: '{key}' is {x}, not true or false")),
    }
}

pub(crate) fn field_str<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a str, String> {
    v.get(key).and_then(Value::as_str).ok_or_else(|| format!("{what}: '{key}' is missing or not a string"))
}

/// What a byte without a token becomes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// The byte has its token.
    Present,
    Drop,
    Unk(u32),
    /// The `<0xNN>` tokens of the UTF-8 bytes of the byte's char in the byte alphabet (what
    /// `tokenizers` looks up: the model sees byte-level chars): index into `fallback`.
    Fallback(u16),
}

/// The checked components of an imported `tokenizer.json`.
pub struct Pipeline {
    /// `{"normalizer", "pre_tokenizer", "model" (options only), "post_processor", "decoder"}`;
    /// None for a vocabulary of our own (no tokenizer.json components).
    pub json: Option<String>,
    pub normalizer: Option<Normalizer>,
    /// None when the pre-tokenizer is the encoder's pattern.
    pub pre: Option<PreTokenizer>,
    pub ignore_merges: bool,
    /// What each byte becomes.
    pub missing: Box<[Missing; 256]>,
    /// The ids of each [`Missing::Fallback`].
    pub fallback: Vec<Vec<u32>>,
    pub fuse_unk: bool,
    /// Whether some byte that UTF-8 text can hold lacks a token.
    pub missing_any: bool,
    /// For a char outside the byte alphabet ([`Piece::Text`]): the model's unk token, whether it
    /// falls back to bytes, and the `<0xNN>` token of each byte.
    pub unk: Option<u32>,
    pub byte_fallback: bool,
    pub byte_ids: Box<[Option<u32>; 256]>,
}

/// What [`Pipeline::parse`] needs to know of the vocabulary.
pub struct Lookup<'a> {
    /// The id of a token given as `tokenizer.json` spells it (byte-level, or an added token).
    pub id_of: &'a dyn Fn(&str) -> Option<u32>,
    /// Whether an id names a token.
    pub known: &'a dyn Fn(u32) -> bool,
    /// Whether the vocabulary has the one-byte token of a byte.
    pub has_byte: &'a dyn Fn(u8) -> bool,
}

impl Pipeline {
    /// Parses and checks the components; returns the pipeline and, if the pre-tokenizer is one
    /// scanner or regex, that pattern. The error names the component.
    pub fn parse(json: Option<&str>, look: &Lookup) -> Result<(Pipeline, Option<Pattern>), String> {
        let Some(json) = json else {
            let missing = Box::new(std::array::from_fn(|b| if (look.has_byte)(b as u8) { Missing::Present } else { Missing::Drop }));
            return Ok((Pipeline { json: None, normalizer: None, pre: None, ignore_merges: false, missing_any: in_utf8(&missing), missing, fallback: Vec::new(), fuse_unk: false, unk: None, byte_fallback: false, byte_ids: Box::new([None; 256]) }, None));
        };
        let v: Value = serde_json::from_str(json).map_err(|e| format!("pipeline is not valid JSON: {e}"))?;
        let get = |k: &str| v.get(k).unwrap_or(&Value::Null);
        let normalizer = Normalizer::parse(get("normalizer"))?;
        let pre = PreTokenizer::parse(get("pre_tokenizer"))?;
        let pattern = pre.as_pattern();
        let model = get("model");
        let opt = |k: &str| model.get(k).filter(|x| !x.is_null());
        if let Some(t) = opt("type").and_then(Value::as_str).filter(|t| *t != "BPE") {
            return Err(format!("model type {t} is not BPE"));
        }
        let dropout = match opt("dropout") {
            None => None,
            Some(d) => {
                let p = d.as_f64().filter(|p| (0.0..=1.0).contains(p)).ok_or_else(|| format!("model dropout {d} is not a probability between 0 and 1"))?;
                (p > 0.0).then_some(p)
            }
        };
        for k in ["continuing_subword_prefix", "end_of_word_suffix"] {
            if let Some(x) = opt(k).filter(|x| x.as_str() != Some("")) {
                return Err(format!("model {k} {x} is not supported for byte-level BPE"));
            }
        }
        let ignore_merges = field_bool(model, "ignore_merges", false, "model")?;
        let fuse_unk = field_bool(model, "fuse_unk", false, "model")?;
        let byte_fallback = field_bool(model, "byte_fallback", false, "model")?;
        let unk = match opt("unk_token") {
            None => None,
            Some(u) => {
                let s = u.as_str().ok_or_else(|| format!("model unk_token {u} is not a string"))?;
                Some((look.id_of)(s).ok_or_else(|| format!("model unk_token {s:?} is not in the vocabulary"))?)
            }
        };
        let mut missing = Box::new([Missing::Present; 256]);
        let mut fallbacks = Vec::new();
        let alphabet = crate::alphabet::byte_alphabet();
        for (b, m) in missing.iter_mut().enumerate() {
            if (look.has_byte)(b as u8) {
                continue;
            }
            let mut utf8 = [0u8; 4];
            let fallback: Option<Vec<u32>> = if byte_fallback {
                alphabet[b].encode_utf8(&mut utf8).bytes().map(|x| (look.id_of)(&format!("<0x{x:02X}>"))).collect()
            } else {
                None
            };
            *m = match (fallback, unk) {
                (Some(ids), _) => {
                    fallbacks.push(ids);
                    Missing::Fallback(fallbacks.len() as u16 - 1)
                }
                (None, Some(u)) => Missing::Unk(u),
                (None, None) => Missing::Drop,
            };
        }
        check_decoder(get("decoder"))?;
        check_post_processor(get("post_processor"), look)?;
        let canonical = serde_json::json!({
            "normalizer": get("normalizer"),
            "pre_tokenizer": get("pre_tokenizer"),
            "model": {"type": "BPE", "ignore_merges": ignore_merges, "fuse_unk": fuse_unk, "byte_fallback": byte_fallback,
                      "unk_token": opt("unk_token").cloned().unwrap_or(Value::Null), "dropout": dropout},
            "post_processor": get("post_processor"),
            "decoder": get("decoder"),
        });
        // Components that add nothing to the pattern (what hf_bpe writes for a vocabulary of its
        // own) leave no pipeline: such a tokenizer is the plain one, equal to it.
        let post = get("post_processor");
        let plain_post = post.is_null() || (kind(post, "")? == "ByteLevel" && !field_bool(post, "trim_offsets", true, "")?);
        let plain = normalizer.is_none()
            && pattern.is_some()
            && plain_post
            && !ignore_merges
            && unk.is_none()
            && !byte_fallback
            && dropout.is_none()
            && kind(get("decoder"), "decoder")? == "ByteLevel";
        let pre = if pattern.is_some() { None } else { Some(pre) };
        let json = if plain { None } else { Some(canonical.to_string()) };
        let missing_any = in_utf8(&missing);
        let byte_ids = Box::new(std::array::from_fn(|x| if byte_fallback { (look.id_of)(&format!("<0x{x:02X}>")) } else { None }));
        Ok((Pipeline { json, normalizer, pre, ignore_merges, missing, fallback: fallbacks, fuse_unk, missing_any, unk, byte_fallback, byte_ids }, pattern))
    }

    /// Whether text must take this path rather than the encoder's hot path: a normalizer, a
    /// pre-tokenizer of several steps, or a missing byte token that UTF-8 text can hold
    /// (0xC0, 0xC1 and 0xF5..=0xFF never occur in it). The second group of added tokens is the
    /// encoder's to tell ([`crate::specials::Specials::has_inner`]).
    pub fn is_needed(&self) -> bool {
        self.normalizer.is_some() || self.pre.is_some() || self.missing_any
    }

    /// Whether text may be cut at [`crate::corpus::cuts::ascii_safe_cut`]s without changing the ids:
    /// the pre-tokenizer is the encoder's (built-in) pattern, the normalizer is local
    /// ([`Normalizer::is_local`]), and
    /// no token matched in the normalized text (`inner`) could straddle such a cut: none holds
    /// a `'\n'`, or a space after another char.
    pub fn cuts_at_ascii<'a>(&self, mut inner: impl Iterator<Item = &'a str>) -> bool {
        self.pre.is_none()
            && self.normalizer.as_ref().is_none_or(Normalizer::is_local)
            && inner.all(|t| !t.contains('\n') && !t.as_bytes().windows(2).any(|w| w[1] == b' ' && w[0] != b' '))
    }

    /// The normalized form of an added token's content (for the second group's matcher).
    pub fn normalize(&self, s: &str) -> Result<String, String> {
        match &self.normalizer {
            Some(n) => n.apply(s),
            None => Ok(s.to_string()),
        }
    }
}

/// Whether a byte that UTF-8 text can hold lacks a token (0xC0, 0xC1, 0xF5..=0xFF never occur).
fn in_utf8(missing: &[Missing; 256]) -> bool {
    (0..256).any(|b| missing[b] != Missing::Present && !matches!(b, 0xC0 | 0xC1 | 0xF5..=0xFF))
}

fn check_decoder(v: &Value) -> Result<(), String> {
    match v {
        Value::Null => Err("decoder is null: decoding a byte-level vocabulary needs the ByteLevel decoder".into()),
        _ => match kind(v, "decoder")? {
            "ByteLevel" => Ok(()),
            "Sequence" => {
                let list = v.get("decoders").and_then(Value::as_array).ok_or("decoder Sequence has no 'decoders' list")?;
                match &list[..] {
                    [one] => check_decoder(one),
                    _ => Err(format!("decoder {v} is not supported (a ByteLevel decoder is)")),
                }
            }
            other => Err(format!("decoder {other} is not supported for byte-level BPE (ByteLevel is)")),
        },
    }
}

fn check_post_processor(v: &Value, look: &Lookup) -> Result<(), String> {
    if v.is_null() {
        return Ok(());
    }
    let ids_known = |what: &str, ids: &[u32]| match ids.iter().find(|&&i| !(look.known)(i)) {
        Some(i) => Err(format!("post_processor {what}: token id {i} is not in the vocabulary")),
        None => Ok(()),
    };
    let pair = |key: &str| -> Result<(), String> {
        let p = v.get(key).and_then(Value::as_array).filter(|a| a.len() == 2);
        let id = p.and_then(|a| a[1].as_u64()).ok_or_else(|| format!("post_processor: '{key}' is not a [token, id] pair"))?;
        ids_known(key, &[id as u32])
    };
    match kind(v, "post_processor")? {
        "ByteLevel" => Ok(()),
        "RobertaProcessing" | "BertProcessing" => {
            pair("sep")?;
            pair("cls")
        }
        "TemplateProcessing" => {
            let specials = v.get("special_tokens").and_then(Value::as_object).ok_or("post_processor TemplateProcessing has no 'special_tokens'")?;
            for (name, t) in specials {
                let ids: Vec<u32> = t.get("ids").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_u64).map(|x| x as u32).collect()).unwrap_or_default();
                if ids.is_empty() {
                    return Err(format!("post_processor TemplateProcessing: special token {name:?} has no ids"));
                }
                ids_known(name, &ids)?;
            }
            for key in ["single", "pair"] {
                let parts = v.get(key).and_then(Value::as_array).ok_or_else(|| format!("post_processor TemplateProcessing has no '{key}' template"))?;
                for p in parts {
                    if let Some(id) = p.get("SpecialToken").and_then(|s| s.get("id")).and_then(Value::as_str) {
                        if !specials.contains_key(id) {
                            return Err(format!("post_processor TemplateProcessing: {key} uses {id:?}, which is not in its special_tokens"));
                        }
                    } else if p.get("Sequence").is_none() {
                        return Err(format!("post_processor TemplateProcessing: {key} has the piece {p}"));
                    }
                }
            }
            Ok(())
        }
        "Sequence" => {
            for p in v.get("processors").and_then(Value::as_array).ok_or("post_processor Sequence has no 'processors' list")? {
                check_post_processor(p, look)?;
            }
            Ok(())
        }
        other => Err(format!(
            "post_processor {other} is not supported (supported: ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing, Sequence)"
        )),
    }
}
