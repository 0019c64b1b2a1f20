//! What the daemon shares with its policies and their capabilities: the state store (memory, or
//! Redis shared by replicas) and the guard models' connections. Built once by the daemon (or the
//! CLI), outliving reloads, and borrowed by the server, each policy set and each capability
//! grant; the engine holds none of it.

use crate::state::Store;
use std::sync::{Arc, OnceLock};

/// The daemon's shared services.
pub struct Services {
    store: Arc<Store>,
    /// Tool definitions pinned, over the store (the records this replica parsed).
    pins: crate::pins::Pins,
    /// The guard models' connections, made with the first set that configures one (kept warm
    /// across reloads).
    guard_client: OnceLock<crate::guard::HttpClient>,
}

impl Services {
    /// Services over `store`.
    pub fn new(store: Arc<Store>) -> Services {
        Services {
            pins: crate::pins::Pins::new(store.clone()),
            store,
            guard_client: OnceLock::new(),
        }
    }

    /// Services of one process, its store in memory (the CLI, `railyard test`).
    pub fn in_memory() -> Services {
        Services::new(Arc::new(Store::new(&Default::default())))
    }

    /// The state store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Tool definitions pinned.
    pub fn pins(&self) -> &crate::pins::Pins {
        &self.pins
    }

    /// The guard models' connections.
    pub fn guard_client(&self) -> Result<crate::guard::HttpClient, String> {
        if let Some(client) = self.guard_client.get() {
            return Ok(client.clone());
        }
        let client = crate::guard::client()?;
        Ok(self.guard_client.get_or_init(|| client).clone())
    }
}
