//! A tiny MCP server (Streamable HTTP, JSON answers, no sessions), so `serve --demo-backend`
//! can show the MCP door with curl: `/mcp/demo` on the daemon. Its tools:
//! - `get_weather {city}`: structured output, with an output schema;
//! - `lookup_customer {customer_id}`: a customer record with an email address and a card number
//!   (for the `tool_result` rail to redact);
//! - `issue_refund {order_id, amount}`: a side effect (for allowlists to keep from callers).

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// Protocol versions the demo answers `initialize` with (the session era).
const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

fn tools() -> Value {
    json!([
        {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"], "additionalProperties": false},
            "outputSchema": {"type": "object", "properties": {
                "city": {"type": "string"}, "temperature_c": {"type": "number"},
                "conditions": {"type": "string"}},
                "required": ["city", "temperature_c", "conditions"]}
        },
        {
            "name": "lookup_customer",
            "description": "A customer's contact and payment details.",
            "inputSchema": {"type": "object", "properties": {"customer_id": {"type": "string"}},
                "required": ["customer_id"], "additionalProperties": false}
        },
        {
            "name": "issue_refund",
            "description": "Refund an order.",
            "inputSchema": {"type": "object", "properties": {
                "order_id": {"type": "string"}, "amount": {"type": "number", "minimum": 0}},
                "required": ["order_id", "amount"], "additionalProperties": false}
        }
    ])
}

fn call(name: &str, args: &Value) -> Result<Value, String> {
    let text = |t: String| json!({"content": [{"type": "text", "text": t}], "isError": false});
    match name {
        "get_weather" => {
            let city = args.get("city").and_then(Value::as_str).unwrap_or("Paris");
            let weather = json!({"city": city, "temperature_c": 21.5, "conditions": "sunny"});
            Ok(
                json!({"content": [{"type": "text", "text": weather.to_string()}],
                "structuredContent": weather, "isError": false}),
            )
        }
        "lookup_customer" => {
            let id = args
                .get("customer_id")
                .and_then(Value::as_str)
                .unwrap_or("?");
            Ok(text(format!(
                "Customer {id}: Ada Lovelace, ada.lovelace@example.com, card 4111 1111 1111 1111"
            )))
        }
        "issue_refund" => {
            let order = args.get("order_id").and_then(Value::as_str).unwrap_or("?");
            let amount = args.get("amount").and_then(Value::as_f64).unwrap_or(0.0);
            Ok(text(format!("Refunded {amount:.2} on order {order}.")))
        }
        other => Err(format!("Unknown tool: {other}")),
    }
}

/// `POST /mcp`.
pub async fn post(Json(message): Json<Value>) -> Response {
    let Some(id) = message.get("id").cloned() else {
        // Notifications and answers to requests the server never sends.
        return StatusCode::ACCEPTED.into_response();
    };
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let params = message.get("params").cloned().unwrap_or(json!({}));
    let result = match method {
        "initialize" => {
            let asked = params.get("protocolVersion").and_then(Value::as_str);
            let version = asked
                .filter(|v| VERSIONS.contains(v))
                .unwrap_or(VERSIONS[VERSIONS.len() - 1]);
            Ok(json!({"protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "railyard-demo", "version": env!("CARGO_PKG_VERSION")}}))
        }
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": tools()})),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = params.get("arguments").cloned().unwrap_or(json!({}));
            call(name, &args).map_err(|e| (-32602, e))
        }
        // Not a stateless (2026-07-28) server: clients that probe fall back to `initialize`.
        _ => Err((-32601, "Method not found".to_string())),
    };
    let (status, body) = match result {
        Ok(result) => (
            StatusCode::OK,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        ),
        Err((code, message)) => (
            if code == -32601 {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::OK
            },
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        ),
    };
    (status, Json(body)).into_response()
}

/// `GET` and `DELETE /mcp`: no server stream and no sessions here.
pub async fn other() -> Response {
    let mut response = StatusCode::METHOD_NOT_ALLOWED.into_response();
    response
        .headers_mut()
        .insert("allow", HeaderValue::from_static("POST"));
    response
}
