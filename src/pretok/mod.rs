//! Pre-tokenization: splitting text into the pieces ("pre-tokens") that BPE merges never cross.
//!
//! Built-in patterns (GPT-2's, cl100k, o200k and released models' variants; one table in
//! `spec.rs` gives each its names, regex sources, other spellings and scanner) use
//! hand-written scanners (`cl100k.rs` and `o200k.rs` are generic over the rules the variants
//! change) that produce exactly the splits of the regex as the Python `regex` module runs it;
//! any other regex goes through `regex.rs` (a DFA where provably equal, else fancy-regex).
//! Character classes come from
//! `unicode_tables.rs`, generated from the `regex` module by `scripts/gen_unicode_tables.py`.
//!
//! Each scanner has two paths over the same rules:
//! * the **window path** (`scan_windows!`, `masks.rs`): while 64 bytes remain, classify the 64
//!   bytes at the current piece start into class bitmasks (SSE2), derive every piece start of
//!   the window from shifts and ands of those masks (each scanner's `window_starts`, which
//!   states its rules), and emit pieces by popping bits. Rare shapes (a non-ASCII char the
//!   window cannot take, `" \n"` runs in cl100k/o200k, a piece longer than the window) end the
//!   window's trusted part early, and the per-char path takes over from there;
//! * the **per-char path** (`piece_end`): one piece at a time, from the first char's class.
//!
//! The per-piece serial dependency of the per-char path (load a byte, classify it, find the
//! run's end, start over) is what the window path removes: there the starts of ~12 English
//! pieces come out of ~40 independent instructions, about twice the speed
//! ([log](../../docs/performance.md#pre-tokenizer)).
//!
//! Unicode versions: the `regex` module (2026.5.9) knows newer Unicode data than the
//! regex-syntax tables inside fancy-regex 0.14: it has 4,644 more `\p{L}` code points (e.g.
//! U+A7CE, U+0C5C), 13 more `\p{N}` (U+11DE0..) and 42 more `\p{M}`, and U+0295 is `Lo` there
//! rather than `Ll`; `\s` agrees. Our tables follow the `regex` module, so for those code points
//! the built-in scanners and a `Custom` regex with the same source can split differently.

/// The block loop shared by the scanners (a macro rather than a generic function taking
/// closures: with `piece_end` behind a closure the per-char fallback ran ~10% slower on the
/// multilingual corpus). While 64 bytes remain: classify the window at the current piece start
/// `i` (non-ASCII chars as far as `$non_ascii` allows), get its piece starts from `$starts(b, i, &masks, lim)` (the starts and a possibly lower
/// trust limit), emit every piece that ends before the limit, and continue at the last start
/// found. Where a window gives nothing (a non-ASCII char right at `i`, or one piece longer than
/// the window), the per-char path `$piece_end(b, i, &mut $blk)` takes over, for one piece or
/// up to the window's last non-ASCII byte. Then the per-char path finishes the text.
macro_rules! scan_windows {
    ($b:expr, $f:expr, $lookahead:expr, $non_ascii:expr, $starts:expr, $piece_end:expr, $blk:ident) => {{
        use $crate::pretok::masks::{add_non_ascii, classify, trusted};
        let b: &[u8] = $b;
        let n = b.len();
        let mut i = 0;
        while i + 64 <= n {
            let mut m = classify(b, i);
            if m.high != 0 {
                add_non_ascii(b, i, &mut m, $non_ascii);
            }
            let lim = trusted(&m, $lookahead);
            let (st, lim) = if lim >= 2 { $starts(b, i, &m, lim) } else { (0, lim) };
            if lim < 2 {
                let stop = (i + 64 - m.high.leading_zeros() as usize).max(i + 1);
                while i < stop {
                    let end = $piece_end(b, i, &mut $blk);
                    $f.piece(i, end);
                    i = end;
                }
                continue;
            }
            let bits = st & ((1u64 << lim) - 1) & !1;
            if bits == 0 {
                let end = $piece_end(b, i, &mut $blk);
                $f.piece(i, end);
                i = end;
                continue;
            }
            i = $f.window(i, i, bits);
        }
        while i < n {
            let end = $piece_end(b, i, &mut $blk);
            debug_assert!(end > i && end <= n);
            $f.piece(i, end);
            i = end;
        }
    }};
}

