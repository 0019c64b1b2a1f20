//! IP addresses. IPv4 needs context: "1.2.3.4" is an address in "from 1.2.3.4" but a version in
//! "version 1.2.3.4", "Chrome/1.2.3.4" or "pkg==1.2.3.4", and never part of "1.2.3.4.5".

use super::context::{at, is_hex, is_word, label_before, run, run_max, Label};
use super::{Finding, Step};
use crate::types::PiiType;
use std::net::Ipv6Addr;

/// What a dotted number at a word start turned out to be.
pub(super) enum V4 {
    /// An address ending at this offset.
    Match(usize),
    /// Address-shaped but a version, or part of a longer dotted number; skip to this offset.
    Suppressed(usize),
    /// Not address-shaped (a part over 255, too many digits): let other detectors try.
    NotIp,
}

pub(super) fn v4(b: &[u8], i: usize, hint: Option<&str>) -> V4 {
    let dotted_end = || run(b, i, |c| c.is_ascii_digit() || c == b'.');
    let mut p = i;
    for k in 0..4 {
        let s = p;
        p = run(b, p, |c| c.is_ascii_digit());
        let len = p - s;
        if len == 0 || len > 3 {
            return V4::NotIp;
        }
        let v = b[s..p]
            .iter()
            .fold(0u32, |acc, &d| acc * 10 + u32::from(d - b'0'));
        if v > 255 || (len > 1 && b[s] == b'0') {
            return V4::NotIp;
        }
        if k < 3 {
            if at(b, p) != b'.' {
                return V4::NotIp;
            }
            p += 1;
        }
    }
    let next = at(b, p);
    if is_word(next) {
        return V4::Suppressed(run(b, i, is_word));
    }
    // `1.2.3.4.5`, `foo-1.2.3.4.tar.gz`.
    if next == b'.' && at(b, p + 1).is_ascii_alphanumeric() {
        return V4::Suppressed(dotted_end());
    }
    if i > 0 {
        let prev = b[i - 1];
        let prev2 = if i > 1 { b[i - 2] } else { 0 };
        let versionish = matches!(prev, b'~' | b'^' | b'<' | b'>')
            || (prev == b'=' && matches!(prev2, b'=' | b'<' | b'>' | b'~' | b'!'))
            || (matches!(prev, b'/' | b'-' | b'_') && prev2.is_ascii_alphabetic())
            || (prev == b'.' && prev2.is_ascii_digit())
            // Firefox's `rv:1.9.0.20`.
            || (prev == b':' && i >= 3 && &b[i - 3..i - 1] == b"rv");
        if versionish {
            return V4::Suppressed(dotted_end());
        }
    }
    let label = label_before(b, i, hint);
    if label == Label::Version {
        return V4::Suppressed(dotted_end());
    }
    // `3.5.1.13`, `7.8.8.8`: with every part between 1 and 20 a dotted quad is far more often a
    // section or version number than an address; it needs an address label or a port or prefix.
    let small = b[i..p]
        .split(|&c| c == b'.')
        .take(3)
        .all(|part| part.len() <= 2 && part != b"0" && (part.len() < 2 || part <= &b"20"[..]));
    // The unspecified, loopback and broadcast addresses belong to no one.
    if matches!(&b[i..p], b"0.0.0.0" | b"127.0.0.1" | b"255.255.255.255") {
        return V4::Suppressed(p);
    }
    let after_at = i > 0 && b[i - 1] == b'@';
    if small && label != Label::Network && !after_at && !matches!(next, b':' | b'/') {
        return V4::Suppressed(p);
    }
    V4::Match(p)
}

/// An IPv6 address starting at `i` (a hex word followed by `:`, or `::`).
pub(super) fn v6(b: &[u8], i: usize) -> Option<Step> {
    // Every address has a second colon at most five bytes after its first one; times
    // (`03:00`) and labels (`Note: ...`) do not, and are dropped before any parsing.
    let c1 = i + b[i..b.len().min(i + 5)].iter().position(|&c| c == b':')?;
    if !b[c1 + 1..b.len().min(c1 + 6)].contains(&b':') {
        return None;
    }
    let mut e = run_max(b, i, 46, |c| is_hex(c) || c == b':' || c == b'.');
    while e > i && b[e - 1] == b'.' {
        e -= 1;
    }
    if e > i + 1 && b[e - 1] == b':' && b[e - 2] != b':' {
        e -= 1;
    }
    let s = &b[i..e];
    if s.len() < 3 || s.len() > 45 || is_word(at(b, e)) {
        return None;
    }
    let colons = s.iter().filter(|&&c| c == b':').count();
    let compressed = s.windows(2).any(|w| w == b"::");
    if !(compressed || colons == 7) || !s.iter().any(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse::<Ipv6Addr>().ok()?;
    // Short compressed forms also read as code paths (`E1::A`, `B2::new(`): accept them only in
    // lowercase and not followed by a call or generic.
    let groups = s.split(|&c| c == b':').filter(|g| !g.is_empty()).count();
    // `::1` (loopback, no one's) and `[::3]` (a slice in Python) are not worth a finding.
    if compressed && groups < 2 {
        return None;
    }
    if groups < 3
        && (s.iter().any(u8::is_ascii_uppercase) || matches!(at(b, e), b'(' | b'<' | b'{'))
    {
        return None;
    }
    Some(Step::Found(
        Finding {
            start: i,
            end: e,
            kind: PiiType::IpAddress,
        },
        e,
    ))
}
