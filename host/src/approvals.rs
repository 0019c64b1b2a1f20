//! Approvals: a person's yes before a tool call goes through (contract 0.3's `approvals`, and
//! `/v1/admin/approvals/{id}`).
//!
//! A plugin granted approvals asks about a call of the reply it judges. The host binds the
//! question to what it knows itself (the tenant and principal, the plugin entry, the rule, the
//! call's tool, the SHA-256 of its arguments with object keys sorted, and the asking policy: the
//! entry's component and config), so a grant can serve nothing else. It files a request under a random id in the `[state]` store,
//! where every replica sees it, and keeps, under the binding, which request is the current one:
//! the client sending the same turn again (its model naming the call anew) finds it. An
//! approver grants or refuses it once; a grant is spent by the first ask that finds it, across
//! replicas (a counter that goes from 0 to 1 once). Everything lives `[approvals] ttl_s`.
//!
//! The store holds the call's arguments so the approver sees what they approve; nothing is
//! logged of them. Arguments longer than [`MAX_ARGUMENTS`] are kept cut, marked so, and such a
//! request can only be refused: nobody grants what they were not shown. One asker (a principal
//! of a tenant) has at most [`MAX_ASKED`] requests undecided at once, so no asker can push
//! another's out of the approvers' list.

use crate::state::{Store, Unavailable};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Most bytes of a call's arguments kept for the approver (a longer call cannot be granted).
pub const MAX_ARGUMENTS: usize = 64 << 10;
/// Most undecided requests one asker (a tenant's principal) has at once.
pub const MAX_ASKED: usize = 64;
/// Most bytes of a rule's name or a reason kept.
const MAX_TEXT: usize = 1024;

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nobody has decided.
    Pending,
    /// An approver said yes; no call has used it yet.
    Granted,
    /// An approver said no.
    Refused,
    /// Granted, and a call went through on it.
    Used,
}

/// One approval request, as the store keeps it and an approver sees it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// Its id (`apr_` and 24 hex digits).
    pub id: String,
    /// Where it stands.
    pub status: Status,
    /// The tenant whose call it is.
    pub tenant: String,
    /// The principal whose call it is.
    pub principal: Option<String>,
    /// The plugin entry that asked.
    pub plugin: String,
    /// The plugin's rule that would refuse the call.
    pub rule: String,
    /// Why, as the plugin says (never the values it judged).
    pub reason: String,
    /// The tool called.
    pub tool: String,
    /// The MCP server it was called on (`None`: a model door's call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The call's id as the client was to see it, when the request was made.
    pub call_id: String,
    /// SHA-256 of the arguments (JSON with object keys sorted; the text as given if not JSON).
    pub arguments_sha256: String,
    /// The arguments, for the approver (cut at [`MAX_ARGUMENTS`]).
    pub arguments: String,
    /// Whether `arguments` is cut (the call is longer than an approver is shown): such a
    /// request can only be refused.
    #[serde(default)]
    pub arguments_cut: bool,
    /// The arguments' length, in bytes.
    #[serde(default)]
    pub arguments_bytes: usize,
    /// The first 16 hex digits of the policy it is bound to (the entry's component and config:
    /// a change to either makes grants of before serve nothing).
    pub policy: String,
    /// Unix seconds.
    pub requested_at: u64,
    /// Unix seconds; after this it is gone.
    pub expires_at: u64,
    /// Who decided (the approver key's principal, or `admin`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// For a changed tool definition (`plugin` = `pins`): the change, as a unified diff of the
    /// pinned definition and the new one (`arguments`), for the approver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

impl Request {
    /// What the client is shown with the refusal: the request, without the arguments it sent.
    pub fn shown(&self) -> Value {
        serde_json::json!({
            "id": self.id,
            "status": self.status,
            "plugin": self.plugin,
            "rule": self.rule,
            "tool": self.tool,
            "server": self.server,
            "call_id": self.call_id,
            "arguments_sha256": self.arguments_sha256,
            "expires_at": self.expires_at,
            "approve": format!("/v1/admin/approvals/{}", self.id),
        })
    }
}

/// What asking gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Granted, and now spent.
    Granted(String),
    /// Undecided.
    Pending(String),
    /// Refused by an approver.
    Refused(String),
    /// Not filed: the asker has [`MAX_ASKED`] requests undecided.
    Full,
}

