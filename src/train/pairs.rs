//! Adjacent pairs of a training run: their counts and, for each pair, the words that hold it.
//!
//! * Each pair gets a dense `u32` id the first time it is seen (one `FxHashMap<u64, u32>`
//!   lookup, the key `left << 32 | right`); counts, list heads and "touched in this merge"
//!   stamps are plain vectors indexed by it. That lookup is the only hashing of the merge loop.
//! * **Lazy lists.** A word stays listed after it lost the pair; the merge checks it (about half
//!   the visits on English find an occurrence). The initial lists are one sorted `Vec<u32>` laid
//!   out by a counting sort; words added later (when a pair's count rises in them) go to an
//!   unrolled linked list per pair (6 word ids per 32-byte node, all nodes in one arena), so
//!   adding is a push and a walk costs one pointer chase per 6 words.
//! * **Initial pairs are byte pairs**, so dense 65,536-slot tables replace hashing and sorting;
//!   they are counted in parallel per chunk of words when a pool is there.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::words::Words;

pub const NIL: u32 = u32::MAX;
const NODE_WORDS: usize = 6;

/// A node of an unrolled linked list of word ids (32 bytes).
#[derive(Clone, Copy)]
struct Node {
    w: [u32; NODE_WORDS],
    n: u32,
    next: u32,
}

#[inline]
fn key(a: u32, b: u32) -> u64 {
    ((a as u64) << 32) | b as u64
}

/// All mutable pair state.
pub struct Pairs {
    ids: FxHashMap<u64, u32>,
    pub left: Vec<u32>,
    pub right: Vec<u32>,
    pub count: Vec<i64>,
    /// Words listed at the start: `init_words[init_start..init_start + init_len]`, sorted.
    init_start: Vec<usize>,
    init_len: Vec<u32>,
    init_words: Vec<u32>,
    /// Words added later (when the pair's count rose in them): an unrolled list.
    head: Vec<u32>,
    nodes: Vec<Node>,
    /// Merge number in which this pair's count last rose (to push it once per merge).
    touched: Vec<u32>,
}

impl Pairs {
    #[inline]
    fn id(&mut self, a: u32, b: u32) -> usize {
        let n = self.left.len() as u32;
        let id = *self.ids.entry(key(a, b)).or_insert(n);
        if id == n {
            self.left.push(a);
            self.right.push(b);
            self.count.push(0);
            self.head.push(NIL);
            self.init_start.push(0);
            self.init_len.push(0);
            self.touched.push(u32::MAX);
        }
        id as usize
    }

    /// Every byte pair of the words with its weighted count and its words (in word order,
    /// once per word), in key order.
    pub fn build(words: &Words, pool: Option<&rayon::ThreadPool>) -> Pairs {
        let nwords = words.len();
        let tally = |ws: &[super::words::Word]| {
            let mut cnt = vec![0i64; 1 << 16];
            let mut occ = vec![0u32; 1 << 16];
            for wd in ws {
                for p in words.syms[wd.start..wd.start + wd.len as usize].windows(2) {
                    let k = (p[0] << 8 | p[1]) as usize;
                    cnt[k] = cnt[k].saturating_add(wd.count);
                    occ[k] += 1;
                }
            }
            (cnt, occ)
        };
        let (bcount, bocc) = match pool {
            Some(pool) => pool.install(|| {
                let chunk = (nwords / (pool.current_num_threads() * 4)).max(4096);
                words.list.par_chunks(chunk).map(tally).reduce(
                    || (vec![0i64; 1 << 16], vec![0u32; 1 << 16]),
                    |(mut c1, mut o1), (c2, o2)| {
                        for k in 0..1 << 16 {
                            c1[k] = c1[k].saturating_add(c2[k]);
                            o1[k] += o2[k];
                        }
                        (c1, o1)
                    },
                )
            }),
            None => tally(&words.list),
        };
        let mut pairs = Pairs {
            ids: FxHashMap::default(),
            left: Vec::new(),
            right: Vec::new(),
            count: Vec::new(),
            init_start: Vec::new(),
            init_len: Vec::new(),
            init_words: Vec::new(),
            head: Vec::new(),
            nodes: Vec::new(),
            touched: Vec::new(),
        };
        // Pair ids for the byte pairs that occur, in key order; `fill[k]` = next free slot.
        let mut fill = vec![0usize; 1 << 16];
        let mut total = 0usize;
        for k in 0..1usize << 16 {
            if bocc[k] == 0 {
                continue;
            }
            let id = pairs.id((k >> 8) as u32, (k & 255) as u32);
            pairs.count[id] = bcount[k];
            pairs.init_start[id] = total;
            fill[k] = total;
            total += bocc[k] as usize;
        }
        pairs.init_words = vec![NIL; total];
        let bstart = fill.clone();
        for (w, wd) in words.list.iter().enumerate() {
            for p in words.syms[wd.start..wd.start + wd.len as usize].windows(2) {
                let k = (p[0] << 8 | p[1]) as usize;
                let f = fill[k];
                // Dedupe repeats of the pair within this word (the slot before is ours if so).
                if f == bstart[k] || pairs.init_words[f - 1] != w as u32 {
                    pairs.init_words[f] = w as u32;
                    fill[k] = f + 1;
                }
            }
        }
        for k in 0..1usize << 16 {
            if bocc[k] != 0 {
                let id = pairs.ids[&key((k >> 8) as u32, (k & 255) as u32)] as usize;
                pairs.init_len[id] = (fill[k] - pairs.init_start[id]) as u32;
            }
        }
        pairs
    }

