//! Signed tool-call ids. Chat APIs are stateless: every turn the client resends the model's
//! earlier tool calls, and nothing in a call says the model made it. So every call the daemon
//! relays to a client leaves with its id replaced by a signed one, and the ids that come back are
//! checked (and the model's own ids restored before the history goes to the backend, which
//! never sees a signed id).
//!
//! A signed id is `ry2_<key id>_<unix seconds>_<mac>_<n>_<tool name>_<the model's id>` (`n` the
//! name's length; the name is left empty when it is not letters, digits, `_` and `-`): only
//! those characters besides the model's own id, so it fits every door's id rules. The mac is two
//! truncated HMAC-SHA256s under the key: one over the key id, time, tenant, the model's id and
//! the name the id carries (which call, for whom: 64 bits), one over those and the tool name and
//! a digest of the arguments (what was called: 96 bits). The first failing tells a forged id (or
//! one signed for another tenant) from an altered call. The name rides in the id so that a result
//! answering a turn the daemon cannot see (a Responses continuation, `previous_response_id`) is
//! still linked to a call it signed, and known as that tool's. Ids signed as `ry1_...`, before
//! names were carried, still verify. Arguments are digested in canonical JSON (keys sorted,
//! no whitespace) when they parse, so a client that re-serialises them is not "altering" them.

use crate::config::{ProvenanceConfig, SigningKey};
use crate::model::{
    carriable_name, Payload, Provenance, SignedId, ToolCall, SIGNED_ID_PREFIX as PREFIX,
};
use crate::util::hex;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Hex digits of the identity mac and of the content mac.
const IDENTITY_HEX: usize = 16;
const CONTENT_HEX: usize = 24;
/// A signature this far in the future (clock skew between replicas) is still accepted.
const FUTURE_SKEW_S: u64 = 300;

fn mac(key: &SigningKey, parts: &[&str], hex_len: usize) -> String {
    // The keyed state (the key's inner and outer pads) is computed once per key and cloned.
    let mut m = keyed(key);
    for p in parts {
        // Length-prefixed, so no two part lists hash alike.
        m.update(&(p.len() as u64).to_be_bytes());
        m.update(p.as_bytes());
    }
    hex(&m.finalize().into_bytes()[..hex_len / 2])
}

/// The HMAC state keyed with `key`, from a small per-thread cache (keys rotate rarely).
fn keyed(key: &SigningKey) -> Hmac<Sha256> {
    thread_local! {
        static KEYED: std::cell::RefCell<Vec<(Vec<u8>, Hmac<Sha256>)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    KEYED.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some((_, m)) = cache.iter().find(|(s, _)| *s == key.secret) {
            return m.clone();
        }
        let m = <Hmac<Sha256> as Mac>::new_from_slice(&key.secret).expect("any key length");
        if cache.len() >= 8 {
            cache.remove(0);
        }
        cache.push((key.secret.clone(), m.clone()));
        m
    })
}

/// The identity mac: which call, for whom (and, in an id that carries it, to which tool).
fn identity(key: &SigningKey, ts: &str, tenant: &str, id: &str, name: Option<&str>) -> String {
    match name {
        Some(name) => mac(
            key,
            &["ry2-id", &key.id, ts, tenant, id, name],
            IDENTITY_HEX,
        ),
        None => mac(key, &["ry1-id", &key.id, ts, tenant, id], IDENTITY_HEX),
    }
}

/// The content mac: what was called. A call the provider runs is signed for its tool alone: it
/// ran before any client could act on it, and a streamed one leaves before its input is whole.
fn content(key: &SigningKey, ts: &str, tenant: &str, call: &ToolCall, id: &str) -> String {
    let arguments = if call.is_hosted() {
        ""
    } else {
        &call.arguments
    };
    let digest = arguments_digest(arguments);
    mac(
        key,
        &["ry1-call", &key.id, ts, tenant, id, &call.name, &digest],
        CONTENT_HEX,
    )
}