/// Who asks, about what.
pub struct Ask<'a> {
    /// The request's tenant.
    pub tenant: &'a str,
    /// Its principal.
    pub principal: Option<&'a str>,
    /// The plugin's rule.
    pub rule: &'a str,
    /// Why it would refuse.
    pub reason: &'a str,
    /// The call's id.
    pub call_id: &'a str,
    /// Its tool.
    pub tool: &'a str,
    /// The MCP server it is called on (`None`: a model door's call).
    pub server: Option<&'a str>,
    /// Its arguments as the model wrote them (for a tool definition: the definition).
    pub arguments: &'a str,
    /// What the approver is shown of a change, beside the arguments.
    pub diff: Option<&'a str>,
}

/// Where a plugin entry granted approvals (`approvals = true`) asks: its requests, bound to the
/// entry and the policy it runs.
#[derive(Clone)]
pub struct Asker {
    store: Arc<Store>,
    plugin: String,
    ttl: Duration,
    policy: String,
}

use crate::state::key;

/// Most undecided requests a tenant's list holds (more are still asked and decided by id).
pub const MAX_LISTED: usize = 1024;

/// SHA-256 of `arguments`: their JSON with object keys sorted (a model may order them anew),
/// numbers as written (a grant for `...617` is not spent by `...618`, however many digits), else
/// (not JSON, or an object that repeats a key, which parsers read differently) the text as given.
pub fn arguments_sha256(arguments: &str) -> String {
    match canonical(arguments) {
        Some(c) => crate::util::sha256_hex(format!("json:{c}").as_bytes()),
        None => crate::util::sha256_hex(format!("text:{arguments}").as_bytes()),
    }
}

/// `text` as JSON written again with object keys sorted, strings as serde_json writes them and
/// every number, `true`, `false` and `null` as written; `None` when it is not JSON or an object
/// repeats a key.
fn canonical(text: &str) -> Option<String> {
    // Valid, and no deeper than serde_json's limit, before it is walked here.
    serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
    let mut scan = Scan { text, at: 0 };
    let mut out = String::with_capacity(text.len());
    scan.value(&mut out)?;
    Some(out)
}

/// A walk over JSON already checked to be valid.
struct Scan<'a> {
    text: &'a str,
    at: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.at += 1;
        }
    }

    fn value(&mut self, out: &mut String) -> Option<()> {
        self.space();
        match self.peek()? {
            b'{' => {
                self.at += 1;
                let mut members = std::collections::BTreeMap::new();
                loop {
                    self.space();
                    match self.peek()? {
                        b'}' => {
                            self.at += 1;
                            break;
                        }
                        b',' => self.at += 1,
                        _ => {
                            let key = self.string()?;
                            self.space();
                            self.at += 1; // the colon
                            let mut value = String::new();
                            self.value(&mut value)?;
                            if members.insert(key, value).is_some() {
                                return None;
                            }
                        }
                    }
                }
                out.push('{');
                for (i, (k, v)) in members.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k).to_string());
                    out.push(':');
                    out.push_str(&v);
                }
                out.push('}');
            }
            b'[' => {
                self.at += 1;
                out.push('[');
                let mut first = true;
                loop {
                    self.space();
                    match self.peek()? {
                        b']' => {
                            self.at += 1;
                            break;
                        }
                        b',' => self.at += 1,
                        _ => {
                            if !first {
                                out.push(',');
                            }
                            first = false;
                            self.value(out)?;
                        }
                    }
                }
                out.push(']');
            }
            b'"' => {
                let s = self.string()?;
                out.push_str(&Value::String(s).to_string());
            }
            _ => {
                // A number or a literal: as written.
                let start = self.at;
                while self.peek().is_some_and(|b| {
                    !matches!(b, b',' | b']' | b'}' | b' ' | b'\n' | b'\r' | b'\t')
                }) {
                    self.at += 1;
                }
                out.push_str(self.text.get(start..self.at)?);
            }
        }
        Some(())
    }

    /// The string at the cursor, unescaped.
    fn string(&mut self) -> Option<String> {
        let start = self.at;
        self.at += 1;
        loop {
            match self.peek()? {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    break;
                }
                _ => self.at += 1,
            }
        }
        serde_json::from_str(self.text.get(start..self.at)?).ok()
    }
}

fn cut(text: &str, max: usize) -> String {
    crate::util::truncate(text, max).to_string()
}

impl Asker {
    /// Approvals in `store` for plugin entry `plugin`, each request living `ttl`, bound to
    /// `policy` (a digest of the entry's component and config).
    pub fn new(store: Arc<Store>, plugin: &str, ttl: Duration, policy: &str) -> Asker {
        Asker {
            store,
            plugin: plugin.to_string(),
            ttl,
            policy: policy.to_string(),
        }
    }