    /// Every pair of words whose symbols are any tokens (a base vocabulary's segmentation),
    /// through the hash map; `counted(left, right)` says which pairs count at the start.
    pub fn build_general(words: &Words, counted: impl Fn(u32, u32) -> bool) -> Pairs {
        let mut pairs = Pairs::build(&Words { syms: Vec::new(), list: Vec::new() }, None);
        let mut scratch = Vec::new();
        for (w, wd) in words.list.iter().enumerate() {
            for p in words.syms[wd.start..wd.start + wd.len as usize].windows(2) {
                if counted(p[0], p[1]) {
                    pairs.apply(p[0], p[1], wd.count, w as u32, 0, &mut scratch);
                }
            }
            scratch.clear();
        }
        pairs.reset_stamps();
        pairs
    }

    pub fn len(&self) -> usize {
        self.left.len()
    }

    /// The words listed for pair `p`, into `buf` (sorted and deduped when the later list had
    /// any: forward memory order, which the hardware prefetcher likes); the lists are emptied.
    pub fn take_words(&mut self, p: usize, buf: &mut Vec<u32>) {
        buf.clear();
        let (ist, iln) = (self.init_start[p], self.init_len[p] as usize);
        buf.extend_from_slice(&self.init_words[ist..ist + iln]);
        self.init_len[p] = 0;
        let mut n = self.head[p];
        self.head[p] = NIL;
        if n != NIL {
            while n != NIL {
                let node = &self.nodes[n as usize];
                buf.extend_from_slice(&node.w[..node.n as usize]);
                n = node.next;
            }
            buf.sort_unstable();
            buf.dedup();
        }
    }

    /// Changes the count of `(x, y)` by `delta` (a word's count, signed) for word `w`; a pair
    /// whose count rises lists `w` and is stamped once per merge into `touched`.
    #[inline]
    pub fn apply(&mut self, x: u32, y: u32, delta: i64, w: u32, merge_no: u32, touched: &mut Vec<u32>) {
        let id = self.id(x, y);
        self.count[id] = self.count[id].saturating_add(delta);
        if delta <= 0 {
            return;
        }
        let h = self.head[id];
        if h == NIL || {
            let node = &self.nodes[h as usize];
            node.w[node.n as usize - 1] != w && node.n as usize == NODE_WORDS
        } {
            let mut node = Node { w: [0; NODE_WORDS], n: 1, next: h };
            node.w[0] = w;
            self.nodes.push(node);
            self.head[id] = (self.nodes.len() - 1) as u32;
        } else {
            let node = &mut self.nodes[h as usize];
            if node.w[node.n as usize - 1] != w {
                node.w[node.n as usize] = w;
                node.n += 1;
            }
        }
        if self.touched[id] != merge_no {
            self.touched[id] = merge_no;
            touched.push(id as u32);
        }
    }

    /// Forgets every stamp (when the merge counter wraps around).
    pub fn reset_stamps(&mut self) {
        self.touched.iter_mut().for_each(|s| *s = u32::MAX);
    }

    /// (pairs, list nodes) for the timing report.
    pub fn sizes(&self) -> (usize, usize) {
        (self.left.len(), self.nodes.len())
    }
}
