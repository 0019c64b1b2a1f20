//! The demo model's Anthropic Messages API.

use super::{last_message, model_of, pieces, script, sse, text_of, Reply};
use axum::extract::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

pub(super) async fn message(Json(body): Json<Value>) -> Response {
    let model = model_of(&body);
    let last = last_message(&body);
    // A user turn that carries tool results is the tool's answer.
    let results: Vec<String> = last["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| text_of(&b["content"]))
                .collect()
        })
        .unwrap_or_default();
    let reply = if results.is_empty() {
        let text = match &last["content"] {
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            other => text_of(other),
        };
        script("user", &text)
    } else {
        script("tool", &results.join(" "))
    };
    let id = super::reply_id("msg_demo_");
    let call_id = super::reply_id("toolu_demo_");
    let (block, stop) = match &reply {
        Reply::Text(t) => (json!({"type": "text", "text": t}), "end_turn"),
        Reply::Call { name, arguments } => (
            json!({"type": "tool_use", "id": call_id, "name": name,
                "input": serde_json::from_str::<Value>(arguments).unwrap_or(json!({}))}),
            "tool_use",
        ),
    };
    let usage = json!({"input_tokens": 10, "output_tokens": 10});
    if body["stream"].as_bool() != Some(true) {
        return Json(
            json!({"id": id, "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage}),
        )
        .into_response();
    }
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": id, "type": "message",
        "role": "assistant", "model": model, "content": [], "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    ];
    match &reply {
        Reply::Text(t) => {
            events.push(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}));
            events.push(json!({"type": "ping"}));
            // Small pieces, so values are split across events as real models split them.
            for p in pieces(t, 6) {
                events.push(json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": p}}));
            }
        }
        Reply::Call { name, arguments } => {
            events.push(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": call_id, "name": name,
                    "input": {}}}));
            for p in pieces(arguments, 5) {
                events.push(json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": p}}));
            }
        }
    }
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop,
        "stop_sequence": null}, "usage": {"output_tokens": 10}}),
    );
    events.push(json!({"type": "message_stop"}));
    let named: Vec<(Option<&str>, Value)> = events
        .iter()
        .map(|e| (e["type"].as_str(), e.clone()))
        .collect();
    sse(named, false)
}