mod chars;

pub use chars::{L, N, WS};

/// The class bits ([`L`], [`N`], [`WS`], ...) of one char, as the scanners see it.
pub fn char_class(c: char) -> u8 {
    let mut buf = [0u8; 4];
    chars::class_at(c.encode_utf8(&mut buf).as_bytes(), 0).0
}
mod cl100k;
mod deepseek;
mod dfa;
mod gpt2;
mod masks;
pub use masks::eq_mask;
mod o200k;

mod onig;
pub use onig::from_oniguruma;
mod regex;
pub use regex::Regex;
pub mod spec;
pub mod spans;
pub use spec::Builtin;

/// Receives the pieces of a text (`start, end` byte ranges, in order). Any `FnMut(usize,
/// usize)` is one; the encoder implements it on its piece queue with `#[inline(always)]`,
/// because a closure was left out of line by the compiler (it is called from four places:
/// three scanners and the regex loop), which cost a call and a register save/restore per
/// piece.
// Each scanner (gpt2.rs, cl100k.rs, o200k.rs) keeps its own 10-line `scan` loop around its
// `piece_end`: one shared generic driver taking `piece_end` as a parameter measured ~20% slower
// (English, one thread: gpt2 1,045 -> 840 MB/s), so the repetition is deliberate.
pub trait PieceSink {
    fn piece(&mut self, start: usize, end: usize);

    /// The pieces of one window: a piece starts at `base + j` for every set bit `j` of
    /// `starts` (`starts != 0`); the first piece starts at `cur`. Emits every piece that ends at
    /// one of those starts and returns the last start (its piece is not emitted: it goes on
    /// past the window). A sink may override this to handle a window's pieces in one loop.
    #[inline(always)]
    fn window(&mut self, base: usize, mut cur: usize, mut starts: u64) -> usize {
        while starts != 0 {
            let s = base + starts.trailing_zeros() as usize;
            self.piece(cur, s);
            cur = s;
            starts &= starts - 1;
        }
        cur
    }
}

impl<F: FnMut(usize, usize)> PieceSink for F {
    #[inline(always)]
    fn piece(&mut self, start: usize, end: usize) {
        self(start, end)
    }
}

/// The scanners (and, inlined into them, the sink's per-piece work: the encoder's packing,
/// hashing and queueing) compiled a second time for x86-64-v3 (AVX2, BMI1/2, LZCNT, POPCNT),
/// chosen at run time: the package is built for baseline x86-64, where every SSE2 operation
/// overwrites one of its operands (so the window classification is full of register copies),
/// a variable shift must go through `cl`, and `leading_zeros` is `bsr` plus a fix-up.
#[cfg(target_arch = "x86_64")]
mod v3 {
    use super::{cl100k, deepseek, gpt2, o200k, PieceSink};

    /// Whether this CPU has the features below (`is_x86_feature_detected!` caches the answer).
    #[inline]
    pub fn available() -> bool {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("bmi1")
            && std::is_x86_feature_detected!("bmi2")
            && std::is_x86_feature_detected!("lzcnt")
            && std::is_x86_feature_detected!("popcnt")
    }

    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    pub unsafe fn gpt2(text: &str, f: &mut impl PieceSink) {
        gpt2::scan(text, f)
    }

    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    pub unsafe fn cl100k<const D: usize, const E: bool, const M: bool>(text: &str, f: &mut impl PieceSink) {
        cl100k::scan::<D, E, M>(text, f)
    }

    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    pub unsafe fn o200k<const C: bool, const D: usize, const H: bool>(text: &str, f: &mut impl PieceSink) {
        o200k::scan::<C, D, H>(text, f)
    }

    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    pub unsafe fn deepseek(text: &str, f: &mut impl PieceSink) {
        deepseek::scan(text, f)
    }
}

