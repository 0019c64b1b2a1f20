//! Finds PII in text with one left-to-right pass. Instead of running a dozen regexes over every
//! message, the scanner stops only at bytes that can belong to a value (digits, uppercase
//! letters, `@ : + ( - _`) and hands those positions to a small format parser; candidates are
//! then validated (Luhn, mod-97, ranges, decoding) and weighed against the words around them.
//! Lowercase prose is passed over sixteen bytes at a time in the plugin (`skip.rs`).

mod assign;
pub mod context;
pub mod decode;
mod email;
mod ip;
mod keys;
pub mod nearby;
pub mod normalise;
mod numeric;
mod phone;
mod secrets;
mod skip;

use crate::types::PiiType;
use context::{is_hex, is_word, run};
use nearby::{Context, Cx};
use skip::skip_quiet;

/// One detected value: its type and byte range in the scanned text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Finding {
    pub start: usize,
    pub end: usize,
    pub kind: PiiType,
}

/// Scans `text` and returns non-overlapping findings in order. `hint` is the JSON key the text
/// was found under, if any; it serves as a label when the value starts the text
/// (`{"ssn": "123456789"}`).
pub fn scan(text: &str, hint: Option<&str>) -> Vec<Finding> {
    scan_with(text, hint, &Context::default())
}

/// [`scan`] with the operator's context words (`nearby.rs`).
pub fn scan_with(text: &str, hint: Option<&str>, words: &Context) -> Vec<Finding> {
    scan_at(text, Cx { hint, words }, 0)
}

/// [`scan`] at a depth of base64 decoding (`decode.rs`).
fn scan_at(text: &str, cx: Cx<'_>, depth: u8) -> Vec<Finding> {
    match normalise::Normalised::of(text) {
        None => scan_view(text, cx, depth),
        Some(n) => {
            let mut found = scan_view(&n.text, cx, depth);
            for f in &mut found {
                (f.start, f.end) = n.original(f.start, f.end);
            }
            found
        }
    }
}

/// Scans text that is already in its normalised form.
fn scan_view(text: &str, cx: Cx<'_>, depth: u8) -> Vec<Finding> {
    let mut s = Scanner {
        b: text.as_bytes(),
        cx,
        out: Vec::new(),
        pem: secrets::PemMarkers::new(),
        depth,
        decoded_to: 0,
    };
    s.run();
    resolve_overlaps(&mut s.out);
    s.out
}

struct Scanner<'a> {
    b: &'a [u8],
    /// The JSON key the text is under, and the context words.
    cx: Cx<'a>,
    out: Vec<Finding>,
    pem: secrets::PemMarkers,
    /// Base64 levels decoded to reach this text.
    depth: u8,
    /// End of the last base64 token tried, so each token is decoded once.
    decoded_to: usize,
}

/// What a detector made of a position.
enum Step {
    /// Found a value; continue after `next`.
    Found(Finding, usize),
    /// Nothing here; continue at this position (always past the one tried).
    Skip(usize),
}

/// What a byte can start. Lowercase letters, spaces and most punctuation are `QUIET`, so prose
/// is skipped in bulk (`skip.rs`): tokens that start with a lowercase letter are found
/// from a later byte instead (`eyJ` from its `J`, `ghp_` from its `_`, `xoxb-` from its `-`,
/// hex-letter UUIDs and IPv6 addresses from their `-` or `:`).
const QUIET: u8 = 0;
const T_DIGIT: u8 = 1;
const T_UPPER: u8 = 2;
const T_AT: u8 = 3;
const T_COLON: u8 = 4;
const T_PHONE: u8 = 5;
const T_DASH: u8 = 6;
const T_UNDERSCORE: u8 = 7;
const T_EQUALS: u8 = 8;

