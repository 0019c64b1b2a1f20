//! `POST /v1/check`: run one rail on `{"rail", "messages", "tools"}` without a model. The same
//! chain code path as the proxy; answers the verdict, the edited payload and each plugin's
//! decision with its duration.

use super::error::ApiError;
use super::{context, log_decisions, parse_object, read_body, App, Authenticated, RequestId};
use crate::payload::{Payload, Rail};
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::Value;
use std::sync::Arc;

/// The handler.
pub(crate) async fn check(
    State(app): State<Arc<App>>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    Extension(auth): Extension<Authenticated>,
    body: Body,
) -> Response {
    match handle(&app, &request_id, auth, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn handle(
    app: &Arc<App>,
    request_id: &str,
    Authenticated { set, caller }: Authenticated,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = read_body(body, set.max_body_bytes(caller.tenant.as_deref())).await?;
    let mut body = parse_object(&bytes)?;
    let rail = match body.remove("rail") {
        Some(Value::String(s)) => Rail::parse(&s).ok_or_else(|| {
            ApiError::bad_request(
                format!("unknown rail '{s}' (expected input, tool_result, tool_call or output)"),
                Some("rail".into()),
            )
        })?,
        Some(_) => {
            return Err(ApiError::bad_request(
                "'rail' must be a string",
                Some("rail".into()),
            ))
        }
        None => {
            return Err(ApiError::bad_request(
                "'rail' is required",
                Some("rail".into()),
            ))
        }
    };
    let payload = Payload::from_openai(&Value::Object(body))
        .map_err(|e| ApiError::bad_request(e.to_string(), Some(e.path)))?;
    let ctx = context(request_id, &caller);
    let eval = app.check(&set, rail, payload, &ctx);
    log_decisions(request_id, "check", &ctx, set.revision(), &[&eval]);
    let mut out = eval.to_json();
    out["request_id"] = Value::String(request_id.to_string());
    out["caller"] =
        serde_json::json!({"principal": caller.principal, "tenant": caller.tenant_name()});
    out["revision"] = serde_json::to_value(set.revision()).unwrap_or_default();
    Ok(super::json_response(StatusCode::OK, out))
}
