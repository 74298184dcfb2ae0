//! Which scanner a pattern spec names: the known names, the regex sources of each scanner as
//! released models' tokenizer.json files (and tiktoken) write them, and the normalisation that
//! maps the other spellings of those sources onto them.
//!
//! Invariant: a source maps to a scanner only if the scanner's splits equal the `regex`
//! module's for that source on every text (tests/test_model_patterns.py checks each source
//! listed here; Kimi's class intersections `&&` the module reads only with its `V1` flag, so
//! its reference spells them with a lookahead in `V0`, and `V1` on the source agrees). A spec
//! that looks like a name (`[A-Za-z0-9_.-]+`) and is none is an error, so
//! a typo cannot silently become a regex that matches nothing.

use std::borrow::Cow;

use super::{CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN};

/// Llama-3 and OLMo-2 (their tokenizer.json `Split` regex): cl100k without `\s++$`.
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2, Qwen2.5 and Qwen3: Llama-3's with single numbers.
pub const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen3.5: Qwen2's with marks in words (and out of the "other" runs).
pub const QWEN35_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Mistral's Tekken, used by NVIDIA Nemotron: o200k without contractions, single numbers.
pub const NEMOTRON_PATTERN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Moonshot's Kimi-K2 / K3 (`pat_str` of its tokenization_kimi.py, tiktoken): o200k with a
/// first alternative for Han runs, Han out of both letter classes (class intersection), and a
/// `[\r\n]*` tail on the punctuation alternative where o200k has `[\r\n/]*`.
pub const KIMI_PATTERN: &str = concat!(
    r"[\p{Han}]+",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"\p{N}{1,3}",
    "|",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    "|",
    r"\s*[\r\n]+",
    "|",
    r"\s+(?!\S)",
    "|",
    r"\s+"
);
/// DeepSeek-V3's three `Isolated` splits, in order (as in its tokenizer.json).
pub const DEEPSEEK_V3_SPLITS: [&str; 3] = [
    r"\p{N}{1,3}",
    "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+",
    r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
];

/// Other spellings with the same splits (checked by the tests like the main sources):
/// Llama-3's with `\s*[\r\n]` (the `+` changes nothing: no CR/LF follows a run's last one),
/// and cl100k's with a final `\s+` (reached only by a lone whitespace char).
const ALIASES: [(&str, Known); 2] = [
    (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+", Known::Llama3),
    (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s+", Known::Cl100k),
];

/// The scanners, as `from_spec` finds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    Gpt2,
    Cl100k,
    O200k,
    Llama3,
    Qwen2,
    Qwen35,
    Nemotron,
    DeepSeekV3,
    Kimi,
}

/// Every accepted name (the first of each scanner is its canonical name).
pub const NAMES: [(&str, Known); 24] = [
    ("gpt2", Known::Gpt2),
    ("r50k", Known::Gpt2),
    ("r50k_base", Known::Gpt2),
    ("p50k", Known::Gpt2),
    ("p50k_base", Known::Gpt2),
    ("gpt-2", Known::Gpt2),
    ("cl100k", Known::Cl100k),
    ("cl100k_base", Known::Cl100k),
    ("o200k", Known::O200k),
    ("o200k_base", Known::O200k),
    ("llama3", Known::Llama3),
    ("llama-3", Known::Llama3),
    ("olmo2", Known::Llama3),
    ("qwen2", Known::Qwen2),
    ("qwen2.5", Known::Qwen2),
    ("qwen3", Known::Qwen2),
    ("qwen3.5", Known::Qwen35),
    ("qwen35", Known::Qwen35),
    ("nemotron", Known::Nemotron),
    ("tekken", Known::Nemotron),
    ("deepseek-v3", Known::DeepSeekV3),
    ("deepseek_v3", Known::DeepSeekV3),
    ("kimi", Known::Kimi),
    ("kimi-k2", Known::Kimi),
];

/// The canonical name of a scanner: its first in [`NAMES`].
pub fn canonical_name(k: Known) -> Option<&'static str> {
    NAMES.iter().find(|(_, kk)| *kk == k).map(|&(n, _)| n)
}

