//! Values as an attacker cannot cheaply disguise them: identifiers found inside any text, in one
//! normal form, so that a value the model copied from a tool result into a call's arguments is
//! recognised however either side wrote it.
//!
//! - emails: case-folded;
//! - URLs: case-folded, without scheme, `www.` or a trailing `/`; each also gives its host;
//! - hosts: a bare domain (`evil.example`), a URL's or an email's, case-folded, without `www.`;
//! - numbers and codes (IBANs, phone and account numbers): runs of letters and digits joined by
//!   spaces, dashes, dots, slashes or parentheses, holding at least `min_digits` digits, with
//!   the separators stripped and letters upper-cased (`GB29 NWBK 6016…` = `gb29nwbk6016…`).
//!   Dates are not numbers here: a date shared by an email and a call taints nothing.
//!
//! Only ASCII is looked at: a non-ASCII byte ends a token.

use std::borrow::Cow;

/// What kind of value a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Email,
    Url,
    Host,
    /// A number or code, separators stripped.
    Number,
}

/// One value in normal form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token {
    pub kind: Kind,
    pub norm: String,
}

/// How tokens are found.
#[derive(Debug, Clone, Copy)]
pub struct Scan {
    /// A number or code with fewer digits is not a token (amounts, counts, small ids).
    pub min_digits: usize,
}

fn word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn email_local(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"._%+-".contains(&b)
}

fn domain_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'.' || b == b'-'
}

/// The length of the character at `i` of `s` when it is a letter or digit outside ASCII (an
/// internationalised name, or a look-alike letter an attacker put in one).
fn wide_at(s: &str, i: usize) -> Option<usize> {
    s.get(i..)?
        .chars()
        .next()
        .filter(|c| !c.is_ascii() && c.is_alphanumeric())
        .map(char::len_utf8)
}

/// The start of the character ending at `i` of `s` when it is a letter or digit outside ASCII.
fn wide_before(s: &str, i: usize) -> Option<usize> {
    s.get(..i)?
        .chars()
        .next_back()
        .filter(|c| !c.is_ascii() && c.is_alphanumeric())
        .map(|c| i - c.len_utf8())
}

/// From `start`, past every byte `ascii` accepts and every letter or digit outside ASCII.
fn run_forward(s: &str, mut at: usize, ascii: fn(u8) -> bool) -> usize {
    let b = s.as_bytes();
    while at < b.len() {
        if ascii(b[at]) {
            at += 1;
        } else if let Some(n) = wide_at(s, at) {
            at += n;
        } else {
            break;
        }
    }
    at
}

/// Back from `end`, likewise.
fn run_back(s: &str, mut at: usize, ascii: fn(u8) -> bool) -> usize {
    let b = s.as_bytes();
    while at > 0 {
        if ascii(b[at - 1]) {
            at -= 1;
        } else if let Some(start) = wide_before(s, at) {
            at = start;
        } else {
            break;
        }
    }
    at
}

/// `host` folded: lower case, no `www.`, no trailing dot; `None` unless it looks like a domain
/// (labels of letters, digits and dashes, the last of at least two letters; letters of any
/// script).
pub fn host(host: &str) -> Option<String> {
    let host = fold(host.trim_end_matches('.'));
    let host = host.strip_prefix("www.").unwrap_or(&host);
    let mut labels = host.split('.');
    let last = labels.next_back()?;
    let mut any = false;
    for label in labels {
        if label.is_empty() || !label.chars().all(|c| c.is_alphanumeric() || c == '-') {
            return None;
        }
        any = true;
    }
    (any && last.chars().count() >= 2 && last.chars().all(char::is_alphabetic))
        .then(|| host.to_string())
}

/// `name` without a word of the next sentence glued to it (`www.example.com.They`: a last label
/// capitalised, after lower-case ones, is a sentence that began without a space).
fn unglued(name: &str) -> &str {
    let Some((head, last)) = name.rsplit_once('.') else {
        return name;
    };
    let mut letters = last.chars();
    let capital = letters.next().is_some_and(|c| c.is_ascii_uppercase());
    let rest_lower = letters.clone().count() > 0 && letters.all(|c| c.is_ascii_lowercase());
    match capital && rest_lower && head.contains('.') && !head.chars().any(|c| c.is_uppercase()) {
        true => head,
        false => name,
    }
}

