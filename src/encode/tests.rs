//! Unit tests of the encoder: the merge against a naive reference, the queued lookups, the
//! caches through the encoder, the fused check, the serialized form, special tokens.
use super::*;
use crate::cache::CacheGuard;
use std::sync::atomic::Ordering;

/// A toy tiktoken-style vocab: all bytes, then a few merged tokens over 'a'..'d'.
fn toy_ranks() -> Vec<(u32, Box<[u8]>)> {
    let mut v: Vec<(u32, Box<[u8]>)> = (0..=255u8).map(|b| (b as u32, vec![b].into_boxed_slice())).collect();
    let extra = ["ab", "aa", "bc", "abc", "aaaa", "ba", "cd", "abcd", "aab", "dd", "ddd", "bcd", "aaaaaaaa"];
    for (i, t) in extra.iter().enumerate() {
        v.push((256 + i as u32, t.as_bytes().into()));
    }
    v
}

/// Reference: merge the adjacent pair whose concatenation has the lowest rank, leftmost.
fn naive(ranks: &[(u32, Box<[u8]>)], piece: &[u8]) -> Vec<u32> {
    let rank_of = |b: &[u8]| ranks.iter().find(|(_, t)| &**t == b).map(|(r, _)| *r);
    if let Some(r) = rank_of(piece) {
        return vec![r];
    }
    let mut parts: Vec<Vec<u8>> = piece.iter().map(|&b| vec![b]).collect();
    loop {
        let mut best: Option<(u32, usize)> = None;
        for i in 0..parts.len().saturating_sub(1) {
            let cat = [parts[i].clone(), parts[i + 1].clone()].concat();
            if let Some(r) = rank_of(&cat) {
                if best.map_or(true, |(br, _)| r < br) {
                    best = Some((r, i));
                }
            }
        }
        match best {
            None => break,
            Some((_, i)) => {
                let right = parts.remove(i + 1);
                parts[i].extend(right);
            }
        }
    }
    parts.iter().map(|p| rank_of(p).unwrap()).collect()
}

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed >> 33
}


#[test]
fn small_and_large_paths_match_the_reference() {
    let ranks = toy_ranks();
    let enc = Encoder::new(ranks.clone(), None, vec![], r"[a-d]+|[^a-d]+", 1 << 20).unwrap();
    let mut seed = 7;
    for round in 0..400 {
        let n = 2 + (lcg(&mut seed) % if round % 4 == 0 { 400 } else { 40 }) as usize;
        let piece: Vec<u8> = (0..n).map(|_| b"aabcd"[(lcg(&mut seed) % 5) as usize]).collect();
        let want = naive(&ranks, &piece);
        let mut a = Vec::new();
        enc.bpe_piece(&piece, &mut a);
        assert_eq!(a, want, "bpe_piece on {:?}", String::from_utf8_lossy(&piece));
        let bytes: Vec<u32> = piece.iter().map(|&x| enc.ranks.byte_ids[x as usize]).collect();
        let mut b = Vec::new();
        enc.ranks.merge_large(bytes.clone(), u32::MAX, &mut b);
        assert_eq!(b, want, "merge_large on {:?}", String::from_utf8_lossy(&piece));
        if piece.len() <= LARGE_PIECE {
            let (mut c, mut toks) = (Vec::new(), [0u32; LARGE_PIECE + 8]);
            toks[..piece.len()].copy_from_slice(&bytes);
            enc.ranks.merge_small(&mut toks, piece.len(), &mut c);
            assert_eq!(c, want, "merge_small");
        }
    }
}

