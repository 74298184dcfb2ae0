//! The merge loop's unit tests: worked examples, HF's own, edge cases, extending, widths.

use super::*;

fn run(words: &[(&[u8], u64)], n: usize, tb: TieBreak, minf: u64, maxlen: Option<usize>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let cfg = TrainConfig { max_new_tokens: n, tie_break: tb, min_frequency: minf, max_token_length: maxlen, filter: None };
    train(flat(words).as_ref(), &cfg, None, &mut |_| true)
}

fn flat(words: &[(&[u8], u64)]) -> Flat {
    let mut f = Flat { bytes: Vec::new(), offsets: vec![0], counts: Vec::new() };
    for (w, c) in words {
        f.bytes.extend_from_slice(w);
        f.offsets.push(f.bytes.len() as i64);
        f.counts.push(*c);
    }
    f
}

/// Draws below `n`, from a xorshift generator seeded with `seed` (the tests' random data).
pub(super) fn draws(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed;
    move |n| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    }
}

fn m(list: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
    list.iter().map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec())).collect()
}

#[test]
fn worked_example() {
    let words: &[(&[u8], u64)] = &[(b" the", 5), (b" then", 2), (b" cat", 3), (b" hat", 1)];
    let got = run(words, 6, TieBreak::Lexicographic, 0, None);
    assert_eq!(got, m(&[("t", "h"), ("th", "e"), (" ", "the"), ("a", "t"), ("c", "at"), (" ", "cat")]));
}

#[test]
fn hf_example_from_hf_tests() {
    // HF's own unit test: min_frequency 2 gives re, are, is (ids (a,re) < (i,s)).
    let words: &[(&[u8], u64)] = &[
        (b"roses", 1), (b"are", 2), (b"red", 1), (b"voilets", 1), (b"blue", 1), (b"BERT", 1),
        (b"is", 2), (b"big", 1), (b"and", 1), (b"so", 1), (b"GPT-2", 1),
    ];
    let got = run(words, 100, TieBreak::Hf, 2, None);
    assert_eq!(got, m(&[("r", "e"), ("a", "re"), ("i", "s")]));
    let got = run(words, 100, TieBreak::Lexicographic, 2, None);
    assert_eq!(got, m(&[("r", "e"), ("i", "s"), ("a", "re")]));
}

#[test]
fn repeats() {
    // A A A -> C A ; A A A A -> C C
    let got = run(&[(b"aaa", 1)], 10, TieBreak::Lexicographic, 0, None);
    assert_eq!(got, m(&[("a", "a"), ("aa", "a")]));
    let got = run(&[(b"aaaa", 1)], 10, TieBreak::Lexicographic, 0, None);
    assert_eq!(got, m(&[("a", "a"), ("aa", "aa")]));
    let got = run(&[(b"abab", 3)], 10, TieBreak::Lexicographic, 0, None);
    assert_eq!(got, m(&[("a", "b"), ("ab", "ab")]));
    // aaaaa: (a,a)=4 -> aa aa a: (aa,aa)=1, (aa,a)=1 -> lexicographic picks (aa, aa)
    let got = run(&[(b"aaaaa", 1)], 10, TieBreak::Lexicographic, 0, None);
    assert_eq!(got, m(&[("a", "a"), ("aa", "aa"), ("aaaa", "a")]));
}

#[test]
fn edges_and_stops() {
    assert!(run(&[], 10, TieBreak::Lexicographic, 0, None).is_empty());
    assert!(run(&[(b"", 5), (b"x", 9)], 10, TieBreak::Hf, 0, None).is_empty());
    assert!(run(&[(b"ab", 0)], 10, TieBreak::Hf, 0, None).is_empty());
    assert!(run(&[(b"ab", 5)], 0, TieBreak::Hf, 0, None).is_empty());
    assert!(run(&[(b"ab", 5)], 10, TieBreak::Hf, 6, None).is_empty());
    assert_eq!(run(&[(b"ab", 5)], 10, TieBreak::Hf, 5, None).len(), 1);
    let big = u64::MAX / 2;
    let got = run(&[(b"abc", big), (b"bcd", big)], 10, TieBreak::Lexicographic, 0, None);
    assert_eq!(got[0], (b"b".to_vec(), b"c".to_vec()));
    // max_token_length (bytes, inclusive) in lexicographic mode
    let got = run(&[(b"abcdef", 3)], 10, TieBreak::Lexicographic, 0, Some(2));
    assert!(got.iter().all(|(a, b)| a.len() + b.len() <= 2));
    assert_eq!(got.len(), 3);
    assert!(run(&[(b"abcdef", 3)], 10, TieBreak::Lexicographic, 0, Some(1)).is_empty());
}

