//! The BPE merge loop (placeholder signature; implementation in progress).

/// How to choose among pairs with the same count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TieBreak {
    /// The pair whose (left bytes, right bytes) tuple is greatest in dictionary order.
    Lexicographic,
    /// Exactly what HF `tokenizers`' `BpeTrainer` picks (ByteLevel alphabet order).
    Hf,
}

pub struct TrainConfig {
    /// How many new token strings to create (vocab_size - 256 - specials).
    pub max_new_tokens: usize,
    pub tie_break: TieBreak,
    /// Stop when the best pair's count is below this (and always below 1).
    pub min_frequency: u64,
    /// Never form a token longer than this many bytes.
    pub max_token_length: Option<usize>,
}

/// Learns merges from distinct words with their counts. Returns the merges in training order,
/// each as (left bytes, right bytes). `progress(done)` is called now and then (about every 1%)
/// with the number of new tokens made so far; when it returns `false` training stops early and
/// the merges made so far are returned.
pub fn train(
    _words: &[(Box<[u8]>, u64)],
    _cfg: &TrainConfig,
    _progress: &mut dyn FnMut(usize) -> bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    todo!("merge loop")
}
