//! What the caller gets back: the upstream's answer, JSON or an SSE stream, every message in it
//! judged (the answer to a `tools/list`, a `tools/call` or a read by its typed rail, any other
//! answer, notification and request of the server leaf by leaf: `codec::mcp::walk`), with the
//! `notifications/tools/list_changed` that drop a cached tool list on the way; and the daemon's
//! own answers (errors, refusals). Every path finishes the request's scope exactly once.
//!
//! The answer to a judged request is judged or refused, never relayed unjudged. Whatever its
//! id says (a client matches `0` to its `-0`, or a null id to its only request), every response
//! in it is taken for the answer, and written back with the caller's own id: the first is
//! judged, any later one dropped. What cannot be read as JSON (a lone surrogate, `NaN`, a
//! number out of range, nesting past the parser's limit), or is not a JSON-RPC response, is
//! answered with the door's fault, `-32016`; whatever its content type says, a body that is not
//! an event stream is read as JSON. What goes to the caller is the value the rails judged,
//! written anew, so a repeated key or an odd number means the same to both.

use super::{headers, history, offered, Exchange};
use crate::backend::BackendError;
use crate::codec::mcp::{self as codec, walk, Kind};
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
    /// The answer to any other request (`initialize`, a task's, a skill's, one this door does
    /// not know): judged whole, as the result of a call named after its method.
    Answer { id: Value, method: String },
}

/// A `tools/call` on its way: the call as the upstream got it, and the tools it was judged by;
/// or a read (`resources/read`, `prompts/get`) as the call its answer is the result of.
pub(in crate::server) struct CallWatch {
    id: Value,
    call: ToolCall,
    tools: Vec<ToolDef>,
    /// A tool's call, answered with a tool result (a read's answer is refused with an error).
    tool: bool,
}

impl Watch {
    /// Watch for the result of `call`.
    pub fn call(id: Value, call: ToolCall, tools: Vec<ToolDef>) -> Watch {
        Watch::Call(Box::new(CallWatch {
            id,
            call,
            tools,
            tool: true,
        }))
    }

    /// Watch for the answer to a read, judged as the result of `read` (`codec::read_of`).
    pub fn read(id: Value, read: ToolCall) -> Watch {
        Watch::Call(Box::new(CallWatch {
            id,
            call: read,
            tools: Vec::new(),
            tool: false,
        }))
    }

    /// Watch for the answer to the request `id` of `method`.
    pub fn answer(id: Value, method: &str) -> Watch {
        Watch::Answer {
            id,
            method: method.to_string(),
        }
    }

