//! The tools each upstream declared, as the rails judge calls against them: kept in the shared
//! store (`[state]`) per upstream session (or, without one, per server and forwarded
//! credentials), so every replica judges a session's calls by the same list; replaced by every
//! complete `tools/list` that passes, dropped on `notifications/tools/list_changed`, on `DELETE`
//! and on an upstream's 404 for the session, whichever replica sees it.
//!
//! The store holds the list as the upstream wrote it, behind a digest of it; each replica keeps
//! the lists it parsed by digest, so a call costs one read of the store and no parsing.
//! A store that cannot answer is a miss: the list is fetched from the upstream again, never
//! assumed.

use crate::codec::mcp as codec;
use crate::model::ToolDef;
use crate::pins::Declared;
use crate::state::Store;
use bytes::Bytes;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A session's list unused this long is dropped (the SDK reaps idle sessions after 30 minutes).
const IDLE: Duration = Duration::from_secs(30 * 60);
/// How long a list without a session is trusted: sessionless servers have no channel to say it
/// changed unless a client listens, so it is fetched again after this.
pub const SESSIONLESS_TTL: Duration = Duration::from_secs(60);
/// Parsed lists a replica keeps (by digest); past it, it starts again.
const MAX_PARSED: usize = 1024;
/// Length of the digest in front of a stored list.
const DIGEST: usize = 32;

/// Whose list it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// The server's name.
    pub server: String,
    /// `session:<digest of the id>`, or `shared:<digest of the forwarded credentials>`.
    pub scope: String,
}

impl Key {
    /// The key of a request to `server`, in `session` if it has one; `credentials`: the values
    /// of the headers forwarded to the upstream (a list may depend on who asks).
    pub fn new(server: &str, session: Option<&str>, credentials: &[&[u8]]) -> Key {
        let scope = match session {
            Some(id) => format!("session:{}", &crate::util::sha256_hex(id.as_bytes())[..32]),
            None => {
                let mut joined = Vec::new();
                for c in credentials {
                    joined.extend_from_slice(c);
                    joined.push(0);
                }
                format!("shared:{}", &crate::util::sha256_hex(&joined)[..32])
            }
        };
        Key {
            server: server.to_string(),
            scope,
        }
    }

    pub fn session(&self) -> bool {
        self.scope.starts_with("session:")
    }

    /// Its key in the store.
    fn stored(&self) -> String {
        format!("mcp-tools:{}:{}", self.server, self.scope)
    }
}

/// A server's list as the rails judge it: its tools, and its entries as pins read them.
#[derive(Debug, Default)]
pub struct Listed {
    pub tools: Vec<ToolDef>,
    pub declared: Vec<Declared>,
}

impl Listed {
    /// The list of the upstream's `tools` entries `raw`.
    pub fn of(raw: &[Value]) -> Listed {
        Listed {
            tools: declared(raw),
            declared: raw.iter().filter_map(Declared::of_entry).collect(),
        }
    }
}

/// The lists this replica parsed, by digest.
#[derive(Default)]
pub struct ToolCache {
    parsed: Mutex<HashMap<String, Arc<Listed>>>,
}

impl ToolCache {
    /// The list for `key`, one of `owner`'s (its tenant), if the store holds one (a store that
    /// cannot answer holds none).
    pub async fn get(&self, store: &Store, owner: &str, key: &Key) -> Option<Arc<Listed>> {
        let stored = if key.session() {
            store.get_renewed(owner, &key.stored(), IDLE).await
        } else {
            store.get(&key.stored()).await
        };
        let stored = match stored {
            Ok(stored) => stored?,
            Err(e) => {
                tracing::debug!(error = %e, "MCP tool list not read from the state store");
                return None;
            }
        };
        let (digest, json) = stored.split_at(DIGEST.min(stored.len()));
        let digest = std::str::from_utf8(digest).ok()?;
        if let Some(tools) = self.parsed().get(digest) {
            return Some(tools.clone());
        }
        let tools = Arc::new(parse(json)?);
        let mut parsed = self.parsed();
        if parsed.len() >= MAX_PARSED {
            parsed.clear();
        }
        parsed.insert(digest.to_string(), tools.clone());
        Some(tools)
    }

