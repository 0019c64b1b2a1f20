//! `/v1/admin/approvals/{id}`: an approver sees an approval request (`GET`) and grants or refuses
//! it (`POST {"decision": "grant"}` or `"refuse"`), once (`crate::approvals`).
//!
//! Who may: the admin key (`[admin] keys_sha256`), for any tenant; or an API key labelled
//! `approver = "true"`, for its own tenant's requests only (another tenant's are not found). With
//! no admin key configured, the admin endpoints are open, and so is this one.

use super::App;
use crate::approvals::{self, Decided};
use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::Arc;

/// Who is deciding: `tenant` `None` for the admin.
struct Approver {
    by: String,
    tenant: Option<String>,
}

/// The caller as an approver, if it is one.
fn approver(app: &App, request: &Request) -> Option<Approver> {
    if super::is_admin(app, request) {
        return Some(Approver {
            by: "admin".into(),
            tenant: None,
        });
    }
    let set = app.policies();
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let keys = set.config().auth.as_ref().map(|a| a.keys.as_slice());
    if let (Some(_), Ok(caller)) = (keys, crate::auth::authenticate(keys, presented)) {
        if caller
            .labels
            .iter()
            .any(|(k, v)| k == "approver" && v == "true")
        {
            return Some(Approver {
                by: caller.principal.clone().unwrap_or_default(),
                tenant: Some(caller.tenant_name().to_string()),
            });
        }
    }
    None
}

/// The 401 a caller that is no approver gets.
fn unauthorized(app: &App) -> Response {
    app.metrics.auth_failure();
    super::json_response(
        StatusCode::UNAUTHORIZED,
        crate::codec::error::openai(
            "approvals take the admin key, or an API key labelled approver = \"true\" (for its own tenant)",
            "invalid_request_error",
            "invalid_api_key",
            None,
        ),
    )
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    super::json_response(
        status,
        crate::codec::error::openai(message, "invalid_request_error", code, None),
    )
}

fn unavailable(e: crate::state::Unavailable) -> Response {
    super::json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        crate::codec::error::openai(&e.to_string(), "server_error", "state_unavailable", None),
    )
}

fn gone() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such approval request: it expired, or never was",
    )
}

/// `GET /v1/admin/approvals`: the undecided requests of the approver key's tenant, or (the admin
/// key) of `?tenant=` (the default tenant without it), oldest first, arguments included.
pub(crate) async fn list(State(app): State<Arc<App>>, request: Request) -> Response {
    let Some(who) = approver(&app, &request) else {
        return unauthorized(&app);
    };
    let tenant = match tenant_asked(&who, &request) {
        Ok(t) => t,
        Err(refused) => return *refused,
    };
    let set = app.policies();
    let (store, ttl) = (set.store().clone(), set.config().approvals_ttl);
    drop(set);
    match approvals::pending(&store, &tenant, ttl).await {
        Err(e) => unavailable(e),
        Ok(list) => {
            super::json_response(StatusCode::OK, json!({"tenant": tenant, "approvals": list}))
        }
    }
}

/// The tenant a listing is of: the approver key's own, or (the admin key) `?tenant=` (the
/// default tenant without it).
fn tenant_asked(who: &Approver, request: &Request) -> Result<String, Box<Response>> {
    // Tenant names are config keys: no escapes to decode.
    let asked = request
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("tenant="));
    match (&who.tenant, asked) {
        (Some(own), Some(other)) if own != other => Err(Box::new(error(
            StatusCode::FORBIDDEN,
            "other_tenant",
            "an approver key lists its own tenant's requests only",
        ))),
        (Some(own), _) => Ok(own.clone()),
        (None, asked) => Ok(asked.unwrap_or(crate::auth::DEFAULT_TENANT).to_string()),
    }
}

