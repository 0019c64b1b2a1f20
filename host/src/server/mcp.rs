//! The MCP door: `/mcp/<name>` in front of each configured MCP server, speaking the Streamable
//! HTTP transport both ways (the session era, 2025-03-26 to 2025-11-25, and the stateless one,
//! 2026-07-28). Callers authenticate with Railyard keys as on every door; the upstream gets only
//! the transport's headers, its configured credentials and the caller headers config forwards.
//!
//! The rails, on the hop where tools run:
//! - a `tools/list` result is the upstream's declared tools (cached, see `tools`), shown to the
//!   caller as the `tools` rail leaves them (hidden tools left out, descriptions rewritten);
//! - a `tools/call` request is one call on the `tool_call` rail, checked against the called
//!   tool's declaration (the only one the rails see for a call, after the `tools` rail said it
//!   is offered to this caller). A
//!   hidden tool is unknown to the caller (`-32602`); a rejected call is answered as a tool
//!   error (`isError`, the reason as its text: MCP clients hand that to the model, which can
//!   correct itself); a block is a JSON-RPC error (`-32015`). Neither reaches the upstream.
//! - its result goes through the `tool_result` rail before the caller (and so the model) sees it;
//! - so does the answer to a `resources/read` or `prompts/get` (a resource's contents, a
//!   prompt's messages: text a client hands its model), to the lists of them (their
//!   descriptions) and to a completion (suggestions a client shows its user), as the result of a
//!   call named after the method, which the session's later calls count as read (`flow`);
//! - a server's requests of the client, on any stream: a sampling request (what the client's
//!   model will read) through the `input` rail, an elicitation (what its user will read) through
//!   the `output` rail; refused, the server is answered with the door's error.
//!
//! - everything else is walked leaf by leaf (`codec::mcp::walk`), both ways: what the server
//!   sends (the answer to any other request: `initialize`, a task's, a skill's, a method this
//!   door does not know; its notifications on any stream; its other requests) through the
//!   `tool_result` rail as the result of a call named after its method, what the caller sends
//!   (any other request's params, its notifications, its answers to the server's requests)
//!   through the `input` rail as the request's fields. A refused notification is left out.
//!
//! One decision record per HTTP request.

mod answer;
mod headers;
mod history;
mod tasks;
mod tools;

pub(crate) use tools::ToolCache;

use super::error::ApiError;
use super::ingress;
use super::{App, RequestId};
use crate::codec::mcp::{self as codec, Kind};
use crate::codec::Door;
use crate::config::McpServer;
use crate::model::{Payload, Rail, ToolCall, ToolDef};
use crate::policy::record::{Outcome, Target};
use crate::rails::{Refusal, RequestScope};
use answer::Watch;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::Extension;
use bytes::Bytes;
use serde_json::{Map, Value};
use std::sync::Arc;

/// Most pages of `tools/list` the daemon reads when it fetches a server's tools itself.
const MAX_PAGES: usize = 32;

/// One request on its way to an upstream.
pub(super) struct Exchange {
    app: Arc<App>,
    server: McpServer,
    /// Whose tool list applies.
    key: tools::Key,
    /// Whose reads a call is judged after.
    agent: history::Agent,
    /// The headers for the upstream.
    headers: HeaderMap,
    /// The caller uses the stateless protocol's routing headers.
    routed: bool,
}

/// The handler of `/mcp/{name}`.
pub(crate) async fn door(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (app, headers) = (&app, &headers);
    ingress::routed(
        app,
        Door::Mcp,
        request_id,
        headers,
        |mut scope| async move {
            scope.set_target(target(&name, method.as_str(), None));
            serve(app.clone(), scope, name, method, headers.clone(), body).await
        },
    )
    .await
}

/// The record's target: names as the caller wrote them only when they are shaped like names.
fn target(server: &str, method: &str, tool: Option<&str>) -> Target {
    use crate::policy::record::name;
    Target {
        server: name(server),
        method: name(method),
        tool: tool.map(name),
    }
}

