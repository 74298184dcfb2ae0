//! `tokenizers`' normalizers for byte-level models: applied to each stretch of text between the
//! raw-matched added tokens, before the normalized ones are matched and before pre-tokenizing.

use serde_json::Value;
use std::borrow::Cow;

use unicode_normalization::char::canonical_combining_class;
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

    /// `s` normalized, borrowed when nothing changes (the common case for the Unicode forms).
    pub fn apply_cow<'a>(&self, s: &'a str) -> Result<Cow<'a, str>, String> {
        Ok(match self {
            Normalizer::Nfc | Normalizer::Nfd | Normalizer::Nfkc | Normalizer::Nfkd => self.form(s),
            Normalizer::Sequence(list) => {
                let mut cur = Cow::Borrowed(s);
                for n in list {
                    if let Cow::Owned(x) = n.apply_cow(&cur)? {
                        cur = Cow::Owned(x);
                    }
                }
                cur
            }
            _ => Cow::Owned(self.apply(s)?),
        })
    }

    /// A Unicode form, applied only where the text needs it. The text is cut before each
    /// *stable* char (ASCII, or combining class 0 with the form's quick check "yes": nothing
    /// before it can reorder or compose across it), and only the stretches between two cuts
    /// that hold another char are normalized; the rest is copied (or borrowed, when no stretch
    /// changes). A whole book with one accented letter costs one stretch, not the book.
    fn form<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let k = match self {
            Normalizer::Nfc => 0,
            Normalizer::Nfd => 1,
            Normalizer::Nfkc => 2,
            _ => 3,
        };
        let bmp = STABLE_BMP[k].get_or_init(|| {
            let mut bits = vec![0u64; 1024].into_boxed_slice();
            for c in (0..0x10000).filter_map(char::from_u32) {
                if is_stable(k, c) {
                    bits[c as usize >> 6] |= 1 << (c as u32 & 63);
                }
            }
            bits
        });
        let stable = |c: char| match c as usize {
            x if x < 0x10000 => bmp[x >> 6] >> (x & 63) & 1 != 0,
            _ => is_stable(k, c),
        };
        let whole = |t: &str| -> String {
            match self {
                Normalizer::Nfc => t.nfc().collect(),
                Normalizer::Nfd => t.nfd().collect(),
                Normalizer::Nfkc => t.nfkc().collect(),
                _ => t.nfkd().collect(),
            }
        };
        let b = s.as_bytes();
        let mut out = String::new();
        // `copied`: how far `out` holds the text; `cut`: the last cut before a stable char.
        let (mut copied, mut cut, mut dirty) = (0, 0, false);
        let mut i = 0;
        while i < b.len() {
            if b[i] < 0x80 {
                if dirty {
                    out.push_str(&s[copied..cut]);
                    out.push_str(&whole(&s[cut..i]));
                    (copied, dirty) = (i, false);
                }
                cut = i;
                i += 1;
                continue;
            }
            let c = s[i..].chars().next().unwrap_or_default();
            if stable(c) {
                if dirty {
                    out.push_str(&s[copied..cut]);
                    out.push_str(&whole(&s[cut..i]));
                    (copied, dirty) = (i, false);
                }
                cut = i;
            } else {
                dirty = true;
            }
            i += c.len_utf8();
        }
        if dirty {
            out.push_str(&s[copied..cut]);
            out.push_str(&whole(&s[cut..]));
            copied = b.len();
        }
        if copied == 0 {
            return Cow::Borrowed(s);
        }
        out.push_str(&s[copied..]);
        // A stretch that was already normalized changes nothing: the text can still be lent.
        if out == s { Cow::Borrowed(s) } else { Cow::Owned(out) }
    }

    /// The normalized text.
    pub fn apply(&self, s: &str) -> Result<String, String> {
        Ok(match self {
            Normalizer::Nfc | Normalizer::Nfd | Normalizer::Nfkc | Normalizer::Nfkd => self.form(s).into_owned(),
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
            let ours = crate::pretok::from_oniguruma(r).map_err(|e| format!("{what}: {e}"))?;
            return Ok(Literal::Regex(Regex::new(&ours).map_err(|e| format!("{what}: {e}"))?, r.to_string()));
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
            Literal::Regex(r, _) => r.for_each_match(s, f),
        }
    }
}

/// Per Unicode form (NFC, NFD, NFKC, NFKD), one bit per BMP char: [`is_stable`], looked up
/// once per process (8 KB each).
static STABLE_BMP: [std::sync::OnceLock<Box<[u64]>>; 4] = [const { std::sync::OnceLock::new() }; 4];

/// Whether nothing before `c` can reorder or compose across it in form `k` (see `form`).
fn is_stable(k: usize, c: char) -> bool {
    let one = std::iter::once(c);
    let quick = match k {
        0 => is_nfc_quick(one),
        1 => is_nfd_quick(one),
        2 => is_nfkc_quick(one),
        _ => is_nfkd_quick(one),
    };
    c.is_ascii() || (canonical_combining_class(c) == 0 && quick == IsNormalized::Yes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_normalize_only_where_needed_and_equal_the_whole_text() {
        // Chars that compose with what precedes them, reorder, decompose, or change under
        // compatibility, around ASCII and stable letters.
        let parts = ["e", "\u{301}", "\u{327}", "\u{316}", "Å", "A\u{30a}", "ﬁ", "한", "\u{1100}", "\u{1161}", "\u{11a8}",
            "⑴", "İ", " ", "\n", "x", "ñ", "\u{344}", "\u{f73}", "é", "’", "日", "\u{3099}", "か", "𝐀", "\u{1d15e}", "\u{1d165}"];
        let forms = [Normalizer::Nfc, Normalizer::Nfd, Normalizer::Nfkc, Normalizer::Nfkd];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..4000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let text: String = (0..seed % 9).map(|k| parts[((seed >> (5 * k)) % parts.len() as u64) as usize]).collect();
            for f in &forms {
                let whole: String = match f {
                    Normalizer::Nfc => text.nfc().collect(),
                    Normalizer::Nfd => text.nfd().collect(),
                    Normalizer::Nfkc => text.nfkc().collect(),
                    _ => text.nfkd().collect(),
                };
                let got = f.apply_cow(&text).unwrap();
                assert_eq!(got, whole, "{text:?}");
                assert_eq!(matches!(got, Cow::Borrowed(_)), whole == text, "{text:?}");
            }
        }
    }
}
