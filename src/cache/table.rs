//! The word cache's open-addressing tables: packed keys (a `u128` for pieces of 1..=15 bytes, a
//! [`Key32`] for 16..=31) mapped to four `u32`s (up to three ids inline, or an arena reference).
//!
//! Invariants: the all-zero key is the empty slot (a cached piece's key has a non-zero length
//! byte); the capacity is a power of two; `len` stays at most half the capacity, so a probe
//! always ends at an empty slot. A 1-slot table is the disabled sentinel (it never holds a key).

use super::pages::Slots;
use crate::keys::{load15, mix128};

/// Packed key of a piece of 16..=31 bytes: the bytes, zero padded, length in the last byte.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Key32([u64; 4]);

#[inline(always)]
pub fn pack32(b: &[u8]) -> Key32 {
    debug_assert!(b.len() >= 16 && b.len() < 32);
    let w0 = u64::from_le_bytes(b[..8].try_into().unwrap());
    let w1 = u64::from_le_bytes(b[8..16].try_into().unwrap());
    let (w2, w3) = load15(&b[16..]);
    Key32([w0, w1, w2, w3 | ((b.len() as u64) << 56)])
}

/// Keys of the open-addressing tables. The all-zero key marks an empty slot (a cached piece
/// has length >= 2, so its packed key always has a non-zero length byte).
pub trait TableKey: Copy + Default + PartialEq {
    fn mix(&self) -> u64;
    fn is_empty(&self) -> bool;
}

impl TableKey for u128 {
    #[inline(always)]
    fn mix(&self) -> u64 {
        mix128(*self)
    }
    #[inline(always)]
    fn is_empty(&self) -> bool {
        *self == 0
    }
}

impl TableKey for Key32 {
    #[inline(always)]
    fn mix(&self) -> u64 {
        let [a, b, c, d] = self.0;
        let x = (a ^ b.rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (x ^ c.rotate_left(41) ^ d.rotate_left(7)).wrapping_mul(0xBF58_476D_1CE4_E5B9)
    }
    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.0[3] == 0
    }
}

/// Open-addressing table (linear probing) from packed piece keys to inline results: a probe is
/// a multiply, a shift and (almost always) one entry holding both the key and the ids, so a hit
/// is one memory access and no pointer chase (hashbrown would add a control-byte group and, for
/// boxed keys, a compare elsewhere in memory). It grows at 1/4 load while the cache budget
/// allows, and never passes 1/2 (see [`super::WordCache::put`]).
pub struct Table<K: TableKey> {
    pub entries: Slots<Entry<K>>,
    pub mask: usize,
    /// 64 - log2(capacity) (63 for the 1-slot table, whose mask makes every slot 0).
    pub shift: u32,
    pub len: usize,
    /// The longest distance of an entry from its home slot (what growing in place needs).
    pub far: usize,
}

#[derive(Clone, Copy, Default)]
#[repr(C, align(16))]
pub struct Entry<K: TableKey> {
    pub key: K,
    pub val: [u32; 4],
}

impl<K: TableKey> Table<K> {
    /// `cap` is rounded up to a power of two; a capacity of 1 is a disabled (always empty) table.
    pub fn with_capacity_pow2(cap: usize) -> Self {
        let cap = cap.next_power_of_two().max(1);
        // SAFETY: an all-zero `Entry` is the empty entry (zero key, zero ids; no padding).
        let shift = 64 - cap.trailing_zeros().max(1);
        Table { entries: unsafe { Slots::zeroed(cap) }, mask: cap - 1, shift, len: 0, far: 0 }
    }

    /// The home slot: the top bits of the multiplicative hash (its best-mixed bits).
    #[inline(always)]
    pub fn slot(&self, key: &K) -> usize {
        (key.mix() >> self.shift) as usize & self.mask
    }

    /// Asks for the cache line of `key`'s first probe (a hint: no effect on the contents), and
    /// returns that slot.
    #[inline(always)]
    pub fn prefetch(&self, key: &K) -> usize {
        let i = self.slot(key);
        let p = self.entries.as_ptr().wrapping_add(i) as *const u8;
        crate::memory::prefetch(p);
        if std::mem::size_of::<Entry<K>>() > 32 {
            // A 48-byte entry may straddle two cache lines.
            crate::memory::prefetch(p.wrapping_add(std::mem::size_of::<Entry<K>>() - 1));
        }
        i
    }