/// SHA-256 of the arguments: of their canonical JSON when they parse, else of the text.
fn arguments_digest(arguments: &str) -> String {
    let mut h = Sha256::new();
    match serde_json::from_str::<Value>(arguments) {
        Ok(v) => {
            h.update(b"json:");
            let mut w = Hasher(&mut h);
            write_canonical(&v, &mut w);
        }
        Err(_) => {
            h.update(b"text:");
            h.update(arguments.as_bytes());
        }
    }
    hex(&h.finalize())
}

/// Writes straight into the digest (no canonical text is built).
struct Hasher<'a>(&'a mut Sha256);

impl std::io::Write for Hasher<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn write_canonical(v: &Value, out: &mut Hasher<'_>) {
    use std::io::Write as _;
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let _ = out.write_all(b"{");
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    let _ = out.write_all(b",");
                }
                let _ = serde_json::to_writer(&mut *out, k);
                let _ = out.write_all(b":");
                write_canonical(v, out);
            }
            let _ = out.write_all(b"}");
        }
        Value::Array(items) => {
            let _ = out.write_all(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    let _ = out.write_all(b",");
                }
                write_canonical(item, out);
            }
            let _ = out.write_all(b"]");
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

/// Replace `call`'s id by one signed with the first key, for `tenant`, at `ts`. The id carries
/// the tool's name when it can (see [`carriable_name`]), so a result answering a turn the
/// daemon cannot see (a Responses continuation) is still known as that tool's.
pub fn sign(keys: &[SigningKey], tenant: &str, call: &mut ToolCall, ts: u64) {
    let Some(key) = keys.first() else { return };
    let ts = ts.to_string();
    let id = std::mem::take(&mut call.id);
    let name = carried(&call.name);
    let m1 = identity(key, &ts, tenant, &id, Some(name));
    let m2 = content(key, &ts, tenant, call, &id);
    let mut digits = itoa::Buffer::new();
    let len = digits.format(name.len());
    let mut signed = String::with_capacity(
        PREFIX.len()
            + key.id.len()
            + ts.len()
            + m1.len()
            + m2.len()
            + len.len()
            + name.len()
            + id.len()
            + 5,
    );
    for part in [
        PREFIX, &key.id, "_", &ts, "_", &m1, &m2, "_", len, "_", name, "_", &id,
    ] {
        signed.push_str(part);
    }
    call.id = signed;
}

/// The name an id signed for a call to `name` carries.
fn carried(name: &str) -> &str {
    if carriable_name(name) {
        name
    } else {
        ""
    }
}

/// A signed id, taken apart, its macs split.
struct Signed<'a> {
    id: SignedId<'a>,
    identity: &'a str,
    content: &'a str,
}

fn parse(id: &str) -> Option<Signed<'_>> {
    let id = SignedId::parse(id)?;
    (id.macs.len() == IDENTITY_HEX + CONTENT_HEX).then(|| Signed {
        identity: &id.macs[..IDENTITY_HEX],
        content: &id.macs[IDENTITY_HEX..],
        id,
    })
}

/// The model's id inside `id`, when `id` is shaped like a signed id.
pub fn original(id: &str) -> Option<&str> {
    parse(id).map(|s| s.id.original)
}

fn eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && constant_eq(a.as_bytes(), b.as_bytes())
}

/// Whether `id` was signed by a key held, for `tenant`: the key, or why not.
fn identify<'k>(
    config: &'k ProvenanceConfig,
    tenants: &[&str],
    tenant: &str,
    s: &Signed<'_>,
) -> Result<&'k SigningKey, Provenance> {
    let Some(key) = config.keys.iter().find(|k| k.id == s.id.kid) else {
        return Err(Provenance::Forged);
    };
    let mac = |t: &str| identity(key, s.id.ts, t, s.id.original, s.id.name);
    if eq(&mac(tenant), s.identity) {
        return Ok(key);
    }
    let elsewhere = tenants
        .iter()
        .filter(|t| **t != tenant)
        .any(|t| eq(&mac(t), s.identity));
    Err(if elsewhere {
        Provenance::OtherTenant
    } else {
        Provenance::Forged
    })
}

/// Whether a signature made at `ts` still holds at `now`.
fn in_time(config: &ProvenanceConfig, ts: &str, now: u64) -> Provenance {
    let ts: u64 = ts.parse().unwrap_or(u64::MAX);
    if ts > now.saturating_add(FUTURE_SKEW_S) {
        return Provenance::Forged;
    }
    if now.saturating_sub(ts) > config.max_age.as_secs() {
        return Provenance::Expired;
    }
    Provenance::Valid
}

