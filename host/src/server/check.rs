//! `POST /v1/check`: run one rail on `{"rail", "messages", "tools"}` without a model. The same
//! way in and the same chains as the proxy; answers the verdict, the edited payload and each
//! plugin's decision with its duration. Nothing in the body goes unjudged: a message's other
//! fields are judged with it, and any other string of the body is one of the payload's
//! `fields` (answered by path).
//!
//! Options, taken out of the body before it is read:
//! - `"door": "chat" | "responses" | "messages"`: the rest of the body is a request in that
//!   door's shape, read by its codec, and plugins see that door in their context;
//! - `"partial": true` (the output rail): the reply is a streamed text still arriving;
//! - `"explain": true`: also the payload after each plugin's edit (`steps`), what the
//!   console's playground diffs.
//!
//! `POST /v1/admin/check` (admin key) is the same for a caller named in the body (`"tenant"`,
//! `"principal"`, `"labels"`) instead of an API key: the playground trying a tenant's chains.

use super::error::ApiError;
use super::ingress;
use super::{App, RequestId, TenantLabel};
use crate::auth::Caller;
use crate::codec::chat::{self, Chat};
use crate::codec::closed::{self, Shape};
use crate::codec::messages::Messages;
use crate::codec::responses::Responses;
use crate::codec::{Codec, Door};
use crate::model::{Payload, Rail};
use crate::policy::record::Outcome;
use crate::rails::RequestScope;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::{Map, Value};
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
    ingress::routed(&app, Door::Check, request_id, &headers, |scope| {
        answer(scope, body, Who::Key)
    })
    .await
}

/// `POST /v1/admin/check`: the caller is named in the body (behind the admin key, which the
/// router checked).
pub(crate) async fn admin_check(
    State(app): State<Arc<App>>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    body: Body,
) -> Response {
    let set = app.policies();
    let mut scope = RequestScope::new(app.observer(), set, Door::Check, request_id);
    scope.note("run by an admin (the console's playground)");
    answer(scope, body, Who::Named).await
}

/// Who the check is for.
enum Who {
    /// The caller its API key made (the way in authenticated it).
    Key,
    /// The caller the body names (an admin trying a tenant's chains).
    Named,
}

/// Serve one check in `scope` and finish it, the tenant riding in the response for the request
/// metrics.
async fn answer(mut scope: RequestScope, body: Body, who: Who) -> Response {
    let result = handle(&mut scope, body, who).await;
    let tenant = TenantLabel(scope.tenant_name().to_string());
    let mut response = match result {
        Ok(out) => {
            scope.finish(200, Outcome::Served);
            super::json_response(StatusCode::OK, out)
        }
        Err(error) => {
            let (status, _, _) = error.parts();
            scope.finish(status.as_u16(), error.outcome());
            error.into_response_for(Door::Check)
        }
    };
    response.extensions_mut().insert(tenant);
    response.into_response()
}

async fn handle(scope: &mut RequestScope, body: Body, who: Who) -> Result<Value, ApiError> {
    let bytes = ingress::read_body(scope, body).await?;
    let mut body = super::proxy::parse_object(&bytes)?;
    if let Who::Named = who {
        let caller = caller(scope, &mut body)?;
        scope.set_caller(&caller);
    }
    run(scope, body).await
}

/// The caller an admin names: a tenant the config has (none: the default tenant), a principal,
/// labels.
fn caller(scope: &RequestScope, body: &mut Map<String, Value>) -> Result<Caller, ApiError> {
    let text = |v: Option<Value>, key: &str| match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::bad_request(
            format!("'{key}' must be a string"),
            Some(key.into()),
        )),
    };
    let tenant = text(body.remove("tenant"), "tenant")?
        .filter(|t| t != crate::auth::DEFAULT_TENANT && !t.is_empty());
    if let Some(t) = &tenant {
        if !scope.set().has_tenant(t) {
            return Err(ApiError::bad_request(
                format!("no tenant '{t}' in the config"),
                Some("tenant".into()),
            ));
        }
    }
    let principal = text(body.remove("principal"), "principal")?;
    let labels = match body.remove("labels") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => m
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(v) => Ok((k, v)),
                _ => Err(ApiError::bad_request(
                    format!("label '{k}' must be a string"),
                    Some(format!("labels.{k}")),
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ApiError::bad_request(
                "'labels' must be an object of strings",
                Some("labels".into()),
            ))
        }
    };
    Ok(Caller {
        principal,
        tenant,
        labels,
        requests_per_minute: None,
        tokens_per_minute: None,
        key: None,
    })
}

