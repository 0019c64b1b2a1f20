//! Applies the policy to content: finds values, stops at the first one whose type is blocked,
//! and otherwise replaces redacted values with their placeholders. Text that is a JSON document
//! (a structured tool result) and content parts are rewritten string by string so they stay
//! valid JSON, and detection runs on the decoded strings.

use crate::config::{Action, Policy};
use crate::detect;
use crate::json::{self, Site};
use crate::types::PiiType;

/// A value whose type the policy blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocked(pub PiiType);

/// How many values of each type were redacted.
pub type Counts = [u32; PiiType::COUNT];

/// Nested JSON-in-a-JSON-string is followed this deep.
const MAX_NESTING: u8 = 4;

/// Redacts a message's text content. Returns the new text, `None` if nothing changed.
pub fn text(s: &str, policy: &Policy, counts: &mut Counts) -> Result<Option<String>, Blocked> {
    text_at(s, None, policy, counts, 0)
}

/// Redacts content parts (JSON text of an array of parts): the `text` of each part (and the
/// `refusal` of refusal parts). Parts that are not valid JSON are treated as plain text.
pub fn parts(s: &str, policy: &Policy, counts: &mut Counts) -> Result<Option<String>, Blocked> {
    if !json::is_document(s) {
        return plain(s, None, policy, counts);
    }
    json::rewrite(s, |v, site| {
        let is_text = !site.is_key
            && !site.number
            && site.depth == 2
            && matches!(site.key, Some("text" | "refusal"));
        if is_text {
            text_at(v, None, policy, counts, 1)
        } else {
            Ok(None)
        }
    })
}

fn text_at(
    s: &str,
    hint: Option<&str>,
    policy: &Policy,
    counts: &mut Counts,
    nesting: u8,
) -> Result<Option<String>, Blocked> {
    if nesting < MAX_NESTING && json::is_document(s) {
        json::rewrite(s, |v, site: Site| {
            if site.number {
                number(v, site.key, policy, counts)
            } else {
                let hint = if site.is_key { None } else { site.key };
                text_at(v, hint, policy, counts, nesting + 1)
            }
        })
    } else {
        plain(s, hint, policy, counts)
    }
}

/// A JSON number that is a whole card number (or phone, SSN...) becomes a placeholder string.
fn number(
    v: &str,
    key: Option<&str>,
    policy: &Policy,
    counts: &mut Counts,
) -> Result<Option<String>, Blocked> {
    if v.len() < 9 {
        return Ok(None);
    }
    let found = detect::scan(v, key);
    match found.as_slice() {
        [f] if f.start == 0 && f.end == v.len() => match policy.action(f.kind) {
            Action::Block => Err(Blocked(f.kind)),
            Action::Allow => Ok(None),
            Action::Redact => {
                counts[f.kind.index()] += 1;
                Ok(Some(f.kind.placeholder().to_string()))
            }
        },
        _ => Ok(None),
    }
}

/// Redacts plain text.
pub fn plain(
    s: &str,
    hint: Option<&str>,
    policy: &Policy,
    counts: &mut Counts,
) -> Result<Option<String>, Blocked> {
    let found = detect::scan(s, hint);
    if found.is_empty() {
        return Ok(None);
    }
    if let Some(f) = found
        .iter()
        .find(|f| policy.action(f.kind) == Action::Block)
    {
        return Err(Blocked(f.kind));
    }
    let mut out = String::new();
    let mut copied = 0;
    for f in found
        .iter()
        .filter(|f| policy.action(f.kind) == Action::Redact)
    {
        if out.is_empty() {
            out.reserve(s.len());
        }
        out.push_str(&s[copied..f.start]);
        out.push_str(f.kind.placeholder());
        copied = f.end;
        counts[f.kind.index()] += 1;
    }
    if copied == 0 {
        return Ok(None);
    }
    out.push_str(&s[copied..]);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(s: &str) -> String {
        let mut c = [0; PiiType::COUNT];
        text(s, &Policy::default(), &mut c)
            .unwrap()
            .unwrap_or_else(|| s.to_string())
    }

    #[test]
    fn plain_text() {
        assert_eq!(
            redact("mail a@b.com or call +44 20 7946 0958."),
            "mail [EMAIL] or call [PHONE]."
        );
        assert_eq!(redact("nothing here"), "nothing here");
    }

    #[test]
    fn json_stays_valid_and_uses_keys_as_labels() {
        let src = r#"{"user": {"email": "a@b.com", "ssn": "123456789", "card": 4111111111111111, "order_id": "4111111111111111"}, "note": "x\u0040y.org"}"#;
        let out = redact(src);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["user"]["email"], "[EMAIL]");
        assert_eq!(v["user"]["ssn"], "[US_SSN]");
        assert_eq!(v["user"]["card"], "[CREDIT_CARD]");
        assert_eq!(v["user"]["order_id"], "4111111111111111");
        assert_eq!(v["note"], "[EMAIL]");
    }

    #[test]
    fn nested_json_string() {
        let src = r#"{"body": "{\"to\": \"a@b.com\"}"}"#;
        let out = redact(src);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let inner: serde_json::Value = serde_json::from_str(v["body"].as_str().unwrap()).unwrap();
        assert_eq!(inner["to"], "[EMAIL]");
    }

    #[test]
    fn parts_only_text() {
        let src = r#"[{"type":"text","text":"hi a@b.com"},{"type":"image_url","image_url":{"url":"https://x.org/a@b.com"}}]"#;
        let mut c = [0; PiiType::COUNT];
        let out = parts(src, &Policy::default(), &mut c).unwrap().unwrap();
        assert_eq!(
            out,
            r#"[{"type":"text","text":"hi [EMAIL]"},{"type":"image_url","image_url":{"url":"https://x.org/a@b.com"}}]"#
        );
        assert_eq!(c[PiiType::Email.index()], 1);
    }

    #[test]
    fn block_wins() {
        let p = Policy::from_json(r#"{"types":{"CREDIT_CARD":"block"}}"#).unwrap();
        let mut c = [0; PiiType::COUNT];
        assert_eq!(
            text("a@b.com 4111 1111 1111 1111", &p, &mut c),
            Err(Blocked(PiiType::CreditCard))
        );
    }

    #[test]
    fn allow_leaves_value() {
        let p = Policy::from_json(r#"{"types":{"IP_ADDRESS":"allow"}}"#).unwrap();
        let mut c = [0; PiiType::COUNT];
        assert_eq!(
            text("from 10.0.0.1 by a@b.com", &p, &mut c)
                .unwrap()
                .unwrap(),
            "from 10.0.0.1 by [EMAIL]"
        );
    }
}
