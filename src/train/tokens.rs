//! Token strings of a training run. Tokens are identified by their bytes: a merge whose string
//! already is a token reuses it. The single bytes rank for HF's tie rule in the byte alphabet's
//! order (`crate::alphabet::hf_byte_rank`).

use rustc_hash::FxHashMap;

use crate::alphabet::hf_byte_rank;

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
