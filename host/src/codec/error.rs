//! Error objects in each wire format's shape, defined once: the server's error responses
//! (`crate::server::error`) and the codecs' stream error events both build them here.

use serde_json::{json, Value};

/// OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`.
pub fn openai(message: &str, kind: &str, code: &str, param: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
}

/// Anthropic's error body: `{"type": "error", "error": {"type", "message"}}`.
pub fn anthropic(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// The Anthropic error type for an HTTP status.
pub fn anthropic_kind(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        _ => "api_error",
    }
}

/// The Responses stream's `error` event, with an `error` object too: SDKs raise on it.
pub fn responses_event(message: &str, kind: &str, code: &str) -> Value {
    json!({"type": "error", "code": code, "message": message, "param": null,
        "error": {"type": kind, "code": code, "message": message}})
}

/// The type and code of a policy block shown as an error.
pub const POLICY_VIOLATION: (&str, &str) = ("policy_violation", "blocked");
