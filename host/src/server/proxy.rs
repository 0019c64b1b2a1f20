//! `POST /v1/chat/completions`: the rails around one backend call.
//!
//! In: `tool_result` then `input` on the conversation; a block refuses without calling the
//! backend, edits are what the backend receives. Out: `tool_call` on the model's tool calls, then
//! `output` on its text (skipped for a reply with only tool calls). Fields Railyard does not know
//! pass through untouched both ways; the request's `tools` are forwarded unchanged.

use super::error::ApiError;
use super::{context, log_decisions, parse_object, read_body, App, Authenticated, RequestId};
use crate::chain::{Decided, Evaluation, Verdict};
use crate::config::OnBlock;
use crate::payload::{Content, Context, Message, Payload, Rail};
use crate::policy::PolicySet;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Instant;

/// Per-request options from the body's own `"railyard"` object (removed before forwarding).
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestOptions {
    disabled: Vec<Rail>,
    /// The caller's tenant, whose chains run.
    tenant: Option<String>,
}

impl RequestOptions {
    /// Take and validate `body["railyard"]`.
    pub(crate) fn take(
        body: &mut Map<String, Value>,
        overrides_allowed: bool,
        tenant: Option<String>,
    ) -> Result<RequestOptions, ApiError> {
        let Some(value) = body.remove("railyard") else {
            return Ok(RequestOptions {
                tenant,
                ..RequestOptions::default()
            });
        };
        let bad = |m: String, p: &str| ApiError::bad_request(m, Some(p.to_string()));
        let obj = value
            .as_object()
            .ok_or_else(|| bad("'railyard' must be an object".into(), "railyard"))?;
        let mut options = RequestOptions {
            tenant,
            ..RequestOptions::default()
        };
        for (key, value) in obj {
            if key != "rails" {
                return Err(bad(
                    format!("unknown field 'railyard.{key}' (expected 'rails')"),
                    "railyard",
                ));
            }
            let rails = value.as_object().ok_or_else(|| {
                bad(
                    "'railyard.rails' must be an object of rail names to booleans".into(),
                    "railyard.rails",
                )
            })?;
            if !overrides_allowed {
                return Err(bad(
                    "per-request rail overrides are disabled on this server (server.allow_rail_overrides = false)".into(),
                    "railyard.rails",
                ));
            }
            for (name, on) in rails {
                let rail = Rail::parse(name).ok_or_else(|| {
                    bad(format!("unknown rail '{name}' in railyard.rails (expected input, tool_result, tool_call or output)"), "railyard.rails")
                })?;
                match on.as_bool() {
                    Some(true) => {}
                    Some(false) => options.disabled.push(rail),
                    None => {
                        return Err(bad(
                            format!("railyard.rails.{name} must be true or false"),
                            "railyard.rails",
                        ))
                    }
                }
            }
        }
        Ok(options)
    }

    /// Whether `rail` runs for this request: not switched off, and the tenant's chain has plugins.
    pub(crate) fn runs(&self, set: &PolicySet, rail: Rail) -> bool {
        !self.disabled.contains(&rail)
            && !set
                .chain_for(self.tenant.as_deref(), rail)
                .steps()
                .is_empty()
    }
}

/// Why a request was refused.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub rail: Rail,
    pub policy: String,
    pub reason: String,
    pub fault: bool,
}

impl Refusal {
    pub(crate) fn from_eval(eval: &Evaluation) -> Option<Refusal> {
        eval.blocked.as_ref().map(|b| Refusal {
            rail: eval.rail,
            policy: b.plugin.clone(),
            reason: b.reason.clone(),
            fault: b.fault,
        })
    }

    pub(crate) fn json(&self) -> Value {
        json!({"rail": self.rail, "policy": self.policy, "reason": self.reason, "fault": self.fault})
    }

    pub(crate) fn message(&self) -> String {
        format!(
            "request blocked by policy '{}' on the {} rail: {}",
            self.policy, self.rail, self.reason
        )
    }
}

/// What the rails did to one request, for the `railyard` object and the decision log. Payloads
/// are dropped as soon as the next stage has them.
#[derive(Default)]
pub(crate) struct Report {
    evals: Vec<Evaluation>,
}

impl Report {
    pub(crate) fn push(&mut self, mut eval: Evaluation) -> Payload {
        let payload = std::mem::take(&mut eval.payload);
        self.evals.push(eval);
        payload
    }

    /// Whether any rail did more than allow, or a plugin faulted (even when it failed open: the
    /// caller sees that a policy did not run).
    pub(crate) fn acted(&self) -> bool {
        self.evals.iter().any(|e| {
            e.verdict != Verdict::Allow || e.decisions.iter().any(|d| d.verdict == Decided::Fault)
        })
    }

