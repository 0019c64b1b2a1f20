//! What the caller gets back: the upstream's answer, JSON or an SSE stream, passed on as it came
//! except for the one response the rails judge (a `tools/list` or `tools/call` result) and the
//! `notifications/tools/list_changed` that drop a cached tool list on the way; and the daemon's
//! own answers (errors, refusals). Every path finishes the request's scope exactly once.

use super::{headers, offered, Exchange};
use crate::backend::BackendError;
use crate::codec::mcp::{self as codec, Kind};
use crate::codec::sse::{self, SseParser};
use crate::model::{Payload, Rail, ToolCall, ToolDef, Verdict};
use crate::policy::record::Outcome;
use crate::rails::{Refusal, RequestScope};
use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{json, Value};
use std::convert::Infallible;
use tokio::sync::mpsc;

/// Largest JSON answer read whole from an upstream.
const MAX_ANSWER_BYTES: usize = 32 << 20;

/// Where the daemon's decision goes in a result's `_meta`.
const META_KEY: &str = "dev.railyard/decision";

/// The response the rails judge, if any.
pub(in crate::server) enum Watch {
    /// Nothing: the answer passes through.
    None,
    /// The result of the `tools/list` with this id (`paged`: it asked for a later page).
    List { id: Value, paged: bool },
    /// The result of this `tools/call`.
    Call(Box<CallWatch>),
}

/// A `tools/call` on its way: the call as the upstream got it, and the tools it was judged by.
pub(in crate::server) struct CallWatch {
    id: Value,
    call: ToolCall,
    tools: Vec<ToolDef>,
}

impl Watch {
    /// Watch for the result of `call`.
    pub fn call(id: Value, call: ToolCall, tools: Vec<ToolDef>) -> Watch {
        Watch::Call(Box::new(CallWatch { id, call, tools }))
    }

    /// The JSON-RPC id of the request (null for none).
    pub fn id(&self) -> &Value {
        match self {
            Watch::None => &Value::Null,
            Watch::List { id, .. } => id,
            Watch::Call(c) => &c.id,
        }
    }

    fn judges(&self) -> bool {
        !matches!(self, Watch::None)
    }
}

/// Answer with the upstream's `response`.
pub(super) async fn relay(
    ex: Exchange,
    mut scope: RequestScope,
    response: hyper::Response<Incoming>,
    watch: Watch,
) -> Response {
    let status = response.status();
    if status == StatusCode::NOT_FOUND {
        // The upstream no longer knows the session: its tools and history go too.
        ex.app.mcp_tools().forget(&ex.key);
        ex.app.mcp_history().forget(&ex.key);
    }
    let out_headers = headers::downstream(response.headers());
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if status.is_success() && content_type.starts_with("text/event-stream") {
        return stream(ex, scope, response.into_body(), watch, status, out_headers);
    }
    let mut bytes = match read_whole(&ex, response.into_body()).await {
        Ok(b) => b,
        Err(e) => {
            let name = ex.server.name.clone();
            return upstream_failure(scope, &name, watch.id(), e);
        }
    };
    if status.is_success() && watch.judges() && content_type.starts_with("application/json") {
        if let Ok(mut message) = serde_json::from_slice::<Value>(&bytes) {
            if judge(&ex, &mut scope, &watch, &mut message) {
                bytes = Bytes::from(message.to_string());
            }
        }
    }
    let outcome = match status.as_u16() {
        _ if scope.record().blocked.is_some() => Outcome::Refused,
        0..=399 => Outcome::Served,
        400..=499 => Outcome::Invalid,
        _ => Outcome::BackendError,
    };
    scope.finish(status.as_u16(), outcome);
    let mut out = Response::new(Body::from(bytes));
    *out.status_mut() = status;
    *out.headers_mut() = out_headers;
    out
}

async fn read_whole(ex: &Exchange, body: Incoming) -> Result<Bytes, BackendError> {
    let limited = http_body_util::Limited::new(body, MAX_ANSWER_BYTES);
    match tokio::time::timeout(ex.server.timeout, limited.collect()).await {
        Err(_) => Err(BackendError::Timeout(ex.server.timeout.as_millis())),
        Ok(Err(e)) => Err(BackendError::Unreachable(format!(
            "reading its answer failed: {e}"
        ))),
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}

/// The result of the daemon's own request `id`, from a JSON or SSE answer (`None` when the
/// upstream answered an error or something else).
pub(super) async fn read_result(
    ex: &Exchange,
    response: hyper::Response<Incoming>,
    id: &Value,
) -> Result<Option<Value>, BackendError> {
    if !response.status().is_success() {
        return Ok(None);
    }
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.to_ascii_lowercase().starts_with("text/event-stream"));
    let bytes = read_whole(ex, response.into_body()).await?;
    let answer = |message: Value| match codec::kind(&message) {
        Kind::Response { id: ref got } if got == id => message.get("result").cloned(),
        _ => None,
    };
    if !sse {
        return Ok(serde_json::from_slice(&bytes).ok().and_then(answer));
    }
    // The stream has ended: a last event without its blank line still counts.
    let mut parser = SseParser::default();
    if parser.push(&bytes).is_err() || parser.push(b"\n\n").is_err() {
        return Ok(None);
    }
    while let Some(event) = parser.next_event() {
        if let Some(result) = serde_json::from_str(&event.data).ok().and_then(answer) {
            return Ok(Some(result));
        }
    }
    Ok(None)
}

