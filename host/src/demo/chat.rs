//! The demo model's chat completions.

use super::{last_message, model_of, now, pieces, script, sse, text_of, Reply};
use axum::extract::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

pub(super) async fn complete(Json(body): Json<Value>) -> Response {
    let model = model_of(&body);
    let last = last_message(&body);
    let reply = script(
        last["role"].as_str().unwrap_or(""),
        &text_of(&last["content"]),
    );
    let created = now();
    let id = super::reply_id("chatcmpl-demo-");
    let call_id = super::reply_id("call_demo_");
    if body["stream"].as_bool() != Some(true) {
        let (message, finish) = match reply {
            Reply::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
            Reply::Call { name, arguments } => (
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}),
                "tool_calls",
            ),
        };
        return Json(json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        }))
        .into_response();
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let finish = match reply {
        Reply::Text(t) => {
            // Small pieces, so values are split across chunks as real models split them.
            for p in pieces(&t, 6) {
                events.push(chunk(json!({"content": p}), Value::Null));
            }
            "stop"
        }
        Reply::Call { name, arguments } => {
            events.push(chunk(
                json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            for p in pieces(&arguments, 5) {
                events.push(chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                    Value::Null,
                ));
            }
            "tool_calls"
        }
    };
    events.push(chunk(json!({}), json!(finish)));
    if body["stream_options"]["include_usage"].as_bool() == Some(true) {
        events.push(json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}));
    }
    sse(events.into_iter().map(|e| (None, e)).collect(), true)
}
