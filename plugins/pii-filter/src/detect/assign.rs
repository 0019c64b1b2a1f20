//! Credentials recognised by their label rather than their shape: `password=...`,
//! `"api_key": "..."`, `secret: ...`, `Authorization: Bearer ...`, `AccountKey=...` in prose,
//! env files, JSON and YAML. Found from the `:` or `=` after the label; only the value is
//! reported, so the label stays readable (`password=[CREDENTIAL]`).
//!
//! Code is full of the same labels bound to things that are not secrets (`password: String`,
//! `token=None`, `api_key=os.environ["KEY"]`, `secret: ${VAULT}`), so a value must look like a
//! literal credential: no placeholder, no identifier or call, and at least two character classes
//! including a digit or a symbol.
//!
//! AWS secret access keys (40 characters of base64 with no prefix) are reported as `AWS_KEY`
//! when their label says so, or next to an access key id (see [`aws_secret_after`]).

use super::context::at;
use super::Finding;
use crate::types::PiiType;

/// Credential words a label must end with (lowercase, separators removed).
const LABEL_ENDS: &[&[u8]] = &[
    b"password",
    b"passwd",
    b"pwd",
    b"passphrase",
    b"secret",
    b"token",
    b"apikey",
    b"accesskey",
    b"secretkey",
    b"accountkey",
    b"authorization",
    b"credential",
    b"credentials",
];

/// Labels that end like a credential but name something else.
const NOT_LABELS: &[&[u8]] = &[
    b"pagetoken",
    b"nextpagetoken",
    b"nexttoken",
    b"continuationtoken",
    b"synctoken",
    b"csrftoken",
    b"maxtoken",
    b"eostoken",
    b"bostoken",
    b"padtoken",
    b"unktoken",
    b"septoken",
    b"clstoken",
    b"masktoken",
    b"allowcredentials",
];

/// Values that are placeholders or types, not credentials (compared lowercase).
const NOT_VALUES: &[&[u8]] = &[
    b"null",
    b"none",
    b"nil",
    b"true",
    b"false",
    b"undefined",
    b"string",
    b"required",
    b"optional",
    b"changeme",
    b"password",
    b"secret",
    b"redacted",
    b"hidden",
    b"example",
];

/// What the label before `i` (a `:` or `=`) names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Credential,
    Authorization,
    AwsSecret,
}

fn label(b: &[u8], i: usize) -> Option<Kind> {
    let mut e = i;
    // `"password": ...`, `password : ...`, `'token' => ...`.
    while e > 0 && matches!(b[e - 1], b' ' | b'\t') && i - e < 3 {
        e -= 1;
    }
    if e > 0 && matches!(b[e - 1], b'"' | b'\'') {
        e -= 1;
    }
    // Every label ends in a letter (`03:00`, `a[1]=2` are not assignments); most labels in
    // running text are not credentials, so check the last letter before anything else.
    if e == 0
        || !matches!(
            b[e - 1] | 0x20,
            b'd' | b'e' | b'l' | b'n' | b's' | b't' | b'y'
        )
    {
        return None;
    }
    let mut s = e;
    while s > 0 && (b[s - 1].is_ascii_alphanumeric() || matches!(b[s - 1], b'_' | b'-' | b'.')) {
        s -= 1;
        if e - s > 48 {
            return None;
        }
    }
    // A field of a colon-separated layout (`name:password:uid`), not an assignment.
    if s == e || (s > 0 && b[s - 1] == b':') {
        return None;
    }
    let mut buf = [0u8; 48];
    let mut n = 0;
    for &c in &b[s..e] {
        if c.is_ascii_alphanumeric() {
            buf[n] = c.to_ascii_lowercase();
            n += 1;
        }
    }
    let key = &buf[..n];
    // "AWS secret access key: ..." in prose: the words before the last one count too.
    let mut wide = [0u8; 64];
    let mut w = 0;
    let lo = s.saturating_sub(24);
    let line_start = b[lo..s]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(lo, |p| lo + p + 1);
    for &c in &b[line_start..e] {
        if c.is_ascii_alphanumeric() && w < wide.len() {
            wide[w] = c.to_ascii_lowercase();
            w += 1;
        }
    }
    let contains = |h: &[u8], needle: &[u8]| h.windows(needle.len()).any(|x| x == needle);
    if contains(key, b"secretaccesskey") || contains(&wide[..w], b"awssecret") {
        return Some(Kind::AwsSecret);
    }
    if key == b"authorization" || key.ends_with(b"authorization") {
        return Some(Kind::Authorization);
    }
    if NOT_LABELS.iter().any(|x| key.ends_with(x)) {
        return None;
    }
    LABEL_ENDS
        .iter()
        .any(|x| key.ends_with(x))
        .then_some(Kind::Credential)
}

fn is_b64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'/' || c == b'+'
}

