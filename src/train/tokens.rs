//! Token strings of a training run, and GPT-2's byte alphabet (which also orders HF's tie rule).
//! Tokens are identified by their bytes: a merge whose string already is a token reuses it.

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

/// All token strings, in one arena. Ids 0..256 are the single bytes; then one id per new
/// distinct string, in creation order.
pub struct Tokens {
    bytes: Vec<u8>,
    start: Vec<u32>,
    pub len: Vec<u32>,
    /// Tie-break rank for the HF rule: byte rank for 0..256, the id itself after that
    /// (ids are handed out in creation order, as HF does).
    pub hf_rank: Vec<u32>,
    by_string: FxHashMap<Vec<u8>, u32>,
}

impl Tokens {
    pub fn new() -> Self {
        let ranks = hf_byte_rank();
        let mut t = Tokens {
            bytes: (0..=255u8).collect(),
            start: (0..256).collect(),
            len: vec![1; 256],
            hf_rank: ranks.to_vec(),
            by_string: FxHashMap::default(),
        };
        for b in 0..=255u8 {
            t.by_string.insert(vec![b], b as u32);
        }
        t
    }

    /// The bytes, then `base` (a vocabulary being extended: its tokens of two bytes or more, in
    /// its id order) as ids 256.., each ranked for the HF rule by that order.
    pub fn with_base(base: &[Box<[u8]>]) -> Result<Self, String> {
        let mut t = Tokens::new();
        for (i, tok) in base.iter().enumerate() {
            if tok.len() < 2 || t.by_string.contains_key(&tok[..]) {
                return Err(format!("base token #{i} ({:?}) is a single byte or listed twice", String::from_utf8_lossy(tok)));
            }
            let id = t.len.len() as u32;
            t.start.push(u32::try_from(t.bytes.len()).map_err(|_| "base vocabulary too large".to_string())?);
            t.len.push(tok.len() as u32);
            t.bytes.extend_from_slice(tok);
            t.hf_rank.push(id);
            t.by_string.insert(tok.to_vec(), id);
        }
        Ok(t)
    }

    /// The id of a token string, if it is one.
    pub fn id_of(&self, s: &[u8]) -> Option<u32> {
        self.by_string.get(s).copied()
    }

    /// Number of token strings.
    pub fn count(&self) -> usize {
        self.len.len()
    }

    #[inline]
    pub fn get(&self, id: u32) -> &[u8] {
        let s = self.start[id as usize] as usize;
        &self.bytes[s..s + self.len[id as usize] as usize]
    }

    /// The id of `a`+`b`, creating it if new. Returns (id, is_new).
    pub fn merge(&mut self, a: u32, b: u32) -> (u32, bool) {
        let mut s = Vec::with_capacity((self.len[a as usize] + self.len[b as usize]) as usize);
        s.extend_from_slice(self.get(a));
        s.extend_from_slice(self.get(b));
        if let Some(&id) = self.by_string.get(&s) {
            return (id, false);
        }
        let id = self.len.len() as u32;
        // Token bytes can exceed u32 range only with >4 GB of distinct merged strings; saturate
        // rather than panic (lengths are only used for max_token_length and tie breaks).
        self.start.push(u32::try_from(self.bytes.len()).unwrap_or(u32::MAX));
        self.len.push(u32::try_from(s.len()).unwrap_or(u32::MAX));
        self.bytes.extend_from_slice(&s);
        if self.bytes.len() > u32::MAX as usize {
            // Would break `get`; never happens for realistic vocabularies.
            self.bytes.truncate(u32::MAX as usize);
        }
        self.hf_rank.push(id);
        self.by_string.insert(s, id);
        (id, true)
    }
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
}