async fn serve(
    app: Arc<App>,
    mut scope: RequestScope,
    name: String,
    method: Method,
    caller: HeaderMap,
    body: Body,
) -> Response {
    // DNS rebinding: a page on another site must not reach a door on loopback through the
    // victim's browser. The specification asks servers to check `Host` and `Origin`; the door
    // is the server its callers see (the upstream never gets either).
    if let Some(refused) = rebinding(&scope.set().config().mcp, &caller) {
        return answer::error(
            scope,
            StatusCode::FORBIDDEN,
            Outcome::Invalid,
            &Value::Null,
            codec::INVALID_REQUEST,
            &refused,
        );
    }
    let Some(server) = scope.set().config().mcp.server(&name).cloned() else {
        let error = ApiError::NotFound(format!(
            "/mcp/{name} (no MCP server named '{name}' is configured)"
        ));
        return fail(scope, error);
    };
    scope.add_metadata("mcp.server", &name);
    let session = caller.get("mcp-session-id").and_then(|v| v.to_str().ok());
    let credentials: Vec<&[u8]> = server
        .forward_headers
        .iter()
        .filter_map(|h| caller.get(h).map(HeaderValue::as_bytes))
        .collect();
    let key = tools::Key::new(&name, session, &credentials);
    let ex = Exchange {
        agent: history::Agent::of(&scope, &caller),
        headers: headers::upstream(&caller, &server.forward_headers),
        routed: headers::routed(&caller),
        app,
        server,
        key,
    };
    match method {
        Method::POST => post(ex, scope, body).await,
        Method::GET => forward(ex, scope, Method::GET, Bytes::new(), Watch::None).await,
        Method::DELETE => {
            // The session's tool list goes with it; the agent's reads stay (its next session,
            // through any server, is the same conversation).
            let (app, key) = (ex.app.clone(), ex.key.clone());
            let response = forward(ex, scope, Method::DELETE, Bytes::new(), Watch::None).await;
            if response.status().is_success() {
                app.mcp_tools().forget(&app.state, &key).await;
            }
            response
        }
        _ => {
            let mut response = answer::error(
                scope,
                StatusCode::METHOD_NOT_ALLOWED,
                Outcome::Invalid,
                &Value::Null,
                codec::INVALID_REQUEST,
                &format!("{method} is not part of the MCP transport: use POST, GET or DELETE"),
            );
            response
                .headers_mut()
                .insert("allow", HeaderValue::from_static("GET, POST, DELETE"));
            response
        }
    }
}

/// Why a request is refused for its `Host` or `Origin` (`[mcp] allowed_hosts`,
/// `allowed_origins`), if it is.
fn rebinding(config: &crate::config::McpConfig, caller: &HeaderMap) -> Option<String> {
    let value = |h: axum::http::HeaderName| caller.get(h).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if let Some(host) = value(axum::http::header::HOST) {
        if !config.host_allowed(host) {
            return Some(format!(
                "the Host '{}' is not one this door answers to: add it to [mcp] allowed_hosts",
                crate::policy::record::name(host)
            ));
        }
    }
    if let Some(origin) = value(axum::http::header::ORIGIN) {
        if !config.origin_allowed(origin) {
            return Some(format!(
                "requests from the Origin '{}' are not served: add it to [mcp] allowed_origins",
                crate::policy::record::name(origin)
            ));
        }
    }
    None
}

