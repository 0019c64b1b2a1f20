//! Streaming chat completions (SSE), done so that the rails still hold.
//!
//! - **Text** goes through the `output` rail as it arrives. Only a short window at the end
//!   (`server.stream_window_bytes`) is held back, so a value split across chunks (an email, a
//!   card number, a key) is whole inside the text the rail sees before any of it is sent. Text is
//!   released only up to a cut point that lies after the last edit the rail made and at least one
//!   window before the end: anything a plugin redacted is never sent half-redacted.
//! - **Tool calls** are assembled from their fragments and judged by the `tool_call` rail when the
//!   choice finishes; a blocked or rejected call never reaches the client.
//! - **Block**: an error event (`{"error": {"type": "policy_violation", ...}}`), then
//!   `data: [DONE]`. `finish_reason` and usage chunks pass through.
//!
//! The relay runs in its own task feeding the response body through a channel; when the client
//! goes away the channel closes, the task ends and the backend stream is dropped, which closes the
//! backend connection.

use super::proxy::{has_text, judge_reply, Refusal, Report, RequestOptions};
use super::App;
use crate::payload::{Content, Context, Message, Payload, Rail, ToolCall};
use crate::policy::PolicySet;
use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Text beyond the window accumulated before the output rail runs again: re-judging on every
/// tiny chunk would cost a plugin call per token.
const STEP_BYTES: usize = 64;

/// Start relaying a successful streaming backend response.
pub(crate) fn relay(
    app: Arc<App>,
    set: Arc<PolicySet>,
    ctx: Context,
    conversation: Payload,
    options: RequestOptions,
    report: Report,
    response: hyper::Response<Incoming>,
) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    let window = set.config().server.stream_window_bytes;
    let relay = Relay {
        app,
        set,
        ctx,
        conversation,
        options,
        report,
        tx,
        window,
        template: None,
        choices: BTreeMap::new(),
    };
    tokio::spawn(relay.run(response.into_body()));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("static response parts are valid")
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    kind: Option<Value>,
}

#[derive(Default)]
struct ChoiceState {
    /// Text received and not yet released (original, before the rail's edits).
    pending: String,
    /// Bytes of text released so far.
    released: usize,
    /// Tool call fragments by their index.
    calls: BTreeMap<u64, PartialCall>,
    /// A rejection replaced the rest of this choice's text.
    silenced: bool,
    finished: bool,
}

/// Whether the relay goes on.
enum Flow {
    Go,
    Stop,
}

struct Relay {
    app: Arc<App>,
    set: Arc<PolicySet>,
    ctx: Context,
    conversation: Payload,
    options: RequestOptions,
    report: Report,
    tx: mpsc::Sender<Bytes>,
    window: usize,
    /// Top-level fields of the backend's chunks (id, model, created, ...), reused for the chunks
    /// Railyard writes itself.
    template: Option<Map<String, Value>>,
    choices: BTreeMap<u64, ChoiceState>,
}

