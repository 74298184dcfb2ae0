//! Packing short byte strings into a `u128` key, shared by the pre-token counter (`count.rs`)
//! and the encoder's word cache (`encode.rs`).
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

/// The bytes of a key made by [`pack`].
#[inline]
pub fn unpack(k: u128) -> Vec<u8> {
    let buf = k.to_le_bytes();
    buf[..(buf[15] as usize).min(15)].to_vec()
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
    }
}