    pub(crate) fn json(
        &self,
        request_id: &str,
        revision: &crate::policy::Revision,
        blocked: Option<&Refusal>,
    ) -> Value {
        // Each rail's strongest verdict (a streamed reply runs the output rail once per window).
        let mut strongest: Vec<(Rail, Verdict)> = Vec::new();
        for e in &self.evals {
            match strongest.iter_mut().find(|r| r.0 == e.rail) {
                Some(r) => r.1 = r.1.max(e.verdict),
                None => strongest.push((e.rail, e.verdict)),
            }
        }
        let rails: Map<String, Value> = strongest
            .into_iter()
            .map(|(rail, v)| (rail.as_str().to_string(), json!(v.as_str())))
            .collect();
        let rejections: Vec<Value> = self
            .evals
            .iter()
            .flat_map(|e| {
                e.rejections.iter().map(move |r| {
                    let mut v = serde_json::to_value(r).unwrap_or_default();
                    v["rail"] = json!(e.rail);
                    v
                })
            })
            .collect();
        let faults: Vec<Value> = self
            .evals
            .iter()
            .flat_map(|e| {
                e.decisions
                    .iter()
                    .filter(|d| d.verdict == Decided::Fault)
                    .map(move |d| {
                        json!({"rail": e.rail, "policy": d.plugin, "fault": d.fault,
                            "on_error": d.on_error})
                    })
            })
            .collect();
        let mut out =
            json!({"request_id": request_id, "revision": revision.number, "rails": rails});
        if !rejections.is_empty() {
            out["rejections"] = Value::Array(rejections);
        }
        if !faults.is_empty() {
            out["faults"] = Value::Array(faults);
        }
        if let Some(b) = blocked {
            out["blocked"] = b.json();
        }
        out
    }

    pub(crate) fn log(&self, ctx: &Context, endpoint: &str, revision: &crate::policy::Revision) {
        let evals: Vec<&Evaluation> = self.evals.iter().collect();
        log_decisions(&ctx.request_id, endpoint, ctx, revision, &evals);
    }
}

/// The handler.
pub(crate) async fn chat_completions(
    State(app): State<Arc<App>>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    Extension(Authenticated { set, caller }): Extension<Authenticated>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let ctx = context(&request_id, &caller);
    match handle(&app, &set, &ctx, &headers, body).await {
        Ok(response) => response,
        Err(err) => {
            if matches!(err, ApiError::Backend(_)) {
                app.metrics().backend_error(err.parts().2);
            }
            err.into_response()
        }
    }
}

async fn handle(
    app: &Arc<App>,
    set: &Arc<PolicySet>,
    ctx: &Context,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let server = &set.config().server;
    let request_id = ctx.request_id.as_str();
    let bytes = read_body(body, set.max_body_bytes(ctx.tenant.as_deref())).await?;
    let mut body = parse_object(&bytes)?;
    drop(bytes);
    let options = RequestOptions::take(&mut body, server.allow_rail_overrides, ctx.tenant.clone())?;
    let body = Value::Object(body);
    let mut payload = Payload::from_openai(&body)
        .map_err(|e| ApiError::bad_request(e.to_string(), Some(e.path)))?;
    let Value::Object(mut body) = body else {
        unreachable!("checked above")
    };
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(ApiError::bad_request(
                "'stream' must be a boolean",
                Some("stream".into()),
            ))
        }
    };
    let model = body.get("model").cloned().unwrap_or(Value::Null);
    let mut report = Report::default();

    // The tool_result rail judges tool results: a conversation without any has nothing for it.
    let has_tool_results = payload.messages.iter().any(|m| m.role == "tool");
    for rail in [Rail::ToolResult, Rail::Input] {
        if !options.runs(set, rail) || (rail == Rail::ToolResult && !has_tool_results) {
            continue;
        }
        let eval = app.check(set, rail, payload, ctx);
        let refusal = Refusal::from_eval(&eval);
        payload = report.push(eval);
        if let Some(refusal) = refusal {
            report.log(ctx, "chat", set.revision());
            return Ok(refusal_response(set, request_id, &model, &refusal, &report));
        }
    }

    body.insert("messages".into(), payload.messages_json());
    let forwarded =
        serde_json::to_vec(&body).map_err(|e| ApiError::bad_request(e.to_string(), None))?;
    let started = Instant::now();
    // The client's Authorization goes to the backend only when config says so (and never while
    // Railyard authenticates callers: then it carries a Railyard key).
    let client_auth = if set.config().backend.forward_client_authorization {
        headers.get(header::AUTHORIZATION).cloned()
    } else {
        None
    };
    let response = app.backend.chat(forwarded.into(), client_auth).await?;
    app.metrics().backend(started.elapsed());
    let status = response.status();

    if stream && status.is_success() {
        return Ok(super::stream::relay(
            app.clone(),
            set.clone(),
            ctx.clone(),
            payload,
            options,
            report,
            response,
        ));
    }
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    let left = app.backend.timeout().saturating_sub(started.elapsed());
    let bytes = app.backend.read_body(response.into_body(), left).await?;
    if !status.is_success() {
        // The backend's own error, passed through with its status.
        report.log(ctx, "chat", set.revision());
        let mut passthrough = Response::new(Body::from(bytes));
        *passthrough.status_mut() = status;
        if let Some(ct) = content_type {
            passthrough.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        return Ok(passthrough);
    }
    let mut reply = parse_object(&bytes)
        .map_err(|_| ApiError::BadBackendResponse("the body is not a JSON object".into()))?;
    let refusal = judge_choices(app, set, ctx, &payload, &options, &mut reply, &mut report)?;
    report.log(ctx, "chat", set.revision());
    if let Some(refusal) = refusal {
        return Ok(refusal_response(
            set,
            request_id,
            &reply.get("model").cloned().unwrap_or(model),
            &refusal,
            &report,
        ));
    }
    if report.acted() {
        reply.insert(
            "railyard".into(),
            report.json(request_id, set.revision(), None),
        );
    }
    Ok(super::json_response(StatusCode::OK, Value::Object(reply)))
}