const fn build_triggers() -> [u8; 256] {
    let mut t = [QUIET; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = match b {
            b'0'..=b'9' => T_DIGIT,
            b'A'..=b'Z' => T_UPPER,
            b'@' => T_AT,
            b':' => T_COLON,
            b'+' | b'(' => T_PHONE,
            b'-' => T_DASH,
            b'_' => T_UNDERSCORE,
            b'=' => T_EQUALS,
            _ => QUIET,
        };
        c += 1;
    }
    t
}

static TRIGGER: [u8; 256] = build_triggers();

impl Scanner<'_> {
    fn run(&mut self) {
        let b = self.b;
        let n = b.len();
        let mut i = 0;
        while i < n {
            let t = TRIGGER[b[i] as usize];
            if t == QUIET {
                i = skip_quiet(b, i + 1);
                continue;
            }
            let starts_word = i == 0 || !is_word(b[i - 1]);
            let step = match t {
                T_DIGIT if starts_word => numeric::at_digit(b, i, self.cx),
                // Digits inside a word (`sha256`, `x86_64`): skip the word, unless it starts
                // like an IBAN written in lowercase (`de89 3704 ...`).
                T_DIGIT => numeric::iban_any_case(b, i.wrapping_sub(2), self.cx)
                    .unwrap_or_else(|| Step::Skip(run(b, i, is_word))),
                // Every format `upper` knows has an uppercase second letter (`AKIA`, `AIza`,
                // `SK`, `SG.`, an IBAN's country code): a capitalised word is prose, or an IBAN
                // in mixed case (`De89`).
                T_UPPER if starts_word && !context::at(b, i + 1).is_ascii_uppercase() => {
                    numeric::iban_any_case(b, i, self.cx)
                        .unwrap_or_else(|| Step::Skip(run(b, i, is_word)))
                }
                T_UPPER if starts_word => self.upper(i),
                T_UPPER => self.jwt_from_j(i),
                T_AT => email::at_sign(b, i),
                T_COLON => self.colon(i),
                T_PHONE => phone::punct(b, i, self.cx),
                T_DASH => self.dash(i),
                T_EQUALS => self.assignment(i),
                _ => self.underscore(i),
            };
            // A letter or digit no detector took may be inside base64 of text: when a long word
            // was passed over, or at an uppercase letter inside a word (where base64 has them
            // and prose does not).
            let step = match step {
                Step::Skip(next)
                    if i >= self.decoded_to
                        && (next - i >= 12 || (t == T_UPPER && !starts_word))
                        && (1..=4).all(|k| decode::is_base64(context::at(b, i + k))) =>
                {
                    self.base64(i)
                        .map_or(Step::Skip(next), |f| Step::Found(f, f.end))
                }
                step => step,
            };
            // Every step moves forward, whatever a detector answered.
            i = match step {
                Step::Found(f, next) => {
                    self.out.push(f);
                    next
                }
                Step::Skip(next) => next,
            }
            .max(i + 1);
        }
    }

    /// Start of the word that ends at `i`, if the word is made of bytes satisfying `f`, starts
    /// with a letter, and is at most `max` long.
    fn word_before(&self, i: usize, max: usize, f: impl Fn(u8) -> bool) -> Option<usize> {
        let b = self.b;
        let mut s = i;
        while s > 0 && f(b[s - 1]) && i - s <= max {
            s -= 1;
        }
        let ok =
            s < i && i - s <= max && b[s].is_ascii_alphabetic() && (s == 0 || !is_word(b[s - 1]));
        ok.then_some(s)
    }

    /// An uppercase letter starting a word: AWS key id (and the secret key after it), a vendor
    /// key or IBAN, else skip the word.
    fn upper(&mut self, i: usize) -> Step {
        let b = self.b;
        if b[i] == b'A' {
            if let Some(step) = secrets::aws(b, i) {
                if let Some(secret) = assign::aws_secret_after(b, i + 20) {
                    self.out.push(secret);
                }
                return step;
            }
        }
        if matches!(b[i], b'A' | b'S') {
            if let Some(step) = keys::upper(b, i) {
                return step;
            }
        }
        numeric::iban(b, i, self.cx).unwrap_or_else(|| Step::Skip(run(b, i, is_word)))
    }

    /// A `:` or `=` after a credential label: the value is reported as a credential unless a
    /// detector for its own format finds it (that finding wins; see [`resolve_overlaps`]), so
    /// scanning goes on at the value.
    fn assignment(&mut self, i: usize) -> Step {
        match assign::at_assignment(self.b, i) {
            Some(f) => {
                let next = f.start;
                self.out.push(f);
                Step::Skip(next)
            }
            None => Step::Skip(i + 1),
        }
    }

    /// The base64 token around `i`, when it decodes to text holding a value: the whole token,
    /// as the type of the first value in it.
    #[inline(never)]
    fn base64(&mut self, i: usize) -> Option<Finding> {
        use decode::{is_base64, MIN_BASE64};
        // Most letters and digits are in short words, which the caller has seen in the next
        // four bytes (a token's first letter or digit is rarely in its last four). Then no
        // further than a token's least length each way before anything else.
        let b = self.b;
        let ahead = context::run_max(b, i, MIN_BASE64, is_base64) - i;
        if ahead < MIN_BASE64 {
            let lo = i.saturating_sub(MIN_BASE64 - ahead);
            let behind = b[lo..i].iter().rev().take_while(|&&c| is_base64(c)).count();
            if ahead + behind < MIN_BASE64 {
                return None;
            }
        }
        self.base64_token(i)
    }

    #[inline(never)]
    fn base64_token(&mut self, i: usize) -> Option<Finding> {
        use decode::{is_base64, MAX_BASE64, MAX_DEPTH, MIN_BASE64};
        let b = self.b;
        let mut s = i;
        while s > 0 && is_base64(b[s - 1]) && i - s <= MAX_BASE64 {
            s -= 1;
        }
        let mut e = run(b, i, is_base64);
        // Base64 wrapped at a fixed width (MIME, PEM): lines of that width, then a last one
        // (or a line of something else, so the token may also end with the last full line).
        let width = e - s;
        let mut full = e;
        if width >= MIN_BASE64 && width.is_multiple_of(4) {
            let mut line_end = e;
            loop {
                let eol = match (context::at(b, line_end), context::at(b, line_end + 1)) {
                    (b'\n', _) => 1,
                    (b'\r', b'\n') => 2,
                    _ => break,
                };
                let next = run(b, line_end + eol, is_base64);
                let len = next - (line_end + eol);
                if len == 0 || len > width || next - s > MAX_BASE64 {
                    break;
                }
                e = next;
                if len < width {
                    break;
                }
                line_end = next;
                full = next;
            }
        }
        self.decoded_to = e;
        if self.depth >= MAX_DEPTH || !(MIN_BASE64..=MAX_BASE64).contains(&(e - s)) {
            return None;
        }
        let (text, e) = match decode_text(&b[s..e]) {
            Some(text) => (text, e),
            None if full < e => (decode_text(&b[s..full])?, full),
            None => return None,
        };
        let cx = Cx {
            hint: None,
            words: self.cx.words,
        };
        let kind = scan_at(&text, cx, self.depth + 1).first()?.kind;
        let pad = b[e..].iter().take(2).take_while(|&&c| c == b'=').count();
        Some(Finding {
            start: s,
            end: e + pad,
            kind,
        })
    }

    /// A `J` inside a word: the third byte of a JWT (`eyJ`)?
    fn jwt_from_j(&self, i: usize) -> Step {
        let b = self.b;
        if b[i] == b'J' && i >= 2 && &b[i - 2..i] == b"ey" && (i == 2 || !is_word(b[i - 3])) {
            if let Some(step) = secrets::jwt(b, i - 2) {
                return step;
            }
        }
        Step::Skip(i + 1)
    }

    fn colon(&mut self, i: usize) -> Step {
        let b = self.b;
        let next = context::at(b, i + 1);
        if next == b'/' && context::at(b, i + 2) == b'/' {
            if let Some(step) = secrets::slack_webhook(b, i) {
                return step;
            }
            return secrets::url_credentials(b, i);
        }
        if next == b':' && (i == 0 || !is_word(b[i - 1])) {
            return ip::v6(b, i).unwrap_or(Step::Skip(i + 2));
        }
        if next != b':' {
            if let Some(f) = assign::at_assignment(b, i) {
                let next = f.start;
                self.out.push(f);
                return Step::Skip(next);
            }
        }
        // IPv6 starting with a hex letter (`fe80::1`); digit-first ones were tried at the digit.
        if let Some(s) = self.word_before(i, 4, is_hex) {
            if let Some(step) = ip::v6(b, s) {
                return step;
            }
        }
        Step::Skip(i + 1)
    }

    fn dash(&mut self, i: usize) -> Step {
        let b = self.b;
        if context::at(b, i + 1) == b'-' {
            return secrets::pem(b, i, &mut self.pem);
        }
        if let Some(s) = self.word_before(i, 9, |c| c.is_ascii_alphabetic() || c == b'.') {
            // `xoxb-`, `xapp-`, `xoxe.xoxp-`.
            if b[s] == b'x' {
                if let Some(step) = secrets::slack(b, s) {
                    return step;
                }
            }
            // `sk-`, `sk-proj-`, `sk-ant-` (OpenAI, Anthropic); `glpat-` (GitLab).
            let key = match b[s] {
                b's' => keys::sk_dash(b, s),
                b'g' => keys::gitlab(b, s),
                _ => None,
            };
            if let Some(step) = key {
                return step;
            }
        }
        // A UUID whose first group starts with a hex letter.
        if let Some(s) = self.word_before(i, 8, is_hex) {
            if let Some(end) = numeric::uuid_at(b, s) {
                return Step::Skip(end);
            }
        }
        Step::Skip(i + 1)
    }

    /// `ghp_` and friends, `github_pat_`; Stripe `sk_live_`..., npm `npm_`, Hugging Face `hf_`.
    fn underscore(&self, i: usize) -> Step {
        let b = self.b;
        if let Some(s) = self.word_before(i, 6, |c| c.is_ascii_lowercase()) {
            let found = match b[s] {
                b'g' => secrets::github(b, s),
                b's' | b'r' | b'p' | b'n' | b'h' => keys::underscore_prefixed(b, s),
                _ => None,
            };
            if let Some(step) = found {
                return step;
            }
        }
        Step::Skip(i + 1)
    }
}

/// The text a token of the base64 alphabet decodes to: hex of text (`6a616e65...`,
/// `0x6a61...`, in the same alphabet), or base64 of text.
fn decode_text(token: &[u8]) -> Option<String> {
    let hex = token
        .strip_prefix(b"0x")
        .or_else(|| token.strip_prefix(b"0X"))
        .unwrap_or(token);
    decode::hex_text(hex).or_else(|| decode::base64_text(token))
}

/// Keeps the earliest (then longest) of overlapping findings; for the same span, a format's
/// own detector wins over the label-based CREDENTIAL (`api_key=sk-...` is an API_KEY).
fn resolve_overlaps(out: &mut Vec<Finding>) {
    if out.len() < 2 {
        return;
    }
    out.sort_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then(b.end.cmp(&a.end))
            .then((a.kind == PiiType::Credential).cmp(&(b.kind == PiiType::Credential)))
    });
    let mut kept = 0;
    let mut last_end = 0;
    for i in 0..out.len() {
        let f = out[i];
        if kept == 0 || f.start >= last_end {
            out[kept] = f;
            kept += 1;
            last_end = f.end;
        }
    }
    out.truncate(kept);
}

#[cfg(test)]
mod tests;