impl Relay {
    async fn run(mut self, mut body: Incoming) {
        let idle = self.app.backend.timeout();
        let mut buf: Vec<u8> = Vec::new();
        loop {
            let frame = match tokio::time::timeout(idle, body.frame()).await {
                Err(_) => {
                    self.error_event(
                        "model backend stopped sending within the timeout",
                        "backend_error",
                        "backend_timeout",
                    )
                    .await;
                    return;
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    self.error_event(
                        &format!("model backend stream broke: {e}"),
                        "backend_error",
                        "backend_unreachable",
                    )
                    .await;
                    return;
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Some(data) = frame.data_ref() else {
                continue;
            };
            buf.extend_from_slice(data);
            while let Some(event) = next_event(&mut buf) {
                let Some(data) = event_data(&event) else {
                    continue;
                };
                if data.trim() == "[DONE]" {
                    self.finish_all().await;
                    return;
                }
                let flow = match serde_json::from_str::<Value>(&data) {
                    Ok(Value::Object(chunk)) => self.on_chunk(chunk).await,
                    _ => {
                        self.error_event(
                            "model backend sent an event that is not a JSON object",
                            "backend_error",
                            "backend_invalid_response",
                        )
                        .await;
                        Flow::Stop
                    }
                };
                if let Flow::Stop = flow {
                    return;
                }
            }
        }
        // The backend closed without [DONE]: still flush what the rails allowed, and finish.
        self.finish_all().await;
    }

    async fn send(&self, data: String) -> Flow {
        let mut event = String::with_capacity(data.len() + 8);
        event.push_str("data: ");
        event.push_str(&data);
        event.push_str("\n\n");
        match self.tx.send(Bytes::from(event)).await {
            Ok(()) => Flow::Go,
            Err(_) => Flow::Stop, // the client went away
        }
    }

    async fn send_json(&self, value: Value) -> Flow {
        self.send(value.to_string()).await
    }

    fn chunk(&self, choices: Vec<Value>) -> Value {
        let mut obj = self.template.clone().unwrap_or_else(|| {
            let mut m = Map::new();
            m.insert("object".into(), json!("chat.completion.chunk"));
            m
        });
        obj.insert("choices".into(), Value::Array(choices));
        Value::Object(obj)
    }

    async fn error_event(&mut self, message: &str, kind: &str, code: &str) {
        let _ = self
            .send_json(
                json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
            )
            .await;
        let _ = self.send("[DONE]".into()).await;
        self.report
            .log(&self.ctx, "chat-stream", self.set.revision());
    }

    async fn blocked(&mut self, refusal: Refusal) -> Flow {
        let railyard = self
            .report
            .json(&self.ctx.request_id, self.set.revision(), Some(&refusal));
        let _ = self
            .send_json(json!({
                "error": {"message": refusal.message(), "type": "policy_violation", "param": null, "code": "blocked"},
                "railyard": railyard,
            }))
            .await;
        let _ = self.send("[DONE]".into()).await;
        self.report
            .log(&self.ctx, "chat-stream", self.set.revision());
        Flow::Stop
    }

    async fn on_chunk(&mut self, mut chunk: Map<String, Value>) -> Flow {
        if chunk.contains_key("error") {
            // The backend's own error event: pass it on and end.
            let _ = self.send_json(Value::Object(chunk)).await;
            let _ = self.send("[DONE]".into()).await;
            return Flow::Stop;
        }
        let choices = match chunk.remove("choices") {
            Some(Value::Array(c)) => c,
            _ => Vec::new(),
        };
        let usage = chunk.remove("usage");
        if self.template.is_none() {
            self.template = Some(chunk);
        }
        for choice in choices {
            let Value::Object(mut choice) = choice else {
                continue;
            };
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
            let finish = choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .map(str::to_string);
            let mut delta = match choice.remove("delta") {
                Some(Value::Object(d)) => d,
                _ => Map::new(),
            };
            let content = delta.remove("content");
            let fragments = delta.remove("tool_calls");
            let state = self.choices.entry(index).or_default();
            if let Some(Value::Array(fragments)) = fragments {
                for f in fragments {
                    let i = f.get("index").and_then(Value::as_u64).unwrap_or(0);
                    let call = state.calls.entry(i).or_default();
                    if let Some(id) = f.get("id").and_then(Value::as_str) {
                        call.id.push_str(id);
                    }
                    if let Some(t) = f.get("type") {
                        call.kind = Some(t.clone());
                    }
                    if let Some(func) = f.get("function") {
                        if let Some(n) = func.get("name").and_then(Value::as_str) {
                            call.name.push_str(n);
                        }
                        if let Some(a) = func.get("arguments").and_then(Value::as_str) {
                            call.arguments.push_str(a);
                        }
                    }
                }
            }
            // Whatever else the delta carries (role, refusal, ...) passes through at once.
            if !delta.is_empty() {
                let mut out = Map::new();
                out.insert("index".into(), json!(index));
                out.insert("delta".into(), Value::Object(delta));
                out.insert("finish_reason".into(), Value::Null);
                if let Flow::Stop = self.send_json(self.chunk(vec![Value::Object(out)])).await {
                    return Flow::Stop;
                }
            }
            if let Some(Value::String(text)) = content {
                let state = self.choices.entry(index).or_default();
                if !state.silenced {
                    state.pending.push_str(&text);
                }
                if let Flow::Stop = self.release(index, false).await {
                    return Flow::Stop;
                }
            }
            if let Some(reason) = finish {
                if let Flow::Stop = self.finish_choice(index, Some(reason)).await {
                    return Flow::Stop;
                }
            }
        }
        if let Some(usage) = usage.filter(|u| !u.is_null()) {
            let mut c = self.chunk(Vec::new());
            c["usage"] = usage;
            return self.send_json(c).await;
        }
        Flow::Go
    }

    fn reply(&self, content: Option<Content>, tool_calls: Vec<ToolCall>) -> Message {
        Message {
            role: "assistant".into(),
            content_null: content.is_none(),
            content,
            name: None,
            tool_call_id: None,
            tool_calls_present: !tool_calls.is_empty(),
            tool_calls,
            extra: Map::new(),
        }
    }

    /// Judge pending text and release what is safe. `last` releases everything.
    async fn release(&mut self, index: u64, last: bool) -> Flow {
        let window = self.window;
        let Some(state) = self.choices.get_mut(&index) else {
            return Flow::Go;
        };
        if state.silenced || state.pending.is_empty() {
            return Flow::Go;
        }
        let len = state.pending.len();
        if !self.options.runs(&self.set, Rail::Output) {
            let text = std::mem::take(&mut state.pending);
            state.released += text.len();
            return self.send_text(index, text).await;
        }
        if !last && len < window + STEP_BYTES {
            return Flow::Go;
        }
        let original = state.pending.clone();
        let message = self.reply(Some(Content::Text(original.clone())), Vec::new());
        let mut payload = self.conversation.clone();
        payload.messages.push(message);
        let eval = self.app.check(&self.set, Rail::Output, payload, &self.ctx);
        let verdict = eval.verdict;
        let refusal = Refusal::from_eval(&eval);
        let mut judged = self.report.push(eval);
        if let Some(refusal) = refusal {
            return self.blocked(refusal).await;
        }
        let judged_text = match judged.messages.pop().and_then(|m| m.content) {
            Some(Content::Text(t)) => t,
            Some(Content::Parts(p)) => p.to_string(),
            None => String::new(),
        };
        let state = self.choices.get_mut(&index).expect("state exists");
        if verdict == crate::chain::Verdict::Reject {
            // The rejection message replaces the rest of this reply.
            state.silenced = true;
            state.pending.clear();
            return self.send_text(index, judged_text).await;
        }
        if last {
            state.released += original.len();
            state.pending.clear();
            return self.send_text(index, judged_text).await;
        }
        // Release up to a cut point after the last edit and at least a window before the end.
        let same_suffix = common_suffix(&original, &judged_text);
        let earliest = len - same_suffix;
        let latest = len - window;
        if earliest > latest {
            return Flow::Go; // an edit near the end: wait for more text
        }
        let cut = cut_point(&original, earliest, latest);
        if cut == 0 {
            return Flow::Go;
        }
        let judged_cut = judged_text.len() - (len - cut);
        let out = judged_text[..judged_cut].to_string();
        state.pending = original[cut..].to_string();
        state.released += cut;
        self.send_text(index, out).await
    }

    async fn send_text(&self, index: u64, text: String) -> Flow {
        if text.is_empty() {
            return Flow::Go;
        }
        self.send_json(self.chunk(vec![
            json!({"index": index, "delta": {"content": text}, "finish_reason": null}),
        ]))
        .await
    }

    /// Flush a choice's text, judge its tool calls, then pass its `finish_reason` on.
    async fn finish_choice(&mut self, index: u64, finish: Option<String>) -> Flow {
        if self.choices.get(&index).is_some_and(|s| s.finished) {
            return Flow::Go;
        }
        if let Flow::Stop = self.release(index, true).await {
            return Flow::Stop;
        }
        let state = self.choices.get_mut(&index).expect("state exists");
        state.finished = true;
        let released_text = state.released > 0 || state.silenced;
        let partial = std::mem::take(&mut state.calls);
        let mut finish = finish;
        if !partial.is_empty() {
            let calls: Vec<ToolCall> = partial
                .into_values()
                .map(|c| match c.kind {
                    // A hosted call: a type and no function fragments.
                    Some(Value::String(kind))
                        if kind != crate::payload::FUNCTION && c.name.is_empty() =>
                    {
                        ToolCall {
                            id: c.id,
                            name: kind.clone(),
                            kind,
                            arguments: c.arguments,
                            extra: Map::new(),
                            function_extra: Map::new(),
                        }
                    }
                    _ => ToolCall::function(c.id, c.name, c.arguments),
                })
                .collect();
            let reply = self.reply(None, calls);
            let mut report = std::mem::take(&mut self.report);
            let judged = judge_reply(
                &self.app,
                &self.set,
                &self.ctx,
                &self.conversation,
                &self.options,
                reply,
                &mut report,
            );
            self.report = report;
            let message = match judged {
                Ok(m) => m,
                Err(refusal) => return self.blocked(refusal).await,
            };
            if message.tool_calls.is_empty() {
                if !released_text && !has_text(&message) {
                    let refusal = self.set.config().server.refusal.clone();
                    if let Flow::Stop = self.send_text(index, refusal).await {
                        return Flow::Stop;
                    }
                }
                finish = Some("content_filter".into());
            } else {
                let calls: Vec<Value> = message
                    .tool_calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let mut v = c.to_openai();
                        v["index"] = json!(i);
                        v
                    })
                    .collect();
                let delta =
                    json!({"index": index, "delta": {"tool_calls": calls}, "finish_reason": null});
                if let Flow::Stop = self.send_json(self.chunk(vec![delta])).await {
                    return Flow::Stop;
                }
            }
        }
        match finish {
            Some(reason) => {
                self.send_json(self.chunk(vec![
                    json!({"index": index, "delta": {}, "finish_reason": reason}),
                ]))
                .await
            }
            None => Flow::Go,
        }
    }

