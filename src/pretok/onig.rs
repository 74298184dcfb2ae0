//! A `tokenizer.json` regex as Oniguruma reads it (`tokenizers` compiles `Split` and `Replace`
//! regexes with Oniguruma's Ruby syntax), rewritten into the dialect of our engine
//! (`pretok/regex.rs`: regex-syntax classes, fancy-regex look-around, `$` = end of text or before
//! a final `"\n"`). Exact where a rewrite exists, else an error naming the construct; never a
//! silent difference. Each class below was measured against `tokenizers` over every code point
//! (`tests/test_regex_dialect.py`):
//!
//! * `\w` and `\p{Word}` are Unicode word chars without ZWNJ/ZWJ and with `²³¹¼½¾` (Latin-1's
//!   table decides below U+0100); `[[:word:]]` and `\w` inside brackets lack those six.
//! * POSIX brackets and `\p{Alpha}`-style names are Unicode (`[[:alpha:]]` = Alphabetic,
//!   `[[:punct:]]` = P and S, but `\p{Punct}` = P); ours read them as ASCII.
//! * `^`/`$` are line anchors (`^` never after a final `"\n"`); `(?m)` is dot-all; `(?s)` and
//!   `(?P<..>` are errors; `\h` is a hex digit; `\<` `\>` are literals; `X{n,m}+` repeats
//!   `X{n,m}`, `X{n}?` makes `X{n}` optional; `{,n}` is `{0,n}`.
//! * An inline option runs to the end of its group, later alternatives inside it (`x(?i)b|c` is
//!   `x(?i:b|c)`). Under `(?i)` a bare `\p{..}` is not folded (a bracketed one is), and letters
//!   folded to several (`ß`/`ss`, `ﬆ`/`st`, ...) are refused: we fold one char to one.

/// Onig's `\w` (measured).
const WORD: &str = r"[\w\xB2\xB3\xB9\xBC-\xBE&&[^\x{200C}\x{200D}]]";
const NOT_WORD: &str = r"[^\w\xB2\xB3\xB9\xBC-\xBE&&[^\x{200C}\x{200D}]]";

/// A POSIX bracket name or its `\p{..}` spelling, as a class of ours (`None`: pass through).
fn named_class(name: &str, posix: bool, in_class: bool) -> Option<&'static str> {
    let key: String = name.chars().filter(|c| !matches!(c, ' ' | '_' | '-')).flat_map(char::to_lowercase).collect();
    Some(match key.as_str() {
        "alpha" => r"[\p{Alphabetic}]",
        "alnum" => r"[\p{Alphabetic}\p{Nd}]",
        "word" if posix || in_class => r"[\w&&[^\x{200C}\x{200D}]]",
        "word" => WORD,
        "punct" if posix => r"[\p{P}\p{S}]",
        "punct" => r"[\p{P}]",
        "space" => r"[\s]",
        "digit" => r"[\p{Nd}]",
        "upper" => r"[\p{Uppercase}]",
        "lower" => r"[\p{Lowercase}]",
        "xdigit" => r"[0-9a-fA-F]",
        "blank" => r"[\p{Zs}\t]",
        "cntrl" => r"[\p{Cc}]",
        "graph" => r"[^\s\p{Cc}\p{Cn}]",
        "print" => r"[[^\s\p{Cc}\p{Cn}]\p{Zs}]",
        "ascii" => r"[\x00-\x7F]",
        "any" => r"[\x00-\x{10FFFF}]",
        "assigned" => r"[^\p{Cn}]",
        _ => return None,
    })
}

/// `class` (a bracketed class of ours) negated.
fn negate(class: &str) -> String {
    match class.strip_prefix("[^") {
        Some(rest) => format!("[{rest}"),
        None => format!("[^{}", &class[1..]),
    }
}

fn unsupported(what: &str, src: &str) -> String {
    format!("the regex {src:?} uses {what}, which this engine cannot reproduce exactly as Oniguruma (tokenizers) reads it")
}

/// What the last quantifier left: nothing to repeat yet, a simple one (`*+?`), an interval
/// (`{n,m}`), or one already made lazy/possessive.
#[derive(Clone, Copy, PartialEq)]
enum Quant {
    None,
    Simple,
    /// `{n,}`, `{n,m}`, `{,m}`: `?` after it is lazy.
    Interval,
    /// `{n}`: `?` after it makes it optional (Ruby syntax), `+` repeats it.
    Fixed,
    Done,
}

