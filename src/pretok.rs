//! Pre-tokenization: splitting text into the pieces ("pre-tokens") that BPE merges never cross.
//!
//! Built-in patterns (`gpt2`/`r50k`, `cl100k`, `o200k`) and any custom regex.
//! TEMPORARY: every pattern goes through fancy-regex until the hand-written scanners land.

use fancy_regex::Regex;

pub const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
pub const CL100K_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
pub const O200K_PATTERN: &str = concat!(
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
);

/// Which splitter to use. Built-in names map to hand-written scanners; anything else is a regex.
pub enum Pattern {
    Gpt2,
    Cl100k,
    O200k,
    Custom { source: String, regex: Regex },
}

impl Pattern {
    /// `"gpt2"` (alias `"r50k"`), `"cl100k"`, `"o200k"`, or a regex string (look-around allowed).
    pub fn from_spec(spec: &str) -> Result<Pattern, String> {
        match spec {
            "gpt2" | "r50k" | "p50k" | "gpt-2" => Ok(Pattern::Gpt2),
            "cl100k" | "cl100k_base" => Ok(Pattern::Cl100k),
            "o200k" | "o200k_base" => Ok(Pattern::O200k),
            s if s == GPT2_PATTERN => Ok(Pattern::Gpt2),
            s if s == CL100K_PATTERN => Ok(Pattern::Cl100k),
            s if s == O200K_PATTERN => Ok(Pattern::O200k),
            s => {
                if s.is_empty() {
                    return Err("pattern is empty".into());
                }
                let regex = Regex::new(s).map_err(|e| format!("pattern {s:?} does not compile: {e}"))?;
                Ok(Pattern::Custom { source: s.to_string(), regex })
            }
        }
    }

    /// The regex this pattern stands for (what `regex.findall` would use).
    pub fn regex_source(&self) -> &str {
        match self {
            Pattern::Gpt2 => GPT2_PATTERN,
            Pattern::Cl100k => CL100K_PATTERN,
            Pattern::O200k => O200K_PATTERN,
            Pattern::Custom { source, .. } => source,
        }
    }

    /// True for the built-in patterns, whose pieces never span a `'\n'` followed by a
    /// non-whitespace character (so text may be cut there without changing the split).
    pub fn is_builtin(&self) -> bool {
        !matches!(self, Pattern::Custom { .. })
    }

    /// Calls `f(start, end)` with the byte range of each piece of `text`, in order.
    /// The pieces tile `text` exactly for the built-in patterns; a custom regex may skip text.
    pub fn for_each_piece(&self, text: &str, mut f: impl FnMut(usize, usize)) -> Result<(), String> {
        let re: &Regex = match self {
            Pattern::Custom { regex, .. } => regex,
            Pattern::Gpt2 => builtin(0),
            Pattern::Cl100k => builtin(1),
            Pattern::O200k => builtin(2),
        };
        for m in re.find_iter(text) {
            let m = m.map_err(|e| format!("pattern failed while matching: {e}"))?;
            if m.end() > m.start() {
                f(m.start(), m.end());
            }
        }
        Ok(())
    }
}

fn builtin(i: usize) -> &'static Regex {
    use std::sync::OnceLock;
    static RES: [OnceLock<Regex>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    RES[i].get_or_init(|| Regex::new([GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN][i]).unwrap())
}
