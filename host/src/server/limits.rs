//! Per-tenant concurrency limits: a counter of requests in flight per tenant, so one noisy
//! tenant gets 429 instead of starving the others. Counters outlive reloads (a reload changes
//! the limit, not who is in flight).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// In-flight counters by tenant.
#[derive(Default)]
pub(crate) struct TenantLimits {
    in_flight: Mutex<HashMap<String, Arc<AtomicUsize>>>,
}

/// One request in flight; the count goes down when it is dropped (for a streamed response, when
/// the stream ends).
pub(crate) struct Permit {
    counter: Arc<AtomicUsize>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::AcqRel);
    }
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
        let permit = Permit { counter };
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
