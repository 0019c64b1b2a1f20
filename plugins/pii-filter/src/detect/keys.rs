//! Vendor API keys recognisable by their documented shape alone: a fixed prefix, an alphabet
//! and a length (see `eval/SOURCES.md` for where each fact comes from).
//!
//! | vendor | shape |
//! |---|---|
//! | OpenAI | `sk-` + 32-64 alphanumerics (legacy); `sk-proj-`, `sk-svcacct-`, `sk-admin-`, `sk-None-` + 40+ base64url |
//! | Anthropic | `sk-ant-` + a kind (`api03-`, `admin01-`) + 80-120 base64url |
//! | Stripe | `sk_live_`, `rk_live_`, `pk_live_`, `sk_test_`, `rk_test_` + 20-247 alphanumerics |
//! | Google | `AIza` + 35 base64url |
//! | GitLab | `glpat-` + 20+ base64url (and `.`) |
//! | npm | `npm_` + 36 alphanumerics |
//! | Hugging Face | `hf_` + 30-40 alphanumerics |
//! | Twilio | API key SID `SK` + 32 hex |
//! | SendGrid | `SG.` + 22 base64url + `.` + 43 base64url |

use super::context::{at, run_max};
use super::{Finding, Step};
use crate::types::PiiType;

fn is_b64url(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_'
}

fn key(start: usize, end: usize) -> Option<Step> {
    Some(Step::Found(
        Finding {
            start,
            end,
            kind: PiiType::ApiKey,
        },
        end,
    ))
}

/// Whether the key ends cleanly at `end` (not inside a longer token).
fn ends(b: &[u8], end: usize) -> bool {
    !is_b64url(at(b, end))
}

/// Letters of both cases and a digit: random bodies have them, words and identifiers rarely.
fn mixed(s: &[u8]) -> bool {
    s.iter().any(u8::is_ascii_digit)
        && s.iter().any(u8::is_ascii_uppercase)
        && s.iter().any(u8::is_ascii_lowercase)
}

/// At the `s` of `sk-` (OpenAI, Anthropic).
pub(super) fn sk_dash(b: &[u8], s: usize) -> Option<Step> {
    let rest = &b[s..];
    if !rest.starts_with(b"sk-") {
        return None;
    }
    if rest.starts_with(b"sk-ant-") {
        // `sk-ant-api03-...`, `sk-ant-admin01-...`.
        let kind_end = run_max(b, s + 7, 12, |c| c.is_ascii_alphanumeric());
        if at(b, kind_end) != b'-' {
            return None;
        }
        let end = run_max(b, kind_end + 1, 200, is_b64url);
        let n = end - kind_end - 1;
        return ((80..=120).contains(&n) && ends(b, end)).then(|| key(s, end))?;
    }
    for p in [&b"sk-proj-"[..], b"sk-svcacct-", b"sk-admin-", b"sk-None-"] {
        if rest.starts_with(p) {
            let body = s + p.len();
            let end = run_max(b, body, 400, is_b64url);
            return (end - body >= 40 && ends(b, end) && mixed(&b[body..end]))
                .then(|| key(s, end))?;
        }
    }
    let body = s + 3;
    let end = run_max(b, body, 80, |c| c.is_ascii_alphanumeric());
    ((32..=64).contains(&(end - body)) && ends(b, end) && mixed(&b[body..end]))
        .then(|| key(s, end))?
}

/// At the first letter of a lowercase word followed by `_` (Stripe, npm, Hugging Face).
pub(super) fn underscore_prefixed(b: &[u8], s: usize) -> Option<Step> {
    let rest = &b[s..];
    let (body, lo, hi) = if [
        &b"sk_live_"[..],
        b"rk_live_",
        b"pk_live_",
        b"sk_test_",
        b"rk_test_",
    ]
    .iter()
    .any(|p| rest.starts_with(p))
    {
        (s + 8, 20, 247)
    } else if rest.starts_with(b"npm_") {
        (s + 4, 36, 36)
    } else if rest.starts_with(b"hf_") {
        (s + 3, 30, 40)
    } else {
        return None;
    };
    let end = run_max(b, body, hi + 1, |c| c.is_ascii_alphanumeric());
    let n = end - body;
    let body_ok = (lo..=hi).contains(&n)
        && ends(b, end)
        && b[body..end].iter().any(u8::is_ascii_uppercase)
        && b[body..end].iter().any(u8::is_ascii_lowercase);
    body_ok.then(|| key(s, end))?
}

/// At the `g` of `glpat-`.
pub(super) fn gitlab(b: &[u8], s: usize) -> Option<Step> {
    if !b[s..].starts_with(b"glpat-") {
        return None;
    }
    let mut end = run_max(b, s + 6, 300, |c| is_b64url(c) || c == b'.');
    // A full stop after the token ends the sentence.
    while end > s + 6 && b[end - 1] == b'.' {
        end -= 1;
    }
    let n = end - s - 6;
    (n >= 20 && ends(b, end)).then(|| key(s, end))?
}

/// At an uppercase letter starting a word (Google, Twilio, SendGrid).
pub(super) fn upper(b: &[u8], s: usize) -> Option<Step> {
    let rest = &b[s..];
    if rest.starts_with(b"AIza") {
        let end = run_max(b, s + 4, 36, is_b64url);
        return (end - s == 39 && ends(b, end)).then(|| key(s, end))?;
    }
    if rest.starts_with(b"SK") {
        let end = run_max(b, s + 2, 33, |c| c.is_ascii_hexdigit());
        let body = &b[s + 2..end];
        return (body.len() == 32 && ends(b, end) && body.iter().any(u8::is_ascii_digit))
            .then(|| key(s, end))?;
    }
    if rest.starts_with(b"SG.") {
        let e1 = run_max(b, s + 3, 23, is_b64url);
        if e1 - s - 3 != 22 || at(b, e1) != b'.' {
            return None;
        }
        let e2 = run_max(b, e1 + 1, 44, is_b64url);
        return (e2 - e1 - 1 == 43 && ends(b, e2)).then(|| key(s, e2))?;
    }
    None
}
