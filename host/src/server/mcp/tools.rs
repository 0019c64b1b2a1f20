//! The tools each upstream declared, as the rails judge calls against them: cached per upstream
//! session (or, without one, per server and forwarded credentials), replaced by every complete
//! `tools/list` that passes, dropped on `notifications/tools/list_changed`, on `DELETE` and on an
//! upstream's 404 for the session.

use crate::model::ToolDef;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most cached lists; past it the least recently used goes.
const MAX_ENTRIES: usize = 10_000;
/// A session's list unused this long is dropped (the SDK reaps idle sessions after 30 minutes).
const IDLE: Duration = Duration::from_secs(30 * 60);
/// How long a list without a session is trusted: sessionless servers have no channel to say it
/// changed unless a client listens, so it is fetched again after this.
pub const SESSIONLESS_TTL: Duration = Duration::from_secs(60);

/// Whose list it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// The server's name.
    pub server: String,
    /// `session:<id>`, or `shared:<digest of the forwarded credentials>`.
    pub scope: String,
}

impl Key {
    /// The key of a request to `server`, in `session` if it has one; `credentials`: the values
    /// of the headers forwarded to the upstream (a list may depend on who asks).
    pub fn new(server: &str, session: Option<&str>, credentials: &[&[u8]]) -> Key {
        let scope = match session {
            Some(id) => format!("session:{id}"),
            None => {
                let mut joined = Vec::new();
                for c in credentials {
                    joined.extend_from_slice(c);
                    joined.push(0);
                }
                format!("shared:{}", &crate::util::sha256_hex(&joined)[..16])
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
}

struct Entry {
    tools: Arc<Vec<ToolDef>>,
    fetched: Instant,
    used: Instant,
}

/// The cache.
#[derive(Default)]
pub struct ToolCache {
    entries: Mutex<HashMap<Key, Entry>>,
}

impl ToolCache {
    /// The list for `key`, if cached and fresh.
    pub fn get(&self, key: &Key) -> Option<Arc<Vec<ToolDef>>> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let entry = entries.get_mut(key)?;
        let stale = if key.session() {
            now.duration_since(entry.used) > IDLE
        } else {
            now.duration_since(entry.fetched) > SESSIONLESS_TTL
        };
        if stale {
            entries.remove(key);
            return None;
        }
        entry.used = now;
        Some(entry.tools.clone())
    }

    /// Store a complete list for `key`.
    pub fn put(&self, key: Key, tools: Vec<ToolDef>) -> Arc<Vec<ToolDef>> {
        let tools = Arc::new(tools);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        make_room(&mut entries, &key, MAX_ENTRIES, |e| e.used);
        let now = Instant::now();
        entries.insert(
            key,
            Entry {
                tools: tools.clone(),
                fetched: now,
                used: now,
            },
        );
        tools
    }

    /// Forget `key`'s list (it changed, or its session ended).
    pub fn forget(&self, key: &Key) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// How many lists are cached.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Before `key` goes into a map holding at most `max` entries: if it is new and the map is full,
/// the least recently `used` entry goes.
pub(super) fn make_room<V>(
    map: &mut HashMap<Key, V>,
    key: &Key,
    max: usize,
    used: impl Fn(&V) -> Instant,
) {
    if map.len() >= max && !map.contains_key(key) {
        if let Some(oldest) = map
            .iter()
            .min_by_key(|(_, v)| used(v))
            .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> ToolDef {
        ToolDef::declared("function", Some(name), None, None)
    }

    #[test]
    fn lists_are_kept_per_session_and_per_credentials() {
        let cache = ToolCache::default();
        let a = Key::new("s", Some("1"), &[]);
        let b = Key::new("s", Some("2"), &[]);
        let shared_x = Key::new("s", None, &[b"x"]);
        let shared_y = Key::new("s", None, &[b"y"]);
        assert_ne!(shared_x, shared_y);
        cache.put(a.clone(), vec![tool("one")]);
        cache.put(shared_x.clone(), vec![tool("two")]);
        assert_eq!(cache.get(&a).unwrap()[0].name.as_deref(), Some("one"));
        assert!(cache.get(&b).is_none());
        assert!(cache.get(&shared_y).is_none());
        assert_eq!(
            cache.get(&shared_x).unwrap()[0].name.as_deref(),
            Some("two")
        );
        cache.forget(&a);
        assert!(cache.get(&a).is_none());
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = ToolCache::default();
        for i in 0..MAX_ENTRIES + 5 {
            cache.put(Key::new("s", Some(&i.to_string()), &[]), vec![]);
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
    }
}
