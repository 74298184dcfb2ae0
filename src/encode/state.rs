//! The one serialized form of an encoder's tables: magic, pattern, cache budget, vocabulary,
//! merges (or the tiktoken flag), special tokens, all little-endian with length prefixes.
//! Deterministic (sorted tables, no cache), so a pickle is the same bytes in every process.

use super::{Encoder, Merges};
use crate::specials::AddedToken;

impl Encoder {
    /// The tables as bytes (never the cache): identical bytes for equal encoders, in every
    /// process; pickling and every cache of a tokenizer use this one form.
    pub fn to_state(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.tables.vocab.len() * 8 + 8 * self.tables.vocab.len() + 64);
        v.extend_from_slice(STATE_MAGIC);
        put_bytes(&mut v, self.pattern_spec.as_bytes());
        v.extend_from_slice(&(self.caches.budget() as u64).to_le_bytes());
        v.extend_from_slice(&(self.tables.vocab.len() as u32).to_le_bytes());
        for (id, b) in &self.tables.vocab {
            v.extend_from_slice(&id.to_le_bytes());
            put_bytes(&mut v, b);
        }
        match &self.tables.merges {
            None => v.push(0),
            Some(m) => {
                v.push(1);
                v.extend_from_slice(&(m.len() as u32).to_le_bytes());
                for (a, b) in m {
                    v.extend_from_slice(&a.to_le_bytes());
                    v.extend_from_slice(&b.to_le_bytes());
                }
            }
        }
        v.extend_from_slice(&(self.specials.tokens().len() as u32).to_le_bytes());
        for t in self.specials.tokens() {
            v.extend_from_slice(&t.id.to_le_bytes());
            put_bytes(&mut v, t.content.as_bytes());
            let flags = [t.special, t.lstrip, t.rstrip, t.single_word, t.normalized];
            v.push(flags.iter().enumerate().fold(0u8, |acc, (i, &f)| acc | ((f as u8) << i)));
        }
        put_bytes(&mut v, self.pipeline_json().unwrap_or("").as_bytes());
        v
    }

    /// The encoder of [`Self::to_state`]'s bytes, checked as [`Encoder::new`] checks its inputs.
    pub fn from_state(b: &[u8]) -> Result<Self, String> {
        Self::from_state_with_budget(b, None)
    }

    /// [`Self::from_state`] with another cache budget than the one saved (None keeps it).
    pub fn from_state_with_budget(b: &[u8], budget: Option<usize>) -> Result<Self, String> {
        let mut r = StateReader { b, p: 0 };
        if r.take(STATE_MAGIC.len())? != STATE_MAGIC {
            return Err("not an hf_bpe Encoder state (bad magic)".into());
        }
        let pattern = String::from_utf8(r.bytes()?.to_vec()).map_err(|_| "bad pattern in state".to_string())?;
        let cache_bytes = r.u64()? as usize;
        let n = r.u32()? as usize;
        let mut vocab = Vec::with_capacity(n);
        for _ in 0..n {
            let id = r.u32()?;
            vocab.push((id, Box::<[u8]>::from(r.bytes()?)));
        }
        let merges = match r.take(1)?[0] {
            0 => None,
            1 => {
                let m = r.u32()? as usize;
                let mut v = Vec::with_capacity(m);
                for _ in 0..m {
                    v.push((r.u32()?, r.u32()?));
                }
                Some(v)
            }
            _ => return Err("bad merges flag in state".into()),
        };
        let k = r.u32()? as usize;
        let mut added = Vec::with_capacity(k);
        for _ in 0..k {
            let id = r.u32()?;
            let content = String::from_utf8(r.bytes()?.to_vec()).map_err(|_| "bad special token in state".to_string())?;
            let f = r.take(1)?[0];
            if f >= 1 << 5 {
                return Err("bad added-token flags in state".into());
            }
            let bit = |i: u32| f & (1 << i) != 0;
            added.push(AddedToken { content, id, special: bit(0), lstrip: bit(1), rstrip: bit(2), single_word: bit(3), normalized: bit(4) });
        }
        let pipeline = String::from_utf8(r.bytes()?.to_vec()).map_err(|_| "bad pipeline in state".to_string())?;
        if r.p != b.len() {
            return Err("trailing bytes in Encoder state".into());
        }
        let pipeline = (!pipeline.is_empty()).then_some(pipeline.as_str());
        Encoder::build(vocab, merges.map(Merges::Ids), added, &pattern, pipeline, budget.unwrap_or(cache_bytes))
    }
}

const STATE_MAGIC: &[u8] = b"hf_bpe.Encoder/2\0";

fn put_bytes(v: &mut Vec<u8>, b: &[u8]) {
    v.extend_from_slice(&(b.len() as u32).to_le_bytes());
    v.extend_from_slice(b);
}

struct StateReader<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> StateReader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.p + n > self.b.len() {
            return Err("truncated Encoder state".into());
        }
        let s = &self.b[self.p..self.p + n];
        self.p += n;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}
