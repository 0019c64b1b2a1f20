//! Per-tenant concurrency limits (`max_concurrent`): requests in flight per tenant, so one noisy
//! tenant gets 429 instead of starving the others. With the memory store, a counter in this
//! process; with Redis, a lease per request in the shared store, so N replicas hold one limit,
//! not N (a lease its replica never released, because it died, ends after `LEASE`). Counts
//! outlive reloads (a reload changes the limit, not who is in flight).

use crate::state::{Store, Unavailable};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest a request counts against its tenant's limit on a shared store: a stream longer
/// than this stops counting, and a dead replica's requests stop counting after it.
pub(crate) const LEASE: Duration = Duration::from_secs(300);

/// In-flight counters by tenant.
#[derive(Default)]
pub(crate) struct TenantLimits {
    in_flight: Mutex<HashMap<String, Arc<AtomicUsize>>>,
}

/// One request in flight; the count goes down when it is dropped (for a streamed response, when
/// the stream ends).
pub(crate) enum Permit {
    /// Counted in this process.
    Local(Arc<AtomicUsize>),
    /// A lease in the shared store.
    Shared {
        store: Arc<Store>,
        key: String,
        id: String,
    },
}

impl Drop for Permit {
    fn drop(&mut self) {
        match self {
            Permit::Local(counter) => {
                counter.fetch_sub(1, Ordering::AcqRel);
            }
            Permit::Shared { store, key, id } => {
                let (store, key, id) = (store.clone(), std::mem::take(key), std::mem::take(id));
                // Off the response's path; without a runtime (shutting down) the lease ends by
                // itself.
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        if let Err(e) = store.release(&key, &id).await {
                            tracing::warn!(error = %e, "a concurrency lease was not released: it ends by itself");
                        }
                    });
                }
            }
        }
    }
}

/// Hold a lease for request `id` of `tenant` under its limit `max` in the shared `store`:
/// `Ok(None)` over the limit.
pub(crate) async fn lease(
    store: &Arc<Store>,
    tenant: &str,
    max: usize,
    id: &str,
) -> Result<Option<Permit>, Unavailable> {
    let key = crate::state::key::in_flight(tenant);
    let held = store.lease(tenant, &key, id, max, LEASE).await?;
    Ok(held.then(|| Permit::Shared {
        store: store.clone(),
        key,
        id: id.to_string(),
    }))
}

impl TenantLimits {
    /// Count one more request for `tenant`, unless that would exceed `max` (`None`: no limit,
    /// nothing counted). `Err` carries the limit.
    pub(crate) fn acquire(
        &self,
        tenant: &str,
        max: Option<usize>,
    ) -> Result<Option<Permit>, usize> {
        let Some(max) = max else {
            return Ok(None);
        };
        let counter = {
            let mut map = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(tenant.to_string()).or_default().clone()
        };
        let before = counter.fetch_add(1, Ordering::AcqRel);
        let permit = Permit::Local(counter);
        if before >= max {
            return Err(max); // dropping the permit undoes the increment
        }
        Ok(Some(permit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_per_tenant_and_releases_on_drop() {
        let limits = TenantLimits::default();
        let a1 = limits.acquire("a", Some(2)).unwrap();
        let _a2 = limits.acquire("a", Some(2)).unwrap();
        assert_eq!(limits.acquire("a", Some(2)).err(), Some(2));
        assert!(
            limits.acquire("b", Some(1)).unwrap().is_some(),
            "other tenants unaffected"
        );
        drop(a1);
        assert!(limits.acquire("a", Some(2)).is_ok());
        assert!(limits.acquire("c", None).unwrap().is_none());
    }
}