    async fn finish_all(&mut self) {
        let open: Vec<u64> = self
            .choices
            .iter()
            .filter(|(_, s)| !s.finished)
            .map(|(i, _)| *i)
            .collect();
        for index in open {
            if let Flow::Stop = self.finish_choice(index, None).await {
                return;
            }
        }
        if self.report.acted() {
            let mut c = self.chunk(Vec::new());
            c["railyard"] = self
                .report
                .json(&self.ctx.request_id, self.set.revision(), None);
            if let Flow::Stop = self.send_json(c).await {
                return;
            }
        }
        let _ = self.send("[DONE]".into()).await;
        self.report
            .log(&self.ctx, "chat-stream", self.set.revision());
    }
}

/// Take one SSE event (up to a blank line) off the front of `buf`.
fn next_event(buf: &mut Vec<u8>) -> Option<String> {
    let mut i = 0;
    while i + 1 < buf.len() {
        if buf[i] == b'\n' && buf[i + 1] == b'\n' {
            let event: Vec<u8> = buf.drain(..i + 2).collect();
            return Some(String::from_utf8_lossy(&event[..i]).into_owned());
        }
        if buf[i] == b'\r'
            && buf[i + 1] == b'\n'
            && buf.get(i + 2) == Some(&b'\r')
            && buf.get(i + 3) == Some(&b'\n')
        {
            let event: Vec<u8> = buf.drain(..i + 4).collect();
            return Some(String::from_utf8_lossy(&event[..i]).into_owned());
        }
        i += 1;
    }
    None
}

