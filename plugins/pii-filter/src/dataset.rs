//! A deterministic, labelled test corpus. Every positive is generated valid (checksums, ranges)
//! in one of many real-world layouts and contexts, with its exact byte span recorded; every hard
//! negative is something a naive filter flags (Luhn-invalid cards, versions, UUIDs, hashes,
//! timestamps, order numbers, ...). The quality test measures precision and recall on it.

use crate::types::PiiType;
use std::fmt::Write;
use std::net::Ipv6Addr;

/// SplitMix64: small, seeded, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    pub fn chars(&mut self, set: &[u8], n: usize) -> String {
        (0..n).map(|_| self.pick(set) as char).collect()
    }

    pub fn chars_n(&mut self, set: &[u8], lo: usize, hi: usize) -> String {
        let n = self.range(lo, hi);
        self.chars(set, n)
    }

    pub fn digits_n(&mut self, lo: usize, hi: usize) -> String {
        let n = self.range(lo, hi);
        self.digits(n)
    }

    pub fn digits(&mut self, n: usize) -> String {
        self.chars(b"0123456789", n)
    }
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER_ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const HEX: &[u8] = b"0123456789abcdef";

/// One labelled text.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    pub text: String,
    pub spans: Vec<(PiiType, usize, usize)>,
    /// Which hard negatives it holds (for reporting false positives by cause).
    pub negatives: Vec<&'static str>,
}

impl Sample {
    fn raw(&mut self, s: &str) {
        self.text.push_str(s);
    }

    fn pii(&mut self, t: PiiType, s: &str) {
        let start = self.text.len();
        self.text.push_str(s);
        self.spans.push((t, start, self.text.len()));
    }

    /// Writes `template` with `{}` replaced by the value (recorded as `t`).
    fn templated(&mut self, template: &str, t: PiiType, value: &str) {
        let (a, b) = template.split_once("{}").expect("template has a slot");
        self.raw(a);
        self.pii(t, value);
        self.raw(b);
    }
}

const WORDS: &[&str] = &[
    "the",
    "report",
    "is",
    "ready",
    "please",
    "review",
    "before",
    "friday",
    "we",
    "shipped",
    "a",
    "new",
    "build",
    "and",
    "customer",
    "asked",
    "about",
    "refund",
    "meeting",
    "moved",
    "to",
    "next",
    "week",
    "server",
    "logs",
    "show",
    "errors",
    "after",
    "deploy",
    "thanks",
    "for",
    "your",
    "help",
    "with",
    "this",
    "issue",
    "kind",
    "regards",
    "team",
    "update",
    "pipeline",
    "failed",
    "on",
    "main",
    "branch",
    "retry",
    "later",
    "über",
    "café",
    "naïve",
    "config",
    "value",
    "should",
    "be",
    "set",
    "in",
    "production",
    "tomorrow",
    "ok",
];

/// Prose with the numbers ordinary text has (counts, years, prices, percentages, times).
fn filler(r: &mut Rng, s: &mut Sample, words: usize) {
    for k in 0..words {
        if k > 0 {
            s.raw(" ");
        }
        match r.below(40) {
            0 => {
                let n = r.range(1, 999);
                let _ = write!(s.text, "{n}");
            }
            1 => {
                let y = r.range(1990, 2030);
                let _ = write!(s.text, "{y}");
            }
            2 => {
                let _ = write!(s.text, "${}.{:02}", r.range(1, 9999), r.below(100));
            }
            3 => {
                let _ = write!(s.text, "{}%", r.range(1, 100));
            }
            4 => {
                let _ = write!(s.text, "{}:{:02}", r.range(0, 23), r.below(60));
            }
            _ => s.raw(r.pick(WORDS)),
        }
    }
    s.raw(r.pick(&[". ", ", ", "\n", "; ", " - "]));
}

// ---------------------------------------------------------------- positive values

fn email(r: &mut Rng) -> String {
    let first = r.pick(&[
        "john", "jane", "maria", "li", "ahmed", "o'neil", "zoë_k", "x", "dev",
    ]);
    let first = if first.is_ascii() { first } else { "zoe" };
    let last = r.pick(&["doe", "smith", "mueller", "dupont", "wei", "khan", "ops"]);
    let local = match r.below(7) {
        0 => format!("{first}.{last}"),
        1 => format!("{first}_{last}{}", r.range(1, 99)),
        2 => format!("{}{last}", &first[..1]),
        3 => format!("{first}+{}", r.pick(&["news", "test", "billing"])),
        4 => format!("{}.{}", first.to_uppercase(), last),
        5 => format!("{first}-{last}.{}", r.range(1970, 2005)),
        _ => first.to_string(),
    };
    let domain = r.pick(&[
        "example.com",
        "mail.example.org",
        "company.co.uk",
        "uni-bonn.de",
        "gmail.com",
        "outlook.fr",
        "dev.sub.example.io",
        "EXAMPLE.NET",
        "xn--bcher-kva.example",
        "corp.internal.example.museum",
    ]);
    format!("{local}@{domain}")
}

