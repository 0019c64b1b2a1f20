//! What each MCP session has read: the tools whose results the door relayed to it, in order. A
//! `tools/call` is judged with that history before it (a `tool` message per earlier result, named
//! by its call), so a policy reasoning over the conversation (the `flow` rule: no privileged call
//! after an untrusted result) holds on MCP too, where the client sends one call at a time. Only
//! sessions have a history: a sessionless request belongs to no conversation the door can see.
//! Results are named, never kept: the history holds tool names only.

use super::tools::Key;
use crate::model::{Content, Message, ToolCall};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most sessions remembered; past it the least recently used goes.
const MAX_SESSIONS: usize = 10_000;
/// Distinct tools remembered per session (a tool read twice counts once).
const MAX_TOOLS: usize = 256;
/// A session unused this long is forgotten (the SDK reaps idle sessions after 30 minutes).
const IDLE: Duration = Duration::from_secs(30 * 60);

struct Entry {
    tools: Vec<String>,
    used: Instant,
}

/// The sessions' histories.
#[derive(Default)]
pub struct History {
    sessions: Mutex<HashMap<Key, Entry>>,
}

impl History {
    /// `key`'s session was handed a result of `tool`.
    pub fn read(&self, key: &Key, tool: &str) {
        if !key.session() {
            return;
        }
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        super::tools::make_room(&mut sessions, key, MAX_SESSIONS, |e| e.used);
        let entry = sessions.entry(key.clone()).or_insert_with(|| Entry {
            tools: Vec::new(),
            used: now,
        });
        entry.used = now;
        if !entry.tools.iter().any(|t| t == tool) && entry.tools.len() < MAX_TOOLS {
            entry.tools.push(tool.to_string());
        }
    }

    /// The conversation so far as messages: for each tool read, an assistant call and its
    /// (empty) result.
    pub fn messages(&self, key: &Key) -> Vec<Message> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = sessions.get_mut(key) else {
            return Vec::new();
        };
        if entry.used.elapsed() > IDLE {
            sessions.remove(key);
            return Vec::new();
        }
        entry
            .tools
            .iter()
            .enumerate()
            .flat_map(|(i, tool)| {
                let id = format!("railyard-history-{i}");
                let call = Message::reply(
                    None,
                    vec![ToolCall::function(id.clone(), tool.clone(), String::new())],
                );
                let mut result = Message::new("tool", Some(Content::Text(String::new())));
                result.tool_call_id = Some(id);
                result.name = Some(tool.clone());
                [call, result]
            })
            .collect()
    }

    /// Forget `key`'s session (it ended).
    pub fn forget(&self, key: &Key) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_remember_the_tools_they_read_once_each() {
        let h = History::default();
        let a = Key::new("s", Some("1"), &[]);
        let shared = Key::new("s", None, &[b"x"]);
        h.read(&a, "web_fetch");
        h.read(&a, "web_fetch");
        h.read(&a, "get_time");
        h.read(&shared, "web_fetch");
        let m = h.messages(&a);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].tool_calls[0].name, "web_fetch");
        assert_eq!(m[1].tool_call_id.as_deref(), Some("railyard-history-0"));
        assert_eq!(m[3].name.as_deref(), Some("get_time"));
        assert!(h.messages(&shared).is_empty(), "no session, no history");
        h.forget(&a);
        assert!(h.messages(&a).is_empty());
    }
}
