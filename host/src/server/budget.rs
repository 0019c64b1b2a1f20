//! Token budgets (`[tenants.NAME] tokens_per_minute`), reserved then settled: before the backend
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

/// A request's reservation, to settle when its answer ends.
pub(crate) struct Reserved {
    key: String,
    rate: Rate,
    reserved: u32,
}

/// Reserve for a request of `tenant` (its config `limit` per minute) whose body is `body_len`
/// bytes and asks for at most `out` tokens. `Ok(None)`: its tenant has no token budget.
pub(crate) async fn reserve(
    app: &App,
    tenant: &str,
    limit: Option<u32>,
    body_len: usize,
    out: u64,
) -> Result<Option<Reserved>, ApiError> {
    let Some(limit) = limit else {
        return Ok(None);
    };
    // A request bigger than the whole budget still gets through from rest (and empties it).
    let estimate = (body_len as u64)
        .div_ceil(4)
        .saturating_add(out)
        .min(u64::from(limit)) as u32;
    let key = format!("tpm:tenant:{tenant}");
    let who = format!("tenant '{tenant}'");
    let taken = super::ingress::take(app, &key, who, limit, "tokens", estimate).await?;
    Ok(taken.then_some(Reserved {
        key,
        rate: Rate { per_minute: limit },
        reserved: estimate,
    }))
}

impl Reserved {
    /// Settle with what the answer `used` (`None`: not reported, the reservation stands), off
    /// the request's path.
    pub(crate) fn settle(self, app: &Arc<App>, used: Option<Usage>) {
        let Some(used) = used else {
            return;
        };
        // Counts past i64 are taken as the most there is, never wrapped into a refund.
        let used = i64::try_from(used.total()).unwrap_or(i64::MAX);
        let delta = used - i64::from(self.reserved);
        let app = app.clone();
        tokio::spawn(async move {
            if let Err(e) = app.state.settle(&self.key, self.rate, delta).await {
                tracing::warn!(error = %e, "a token budget could not be settled");
            }
        });
    }

    /// Give the whole reservation back (the backend was not reached or failed).
    pub(crate) fn refund(self, app: &Arc<App>) {
        self.settle(app, Some(Usage::default()));
    }
}