/// `GET /v1/admin/pins`: the tenant's pinned tools (as `list` picks the tenant), per source (an
/// MCP server, or `app:<principal>` on the model doors): each tool's pin and the source's latest
/// changes; and the changes waiting for a person (`pending`: approval requests of `pins`, with
/// their diffs).
pub(crate) async fn pins(State(app): State<Arc<App>>, request: Request) -> Response {
    let Some(who) = approver(&app, &request) else {
        return unauthorized(&app);
    };
    let tenant = match tenant_asked(&who, &request) {
        Ok(t) => t,
        Err(refused) => return *refused,
    };
    let set = app.policies();
    let (store, ttl) = (set.store().clone(), set.config().approvals_ttl);
    let modes: Vec<Value> = set
        .config()
        .mcp
        .servers
        .iter()
        .map(|s| json!({"server": s.name, "mode": set.config().pins_mcp(&tenant, &s.name).0.as_str()}))
        .collect();
    let models = set.config().pins_models(&tenant).0.as_str();
    let pins = set.clone();
    drop(set);
    let listed = async {
        let mut sources = Vec::new();
        for source in pins.pins().sources(&tenant).await? {
            let record = pins.pins().record(&tenant, &source).await?;
            sources.push(json!({
                "source": source,
                "tools": record.tools,
                "changes": record.changes,
            }));
        }
        let pending: Vec<approvals::Request> = approvals::pending(&store, &tenant, ttl)
            .await?
            .into_iter()
            .filter(|r| r.plugin == crate::pins::PLUGIN)
            .collect();
        Ok::<_, crate::state::Unavailable>((sources, pending))
    };
    match listed.await {
        Err(e) => unavailable(e),
        Ok((sources, pending)) => super::json_response(
            StatusCode::OK,
            json!({"tenant": tenant, "modes": {"mcp": modes, "models": models}, "sources": sources, "pending": pending}),
        ),
    }
}

/// `GET`: the request as it stands, with the arguments the call would run with.
pub(crate) async fn show(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let Some(who) = approver(&app, &request) else {
        return unauthorized(&app);
    };
    if !approvals::valid_id(&id) {
        return gone();
    }
    let store = app.policies().store().clone();
    match approvals::get(&store, &id).await {
        Err(e) => unavailable(e),
        Ok(Some(r)) if who.tenant.as_deref().is_none_or(|t| t == r.tenant) => {
            super::json_response(StatusCode::OK, serde_json::to_value(&r).unwrap_or_default())
        }
        Ok(_) => gone(),
    }
}

/// `POST {"decision": "grant" | "refuse"}`: decide, once.
pub(crate) async fn decide(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let Some(who) = approver(&app, &request) else {
        return unauthorized(&app);
    };
    let body = match axum::body::to_bytes(request.into_body(), 4096).await {
        Ok(b) => b,
        Err(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "the body is at most 4096 bytes: {\"decision\": \"grant\"} or {\"decision\": \"refuse\"}",
            )
        }
    };
    let decision = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["decision"].as_str().map(str::to_string));
    let yes = match decision.as_deref() {
        Some("grant") => true,
        Some("refuse") => false,
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "send {\"decision\": \"grant\"} or {\"decision\": \"refuse\"}",
            )
        }
    };
    if !approvals::valid_id(&id) {
        return gone();
    }
    let store = app.policies().store().clone();
    match approvals::decide(&store, &id, yes, &who.by, who.tenant.as_deref()).await {
        Err(e) => unavailable(e),
        Ok(Decided::Gone) => gone(),
        Ok(Decided::Now(r)) => {
            let event = if yes {
                "decided_grant"
            } else {
                "decided_refuse"
            };
            app.metrics.approval(&r.tenant, event);
            tracing::info!(
                approval = %r.id,
                tenant = %r.tenant,
                plugin = %r.plugin,
                rule = %r.rule,
                tool = %r.tool,
                decision = if yes { "granted" } else { "refused" },
                by = %r.decided_by.as_deref().unwrap_or_default(),
                "approval decided"
            );
            super::json_response(StatusCode::OK, serde_json::to_value(&r).unwrap_or_default())
        }
        Ok(Decided::Unshown(r)) => super::json_response(
            StatusCode::CONFLICT,
            json!({"error": {"message": format!("this call's arguments are {} bytes, more than the {} an approver is shown: it cannot be granted, only refused", r.arguments_bytes, approvals::MAX_ARGUMENTS), "type": "invalid_request_error", "code": "arguments_not_shown"}, "approval": r}),
        ),
        Ok(Decided::Before(r)) => super::json_response(
            StatusCode::CONFLICT,
            json!({"error": {"message": "this approval request was decided before", "type": "invalid_request_error", "code": "already_decided"}, "approval": r}),
        ),
    }
}
