//! A tiny scripted model, so `railyard serve --demo-backend` works on a machine with no model
//! server and a newcomer can watch every rail act with curl or the OpenAI SDK.
//!
//! It speaks the Chat Completions API, streaming and not:
//! - `call NAME {json}` from the user → a tool call to NAME with those arguments;
//! - a tool result as the last message → "The tool returned: ...";
//! - anything else → "You said: ..." (so PII you send comes back for the output rail to catch).

use axum::extract::Json;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use std::net::SocketAddr;

/// Start the demo model on an ephemeral loopback port; returns its base URL (`.../v1`).
pub async fn start() -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router()).await;
    });
    Ok(format!("http://{addr}/v1"))
}

/// Serve the demo model on `listen` until the process ends.
pub async fn serve(listen: &str) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!(
        "demo backend listening on http://{}/v1",
        listener.local_addr()?
    );
    axum::serve(listener, router()).await
}

fn router() -> Router {
    Router::new().route("/v1/chat/completions", post(complete))
}

enum Reply {
    Text(String),
    Call { name: String, arguments: String },
}

fn script(body: &Value) -> Reply {
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let text = match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    };
    if last["role"] == "tool" {
        return Reply::Text(format!("The tool returned: {text}"));
    }
    if let Some(rest) = text.trim().strip_prefix("call ") {
        let (name, arguments) = rest.split_once(' ').unwrap_or((rest, "{}"));
        return Reply::Call {
            name: name.trim().to_string(),
            arguments: arguments.trim().to_string(),
        };
    }
    Reply::Text(format!("You said: {text}"))
}

async fn complete(Json(body): Json<Value>) -> Response {
    let model = body["model"]
        .as_str()
        .unwrap_or("railyard-demo")
        .to_string();
    let reply = script(&body);
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let id = format!("chatcmpl-demo-{created}");
    if body["stream"].as_bool() != Some(true) {
        let (message, finish) = match reply {
            Reply::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
            Reply::Call { name, arguments } => (
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_demo_1", "type": "function", "function": {"name": name, "arguments": arguments}}]}),
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
    let piece = |s: &str, n: usize| -> Vec<String> {
        s.chars()
            .collect::<Vec<_>>()
            .chunks(n)
            .map(|c| c.iter().collect())
            .collect()
    };
    let finish = match reply {
        Reply::Text(t) => {
            // Small pieces, so values are split across chunks as real models split them.
            for p in piece(&t, 6) {
                events.push(chunk(json!({"content": p}), Value::Null));
            }
            "stop"
        }
        Reply::Call { name, arguments } => {
            events.push(chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_demo_1", "type": "function", "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            for p in piece(&arguments, 5) {
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
    let mut text = String::new();
    for e in events {
        text.push_str(&format!("data: {e}\n\n"));
    }
    text.push_str("data: [DONE]\n\n");
    ([(header::CONTENT_TYPE, "text/event-stream")], text).into_response()
}
