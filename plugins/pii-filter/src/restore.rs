//! Reversible redaction's other half: on the reply rails, a placeholder the host's vault made
//! (`[EMAIL_7KQ2M9XA]`, see `redact::with_vault`) is written back as its value where the client
//! gets it. In the reply's text always; in a tool call's argument only where the call's
//! `arguments` policy allows the value's type (`send_email.to = { EMAIL = "allow" }`), so a value
//! goes back only where the operator said it may be executed. A placeholder the vault does not
//! know (another request's, or one the model made up) stays as it is.

use crate::config::{Action, CallPolicy, Policy};
use crate::json;
use crate::types::PiiType;

/// Letters after the kind in a vault's placeholder.
const ID_LEN: usize = 8;

/// The placeholders in `text`, as (start, end, type).
fn placeholders(text: &str) -> Vec<(usize, usize, PiiType)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    for (at, _) in text.match_indices('[') {
        let Some(len) = b[at..].iter().take(48).position(|&c| c == b']') else {
            continue;
        };
        let inner = &text[at + 1..at + len];
        let Some((kind, id)) = inner.rsplit_once('_') else {
            continue;
        };
        let id_ok = id.len() == ID_LEN
            && id
                .bytes()
                .all(|c| c.is_ascii_uppercase() || (b'2'..=b'9').contains(&c));
        let Some(t) = PiiType::ALL.into_iter().find(|t| t.name() == kind) else {
            continue;
        };
        if id_ok {
            out.push((at, at + len + 1, t));
        }
    }
    out
}

/// `text` with the placeholders `may` lets back written as the values `reveal` gives; `None`
/// when none was.
pub fn text(
    text: &str,
    reveal: &mut dyn FnMut(&str) -> Option<String>,
    may: &dyn Fn(PiiType) -> bool,
) -> Option<String> {
    let found = placeholders(text);
    let mut out = String::new();
    let mut copied = 0;
    for (start, end, t) in found {
        if start < copied || !may(t) {
            continue;
        }
        let Some(value) = reveal(&text[start..end]) else {
            continue;
        };
        out.push_str(&text[copied..start]);
        out.push_str(&value);
        copied = end;
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// Content parts (JSON: the reply's text blocks) with every placeholder written back; `None`
/// when none was, or when they are not JSON.
pub fn parts(parts: &str, reveal: &mut dyn FnMut(&str) -> Option<String>) -> Option<String> {
    if !json::is_document(parts) {
        return text(parts, reveal, &|_| true);
    }
    strings(parts, reveal, &|_, _| true)
}

/// A tool call's arguments (JSON) with its placeholders written back where its policy allows
/// their types; `None` when none was.
pub fn arguments(
    arguments: &str,
    call: Option<&CallPolicy<'_>>,
    base: &Policy,
    reveal: &mut dyn FnMut(&str) -> Option<String>,
) -> Option<String> {
    if !json::is_document(arguments) {
        return None;
    }
    strings(arguments, reveal, &|member, t| {
        call.map_or(base, |c| c.of(member)).action(t) == Action::Allow
    })
}

/// The JSON document `json` with the placeholders in its strings written back where `may` (the
/// top-level member a string sits in, the value's type) lets them; `None` when none was.
fn strings(
    json: &str,
    reveal: &mut dyn FnMut(&str) -> Option<String>,
    may: &dyn Fn(Option<&str>, PiiType) -> bool,
) -> Option<String> {
    json::rewrite::<()>(json, |v, site| {
        if site.is_key || site.number {
            return Ok(None);
        }
        Ok(text(v, reveal, &|t| may(site.member, t)))
    })
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault() -> impl FnMut(&str) -> Option<String> {
        |p: &str| (p == "[EMAIL_7KQ2M9XA]").then(|| "bob@example.com".to_string())
    }

    #[test]
    fn known_placeholders_come_back_and_others_stay() {
        let t = "Write to [EMAIL_7KQ2M9XA], not [EMAIL_AAAAAAAA] or [EMAIL] or [NOTE_7KQ2M9XA].";
        assert_eq!(
            text(t, &mut vault(), &|_| true).unwrap(),
            "Write to bob@example.com, not [EMAIL_AAAAAAAA] or [EMAIL] or [NOTE_7KQ2M9XA]."
        );
        assert!(text(t, &mut vault(), &|t| t != PiiType::Email).is_none());
        assert!(text("[EMAIL_7KQ2M9X]", &mut vault(), &|_| true).is_none());
    }

    #[test]
    fn an_argument_gets_its_value_back_only_where_its_policy_allows_the_type() {
        let policy =
            Policy::from_json(r#"{"arguments": {"send_email.to": {"EMAIL": "allow"}}}"#).unwrap();
        let call = policy.for_call("send_email");
        let args = r#"{"to": "[EMAIL_7KQ2M9XA]", "body": "cc [EMAIL_7KQ2M9XA]"}"#;
        let back = arguments(args, call.as_ref(), &policy, &mut vault()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&back).unwrap();
        assert_eq!(v["to"], "bob@example.com");
        assert_eq!(v["body"], "cc [EMAIL_7KQ2M9XA]");
        // A tool with no such rule gets nothing back.
        let other = policy.for_call("web_fetch");
        assert!(arguments(args, other.as_ref(), &policy, &mut vault()).is_none());
    }
}