/// Not a well-formed signed id: made up if it starts as one, else simply the model's own.
fn unparsed(id: &str) -> Provenance {
    if SignedId::looks_signed(id) {
        Provenance::Forged
    } else {
        Provenance::Unsigned
    }
}

/// Check one call's id for `tenant` (`tenants`: every tenant the config knows, to tell a replay
/// from elsewhere from a forgery).
pub fn verify(
    config: &ProvenanceConfig,
    tenants: &[&str],
    tenant: &str,
    call: &ToolCall,
    now: u64,
) -> Provenance {
    let Some(s) = parse(&call.id) else {
        return unparsed(&call.id);
    };
    let key = match identify(config, tenants, tenant, &s) {
        Ok(key) => key,
        Err(p) => return p,
    };
    let renamed = s.id.name.is_some_and(|n| n != carried(&call.name));
    if renamed
        || !eq(
            &content(key, s.id.ts, tenant, call, s.id.original),
            s.content,
        )
    {
        return Provenance::Altered;
    }
    in_time(config, s.id.ts, now)
}

/// Check the id of a call the request does not show (its result answers a turn the backend
/// keeps): who it was signed for and when, and the tool it names when it carries one.
pub fn verify_unseen<'i>(
    config: &ProvenanceConfig,
    tenants: &[&str],
    tenant: &str,
    id: &'i str,
    now: u64,
) -> (Provenance, Option<&'i str>) {
    let Some(s) = parse(id) else {
        return (unparsed(id), None);
    };
    if let Err(p) = identify(config, tenants, tenant, &s) {
        return (p, None);
    }
    let name = s.id.name.filter(|n| !n.is_empty());
    (in_time(config, s.id.ts, now), name)
}

fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One call of the history that is not validly signed.
#[derive(Debug, Clone)]
pub struct Unproven {
    /// The message's index.
    pub message: usize,
    /// The call's index in it.
    pub call: usize,
    /// The tool it names.
    pub tool: String,
    /// Why it is not valid.
    pub provenance: Provenance,
}

/// Check every call of the history the caller sent: mark each with its provenance and give the
/// model's ids back to signed calls and the results answering them. Returns whether an id was
/// restored (the upstream body must be rewritten), and the calls not validly signed.
pub fn check_history(
    config: &ProvenanceConfig,
    tenants: &[&str],
    tenant: &str,
    payload: &mut Payload,
    now: u64,
) -> (bool, Vec<Unproven>) {
    let mut restored = false;
    let mut unproven = Vec::new();
    for (m, message) in payload.messages.iter_mut().enumerate() {
        for (c, call) in message.tool_calls.iter_mut().enumerate() {
            let p = if message.unseen {
                let (p, name) = verify_unseen(config, tenants, tenant, &call.id, now);
                if let Some(name) = name {
                    call.name = name.to_string();
                }
                p
            } else {
                verify(config, tenants, tenant, call, now)
            };
            call.provenance = Some(p);
            if p != Provenance::Valid {
                unproven.push(Unproven {
                    message: m,
                    call: c,
                    tool: call.name.clone(),
                    provenance: p,
                });
            }
            if let Some(original) = original(&call.id) {
                call.id = original.to_string();
                restored = true;
            }
        }
        if let Some(id) = message.tool_call_id.as_deref() {
            if let Some(original) = original(id) {
                message.tool_call_id = Some(original.to_string());
                restored = true;
            }
        }
    }
    (restored, unproven)
}

/// Sign every call of a reply the daemon relays (a provider's tool a stream signed as it
/// passed is signed already).
pub fn sign_reply(config: &ProvenanceConfig, tenant: &str, calls: &mut [ToolCall]) {
    let ts = crate::util::unix_secs();
    for call in calls
        .iter_mut()
        .filter(|c| !(c.is_hosted() && SignedId::looks_signed(&c.id)))
    {
        sign(&config.keys, tenant, call, ts);
    }
}

