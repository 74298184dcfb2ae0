//! The built-in patterns, one table (`builtins!` below): each entry gives a scanner's names,
//! the regex sources it stands for (as released models' tokenizer.json files and tiktoken
//! write them), other spellings of those sources, and the scanner that runs it. Adding a
//! built-in is one entry (plus its scanner, if no existing one is generic over its rules).
//! Here too: the lookups by name and by source, and the normalisation that maps the other
//! spellings of a source onto the table's.
//!
//! Invariant: a source maps to a scanner only if the scanner's splits equal the `regex`
//! module's for that source on every text (tests/test_model_patterns.py checks each source
//! listed here; Kimi's class intersections `&&` the module reads only with its `V1` flag, so
//! its reference spells them with a lookahead in `V0`, and `V1` on the source agrees). A spec
//! that looks like a name (`[A-Za-z0-9_.-]+`) and is none is an error, so
//! a typo cannot silently become a regex that matches nothing.

use std::borrow::Cow;

use super::PieceSink;

/// One built-in pattern's entry.
pub struct Def {
    /// Every accepted name; the first is the canonical one.
    pub names: &'static [&'static str],
    /// The regexes of the Sequence of `Isolated` splits it stands for, in order: one for a
    /// single-regex pattern (what `regex.findall` would use).
    pub splits: &'static [&'static str],
    /// Other spellings of a single-regex pattern's source, with the same splits (checked by
    /// the tests like the main sources).
    pub spellings: &'static [&'static str],
}

