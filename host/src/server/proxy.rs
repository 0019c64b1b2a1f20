//! One pipeline for every door to a model (chat completions, responses, messages), generic over
//! the door's codec: ingress → decode → inbound rails → backend → outbound rails → encode. A
//! streamed reply goes to the relay (`crate::rails::relay`). Every exit finishes the request's
//! scope, which writes its one decision record.

use super::error::ApiError;
use super::ingress;
use super::{App, RequestId, TenantLabel};
use crate::codec::{closed, Codec, Judged, Parsed};
use crate::config::{OnBlock, UnknownFields};
use crate::model::{Content, Payload};
use crate::policy::record::BackendCall;
use crate::policy::record::Outcome;
use crate::rails::relay::Relay;
use crate::rails::{refused_beside, Beside, Inbound, Refusal, RequestOptions, RequestScope};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::Extension;
use bytes::Bytes;
use futures_util::future::Either;
use futures_util::StreamExt;
use http_body_util::BodyExt;
use serde_json::{Map, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// Caller headers that go on to an Anthropic backend (the API version and beta features the
/// client was written for).
const ANTHROPIC_HEADERS: [&str; 2] = ["anthropic-version", "anthropic-beta"];

/// The handler of a model door under the router (the data plane's listener calls [`handle`]
/// directly: `super::front`).
pub(crate) async fn door<C: Codec>(
    State(app): State<Arc<App>>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (mut response, tenant) = handle::<C>(&app, request_id, &headers, body).await;
    response.extensions_mut().insert(tenant);
    response
}

/// A request on a model door, from the way in to its response, with the tenant it was served
/// for.
pub(crate) async fn handle<C: Codec>(
    app: &Arc<App>,
    request_id: String,
    headers: &HeaderMap,
    body: Body,
) -> (Response, TenantLabel) {
    ingress::envelope(app, C::DOOR, request_id, headers, |mut scope| async move {
        match serve::<C>(app, &mut scope, headers, body).await {
            Ok(Served::Whole(response)) => response,
            Ok(Served::Stream {
                conversation,
                request,
                response,
                reserved,
            }) => stream::<C>(app, scope, conversation, &request, response, reserved),
            Err(error) => {
                if matches!(error, ApiError::Backend(_) | ApiError::Upstream { .. }) {
                    app.metrics().backend_error(error.parts().2);
                }
                let (status, _, _) = error.parts();
                scope.finish(status.as_u16(), error.outcome());
                error.into_response_for(C::DOOR)
            }
        }
    })
    .await
}

/// How far [`serve`] got: a whole answer, or a stream for the relay.
enum Served<C: Codec> {
    Whole(Response),
    Stream {
        conversation: Payload,
        request: C::Request,
        response: hyper::Response<hyper::body::Incoming>,
        /// A token budget's reservation, settled when the stream ends.
        reserved: Option<super::budget::Reserved>,
    },
}

async fn serve<C: Codec>(
    app: &Arc<App>,
    scope: &mut RequestScope,
    headers: &HeaderMap,
    body: Body,
) -> Result<Served<C>, ApiError> {
    let bytes = ingress::read_body(scope, body).await?;
    let Parsed {
        mut body,
        decoded,
        repeats,
    } = match C::parse_request(&bytes, scope.tenant_name()) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => return Err(not_an_object()),
        Err(e) => return Err(not_json(e)),
    };
    // Forwarded as it came only if no key repeats (parsers differ on which one wins) and no
    // `railyard` options are to be taken out.
    let as_it_came = !repeats && !body.contains_key("railyard");
    let allow = scope.set().config().server.allow_rail_overrides;
    let options = RequestOptions::take(&mut body, allow)
        .map_err(|e| ApiError::bad_request(e.message, Some(e.path)))?;
    scope.set_options(options);
    let refuse_unknown = scope.set().config().server.unknown_fields == UnknownFields::Refuse;
    if refuse_unknown {
        if let Some(key) = closed::unknown(&body, &C::SHAPE) {
            return Err(unknown_field(key.to_string()));
        }
        if let Some(path) = C::unknown_in_declarations(&body, &decoded) {
            return Err(unknown_field(path));
        }
    }
    // Read before the body is taken apart: a token budget reserves what the model may write.
    let budgets = super::budget::Budgets {
        tenant: scope
            .set()
            .tenant(scope.ctx().tenant.as_deref())
            .and_then(|t| t.tokens_per_minute),
        key: scope.key_budget().cloned(),
    };
    let max_out = if budgets.any() {
        super::budget::max_out(&body)
    } else {
        None
    };
    let (request, mut payload) = C::decode_parsed(body, decoded)
        .and_then(|(request, payload)| {
            crate::codec::check_arguments(&payload)?;
            Ok((request, payload))
        })
        .map_err(|e| ApiError::bad_request(e.to_string(), Some(e.path)))?;
    if refuse_unknown {
        if let Some(path) = unknown_in_messages::<C>(&payload) {
            return Err(unknown_field(path));
        }
    }
    // A structure that declares a tool, connects a server or makes a call where no codec maps
    // it would pass the tool rails: refused.
    if let Some(why) = crate::codec::structure::unmapped(&payload.messages) {
        return Err(ApiError::bad_request(
            format!(
                "the request's {why}: declare tools in `tools` and make calls as the door's calls"
            ),
            None,
        ));
    }
    if let Some(why) = crate::codec::structure::bad_id(&payload.messages) {
        return Err(ApiError::bad_request(format!("the request's {why}"), None));
    }
    // Text outside the messages' contents is judged as part of them (`codec::closed`).
    for m in &mut payload.messages {
        closed::fold(m, C::own_shape(m).unwrap_or(&C::MESSAGE), &C::CALL);
    }
    scope.set_model(C::model(&request));
    for note in C::notes(&request) {
        scope.note(note);
    }

    scope.calls_backend();
    // A conversation the backend keeps: what its earlier turns hid from the model is in this
    // request's vault too.
    scope.open_vault(|| C::kept(&request)).await;
    let (mut conversation, edited) = match scope.inbound(payload).await {
        Inbound::Refuse(refusal) => {
            return refused::<C>(scope, &request, &refusal).map(Served::Whole);
        }
        Inbound::Forward { payload, edited } => (payload, edited),
    };
    // A tool the request forces the model to (or restricts it to) must be one it is offered: a
    // name the tools rail hid, or one never declared, is refused rather than sent on.
    let offered = |name: &str| {
        conversation
            .tools
            .iter()
            .any(|t| t.hidden_by.is_none() && t.name.as_deref() == Some(name))
    };
    if C::chosen(&request).iter().any(|n| !offered(n)) {
        return Err(ApiError::bad_request(
            "tool_choice names a tool the model is not offered: it is not declared, or not for this caller",
            Some("tool_choice".into()),
        ));
    }
    // The input rail's `parallel` plugins judge what goes to the backend, as the rails left it
    // (text outside the contents still folded in), while the backend is already answering.
    let beside = scope.beside(&conversation);
    // Folded text back where it came from, as the rails left it.
    for m in &mut conversation.messages {
        if closed::unfold(m) {
            conversation.changes.other = true;
        }
    }
    // What the rails allowed unchanged goes on as the caller's own bytes: the hop stays
    // invisible (no re-serialisation, no reordered keys) and costs less. When they only
    // replaced message contents, those values are spliced into the caller's bytes.
    let body_len = bytes.len();
    // A decoder's own change (an id it gave back) is written too.
    let edited = edited || conversation.changes.other;
    let upstream = C::upstream(&request, &conversation, edited, bytes, as_it_came);
    let reserved = super::budget::reserve(
        app,
        scope.tenant_name(),
        scope.ctx().principal.as_deref(),
        &budgets,
        body_len,
        max_out,
    )
    .await?;

    let started = Instant::now();
    let startup = app.startup();
    // The client's Authorization goes to the backend only when config says so (and never while
    // Railyard authenticates callers: then it carries a Railyard key).
    let client_auth = if startup.backend.forward_client_authorization {
        headers.get(header::AUTHORIZATION).cloned()
    } else {
        None
    };
    let mut forwarded: Vec<(HeaderName, HeaderValue)> = ANTHROPIC_HEADERS
        .iter()
        .filter_map(|name| {
            let value = headers.get(*name)?.clone();
            Some((HeaderName::from_static(name), value))
        })
        .collect();
    if let Some(trace) = scope.trace() {
        forwarded.extend(trace.backend_starts("POST", &app.backend.url(C::ROUTE)));
    }
    let stream = C::stream_requested(&request);
    let exchange = async {
        let response = app
            .backend
            .post(C::ROUTE, upstream, client_auth, forwarded)
            .await?;
        app.metrics().backend(started.elapsed());
        let status = response.status();
        if stream && status.is_success() {
            return Ok(Exchange::Stream(response));
        }
        let retry_after = response.headers().get(header::RETRY_AFTER).cloned();
        let left = app.backend.timeout().saturating_sub(started.elapsed());
        let bytes = app.backend.read_body(response.into_body(), left).await?;
        Ok(Exchange::Whole {
            status,
            retry_after,
            bytes,
        })
    };
    let exchange = match beside {
        None => exchange.await,
        Some(beside) => {
            // Boxed: the pair holds the call's state twice over, which every request's future
            // would otherwise carry (and every mover of it copy) for the few that run beside.
            let (eval, exchange) = Box::pin(alongside(exchange, beside)).await;
            let backend = match exchange {
                Some(_) => BackendCall::Discarded,
                None => BackendCall::Cancelled,
            };
            if let Some(refusal) = scope.settle_beside(eval, backend) {
                return refused::<C>(scope, &request, &refusal).map(Served::Whole);
            }
            exchange.expect("the backend call is awaited unless the run beside it refused")
        }
    };
    let exchange = match exchange {
        Ok(exchange) => exchange,
        Err(e) => {
            backend_failed(scope, &e);
            if let Some(r) = reserved {
                r.refund();
            }
            return Err(e.into());
        }
    };
    let (status, retry_after, bytes) = match exchange {
        Exchange::Stream(response) => {
            if let Some(trace) = scope.trace() {
                trace.backend_status(response.status().as_u16());
            }
            return Ok(Served::Stream {
                conversation,
                request,
                response,
                reserved,
            });
        }
        Exchange::Whole {
            status,
            retry_after,
            bytes,
        } => (status, retry_after, bytes),
    };
    if let Some(trace) = scope.trace() {
        trace.backend_status(status.as_u16());
        trace.backend_ends();
    }
    if let Some(r) = reserved {
        match status.is_success() {
            true => {
                let reported = serde_json::from_slice::<Value>(&bytes)
                    .ok()
                    .as_ref()
                    .and_then(crate::codec::usage::of);
                // Without a report, the answer's bytes stand for what the model wrote.
                let used = r.used(reported, bytes.len() as u64, true);
                r.settle(used);
            }
            false => r.refund(),
        }
    }
    if !status.is_success() {
        // The backend's own error keeps its status and Retry-After, in the door's error shape;
        // its message may echo the conversation, so the output rail judges it like a reply.
        let message = upstream_message(&bytes, status);
        let message = judge_error(scope, &mut conversation, message).await;
        return Err(ApiError::Upstream {
            status,
            message,
            retry_after,
        });
    }
    // The common shape is read in one pass, its messages found in place; anything else (and a
    // body with repeated keys or our own key, never forwarded as it came) the general way.
    let (read, messages) = C::read_whole(&bytes).map_err(ApiError::BadBackendResponse)?;
    if let Some(why) = crate::codec::structure::unmapped(&messages)
        .or_else(|| crate::codec::structure::bad_id(&messages))
    {
        return Err(ApiError::BadBackendResponse(format!("the reply's {why}")));
    }
    let mut judged = Vec::with_capacity(messages.len());
    // Replies left as only the refusal (their calls removed, no text of their own).
    let mut refusals = 0;
    for mut message in messages {
        let had_calls = message.tool_calls.len();
        closed::fold(&mut message, &C::MESSAGE, &C::CALL);
        let before = message.content.clone();
        let mut message = match scope.reply(&mut conversation, message).await {
            Ok(m) => m,
            Err(refusal) => return refused::<C>(scope, &request, &refusal).map(Served::Whole),
        };
        let edited = message.content != before;
        closed::unfold(&mut message);
        let calls_removed = had_calls > 0 && message.tool_calls.is_empty();
        let calls_added = message.tool_calls.len() > had_calls;
        if calls_removed && !message.has_text() {
            message.content = Some(Content::Text(scope.set().config().server.refusal.clone()));
            refusals += 1;
        }
        judged.push(Judged {
            message,
            calls_removed,
            calls_added,
            edited,
        });
    }
    if refusals > 0 && refusals == judged.len() {
        scope.refuse_reply();
    }
    // A reply no rail changed (and with no calls, whose ids get signed) goes back as the
    // backend's own bytes; one whose messages changed, with those written in place (when the
    // door can); either with the `railyard` object spliced in when there is one.
    let unchanged = !scope.reply_edited() && judged.iter().all(|j| j.message.tool_calls.is_empty());
    if let Some(out) = C::write_in_place(&bytes, &read, &judged, unchanged) {
        let out = if scope.acted() {
            splice_railyard(&out, &scope.railyard_text())
        } else {
            Some(out)
        };
        if let Some(out) = out {
            keep_vault::<C>(scope, &bytes).await;
            let outcome = scope.reply_outcome();
            scope.finish(200, outcome);
            return Ok(Served::Whole(super::json_bytes(StatusCode::OK, out)));
        }
    }
    let railyard = scope.acted().then(|| scope.railyard());
    let out =
        C::write_whole(&bytes, read, judged, railyard).map_err(ApiError::BadBackendResponse)?;
    keep_vault::<C>(scope, &bytes).await;
    let outcome = scope.reply_outcome();
    scope.finish(200, outcome);
    Ok(Served::Whole(super::json_response(StatusCode::OK, out)))
}