/// What signs a provider's tool as a stream passes it (`StreamCodec::sign_hosted`): its id,
/// for `tenant`, now.
pub fn hosted_signer(
    config: &ProvenanceConfig,
    tenant: &str,
) -> crate::codec::stream::HostedSigner {
    let (keys, tenant) = (config.keys.clone(), tenant.to_string());
    Box::new(move |id: &str, name: &str| {
        // A hosted call is signed for its tool alone (see `content`).
        let mut call = ToolCall::hosted(id.to_string(), name.to_string(), Default::default());
        sign(&keys, &tenant, &mut call, crate::util::unix_secs());
        call.id
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn key(id: &str, byte: u8) -> SigningKey {
        SigningKey {
            id: id.into(),
            secret: vec![byte; 32],
        }
    }

    fn config(keys: Vec<SigningKey>) -> ProvenanceConfig {
        ProvenanceConfig {
            keys: Arc::new(keys),
            keys_file: None,
            require: false,
            max_age: Duration::from_secs(3600),
        }
    }

    fn call() -> ToolCall {
        ToolCall::function(
            "call_abc".into(),
            "send_email".into(),
            r#"{"to": "bob@example.com", "body": "hi"}"#.into(),
        )
    }

    const TENANTS: [&str; 3] = ["default", "support", "payments"];

    fn signed(keys: &[SigningKey], tenant: &str, ts: u64) -> ToolCall {
        let mut c = call();
        sign(keys, tenant, &mut c, ts);
        c
    }

    #[test]
    fn a_signed_call_verifies_and_gives_the_model_id_back() {
        let cfg = config(vec![key("k1", 1)]);
        let c = signed(&cfg.keys, "support", 1000);
        assert!(
            c.id.starts_with("ry2_k1_1000_") && c.id.ends_with("_10_send_email_call_abc"),
            "{}",
            c.id
        );
        assert!(c
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &c, 1010),
            Provenance::Valid
        );
        assert_eq!(original(&c.id), Some("call_abc"));
    }

    #[test]
    fn each_kind_of_tampering_is_told_apart() {
        let cfg = config(vec![key("k1", 1)]);
        let c = signed(&cfg.keys, "support", 1000);
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &call(), 1010),
            Provenance::Unsigned
        );
        // Arguments edited, or another tool named, under the same id.
        let mut edited = c.clone();
        edited.arguments = r#"{"to": "eve@evil.test", "body": "hi"}"#.into();
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &edited, 1010),
            Provenance::Altered
        );
        let mut renamed = c.clone();
        renamed.name = "transfer_money".into();
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &renamed, 1010),
            Provenance::Altered
        );
        // Re-serialised arguments are the same arguments.
        let mut reserialised = c.clone();
        reserialised.arguments = r#"{"body":"hi","to":"bob@example.com"}"#.into();
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &reserialised, 1010),
            Provenance::Valid
        );
        // The mac changed, the model's id changed, a key nobody holds, a made-up shape.
        let mut forged = c.clone();
        forged.id = forged.id.replacen("_1000_", "_1000_0", 1);
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &forged, 1010),
            Provenance::Forged
        );
        let mut other_id = c.clone();
        other_id.id = c.id.replace("_call_abc", "_call_xyz");
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &other_id, 1010),
            Provenance::Forged
        );
        let foreign = signed(&[key("k9", 9)], "support", 1000);
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &foreign, 1010),
            Provenance::Forged
        );
        let imposter = signed(&[key("k1", 2)], "support", 1000);
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &imposter, 1010),
            Provenance::Forged
        );
        // Replayed by another tenant; too old; from the future.
        assert_eq!(
            verify(&cfg, &TENANTS, "payments", &c, 1010),
            Provenance::OtherTenant
        );
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &c, 1000 + 3601),
            Provenance::Expired
        );
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &c, 100),
            Provenance::Forged
        );
    }

    #[test]
    fn the_name_an_id_carries_is_its_own_and_known_without_the_call() {
        let cfg = config(vec![key("k1", 1)]);
        let c = signed(&cfg.keys, "support", 1000);
        assert_eq!(
            verify_unseen(&cfg, &TENANTS, "support", &c.id, 1010),
            (Provenance::Valid, Some("send_email"))
        );
        // The carried name swapped for another of the same length: no key signed that.
        let swapped = c.id.replace("_10_send_email_", "_10_read_files_");
        assert_eq!(
            verify_unseen(&cfg, &TENANTS, "support", &swapped, 1010),
            (Provenance::Forged, None)
        );
        assert_eq!(
            verify_unseen(&cfg, &TENANTS, "payments", &c.id, 1010).0,
            Provenance::OtherTenant
        );
        assert_eq!(
            verify_unseen(&cfg, &TENANTS, "support", &c.id, 1000 + 3601).0,
            Provenance::Expired
        );
        assert_eq!(
            verify_unseen(&cfg, &TENANTS, "support", "call_abc", 1010),
            (Provenance::Unsigned, None)
        );
        // A name an id cannot carry is left out, and the call still verifies.
        let mut slashed = call();
        slashed.name = "mail/send".into();
        sign(&cfg.keys, "support", &mut slashed, 1000);
        assert!(slashed.id.contains("_0__call_abc"), "{}", slashed.id);
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &slashed, 1010),
            Provenance::Valid
        );
        assert_eq!(
            verify_unseen(&cfg, &TENANTS, "support", &slashed.id, 1010),
            (Provenance::Valid, None)
        );
    }

    #[test]
    fn an_id_signed_before_names_were_carried_still_verifies() {
        let cfg = config(vec![key("k1", 1)]);
        let k = &cfg.keys[0];
        let c = call();
        let m1 = identity(k, "1000", "support", "call_abc", None);
        let m2 = content(k, "1000", "support", &c, "call_abc");
        let mut legacy = c.clone();
        legacy.id = format!("ry1_k1_1000_{m1}{m2}_call_abc");
        assert_eq!(
            verify(&cfg, &TENANTS, "support", &legacy, 1010),
            Provenance::Valid
        );
        assert_eq!(original(&legacy.id), Some("call_abc"));
        assert_eq!(crate::model::model_id(&legacy.id), "call_abc");
        assert_eq!(
            verify_unseen(&cfg, &TENANTS, "support", &legacy.id, 1010),
            (Provenance::Valid, None)
        );
    }

    #[test]
    fn a_rotated_keyring_still_verifies_the_old_key_until_it_is_dropped() {
        let old = config(vec![key("k1", 1)]);
        let c = signed(&old.keys, "default", 1000);
        let rotated = config(vec![key("k2", 2), key("k1", 1)]);
        assert_eq!(
            verify(&rotated, &TENANTS, "default", &c, 1010),
            Provenance::Valid
        );
        let fresh = signed(&rotated.keys, "default", 1000);
        assert!(fresh.id.starts_with("ry2_k2_"));
        let dropped = config(vec![key("k2", 2)]);
        assert_eq!(
            verify(&dropped, &TENANTS, "default", &c, 1010),
            Provenance::Forged
        );
        assert_eq!(
            verify(&dropped, &TENANTS, "default", &fresh, 1010),
            Provenance::Valid
        );
    }

    #[test]
    fn the_history_gets_the_model_ids_back() {
        let cfg = config(vec![key("k1", 1)]);
        let c = signed(&cfg.keys, "default", crate::util::unix_secs());
        let signed_id = c.id.clone();
        let mut result =
            crate::model::Message::new("tool", Some(crate::model::Content::Text("sent".into())));
        result.tool_call_id = Some(signed_id);
        let mut payload = Payload {
            messages: vec![crate::model::Message::reply(None, vec![c, call()]), result],
            ..Payload::default()
        };
        let (restored, unproven) = check_history(
            &cfg,
            &TENANTS,
            "default",
            &mut payload,
            crate::util::unix_secs(),
        );
        assert!(restored);
        assert_eq!(payload.messages[0].tool_calls[0].id, "call_abc");
        assert_eq!(
            payload.messages[1].tool_call_id.as_deref(),
            Some("call_abc")
        );
        assert_eq!(
            payload.messages[0].tool_calls[0].provenance,
            Some(Provenance::Valid)
        );
        assert_eq!(unproven.len(), 1);
        assert_eq!(unproven[0].provenance, Provenance::Unsigned);
        assert_eq!((unproven[0].message, unproven[0].call), (0, 1));
    }
}
