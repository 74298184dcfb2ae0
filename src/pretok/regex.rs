//! The regex engine behind every pattern that no hand-written scanner covers: a `pattern=`
//! regex, and the `Split` steps of an imported `tokenizer.json`. Semantics are those of the
//! Python `regex` module for the patterns tokenizers use: leftmost-first alternation, greedy
//! and possessive quantifiers, look-around, `\p{..}` classes, `$` = end of text or before a
//! final `"\n"`; an empty match advances the search by one char.
//!
//! Two engines, chosen per regex when it is compiled ([log](../../docs/performance.md#custom-regex-engine)):
//! * **DFA** (`dfa.rs`: regex-automata's dense DFA, one pattern per top-level branch, run in
//!   one pass over flat tables). A DFA has no
//!   look-around and no possessive quantifiers, so a regex takes this path only when `lower`
//!   can prove the DFA's leftmost-first match equal to the backtracker's:
//!   - a possessive / atomic repetition of one char class counts as greedy when nothing that
//!     may follow it in its branch can start with a char of that class (then backtracking into
//!     it can never succeed);
//!   - `$` only right after an unbounded repetition of a class holding `"\n"` at the end of a
//!     branch, where it means end of text (`\z`);
//!   - the idiom branch `\s+(?!\S)` is searched as `\s+` and fixed up: a run followed by a
//!     non-space gives its last char back, and a one-char run fails over to the later
//!     branches at the same position (each has its own anchored start state);
//!   - no branch may match the empty string, so every match is non-empty.
//! * **fancy-regex** (backtracking) for everything else (look-behind, other look-ahead,
//!   back-references, nullable branches, DFA too large), with `$` rewritten to `(?=\n?\z)`.
//!
//! Both use regex-syntax's Unicode tables (as tiktoken does), which are older than the `regex`
//! module's: code points assigned in Unicode 17 may be classed differently (see the
//! Unicode-version note in `pretok/mod.rs`); `tests/test_custom_regex.py` detects them.
//! `Regex` is `Send + Sync`: the DFA is read-only, matching needs no per-thread state.

use fancy_regex::{Assertion, Expr, LookAround};
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look, LookSet};

use super::dfa::Fast;
use super::PieceSink;

/// A compiled regex, shared by all threads; a clone shares the compiled engine.
#[derive(Clone)]
pub struct Regex {
    source: String,
    engine: std::sync::Arc<Engine>,
    /// Whether some match may be empty (look-arounds, nullable repeats; conservative).
    may_be_empty: bool,
}

/// Compiled regexes kept for [`Regex::new`].
const RECENT: usize = 8;

enum Engine {
    Dfa(Box<Fast>),
    Fancy(fancy_regex::Regex),
}

impl Regex {
    /// Compiles `source`, or shares the engine compiled last time (the last [`RECENT`] regexes
    /// are kept: building a DFA can take tens of milliseconds, and a tokenizer's pattern is
    /// compiled again each time one is built); the error names the pattern.
    pub fn new(source: &str) -> Result<Regex, String> {
        use std::sync::{Mutex, MutexGuard, TryLockError};
        static LAST: Mutex<Vec<Regex>> = Mutex::new(Vec::new());
        // Never waits for the lock (a child forked while another thread held it would wait
        // forever): busy, the regex is compiled afresh and not kept.
        let kept = || -> Option<MutexGuard<'static, Vec<Regex>>> {
            match LAST.try_lock() {
                Ok(g) => Some(g),
                Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            }
        };
        if let Some(mut last) = kept() {
            if let Some(i) = last.iter().position(|r| r.source == source) {
                let hit = last.remove(i);
                last.push(hit.clone());
                return Ok(hit);
            }
        }
        let re = Self::compile(source)?;
        if let Some(mut last) = kept() {
            if last.len() >= RECENT {
                last.remove(0);
            }
            last.push(re.clone());
        }
        Ok(re)
    }

    fn compile(source: &str) -> Result<Regex, String> {
        let tree = Expr::parse_tree(source).map_err(|e| format!("pattern {source:?} does not compile: {e}"))?;
        let may_be_empty = nullable(&tree.expr);
        if let Some(fast) = dfa_for(&tree.expr) {
            return Ok(Regex { source: source.to_string(), engine: std::sync::Arc::new(Engine::Dfa(Box::new(fast))), may_be_empty });
        }
        let re = fancy_regex::Regex::new(&python_dollar(source))
            .map_err(|e| format!("pattern {source:?} does not compile: {e}"))?;
        Ok(Regex { source: source.to_string(), engine: std::sync::Arc::new(Engine::Fancy(re)), may_be_empty })
    }

    /// Whether a match may be empty (then the text between matches is not a run of chars at
    /// none of which the regex matches).
    pub fn may_be_empty(&self) -> bool {
        self.may_be_empty
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Which engine runs this regex (`"dfa"` or `"fancy-regex"`), for tests and benchmarks.
    pub fn engine(&self) -> &'static str {
        match *self.engine {
            Engine::Dfa(_) => "dfa",
            Engine::Fancy(_) => "fancy-regex",
        }
    }

    /// The pieces of `text`: every match, and the text between two matches as a piece of its
    /// own (as `tokenizers`' Split with `behavior="isolated"`, which is what a saved
    /// tokenizer.json says), so that the pieces tile the text.
    pub fn for_each_piece(&self, text: &str, f: &mut impl PieceSink) -> Result<(), String> {
        if let Engine::Dfa(fast) = &*self.engine {
            fast.for_each_piece(text.as_bytes(), f);
            return Ok(());
        }
        let mut last = 0;
        self.for_each_match(text, |s, e| {
            if s > last {
                f.piece(last, s);
            }
            if e > s {
                f.piece(s, e);
            }
            last = e;
        })?;
        if last < text.len() {
            f.piece(last, text.len());
        }
        Ok(())
    }

    /// Calls `f(start, end)` for each match, left to right, non-overlapping (empty ones too).
    pub fn for_each_match(&self, text: &str, mut f: impl FnMut(usize, usize)) -> Result<(), String> {
        match &*self.engine {
            Engine::Dfa(fast) => {
                fast.for_each_match(text.as_bytes(), f);
                Ok(())
            }
            Engine::Fancy(re) => {
                for m in re.find_iter(text) {
                    let m = m.map_err(|e| format!("pattern {:?} failed while matching: {e}", self.source))?;
                    f(m.start(), m.end());
                }
                Ok(())
            }
        }
    }
}

