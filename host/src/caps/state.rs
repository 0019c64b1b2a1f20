//! The state capability (contract 0.3's `state`): keys a plugin entry with `state = true`
//! files under its name and the running request's tenant, in the daemon's store (memory, or
//! Redis shared by replicas). Refused outright for a plugin run synchronously (it is granted
//! nothing); reached, for one granted it, without blocking the worker (the wait is given back
//! to the plugin's CPU deadline).

use super::{Call, HasCaps, Project, View};
use crate::contract::{state as s, state_async as sa};
use crate::state::{key, Store};
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::Linker;

const NOT_GRANTED: &str = "this plugin is not granted state: its entry needs `state = true`";

/// The state a plugin entry with `state = true` reaches (contract 0.3's `state` interface):
/// its keys filed under the entry's name and the request's tenant.
#[derive(Clone)]
pub struct Grant {
    store: Arc<Store>,
    plugin: String,
}

/// Why a plugin's state call gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateError {
    /// Not granted, or out of bounds.
    Denied(String),
    /// The store did not answer.
    Unavailable(String),
}

/// Longest key a plugin may use, in bytes.
pub const MAX_KEY: usize = 256;
/// Largest value a plugin may set, in bytes.
pub const MAX_VALUE: usize = 64 << 10;
/// Longest an entry may live, in seconds (30 days).
pub const MAX_TTL_S: u32 = 30 * 24 * 3600;

impl Grant {
    /// State in `store` for the plugin entry `plugin`.
    pub fn new(store: Arc<Store>, plugin: &str) -> Grant {
        Grant {
            store,
            plugin: plugin.to_string(),
        }
    }

    /// `key` of `tenant`'s, as the store files it; or why it cannot be one.
    fn key(&self, tenant: &str, key: &str) -> Result<String, StateError> {
        if key.is_empty() || key.len() > MAX_KEY {
            return Err(StateError::Denied(format!(
                "a key is 1 to {MAX_KEY} bytes, not {}",
                key.len()
            )));
        }
        Ok(key::plugin(&self.plugin, tenant, key))
    }

    fn ttl(ttl_s: u32) -> Result<Duration, StateError> {
        if ttl_s == 0 || ttl_s > MAX_TTL_S {
            return Err(StateError::Denied(format!(
                "a time to live is 1 to {MAX_TTL_S} seconds, not {ttl_s}"
            )));
        }
        Ok(Duration::from_secs(u64::from(ttl_s)))
    }

    /// See the `state` interface's `add`.
    pub async fn add(
        &self,
        tenant: &str,
        key: &str,
        delta: i64,
        limit: i64,
        ttl_s: u32,
    ) -> Result<Option<i64>, StateError> {
        let (key, ttl) = (self.key(tenant, key)?, Self::ttl(ttl_s)?);
        self.store
            .add_within(tenant, &key, delta, limit, ttl)
            .await
            .map_err(|e| StateError::Unavailable(e.0))
    }

    /// See the `state` interface's `get`.
    pub async fn get(&self, tenant: &str, key: &str) -> Result<Option<String>, StateError> {
        let key = self.key(tenant, key)?;
        let value = self
            .store
            .get(&key)
            .await
            .map_err(|e| StateError::Unavailable(e.0))?;
        Ok(value.map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// See the `state` interface's `set`.
    pub async fn set(
        &self,
        tenant: &str,
        key: &str,
        value: String,
        ttl_s: u32,
    ) -> Result<(), StateError> {
        let (key, ttl) = (self.key(tenant, key)?, Self::ttl(ttl_s)?);
        if value.len() > MAX_VALUE {
            return Err(StateError::Denied(format!(
                "a value is at most {MAX_VALUE} bytes, not {}",
                value.len()
            )));
        }
        self.store
            .put(tenant, &key, Bytes::from(value), ttl)
            .await
            .map_err(|e| StateError::Unavailable(e.0))
    }
}

/// One instance's state, if granted.
#[derive(Default)]
pub struct Instance {
    grant: Option<Grant>,
}

impl Instance {
    /// An instance's part for `grant`.
    pub fn new(grant: Option<Grant>) -> Instance {
        Instance { grant }
    }

    /// Whether it is granted.
    pub fn granted(&self) -> bool {
        self.grant.is_some()
    }
}

fn part(caps: &mut super::Caps) -> (&mut Instance, &mut Call) {
    (&mut caps.state, &mut caps.call)
}

/// Add `state` to `sync` (refused) and `waiting` (reached).
pub(super) fn link<T: HasCaps>(
    sync: &mut Linker<T>,
    waiting: &mut Linker<T>,
) -> wasmtime::Result<()> {
    s::add_to_linker::<T, Project<Instance>>(sync, |t| super::view(t, part))?;
    sa::add_to_linker::<T, Project<Instance>>(waiting, |t| super::view(t, part))
}

impl s::Host for View<'_, Instance> {
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

impl View<'_, Instance> {
    /// The plugin's state grant and the running request's tenant, if state may be reached now.
    fn state(&self) -> Result<(Grant, String), sa::StateError> {
        let Some(grant) = self.cap.grant.clone() else {
            return Err(sa::StateError::Denied(NOT_GRANTED.into()));
        };
        if !self.call.open() {
            return Err(sa::StateError::Denied(
                "state may be reached in evaluate only, not in describe, configure or prefilter"
                    .into(),
            ));
        }
        Ok((grant, self.call.tenant().to_string()))
    }
}

impl sa::Host for View<'_, Instance> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::testing::{ctx, Host};
    use crate::caps::{Asked, Grants, RequestCaps};
    use crate::model::Rail;