fn nanp(r: &mut Rng) -> (String, String, String) {
    let area = loop {
        let a = format!("{}{}", r.range(2, 9), r.digits(2));
        if !a.ends_with("11") {
            break a;
        }
    };
    let exch = loop {
        let e = format!("{}{}", r.range(2, 9), r.digits(2));
        if !e.ends_with("11") {
            break e;
        }
    };
    (area, exch, r.digits(4))
}

/// A phone number and whether it needs a phone label (bare digits).
fn phone(r: &mut Rng) -> (String, bool) {
    let (a, e, n) = nanp(r);
    let s = match r.below(26) {
        0 => format!("({a}) {e}-{n}"),
        1 => format!("{a}-{e}-{n}"),
        2 => format!("{a}.{e}.{n}"),
        3 => format!("{a} {e} {n}"),
        4 => format!("+1 {a} {e} {n}"),
        5 => format!("+1-{a}-{e}-{n}"),
        6 => format!("+1 ({a}) {e}-{n}"),
        7 => format!("1-{a}-{e}-{n}"),
        8 => format!("+1{a}{e}{n}"),
        9 => format!("020 7946 {}", r.digits(4)),
        10 => format!("07{} {}", r.digits(3), r.digits(6)),
        11 => format!("+44 20 7946 {}", r.digits(4)),
        12 => format!("+44 7{} {}", r.digits(3), r.digits(6)),
        13 => format!("0161 {} {}", r.digits(3), r.digits(4)),
        14 => format!("(020) {} {}", r.digits(4), r.digits(4)),
        15 => format!("030 {}", r.digits(8)),
        16 => format!("+49 30 {}", r.digits(8)),
        17 => format!("015{} {}", r.range(1, 9), r.digits(8)),
        18 => format!("+49 15{} {}", r.range(1, 9), r.digits(8)),
        19 => format!("089/{}", r.digits(7)),
        20 => format!("+49 (0)30 {}", r.digits(7)),
        21 => {
            let p: Vec<String> = (0..4).map(|_| r.digits(2)).collect();
            format!("0{} {}", r.range(1, 7), p.join(" "))
        }
        22 => {
            let p: Vec<String> = (0..4).map(|_| r.digits(2)).collect();
            format!("0{}.{}", r.pick(&[6, 7]), p.join("."))
        }
        23 => {
            let p: Vec<String> = (0..4).map(|_| r.digits(2)).collect();
            format!("+33 {} {}", r.range(1, 9), p.join(" "))
        }
        24 => return (format!("{a}{e}{n}"), true),
        _ => return (format!("0{}{}", r.range(1, 7), r.digits(8)), true),
    };
    (s, false)
}

