//! What each agent session has read over MCP: the tools whose results the door relayed to it. A
//! `tools/call` is judged with that history before it (a `tool` message per earlier result,
//! named by its call), so a policy reasoning over the conversation (the `flow` rule: no
//! privileged call after an untrusted result) holds on MCP too, where the client sends one call
//! at a time.
//!
//! An agent session is the caller's tenant and principal (its Railyard key) and, if the client
//! sends one, its `Railyard-Session` header. It spans every MCP server and every replica: the
//! history lives in the shared store (`[state]`). It is not the MCP session: one agent talking to
//! two servers has two MCP sessions (and none in the stateless protocol), and a read through one
//! must count for a call through the other. A client that runs several agents on one key tells
//! them apart with the header; without it, they are one conversation (more refusals, never fewer).
//!
//! Results are named, never kept: the history holds tool names only.

use crate::model::{Message, ToolCall};
use crate::rails::RequestScope;
use crate::state::{Store, Unavailable};
use axum::http::HeaderMap;
use std::time::Duration;

/// The header a client names its agent session with.
pub const HEADER: &str = "railyard-session";
/// Distinct tools remembered per session (a tool read twice counts once).
const MAX_TOOLS: usize = 256;
/// A session unused this long is forgotten (the SDK reaps idle sessions after 30 minutes).
const IDLE: Duration = Duration::from_secs(30 * 60);

/// An agent session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// Its tenant: the memory store bounds what each tenant holds.
    tenant: String,
    /// Its key in the store.
    key: String,
}

/// Why a read could not be remembered.
#[derive(Debug)]
pub enum Unremembered {
    /// The store did not answer.
    Store(Unavailable),
    /// The session has read as many distinct tools as are remembered.
    Full,
}

impl std::fmt::Display for Unremembered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unremembered::Store(e) => e.fmt(f),
            Unremembered::Full => write!(
                f,
                "the agent session has read {MAX_TOOLS} distinct tools, the most remembered: start a new session"
            ),
        }
    }
}

impl Agent {
    /// The agent session of a request in `scope` (authenticated) with the caller's `headers`.
    pub fn of(scope: &RequestScope, headers: &HeaderMap) -> Agent {
        let session = headers.get(HEADER).map(|v| v.as_bytes());
        Agent::new(
            scope.tenant_name(),
            scope.ctx().principal.as_deref(),
            session,
        )
    }

    /// The session `session` (the header's bytes, if sent) of `principal` in `tenant`.
    fn new(tenant: &str, principal: Option<&str>, session: Option<&[u8]>) -> Agent {
        let mut who = Vec::new();
        who.extend_from_slice(principal.unwrap_or("").as_bytes());
        who.push(0);
        if let Some(session) = session {
            who.push(1);
            who.extend_from_slice(session);
        }
        let key = format!(
            "flow:{}:{}",
            &crate::util::sha256_hex(tenant.as_bytes())[..16],
            &crate::util::sha256_hex(&who)[..32]
        );
        Agent {
            tenant: tenant.to_string(),
            key,
        }
    }

    /// Its tenant's name.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The session was handed a result of `tool`.
    pub async fn read(&self, store: &Store, tool: &str) -> Result<(), Unremembered> {
        match store
            .add_member(&self.tenant, &self.key, tool, MAX_TOOLS, IDLE)
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(Unremembered::Full),
            Err(e) => Err(Unremembered::Store(e)),
        }
    }

    /// The conversation so far as messages: for each tool read, an assistant call and its
    /// result, without content (not kept: a policy judging values takes it as unseen).
    pub async fn messages(&self, store: &Store) -> Result<Vec<Message>, Unavailable> {
        let tools = store.members(&self.key, IDLE).await?;
        Ok(tools
            .into_iter()
            .enumerate()
            .flat_map(|(i, tool)| {
                let id = format!("railyard-history-{i}");
                let call = Message::reply(
                    None,
                    vec![ToolCall::function(id.clone(), tool.clone(), String::new())],
                );
                let mut result = Message::new("tool", None);
                result.tool_call_id = Some(id);
                result.name = Some(tool);
                [call, result]
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sessions_remember_the_tools_they_read_once_each() {
        let store = Store::new(&crate::config::StateConfig::default());
        let a = Agent::new("t", Some("alice"), None);
        let b = Agent::new("t", Some("bob"), None);
        a.read(&store, "web_fetch").await.unwrap();
        a.read(&store, "web_fetch").await.unwrap();
        a.read(&store, "get_time").await.unwrap();
        let m = a.messages(&store).await.unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].tool_calls[0].name, "get_time");
        assert_eq!(m[1].tool_call_id.as_deref(), Some("railyard-history-0"));
        assert_eq!(m[3].name.as_deref(), Some("web_fetch"));
        assert!(b.messages(&store).await.unwrap().is_empty());
        let named = Agent::new("t", Some("alice"), Some(b"run-1"));
        assert!(named.messages(&store).await.unwrap().is_empty());
        for i in 2..MAX_TOOLS {
            a.read(&store, &format!("tool_{i}")).await.unwrap();
        }
        assert!(matches!(
            a.read(&store, "one_too_many").await,
            Err(Unremembered::Full)
        ));
        a.read(&store, "web_fetch").await.unwrap();
    }
}
