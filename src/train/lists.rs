//! The later lists of the pair index: for each pair, the words in which its count rose during
//! training (lazily: a word may have lost the pair since), and the varints all lists use.
//!
//! Most pairs formed late are in one word or a few (on the corpora's words: 42% of the lists
//! hold one id, 28% two to four), so a list starts in its head and grows in bigger nodes:
//! * an empty list is [`NIL`]; a list of one word is that word's id in the head itself (top
//!   bit set);
//! * then nodes in one arena of 16-byte units: a first node of one unit (7 payload bytes),
//!   later ones of two (23 payload bytes), newest first. A node holds its first id as a
//!   varint, then zigzag varints of the differences (ids go down between merges), and its last
//!   id, so adding is an append and a walk costs one pointer chase per few ids. Freed nodes
//!   are kept per size for reuse.
//!
//! Bytes per word: [log](../../docs/performance.md#memory-of-the-merge-loop).

use crate::varint::{get, put, varint_len};

pub const NIL: u32 = u32::MAX;
/// Head tag of a list of one word (the id in the low 31 bits).
const ONE: u32 = 1 << 31;
const UNIT: usize = 16;
/// A node's header: last id (u32), next node (u32), used payload bytes (bit 7: two units).
const HDR: usize = 9;
const TWO_UNITS: u8 = 0x80;

#[inline]
fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

#[inline]
fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

/// The nodes of all later lists (a list itself is its head, a `u32` the caller keeps).
pub struct Lists {
    arena: Vec<[u8; UNIT]>,
    /// The first free node of one unit and of two (chained by `next`).
    free: [u32; 2],
}

impl Lists {
    pub fn new() -> Self {
        Lists { arena: Vec::new(), free: [NIL; 2] }
    }

    #[inline]
    fn last(&self, n: u32) -> u32 {
        let u = &self.arena[n as usize];
        u32::from_le_bytes([u[0], u[1], u[2], u[3]])
    }

    #[inline]
    fn set_last(&mut self, n: u32, w: u32) {
        self.arena[n as usize][..4].copy_from_slice(&w.to_le_bytes());
    }

    #[inline]
    fn next(&self, n: u32) -> u32 {
        let u = &self.arena[n as usize];
        u32::from_le_bytes([u[4], u[5], u[6], u[7]])
    }

    #[inline]
    fn set_next(&mut self, n: u32, next: u32) {
        self.arena[n as usize][4..8].copy_from_slice(&next.to_le_bytes());
    }

    /// (used payload bytes, whether the node is two units).
    #[inline]
    fn fill(&self, n: u32) -> (usize, bool) {
        let l = self.arena[n as usize][8];
        ((l & !TWO_UNITS) as usize, l & TWO_UNITS != 0)
    }

    /// Adds word `w` to the list at `head` (nothing if it is the list's last id).
    #[inline]
    pub fn add(&mut self, head: &mut u32, w: u32) {
        match *head {
            NIL if w < ONE - 1 => *head = ONE | w,
            NIL => *head = self.new_node(false, w, NIL),
            h if h & ONE != 0 => {
                let v = h & !ONE;
                if v != w {
                    let n = self.new_node(false, v, NIL);
                    *head = if self.append(n, w) { n } else { self.new_node(true, w, n) };
                }
            }
            n => {
                if self.last(n) != w && !self.append(n, w) {
                    *head = self.new_node(true, w, n);
                }
            }
        }
    }

    /// Appends `w` to node `n` if its payload has room.
    #[inline]
    fn append(&mut self, n: u32, w: u32) -> bool {
        let gap = zigzag(w as i64 - self.last(n) as i64);
        let (len, two) = self.fill(n);
        let cap = if two { 2 * UNIT - HDR } else { UNIT - HDR };
        if len + varint_len(gap) > cap {
            return false;
        }
        let at = n as usize * UNIT + HDR + len;
        let k = put(gap, &mut self.arena.as_flattened_mut()[at..]);
        self.arena[n as usize][8] += k as u8;
        self.set_last(n, w);
        true
    }

    /// A node holding `w`, linked to `next`.
    fn new_node(&mut self, two: bool, w: u32, next: u32) -> u32 {
        let n = match self.free[two as usize] {
            NIL => {
                let n = self.arena.len();
                assert!(n + 2 < ONE as usize, "the merge loop's word lists outgrew 32 GiB");
                self.arena.resize(n + 1 + two as usize, [0; UNIT]);
                n as u32
            }
            f => {
                self.free[two as usize] = self.next(f);
                f
            }
        };
        self.set_last(n, w);
        self.set_next(n, next);
        let k = put(w as u64, &mut self.arena.as_flattened_mut()[n as usize * UNIT + HDR..]);
        self.arena[n as usize][8] = k as u8 | if two { TWO_UNITS } else { 0 };
        n
    }