/// Run the outbound rails on every choice of a non-streaming reply, in place.
fn judge_choices(
    app: &App,
    set: &PolicySet,
    ctx: &Context,
    conversation: &Payload,
    options: &RequestOptions,
    reply: &mut Map<String, Value>,
    report: &mut Report,
) -> Result<Option<Refusal>, ApiError> {
    let Some(Value::Array(choices)) = reply.get_mut("choices") else {
        return Err(ApiError::BadBackendResponse(
            "'choices' is missing or not an array".into(),
        ));
    };
    for (i, choice) in choices.iter_mut().enumerate() {
        let Some(raw) = choice.get("message") else {
            continue;
        };
        let message = Message::from_openai(raw, &format!("choices[{i}].message"))
            .map_err(|e| ApiError::BadBackendResponse(e.to_string()))?;
        let had_calls = !message.tool_calls.is_empty();
        let message = match judge_reply(app, set, ctx, conversation, options, message, report) {
            Ok(m) => m,
            Err(refusal) => return Ok(Some(refusal)),
        };
        let empty = message.tool_calls.is_empty() && !has_text(&message);
        choice["message"] = message.to_openai();
        if had_calls && message.tool_calls.is_empty() {
            if empty {
                choice["message"]["content"] = Value::String(set.config().server.refusal.clone());
            }
            choice["message"]
                .as_object_mut()
                .map(|m| m.remove("tool_calls"));
            choice["finish_reason"] = json!("content_filter");
        }
    }
    Ok(None)
}

pub(crate) fn has_text(message: &Message) -> bool {
    match &message.content {
        None => false,
        Some(Content::Text(t)) => !t.is_empty(),
        Some(Content::Parts(p)) => !p.is_null(),
    }
}

/// The outbound rails for one reply message: `tool_call` on its calls, then `output` on its text.
pub(crate) fn judge_reply(
    app: &App,
    set: &PolicySet,
    ctx: &Context,
    conversation: &Payload,
    options: &RequestOptions,
    mut message: Message,
    report: &mut Report,
) -> Result<Message, Refusal> {
    for rail in [Rail::ToolCall, Rail::Output] {
        let applies = match rail {
            Rail::ToolCall => !message.tool_calls.is_empty(),
            _ => has_text(&message),
        };
        if !applies || !options.runs(set, rail) {
            continue;
        }
        let mut payload = conversation.clone();
        payload.messages.push(message);
        let eval = app.check(set, rail, payload, ctx);
        let refusal = Refusal::from_eval(&eval);
        let mut payload = report.push(eval);
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
        message = payload
            .messages
            .pop()
            .expect("the reply is the last message");
    }
    Ok(message)
}

/// The response for a blocked request: a refusal (HTTP 200) or a `policy_violation` error (400).
pub(crate) fn refusal_response(
    set: &PolicySet,
    request_id: &str,
    model: &Value,
    refusal: &Refusal,
    report: &Report,
) -> Response {
    let server = &set.config().server;
    let railyard = report.json(request_id, set.revision(), Some(refusal));
    match server.on_block {
        OnBlock::Refuse => {
            let created = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            super::json_response(
                StatusCode::OK,
                json!({
                    "id": format!("chatcmpl-{request_id}"),
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": server.refusal},
                        "finish_reason": "content_filter"
                    }],
                    "railyard": railyard,
                }),
            )
        }
        OnBlock::Error => super::json_response(
            StatusCode::BAD_REQUEST,
            json!({
                "error": {"message": refusal.message(), "type": "policy_violation", "param": null, "code": "blocked"},
                "railyard": railyard,
            }),
        ),
    }
}
