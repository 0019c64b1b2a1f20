//! Credentials. Each has a fixed shape (a vendor prefix, a base64url triple with a JSON header,
//! a PEM armour line, `scheme://user:password@host`) so they are matched by their prefix and
//! checked structurally rather than guessed by entropy.

use super::context::{at, is_word, run_max};
use super::{Finding, Step};
use crate::types::PiiType;
use crate::validate;

fn found(kind: PiiType, start: usize, end: usize) -> Step {
    Step::Found(Finding { start, end, kind }, end)
}

/// AWS access key ids: `AKIA` (long-term) or `ASIA` (temporary) and 16 uppercase alphanumerics.
pub(super) fn aws(b: &[u8], i: usize) -> Option<Step> {
    let s = b.get(i..i + 20)?;
    if !matches!(&s[..4], b"AKIA" | b"ASIA" | b"ABIA" | b"ACCA") {
        return None;
    }
    if !s[4..]
        .iter()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        || is_word(at(b, i + 20))
    {
        return None;
    }
    Some(found(PiiType::AwsKey, i, i + 20))
}

/// GitHub tokens: `ghp_`/`gho_`/`ghs_`/`ghu_`/`ghr_` and 36+ alphanumerics, or fine-grained
/// `github_pat_` tokens.
pub(super) fn github(b: &[u8], i: usize) -> Option<Step> {
    let rest = &b[i..];
    if rest.starts_with(b"github_pat_") {
        let end = run_max(b, i + 11, 256, |c| c.is_ascii_alphanumeric() || c == b'_');
        if end - (i + 11) >= 22 && !is_word(at(b, end)) {
            return Some(found(PiiType::GithubToken, i, end));
        }
        return None;
    }
    if rest.len() < 40
        || rest[0] != b'g'
        || rest[1] != b'h'
        || !matches!(rest[2], b'p' | b'o' | b's' | b'u' | b'r')
        || rest[3] != b'_'
    {
        return None;
    }
    let end = run_max(b, i + 4, 256, |c| c.is_ascii_alphanumeric());
    if (36..=251).contains(&(end - i - 4)) && !is_word(at(b, end)) {
        return Some(found(PiiType::GithubToken, i, end));
    }
    None
}

/// Slack tokens: `xoxb-` (bot), `xoxp-` (user), `xoxa-`, `xoxr-`, `xoxs-`, `xoxo-`, `xoxe-`,
/// `xoxe.xoxp-` (rotating) and `xapp-` (app-level).
pub(super) fn slack(b: &[u8], i: usize) -> Option<Step> {
    let rest = &b[i..];
    let prefix = if rest.starts_with(b"xoxe.xoxp-") {
        10
    } else if rest.starts_with(b"xapp-")
        || (rest.len() > 5
            && rest.starts_with(b"xox")
            && matches!(rest[3], b'b' | b'p' | b'a' | b'r' | b's' | b'o' | b'e')
            && rest[4] == b'-')
    {
        5
    } else {
        return None;
    };
    let mut end = run_max(b, i + prefix, 256, |c| {
        c.is_ascii_alphanumeric() || c == b'-'
    });
    while end > i + prefix && b[end - 1] == b'-' {
        end -= 1;
    }
    let body = &b[i + prefix..end];
    if body.len() >= 10 && body.iter().any(u8::is_ascii_digit) && !is_word(at(b, end)) {
        return Some(found(PiiType::SlackToken, i, end));
    }
    // Prefixes repeated inside this run (`xoxb-xoxb-...`) would fail the same way.
    Some(Step::Skip(end.max(i + 1)))
}

fn is_b64url(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_'
}