#[test]
fn merges_mode_equals_ranks_mode_on_a_consistent_vocab() {
    // With merges in rank order that build each token the way rank order would (here
    // "aab" = a + ab, since ab outranks aa), both semantics agree. (With ("aa", "b") they
    // differ on "abaab": the real GPT-2 vs tiktoken subtlety, see hf-integration.md 3.3.)
    let ranks = toy_ranks();
    let id = |s: &str| ranks.iter().find(|(_, t)| &**t == s.as_bytes()).unwrap().0;
    let merges: Vec<(u32, u32)> = [("a", "b"), ("a", "a"), ("b", "c"), ("ab", "c"), ("aa", "aa"), ("b", "a"), ("c", "d"), ("abc", "d"), ("a", "ab"), ("d", "d"), ("dd", "d"), ("bc", "d"), ("aaaa", "aaaa")]
        .iter()
        .map(|(a, b)| (id(a), id(b)))
        .collect();
    let m = Encoder::new(ranks.clone(), Some(Merges::Ids(merges)), vec![], "gpt2", 1 << 20).unwrap();
    let r = Encoder::new(ranks, None, vec![], "gpt2", 1 << 20).unwrap();
    let mut seed = 11;
    for _ in 0..300 {
        let n = 2 + (lcg(&mut seed) % 200) as usize;
        let piece: Vec<u8> = (0..n).map(|_| b"abcd"[(lcg(&mut seed) % 4) as usize]).collect();
        let (mut x, mut y) = (Vec::new(), Vec::new());
        m.bpe_piece(&piece, &mut x);
        r.bpe_piece(&piece, &mut y);
        assert_eq!(x, y);
    }
}

#[test]
fn queued_lookups_match_piece_by_piece() {
    // `encode_text`'s drain: inline hits, arena results (words of x/y/z do not merge, so
    // they encode to one id per byte), probes past the first slot, pieces of 16+ bytes
    // and misses, on a cold then warm cache, into outputs that start empty (so the room
    // reserved per piece runs out on arena results and the slow path takes them).
    let enc = Encoder::new(toy_ranks(), None, vec![], "gpt2", 1 << 20).unwrap();
    let mut cache = enc.cache(0);
    let mut seed = 5;
    let words: Vec<String> = (0..3000)
        .map(|_| {
            let n = 1 + (lcg(&mut seed) % 20) as usize;
            let abc: &[u8] = if lcg(&mut seed) % 2 == 0 { b"abcd" } else { b"xyzab" };
            (0..n).map(|_| abc[(lcg(&mut seed) % abc.len() as u64) as usize] as char).collect()
        })
        .collect();
    // `text` into a fresh output: queued lookups vs BPE of each piece.
    let check = |text: &str, cache: &mut WordCache| {
        let mut got = Vec::new();
        enc.encode_text(cache, text, &mut got).unwrap();
        let mut want = Vec::new();
        enc.pattern.for_each_piece(text, |s: usize, e: usize| enc.bpe_piece(&text.as_bytes()[s..e], &mut want)).unwrap();
        assert_eq!(got, want, "{text:?}");
    };
    let mut random_text = |n: usize| -> String { (0..n).map(|_| format!(" {}", words[(lcg(&mut seed) % 3000) as usize])).collect() };
    for _ in 0..3 {
        check(&random_text(4000), &mut cache);
        // Short texts: the room reserved for 4 ids per piece is exact.
        for k in 0..200 {
            check(&random_text(1 + k % 70), &mut cache);
        }
    }
    // An arena result (15 ids) that takes most of the room, then inline hits: the room
    // check must keep 4 ids for every piece after it (debug builds assert the room).
    for n in 1..16 {
        let text = format!(" xyzxyzxyzxyzx{}", " abc".repeat(n));
        check(&text, &mut cache);
        check(&text, &mut cache);
    }
    assert!(cache.hits > 0 && cache.misses > 0);
}

#[test]
fn cache_respects_budget_and_stays_correct() {
    let ranks = toy_ranks();
    for budget in [0usize, 4096, 10_000, 1 << 16] {
        let enc = Encoder::new(ranks.clone(), None, vec![], r"\S+|\s+", budget).unwrap();
        let mut cache = enc.cache(0);
        let mut seed = 3;
        for _ in 0..5000 {
            let n = 2 + (lcg(&mut seed) % 60) as usize;
            let piece: Vec<u8> = (0..n).map(|_| b"abcdxyz"[(lcg(&mut seed) % 7) as usize]).collect();
            let mut a = Vec::new();
            enc.encode_piece(&mut cache, &piece, &mut a);
            let mut b = Vec::new();
            enc.bpe_piece(&piece, &mut b);
            assert_eq!(a, b);
            assert!(cache.used() <= budget.max(0), "used {} > budget {budget}", cache.used());
        }
    }
}

