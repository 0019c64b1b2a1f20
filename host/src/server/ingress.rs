//! The way in, written once for every door, the check API and gRPC: take the policy snapshot,
//! open the request's scope (so even a refused request gets its decision record), authenticate
//! the caller, admit it under its tenant's concurrency limit, and read the body within the
//! tenant's size limit; for the HTTP doors, the whole envelope around a request ([`envelope`]).
//! The permit travels with the response body and is released when the body ends (a whole
//! stream counts for its whole length).

use super::error::ApiError;
use super::limits::Permit;
use super::{App, TenantLabel};
use crate::codec::Door;
use crate::rails::RequestScope;
use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use std::sync::Arc;

/// A request past the way in.
pub(crate) struct Admitted {
    /// Its scope: snapshot, caller, record.
    pub scope: RequestScope,
    /// Its place under the tenant's concurrency limit, if the tenant has one.
    pub permit: Option<Permit>,
}

/// A refused request: the scope (its record written with the error's status) and the error.
pub(crate) type Refused = (RequestScope, ApiError);

/// The caller's key: `Authorization: Bearer`, or Anthropic's `x-api-key` on `/v1/messages`.
pub(crate) fn authorization(headers: &HeaderMap, door: Door) -> Option<String> {
    if let Some(v) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        return Some(v.to_string());
    }
    if door == Door::Messages {
        if let Some(key) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
            return Some(format!("Bearer {key}"));
        }
    }
    None
}

/// Open a scope for a request on `door`, authenticate and admit its caller (its tenant's
/// concurrency limit in this process, its rate limit in the shared store). `headers`: the
/// caller's HTTP headers (a trace's parent), where there are some.
pub(crate) async fn admit(
    app: &Arc<App>,
    door: Door,
    request_id: String,
    authorization: Option<&str>,
    headers: Option<&axum::http::HeaderMap>,
) -> Result<Admitted, Box<Refused>> {
    let set = app.policies();
    let mut scope = RequestScope::new(app.observer(), set.clone(), door, request_id);
    if let Some(telemetry) = app.telemetry() {
        scope.set_trace(telemetry.request(door, headers.unwrap_or(&Default::default())));
    }
    let keys = set.config().auth.as_ref().map(|a| a.keys.as_slice());
    let caller = match crate::auth::authenticate(keys, authorization) {
        Ok(caller) => caller,
        Err(e) => {
            app.metrics().auth_failure();
            return Err(Box::new((scope, e.into())));
        }
    };
    scope.set_caller(&caller);
    let tenant = set.tenant(caller.tenant.as_deref());
    let max = tenant.and_then(|t| t.max_concurrent);
    let permit = match concurrent(app, caller.tenant_name(), max).await {
        Ok(permit) => permit,
        Err(error) => {
            app.metrics().throttled(caller.tenant_name());
            return Err(Box::new((scope, error)));
        }
    };
    // Only a caller with a rate limit (its tenant's, its key's) touches the store.
    let key_id = caller.requests_per_minute.and_then(|_| caller.key_id());
    let limits = [
        tenant
            .and_then(|t| t.requests_per_minute)
            .map(|l| (Limited::Tenant(caller.tenant_name()), l)),
        caller
            .requests_per_minute
            .zip(key_id.as_deref())
            .map(|(l, id)| {
                (
                    Limited::Key(id, caller.principal.as_deref().unwrap_or("")),
                    l,
                )
            }),
    ];
    for (who, limit) in limits.into_iter().flatten() {
        if let Err(error) = rate(app, who, limit).await {
            app.metrics().throttled(caller.tenant_name());
            return Err(Box::new((scope, error)));
        }
    }
    Ok(Admitted { scope, permit })
}

/// A place for a request under its tenant's concurrency limit `max` (`None`: no limit):
/// counted here with the memory store, leased in the shared one with Redis.
async fn concurrent(
    app: &App,
    tenant: &str,
    max: Option<usize>,
) -> Result<Option<Permit>, ApiError> {
    let over = |limit| ApiError::TooManyRequests {
        tenant: tenant.to_string(),
        limit,
    };
    let Some(max) = max else {
        return Ok(None);
    };
    if !app.state.shared() {
        return app.limits.acquire(tenant, Some(max)).map_err(over);
    }
    // The lease is named by an id this daemon makes, never the caller's `x-request-id`: two
    // requests sent with one id would otherwise hold one place between them.
    let id = app.new_request_id();
    match super::limits::lease(&app.state, tenant, max, &id).await {
        Ok(Some(permit)) => Ok(Some(permit)),
        Ok(None) => Err(over(max)),
        Err(unavailable) => unavailable_store(app, unavailable).map(|_| None),
    }
}

