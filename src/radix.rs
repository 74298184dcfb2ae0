//! A stable LSD radix sort of `u64` values on a range of their bits, on the threads of the
//! caller's pool: what orders the tens of millions of packed `(pair, word)` occurrences of
//! superword training, where a comparison sort was most of the time
//! ([log](../docs/performance.md#superword-training)).
//!
//! Digits of at most [`DIGIT_BITS`] bits, the fewest passes that cover the range; each pass
//! counts its digit, then scatters; a pass whose digit is the same in every value is skipped. Each thread counts and scatters its own stretch of the values (its own offsets
//! in every bucket), so the result is the same on any number of threads.

use rayon::prelude::*;

/// The widest digit: 2^11 buckets, whose write positions stay within the L1/L2 caches.
const DIGIT_BITS: u32 = 11;

/// Below this many values one thread sorts.
const PARALLEL_FROM: usize = 1 << 16;

/// Sorts `v` by bits `lo..hi` of its values (`hi` <= 64), stable: values equal in those bits
/// keep their order.
pub fn sort_by_bits(v: &mut Vec<u64>, lo: u32, hi: u32) {
    assert!(lo <= hi && hi <= 64);
    let n = v.len();
    if n < 2 || lo == hi {
        return;
    }
    let passes = (hi - lo).div_ceil(DIGIT_BITS);
    let width = (hi - lo).div_ceil(passes);
    let buckets = 1usize << width;
    // The last digit may be narrower: bits at or above `hi` never count.
    let mask = |p: u32| (1usize << width.min(hi - lo - p * width)) - 1;
    let digit = |x: u64, p: u32| ((x >> (lo + p * width)) as usize) & mask(p);
    let parallel = n >= PARALLEL_FROM && crate::pool::in_pool();
    let threads = if parallel { rayon::current_num_threads().max(1) } else { 1 };
    let chunk = n.div_ceil(threads);
    // How many values of a stretch have each digit in pass p.
    let count = |part: &[u64], p: u32| {
        let mut c = vec![0usize; buckets];
        for &x in part {
            c[digit(x, p)] += 1;
        }
        c
    };
    let mut other: Vec<u64> = Vec::with_capacity(n);
    let (mut src, mut dst) = (std::mem::take(v), other.spare_capacity_mut().as_mut_ptr() as usize);
    let mut spare = other;
    for p in 0..passes {
        // counts[t][d]: values of thread t's stretch of `src` with digit d (the stretches hold
        // other values after each pass, so they are counted again).
        let counts: Vec<Vec<usize>> = if parallel { src.par_chunks(chunk).map(|c| count(c, p)).collect() } else { vec![count(&src, p)] };
        if (0..buckets).any(|d| counts.iter().map(|c| c[d]).sum::<usize>() == n) {
            continue; // one digit for all: nothing moves
        }
        // Where each thread's values of each digit go: digits in order, threads in order.
        let mut starts = vec![vec![0usize; buckets]; counts.len()];
        let mut next = 0;
        for d in 0..buckets {
            for (s, c) in starts.iter_mut().zip(&counts) {
                s[d] = next;
                next += c[d];
            }
        }
        let out = dst;
        let scatter = |(part, mut pos): (&[u64], Vec<usize>)| {
            let out = out as *mut u64;
            for &x in part {
                let d = digit(x, p);
                // SAFETY: the threads' ranges of positions are disjoint and within 0..n (the
                // counts above partition 0..n), and `out` has room for n values.
                unsafe { out.add(*pos.get_unchecked(d)).write(x) };
                // SAFETY: `d` < buckets = pos.len().
                unsafe { *pos.get_unchecked_mut(d) += 1 };
            }
        };
        if parallel {
            src.par_chunks(chunk).zip(starts.into_par_iter()).for_each(scatter);
        } else {
            scatter((&src[..], starts.pop().expect("one thread")));
        }
        // SAFETY: every one of the n positions was written once in this pass.
        unsafe { spare.set_len(n) };
        std::mem::swap(&mut src, &mut spare);
        spare.clear();
        dst = spare.spare_capacity_mut().as_mut_ptr() as usize;
    }
    *v = src;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_stably_on_the_bits_asked_for() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for (n, lo, hi) in [(0, 0, 64), (1, 3, 9), (1000, 20, 50), (200_000, 23, 53), (70_000, 0, 64), (5000, 40, 41), (90_000, 0, 13), (3000, 5, 28)] {
            let v: Vec<u64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                })
                .collect();
            let mask = if hi - lo == 64 { u64::MAX } else { ((1u64 << (hi - lo)) - 1) << lo };
            let mut want = v.clone();
            want.sort_by_key(|&y| y & mask); // stable
            for threads in [1, 2, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let mut got = v.clone();
                pool.install(|| sort_by_bits(&mut got, lo, hi));
                assert_eq!(got, want, "n={n} bits {lo}..{hi} threads={threads}");
            }
        }
    }
}
