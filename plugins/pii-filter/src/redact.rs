//! Applies the policy to content: finds values, stops at the first one whose type is blocked,
//! and otherwise replaces redacted values with their placeholders. Text that is a JSON document
//! (a structured tool result) and content parts are rewritten string by string so they stay
//! valid JSON, and detection runs on the decoded strings.

use crate::config::{Action, Policy};
use crate::detect;
use crate::json::{self, Site};
use crate::types::PiiType;

/// The host's vault, as an evaluation reaches it: a placeholder for a value, the value behind a
/// placeholder.
pub trait Vault {
    /// The placeholder of `value` of `kind`.
    fn conceal(&mut self, kind: PiiType, value: &str) -> Result<String, String>;
    /// The value behind `placeholder`, if this request's vault holds it.
    fn reveal(&mut self, placeholder: &str) -> Result<Option<String>, String>;
    /// [`Vault::conceal`] for each of `values` in turn: whether each gets the placeholder it
    /// had (the host's vault answers in one call).
    fn conceal_again(&mut self, values: &[Concealed]) -> Result<bool, String> {
        for c in values {
            if self.conceal(c.kind, &c.value)? != *c.placeholder {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

thread_local! {
    /// Where redacted values hide while a reversible evaluation runs ([`with_vault`]).
    static VAULT: std::cell::RefCell<Option<Box<dyn Vault>>> = const { std::cell::RefCell::new(None) };
    /// What the vault concealed while a scan for the memo ran ([`recording`]).
    static CONCEALED: std::cell::RefCell<Option<Vec<Concealed>>> = const { std::cell::RefCell::new(None) };
    /// The first error the vault gave in the running evaluation.
    static VAULT_ERROR: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

fn failed(e: String) {
    VAULT_ERROR.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            *slot = Some(e);
        }
    });
}

/// Run `evaluate` with `vault` making each redacted value's placeholder and giving values back
/// ([`reveal`]); its result, or the first error the vault gave (the evaluation then faults).
pub fn with_vault<R>(
    vault: impl Vault + 'static,
    evaluate: impl FnOnce() -> R,
) -> Result<R, String> {
    VAULT.with(|v| *v.borrow_mut() = Some(Box::new(vault)));
    let out = evaluate();
    VAULT.with(|v| v.borrow_mut().take());
    match VAULT_ERROR.with(|e| e.borrow_mut().take()) {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The value behind `placeholder` in the vault of the running [`with_vault`], if any.
pub fn reveal(placeholder: &str) -> Option<String> {
    VAULT.with(|v| match v.borrow_mut().as_mut()?.reveal(placeholder) {
        Ok(value) => value,
        Err(e) => {
            failed(e);
            None
        }
    })
}

/// What replaces `value` of `kind`: its own placeholder from the vault inside [`with_vault`], the
/// type's otherwise (and after the vault failed: the evaluation then faults).
fn placeholder(kind: PiiType, value: &str) -> std::borrow::Cow<'static, str> {
    let concealed = VAULT.with(|v| match v.borrow_mut().as_mut()?.conceal(kind, value) {
        Ok(p) => Some(p),
        Err(e) => {
            failed(e);
            None
        }
    });
    match concealed {
        Some(p) => {
            CONCEALED.with(|c| {
                if let Some(kept) = c.borrow_mut().as_mut() {
                    kept.push(Concealed {
                        kind,
                        value: value.into(),
                        placeholder: p.as_str().into(),
                    });
                }
            });
            p.into()
        }
        None => kind.placeholder().into(),
    }
}

/// A value the vault hid during a scan, and its placeholder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Concealed {
    pub(crate) kind: PiiType,
    pub(crate) value: Box<str>,
    pub(crate) placeholder: Box<str>,
}

impl Concealed {
    /// Bytes it keeps.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.value.len() + self.placeholder.len()
    }
}

/// `scan`'s result and the values the vault hid while it ran (none outside [`with_vault`]): what
/// a memo must give the vault again when it answers the same text for another request.
pub fn recording<R>(scan: impl FnOnce() -> R) -> (R, Vec<Concealed>) {
    let outer = CONCEALED.with(|c| c.borrow_mut().replace(Vec::new()));
    let out = scan();
    let kept = CONCEALED.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    (out, kept.unwrap_or_default())
}

/// Hide `concealed` in the running evaluation's vault again, as the scan that found them did:
/// whether each got the placeholder it had then (not after a new vault key, or when the vault
/// refused: the text is then scanned again).
pub fn replay(concealed: &[Concealed]) -> bool {
    if concealed.is_empty() {
        return true;
    }
    VAULT.with(|v| {
        let mut v = v.borrow_mut();
        let Some(vault) = v.as_mut() else {
            return false;
        };
        vault.conceal_again(concealed).unwrap_or(false)
    })
}

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

/// Redacts content that is not a plain string (JSON text). An array of content parts has every
/// string a model gets to see scanned: `text` and `refusal`, `image_url.url` (credentials, emails
/// in query strings), `file.filename`, and the strings of unknown part types; the part
/// structure (`type`, `detail`, `format`) and inline data (`file_data`, `data:` URLs, audio) are
/// left alone. Content given as a JSON object is a JSON document and scanned as one. Text that is
/// not valid JSON is treated as plain text.
pub fn parts(s: &str, policy: &Policy, counts: &mut Counts) -> Result<Option<String>, Blocked> {
    if !json::is_document(s) {
        return plain(s, None, policy, counts);
    }
    if s.trim_start().starts_with('{') {
        return text_at(s, None, policy, counts, 0);
    }
    json::rewrite(s, |v, site| {
        // The parts' own structure sits at depth 2 (a part) and 3 (its `image_url`, `file`,
        // `source`): deeper, a `type` or `detail` is a tool's data (an MCP error's `data`).
        let structural = site.depth <= 3;
        // A number can be a card or an SSN written as one (an MCP result's structured value);
        // a key that is no plain word can be a value too (an object keyed by email address).
        // Strings directly in the list are not valid parts but still reach the model, so they
        // are scanned too.
        if site.number {
            return number(v, site.key, policy, counts);
        }
        if site.is_key {
            return match word(v) || (structural && plain_key(v)) {
                true => Ok(None),
                false => text_at(v, None, policy, counts, 1),
            };
        }
        match site.key {
            Some("type" | "detail" | "format" | "mime_type") if structural && word(v) => Ok(None),
            // A file's id and inline data are skipped when they are what they claim: an id, and
            // base64 (or a base64 `data:` URL) of bytes that are not text.
            Some("file_id") if structural && id_shaped(v) => Ok(None),
            Some("file_data") if structural && opaque_data(v) => Ok(None),
            // Inline data is base64 (an image, a PDF), but a text document's `data` is its text
            // (Anthropic's `{"type": "text", "data": "..."}` source): only base64 is skipped.
            Some("data") if looks_base64(v) => Ok(None),
            // Inline data is skipped only as base64 (an image): a plain `data:` URL is text.
            Some("url") if base64_data_url(v) => Ok(None),
            Some("text" | "refusal") => text_at(v, None, policy, counts, 1),
            key => text_at(v, key, policy, counts, 1),
        }
    })
}

/// Whether `s` is a word of a part's structure (`input_text`, `high`, `image/png`): letters and
/// a few separators, no digits, spaces or `@`. Anything else under those keys is scanned.
fn word(s: &str) -> bool {
    s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphabetic() || matches!(b, b'_' | b'-' | b'.' | b'/' | b'+'))
}