    /// The JSON-RPC id of the request (null for none).
    pub fn id(&self) -> &Value {
        match self {
            Watch::None => &Value::Null,
            Watch::List { id, .. } | Watch::Answer { id, .. } => id,
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
    if status == StatusCode::NOT_FOUND && ex.key.session() {
        // The upstream no longer knows the session: its tool list goes too.
        ex.app.mcp_tools().forget(&ex.app.state, &ex.key).await;
    }
    let mut read = None;
    if let (Watch::Call(c), true) = (&watch, status.is_success()) {
        // The session reads whatever the tool answered, before anything else can fail: flow
        // must never miss a read, whether its result is judged, refused or unreadable. A read
        // that cannot be remembered is not handed over.
        match remember(&ex, &scope, c).await {
            Ok(r) => read = r,
            Err(withheld) => return withheld.answer(scope, &c.id),
        }
    }
    let mut out_headers = headers::downstream(response.headers());
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if status.is_success() && content_type.starts_with("text/event-stream") {
        // A streamed result is not kept: the read is unseen.
        if let Some(r) = read.take() {
            ex.agent.seen(&ex.app.state, r, None).await;
        }
        return stream(ex, scope, response.into_body(), watch, status, out_headers);
    }
    // JSON that streams: newline-delimited messages (how some servers frame a stateless
    // request's progress and answer, or a listen stream), sent as they come with no length.
    let json_stream = content_type.contains("ndjson")
        || content_type.contains("jsonl")
        || (content_type.starts_with("application/json")
            && !response.headers().contains_key(header::CONTENT_LENGTH));
    if status.is_success() && json_stream {
        if let Some(r) = read.take() {
            ex.agent.seen(&ex.app.state, r, None).await;
        }
        return stream_json(ex, scope, response.into_body(), watch, status, out_headers);
    }
    let mut bytes = match read_whole(&ex, response.into_body()).await {
        Ok(b) => b,
        Err(e) => {
            let name = ex.server.name.clone();
            return upstream_failure(scope, &name, watch.id(), e);
        }
    };
    let mut status = status;
    if !watch.judges() && !bytes.is_empty() {
        // An answer no request of the caller's waits for (to a notification, a GET, a DELETE):
        // judged all the same, and what cannot be read is not passed on.
        let message = match serde_json::from_slice::<Value>(&bytes) {
            Ok(mut m) if is_response(&m) => {
                let id = m.get("id").cloned().unwrap_or(Value::Null);
                judge_other(&mut scope, &id, "response", &mut m).await;
                m
            }
            _ => codec::error(
                &Value::Null,
                codec::UPSTREAM_ERROR,
                &format!(
                    "MCP server '{}' answered HTTP {} with a body that is no JSON-RPC response, so it is not passed on",
                    ex.server.name,
                    status.as_u16()
                ),
                None,
            ),
        };
        bytes = Bytes::from(message.to_string());
        out_headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        out_headers.remove(header::CONTENT_LENGTH);
    }
    if watch.judges() {
        let answer = match read_answer(&bytes) {
            Ok(mut message) => {
                judge(&ex, &mut scope, &watch, &mut message).await;
                // The session read what the client gets: the result's text, after the rails
                // (unseen when refused or not a result).
                if let Some(r) = read.take() {
                    let text = result_text(&message);
                    ex.agent.seen(&ex.app.state, r, text.as_deref()).await;
                }
                Ok(message)
            }
            Err(why) if status.is_success() => {
                status = StatusCode::BAD_GATEWAY;
                Err(format!(
                    "MCP server '{}' answered with something that cannot be judged ({why}), so \
                     it is not passed on",
                    ex.server.name
                ))
            }
            // An error status with a body that is no JSON-RPC answer (an HTML page, say): the
            // status says what happened, the body is not passed on.
            Err(_) => Err(format!(
                "MCP server '{}' answered HTTP {}",
                ex.server.name,
                status.as_u16()
            )),
        };
        let message = answer
            .unwrap_or_else(|why| codec::error(watch.id(), codec::UPSTREAM_ERROR, &why, None));
        if let Watch::Call(c) = &watch {
            // An error status can carry the tool's text too (a read all the same).
            if !status.is_success() && message.get("error").is_some() {
                match remember(&ex, &scope, c).await {
                    Ok(r) => read = r,
                    Err(withheld) => return withheld.answer(scope, &c.id),
                }
            }
        }
        // A read whose answer was not judged as a result (unreadable, an error) is unseen.
        if let Some(r) = read.take() {
            ex.agent.seen(&ex.app.state, r, None).await;
        }
        bytes = Bytes::from(message.to_string());
        out_headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        out_headers.remove(header::CONTENT_LENGTH);
    }
    scope.keep_vault(None).await;
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

/// A result the caller's agent session cannot be known to have read, so it is not handed over.
struct Withheld(history::Unremembered);

impl Withheld {
    fn answer(self, scope: RequestScope, id: &Value) -> Response {
        let message = format!(
            "the answer is withheld: Railyard could not remember that this session read it ({})",
            self.0
        );
        match self.0 {
            history::Unremembered::Full => error(
                scope,
                StatusCode::OK,
                Outcome::Refused,
                id,
                codec::POLICY_VIOLATION,
                &message,
            ),
            history::Unremembered::Store(_) => error(
                scope,
                StatusCode::SERVICE_UNAVAILABLE,
                Outcome::Throttled,
                id,
                codec::INTERNAL_ERROR,
                &message,
            ),
        }
    }
}

/// Remember that the caller's agent session read the answer to `c`. A store that cannot answer
/// withholds it, whatever `on_unavailable` says: `open` lets limits go uncounted, never flow
/// forget a read it was told of.
async fn remember(
    ex: &Exchange,
    scope: &RequestScope,
    c: &CallWatch,
) -> Result<Option<history::Read>, Withheld> {
    let id = &scope.ctx().request_id;
    match ex.agent.read(&ex.app.state, &c.call.name, id).await {
        Ok(read) => Ok(Some(read)),
        Err(e) => {
            tracing::warn!(error = %e, "an MCP read withheld: it could not be remembered");
            Err(Withheld(e))
        }
    }
}

/// The text of a `tools/call` or read result as the client gets it: its content's text parts (or
/// a resource's text), one per line; `None` when it is no result or holds other content only.
fn result_text(message: &Value) -> Option<String> {
    let result = message.get("result")?;
    let parts = result
        .get("content")
        .or_else(|| result.get("contents"))?
        .as_array()?;
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    // Anything but text (an image, a resource link) is content flow cannot see.
    (texts.len() == parts.len() && !texts.is_empty()).then(|| texts.join("\n"))
}

/// One JSON-RPC message an upstream answered a judged request with, if it is a response (a
/// result or an error, whatever its id), else why it cannot be judged.
fn read_answer(bytes: &[u8]) -> Result<Value, String> {
    let message: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    if is_response(&message) {
        Ok(message)
    } else {
        Err("not a JSON-RPC response".into())
    }
}

/// Whether `message` is a response: an object with a `result` or an `error` and no `method`.
fn is_response(message: &Value) -> bool {
    message.as_object().is_some_and(|o| {
        !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error"))
    })
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
    // Whether the judged request's answer went by: a later response is dropped.
    let mut answered = false;
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
            match inspect(&ex, &mut scope, &watch, &block, &mut answered).await {
                Step::Pass => {
                    out.extend_from_slice(block.as_bytes());
                    out.extend_from_slice(b"\n\n");
                }
                Step::Replace(rewritten) => out.extend_from_slice(rewritten.as_bytes()),
                Step::Drop => {}
                Step::Decline(answer) => decline(&ex, answer),
            }
        }
        if !out.is_empty() && tx.send(Bytes::from(out)).await.is_err() {
            return;
        }
    }
    scope.keep_vault(None).await;
    let outcome = if failed {
        Outcome::BackendError
    } else if scope.record().blocked.is_some() {
        Outcome::Refused
    } else {
        Outcome::Served
    };
    scope.finish(200, outcome);
}

/// Relay a JSON answer that streams, message by message, each judged as it completes
/// ([`message`]) and written on a line of its own.
fn stream_json(
    ex: Exchange,
    scope: RequestScope,
    body: Incoming,
    watch: Watch,
    status: StatusCode,
    mut headers: HeaderMap,
) -> Response {
    headers.remove(header::CONTENT_LENGTH);
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    tokio::spawn(pump_json(ex, scope, body, watch, tx));
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    let mut out = Response::new(Body::from_stream(body));
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    out
}

/// Most a streamed JSON message may hold before it is judged (what cannot end is not relayed).
const MAX_JSON_MESSAGE: usize = 32 << 20;

async fn pump_json(
    ex: Exchange,
    mut scope: RequestScope,
    body: Incoming,
    watch: Watch,
    tx: mpsc::Sender<Bytes>,
) {
    let mut data = body.into_data_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut answered = false;
    let mut failed = false;
    let mut ended = false;
    while !ended {
        let next = tokio::select! {
            next = data.next() => next,
            _ = tx.closed() => return,
        };
        match next {
            None => ended = true,
            Some(Err(_)) => {
                failed = true;
                ended = true;
            }
            Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
        }
        let mut out = Vec::new();
        loop {
            let mut values = serde_json::Deserializer::from_slice(&buf).into_iter::<Value>();
            let parsed = match values.next() {
                None => {
                    buf.clear();
                    break;
                }
                // Not whole yet: more is coming, unless the body ended or grew past its bound.
                Some(Err(e)) if e.is_eof() && !ended && buf.len() <= MAX_JSON_MESSAGE => break,
                Some(Err(e)) => {
                    buf.clear();
                    Err(e.to_string())
                }
                Some(Ok(v)) => {
                    let used = values.byte_offset();
                    buf.drain(..used);
                    Ok(v)
                }
            };
            let last = parsed.is_err();
            let original = parsed.as_ref().ok().cloned();
            let passed = match message(&ex, &mut scope, &watch, parsed, &mut answered).await {
                Judged::Pass => original,
                Judged::Replace(m) => Some(m),
                Judged::Drop => None,
                Judged::Decline(answer) => {
                    decline(&ex, answer);
                    None
                }
            };
            if let Some(m) = passed {
                out.extend_from_slice(m.to_string().as_bytes());
                out.push(b'\n');
            }
            if last {
                break;
            }
        }
        if !out.is_empty() && tx.send(Bytes::from(out)).await.is_err() {
            return;
        }
    }
    scope.keep_vault(None).await;
    let outcome = if failed {
        Outcome::BackendError
    } else if scope.record().blocked.is_some() {
        Outcome::Refused
    } else {
        Outcome::Served
    };
    scope.finish(200, outcome);
}

/// What a relayed SSE block becomes.
enum Step {
    /// Passed on as it came (with its line ends made plain).
    Pass,
    /// Written anew.
    Replace(String),
    /// Left out.
    Drop,
    /// A server's request refused: left out, and answered to the server with this error.
    Decline(Value),
}

/// What a message the upstream sent on a stream becomes.
enum Judged {
    /// Passed on as it came.
    Pass,
    /// Written anew.
    Replace(Value),
    /// Left out.
    Drop,
    /// A server's request refused: left out, and answered to the server with this error.
    Decline(Value),
}

/// One SSE block: its message judged ([`message`]), written back in its event.
async fn inspect(
    ex: &Exchange,
    scope: &mut RequestScope,
    watch: &Watch,
    block: &str,
    answered: &mut bool,
) -> Step {
    let Some(event) = sse::parse_block(block) else {
        return Step::Pass;
    };
    // An event with no data is not dispatched to a client.
    if event.data.is_empty() {
        return Step::Pass;
    }
    let parsed = serde_json::from_str::<Value>(&event.data).map_err(|e| e.to_string());
    match message(ex, scope, watch, parsed, answered).await {
        Judged::Pass => Step::Pass,
        Judged::Replace(m) => Step::Replace(sse::replace_data(block, &m.to_string())),
        Judged::Drop => Step::Drop,
        Judged::Decline(answer) => Step::Decline(answer),
    }
}

/// One message on a stream, whatever its framing: a tool-list change forgets the cached list;
/// a server's request or notification is judged (`asked`, `told`); in the answer to a judged
/// request, the first response (whatever its id) is judged and any later one dropped; on a
/// stream no request waits on, a response is judged as the answer to none; and what cannot be
/// read as JSON is answered with the door's fault where an answer is awaited, else left out.
async fn message(
    ex: &Exchange,
    scope: &mut RequestScope,
    watch: &Watch,
    parsed: Result<Value, String>,
    answered: &mut bool,
) -> Judged {
    if let Ok(message) = &parsed {
        if matches!(codec::kind(message), Kind::Notification { ref method } if method == "notifications/tools/list_changed")
        {
            ex.app.mcp_tools().forget(&ex.app.state, &ex.key).await;
        }
    }
    if let Ok(message) = &parsed {
        match codec::kind(message) {
            Kind::Request { method, .. } => {
                return match codec::asked(&method) {
                    Some(how) => asked(scope, message.clone(), &how).await,
                    None => told(scope, message.clone(), &method, true).await,
                };
            }
            Kind::Notification { method } => {
                if let Some(tool) = task_status(ex, &method, message).await {
                    return task_told(ex, scope, message.clone(), &tool).await;
                }
                return told(scope, message.clone(), &method, false).await;
            }
            _ => {}
        }
    }
    if !watch.judges() {
        // A stream no request of the caller's is answered on (the GET stream): a response on
        // it is the answer to none, judged all the same; what is no JSON-RPC message is not
        // passed on.
        return match parsed {
            Ok(mut m) if is_response(&m) => {
                let id = m.get("id").cloned().unwrap_or(Value::Null);
                match judge_other(scope, &id, "response", &mut m).await {
                    true => Judged::Replace(m),
                    false => Judged::Drop,
                }
            }
            _ => Judged::Drop,
        };
    }
    let mut message = match parsed {
        Ok(m) if is_response(&m) => m,
        Ok(_) => codec::error(
            watch.id(),
            codec::UPSTREAM_ERROR,
            &format!(
                "MCP server '{}' sent an event that is not a JSON-RPC message, so it is not passed on",
                ex.server.name
            ),
            None,
        ),
        Err(e) => codec::error(
            watch.id(),
            codec::UPSTREAM_ERROR,
            &format!(
                "MCP server '{}' sent an event that cannot be judged (not JSON: {e}), so it is not passed on",
                ex.server.name
            ),
            None,
        ),
    };
    if std::mem::replace(answered, true) {
        return Judged::Drop;
    }
    if is_response(&message) {
        judge(ex, scope, watch, &mut message).await;
    }
    Judged::Replace(message)
}

/// A server's request of the client, on any stream, judged before the client sees it (see
/// `codec::mcp::asked`). Refused, the server gets the door's error.
async fn asked(scope: &mut RequestScope, mut message: Value, how: &codec::Asked) -> Judged {
    if !scope.runs(how.rail) {
        return Judged::Pass;
    }
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
        return Judged::Pass;
    };
    let eval = scope.check(how.rail, (how.payload)(params)).await;
    let refused = match Refusal::from_eval(&eval) {
        Some(refusal) => refusal.message(),
        None if eval.verdict == Verdict::Allow => return Judged::Pass,
        None => match (how.apply)(params, &eval.payload) {
            Ok(()) => return Judged::Replace(message),
            Err(e) => format!("the server's request could not be passed on: {e}"),
        },
    };
    Judged::Decline(violation(&id, &refused, None))
}

