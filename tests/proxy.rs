//! The OpenAI-compatible proxy, non-streaming: each rail's block, reject and modify paths, the
//! backend untouched when an inbound rail blocks, transparency for everything allowed.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};

fn bundled() -> std::path::PathBuf {
    root().join("policies/railyard.toml")
}

/// POST `body`, JSON text as written, to the chat door with the demo key.
fn post_chat_text(addr: std::net::SocketAddr, body: &str) -> Reply {
    request(
        addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer demo-key"),
        ],
        body.as_bytes(),
    )
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"], "additionalProperties": false}}})
}

#[test]
fn allowed_traffic_passes_through_untouched_both_ways() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": "Hello there"}),
            "stop",
        ),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let request = json!({"model": "m", "temperature": 0.3, "x-custom": [1, 2], "tools": [weather_tool()],
        "messages": [{"role": "user", "content": "hi", "x-msg": "kept"}]});
    let reply = request_with_auth(daemon.addr, &request, "Bearer demo-key");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.header("x-request-id").unwrap().starts_with("ry-"));
    let body = reply.json();
    assert_eq!(body["choices"][0]["message"]["content"], "Hello there");
    assert_eq!(body["x-backend-extra"], json!({"kept": true}));
    assert!(
        body.get("railyard").is_none(),
        "nothing to report when every rail allows"
    );
    let seen = &backend.seen()[0];
    assert_eq!(
        seen.body, request,
        "the backend got exactly what the client sent"
    );
    assert!(
        !seen
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization")),
        "the caller's Railyard key never reaches the backend: {:?}",
        seen.headers
    );
}

/// What every rail allowed crosses the hop as the very bytes that came in, both ways (spacing,
/// key order, number spelling, unknown fields); when an inbound rail edited the request, the
/// reply's own bytes still come back, with the `railyard` object added as its last key.
#[test]
fn allowed_bodies_cross_byte_for_byte() {
    let reply_text = "{ \"id\" : \"c1\", \"object\": \"chat.completion\", \"zeta\": 1.50,\n  \
        \"choices\": [{\"index\": 0, \"message\": {\"role\": \"assistant\", \"content\": \"Fine\"}, \
        \"finish_reason\": \"stop\"}], \"alpha\": 1e3 }\n";
    let backend = MockBackend::start(Script::Raw(
        200,
        vec!["Content-Type: application/json".into()],
        reply_text.into(),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let sent = "{\"model\":\"m\",  \"z-last\": 2.0,\n\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"a-first\": 1e2}";
    let reply = post_chat_text(daemon.addr, sent);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        backend.seen()[0].raw,
        sent.as_bytes(),
        "the request's own bytes"
    );
    assert_eq!(reply.body, reply_text, "the reply's own bytes");

    // The input rail redacts an email: the request is re-encoded, the reply spliced.
    let sent = json!({"model": "m", "messages": [{"role": "user", "content": "mail jane.doe@example.com"}]});
    let reply = post_chat_text(daemon.addr, &sent.to_string());
    assert_eq!(reply.status, 200, "{}", reply.body);
    let seen = &backend.seen()[1].body;
    assert!(!seen.to_string().contains("jane.doe"), "{seen}");
    let (head, tail) = reply.body.split_at(reply_text.trim_end().len() - 1);
    assert_eq!(
        head,
        &reply_text.trim_end()[..reply_text.trim_end().len() - 1]
    );
    let body = reply.json();
    assert_eq!(body["railyard"]["rails"]["input"], "modify", "{tail}");
    assert_eq!(
        body.as_object().unwrap().keys().next_back().unwrap(),
        "railyard",
        "{}",
        reply.body
    );
}

/// When the inbound rails only replace message contents (pii redacting), the request goes on
/// as the caller's own bytes with just those values replaced: spacing, key order, number
/// spelling and unknown fields of everything else cross as they came.
#[test]
fn content_edits_are_spliced_into_the_callers_bytes() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "Fine"}), "stop"),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    // Four messages: the second and fourth carry an email (text, then content parts).
    let parts = r#"[ {"type": "text", "text": "or call jane.doe@example.com"} ]"#;
    let pieces = [
        "{ \"z\": 1.50, \"model\":\"m\", \"messages\" : [\n {\"role\": \"system\", \"content\": \"Be brief\", \"x\": 1e2},\n {\"content\" : ",
        "\"mail jane.doe@example.com \\u00e9\"",
        ", \"role\": \"user\"},\n {\"role\": \"assistant\", \"content\": \"ok\"},\n {\"role\": \"user\", \"content\": ",
        parts,
        "} ], \"a\": [ 1 , 2 ] }",
    ];
    let sent: String = pieces.concat();
    let reply = post_chat_text(daemon.addr, &sent);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["railyard"]["rails"]["input"], "modify");
    let upstream = String::from_utf8(backend.seen()[0].raw.clone()).unwrap();
    // Everything between the two contents is the caller's text, byte for byte.
    let rest = upstream
        .strip_prefix(pieces[0])
        .unwrap_or_else(|| panic!("the start changed: {upstream}"));
    let (first, rest) = rest
        .split_once(pieces[2])
        .unwrap_or_else(|| panic!("the middle changed: {upstream}"));
    let second = rest
        .strip_suffix(pieces[4])
        .unwrap_or_else(|| panic!("the end changed: {upstream}"));
    assert_eq!(
        typed_json(&serde_json::from_str::<Value>(first).unwrap()),
        json!("mail [EMAIL] \u{e9}")
    );
    assert_eq!(
        typed_json(&serde_json::from_str::<Value>(second).unwrap()),
        json!([{"type": "text", "text": "or call [EMAIL]"}])
    );

    // An edit that is not a message's content (here the `user` field) is not spliced: the
    // body is written anew from what the rails judged.
    let with_user = sent.replacen(
        "\"z\": 1.50,",
        "\"user\": \"jane.doe@example.com\", \"z\": 1.50,",
        1,
    );
    let reply = post_chat_text(daemon.addr, &with_user);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let seen = &backend.seen()[1];
    assert!(!String::from_utf8_lossy(&seen.raw).starts_with(pieces[0]));
    assert_eq!(seen.body["user"], "[EMAIL]");
    assert_eq!(seen.body["messages"][1]["content"], "mail [EMAIL] \u{e9}");
    assert_eq!(seen.body["a"], json!([1, 2]));
}