/// Relay an SSE answer event by event: each event passes as written unless it is the judged
/// response. The caller going away ends the upstream request too (in the stateless protocol,
/// that is how a request is cancelled).
fn stream(
    ex: Exchange,
    scope: RequestScope,
    body: Incoming,
    watch: Watch,
    status: StatusCode,
    headers: HeaderMap,
) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    tokio::spawn(pump(ex, scope, body, watch, tx));
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    let mut out = Response::new(Body::from_stream(body));
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    out
}

async fn pump(
    ex: Exchange,
    mut scope: RequestScope,
    body: Incoming,
    watch: Watch,
    tx: mpsc::Sender<Bytes>,
) {
    let mut data = body.into_data_stream();
    let mut parser = SseParser::default();
    let mut failed = false;
    loop {
        let next = tokio::select! {
            next = data.next() => next,
            // The caller is gone: the scope's drop records the disconnect.
            _ = tx.closed() => return,
        };
        let chunk = match next {
            None => break,
            Some(Err(_)) => {
                failed = true;
                break;
            }
            Some(Ok(chunk)) => chunk,
        };
        if parser.push(&chunk).is_err() {
            failed = true;
            break;
        }
        let mut out = Vec::with_capacity(chunk.len() + 2);
        while let Some(block) = parser.next_block() {
            match inspect(&ex, &mut scope, &watch, &block) {
                Some(rewritten) => out.extend_from_slice(rewritten.as_bytes()),
                None => {
                    out.extend_from_slice(block.as_bytes());
                    out.extend_from_slice(b"\n\n");
                }
            }
        }
        if !out.is_empty() && tx.send(Bytes::from(out)).await.is_err() {
            return;
        }
    }
    let outcome = if failed {
        Outcome::BackendError
    } else if scope.record().blocked.is_some() {
        Outcome::Refused
    } else {
        Outcome::Served
    };
    scope.finish(200, outcome);
}

/// One SSE block: a tool-list change forgets the cached list; the judged response is judged.
/// The rewritten block, or `None` to pass it as it is.
fn inspect(ex: &Exchange, scope: &mut RequestScope, watch: &Watch, block: &str) -> Option<String> {
    let event = sse::parse_block(block)?;
    let list_changed = event.data.contains("notifications/tools/list_changed");
    let answer =
        watch.judges() && (event.data.contains("\"result\"") || event.data.contains("\"error\""));
    if !list_changed && !answer {
        return None;
    }
    let mut message: Value = serde_json::from_str(&event.data).ok()?;
    if list_changed {
        if matches!(codec::kind(&message), Kind::Notification { ref method } if method == "notifications/tools/list_changed")
        {
            ex.app.mcp_tools().forget(&ex.key);
        }
        return None;
    }
    judge(ex, scope, watch, &mut message).then(|| sse::replace_data(block, &message.to_string()))
}

/// Judge `message` if it is the watched response; whether it changed.
fn judge(ex: &Exchange, scope: &mut RequestScope, watch: &Watch, message: &mut Value) -> bool {
    match codec::kind(message) {
        Kind::Response { ref id } if id == watch.id() => {}
        _ => return false,
    }
    match watch {
        Watch::None => false,
        Watch::List { id, paged } => judge_list(ex, scope, id, *paged, message),
        Watch::Call(c) => judge_result(ex, scope, c, message),
    }
}

fn judge_list(
    ex: &Exchange,
    scope: &mut RequestScope,
    id: &Value,
    paged: bool,
    message: &mut Value,
) -> bool {
    let Some(result) = message.get_mut("result") else {
        return false;
    };
    let Ok(tools) = codec::tools_of(result) else {
        return false;
    };
    if !paged && result.get("nextCursor").is_none_or(Value::is_null) {
        ex.app.mcp_tools().put(ex.key.clone(), tools.clone());
    }
    match offered(scope, &tools) {
        Err(refusal) => {
            *message = blocked_error(scope, id, &refusal);
            true
        }
        Ok(judged) if judged == tools => false,
        Ok(judged) => {
            codec::rewrite_tools(result, &judged);
            true
        }
    }
}