/// Which splitter to use: a built-in pattern's hand-written scanner, a superword span pattern
/// (`spans.rs`: gpt2's scanner, its pieces grouped, up to `max` words), or any other regex.
#[derive(Clone)]
pub enum Pattern {
    Builtin(Builtin),
    Spans { source: String, max: usize },
    Custom { source: String, regex: Regex },
}

impl Pattern {
    /// A built-in's name (any of those in `spec.rs`, e.g. `"gpt2"`, `"cl100k"`, `"llama3"`), the
    /// regex source of one of them (as tiktoken or a tokenizer.json writes it), or any regex
    /// (look-around allowed). A spec made only of `[A-Za-z0-9_.-]` that is no known name is an
    /// error.
    pub fn from_spec(spec: &str) -> Result<Pattern, String> {
        if spec.is_empty() {
            return Err("pattern is empty".into());
        }
        if let Some(b) = spec::by_name(spec).or_else(|| spec::by_source(spec)) {
            return Ok(Pattern::Builtin(b));
        }
        if spec::looks_like_name(spec) {
            return Err(spec::unknown_name(spec));
        }
        Pattern::regex(spec)
    }

    /// A pattern that is no built-in's spelling: a span pattern's scanner, else the regex.
    pub fn regex(source: &str) -> Result<Pattern, String> {
        match Pattern::spans(source) {
            Some(p) => Ok(p),
            None => Ok(Pattern::Custom { source: source.to_string(), regex: Regex::new(source)? }),
        }
    }

    /// The scanner of a superword span pattern spelled as `spans.rs` spells them, or `None`.
    pub fn spans(source: &str) -> Option<Pattern> {
        spans::span_of(source).map(|(_, max)| Pattern::Spans { source: source.to_string(), max })
    }

    /// The scanner for a Sequence of `Isolated` Splits with these regexes (one built-in's
    /// source, or DeepSeek-V3's three), or `None` (then the splits need the general pipeline).
    pub fn from_splits(regexes: &[&str]) -> Option<Pattern> {
        spec::by_splits(regexes).map(Pattern::Builtin)
    }

