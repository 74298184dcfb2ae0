//! Parity-aware merges (Foroutan et al., arXiv 2508.04796): one table of words per language,
//! and dev texts whose tokens are counted as merges apply. Each step takes the language whose
//! dev cost (its dev tokens over its reference's, or its dev tokens alone) is highest, merges
//! that language's best pair, and applies the merge to every language and every dev text; so
//! the merges are one standard list that any BPE encoder applies.
//!
//! * Every language keeps the state of the plain loop (words, pairs, heap), but with no quiet
//!   pairs: a merge chosen by one language must find its words in all the others.
//! * A language with no pair left to merge (all below `min_frequency`, too long or vetoed) is
//!   out for good; when none is left, training stops.
//! * `global_merges`: the first merges are plain BPE over all languages together (one more
//!   table, dropped when that phase ends).
//! * The window variant skips a language picked more than `alpha * size / languages` times in
//!   the last `size` parity steps; skipped languages come after all others.
//! * Languages merge in parallel on the pool (each one's state is its own).
//!
//! Ties between pairs: [`TieBreak::Lexicographic`] as in [`super::train`]; [`TieBreak::Hf`] is
//! HF's `ParityBpeTrainer` (the greatest pair as strings of the ByteLevel alphabet), whose
//! picks the tests check merge for merge. The oracle: `hf_bpe.reference.train_parity_reference`.
//! Measured: [log](../../docs/performance.md#parity-aware-training).

use std::collections::VecDeque;

use rayon::prelude::*;

use super::heap::Heap;
use super::pairs::Pairs;
use super::tokens::Tokens;
use super::words::{Sym, Words};
use super::{
    initial_heap, merge_in_words, pop_best, push_touched, Input, Rules, Scratch, TieBreak, Ties,
    TrainConfig, Vetoes,
};
use crate::counts::{Flat, FlatRef};

/// How the language of a step is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Variant {
    /// The language with the highest dev cost.
    Base,
    /// The highest cost among the languages picked at most `alpha * size / n` times in the
    /// last `size` parity steps.
    Window { size: usize, alpha: f64 },
}

pub struct ParityConfig {
    pub train: TrainConfig,
    pub variant: Variant,
    /// Merges made by total counts over all languages before the parity steps.
    pub global_merges: usize,
}

/// A language's dev text and, when costs are relative, its reference (e.g. the English
/// translations of its sentences).
pub struct DevText<'a> {
    pub text: FlatRef<'a>,
    pub reference: Option<FlatRef<'a>>,
}

/// The training state of one table of words.
struct Table<S> {
    words: Words<S>,
    pairs: Pairs,
    heap: Heap,
    s: Scratch,
    out: bool,
}

/// A dev text's words and their number of tokens now.
struct Counted<S> {
    words: Words<S>,
    pairs: Pairs,
    tokens: i64,
    s: Scratch,
}

impl<S: Sym> Table<S> {
    fn new(words: FlatRef<'_>, toks: &Tokens, rules: &Rules) -> Table<S> {
        let words: Words<S> = Input::Borrowed(words).words();
        let pairs = Pairs::build(&words, None, 1);
        let heap = initial_heap(&pairs, toks, rules);
        Table {
            words,
            pairs,
            heap,
            s: Scratch::default(),
            out: false,
        }
    }

    /// The best pair that may merge, or `None` (the table is out).
    fn best(
        &mut self,
        toks: &Tokens,
        rules: &Rules,
        filter: &Option<super::MergeFilter>,
        veto: &mut Vetoes,
    ) -> Option<(u32, u32)> {
        loop {
            let e = pop_best(&mut self.heap, &self.pairs, toks, rules.ties)?;
            if e.count < rules.min_count {
                return None;
            }
            let p = e.pair as usize;
            let (a, b) = (self.pairs.left[p], self.pairs.right[p]);
            if let Some(f) = filter {
                if !veto.allowed(f, toks, a, b) {
                    if veto.stopped {
                        return None;
                    }
                    continue;
                }
            }
            return Some((a, b));
        }
    }