impl Scan {
    /// Every token in `text`, added to `out`.
    pub fn tokens(&self, text: &str, out: &mut Vec<Token>) {
        let b = text.as_bytes();
        self.emails(text, out);
        self.urls(text, out);
        // Bare domains: runs of letters, digits, dots and dashes holding a dot between two
        // of them. Only dots are looked at: prose has few.
        let mut next = 0;
        for (dot, _) in text.match_indices('.') {
            let alnum_before =
                dot > 0 && (b[dot - 1].is_ascii_alphanumeric() || wide_before(text, dot).is_some());
            let alnum_after = dot + 1 < b.len()
                && (b[dot + 1].is_ascii_alphanumeric() || wide_at(text, dot + 1).is_some());
            if dot < next || !alnum_before || !alnum_after {
                continue;
            }
            let start = run_back(text, dot, domain_byte);
            let end = run_forward(text, dot, domain_byte);
            next = end;
            let before = start.checked_sub(1).map(|s| b[s]);
            // A domain inside an email or a URL was taken with it.
            if before != Some(b'@') && before != Some(b'/') {
                let name = unglued(text[start..end].trim_start_matches(['.', '-']));
                if let Some(h) = host(name) {
                    out.push(Token {
                        kind: Kind::Host,
                        norm: h,
                    });
                }
            }
        }
        self.numbers(b, out);
    }

    fn emails(&self, text: &str, out: &mut Vec<Token>) {
        for (at, _) in text.match_indices('@') {
            let start = run_back(text, at, email_local);
            let end = run_forward(text, at + 1, domain_byte);
            let local = text[start..at].trim_start_matches('.');
            let Some(domain) = host(unglued(text[at + 1..end].trim_end_matches(['.', '-']))) else {
                continue;
            };
            if local.is_empty() {
                continue;
            }
            out.push(Token {
                kind: Kind::Email,
                norm: format!("{}@{domain}", fold(local)),
            });
            out.push(Token {
                kind: Kind::Host,
                norm: domain,
            });
        }
    }

    fn urls(&self, text: &str, out: &mut Vec<Token>) {
        let b = text.as_bytes();
        for (sep, _) in text.match_indices("://") {
            let mut start = sep;
            while start > 0 && b[start - 1].is_ascii_alphabetic() {
                start -= 1;
            }
            if start == sep {
                continue;
            }
            let rest = &text[sep + 3..];
            let end = rest
                .find(|c: char| {
                    c.is_whitespace()
                        || "\"'<>`\\|{}^".contains(c)
                        || (!c.is_ascii() && !c.is_alphanumeric())
                })
                .unwrap_or(rest.len());
            let url = rest[..end].trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']']);
            let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
            let authority = &url[..authority_end];
            let authority = authority.rsplit('@').next().unwrap_or(authority);
            let name = authority.split(':').next().unwrap_or(authority);
            let Some(h) = host(unglued(name)) else {
                continue;
            };
            let path = url[authority_end..].trim_end_matches('/');
            out.push(Token {
                kind: Kind::Url,
                norm: format!("{h}{}", fold(path)),
            });
            out.push(Token {
                kind: Kind::Host,
                norm: h,
            });
        }
    }

    /// Numbers and codes: runs of letter-and-digit groups joined by at most two separators.
    pub(crate) fn numbers(&self, b: &[u8], out: &mut Vec<Token>) {
        // The group (maximal run of letters and digits) ending where `from` starts one, if any;
        // an ISO time's `T` ends it (`14T10:30`: the day, then the hour).
        let group = |from: usize| -> (usize, usize) {
            let mut e = from;
            while e < b.len() && word_byte(b[e]) {
                if b[e] == b'T' && e > from && b[e - 1].is_ascii_digit() && hour_at(b, e + 1) {
                    break;
                }
                e += 1;
            }
            (from, e)
        };
        let has_digit = |(s, e): (usize, usize)| b[s..e].iter().any(u8::is_ascii_digit);
        let mut run: Vec<(usize, usize)> = Vec::new();
        let mut i = 0;
        // Only digits start a number: prose is skipped to the next one.
        while let Some(off) = b[i..].iter().position(u8::is_ascii_digit) {
            let mut start = i + off;
            while start > i && word_byte(b[start - 1]) {
                start -= 1;
            }
            run.clear();
            run.push(group(start));
            // Extend over groups joined by at most two separators, each holding a digit or
            // being a short run of capitals (an IBAN's bank code), until the run breaks.
            loop {
                let pe = run[run.len() - 1].1;
                let mut ns = pe;
                while ns < b.len() && ns - pe < 3 && b" -./()".contains(&b[ns]) {
                    ns += 1;
                }
                if ns == pe || ns - pe > 2 || ns >= b.len() || !word_byte(b[ns]) {
                    break;
                }
                // An hour (`10:30`) is a time, not more of the number: a date and a time are
                // not read as one long number.
                if hour_at(b, ns) {
                    break;
                }
                let next = group(ns);
                let g = &b[next.0..next.1];
                if !(has_digit(next) || (g.len() <= 4 && g.iter().all(u8::is_ascii_uppercase))) {
                    break;
                }
                run.push(next);
            }
            // A run ends on a group with a digit.
            while run.len() > 1 && !has_digit(run[run.len() - 1]) {
                run.pop();
            }
            i = run[run.len() - 1].1;
            let digits: usize = run
                .iter()
                .map(|&(s, e)| b[s..e].iter().filter(|c| c.is_ascii_digit()).count())
                .sum();
            if digits >= self.min_digits && !is_date(b, &run) {
                let mut norm = String::new();
                for &(s, e) in &run {
                    norm.extend(b[s..e].iter().map(|c| c.to_ascii_uppercase() as char));
                }
                out.push(Token {
                    kind: Kind::Number,
                    norm,
                });
            }
        }
    }
}