/// A boolean option taken out of the body.
fn flag(body: &mut Map<String, Value>, key: &str) -> Result<bool, ApiError> {
    match body.remove(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(_) => Err(ApiError::bad_request(
            format!("'{key}' must be true or false"),
            Some(key.into()),
        )),
    }
}

async fn run(scope: &mut RequestScope, mut body: Map<String, Value>) -> Result<Value, ApiError> {
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
    let explain = flag(&mut body, "explain")?;
    let partial = flag(&mut body, "partial")?;
    if partial && rail != Rail::Output {
        return Err(ApiError::bad_request(
            "'partial' is for the output rail: only a reply's text is judged while it streams",
            Some("partial".into()),
        ));
    }
    let door = match body.remove("door") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => match Door::parse(&s) {
            Some(door @ (Door::Chat | Door::Responses | Door::Messages)) => Some(door),
            _ => {
                return Err(ApiError::bad_request(
                    format!("unknown door '{s}' (expected chat, responses or messages)"),
                    Some("door".into()),
                ))
            }
        },
        Some(_) => {
            return Err(ApiError::bad_request(
                "'door' must be a string",
                Some("door".into()),
            ))
        }
    };
    if let Some(Value::String(model)) = body.get("model") {
        scope.set_model(Some(model.clone()));
    }
    let payload = match door {
        None => plain(&body)?,
        Some(Door::Responses) => decode_as::<Responses>(body)?,
        Some(Door::Messages) => decode_as::<Messages>(body)?,
        Some(_) => decode_as::<Chat>(body)?,
    };
    if let Some(door) = door {
        scope.judge_as(door);
    }
    let input = explain.then(|| shown(payload.clone()));
    let mut eval = scope.check_explained(rail, payload, partial, explain).await;
    let after = std::mem::take(&mut eval.payload);
    let steps = std::mem::take(&mut eval.explained);
    let mut out = eval.to_json();
    out["payload"] = shown(after);
    if let Some(input) = input {
        out["input"] = input;
        out["steps"] = steps
            .into_iter()
            .map(|(i, after)| {
                serde_json::json!({
                    "decision": i,
                    "plugin": eval.decisions[i].plugin,
                    "shadow": eval.decisions[i].shadow,
                    "payload": shown(after),
                })
            })
            .collect();
    }
    out["request_id"] = Value::String(scope.request_id().to_string());
    out["caller"] = serde_json::json!({
        "principal": scope.ctx().principal,
        "tenant": scope.tenant_name(),
    });
    out["door"] = Value::String(scope.ctx().door.clone());
    out["revision"] = serde_json::to_value(scope.set().revision()).unwrap_or_default();
    if let Some(asked) = scope.approvals() {
        out["approvals"] = Value::Array(asked);
    }
    Ok(out)
}

/// A payload as the answer shows it (a message's folded fields back in place, fields by path).
fn shown(mut payload: Payload) -> Value {
    for m in &mut payload.messages {
        closed::unfold(m);
    }
    let mut out = payload.to_openai();
    if !payload.fields.is_empty() {
        out["fields"] = serde_json::to_value(&payload.fields).unwrap_or_default();
    }
    out
}

/// The check's own shape: OpenAI messages and tools, the body's other strings as fields.
fn plain(body: &Map<String, Value>) -> Result<Payload, ApiError> {
    let mut payload = Payload::from_openai_parts(body.get("messages").cloned(), body.get("tools"))
        .map_err(|e| ApiError::bad_request(e.to_string(), Some(e.path)))?;
    // Judged as the chat door judges a request (`codec::closed`): a message's text outside its
    // content as part of it, and the body's other strings (top-level keys, declarations' own
    // fields) as its fields.
    payload.fields = closed::fields(body, &CHECK);
    payload.fields.extend(chat::tool_fields(body));
    for m in &mut payload.messages {
        closed::fold(m, &Chat::MESSAGE, &Chat::CALL);
    }
    Ok(payload)
}

/// A request in `C`'s shape, read as its door reads it.
fn decode_as<C: Codec>(body: Map<String, Value>) -> Result<Payload, ApiError> {
    let (_, mut payload) =
        C::decode_request(body).map_err(|e| ApiError::bad_request(e.to_string(), Some(e.path)))?;
    for m in &mut payload.messages {
        closed::fold(m, C::own_shape(m).unwrap_or(&C::MESSAGE), &C::CALL);
    }
    Ok(payload)
}