/// A POST: one JSON-RPC message.
async fn post(ex: Exchange, mut scope: RequestScope, body: Body) -> Response {
    let bytes = match ingress::read_body(&scope, body).await {
        Ok(b) => b,
        Err(e) => return fail(scope, e),
    };
    let (message, bytes) = match crate::codec::json::parse_noting_repeats(&bytes) {
        // Parsers differ on which of two equal keys counts: what goes on is what was judged.
        Ok((v, true)) => {
            let bytes = Bytes::from(v.to_string());
            (v, bytes)
        }
        Ok((v, false)) => (v, bytes),
        Err(e) => {
            return answer::error(
                scope,
                StatusCode::BAD_REQUEST,
                Outcome::Invalid,
                &Value::Null,
                codec::PARSE_ERROR,
                &format!("the body is not valid JSON: {e}"),
            )
        }
    };
    let server = ex.server.name.clone();
    // The agent session's vault: added to by any answer that hides a value; read by a call
    // (`call`), whose arguments may name what a result hid.
    scope.open_agent_vault(ex.agent.id());
    match codec::kind(&message) {
        Kind::Request { id, method } => {
            scope.set_target(target(&server, &method, None));
            match method.as_str() {
                // The call's name and arguments pass the tool_call rail; the rest of its params
                // (`_meta`, a task's settings) is what the client sends, like any other.
                "tools/call" => match sent(&mut scope, message, bytes, "params", CALLED).await {
                    Ok((message, bytes)) => call(ex, scope, id, message, bytes).await,
                    Err(refusal) => answer::blocked(scope, &id, &refusal),
                },
                "tools/list" => match sent(&mut scope, message, bytes, "params", &[]).await {
                    Ok((message, bytes)) => {
                        let paged = message
                            .pointer("/params/cursor")
                            .is_some_and(Value::is_string);
                        forward(ex, scope, Method::POST, bytes, Watch::List { id, paged }).await
                    }
                    Err(refusal) => answer::blocked(scope, &id, &refusal),
                },
                m => match sent(&mut scope, message, bytes, "params", &[]).await {
                    Ok((message, bytes)) => {
                        let watch = match codec::READS.contains(&m) {
                            true => {
                                let read = codec::read_of(&id, m, message.get("params"));
                                Watch::read(id, read)
                            }
                            false => match task_result(&ex, m, &message).await {
                                Some(tool) => {
                                    let call = ToolCall::function(
                                        codec::id_text(&id),
                                        tool.clone(),
                                        "{}".into(),
                                    );
                                    let tools = match declared(&ex, None).await {
                                        Ok(t) => t
                                            .tools
                                            .iter()
                                            .filter(|t| t.name.as_deref() == Some(tool.as_str()))
                                            .cloned()
                                            .collect(),
                                        Err(_) => Vec::new(),
                                    };
                                    Watch::call(id, call, tools)
                                }
                                None => Watch::answer(id, m),
                            },
                        };
                        forward(ex, scope, Method::POST, bytes, watch).await
                    }
                    Err(refusal) => answer::blocked(scope, &id, &refusal),
                },
            }
        }
        Kind::Notification { method } if method == "tools/call" => {
            scope.set_target(target(&server, &method, None));
            // Without an id its result could not be told apart, so it could not be judged.
            answer::error(
                scope,
                StatusCode::BAD_REQUEST,
                Outcome::Invalid,
                &Value::Null,
                codec::INVALID_REQUEST,
                "tools/call is a request: it needs an id (a string or a number)",
            )
        }
        Kind::Notification { method } => {
            scope.set_target(target(&server, &method, None));
            match sent(&mut scope, message, bytes, "params", &[]).await {
                Ok((_, bytes)) => forward(ex, scope, Method::POST, bytes, Watch::None).await,
                Err(refusal) => answer::blocked(scope, &Value::Null, &refusal),
            }
        }
        Kind::Response { id } => {
            scope.set_target(target(&server, "response", None));
            // The caller's answer to the server's request: what its model sampled, what its
            // user filled in, its roots.
            let key = match message.get("error").is_some() {
                true => "error",
                false => "result",
            };
            match sent(&mut scope, message, bytes, key, &[]).await {
                Ok((_, bytes)) => forward(ex, scope, Method::POST, bytes, Watch::None).await,
                Err(refusal) => answer::blocked(scope, &id, &refusal),
            }
        }
        Kind::Other => {
            let message = if message.is_array() {
                "a batch of JSON-RPC messages: MCP has not allowed batches since 2025-06-18, and \
                 Railyard judges every message on its own; send them one per request"
            } else {
                "the body is not a JSON-RPC request, notification or response"
            };
            answer::error(
                scope,
                StatusCode::BAD_REQUEST,
                Outcome::Invalid,
                &Value::Null,
                codec::INVALID_REQUEST,
                message,
            )
        }
    }
}

/// The tool whose result a `tasks/result` (or `tasks/get`) asks for, when the door saw the
/// task made: the answer is that tool's result, judged and remembered as it.
async fn task_result(ex: &Exchange, method: &str, message: &Value) -> Option<String> {
    if !matches!(method, "tasks/result" | "tasks/get") {
        return None;
    }
    let task = tasks::asked(message)?;
    tasks::tool(&ex.app.state, ex.agent.tenant(), &ex.server.name, task).await
}

/// A `tools/call`'s params another rail judges: the call itself.
const CALLED: &[&str] = &["name", "arguments"];