struct Out<'a> {
    src: &'a str,
    out: String,
    /// Start (in `out`) of each open group's last atom; and of each open group itself.
    atom: Vec<Option<usize>>,
    groups: Vec<usize>,
    quant: Quant,
    /// Dot-all (Onig's `m`) and case-insensitive per open group.
    flags: Vec<(bool, bool)>,
    /// Whether each open group is an implicit one: Oniguruma's `(?i)` in a group runs to its end,
    /// later alternatives included (`x(?i)b|c` is `x(?i:b|c)`).
    implicit: Vec<bool>,
    /// The last literal char, under `(?i)`: Oniguruma folds `ss` with `ß` (and more), we do not.
    prev_lit: Option<char>,
}

impl Out<'_> {
    fn atom(&mut self, s: &str) {
        *self.atom.last_mut().expect("a level") = Some(self.out.len());
        self.out.push_str(s);
        self.quant = Quant::None;
        self.prev_lit = None;
    }

    fn casei(&self) -> bool {
        self.flags.last().expect("a level").1
    }

    /// A literal char; under `(?i)` one that takes part in a multi-char case fold is refused.
    fn literal(&mut self, c: char) -> Result<(), String> {
        if self.casei() {
            let pair = self.prev_lit.map(|p| [p.to_ascii_lowercase(), c.to_ascii_lowercase()]);
            if (c.is_alphabetic() && !c.is_ascii()) || matches!(pair, Some(['s', 's' | 't'] | ['f', 'f' | 'i' | 'l'])) {
                return Err(unsupported(&format!("{c:?} case-insensitively (Oniguruma folds letters such as ß with ss)"), self.src));
            }
        }
        self.atom(&c.to_string());
        self.prev_lit = Some(c);
        Ok(())
    }

    /// Opens a group (`implicit`: one that `(?flags)` opened) with these flags.
    fn open(&mut self, opener: &str, flags: (bool, bool), implicit: bool) {
        self.groups.push(self.out.len());
        self.out.push_str(opener);
        self.atom.push(None);
        self.flags.push(flags);
        self.implicit.push(implicit);
        self.quant = Quant::None;
        self.prev_lit = None;
    }

    /// Closes the innermost group; it becomes an atom of the one around it.
    fn close(&mut self) {
        self.out.push(')');
        self.atom.pop();
        self.flags.pop();
        self.implicit.pop();
        let start = self.groups.pop().expect("an open group");
        let group = self.out[start..].to_string();
        self.out.truncate(start);
        self.atom(&group);
    }

    /// A quantifier `q` (`*`, `+`, `?`, `{..}`) after the last atom, as Oniguruma reads it.
    fn quantifier(&mut self, q: &str) -> Result<(), String> {
        let Some(start) = *self.atom.last().expect("a level") else {
            return Err(unsupported(&format!("a quantifier {q:?} with nothing to repeat"), self.src));
        };
        let kind = match q.starts_with('{') {
            true if q.contains(',') => Quant::Interval,
            true => Quant::Fixed,
            false => Quant::Simple,
        };
        let suffix = matches!((self.quant, q), (Quant::Simple, "?" | "+") | (Quant::Interval, "?"));
        self.prev_lit = None;
        if suffix {
            self.quant = Quant::Done;
        } else {
            if self.quant != Quant::None {
                // a repeat of a repeat (`a{2}+`, `a+*`): the first one grouped
                self.out.insert_str(start, "(?:");
                self.out.push(')');
            }
            self.quant = kind;
        }
        self.out.push_str(q);
        Ok(())
    }
}