/// Whether `s` is a `data:` URL whose payload is base64 of bytes that are not text (an image);
/// text in base64 is scanned like any other.
fn base64_data_url(s: &str) -> bool {
    s.strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
        .is_some_and(|(meta, data)| {
            meta.ends_with(";base64")
                && crate::detect::decode::base64_text(data.trim_end_matches('=').as_bytes())
                    .is_none()
        })
}

/// Whether `s` is shaped like an id: ASCII letters, digits and `_-.:`, at most 256.
fn id_shaped(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// Whether `s` is inline data no reader takes as text: a base64 `data:` URL of bytes that are
/// not text, or base64 that is not text.
fn opaque_data(s: &str) -> bool {
    if s.starts_with("data:") {
        return base64_data_url(s);
    }
    looks_base64(s)
        && crate::detect::decode::base64_text(s.trim_end_matches('=').as_bytes()).is_none()
}

/// Whether a key is a plain name of a part's structure (`image_url`, `file_id`): ASCII letters,
/// digits and `_`, at most 32 of them.
fn plain_key(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether `s` looks like base64 data rather than text: long, and nothing but base64's
/// alphabet (text has spaces and punctuation; a short value is scanned whatever it is).
fn looks_base64(s: &str) -> bool {
    s.len() >= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'))
}

/// Redacts tool-call arguments (JSON text). Arguments that are not a JSON object or array can't
/// be rewritten and stay valid JSON, so a value found in them blocks (`Err`) unless its type is
/// allowed.
pub fn arguments(s: &str, policy: &Policy, counts: &mut Counts) -> Result<Option<String>, Blocked> {
    arguments_with(s, &|_| policy, counts)
}

/// [`arguments`] of a call whose arguments have policies of their own: `policy_of` gives the
/// policy for a top-level argument (`None`: for anything outside one).
pub fn arguments_with<'p>(
    s: &str,
    policy_of: &dyn Fn(Option<&str>) -> &'p Policy,
    counts: &mut Counts,
) -> Result<Option<String>, Blocked> {
    if json::is_document(s) {
        return document(s, policy_of, counts, 0);
    }
    match find_unallowed(s, policy_of(None)) {
        Some(t) => Err(Blocked(t)),
        None => Ok(None),
    }
}

/// The first value in `s` whose type is not allowed: for fields that can't be edited (a message
/// `name`, a tool description), finding one means blocking.
pub fn find_unallowed(s: &str, policy: &Policy) -> Option<PiiType> {
    detect::scan_with(s, None, &policy.context)
        .into_iter()
        .find_map(|f| match policy.action(f.kind) {
            // A base64 token is found as its first value's type: look at the others too.
            Action::Allow => {
                let token = s[f.start..f.end].trim_end_matches('=');
                detect::decode::base64_text(token.as_bytes())
                    .and_then(|text| find_unallowed(&text, policy))
            }
            _ => Some(f.kind),
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
        document(s, &|_| policy, counts, nesting)
    } else {
        plain(s, hint, policy, counts)
    }
}

/// Redacts the strings and numbers of the JSON document `s`, each under the policy `policy_of`
/// gives for the top-level member it sits in.
fn document<'p>(
    s: &str,
    policy_of: &dyn Fn(Option<&str>) -> &'p Policy,
    counts: &mut Counts,
    nesting: u8,
) -> Result<Option<String>, Blocked> {
    json::rewrite(s, |v, site: Site| {
        let policy = policy_of(site.member);
        if site.number {
            number(v, site.key, policy, counts)
        } else {
            let hint = if site.is_key { None } else { site.key };
            text_at(v, hint, policy, counts, nesting + 1)
        }
    })
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
    let found = detect::scan_with(v, key, &policy.context);
    match found.as_slice() {
        [f] if f.start == 0 && f.end == v.len() => match policy.action(f.kind) {
            Action::Block => Err(Blocked(f.kind)),
            Action::Allow => Ok(None),
            Action::Redact => {
                counts[f.kind.index()] += 1;
                Ok(Some(placeholder(f.kind, v).into_owned()))
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
    let mut found = detect::scan_with(s, hint, &policy.context);
    if let Some(entities) = &policy.entities {
        crate::entities::merge(&mut found, crate::entities::find(s, entities));
    }
    if found.is_empty() {
        return Ok(None);
    }
    // An address the policy allows (a recipient in `send_email.to`) is no way through for what
    // its local part holds: `4111111111111111@example.com` is a card as much as an address.
    for f in &mut found {
        if f.kind != PiiType::Email || policy.action(f.kind) != Action::Allow {
            continue;
        }
        let local = s[f.start..f.end].split('@').next().unwrap_or("");
        if let Some(t) = find_unallowed(local, policy) {
            f.kind = t;
        }
    }
    if let Some(f) = found
        .iter()
        .find(|f| policy.action(f.kind) == Action::Block)
    {
        return Err(Blocked(f.kind));
    }
    let mut out = String::new();
    let mut copied = 0;
    for f in &found {
        // A base64 token holding values is given back encoded, its values redacted inside
        // under the whole policy: the kind it was found as is only its first value's.
        let span = &s[f.start..f.end];
        let encoded = detect::decode::reencoded(span, |t| plain(t, None, policy, counts))?;
        if encoded.is_none() && policy.action(f.kind) != Action::Redact {
            continue;
        }
        if out.is_empty() {
            out.reserve(s.len());
        }
        out.push_str(&s[copied..f.start]);
        match encoded {
            Some(encoded) => out.push_str(&encoded),
            None => {
                out.push_str(&placeholder(f.kind, span));
                counts[f.kind.index()] += 1;
            }
        }
        copied = f.end;
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
    fn base64_documents_keep_all_but_their_values() {
        // base64 of "name: Jo\nmail: jo@example.com\nplan: gold\n"
        let doc = "bmFtZTogSm8KbWFpbDogam9AZXhhbXBsZS5jb20KcGxhbjogZ29sZAo=";
        let out = redact(&format!("file {doc} end"));
        let token = out.trim_start_matches("file ").trim_end_matches(" end");
        let decoded = crate::validate::base64url_decode(token.trim_end_matches('=').as_bytes())
            .map(|b| String::from_utf8(b).unwrap())
            .unwrap();
        assert_eq!(decoded, "name: Jo\nmail: [EMAIL]\nplan: gold\n");
        // A type the policy blocks blocks from inside the token too.
        let block = Policy::from_json(r#"{"types": {"EMAIL": "block"}}"#).unwrap();
        let mut c = [0; PiiType::COUNT];
        assert!(text(doc, &block, &mut c).is_err());
        // The token is found as its first value's type; a later value of another type is
        // redacted though the first type is allowed. base64 of "jo@example.com SSN 536-22-1234":
        let two = "am9AZXhhbXBsZS5jb20gU1NOIDUzNi0yMi0xMjM0";
        let allow = Policy::from_json(r#"{"types": {"EMAIL": "allow"}}"#).unwrap();
        let out = text(two, &allow, &mut c).unwrap().unwrap();
        let decoded = crate::validate::base64url_decode(out.as_bytes()).unwrap();
        assert_eq!(decoded, b"jo@example.com SSN [US_SSN]");
        // Where nothing can be edited, the token's later value blocks.
        assert_eq!(find_unallowed(two, &allow), Some(PiiType::UsSsn));
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
    fn parts_text_urls_and_filenames() {
        let src = r#"[{"type":"text","text":"hi a@b.com"},{"type":"image_url","image_url":{"url":"https://u:s3cr3t@x.org/i.png?to=a@b.com","detail":"low"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,AKIAIOSFODNN7EXAMPLE"}},{"type":"file","file":{"filename":"ssn 078-05-1120.pdf","file_data":"eyJhbGciOiJub25lIn0"}}]"#;
        let mut c = [0; PiiType::COUNT];
        let out = parts(src, &Policy::default(), &mut c).unwrap().unwrap();
        assert_eq!(
            out,
            r#"[{"type":"text","text":"hi [EMAIL]"},{"type":"image_url","image_url":{"url":"https://[URL_CREDENTIALS]@x.org/i.png?to=[EMAIL]","detail":"low"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,AKIAIOSFODNN7EXAMPLE"}},{"type":"file","file":{"filename":"ssn [US_SSN].pdf","file_data":"eyJhbGciOiJub25lIn0"}}]"#
        );
        assert_eq!(c[PiiType::Email.index()], 2);
    }

    #[test]
    fn bare_strings_in_a_list_are_scanned() {
        let mut c = [0; PiiType::COUNT];
        let out = parts(r#"["mail a@b.com"]"#, &Policy::default(), &mut c)
            .unwrap()
            .unwrap();
        assert_eq!(out, r#"["mail [EMAIL]"]"#);
    }

    #[test]
    fn object_content_is_a_document() {
        let src = r#"{"note": "mail a@b.com", "n": 1}"#;
        let mut c = [0; PiiType::COUNT];
        let out = parts(src, &Policy::default(), &mut c).unwrap().unwrap();
        assert_eq!(out, r#"{"note": "mail [EMAIL]", "n": 1}"#);
    }

    #[test]
    fn arguments_stay_json_or_block() {
        let mut c = [0; PiiType::COUNT];
        let p = Policy::default();
        let out = arguments(r#"{"to":"a@b.com","n":2}"#, &p, &mut c)
            .unwrap()
            .unwrap();
        assert_eq!(out, r#"{"to":"[EMAIL]","n":2}"#);
        assert_eq!(
            arguments(r#"{"to":"a@b.com""#, &p, &mut c),
            Err(Blocked(PiiType::Email))
        );
        assert_eq!(arguments(r#"{"to":"nobody""#, &p, &mut c), Ok(None));
    }

    #[test]
    fn structure_words_are_left_and_a_tools_fields_are_scanned() {
        // An MCP error's `data` rides in a `fields` part: its `detail` is the tool's text.
        let fields = r#"[{"type":"text","text":"failed"},{"type":"fields","fields":{"data":{"detail":"Ada, ada@example.com"},"type":"ada@example.com"}}]"#;
        let out = parts(fields, &Policy::default(), &mut [0; PiiType::COUNT])
            .unwrap()
            .unwrap();
        assert!(!out.contains("ada@"), "{out}");
        // A part's own structure is not: nor is a `detail` that holds data, at a part's depth.
        let image = r#"[{"type":"image_url","image_url":{"url":"https://x.example/a.png","detail":"high"}}]"#;
        assert_eq!(
            parts(image, &Policy::default(), &mut [0; PiiType::COUNT]).unwrap(),
            None
        );
        let odd = r#"[{"type":"input_text","detail":"call 415-555-0134"}]"#;
        let out = parts(odd, &Policy::default(), &mut [0; PiiType::COUNT])
            .unwrap()
            .unwrap();
        assert!(!out.contains("0134"), "{out}");
    }

    #[test]
    fn a_parts_numbers_and_keys_that_hold_values_are_redacted() {
        // An MCP result's structured value keyed by an email address, a card and an SSN as
        // numbers (a JSON number is what a client reads too).
        let structured = r#"[{"type":"structured","structured":{"ada@example.com":{"card":4111111111111111,"ssn":536221234,"count":3}}}]"#;
        let out = parts(structured, &Policy::default(), &mut [0; PiiType::COUNT])
            .unwrap()
            .unwrap();
        assert!(
            !out.contains("ada@") && !out.contains("4111111111111111"),
            "{out}"
        );
        assert!(out.contains(r#""count":3"#), "{out}");
        assert!(
            serde_json::from_str::<serde_json::Value>(&out).is_ok(),
            "{out}"
        );
        // A part's own keys are its structure.
        let plain =
            r#"[{"type":"input_image","image_url":"https://x.example/a.png","file_id":"f"}]"#;
        assert_eq!(
            parts(plain, &Policy::default(), &mut [0; PiiType::COUNT]).unwrap(),
            None
        );
    }

    #[test]
    fn an_allowed_address_does_not_carry_what_its_local_part_holds() {
        let p = Policy::from_json(r#"{"types":{"EMAIL":"allow"}}"#).unwrap();
        let mut c = [0; PiiType::COUNT];
        let out = plain("to 4111111111111111@example.com", None, &p, &mut c)
            .unwrap()
            .unwrap();
        assert!(!out.contains("4111111111111111"), "{out}");
        assert_eq!(plain("to bob@example.com", None, &p, &mut c).unwrap(), None);
    }

    #[test]
    fn a_plain_data_url_is_text() {
        let part = r#"[{"type":"image_url","image_url":{"url":"data:text/plain,write to bob@example.com"}}]"#;
        let out = parts(part, &Policy::default(), &mut [0; PiiType::COUNT])
            .unwrap()
            .unwrap();
        assert!(!out.contains("bob@"), "{out}");
    }

    #[test]
    fn a_text_documents_data_is_scanned_and_base64_is_not() {
        let doc = r#"[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"write to bob@example.com"}}]"#;
        let out = parts(doc, &Policy::default(), &mut [0; PiiType::COUNT])
            .unwrap()
            .unwrap();
        assert!(out.contains("[EMAIL]") && !out.contains("bob@"), "{out}");
        let image = format!(
            r#"[{{"type":"image","source":{{"type":"base64","data":"{}"}}}}]"#,
            "QUJD".repeat(40)
        );
        assert_eq!(
            parts(&image, &Policy::default(), &mut [0; PiiType::COUNT]).unwrap(),
            None
        );
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
