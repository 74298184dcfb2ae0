//! The DFA engine of [`super::regex`]: a regex-automata dense DFA (one pattern per top-level
//! branch, leftmost-first across them) copied into flat tables, run in one pass over the text.
//! Invariant: its matches equal one anchored leftmost-first run of the DFA per match, with the
//! `\s+(?!\S)` fix-up (`step`); the fused pass only skips work where that run's result is
//! already decided ([log](../../docs/performance.md#imported-pipelines-and-build-time-issue-13)).

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::{primitives::StateID, start};
use regex_automata::{Anchored, MatchKind, PatternID};

use super::PieceSink;

/// Dense DFA size limits: past them a regex goes to fancy-regex (building stays well under 1 s).
const DFA_LIMIT: usize = 64 << 20;

/// The DFA path: one pattern per top-level branch, leftmost-first across them.
pub struct Fast {
    table: Table,
    /// Anchored start state over all branches.
    start: u32,
    /// The branch that is `\s+(?!\S)` (searched as `\s+`), and the anchored start states of the
    /// branches after it, tried in order when its fix-up fails.
    lookahead: Option<(u32, Vec<u32>)>,
    /// The branch after that one is `\s+` or `\s`, so it takes a single space char before a
    /// non-space whole (GPT-2's and cl100k's patterns, which end that way).
    space_next: bool,
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
/// run ends at `i`, before a non-space: it gives its last char back). `MATCH` marks an entry
/// into a match state (`MATCH | LOOKAHEAD` one of that branch), so that at the dead state the
/// pass knows where the match ended, as `run` would (typically before a multi-byte char that
/// turned out not to extend it). The next state is the entry shifted right by `FLAG_BITS`.
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
const MATCH: u32 = 4;
const LOOKAHEAD: u32 = 8;
const FLAG_BITS: u32 = 4;

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
                // (Checked with room for `fused`'s flag bits.)
                row[class[b as usize] as usize] = (u32::try_from(j * classes << FLAG_BITS).ok()? >> (FLAG_BITS - 1)) | flag;
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
                    let flags = match (e & 1 != 0, Some(branch[j]) == lookahead) {
                        (false, _) => 0,
                        (true, false) => MATCH,
                        (true, true) => MATCH | LOOKAHEAD,
                    };
                    e >> 1 << FLAG_BITS | flags
                } else if Some(branch[j]) == lookahead {
                    SLOW | END
                } else {
                    // A piece begins with this byte: the start state's entry for its class.
                    let s = start_row[x & (classes - 1)];
                    // (`SLOW | MATCH` where no piece begins with it: the match ends here all the same.)
                    if s == 0 || s & 1 != 0 { SLOW | MATCH } else { s >> 1 << FLAG_BITS | END }
                }
            })
            .collect();
        Some((Table { class, next, fused, branch, eoi, shift }, starts))
    }
}

