//! Personal data in an encoding (#50), through the running daemon with the bundled policies: a
//! percent-encoded address, an HTML-escaped one and base64 of an SSN in a user's message (chat
//! with the OpenAI SDK, Responses, Messages with the Anthropic SDK), in the model's reply whole
//! and streamed, and in a tool call's arguments; the escapes are what is redacted, and the base64
//! comes back as base64 with the value redacted inside. A hostile mebibyte is judged (not
//! faulted at the plugin's deadline) and the daemon serves on.
//!
//! The bundled policies with pii's typed placeholders (`reversible = false`): a value redacted
//! inside base64 comes back encoded, where a vault placeholder's key-dependent id could not be
//! written in the expected text; what is detected is the same either way.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

include!("../plugins/pii-filter/src/adversarial.rs");

/// The bundled config, pii's placeholders typed.
fn typed_bundled() -> TempConfig {
    bundled_with(&[("config = { reversible = true, ", "config = { ")])
}

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

/// `text` as a user's message on chat (OpenAI SDK), Responses and Messages (Anthropic SDK);
/// `check` is called with the door's name after each request reached the backend.
fn sent_on_every_door(backend: &MockBackend, d: &Daemon, text: &str, check: impl Fn(&str)) {
    let base = format!("http://{}/v1", d.addr);
    let request = json!({"model": "m", "messages": [{"role": "user", "content": text}]});
    crate::doors::run("one_chat.py", &[&base, &request.to_string()]);
    check("chat");
    backend.set(Script::Json(
        200,
        json!({"id": "resp_1", "object": "response", "status": "completed", "model": "m",
            "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}]}]}),
    ));
    let request = json!({"model": "m", "input": text});
    crate::doors::run(
        "one_response.py",
        &[&base, "demo-key", &request.to_string()],
    );
    check("responses");
    backend.set(Script::Json(
        200,
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [{"type": "text", "text": "ok"}]}),
    ));
    let request =
        json!({"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": text}]});
    crate::doors::run(
        "one_message.py",
        &[&format!("http://{}", d.addr), &request.to_string()],
    );
    check("messages");
}