/// The DFA for `expr` if every branch lowers to a DFA-equivalent regex (see the module doc).
pub(super) fn dfa_for(expr: &Expr) -> Option<Fast> {
    let branches: Vec<&Expr> = match expr {
        Expr::Alt(v) => v.iter().collect(),
        e => vec![e],
    };
    let mut sources = Vec::with_capacity(branches.len());
    let mut lookahead = None;
    for (i, b) in branches.iter().enumerate() {
        if is_space_run_not_before_non_space(b) {
            if lookahead.is_some() {
                return None;
            }
            lookahead = Some(i);
            sources.push(r"\s+".to_string());
        } else {
            sources.push(lower(b)?);
        }
    }
    for s in &sources {
        let hir = regex_syntax::Parser::new().parse(s).ok()?;
        // Non-empty matches only (the empty-match rules stay with the backtracker), and no
        // look assertion but the end of text, so one start state serves every position.
        let looks = hir.properties().look_set().subtract(LookSet::singleton(Look::End));
        if hir.properties().minimum_len().is_none_or(|n| n == 0) || !looks.is_empty() {
            return None;
        }
    }
    Fast::build(&sources, lookahead)
}

/// Whether `e` is `\s+(?!\S)`: a greedy run of `\s` not followed by a non-space.
fn is_space_run_not_before_non_space(e: &Expr) -> bool {
    let Expr::Concat(v) = e else { return false };
    let [Expr::Repeat { child, lo: 1, hi: usize::MAX, greedy: true }, Expr::LookAround(not, LookAround::LookAheadNeg)] =
        &v[..]
    else {
        return false;
    };
    let space = class_of_str(r"\s");
    matches!((class_of(child), class_of(not), space), (Some(c), Some(n), Some(s)) if c == s && n == negated(&s))
}

/// `e` as a regex-syntax regex with the same leftmost-first matches, or `None` (see the module
/// doc for what is accepted).
fn lower(e: &Expr) -> Option<String> {
    let items: Vec<&Expr> = match e {
        Expr::Concat(v) => v.iter().collect(),
        e => vec![e],
    };
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            Expr::AtomicGroup(inner) => {
                let Expr::Repeat { child, greedy: true, .. } = &**inner else { return None };
                let x = class_of(child)?;
                if !follow_disjoint(&items[i + 1..], &x)? {
                    return None;
                }
                inner.to_str(&mut out, 2);
            }
            Expr::Assertion(Assertion::EndText) => {
                // Python's `$` is `(?=\n?\z)`; right after an unbounded repetition of a class
                // holding "\n", a match ending before a final "\n" would have taken it.
                let prev = match i.checked_sub(1).map(|k| items[k]) {
                    Some(Expr::AtomicGroup(r)) => &**r,
                    Some(r) => r,
                    None => return None,
                };
                let Expr::Repeat { child, hi: usize::MAX, greedy: true, .. } = prev else { return None };
                let nl = class_of_str("\n")?;
                if i + 1 != items.len() || class_of(child)?.ranges().iter().all(|r| !has(r, &nl)) {
                    return None;
                }
                out.push_str(r"\z");
            }
            other if plain(other) => other.to_str(&mut out, 2),
            _ => return None,
        }
    }
    Some(out)
}

