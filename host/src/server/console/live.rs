//! Live decisions: `GET /v1/admin/decisions` streams decision records as server-sent events,
//! each record a `data:` event, filtered by the stream's query (`door`, `outcome` (a comma
//! list), `tenant`, `acted=true`: only where a policy did more than allow).
//!
//! What a request pays for it: with no stream open, one atomic load. With streams open, a record
//! none of their filters wants is looked at and dropped, and the records streamed are capped
//! ([`RATE`] a second, across streams): a person reads a few records a second, and a daemon
//! under full load makes tens of thousands, each of which would have been written out as JSON
//! and pushed through the stream. The records the cap leaves out are counted, and the stream
//! says how many (`event: capped`), as it says how many a reader too slow to keep up lost
//! (`event: lagged`). The metrics count every request, whatever the cap.

use crate::codec::Door;
use crate::policy::record::{DecisionRecord, Outcome};
use crate::server::error::ApiError;
use crate::server::App;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::broadcast;

/// Records held for a stream between two of its ticks; past it, the stream says how many it
/// lost.
const BACKLOG: usize = 1024;

/// How often a stream sends what was recorded since its last chunk. A stream is not woken by
/// each record: on a busy daemon that was a wake-up across worker threads per request, which
/// cost more than the record (BENCHMARKS.md §46). Each tick also checks whether the daemon is
/// draining: an open stream must not hold shutdown up.
const TICK: Duration = Duration::from_millis(50);

/// Records streamed a second at most, across streams.
pub(crate) const RATE: i64 = 500;

/// Records a tick may stream.
const PER_TICK: i64 = RATE * TICK.as_millis() as i64 / 1000;

/// Every this many ticks without a record (15 s), a comment keeps proxies from closing the
/// stream.
const KEEPALIVE_TICKS: u32 = 300;

/// Which records a stream wants.
#[derive(Debug, Default, Clone, PartialEq)]
struct Filter {
    door: Option<Door>,
    outcomes: Vec<Outcome>,
    tenant: Option<String>,
    acted: bool,
}

/// What a filter looks at, carried with each streamed record so that each stream takes only
/// its own.
#[derive(Clone)]
struct Event {
    door: Door,
    outcome: Outcome,
    tenant: Arc<str>,
    acted: bool,
    /// `data: {record}` and its blank line.
    framed: Bytes,
}

impl Filter {
    /// A stream's query (`door=chat&outcome=refused,throttled&tenant=t&acted=true`).
    fn parse(query: &str) -> Result<Filter, String> {
        let mut filter = Filter::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            // Values are names: what a door, an outcome or a tenant is made of.
            let plain =
                |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | ',');
            if !value.chars().all(plain) {
                return Err(format!("'{key}' must be a plain name"));
            }
            match key {
                "door" => {
                    filter.door =
                        Some(Door::parse(value).ok_or_else(|| format!("no door '{value}'"))?);
                }
                "outcome" => {
                    for o in value.split(',') {
                        filter
                            .outcomes
                            .push(Outcome::parse(o).ok_or_else(|| format!("no outcome '{o}'"))?);
                    }
                }
                "tenant" => filter.tenant = Some(value.to_string()),
                "acted" => filter.acted = value == "true",
                _ => {
                    return Err(format!(
                        "unknown filter '{key}' (door, outcome, tenant, acted)"
                    ))
                }
            }
        }
        Ok(filter)
    }

    fn wants(&self, door: Door, outcome: Outcome, tenant: &str, acted: impl Fn() -> bool) -> bool {
        self.door.is_none_or(|d| d == door)
            && (self.outcomes.is_empty() || self.outcomes.contains(&outcome))
            && self.tenant.as_deref().is_none_or(|t| t == tenant)
            && (!self.acted || acted())
    }

    fn wants_event(&self, e: &Event) -> bool {
        self.wants(e.door, e.outcome, &e.tenant, || e.acted)
    }
}

/// Where decision records go to the open streams.
pub(crate) struct Live {
    sender: broadcast::Sender<Event>,
    /// The open streams' filters, by stream.
    filters: RwLock<Vec<(u64, Filter)>>,
    next_stream: AtomicU64,
    /// Records that may still be streamed before the next tick refills it.
    budget: AtomicI64,
    /// Records the cap left out, ever.
    capped: AtomicU64,
}

impl Default for Live {
    fn default() -> Live {
        Live {
            sender: broadcast::channel(BACKLOG).0,
            filters: RwLock::new(Vec::new()),
            next_stream: AtomicU64::new(0),
            budget: AtomicI64::new(PER_TICK),
            capped: AtomicU64::new(0),
        }
    }
}