#[test]
fn extending_nothing_is_training_and_base_strings_are_reused() {
    let words: &[(&[u8], u64)] = &[(b" the", 5), (b" then", 2), (b" cat", 3), (b" hat", 1), (b"aaaa", 2)];
    for tb in [TieBreak::Lexicographic, TieBreak::Hf] {
        let (mut syms, mut offs, counts) = (Vec::new(), vec![0i64], words.iter().map(|w| w.1).collect::<Vec<_>>());
        for (w, _) in words {
            syms.extend(w.iter().map(|&b| b as u32));
            offs.push(syms.len() as i64);
        }
        let cfg = TrainConfig { max_new_tokens: 7, tie_break: tb, min_frequency: 0, max_token_length: None, filter: None };
        let got = train_extending(&[], &[], Segmented::of(&syms, &offs, &counts), &cfg, 0, &mut |_| true).unwrap().unwrap();
        assert_eq!(got, run(words, 7, tb, 0, None));
    }
    // base "th", "at": " the" is [" ", th, e]; the first new merge joins th + e (count 7)
    let base: Vec<Box<[u8]>> = vec![Box::from(&b"th"[..]), Box::from(&b"at"[..])];
    let (sp, e, n, c, h) = (b' ' as u32, b'e' as u32, b'n' as u32, b'c' as u32, b'h' as u32);
    let syms = vec![sp, 256, e, sp, 256, e, n, sp, c, 257, sp, h, 257];
    let offs = [0i64, 3, 7, 10, 13];
    let cfg = TrainConfig { max_new_tokens: 2, tie_break: TieBreak::Lexicographic, min_frequency: 0, max_token_length: None, filter: None };
    let got = train_extending(&base, &[], Segmented::of(&syms, &offs, &[5, 2, 3, 1]), &cfg, 0, &mut |_| true).unwrap().unwrap();
    assert_eq!(got, m(&[("th", "e"), (" ", "the")]));
    assert!(train_extending(&base, &[], Segmented::of(&[999], &[0, 1], &[1]), &cfg, 0, &mut |_| true).unwrap_err().contains("999"));
}

#[test]
fn wide_symbols_learn_the_same_merges() {
    // More than 65,280 new tokens asked for: the words hold u32 symbols instead of u16.
    let text = "the cat sat on the mat; then the hat, that cat's hat, sat there ab ba abab";
    let mut counts = std::collections::BTreeMap::<Vec<u8>, u64>::new();
    for (i, w) in text.split(' ').enumerate() {
        *counts.entry(format!(" {w}").into_bytes()).or_default() += 1 + (i as u64 % 3);
    }
    let words: Vec<(&[u8], u64)> = counts.iter().map(|(w, c)| (&w[..], *c)).collect();
    for tb in [TieBreak::Lexicographic, TieBreak::Hf] {
        assert!(small_ids(256, &TrainConfig { max_new_tokens: 65_000, tie_break: tb, min_frequency: 0, max_token_length: None, filter: None }));
        let narrow = run(&words, 65_000, tb, 0, None);
        assert!(!small_ids(256, &TrainConfig { max_new_tokens: 70_000, tie_break: tb, min_frequency: 0, max_token_length: None, filter: None }));
        let wide = run(&words, 70_000, tb, 0, None);
        // The last 16-bit value is the words' end mark, never an id.
        let cfg = |n| TrainConfig { max_new_tokens: n, tie_break: tb, min_frequency: 0, max_token_length: None, filter: None };
        assert!(small_ids(256, &cfg(65_279)) && !small_ids(256, &cfg(65_280)));
        assert!(narrow.len() > 20);
        assert_eq!(narrow, wide);
    }
}

#[test]
fn progress_can_stop() {
    let words: &[(&[u8], u64)] = &[(b"abcdefghijklmnop", 1)];
    let cfg = TrainConfig { max_new_tokens: 10, tie_break: TieBreak::Lexicographic, min_frequency: 0, max_token_length: None, filter: None };
    let mut calls = 0;
    let got = train_owned(flat(words), &cfg, None, &mut |_| {
        calls += 1;
        calls < 3
    });
    assert_eq!(got.len(), 3);
}