/// A 40-character AWS secret access key at `s..s + 40`, standing alone.
fn aws_secret_at(b: &[u8], s: usize) -> bool {
    let Some(v) = b.get(s..s + 40) else {
        return false;
    };
    v.iter().all(|&c| is_b64(c))
        && !is_b64(at(b, s + 40))
        && at(b, s + 40) != b'='
        && (s == 0 || !is_b64(b[s - 1]))
        && v.iter().any(u8::is_ascii_uppercase)
        && v.iter().any(u8::is_ascii_lowercase)
        && v.iter()
            .any(|c| c.is_ascii_digit() || matches!(c, b'/' | b'+'))
}

/// A secret access key within a few lines after an access key id that ends at `from`
/// (credential files, CSV exports, `aws configure` output, JSON from `create-access-key`).
pub(super) fn aws_secret_after(b: &[u8], from: usize) -> Option<Finding> {
    // Start positions up to 100 bytes on. A key covers 40 bytes, so look at the last byte of
    // each candidate first and jump past it when it can't belong to a key: prose costs a few
    // reads per word instead of one per byte.
    let last_start = b.len().saturating_sub(40).min(from + 100);
    let mut p = from;
    while p <= last_start {
        let q = p + 39;
        if !is_b64(b[q]) {
            p = q + 1;
            continue;
        }
        let mut r = q;
        while r > p && is_b64(b[r - 1]) {
            r -= 1;
        }
        if r > p {
            p = r;
            continue;
        }
        if aws_secret_at(b, p) {
            return Some(Finding {
                start: p,
                end: p + 40,
                kind: PiiType::AwsKey,
            });
        }
        // Inside a longer run: move past it.
        p = q + 1 + b[q + 1..].iter().take_while(|&&c| is_b64(c)).count();
    }
    None
}

/// The value after a `:` or `=` at `i`, when its label names a credential.
pub(super) fn at_assignment(b: &[u8], i: usize) -> Option<Finding> {
    let kind = label(b, i)?;
    let mut p = i + 1;
    // `=>`, `:=`.
    if matches!(at(b, p), b'>' | b'=') {
        p += 1;
    }
    let mut spaces = 0;
    while matches!(at(b, p), b' ' | b'\t') && spaces < 4 {
        p += 1;
        spaces += 1;
    }
    let quote = at(b, p);
    let quoted = matches!(quote, b'"' | b'\'' | b'`');
    if quoted {
        p += 1;
    }
    if kind == Kind::Authorization {
        // `Bearer <token>`, `Basic <base64>`, `Token <token>`.
        let w = p + b[p..]
            .iter()
            .take(8)
            .take_while(|c| c.is_ascii_alphabetic())
            .count();
        let scheme = b[p..w].to_ascii_lowercase();
        if !matches!(&scheme[..], b"bearer" | b"basic" | b"token" | b"bot") || at(b, w) != b' ' {
            return None;
        }
        p = w + 1;
    }
    let start = p;
    let mut e = p;
    while e < b.len() && e - start <= 256 {
        let c = b[e];
        let stop = if quoted {
            c == quote || c == b'\n'
        } else {
            c.is_ascii_whitespace()
                || matches!(
                    c,
                    b'"' | b'\'' | b'`' | b',' | b';' | b'<' | b'>' | b'{' | b'}' | b'[' | b']'
                )
        };
        if stop {
            break;
        }
        e += 1;
    }
    if quoted && at(b, e) != quote {
        return None;
    }
    if !quoted {
        // Sentence punctuation after the value; in running text, a `)` that closes nothing in
        // it (at the end of a line it is more likely the password's own last character).
        let line_end = matches!(at(b, e), b'\n' | b'\r' | 0);
        while e > start && matches!(b[e - 1], b'.' | b':') {
            e -= 1;
        }
        let v = &b[start..e];
        let opens = v.iter().filter(|&&c| c == b'(').count();
        let closes = v.iter().filter(|&&c| c == b')').count();
        if e > start && closes > opens && b[e - 1] == b')' {
            // `f(password=password)`, `password: prompt):`: a name closing a call.
            if b[start..e - 1]
                .iter()
                .all(|&c| c.is_ascii_alphanumeric() || c == b'_')
            {
                return None;
            }
            if !line_end {
                e -= 1;
            }
        }
    }
    let v = &b[start..e];
    if kind == Kind::AwsSecret && v.len() == 40 && aws_secret_at(b, start) {
        return Some(Finding {
            start,
            end: e,
            kind: PiiType::AwsKey,
        });
    }
    let min = if kind == Kind::Authorization { 12 } else { 6 };
    (v.len() >= min && v.len() <= 256 && looks_like_credential(v)).then_some(Finding {
        start,
        end: e,
        kind: PiiType::Credential,
    })
}

