//! Personal data in an encoding (#50), through the running daemon with the bundled policies: a
//! percent-encoded address, an HTML-escaped one and base64 of an SSN in a user's message (chat
//! with the OpenAI SDK, Responses, Messages with the Anthropic SDK), in the model's reply whole
//! and streamed, and in a tool call's arguments; the escapes are what is redacted, and the base64
//! comes back as base64 with the value redacted inside. A hostile mebibyte is judged (not
//! faulted at the plugin's deadline) and the daemon serves on.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

include!("../plugins/pii-filter/src/adversarial.rs");

/// `jo@example.com` percent-encoded, the same HTML-escaped, and base64 of "SSN 536-22-1234".
const PERCENT: &str = "jo%40example.com";
const ENTITIES: &str = "jo&#64;example&#46;com";
const BASE64_SSN: &str = "U1NOIDUzNi0yMi0xMjM0";
/// What the base64 becomes: base64 of "SSN [US_SSN]", the value redacted inside.
const BASE64_REDACTED: &str = "U1NOIFtVU19TU05d";
const ASK: &str = "Mail jo%40example.com, cc jo&#64;example&#46;com; ref U1NOIDUzNi0yMi0xMjM0.";

/// What the backend was sent last: none of the encoded values, each redacted.
fn backend_got_none(backend: &MockBackend) {
    let sent = String::from_utf8_lossy(&backend.seen().last().expect("a request").raw).into_owned();
    for v in [PERCENT, ENTITIES, BASE64_SSN] {
        assert!(!sent.contains(v), "{v} reached the backend: {sent}");
    }
    assert!(
        sent.contains(&format!("Mail [EMAIL], cc [EMAIL]; ref {BASE64_REDACTED}.")),
        "{sent}"
    );
}

#[test]
fn encoded_values_are_redacted_on_every_door() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let d = Daemon::start(&root().join("policies/railyard.toml"), &backend.url());
    let base = format!("http://{}/v1", d.addr);

    // In: chat (OpenAI SDK), Responses, Messages (Anthropic SDK).
    let request = json!({"model": "m", "messages": [{"role": "user", "content": ASK}]});
    crate::doors::run("one_chat.py", &[&base, &request.to_string()]);
    backend_got_none(&backend);
    backend.set(Script::Json(
        200,
        json!({"id": "resp_1", "object": "response", "status": "completed", "model": "m",
            "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}]}]}),
    ));
    let request = json!({"model": "m", "input": ASK});
    crate::doors::run(
        "one_response.py",
        &[&base, "demo-key", &request.to_string()],
    );
    backend_got_none(&backend);
    backend.set(Script::Json(
        200,
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [{"type": "text", "text": "ok"}]}),
    ));
    let request =
        json!({"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": ASK}]});
    crate::doors::run(
        "one_message.py",
        &[&format!("http://{}", d.addr), &request.to_string()],
    );
    backend_got_none(&backend);

    // Out: the model's reply whole, then streamed with the base64 token cut in two.
    let ask = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    backend.set(Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": format!("Write to {ENTITIES}.")}),
            "stop",
        ),
    ));
    let seen = crate::doors::run("one_chat.py", &[&base, &ask.to_string()]);
    assert_eq!(seen["message"]["content"], "Write to [EMAIL].", "{seen}");
    let (a, b) = BASE64_SSN.split_at(9);
    backend.set(Script::Sse(
        vec![
            text_chunk("Your ref is "),
            text_chunk(a),
            text_chunk(b),
            text_chunk(", and mail "),
            text_chunk(PERCENT),
            text_chunk(" today."),
            finish_chunk("stop"),
            "[DONE]".to_string(),
        ],
        Duration::from_millis(1),
    ));
    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    let seen = crate::doors::run("one_chat.py", &[&base, &streamed.to_string()]);
    assert_eq!(
        seen["message"]["content"],
        format!("Your ref is {BASE64_REDACTED}, and mail [EMAIL] today."),
        "{seen}"
    );

    // A tool call's arguments.
    let args =
        json!({"to": "ana@partner.example", "body": format!("SSN {BASE64_SSN}, cc {ENTITIES}")});
    backend.set(Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": "send_email", "arguments": args.to_string()}}]}),
            "tool_calls",
        ),
    ));
    let tools = json!([{"type": "function", "function": {"name": "send_email", "parameters": {
        "type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}}}}]);
    let request = json!({"model": "m", "messages": [{"role": "user", "content": "mail Ana"}],
        "tools": tools});
    let seen = crate::doors::run("one_chat.py", &[&base, &request.to_string()]);
    let sent: Value = serde_json::from_str(
        seen["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(sent["to"], "ana@partner.example", "{sent}");
    assert_eq!(
        sent["body"],
        format!("SSN {BASE64_REDACTED}, cc [EMAIL]"),
        "{sent}"
    );
}

/// A mebibyte made to be slow to scan (long digit runs, near-misses under their types' words,
/// escapes back to back, base64 three levels deep) is judged: pii's decision is an edit, not a
/// fault at its CPU deadline, and the daemon answers the next request.
#[test]
fn a_hostile_mebibyte_is_judged_not_faulted() {
    let backend = MockBackend::start(Script::Hang);
    let d = Daemon::start(&root().join("policies/railyard.toml"), &backend.url());
    let text = format!("{} mail {PERCENT}", adversarial(1 << 20));
    let reply = post(
        d.addr,
        "/v1/check",
        &json!({"rail": "input", "messages": [{"role": "user", "content": text}]}),
    );
    assert_eq!(
        reply.status,
        200,
        "{}",
        &reply.body[..reply.body.len().min(500)]
    );
    let body = reply.json();
    let pii = body["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["plugin"] == "pii")
        .expect("pii decided");
    assert_eq!(pii["verdict"], "modify", "{pii}");
    let out = body["payload"]["messages"][0]["content"].as_str().unwrap();
    assert!(
        out.ends_with(" mail [EMAIL]"),
        "{}",
        &out[out.len() - 100..]
    );
    assert!(out.len() > 1 << 20);
    let reply = post(
        d.addr,
        "/v1/check",
        &json!({"rail": "input", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(reply.json()["verdict"], "allow");
}
