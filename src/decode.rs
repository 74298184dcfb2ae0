//! Decoding: token ids back to their bytes. One flat table for every id, special tokens
//! included; an id the vocabulary does not hold is an error that names it.

/// The bytes of token `id` are `bytes[off[id]..off[id + 1]]`, if `present[id]`.
pub struct TokenBytes {
    off: Vec<u64>,
    bytes: Vec<u8>,
    present: Vec<bool>,
}

impl TokenBytes {
    /// From `(id, bytes)` of every token (ids unique, checked by the caller).
    pub fn new<'a>(tokens: impl Iterator<Item = (u32, &'a [u8])> + Clone) -> Self {
        let n = tokens.clone().map(|(i, _)| i as usize + 1).max().unwrap_or(0);
        let mut present = vec![false; n];
        let mut lens = vec![0u64; n];
        for (id, b) in tokens.clone() {
            present[id as usize] = true;
            lens[id as usize] = b.len() as u64;
        }
        let mut off = Vec::with_capacity(n + 1);
        let mut acc = 0u64;
        off.push(0);
        for l in &lens {
            acc += l;
            off.push(acc);
        }
        let mut bytes = vec![0u8; acc as usize];
        for (id, b) in tokens {
            let o = off[id as usize] as usize;
            bytes[o..o + b.len()].copy_from_slice(b);
        }
        TokenBytes { off, bytes, present }
    }

    /// One more than the largest id.
    pub fn n_vocab(&self) -> usize {
        self.present.len()
    }

    #[inline]
    pub fn get(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        if i < self.present.len() && self.present[i] {
            Some(&self.bytes[self.off[i] as usize..self.off[i + 1] as usize])
        } else {
            None
        }
    }

    /// Length in bytes of a known token.
    #[inline]
    pub fn len_of(&self, id: u32) -> usize {
        (self.off[id as usize + 1] - self.off[id as usize]) as usize
    }

    /// Appends the concatenated bytes of `ids`; the error names the first unknown id.
    pub fn decode<I: IntoIterator<Item = i64>>(&self, ids: I, out: &mut Vec<u8>) -> Result<(), String> {
        for id in ids {
            match u32::try_from(id).ok().and_then(|i| self.get(i)) {
                Some(b) => out.extend_from_slice(b),
                None => return Err(format!("unknown token id {id} (vocab has ids below {})", self.n_vocab())),
            }
        }
        Ok(())
    }
}