/// A server's notification, or a request of the client no rail maps (`roots/list`, a task's,
/// one this door does not know), on any stream: its params judged as the result of a call
/// named after its method. A refused notification is left out; a refused request is answered
/// to the server with the door's error.
async fn told(scope: &mut RequestScope, message: Value, method: &str, request: bool) -> Judged {
    if method == "notifications/tools/list_changed" && message.get("params").is_none() {
        return Judged::Pass;
    }
    told_as(scope, message, method, request).await
}

/// The tool a task status notification is about (`notifications/tasks/status`), when the door
/// saw the task made.
async fn task_status(ex: &Exchange, method: &str, message: &Value) -> Option<String> {
    if method != "notifications/tasks/status" {
        return None;
    }
    let task = message.pointer("/params/taskId")?.as_str()?;
    super::tasks::tool(&ex.app.state, ex.agent.tenant(), &ex.server.name, task).await
}

/// A task's status, on whichever stream of whichever session it arrives: what its tool says,
/// judged as that tool's result, and remembered as the reading session's read of the tool
/// (its status message and any result text), so `flow` knows what this session was told. A
/// read the store cannot take is not handed over (whatever `on_unavailable` says).
async fn task_told(ex: &Exchange, scope: &mut RequestScope, message: Value, tool: &str) -> Judged {
    let id = format!(
        "{}:{}",
        scope.ctx().request_id,
        message
            .pointer("/params/taskId")
            .and_then(Value::as_str)
            .unwrap_or_default()
    );
    let read = match ex.agent.read(&ex.app.state, tool, &id).await {
        Ok(read) => Some(read),
        Err(e) => {
            tracing::warn!(error = %e, "a task's status left out: it could not be remembered");
            return Judged::Drop;
        }
    };
    let judged = told_as(scope, message.clone(), tool, false).await;
    if let Some(read) = read {
        let text = match &judged {
            Judged::Replace(m) => status_text(m),
            Judged::Pass => status_text(&message),
            _ => None,
        };
        ex.agent.seen(&ex.app.state, read, text.as_deref()).await;
    }
    judged
}

