//! A tiny scripted model, so `railyard serve --demo-backend` works on a machine with no model
//! server and a newcomer can watch every rail act with curl, the OpenAI SDK or the Anthropic SDK.
//!
//! It speaks every door Railyard does, streaming and not: chat completions (`chat`), responses
//! (`responses`), Anthropic messages (`messages`), and lists one model (`/v1/models`). The script:
//! - `call NAME {json}` from the user → a tool call to NAME with those arguments;
//! - a tool result as the last message → "The tool returned: ...";
//! - anything else → "You said: ..." (so PII you send comes back for the output rail to catch).
//!
//! It is also a tiny MCP server at `/mcp` (see `mcp`), which `serve --demo-backend` puts behind
//! `/mcp/demo`.

mod chat;
mod guard;
mod mcp;
mod messages;
mod responses;

use axum::routing::{get, post};
use axum::Router;
use serde_json::json;
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
    Router::new()
        .route("/v1/chat/completions", post(chat::complete))
        .route("/v1/responses", post(responses::respond))
        .route("/v1/messages", post(messages::message))
        .route("/mcp", post(mcp::post).get(mcp::other).delete(mcp::other))
        .route(
            "/guard/llama-guard/v1/chat/completions",
            post(guard::llama_guard),
        )
        .route(
            "/guard/nemoguard/v1/chat/completions",
            post(guard::nemoguard),
        )
        .route(
            "/guard/openai-moderation/v1/moderations",
            post(guard::moderation),
        )
        .route("/guard/classifier/predict", post(guard::classifier))
        .route("/guard/entities/analyze", post(guard::entities))
        .route("/guard/judge/v1/chat/completions", post(guard::judge))
        .route(
            "/v1/models",
            get(|| async {
                axum::Json(json!({"object": "list", "data": [
                    {"id": MODEL, "object": "model", "created": 0, "owned_by": "railyard"}]}))
            }),
        )
}

/// The demo model's name, as every example in the README writes it.
const MODEL: &str = "demo";

/// A reply's id: the time and a counter, so two replies within one second differ (a client
/// that keys turns by id, as LangGraph does, would merge them).
fn reply_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{prefix}{}_{}", now(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// What the demo model answers.
enum Reply {
    Text(String),
    Call { name: String, arguments: String },
}

/// The script, on the last message's role and text.
fn script(role: &str, text: &str) -> Reply {
    if role == "tool" {
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

/// `s` in pieces of `n` characters, as models split their output.
fn pieces(s: &str, n: usize) -> Vec<String> {
    s.chars()
        .collect::<Vec<_>>()
        .chunks(n)
        .map(|c| c.iter().collect())
        .collect()
}

/// The text of an OpenAI-style content value (a string, or parts with `text`).
fn text_of(content: &serde_json::Value) -> String {
    match content {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or_else(|| p["content"].as_str()))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// The model a request names (the demo's own name when it names none).
fn model_of(body: &serde_json::Value) -> String {
    body["model"].as_str().unwrap_or(MODEL).to_string()
}

/// The last of a request's `messages` (null when there are none).
fn last_message(body: &serde_json::Value) -> serde_json::Value {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

fn now() -> u64 {
    crate::util::unix_secs()
}

/// An SSE body from `(event name, data)` pairs.
fn sse(events: Vec<(Option<&str>, serde_json::Value)>, done: bool) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut out = Vec::new();
    for (name, data) in events {
        crate::codec::sse::write(&mut out, name, &data.to_string());
    }
    if done {
        crate::codec::sse::write(&mut out, None, "[DONE]");
    }
    (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        out,
    )
        .into_response()
}