/// The `data` of an SSE event (several `data:` lines are joined by newlines).
fn event_data(event: &str) -> Option<String> {
    let mut data: Option<String> = None;
    for line in event.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix("data:") {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(rest);
                }
                None => data = Some(rest.to_string()),
            }
        }
    }
    data
}

/// Length in bytes of the longest common suffix of `a` and `b`, on a char boundary of both.
fn common_suffix(a: &str, b: &str) -> usize {
    let n = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let mut n = n;
    while n > 0 && !(a.is_char_boundary(a.len() - n) && b.is_char_boundary(b.len() - n)) {
        n -= 1;
    }
    n
}

/// Where to cut `text` in `[earliest, latest]`: just after the last whitespace there, else at
/// `latest` (on a char boundary).
fn cut_point(text: &str, earliest: usize, latest: usize) -> usize {
    let region = &text.as_bytes()[earliest..latest];
    if let Some(pos) = region.iter().rposition(|b| b.is_ascii_whitespace()) {
        return earliest + pos + 1;
    }
    let mut cut = latest;
    while cut > earliest && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    if text.is_char_boundary(cut) {
        cut
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_on_blank_lines() {
        let mut buf = b"data: {\"a\":1}\n\ndata: [DO".to_vec();
        assert_eq!(next_event(&mut buf).as_deref(), Some("data: {\"a\":1}"));
        assert_eq!(next_event(&mut buf), None);
        buf.extend_from_slice(b"NE]\r\n\r\n");
        let e = next_event(&mut buf).unwrap();
        assert_eq!(event_data(&e).as_deref(), Some("[DONE]"));
        assert_eq!(event_data(": keep-alive"), None);
    }

    #[test]
    fn suffix_and_cut() {
        assert_eq!(common_suffix("mail a@b.co now", "mail [EMAIL] now"), 4);
        assert_eq!(common_suffix("héllo", "hello"), 3);
        assert_eq!(cut_point("one two three", 0, 9), 8);
        assert_eq!(cut_point("onetwothree", 2, 9), 9);
    }
}
