//! The counter's tables: distinct pre-tokens and their counts while a shard counts.
//!
//! * **Short words** (1..=15 bytes, [`pack`](crate::keys::pack)ed into a `u128`): 24-byte slots
//!   (key, count) in open addressing with linear probing, the key 0 marking an empty slot (a
//!   packed key's top byte is its length, never 0). The first probe almost always decides.
//! * **Long words**: 16-byte slots (24 bits of hash, which place the slot, and the word's
//!   offset in one arena of length-prefixed bytes; a count), the bytes stored once, no
//!   allocation per word, never read again to grow.
//! * **64 parts** by the hash's top bits, each growing alone at load 3/4, by 2 while small and
//!   by 5/4 once big: a big table holds its keys at load 0.6 to 0.75 (32 to 40 bytes per short
//!   word), and a growth step copies a 64th of it, so old and new tables of a whole shard never
//!   coexist. A part's slot is the next hash bits scaled to its capacity (any capacity).
//!
//! Memory per distinct word and why: [log](../../docs/performance.md#memory-of-counting).

use crate::keys::{mix128, pack};
use crate::memory::Zeroable;
use crate::varint::{get, put};

const PART_BITS: u32 = 6;
pub const PARTS: usize = 1 << PART_BITS;

/// Grows a part at load 3/4: by 2 while it is small (fewer, cheaper steps, and a table of a
/// typical corpus stays at its fastest load), by 5/4 from [`SLOW_GROWTH`] slots on.
#[inline(always)]
fn full(len: usize, cap: usize) -> bool {
    len * 4 > cap * 3
}

/// 64 Ki slots: a part of 1.5 MiB of short words, a shard of ~4 M of them.
const SLOW_GROWTH: usize = 1 << 16;

fn grown(cap: usize) -> usize {
    if cap < SLOW_GROWTH { cap * 2 } else { cap + cap / 4 }
}

/// The smallest part (so that a growth step adds at least 4 slots).
const MIN_CAP: usize = 16;

/// The slot of hash `h` in a part of `cap` slots: the bits below the part's, scaled.
#[inline(always)]
fn home(h: u64, cap: usize) -> usize {
    (((h << PART_BITS) as u128 * cap as u128) >> 64) as usize
}

/// A short word's slot; also the gathered form, with the key byte-swapped (so that it sorts as
/// the bytes do: the zero-padded bytes big-endian, then the length, a prefix first).
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub struct Short {
    lo: u64,
    hi: u64,
    pub count: u64,
}

// SAFETY: three integers; all zeros is an empty slot.
unsafe impl Zeroable for Short {}

impl Short {
    #[inline(always)]
    pub fn key(&self) -> u128 {
        ((self.hi as u128) << 64) | self.lo as u128
    }

    fn of(key: u128, count: u64) -> Self {
        Short { lo: key as u64, hi: (key >> 64) as u64, count }
    }
}

struct ShortPart {
    slots: Vec<Short>,
    len: usize,
}

impl ShortPart {
    fn new(cap: usize) -> Self {
        ShortPart { slots: vec![Short::default(); cap.max(MIN_CAP)], len: 0 }
    }

    #[inline(always)]
    fn add(&mut self, h: u64, key: u128, n: u64) {
        let (lo, hi) = (key as u64, (key >> 64) as u64);
        let cap = self.slots.len();
        let mut i = home(h, cap);
        loop {
            // SAFETY: `home` is below `cap` (a fraction of it), and `i` wraps at `cap`.
            let s = unsafe { self.slots.get_unchecked_mut(i) };
            if s.lo == lo && s.hi == hi {
                s.count = s.count.saturating_add(n);
                return;
            }
            if s.hi == 0 {
                *s = Short { lo, hi, count: n };
                self.len += 1;
                if full(self.len, cap) {
                    self.grow();
                }
                return;
            }
            i += 1;
            if i == cap {
                i = 0;
            }
        }
    }

    #[inline(never)]
    fn grow(&mut self) {
        let mut bigger = ShortPart::new(grown(self.slots.len()));
        for s in self.slots.iter().filter(|s| s.hi != 0) {
            bigger.add(mix128(s.key()), s.key(), s.count);
        }
        *self = bigger;
    }
}

/// Counts of short words (see the module doc).
pub struct ShortTable {
    parts: [ShortPart; PARTS],
}

impl ShortTable {
    /// A table of about `cap` slots.
    pub fn with_capacity(cap: usize) -> Self {
        ShortTable { parts: std::array::from_fn(|_| ShortPart::new(cap / PARTS)) }
    }

