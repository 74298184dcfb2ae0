//! The regex engine behind every pattern that no hand-written scanner covers: a `pattern=`
//! regex, and the `Split` steps of an imported `tokenizer.json`. Semantics are those of the
//! Python `regex` module for the patterns tokenizers use: leftmost-first alternation, greedy
//! and possessive quantifiers, look-around, `\p{..}` classes, `$` = end of text or before a
//! final `"\n"`; an empty match advances the search by one char.
//!
//! Two engines, chosen per regex when it is compiled ([log](../../docs/performance.md#custom-regex-engine)):
//! * **DFA** (regex-automata, a dense DFA with one pattern per top-level branch), copied into
//!   flat tables (`Table`) so that one pass over the text with one load per byte finds the piece
//!   ends that need no look back; the rest goes through one anchored run per match. A DFA has no
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
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::{primitives::StateID, start};
use regex_automata::{Anchored, MatchKind, PatternID};
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look, LookSet};

/// Dense DFA size limits: past them a regex goes to fancy-regex (building stays well under 1 s).
const DFA_LIMIT: usize = 64 << 20;

/// A compiled regex, shared by all threads.
pub struct Regex {
    source: String,
    engine: Engine,
}

enum Engine {
    Dfa(Box<Fast>),
    Fancy(fancy_regex::Regex),
}

/// The DFA path: one pattern per top-level branch, leftmost-first across them.
struct Fast {
    table: Table,
    /// Anchored start state over all branches.
    start: u32,
    /// The branch that is `\s+(?!\S)` (searched as `\s+`), and the anchored start states of the
    /// branches after it, tried in order when its fix-up fails.
    lookahead: Option<(u32, Vec<u32>)>,
}

/// The DFA's states as flat transition tables, walked with a single load per byte. Entry
/// `state + class[byte]` of `next` holds the next state (premultiplied by the row length)
/// shifted left by one, with bit 0 set when that state is a match state; 0 is the dead state.
/// A DFA match is reported one byte late (the state after byte `i` says whether `b[p..i]`
/// matched), so the match flag of the state entered on byte `i` marks a match ending at `i`.
///
/// `fused` runs the whole text in one pass: where `next` enters a *final* state (a match state
/// every byte leads out of to the dead state, so the match ends at `i` whatever follows), it
/// holds the start state's entry for the same byte instead, flagged `END` (a piece ends at `i`
/// and byte `i` begins the next). Entries that need the exact per-match walk (`run`) are
/// `SLOW`: the dead state; a final state of the `\s+(?!\S)` branch is `SLOW | END` (the space
/// run ends at `i`, before a non-space: it gives its last char back).
struct Table {
    class: [u8; 256],
    next: Vec<u32>,
    fused: Vec<u32>,
    /// Per state index: the branch of a match state (`u32::MAX` for none), and the branch that
    /// matches when the text ends in that state.
    branch: Vec<u32>,
    eoi: Vec<u32>,
    shift: u32,
}

const END: u32 = 1;
const SLOW: u32 = 2;

impl Table {
    /// Copies the states reachable from `starts` (the first is the start of a piece); `None`
    /// if the DFA has a quit state or is too large to index with 30 bits.
    fn new(dfa: &dense::DFA<Vec<u32>>, starts: &[StateID], lookahead: Option<u32>) -> Option<(Table, Vec<u32>)> {
        let bc = dfa.byte_classes();
        let mut class = [0u8; 256];
        for b in 0..=255u8 {
            class[b as usize] = bc.get(b);
        }
        // Rows are a power of two long, so a state's index is a shift away.
        let shift = (class.iter().map(|&c| c as usize).max().unwrap_or(0) + 1).next_power_of_two().trailing_zeros();
        let classes = 1usize << shift;
        let reps: Vec<u8> = bc.representatives(..).filter_map(|u| u.as_u8()).collect();
        // Index 0 is the dead state; the others are numbered as reached.
        let mut index = std::collections::HashMap::new();
        let mut order = vec![None];
        let mut id = |sid: StateID, order: &mut Vec<Option<StateID>>| -> usize {
            if dfa.is_dead_state(sid) {
                return 0;
            }
            *index.entry(sid).or_insert_with(|| {
                order.push(Some(sid));
                order.len() - 1
            })
        };
        let starts: Vec<u32> = starts.iter().map(|&s| (id(s, &mut order) * classes) as u32).collect();
        let (mut next, mut branch, mut eoi) = (vec![0u32; classes], vec![u32::MAX], vec![u32::MAX]);
        let mut k = 1;
        while k < order.len() {
            let sid = order[k]?;
            if dfa.is_quit_state(sid) {
                return None;
            }
            let mut row = vec![0u32; classes];
            for &b in &reps {
                let to = dfa.next_state(sid, b);
                if dfa.is_quit_state(to) {
                    return None;
                }
                let j = id(to, &mut order);
                let flag = u32::from(j != 0 && dfa.is_match_state(to));
                row[class[b as usize] as usize] = u32::try_from(j * classes * 4).ok()? >> 1 | flag;
            }
            next.extend_from_slice(&row);
            branch.push(if dfa.is_match_state(sid) { dfa.match_pattern(sid, 0).as_u32() } else { u32::MAX });
            let end = dfa.next_eoi_state(sid);
            eoi.push(if dfa.is_match_state(end) { dfa.match_pattern(end, 0).as_u32() } else { u32::MAX });
            k += 1;
        }
        let row = |j: usize| &next[j << shift..(j + 1) << shift];
        let is_final = |j: usize| branch[j] != u32::MAX && eoi[j] == u32::MAX && row(j).iter().all(|&e| e == 0);
        let start_row = row(starts[0] as usize >> shift);
        let fused = next
            .iter()
            .enumerate()
            .map(|(x, &e)| {
                let j = (e >> 1) as usize >> shift;
                if j == 0 {
                    SLOW
                } else if !is_final(j) {
                    e >> 1 << 2
                } else if Some(branch[j]) == lookahead {
                    SLOW | END
                } else {
                    // A piece begins with this byte: the start state's entry for its class.
                    let s = start_row[x & (classes - 1)];
                    if s == 0 || s & 1 != 0 { SLOW } else { s >> 1 << 2 | END }
                }
            })
            .collect();
        Some((Table { class, next, fused, branch, eoi, shift }, starts))
    }
}