/// Keep the request's vault for its conversation's next request, where the backend keeps the
/// conversation (under the reply's id, read from `reply` only when there is something to keep).
async fn keep_vault<C: Codec>(scope: &mut RequestScope, reply: &[u8]) {
    let id = match scope.keeps_vault_by_reply() {
        true => C::reply_id(reply),
        false => None,
    };
    scope.keep_vault(id.as_deref()).await;
}

/// The backend's answer: a stream's head, or a whole body.
enum Exchange {
    Stream(hyper::Response<hyper::body::Incoming>),
    Whole {
        status: StatusCode,
        retry_after: Option<HeaderValue>,
        bytes: Bytes,
    },
}

/// The backend `call` and the run `beside` it at once: the run's evaluation, and the call's
/// result unless the run refused the request before the call ended (the call is then dropped,
/// which closes its connection: the backend stops where it can tell).
async fn alongside<T>(
    call: impl std::future::Future<Output = T>,
    beside: Beside,
) -> (crate::policy::chain::Evaluation, Option<T>) {
    let call = std::pin::pin!(call);
    match futures_util::future::select(beside, call).await {
        Either::Left((eval, call)) => {
            if refused_beside(&eval).is_some() {
                (eval, None)
            } else {
                (eval, Some(call.await))
            }
        }
        Either::Right((answer, beside)) => (beside.await, Some(answer)),
    }
}