#[test]
fn quiet_pairs_change_no_merge() {
    // Words over a small alphabet (reused strings, repeats) with counts from 1 to a few
    // hundred: every threshold, from "never quiet" (1) to "all quiet at first", and every
    // option must learn the same merges.
    let mut rnd = draws(99);
    let mut counts = std::collections::BTreeMap::<Vec<u8>, u64>::new();
    for _ in 0..3000 {
        let len = 2 + rnd(9) as usize;
        let w: Vec<u8> = (0..len).map(|_| b"abcdeab  "[rnd(9) as usize]).collect();
        *counts.entry(w).or_default() += 1 + rnd(4) * rnd(4) * rnd(20);
    }
    let words: Vec<(&[u8], u64)> = counts.iter().map(|(w, c)| (&w[..], *c)).collect();
    let segmented = || {
        let (mut syms, mut offs) = (Vec::new(), vec![0i64]);
        for (w, _) in &words {
            syms.extend(w.iter().map(|&b| b as u32));
            offs.push(syms.len() as i64);
        }
        (syms, offs, words.iter().map(|w| w.1).collect::<Vec<u64>>())
    };
    for tb in [TieBreak::Lexicographic, TieBreak::Hf] {
        for (minf, maxlen) in [(0, None), (3, None), (0, Some(4))] {
            let cfg = TrainConfig { max_new_tokens: 400, tie_break: tb, min_frequency: minf, max_token_length: maxlen, filter: None };
            let learn = |q: i64| {
                QUIET_START.with(|c| c.set(q));
                let (syms, offs, cs) = segmented();
                let ext = train_extending(&[], &[], Segmented::of(&syms, &offs, &cs), &cfg, 0, &mut |_| true).unwrap().unwrap();
                (run(&words, 400, tb, minf, maxlen), ext)
            };
            let want = learn(1);
            assert!(want.0.len() > 100, "{}", want.0.len());
            // (Every quiet count forgotten, then counted again when needed, too.)
            for forget in [pairs::FORGET_QUIET_ABOVE, 0] {
                FORGET_ABOVE.with(|c| c.set(forget));
                for q in [2, 5, 64, 200, 1000, 1 << 20] {
                    assert_eq!(learn(q), want, "threshold {q}, forget above {forget}, {tb:?}, min_frequency {minf}, max_token_length {maxlen:?}");
                }
            }
            QUIET_START.with(|c| c.set(pairs::QUIET_BELOW));
            FORGET_ABOVE.with(|c| c.set(pairs::FORGET_QUIET_ABOVE));
        }
    }
}

#[test]
fn a_reused_token_keeps_the_quiet_counts_of_its_pairs() {
    // The base holds "abc"; the words hold it either as that token or as a, b, c. Merging
    // a+b, then ab+c, forms "abc" again (a reused token), so the pairs it forms, (x, abc) and
    // (abc, y), were there before and mostly quiet: their counts must carry over, and a pair
    // that loses occurrences in the same merge must lose them too. Every threshold must learn
    // what "never quiet" (1) learns.
    let mut rnd = draws(7);
    let base: Vec<Box<[u8]>> = vec![Box::from(&b"abc"[..])];
    let (mut syms, mut offs, mut counts) = (Vec::new(), vec![0i64], Vec::new());
    for _ in 0..3000 {
        for _ in 0..2 + rnd(6) {
            match rnd(4) {
                0 => syms.push(256),
                1 => syms.extend([b'a' as u32, b'b' as u32, b'c' as u32]),
                2 => syms.extend([b'a' as u32, b'b' as u32]),
                // (Many other symbols: the pairs next to "abc" are rare, and quiet.)
                _ => syms.push(100 + rnd(150) as u32),
            }
        }
        offs.push(syms.len() as i64);
        counts.push(1 + rnd(3) * rnd(3));
    }
    for tb in [TieBreak::Lexicographic, TieBreak::Hf] {
        let cfg = TrainConfig { max_new_tokens: 150, tie_break: tb, min_frequency: 0, max_token_length: None, filter: None };
        let learn = |q: i64| {
            QUIET_START.with(|c| c.set(q));
            train_extending(&base, &[], Segmented::of(&syms, &offs, &counts), &cfg, 0, &mut |_| true).unwrap().unwrap()
        };
        let want = learn(1);
        // (A merge that forms "abc" again makes no new token: one merge more than new tokens.)
        assert!(want.len() > 150 && want.iter().any(|(l, r)| [&l[..], &r[..]].concat() == b"abc"), "{want:?}");
        for forget in [pairs::FORGET_QUIET_ABOVE, 0] {
            FORGET_ABOVE.with(|c| c.set(forget));
            for q in [2, 3, 5, 8, 20, 60] {
                assert_eq!(learn(q), want, "threshold {q}, forget above {forget}, {tb:?}");
            }
        }
        QUIET_START.with(|c| c.set(pairs::QUIET_BELOW));
        FORGET_ABOVE.with(|c| c.set(pairs::FORGET_QUIET_ABOVE));
    }
    // The same merge takes occurrences of a quiet pair away and forms new ones: "abc ab c"
    // (x10) loses (abc, ab), "ab c ab d" (x10) forms it, "abc ab d" (x5) holds it. Its count
    // is 15 then, below (e, f)'s 17: counting the loss out would put it first.
    let (a, b, c, d, e, f) = (97u32, 98, 99, 100, 101, 102);
    let words: [(&[u32], u64); 6] =
        [(&[a, b], 1000), (&[a, b, c], 500), (&[256, a, b, c], 10), (&[a, b, c, a, b, d], 10), (&[256, a, b, d], 5), (&[e, f], 17)];
    let syms: Vec<u32> = words.iter().flat_map(|w| w.0.iter().copied()).collect();
    let mut offs = vec![0i64];
    words.iter().for_each(|w| offs.push(offs[offs.len() - 1] + w.0.len() as i64));
    let counts: Vec<u64> = words.iter().map(|w| w.1).collect();
    let cfg = TrainConfig { max_new_tokens: 6, tie_break: TieBreak::Lexicographic, min_frequency: 0, max_token_length: None, filter: None };
    let learn = |q: i64| {
        QUIET_START.with(|c| c.set(q));
        train_extending(&base, &[], Segmented::of(&syms, &offs, &counts), &cfg, 0, &mut |_| true).unwrap().unwrap()
    };
    let want = learn(1);
    assert_eq!(want[..4], m(&[("a", "b"), ("ab", "c"), ("e", "f"), ("abc", "ab")]));
    assert_eq!(learn(60), want);
    FORGET_ABOVE.with(|c| c.set(0));
    assert_eq!(learn(60), want);
    QUIET_START.with(|c| c.set(pairs::QUIET_BELOW));
    FORGET_ABOVE.with(|c| c.set(pairs::FORGET_QUIET_ABOVE));
}