/// Whose rate a request counts against.
#[derive(Clone, Copy)]
enum Limited<'a> {
    /// The caller's tenant (`[tenants.NAME] requests_per_minute`).
    Tenant(&'a str),
    /// The caller's key, by its id, and its principal (`requests_per_minute` in its `[[keys]]`
    /// entry).
    Key(&'a str, &'a str),
}

/// Take one request from `who`'s bucket of `limit` a minute.
async fn rate(app: &App, who: Limited<'_>, limit: u32) -> Result<(), ApiError> {
    use crate::state::key::{requests, Owner};
    let (key, name) = match who {
        Limited::Tenant(t) => (requests(Owner::Tenant(t)), format!("tenant '{t}'")),
        Limited::Key(id, p) => (requests(Owner::Key(id)), format!("the key of '{p}'")),
    };
    take(app, &key, name, limit, "requests", 1).await.map(drop)
}

/// Take `cost` from bucket `key` of `limit` `unit` a minute (`who`'s, as the refusal names it):
/// whether it was taken (`false`: the store could not answer and `on_unavailable = "open"` let
/// the request through untaken), or the refusal (over the limit, or the store unavailable).
pub(crate) async fn take(
    app: &App,
    key: &str,
    who: String,
    limit: u32,
    unit: &'static str,
    cost: u32,
) -> Result<bool, ApiError> {
    use crate::state::{Rate, Taken};
    match app.state.take(key, Rate { per_minute: limit }, cost).await {
        Ok(Taken::Yes) => Ok(true),
        Ok(Taken::No { retry_after }) => Err(ApiError::RateLimited {
            who,
            limit,
            unit,
            // Whole seconds, rounded up: a client that waits that long gets in.
            retry_after: retry_after.as_micros().div_ceil(1_000_000).max(1) as u64,
        }),
        Err(unavailable) => unavailable_store(app, unavailable),
    }
}

/// A limit the store could not check: `Ok(false)` (admitted, nothing taken) with
/// `on_unavailable = "open"`, else the refusal.
fn unavailable_store(app: &App, unavailable: crate::state::Unavailable) -> Result<bool, ApiError> {
    if app.state.fails_open() {
        tracing::warn!(error = %unavailable, "state store unavailable: request admitted without its limit (on_unavailable = \"open\")");
        Ok(false)
    } else {
        tracing::warn!(error = %unavailable, "state store unavailable: request refused (on_unavailable = \"closed\")");
        Err(ApiError::StateUnavailable)
    }
}

/// A door's envelope, written once for every HTTP door: authenticate and admit the caller (a
/// refusal answered in the door's shape, its record written), `serve` the request in its scope
/// (which finishes it), and send the response with the tenant's permit held. The tenant it was
/// served for comes back with it, for the request metrics.
pub(crate) async fn envelope<F, Fut>(
    app: &Arc<App>,
    door: Door,
    request_id: String,
    headers: &HeaderMap,
    serve: F,
) -> (Response, TenantLabel)
where
    F: FnOnce(RequestScope) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let auth = authorization(headers, door);
    match admit(app, door, request_id, auth.as_deref(), Some(headers)).await {
        Ok(Admitted { scope, permit }) => {
            let tenant = TenantLabel(scope.tenant_name().to_string());
            (hold(permit, serve(scope).await), tenant)
        }
        Err(refused) => {
            let tenant = TenantLabel(refused.0.record().tenant.clone());
            (refuse(door, *refused), tenant)
        }
    }
}

/// [`envelope`] for a handler under the router: the tenant rides in the response.
pub(crate) async fn routed<F, Fut>(
    app: &Arc<App>,
    door: Door,
    request_id: String,
    headers: &HeaderMap,
    serve: F,
) -> Response
where
    F: FnOnce(RequestScope) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let (mut response, tenant) = envelope(app, door, request_id, headers, serve).await;
    response.extensions_mut().insert(tenant);
    response
}

/// Read a request body up to the caller's tenant's limit (413 past it).
pub(crate) async fn read_body(scope: &RequestScope, body: Body) -> Result<Bytes, ApiError> {
    let limit = scope.set().max_body_bytes(scope.ctx().tenant.as_deref());
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

/// Answer a refused request on `door`: its record gets the error's status.
fn refuse(door: Door, refused: Refused) -> Response {
    let (mut scope, error) = refused;
    let (status, _, _) = error.parts();
    scope.finish(status.as_u16(), error.outcome());
    error.into_response_for(door)
}

/// Send `response` with `permit` held until its body has been sent (or dropped).
fn hold(permit: Option<Permit>, response: Response) -> Response {
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
    _permit: Permit,
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