/// A reply whose messages the rails changed goes back as the backend's own bytes with just the
/// judged messages written in place (and the `railyard` object added at the end): the spacing,
/// key order, number spelling and escapes around them are the backend's.
#[test]
fn judged_reply_messages_are_written_into_the_backends_bytes() {
    let pieces = [
        "{ \"id\":\"c1\", \"created\": 1.50e3, \"choices\" : [\n {\"index\": 0, \"message\" : ",
        r#"{"role": "assistant", "content": "mail jane.doe@example.com \u00e9"}"#,
        ", \"finish_reason\":\"stop\", \"logprobs\": null},\n {\"index\":1,\"message\":",
        r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_time","arguments":"{\"tz\": \"UTC\"}"}}]}"#,
        // Strings a client reads as text go the general way (the rails judge them); a model's
        // name is inert, and its escape stays the backend's.
        ",\"finish_reason\":\"tool_calls\"} ], \"usage\": {\"total_tokens\": 7.0e0}, \"model\": \"m\\u002d1\"\n}",
    ];
    let backend = MockBackend::start(Script::Raw(
        200,
        vec!["Content-Type: application/json".into()],
        pieces.concat(),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let request = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let reply = request_with_auth(daemon.addr, &request, "Bearer demo-key");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["railyard"]["rails"]["output"], "modify");
    let rest = reply
        .body
        .strip_prefix(pieces[0])
        .unwrap_or_else(|| panic!("the start changed: {}", reply.body));
    let (first, rest) = rest
        .split_once(pieces[2])
        .unwrap_or_else(|| panic!("the middle changed: {}", reply.body));
    let end = pieces[4].strip_suffix('}').unwrap();
    let (second, railyard) = rest
        .split_once(end)
        .unwrap_or_else(|| panic!("the end changed: {}", reply.body));
    assert_eq!(
        typed_json(&serde_json::from_str::<Value>(first).unwrap()),
        json!({"role": "assistant", "content": "mail [EMAIL] \u{e9}"})
    );
    // The call passed the tool_call rail; its id is the signed one.
    let second: Value = serde_json::from_str(second).unwrap();
    assert_eq!(second["tool_calls"][0]["function"]["name"], "get_time");
    assert_ne!(second["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        second["tool_calls"][0]["id"],
        body["choices"][1]["message"]["tool_calls"][0]["id"]
    );
    assert!(railyard.starts_with(",\"railyard\":{") && railyard.ends_with('}'));
    assert_eq!(body["created"], json!(1.5e3));
    assert_eq!(body["model"], "m-1");
}

/// A body whose objects repeat a key is never forwarded as it came: parsers differ on which of
/// the two wins, and the rails judged the last. What goes on is what they judged, both ways.
#[test]
fn repeated_keys_are_not_smuggled_past_the_rails() {
    let backend = MockBackend::start(Script::Raw(
        200,
        vec!["Content-Type: application/json".into()],
        r#"{"id": "c1", "object": "chat.completion", "choices": [{"index": 0, "message":
            {"role": "assistant", "content": "my SSN is 536-22-1234", "content": "fine"},
            "finish_reason": "stop"}]}"#
            .into(),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let sent = r#"{"model": "m", "messages": [{"role": "user", "content": "mail jane.doe@example.com"}],
        "messages": [{"role": "user", "content": "hi"}]}"#;
    let reply = post_chat_text(daemon.addr, sent);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let seen = &backend.seen()[0];
    let upstream = String::from_utf8_lossy(&seen.raw);
    assert!(!upstream.contains("jane.doe"), "{upstream}");
    assert_eq!(
        seen.body["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
    assert!(!reply.body.contains("536-22"), "{}", reply.body);
    assert_eq!(reply.json()["choices"][0]["message"]["content"], "fine");
}

fn request_with_auth(addr: std::net::SocketAddr, body: &Value, auth: &str) -> Reply {
    request(
        addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", auth),
        ],
        body.to_string().as_bytes(),
    )
}

