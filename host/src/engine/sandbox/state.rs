//! The state capability as a plugin instance reaches it (contract 0.3): refused outright for a
//! plugin run synchronously (it is granted nothing), and through the plugin's grant for one whose
//! entry says `state = true`, under the running request's tenant, waiting without blocking the
//! worker (the wait is given back to the plugin's CPU deadline).

use super::HostState;
use crate::engine::bindings::{state as s, state_async as sa};
use crate::state::StateError;

const NOT_GRANTED: &str = "this plugin is not granted state: its entry needs `state = true`";

impl s::Host for HostState {
    fn add(
        &mut self,
        _key: String,
        _delta: i64,
        _limit: i64,
        _ttl: u32,
    ) -> Result<Option<i64>, s::StateError> {
        Err(s::StateError::Denied(NOT_GRANTED.into()))
    }
    fn get(&mut self, _key: String) -> Result<Option<String>, s::StateError> {
        Err(s::StateError::Denied(NOT_GRANTED.into()))
    }
    fn set(&mut self, _key: String, _value: String, _ttl: u32) -> Result<(), s::StateError> {
        Err(s::StateError::Denied(NOT_GRANTED.into()))
    }
}

fn error(e: StateError) -> sa::StateError {
    match e {
        StateError::Denied(m) => sa::StateError::Denied(m),
        StateError::Unavailable(m) => sa::StateError::Unavailable(m),
    }
}

impl HostState {
    /// The plugin's state grant and the running request's tenant, if state may be reached now.
    fn state(&self) -> Result<(crate::state::Grant, String), sa::StateError> {
        let Some(grant) = self.guard.grant.state.clone() else {
            return Err(sa::StateError::Denied(NOT_GRANTED.into()));
        };
        if !self.guard.open {
            return Err(sa::StateError::Denied(
                "state may be reached in evaluate only, not in describe, configure or prefilter"
                    .into(),
            ));
        }
        Ok((grant, self.guard.tenant.clone()))
    }
}

impl sa::Host for HostState {
    async fn add(
        &mut self,
        key: String,
        delta: i64,
        limit: i64,
        ttl: u32,
    ) -> Result<Option<i64>, sa::StateError> {
        let (grant, tenant) = self.state()?;
        self.waiting(grant.add(&tenant, &key, delta, limit, ttl))
            .await
            .map_err(error)
    }
    async fn get(&mut self, key: String) -> Result<Option<String>, sa::StateError> {
        let (grant, tenant) = self.state()?;
        self.waiting(grant.get(&tenant, &key)).await.map_err(error)
    }
    async fn set(&mut self, key: String, value: String, ttl: u32) -> Result<(), sa::StateError> {
        let (grant, tenant) = self.state()?;
        self.waiting(grant.set(&tenant, &key, value, ttl))
            .await
            .map_err(error)
    }
}
