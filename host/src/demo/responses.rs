//! The demo model's Responses API.

use super::{now, pieces, script, sse, text_of, Reply};
use axum::extract::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

pub(super) async fn respond(Json(body): Json<Value>) -> Response {
    let model = super::model_of(&body);
    let (role, text) = match &body["input"] {
        Value::String(s) => ("user".to_string(), s.clone()),
        Value::Array(items) => match items.last() {
            Some(item) if item["type"] == "function_call_output" => {
                ("tool".to_string(), text_of(&item["output"]))
            }
            Some(item) => (
                item["role"].as_str().unwrap_or("user").to_string(),
                text_of(&item["content"]),
            ),
            None => ("user".to_string(), String::new()),
        },
        _ => ("user".to_string(), String::new()),
    };
    let created = now();
    let id = super::reply_id("resp_demo_");
    let call_id = super::reply_id("call_demo_");
    let item_id = super::reply_id("fc_demo_");
    let reply = script(&role, &text);
    let item = match &reply {
        Reply::Text(t) => json!({"type": "message", "id": "msg_demo_1", "status": "completed",
            "role": "assistant", "content": [{"type": "output_text", "text": t, "annotations": []}]}),
        Reply::Call { name, arguments } => json!({"type": "function_call", "id": item_id,
            "call_id": call_id, "name": name, "arguments": arguments, "status": "completed"}),
    };
    let response = |status: &str, output: Value| {
        json!({
            "id": id, "object": "response", "created_at": created, "status": status,
            "model": model, "output": output, "error": null, "incomplete_details": null,
            "instructions": body.get("instructions").cloned().unwrap_or(Value::Null),
            "metadata": {}, "parallel_tool_calls": true, "temperature": 1.0, "top_p": 1.0,
            "tool_choice": "auto", "tools": body.get("tools").cloned().unwrap_or(json!([])),
            "text": {"format": {"type": "text"}},
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 20},
        })
    };
    if body["stream"].as_bool() != Some(true) {
        return Json(response("completed", json!([item]))).into_response();
    }
    let mut events: Vec<Value> = vec![
        json!({"type": "response.created", "response": response("in_progress", json!([]))}),
        json!({"type": "response.in_progress", "response": response("in_progress", json!([]))}),
    ];
    match &reply {
        Reply::Text(t) => {
            events.push(
                json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "message", "id": "msg_demo_1", "status": "in_progress",
                    "role": "assistant", "content": []}}),
            );
            events.push(
                json!({"type": "response.content_part.added", "item_id": "msg_demo_1",
                "output_index": 0, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
            // Small pieces, so values are split across events as real models split them.
            for p in pieces(t, 6) {
                events.push(
                    json!({"type": "response.output_text.delta", "item_id": "msg_demo_1",
                    "output_index": 0, "content_index": 0, "delta": p, "logprobs": []}),
                );
            }
            events.push(
                json!({"type": "response.output_text.done", "item_id": "msg_demo_1",
                "output_index": 0, "content_index": 0, "text": t, "logprobs": []}),
            );
            events.push(
                json!({"type": "response.content_part.done", "item_id": "msg_demo_1",
                "output_index": 0, "content_index": 0,
                "part": {"type": "output_text", "text": t, "annotations": []}}),
            );
        }
        Reply::Call { name, arguments } => {
            events.push(
                json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "function_call", "id": item_id, "call_id": call_id,
                    "name": name, "arguments": "", "status": "in_progress"}}),
            );
            for p in pieces(arguments, 5) {
                events.push(json!({"type": "response.function_call_arguments.delta",
                    "item_id": item_id, "output_index": 0, "delta": p}));
            }
            events.push(json!({"type": "response.function_call_arguments.done",
                "item_id": item_id, "output_index": 0, "arguments": arguments}));
        }
    }
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    events.push(
        json!({"type": "response.completed", "response": response("completed", json!([item]))}),
    );
    let events = events
        .into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            e["sequence_number"] = json!(i);
            e
        })
        .collect::<Vec<_>>();
    let named: Vec<(Option<&str>, Value)> = events
        .iter()
        .map(|e| (e["type"].as_str(), e.clone()))
        .collect();
    sse(named, false)
}