#[test]
fn input_rail_redaction_is_what_the_backend_receives() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let reply = post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "m",
        "messages": [{"role": "user", "content": "mail jane.doe@example.com or call +1 415 555 0134"}]}),
    );
    assert_eq!(reply.status, 200);
    let sent = backend.seen()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !sent.contains("jane.doe@example.com") && sent.contains("[EMAIL]"),
        "{sent}"
    );
    assert!(!sent.contains("555 0134"), "{sent}");
    assert_eq!(reply.json()["railyard"]["rails"]["input"], "modify");
}

#[test]
fn inbound_block_never_calls_the_backend() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "x"}), "stop"),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    // A tool result answering a call nobody made: the tool_result rail blocks.
    let reply = post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_ghost", "content": "42"}]}),
    );
    assert_eq!(reply.status, 200);
    let body = reply.json();
    assert_eq!(body["choices"][0]["finish_reason"], "content_filter");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "I can't help with that request."
    );
    assert_eq!(body["railyard"]["blocked"]["rail"], "tool_result");
    assert_eq!(body["railyard"]["blocked"]["policy"], "tool-linkage");
    assert!(body["railyard"]["blocked"]["reason"]
        .as_str()
        .unwrap()
        .contains("call_ghost"));
    assert!(backend.seen().is_empty(), "the backend must not be called");
}

#[test]
fn on_block_error_is_a_400_policy_violation() {
    let cfg = write_config(&format!(
        "[server]\non_block = \"error\"\n\n{}",
        scripted(
            "guard",
            "[\"input\"]",
            "",
            "{ mode = \"block\", text = \"no secrets here\" }"
        )
    ));
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "x"}), "stop"),
    ));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let reply = post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(reply.status, 400);
    let body = reply.json();
    assert_eq!(body["error"]["type"], "policy_violation");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no secrets here"));
    assert_eq!(body["railyard"]["blocked"]["policy"], "guard");
    assert!(backend.seen().is_empty());
}