/// What the caller sends the server (`message[key]`: a request's or a notification's params, a
/// response's result or error; but its members `except`, which another rail judges) judged on
/// the `input` rail, its leaves as the request's fields (`codec::mcp::walk::CLIENT` names the
/// inert ones): the message and its body, written anew when a policy changed a leaf, or the
/// refusal.
async fn sent(
    scope: &mut RequestScope,
    mut message: Value,
    bytes: Bytes,
    key: &str,
    except: &[&str],
) -> Result<(Value, Bytes), Refusal> {
    if !scope.runs(Rail::Input) {
        return Ok((message, bytes));
    }
    let Some(slot) = message.get_mut(key) else {
        return Ok((message, bytes));
    };
    // Paths are the object's own (`uri`, `arguments.city`); anything else is judged as the
    // member `value` of one.
    let (mut wrapped, object) = match std::mem::take(slot) {
        Value::Object(o) => (o, true),
        other => (Map::from_iter([("value".to_string(), other)]), false),
    };
    // Judged elsewhere: out of the walk, and back in place after it.
    let kept: Vec<(String, Value)> = except
        .iter()
        .filter_map(|k| wrapped.shift_remove(*k).map(|v| (k.to_string(), v)))
        .collect();
    let fields = crate::codec::closed::fields(&wrapped, &codec::walk::CLIENT);
    let restore = |message: &mut Value, wrapped: Map<String, Value>| {
        let mut whole: Map<String, Value> = kept.into_iter().collect();
        whole.extend(wrapped);
        message[key] = match object {
            true => Value::Object(whole),
            false => whole.remove("value").unwrap_or(Value::Null),
        };
    };
    if fields.is_empty() {
        restore(&mut message, wrapped);
        return Ok((message, bytes));
    }
    let eval = scope
        .check(
            Rail::Input,
            Payload {
                fields,
                ..Payload::default()
            },
        )
        .await;
    if let Some(refusal) = Refusal::from_eval(&eval) {
        return Err(refusal);
    }
    if eval.verdict == crate::model::Verdict::Allow {
        restore(&mut message, wrapped);
        return Ok((message, bytes));
    }
    crate::codec::closed::write_fields(&mut wrapped, &eval.payload.fields);
    restore(&mut message, wrapped);
    let bytes = Bytes::from(message.to_string());
    Ok((message, bytes))
}