/// `object` (a JSON object's text, holding at least one key) with `"railyard": railyard` (JSON
/// text) added as its last key; `None` when it does not end like an object.
fn splice_railyard(object: &[u8], railyard: &[u8]) -> Option<Bytes> {
    let end = object.iter().rposition(|b| !b.is_ascii_whitespace())?;
    if object[end] != b'}' {
        return None;
    }
    let mut out = Vec::with_capacity(object.len() + railyard.len() + 16);
    out.extend_from_slice(&object[..end]);
    out.extend_from_slice(b",\"railyard\":");
    out.extend_from_slice(railyard);
    out.push(b'}');
    Some(out.into())
}

/// The backend call failed: its span says how (a streamed answer's span ends with the request).
fn backend_failed(scope: &mut RequestScope, error: &crate::backend::BackendError) {
    if let crate::backend::BackendError::Unreachable(why) = error {
        tracing::warn!(request_id = %scope.request_id(), error = %why, "model backend unreachable");
    }
    if let Some(trace) = scope.trace() {
        trace.backend_failed(match error {
            crate::backend::BackendError::Unreachable(_) => "unreachable",
            crate::backend::BackendError::Timeout(_) => "timeout",
        });
        trace.backend_ends();
    }
}

/// The message of a backend's error body: OpenAI's and Anthropic's `error.message`, a bare
/// `message` or `detail`; anything else (an HTML page, say) is not shown.
fn upstream_message(bytes: &[u8], status: StatusCode) -> String {
    let parsed: Option<Value> = serde_json::from_slice(bytes).ok();
    let found = parsed.as_ref().and_then(|v| {
        [
            &v["error"]["message"],
            &v["message"],
            &v["detail"],
            &v["error"],
        ]
        .into_iter()
        .find_map(|m| m.as_str())
    });
    match found {
        Some(m) => crate::util::truncate(m, 2048).to_string(),
        None => format!(
            "the model backend answered HTTP {} without an error message this daemon can read",
            status.as_u16()
        ),
    }
}