    /// Where `ask`'s call stands: granted (and spent now), pending (a request made now, or the
    /// current one), or refused; with the request.
    pub async fn ask(&self, ask: &Ask<'_>) -> Result<(Answer, Request), Unavailable> {
        let args = arguments_sha256(ask.arguments);
        let binding = crate::util::sha256_hex(
            [
                ask.tenant,
                ask.principal.unwrap_or(""),
                &self.plugin,
                ask.rule,
                ask.tool,
                // A call of one server's tool is not a call of another's of that name.
                ask.server.unwrap_or("\u{1}"),
                &args,
                &self.policy,
            ]
            .join("\0")
            .as_bytes(),
        );
        let for_key = key::approval_for(&binding);
        let store = &self.store;
        if let Some(id) = store.get(&for_key).await? {
            let id = String::from_utf8_lossy(&id).into_owned();
            if let Some(mut request) = get(store, &id).await? {
                match request.status {
                    Status::Pending => return Ok((Answer::Pending(id), request)),
                    Status::Refused => return Ok((Answer::Refused(id), request)),
                    Status::Granted => {
                        let left = remaining(&request);
                        let used = key::approval_used(&id);
                        if left > Duration::ZERO
                            && store
                                .add_within(ask.tenant, &used, 1, 1, left)
                                .await?
                                .is_some()
                        {
                            request.status = Status::Used;
                            put(store, &request).await?;
                            return Ok((Answer::Granted(id), request));
                        }
                        // Spent by another call (on another replica): a new request.
                    }
                    Status::Used => {}
                }
            }
        }
        let mut raw = [0u8; 12];
        crate::util::random_bytes(&mut raw)
            .map_err(|e| Unavailable(format!("no random id for an approval request: {e}")))?;
        let id: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let now = crate::util::unix_secs();
        let request = Request {
            id: format!("apr_{id}"),
            status: Status::Pending,
            tenant: ask.tenant.to_string(),
            principal: ask.principal.map(str::to_string),
            plugin: self.plugin.clone(),
            rule: cut(ask.rule, MAX_TEXT),
            reason: cut(ask.reason, MAX_TEXT),
            tool: cut(ask.tool, MAX_TEXT),
            server: ask.server.map(|s| cut(s, MAX_TEXT)),
            call_id: cut(ask.call_id, MAX_TEXT),
            arguments_sha256: args,
            arguments: cut(ask.arguments, MAX_ARGUMENTS),
            arguments_cut: ask.arguments.len() > MAX_ARGUMENTS,
            arguments_bytes: ask.arguments.len(),
            policy: self.policy.get(..16).unwrap_or(&self.policy).to_string(),
            requested_at: now,
            expires_at: now + self.ttl.as_secs(),
            decided_by: None,
            diff: ask.diff.map(|d| cut(d, MAX_ARGUMENTS)),
        };
        // The asker's own list first: one that has too many undecided files nothing more.
        let asked = key::approvals_asked(ask.tenant, ask.principal);
        let mut listed = store
            .add_member(ask.tenant, &asked, &request.id, MAX_ASKED, self.ttl)
            .await?;
        if !listed {
            // Full: requests decided or gone since leave it, and it is tried once more.
            for id in store.members(ask.tenant, &asked, self.ttl).await? {
                if !get(store, &id)
                    .await?
                    .is_some_and(|r| r.status == Status::Pending)
                {
                    store.remove_member(&asked, &id).await?;
                }
            }
            listed = store
                .add_member(ask.tenant, &asked, &request.id, MAX_ASKED, self.ttl)
                .await?;
        }
        if !listed {
            return Ok((Answer::Full, request));
        }
        put(store, &request).await?;
        store
            .put(
                ask.tenant,
                &for_key,
                Bytes::from(request.id.clone()),
                self.ttl,
            )
            .await?;
        store
            .add_member(
                ask.tenant,
                &key::approvals_pending(ask.tenant),
                &request.id,
                MAX_LISTED,
                self.ttl,
            )
            .await?;
        Ok((Answer::Pending(request.id.clone()), request))
    }
}

/// Time `request` has left (zero once expired).
fn remaining(request: &Request) -> Duration {
    Duration::from_secs(request.expires_at.saturating_sub(crate::util::unix_secs()))
}

