//! Token budgets (`[tenants.NAME] tokens_per_minute`, and a key's own in its `[[keys]]` entry),
//! reserved then settled. Before the backend is called, a request takes what it may use from
//! each of its buckets in the shared store: an estimate of its prompt (a token per 4 bytes of its
//! body) plus the most it asks the model to write, or [`UNSTATED_OUT`] when it does not say.
//! While a stream runs, what it has written beyond that is taken as it goes; when the answer
//! ends, each bucket is settled to what was used (more taken, or the rest given back).
//!
//! What was used is the backend's `usage` where the answer reports it whole; otherwise (a chat
//! stream without `include_usage`, a client that left before the last event, an empty `usage`)
//! the reported input, or the prompt's estimate, plus the larger of the reported output and a
//! token per 4 bytes of what the model wrote. A request dropped before its answer (the client
//! left during the backend call) gives its reservation back. So a burst overshoots by no more
//! than what its requests in flight write beyond their own reservations, and a stream's excess
//! is seen by the next request within [`CHARGE_EVERY`].

use super::error::ApiError;
use super::App;
use crate::codec::usage::Usage;
use crate::state::key::{self, Owner};
use crate::state::{Rate, Store};
use std::sync::Arc;
use std::time::Duration;

/// The fields in which a request bounds what the model writes.
const MAX_OUT: [&str; 3] = ["max_tokens", "max_completion_tokens", "max_output_tokens"];

/// What a request that does not bound its answer reserves for it.
pub(crate) const UNSTATED_OUT: u64 = 1024;

/// How often a running stream's writing is taken from its buckets.
pub(crate) const CHARGE_EVERY: Duration = Duration::from_millis(250);

/// The most a request's `body` asks the model to write: the largest of its bounds, a number
/// written as a float rounded up (`None`: it states none).
pub(crate) fn max_out(body: &serde_json::Map<String, serde_json::Value>) -> Option<u64> {
    MAX_OUT
        .iter()
        .filter_map(|k| {
            let v = body.get(*k)?;
            v.as_u64().or_else(|| {
                v.as_f64()
                    .filter(|f| f.is_finite() && *f >= 0.0)
                    .map(|f| f.ceil().min(u64::MAX as f64) as u64)
            })
        })
        .max()
}

/// The token budgets a request counts against: its tenant's, and its key's (by the key's id).
#[derive(Clone, Default)]
pub(crate) struct Budgets {
    pub tenant: Option<u32>,
    pub key: Option<(String, u32)>,
}

impl Budgets {
    /// Whether there is any.
    pub(crate) fn any(&self) -> bool {
        self.tenant.is_some() || self.key.is_some()
    }
}

/// One bucket of a reservation: its key, rate, and what is taken from it now.
struct Bucket {
    key: String,
    rate: Rate,
    held: i64,
}

/// A request's reservation, in each of its buckets, to settle when its answer ends; dropped
/// unsettled (the request went away), it is given back.
pub(crate) struct Reserved {
    store: Arc<Store>,
    buckets: Vec<Bucket>,
    /// The prompt's estimate, in tokens.
    prompt: u64,
}

/// Reserve for a request of `tenant` whose body is `body_len` bytes and asks for at most `out`
/// tokens (`None`: unstated), in each of `budgets`. `Ok(None)`: no budget applies. Refused by
/// one, it takes nothing from the others.
pub(crate) async fn reserve(
    app: &Arc<App>,
    tenant: &str,
    principal: Option<&str>,
    budgets: &Budgets,
    body_len: usize,
    out: Option<u64>,
) -> Result<Option<Reserved>, ApiError> {
    let wanted = [
        budgets.tenant.map(|l| {
            (
                key::tokens(Owner::Tenant(tenant)),
                format!("tenant '{tenant}'"),
                l,
            )
        }),
        budgets.key.as_ref().map(|(id, l)| {
            (
                key::tokens(Owner::Key(id)),
                format!("the key of '{}'", principal.unwrap_or("")),
                *l,
            )
        }),
    ];
    let prompt = (body_len as u64).div_ceil(4);
    let mut reserved = Reserved {
        store: app.state.clone(),
        buckets: Vec::new(),
        prompt,
    };
    let estimate = prompt.saturating_add(out.unwrap_or(UNSTATED_OUT));
    for (key, who, limit) in wanted.into_iter().flatten() {
        // A request bigger than the whole budget still gets through from rest (and empties it).
        let estimate = estimate.min(u64::from(limit)) as u32;
        match super::ingress::take(app, &key, who, limit, "tokens", estimate).await {
            Ok(true) => reserved.buckets.push(Bucket {
                key,
                rate: Rate { per_minute: limit },
                held: i64::from(estimate),
            }),
            Ok(false) => {}
            // Dropping what was reserved gives it back.
            Err(refused) => return Err(refused),
        }
    }
    Ok((!reserved.buckets.is_empty()).then_some(reserved))
}