    #[inline(always)]
    pub fn add(&mut self, key: u128, n: u64) {
        debug_assert!(key >> 120 != 0);
        let h = mix128(key);
        // SAFETY: the top PART_BITS bits of a u64 are below PARTS.
        let part = unsafe { self.parts.get_unchecked_mut((h >> (64 - PART_BITS)) as usize) };
        part.add(h, key, n);
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len).sum()
    }

    /// Asks for the cache line of `key`'s first probe (a hint: no effect on the contents). A
    /// slot may straddle two lines; asking for the second too was no faster (see the log).
    #[inline(always)]
    pub fn prefetch(&self, key: u128) {
        let h = mix128(key);
        // SAFETY: as in `add`.
        let part = unsafe { self.parts.get_unchecked((h >> (64 - PART_BITS)) as usize) };
        crate::memory::prefetch(part.slots.as_ptr().wrapping_add(home(h, part.slots.len())));
    }

    /// Appends every word to `out` in the gathered form (key byte-swapped); with `free`, each
    /// part is freed as soon as it is copied.
    pub fn gather(&mut self, out: &mut Vec<Short>, free: bool) {
        for part in self.parts.iter_mut() {
            out.extend(part.slots.iter().filter(|s| s.hi != 0).map(|s| Short::of(s.key().swap_bytes(), s.count)));
            if free {
                *part = ShortPart::new(0);
            }
        }
    }

    #[cfg(test)]
    pub fn get(&self, key: u128) -> Option<u64> {
        let h = mix128(key);
        let part = &self.parts[(h >> (64 - PART_BITS)) as usize];
        let mut i = home(h, part.slots.len());
        while part.slots[i].hi != 0 {
            if part.slots[i].key() == key {
                return Some(part.slots[i].count);
            }
            i = (i + 1) % part.slots.len();
        }
        None
    }
}

impl Default for ShortTable {
    fn default() -> Self {
        // 64 Ki slots (1.5 MiB): past the warm-up growth steps for any real corpus shard.
        ShortTable::with_capacity(1 << 16)
    }
}

/// A long word's slot: `tag << OFFSET_BITS | offset` of its length-prefixed bytes in the
/// arena, and its count (0: empty). The tag is the 24 hash bits below the part's: they place
/// the word in its part (so a growth step never reads the arena to hash a word again) and
/// tell most words apart before their bytes are compared.
#[derive(Clone, Copy, Default)]
struct Long {
    at: u64,
    count: u64,
}

pub(super) const OFFSET_BITS: u32 = 40;
const TAG_BITS: u32 = 64 - OFFSET_BITS;
/// Where [`LongTable::parts`] puts its mark (the bits between it and the offset are free).
pub(super) const MARK_SHIFT: u32 = 48;

/// The tag of hash `h` (see [`Long`]).
#[inline(always)]
fn tag_of(h: u64) -> u64 {
    (h << PART_BITS) >> (64 - TAG_BITS)
}

/// A tag's slot in a part of `cap` slots (as [`home`], on the tag's bits only).
#[inline(always)]
fn tag_home(tag: u64, cap: usize) -> usize {
    (((tag << (64 - TAG_BITS)) as u128 * cap as u128) >> 64) as usize
}

/// A 64-bit hash of any bytes: [`mix128`] over packed 15-byte chunks, each folded with the
/// hash so far (its good, high bits rotated into the low half).
pub fn hash_bytes(b: &[u8]) -> u64 {
    b.chunks(15).fold(0u64, |h, c| mix128(pack(c) ^ h.rotate_left(32) as u128))
}

/// Counts of long words (see the module doc).
pub struct LongTable {
    parts: [Vec<Long>; PARTS],
    lens: [usize; PARTS],
    /// Each word once: its length as a LEB128 varint, then its bytes.
    arena: Vec<u8>,
}

impl Default for LongTable {
    fn default() -> Self {
        LongTable { parts: std::array::from_fn(|_| vec![Long::default(); MIN_CAP]), lens: [0; PARTS], arena: Vec::new() }
    }
}

impl LongTable {
    /// The word at arena offset `at`.
    fn word(arena: &[u8], at: u64) -> &[u8] {
        let mut i = (at & ((1 << OFFSET_BITS) - 1)) as usize;
        let n = get(arena, &mut i) as usize;
        &arena[i..i + n]
    }