/// Whether an hour and its minutes (`9:30`, `10:30`) begin at `at`.
fn hour_at(b: &[u8], at: usize) -> bool {
    let digits = b[at.min(b.len())..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    let colon = at + digits;
    (1..=2).contains(&digits)
        && b.get(colon) == Some(&b':')
        && b.get(colon + 1..colon + 3)
            .is_some_and(|m| m.iter().all(u8::is_ascii_digit))
}

/// Maximal runs of ASCII letters and digits, as (start, end).
fn groups(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if word_byte(b[i]) {
            let s = i;
            while i < b.len() && word_byte(b[i]) {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}

/// Whether a run is a date: three groups of digits, one of them a year (19xx or 20xx), the
/// others a month and a day, or eight digits written as `yyyymmdd`.
fn is_date(b: &[u8], run: &[(usize, usize)]) -> bool {
    let num = |&(s, e): &(usize, usize)| -> Option<u32> {
        let g = &b[s..e];
        (g.iter().all(u8::is_ascii_digit) && g.len() <= 4)
            .then(|| std::str::from_utf8(g).ok()?.parse().ok())
            .flatten()
    };
    let year = |y: u32| (1900..2100).contains(&y);
    let md = |m: u32, d: u32| (1..=12).contains(&m) && (1..=31).contains(&d);
    match run {
        [a, m, d] => match (num(a), num(m), num(d)) {
            (Some(a), Some(x), Some(y)) if year(a) => md(x, y),
            (Some(x), Some(y), Some(c)) if year(c) => md(x, y) || md(y, x),
            _ => false,
        },
        [one] => {
            let g = &b[one.0..one.1];
            // `20240501`, or with a basic ISO time (`20240501T1030Z`).
            let time = g.get(8..).unwrap_or_default();
            let timed = time.is_empty() || (time[0] == b'T' && time.len() > 1);
            g.len() >= 8 && timed && g[..8].iter().all(u8::is_ascii_digit) && {
                let n = |r: std::ops::Range<usize>| -> u32 {
                    std::str::from_utf8(&g[r])
                        .unwrap_or("0")
                        .parse()
                        .unwrap_or(0)
                };
                year(n(0..4)) && md(n(4..6), n(6..8))
            }
        }
        _ => false,
    }
}

/// A day, as a text names it (the year may be left out: "May 1st").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Date {
    pub year: Option<u32>,
    pub month: u32,
    pub day: u32,
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The dates `text` names: `2024-05-01`, `05/01/2024` (read both ways when both are days),
/// `1.5.2024`, `May 1st, 2024`, `1 May 2024`, `May 1` (English month names).
pub fn dates(text: &str) -> Vec<Date> {
    let b = text.as_bytes();
    let groups = groups(b);
    let word = |i: usize| -> &str { &text[groups[i].0..groups[i].1] };
    let number = |w: &str, max: u32| -> Option<u32> {
        let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let n: u32 = digits.parse().ok()?;
        (digits.len() == w.len() || ["st", "nd", "rd", "th"].contains(&&w[digits.len()..]))
            .then_some(n)
            .filter(|n| (1..=max).contains(n))
    };
    let year = |w: &str| -> Option<u32> {
        (w.len() == 4)
            .then(|| w.parse().ok())
            .flatten()
            .filter(|y| (1900..2100).contains(y))
    };
    let month = |w: &str| -> Option<u32> {
        // The name, its first three letters, or `sept`.
        let w = w.to_ascii_lowercase();
        MONTHS
            .iter()
            .position(|m| {
                *m == w || (w.len() == 3 && m.starts_with(&w)) || w == "sept" && *m == "september"
            })
            .map(|m| m as u32 + 1)
    };
    let mut out = Vec::new();
    let mut push = |year: Option<u32>, month: u32, day: u32| {
        if (1..=12).contains(&month) && (1..=31).contains(&day) {
            out.push(Date { year, month, day });
        }
    };
    for i in 0..groups.len() {
        if let Some(m) = month(word(i)) {
            let next = |k: usize| (i + k < groups.len()).then(|| word(i + k));
            let before = |k: usize| i.checked_sub(k).map(word);
            let of = |w: Option<&str>| w.is_some_and(|w| w.eq_ignore_ascii_case("of"));
            let the = |w: Option<&str>| w.is_some_and(|w| w.eq_ignore_ascii_case("the"));
            if let Some(d) = next(1).and_then(|w| number(w, 31)) {
                push(next(2).and_then(year), m, d);
            } else if let Some(d) = the(next(1))
                .then(|| next(2))
                .flatten()
                .and_then(|w| number(w, 31))
            {
                // `November the 14th`.
                push(next(3).and_then(year), m, d);
            } else if let Some(d) = before(1).and_then(|w| number(w, 31)) {
                push(next(1).and_then(year), m, d);
            } else if let Some(d) = of(before(1))
                .then(|| before(2))
                .flatten()
                .and_then(|w| number(w, 31))
            {
                // `the 14th of November`.
                push(next(1).and_then(year), m, d);
            }
        }
        // Numeric dates: three digit groups joined by one of `-./`.
        if i + 2 < groups.len() {
            let joined = |a: usize| {
                let between = &b[groups[a].1..groups[a + 1].0];
                between.len() == 1 && b"-./".contains(&between[0])
            };
            if joined(i) && joined(i + 1) {
                // The day may carry an ISO time (`14T10:30`).
                let z = word(i + 2);
                let z = match z.split_once('T') {
                    Some((day, hour)) if hour.bytes().all(|c| c.is_ascii_digit()) => day,
                    _ => z,
                };
                let (x, y) = (word(i), word(i + 1));
                let n = |w: &str| -> Option<u32> {
                    (w.len() <= 2 && w.bytes().all(|c| c.is_ascii_digit()))
                        .then(|| w.parse().ok())
                        .flatten()
                };
                if let (Some(yr), Some(m), Some(d)) = (year(x), n(y), n(z)) {
                    push(Some(yr), m, d);
                } else if let (Some(a), Some(c), Some(yr)) = (n(x), n(y), year(z)) {
                    push(Some(yr), a, c);
                    push(Some(yr), c, a);
                }
            }
        }
    }
    out
}

/// The texts of one source (or several), for asking whether a value occurs in them. Nothing is
/// extracted up front: a call has a few values and a conversation many texts, so each value is
/// looked for in the texts (case-folded once), and numbers are read out only when a value is one.
#[derive(Debug, Default, Clone)]
pub struct Corpus<'a> {
    texts: Vec<Cow<'a, str>>,
    /// The texts case-folded, made when first asked.
    folded: std::cell::OnceCell<Vec<String>>,
    /// The numbers and codes of the texts, read when first asked.
    numbers: std::cell::OnceCell<Vec<String>>,
    /// The dates the texts name, read when first asked (a call with a date argument).
    dates: std::cell::OnceCell<Vec<Date>>,
    min_digits: usize,
}

/// `text` in lower case (ASCII, the common case, without Unicode's tables).
fn fold(text: &str) -> String {
    if !text.is_ascii() {
        return text.to_lowercase();
    }
    // In place, with no second pass to check the result is UTF-8: with wasm's SIMD (the
    // workspace builds plugins with it) LLVM makes this a vector loop, sixteen bytes at a time.
    let mut out = text.to_owned();
    out.make_ascii_lowercase();
    out
}

/// A text to look for as whole words (`Corpus::says_phrase`), folded and made ready to search
/// for once, however many texts it is looked for in.
pub struct Phrase {
    folded: String,
    finder: memchr::memmem::Finder<'static>,
}

impl Phrase {
    /// `None` for an empty text, which no text says.
    pub fn new(text: &str) -> Option<Phrase> {
        let folded = fold(text);
        let finder = memchr::memmem::Finder::new(folded.as_bytes()).into_owned();
        (!folded.is_empty()).then_some(Phrase { folded, finder })
    }
}

/// How a value found in a text must be bounded to count.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// As a whole: not inside a longer value of its kind.
    Whole,
    /// Also as a parent domain of a longer host (`evil.example` in `a.evil.example`).
    Domain,
}

/// Whether `needle` (case-folded) occurs in `hay` (case-folded) bounded as `kind` and `bound`
/// say: an email not inside a longer local part or domain, a host or URL not inside a longer
/// name (after `www.` it is whole; after another `.` only with `Bound::Domain`).
fn occurs(
    hay: &str,
    needle: &str,
    finder: &memchr::memmem::Finder,
    kind: Kind,
    bound: Bound,
) -> bool {
    let h = hay.as_bytes();
    finder.find_iter(h).any(|at| {
        let end = at + needle.len();
        let before = at.checked_sub(1).map(|i| h[i]);
        let after_ok = match kind {
            // A URL may go on (a query, a longer path): its path was compared.
            Kind::Url => true,
            _ => match h.get(end) {
                None => true,
                Some(b'.') => !h.get(end + 1).is_some_and(|c| c.is_ascii_alphanumeric()),
                Some(&c) => !(c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
            },
        };
        let before_ok = match (kind, before) {
            (_, None) => true,
            (Kind::Email, Some(c)) => !email_local(c),
            (_, Some(b'.')) => bound == Bound::Domain || hay[..at].ends_with("www."),
            (_, Some(c)) => !(c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
        };
        before_ok && after_ok
    })
}

/// Whether `short` occurs in `long`, two numbers' digits: memchr's search, which for so short a
/// text costs nothing to set up (`str`'s sets up its Two-Way searcher for each pair).
fn contains(long: &str, short: &str) -> bool {
    memchr::memmem::find(long.as_bytes(), short.as_bytes()).is_some()
}

impl<'a> Corpus<'a> {
    /// Adds `text`.
    pub fn add(&mut self, scan: &Scan, text: impl Into<Cow<'a, str>>) {
        self.min_digits = scan.min_digits;
        self.texts.push(text.into());
        self.folded = Default::default();
        self.numbers = Default::default();
        self.dates = Default::default();
    }

    /// Adds every text of another corpus.
    pub fn extend(&mut self, other: &Corpus<'a>) {
        self.min_digits = self.min_digits.max(other.min_digits);
        self.texts.extend(other.texts.iter().cloned());
        self.folded = Default::default();
        self.numbers = Default::default();
        self.dates = Default::default();
    }

    fn folded(&self) -> &[String] {
        self.folded
            .get_or_init(|| self.texts.iter().map(|t| fold(t)).collect())
    }

    fn numbers(&self) -> &[String] {
        self.numbers.get_or_init(|| {
            let scan = Scan {
                min_digits: self.min_digits,
            };
            let mut out = Vec::new();
            for t in &self.texts {
                scan.numbers(t.as_bytes(), &mut out);
            }
            out.into_iter().map(|t| t.norm).collect()
        })
    }

    fn holds(&self, needle: &str, kind: Kind, bound: Bound) -> bool {
        let finder = memchr::memmem::Finder::new(needle.as_bytes());
        self.folded()
            .iter()
            .any(|t| occurs(t, needle, &finder, kind, bound))
    }

    /// Whether the texts name `date`: the same day, or its month and day without a year. Read
    /// only when asked (a constraint on a date): most corpora are never asked.
    pub fn dated(&self, date: Date) -> bool {
        self.dates
            .get_or_init(|| self.folded().iter().flat_map(|t| dates(t)).collect())
            .iter()
            .any(|d| {
                d.month == date.month
                    && d.day == date.day
                    && (d.year.is_none() || d.year == date.year)
            })
    }

    /// Whether `token` occurs here at all, loosely: a number inside a longer one or holding
    /// one, a host or any of its parent domains, also as part of a longer host (so
    /// `a.evil.example` occurs where `evil.example` or `x.evil.example` does), a URL by its host
    /// and path whatever the query. The question an attacker's value must not escape.
    pub fn mentions(&self, token: &Token) -> bool {
        match token.kind {
            Kind::Email => self.holds(&token.norm, Kind::Email, Bound::Whole),
            Kind::Number => self.numbers().iter().any(|n| {
                let (short, long) = if n.len() < token.norm.len() {
                    (n.as_str(), token.norm.as_str())
                } else {
                    (token.norm.as_str(), n.as_str())
                };
                short.len() >= 6 && contains(long, short)
            }),
            // Where a parent occurs, so does its shortest: one search.
            Kind::Host => parents(&token.norm)
                .next()
                .is_some_and(|p| self.holds(p, Kind::Host, Bound::Domain)),
            Kind::Url => self.holds(url_path(&token.norm), Kind::Url, Bound::Whole),
        }
    }

    /// Whether `token` is vouched for here, strictly: the same email, a number that is part of
    /// one here (or one here with at most a 3-digit prefix, a country code, added), a host here
    /// or a subdomain of one here, a URL whose host is here (a path on a named site).
    pub fn vouches(&self, token: &Token) -> bool {
        match token.kind {
            Kind::Email => self.holds(&token.norm, Kind::Email, Bound::Whole),
            Kind::Number => self.numbers().iter().any(|n| {
                (token.norm.len() >= 6 && contains(n, &token.norm))
                    || (n.len() >= 7
                        && token.norm.len() <= n.len() + 3
                        && token.norm.ends_with(n.as_str())
                        && token.norm[..token.norm.len() - n.len()]
                            .bytes()
                            .all(|c| c.is_ascii_digit()))
            }),
            Kind::Host => parents(&token.norm).any(|p| self.holds(p, Kind::Host, Bound::Whole)),
            Kind::Url => {
                let h = token.norm.split('/').next().unwrap_or_default();
                self.vouches(&Token {
                    kind: Kind::Host,
                    norm: h.to_string(),
                })
            }
        }
    }

    /// Whether `text` (case-folded, not a token) occurs as whole words in one of the texts.
    pub fn says(&self, text: &str) -> bool {
        Phrase::new(text).is_some_and(|p| self.says_phrase(&p))
    }

    /// `says`, for a phrase made once and looked for in many corpora.
    pub fn says_phrase(&self, phrase: &Phrase) -> bool {
        let n = phrase.folded.len();
        self.folded().iter().any(|hay| {
            phrase.finder.find_iter(hay.as_bytes()).any(|at| {
                let before = hay[..at].chars().next_back();
                let after = hay[at + n..].chars().next();
                !before.is_some_and(char::is_alphanumeric)
                    && !after.is_some_and(char::is_alphanumeric)
            })
        })
    }
}

/// A URL's host and path, without its query or fragment.
fn url_path(url: &str) -> &str {
    &url[..url.find(['?', '#']).unwrap_or(url.len())]
}

/// A host's parent domains with at least two labels, itself first (`a.b.example`, `b.example`).
fn parents(host: &str) -> impl Iterator<Item = &str> {
    let dots = host.matches('.').count();
    host.match_indices('.')
        .map(|(i, _)| &host[i + 1..])
        .take(dots.saturating_sub(1))
        .chain(std::iter::once(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str) -> Vec<(Kind, String)> {
        let mut out = Vec::new();
        Scan { min_digits: 6 }.tokens(text, &mut out);
        let mut v: Vec<(Kind, String)> = out.into_iter().map(|t| (t.kind, t.norm)).collect();
        v.sort();
        v.dedup();
        v
    }

    fn has(text: &str, kind: Kind, norm: &str) -> bool {
        scan(text).contains(&(kind, norm.to_string()))
    }

    #[test]
    fn emails_urls_and_hosts_are_found_in_any_text_and_folded() {
        let t = "Mail Mallory.X@Evil.Example, or see https://WWW.Evil.Example/Pay/?id=1.";
        assert!(has(t, Kind::Email, "mallory.x@evil.example"));
        assert!(has(t, Kind::Host, "evil.example"));
        assert!(has(t, Kind::Url, "evil.example/pay/?id=1"));
        assert!(has(
            "upload to files.evil.example now",
            Kind::Host,
            "files.evil.example"
        ));
        assert!(has(
            "http://user@evil.example:8080/x",
            Kind::Host,
            "evil.example"
        ));
        // Not domains.
        for text in ["e.g. this", "version 1.2.3", "U.S. only", "a.b", "@handle"] {
            assert!(
                scan(text)
                    .iter()
                    .all(|(k, _)| *k != Kind::Host && *k != Kind::Email),
                "{text}: {:?}",
                scan(text)
            );
        }
    }

    #[test]
    fn a_host_at_a_sentences_end_is_not_glued_to_the_next_word() {
        for t in [
            "Our site is www.example.com.They said so.",
            "see https://www.example.com.Then pay",
        ] {
            assert!(has(t, Kind::Host, "example.com"), "{t}: {:?}", scan(t));
            assert!(!has(t, Kind::Host, "example.com.they"), "{t}");
            assert!(!has(t, Kind::Host, "example.com.then"), "{t}");
        }
        let t = "write to bob@example.com.Thanks!";
        assert!(has(t, Kind::Email, "bob@example.com"), "{:?}", scan(t));
        // Not a sentence: capitalised names and lower-case labels stay whole.
        assert!(has("Visit Example.Com today", Kind::Host, "example.com"));
        assert!(has("at files.example.co", Kind::Host, "files.example.co"));
    }

    #[test]
    fn names_in_other_scripts_and_look_alike_letters_are_hosts_too() {
        // A Cyrillic `і` in a Latin name: the attacker's domain, not a cut-off one.
        let t = "Write to mallory@evіl.example or see https://evіl.example/pay.";
        assert!(has(t, Kind::Email, "mallory@evіl.example"), "{:?}", scan(t));
        assert!(has(t, Kind::Host, "evіl.example"));
        assert!(has(t, Kind::Url, "evіl.example/pay"));
        assert!(has("Visit MÜNCHEN.de today", Kind::Host, "münchen.de"));
        // Punctuation outside ASCII still ends a name.
        assert!(has("see example.com’s page", Kind::Host, "example.com"));
        assert!(has("at example.org — now", Kind::Host, "example.org"));
    }

    #[test]
    fn numbers_lose_their_separators_and_dates_are_not_numbers() {
        assert!(has(
            "IBAN GB29 NWBK 6016 1331 9268 19 please",
            Kind::Number,
            "GB29NWBK60161331926819"
        ));
        assert!(has(
            "iban gb29nwbk60161331926819",
            Kind::Number,
            "GB29NWBK60161331926819"
        ));
        assert!(has("call +1 (555) 123-4567", Kind::Number, "15551234567"));
        assert!(has("acct 0042.7731.09", Kind::Number, "0042773109"));
        for text in [
            "on 2024-05-01",
            "by 05/01/2024",
            "at 20240501",
            "pay 12500 now",
            "v1.2.3",
            "from 2026-11-14 10:30 to 11:30",
            "at 14/11/2026 9:05",
            "on November 14, 2026 10:30",
            "at 2026-11-14T10:30:00Z",
            "at 20261114T103000Z",
        ] {
            assert!(
                scan(text).iter().all(|(k, _)| *k != Kind::Number),
                "{text}: {:?}",
                scan(text)
            );
        }
    }

    fn corpus<'a>(texts: &[&'a str]) -> Corpus<'a> {
        let mut c = Corpus::default();
        for t in texts {
            c.add(&Scan { min_digits: 6 }, *t);
        }
        c
    }

    fn token(kind: Kind, norm: &str) -> Token {
        Token {
            kind,
            norm: norm.into(),
        }
    }

    #[test]
    fn mentions_is_loose_and_vouches_is_strict() {
        let c = corpus(&["Call 555 123 4567 or visit https://evil.example/a/b?x=1."]);
        // A number with a country code added occurs, and is vouched for.
        let with_cc = token(Kind::Number, "15551234567");
        assert!(c.mentions(&with_cc) && c.vouches(&with_cc));
        // A part of it occurs, and is vouched for; a longer number holding it only occurs.
        let part = token(Kind::Number, "5551234567");
        assert!(c.mentions(&part) && c.vouches(&part));
        let longer = token(Kind::Number, "9999555123456799");
        assert!(c.mentions(&longer) && !c.vouches(&longer));
        // Subdomains of a host occur and are vouched for; a parent is not vouched for.
        let sub = token(Kind::Host, "cdn.evil.example");
        assert!(c.mentions(&sub) && c.vouches(&sub));
        assert!(!c.vouches(&token(Kind::Host, "example")));
        // A URL with another query occurs; a URL on the host is vouched for.
        let url = token(Kind::Url, "evil.example/a/b?x=2");
        assert!(c.mentions(&url) && c.vouches(&url));
        assert!(!c.mentions(&token(Kind::Url, "other.example/a")));
        assert!(!c.mentions(&token(Kind::Email, "x@evil.example")));
    }

    #[test]
    fn dates_are_read_in_the_forms_people_write_them() {
        let d = |y: Option<u32>, m: u32, day: u32| Date {
            year: y,
            month: m,
            day,
        };
        assert_eq!(dates("due 2024-05-01."), [d(Some(2024), 5, 1)]);
        assert_eq!(dates("on May 1st, 2024"), [d(Some(2024), 5, 1)]);
        assert_eq!(dates("the 3rd of March"), [d(None, 3, 3)]);
        assert_eq!(
            dates("on the 14th of November 2026, at noon"),
            [d(Some(2026), 11, 14)]
        );
        assert_eq!(dates("November the 14th"), [d(None, 11, 14)]);
        assert_eq!(
            dates("starts 2026-11-14T10:30:00Z"),
            [d(Some(2026), 11, 14)]
        );
        assert_eq!(dates("3 March 2025"), [d(Some(2025), 3, 3)]);
        assert_eq!(dates("next mon, sept 9"), [d(None, 9, 9)]);
        assert_eq!(
            dates("05/01/2024"),
            [d(Some(2024), 5, 1), d(Some(2024), 1, 5)]
        );
        let c = corpus(&["Book it for May 1."]);
        assert!(c.dated(d(Some(2024), 5, 1)));
        assert!(!c.dated(d(Some(2024), 5, 2)));
    }

    #[test]
    fn folding_lowers_exactly_the_ascii_capitals_and_unicode_by_its_tables() {
        let every: String = (0u8..128).map(char::from).collect();
        for text in [
            every.as_str(),
            "Mail Mallory.X@Evil.Example NOW",
            "AZ@[`az{",
            "Ünïcode ÀB",
        ] {
            for start in 0..text.len().min(9) {
                if let Some(t) = text.get(start..) {
                    let expected = match t.is_ascii() {
                        true => t.to_ascii_lowercase(),
                        false => t.to_lowercase(),
                    };
                    assert_eq!(fold(t), expected, "{t:?}");
                }
            }
        }
    }

    #[test]
    fn says_matches_whole_words_case_folded() {
        let c = corpus(&["Post it to #Ext-Attackers channel"]);
        assert!(c.says("ext-attackers"));
        assert!(!c.says("ext-attack"));
        assert!(!c.says(""));
    }
}