#[test]
fn owned_counts_given_back_while_copied_train_the_same() {
    // Over 3 x 65,536 words with bytes of every length, so that pages of all three arrays are
    // given back between the chunks (a page given back too early would read as zeros).
    let words: Vec<Vec<u8>> = (0..200_000u32).map(|i| format!("{}{}", "ab".repeat((i % 7) as usize), i * 7919).into_bytes()).collect();
    let mut sorted: Vec<(&[u8], u64)> = words.iter().map(|w| (&w[..], 1 + (w.len() as u64 % 5))).collect();
    sorted.sort();
    sorted.dedup_by(|a, b| a.0 == b.0);
    let cfg = TrainConfig { max_new_tokens: 300, tie_break: TieBreak::Lexicographic, min_frequency: 0, max_token_length: None, filter: None };
    let borrowed = train(flat(&sorted).as_ref(), &cfg, None, &mut |_| true);
    let owned = train_owned(flat(&sorted), &cfg, None, &mut |_| true);
    let words_owned = Words::<u16>::of_input(&mut Input::Owned(flat(&sorted)));
    let words_borrowed = Words::<u16>::of_input(&mut Input::Borrowed(flat(&sorted).as_ref()));
    assert_eq!(borrowed.len(), 300);
    assert_eq!(owned, borrowed);
    assert_eq!(words_owned.len(), words_borrowed.len());
    assert!((0..words_owned.len()).all(|w| words_owned.syms_of(w) == words_borrowed.syms_of(w) && words_owned.count(w) == words_borrowed.count(w)));
}

#[test]
fn merges_on_two_or_three_threads_learn_what_one_learns() {
    // Big merges (40 words or more here) share their runs between two threads when the token
    // is new, and apply them in order when it is reused; either way the merges are one
    // thread's, with every option and quiet threshold.
    let mut rnd = draws(7);
    let mut counts = std::collections::BTreeMap::<Vec<u8>, u64>::new();
    for _ in 0..4000 {
        let len = 2 + rnd(12) as usize;
        let w: Vec<u8> = (0..len).map(|_| b"abcab a-bc"[rnd(10) as usize]).collect();
        *counts.entry(w).or_default() += 1 + rnd(3) * rnd(50);
    }
    let words: Vec<(&[u8], u64)> = counts.iter().map(|(w, c)| (&w[..], *c)).collect();
    let pools: Vec<_> = [2, 3].iter().map(|&n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap()).collect();
    for tb in [TieBreak::Lexicographic, TieBreak::Hf] {
        for maxlen in [None, Some(5)] {
            for q in [1, 64] {
                QUIET_START.with(|c| c.set(q));
                let cfg = TrainConfig { max_new_tokens: 300, tie_break: tb, min_frequency: 0, max_token_length: maxlen, filter: None };
                let want = train(flat(&words).as_ref(), &cfg, None, &mut |_| true);
                assert!(want.len() > 150, "{}", want.len());
                for pool in &pools {
                    let got = train(flat(&words).as_ref(), &cfg, Some(pool), &mut |_| true);
                    assert_eq!(got, want, "{} threads, {tb:?}, max_token_length {maxlen:?}, quiet below {q}", pool.current_num_threads());
                }
            }
        }
    }
    QUIET_START.with(|c| c.set(pairs::QUIET_BELOW));
}
