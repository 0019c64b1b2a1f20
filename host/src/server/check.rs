//! `POST /v1/check`: run one rail on `{"rail", "messages", "tools"}` without a model. The same
//! chain code path as the proxy; answers the verdict, the edited payload and each plugin's
//! decision with its duration.

use super::error::ApiError;
use super::{context, log_decisions, parse_object, read_body, App, RequestId};
use crate::payload::{Payload, Rail};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::Value;
use std::sync::Arc;

/// The handler.
pub(crate) async fn check(
    State(app): State<Arc<App>>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match handle(&app, &request_id, &headers, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn handle(
    app: &Arc<App>,
    request_id: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let set = app.policies();
    let bytes = read_body(body, set.config().server.max_body_bytes).await?;
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
    let eval = app.check(&set, rail, payload, &context(request_id, headers));
    log_decisions(request_id, "check", set.revision(), &[&eval]);
    let mut out = eval.to_json();
    out["request_id"] = Value::String(request_id.to_string());
    out["revision"] = serde_json::to_value(set.revision()).unwrap_or_default();
    Ok(super::json_response(StatusCode::OK, out))
}
