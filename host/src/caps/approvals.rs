//! The approvals capability (contract 0.3's `approvals`): a plugin entry with `approvals = true`
//! asks a person to approve a call of the reply it judges on the `tool_call` rail, bound to the
//! entry, the policy it runs (component and config), the caller, the call and the MCP server it
//! goes to. Refused outright for a plugin run synchronously (it is granted nothing); asked, for
//! one granted it, without blocking the worker (the wait on the store is given back to its
//! deadline). Each request made, found or spent is noted in the request's [`Ledger`] for the
//! client's refusal.

use super::{Asked, Call, HasCaps, Project, View};
use crate::approvals::{Answer, Ask, Asker};
use crate::config::PluginConfig;
use crate::contract::{approvals as a, approvals_async as aa, wit};
use crate::model::Rail;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::Linker;

const NOT_GRANTED: &str =
    "this plugin is not granted approvals: its entry needs `approvals = true`";

/// A plugin entry's approvals.
#[derive(Clone)]
pub struct Grant {
    asker: Asker,
}

impl Grant {
    /// `entry`'s approvals, in `store`, each living `ttl`. A grant binds to the policy that
    /// asked: its component (`component`, its digest) and its config, so a changed policy asks
    /// anew.
    pub fn of(
        entry: &PluginConfig,
        component: &str,
        store: &Arc<crate::state::Store>,
        ttl: Duration,
    ) -> Grant {
        let policy = crate::util::sha256_hex(format!("{component}\0{}", entry.config).as_bytes());
        Grant {
            asker: Asker::new(store.clone(), &entry.name, ttl, &policy),
        }
    }
}

/// One request's approval requests: those its plugins made, found or spent, as the client is
/// shown them (made only when a plugin of the set may ask).
#[derive(Debug, Default)]
pub struct Ledger {
    asked: std::sync::Mutex<Vec<serde_json::Value>>,
}

impl Ledger {
    /// Note a request as the client is shown it (once per id: the last word stands).
    pub fn note(&self, shown: serde_json::Value) {
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        asked.retain(|a| a["id"] != shown["id"]);
        asked.push(shown);
    }

    /// Whether none was noted.
    pub fn is_empty(&self) -> bool {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// The requests noted so far.
    pub fn asked(&self) -> Vec<serde_json::Value> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What the running call may ask about: the reply under judgement, on the `tool_call` rail.
pub(super) struct Asking {
    ledger: Option<Arc<Ledger>>,
    /// The reply's index in the request the plugin was given.
    reply: u32,
    /// The reply's calls: id, tool, arguments.
    calls: Vec<(String, String, String)>,
    /// The MCP server the calls go to (`None`: a model door's).
    server: Option<String>,
}

/// One instance's approvals, if granted, and what the running call may ask about.
#[derive(Default)]
pub struct Instance {
    grant: Option<Grant>,
    asking: Option<Asking>,
}

impl Instance {
    /// An instance's part for `grant`.
    pub fn new(grant: Option<Grant>) -> Instance {
        Instance {
            grant,
            asking: None,
        }
    }

    /// Whether it is granted.
    pub fn granted(&self) -> bool {
        self.grant.is_some()
    }

    /// Open for one evaluation: the reply's calls, on the `tool_call` rail.
    pub(super) fn open(&mut self, asked: &Asked<'_>) {
        if self.grant.is_none() || asked.rail != Rail::ToolCall {
            return;
        }
        let reply = asked.messages.len().saturating_sub(1);
        self.asking = asked.messages.last().map(|m| Asking {
            ledger: asked.caps.approvals.clone(),
            server: asked.caps.server.clone(),
            reply: reply as u32,
            calls: m
                .tool_calls
                .iter()
                .map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()))
                .collect(),
        });
    }

    pub(super) fn close(&mut self) {
        self.asking = None;
    }
}

fn part(caps: &mut super::Caps) -> (&mut Instance, &mut Call) {
    (&mut caps.approvals, &mut caps.call)
}

/// Add `approvals` to `sync` (refused) and `waiting` (asked).
pub(super) fn link<T: HasCaps>(
    sync: &mut Linker<T>,
    waiting: &mut Linker<T>,
) -> wasmtime::Result<()> {
    a::add_to_linker::<T, Project<Instance>>(sync, |t| super::view(t, part))?;
    aa::add_to_linker::<T, Project<Instance>>(waiting, |t| super::view(t, part))
}

impl a::Host for View<'_, Instance> {
    fn request(
        &mut self,
        _call: wit::CallRef,
        _rule: String,
        _reason: String,
    ) -> Result<a::Approval, a::ApprovalError> {
        Err(a::ApprovalError::Denied(NOT_GRANTED.into()))
    }
}

