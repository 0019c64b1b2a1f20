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
mod limits;
mod proxy;
mod stream;

use crate::auth::Caller;
use crate::backend::Backend;
use crate::chain::{Evaluation, Verdict};
use crate::metrics::Metrics;
use crate::payload::{Context, Rail};
use crate::policy::PolicySet;
use crate::reload::Reloader;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
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
    limits: limits::TenantLimits,
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
            limits: limits::TenantLimits::default(),
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
        self.metrics.evaluation(&eval, ctx.tenant.as_deref());
        eval
    }

    /// Who presents `authorization` (an `Authorization` header value), under `set`'s keys.
    pub(crate) fn authenticate(
        &self,
        set: &PolicySet,
        authorization: Option<&str>,
    ) -> Result<Caller, crate::auth::AuthError> {
        let keys = set.config().auth.as_ref().map(|a| a.keys.as_slice());
        let result = crate::auth::authenticate(keys, authorization);
        if result.is_err() {
            self.metrics.auth_failure();
        }
        result
    }

    /// Count one more request in flight for `caller`'s tenant, or refuse (the tenant's limit).
    pub(crate) fn admit(
        &self,
        set: &PolicySet,
        caller: &Caller,
    ) -> Result<Option<limits::Permit>, ApiError> {
        let max = set
            .tenant(caller.tenant.as_deref())
            .and_then(|t| t.max_concurrent);
        self.limits
            .acquire(caller.tenant_name(), max)
            .map_err(|limit| {
                self.metrics.throttled(caller.tenant_name());
                ApiError::TooManyRequests {
                    tenant: caller.tenant_name().to_string(),
                    limit,
                }
            })
    }
}

/// What the auth layer established for a request: the policy snapshot it is judged by (from
/// authentication to the last rail) and who is calling.
#[derive(Clone)]
pub(crate) struct Authenticated {
    pub set: Arc<PolicySet>,
    pub caller: Caller,
}

/// The tenant a response was served for (for the request metrics).
#[derive(Clone)]
struct TenantLabel(String);

/// The request id a handler works under (set by the middleware).
#[derive(Clone)]
pub(crate) struct RequestId(pub String);

/// The router: the API (proxy and check, behind authentication), health, and the admin
/// endpoints unless they have a listener of their own (`[admin] listen`).
pub fn router(app: Arc<App>, with_admin: bool) -> Router {
    let api = Router::new()
        .route("/v1/chat/completions", post(proxy::chat_completions))
        .route("/v1/check", post(check::check))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            authenticate,
        ));
    let mut router = Router::new().merge(api).merge(health());
    if with_admin {
        router = router.merge(admin(app.clone()));
    }
    finish(router, app)
}

/// The router of a separate admin listener: admin endpoints and health.
pub fn admin_router(app: Arc<App>) -> Router {
    finish(Router::new().merge(admin(app.clone())).merge(health()), app)
}

fn health() -> Router<Arc<App>> {
    Router::new()
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz))
}

fn admin(app: Arc<App>) -> Router<Arc<App>> {
    Router::new()
        .route("/v1/policies", get(admin::policies))
        .route("/v1/admin/reload", post(admin::reload))
        .route("/metrics", get(admin::metrics))
        .layer(axum::middleware::from_fn_with_state(app, require_admin))
}

fn finish(router: Router<Arc<App>>, app: Arc<App>) -> Router {
    router
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            request_id,
        ))
        .with_state(app)
}

fn authorization(request: &Request) -> Option<&str> {
    request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
}

/// Authenticate the caller and admit it under its tenant's concurrency limit, before the body is
/// read. The permit is held until the response body is finished (a whole stream).
async fn authenticate(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    let set = app.policies();
    let caller = match app.authenticate(&set, authorization(&request)) {
        Ok(caller) => caller,
        Err(e) => return ApiError::Unauthorized(e.to_string()).into_response(),
    };
    let tenant = TenantLabel(caller.tenant_name().to_string());
    let permit = match app.admit(&set, &caller) {
        Ok(permit) => permit,
        Err(e) => {
            let mut response = e.into_response();
            response.extensions_mut().insert(tenant);
            return response;
        }
    };
    request
        .extensions_mut()
        .insert(Authenticated { set, caller });
    let mut response = next.run(request).await;
    response.extensions_mut().insert(tenant);
    match permit {
        None => response,
        Some(permit) => response.map(|body| {
            Body::new(Held {
                body,
                _permit: permit,
            })
        }),
    }
}

/// A response body that keeps its tenant's permit until it is finished or dropped.
struct Held {
    body: Body,
    _permit: limits::Permit,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Admin endpoints require an admin key when `[admin] keys_sha256` names any.
async fn require_admin(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let set = app.policies();
    let keys = &set.config().admin.keys;
    if !keys.is_empty() {
        let ok = crate::auth::bearer(authorization(&request))
            .is_ok_and(|token| crate::auth::matches_any(keys, token));
        if !ok {
            app.metrics.auth_failure();
            return ApiError::Unauthorized(
                "admin endpoints require an admin key: send 'Authorization: Bearer <admin key>'"
                    .into(),
            )
            .into_response();
        }
    }
    drop(set);
    next.run(request).await
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
    let tenant = response
        .extensions()
        .get::<TenantLabel>()
        .map_or("", |t| t.0.as_str());
    app.metrics
        .request(&endpoint, tenant, response.status().as_u16());
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

/// The context plugins see: the request id and what authentication established (never anything
/// from the body).
pub(crate) fn context(request_id: &str, caller: &Caller) -> Context {
    Context {
        request_id: request_id.to_string(),
        principal: caller.principal.clone(),
        tenant: caller.tenant.clone(),
        metadata: caller.labels.clone(),
    }
}

/// One line per request for the decision log: the policy revision, each rail's strongest verdict
/// and each plugin's strongest verdict with its total time (a streamed reply runs the output rail
/// once per window: those runs are summed, with a count). Never message content, never reasons
/// (a third-party plugin might quote what it caught).
pub(crate) fn log_decisions(
    request_id: &str,
    endpoint: &str,
    ctx: &Context,
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
    // Faults, each with how it was resolved: what an operator must find first.
    let faults: Vec<String> = evals
        .iter()
        .flat_map(|e| {
            e.decisions.iter().filter_map(move |d| {
                Some(format!(
                    "{}:{}:{}:{}",
                    e.rail,
                    d.plugin,
                    d.fault?.as_str(),
                    d.on_error.map_or("-", |o| o.as_str())
                ))
            })
        })
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
        tenant = ctx.tenant.as_deref().unwrap_or(crate::auth::DEFAULT_TENANT),
        principal = ctx.principal.as_deref().unwrap_or("-"),
        revision = revision.number,
        policy_hash = %&revision.hash[..16],
        rails = %rails.join(","),
        decisions = %decisions.join(","),
        faults = %faults.join(","),
        "decision"
    );
}

/// A JSON response with a status.
pub(crate) fn json_response(status: axum::http::StatusCode, value: serde_json::Value) -> Response {
    (status, axum::Json(value)).into_response()
}