/// JSON Web Tokens: three base64url segments whose first decodes to a JSON object with `alg`.
pub(super) fn jwt(b: &[u8], i: usize) -> Option<Step> {
    if !b[i..].starts_with(b"eyJ") {
        return None;
    }
    let e1 = run_max(b, i, 4097, is_b64url);
    if at(b, e1) != b'.' {
        // Every `eyJ` inside this run would end at the same place: skip them all.
        return Some(Step::Skip(e1.max(i + 1)));
    }
    if !(10..=4096).contains(&(e1 - i)) {
        return None;
    }
    let e2 = run_max(b, e1 + 1, 16384, is_b64url);
    if at(b, e2) != b'.' || e2 - e1 - 1 < 2 {
        return None;
    }
    let e3 = run_max(b, e2 + 1, 4096, is_b64url);
    // A fourth segment would make this something else (JWE has five).
    if at(b, e3) == b'.' && is_b64url(at(b, e3 + 1)) || is_word(at(b, e3)) {
        return None;
    }
    let header = validate::base64url_decode(&b[i..e1])?;
    let value: serde_json::Value = serde_json::from_slice(&header).ok()?;
    value.as_object()?.get("alg")?.as_str()?;
    Some(found(PiiType::Jwt, i, e3))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = hay[from..].iter().position(|&c| c == needle[0]) {
        let at = from + p;
        if hay[at..].starts_with(needle) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The next occurrence of a needle at or after a position, remembered: the scanner only moves
/// forward, so each PEM marker is searched for once per text however many headers there are.
pub(super) struct NextMatch {
    needle: &'static [u8],
    /// `Some(result)` once searched (from a position at or before `result`).
    cached: Option<Option<usize>>,
}

impl NextMatch {
    pub(super) const fn new(needle: &'static [u8]) -> NextMatch {
        NextMatch {
            needle,
            cached: None,
        }
    }

    fn from(&mut self, b: &[u8], from: usize) -> Option<usize> {
        match self.cached {
            Some(None) => return None,
            Some(Some(p)) if p >= from => return Some(p),
            _ => {}
        }
        let r = find(&b[from..], self.needle).map(|p| from + p);
        self.cached = Some(r);
        r
    }
}

/// Markers of PEM blocks, for [`pem`].
pub(super) struct PemMarkers {
    pub(super) begin: NextMatch,
    pub(super) end: NextMatch,
}

const BEGIN: &[u8] = b"-----BEGIN ";

impl PemMarkers {
    pub(super) const fn new() -> PemMarkers {
        PemMarkers {
            begin: NextMatch::new(BEGIN),
            end: NextMatch::new(b"-----END "),
        }
    }
}

/// PEM private-key blocks, from `-----BEGIN ... PRIVATE KEY-----` to the matching END line; a
/// block cut off before its END line runs to the end of its base64 body.
pub(super) fn pem(b: &[u8], i: usize, markers: &mut PemMarkers) -> Step {
    if !b[i..].starts_with(BEGIN) {
        return Step::Skip(i + 1);
    }
    let skip = Step::Skip(i + BEGIN.len());
    let ls = i + BEGIN.len();
    let le = run_max(b, ls, 64, |c| {
        c.is_ascii_uppercase() || c.is_ascii_digit() || c == b' '
    });
    let label = &b[ls..le];
    if !b[le..].starts_with(b"-----")
        || !(label.ends_with(b"PRIVATE KEY") || label.ends_with(b"PRIVATE KEY BLOCK"))
    {
        return skip;
    }
    let body = le + 5;
    // The END line, unless another block begins first (then this one was cut off).
    let end_line = markers.end.from(b, body);
    let next_begin = markers.begin.from(b, body);
    if let Some(p) = end_line.filter(|&p| next_begin.is_none_or(|q| p < q)) {
        let after = p + 9;
        let tail = &b[after..b.len().min(after + 64)];
        if let Some(q) = find(tail, b"-----") {
            let end = after + q + 5;
            return found(PiiType::PrivateKey, i, end);
        }
    }
    // Truncated: take the lines that look like key body or PEM headers (`Proc-Type: ...`),
    // up to the first other line or a blank line that does not follow the headers.
    let mut end = body;
    let mut p = body;
    let mut after_header = false;
    while p < b.len() {
        let line_end = p + b[p..]
            .iter()
            .position(|&c| c == b'\n')
            .unwrap_or(b.len() - p);
        let line = b[p..line_end].trim_ascii();
        if line.is_empty() {
            if !after_header && end > body {
                break;
            }
        } else if [&b"Proc-Type:"[..], b"DEK-Info:", b"Comment:", b"Version:"]
            .iter()
            .any(|h| line.starts_with(h))
        {
            after_header = true;
            end = p + b[p..line_end].trim_ascii_end().len();
        } else if line
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='))
        {
            after_header = false;
            end = p + b[p..line_end].trim_ascii_end().len();
        } else {
            break;
        }
        p = line_end + 1;
    }
    found(PiiType::PrivateKey, i, end)
}

/// `scheme://user:password@host`: reports the `user:password` part, so the scheme and host stay
/// readable (`postgres://[URL_CREDENTIALS]@db.internal/app`).
pub(super) fn url_credentials(b: &[u8], i: usize) -> Step {
    let a = i + 3;
    let mut s = i;
    while s > 0 && (b[s - 1].is_ascii_alphanumeric() || matches!(b[s - 1], b'+' | b'.' | b'-')) {
        s -= 1;
    }
    if i - s < 2 || !b[s].is_ascii_alphabetic() {
        return Step::Skip(a);
    }
    let mut e = a;
    while e < b.len()
        && e - a < 512
        && !b[e].is_ascii_whitespace()
        && !matches!(b[e], b'/' | b'?' | b'#' | b'"' | b'\'' | b'<' | b'>' | b'`')
    {
        e += 1;
    }
    let Some(at_pos) = b[a..e].iter().rposition(|&c| c == b'@').map(|p| a + p) else {
        return Step::Skip(a);
    };
    let userinfo = &b[a..at_pos];
    // A real password, not a documentation placeholder (`user:password@`, `a:b@`, `:${PASS}@`).
    let has_password = userinfo.iter().position(|&c| c == b':').is_some_and(|c| {
        let pw = &b[a + c + 1..at_pos];
        let lower = pw.to_ascii_lowercase();
        pw.len() >= 3
            && !matches!(
                &lower[..],
                b"password" | b"pass" | b"passwd" | b"pwd" | b"secret"
            )
            && !pw.starts_with(b"${")
            && !pw.starts_with(b"$(")
            && !matches!(pw[0], b'<' | b'{')
            && !pw.iter().all(|&c| c == b'*')
            && !lower.windows(4).any(|w| w == b"xxxx")
    });
    if has_password && at_pos + 1 < e {
        return found(PiiType::UrlCredentials, a, at_pos);
    }
    if userinfo.contains(&b':') {
        // `user:password@host` with a placeholder: not an email address either.
        return Step::Skip(at_pos + 1);
    }
    // A user name alone (`https://ghp_...@github.com`): scan it as ordinary text.
    Step::Skip(a)
}

/// Slack incoming-webhook URLs (`https://hooks.slack.com/services/T.../B.../...`, also
/// `/workflows/` and `/triggers/`): the whole URL is the credential. `i` is at `://`.
pub(super) fn slack_webhook(b: &[u8], i: usize) -> Option<Step> {
    const HOST: &[u8] = b"hooks.slack.com/";
    let rest = &b[i + 3..];
    if !rest.starts_with(HOST) {
        return None;
    }
    let scheme = if i >= 5 && &b[i - 5..i] == b"https" {
        i - 5
    } else if i >= 4 && &b[i - 4..i] == b"http" {
        i - 4
    } else {
        return None;
    };
    let path = i + 3 + HOST.len();
    let kind_ok = [&b"services/"[..], b"workflows/", b"triggers/"]
        .iter()
        .any(|k| b[path..].starts_with(k));
    let end = run_max(b, path, 256, |c| {
        c.is_ascii_alphanumeric() || c == b'/' || c == b'_' || c == b'-'
    });
    let mut end = end;
    while end > path && b[end - 1] == b'/' {
        end -= 1;
    }
    (kind_ok && end - path >= 30).then(|| found(PiiType::SlackToken, scheme, end))
}