    #[inline(always)]
    pub fn get(&self, key: &K) -> Option<&[u32; 4]> {
        self.get_from(key, self.slot(key))
    }

    /// [`Self::get`] with the slot already computed. A stale slot (the table grew or was wiped
    /// since) is harmless: the probe from there finds the key or an empty entry, so at worst a
    /// present key reads as missing and is encoded and inserted again (at its right slot).
    #[inline(always)]
    pub fn get_from(&self, key: &K, slot: usize) -> Option<&[u32; 4]> {
        let mut i = slot & self.mask;
        loop {
            // SAFETY: i is masked by `mask` = entries.len() - 1 (a power of two minus one).
            let e = unsafe { self.entries.get_unchecked(i) };
            if e.key == *key {
                return Some(&e.val);
            }
            if e.key.is_empty() {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    pub fn insert(&mut self, key: K, val: [u32; 4]) {
        debug_assert!(!key.is_empty() && (self.len + 1) * 2 <= self.entries.len());
        let home = self.slot(&key);
        let mut i = home;
        loop {
            let e = &mut self.entries[i];
            if e.key == key {
                e.val = val;
                return;
            }
            if e.key.is_empty() {
                e.key = key;
                e.val = val;
                self.len += 1;
                self.far = self.far.max(i.wrapping_sub(home) & self.mask);
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// At 1/4 load: grow now if the budget allows it (fewer second probes, [log](../../docs/performance.md#word-cache)).
    pub fn sparse_full(&self) -> bool {
        (self.len + 1) * 4 > self.entries.len()
    }

    /// At 1/2 load: grow or wipe, whatever the budget (the hard limit).
    pub fn full(&self) -> bool {
        (self.len + 1) * 2 > self.entries.len()
    }

    pub fn bytes(&self) -> usize {
        if self.entries.len() <= 1 {
            return 0; // the disabled sentinel
        }
        self.entries.len() * std::mem::size_of::<Entry<K>>()
    }

    /// Doubles the table; the disabled 1-slot sentinel grows straight to `first` slots.
    pub fn grow(&mut self, first: usize) {
        if self.entries.len() > 1 && self.grow_in_place() {
            return;
        }
        let cap = if self.entries.len() <= 1 { first } else { self.entries.len() * 2 };
        let mut bigger = Table::with_capacity_pow2(cap);
        for e in self.entries.iter() {
            if !e.key.is_empty() {
                bigger.insert(e.key, e.val);
            }
        }
        *self = bigger;
    }

    /// Doubles a mapped table keeping its pages ([`Slots::grow_in_place`]: only the added half
    /// is new memory) and rehashes it where it lies. A home slot is the hash's top bits, so an
    /// entry's new home is twice its old one, or one more: walking the old runs of entries from
    /// the top down, each entry moves above its old slot, never onto one not yet walked.
    /// Only the first slots, up to twice the longest probe (with the probes that wrapped past
    /// the end), could be reached from below: they are set aside first and inserted last, as is
    /// an entry whose new probe would wrap. False (nothing changed) when it cannot be done.
    fn grow_in_place(&mut self) -> bool {
        let n = self.entries.len();
        let mut m = (2 * self.far + 1).min(n);
        while m < n && !self.entries[m].key.is_empty() {
            m += 1;
        }
        if m >= n || !self.entries.is_mapped() || !self.entries.grow_in_place(2 * n) {
            return false;
        }
        let len = self.len;
        (self.mask, self.shift, self.far) = (2 * n - 1, self.shift - 1, 0);
        let mut aside: Vec<Entry<K>> = Vec::new();
        for e in &mut self.entries[..m] {
            if !e.key.is_empty() {
                aside.push(std::mem::take(e));
            }
        }
        // Runs of occupied slots from the top down, each one in its own order: where two entries
        // share a new home, the one inserted first (a frequent word, met early) keeps the home.
        let mut run: Vec<Entry<K>> = Vec::new();
        let mut p = n;
        while p > m {
            p -= 1;
            if self.entries[p].key.is_empty() {
                continue;
            }
            let mut a = p;
            while a > m && !self.entries[a - 1].key.is_empty() {
                a -= 1;
            }
            run.clear();
            run.extend(self.entries[a..=p].iter_mut().map(std::mem::take));
            for &e in &run {
                let home = self.slot(&e.key);
                match (home..2 * n).find(|&q| self.entries[q].key.is_empty()) {
                    Some(q) => {
                        debug_assert!(q > a);
                        self.entries[q] = e;
                        self.far = self.far.max(q - home);
                    }
                    None => aside.push(e),
                }
            }
            p = a;
        }
        self.len -= aside.len();
        for e in aside {
            self.insert(e.key, e.val);
        }
        debug_assert_eq!(self.len, len);
        true
    }

    /// A copy of the table (same capacity and slots: a copy of its memory).
    pub fn copy(&self) -> Self {
        // SAFETY: an all-zero `Entry` is the empty entry (see `with_capacity_pow2`).
        let mut entries = unsafe { Slots::zeroed(self.entries.len()) };
        entries.copy_from_slice(&self.entries);
        Table { entries, mask: self.mask, shift: self.shift, len: self.len, far: self.far }
    }

    pub fn clear(&mut self) {
        self.entries.iter_mut().for_each(|e| *e = Entry::default());
        (self.len, self.far) = (0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growing_in_place_keeps_every_entry_findable() {
        // Mapped tables (>= 4 MiB) grow in place; keys clustered by a poor spread of values too.
        for (start, n, step) in [(1usize << 17, 60_000u128, 1u128), (1 << 17, 65_000, 1 << 64), (1 << 18, 131_000, 977)] {
            let mut t: Table<u128> = Table::with_capacity_pow2(start);
            let keys: Vec<u128> = (1..=n).map(|k| k * step + (k << 120)).collect();
            for (i, &k) in keys.iter().enumerate() {
                if (t.len + 1) * 2 > t.entries.len() {
                    let before = t.entries.len();
                    assert!(t.grow_in_place(), "a mapped table of {before} slots did not grow in place");
                    assert_eq!(t.entries.len(), 2 * before);
                }
                t.insert(k, [i as u32, 0, 0, 1]);
            }
            assert!(t.grow_in_place() && t.entries.is_mapped());
            assert_eq!(t.len, keys.len());
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(t.get(k).map(|v| v[0]), Some(i as u32), "key #{i}");
            }
            let far = t.entries.iter().enumerate().filter(|(_, e)| e.key != 0)
                .map(|(q, e)| q.wrapping_sub(t.slot(&e.key)) & t.mask).max().unwrap();
            assert_eq!(far, t.far);
            assert!(t.get(&(u128::MAX - 5)).is_none());
        }
    }

    #[test]
    fn growing_in_place_leaves_the_first_inserted_of_two_at_their_home() {
        let mut t: Table<u128> = Table::with_capacity_pow2(1 << 17);
        let mut seen = std::collections::HashMap::new();
        let (a, b) = (1u128..)
            .find_map(|k| {
                let key = (k << 64) | 1;
                seen.insert(key.mix() >> (t.shift - 1), key).map(|first| (first, key))
            })
            .unwrap();
        t.insert(a, [1, 0, 0, 1]);
        t.insert(b, [2, 0, 0, 1]);
        for k in 1..20_000u128 {
            t.insert(k << 100 | 7, [3, 0, 0, 1]);
        }
        assert!(t.grow_in_place());
        let home = t.slot(&a);
        assert_eq!((t.slot(&b), t.entries[home].key), (home, a), "the word inserted first keeps the home slot");
        assert_eq!((t.get(&a).unwrap()[0], t.get(&b).unwrap()[0]), (1, 2));
    }

    #[test]
    fn packing32_matches_a_plain_copy() {
        for n in 16..32usize {
            let b: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(91).wrapping_add(3)).collect();
            let mut buf = [0u8; 32];
            buf[..n].copy_from_slice(&b);
            buf[31] = n as u8;
            let w = |i: usize| u64::from_le_bytes(buf[8 * i..8 * i + 8].try_into().unwrap());
            assert!(pack32(&b) == Key32([w(0), w(1), w(2), w(3)]), "n={n}");
        }
    }
}