/// What a task status notification tells a client in text: its status message, and the text
/// of a result it carries.
fn status_text(message: &Value) -> Option<String> {
    let params = message.get("params")?;
    let mut texts: Vec<&str> = params
        .get("statusMessage")
        .and_then(Value::as_str)
        .into_iter()
        .collect();
    if let Some(parts) = params.pointer("/result/content").and_then(Value::as_array) {
        texts.extend(parts.iter().filter_map(|p| p.get("text")?.as_str()));
    }
    Some(texts.join("\n"))
}

/// [`told`], the params judged as the result of a call named `name`.
async fn told_as(
    scope: &mut RequestScope,
    mut message: Value,
    name: &str,
    request: bool,
) -> Judged {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let Some(params) = message.get_mut("params") else {
        return Judged::Pass;
    };
    let mut value = std::mem::take(params);
    let call = walk::call(&codec::id_text(&id), name);
    let judged = scope
        .judge_value(
            Rail::ToolResult,
            vec![codec::call_message(call.clone())],
            walk::answer(&call),
            &mut value,
            &walk::SERVER,
        )
        .await;
    match judged {
        Ok(()) => {
            message["params"] = value;
            Judged::Replace(message)
        }
        Err(refusal) if request => Judged::Decline(violation(&id, &refusal.message(), None)),
        Err(_) => Judged::Drop,
    }
}