    #[cfg(test)]
    pub fn add(&mut self, word: &[u8], n: u64) {
        self.add_hashed(word, hash_bytes(word), n)
    }

    /// Asks for the cache line of the first slot a word of hash `h` probes (a hint).
    #[inline]
    pub fn prefetch(&self, h: u64) {
        let part = &self.parts[(h >> (64 - PART_BITS)) as usize];
        crate::memory::prefetch(part.as_ptr().wrapping_add(tag_home(tag_of(h), part.len())));
    }

    /// Counts `n` more of `word`, whose [`hash_bytes`] is `h`.
    pub fn add_hashed(&mut self, word: &[u8], h: u64, n: u64) {
        let j = (h >> (64 - PART_BITS)) as usize;
        let tag = tag_of(h);
        let cap = self.parts[j].len();
        let mut i = tag_home(tag, cap);
        loop {
            let s = self.parts[j][i];
            if s.count == 0 {
                break;
            }
            if s.at >> OFFSET_BITS == tag && Self::word(&self.arena, s.at) == word {
                self.parts[j][i].count = self.parts[j][i].count.saturating_add(n);
                return;
            }
            i = if i + 1 == cap { 0 } else { i + 1 };
        }
        let at = self.arena.len() as u64;
        assert!(at >> OFFSET_BITS == 0, "over 1 TiB of long words in one counting table");
        let mut len = [0u8; 10];
        let k = put(word.len() as u64, &mut len);
        self.arena.extend_from_slice(&len[..k]);
        self.arena.extend_from_slice(word);
        self.parts[j][i] = Long { at: tag << OFFSET_BITS | at, count: n };
        self.lens[j] += 1;
        if full(self.lens[j], cap) {
            let mut bigger = vec![Long::default(); grown(cap)];
            for s in self.parts[j].iter().filter(|s| s.count != 0) {
                let mut i = tag_home(s.at >> OFFSET_BITS, bigger.len());
                while bigger[i].count != 0 {
                    i = if i + 1 == bigger.len() { 0 } else { i + 1 };
                }
                bigger[i] = *s;
            }
            self.parts[j] = bigger;
        }
    }

    /// Every word and its count, in no order.
    #[cfg(test)]
    fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.parts.iter().flatten().filter(|s| s.count != 0).map(|s| (Self::word(&self.arena, s.at), s.count))
    }

    /// Each part's number of words and its words as `(mark << MARK_SHIFT | offset, count)` (the
    /// word is then [`word_at`](Self::word_at) that offset), so that the parts can be gathered
    /// in parallel.
    pub fn parts(&self, mark: u16) -> impl Iterator<Item = (usize, impl Iterator<Item = (u64, u64)> + Send + '_)> + '_ {
        let mask = (1u64 << OFFSET_BITS) - 1;
        let tag = (mark as u64) << MARK_SHIFT;
        self.parts.iter().zip(self.lens).map(move |(part, n)| (n, part.iter().filter(|s| s.count != 0).map(move |s| (tag | (s.at & mask), s.count))))
    }

    /// Part `j`'s words as `(tag, offset, count)`: the tag their hash placed them by (see
    /// [`Long`]), the offset for [`word_at`](Self::word_at).
    pub fn part_words(&self, j: usize) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        let mask = (1u64 << OFFSET_BITS) - 1;
        self.parts[j].iter().filter(|s| s.count != 0).map(move |s| (s.at >> OFFSET_BITS, s.at & mask, s.count))
    }

    /// Each part with the arena to read its words from: for gathering the same part of several
    /// tables on several threads ([`LongPart`]).
    pub fn part_refs(&self) -> impl Iterator<Item = LongPart<'_>> + '_ {
        self.parts.iter().map(|slots| LongPart { slots, arena: &self.arena })
    }

    /// Frees the slots, each part back to its smallest size (the words' bytes stay until the
    /// table is dropped); the table is then empty and still counts.
    pub fn free_slots(&mut self) {
        for part in self.parts.iter_mut() {
            *part = vec![Long::default(); MIN_CAP];
        }
        self.lens = [0; PARTS];
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.lens.iter().sum()
    }

    /// Asks for the first bytes of the word at `at` (a hint, as [`word_at`](Self::word_at)).
    #[inline(always)]
    pub fn prefetch_word(&self, at: u64) {
        Self::ask_word(&self.arena, at)
    }

    /// Asks for the first bytes of the word at `at` in `arena`.
    #[inline(always)]
    fn ask_word(arena: &[u8], at: u64) {
        crate::memory::prefetch(arena.as_ptr().wrapping_add((at & ((1 << OFFSET_BITS) - 1)) as usize));
    }

    /// The word at `at` (an offset from [`parts`](Self::parts); its bits from `OFFSET_BITS` up
    /// are ignored).
    pub fn word_at(&self, at: u64) -> &[u8] {
        Self::word(&self.arena, at)
    }
}

