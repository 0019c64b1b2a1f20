//! The daemon's HTTP face: the OpenAI-compatible proxy, the check API and the admin endpoints,
//! all sharing one live [`PolicySet`] and one chain code path.
//!
//! - `proxy`: `POST /v1/chat/completions`, non-streaming (rails around one backend call);
//! - `stream`: the streaming variant (SSE), with a hold-back window on the output rail;
//! - `check`: `POST /v1/check`, one rail without a model;
//! - `admin`: `/v1/policies`, `/v1/admin/reload`, `/healthz`, `/readyz`, `/metrics`;
//! - `grpc`: the same checks over gRPC (`railyard.v1.PolicyService`), health and reflection;
//! - `error`: every failure mapped to an OpenAI-style error response.

mod admin;
mod check;
pub mod error;
pub mod grpc;
mod proxy;
mod stream;

use crate::backend::Backend;
use crate::chain::{Evaluation, Verdict};
use crate::metrics::Metrics;
use crate::payload::{Context, Rail};
use crate::policy::PolicySet;
use crate::reload::Reloader;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use error::ApiError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Header carrying the request id, on every response.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Shared state of a running daemon.
pub struct App {
    reloader: Arc<Reloader>,
    backend: Backend,
    metrics: Arc<Metrics>,
    id_prefix: String,
    next_id: AtomicU64,
}

impl App {
    /// A daemon serving the policy sets `reloader` publishes, in front of `backend`.
    pub fn new(reloader: Arc<Reloader>, backend: Backend, metrics: Arc<Metrics>) -> App {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        App {
            reloader,
            backend,
            metrics,
            id_prefix: format!(
                "{:08x}",
                (nanos as u64 ^ (std::process::id() as u64) << 32) as u32
            ),
            next_id: AtomicU64::new(1),
        }
    }

    /// The policy set new requests use. A request keeps the snapshot it started with.
    pub fn policies(&self) -> Arc<PolicySet> {
        self.reloader.current()
    }

    /// The reloader.
    pub fn reloader(&self) -> &Arc<Reloader> {
        &self.reloader
    }

    /// Metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub(crate) fn new_request_id(&self) -> String {
        format!(
            "ry-{}-{:06x}",
            self.id_prefix,
            self.next_id.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Run one rail's chain, recording metrics. Plugins run inline on the async worker: a pooled
    /// call takes microseconds and every call is bounded by its plugin's CPU deadline, while
    /// handing each chain to a blocking thread (`block_in_place`) was measured to cost about a
    /// quarter of the proxy's throughput.
    pub(crate) fn check(
        &self,
        set: &PolicySet,
        rail: Rail,
        payload: crate::payload::Payload,
        ctx: &Context,
    ) -> Evaluation {
        let eval = set.check(rail, payload, ctx);
        self.metrics.evaluation(&eval);
        eval
    }
}

/// The request id a handler works under (set by the middleware).
#[derive(Clone)]
pub(crate) struct RequestId(pub String);

/// The router with every endpoint.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(proxy::chat_completions))
        .route("/v1/check", post(check::check))
        .route("/v1/policies", get(admin::policies))
        .route("/v1/admin/reload", post(admin::reload))
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz))
        .route("/metrics", get(admin::metrics))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            request_id,
        ))
        .with_state(app)
}

async fn not_found(request: Request) -> ApiError {
    ApiError::NotFound(format!("{} {}", request.method(), request.uri().path()))
}

/// Give every request an id (the caller's `x-request-id` when it is sane), echo it on the
/// response, and count the request.
async fn request_id(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_string)
        .unwrap_or_else(|| app.new_request_id());
    let endpoint = match request.uri().path() {
        p @ ("/v1/chat/completions"
        | "/v1/check"
        | "/v1/policies"
        | "/healthz"
        | "/readyz"
        | "/metrics") => p.to_string(),
        _ => "other".to_string(),
    };
    request.extensions_mut().insert(RequestId(id.clone()));
    let mut response = next.run(request).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    app.metrics.request(&endpoint, response.status().as_u16());
    response
}

/// Read a request body up to the configured limit (413 past it).
pub(crate) async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(e) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
                || e.to_string().contains("length limit");
            if too_large {
                Err(ApiError::TooLarge { limit })
            } else {
                Err(ApiError::bad_request(
                    format!("could not read the request body: {e}"),
                    None,
                ))
            }
        }
    }
}

/// Parse a JSON object body.
pub(crate) fn parse_object(
    bytes: &[u8],
) -> Result<serde_json::Map<String, serde_json::Value>, ApiError> {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request(
            "the request body must be a JSON object",
            None,
        )),
        Err(e) => Err(ApiError::bad_request(
            format!("the request body is not valid JSON: {e}"),
            None,
        )),
    }
}

/// The caller's context. Until callers authenticate (API keys), there is no principal: it must
/// never be taken from the body.
pub(crate) fn context(request_id: &str, _headers: &HeaderMap) -> Context {
    Context {
        request_id: request_id.to_string(),
        principal: None,
        tenant: None,
        metadata: Vec::new(),
    }
}

/// One line per request for the decision log: the policy revision, each rail's strongest verdict
/// and each plugin's strongest verdict with its total time (a streamed reply runs the output rail
/// once per window: those runs are summed, with a count). Never message content, never reasons
/// (a third-party plugin might quote what it caught).
pub(crate) fn log_decisions(
    request_id: &str,
    endpoint: &str,
    revision: &crate::policy::Revision,
    evals: &[&Evaluation],
) {
    if !tracing::enabled!(target: "railyard::decision", tracing::Level::INFO) {
        return;
    }
    let mut rails: Vec<(Rail, Verdict, u32)> = Vec::new();
    let mut plugins: Vec<(Rail, &str, crate::chain::Decided, u32, std::time::Duration)> =
        Vec::new();
    for e in evals {
        match rails.iter_mut().find(|r| r.0 == e.rail) {
            Some(r) => {
                r.1 = r.1.max(e.verdict);
                r.2 += 1;
            }
            None => rails.push((e.rail, e.verdict, 1)),
        }
        for d in &e.decisions {
            match plugins
                .iter_mut()
                .find(|p| p.0 == e.rail && p.1 == d.plugin)
            {
                Some(p) => {
                    p.2 = p.2.max(d.verdict);
                    p.3 += 1;
                    p.4 += d.duration_us;
                }
                None => plugins.push((e.rail, &d.plugin, d.verdict, 1, d.duration_us)),
            }
        }
    }
    let times = |n: u32| {
        if n > 1 {
            format!("x{n}")
        } else {
            String::new()
        }
    };
    let rails: Vec<String> = rails
        .iter()
        .map(|(rail, v, n)| format!("{rail}={}{}", v.as_str(), times(*n)))
        .collect();
    let decisions: Vec<String> = plugins
        .iter()
        .map(|(rail, plugin, v, n, t)| {
            format!(
                "{rail}:{plugin}:{}{}:{}us",
                v.as_str(),
                times(*n),
                t.as_micros()
            )
        })
        .collect();
    tracing::info!(
        target: "railyard::decision",
        request_id,
        endpoint,
        revision = revision.number,
        policy_hash = %&revision.hash[..16],
        rails = %rails.join(","),
        decisions = %decisions.join(","),
        "decision"
    );
}

/// A JSON response with a status.
pub(crate) fn json_response(status: axum::http::StatusCode, value: serde_json::Value) -> Response {
    (status, axum::Json(value)).into_response()
}