/// A backend error message through the output rail, as the model's text would be.
async fn judge_error(
    scope: &mut RequestScope,
    conversation: &mut Payload,
    message: String,
) -> String {
    if !scope.runs(crate::model::Rail::Output) {
        return message;
    }
    let reply = crate::model::Message::new("assistant", Some(Content::Text(message)));
    let (eval, judged) = scope
        .judge(crate::model::Rail::Output, conversation, reply, false)
        .await;
    match (&eval.blocked, judged.content) {
        (None, Some(Content::Text(text))) => text,
        _ => "the model backend's error message was withheld by policy".into(),
    }
}

/// A blocked request or reply: a refusal in the door's shape (200) or a `policy_violation`.
fn refused<C: Codec>(
    scope: &mut RequestScope,
    request: &C::Request,
    refusal: &Refusal,
) -> Result<Response, ApiError> {
    if C::stream_requested(request) {
        return Ok(refused_stream::<C>(scope, request, refusal));
    }
    let server = &scope.set().config().server;
    let railyard = scope.railyard();
    match server.on_block {
        OnBlock::Refuse => {
            let body = C::refusal(request, scope.request_id(), &server.refusal, railyard);
            scope.finish(200, Outcome::Refused);
            Ok(super::json_response(StatusCode::OK, body))
        }
        OnBlock::Error => Err(ApiError::Blocked {
            message: refusal.message(),
            railyard,
        }),
    }
}