impl Live {
    /// Send `record` to the open streams that want it, if any, within the cap.
    pub(crate) fn send(&self, record: &DecisionRecord) {
        if self.sender.receiver_count() == 0 {
            return;
        }
        let wanted = self
            .filters
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|(_, f)| {
                f.wants(record.door, record.outcome, &record.tenant, || {
                    record.acted()
                })
            });
        if !wanted {
            return;
        }
        if self.budget.fetch_sub(1, Ordering::Relaxed) <= 0 {
            self.capped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Written directly (serde's way of writing it cost a request 6 % more instructions).
        let mut framed = Vec::with_capacity(1024);
        framed.extend_from_slice(b"data: ");
        record.write_json(&mut framed);
        framed.extend_from_slice(b"\n\n");
        // No receiver left since the count: nobody to tell.
        let _ = self.sender.send(Event {
            door: record.door,
            outcome: record.outcome,
            tenant: record.tenant.as_str().into(),
            acted: record.acted(),
            framed: Bytes::from(framed),
        });
    }

    fn open(self: &Arc<Self>, filter: Filter) -> Subscription {
        let id = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let receiver = self.sender.subscribe();
        self.filters
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, filter.clone()));
        Subscription {
            id,
            live: self.clone(),
            receiver,
            filter,
            capped_seen: self.capped.load(Ordering::Relaxed),
        }
    }
}

/// One stream's place among the open ones; its filter is taken out when it ends.
struct Subscription {
    id: u64,
    live: Arc<Live>,
    receiver: broadcast::Receiver<Event>,
    filter: Filter,
    capped_seen: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.live
            .filters
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _)| *id != self.id);
    }
}

/// `GET /v1/admin/decisions`: the records the query's filter wants, from now on. Ends when the
/// daemon starts draining.
pub(crate) async fn decisions(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    let filter = match Filter::parse(query.as_deref().unwrap_or("")) {
        Ok(f) => f,
        Err(message) => return ApiError::bad_request(message, None).into_response(),
    };
    // One timer for the stream's life, not one per chunk.
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + TICK, TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stream = Reader {
        subscription: app.live().open(filter),
        tick,
        ticks: 0,
        app,
    };
    // Said at once, so a reader knows the stream is live before any record.
    let hello = Bytes::from(format!(": live decisions, at most {RATE} a second\n\n"));
    let events = futures_util::stream::once(async { Ok(hello) }).chain(
        futures_util::stream::unfold(stream, |mut stream| async move {
            let chunk = stream.next().await?;
            Some((Ok::<_, std::convert::Infallible>(chunk), stream))
        }),
    );
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// One open stream.
struct Reader {
    subscription: Subscription,
    tick: tokio::time::Interval,
    ticks: u32,
    app: Arc<App>,
}

impl Reader {
    /// The next chunk: every record for this stream since the last one (one alone sent as it
    /// was framed, with no copy), what the cap and a slow reader left out, or a keepalive;
    /// `None` when the daemon drains.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            self.tick.tick().await;
            if self.app.draining() {
                return None;
            }
            let live = &self.subscription.live;
            live.budget.store(PER_TICK, Ordering::Relaxed);
            let mut chunks = Vec::new();
            loop {
                match self.subscription.receiver.try_recv() {
                    Ok(event) if self.subscription.filter.wants_event(&event) => {
                        chunks.push(event.framed)
                    }
                    Ok(_) => {}
                    Err(broadcast::error::TryRecvError::Lagged(n)) => {
                        chunks.push(notice("lagged", n))
                    }
                    Err(broadcast::error::TryRecvError::Empty) => break,
                    Err(broadcast::error::TryRecvError::Closed) => return None,
                }
            }
            let capped = live.capped.load(Ordering::Relaxed);
            if capped > self.subscription.capped_seen {
                chunks.push(notice("capped", capped - self.subscription.capped_seen));
                self.subscription.capped_seen = capped;
            }
            if chunks.len() == 1 {
                self.ticks = 0;
                return chunks.pop();
            }
            if !chunks.is_empty() {
                self.ticks = 0;
                return Some(Bytes::from(chunks.concat()));
            }
            self.ticks += 1;
            if self.ticks.is_multiple_of(KEEPALIVE_TICKS) {
                return Some(Bytes::from_static(b": keepalive\n\n"));
            }
        }
    }
}

fn notice(event: &str, skipped: u64) -> Bytes {
    Bytes::from(format!(
        "event: {event}\ndata: {{\"skipped\":{skipped}}}\n\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_a_filter_or_a_clear_error() {
        assert_eq!(Filter::parse(""), Ok(Filter::default()));
        let f = Filter::parse("door=chat&outcome=refused,throttled&tenant=t-1&acted=true").unwrap();
        assert_eq!(
            f,
            Filter {
                door: Some(Door::Chat),
                outcomes: vec![Outcome::Refused, Outcome::Throttled],
                tenant: Some("t-1".into()),
                acted: true,
            }
        );
        assert!(f.wants(Door::Chat, Outcome::Refused, "t-1", || true));
        assert!(!f.wants(Door::Chat, Outcome::Served, "t-1", || true));
        assert!(!f.wants(Door::Messages, Outcome::Refused, "t-1", || true));
        assert!(!f.wants(Door::Chat, Outcome::Refused, "t-2", || true));
        assert!(!f.wants(Door::Chat, Outcome::Refused, "t-1", || false));
        for (query, says) in [
            ("door=nope", "no door"),
            ("outcome=served,nope", "no outcome"),
            ("tenant=%3Cx%3E", "plain name"),
            ("colour=red", "unknown filter"),
        ] {
            let e = Filter::parse(query).unwrap_err();
            assert!(e.contains(says), "{query}: {e}");
        }
    }
}
