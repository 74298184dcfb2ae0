//! GPT-2's byte alphabet: the printable char that stands for each byte in `vocab.json`,
//! `merges.txt` and `tokenizer.json`, its inverse, and the order it gives HF's tie rule.
//! A leaf: the trainer, the encoder and the pipeline read it, and it reads nothing of theirs.

use std::sync::OnceLock;

use rustc_hash::FxHashMap;

/// GPT-2's byte-level alphabet: the printable character that stands for each byte in
/// `vocab.json`, `merges.txt` and `tokenizer.json`. Printable bytes (33..=126, 161..=172,
/// 174..=255) stand for themselves; the other 68 take U+0100 onwards, in byte order.
pub fn byte_alphabet() -> [char; 256] {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut out = ['\0'; 256];
    let mut shifted = 0;
    for b in 0..256u32 {
        out[b as usize] = if printable(b) {
            char::from_u32(b).unwrap()
        } else {
            shifted += 1;
            char::from_u32(255 + shifted).unwrap()
        };
    }
    out
}

/// The byte each char of [`byte_alphabet`] stands for.
pub fn unbyte_table() -> FxHashMap<char, u8> {
    byte_alphabet().iter().enumerate().map(|(b, &c)| (c, b as u8)).collect()
}

/// The byte an alphabet char stands for (the inverse of [`byte_alphabet`], one lookup).
pub fn alphabet_byte(c: char) -> Option<u8> {
    static INV: OnceLock<Vec<Option<u8>>> = OnceLock::new();
    let inv = INV.get_or_init(|| {
        let mut v = vec![None; 0x200];
        for (b, ch) in byte_alphabet().iter().enumerate() {
            v[*ch as usize] = Some(b as u8);
        }
        v
    });
    inv.get(c as usize).copied().flatten()
}

/// Rank of a single byte in HF's byte-level alphabet: [`byte_alphabet`]'s characters sorted by
/// code point (the printable bytes first, in byte order, then the other 68).
pub fn hf_byte_rank() -> [u32; 256] {
    let chars = byte_alphabet();
    let mut order: Vec<u8> = (0..=255).collect();
    order.sort_by_key(|&b| chars[b as usize]);
    let mut rank = [0u32; 256];
    for (r, &b) in order.iter().enumerate() {
        rank[b as usize] = r as u32;
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_rank_table() {
        let r = hf_byte_rank();
        assert_eq!(r[b'!' as usize], 0);
        assert_eq!(r[126], 93);
        assert_eq!(r[161], 94);
        assert_eq!(r[174], 106);
        assert_eq!(r[255], 187);
        assert_eq!(r[0], 188);
        assert_eq!(r[173], 255);
    }

    #[test]
    fn inverses_agree() {
        let unbyte = unbyte_table();
        for (b, c) in byte_alphabet().into_iter().enumerate() {
            assert_eq!(alphabet_byte(c), Some(b as u8));
            assert_eq!(unbyte[&c], b as u8);
        }
        assert_eq!(alphabet_byte('\u{3000}'), None);
    }
}