impl Regex {
    /// Compiles `source`; the error names the pattern.
    pub fn new(source: &str) -> Result<Regex, String> {
        let tree = Expr::parse_tree(source).map_err(|e| format!("pattern {source:?} does not compile: {e}"))?;
        if let Some(fast) = Fast::new(&tree.expr) {
            return Ok(Regex { source: source.to_string(), engine: Engine::Dfa(Box::new(fast)) });
        }
        let re = fancy_regex::Regex::new(&python_dollar(source))
            .map_err(|e| format!("pattern {source:?} does not compile: {e}"))?;
        Ok(Regex { source: source.to_string(), engine: Engine::Fancy(re) })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Which engine runs this regex (`"dfa"` or `"fancy-regex"`), for tests and benchmarks.
    pub fn engine(&self) -> &'static str {
        match self.engine {
            Engine::Dfa(_) => "dfa",
            Engine::Fancy(_) => "fancy-regex",
        }
    }

    /// Calls `f(start, end)` for each match, left to right, non-overlapping (empty ones too).
    pub fn for_each_match(&self, text: &str, mut f: impl FnMut(usize, usize)) -> Result<(), String> {
        match &self.engine {
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

impl Fast {
    /// The DFA for `expr` if every branch lowers to a DFA-equivalent regex (see the module doc).
    fn new(expr: &Expr) -> Option<Fast> {
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
        let config = dense::Config::new()
            .match_kind(MatchKind::LeftmostFirst)
            .start_kind(StartKind::Anchored)
            .starts_for_each_pattern(lookahead.is_some())
            .dfa_size_limit(Some(DFA_LIMIT))
            .determinize_size_limit(Some(DFA_LIMIT));
        let dfa = dense::Builder::new().configure(config).build_many(&sources).ok()?;
        let mut starts = vec![dfa.start_state(&start::Config::new().anchored(Anchored::Yes)).ok()?];
        for j in lookahead.map_or(sources.len(), |i| i + 1)..sources.len() {
            let cfg = start::Config::new().anchored(Anchored::Pattern(PatternID::new(j).ok()?));
            starts.push(dfa.start_state(&cfg).ok()?);
        }
        let (table, starts) = Table::new(&dfa, &starts, lookahead.map(|i| i as u32))?;
        let lookahead = lookahead.map(|i| (i as u32, starts[1..].to_vec()));
        Some(Fast { table, start: starts[0], lookahead })
    }

    /// The leftmost-first match starting at `p` from start state `state`: its end and branch.
    #[inline(always)]
    fn run(&self, b: &[u8], p: usize, mut state: u32) -> Option<(usize, u32)> {
        let t = &self.table;
        let (mut last, mut last_state) = (usize::MAX, 0u32);
        for (i, &c) in b.iter().enumerate().skip(p) {
            // SAFETY: `state` starts a row of `next` (Table::new built every row with
            // `1 << shift` entries), and a class is below `1 << shift`.
            let e = unsafe { *t.next.get_unchecked(state as usize + *t.class.get_unchecked(c as usize) as usize) };
            if e == 0 {
                return (last != usize::MAX).then(|| (last, t.branch[(last_state >> t.shift) as usize]));
            }
            state = e >> 1;
            if e & 1 != 0 {
                (last, last_state) = (i, state);
            }
        }
        match t.eoi[(state >> t.shift) as usize] {
            u32::MAX => (last != usize::MAX).then(|| (last, t.branch[(last_state >> t.shift) as usize])),
            pid => Some((b.len(), pid)),
        }
    }

    /// Every match, left to right: the fused table finds piece ends in one pass, buffering
    /// them so that the pass itself does not branch on them; what it cannot decide goes through
    /// `step`.
    fn for_each_match(&self, b: &[u8], mut f: impl FnMut(usize, usize)) {
        let t = &self.table;
        let n = b.len();
        let mut p = 0;
        let mut ends = [0usize; 64];
        while p < n {
            let (mut s, mut i, mut k, mut stop) = (self.start, p, 0, 0);
            while i < n {
                // SAFETY: `s` starts a row of `fused` (rows are `1 << shift` long and every
                // entry names a row), a class is below `1 << shift`, and `i < n`.
                let e = unsafe { *t.fused.get_unchecked(s as usize + *t.class.get_unchecked(*b.get_unchecked(i) as usize) as usize) };
                if e & SLOW != 0 {
                    stop = e;
                    break;
                }
                ends[k] = i;
                k += (e & END) as usize;
                s = e >> 2;
                i += 1;
                if k == ends.len() {
                    for &e in &ends {
                        f(p, e);
                        p = e;
                    }
                    k = 0;
                }
            }
            for &e in &ends[..k] {
                f(p, e);
                p = e;
            }
            if i == n && p < n {
                let pid = t.eoi[(s >> t.shift) as usize];
                if pid != u32::MAX && self.lookahead.as_ref().is_none_or(|(la, _)| *la != pid) {
                    f(p, n);
                    return;
                }
            }
            if stop == SLOW | END && p < n {
                // A space run p..i before a non-space: all but its last char, if it has two.
                let back = prev_char_start(b, i);
                if back > p {
                    f(p, back);
                    p = back;
                    continue;
                }
            }
            if p < n {
                p = self.step(b, p, &mut f);
            }
        }
    }

    /// The match at `p` (if any) by the exact walk, with the `\s+(?!\S)` fix-up; returns where
    /// the next one is searched from.
    fn step(&self, b: &[u8], p: usize, f: &mut impl FnMut(usize, usize)) -> usize {
        match self.run(b, p, self.start) {
            Some((e, pid)) if self.lookahead.as_ref().is_some_and(|(la, _)| *la == pid) => {
                // `\s+` ran to the end of the space run; `(?!\S)` holds at the end of the
                // text, else the run gives its last char back if it has another.
                let back = if e == b.len() { e } else { prev_char_start(b, e) };
                if back > p {
                    f(p, back);
                    return back;
                }
                let later = &self.lookahead.as_ref().unwrap().1;
                if let Some((e, _)) = later.iter().find_map(|&s| self.run(b, p, s)) {
                    f(p, e);
                    e
                } else {
                    next_char_start(b, p)
                }
            }
            Some((e, _)) => {
                f(p, e);
                e
            }
            None => next_char_start(b, p),
        }
    }
}

fn next_char_start(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < b.len() && (b[i] as i8) < -64 {
        i += 1;
    }
    i
}

fn prev_char_start(b: &[u8], mut i: usize) -> usize {
    i -= 1;
    while i > 0 && (b[i] as i8) < -64 {
        i -= 1;
    }
    i
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

/// `source` with each `$` outside a class replaced by `(?=\n?\z)`, Python's `$` without
/// MULTILINE (fancy-regex's `$` is the end of text only).
fn python_dollar(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let (mut in_class, mut escaped) = (false, false);
    let mut prev_open = false;
    for c in source.chars() {
        let was_open = std::mem::take(&mut prev_open);
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if in_class {
            // `]` right after `[` or `[^` is a literal.
            if c == ']' && !was_open {
                in_class = false;
            } else if c == '^' && was_open && out.ends_with('[') {
                prev_open = true;
            }
        } else if c == '[' {
            in_class = true;
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
    fn fused_pass_equals_the_exact_walk() {
        // Random texts over the chars that end, extend and fail pieces; the fused pass must cut
        // exactly where matching one piece at a time (`step`) does.
        let alphabet = [" ", "  ", "\n", "\t", "a", "Z", "1", "'", "s", "é", "日", "!", "\r\n", "\u{3000}"];
        let regexes = [GPT2_N12, CL100K, r"[一-龥]+|\p{N}{1,3}|\s+(?!\S)|x", r"\p{L}+|\s+(?!\S)|\s+"];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for re in regexes {
            let Engine::Dfa(fast) = &Regex::new(re).unwrap().engine else { panic!("{re} is not on the DFA") };
            for _ in 0..3000 {
                let mut text = String::new();
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                for k in 0..(seed % 12) {
                    text.push_str(alphabet[((seed >> (4 * k)) % alphabet.len() as u64) as usize]);
                }
                let b = text.as_bytes();
                let (mut fused, mut exact) = (Vec::new(), Vec::new());
                fast.for_each_match(b, |s, e| fused.push((s, e)));
                let mut p = 0;
                while p < b.len() {
                    p = fast.step(b, p, &mut |s, e| exact.push((s, e)));
                }
                assert_eq!(fused, exact, "{re:?} on {text:?}");
            }
        }
    }

    #[test]
    fn is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Regex>();
    }
}