/// A request for a stream refused before the model answered: a stream all the same, as the
/// door's SDKs read it (their stream iterators read nothing from a JSON body), ending as a block
/// mid-stream would, per `[server] on_block_stream`: the door's error event, or the refusal
/// text and the door's refusal ending.
fn refused_stream<C: Codec>(
    scope: &mut RequestScope,
    request: &C::Request,
    refusal: &Refusal,
) -> Response {
    use crate::codec::stream::{Down, StreamCodec};
    let server = &scope.set().config().server;
    let down = Down::Refused {
        finish: server.on_block_stream == crate::config::OnBlockStream::Finish,
        text: server.refusal.clone(),
        message: refusal.message(),
        railyard: scope.railyard(),
    };
    let mut codec = C::stream(request);
    let mut out = Vec::new();
    codec.open(scope.request_id(), C::model(request).as_deref(), &mut out);
    codec.encode(down, &mut out);
    scope.finish(200, Outcome::Refused);
    sse_response(Body::from(out))
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .expect("static response parts are valid")
}

/// Hand a successful streaming backend response to a relay task; the client reads its channel.
fn stream<C: Codec>(
    app: &Arc<App>,
    scope: RequestScope,
    conversation: Payload,
    request: &C::Request,
    response: hyper::Response<hyper::body::Incoming>,
    reserved: Option<super::budget::Reserved>,
) -> Response {
    use crate::codec::stream::StreamCodec;
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    let mut codec = C::stream(request);
    let provenance = &scope.set().config().provenance;
    codec.sign_hosted(crate::rails::provenance::hosted_signer(
        provenance,
        scope.tenant_name(),
    ));
    let mut relay = Relay::new(scope, conversation, codec, tx, app.backend.timeout());
    let backend = response
        .into_body()
        .into_data_stream()
        .map(|r| r.map_err(|e| e.to_string()));
    match reserved {
        None => {
            tokio::spawn(relay.run(backend));
        }
        Some(mut reserved) => {
            // What the stream writes beyond its reservation is taken as it runs; once it ends,
            // however it ends, the reservation is settled to what it used.
            let meter = Arc::new(crate::codec::usage::Meter::default());
            relay.meter(meter.clone());
            tokio::spawn(async move {
                let run = relay.run(backend);
                tokio::pin!(run);
                let mut every = tokio::time::interval(super::budget::CHARGE_EVERY);
                loop {
                    tokio::select! {
                        () = &mut run => break,
                        _ = every.tick() => {
                            let so_far = reserved.used(meter.usage(), meter.written(), false);
                            reserved.charge(so_far).await;
                        }
                    }
                }
                let used = reserved.used(meter.usage(), meter.written(), meter.last());
                reserved.settle(used);
            });
        }
    }
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    sse_response(Body::from_stream(body))
}