/// Judge, in place, a response to the request `id` of `method` that no rail maps: its result
/// (or error) as the result of a call named after the method. Refused, it becomes the door's
/// policy error; returns whether it was passed.
async fn judge_other(
    scope: &mut RequestScope,
    id: &Value,
    method: &str,
    message: &mut Value,
) -> bool {
    let key = if message.get("error").is_some() {
        "error"
    } else {
        "result"
    };
    let Some(slot) = message.get_mut(key) else {
        return true;
    };
    let mut value = std::mem::take(slot);
    let call = walk::call(&codec::id_text(id), method);
    let judged = scope
        .judge_value(
            Rail::ToolResult,
            vec![codec::call_message(call.clone())],
            walk::answer(&call),
            &mut value,
            &walk::SERVER,
        )
        .await;
    match judged {
        Ok(()) => {
            message[key] = value;
            true
        }
        Err(refusal) => {
            *message = blocked_error(scope, id, &refusal);
            false
        }
    }
}

/// Answer a server's request the daemon refused (see [`asked`]), in the caller's session.
fn decline(ex: &Exchange, answer: Value) {
    let headers = headers::own_message(&ex.headers);
    let (app, server) = (ex.app.clone(), ex.server.clone());
    tokio::spawn(async move {
        let body = Bytes::from(answer.to_string());
        let sent = app
            .mcp_upstream()
            .send(&server, axum::http::Method::POST, headers, body)
            .await;
        if let Err(e) = sent {
            tracing::debug!(server = %server.name, error = %e, "declining a server's request failed");
        }
    });
}