#[test]
fn tool_call_block_refuses_the_reply() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": null,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "delete_database", "arguments": "{}"}}]}),
            "tool_calls",
        ),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let reply = post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "tools": [weather_tool()],
        "messages": [{"role": "user", "content": "clean up"}]}),
    );
    let body = reply.json();
    assert_eq!(body["choices"][0]["finish_reason"], "content_filter");
    assert!(body["choices"][0]["message"].get("tool_calls").is_none());
    assert_eq!(body["railyard"]["blocked"]["rail"], "tool_call");
    assert!(body["railyard"]["blocked"]["reason"]
        .as_str()
        .unwrap()
        .contains("tool call 'delete_database' is not an allowed tool"));
}

#[test]
fn tool_call_modify_and_validate() {
    // "days" arrives as a string; normalise makes it an integer, the validator then passes it.
    let backend = MockBackend::start(Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": null,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"days\":\"3\"}"}}]}),
            "tool_calls",
        ),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let reply = post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "tools": [weather_tool()],
        "messages": [{"role": "user", "content": "weather"}]}),
    );
    let body = reply.json();
    let args: Value = serde_json::from_str(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args, json!({"city": "Paris", "days": 3}));
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(body["railyard"]["rails"]["tool_call"], "modify");
    assert!(
        body["railyard"]["rails"].get("output").is_none(),
        "a reply with only tool calls skips the output rail"
    );
}

/// Two scripted plugins on the output rail that append how many messages and tools they were
/// given (the first with `first` in its entry), before a backend that answers "Hello".
fn counting_pair(first: &str) -> (TempConfig, MockBackend, Daemon) {
    let count = "{ mode = \"count\", text = \" \" }";
    let cfg = write_config(
        &(scripted("first", "[\"output\"]", first, count)
            + &scripted("second", "[\"output\"]", "", count)),
    );
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "Hello"}), "stop"),
    ));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    (cfg, backend, daemon)
}

/// `history = false`: on the output rail the plugin is given the reply alone (its edit of
/// message 0 lands on the reply), the plugin after it the whole conversation; streamed too.
#[test]
fn a_plugin_without_history_is_given_the_reply_alone() {
    let (_cfg, backend, daemon) = counting_pair("history = false");
    let req = json!({"model": "m", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "u"}]});
    let body = post(daemon.addr, "/v1/chat/completions", &req).json();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Hello [1 messages, 0 tools] [3 messages, 0 tools]",
        "{body}"
    );

    backend.set(Script::Sse(
        vec![
            text_chunk("Hel"),
            text_chunk("lo"),
            finish_chunk("stop"),
            "[DONE]".into(),
        ],
        std::time::Duration::from_millis(1),
    ));
    let mut streamed = req.clone();
    streamed["stream"] = json!(true);
    let reply = post(daemon.addr, "/v1/chat/completions", &streamed);
    assert_eq!(reply.status, 200);
    let text = reply.streamed_text();
    assert_eq!(
        text, "Hello [1 messages, 0 tools] [3 messages, 0 tools]",
        "{}",
        reply.body
    );
}

/// `declared_tools = false`: off the tools rail the plugin is given no declared tools, the
/// plugin after it (and the backend) all of them.
#[test]
fn a_plugin_without_declared_tools_is_given_none_off_the_tools_rail() {
    let (_cfg, backend, daemon) = counting_pair("declared_tools = false");
    let req = json!({"model": "m", "tools": [weather_tool()],
        "messages": [{"role": "user", "content": "u"}]});
    let body = post(daemon.addr, "/v1/chat/completions", &req).json();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Hello [2 messages, 0 tools] [2 messages, 1 tools]",
        "{body}"
    );
    assert_eq!(
        backend.seen()[0].body["tools"][0]["function"]["name"],
        "get_weather"
    );
}