/// One part of a [`LongTable`] (see [`LongTable::part_refs`]).
pub struct LongPart<'a> {
    slots: &'a [Long],
    arena: &'a [u8],
}

impl LongPart<'_> {
    /// Slots of the part (the bound of [`find`](Self::find)'s answers).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The slot of `word` (of tag `tag`, as [`LongTable::part_words`] gives it) if this part
    /// holds it.
    pub fn find(&self, tag: u64, word: &[u8]) -> Option<usize> {
        let cap = self.slots.len();
        let mut i = tag_home(tag, cap);
        loop {
            let s = self.slots[i];
            if s.count == 0 {
                return None;
            }
            if s.at >> OFFSET_BITS == tag && LongTable::word(self.arena, s.at) == word {
                return Some(i);
            }
            i = if i + 1 == cap { 0 } else { i + 1 };
        }
    }

    /// Asks for the first bytes of the word in slot `i` (a hint; nothing for an empty slot or
    /// one past the end).
    #[inline(always)]
    pub fn ask(&self, i: usize) {
        if let Some(s) = self.slots.get(i).filter(|s| s.count != 0) {
            LongTable::ask_word(self.arena, s.at);
        }
    }

    /// The part's words: `(slot, word, count)`.
    pub fn words(&self) -> impl Iterator<Item = (usize, &[u8], u64)> + '_ {
        self.slots.iter().enumerate().filter(|(_, s)| s.count != 0).map(|(i, s)| (i, LongTable::word(self.arena, s.at), s.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_table_grows_and_keeps_counts() {
        let mut t = ShortTable::with_capacity(64);
        for i in 0..20_000u32 {
            t.add(pack(&i.to_le_bytes()), 1);
            t.add(pack(&i.to_le_bytes()), 2);
        }
        t.add(pack(b"\0"), 5);
        assert_eq!(t.len(), 20_001);
        assert_eq!((t.get(pack(&7u32.to_le_bytes())), t.get(pack(b"\0")), t.get(pack(b"\0\0"))), (Some(3), Some(5), None));
        let mut out = Vec::new();
        t.gather(&mut out, true);
        assert_eq!(out.len(), 20_001);
        assert!(out.iter().filter(|s| s.count == 3).count() == 20_000 && t.len() == 0);
        // Every part grew alone, and none is fuller than 3/4.
        let mut t = ShortTable::with_capacity(64);
        (0..20_000u32).for_each(|i| t.add(pack(&i.to_le_bytes()), 1));
        assert!(t.parts.iter().all(|p| p.len * 4 <= p.slots.len() * 3 && p.len * 2 > p.slots.len()));
    }

    #[test]
    fn long_table_counts_like_a_map() {
        let mut t = LongTable::default();
        let mut expect = std::collections::HashMap::new();
        for i in 0..30_000u32 {
            // Lengths 16..=300, so some length prefixes take two bytes.
            let w: Vec<u8> = (0..16 + (i % 285) as usize).map(|k| (i as usize * 7 + k) as u8).collect();
            let n = 1 + (i % 3) as u64;
            t.add(&w, n);
            *expect.entry(w.clone()).or_insert(0) += n;
            if i % 5 == 0 {
                t.add(&w, 1);
                *expect.entry(w).or_insert(0) += 1;
            }
        }
        let got: std::collections::HashMap<Vec<u8>, u64> = t.iter().map(|(w, c)| (w.to_vec(), c)).collect();
        let n = expect.len();
        assert_eq!((t.len(), got), (n, expect));
        // Gathered, then freed, the table still counts.
        let out: Vec<(u64, u64)> = t.parts(3).flat_map(|(_, w)| w).collect();
        assert_eq!((out.len(), out[0].0 >> 48, t.parts(3).map(|p| p.0).sum::<usize>()), (n, 3, n));
        t.free_slots();
        assert_eq!((t.len(), t.iter().count()), (0, 0));
        t.add(&[7; 20], 2);
        assert_eq!(t.iter().collect::<Vec<_>>(), [(&[7u8; 20][..], 2)]);
    }
}