/// The model calls `send_email` with `args`; the arguments the client got (OpenAI SDK, chat).
fn called_with(backend: &MockBackend, base: &str, args: &Value) -> Value {
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
    let seen = crate::doors::run("one_chat.py", &[base, &request.to_string()]);
    serde_json::from_str(
        seen["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn encoded_values_are_redacted_on_every_door() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let cfg = typed_bundled();
    let d = Daemon::start(&cfg.path, &backend.url());
    let base = format!("http://{}/v1", d.addr);

    // In: chat (OpenAI SDK), Responses, Messages (Anthropic SDK).
    sent_on_every_door(&backend, &d, ASK, |_| backend_got_none(&backend));

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
    let sent = called_with(&backend, &base, &args);
    assert_eq!(sent["to"], "ana@partner.example", "{sent}");
    assert_eq!(
        sent["body"],
        format!("SSN {BASE64_REDACTED}, cc [EMAIL]"),
        "{sent}"
    );
}

/// A mebibyte made to be slow to scan (long digit runs, near-misses under their types' words,
/// escapes back to back, base64 three levels deep) is judged: pii's decision is an edit, not a
/// fault, and the daemon answers the next request. How long it takes is a benchmark's question
/// (BENCHMARKS.md §51, §61): on a slow 2-core VM it takes 70-90 ms of the bundled 100 ms
/// deadline, so the test gives it a second, as a test asserts no time.
#[test]
fn a_hostile_mebibyte_is_judged_not_faulted() {
    let backend = MockBackend::start(Script::Hang);
    let cfg = bundled_with(&[
        ("config = { reversible = true, ", "config = { "),
        (
            "timeout_ms = 100             # CPU deadline per evaluation",
            "timeout_ms = 1000",
        ),
    ]);
    let d = Daemon::start(&cfg.path, &backend.url());
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

/// Shapes a reader still reads (#65), each with what it must become: hex of text, base64
/// wrapped at a fixed width, quoted-printable (an escape, a soft line break inside a card),
/// `\x` and `\u` escapes, `[at]`, a Cyrillic letter among Latin ones, superscript digits,
/// separators spaced out, an SSN with dots, digits as words, a label after the value.
const SHAPES: [(&str, &str); 12] = [
    ("6a616e65406578616d706c652e636f6d", "[EMAIL]"),
    ("Caf=C3=A9 card 4111 1111 11=\n11 1111", "[CREDIT_CARD]"),
    ("jane=40example.com", "[EMAIL]"),
    ("jane\\x40example.com", "[EMAIL]"),
    ("jane.doe [at] example [dot] com", "[EMAIL]"),
    ("j\u{0430}ne@example.com", "[EMAIL]"),
    (
        "\u{2074}\u{00B9}\u{00B9}\u{00B9} 1111 1111 1111",
        "[CREDIT_CARD]",
    ),
    ("4111 - 1111 - 1111 - 1111", "[CREDIT_CARD]"),
    ("SSN 536.22.1234", "[US_SSN]"),
    (
        "card four one one one one one one one one one one one one one one one",
        "[CREDIT_CARD]",
    ),
    ("536221234 is my SSN", "[US_SSN]"),
    (
        "bWFpbCBqYW5lQGV4\nYW1wbGUuY29tLCBj\nYXJkIDQxMTEgMTEx\nMSAxMTExIDExMTE=",
        "bWFpbCBbRU1BSUxd",
    ),
];

/// The raw parts of a shape that must not get through (the value, not its label).
fn raw_parts(shape: &str) -> Vec<&str> {
    match shape {
        s if s.starts_with("Caf=") => vec!["4111 1111 11=\n11 1111"],
        s if s.starts_with("SSN ") => vec!["536.22.1234"],
        s if s.starts_with("card four") => vec!["four one one one one"],
        s if s.ends_with(" is my SSN") => vec!["536221234"],
        s if s.starts_with("bWFp") => vec!["YW1wbGUuY29tLCBj", "YXJkIDQxMTEgMTEx"],
        s => vec![s],
    }
}

fn shapes_text() -> String {
    SHAPES
        .iter()
        .map(|(s, _)| format!("note {s};"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` holds no shape's raw value, and every shape's replacement.
fn shapes_redacted(text: &str, what: &str) {
    for (shape, replaced) in SHAPES {
        for raw in raw_parts(shape) {
            assert!(!text.contains(raw), "{what}: {raw:?} got through: {text}");
        }
        assert!(text.contains(replaced), "{what}: no {replaced} in {text}");
    }
}

#[test]
fn shapes_a_reader_still_reads_are_redacted_on_every_door() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let cfg = typed_bundled();
    let d = Daemon::start(&cfg.path, &backend.url());
    let base = format!("http://{}/v1", d.addr);
    let ask = shapes_text();
    let sent_text = |door: &str| {
        let body: Value = serde_json::from_slice(&backend.seen().last().unwrap().raw).unwrap();
        let text = match door {
            "responses" => &body["input"],
            _ => &body["messages"][0]["content"],
        };
        text.as_str().unwrap_or_default().to_string()
    };

    // In: chat (OpenAI SDK), Responses, Messages (Anthropic SDK).
    sent_on_every_door(&backend, &d, &ask, |door| {
        shapes_redacted(&sent_text(door), &format!("{door} in"))
    });

    // Out: the model's reply whole, then streamed seven bytes at a time.
    let hi = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    backend.set(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": ask}), "stop"),
    ));
    let seen = crate::doors::run("one_chat.py", &[&base, &hi.to_string()]);
    shapes_redacted(seen["message"]["content"].as_str().unwrap(), "chat out");
    let mut chunks: Vec<String> = Vec::new();
    let mut rest = ask.as_str();
    while !rest.is_empty() {
        let mut cut = rest.len().min(7);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (a, b) = rest.split_at(cut);
        chunks.push(text_chunk(a));
        rest = b;
    }
    chunks.push(finish_chunk("stop"));
    chunks.push("[DONE]".to_string());
    backend.set(Script::Sse(chunks, Duration::from_millis(1)));
    let mut streamed = hi.clone();
    streamed["stream"] = json!(true);
    let seen = crate::doors::run("one_chat.py", &[&base, &streamed.to_string()]);
    shapes_redacted(
        seen["message"]["content"].as_str().unwrap(),
        "chat streamed",
    );

    // A tool call's arguments.
    let args = json!({"to": "ana@partner.example", "body": ask});
    let sent = called_with(&backend, &base, &args);
    assert_eq!(sent["to"], "ana@partner.example", "{sent}");
    shapes_redacted(sent["body"].as_str().unwrap(), "call arguments");
}