#[test]
fn tool_call_reject_removes_that_call_and_says_so() {
    let cfg = write_config(&scripted(
        "drop",
        "[\"tool_call\"]",
        "",
        "{ mode = \"reject-tool\", tool = \"rm\", text = \"rm is not for models\" }",
    ));
    let two_calls = completion(
        json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "rm", "arguments": "{}"}}]}),
        "tool_calls",
    );
    let backend = MockBackend::start(Script::Json(200, two_calls));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let req = json!({"model": "m", "messages": [{"role": "user", "content": "tidy"}]});
    let body = post(daemon.addr, "/v1/chat/completions", &req).json();
    let calls = body["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(model_id(calls[0]["id"].as_str().unwrap()), "c1");
    assert!(
        calls[0]["id"].as_str().unwrap().starts_with("ry2_"),
        "signed"
    );
    assert_eq!(body["railyard"]["rejections"][0]["tool_call_id"], "c2");
    assert_eq!(
        body["railyard"]["rejections"][0]["reason"],
        "rm is not for models (rm)"
    );

    // Nothing left of the reply: it becomes the refusal.
    backend.set(Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "rm", "arguments": "{}"}}]}),
            "tool_calls",
        ),
    ));
    let body = post(daemon.addr, "/v1/chat/completions", &req).json();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "I can't help with that request."
    );
    assert_eq!(body["choices"][0]["finish_reason"], "content_filter");
}

#[test]
fn tool_result_reject_replaces_that_content() {
    let cfg = write_config(&scripted(
        "hide",
        "[\"tool_result\"]",
        "",
        "{ mode = \"reject-last\", text = \"[result withheld]\" }",
    ));
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "internal data"}]}),
    );
    let sent = &backend.seen()[0].body["messages"][1];
    assert_eq!(sent["content"], "[result withheld]");
    assert_eq!(sent["tool_call_id"], "c1");
}

#[test]
fn output_rail_redacts_and_blocks() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": "Card 4111 1111 1111 1111 on file"}),
            "stop",
        ),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let req = json!({"model": "m", "messages": [{"role": "user", "content": "what card?"}]});
    let body = post(daemon.addr, "/v1/chat/completions", &req).json();
    let text = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        !text.contains("4111") && text.contains("[CREDIT_CARD]"),
        "{text}"
    );
    assert_eq!(body["railyard"]["rails"]["output"], "modify");

    let cfg = write_config(&scripted(
        "no-output",
        "[\"output\"]",
        "",
        "{ mode = \"block\", text = \"not today\" }",
    ));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let body = post(daemon.addr, "/v1/chat/completions", &req).json();
    assert_eq!(body["choices"][0]["finish_reason"], "content_filter");
    assert_eq!(body["railyard"]["blocked"]["rail"], "output");
}

#[test]
fn rail_overrides_are_refused_unless_allowed() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let req = json!({"model": "m", "railyard": {"rails": {"input": false}},
        "messages": [{"role": "user", "content": "mail jane.doe@example.com"}]});
    let reply = post(daemon.addr, "/v1/chat/completions", &req);
    assert_eq!(reply.status, 400);
    assert!(reply.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("allow_rail_overrides"));
    assert!(backend.seen().is_empty());

    let cfg = write_config(&format!(
        "[server]\nallow_rail_overrides = true\n\n[[plugins]]\nname = \"pii\"\npath = \"{}\"\nconfig = {{}}\n",
        plugin("pii_filter").display()
    ));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    assert_eq!(post(daemon.addr, "/v1/chat/completions", &req).status, 200);
    let sent = &backend.seen()[0].body;
    assert_eq!(
        sent["messages"][0]["content"], "mail jane.doe@example.com",
        "input rail switched off"
    );
    assert!(
        sent.get("railyard").is_none(),
        "Railyard's own field is not forwarded"
    );
}