/// A `tools/call`: the tool must be offered to this caller, the call passes the `tool_call`
/// rail, and only then goes upstream (edited, if a policy edited it).
async fn call(
    ex: Exchange,
    mut scope: RequestScope,
    id: Value,
    mut message: Value,
    bytes: Bytes,
) -> Response {
    let call = match codec::call_of(&id, message.get("params")) {
        Ok(c) => c,
        Err(e) => {
            return answer::error(
                scope,
                StatusCode::BAD_REQUEST,
                Outcome::Invalid,
                &id,
                codec::INVALID_PARAMS,
                &e,
            )
        }
    };
    scope.set_target(target(&ex.server.name, "tools/call", Some(&call.name)));
    let meta = message
        .pointer("/params/_meta")
        .and_then(Value::as_object)
        .cloned();
    // The tool list, the agent's reads and its vault, asked of the store together: on Redis
    // the requests share round trips on the multiplexed connection.
    let judges_call = scope.runs(Rail::ToolCall);
    let reads = async {
        match judges_call {
            true => Some(ex.agent.messages(&ex.app.state).await),
            false => None,
        }
    };
    let (declared, reads, ()) =
        tokio::join!(declared(&ex, meta.as_ref()), reads, scope.read_vault());
    let listed = match declared {
        Ok(tools) => tools,
        Err(e) => return answer::upstream_failure(scope, &ex.server.name, &id, e),
    };
    // The rails judge this call against its tool's declaration: whether it is declared and
    // offered to this caller, and its schemas. Servers declare dozens of tools with large
    // schemas; the others have no bearing on this call.
    let mut declared: Vec<ToolDef> = listed
        .tools
        .iter()
        .filter(|t| t.name.as_deref() == Some(call.name.as_str()))
        .cloned()
        .collect();
    // A tool whose definition is not the pinned one is hidden here as in the list.
    if scope.pins_mcp(&ex.server.name) {
        let pinned: Vec<crate::pins::Declared> = listed
            .declared
            .iter()
            .filter(|d| d.name == call.name)
            .cloned()
            .collect();
        if let Err(e) = scope
            .pin_mcp(&ex.server.name, &mut declared, &pinned, false)
            .await
        {
            tracing::warn!(error = %e, "state store unavailable: an MCP call refused, its tool's pin unknown");
            return fail(scope, ApiError::StateUnavailable);
        }
    }
    if ex.routed {
        // The caller's routing headers must say what its body says (the door answers for the
        // server, which never sees the caller's headers: they are written anew from the call the
        // rails judged).
        let schema = declared
            .first()
            .and_then(|t| t.parameters.as_ref())
            .map(crate::model::Schema::value);
        let args: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
        if let Err(e) = headers::check(&ex.headers, &call.name, &args, schema.as_ref()) {
            return answer::error(
                scope,
                StatusCode::BAD_REQUEST,
                Outcome::Invalid,
                &id,
                codec::HEADER_MISMATCH,
                &format!("{e} (MCP 2026-07-28: routing headers must match the body)"),
            );
        }
    }
    let tools = match offered(&mut scope, &declared).await {
        Ok(tools) => tools,
        Err(refusal) => return answer::blocked(scope, &id, &refusal),
    };
    let hidden = tools
        .iter()
        .find(|t| t.name.as_deref() == Some(call.name.as_str()))
        .and_then(|t| t.hidden_by.clone());
    // A tool the server does not declare is unknown, as one hidden from this caller is: the
    // same answer, so the caller cannot tell them apart (nor reach a tool a server serves but
    // does not list).
    if hidden.is_some() || declared.is_empty() {
        let outcome = match hidden {
            Some(policy) => {
                // To this caller the tool does not exist: answered as the server would.
                scope.refuse(&Refusal {
                    rail: Rail::Tools,
                    policy,
                    reason: "the tool is hidden from this caller".into(),
                    fault: false,
                });
                Outcome::Refused
            }
            None => Outcome::Invalid,
        };
        return answer::error(
            scope,
            StatusCode::BAD_REQUEST,
            outcome,
            &id,
            codec::INVALID_PARAMS,
            &format!("Unknown tool: {}", call.name),
        );
    }
    let mut judged = call.clone();
    if let Some(reads) = reads {
        // The session's earlier results come before the call, as a conversation would have them.
        // Judged without them, a call would pass after any read: refused instead, whatever
        // `on_unavailable` says (it lets limits go uncounted, never flow forget).
        let mut messages = match reads {
            Ok(messages) => messages,
            Err(e) => {
                tracing::warn!(error = %e, "state store unavailable: an MCP call refused, its session's reads unknown");
                return fail(scope, ApiError::StateUnavailable);
            }
        };
        messages.push(codec::call_message(call.clone()));
        let payload = Payload {
            messages,
            tools: tools.clone(),
            ..Payload::default()
        };
        let mut eval = scope.check(Rail::ToolCall, payload).await;
        if let Some(refusal) = Refusal::from_eval(&eval) {
            return answer::blocked(scope, &id, &refusal);
        }
        let survived = eval
            .payload
            .messages
            .pop()
            .and_then(|m| m.tool_calls.into_iter().next());
        match survived {
            Some(c) => judged = c,
            None => {
                let reason = eval
                    .rejections
                    .first()
                    .map(|r| r.reason.clone())
                    .unwrap_or_else(|| "the call was refused by policy".into());
                return answer::rejected(scope, &id, &reason, ex.routed);
            }
        }
    }
    // The stateless protocol's routing headers are written from the call the rails judged,
    // edited or not: a server reading a `Mcp-Param-*` header a caller made up would read
    // arguments nobody judged.
    let body = if ex.routed || judged.name != call.name || judged.arguments != call.arguments {
        match rewrite_call(&ex, &mut message, &judged, &tools) {
            Ok((body, headers)) => {
                let ex = Exchange { headers, ..ex };
                return forward(
                    ex,
                    scope,
                    Method::POST,
                    body,
                    Watch::call(id, judged, tools),
                )
                .await;
            }
            Err(e) => {
                return answer::error(
                    scope,
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Outcome::Refused,
                    &id,
                    codec::INTERNAL_ERROR,
                    &e,
                )
            }
        }
    } else {
        bytes
    };
    forward(
        ex,
        scope,
        Method::POST,
        body,
        Watch::call(id, judged, tools),
    )
    .await
}