fn has(r: &ClassUnicodeRange, c: &ClassUnicode) -> bool {
    c.ranges().iter().any(|x| x.start() >= r.start() && x.end() <= r.end())
}

/// Whether nothing in `rest` (what follows a possessive repetition of `x` in its branch) can
/// begin with a char of `x`. `None` when `rest` holds something this analysis does not know.
fn follow_disjoint(rest: &[&Expr], x: &ClassUnicode) -> Option<bool> {
    for e in rest {
        let (first, nullable) = match e {
            Expr::Assertion(Assertion::EndText) => continue,
            Expr::Repeat { child, lo, .. } => (class_of(child)?, *lo == 0),
            Expr::AtomicGroup(inner) => match &**inner {
                Expr::Repeat { child, lo, .. } => (class_of(child)?, *lo == 0),
                _ => return None,
            },
            Expr::Literal { val, casei } => {
                let c = val.chars().next()?;
                let mut s = String::new();
                Expr::Literal { val: c.to_string(), casei: *casei }.to_str(&mut s, 3);
                (class_of_str(&s)?, false)
            }
            e => (class_of(e)?, false),
        };
        let mut both = first.clone();
        both.intersect(x);
        if !both.ranges().is_empty() {
            return Some(false);
        }
        if !nullable {
            break;
        }
    }
    Some(true)
}

/// Whether `e` needs nothing a DFA lacks (no look-around, atomic groups, back-references, ...).
fn plain(e: &Expr) -> bool {
    match e {
        Expr::Empty | Expr::Any { .. } | Expr::Literal { .. } | Expr::Delegate { .. } => true,
        Expr::Concat(v) | Expr::Alt(v) => v.iter().all(plain),
        Expr::Group(c) => plain(c),
        Expr::Repeat { child, .. } => plain(child),
        _ => false,
    }
}

/// The chars a one-char expression matches, or `None` if it is not one.
fn class_of(e: &Expr) -> Option<ClassUnicode> {
    match e {
        Expr::Delegate { .. } | Expr::Literal { .. } | Expr::Any { .. } => {
            let mut s = String::new();
            e.to_str(&mut s, 3);
            class_of_str(&s)
        }
        _ => None,
    }
}

fn class_of_str(s: &str) -> Option<ClassUnicode> {
    let hir: Hir = regex_syntax::Parser::new().parse(s).ok()?;
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => Some(c.clone()),
        HirKind::Literal(l) => {
            let s = std::str::from_utf8(&l.0).ok()?;
            let mut it = s.chars();
            let c = it.next()?;
            it.next().is_none().then(|| ClassUnicode::new([ClassUnicodeRange::new(c, c)]))
        }
        _ => None,
    }
}

fn negated(c: &ClassUnicode) -> ClassUnicode {
    let mut n = c.clone();
    n.negate();
    n
}

/// Whether `e` may match the empty string (conservative: look-arounds and back-references may).
fn nullable(e: &Expr) -> bool {
    match e {
        Expr::Any { .. } => false,
        Expr::Literal { val, .. } => val.is_empty(),
        Expr::Delegate { size, .. } => *size == 0,
        Expr::Concat(v) => v.iter().all(nullable),
        Expr::Alt(v) => v.iter().any(nullable),
        Expr::Group(c) | Expr::AtomicGroup(c) => nullable(c),
        Expr::Repeat { child, lo, .. } => *lo == 0 || nullable(child),
        _ => true,
    }
}