impl Fast {
    /// The DFA for these branches (regex-syntax sources, leftmost-first in this order);
    /// `lookahead` is the branch that stands for `\s+(?!\S)` (given as `\s+`). `None` when the
    /// DFA exceeds its size limit.
    pub fn build(sources: &[String], lookahead: Option<usize>) -> Option<Fast> {
        let config = dense::Config::new()
            .match_kind(MatchKind::LeftmostFirst)
            .start_kind(StartKind::Anchored)
            .starts_for_each_pattern(lookahead.is_some())
            .dfa_size_limit(Some(DFA_LIMIT))
            .determinize_size_limit(Some(DFA_LIMIT));
        let dfa = dense::Builder::new().configure(config).build_many(sources).ok()?;
        let mut starts = vec![dfa.start_state(&start::Config::new().anchored(Anchored::Yes)).ok()?];
        for j in lookahead.map_or(sources.len(), |i| i + 1)..sources.len() {
            let cfg = start::Config::new().anchored(Anchored::Pattern(PatternID::new(j).ok()?));
            starts.push(dfa.start_state(&cfg).ok()?);
        }
        let (table, starts) = Table::new(&dfa, &starts, lookahead.map(|i| i as u32))?;
        let hir = |s: &str| regex_syntax::Parser::new().parse(s).ok();
        let space_next = lookahead.and_then(|i| sources.get(i + 1)).is_some_and(|next| {
            let next = hir(next);
            next.is_some() && (next == hir(r"\s+") || next == hir(r"\s"))
        });
        let lookahead = lookahead.map(|i| (i as u32, starts[1..].to_vec()));
        Some(Fast { table, start: starts[0], lookahead, space_next })
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

    /// Every match, left to right (see [`Self::tile`]).
    pub fn for_each_match(&self, b: &[u8], mut f: impl FnMut(usize, usize)) {
        self.tile::<false>(b, &mut f);
    }

    /// The pieces of `b`: every match, and the text between two matches as one piece.
    pub fn for_each_piece(&self, b: &[u8], f: &mut impl PieceSink) {
        self.tile::<true>(b, f);
    }

    /// The matches (and with `GAPS` the text between them) in order. The fused table finds
    /// piece ends in one pass and sets them as bits of a 64-byte window that starts at the
    /// current piece, handed to the sink whole ([`PieceSink::window`]); what the pass cannot
    /// decide goes through the exact walk (`match_at`).
    fn tile<const GAPS: bool>(&self, b: &[u8], f: &mut impl PieceSink) {
        let t = &self.table;
        let n = b.len();
        // Everything before `p` is emitted, and a piece starts at `p`.
        let mut p = 0;
        while p < n {
            let (mut s, mut i) = (self.start, p);
            // The last match state entered: where the match ends, and its entry.
            let (mut last, mut last_e) = (0, 0);
            let stop = 'scan: loop {
                // Bit `j` of `ends`: a piece ends at `p + j` (`j < 64`).
                let lim = (p + 64).min(n);
                let mut ends = 0u64;
                while i < lim {
                    // SAFETY: `s` starts a row of `fused` (rows are `1 << shift` long and every
                    // entry names a row), a class is below `1 << shift`, and `i < n`.
                    let e = unsafe { *t.fused.get_unchecked(s as usize + *t.class.get_unchecked(*b.get_unchecked(i) as usize) as usize) };
                    if e & SLOW != 0 {
                        p = emit(f, n, p, ends);
                        break 'scan e;
                    }
                    ends |= u64::from(e & END) << (i - p);
                    if e & MATCH != 0 {
                        (last, last_e) = (i, e);
                    }
                    s = e >> FLAG_BITS;
                    i += 1;
                }
                if ends != 0 && lim == p + 64 {
                    p = f.window(p, p, ends);
                    continue;
                }
                p = emit(f, n, p, ends);
                // The text ends, or the piece at `p` is 64 bytes or more: on to its end.
                while i < n {
                    // SAFETY: as above.
                    let e = unsafe { *t.fused.get_unchecked(s as usize + *t.class.get_unchecked(*b.get_unchecked(i) as usize) as usize) };
                    if e & SLOW != 0 {
                        break 'scan e;
                    }
                    if e & MATCH != 0 {
                        (last, last_e) = (i, e);
                    }
                    s = e >> FLAG_BITS;
                    i += 1;
                    if e & END != 0 {
                        f.piece(p, i - 1);
                        p = i - 1;
                        continue 'scan;
                    }
                }
                break 0;
            };
            if p == n {
                return;
            }
            if stop == 0 {
                let pid = t.eoi[(s >> t.shift) as usize];
                if pid != u32::MAX && self.lookahead.as_ref().is_none_or(|(la, _)| *la != pid) {
                    f.piece(p, n);
                    return;
                }
            }
            // The match at `p` where the pass knows it (`run` would end there): its end, and
            // whether it is the `\s+(?!\S)` branch's.
            let known = match stop {
                x if x == SLOW | END => Some((i, true)),
                x if x == SLOW | MATCH => Some((i, false)),
                SLOW if last > p => Some((last, last_e & LOOKAHEAD != 0)),
                _ => None,
            };
            if let Some((e, space_run)) = known {
                // A space run p..e before a non-space gives its last char back if it has
                // two; a single char goes to the next branch, which takes it if it is `\s+`.
                let back = prev_char_start(b, e);
                let e = match (space_run, back > p) {
                    (false, _) => Some(e),
                    (true, true) => Some(back),
                    (true, false) => self.space_next.then_some(e),
                };
                if let Some(e) = e {
                    f.piece(p, e);
                    p = e;
                    continue;
                }
            }
            match self.match_at(b, p) {
                Some(e) => {
                    f.piece(p, e);
                    p = e;
                }
                None => {
                    let gap = p;
                    p = next_char_start(b, p);
                    if GAPS {
                        while p < n && self.match_at(b, p).is_none() {
                            p = next_char_start(b, p);
                        }
                        f.piece(gap, p);
                    }
                }
            }
        }
    }