    fn granted() -> Grants {
        let store = Arc::new(Store::new(&Default::default()));
        Grants {
            state: Some(Grant::new(store, "counter")),
            ..Grants::default()
        }
    }

    fn open(host: &mut Host, ctx: &crate::model::Context) {
        host.caps.open(&Asked {
            ctx,
            caps: &RequestCaps::default(),
            rail: Rail::Input,
            messages: &[],
        });
    }

    fn denied<T: std::fmt::Debug>(r: Result<T, sa::StateError>) -> String {
        match r {
            Err(sa::StateError::Denied(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_instance_granted_nothing_is_refused_on_both_paths() {
        let (mut host, _) = Host::new(&Grants::default());
        open(&mut host, &ctx("acme"));
        let mut view = host.view(part);
        match s::Host::get(&mut view, "k".into()) {
            Err(s::StateError::Denied(m)) => assert_eq!(m, NOT_GRANTED),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            denied(sa::Host::get(&mut view, "k".into()).await),
            NOT_GRANTED
        );
    }

    #[tokio::test]
    async fn state_is_reached_in_evaluate_only_under_the_requests_tenant() {
        let grants = granted();
        let (mut host, ticks) = Host::new(&grants);
        // Closed (describe, configure): refused.
        let closed = denied(sa::Host::get(&mut host.view(part), "k".into()).await);
        assert!(closed.contains("evaluate only"), "{closed}");
        open(&mut host, &ctx("acme"));
        host.caps.entered(7);
        let mut view = host.view(part);
        sa::Host::set(&mut view, "k".into(), "v".into(), 60)
            .await
            .unwrap();
        assert_eq!(
            sa::Host::get(&mut view, "k".into()).await.unwrap(),
            Some("v".into())
        );
        // Each wait moved the call's deadline past it, in the clock's list too.
        assert!(host.due > 100, "{}", host.due);
        assert_eq!(ticks.postponed.lock().unwrap().last(), Some(&(7, host.due)));
        // Another tenant's instance of the same plugin does not see it.
        let (mut other, _) = Host::new(&grants);
        open(&mut other, &ctx("other"));
        assert_eq!(
            sa::Host::get(&mut other.view(part), "k".into())
                .await
                .unwrap(),
            None
        );
        // Closed again after the call.
        host.caps.close();
        denied(sa::Host::get(&mut host.view(part), "k".into()).await);
    }

    #[tokio::test]
    async fn keys_values_and_lifetimes_out_of_bounds_are_refused() {
        let (mut host, _) = Host::new(&granted());
        open(&mut host, &ctx("acme"));
        let mut view = host.view(part);
        let long = "k".repeat(MAX_KEY + 1);
        assert!(denied(sa::Host::get(&mut view, String::new()).await).contains("1 to 256"));
        assert!(denied(sa::Host::get(&mut view, long).await).contains("1 to 256"));
        let big = "v".repeat(MAX_VALUE + 1);
        assert!(denied(sa::Host::set(&mut view, "k".into(), big, 60).await).contains("at most"));
        let never = sa::Host::add(&mut view, "k".into(), 1, 10, 0).await;
        assert!(denied(never).contains("time to live"));
        assert_eq!(
            sa::Host::add(&mut view, "n".into(), 2, 3, 60)
                .await
                .unwrap(),
            Some(2)
        );
        assert_eq!(
            sa::Host::add(&mut view, "n".into(), 2, 3, 60)
                .await
                .unwrap(),
            None
        );
    }
}