    /// Merges `a b` into `c` in every word that holds it.
    fn merge(&mut self, toks: &Tokens, rules: &Rules, abc: (u32, u32, u32)) {
        let Some(p) = self.pairs.id_of(abc.0, abc.1) else {
            return;
        };
        self.pairs.take_words(p, &mut self.s.words);
        merge_in_words(
            &mut self.words,
            &mut self.pairs,
            toks,
            rules,
            abc,
            &mut self.s,
            None,
        );
        self.pairs.count[p] = 0;
        self.pairs.settle(None);
        if self.words.worth_compacting() {
            self.words.compact();
        }
        push_touched(
            &mut self.heap,
            &self.pairs,
            toks,
            rules.ties,
            &mut self.s.touched,
        );
        self.s.merge_no = self.s.merge_no.wrapping_add(1);
        if self.s.merge_no == u32::MAX {
            self.pairs.reset_stamps();
            self.s.merge_no = 0;
        }
    }
}

impl<S: Sym> Counted<S> {
    fn new(text: FlatRef<'_>) -> Counted<S> {
        let tokens = (0..text.len())
            .map(|i| (text.offsets[i + 1] - text.offsets[i]) * text.counts[i] as i64)
            .sum();
        let words: Words<S> = Input::Borrowed(text).words();
        let pairs = Pairs::build(&words, None, 1);
        Counted {
            words,
            pairs,
            tokens,
            s: Scratch::default(),
        }
    }

    fn merge(&mut self, (a, b, c): (u32, u32, u32)) {
        let Some(p) = self.pairs.id_of(a, b) else {
            return;
        };
        self.pairs.take_words(p, &mut self.s.words);
        for k in 0..self.s.words.len() {
            let w = self.s.words[k] as usize;
            self.s.deltas.clear();
            let n = self.words.merge(w, a, b, c, &mut self.s.deltas);
            if n == 0 {
                continue;
            }
            let wc = self.words.count(w);
            self.tokens -= n as i64 * wc;
            for d in &self.s.deltas {
                self.pairs.apply(
                    d.left,
                    d.right,
                    d.sign * wc,
                    w as u32,
                    0,
                    &mut self.s.touched,
                );
            }
            self.s.touched.clear();
        }
        self.pairs.count[p] = 0;
        self.pairs.settle(None);
        if self.words.worth_compacting() {
            self.words.compact();
        }
    }
}