/// The main regex sources (one per single-regex scanner).
fn sources() -> [(&'static str, Known); 8] {
    [
        (GPT2_PATTERN, Known::Gpt2),
        (CL100K_PATTERN, Known::Cl100k),
        (O200K_PATTERN, Known::O200k),
        (LLAMA3_PATTERN, Known::Llama3),
        (QWEN2_PATTERN, Known::Qwen2),
        (QWEN35_PATTERN, Known::Qwen35),
        (NEMOTRON_PATTERN, Known::Nemotron),
        (KIMI_PATTERN, Known::Kimi),
    ]
}

/// True if `spec` has the shape of a name rather than of a regex.
pub fn looks_like_name(spec: &str) -> bool {
    !spec.is_empty() && spec.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// The scanner named `name`, if any.
pub fn by_name(name: &str) -> Option<Known> {
    NAMES.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
}

/// The error for a name-like spec that names nothing.
pub fn unknown_name(name: &str) -> String {
    let names: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
    format!("unknown pattern name {name:?}; known names: {} (or give a regex)", names.join(", "))
}

/// The single-regex scanner whose regex `src` is (in any spelling [`normalise`] knows).
pub fn by_source(src: &str) -> Option<Known> {
    let src = normalise(src);
    let src = src.as_ref();
    sources().iter().chain(ALIASES.iter()).find(|(s, _)| *s == src).map(|&(_, k)| k)
}

/// The scanner a Sequence of `Isolated` splits with these regexes amounts to.
pub fn by_splits(regexes: &[&str]) -> Option<Known> {
    match regexes {
        [one] => by_source(one),
        [a, b, c] => {
            let ok = [a, b, c].iter().zip(DEEPSEEK_V3_SPLITS).all(|(r, want)| normalise(r) == want);
            ok.then_some(Known::DeepSeekV3)
        }
        _ => None,
    }
}

/// `src` in the spelling of the sources above: Oniguruma's atomic group for a possessive
/// bounded repeat (`(?>\p{N}{1,3})`, what `hf_bpe.regex_forms.for_oniguruma` writes) back to
/// `\p{N}{1,3}+`; literal CR/LF chars as `\r`/`\n`; and `\x{HHHH}`, `\uHHHH`, `\u{HHHH}`
/// escapes of non-ASCII chars as the chars (DeepSeek's CJK class is spelled all three ways).
pub fn normalise(src: &str) -> Cow<'_, str> {
    if !src.contains(['\r', '\n', '(']) && !src.contains("\\x{") && !src.contains("\\u") {
        return Cow::Borrowed(src);
    }
    let src = src.replace(r"(?>\p{N}{1,3})", r"\p{N}{1,3}+");
    let mut out = String::with_capacity(src.len());
    let mut rest = src.as_str();
    while let Some(c) = rest.chars().next() {
        match c {
            '\r' => out.push_str(r"\r"),
            '\n' => out.push_str(r"\n"),
            '\\' => {
                if let Some((ch, used)) = escaped_char(rest) {
                    out.push(ch);
                    rest = &rest[used..];
                    continue;
                }
                // Keep an escape pair together (so `\\x{..}` stays a backslash and text).
                let next = rest[1..].chars().next().map_or(0, char::len_utf8);
                out.push_str(&rest[..1 + next]);
                rest = &rest[1 + next..];
                continue;
            }
            _ => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

/// The non-ASCII char of a `\x{H..}`, `\u{H..}` or `\uHHHH` escape at the start of `s`, and the
/// escape's length.
fn escaped_char(s: &str) -> Option<(char, usize)> {
    let b = s.as_bytes();
    let (digits, used) = match (b.get(1), b.get(2)) {
        (Some(b'x' | b'u'), Some(b'{')) => {
            let close = s.find('}')?;
            (&s[3..close], close + 1)
        }
        (Some(b'u'), _) if s.len() >= 6 => (&s[2..6], 6),
        _ => return None,
    };
    let cp = u32::from_str_radix(digits, 16).ok()?;
    let ch = char::from_u32(cp)?;
    (cp >= 0x80).then_some((ch, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_the_deepseek_class() {
        for s in [r"[\x{4e00}-\x{9fa5}\x{3040}-\x{309f}\x{30a0}-\x{30ff}]+", r"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"] {
            assert_eq!(normalise(s), DEEPSEEK_V3_SPLITS[1]);
        }
        let lit = DEEPSEEK_V3_SPLITS[2].replace(r"\r", "\r").replace(r"\n", "\n");
        assert_eq!(by_splits(&[DEEPSEEK_V3_SPLITS[0], DEEPSEEK_V3_SPLITS[1], &lit]), Some(Known::DeepSeekV3));
        assert_eq!(normalise(r"\\x{4e00}"), r"\\x{4e00}");
        assert_eq!(by_source(&CL100K_PATTERN.replace(r"\p{N}{1,3}+", r"(?>\p{N}{1,3})")), Some(Known::Cl100k));
    }

    #[test]
    fn names() {
        assert!(looks_like_name("gpt4") && looks_like_name("qwen2.5") && !looks_like_name(r"\s+") && !looks_like_name("a b"));
        assert_eq!(by_name("olmo2"), Some(Known::Llama3));
        assert_eq!(by_name("kimi-k2"), Some(Known::Kimi));
        assert_eq!(by_source(KIMI_PATTERN), Some(Known::Kimi));
        assert!(unknown_name("gpt4").contains("llama3, llama-3"));
    }
}
