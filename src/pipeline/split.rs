//! `tokenizers`' pre-tokenizers, run step by step on owned pieces: the general path, for the
//! compositions no scanner covers (those that reduce to one scanner or regex never come here,
//! see [`PreTokenizer::as_pattern`]). Each step splits every piece of the step before; empty
//! pieces are dropped, as `tokenizers` drops them.
//!
//! The model reads byte-level chars. When the one `ByteLevel` is the last step (every released
//! file seen so far) the pieces stay text and their bytes go to the model. Otherwise (`mapped`)
//! each `ByteLevel` maps its pieces' bytes to the byte alphabet as `tokenizers` does, so the steps
//! after it see `Ġ` for a space and may cut a char's bytes apart; at the end each char of a piece
//! is its alphabet byte, and a char outside the alphabet (text no `ByteLevel` mapped) is one the
//! model lacks: [`Piece::Text`].

use std::sync::OnceLock;

use serde_json::Value;

use super::{field_bool, kind, Literal};
use crate::alphabet::alphabet_byte;
use crate::pretok::{Builtin, Pattern, Regex};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    Removed,
    Isolated,
    MergedWithPrevious,
    MergedWithNext,
    Contiguous,
}

pub enum Step {
    Split { pattern: Literal, behavior: Behavior, invert: bool },
    ByteLevel { add_prefix_space: bool, use_regex: bool },
    Digits { individual: bool },
    Punctuation(Behavior),
    Whitespace,
    WhitespaceSplit,
}

/// The steps of a `pre_tokenizer` (a Sequence flattened).
pub struct PreTokenizer {
    pub steps: Vec<Step>,
    /// The `pre_tokenizer` object as given (JSON).
    pub json: String,
    /// Whether `ByteLevel` maps bytes to the byte alphabet (all but one `ByteLevel`, last).
    mapped: bool,
}

/// A piece as the model gets it.
pub enum Piece {
    /// Bytes (each char of the byte alphabet read as its byte).
    Bytes(Vec<u8>),
    /// Text with a char outside the byte alphabet (no `ByteLevel` mapped it): such a char is
    /// a token the model lacks.
    Text(String),
}

fn behavior(v: &Value, what: &str, default: Behavior) -> Result<Behavior, String> {
    Ok(match v.get("behavior").and_then(Value::as_str) {
        None => default,
        Some("Removed") => Behavior::Removed,
        Some("Isolated") => Behavior::Isolated,
        Some("MergedWithPrevious") => Behavior::MergedWithPrevious,
        Some("MergedWithNext") => Behavior::MergedWithNext,
        Some("Contiguous") => Behavior::Contiguous,
        Some(b) => return Err(format!("{what}: unknown behavior {b:?}")),
    })
}

