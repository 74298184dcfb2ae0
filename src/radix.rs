//! A stable LSD radix sort of `u64` values on a range of their bits, with a buffer the caller
//! keeps: what orders each bucket of the packed `(pair, word)` occurrences of superword
//! training, where a comparison sort was most of the time
//! ([log](../docs/performance.md#superword-training)).
//!
//! Digits of at most [`DIGIT_BITS`] bits, the fewest passes that cover the range; each pass
//! counts its digit, then scatters; a pass whose digit is the same in every value is skipped.

/// The widest digit: 2^11 buckets, whose write positions stay within the L1/L2 caches.
const DIGIT_BITS: u32 = 11;

/// Below this many values, an insertion sort.
const SMALL: usize = 32;

/// Sorts `v` by bits `lo..hi` of its values (`hi` <= 64), stable: values equal in those bits
/// keep their order. `scratch` is the other buffer of the passes (grown to `v.len()` if shorter).
pub fn sort_by_bits(v: &mut [u64], scratch: &mut Vec<u64>, lo: u32, hi: u32) {
    assert!(lo <= hi && hi <= 64);
    let n = v.len();
    if n < 2 || lo == hi {
        return;
    }
    let bits = |x: u64| if hi - lo == 64 { x } else { (x >> lo) & ((1u64 << (hi - lo)) - 1) };
    if n < SMALL {
        for i in 1..n {
            let x = v[i];
            let mut j = i;
            while j > 0 && bits(v[j - 1]) > bits(x) {
                v[j] = v[j - 1];
                j -= 1;
            }
            v[j] = x;
        }
        return;
    }
    let passes = (hi - lo).div_ceil(DIGIT_BITS);
    let width = (hi - lo).div_ceil(passes);
    // The last digit may be narrower: bits at or above `hi` never count.
    let mask = |p: u32| (1usize << width.min(hi - lo - p * width)) - 1;
    let digit = |x: u64, p: u32| ((x >> (lo + p * width)) as usize) & mask(p);
    if scratch.len() < n {
        scratch.resize(n, 0); // (what it held is written over before it is read)
    }
    let mut count = vec![0usize; 1 << width];
    // Whether the values are in `scratch` (after an odd number of moves).
    let mut moved = false;
    for p in 0..passes {
        let (src, dst) = if moved { (&scratch[..n], &mut v[..]) } else { (&v[..], &mut scratch[..n]) };
        count.iter_mut().for_each(|c| *c = 0);
        for &x in src {
            count[digit(x, p)] += 1;
        }
        if count.contains(&n) {
            continue; // one digit for all: nothing moves
        }
        let mut next = 0;
        for c in count.iter_mut() {
            (*c, next) = (next, next + *c);
        }
        for &x in src {
            let d = digit(x, p);
            dst[count[d]] = x;
            count[d] += 1;
        }
        moved = !moved;
    }
    if moved {
        v.copy_from_slice(&scratch[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_stably_on_the_bits_asked_for() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        // One scratch for all (longer and shorter than the values); the last case's middle digit
        // (bits 11..22 of 0..33) is the same in every value, so its pass is skipped.
        let mut scratch = vec![7; 3];
        for (n, lo, hi) in [(0, 0, 64), (1, 3, 9), (1000, 20, 50), (200_000, 23, 53), (70_000, 0, 64), (5000, 40, 41), (90_000, 0, 13), (3000, 5, 28), (31, 10, 30), (2, 0, 64), (4000, 0, 33)] {
            let v: Vec<u64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if hi == 33 { x & !(0x7FF << 11) } else { x }
                })
                .collect();
            let mask = if hi - lo == 64 { u64::MAX } else { ((1u64 << (hi - lo)) - 1) << lo };
            let mut want = v.clone();
            want.sort_by_key(|&y| y & mask); // stable
            let mut got = v.clone();
            sort_by_bits(&mut got, &mut scratch, lo, hi);
            assert_eq!(got, want, "n={n} bits {lo}..{hi}");
        }
    }
}