/// Judge `message`, a response in the answer to the watched request, in place: it answers the
/// caller's id, and the rails have seen everything a client reads in it.
async fn judge(ex: &Exchange, scope: &mut RequestScope, watch: &Watch, message: &mut Value) {
    if let Some(obj) = message.as_object_mut() {
        obj.insert("id".into(), watch.id().clone());
        obj.insert("jsonrpc".into(), json!("2.0"));
    }
    let both = message.get("result").is_some() && message.get("error").is_some();
    if both {
        *message = codec::error(
            watch.id(),
            codec::UPSTREAM_ERROR,
            &format!(
                "MCP server '{}' answered with both a result and an error, so neither is passed on",
                ex.server.name
            ),
            None,
        );
        return;
    }
    match watch {
        Watch::None => {}
        Watch::Answer { id, method } => {
            judge_other(scope, id, method, message).await;
        }
        Watch::List { id, paged } => judge_list(ex, scope, id, *paged, message).await,
        Watch::Call(c) if message.get("error").is_some() => {
            judge_error(ex, scope, c, message).await
        }
        Watch::Call(c) => judge_result(ex, scope, c, message).await,
    }
}

async fn judge_list(
    ex: &Exchange,
    scope: &mut RequestScope,
    id: &Value,
    paged: bool,
    message: &mut Value,
) {
    let Some(result) = message.get_mut("result") else {
        return;
    };
    let tools = match codec::tools_of(result) {
        Ok(tools) => tools,
        Err(e) => {
            *message = codec::error(
                id,
                codec::UPSTREAM_ERROR,
                &format!(
                    "MCP server '{}' answered tools/list with {e}",
                    ex.server.name
                ),
                None,
            );
            return;
        }
    };
    let complete = !paged && result.get("nextCursor").is_none_or(Value::is_null);
    let mut listed = None;
    if complete {
        if let Some(raw) = result.get("tools").and_then(Value::as_array) {
            listed = Some(
                ex.app
                    .mcp_tools()
                    .put(&ex.app.state, ex.agent.tenant(), &ex.key, raw)
                    .await,
            );
        }
    }
    // Tools whose definitions are not the pinned ones are hidden before the chain runs.
    let mut shown = None;
    if scope.pins_mcp(&ex.server.name) {
        let page: Vec<crate::pins::Declared>;
        let declared = match &listed {
            Some(l) => &l.declared,
            None => {
                page = result
                    .get("tools")
                    .and_then(Value::as_array)
                    .map(|raw| {
                        raw.iter()
                            .filter_map(crate::pins::Declared::of_entry)
                            .collect()
                    })
                    .unwrap_or_default();
                &page
            }
        };
        let mut pinned = tools.clone();
        if let Err(e) = scope
            .pin_mcp(&ex.server.name, &mut pinned, declared, complete)
            .await
        {
            tracing::warn!(error = %e, "state store unavailable: an MCP tool list withheld, its pins unknown");
            *message = codec::error(
                id,
                codec::INTERNAL_ERROR,
                "the tool list is withheld: Railyard could not read the tools' pins (the state store did not answer)",
                None,
            );
            return;
        }
        shown = Some(pinned);
    }
    let judged = match offered(scope, shown.as_ref().unwrap_or(&tools)).await {
        Err(refusal) => {
            *message = blocked_error(scope, id, &refusal);
            return;
        }
        Ok(judged) => judged,
    };
    // What the tools rail does not see of the list (a tool's title, annotations, output
    // schema, icons and `_meta`, the list's own fields) reaches the client too.
    let mut rest = codec::list_rest(result);
    let call = walk::call(&codec::id_text(id), "tools/list");
    let judged_rest = scope
        .judge_value(
            Rail::ToolResult,
            vec![codec::call_message(call.clone())],
            walk::answer(&call),
            &mut rest,
            &walk::SERVER,
        )
        .await;
    if let Err(refusal) = judged_rest {
        *message = blocked_error(scope, id, &refusal);
        return;
    }
    codec::put_list_rest(result, rest);
    if judged != tools {
        codec::rewrite_tools(result, &judged);
    }
    // Filtered for this caller: no cache may serve it to another.
    if let Some(scope) = result.get_mut("cacheScope") {
        *scope = json!("private");
    }
    // Tools held for a person's approval: the client is told which requests wait.
    if scope.approvals().is_some() {
        annotate(result, scope.railyard());
    }
}

