//! Email addresses, found from their `@`: the local part is read backwards and the domain
//! forwards, so ordinary words never cost more than a skip.

use super::context::at;
use super::{Finding, Step};
use crate::types::PiiType;

fn is_local(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'%' | b'+' | b'-' | b'\'')
}

fn is_label(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

/// Top-level "domains" that are really file names (`icon@2x.png`).
const FILE_EXTS: &[&[u8]] = &[
    b"png", b"jpg", b"jpeg", b"gif", b"svg", b"webp", b"ico", b"bmp", b"js", b"ts", b"css", b"map",
    b"json", b"txt", b"pdf", b"zip", b"tar", b"gz", b"mp4", b"mov",
];

pub(super) fn at_sign(b: &[u8], i: usize) -> Step {
    match email(b, i) {
        Some((start, end)) => Step::Found(
            Finding {
                start,
                end,
                kind: PiiType::Email,
            },
            end,
        ),
        None => Step::Skip(i + 1),
    }
}

fn email(b: &[u8], i: usize) -> Option<(usize, usize)> {
    // Local part, read backwards (at most 64 bytes, RFC 5321).
    let mut start = i;
    while start > 0 && is_local(b[start - 1]) && i - start < 64 {
        start -= 1;
    }
    if start > 0 && is_local(b[start - 1]) {
        return None;
    }
    while start < i && matches!(b[start], b'.' | b'\'' | b'-' | b'+') {
        start += 1;
    }
    if start == i || b[i - 1] == b'.' {
        return None;
    }
    // `https://token@host`: URL user info, not a mailbox.
    if start >= 3 && &b[start - 3..start] == b"://" {
        return None;
    }
    // Domain: two or more labels, alphabetic TLD of two or more letters.
    let mut p = i + 1;
    let mut labels = 0;
    let mut last_label = (p, p);
    loop {
        let ls = p;
        while p < b.len() && is_label(b[p]) && p - ls < 63 {
            p += 1;
        }
        if p == ls || b[ls] == b'-' || b[p - 1] == b'-' {
            if labels == 0 {
                return None;
            }
            // Back off the dot that led here.
            p = ls - 1;
            break;
        }
        labels += 1;
        last_label = (ls, p);
        if p - i > 254 {
            return None;
        }
        if at(b, p) == b'.' && is_label(at(b, p + 1)) {
            p += 1;
        } else {
            break;
        }
    }
    if labels < 2 || p - (i + 1) > 253 {
        return None;
    }
    let tld = &b[last_label.0..last_label.1];
    if tld.len() < 2 || !(tld.iter().all(u8::is_ascii_alphabetic) || tld.starts_with(b"xn--")) {
        return None;
    }
    let mut lower = [0u8; 8];
    if tld.len() <= lower.len() {
        for (d, s) in lower.iter_mut().zip(tld) {
            *d = s.to_ascii_lowercase();
        }
        if FILE_EXTS.contains(&&lower[..tld.len()]) {
            return None;
        }
    }
    // scp-style `git@github.com:org/repo` is an SSH login, not a person.
    if &b[start..i] == b"git" && at(b, p) == b':' {
        return None;
    }
    let next = at(b, p);
    if next.is_ascii_alphanumeric() || next == b'_' {
        return None;
    }
    Some((start, p))
}
