//! `POST /v1/check`: run one rail on `{"rail", "messages", "tools"}` without a model. The same
//! way in and the same chains as the proxy; answers the verdict, the edited payload and each
//! plugin's decision with its duration. Nothing in the body goes unjudged: a message's other
//! fields are judged with it, and any other string of the body is one of the payload's
//! `fields` (answered by path).

use super::error::ApiError;
use super::ingress;
use super::{App, RequestId};
use crate::codec::chat::{self, Chat};
use crate::codec::closed::{self, Shape};
use crate::codec::{Codec, Door};
use crate::model::{Payload, Rail};
use crate::policy::record::Outcome;
use crate::rails::RequestScope;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Extension;
use serde_json::Value;
use std::sync::Arc;

/// The body's keys the check maps; the rest are judged as the payload's fields.
const CHECK: Shape = Shape {
    mapped: &["messages", "tools"],
    inert: &[("model", closed::Inert::Word)],
    known: &[],
};

/// The handler.
pub(crate) async fn check(
    State(app): State<Arc<App>>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    ingress::routed(
        &app,
        Door::Check,
        request_id,
        &headers,
        |mut scope| async move {
            match handle(&mut scope, body).await {
                Ok(out) => {
                    scope.finish(200, Outcome::Served);
                    super::json_response(StatusCode::OK, out)
                }
                Err(error) => {
                    let (status, _, _) = error.parts();
                    scope.finish(status.as_u16(), error.outcome());
                    error.into_response_for(Door::Check)
                }
            }
        },
    )
    .await
}

async fn handle(scope: &mut RequestScope, body: Body) -> Result<Value, ApiError> {
    let bytes = ingress::read_body(scope, body).await?;
    let mut body = super::proxy::parse_object(&bytes)?;
    let rail = match body.remove("rail") {
        Some(Value::String(s)) => Rail::parse(&s).ok_or_else(|| {
            ApiError::bad_request(
                format!("unknown rail '{s}' (expected {})", Rail::EXPECTED),
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
    let mut payload = Payload::from_openai_parts(body.get("messages").cloned(), body.get("tools"))
        .map_err(|e| ApiError::bad_request(e.to_string(), Some(e.path)))?;
    // Judged as the chat door judges a request (`codec::closed`): a message's text outside its
    // content as part of it, and the body's other strings (top-level keys, declarations' own
    // fields) as its fields.
    payload.fields = closed::fields(&body, &CHECK);
    payload.fields.extend(chat::tool_fields(&body));
    for m in &mut payload.messages {
        closed::fold(m, &Chat::MESSAGE, &Chat::CALL);
    }
    let mut eval = scope.check(rail, payload);
    for m in &mut eval.payload.messages {
        closed::unfold(m);
    }
    let mut out = eval.to_json();
    if !eval.payload.fields.is_empty() {
        out["payload"]["fields"] = serde_json::to_value(&eval.payload.fields).unwrap_or_default();
    }
    out["request_id"] = Value::String(scope.request_id().to_string());
    out["caller"] = serde_json::json!({
        "principal": scope.ctx().principal,
        "tenant": scope.tenant_name(),
    });
    out["revision"] = serde_json::to_value(scope.set().revision()).unwrap_or_default();
    Ok(out)
}