/// The tools the call's result is judged with: an error, a task made or a request for input is
/// not the tool's result, so it is not held to the tool's output schema.
fn result_tools(c: &CallWatch, error: bool) -> Vec<ToolDef> {
    let mut tools = c.tools.clone();
    if error {
        for t in tools
            .iter_mut()
            .filter(|t| t.name.as_deref() == Some(c.call.name.as_str()))
        {
            t.result_schema = None;
        }
    }
    tools
}

/// The `tool_result` rail over what answered the call (`answer`, as a tool message), with the
/// tools it is judged by: the rail's evaluation, or its refusal already written into `message`.
async fn judge_answer(
    scope: &mut RequestScope,
    c: &CallWatch,
    answer: crate::model::Message,
    tools: Vec<ToolDef>,
    message: &mut Value,
) -> Option<crate::policy::chain::Evaluation> {
    let payload = Payload {
        messages: vec![codec::call_message(c.call.clone()), answer],
        tools,
        ..Payload::default()
    };
    let eval = scope.check(Rail::ToolResult, payload).await;
    if let Some(refusal) = Refusal::from_eval(&eval) {
        *message = blocked_error(scope, &c.id, &refusal);
        return None;
    }
    (eval.verdict != Verdict::Allow).then_some(eval)
}

/// The tool message the rail left in place of the call's answer.
fn edited<'e>(
    eval: &'e crate::policy::chain::Evaluation,
    c: &CallWatch,
) -> Result<&'e crate::model::Message, String> {
    eval.payload
        .messages
        .iter()
        .find(|m| m.role == "tool" && m.tool_call_id.as_deref() == Some(c.call.id.as_str()))
        .ok_or_else(|| "a policy removed the tool result".to_string())
}