#[test]
fn the_check_fused_into_the_scan_finds_what_the_separate_check_finds() {
    // ("<y>": in GPT-2's split its `<` is a piece of its own, the last byte of a piece.)
    // ("<<x>>" around "<x>": both checks name the one that starts first.)
    let specials: Vec<(String, u32)> =
        ["<|x|>", "<|endoftext|>", "<y>", "<<x>>", "<x>"].iter().enumerate().map(|(k, s)| (s.to_string(), 1000 + k as u32)).collect();
    // Parts that put specials (whole, cut short, or glued to other pieces) in windows, at
    // their edges, in the per-char path (after non-ASCII letters, in long pieces) and at
    // the text's end.
    let parts = [
        "a", " the", "Zebra", "  ", "\n", "\r\n", "12345", "\u{e9}t\u{e9}", "\u{65e5}\u{672c}", " \u{201c}",
        "\u{1f600}", "<", "<|", "<|x", "<|x|", "<|x|>", "<|endoftext|>", "x<|x|>y", "\u{e9}<|x|>", "<<|x|>",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", ";;;;;;;;;;;;;;;;;;;;;;;;", "<|endoftext", "|>",
        "<y>", "x<y>", "<y", "\u{e9}<y>", "\u{65e5}<y", ">", "<<x>>", "<x>", "<<x>", "a<<x>>b",
    ];
    let mut seed = 11u64;
    for spec in ["gpt2", "cl100k", "o200k"] {
        let enc = Encoder::new(toy_ranks(), None, specials.clone(), spec, 1 << 20).unwrap();
        assert!(enc.can_fuse_check(&SpecialSet::None, &None));
        assert!(!enc.can_fuse_check(&SpecialSet::Some(vec!["<|x|>".into()]), &None));
        let mut cache = enc.cache(0);
        let (mut found, mut clean) = (0, 0);
        for _ in 0..4000 {
            let mut t = String::new();
            for _ in 0..(lcg(&mut seed) % 40 + 1) {
                let k = lcg(&mut seed) as usize % parts.len();
                // Specials are rare, so that many texts have none.
                if parts[k].contains('>') && lcg(&mut seed) % 8 != 0 {
                    continue;
                }
                t.push_str(parts[k]);
            }
            let want = enc.check_disallowed(&t, &SpecialSet::None, &None);
            let mut got = Vec::new();
            let r = enc.encode_text_checked(&mut cache, &t, &mut got);
            assert_eq!(r, want, "{spec} {t:?}");
            if r.is_ok() {
                let mut plain = Vec::new();
                enc.encode_text(&mut cache, &t, &mut plain).unwrap();
                assert_eq!(got, plain, "{spec} {t:?}");
                clean += 1;
            } else {
                found += 1;
            }
        }
        assert!(found > 500 && clean > 500, "{spec}: {found} with specials, {clean} without");
    }
    // Specials that do not share a lead byte, or hold a space: the separate check.
    let nested = Encoder::new(toy_ranks(), None, specials, "gpt2", 1 << 20).unwrap();
    let e = nested.check_disallowed("a<<x>>", &SpecialSet::Some(vec!["<q>".into()]), &None).unwrap_err();
    assert!(e.contains("\"<<x>>\""), "{e}");
    // Or more than FUSED_CHECK_MAX_SPECIALS of them.
    let many: Vec<(String, u32)> = (0..9).map(|k| (format!("<|r{k}|>"), 1000 + k)).collect();
    let odd = [vec![("<|x|>".to_string(), 1000), ("[y]".to_string(), 1001)], vec![("<|x y|>".to_string(), 1000)], many];
    for sp in odd {
        let enc = Encoder::new(toy_ranks(), None, sp, "gpt2", 1 << 20).unwrap();
        assert!(!enc.can_fuse_check(&SpecialSet::None, &None));
    }
}