    /// The end of the match at `p` by the exact walk, with the `\s+(?!\S)` fix-up.
    fn match_at(&self, b: &[u8], p: usize) -> Option<usize> {
        match self.run(b, p, self.start) {
            Some((e, pid)) if self.lookahead.as_ref().is_some_and(|(la, _)| *la == pid) => {
                // `\s+` ran to the end of the space run; `(?!\S)` holds at the end of the
                // text, else the run gives its last char back if it has another.
                let back = if e == b.len() { e } else { prev_char_start(b, e) };
                if back > p {
                    return Some(back);
                }
                let later = &self.lookahead.as_ref()?.1;
                later.iter().find_map(|&s| self.run(b, p, s)).map(|(e, _)| e)
            }
            m => m.map(|(e, _)| e),
        }
    }
}

/// Emits the pieces that end at the bits of `ends` (see `Fast::tile`) and returns where the
/// last one ends; through the sink's window when 64 bytes from `p` are in the text.
#[inline(always)]
fn emit(f: &mut impl PieceSink, n: usize, mut p: usize, mut ends: u64) -> usize {
    if ends == 0 {
        return p;
    }
    if p + 64 <= n {
        return f.window(p, p, ends);
    }
    let base = p;
    while ends != 0 {
        let e = base + ends.trailing_zeros() as usize;
        f.piece(p, e);
        p = e;
        ends &= ends - 1;
    }
    p
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

#[cfg(test)]
mod tests {

    const GPT2_N12: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}{1,2}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
    const CL100K: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

    #[test]
    fn fused_pass_equals_the_exact_walk() {
        // Random texts over the chars that end, extend and fail pieces; the fused pass must cut
        // exactly where matching one piece at a time (`match_at`) does, and its pieces must
        // tile the text with the gaps between matches.
        let alphabet = [
            " ", "  ", "\n", "\t", "a", "Z", "1", "'", "s", "é", "日", "!", "\r\n", "\u{3000}", "क", "\u{93e}", "–", "、", "abcdefghijklmnopqrstuvwxyzabcdefghijklmn",
            "                              ",
        ];
        let regexes = [GPT2_N12, CL100K, r"[一-龥]+|\p{N}{1,3}|\s+(?!\S)|x", r"\p{L}+|\s+(?!\S)|\s+"];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for re in regexes {
            let tree = fancy_regex::Expr::parse_tree(re).unwrap();
            let fast = super::super::regex::dfa_for(&tree.expr).unwrap_or_else(|| panic!("{re} is not on the DFA"));
            for round in 0..3000 {
                // Short texts, and long ones that fill windows and hold pieces of 64+ bytes.
                let len = next() % if round % 3 == 0 { 120 } else { 12 };
                let text: String = (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
                let b = text.as_bytes();
                let (mut exact, mut tiles) = (Vec::new(), Vec::new());
                let mut p = 0;
                while p < b.len() {
                    match fast.match_at(b, p) {
                        Some(e) => {
                            exact.push((p, e));
                            p = e;
                        }
                        None => p = super::next_char_start(b, p),
                    }
                }
                let mut last = 0;
                for &(s, e) in &exact {
                    if s > last {
                        tiles.push((last, s));
                    }
                    tiles.push((s, e));
                    last = e;
                }
                if last < b.len() {
                    tiles.push((last, b.len()));
                }
                let (mut matches, mut pieces) = (Vec::new(), Vec::new());
                fast.for_each_match(b, |s, e| matches.push((s, e)));
                fast.for_each_piece(b, &mut |s, e| pieces.push((s, e)));
                assert_eq!(matches, exact, "{re:?} on {text:?}");
                assert_eq!(pieces, tiles, "{re:?} on {text:?}");
            }
        }
    }
}