/// `src` (Oniguruma, Ruby syntax) in our engine's dialect, or an error naming what has no exact
/// rewrite.
pub fn from_oniguruma(src: &str) -> Result<String, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut o = Out {
        src,
        out: String::with_capacity(src.len() * 2),
        atom: vec![None],
        groups: vec![0],
        quant: Quant::None,
        flags: vec![(false, false)],
        implicit: vec![false],
        prev_lit: None,
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '\\' => {
                let (s, next) = escape(&chars, i, src, false)?;
                let bare_property = matches!(chars.get(i), Some('p' | 'P')) && o.casei();
                i = next;
                match s {
                    // Oniguruma folds no bare \p{..} under (?i) (a bracketed one it does)
                    Esc::Atom(a) if bare_property => o.atom(&format!("(?-i:{a})")),
                    Esc::Atom(a) => o.atom(&a),
                    Esc::Assert(a) => {
                        o.out.push_str(&a);
                        *o.atom.last_mut().expect("a level") = None;
                        o.quant = Quant::None;
                    }
                }
            }
            '[' => {
                let (class, next) = class(&chars, i, src, o.casei())?;
                i = next;
                o.atom(&class);
            }
            '(' => {
                if chars.get(i) == Some(&'?') {
                    let rest: String = chars[i + 1..].iter().take(3).collect();
                    if rest.starts_with('#') {
                        let end = chars[i..].iter().position(|&c| c == ')').ok_or_else(|| unsupported("an unclosed comment", src))?;
                        i += end + 1;
                        continue;
                    }
                    let opener = if rest.starts_with(':') || rest.starts_with('=') || rest.starts_with('!') || rest.starts_with('>') {
                        i += 2;
                        format!("(?{}", &rest[..1])
                    } else if rest.starts_with("<=") || rest.starts_with("<!") {
                        i += 3;
                        format!("(?{}", &rest[..2])
                    } else if rest.starts_with("P<") {
                        return Err(unsupported("the group syntax (?P<name>", src));
                    } else if rest.starts_with('<') || rest.starts_with('\'') {
                        let close = if rest.starts_with('\'') { '\'' } else { '>' };
                        let from = i + 1 + rest.find(['<', '\'']).expect("checked") + 1;
                        let end = chars[from..].iter().position(|&c| c == close).ok_or_else(|| unsupported("an unclosed group name", src))?;
                        let name: String = chars[from..from + end].iter().collect();
                        i = from + end + 1;
                        format!("(?P<{name}>")
                    } else {
                        // flags: (?imx-imx) or (?imx-imx:...); Onig's m is our s (dot-all)
                        let mut j = i + 1;
                        let (mut on, mut off, mut neg) = (String::new(), String::new(), false);
                        let mut flags = *o.flags.last().expect("a level");
                        while j < chars.len() && !matches!(chars[j], ')' | ':') {
                            let ours = match chars[j] {
                                '-' => {
                                    neg = true;
                                    j += 1;
                                    continue;
                                }
                                'i' => {
                                    flags.1 = !neg;
                                    'i'
                                }
                                'm' => {
                                    flags.0 = !neg;
                                    's'
                                }
                                f => return Err(unsupported(&format!("the group option (?{f}"), src)),
                            };
                            if neg { off.push(ours) } else { on.push(ours) }
                            j += 1;
                        }
                        if j >= chars.len() {
                            return Err(unsupported("an unclosed group", src));
                        }
                        let spelled = if off.is_empty() { on } else { format!("{on}-{off}") };
                        i = j + 1;
                        let opener = if spelled.is_empty() { "(?:".to_string() } else { format!("(?{spelled}:") };
                        if chars[j] == ')' {
                            // to the end of the enclosing group, its later alternatives included
                            o.open(&opener, flags, true);
                            continue;
                        }
                        o.open(&opener, flags, false);
                        continue;
                    };
                    if rest.starts_with('~') || rest.starts_with('(') {
                        return Err(unsupported("an absent operator or a conditional", src));
                    }
                    let inherited = *o.flags.last().expect("a level");
                    o.open(&opener, inherited, false);
                } else {
                    let inherited = *o.flags.last().expect("a level");
                    o.open("(", inherited, false);
                }
            }
            ')' => {
                while *o.implicit.last().expect("a level") {
                    o.close();
                }
                if o.groups.len() == 1 {
                    return Err(format!("the regex {src:?} has an unbalanced ')'"));
                }
                o.close();
            }
            '|' => {
                o.out.push('|');
                *o.atom.last_mut().expect("a level") = None;
                o.quant = Quant::None;
            }
            '^' => {
                // a line start, but not after a final "\n"
                o.out.push_str(r"(?:\A|(?<=\n)(?!\z))");
                *o.atom.last_mut().expect("a level") = None;
            }
            '$' => {
                o.out.push_str(r"(?=\n|\z)");
                *o.atom.last_mut().expect("a level") = None;
            }
            '*' | '+' | '?' => o.quantifier(&c.to_string())?,
            '{' => match interval(&chars, i) {
                Some((q, next)) => {
                    i = next;
                    o.quantifier(&q)?;
                }
                None => o.atom(r"\{"),
            },
            '.' => o.atom(if o.flags.last().expect("a level").0 { r"(?s:.)" } else { "." }),
            ']' | '}' => o.atom(&format!("\\{c}")),
            c => o.literal(c)?,
        }
    }
    while *o.implicit.last().expect("a level") {
        o.close();
    }
    if o.groups.len() > 1 {
        return Err(format!("the regex {src:?} has an unclosed '('"));
    }
    Ok(o.out)
}

