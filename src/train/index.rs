//! A pair index of the merge loop: each pair maps to a `u32`, the dense id of a *full* pair
//! (count, word lists and heap entries in `Pairs`' tables) or the count of a *quiet* one (one
//! index each), and counts can be changed in bulk ([`Index::add_all`]).
//!
//! On a big corpus most pairs are quiet: a long-tail word, seen a few times, forms pairs no
//! other word has, which never come near the top of the heap. Storing them as 12 bytes here
//! instead of a full entry (tables, heap entry, list) is most of the merge loop's memory.
//!
//! Open addressing with linear probing in 64 parts chosen by the hash's top bits, each part
//! growing on its own (so a growth step doubles one 64th of the index, not all of it); removal
//! shifts the following entries back, so there are no tombstones.
//! Bytes per pair: [log](../../docs/performance.md#memory-of-the-merge-loop).

use rayon::prelude::*;

/// Full pairs' ids and quiet pairs' counts stay below this.
pub const QUIET: u32 = 1 << 31;
const EMPTY: u32 = u32::MAX;
const PART_BITS: u32 = 6;

#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    left: u32,
    right: u32,
    val: u32,
}

const FREE: Slot = Slot { left: EMPTY, right: EMPTY, val: 0 };

struct Part {
    slots: Vec<Slot>,
    len: usize,
}

pub struct Index {
    parts: Vec<Part>,
    len: usize,
}

/// Where a pair is (or would go): part and slot.
#[derive(Clone, Copy)]
pub struct At {
    part: u32,
    slot: u32,
}

