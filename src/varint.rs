//! LEB128 varints (7 bits a byte, low bits first, the top bit set on all bytes but the last):
//! the merge loop's pair lists and the counter's long-word arena store lengths and gaps so.

/// Writes `v` at the start of `out`; returns the bytes written.
#[inline]
pub fn put(mut v: u64, out: &mut [u8]) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        out[n] = v as u8 | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    n + 1
}

/// The bytes [`put`] writes for `v`.
#[inline]
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Reads the varint at `b[*pos..]`, moving `pos` past it.
#[inline]
pub fn get(b: &[u8], pos: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let x = b[*pos];
        *pos += 1;
        v |= ((x & 0x7f) as u64) << shift;
        if x < 0x80 {
            return v;
        }
        shift += 7;
    }
}
