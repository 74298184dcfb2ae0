//! Packing short byte strings into a `u128` key, shared by the pre-token counter (`count/`)
//! and the encoder's word cache (`cache/`, filled from `encode/queue.rs`).
//!
//! Layout: the bytes, zero padded, little-endian, with the length in the top byte. Keys of
//! different strings differ (the length byte tells trailing zero bytes from padding), and the
//! key of a non-empty string is never 0, so 0 can mark an empty slot in open-addressing tables.

/// Loads 0..=15 bytes as two little-endian words without a variable-length memcpy (a call
/// to memcpy per piece was a visible share of both the encoder's cache-hit path and the
/// counter's per-piece update): overlapping fixed-size loads, then shifts that drop the overlap.
#[inline(always)]
pub fn load15(b: &[u8]) -> (u64, u64) {
    let n = b.len();
    debug_assert!(n < 16);
    if n >= 8 {
        let lo = u64::from_le_bytes(b[..8].try_into().unwrap());
        let tail = u64::from_le_bytes(b[n - 8..n].try_into().unwrap()); // bytes [n-8, n)
        (lo, (tail >> 8) >> ((15 - n) * 8)) // keep bytes [8, n)
    } else if n >= 4 {
        let head = u32::from_le_bytes(b[..4].try_into().unwrap()) as u64;
        let tail = u32::from_le_bytes(b[n - 4..n].try_into().unwrap()) as u64; // [n-4, n)
        (head | (((tail >> 8) >> ((7 - n) * 8)) << 32), 0)
    } else {
        let mut x = 0u64;
        for (i, &c) in b.iter().enumerate() {
            x |= (c as u64) << (8 * i);
        }
        (x, 0)
    }
}

/// Packs a string of 0..=15 bytes into a u128: the bytes, zero padded, length in the top byte.
#[inline(always)]
pub fn pack(b: &[u8]) -> u128 {
    let (lo, hi) = load15(b);
    (lo as u128) | (((hi | ((b.len() as u64) << 56)) as u128) << 64)
}

/// [`pack`] of `buf[s..e]` (at most 15 bytes), reading the piece in place: when 16 bytes from
/// `s` lie inside `buf` (all but the last piece or so of a text), one unaligned 16-byte load and
/// a mask, with no branch on the length.
///
/// Performance: pre-token lengths of natural text jump between 1 and ~10 bytes from one piece
/// to the next, so the length-dependent branches of [`load15`] (and its byte loop for pieces
/// under 4 bytes, which are a third of all pieces: `","`, `" a"`, `" of"`) mispredict about
/// once a piece; the counter packs every piece of the corpus, so this was worth a few ns each.
#[inline(always)]
pub fn pack_in(buf: &[u8], s: usize, e: usize) -> u128 {
    let n = e - s;
    debug_assert!(s <= e && e <= buf.len() && n < 16);
    match buf.get(s..s + 16) {
        Some(w) => {
            let w = u128::from_le_bytes(w.try_into().unwrap_or([0; 16]));
            // One table load instead of a 128-bit variable shift (a shift pair, a select and
            // a subtract on x86-64), on the per-piece path of encoder and counter.
            (w & KEEP[n & 15]) | ((n as u128) << 120)
        }
        None => pack(&buf[s..e]),
    }
}

/// [`pack_in`] of `buf[s..s + n]` for a caller that knows `s + 16 <= buf.len()` (the encoder's
/// window loop checks it once per 64-byte window), so without the bounds check.
///
/// In general-purpose registers, as two words (the encoder hashes and queues the two words):
/// the 16-byte vector load and mask of [`pack_in`] then took a move and a two-µop extract to
/// get the words out, and the length byte a shift and an or. With the slot as a byte offset
/// (`encode/queue.rs`), the encoder's per-piece loop went from 33 to 27 instructions; ab_encode
/// (3 rounds, MB per CPU second): o200k English 888 -> 944, code 732 -> 782; GPT-2 English
/// 966 -> 1,040, code 677 -> 722, multilingual 331 -> 346.
///
/// # Safety
/// `s + 16 <= buf.len()` and `n < 16`.
#[inline(always)]
pub unsafe fn pack_in_unchecked(buf: &[u8], s: usize, n: usize) -> u128 {
    debug_assert!(s + 16 <= buf.len() && n < 16);
    let p = buf.as_ptr().add(s);
    let lo = (p as *const u64).read_unaligned() & KEEP_WORDS[n & 15];
    let hi = ((p.add(8) as *const u64).read_unaligned() & KEEP_WORDS[16 + (n & 15)]) | KEEP_WORDS[32 + (n & 15)];
    (lo as u128) | ((hi as u128) << 64)
}

/// [`KEEP`] as words and the length byte: `[n]` the low word of `KEEP[n]`, `[16 + n]` its high
/// word, `[32 + n]` the length `n` in the top byte (one table, so the three loads share one
/// base address register; the length as a load-and-or where a shift and an or took two).
const KEEP_WORDS: [u64; 48] = {
    let mut t = [0u64; 48];
    let mut n = 0;
    while n < 16 {
        t[n] = KEEP[n] as u64;
        t[16 + n] = (KEEP[n] >> 64) as u64;
        t[32 + n] = (n as u64) << 56;
        n += 1;
    }
    t
};

/// `KEEP[n]` keeps the low `n` bytes of a `u128`.
const KEEP: [u128; 16] = {
    let mut t = [0u128; 16];
    let mut n = 1;
    while n < 16 {
        t[n] = (1u128 << (8 * n)) - 1;
        n += 1;
    }
    t
};

/// The bytes of a key made by [`pack`].
#[inline]
pub fn unpack(k: u128) -> Vec<u8> {
    let mut buf = [0u8; 16];
    unpack_into(k, &mut buf).to_vec()
}

/// [`unpack`] into `buf`, without allocating.
#[inline]
pub fn unpack_into(k: u128, buf: &mut [u8; 16]) -> &[u8] {
    *buf = k.to_le_bytes();
    &buf[..(buf[15] as usize).min(15)]
}

/// A 64-bit hash of a packed key: one multiply after folding the halves (the length byte
/// lives in the high half, the first bytes in the low one). Take the *high* bits of the
/// result for a table slot; the low bits mix poorly.
#[inline(always)]
pub fn mix128(k: u128) -> u64 {
    let (lo, hi) = (k as u64, (k >> 64) as u64);
    (lo ^ hi.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_is_injective_round_trips_and_matches_a_plain_copy() {
        let mut seen = std::collections::HashSet::new();
        for n in 0..16usize {
            let b: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37).wrapping_add(200)).collect();
            let mut buf = [0u8; 16];
            buf[..n].copy_from_slice(&b);
            buf[15] = n as u8;
            assert_eq!(pack(&b), u128::from_le_bytes(buf), "n={n}");
            assert!(seen.insert(pack(&b)));
            assert_eq!(unpack(pack(&b)), b);
        }
        assert!(seen.insert(pack(b"\0")) && seen.insert(pack(b"\0\0")));
        let buf: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(53).wrapping_add(1)).collect();
        for s in 0..buf.len() {
            for e in s..(s + 16).min(buf.len() + 1) {
                assert_eq!(pack_in(&buf, s, e), pack(&buf[s..e]), "{s}..{e}");
                if s + 16 <= buf.len() {
                    // SAFETY: 16 bytes from `s` are in `buf`; e - s < 16.
                    assert_eq!(unsafe { pack_in_unchecked(&buf, s, e - s) }, pack(&buf[s..e]), "{s}..{e}");
                }
            }
        }
    }
}