async fn judge_result(ex: &Exchange, scope: &mut RequestScope, c: &CallWatch, message: &mut Value) {
    if !scope.runs(Rail::ToolResult) {
        return;
    }
    let result = &message["result"];
    if c.tool {
        // A task made: its result, whenever and wherever it arrives, is this tool's.
        if let Some(task) = super::tasks::created(result) {
            let tenant = ex.agent.tenant();
            super::tasks::remember(&ex.app.state, tenant, &ex.server.name, task, &c.call.name)
                .await;
        }
    }
    let error =
        result.get("isError") == Some(&Value::Bool(true)) || !super::tasks::complete(result);
    let answer = codec::result_message(&c.call, result);
    let Some(eval) = judge_answer(scope, c, answer, result_tools(c, error), message).await else {
        return;
    };
    let decision = scope.railyard();
    let result = &mut message["result"];
    let failed = match eval.rejections.first() {
        Some(r) => Some(r.reason.clone()),
        None => edited(&eval, c)
            .and_then(|m| codec::apply_result_edit(result, m))
            .err()
            .map(|e| format!("the tool result could not be passed on: {e}")),
    };
    match failed {
        Some(reason) if c.tool => *result = refusal_result(&reason, ex.routed),
        // A read's answer has no error flag a client would heed: it is refused as a whole.
        Some(reason) => {
            *message = violation(&c.id, &reason, Some(decision));
            return;
        }
        None => {}
    }
    annotate(&mut message["result"], decision);
}

/// A JSON-RPC error answering the call: its message and data reach the model as a failed
/// tool's text does, so the rail judges them as the call's result.
async fn judge_error(ex: &Exchange, scope: &mut RequestScope, c: &CallWatch, message: &mut Value) {
    if !scope.runs(Rail::ToolResult) {
        return;
    }
    let answer = codec::error_message(&c.call, &message["error"]);
    let Some(eval) = judge_answer(scope, c, answer, result_tools(c, true), message).await else {
        return;
    };
    let error = &mut message["error"];
    let failed = match eval.rejections.first() {
        Some(r) => Err(r.reason.clone()),
        None => edited(&eval, c)
            .and_then(|m| codec::apply_error_edit(error, m))
            .map_err(|e| format!("the tool's error could not be passed on: {e}")),
    };
    if let Err(reason) = failed {
        *message = codec::error(
            &c.id,
            codec::UPSTREAM_ERROR,
            &reason,
            Some(json!({"railyard": scope.railyard()})),
        );
        let _ = ex;
    }
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
    violation(id, &refusal.message(), Some(scope.railyard()))
}

/// The door's policy error (`-32015`) answering `id`, with the decision when it goes to the
/// caller (the upstream, answered in the caller's place, is not shown it).
fn violation(id: &Value, message: &str, railyard: Option<Value>) -> Value {
    let mut data = json!({"type": "policy_violation"});
    if let Some(railyard) = railyard {
        data["railyard"] = railyard;
    }
    codec::error(id, codec::POLICY_VIOLATION, message, Some(data))
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

/// A request a policy blocked: a JSON-RPC error (`-32015`) naming the policy and its reason.
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
        BackendError::Unreachable(why) => {
            // Why (its address, its error) is the log's, not the caller's.
            tracing::warn!(request_id = %scope.request_id(), server, error = %why, "MCP server unreachable");
            (
                StatusCode::BAD_GATEWAY,
                format!("MCP server '{server}' is unreachable"),
            )
        }
    };
    scope.finish(status.as_u16(), Outcome::BackendError);
    json_answer(
        status,
        &codec::error(id, codec::UPSTREAM_ERROR, &message, None),
    )
}