    /// Empties the list at `head`, appending its ids to `out` (newest node first, so not in
    /// order, and possibly with repeats across nodes).
    pub fn drain(&mut self, head: &mut u32, out: &mut Vec<u32>) {
        let one = self.walk(head, |b| {
            let mut pos = 0;
            let mut w = get(b, &mut pos) as i64;
            out.push(w as u32);
            while pos < b.len() {
                w += unzigzag(get(b, &mut pos));
                out.push(w as u32);
            }
        });
        out.extend(one);
    }

    /// Empties the list at `head`.
    pub fn clear(&mut self, head: &mut u32) {
        self.walk(head, |_| ());
    }

    /// Empties the list at `head`: shows each node's payload to `node` and frees the nodes;
    /// returns the id of a list of one held in its head.
    fn walk(&mut self, head: &mut u32, mut node: impl FnMut(&[u8])) -> Option<u32> {
        let h = std::mem::replace(head, NIL);
        if h == NIL {
            return None;
        }
        if h & ONE != 0 {
            return Some(h & !ONE);
        }
        let mut n = h;
        while n != NIL {
            let (len, two) = self.fill(n);
            let at = n as usize * UNIT + HDR;
            node(&self.arena.as_flattened()[at..at + len]);
            let next = self.next(n);
            self.set_next(n, self.free[two as usize]);
            self.free[two as usize] = n;
            n = next;
        }
        None
    }

    /// Bytes of the arena (for the timing report).
    pub fn bytes(&self) -> usize {
        self.arena.len() * UNIT
    }

    /// Bytes of the arena's free nodes (for the timing report).
    pub fn free_bytes(&self) -> usize {
        let mut units = 0;
        for (k, &f) in self.free.iter().enumerate() {
            let mut n = f;
            while n != NIL {
                units += k + 1;
                n = self.next(n);
            }
        }
        units * UNIT
    }

    /// Units of the arena.
    #[cfg(test)]
    fn units(&self) -> usize {
        self.arena.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        let mut b = [0u8; 10];
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX >> 1] {
            let n = put(v, &mut b);
            assert_eq!(n, varint_len(v));
            let mut pos = 0;
            assert_eq!((get(&b, &mut pos), pos), (v, n));
        }
        for d in [0i64, 1, -1, 63, -64, u32::MAX as i64, -(u32::MAX as i64)] {
            assert_eq!(unzigzag(zigzag(d)), d);
        }
    }

    /// Every list holds exactly the ids added (with repeats only of a non-last id), through
    /// every shape: empty, one id in the head, one small node, many nodes; ids up and down,
    /// near the limits of the head's tag and of the varints.
    #[test]
    fn lists_hold_what_was_added_and_reuse_nodes() {
        let mut lists = Lists::new();
        let cases: Vec<Vec<u32>> = vec![
            vec![],
            vec![7],
            vec![7, 7],
            vec![ONE - 2],
            vec![ONE - 1, ONE, u32::MAX - 1, 0],
            vec![3, 5],
            vec![ONE - 2, 0], // the second gap does not fit the first node
            vec![u32::MAX - 1, 0, 1],
            (0..500u32).map(|i| (i * 7919) % 100_003).chain([5, 5, u32::MAX - 1, 0]).collect(),
        ];
        let mut heads = vec![NIL; cases.len()];
        let mut units = 0;
        for round in 0..2 {
            for (h, ids) in heads.iter_mut().zip(&cases) {
                ids.iter().for_each(|&w| lists.add(h, w));
            }
            if round == 0 {
                units = lists.units();
                assert_eq!(heads[1], ONE | 7, "a list of one is its head");
                assert_eq!(heads[0], NIL);
            } else {
                assert_eq!(lists.units(), units, "the second round reuses the freed nodes");
            }
            for (h, ids) in heads.iter_mut().zip(&cases) {
                let mut got = Vec::new();
                lists.drain(h, &mut got);
                assert_eq!(*h, NIL);
                got.sort_unstable();
                got.dedup();
                let mut want = ids.clone();
                want.sort_unstable();
                want.dedup();
                assert_eq!(got, want, "round {round}");
            }
        }
        // The long list packs several ids per unit.
        assert!(lists.units() < 504 / 4, "{} units", lists.units());
        let mut h = NIL;
        lists.add(&mut h, 9);
        lists.clear(&mut h);
        assert_eq!(h, NIL);
    }
}
