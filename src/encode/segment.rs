//! Words cut into an encoder's tokens by its merges alone (each word one piece, no
//! pre-tokenization), on all cores: extending a vocabulary cuts the new corpus's words so
//! (`hf_bpe/training/extending.py`), superword training its spans ([`spans`]), the viz page a
//! word with its first merges.

use super::Encoder;

/// Words per unit of parallel work.
const RUN: usize = 1 << 14;

/// The words of flat `b`/`o` (checked by the caller: `o` rises from 0 to `b.len()`) cut into
/// tokens: `(ids, offsets)`. With `max_rank`, only pairs of lower rank merge (the first
/// `max_rank` merges; tiktoken: tokens of lower rank) and no piece is looked up whole.
pub fn words(enc: &Encoder, b: &[u8], o: &[i64], max_rank: Option<u64>) -> (Vec<u32>, Vec<i64>) {
    runs(b, o, || (), |_, piece, ids| match max_rank {
        None => enc.bpe_piece(piece, ids),
        Some(limit) => enc.bpe_piece_upto(piece, limit, ids),
    })
}

/// [`words`] of superword spans by stage 1's encoder (pattern gpt2, its tokens all trained
/// inside gpt2 pieces): a span none of whose word boundaries a stage-1 merge can cross
/// ([`may_join`]) is cut into its words, each through the word cache; any other span merges
/// as one piece. Equal to [`words`] ([log](../../docs/performance.md#superword-training)).
pub fn spans(enc: &Encoder, b: &[u8], o: &[i64]) -> Result<(Vec<u32>, Vec<i64>), String> {
    if enc.pattern_spec() != "gpt2" || enc.is_generic() {
        return Err(format!("segment_spans needs an encoder of the gpt2 pattern, not {:?}", enc.pattern_spec()));
    }
    let state = || (enc.cache(rayon::current_thread_index().unwrap_or(0)), Vec::<(usize, usize)>::new());
    Ok(runs(b, o, state, |(cache, cuts), span, ids| {
        cuts.clear();
        let text = std::str::from_utf8(span).ok();
        if let Some(t) = text {
            let _ = enc.pattern.for_each_piece_dyn(t, &mut |s, e| cuts.push((s, e)));
        }
        if text.is_some() && cuts.windows(2).all(|c| !may_join(span[c[0].1 - 1], span[c[1].0])) {
            for &(s, e) in cuts.iter() {
                enc.encode_piece(cache, &span[s..e], ids);
            }
        } else {
            enc.bpe_piece(span, ids);
        }
    }))
}

/// Each word of `b`/`o` cut into ids by `cut(state, word, ids)`, in runs of [`RUN`] words on
/// all cores (a `state()` per run), joined in order: `(ids, offsets)`.
fn runs<S>(b: &[u8], o: &[i64], state: impl Fn() -> S + Sync, cut: impl Fn(&mut S, &[u8], &mut Vec<u32>) + Sync) -> (Vec<u32>, Vec<i64>) {
    use rayon::prelude::*;
    let words = o.len().saturating_sub(1);
    let runs: Vec<(usize, usize)> = (0..words).step_by(RUN).map(|a| (a, (a + RUN).min(words))).collect();
    let pool = crate::pool::get(crate::pool::default_threads());
    let parts: Vec<(Vec<u32>, Vec<i64>)> = crate::pool::install(pool.as_deref(), || {
        runs.par_iter()
            .map(|&(a, z)| {
                let mut st = state();
                let (mut ids, mut ends) = (Vec::new(), Vec::with_capacity(z - a));
                for w in a..z {
                    cut(&mut st, &b[o[w] as usize..o[w + 1] as usize], &mut ids);
                    ends.push(ids.len() as i64);
                }
                (ids, ends)
            })
            .collect()
    });
    let mut ids = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
    let mut offs = Vec::with_capacity(o.len());
    offs.push(0i64);
    for (part, ends) in parts {
        let base = ids.len() as i64;
        offs.extend(ends.iter().map(|e| base + e));
        ids.extend_from_slice(&part);
    }
    (ids, offs)
}

/// Whether a stage-1 merge may join the byte `last` ending a gpt2 piece to the byte `first`
/// starting the next one inside a span. Such a merge makes a token that holds `last first`,
/// and every stage-1 token lies inside some gpt2 piece, whose bytes are one class (ASCII
/// letters, digits, or punctuation and controls), a leading space, whitespace only, or a
/// contraction (`'` then letters). So an ASCII letter, digit or punctuation mark followed by a
/// space or by a byte of another class never joins, but for `'` before a letter; anything
/// else (non-ASCII, whitespace, controls) is taken as joinable.
fn may_join(last: u8, first: u8) -> bool {
    #[derive(PartialEq)]
    enum C {
        Letter,
        Digit,
        Punct,
        Other,
    }
    let class = |b: u8| match b {
        b'a'..=b'z' | b'A'..=b'Z' => C::Letter,
        b'0'..=b'9' => C::Digit,
        0x21..=0x7e => C::Punct,
        _ => C::Other,
    };
    let (l, f) = (class(last), class(first));
    if l == C::Other {
        return true;
    }
    if first == b' ' {
        return false;
    }
    f == C::Other || l == f || (last == b'\'' && f == C::Letter)
}

#[cfg(test)]
mod tests {
    use super::may_join;

    #[test]
    fn boundaries_that_no_gpt2_piece_holds_never_join() {
        for (last, first) in [(b'd', b' '), (b'd', b','), (b',', b'a'), (b'3', b'a'), (b'a', b'3'), (b'.', b' ')] {
            assert!(!may_join(last, first), "{:?}", (last as char, first as char));
        }
        for (last, first) in [(b'\'', b's'), (b's', b'u'), (b',', b'.'), (b'1', b'2'), (0x80, b' '), (b'a', 0xC3), (b'\t', b' ')] {
            assert!(may_join(last, first), "{:?}", (last, first));
        }
    }
}
