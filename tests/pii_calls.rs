//! Personal data in the model's tool calls (#50): the bundled `pii` scans the arguments of every
//! call the model makes, on every door, streamed and not, and an MCP client's `tools/call`, so a
//! call cannot carry the data out. The bundled config lets a recipient's address through in
//! `send_email`'s `to` and nowhere else.

use crate::http::*;
use crate::mcp::{client_in, config as mcp_config, Upstream};
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

const ARGS: &str = r#"{"to": "ana@partner.example", "cc": "ana@partner.example", "body": "Card 4111 1111 1111 1111, call +44 20 7946 0958"}"#;
const REDACTED_BODY: &str = "Card [CREDIT_CARD], call [PHONE]";

fn send_email_tool() -> Value {
    json!({"type": "function", "function": {"name": "send_email", "parameters": {"type": "object",
        "properties": {"to": {"type": "string"}, "cc": {"type": "string"}, "body": {"type": "string"}}}}})
}

/// What a client got as the call's arguments: `to` kept, `cc` and the body redacted.
fn assert_scanned(arguments: &Value) {
    let args: Value = match arguments {
        Value::String(s) => serde_json::from_str(s).unwrap(),
        other => other.clone(),
    };
    assert_eq!(args["to"], "ana@partner.example", "{args}");
    assert_eq!(args["cc"], "[EMAIL]", "{args}");
    assert_eq!(args["body"], REDACTED_BODY, "{args}");
}

#[test]
fn a_calls_arguments_are_scanned_on_every_door() {
    let backend = MockBackend::start(Script::Json(200, json!({})));
    let d = Daemon::start(&root().join("policies/railyard.toml"), &backend.url());
    let base = format!("http://{}/v1", d.addr);
    let ask = json!([{"role": "user", "content": "Mail Ana the card details."}]);

    // Chat completions, with the OpenAI SDK, whole and streamed.
    backend.set(Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": "send_email", "arguments": ARGS}}]}),
            "tool_calls",
        ),
    ));
    let request = json!({"model": "m", "messages": ask, "tools": [send_email_tool()]});
    let seen = crate::doors::run("one_chat.py", &[&base, &request.to_string()]);
    assert_scanned(&seen["message"]["tool_calls"][0]["function"]["arguments"]);
    let (a, b) = ARGS.split_at(40);
    backend.set(Script::Sse(
        vec![
            json!({"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": [{
                "index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0, "id": "c1",
                "type": "function", "function": {"name": "send_email", "arguments": a}}]}}]})
            .to_string(),
            json!({"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": [{
                "index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": b}}]}}]})
            .to_string(),
            finish_chunk("tool_calls"),
            "[DONE]".to_string(),
        ],
        Duration::from_millis(1),
    ));
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let seen = crate::doors::run("one_chat.py", &[&base, &streamed.to_string()]);
    assert_scanned(&seen["message"]["tool_calls"][0]["function"]["arguments"]);

    // Responses.
    backend.set(Script::Json(
        200,
        json!({"id": "resp_1", "object": "response",
        "status": "completed", "model": "m", "output": [{"type": "function_call", "id": "fc_1",
        "call_id": "call_1", "name": "send_email", "arguments": ARGS, "status": "completed"}]}),
    ));
    let request = json!({"model": "m", "input": "Mail Ana the card details.", "tools": [
        {"type": "function", "name": "send_email", "parameters": send_email_tool()["function"]["parameters"]}]});
    let seen = crate::doors::run(
        "one_response.py",
        &[&base, "demo-key", &request.to_string()],
    );
    assert_eq!(seen["output"][0]["type"], "function_call", "{seen}");
    assert_scanned(&seen["output"][0]["arguments"]);

    // Messages, with the Anthropic SDK.
    backend.set(Script::Json(
        200,
        json!({"id": "msg_1", "type": "message", "role": "assistant",
        "model": "m", "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "send_email",
        "input": serde_json::from_str::<Value>(ARGS).unwrap()}]}),
    ));
    let request = json!({"model": "m", "max_tokens": 100, "messages": ask, "tools": [
        {"name": "send_email", "input_schema": send_email_tool()["function"]["parameters"]}]});
    let seen = crate::doors::run(
        "one_message.py",
        &[&format!("http://{}", d.addr), &request.to_string()],
    );
    assert_eq!(seen["content"][0]["type"], "tool_use", "{seen}");
    assert_scanned(&seen["content"][0]["input"]);
}

/// An MCP client's call: the server gets the arguments with the card number redacted, and the
/// record says pii changed the call (never what it found).
#[test]
fn an_mcp_clients_call_is_scanned_before_the_server_gets_it() {
    let up = Upstream::start();
    let cfg = mcp_config(&up);
    let d = Daemon::start_logged(&cfg.path, &[]);
    let url = format!("http://{}/mcp/json", d.addr);
    let out = client_in(
        None,
        &url,
        "demo-key",
        "legacy",
        &[r#"get_weather:{"city": "Paris 4111 1111 1111 1111"}"#],
    );
    let text = out["steps"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("[CREDIT_CARD]"), "{out}");
    let records = crate::mcp::records(&d);
    let call = records
        .iter()
        .find(|r| r["target"]["method"] == "tools/call")
        .unwrap_or_else(|| panic!("{records:?}"));
    let verdict = |rail: &str| {
        call["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["rail"] == rail && p["plugin"] == "pii")
            .map(|p| p["verdict"].clone())
    };
    assert_eq!(verdict("tool_call"), Some(json!("modify")), "{call}");
    // The server echoes the city: its result held no card number to redact, so the server
    // never had it.
    assert_eq!(verdict("tool_result"), Some(json!("allow")), "{call}");
    assert!(!call.to_string().contains("4111"), "{call}");
}
