//! Finds PII in text with one left-to-right pass. Instead of running a dozen regexes over every
//! message, the scanner looks only at bytes that can start something (`@`, `://`, `+`, `(`,
//! `-----BEGIN`, and the first byte of a word) and hands those positions to a small format
//! parser; candidates are then validated (Luhn, mod-97, ranges, decoding) and weighed against the
//! words around them. Everything else is skipped a word at a time.

pub mod context;
mod email;
mod ip;
mod numeric;
mod phone;
mod secrets;

use crate::types::PiiType;
use context::{is_hex, is_word, run, CLASS, WORD};

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
    let mut s = Scanner {
        b: text.as_bytes(),
        hint,
        out: Vec::new(),
    };
    s.run();
    resolve_overlaps(&mut s.out);
    s.out
}

struct Scanner<'a> {
    b: &'a [u8],
    hint: Option<&'a str>,
    out: Vec<Finding>,
}

/// What a detector made of a position.
enum Step {
    /// Found a value; continue after `next`.
    Found(Finding, usize),
    /// Nothing here; continue at this position (always past the one tried).
    Skip(usize),
}

impl Scanner<'_> {
    fn run(&mut self) {
        let b = self.b;
        let n = b.len();
        let mut i = 0;
        while i < n {
            let c = b[i];
            let step = if CLASS[c as usize] & WORD == 0 {
                match c {
                    b'@' => email::at_sign(b, i),
                    b':' => self.colon(i),
                    b'+' | b'(' => phone::punct(b, i, self.hint),
                    b'-' if context::at(b, i + 1) == b'-' => secrets::pem(b, i),
                    _ => Step::Skip(i + 1),
                }
            } else if i > 0 && is_word(b[i - 1]) {
                Step::Skip(run(b, i, is_word))
            } else {
                self.word(i)
            };
            i = match step {
                Step::Found(f, next) => {
                    self.out.push(f);
                    next
                }
                Step::Skip(next) => next,
            };
        }
    }

    fn colon(&self, i: usize) -> Step {
        let b = self.b;
        let next = context::at(b, i + 1);
        if next == b'/' && context::at(b, i + 2) == b'/' {
            secrets::url_credentials(b, i)
        } else if next == b':' && (i == 0 || !is_word(b[i - 1])) {
            ip::v6(b, i).unwrap_or(Step::Skip(i + 2))
        } else {
            Step::Skip(i + 1)
        }
    }

    /// At the first byte of a word. Most words are skipped after one pass and a few byte
    /// comparisons; only words that can start a value go to a parser.
    fn word(&self, i: usize) -> Step {
        let b = self.b;
        let c = b[i];
        if c.is_ascii_digit() {
            return numeric::at_digit(b, i, self.hint);
        }
        let end = run(b, i, is_word);
        let found = match c {
            b'A'..=b'Z' => {
                let aws = if c == b'A' && end - i == 20 {
                    secrets::aws(b, i)
                } else {
                    None
                };
                aws.or_else(|| numeric::iban(b, i))
            }
            b'g' if end - i >= 40 => secrets::github(b, i),
            b'x' if b[i..].starts_with(b"xox") || b[i..].starts_with(b"xapp") => {
                secrets::slack(b, i)
            }
            b'e' if b[i..].starts_with(b"eyJ") => secrets::jwt(b, i),
            _ => None,
        };
        if let Some(step) = found {
            return step;
        }
        // A UUID or IPv6 address starting with a hex letter: a hex word then `-` or `:`.
        let next = context::at(b, end);
        if (next == b'-' || next == b':') && b[i..end].iter().all(|&c| is_hex(c)) {
            if next == b'-' && end - i == 8 {
                if let Some(e) = numeric::uuid_at(b, i) {
                    return Step::Skip(e);
                }
            }
            if next == b':' {
                if let Some(step) = ip::v6(b, i) {
                    return step;
                }
            }
        }
        Step::Skip(end)
    }
}

/// Keeps the earliest (then longest) of overlapping findings.
fn resolve_overlaps(out: &mut Vec<Finding>) {
    if out.len() < 2 {
        return;
    }
    out.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
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