/// Builds, from the table, the enum [`Builtin`] (one variant per entry), its entries
/// ([`Builtin::def`]) and the scanner dispatch ([`Builtin::scan`]): a `match`, so each sink
/// type gets the scanners inlined, as a hand-written one would. `scanner: m::<G..>` runs
/// `super::m::scan::<G..>`, or its x86-64-v3 copy `super::v3::m::<G..>` where the CPU has it.
macro_rules! builtins {
    ($(
        $(#[$doc:meta])*
        $v:ident {
            names: [$($name:expr),+ $(,)?],
            splits: [$($split:expr),+ $(,)?],
            spellings: [$($spelling:expr),* $(,)?],
            scanner: $m:ident $(::<$($g:tt),*>)? $(,)?
        }
    ),+ $(,)?) => {
        /// The built-in patterns, each a hand-written scanner.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Builtin {
            $($(#[$doc])* $v,)+
        }

        impl Builtin {
            /// Every built-in, in table order.
            pub const ALL: &'static [Builtin] = &[$(Builtin::$v),+];

            /// This built-in's entry of the table.
            pub fn def(self) -> &'static Def {
                match self {
                    $(Builtin::$v => &Def { names: &[$($name),+], splits: &[$($split),+], spellings: &[$($spelling),*] },)+
                }
            }

            /// Runs the scanner on `text`: its x86-64-v3 copy where the CPU has the features,
            /// else the baseline one.
            #[inline(always)]
            pub fn scan(self, text: &str, f: &mut impl PieceSink) {
                match self {
                    $(Builtin::$v => {
                        #[cfg(target_arch = "x86_64")]
                        if super::v3::available() {
                            // SAFETY: the CPU has the features `v3` is compiled for (checked).
                            unsafe { super::v3::$m $(::<$($g),*>)?(text, f) };
                            return;
                        }
                        super::$m::scan $(::<$($g),*>)?(text, f)
                    })+
                }
            }

            /// The baseline copy of the scanner.
            #[cfg(test)]
            pub(super) fn scan_baseline(self, text: &str, f: &mut impl PieceSink) {
                match self {
                    $(Builtin::$v => super::$m::scan $(::<$($g),*>)?(text, f),)+
                }
            }

            /// The x86-64-v3 copy of the scanner.
            ///
            /// # Safety
            /// The CPU must have the features of `super::v3` (`super::v3::available()`).
            #[cfg(all(test, target_arch = "x86_64"))]
            pub(super) unsafe fn scan_v3(self, text: &str, f: &mut impl PieceSink) {
                match self {
                    $(Builtin::$v => super::v3::$m $(::<$($g),*>)?(text, f),)+
                }
            }
        }
    };
}

builtins! {
    /// GPT-2's (also r50k and p50k).
    Gpt2 {
        names: ["gpt2", "r50k", "r50k_base", "p50k", "p50k_base", "gpt-2"],
        splits: [r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"],
        spellings: [],
        scanner: gpt2,
    },
    /// tiktoken's cl100k_base. The other spelling has a final `\s+` (reached only by a lone
    /// whitespace char).
    Cl100k {
        names: ["cl100k", "cl100k_base"],
        splits: [r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"],
        spellings: [
            r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
        scanner: cl100k::<3, true, false>,
    },
    /// tiktoken's o200k_base.
    O200k {
        names: ["o200k", "o200k_base"],
        splits: [
            concat!(
                r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                "|",
                r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                "|",
                r"\p{N}{1,3}",
                "|",
                r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
                "|",
                r"\s*[\r\n]+",
                "|",
                r"\s+(?!\S)",
                "|",
                r"\s+"
            ),
        ],
        spellings: [],
        scanner: o200k::<true, 3, false>,
    },
    /// Llama-3 and OLMo-2 (their tokenizer.json `Split` regex): cl100k without `\s++$`. The other
    /// spelling has `\s*[\r\n]` (the `+` changes nothing: no CR/LF follows a run's last one).
    Llama3 {
        names: ["llama3", "llama-3", "olmo2"],
        splits: [r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
        spellings: [
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
        scanner: cl100k::<3, false, false>,
    },
    /// Qwen2, Qwen2.5 and Qwen3: Llama-3's with single numbers.
    Qwen2 {
        names: ["qwen2", "qwen2.5", "qwen3"],
        splits: [r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
        spellings: [],
        scanner: cl100k::<1, false, false>,
    },
    /// Qwen3.5: Qwen2's with marks in words (and out of the "other" runs).
    Qwen35 {
        names: ["qwen3.5", "qwen35"],
        splits: [r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
        spellings: [],
        scanner: cl100k::<1, false, true>,
    },
    /// Mistral's Tekken, used by NVIDIA Nemotron: o200k without contractions, single numbers.
    Nemotron {
        names: ["nemotron", "tekken"],
        splits: [r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
        spellings: [],
        scanner: o200k::<false, 1, false>,
    },
    /// DeepSeek-V3's three `Isolated` splits, in order (as in its tokenizer.json).
    DeepSeekV3 {
        names: ["deepseek-v3", "deepseek_v3"],
        splits: [
            r"\p{N}{1,3}",
            "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+",
            r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
        ],
        spellings: [],
        scanner: deepseek,
    },
    /// Moonshot's Kimi-K2 / K3 (`pat_str` of its tokenization_kimi.py, tiktoken): o200k with a
    /// first alternative for Han runs, Han out of both letter classes (class intersection), and a
    /// `[\r\n]*` tail on the punctuation alternative where o200k has `[\r\n/]*`.
    Kimi {
        names: ["kimi", "kimi-k2"],
        splits: [
            concat!(
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
            ),
        ],
        spellings: [],
        scanner: o200k::<true, 3, true>,
    },
}

impl Builtin {
    /// The canonical name: the first of its names.
    pub fn name(self) -> &'static str {
        self.def().names[0]
    }
}

/// True if `spec` has the shape of a name rather than of a regex.
pub fn looks_like_name(spec: &str) -> bool {
    !spec.is_empty() && spec.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// The built-in named `name`, if any.
pub fn by_name(name: &str) -> Option<Builtin> {
    Builtin::ALL.iter().copied().find(|b| b.def().names.contains(&name))
}

/// The error for a name-like spec that names nothing.
pub fn unknown_name(name: &str) -> String {
    let names: Vec<&str> = Builtin::ALL.iter().flat_map(|b| b.def().names).copied().collect();
    format!("unknown pattern name {name:?}; known names: {} (or give a regex)", names.join(", "))
}

/// The single-regex built-in whose regex `src` is (its source or one of its other spellings,
/// in any spelling [`normalise`] knows).
pub fn by_source(src: &str) -> Option<Builtin> {
    let src = normalise(src);
    let src = src.as_ref();
    Builtin::ALL.iter().copied().find(|b| b.def().splits == [src] || b.def().spellings.contains(&src))
}

/// The built-in a Sequence of `Isolated` splits with these regexes amounts to.
pub fn by_splits(regexes: &[&str]) -> Option<Builtin> {
    match regexes {
        [one] => by_source(one),
        _ => Builtin::ALL.iter().copied().find(|b| {
            let splits = b.def().splits;
            splits.len() == regexes.len() && regexes.iter().zip(splits).all(|(r, want)| normalise(r) == *want)
        }),
    }
}

/// `src` in the spelling of the table's sources: Oniguruma's atomic group for a possessive
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
        let ds = Builtin::DeepSeekV3.def().splits;
        for s in [r"[\x{4e00}-\x{9fa5}\x{3040}-\x{309f}\x{30a0}-\x{30ff}]+", r"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"] {
            assert_eq!(normalise(s), ds[1]);
        }
        let lit = ds[2].replace(r"\r", "\r").replace(r"\n", "\n");
        assert_eq!(by_splits(&[ds[0], ds[1], &lit]), Some(Builtin::DeepSeekV3));
        assert_eq!(normalise(r"\\x{4e00}"), r"\\x{4e00}");
        let cl100k = Builtin::Cl100k.def().splits[0];
        assert_eq!(by_source(&cl100k.replace(r"\p{N}{1,3}+", r"(?>\p{N}{1,3})")), Some(Builtin::Cl100k));
    }

    #[test]
    fn names() {
        assert!(looks_like_name("gpt4") && looks_like_name("qwen2.5") && !looks_like_name(r"\s+") && !looks_like_name("a b"));
        assert_eq!(by_name("olmo2"), Some(Builtin::Llama3));
        assert_eq!(by_name("kimi-k2"), Some(Builtin::Kimi));
        assert_eq!(by_source(Builtin::Kimi.def().splits[0]), Some(Builtin::Kimi));
        assert!(unknown_name("gpt4").contains("llama3, llama-3"));
    }

    #[test]
    fn the_table_names_each_thing_once() {
        let names: Vec<&str> = Builtin::ALL.iter().flat_map(|b| b.def().names).copied().collect();
        let sources: Vec<&str> = Builtin::ALL.iter().flat_map(|b| b.def().splits.iter().chain(b.def().spellings)).copied().collect();
        for list in [&names, &sources] {
            let mut sorted = list.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), list.len(), "{list:?}");
        }
        for &b in Builtin::ALL {
            assert!(b.def().names.iter().all(|n| looks_like_name(n)) && by_name(b.name()) == Some(b));
            assert!(b.def().spellings.is_empty() || b.def().splits.len() == 1, "{b:?}");
            assert_eq!(by_splits(b.def().splits), Some(b));
            assert!(b.def().spellings.iter().all(|s| by_source(s) == Some(b)));
        }
    }
}