    /// The name of a built-in pattern (None for a custom regex).
    pub fn spec_name(&self) -> Option<&'static str> {
        self.name()
    }

    /// The regex this pattern stands for (what `regex.findall` would use). For DeepSeek-V3,
    /// whose split is three regexes applied in sequence, it is the first (`\p{N}{1,3}`):
    /// no single regex has its splits, so callers that rebuild the split use
    /// [`Pattern::split_sources`].
    pub fn regex_source(&self) -> &str {
        self.split_sources()[0]
    }

    /// The regexes of the Sequence of `Isolated` splits this pattern stands for, in order (one
    /// for all but DeepSeek-V3).
    pub fn split_sources(&self) -> Vec<&str> {
        match self {
            Pattern::Builtin(b) => b.def().splits.to_vec(),
            Pattern::Spans { source, .. } | Pattern::Custom { source, .. } => vec![source],
        }
    }

    /// The canonical name of a built-in pattern (`None` for a custom regex).
    pub fn name(&self) -> Option<&'static str> {
        match self {
            Pattern::Builtin(b) => Some(b.name()),
            Pattern::Spans { .. } | Pattern::Custom { .. } => None,
        }
    }

    /// True for the built-in patterns, whose pieces never span a `'\n'` followed by a
    /// non-whitespace character other than `'/'` (so text may be cut there without changing
    /// the split). The `'/'` exception is o200k's `[\r\n/]*` tail: `";\n//"` is one piece
    /// (Nemotron's too; Kimi's tail is `[\r\n]*`).
    pub fn is_builtin(&self) -> bool {
        matches!(self, Pattern::Builtin(_))
    }

    /// Where text may be cut without changing its pieces: a built-in's safe cuts, a superword
    /// span pattern's cuts at lines (`spans`), or none (another regex: `None`).
    pub fn cut_rule(&self) -> Option<crate::corpus::cuts::Rule> {
        match self {
            Pattern::Builtin(_) => Some(crate::corpus::cuts::Rule::Safe),
            Pattern::Spans { .. } => Some(crate::corpus::cuts::Rule::Lines),
            Pattern::Custom { .. } => None,
        }
    }

    /// [`Self::for_each_piece`] for callers off the hot paths: they all share one compiled copy
    /// of every scanner (each sink type gets a copy of all of them, in two instruction sets,
    /// which is most of the crate's build time; see docs/performance.md#build-time).
    pub fn for_each_piece_dyn(&self, text: &str, f: &mut dyn FnMut(usize, usize)) -> Result<(), String> {
        self.for_each_piece(text, f)
    }

    /// Calls `f(start, end)` with the byte range of each piece of `text`, in order.
    /// The pieces tile `text` exactly: with a custom regex, the text between two matches is a
    /// piece too.
    pub fn for_each_piece(&self, text: &str, mut f: impl PieceSink) -> Result<(), String> {
        match self {
            Pattern::Builtin(b) => {
                b.scan(text, &mut f);
                Ok(())
            }
            Pattern::Spans { max, .. } => {
                spans::scan(text, *max, &mut f);
                Ok(())
            }
            Pattern::Custom { regex, .. } => regex.for_each_piece(text, &mut f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(p: &str, text: &str) -> Vec<String> {
        let p = Pattern::from_spec(p).unwrap();
        let mut v = Vec::new();
        p.for_each_piece(text, |s, e| v.push(text[s..e].to_string())).unwrap();
        v
    }

    /// The canonical name of every built-in.
    fn all() -> impl Iterator<Item = &'static str> {
        Builtin::ALL.iter().map(|b| b.name())
    }

    #[test]
    fn model_variants_exact() {
        assert_eq!(split("llama3", "a \n "), ["a", " \n", " "]);
        assert_eq!(split("cl100k", "a \n "), ["a", " \n "]);
        assert_eq!(split("qwen2", "x 12345"), ["x", " ", "1", "2", "3", "4", "5"]);
        assert_eq!(split("qwen3.5", "e\u{301}t\u{e9} \u{301}x"), ["e\u{301}t\u{e9}", " \u{301}x"]);
        assert_eq!(split("nemotron", "HTTPServer isn'T 12"), ["HTTPServer", " isn", "'T", " ", "1", "2"]);
        assert_eq!(
            split("deepseek-v3", "Hello, WORLD!! it's 12345 日本語ですx a  1\u{0}"),
            ["Hello", ",", " WORLD", "!!", " it", "'s", " ", "123", "45", " ", "日本語です", "x", " a", "  ", "1", "\u{0}"]
        );
        assert_eq!(
            split("kimi", "HTTPServer isn'T 日本語 x中文y 1〇 !⺀ x⺀! a/b//\n\r\n x"),
            ["HTTPServer", " isn'T", " ", "日本語", " x", "中文", "y", " ", "1〇", " !⺀", " x", "⺀", "!", " a", "/b", "//\n\r\n", " x"]
        );
        assert_eq!(split("kimi", ";\n//x"), [";\n", "//", "x"]);
    }

    #[test]
    fn unknown_names_fail_and_regexes_still_work() {
        let e = Pattern::from_spec("gpt4").err().unwrap();
        assert!(e.contains("unknown pattern name") && e.contains("llama3"), "{e}");
        assert!(Pattern::from_spec(r"\w+|\s").is_ok());
        assert!(matches!(Pattern::from_spec(Builtin::Llama3.def().splits[0]), Ok(Pattern::Builtin(Builtin::Llama3))));
        let ds: Vec<&str> = Builtin::DeepSeekV3.def().splits.to_vec();
        assert!(matches!(Pattern::from_splits(&ds), Some(Pattern::Builtin(Builtin::DeepSeekV3))));
        assert_eq!(Pattern::Builtin(Builtin::DeepSeekV3).split_sources(), ds);
        assert!(Pattern::from_splits(&ds[..2]).is_none());
    }

    #[test]
    fn gpt2_exact() {
        assert_eq!(
            split("gpt2", "Hello world's  end\n\n  x 123 ?! 'LL "),
            ["Hello", " world", "'s", " ", " end", "\n\n ", " x", " 123", " ?!", " '", "LL", " "]
        );
        assert_eq!(split("gpt2", ""), Vec::<String>::new());
    }

    #[test]
    fn cl100k_exact() {
        assert_eq!(
            split("cl100k", "I'LL pay 12345 $ \tfoo\n\n  bar  "),
            ["I", "'LL", " pay", " ", "123", "45", " $", " ", "\tfoo", "\n\n", " ", " bar", "  "]
        );
        assert_eq!(split("cl100k", "x'\u{17f}"), ["x", "'\u{17f}"]);
    }

    #[test]
    fn o200k_exact() {
        assert_eq!(
            split("o200k", "HTTPServer isn'T 日本語 \u{301}'s a/b//\n\r\n x"),
            ["HTTPServer", " isn'T", " 日本語", " \u{301}'s", " a", "/b", "//\n\r\n", " x"]
        );
    }

    #[test]
    fn window_reads_stay_inside_the_text() {
        // Texts ending right at a window's end with an apostrophe or a start of a contraction:
        // the window path must not look past the end (`at` asserts it in debug builds).
        for p in all() {
            for tail in ["'", "a'", "a'r", "'l", "a's", " '", "\r\n", " \n", "1234", "\u{e9}'"] {
                for n in 60..140usize {
                    let t = "a".repeat(n.saturating_sub(tail.len())) + tail;
                    assert_eq!(split(p, &t).concat(), t);
                }
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn v3_copies_split_like_the_baseline() {
        if !v3::available() {
            return;
        }
        // Random runs of the classes the scanners tell apart, so at many offsets of a window.
        let parts = [
            "a", "Zebra", " the", "  ", "\n", "\r\n", " \n ", "'s", "'LL", "'re", "12345", "\u{e9}t\u{e9}",
            "\u{65e5}\u{672c}", " \u{201c}", "\u{2014}", "\u{301}", "\u{17f}", "\u{3000}", "\u{85}", ";\n//", "/",
            "\u{1f600}\u{200d}\u{1f600}", "\t", "HTTPServer", "camelCase", "x'", ".,!?", "\u{4e2d}\u{6587}", "\u{2e80}",
            "\u{3007}", "\u{16ff0}",
        ];
        let mut seed = 9u64;
        for _ in 0..3000 {
            let mut t = String::new();
            for _ in 0..(seed % 60 + 1) {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                t.push_str(parts[(seed >> 33) as usize % parts.len()]);
            }
            fn run(t: &str, scan: impl Fn(&str, &mut dyn FnMut(usize, usize))) -> Vec<(usize, usize)> {
                let mut v = Vec::new();
                scan(t, &mut |s, e| v.push((s, e)));
                v
            }
            for &p in Builtin::ALL {
                // SAFETY: `v3::available()` was checked above.
                assert_eq!(run(&t, |t, f| p.scan_baseline(t, &mut &mut *f)), run(&t, |t, f| unsafe { p.scan_v3(t, &mut &mut *f) }), "{p:?} {t:?}");
            }
        }
    }

    #[test]
    fn never_panics_on_odd_inputs() {
        for p in all() {
            for t in ["", " ", "\n", "'", "\u{301}", "a", "\r\n \u{3000}", "😀\u{200d}😀", "'\u{17f}"] {
                let pieces = split(p, t);
                assert_eq!(pieces.concat(), t);
            }
            let big = "a".repeat(100_000);
            assert_eq!(split(p, &big).len(), 1);
        }
    }
}