/// `{n}`, `{n,}`, `{n,m}`, `{,m}` at `chars[i..]` (just past `{`), as ours spells it.
fn interval(chars: &[char], i: usize) -> Option<(String, usize)> {
    let end = i + chars[i..].iter().take(24).position(|&c| c == '}')?;
    let body: String = chars[i..end].iter().collect();
    let (lo, hi) = match body.split_once(',') {
        Some((a, b)) => (a, Some(b)),
        None => (body.as_str(), None),
    };
    let num = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let ok = match hi {
        None => num(lo),
        Some(h) => (num(lo) || lo.is_empty()) && (num(h) || h.is_empty()) && !(lo.is_empty() && h.is_empty()),
    };
    if !ok {
        return None;
    }
    let lo = if lo.is_empty() { "0" } else { lo };
    Some((match hi { None => format!("{{{lo}}}"), Some(h) => format!("{{{lo},{h}}}") }, end + 1))
}

enum Esc {
    Atom(String),
    Assert(String),
}

/// The escape at `chars[i..]` (just past `\`); `in_class` for one inside brackets.
fn escape(chars: &[char], i: usize, src: &str, in_class: bool) -> Result<(Esc, usize), String> {
    let Some(&c) = chars.get(i) else {
        return Err(format!("the regex {src:?} ends with a lone backslash"));
    };
    let atom = |s: &str| Ok((Esc::Atom(s.to_string()), i + 1));
    let word_boundary = |neg: bool| {
        let w = WORD;
        if neg {
            format!("(?:(?<={w})(?={w})|(?<!{w})(?!{w}))")
        } else {
            format!("(?:(?<={w})(?!{w})|(?<!{w})(?={w}))")
        }
    };
    match c {
        // (inside brackets Onig's \w lacks the six Latin-1 chars, as [[:word:]])
        'w' if in_class => atom(r"[\w&&[^\x{200C}\x{200D}]]"),
        'W' if in_class => atom(r"[^\w&&[^\x{200C}\x{200D}]]"),
        'w' => atom(WORD),
        'W' => atom(NOT_WORD),
        'd' => atom(r"\p{Nd}"),
        'D' => atom(r"\P{Nd}"),
        's' | 'S' | 'n' | 't' | 'r' | 'f' | 'v' | 'a' => atom(&format!("\\{c}")),
        'e' => atom(r"\x1B"),
        'h' => atom("[0-9a-fA-F]"),
        'H' => atom("[^0-9a-fA-F]"),
        'p' | 'P' if chars.get(i + 1) == Some(&'{') => {
            let end = i + 2 + chars[i + 2..].iter().position(|&c| c == '}').ok_or_else(|| unsupported("an unclosed \\p{", src))?;
            let mut name: String = chars[i + 2..end].iter().collect();
            let mut neg = c == 'P';
            if let Some(n) = name.strip_prefix('^') {
                neg = !neg;
                name = n.to_string();
            }
            let class = match named_class(&name, false, in_class) {
                Some(cls) => cls.to_string(),
                None => format!("[\\p{{{name}}}]"),
            };
            Ok((Esc::Atom(if neg { negate(&class) } else { class }), end + 1))
        }
        'x' | 'u' => {
            // \xHH, \x{H..}, \uHHHH: the same in ours
            let len = if chars.get(i + 1) == Some(&'{') {
                2 + chars[i + 1..].iter().position(|&c| c == '}').ok_or_else(|| unsupported("an unclosed \\x{", src))?
            } else if c == 'x' {
                1 + chars[i + 1..].iter().take(2).take_while(|c| c.is_ascii_hexdigit()).count()
            } else {
                5
            };
            let esc: String = chars[i - 1..(i + len).min(chars.len())].iter().collect();
            if c == 'x' && len == 3 && u8::from_str_radix(&esc[2..], 16).is_ok_and(|b| b >= 0x80) {
                // (Oniguruma reads \xHH above 7F as one byte of UTF-8, not as a char)
                return Err(unsupported(&format!("the raw byte {esc}"), src));
            }
            Ok((Esc::Atom(esc), i + len))
        }
        'b' if in_class => atom(r"\x08"),
        'b' => Ok((Esc::Assert(word_boundary(false)), i + 1)),
        'B' if !in_class => Ok((Esc::Assert(word_boundary(true)), i + 1)),
        'A' | 'z' if !in_class => Ok((Esc::Assert(format!("\\{c}")), i + 1)),
        'Z' if !in_class => Ok((Esc::Assert(r"(?=\n?\z)".into()), i + 1)),
        'R' if !in_class => atom(r"(?:\r\n|[\n\x0B\x0C\r\x{85}\x{2028}\x{2029}])"),
        'N' if !in_class => atom(r"[^\n]"),
        '1'..='9' if !in_class => atom(&format!("\\{c}")),
        'k' if !in_class && chars.get(i + 1) == Some(&'<') => {
            let end = i + 2 + chars[i + 2..].iter().position(|&c| c == '>').ok_or_else(|| unsupported("an unclosed \\k<", src))?;
            Ok((Esc::Atom(chars[i - 1..=end].iter().collect()), end + 1))
        }
        '<' | '>' => atom(&c.to_string()), // (literal in Ruby syntax; a word boundary in ours)
        c if c.is_ascii_alphanumeric() => Err(unsupported(&format!("the escape \\{c}"), src)),
        c => atom(&format!("\\{c}")),
    }
}

