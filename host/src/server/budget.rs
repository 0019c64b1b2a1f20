//! Token budgets (`[tenants.NAME] tokens_per_minute`, and a key's own in its `[[keys]]` entry),
//! reserved then settled: before the backend
//! is called, a request takes what it may use from its tenant's bucket in the shared store (an
//! estimate of its prompt, a token per 4 bytes of its body, plus the most it asks the model to
//! write); when the answer ends, the bucket is settled with what the answer's `usage` reports
//! (more taken, or the rest given back). A burst therefore cannot overshoot by more than the
//! estimates' errors of the requests in flight. A stream whose usage is never reported (OpenAI
//! chat without `stream_options.include_usage`) keeps its reservation.

use super::error::ApiError;
use super::App;
use crate::codec::usage::Usage;
use crate::state::Rate;
use std::sync::Arc;

/// The fields in which a request bounds what the model writes.
const MAX_OUT: [&str; 3] = ["max_tokens", "max_completion_tokens", "max_output_tokens"];

/// The most a request's `body` asks the model to write (0 when it does not say).
pub(crate) fn max_out(body: &serde_json::Map<String, serde_json::Value>) -> u64 {
    MAX_OUT
        .iter()
        .find_map(|k| body.get(*k).and_then(|v| v.as_u64()))
        .unwrap_or(0)
}

/// The token budgets a request counts against: its tenant's and its key's (each `None`: none).
#[derive(Clone, Copy)]
pub(crate) struct Budgets {
    pub tenant: Option<u32>,
    pub key: Option<u32>,
}

impl Budgets {
    /// Whether there is any.
    pub(crate) fn any(&self) -> bool {
        self.tenant.is_some() || self.key.is_some()
    }
}

/// A request's reservation, in each of its buckets, to settle when its answer ends.
pub(crate) struct Reserved {
    buckets: Vec<(String, Rate, u32)>,
}

/// Reserve for a request of `tenant` and `principal` (whose key has its own budget, if
/// `budgets.key`) whose body is `body_len` bytes and asks for at most `out` tokens, in each
/// budget. `Ok(None)`: no budget applies. Refused by one, it takes nothing from the others.
pub(crate) async fn reserve(
    app: &Arc<App>,
    tenant: &str,
    principal: Option<&str>,
    budgets: Budgets,
    body_len: usize,
    out: u64,
) -> Result<Option<Reserved>, ApiError> {
    let wanted = [
        budgets.tenant.map(|l| {
            (
                format!("tpm:tenant:{tenant}"),
                format!("tenant '{tenant}'"),
                l,
            )
        }),
        budgets
            .key
            .zip(principal)
            .map(|(l, p)| (format!("tpm:key:{p}"), format!("the key of '{p}'"), l)),
    ];
    let mut reserved = Reserved {
        buckets: Vec::new(),
    };
    for (key, who, limit) in wanted.into_iter().flatten() {
        // A request bigger than the whole budget still gets through from rest (and empties it).
        let estimate = (body_len as u64)
            .div_ceil(4)
            .saturating_add(out)
            .min(u64::from(limit)) as u32;
        match super::ingress::take(app, &key, who, limit, "tokens", estimate).await {
            Ok(true) => reserved
                .buckets
                .push((key, Rate { per_minute: limit }, estimate)),
            Ok(false) => {}
            Err(refused) => {
                reserved.refund(app);
                return Err(refused);
            }
        }
    }
    Ok((!reserved.buckets.is_empty()).then_some(reserved))
}

impl Reserved {
    /// Settle with what the answer `used` (`None`: not reported, the reservations stand), off
    /// the request's path.
    pub(crate) fn settle(self, app: &Arc<App>, used: Option<Usage>) {
        let Some(used) = used else {
            return;
        };
        // Counts past i64 are taken as the most there is, never wrapped into a refund.
        let used = i64::try_from(used.total()).unwrap_or(i64::MAX);
        let app = app.clone();
        tokio::spawn(async move {
            for (key, rate, reserved) in self.buckets {
                let delta = used - i64::from(reserved);
                if let Err(e) = app.state.settle(&key, rate, delta).await {
                    tracing::warn!(error = %e, "a token budget could not be settled");
                }
            }
        });
    }

    /// Give the whole reservation back (the backend was not reached or failed).
    pub(crate) fn refund(self, app: &Arc<App>) {
        self.settle(app, Some(Usage::default()));
    }
}