/// Backend connections are kept and reused, a connection the backend closed is not used again,
/// and every request names the backend's host.
#[test]
fn backend_connections_are_reused_and_a_closed_one_is_not() {
    let reply = completion(json!({"role": "assistant", "content": "ok"}), "stop");
    let req = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});

    let kept = KeepAliveBackend::start(reply.clone(), false);
    let cfg = bundled_with(&[("workers = 0", "workers = 1")]);
    let daemon = Daemon::start(&cfg.path, &kept.url());
    for i in 0..20 {
        let r = post(daemon.addr, "/v1/chat/completions", &req);
        assert_eq!(r.status, 200, "request {i}: {}", r.body);
    }
    assert_eq!(
        *kept.connections.lock().unwrap(),
        1,
        "one worker, one request at a time: one backend connection"
    );
    // Concurrent requests: each gets a connection, and none is opened per request.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (addr, req) = (daemon.addr, req.clone());
            std::thread::spawn(move || {
                (0..10)
                    .map(|_| post(addr, "/v1/chat/completions", &req).status)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().unwrap().iter().all(|s| *s == 200));
    }
    let opened = *kept.connections.lock().unwrap();
    assert!(
        opened <= 8,
        "40 concurrent requests opened {opened} connections"
    );
    let host = kept.addr.to_string();
    assert!(kept.hosts.lock().unwrap().iter().all(|h| *h == host));

    // Each request once the backend has closed the last one's connection. (Not sooner: a
    // request written to a connection that closes before answering is not sent again, since
    // the backend may have acted on it (`backend/pool.rs`), so a next request racing the close
    // could fail, and under a loaded machine the backend's close can lag its answer.)
    let closing = KeepAliveBackend::start(reply, true);
    let daemon = Daemon::start(&cfg.path, &closing.url());
    for i in 0..20 {
        let r = post(daemon.addr, "/v1/chat/completions", &req);
        assert_eq!(r.status, 200, "request {i}: {}", r.body);
        let waited = std::time::Instant::now();
        while *closing.closed.lock().unwrap() <= i {
            assert!(waited.elapsed().as_secs() < 10, "the backend never closed");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if i % 2 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    assert_eq!(*closing.connections.lock().unwrap(), 20);
}

/// The pii filter keeps what it made of texts it scanned (`memo_kib`): a conversation sent again
/// turn after turn, by two tenants in turn, reaches the backend exactly as through a daemon that
/// keeps nothing, every value redacted on every turn.
#[test]
fn a_conversation_sent_turn_after_turn_is_redacted_as_with_nothing_kept() {
    let reply = completion(json!({"role": "assistant", "content": "ok"}), "stop");
    let pii =
        "config = { reversible = true, arguments = { \"send_email.to\" = { EMAIL = \"allow\" } } }";
    let kept_cfg = bundled_with(&[("workers = 0", "workers = 1")]);
    let none_cfg = bundled_with(&[
        ("workers = 0", "workers = 1"),
        (
            pii,
            "config = { reversible = true, memo_kib = 0, arguments = { \"send_email.to\" = { EMAIL = \"allow\" } } }",
        ),
    ]);
    let backend = MockBackend::start(Script::Json(200, reply));
    let kept = Daemon::start(&kept_cfg.path, &backend.url());
    let none = Daemon::start(&none_cfg.path, &backend.url());
    let prose = "The quarterly report is attached; please review the figures before Friday. ";
    let mut messages = vec![json!({"role": "system", "content": prose.repeat(2)})];
    for turn in 0..6 {
        messages.push(json!({"role": "user",
            "content": format!("{prose}Turn {turn}: reach me at user{turn}@example.com.")}));
        let body = json!({"model": "m", "messages": messages});
        for key in ["demo-key", "demo-support-key", "demo-key"] {
            let mut seen = vec![];
            for daemon in [&kept, &none] {
                let r = post_as(daemon.addr, "/v1/chat/completions", Some(key), &body);
                assert_eq!(r.status, 200, "turn {turn}, {key}: {}", r.body);
                seen.push(backend.seen().last().unwrap().body["messages"].clone());
            }
            assert_eq!(seen[0], seen[1], "turn {turn}, {key}");
            let text = seen[0].to_string();
            assert!(!text.contains("@example.com"), "turn {turn}, {key}: {text}");
            assert_eq!(text.matches("[EMAIL]").count(), turn + 1, "turn {turn}");
        }
        messages.push(json!({"role": "assistant", "content": prose.repeat(3)}));
    }
}