fn judge_result(
    ex: &Exchange,
    scope: &mut RequestScope,
    c: &CallWatch,
    message: &mut Value,
) -> bool {
    let Some(result) = message.get("result") else {
        return false;
    };
    // A result that asks the caller for input first (2026-07-28) is not the tool's output yet.
    if result
        .get("resultType")
        .and_then(Value::as_str)
        .is_some_and(|t| t != "complete")
    {
        return false;
    }
    // The session has now read this tool's output, whatever the rail makes of it.
    ex.app.mcp_history().read(&ex.key, &c.call.name);
    if !scope.runs(Rail::ToolResult) {
        return false;
    }
    let mut tools = c.tools.clone();
    if result.get("isError") == Some(&Value::Bool(true)) {
        // An error result is not held to the tool's output schema.
        for t in tools
            .iter_mut()
            .filter(|t| t.name.as_deref() == Some(c.call.name.as_str()))
        {
            t.result_schema = None;
        }
    }
    let payload = Payload {
        messages: vec![
            codec::call_message(c.call.clone()),
            codec::result_message(&c.call, result),
        ],
        tools,
        ..Payload::default()
    };
    let eval = scope.check(Rail::ToolResult, payload);
    if let Some(refusal) = Refusal::from_eval(&eval) {
        *message = blocked_error(scope, &c.id, &refusal);
        return true;
    }
    if eval.verdict == Verdict::Allow {
        return false;
    }
    let decision = scope.railyard();
    let result = &mut message["result"];
    if let Some(r) = eval.rejections.first() {
        *result = refusal_result(&r.reason, ex.routed);
    } else {
        let edited =
            eval.payload.messages.iter().find(|m| {
                m.role == "tool" && m.tool_call_id.as_deref() == Some(c.call.id.as_str())
            });
        let applied = match edited {
            Some(m) => codec::apply_result_edit(result, m),
            None => Err("a policy removed the tool result".to_string()),
        };
        if let Err(e) = applied {
            *result = refusal_result(
                &format!("the tool result could not be passed on: {e}"),
                ex.routed,
            );
        }
    }
    annotate(result, decision);
    true
}

/// A tool result reporting `reason` as an error (what a rejection looks like to the caller).
fn refusal_result(reason: &str, routed: bool) -> Value {
    let mut result = codec::error_result(reason);
    if routed {
        result["resultType"] = json!("complete");
    }
    result
}

/// Put the decision in a result's `_meta`.
fn annotate(result: &mut Value, decision: Value) {
    if let Some(obj) = result.as_object_mut() {
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(META_KEY.into(), decision);
        }
    }
}

fn blocked_error(scope: &RequestScope, id: &Value, refusal: &Refusal) -> Value {
    codec::error(
        id,
        codec::POLICY_VIOLATION,
        &refusal.message(),
        Some(json!({"type": "policy_violation", "railyard": scope.railyard()})),
    )
}

fn json_answer(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The daemon's own JSON-RPC error.
pub(super) fn error(
    mut scope: RequestScope,
    status: StatusCode,
    outcome: Outcome,
    id: &Value,
    code: i64,
    message: &str,
) -> Response {
    scope.finish(status.as_u16(), outcome);
    json_answer(status, &codec::error(id, code, message, None))
}

/// A request a policy blocked: a JSON-RPC error (`-32050`) naming the policy and its reason.
pub(super) fn blocked(mut scope: RequestScope, id: &Value, refusal: &Refusal) -> Response {
    let body = blocked_error(&scope, id, refusal);
    scope.finish(200, Outcome::Refused);
    json_answer(StatusCode::OK, &body)
}

/// A call a policy rejected: a tool error result with the reason, which the model reads.
pub(super) fn rejected(
    mut scope: RequestScope,
    id: &Value,
    reason: &str,
    routed: bool,
) -> Response {
    let mut result = refusal_result(reason, routed);
    annotate(&mut result, scope.railyard());
    scope.finish(200, Outcome::Refused);
    json_answer(StatusCode::OK, &codec::result(id, result))
}

/// The upstream could not be reached or did not answer in time (502, 504).
pub(super) fn upstream_failure(
    mut scope: RequestScope,
    server: &str,
    id: &Value,
    error: BackendError,
) -> Response {
    let (status, message) = match error {
        BackendError::Timeout(ms) => (
            StatusCode::GATEWAY_TIMEOUT,
            format!("MCP server '{server}' did not answer within {ms} ms"),
        ),
        BackendError::Unreachable(why) => (
            StatusCode::BAD_GATEWAY,
            format!("MCP server '{server}' is unreachable: {why}"),
        ),
    };
    scope.finish(status.as_u16(), Outcome::BackendError);
    json_answer(
        status,
        &codec::error(id, codec::UPSTREAM_ERROR, &message, None),
    )
}