#[inline]
fn hash(a: u32, b: u32) -> u64 {
    ((a as u64) << 32 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(26).wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

impl Part {
    /// The pair's home slot: the hash's bits below the part's (the size is a power of two).
    #[inline]
    fn home(&self, h: u64) -> usize {
        ((h << PART_BITS) >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    /// Puts a pair that is not here yet (`h` its hash), growing at 3/4 load.
    fn put_new(&mut self, h: u64, a: u32, b: u32, val: u32) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        while self.slots[i].left != EMPTY {
            debug_assert!((self.slots[i].left, self.slots[i].right) != (a, b), "a new pair");
            i = (i + 1) & mask;
        }
        self.slots[i] = Slot { left: a, right: b, val };
        self.len += 1;
        if self.len * 4 > self.slots.len() * 3 {
            self.grow();
        }
    }

    /// Adds `d` to the count of `(a, b)` (`h` its hash): see [`Index::add_all`].
    fn add(&mut self, h: u64, a: u32, b: u32, d: i64) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        loop {
            let s = &mut self.slots[i];
            if s.left == a && s.right == b {
                let c = s.val as i64 + d;
                if c <= 0 {
                    self.remove_slot(i);
                } else {
                    debug_assert!(c < QUIET as i64, "a quiet count stays below the threshold");
                    s.val = c as u32;
                }
                return;
            }
            if s.left == EMPTY {
                if d > 0 {
                    *s = Slot { left: a, right: b, val: d as u32 };
                    self.len += 1;
                    if self.len * 4 > self.slots.len() * 3 {
                        self.grow();
                    }
                }
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Empties slot `hole`; the entries after it in its run move back to keep every entry
    /// reachable from its home slot.
    fn remove_slot(&mut self, mut hole: usize) {
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s.left == EMPTY {
                break;
            }
            let home = self.home(hash(s.left, s.right));
            // `s` may fill the hole unless its home lies cyclically in (hole, j].
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = FREE;
        self.len -= 1;
    }

    /// Doubles the slots, every pair moved to its new home.
    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, vec![FREE; n]);
        let mask = self.slots.len() - 1;
        for s in old.into_iter().filter(|s| s.left != EMPTY) {
            let mut i = self.home(hash(s.left, s.right));
            while self.slots[i].left != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }
}

impl Index {
    pub fn new() -> Self {
        Index { parts: (0..1 << PART_BITS).map(|_| Part { slots: vec![FREE; 16], len: 0 }).collect(), len: 0 }
    }

    /// Slots per part for `n` pairs (at most 3/4 full).
    fn room(n: usize) -> usize {
        (n.div_ceil(1 << PART_BITS) * 4 / 3 + 1).next_power_of_two().max(16)
    }

    /// An index of distinct pairs, each `(a, b, value)` (from several lists), with room for
    /// them all: on `pool`'s threads, each of which fills its own parts, taking its pairs in the
    /// lists' order (so the slots, and the order in which a walk over them meets the pairs, do
    /// not depend on the threads); a batch of slots is asked for ahead of the inserts (a bulk
    /// load of millions of pairs is a cache miss per pair).
    pub fn of_new(lists: &[Vec<(u32, u32, u32)>], pool: Option<&rayon::ThreadPool>) -> Self {
        const AHEAD: usize = 16;
        let mut index = Self::new();
        let room = Self::room(lists.iter().map(Vec::len).sum());
        let per = (1 << PART_BITS) / pool.map_or(1, |p| p.current_num_threads().next_power_of_two().min(1 << PART_BITS));
        let fill = |(k, parts): (usize, &mut [Part])| {
            parts.iter_mut().for_each(|p| p.slots = vec![FREE; room]); // (each thread faults in its own)
            let first = k * per;
            let mine = |h: u64| ((h >> (64 - PART_BITS)) as usize).wrapping_sub(first) < per;
            let mut ring = [(0u64, 0u32, 0u32, 0u32); AHEAD];
            let mut n = 0usize;
            let put = |parts: &mut [Part], (h, a, b, v): (u64, u32, u32, u32)| parts[(h >> (64 - PART_BITS)) as usize - first].put_new(h, a, b, v);
            for &(a, b, v) in lists.iter().flatten() {
                let h = hash(a, b);
                if !mine(h) {
                    continue;
                }
                if n >= AHEAD {
                    put(parts, ring[n % AHEAD]);
                }
                let part = &parts[(h >> (64 - PART_BITS)) as usize - first];
                crate::memory::prefetch(part.slots.as_ptr().wrapping_add(part.home(h)));
                ring[n % AHEAD] = (h, a, b, v);
                n += 1;
            }
            for k in n.saturating_sub(AHEAD)..n {
                put(parts, ring[k % AHEAD]);
            }
        };
        match pool {
            Some(pool) => pool.install(|| index.parts.par_chunks_mut(per).enumerate().for_each(fill)),
            None => fill((0, &mut index.parts[..])),
        }
        index.len = index.parts.iter().map(|p| p.len).sum();
        index
    }

    /// Asks for the cache line of the pair's home slot (a hint).
    #[inline]
    pub fn prefetch(&self, a: u32, b: u32) {
        let h = hash(a, b);
        let part = &self.parts[(h >> (64 - PART_BITS)) as usize];
        crate::memory::prefetch(part.slots.as_ptr().wrapping_add(part.home(h)));
    }

    #[cfg(test)]
    pub fn clone_for_test(&self) -> Index {
        Index { parts: self.parts.iter().map(|p| Part { slots: p.slots.clone(), len: p.len }).collect(), len: self.len }
    }

    /// Pairs held (full and quiet).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn bytes(&self) -> usize {
        self.parts.iter().map(|p| p.slots.len() * std::mem::size_of::<Slot>()).sum()
    }

    /// The pair's slot: `Ok` if it is there, else `Err` with the free slot it would take.
    #[inline]
    pub fn find(&self, a: u32, b: u32) -> Result<At, At> {
        let h = hash(a, b);
        let pi = (h >> (64 - PART_BITS)) as usize;
        let part = &self.parts[pi];
        let mask = part.slots.len() - 1;
        let mut i = part.home(h);
        loop {
            let s = &part.slots[i];
            if s.left == a && s.right == b {
                return Ok(At { part: pi as u32, slot: i as u32 });
            }
            if s.left == EMPTY {
                return Err(At { part: pi as u32, slot: i as u32 });
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    pub fn get(&self, at: At) -> u32 {
        self.parts[at.part as usize].slots[at.slot as usize].val
    }

    #[inline]
    pub fn set(&mut self, at: At, val: u32) {
        self.parts[at.part as usize].slots[at.slot as usize].val = val;
    }

    /// The value of `(a, b)`, if it is there.
    #[inline]
    pub fn value(&self, a: u32, b: u32) -> Option<u32> {
        self.find(a, b).ok().map(|at| self.get(at))
    }

    /// Puts `(a, b)` in the free slot `at` (from [`find`](Self::find), with no change since).
    /// Any `At` held before is void afterwards (the part may have grown).
    pub fn insert(&mut self, at: At, a: u32, b: u32, val: u32) {
        debug_assert!(a != EMPTY);
        let part = &mut self.parts[at.part as usize];
        part.slots[at.slot as usize] = Slot { left: a, right: b, val };
        part.len += 1;
        self.len += 1;
        // Load up to 3/4.
        if part.len * 4 > part.slots.len() * 3 {
            part.grow();
        }
    }

    /// Sets `(a, b)` to `val`, inserting it if it is not there.
    pub fn put(&mut self, a: u32, b: u32, val: u32) {
        match self.find(a, b) {
            Ok(at) => self.set(at, val),
            Err(at) => self.insert(at, a, b, val),
        }
    }

    /// Removes the pair at `at`.
    pub fn remove(&mut self, at: At) {
        self.parts[at.part as usize].remove_slot(at.slot as usize);
        self.len -= 1;
    }

    /// Adds `d` to the count of `(a, b)`, as one op of [`add_all`](Self::add_all).
    pub fn add_one(&mut self, a: u32, b: u32, d: i64) {
        let h = hash(a, b);
        let part = &mut self.parts[(h >> (64 - PART_BITS)) as usize];
        let before = part.len;
        part.add(h, a, b, d);
        self.len = self.len + part.len - before;
    }

    /// Removes `(a, b)`, returning its value, if it is here.
    pub fn take(&mut self, a: u32, b: u32) -> Option<u32> {
        let at = self.find(a, b).ok()?;
        let v = self.get(at);
        self.remove(at);
        Some(v)
    }

    /// Whether no pair is here.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds each `(a, b, d)` of `ops` in turn to the value of `(a, b)`, a count: a pair that
    /// is not here comes in if `d > 0` (else nothing happens), one whose count falls to 0 or
    /// below leaves. The ops are sorted by part first (a part is a 64th of the index, near
    /// the cache where a random op is a miss), each part's in their order, on `pool`'s
    /// threads. `ops` is emptied; `sorted` is scratch, kept for the next call.
    pub fn add_all(&mut self, ops: &mut Vec<(u32, u32, i64)>, sorted: &mut Vec<(u32, u32, i64)>, pool: Option<&rayon::ThreadPool>) {
        const AHEAD: usize = 8;
        let part_of = |&(a, b, _): &(u32, u32, i64)| (hash(a, b) >> (64 - PART_BITS)) as usize;
        let mut ends = [0usize; 1 << PART_BITS];
        ops.iter().for_each(|o| ends[part_of(o)] += 1);
        let mut at = 0;
        for e in ends.iter_mut() {
            at += *e;
            *e = at;
        }
        sorted.clear();
        sorted.resize(ops.len(), (0, 0, 0));
        let mut fill = ends;
        for o in ops.iter().rev() {
            let p = part_of(o);
            fill[p] -= 1;
            sorted[fill[p]] = *o;
        }
        ops.clear();
        let add = |(k, part): (usize, &mut Part)| {
            let mine = &sorted[if k == 0 { 0 } else { ends[k - 1] }..ends[k]];
            for (i, &(a, b, d)) in mine.iter().enumerate() {
                if let Some(&(x, y, _)) = mine.get(i + AHEAD) {
                    crate::memory::prefetch(part.slots.as_ptr().wrapping_add(part.home(hash(x, y))));
                }
                part.add(hash(a, b), a, b, d);
            }
        };
        match pool {
            Some(pool) if sorted.len() >= 1 << 16 => pool.install(|| self.parts.par_iter_mut().enumerate().for_each(add)),
            _ => self.parts.iter_mut().enumerate().for_each(add),
        }
        self.len = self.parts.iter().map(|p| p.len).sum();
    }

    /// Calls `f(left, right, &mut value)` for every pair.
    pub fn for_each(&mut self, mut f: impl FnMut(u32, u32, &mut u32)) {
        for part in &mut self.parts {
            for s in part.slots.iter_mut().filter(|s| s.left != EMPTY) {
                f(s.left, s.right, &mut s.val);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_finds_and_removes_like_a_map() {
        let mut ix = Index::new();
        let mut model = std::collections::HashMap::new();
        let mut x = 12345u64;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (a, b) = ((x % 300) as u32, (x >> 20) as u32 % 300);
            if x % 3 == 0 {
                if let Ok(at) = ix.find(a, b) {
                    ix.remove(at);
                    model.remove(&(a, b));
                }
            } else {
                ix.put(a, b, step);
                model.insert((a, b), step);
            }
        }
        assert_eq!(ix.len(), model.len());
        for (&(a, b), &v) in &model {
            assert_eq!(ix.value(a, b), Some(v));
        }
        let mut seen = 0;
        ix.for_each(|a, b, v| {
            assert_eq!(model.get(&(a, b)), Some(&*v));
            seen += 1;
        });
        assert_eq!(seen, model.len());
        assert!(ix.value(301, 0).is_none());
    }

    #[test]
    fn counts_added_in_bulk_equal_one_by_one_on_any_threads() {
        // 200,000 ops (past the pool's 65,536) on 3,000 pairs, rises and falls, some falling
        // below 0 or on pairs not there; the same ops in bulk (serial and on 2 threads, in two
        // batches) and one by one, against a map.
        let mut next = crate::train::tests::draws(0xA076_1D64_78BD_642F);
        let ops: Vec<(u32, u32, i64)> = (0..200_000).map(|_| (next(60) as u32, next(50) as u32, next(7) as i64 - 3)).collect();
        let (mut model, mut gone) = (std::collections::BTreeMap::new(), 0);
        for &(a, b, d) in &ops {
            match model.get(&(a, b)).map(|&c: &i64| c + d) {
                Some(c) if c > 0 => _ = model.insert((a, b), c),
                Some(_) => {
                    model.remove(&(a, b));
                    gone += 1;
                }
                None if d > 0 => _ = model.insert((a, b), d),
                None => {}
            }
        }
        assert!(gone > 1000 && !model.is_empty() && model.len() < 3000, "pairs left {}, gone {gone}", model.len());
        let entries = |ix: &mut Index| {
            let mut out = Vec::new();
            ix.for_each(|a, b, v| out.push(((a, b), *v as i64)));
            out.sort();
            assert_eq!(ix.len(), out.len());
            out
        };
        let want: Vec<((u32, u32), i64)> = model.into_iter().collect();
        let mut one = Index::new();
        ops.iter().for_each(|&(a, b, d)| one.add_one(a, b, d));
        assert_eq!(entries(&mut one), want);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for pool in [None, Some(&pool)] {
            let (mut ix, mut sorted) = (Index::new(), Vec::new());
            for half in ops.chunks(100_000) {
                ix.add_all(&mut half.to_vec(), &mut sorted, pool);
            }
            assert_eq!(entries(&mut ix), want);
        }
    }
}