impl PreTokenizer {
    /// Parses a `pre_tokenizer` object (null: no step), as `tokenizers` reads it.
    pub fn parse(v: &Value) -> Result<PreTokenizer, String> {
        let mut steps = Vec::new();
        if !v.is_null() {
            Self::flatten(v, &mut steps)?;
        }
        let byte_levels = steps.iter().filter(|s| matches!(s, Step::ByteLevel { .. })).count();
        let mapped = !(byte_levels == 1 && matches!(steps.last(), Some(Step::ByteLevel { .. })));
        // (null is no step, as an empty Sequence; `json` names the pre-tokenizer as a pattern)
        let json = if v.is_null() { r#"{"type":"Sequence","pretokenizers":[]}"#.to_string() } else { v.to_string() };
        Ok(PreTokenizer { steps, json, mapped })
    }

    fn flatten(v: &Value, out: &mut Vec<Step>) -> Result<(), String> {
        let k = kind(v, "pre_tokenizer")?;
        let what = format!("pre_tokenizer {k}");
        out.push(match k {
            "Sequence" => {
                let list = v.get("pretokenizers").and_then(Value::as_array).ok_or("pre_tokenizer Sequence has no 'pretokenizers' list")?;
                for s in list {
                    Self::flatten(s, out)?;
                }
                return Ok(());
            }
            "Split" => Step::Split {
                pattern: Literal::parse(v.get("pattern").unwrap_or(&Value::Null), &what)?,
                behavior: behavior(v, &what, Behavior::Isolated)?,
                invert: field_bool(v, "invert", false, &what)?,
            },
            "ByteLevel" => Step::ByteLevel {
                add_prefix_space: field_bool(v, "add_prefix_space", true, &what)?,
                use_regex: field_bool(v, "use_regex", true, &what)?,
            },
            "Digits" => Step::Digits { individual: field_bool(v, "individual_digits", false, &what)? },
            "Punctuation" => Step::Punctuation(behavior(v, &what, Behavior::Isolated)?),
            "Whitespace" => Step::Whitespace,
            "WhitespaceSplit" => Step::WhitespaceSplit,
            other => {
                return Err(format!(
                    "pre_tokenizer {other} is not supported for byte-level BPE (supported: ByteLevel, Split, Digits, \
                     Punctuation, Whitespace, WhitespaceSplit, Sequence)"
                ))
            }
        });
        Ok(())
    }

    /// The one scanner or regex these steps amount to, if they do: ByteLevel with its regex
    /// alone (GPT-2's split), or a regex Split that keeps every byte (isolated, or a built-in
    /// pattern's regex, whose matches tile any text, with the gaps removed) before a ByteLevel
    /// that only maps bytes.
    pub fn as_pattern(&self) -> Option<Pattern> {
        match &self.steps[..] {
            [Step::ByteLevel { add_prefix_space: false, use_regex: true }] => Some(Pattern::Builtin(Builtin::Gpt2)),
            [Step::Split { pattern: Literal::Regex(r, raw), behavior, invert }, Step::ByteLevel { add_prefix_space: false, use_regex: false }] => {
                // a built-in pattern or a superword span pattern by its written spelling (unless
                // it holds `}+` or `}?`, which Oniguruma reads otherwise than the built-in:
                // tiktoken's cl100k `\p{N}{1,3}+`); else the regex as Oniguruma reads it
                let p = Some(raw.as_str())
                    .filter(|r| !interval_suffixed(r))
                    .and_then(|r| Pattern::from_splits(&[r]).or_else(|| Pattern::spans(r)))
                    .or_else(|| Pattern::regex(r.as_str()).ok())?;
                let keeps_all = match (behavior, invert) {
                    (Behavior::Isolated, _) => true,
                    (Behavior::Removed, true) => p.is_builtin(),
                    _ => false,
                };
                keeps_all.then_some(p)
            }
            // DeepSeek-V3's three isolated splits (`Pattern::from_splits`).
            [Step::Split { pattern: Literal::Regex(_, a), behavior: Behavior::Isolated, invert: false }, Step::Split { pattern: Literal::Regex(_, b), behavior: Behavior::Isolated, invert: false }, Step::Split { pattern: Literal::Regex(_, c), behavior: Behavior::Isolated, invert: false }, Step::ByteLevel { add_prefix_space: false, use_regex: false }] => {
                Pattern::from_splits(&[a.as_str(), b.as_str(), c.as_str()])
            }
            _ => None,
        }
    }

    /// The pieces of `text`, in order, as the model gets them.
    pub fn pieces(&self, text: &str) -> Result<Vec<Piece>, String> {
        let mut cur = vec![text.to_string()];
        for step in &self.steps {
            let mut next = Vec::with_capacity(cur.len() * 2);
            for p in &cur {
                step.split(p, self.mapped, &mut next)?;
            }
            next.retain(|p: &String| !p.is_empty());
            cur = next;
        }
        if !self.mapped {
            return Ok(cur.into_iter().map(|p| Piece::Bytes(p.into_bytes())).collect());
        }
        Ok(cur
            .into_iter()
            .map(|p| match p.chars().map(alphabet_byte).collect::<Option<Vec<u8>>>() {
                Some(b) => Piece::Bytes(b),
                None => Piece::Text(p),
            })
            .collect())
    }
}

/// Whether `r` has an interval `{n}`, `{n,m}`, ... followed by `+` or `?` (Oniguruma repeats or
/// makes optional what the built-in patterns' engines read as possessive or lazy).
fn interval_suffixed(r: &str) -> bool {
    let b = r.as_bytes();
    (0..b.len()).any(|k| {
        if b[k] != b'}' || !matches!(b.get(k + 1), Some(b'+' | b'?')) {
            return false;
        }
        let Some(open) = b[..k].iter().rposition(|&c| c == b'{') else { return false };
        let body = &b[open + 1..k];
        !body.is_empty()
            && body.iter().all(|c| c.is_ascii_digit() || *c == b',')
            && !(open >= 2 && b[open - 2] == b'\\' && matches!(b[open - 1], b'p' | b'P' | b'x' | b'u' | b'k'))
    })
}

fn punctuation() -> &'static Regex {
    static P: OnceLock<Regex> = OnceLock::new();
    P.get_or_init(|| Regex::new(r"\p{P}").expect("a valid class"))
}

fn words() -> &'static Regex {
    static W: OnceLock<Regex> = OnceLock::new();
    W.get_or_init(|| Regex::new(r"\w+|[^\w\s]+").expect("a valid regex"))
}

fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    let mut b = [0u8; 4];
    let s = c.encode_utf8(&mut b);
    let mut hit = false;
    let _ = punctuation().for_each_match(s, |_, _| hit = true);
    hit
}

impl Step {
    /// Splits `s` onto `out`; with `map`, `ByteLevel` also maps each piece to the byte alphabet.
    fn split(&self, s: &str, map: bool, out: &mut Vec<String>) -> Result<(), String> {
        let mut marks: Vec<((usize, usize), bool)> = Vec::new();
        let behavior = match self {
            Step::ByteLevel { add_prefix_space, use_regex } => {
                let owned;
                let s = if *add_prefix_space && !s.starts_with(' ') {
                    owned = format!(" {s}");
                    owned.as_str()
                } else {
                    s
                };
                let alphabet = map.then(crate::alphabet::byte_alphabet);
                let mut push = |p: &str| {
                    out.push(match &alphabet {
                        Some(a) => p.bytes().map(|b| a[b as usize]).collect(),
                        None => p.to_string(),
                    })
                };
                if *use_regex {
                    Pattern::Builtin(Builtin::Gpt2).for_each_piece_dyn(s, &mut |a, b| push(&s[a..b]))?;
                } else {
                    push(s);
                }
                return Ok(());
            }
            Step::Split { pattern, behavior, invert } => {
                match_marks(s, |f| pattern.for_each_match(s, f), &mut marks)?;
                if *invert {
                    marks.iter_mut().for_each(|m| m.1 = !m.1);
                }
                *behavior
            }
            Step::Digits { individual } => {
                char_marks(s, char::is_numeric, &mut marks);
                if *individual { Behavior::Isolated } else { Behavior::Contiguous }
            }
            Step::Punctuation(b) => {
                char_marks(s, is_punctuation, &mut marks);
                *b
            }
            Step::Whitespace => {
                match_marks(s, |f| words().for_each_match(s, f), &mut marks)?;
                marks.iter_mut().for_each(|m| m.1 = !m.1);
                Behavior::Removed
            }
            Step::WhitespaceSplit => {
                char_marks(s, char::is_whitespace, &mut marks);
                Behavior::Removed
            }
        };
        for (a, b) in apply(marks, behavior) {
            out.push(s[a..b].to_string());
        }
        Ok(())
    }
}

/// The text as (range, is_match) runs of the matches `find` reports and the gaps between.
fn match_marks(
    s: &str,
    find: impl FnOnce(&mut dyn FnMut(usize, usize)) -> Result<(), String>,
    marks: &mut Vec<((usize, usize), bool)>,
) -> Result<(), String> {
    let mut last = 0;
    find(&mut |a, b| {
        if a > last {
            marks.push(((last, a), false));
        }
        marks.push(((a, b), true));
        last = b;
    })?;
    if last < s.len() {
        marks.push(((last, s.len()), false));
    }
    Ok(())
}

/// The text as runs where each char `f` accepts is a match of its own.
fn char_marks(s: &str, f: impl Fn(char) -> bool, marks: &mut Vec<((usize, usize), bool)>) {
    let mut last = 0;
    for (i, c) in s.char_indices() {
        if f(c) {
            if i > last {
                marks.push(((last, i), false));
            }
            marks.push(((i, i + c.len_utf8()), true));
            last = i + c.len_utf8();
        }
    }
    if last < s.len() {
        marks.push(((last, s.len()), false));
    }
}

/// The kept ranges of `marks` under `behavior`, as `tokenizers`' `NormalizedString::split`.
fn apply(marks: Vec<((usize, usize), bool)>, behavior: Behavior) -> Vec<(usize, usize)> {
    let mut acc: Vec<(usize, usize)> = Vec::with_capacity(marks.len());
    match behavior {
        Behavior::Isolated => acc.extend(marks.iter().map(|m| m.0)),
        Behavior::Removed => acc.extend(marks.iter().filter(|m| !m.1).map(|m| m.0)),
        Behavior::Contiguous | Behavior::MergedWithPrevious => {
            let mut prev = false;
            for ((a, b), m) in marks {
                let join = if behavior == Behavior::Contiguous { m == prev } else { m && !prev };
                match acc.last_mut() {
                    Some(last) if join => last.1 = b,
                    _ => acc.push((a, b)),
                }
                prev = m;
            }
        }
        Behavior::MergedWithNext => {
            let mut prev = false;
            for ((a, b), m) in marks.into_iter().rev() {
                match acc.last_mut() {
                    Some(last) if m && !prev => last.0 = a,
                    _ => acc.push((a, b)),
                }
                prev = m;
            }
            acc.reverse();
        }
    }
    acc
}