/// A literal credential rather than a placeholder, a type or an expression.
fn looks_like_credential(v: &[u8]) -> bool {
    let lower = v.to_ascii_lowercase();
    if NOT_VALUES.contains(&&lower[..]) || placeholder(v) {
        return false;
    }
    // `(required)`, and roff's escapes in man pages (`my\-secret`, `bar\fR`).
    if (v[0] == b'(' && v.ends_with(b")"))
        || v.windows(2)
            .any(|w| w[0] == b'\\' && matches!(w[1], b'-' | b'&' | b'f' | b'e' | b'('))
    {
        return false;
    }
    // Credentials have no spaces, and rarely several colons (`prefix:2002:da8:1::`).
    if v.iter().any(u8::is_ascii_whitespace) || v.iter().filter(|&&c| c == b':').count() >= 2 {
        return false;
    }
    if v.iter().all(|&c| c == v[0]) || lower.windows(4).any(|w| w == b"xxxx") {
        return false;
    }
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    // `os.environ[...]`, `self.password`, `config.db.password`, `getenv(...)`, `Vec<u8>`,
    // `Token![;]`, `(self.password...`, `*const c_char`.
    let code = v.strip_prefix(b"(").unwrap_or(v);
    let code = code.strip_prefix(b"*").unwrap_or(code);
    let head = code.iter().take_while(|&&c| ident(c)).count();
    if head > 0 && !code[0].is_ascii_digit() {
        let name = &code[..head];
        // snake_case or CamelCase names; a random password mixes digits and cases.
        let snake = name.len() >= 3
            && name.iter().all(|c| !c.is_ascii_uppercase())
            && !name.ends_with(b"_");
        let screaming = name.len() >= 3 && name.iter().all(|c| !c.is_ascii_lowercase());
        // Every capital starts a word of two or more lowercase letters (`Some`, `TcpStream`).
        let camel = name[0].is_ascii_uppercase()
            && name.iter().enumerate().all(|(k, c)| {
                !c.is_ascii_uppercase()
                    || (name.get(k + 1).is_some_and(u8::is_ascii_lowercase)
                        && name.get(k + 2).is_some_and(u8::is_ascii_lowercase))
            })
            && !name.iter().any(u8::is_ascii_digit);
        let named = snake || screaming || camel;
        if named && head == code.len() && head < v.len() {
            // `*const`, `(token`: a name behind an operator.
            return false;
        }
        match code.get(head) {
            Some(b'.')
                if code
                    .get(head + 1)
                    .is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_') =>
            {
                let dotted = code
                    .iter()
                    .all(|&c| ident(c) || c == b'.' || c == b'(' || c == b')');
                if dotted || head >= 2 {
                    return false;
                }
            }
            Some(b'(' | b'!' | b'[' | b'<') if named && head >= 2 => return false,
            Some(b'(') if head >= 3 && code.ends_with(b")") => return false,
            Some(b':') if code.get(head + 1) == Some(&b':') => return false,
            _ => {}
        }
    }
    // `1*tchar` (grammar notation), `DEQUEUE!(...)` were caught above or here: a repetition.
    if v.len() >= 3
        && v[0].is_ascii_digit()
        && v[1] == b'*'
        && v[2..].iter().all(u8::is_ascii_lowercase)
    {
        return false;
    }
    let lowers = v.iter().filter(|c| c.is_ascii_lowercase()).count();
    let uppers = v.iter().filter(|c| c.is_ascii_uppercase()).count();
    let digits = v.iter().any(u8::is_ascii_digit);
    let symbols = v.iter().any(|c| !c.is_ascii_alphanumeric());
    let classes = [lowers > 0, uppers > 0, digits, symbols]
        .iter()
        .filter(|&&x| x)
        .count();
    // Identifiers in SCREAMING_CASE or snake_case (`MY_SECRET`, `db_password_1`).
    let identifier =
        v.iter().all(|&c| ident(c)) && (uppers == 0 || lowers == 0) && v.contains(&b'_');
    if digits && v.iter().all(u8::is_ascii_digit) {
        return false;
    }
    if classes >= 2 && (digits || symbols) && !identifier {
        return true;
    }
    // Letters only: a random mix of cases (`qguWCjBPxySrfoSm...`), not a CamelCase name, whose
    // case changes only at word boundaries.
    let switches = v
        .windows(2)
        .filter(|w| w[0].is_ascii_uppercase() != w[1].is_ascii_uppercase())
        .count();
    v.len() >= 16 && lowers > 0 && uppers > 0 && switches * 100 >= v.len() * 35
}

/// `$VAR`, `${VAR}`, `$(cmd)`, `%s`, `%(name)s`, `%VAR%`, `&str`, `****`, `<your key>`,
/// `{{ var }}`: a stand-in for a value, not the value.
fn placeholder(v: &[u8]) -> bool {
    let rest = &v[1..];
    let letters_only =
        |s: &[u8]| !s.is_empty() && s.iter().all(|c| c.is_ascii_alphabetic() || *c == b'_');
    match v[0] {
        b'$' => {
            matches!(at(rest, 0), b'{' | b'(')
                || letters_only(rest)
                || rest
                    .iter()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
        }
        b'%' => matches!(at(rest, 0), b's' | b'd' | b'(') || v.ends_with(b"%"),
        b'&' => {
            matches!(at(rest, 0), b'\'' | b'[') || rest.starts_with(b"mut ") || letters_only(rest)
        }
        b'*' => v.iter().all(|&c| c == b'*'),
        b'<' => v.ends_with(b">"),
        b'{' | b'\\' => true,
        _ => false,
    }
}