    /// Keep the complete list `raw` (the upstream's `tools` entries) for `key`, a list of
    /// `owner`'s (its tenant): the list as the rails judge it, parsed once per replica.
    pub async fn put(&self, store: &Store, owner: &str, key: &Key, raw: &[Value]) -> Arc<Listed> {
        let json = serde_json::json!({ "tools": raw }).to_string();
        let digest = &crate::util::sha256_hex(json.as_bytes())[..DIGEST];
        let known = self.parsed().get(digest).cloned();
        let tools = known.unwrap_or_else(|| Arc::new(Listed::of(raw)));
        let ttl = if key.session() { IDLE } else { SESSIONLESS_TTL };
        let value = Bytes::from([digest.as_bytes(), json.as_bytes()].concat());
        if let Err(e) = store.put(owner, &key.stored(), value, ttl).await {
            tracing::warn!(error = %e, "MCP tool list not kept in the state store");
        }
        let mut parsed = self.parsed();
        if parsed.len() >= MAX_PARSED {
            parsed.clear();
        }
        parsed.insert(digest.to_string(), tools.clone());
        tools
    }

    /// Forget `key`'s list (it changed, or its session ended).
    pub async fn forget(&self, store: &Store, key: &Key) {
        if let Err(e) = store.delete(&key.stored()).await {
            tracing::warn!(error = %e, "a changed MCP tool list could not be dropped from the state store: replicas may use it until it expires");
        }
    }

    fn parsed(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Listed>>> {
        self.parsed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A stored list's tools.
fn parse(json: &[u8]) -> Option<Listed> {
    let result: Value = serde_json::from_slice(json).ok()?;
    let tools = codec::tools_of(&result).ok()?;
    let raw = result.get("tools").and_then(Value::as_array)?;
    Some(Listed {
        tools,
        declared: raw.iter().filter_map(Declared::of_entry).collect(),
    })
}

/// The tools a list's `tools` entries (`raw`) declare.
pub fn declared(raw: &[Value]) -> Vec<ToolDef> {
    codec::tools_of(&serde_json::json!({ "tools": raw })).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> Value {
        json!({"name": name, "inputSchema": {"type": "object"}})
    }

    #[tokio::test]
    async fn lists_are_kept_per_session_and_per_credentials() {
        let store = Store::new(&crate::config::StateConfig::default());
        let cache = ToolCache::default();
        let a = Key::new("s", Some("1"), &[]);
        let b = Key::new("s", Some("2"), &[]);
        let shared_x = Key::new("s", None, &[b"x"]);
        let shared_y = Key::new("s", None, &[b"y"]);
        assert_ne!(shared_x, shared_y);
        for (key, raw) in [(&a, [tool("one")]), (&shared_x, [tool("two")])] {
            cache.put(&store, "t", key, &raw).await;
        }
        let got = cache.get(&store, "t", &a).await.unwrap();
        assert_eq!(got.tools[0].name.as_deref(), Some("one"));
        assert_eq!(got.declared[0].name, "one");
        assert!(cache.get(&store, "t", &b).await.is_none());
        assert!(cache.get(&store, "t", &shared_y).await.is_none());
        let got = cache.get(&store, "t", &shared_x).await.unwrap();
        assert_eq!(got.tools[0].name.as_deref(), Some("two"));
        // Another replica's cache (nothing parsed yet) reads the same list from the store.
        let other = ToolCache::default();
        assert_eq!(
            other.get(&store, "t", &a).await.unwrap().tools[0]
                .name
                .as_deref(),
            Some("one")
        );
        cache.forget(&store, &a).await;
        assert!(other.get(&store, "t", &a).await.is_none());
    }
}