/// The bracketed class at `chars[i..]` (just past `[`) as a class of ours.
fn class(chars: &[char], mut i: usize, src: &str, casei: bool) -> Result<(String, usize), String> {
    let mut out = String::from("[");
    if chars.get(i) == Some(&'^') {
        out.push('^');
        i += 1;
    }
    let mut first = true;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ']' if !first => return Ok((out + "]", i + 1)),
            '[' if chars.get(i + 1) == Some(&':') => {
                let end = i + 2 + chars[i + 2..].iter().take(16).position(|&c| c == ']').ok_or_else(|| unsupported("an unclosed POSIX bracket", src))?;
                let body: String = chars[i + 2..end].iter().collect();
                let Some(inner) = body.strip_suffix(':') else {
                    return Err(unsupported(&format!("the class [{body}]"), src));
                };
                let (neg, name) = match inner.strip_prefix('^') {
                    Some(n) => (true, n),
                    None => (false, inner),
                };
                let cls = named_class(name, true, true).ok_or_else(|| unsupported(&format!("the POSIX bracket [:{inner}:]"), src))?;
                out.push_str(&if neg { negate(cls) } else { cls.to_string() });
                i = end + 1;
            }
            '[' => {
                let (inner, next) = class(chars, i + 1, src, casei)?;
                out.push_str(&inner);
                i = next;
            }
            '\\' => {
                let (e, next) = escape(chars, i + 1, src, true)?;
                let Esc::Atom(a) = e else { unreachable!("no assertion in a class") };
                out.push_str(&a);
                i = next;
            }
            '-' if chars.get(i + 1) == Some(&'-') => return Err(unsupported("'--' in a class", src)),
            '~' if chars.get(i + 1) == Some(&'~') => return Err(unsupported("'~~' in a class", src)),
            '&' if chars.get(i + 1) == Some(&'&') => {
                out.push_str("&&");
                i += 2;
            }
            c if casei && c.is_alphabetic() && !c.is_ascii() => {
                return Err(unsupported(&format!("{c:?} case-insensitively (Oniguruma folds letters such as ß with ss)"), src));
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
        first = false;
    }
    Err(format!("the regex {src:?} has an unclosed '['"))
}