/// Learns parity-aware merges: `corpora[l]` is language `l`'s words, `dev[l]` its dev text.
/// Returns the merges in training order (see the module doc); `progress` as in [`super::train`].
pub fn train_parity(
    corpora: &[FlatRef<'_>],
    dev: &[DevText<'_>],
    cfg: &ParityConfig,
    pool: Option<&rayon::ThreadPool>,
    progress: &mut dyn FnMut(usize) -> bool,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>, String> {
    if corpora.len() != dev.len() || corpora.is_empty() {
        return Err(format!(
            "parity training needs one dev text per language: {} languages, {} dev texts",
            corpora.len(),
            dev.len()
        ));
    }
    if let Variant::Window { size, alpha } = cfg.variant {
        if size == 0 || !alpha.is_finite() || alpha <= 0.0 {
            return Err(format!(
                "the window variant needs window_size >= 1 and alpha > 0 (got {size} and {alpha})"
            ));
        }
    }
    let _mapped = crate::memory::MapBigAllocations::new();
    Ok(if super::small_ids(256, &cfg.train) {
        parity_loop::<u16>(corpora, dev, cfg, pool, progress)
    } else {
        parity_loop::<u32>(corpora, dev, cfg, pool, progress)
    })
}

/// Runs `f` on every item, in parallel on `pool` if there is one.
fn each<T: Send>(
    pool: Option<&rayon::ThreadPool>,
    items: &mut [T],
    f: impl Fn(&mut T) + Send + Sync,
) {
    match pool {
        Some(p) => p.install(|| items.par_iter_mut().for_each(f)),
        None => items.iter_mut().for_each(f),
    }
}

fn parity_loop<S: Sym>(
    corpora: &[FlatRef<'_>],
    dev: &[DevText<'_>],
    cfg: &ParityConfig,
    pool: Option<&rayon::ThreadPool>,
    progress: &mut dyn FnMut(usize) -> bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rules = Rules::of(&cfg.train);
    rules.quiet_below = 1;
    if cfg.train.tie_break == TieBreak::Hf {
        rules.ties = Ties::HfStrings;
    }
    let mut toks = Tokens::new();
    if cfg.train.max_new_tokens == 0 || (!rules.hf && rules.max_len < 2) {
        return Vec::new();
    }
    let mut langs: Vec<Table<S>> = crate::pool::map(pool, corpora, |&c| Table::new(c, &toks, &rules));
    let texts: Vec<FlatRef<'_>> = dev
        .iter()
        .flat_map(|d| std::iter::once(d.text).chain(d.reference))
        .collect();
    let mut devs: Vec<Counted<S>> = crate::pool::map(pool, &texts, |&t| Counted::new(t));
    // Where each language's dev text and reference are in `devs`.
    let mut at = Vec::with_capacity(dev.len());
    let mut k = 0;
    for d in dev {
        at.push((k, d.reference.map(|_| k + 1)));
        k += 1 + d.reference.is_some() as usize;
    }
    let mut global: Option<Table<S>> = (cfg.global_merges > 0).then(|| {
        let mut all = Flat {
            bytes: Vec::new(),
            offsets: vec![0],
            counts: Vec::new(),
        };
        for c in corpora {
            for i in 0..c.len() {
                all.push(c.word(i), c.counts[i]);
            }
        }
        Table::new(all.as_ref(), &toks, &rules)
    });
    let n = langs.len();
    let mut recent: VecDeque<u32> = VecDeque::new();
    let mut picks = vec![0usize; n];
    let mut veto = Vetoes::default();
    let mut merges = Vec::new();
    let mut new_tokens = 0usize;
    let step = (cfg.train.max_new_tokens / 100).max(1);
    while new_tokens < cfg.train.max_new_tokens {
        if global.is_some() && merges.len() >= cfg.global_merges {
            global = None;
        }
        let pick = match &mut global {
            Some(g) => g.best(&toks, &rules, &cfg.train.filter, &mut veto),
            None => {
                let cost = |l: usize| {
                    let (t, r) = at[l];
                    let tokens = devs[t].tokens as f64;
                    r.map_or(tokens, |r| tokens / devs[r].tokens.max(1) as f64)
                };
                let costs: Vec<f64> = (0..n).map(cost).collect();
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by(|&x, &y| costs[y].total_cmp(&costs[x]).then(x.cmp(&y)));
                if let Variant::Window { size, alpha } = cfg.variant {
                    let allowed = |l: usize| picks[l] as f64 / size as f64 <= alpha / n as f64;
                    order.sort_by_key(|&l| !allowed(l)); // (stable: by cost within each group)
                }
                let mut found = None;
                for l in order {
                    if langs[l].out {
                        continue;
                    }
                    match langs[l].best(&toks, &rules, &cfg.train.filter, &mut veto) {
                        Some(pair) => {
                            found = Some(pair);
                            if let Variant::Window { size, .. } = cfg.variant {
                                recent.push_back(l as u32);
                                picks[l] += 1;
                                if recent.len() > size {
                                    let old = recent.pop_front().unwrap_or_default();
                                    picks[old as usize] -= 1;
                                }
                            }
                            break;
                        }
                        None => langs[l].out = true,
                    }
                    if veto.stopped {
                        break;
                    }
                }
                found
            }
        };
        let Some((a, b)) = pick else { break };
        if veto.stopped {
            break;
        }
        let (c, is_new) = toks.merge(a, b);
        merges.push((toks.get(a).to_vec(), toks.get(b).to_vec()));
        let (toks_ref, rules_ref) = (&toks, &rules);
        each(pool, &mut langs, |t| {
            t.merge(toks_ref, rules_ref, (a, b, c))
        });
        if let Some(g) = &mut global {
            g.merge(&toks, &rules, (a, b, c));
        }
        each(pool, &mut devs, |d| d.merge((a, b, c)));
        if is_new {
            new_tokens += 1;
            if new_tokens % step == 0 && !progress(new_tokens) {
                break;
            }
        }
    }
    merges
}