async fn put(store: &Store, request: &Request) -> Result<(), Unavailable> {
    let left = remaining(request).max(Duration::from_secs(1));
    let text = serde_json::to_vec(request).unwrap_or_default();
    store
        .put(
            &request.tenant,
            &key::approval(&request.id),
            Bytes::from(text),
            left,
        )
        .await
}

/// Whether `id` looks like a request's id (what the endpoint takes before reaching the store).
pub fn valid_id(id: &str) -> bool {
    id.len() == 28
        && id.starts_with("apr_")
        && id[4..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The request `id`, if it is there and in time.
pub async fn get(store: &Store, id: &str) -> Result<Option<Request>, Unavailable> {
    let Some(bytes) = store.get(&key::approval(id)).await? else {
        return Ok(None);
    };
    Ok(serde_json::from_slice::<Request>(&bytes)
        .ok()
        .filter(|r| r.expires_at > crate::util::unix_secs()))
}

/// What deciding gave.
#[derive(Debug)]
pub enum Decided {
    /// Decided now.
    Now(Request),
    /// Someone decided before (the request as it stands).
    Before(Request),
    /// No such request in time.
    Gone,
    /// Not granted: its arguments are longer than the approver was shown (it can be refused).
    Unshown(Request),
}

/// Grant (`yes`) or refuse request `id`, by `by`, if `tenant` (an approver key's; `None`: the
/// admin key) may, and nobody decided it before. A request of another tenant is `Gone` to an
/// approver: it learns nothing of it.
pub async fn decide(
    store: &Store,
    id: &str,
    yes: bool,
    by: &str,
    tenant: Option<&str>,
) -> Result<Decided, Unavailable> {
    let Some(mut request) = get(store, id).await? else {
        return Ok(Decided::Gone);
    };
    if tenant.is_some_and(|t| t != request.tenant) {
        return Ok(Decided::Gone);
    }
    if request.status != Status::Pending {
        return Ok(Decided::Before(request));
    }
    if yes && request.arguments_cut {
        return Ok(Decided::Unshown(request));
    }
    // One decision, across replicas and approvers: the first to count it.
    let once = key::approval_decided(id);
    let left = remaining(&request).max(Duration::from_secs(1));
    if store
        .add_within(&request.tenant, &once, 1, 1, left)
        .await?
        .is_none()
    {
        return Ok(match get(store, id).await? {
            Some(r) => Decided::Before(r),
            None => Decided::Gone,
        });
    }
    request.status = if yes {
        Status::Granted
    } else {
        Status::Refused
    };
    request.decided_by = Some(by.to_string());
    put(store, &request).await?;
    store
        .remove_member(&key::approvals_pending(&request.tenant), id)
        .await?;
    store
        .remove_member(
            &key::approvals_asked(&request.tenant, request.principal.as_deref()),
            id,
        )
        .await?;
    Ok(Decided::Now(request))
}

/// `tenant`'s undecided requests, oldest first (expired ones leave the list as it is read); the
/// list lives `ttl` (`[approvals] ttl_s`) from now, as long as a request added now.
pub async fn pending(
    store: &Store,
    tenant: &str,
    ttl: Duration,
) -> Result<Vec<Request>, Unavailable> {
    let key = key::approvals_pending(tenant);
    let ids = store.members(tenant, &key, ttl).await?;
    let mut out = Vec::new();
    for id in ids {
        match get(store, &id).await? {
            Some(r) if r.status == Status::Pending && r.tenant == tenant => out.push(r),
            _ => store.remove_member(&key, &id).await?,
        }
    }
    out.sort_by_key(|r| r.requested_at);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Arc<Store> {
        Arc::new(Store::new(&crate::config::StateConfig::default()))
    }

    fn ask<'a>(tenant: &'a str, arguments: &'a str) -> Ask<'a> {
        Ask {
            tenant,
            principal: Some("agent"),
            rule: "value",
            reason:
                "argument 'to' holds an email found in the result of untrusted tool 'read_email'",
            call_id: "call_1",
            tool: "send_email",
            server: None,
            arguments,
            diff: None,
        }
    }

    #[test]
    fn arguments_hash_ignores_key_order_but_not_values() {
        let a = arguments_sha256(r#"{"to": "a@b.example", "n": [1, {"y": 2, "x": 1}]}"#);
        let b = arguments_sha256(r#"{"n":[1,{"x":1,"y":2}],"to":"a@b.example"}"#);
        let c = arguments_sha256(r#"{"n":[1,{"x":1,"y":2}],"to":"a@c.example"}"#);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(arguments_sha256("not json"), arguments_sha256("not  json"));
        // A repeated key is read differently by different parsers: only the same text matches.
        let twice = r#"{"amount": 5000, "amount": 5}"#;
        assert_ne!(
            arguments_sha256(twice),
            arguments_sha256(r#"{"amount": 5}"#)
        );
        assert_eq!(arguments_sha256(twice), arguments_sha256(twice));
        assert_ne!(arguments_sha256("[1, 2]"), arguments_sha256("[2, 1]"));
        assert_ne!(arguments_sha256("1.0"), arguments_sha256("\"1.0\""));
        // Numbers as written, past what a double holds apart.
        assert_ne!(
            arguments_sha256(r#"{"account": 12345678901234567890123617}"#),
            arguments_sha256(r#"{"account": 12345678901234567890123618}"#)
        );
        assert_ne!(
            arguments_sha256(r#"{"n": 9007199254740993}"#),
            arguments_sha256(r#"{"n": 9007199254740992}"#)
        );
        assert_eq!(
            arguments_sha256(r#"{"s": "\u0041", "e": {}, "a": [ ]}"#),
            arguments_sha256(r#"{"a":[],"e":{},"s":"A"}"#)
        );
        assert_ne!(arguments_sha256("[1,[2]]"), arguments_sha256("[[1],2]"));
    }

    #[tokio::test]
    async fn granted_once_then_a_new_request_and_bound_to_what_was_asked() {
        let store = store();
        let grant = Asker::new(store.clone(), "flow", Duration::from_secs(60), "p1");
        let args = r#"{"to": "mallory@evil.example"}"#;
        let (answer, first) = grant.ask(&ask("t1", args)).await.unwrap();
        let Answer::Pending(id) = answer else {
            panic!("{answer:?}")
        };
        assert!(valid_id(&id), "{id}");
        // Asked again before anyone decided: the same request.
        let (again, _) = grant.ask(&ask("t1", args)).await.unwrap();
        assert_eq!(again, Answer::Pending(id.clone()));
        let listed = pending(&store, "t1", Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, id);
        assert!(pending(&store, "t2", Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty());
        // An approver of another tenant sees nothing; this tenant's decides once.
        assert!(matches!(
            decide(&store, &id, true, "ops", Some("t2")).await.unwrap(),
            Decided::Gone
        ));
        assert!(matches!(
            decide(&store, &id, true, "ops", Some("t1")).await.unwrap(),
            Decided::Now(_)
        ));
        assert!(matches!(
            decide(&store, &id, false, "admin", None).await.unwrap(),
            Decided::Before(r) if r.status == Status::Granted
        ));
        assert!(pending(&store, "t1", Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty());
        // Other arguments, another tenant or principal, another policy: not this grant.
        let changed = Asker::new(store.clone(), "flow", Duration::from_secs(60), "p2");
        let mut someone = ask("t1", args);
        someone.principal = Some("another-agent");
        for (grant, other) in [
            (&grant, ask("t1", r#"{"to": "bob@example.com"}"#)),
            (&grant, ask("t2", args)),
            (&grant, someone),
            (&changed, ask("t1", args)),
        ] {
            let (a, r) = grant.ask(&other).await.unwrap();
            assert!(
                matches!(a, Answer::Pending(ref other) if *other != id),
                "{a:?}"
            );
            assert_eq!(r.status, Status::Pending);
        }
        // The same call, its keys in another order: granted, once.
        let (used, r) = grant
            .ask(&ask("t1", r#"{ "to":"mallory@evil.example" }"#))
            .await
            .unwrap();
        assert_eq!(used, Answer::Granted(id.clone()));
        assert_eq!(r.status, Status::Used);
        assert_eq!(
            get(&store, &id).await.unwrap().unwrap().status,
            Status::Used
        );
        let (next, _) = grant.ask(&ask("t1", args)).await.unwrap();
        assert!(
            matches!(next, Answer::Pending(ref n) if *n != id),
            "{next:?}"
        );
        assert_eq!(first.arguments, args);
    }

    #[tokio::test]
    async fn a_refusal_stands_and_an_expired_request_is_gone() {
        let store = store();
        let grant = Asker::new(store.clone(), "flow", Duration::from_secs(60), "p1");
        let (Answer::Pending(id), _) = grant.ask(&ask("t1", "{}")).await.unwrap() else {
            panic!()
        };
        assert!(matches!(
            decide(&store, &id, false, "ops", None).await.unwrap(),
            Decided::Now(_)
        ));
        let (a, _) = grant.ask(&ask("t1", "{}")).await.unwrap();
        assert_eq!(a, Answer::Refused(id));

        let short = Asker::new(store.clone(), "flow", Duration::from_secs(1), "p1");
        let (Answer::Pending(id), _) = short.ask(&ask("t1", "[]")).await.unwrap() else {
            panic!()
        };
        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert!(get(&store, &id).await.unwrap().is_none());
        assert!(matches!(
            decide(&store, &id, true, "ops", None).await.unwrap(),
            Decided::Gone
        ));
    }

    #[tokio::test]
    async fn a_grant_is_bound_to_the_server_it_was_asked_on() {
        let store = store();
        let grant = Asker::new(store.clone(), "flow", Duration::from_secs(60), "p1");
        let args = r#"{"to": "a@b.example"}"#;
        let mut on_a = ask("t1", args);
        on_a.server = Some("mail-a");
        let (Answer::Pending(id), _) = grant.ask(&on_a).await.unwrap() else {
            panic!()
        };
        assert!(matches!(
            decide(&store, &id, true, "ops", None).await.unwrap(),
            Decided::Now(_)
        ));
        let mut on_b = ask("t1", args);
        on_b.server = Some("mail-b");
        let (other, _) = grant.ask(&on_b).await.unwrap();
        assert!(
            matches!(other, Answer::Pending(ref o) if *o != id),
            "{other:?}"
        );
        assert!(matches!(
            grant.ask(&ask("t1", args)).await.unwrap().0,
            Answer::Pending(_)
        ));
        assert_eq!(grant.ask(&on_a).await.unwrap().0, Answer::Granted(id));
    }

    #[tokio::test]
    async fn arguments_longer_than_an_approver_is_shown_can_only_be_refused() {
        let store = store();
        let grant = Asker::new(store.clone(), "flow", Duration::from_secs(60), "p1");
        // A recipient after 70 KB of padding.
        let args = format!(
            r#"{{"body": "{}", "to": "mallory@evil.example"}}"#,
            "x".repeat(70 << 10)
        );
        let (Answer::Pending(id), request) = grant.ask(&ask("t1", &args)).await.unwrap() else {
            panic!()
        };
        assert!(request.arguments_cut);
        assert_eq!(request.arguments_bytes, args.len());
        assert!(request.arguments.len() <= MAX_ARGUMENTS);
        assert!(matches!(
            decide(&store, &id, true, "ops", None).await.unwrap(),
            Decided::Unshown(_)
        ));
        assert_eq!(
            get(&store, &id).await.unwrap().unwrap().status,
            Status::Pending
        );
        assert!(matches!(
            decide(&store, &id, false, "ops", None).await.unwrap(),
            Decided::Now(r) if r.status == Status::Refused
        ));
        // Within the limit: whole, and grantable.
        let (_, whole) = grant
            .ask(&ask(
                "t1",
                &format!(r#"{{"body": "{}"}}"#, "y".repeat(20 << 10)),
            ))
            .await
            .unwrap();
        assert!(!whole.arguments_cut);
        assert_eq!(whole.arguments.len(), whole.arguments_bytes);
    }

    #[tokio::test]
    async fn one_asker_cannot_fill_the_approvers_list() {
        let store = store();
        let grant = Asker::new(store.clone(), "flow", Duration::from_secs(60), "p1");
        for i in 0..MAX_ASKED {
            let args = format!(r#"{{"n": {i}}}"#);
            assert!(matches!(
                grant.ask(&ask("t1", &args)).await.unwrap().0,
                Answer::Pending(_)
            ));
        }
        let (full, _) = grant.ask(&ask("t1", r#"{"n": -1}"#)).await.unwrap();
        assert_eq!(full, Answer::Full);
        // Another principal's request is still filed and listed.
        let mut other = ask("t1", r#"{"n": -1}"#);
        other.principal = Some("someone-else");
        let (Answer::Pending(theirs), _) = grant.ask(&other).await.unwrap() else {
            panic!()
        };
        let listed = pending(&store, "t1", Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(listed.len(), MAX_ASKED + 1);
        assert!(listed.iter().any(|r| r.id == theirs));
        // Once one of the first asker's is decided, it may ask again.
        let first = listed
            .iter()
            .find(|r| r.principal.as_deref() == Some("agent"))
            .unwrap();
        decide(&store, &first.id, false, "ops", None).await.unwrap();
        let (again, _) = grant.ask(&ask("t1", r#"{"n": -1}"#)).await.unwrap();
        assert!(matches!(again, Answer::Pending(_)), "{again:?}");
    }
}