/// The request body and headers for a call as the rails left it.
fn rewrite_call(
    ex: &Exchange,
    message: &mut Value,
    call: &ToolCall,
    tools: &[ToolDef],
) -> Result<(Bytes, HeaderMap), String> {
    codec::set_arguments(message, &call.arguments)?;
    if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) {
        params.insert("name".into(), Value::String(call.name.clone()));
    }
    let mut headers = ex.headers.clone();
    if ex.routed {
        let schema = tools
            .iter()
            .find(|t| t.name.as_deref() == Some(call.name.as_str()))
            .and_then(|t| t.parameters.as_ref())
            .map(crate::model::Schema::value);
        let args: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
        headers::mirror(&mut headers, &call.name, &args, schema.as_ref());
    }
    Ok((Bytes::from(message.to_string()), headers))
}

/// The tools as this caller is offered them: the `tools` rail over the declared tools.
async fn offered(scope: &mut RequestScope, declared: &[ToolDef]) -> Result<Vec<ToolDef>, Refusal> {
    if declared.is_empty() || !scope.runs(Rail::Tools) {
        return Ok(declared.to_vec());
    }
    let mut eval = scope
        .check(
            Rail::Tools,
            Payload {
                tools: declared.to_vec(),
                ..Payload::default()
            },
        )
        .await;
    match Refusal::from_eval(&eval) {
        Some(refusal) => Err(refusal),
        None => Ok(std::mem::take(&mut eval.payload.tools)),
    }
}

/// The upstream's tools for this exchange: cached, or fetched with the daemon's own
/// `tools/list` (every page) in the caller's session. A list the upstream refuses to give is
/// empty and not cached.
async fn declared(
    ex: &Exchange,
    meta: Option<&Map<String, Value>>,
) -> Result<Arc<tools::Listed>, crate::backend::BackendError> {
    let cache = ex.app.mcp_tools();
    if let Some(tools) = cache.get(&ex.app.state, ex.agent.tenant(), &ex.key).await {
        return Ok(tools);
    }
    let mut headers = headers::own_message(&ex.headers);
    if ex.routed {
        headers.insert("mcp-method", HeaderValue::from_static("tools/list"));
    }
    let mut raw = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..MAX_PAGES {
        let id = format!("railyard-tools-{page}");
        let body = codec::list_request(&id, cursor.as_deref(), meta);
        let response = ex
            .app
            .mcp_upstream()
            .send(
                &ex.server,
                Method::POST,
                headers.clone(),
                Bytes::from(body.to_string()),
            )
            .await?;
        let Some(result) = answer::read_result(ex, response, &Value::String(id)).await? else {
            tracing::debug!(server = %ex.server.name, "the upstream gave no tool list");
            return Ok(Arc::new(tools::Listed::of(&raw)));
        };
        match result.get("tools").and_then(Value::as_array) {
            Some(page) => raw.extend(page.iter().cloned()),
            None => return Ok(Arc::new(tools::Listed::of(&raw))),
        }
        cursor = result
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        if cursor.is_none() {
            return Ok(cache
                .put(&ex.app.state, ex.agent.tenant(), &ex.key, &raw)
                .await);
        }
    }
    // Incomplete: not kept.
    Ok(Arc::new(tools::Listed::of(&raw)))
}

/// Send the request upstream and answer with what comes back (judged, where `watch` says).
async fn forward(
    ex: Exchange,
    scope: RequestScope,
    method: Method,
    body: Bytes,
    watch: Watch,
) -> Response {
    let sent = ex
        .app
        .mcp_upstream()
        .send(&ex.server, method, ex.headers.clone(), body)
        .await;
    match sent {
        Ok(response) => answer::relay(ex, scope, response, watch).await,
        Err(e) => {
            let name = ex.server.name.clone();
            answer::upstream_failure(scope, &name, watch.id(), e)
        }
    }
}

/// A request refused before it is read, its error in JSON-RPC form.
fn fail(mut scope: RequestScope, error: ApiError) -> Response {
    let (status, _, _) = error.parts();
    scope.finish(status.as_u16(), error.outcome());
    error.into_response_for(Door::Mcp)
}