impl Reserved {
    /// What an answer used: `reported` by it when `whole` (the report is final), else the
    /// reported input or the prompt's estimate, plus the larger of the reported output and
    /// `written` bytes' worth.
    pub(crate) fn used(&self, reported: Option<Usage>, written: u64, whole: bool) -> Usage {
        match reported {
            Some(u) if whole && u.output > 0 => u,
            _ => {
                let u = reported.unwrap_or_default();
                Usage {
                    input: if u.input > 0 { u.input } else { self.prompt },
                    output: u.output.max(written.div_ceil(4)),
                }
            }
        }
    }

    /// Take from each bucket what `so_far` has used beyond what it holds (never giving back:
    /// the stream is still running).
    pub(crate) async fn charge(&mut self, so_far: Usage) {
        let used = i64::try_from(so_far.total()).unwrap_or(i64::MAX);
        for b in &mut self.buckets {
            if used > b.held {
                match self.store.settle(&b.key, b.rate, used - b.held).await {
                    Ok(()) => b.held = used,
                    Err(e) => {
                        tracing::warn!(error = %e, "a stream's tokens could not be taken as it ran")
                    }
                }
            }
        }
    }

    /// Settle each bucket to what the answer `used`, off the request's path.
    pub(crate) fn settle(mut self, used: Usage) {
        // Counts past i64 are taken as the most there is, never wrapped into a refund.
        let used = i64::try_from(used.total()).unwrap_or(i64::MAX);
        let (store, buckets) = (self.store.clone(), std::mem::take(&mut self.buckets));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            for b in buckets {
                if let Err(e) = store.settle(&b.key, b.rate, used - b.held).await {
                    tracing::warn!(error = %e, "a token budget could not be settled");
                }
            }
        });
    }

    /// Give the whole reservation back (the backend was not reached, or failed).
    pub(crate) fn refund(self) {
        self.settle(Usage::default());
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if !self.buckets.is_empty() {
            let whole = Reserved {
                store: self.store.clone(),
                buckets: std::mem::take(&mut self.buckets),
                prompt: self.prompt,
            };
            whole.refund();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_largest_bound_is_read_however_it_is_written() {
        let body = |v: serde_json::Value| v.as_object().unwrap().clone();
        assert_eq!(max_out(&body(json!({"max_tokens": 100}))), Some(100));
        assert_eq!(max_out(&body(json!({"max_tokens": 100.5}))), Some(101));
        assert_eq!(max_out(&body(json!({"max_tokens": 1e3}))), Some(1000));
        // Beside each other, the larger (a provider reads one or the other).
        assert_eq!(
            max_out(&body(
                json!({"max_tokens": 10, "max_completion_tokens": 4000})
            )),
            Some(4000)
        );
        assert_eq!(max_out(&body(json!({"max_tokens": -5}))), None);
        assert_eq!(max_out(&body(json!({"max_tokens": "9"}))), None);
        assert_eq!(max_out(&body(json!({}))), None);
    }

    #[test]
    fn what_an_answer_used_when_its_report_is_missing_or_partial() {
        let reserved = Reserved {
            store: Arc::new(Store::Memory(Default::default())),
            buckets: Vec::new(),
            prompt: 50,
        };
        let whole = Usage {
            input: 20,
            output: 7,
        };
        assert_eq!(reserved.used(Some(whole), 4000, true), whole);
        // Anthropic's first event only (the client left): the input it said, the output written.
        let first = Usage {
            input: 200,
            output: 1,
        };
        assert_eq!(
            reserved.used(Some(first), 400, false),
            Usage {
                input: 200,
                output: 100
            }
        );
        // Nothing reported, or an empty usage: the prompt's estimate and what was written.
        let estimated = Usage {
            input: 50,
            output: 3,
        };
        assert_eq!(reserved.used(None, 10, true), estimated);
        assert_eq!(reserved.used(Some(Usage::default()), 10, true), estimated);
    }
}