/// `source` with each `$` outside a class replaced by `(?=\n?\z)`, Python's `$` without
/// MULTILINE (fancy-regex's `$` is the end of text only). Classes nest (`[a[b]$]`).
fn python_dollar(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let (mut depth, mut escaped) = (0usize, false);
    let mut prev_open = false;
    for c in source.chars() {
        let was_open = std::mem::take(&mut prev_open);
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if depth > 0 {
            // `]` right after `[` or `[^` is a literal.
            if c == ']' && !was_open {
                depth -= 1;
            } else if c == '^' && was_open && out.ends_with('[') {
                prev_open = true;
            } else if c == '[' {
                depth += 1;
                prev_open = true;
            }
        } else if c == '[' {
            depth = 1;
            prev_open = true;
        } else if c == '$' {
            out.push_str(r"(?=\n?\z)");
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(re: &str, text: &str) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        Regex::new(re).unwrap().for_each_match(text, |s, e| v.push((s, e))).unwrap();
        v
    }

    fn strs(re: &str, text: &str) -> Vec<String> {
        spans(re, text).into_iter().map(|(s, e)| text[s..e].to_string()).collect()
    }

    fn engine(re: &str) -> &'static str {
        Regex::new(re).unwrap().engine()
    }

    const GPT2_N12: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}{1,2}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
    const CL100K: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

    #[test]
    fn tokenizer_regexes_take_the_dfa() {
        assert_eq!(engine(GPT2_N12), "dfa");
        assert_eq!(engine(CL100K), "dfa");
        assert_eq!(engine(&format!("(?:{CL100K})")), "dfa");
        assert_eq!(engine(r"[一-龥぀-ゟ゠-ヿ]+|\p{N}{1,3}|\s+"), "dfa");
    }

    #[test]
    fn space_run_look_ahead() {
        let t = "a  b\n\n c \n";
        assert_eq!(strs(GPT2_N12, t), ["a", " ", " b", "\n\n", " c", " \n"]);
        // A one-char run before a non-space fails over to the later branches.
        assert_eq!(strs(GPT2_N12, "\nx\t\t"), ["\n", "x", "\t\t"]);
        assert_eq!(strs(r"\s+(?!\S)|x", " x"), ["x"]);
        assert_eq!(strs("x|\\s+(?!\\S)|\\s", "  \u{3000}x  "), ["  ", "\u{3000}", "x", "  "]);
    }

    #[test]
    fn possessive_and_atomic() {
        // Disjoint follow: the DFA takes it, same splits as greedy.
        assert_eq!(strs(CL100K, "I'LL pay 12345 $ \tfoo\n\n  bar  "),
            ["I", "'LL", " pay", " ", "123", "45", " $", " ", "\tfoo", "\n\n", " ", " bar", "  "]);
        // Possessive that a greedy run would give back: the backtracker keeps it.
        assert_eq!(engine(r"a++a|b"), "fancy-regex");
        assert_eq!(strs(r"a++a|b", "aaab"), ["b"]);
        assert_eq!(strs(r"(?>a+)a|a", "aa"), ["a", "a"]);
        assert_eq!(engine(r"\p{L}++\p{N}"), "dfa");
    }

    #[test]
    fn dollar_is_end_or_before_final_newline() {
        assert_eq!(engine(r"\s++$|\S+"), "dfa");
        assert_eq!(strs(r"\s++$|\S+|\s", "a  \n"), ["a", "  \n"]);
        assert_eq!(strs(r"\s+$|\S+|\s", "a \nb"), ["a", " ", "\n", "b"]);
        // `$` anywhere else: the backtracker, with Python's meaning.
        assert_eq!(engine(r"\w+$"), "fancy-regex");
        assert_eq!(strs(r"\w+$", "ab\n"), ["ab"]);
        assert_eq!(strs(r"\w+$", "ab\n\n"), Vec::<String>::new());
        assert_eq!(strs(r"[$]|x$", "$x"), ["$", "x"]);
    }

    #[test]
    fn empty_matches_and_fallbacks() {
        assert_eq!(engine(r"a*"), "fancy-regex");
        assert_eq!(spans(r"a*", "ab"), [(0, 1), (2, 2)]);
        assert_eq!(engine(r"(?<=a)b"), "fancy-regex");
        assert_eq!(strs(r"(?<=a)b", "abcb"), ["b"]);
        assert_eq!(engine(r"\w+(?=!)"), "fancy-regex");
        assert_eq!(strs(r"\w+(?=!)|\S", "hey! x"), ["hey", "!", "x"]);
        assert_eq!(engine(r"\bx"), "fancy-regex");
        assert!(Regex::new("(").err().unwrap().contains("\"(\""));
    }

    #[test]
    fn case_insensitive_contractions() {
        let re = r"'(?i:[sdmt]|ll|ve|re)|\p{L}+|\s+|.";
        assert_eq!(engine(re), "dfa");
        assert_eq!(strs(re, "I'M it'S we'Re x'\u{17f}"), ["I", "'M", " ", "it", "'S", " ", "we", "'Re", " ", "x", "'\u{17f}"]);
    }

    #[test]
    fn gaps_and_multibyte() {
        // No match at a position: the search moves on by one char.
        assert_eq!(spans(r"[一-龥]+", "ab日本c"), [(2, 8)]);
        assert_eq!(strs(r"\p{N}{1,3}", "x1234é5"), ["123", "4", "5"]);
    }

    #[test]
    fn is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Regex>();
    }
}