fn luhn_digit(body: &[u8]) -> u8 {
    let mut sum = 0u32;
    for (i, &d) in body.iter().rev().enumerate() {
        let mut v = u32::from(d - b'0');
        if i % 2 == 0 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    b'0' + ((10 - sum % 10) % 10) as u8
}

/// A card number's digits (valid Luhn and issuer) and its grouping.
fn card_digits(r: &mut Rng) -> (String, &'static [usize]) {
    let (prefix, len, groups): (String, usize, &'static [usize]) = match r.below(8) {
        0 | 1 => ("4".into(), 16, &[4, 4, 4, 4]),
        2 => (format!("5{}", r.range(1, 5)), 16, &[4, 4, 4, 4]),
        3 => (format!("{}", r.range(2221, 2720)), 16, &[4, 4, 4, 4]),
        4 => (r.pick(&["34", "37"]).to_string(), 15, &[4, 6, 5]),
        5 => ("6011".into(), 16, &[4, 4, 4, 4]),
        6 => (format!("35{}", r.range(28, 89)), 16, &[4, 4, 4, 4]),
        _ => ("36".into(), 14, &[4, 6, 4]),
    };
    let mut body = prefix.into_bytes();
    while body.len() < len - 1 {
        body.push(b'0' + r.below(10) as u8);
    }
    let check = luhn_digit(&body);
    body.push(check);
    (String::from_utf8(body).unwrap(), groups)
}

fn group(digits: &str, groups: &[usize], sep: &str) -> String {
    let mut out = String::new();
    let mut p = 0;
    for (k, &g) in groups.iter().enumerate() {
        if k > 0 {
            out.push_str(sep);
        }
        out.push_str(&digits[p..p + g]);
        p += g;
    }
    out
}

fn card(r: &mut Rng) -> String {
    let (d, groups) = card_digits(r);
    match r.below(3) {
        0 => d,
        1 => group(&d, groups, " "),
        _ => group(&d, groups, "-"),
    }
}

fn ssn_parts(r: &mut Rng) -> (String, String, String) {
    let area = loop {
        let a = r.range(1, 899);
        if a != 666 {
            break format!("{a:03}");
        }
    };
    (
        area,
        format!("{:02}", r.range(1, 99)),
        format!("{:04}", r.range(1, 9999)),
    )
}

/// A valid IBAN in electronic form.
fn iban_compact(r: &mut Rng) -> String {
    let (cc, bban) = match r.below(12) {
        0 => ("DE", r.digits(18)),
        1 => (
            "GB",
            format!(
                "{}{}",
                r.chars(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", 4),
                r.digits(14)
            ),
        ),
        2 => (
            "FR",
            format!(
                "{}{}{}",
                r.digits(10),
                r.chars(UPPER_ALNUM, 11),
                r.digits(2)
            ),
        ),
        3 => ("ES", r.digits(20)),
        4 => (
            "IT",
            format!(
                "{}{}{}",
                r.chars(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", 1),
                r.digits(10),
                r.chars(UPPER_ALNUM, 12)
            ),
        ),
        5 => (
            "NL",
            format!(
                "{}{}",
                r.chars(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", 4),
                r.digits(10)
            ),
        ),
        6 => ("BE", r.digits(12)),
        7 => ("CH", format!("{}{}", r.digits(5), r.chars(UPPER_ALNUM, 12))),
        8 => ("AT", r.digits(16)),
        9 => ("PL", r.digits(24)),
        10 => ("NO", r.digits(11)),
        _ => ("SE", r.digits(20)),
    };
    let rearranged = format!("{bban}{cc}00");
    let mut rem = 0u32;
    for c in rearranged.bytes() {
        rem = if c.is_ascii_digit() {
            (rem * 10 + u32::from(c - b'0')) % 97
        } else {
            (rem * 100 + u32::from(c - b'A') + 10) % 97
        };
    }
    format!("{cc}{:02}{bban}", 98 - rem)
}

fn iban(r: &mut Rng) -> String {
    let c = iban_compact(r);
    if r.chance(50) {
        c
    } else {
        c.as_bytes()
            .chunks(4)
            .map(|ch| std::str::from_utf8(ch).unwrap())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn ipv4(r: &mut Rng) -> String {
    format!(
        "{}.{}.{}.{}",
        r.range(1, 223),
        r.below(256),
        r.below(256),
        r.range(1, 254)
    )
}

fn ipv6(r: &mut Rng) -> String {
    let mut g = [0u16; 8];
    match r.below(3) {
        0 => {
            g[0] = 0x2001;
            g[1] = 0x0db8;
            g[6] = r.below(0xffff) as u16;
            g[7] = r.range(1, 0xfff) as u16;
        }
        1 => {
            g[0] = 0xfe80;
            for x in g.iter_mut().skip(4) {
                *x = r.below(0xffff) as u16;
            }
            g[7] |= 0x100;
        }
        _ => {
            for x in g.iter_mut() {
                *x = r.below(0xffff) as u16;
            }
            g[0] = 0x2a00 | (r.below(0xff) as u16);
        }
    }
    let a = Ipv6Addr::from(g);
    if r.chance(25) {
        g.iter()
            .map(|x| format!("{x:04x}"))
            .collect::<Vec<_>>()
            .join(":")
    } else {
        a.to_string()
    }
}

fn aws(r: &mut Rng) -> String {
    format!(
        "{}{}",
        r.pick(&["AKIA", "AKIA", "ASIA"]),
        r.chars(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
    )
}

fn github(r: &mut Rng) -> String {
    if r.chance(25) {
        format!("github_pat_{}_{}", r.chars(ALNUM, 22), r.chars(ALNUM, 59))
    } else {
        format!(
            "{}{}",
            r.pick(&["ghp_", "gho_", "ghs_", "ghu_", "ghr_"]),
            r.chars(ALNUM, 36)
        )
    }
}

fn slack(r: &mut Rng) -> String {
    match r.below(4) {
        0 => format!(
            "xoxb-{}-{}-{}",
            r.digits(12),
            r.digits(13),
            r.chars(ALNUM, 24)
        ),
        1 => format!(
            "xoxp-{}-{}-{}-{}",
            r.digits(12),
            r.digits(12),
            r.digits(13),
            r.chars(HEX, 32)
        ),
        2 => format!(
            "xapp-1-A{}-{}-{}",
            r.chars(UPPER_ALNUM, 10),
            r.digits(13),
            r.chars(HEX, 64)
        ),
        _ => format!("xoxa-2-{}-{}", r.digits(12), r.chars(ALNUM, 30)),
    }
}

fn b64url(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk.len();
        let v = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for k in 0..=n {
            out.push(B64URL[((v >> (18 - 6 * k)) & 63) as usize] as char);
        }
    }
    out
}

fn jwt(r: &mut Rng) -> String {
    let header = r.pick(&[
        r#"{"alg":"HS256","typ":"JWT"}"#,
        r#"{"alg":"RS256","kid":"k1"}"#,
        r#"{"typ":"JWT","alg":"ES256"}"#,
        r#"{"alg":"none"}"#,
    ]);
    let payload = format!(
        r#"{{"sub":"{}","name":"{}","iat":{}}}"#,
        r.digits(8),
        r.pick(&["John Doe", "svc", "alice"]),
        1_500_000_000 + r.below(200_000_000)
    );
    let sig = if header.contains("none") {
        String::new()
    } else {
        r.chars(B64URL, 43)
    };
    format!(
        "{}.{}.{sig}",
        b64url(header.as_bytes()),
        b64url(payload.as_bytes())
    )
}

/// A PEM private key; truncated ones stop after their body (no END line).
fn pem(r: &mut Rng, truncated: bool) -> String {
    let label = r.pick(&[
        "RSA PRIVATE KEY",
        "PRIVATE KEY",
        "EC PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
    ]);
    let mut s = format!("-----BEGIN {label}-----\n");
    for _ in 0..r.range(2, 8) {
        s.push_str(&r.chars(B64, 64));
        s.push('\n');
    }
    s.push_str(&r.chars_n(B64, 4, 60));
    s.push_str(r.pick(&["", "=", "=="]));
    if !truncated {
        let _ = write!(s, "\n-----END {label}-----");
    }
    s
}

/// (scheme, user:password, host-and-rest).
fn url_credentials(r: &mut Rng) -> (String, String, String) {
    let scheme = r.pick(&[
        "postgres",
        "postgresql",
        "mysql",
        "https",
        "redis",
        "amqp",
        "mongodb+srv",
        "ftp",
    ]);
    let user = r.pick(&["admin", "app_user", "svc-deploy", "root", "john.doe"]);
    let pass = r.chars_n(b"abcdefghijkmnpqrstuvwxyzABCDEFGH23456789!$*-_.~%", 6, 20);
    let host = r.pick(&[
        "db.internal",
        "cache.example.com",
        "mq.prod.local",
        "cluster0.ab1cd.mongodb.net",
    ]);
    let rest = r.pick(&["/app", ":5432/orders", "/", "", "/vhost?ssl=true"]);
    (
        scheme.to_string(),
        format!("{user}:{pass}"),
        format!("{host}{rest}"),
    )
}

// ---------------------------------------------------------------- positives in context

/// The types this generator writes (it predates API_KEY and CREDENTIAL, which only the
/// third-party set covers).
const GENERATED: &[PiiType] = &[
    PiiType::Email,
    PiiType::Phone,
    PiiType::CreditCard,
    PiiType::UsSsn,
    PiiType::Iban,
    PiiType::IpAddress,
    PiiType::AwsKey,
    PiiType::GithubToken,
    PiiType::SlackToken,
    PiiType::Jwt,
    PiiType::PrivateKey,
    PiiType::UrlCredentials,
];

/// Writes one positive of type `t` in a context typical for it.
fn positive(r: &mut Rng, s: &mut Sample, t: PiiType) {
    use PiiType::*;
    match t {
        Email => {
            let v = email(r);
            let tpl = r.pick(&[
                "Email me at {}.",
                "Contact: {}",
                "From: Jane Doe <{}>",
                "mailto:{}",
                "({})",
                "send it to {}, thanks",
                "\"email\": \"{}\"",
                "{}",
                "reply-to={}&x=1",
                "`{}`",
                "| Jane | {} | admin |",
                "emails: {}; see list",
                "<mailto:{}>",
                "{},",
            ]);
            s.templated(tpl, t, &v);
        }
        Phone => {
            let (v, bare) = phone(r);
            let tpl = if bare {
                r.pick(&[
                    "call {}",
                    "Tel: {}",
                    "phone number: {}",
                    "mobile {} (after 6pm)",
                    "fax: {}",
                ])
            } else {
                r.pick(&[
                    "Call me at {}.",
                    "Phone: {}",
                    "reach me on {} tomorrow",
                    "{}",
                    "office {} ext. 12",
                    "\"phone\": \"{}\"",
                    "Kontakt: {}",
                    "- {}\n",
                    "| Tel | {} |",
                    "phone={}&lang=en",
                    "Mobile: {} / Office: none",
                ])
            };
            // An extension is part of the number (it is redacted with it).
            if tpl == "office {} ext. 12" {
                s.templated("office {}", t, &format!("{v} ext. 12"));
            } else {
                s.templated(tpl, t, &v);
            }
        }
        CreditCard => {
            let v = card(r);
            let tpl = r.pick(&[
                "card {}",
                "Card number: {}, exp 12/27",
                "paid with {}",
                "{}",
                "cc={}&amount=10",
                "\"pan\": \"{}\"",
                "my visa is {} cvv 123",
                "| card | {} | ok |",
                "charged {} on 2024-01-15",
            ]);
            s.templated(tpl, t, &v);
        }
        UsSsn => {
            let (a, g, n) = ssn_parts(r);
            match r.below(4) {
                0 => {
                    let tpl = r.pick(&[
                        "SSN: {}",
                        "ssn={}",
                        "social security number {}",
                        "my SSN is {}",
                    ]);
                    s.templated(tpl, t, &format!("{a}{g}{n}"));
                }
                1 => {
                    let tpl = r.pick(&["SSN {}", "{}", "ss# {}"]);
                    s.templated(tpl, t, &format!("{a} {g} {n}"));
                }
                _ => {
                    let tpl = r.pick(&[
                        "SSN: {}",
                        "{}",
                        "Social Security: {}.",
                        "id check {} ok",
                        "\"ssn\": \"{}\"",
                    ]);
                    s.templated(tpl, t, &format!("{a}-{g}-{n}"));
                }
            }
        }
        Iban => {
            let v = iban(r);
            let tpl = r.pick(&[
                "IBAN: {}",
                "transfer to {} please",
                "Konto {}.",
                "{}",
                "iban={}",
                "(IBAN {})",
            ]);
            s.templated(tpl, t, &v);
        }
        IpAddress => {
            let v = if r.chance(65) { ipv4(r) } else { ipv6(r) };
            let v4 = !v.contains(':');
            let tpl = if v4 {
                r.pick(&[
                    "from {}",
                    "server at {}:8080",
                    "http://{}/admin",
                    "IP={}",
                    "{} - - [10/Oct/2023:13:55:36 +0000] \"GET / HTTP/1.1\" 200",
                    "client {} connected",
                    "ping {} failed",
                    "allow {}/32",
                    "ssh root@{}",
                    "X-Forwarded-For: {}, 10.0.0.1",
                    "inet {}/24 brd",
                    "Host: {}:443",
                ])
            } else {
                r.pick(&[
                    "[{}]:443",
                    "addr {}",
                    "from {} via eth0",
                    "\"ip\": \"{}\"",
                    "{}",
                ])
            };
            if let Some((a, rest)) = tpl.split_once("10.0.0.1") {
                s.templated(a, t, &v);
                s.pii(t, "10.0.0.1");
                s.raw(rest);
            } else {
                s.templated(tpl, t, &v);
            }
        }
        AwsKey => {
            let v = aws(r);
            let tpl = r.pick(&[
                "aws_access_key_id = {}",
                "export AWS_ACCESS_KEY_ID={}",
                "key {} leaked",
                "\"AccessKeyId\": \"{}\"",
            ]);
            s.templated(tpl, t, &v);
        }
        GithubToken => {
            let v = github(r);
            let tpl = r.pick(&[
                "token: {}",
                "GITHUB_TOKEN={}",
                "git clone https://{}@github.com/org/repo.git",
                "Authorization: token {}",
            ]);
            s.templated(tpl, t, &v);
        }
        SlackToken => {
            let v = slack(r);
            let tpl = r.pick(&[
                "SLACK_BOT_TOKEN={}",
                "token {}",
                "\"token\": \"{}\"",
                "slack: {}",
            ]);
            s.templated(tpl, t, &v);
        }
        Jwt => {
            let v = jwt(r);
            let tpl = r.pick(&[
                "Authorization: Bearer {}",
                "token={}",
                "jwt: {}",
                "\"id_token\": \"{}\"",
                "{}",
            ]);
            s.templated(tpl, t, &v);
        }
        PrivateKey => {
            let truncated = r.chance(10);
            let v = pem(r, truncated);
            if truncated {
                s.raw("here is the key (cut off):\n");
                s.pii(t, &v);
                s.raw("\n\n");
            } else {
                let tpl = r.pick(&[
                    "here is my key:\n{}\nthanks",
                    "{}",
                    "```\n{}\n```",
                    "key: {}\n",
                ]);
                s.templated(tpl, t, &v);
            }
        }
        UrlCredentials => {
            let (scheme, cred, rest) = url_credentials(r);
            s.raw(r.pick(&["DATABASE_URL=", "connect to ", "\"dsn\": \"", "url: "]));
            s.raw(&scheme);
            s.raw("://");
            s.pii(t, &cred);
            s.raw("@");
            s.raw(&rest);
            s.raw(r.pick(&["", "\"", " now", "\n"]));
        }
        ApiKey | Credential | Person | Location | DateOfBirth => unreachable!("not in GENERATED"),
    }
}

// ---------------------------------------------------------------- hard negatives

/// Names of the hard-negative kinds, for reports.
pub const NEGATIVE_KINDS: &[&str] = &[
    "luhn-invalid card",
    "random 16-digit id",
    "invalid SSN range",
    "bad IBAN checksum",
    "version string",
    "UUID",
    "hex hash / git SHA",
    "timestamp",
    "order / invoice number",
    "date / number in prose",
    "email look-alike",
    "secret look-alike",
    "IP look-alike",
    "unlabelled digits",
    "other technical strings",
];

fn negative(r: &mut Rng, s: &mut Sample, kind: usize) {
    s.negatives.push(NEGATIVE_KINDS[kind]);
    let v = match kind {
        0 => {
            let (d, groups) = card_digits(r);
            let mut b = d.into_bytes();
            let last = b.len() - 1;
            b[last] = b'0' + (b[last] - b'0' + 1 + r.below(9) as u8) % 10;
            let d = String::from_utf8(b).unwrap();
            let shown = match r.below(3) {
                0 => d,
                1 => group(&d, groups, " "),
                _ => group(&d, groups, "-"),
            };
            format!(
                "{} {shown}",
                r.pick(&["card", "Card number:", "paid with", ""])
            )
        }
        1 => {
            let d = loop {
                let d = format!("{}{}", r.range(1, 9), r.digits(15));
                if !(crate::validate::luhn(d.as_bytes())
                    && crate::validate::card_issuer_ok(d.as_bytes()))
                {
                    break d;
                }
            };
            format!(
                "{} {d}",
                r.pick(&["id", "account ref", "device", "number", "value"])
            )
        }
        2 => {
            let (a, g, n) = ssn_parts(r);
            let (a, g, n) = match r.below(5) {
                0 => ("000".into(), g, n),
                1 => ("666".into(), g, n),
                2 => (format!("9{}", r.digits(2)), g, n),
                3 => (a, "00".into(), n),
                _ => (a, g, "0000".into()),
            };
            // Under an SSN's label such a number is an SSN all the same (context-led detection).
            format!("{} {a}-{g}-{n}", r.pick(&["value", "code", ""]))
        }
        3 => {
            let mut b = iban_compact(r).into_bytes();
            let k = r.range(4, b.len() - 1);
            b[k] = if b[k].is_ascii_digit() {
                b'0' + (b[k] - b'0' + 1) % 10
            } else {
                b'A' + (b[k] - b'A' + 1) % 26
            };
            format!("IBAN {}", String::from_utf8(b).unwrap())
        }
        4 => {
            let (a, b2, c, d) = (r.below(20), r.below(30), r.below(50), r.below(300));
            match r.below(10) {
                0 => format!("version {a}.{b2}.{c}.{d}"),
                1 => format!("v{a}.{b2}.{c}"),
                2 => format!("v{a}.{b2}.{c}.{d}"),
                3 => format!(
                    "Mozilla/5.0 Chrome/{}.0.{}.{} Safari/537.36",
                    r.range(90, 130),
                    r.range(1000, 6999),
                    r.below(200)
                ),
                4 => format!("Chrome/{}.0.0.0", r.range(90, 130)),
                5 => format!("pip install foo=={a}.{b2}.{c}.{d}"),
                6 => format!("release {a}.{b2}.{c}.{d}"),
                7 => format!("firmware {a}.{b2}.{c}.{d} installed"),
                8 => format!("upgrade to {a}.{b2}.{c}.{d}"),
                _ => format!("Version: {a}.{b2}.{c}.{d}.{}", r.below(9)),
            }
        }
        5 => {
            let u = format!(
                "{}-{}-4{}-{}{}-{}",
                r.chars(HEX, 8),
                r.chars(HEX, 4),
                r.chars(HEX, 3),
                r.pick(&["8", "9", "a", "b"]),
                r.chars(HEX, 3),
                r.chars(HEX, 12)
            );
            let u = if r.chance(30) { u.to_uppercase() } else { u };
            format!("{} {u}", r.pick(&["request", "id:", "uuid", ""]))
        }
        6 => match r.below(4) {
            0 => format!("md5 {}", r.chars(HEX, 32)),
            1 => format!("sha1: {}", r.chars(HEX, 40)),
            2 => format!("sha256:{}", r.chars(HEX, 64)),
            _ => format!("commit {}", r.chars_n(HEX, 7, 12)),
        },
        7 => {
            let (y, mo, d, h, mi, se) = (
                r.range(1990, 2035),
                r.range(1, 12),
                r.range(1, 28),
                r.below(24),
                r.below(60),
                r.below(60),
            );
            match r.below(6) {
                0 => format!("{y}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}Z"),
                1 => format!(
                    "{y}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}.{:03}+02:00",
                    r.below(1000)
                ),
                2 => format!("at {y}-{mo:02}-{d:02} {h:02}:{mi:02}:{se:02}"),
                3 => format!("ts={}", r.range(1_000_000_000, 1_999_999_999)),
                4 => format!(
                    "created {}",
                    r.range(1_000_000_000, 1_999_999_999) as u64 * 1000 + r.below(1000) as u64
                ),
                _ => format!("Date: Mon, {d} Jan {y} {h:02}:{mi:02}:{se:02} +0000"),
            }
        }
        8 => {
            let n = r.digits_n(8, 16);
            match r.below(8) {
                0 => format!("order #{}{n}", r.range(1, 9)),
                1 => format!("Order number: {}{n}", r.range(1, 9)),
                2 => format!("invoice no. {}{n}", r.range(1, 9)),
                3 => format!("INV-{}-{}", r.range(2015, 2030), r.digits(6)),
                4 => format!("PO-{}", r.digits_n(5, 12)),
                5 => format!("tracking number {}{n}", r.range(1, 9)),
                6 => format!("Ticket #{}", r.digits_n(4, 12)),
                _ => format!("ref: {}-{}-{}", r.digits(3), r.digits(3), r.digits(4)),
            }
        }
        9 => match r.below(8) {
            0 => format!(
                "{}/{}/{}",
                r.range(1, 12),
                r.range(1, 28),
                r.range(1990, 2030)
            ),
            1 => format!(
                "{:02}.{:02}.{}",
                r.range(1, 28),
                r.range(1, 12),
                r.range(1990, 2030)
            ),
            2 => format!(
                "{}/{:02}/{:02}",
                r.range(1990, 2030),
                r.range(1, 12),
                r.range(1, 28)
            ),
            3 => format!(
                "${},{:03}.{:02}",
                r.range(1, 999),
                r.below(1000),
                r.below(100)
            ),
            4 => format!("pi is 3.{}", r.digits(8)),
            5 => format!("zip {}-{}", r.digits(5), r.digits(4)),
            6 => format!(
                "ISBN 978-{}-{}-{}-{}",
                r.range(0, 9),
                r.digits(2),
                r.digits(6),
                r.range(0, 9)
            ),
            _ => format!(
                "{} items at {}.{} each",
                r.range(2, 99),
                r.range(1, 99),
                r.digits(2)
            ),
        },
        10 => r
            .pick(&[
                "user@localhost",
                "ping @channel now",
                "icon@2x.png",
                "name at example dot com",
                "npm i @scope/pkg",
                "@decorator\ndef f(): pass",
                "git@github.com:org/repo.git",
                "a@b",
            ])
            .to_string(),
        11 => match r.below(9) {
            0 => format!("ghp_{}", r.chars(ALNUM, 20)),
            1 => format!("AKIA{}", r.chars(UPPER_ALNUM, 10)),
            2 => "xoxb-not-a-token".to_string(),
            3 => format!(
                "{}.{}.{}",
                b64url(br#"{"typ":"x","kid":"1"}"#),
                b64url(b"{}"),
                r.chars(B64URL, 20)
            ),
            4 => format!(
                "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----",
                r.chars(B64, 64)
            ),
            5 => format!(
                "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----",
                r.chars(B64, 64)
            ),
            6 => "https://example.com/path?user=a:b".to_string(),
            7 => format!("https://{}@example.com/repo", r.pick(&["john", "deploy"])),
            _ => format!("AKIA{}", r.chars(b"abcdefghijklmnop", 16)),
        },
        12 => match r.below(7) {
            0 => format!(
                "{}.{}.{}.{}",
                r.range(256, 999),
                r.below(256),
                r.below(256),
                r.below(256)
            ),
            1 => format!("OID 1.3.6.1.4.1.{}", r.range(1, 9999)),
            2 => format!(
                "mac {}",
                (0..6)
                    .map(|_| r.chars(HEX, 2))
                    .collect::<Vec<_>>()
                    .join(":")
            ),
            3 => format!(
                "at {:02}:{:02}:{:02}",
                r.below(24),
                r.below(60),
                r.below(60)
            ),
            4 => "std::vector<int> and Foo::Bar::baz".to_string(),
            5 => format!(
                "{}.{}.{}.{}.{}",
                r.below(256),
                r.below(256),
                r.below(256),
                r.below(256),
                r.below(256)
            ),
            _ => "dead::beef".to_string(),
        },
        14 => match r.below(12) {
            0 => format!("port {}", r.range(1, 65535)),
            1 => format!("PID {}", r.range(100, 99999)),
            2 => format!(
                "{},{:03},{:03}",
                r.range(1, 999),
                r.below(1000),
                r.below(1000)
            ),
            3 => format!("0x{}", r.chars(HEX, 8)),
            4 => format!("base64 {}=", r.chars(B64, 27)),
            5 => "/usr/lib/x86_64-linux-gnu/libc.so.6".to_string(),
            6 => format!(
                "semver {}.{}.{}-beta.{}",
                r.below(9),
                r.below(20),
                r.below(20),
                r.below(9)
            ),
            7 => format!(
                "subnet {}.{}.{}",
                r.range(1, 223),
                r.below(256),
                r.below(256)
            ),
            8 => format!("tracking 1Z{}{}", r.chars(UPPER_ALNUM, 6), r.digits(10)),
            9 => format!("IMEI 49{}", r.digits(13)),
            10 => format!("EIN {}-{}", r.digits(2), r.digits(7)),
            _ => format!(
                "Build {}.{:02}.{:02}.{}",
                r.range(2015, 2030),
                r.range(1, 12),
                r.range(1, 28),
                r.digits(4)
            ),
        },
        _ => match r.below(4) {
            0 => format!("{}{}", r.range(2, 9), r.digits(9)),
            1 => format!("1{}", r.digits(9)),
            2 => format!("{}-{}", r.digits(3), r.digits(4)),
            _ => format!("{} {}", r.digits(4), r.digits(4)),
        },
    };
    s.raw(&v);
}

// ---------------------------------------------------------------- the corpus

/// `per_type` positives of every type (each with filler and, half the time, a hard negative),
/// `per_negative` samples of every hard-negative kind, and mixed samples holding several.
pub fn generate(seed: u64, per_type: usize, per_negative: usize) -> Vec<Sample> {
    let mut r = Rng::new(seed);
    let mut out = Vec::new();
    for &t in GENERATED {
        for _ in 0..per_type {
            let mut s = Sample::default();
            if r.chance(70) {
                let w = r.range(2, 12);
                filler(&mut r, &mut s, w);
            }
            positive(&mut r, &mut s, t);
            if r.chance(50) {
                s.raw(r.pick(&[" ", "\n", ". "]));
                let k = r.below(NEGATIVE_KINDS.len());
                negative(&mut r, &mut s, k);
            }
            if r.chance(60) {
                s.raw(" ");
                let w = r.range(2, 12);
                filler(&mut r, &mut s, w);
            }
            out.push(s);
        }
    }
    for k in 0..NEGATIVE_KINDS.len() {
        for _ in 0..per_negative {
            let mut s = Sample::default();
            if r.chance(60) {
                let w = r.range(2, 10);
                filler(&mut r, &mut s, w);
            }
            negative(&mut r, &mut s, k);
            s.raw(r.pick(&[". ", " ", "\n", ", "]));
            if r.chance(50) {
                let w = r.range(2, 10);
                filler(&mut r, &mut s, w);
            }
            out.push(s);
        }
    }
    for _ in 0..per_type {
        let mut s = Sample::default();
        for _ in 0..r.range(2, 5) {
            let w = r.range(1, 6);
            filler(&mut r, &mut s, w);
            if r.chance(70) {
                let t = r.pick(GENERATED);
                positive(&mut r, &mut s, t);
            } else {
                let k = r.below(NEGATIVE_KINDS.len());
                negative(&mut r, &mut s, k);
            }
            s.raw(r.pick(&[" ", "\n", ". "]));
        }
        out.push(s);
    }
    out
}