#[test]
fn slots_share_one_budget() {
    let ranks = toy_ranks();
    let budget = 1 << 16;
    let enc = Encoder::new(ranks, None, vec![], r"\S+|\s+", budget).unwrap();
    {
        let mut a = enc.cache(0);
        let mut b = enc.cache(1);
        assert!(matches!((&a, &b), (CacheGuard::Slot(_), CacheGuard::Slot(_))));
        let mut seed = 5;
        for k in 0..20_000 {
            let n = 2 + (lcg(&mut seed) % 40) as usize;
            let piece: Vec<u8> = (0..n).map(|_| b"abcdxyz"[(lcg(&mut seed) % 7) as usize]).collect();
            let (mut x, mut y) = (Vec::new(), Vec::new());
            let c = if k % 2 == 0 { &mut a } else { &mut b };
            enc.encode_piece(c, &piece, &mut x);
            enc.bpe_piece(&piece, &mut y);
            assert_eq!(x, y);
            assert!(a.used() + b.used() <= budget, "{} + {} > {budget}", a.used(), b.used());
            assert!(a.charged + b.charged <= budget);
        }
    }
    // clear_cache gives every slot's share back to the pool.
    enc.clear_cache();
    let pool = enc.caches.slots[0].0.lock().unwrap().pool.clone().unwrap();
    assert_eq!(pool.load(Ordering::Relaxed), 0);
}

#[test]
fn state_round_trips_deterministically() {
    let mut ranks = toy_ranks();
    let specials = vec![("<|x|>".to_string(), 1000), ("<|y|>".to_string(), 999)];
    let a = Encoder::new(ranks.clone(), None, specials.clone(), "cl100k", 12345).unwrap();
    ranks.reverse();
    let b = Encoder::new(ranks, None, specials.into_iter().rev().collect(), "cl100k", 12345).unwrap();
    assert_eq!(a.to_state(), b.to_state());
    let c = Encoder::from_state(&a.to_state()).unwrap();
    assert_eq!(c.to_state(), a.to_state());
    assert_eq!(c.n_vocab(), 1001);
    assert!(Encoder::from_state(&a.to_state()[..20]).is_err());
}

#[test]
fn specials_split_and_check() {
    let specials = vec![("<|e|>".to_string(), 500), ("<|f|>".to_string(), 501)];
    let enc = Encoder::new(toy_ranks(), None, specials, "gpt2", 1 << 20).unwrap();
    let t = "ab<|e|>cd<|f|>";
    let mut items = Vec::new();
    enc.split_specials(t, &SpecialSet::Some(vec!["<|f|>".into()]), 0, &mut items);
    assert!(matches!(items[..], [Item::Text(0, 9), Item::Special(501, 9, 14)]));
    assert!(enc.check_disallowed(t, &SpecialSet::Some(vec!["<|f|>".into()]), &None).unwrap_err().contains("<|e|>"));
    assert!(enc.check_disallowed(t, &SpecialSet::All, &None).is_ok());
    assert!(enc.check_disallowed(t, &SpecialSet::None, &Some(SpecialSet::None)).is_ok());
}

#[test]
fn first_pairs_sort_by_rank_then_position() {
    // Both the small sort and the radix sort (ranks past 16 bits take a second pass).
    let mut seed = 9;
    for (n, top) in [(100usize, 1000u64), (5000, 60_000), (20_000, 200_000), (20_000, 1 << 31)] {
        let ranks: Vec<u32> = (0..n).map(|_| if lcg(&mut seed) % 5 == 0 { u32::MAX } else { (lcg(&mut seed) % top) as u32 }).collect();
        let mut want: Vec<u64> = ranks.iter().enumerate().filter(|(_, &r)| r != u32::MAX).map(|(i, &r)| ((r as u64) << 32) | i as u64).collect();
        want.sort_unstable();
        assert_eq!(super::long::sorted_keys(&ranks), want, "n={n} top={top}");
    }
}

#[test]
fn long_pieces_merge_as_the_reference() {
    // Pieces past LARGE_PIECE symbols (the hot/cold queues of `merge_large`), repetitive and
    // random, against the naive merge.
    let ranks = toy_ranks();
    let enc = Encoder::new(ranks.clone(), None, vec![], r"[a-d]+|[^a-d]+", 0).unwrap();
    let mut seed = 21;
    for round in 0..40 {
        let n = 130 + (lcg(&mut seed) % 600) as usize;
        let piece: Vec<u8> = match round % 4 {
            0 => vec![b'a'; n],
            1 => (0..n).map(|i| b"ab"[i % 2]).collect(),
            2 => (0..n).map(|i| if i % 7 == 0 { b'd' } else { b'a' }).collect(),
            _ => (0..n).map(|_| b"aabcd"[(lcg(&mut seed) % 5) as usize]).collect(),
        };
        let mut got = Vec::new();
        enc.bpe_piece(&piece, &mut got);
        assert_eq!(got, naive(&ranks, &piece), "round {round}");
    }
}
