//! `tokenizers`' normalizers for byte-level models: applied to each stretch of text between the
//! raw-matched added tokens, before the normalized ones are matched and before pre-tokenizing.

use serde_json::Value;
use unicode_normalization::{is_nfc_quick, is_nfd_quick, is_nfkc_quick, is_nfkd_quick, IsNormalized, UnicodeNormalization};

use super::{field_bool, field_str, kind, Literal};
use crate::pretok::Regex;

pub enum Normalizer {
    Nfc,
    Nfd,
    Nfkc,
    Nfkd,
    Lowercase,
    StripAccents,
    Strip { left: bool, right: bool },
    Replace { pattern: Literal, content: String },
    Prepend(String),
    Sequence(Vec<Normalizer>),
}

impl Normalizer {
    /// Parses a `normalizer` object; `None` for JSON null. The error names the component.
    pub fn parse(v: &Value) -> Result<Option<Normalizer>, String> {
        if v.is_null() {
            return Ok(None);
        }
        let k = kind(v, "normalizer")?;
        Ok(Some(match k {
            "NFC" => Normalizer::Nfc,
            "NFD" => Normalizer::Nfd,
            "NFKC" => Normalizer::Nfkc,
            "NFKD" => Normalizer::Nfkd,
            "Lowercase" => Normalizer::Lowercase,
            "StripAccents" => Normalizer::StripAccents,
            "Strip" => Normalizer::Strip {
                left: field_bool(v, "strip_left", true, "normalizer Strip")?,
                right: field_bool(v, "strip_right", true, "normalizer Strip")?,
            },
            "Replace" => Normalizer::Replace {
                pattern: Literal::parse(v.get("pattern").unwrap_or(&Value::Null), "normalizer Replace")?,
                content: field_str(v, "content", "normalizer Replace")?.to_string(),
            },
            "Prepend" => Normalizer::Prepend(field_str(v, "prepend", "normalizer Prepend")?.to_string()),
            "Sequence" => {
                let list = v.get("normalizers").and_then(Value::as_array).ok_or("normalizer Sequence has no 'normalizers' list")?;
                let mut out = Vec::new();
                for n in list {
                    if let Some(n) = Normalizer::parse(n)? {
                        out.push(n);
                    }
                }
                Normalizer::Sequence(out)
            }
            other => {
                return Err(format!(
                    "normalizer {other} is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, \
                     Replace, Prepend, Sequence)"
                ))
            }
        }))
    }

    /// True for the normalizers that map ASCII to ASCII (letters to letters) and change a char
    /// only on its own or with its combining marks (the Unicode forms, Lowercase,
    /// StripAccents, sequences of them).
    pub fn is_local(&self) -> bool {
        match self {
            Normalizer::Nfc | Normalizer::Nfd | Normalizer::Nfkc | Normalizer::Nfkd | Normalizer::StripAccents | Normalizer::Lowercase => true,
            Normalizer::Sequence(list) => list.iter().all(Normalizer::is_local),
            _ => false,
        }
    }

    /// True if [`Self::apply`] is known to return `s` unchanged, found cheaply: the Unicode
    /// forms' quick checks say "yes" for nearly all text. They start at the char before the
    /// first non-ASCII byte: ASCII is in every form, and a char of combining class 0 ends any
    /// reordering or composition the rest could need.
    pub fn keeps(&self, s: &str) -> bool {
        let Some(p) = s.bytes().position(|b| b >= 0x80) else {
            return matches!(self, Normalizer::Nfc | Normalizer::Nfd | Normalizer::Nfkc | Normalizer::Nfkd);
        };
        let rest = s[p.saturating_sub(1)..].chars();
        match self {
            Normalizer::Nfc => is_nfc_quick(rest) == IsNormalized::Yes,
            Normalizer::Nfd => is_nfd_quick(rest) == IsNormalized::Yes,
            Normalizer::Nfkc => is_nfkc_quick(rest) == IsNormalized::Yes,
            Normalizer::Nfkd => is_nfkd_quick(rest) == IsNormalized::Yes,
            _ => false,
        }
    }

    /// The normalized text.
    pub fn apply(&self, s: &str) -> Result<String, String> {
        Ok(match self {
            _ if self.keeps(s) => s.to_string(),
            Normalizer::Nfc => s.nfc().collect(),
            Normalizer::Nfd => s.nfd().collect(),
            Normalizer::Nfkc => s.nfkc().collect(),
            Normalizer::Nfkd => s.nfkd().collect(),
            // Char by char, as `tokenizers` (no final-sigma rule).
            Normalizer::Lowercase => s.chars().flat_map(char::to_lowercase).collect(),
            Normalizer::StripAccents => s.chars().filter(|&c| !unicode_normalization::char::is_combining_mark(c)).collect(),
            Normalizer::Strip { left, right } => {
                let t = if *left { s.trim_start() } else { s };
                (if *right { t.trim_end() } else { t }).to_string()
            }
            Normalizer::Replace { pattern, content } => {
                let mut out = String::with_capacity(s.len());
                let mut last = 0;
                pattern.for_each_match(s, |a, b| {
                    out.push_str(&s[last..a]);
                    out.push_str(content);
                    last = b;
                })?;
                out.push_str(&s[last..]);
                out
            }
            Normalizer::Prepend(p) => {
                if s.is_empty() {
                    String::new()
                } else {
                    format!("{p}{s}")
                }
            }
            Normalizer::Sequence(list) => {
                let mut cur = s.to_string();
                for n in list {
                    cur = n.apply(&cur)?;
                }
                cur
            }
        })
    }
}

impl Literal {
    /// `{"String": s}` (matched literally) or `{"Regex": r}`.
    pub fn parse(v: &Value, what: &str) -> Result<Literal, String> {
        if let Some(s) = v.get("String").and_then(Value::as_str) {
            return Ok(Literal::Text(s.to_string()));
        }
        if let Some(r) = v.get("Regex").and_then(Value::as_str) {
            return Ok(Literal::Regex(Regex::new(r).map_err(|e| format!("{what}: {e}"))?));
        }
        Err(format!("{what}: pattern {v} is neither {{\"String\": ...}} nor {{\"Regex\": ...}}"))
    }

    /// Every match, left to right (a literal's non-overlapping occurrences).
    pub fn for_each_match(&self, s: &str, mut f: impl FnMut(usize, usize)) -> Result<(), String> {
        match self {
            Literal::Text(t) if t.is_empty() => Ok(()),
            Literal::Text(t) => {
                for (i, _) in s.match_indices(t.as_str()) {
                    f(i, i + t.len());
                }
                Ok(())
            }
            Literal::Regex(r) => r.for_each_match(s, f),
        }
    }
}