impl aa::Host for View<'_, Instance> {
    async fn request(
        &mut self,
        call: wit::CallRef,
        rule: String,
        reason: String,
    ) -> Result<aa::Approval, aa::ApprovalError> {
        let denied = |m: &str| Err(aa::ApprovalError::Denied(m.to_string()));
        let Some(grant) = self.cap.grant.clone() else {
            return denied(NOT_GRANTED);
        };
        if !self.call.open() {
            return denied("approvals may be asked in evaluate only");
        }
        let Some(asking) = &self.cap.asking else {
            return denied(
                "approvals are asked about the calls of the reply, on the tool_call rail",
            );
        };
        let found = (call.message == asking.reply)
            .then(|| asking.calls.get(call.call as usize))
            .flatten()
            .cloned();
        let Some((id, tool, arguments)) = found else {
            return denied(&format!(
                "message {} call {} is not a call of the reply under judgement",
                call.message, call.call
            ));
        };
        if rule.is_empty() || rule.len() > 64 {
            return denied("a rule's name is 1 to 64 bytes");
        }
        let (tenant, principal, ledger, server) = (
            self.call.tenant.clone(),
            self.call.principal.clone(),
            asking.ledger.clone(),
            asking.server.clone(),
        );
        let ask = Ask {
            tenant: &tenant,
            principal: principal.as_deref(),
            rule: &rule,
            reason: &reason,
            call_id: &id,
            tool: &tool,
            server: server.as_deref(),
            arguments: &arguments,
            diff: None,
        };
        let (answer, request) = self
            .waiting(grant.asker.ask(&ask))
            .await
            .map_err(|e| aa::ApprovalError::Unavailable(e.0.to_string()))?;
        if let Some(ledger) = ledger {
            ledger.note(request.shown());
        }
        Ok(match answer {
            Answer::Granted(id) => aa::Approval::Granted(id),
            Answer::Pending(id) => aa::Approval::Pending(id),
            Answer::Refused(id) => aa::Approval::Refused(id),
            Answer::Full => {
                return Err(aa::ApprovalError::Denied(format!(
                    "this caller has {} approval requests undecided: no more are filed until some are decided or expire",
                    crate::approvals::MAX_ASKED
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::testing::{ctx, Host};
    use crate::caps::{Grants, RequestCaps};
    use crate::model::{Message, ToolCall};

    fn granted() -> Grants {
        let store = Arc::new(crate::state::Store::new(&Default::default()));
        Grants {
            approvals: Some(Grant {
                asker: Asker::new(store, "flow", Duration::from_secs(60), "p1"),
            }),
            ..Grants::default()
        }
    }

    fn reply(arguments: &str) -> Vec<Message> {
        let mut m = Message::new("assistant", None);
        m.tool_calls.push(ToolCall {
            id: "call_1".into(),
            kind: "function".into(),
            name: "send_email".into(),
            arguments: arguments.into(),
            extra: Default::default(),
            function_extra: Default::default(),
            provenance: None,
        });
        vec![Message::new("user", None), m]
    }

    fn call(message: u32, call: u32) -> wit::CallRef {
        wit::CallRef { message, call }
    }

    async fn ask(view: &mut View<'_, Instance>, at: wit::CallRef) -> Result<aa::Approval, String> {
        aa::Host::request(view, at, "value".into(), "why".into())
            .await
            .map_err(|e| match e {
                aa::ApprovalError::Denied(m) | aa::ApprovalError::Unavailable(m) => m,
            })
    }

    /// An instance opened on `rail` over `messages`, for `caps`.
    fn opened(grants: &Grants, rail: Rail, messages: &[Message], caps: &RequestCaps) -> Host {
        let (mut host, _) = Host::new(grants);
        host.caps.open(&Asked {
            ctx: &ctx("acme"),
            caps,
            rail,
            messages,
        });
        host
    }

    #[tokio::test]
    async fn only_the_calls_of_the_reply_on_the_tool_call_rail_may_be_asked_about() {
        let grants = granted();
        let messages = reply(r#"{"to":"a@b.example"}"#);
        let caps = RequestCaps::default();
        let mut host = opened(&grants, Rail::Input, &messages, &caps);
        let off = ask(&mut host.view(part), call(1, 0)).await.unwrap_err();
        assert!(off.contains("tool_call rail"), "{off}");
        let mut host = opened(&grants, Rail::ToolCall, &messages, &caps);
        for (at, why) in [(call(0, 0), "not a call"), (call(1, 3), "not a call")] {
            let e = ask(&mut host.view(part), at).await.unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        let e = aa::Host::request(&mut host.view(part), call(1, 0), "r".repeat(65), "".into())
            .await
            .unwrap_err();
        assert!(matches!(e, aa::ApprovalError::Denied(m) if m.contains("1 to 64")));
        // Not granted: refused on both paths.
        let mut bare = opened(&Grants::default(), Rail::ToolCall, &messages, &caps);
        assert_eq!(
            ask(&mut bare.view(part), call(1, 0)).await.unwrap_err(),
            NOT_GRANTED
        );
        assert!(a::Host::request(&mut bare.view(part), call(1, 0), "v".into(), "".into()).is_err());
    }

    #[tokio::test]
    async fn a_request_is_noted_in_the_ledger_and_bound_to_its_server() {
        let grants = granted();
        let messages = reply(r#"{"to":"a@b.example"}"#);
        let ledger = Arc::new(Ledger::default());
        let on = |server: &str| RequestCaps {
            approvals: Some(ledger.clone()),
            server: Some(server.into()),
            ..RequestCaps::default()
        };
        let (a_caps, b_caps) = (on("mail-a"), on("mail-b"));
        let mut on_a = opened(&grants, Rail::ToolCall, &messages, &a_caps);
        let Ok(aa::Approval::Pending(first)) = ask(&mut on_a.view(part), call(1, 0)).await else {
            panic!("a new request is pending");
        };
        // Asked again: the same request.
        let Ok(aa::Approval::Pending(again)) = ask(&mut on_a.view(part), call(1, 0)).await else {
            panic!("still pending");
        };
        assert_eq!(first, again);
        assert_eq!(ledger.asked().len(), 1);
        // The same call on another server is another request.
        let mut on_b = opened(&grants, Rail::ToolCall, &messages, &b_caps);
        let Ok(aa::Approval::Pending(other)) = ask(&mut on_b.view(part), call(1, 0)).await else {
            panic!("pending");
        };
        assert_ne!(first, other);
        assert_eq!(ledger.asked().len(), 2);
        // Closed after the call: nothing may be asked.
        on_a.caps.close();
        assert!(ask(&mut on_a.view(part), call(1, 0)).await.is_err());
    }
}