/// Parse a JSON object body.
pub(crate) fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    parse_object_noting_repeats(bytes).map(|(map, _)| map)
}

/// [`parse_object`], and whether an object in the body repeats a key.
fn parse_object_noting_repeats(bytes: &[u8]) -> Result<(Map<String, Value>, bool), ApiError> {
    match crate::codec::parse_object(bytes) {
        Ok(Some(parsed)) => Ok((parsed.body, parsed.repeats)),
        Ok(None) => Err(not_an_object()),
        Err(e) => Err(not_json(e)),
    }
}

/// A request naming a field its door does not know, under `unknown_fields = "refuse"`.
fn unknown_field(path: String) -> ApiError {
    ApiError::bad_request(
        format!(
            "{} is a field this door does not know; the daemon is configured to refuse those \
             ([server] unknown_fields = \"refuse\")",
            serde_json::to_string(&path).unwrap_or_default()
        ),
        Some(path),
    )
}

/// The first field of a message or call the door does not know, by its path.
fn unknown_in_messages<C: Codec>(payload: &Payload) -> Option<String> {
    for (i, m) in payload.messages.iter().enumerate() {
        if let Some(k) = closed::unknown(&m.extra, C::own_shape(m).unwrap_or(&C::MESSAGE)) {
            return Some(format!("messages[{i}].{k}"));
        }
        for (c, call) in m.tool_calls.iter().enumerate() {
            if let Some(k) = closed::unknown(&call.extra, &C::CALL) {
                return Some(format!("messages[{i}].tool_calls[{c}].{k}"));
            }
        }
    }
    None
}

fn not_an_object() -> ApiError {
    ApiError::bad_request("the request body must be a JSON object", None)
}

fn not_json(e: serde_json::Error) -> ApiError {
    ApiError::bad_request(format!("the request body is not valid JSON: {e}"), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_railyard_object_is_spliced_in_as_the_last_key() {
        let spliced = splice_railyard(b"{\"id\":\"x\",\"n\":[1, 2]}\n ", b"{\"a\":1}").unwrap();
        let v: Value = serde_json::from_slice(&spliced).unwrap();
        assert_eq!(v, json!({"id": "x", "n": [1, 2], "railyard": {"a": 1}}));
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["id", "n", "railyard"]);
        assert!(splice_railyard(b"[1]", b"{}").is_none());
        assert!(splice_railyard(b"", b"{}").is_none());
    }
}
