//! The closed world (#46) on the chat door, through the running daemon with the bundled
//! policies: text in fields the policies used not to see (a request's `prediction`, `metadata`,
//! `stop`, `response_format` schema and legacy `functions`; a history message's reasoning; a
//! reply's refusal, reasoning, audio transcript and citations) is judged like the messages' own;
//! the legacy `function_call` and `function` shapes and custom tools are calls and results the
//! tool rails judge by their real names; and `unknown_fields = "refuse"` refuses what the door
//! does not know. What the backend received is read off the scripted backend, what a client
//! reads off the real OpenAI SDK.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};

const PII: &str = "jane.doe@example.com";
/// An address the model writes itself: the client's own (`PII`, hidden from the model) comes back
/// in a reply as it is, under the bundled pii's reversible redaction; this one is redacted.
const MODELS: &str = "mallory@elsewhere.example";

/// The bundled policies against a scripted backend answering `reply`.
fn daemon(reply: Value) -> (Daemon, MockBackend, TempConfig) {
    let backend = MockBackend::start(Script::Json(200, completion(reply, "stop")));
    let cfg = bundled_with(&[]);
    let daemon = Daemon::start(&cfg.path, &backend.url());
    (daemon, backend, cfg)
}

/// One request through the OpenAI SDK: what it made of the reply.
fn sdk(d: &Daemon, request: Value) -> Value {
    crate::doors::run(
        "one_chat.py",
        &[&format!("http://{}/v1", d.addr), &request.to_string()],
    )
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

#[test]
fn text_outside_the_messages_reaches_the_backend_judged() {
    let (d, backend, _cfg) = daemon(json!({"role": "assistant", "content": "ok"}));
    let mail = format!("mail {PII}");
    let body = json!({
        "model": "m",
        "messages": [
            user("hello"),
            {"role": "assistant", "content": "hi", "reasoning_content": mail, "refusal": mail},
            user("thanks"),
        ],
        "prediction": {"type": "content", "content": mail},
        "metadata": {"who": PII},
        "stop": ["never", PII],
        "user": PII,
        "response_format": {"type": "json_schema", "json_schema": {"name": "out",
            "schema": {"type": "object", "description": mail}}},
        "functions": [{"name": "lookup", "description": mail, "parameters": {"type": "object"}}],
        "vendor_extension": {"note": mail},
    });
    let r = post(d.addr, "/v1/chat/completions", &body);
    assert_eq!(r.status, 200, "{}", r.body);
    let seen = backend.seen();
    let sent = String::from_utf8_lossy(&seen[0].raw).into_owned();
    assert!(!sent.contains(PII), "{sent}");
    let sent = &seen[0].body;
    for (at, value) in [
        (
            "/messages/1/reasoning_content",
            &sent["messages"][1]["reasoning_content"],
        ),
        ("/messages/1/refusal", &sent["messages"][1]["refusal"]),
        ("/prediction/content", &sent["prediction"]["content"]),
        ("/metadata/who", &sent["metadata"]["who"]),
        ("/stop/1", &sent["stop"][1]),
        ("/user", &sent["user"]),
        (
            "/response_format/.../description",
            &sent["response_format"]["json_schema"]["schema"]["description"],
        ),
        (
            "/functions/0/description",
            &sent["functions"][0]["description"],
        ),
        ("/vendor_extension/note", &sent["vendor_extension"]["note"]),
    ] {
        assert!(
            value.as_str().unwrap_or("").contains("[EMAIL]"),
            "{at}: {value}"
        );
    }
    // The shapes stay as they came: the message's own content, the stop list.
    assert_eq!(sent["messages"][1]["content"], "hi");
    assert_eq!(sent["stop"][0], "never");
    let rails = &r.json()["railyard"]["rails"];
    assert_eq!(rails["input"], "modify", "{rails}");
}

#[test]
fn text_outside_a_replys_content_reaches_the_client_judged() {
    let mail = format!("write to {PII}");
    let (d, _backend, _cfg) = daemon(json!({
        "role": "assistant",
        "content": "Here you are.",
        "refusal": mail,
        "reasoning_content": mail,
        "annotations": [{"type": "url_citation", "url_citation": {"start_index": 0, "end_index": 4,
            "url": format!("https://example.org/?to={PII}"), "title": mail}}],
        "audio": {"id": "audio_1", "data": "UklGRg==", "expires_at": 1, "transcript": mail},
    }));
    let seen = sdk(&d, json!({"model": "m", "messages": [user("hi")]}));
    let message = &seen["message"];
    assert!(!message.to_string().contains(PII), "{seen}");
    assert_eq!(message["content"], "Here you are.", "{seen}");
    assert!(
        message["refusal"].as_str().unwrap().contains("[EMAIL]"),
        "{seen}"
    );
    assert!(
        message["audio"]["transcript"]
            .as_str()
            .unwrap()
            .contains("[EMAIL]"),
        "{seen}"
    );
    assert_eq!(
        message["audio"]["data"], "UklGRg==",
        "inert data passes as it came"
    );
    let title = message["annotations"][0]["url_citation"]["title"]
        .as_str()
        .unwrap();
    assert!(title.contains("[EMAIL]"), "{seen}");
    assert_eq!(seen["railyard"]["rails"]["output"], "modify", "{seen}");
}

#[test]
fn legacy_function_calls_are_calls_and_function_messages_results() {
    let functions = json!([{"name": "lookup", "parameters": {"type": "object",
        "properties": {"id": {"type": "string"}}}}]);
    // A legacy call to a function nobody declared: the tool_call rail sees it, by its name.
    let (d, backend, _cfg) = daemon(json!({"role": "assistant", "content": null,
        "function_call": {"name": "delete_database", "arguments": "{}"}}));
    let blocked = sdk(
        &d,
        json!({"model": "m", "functions": functions, "messages": [user("go")]}),
    );
    assert_eq!(blocked["finish"], "content_filter", "{blocked}");
    assert_eq!(
        blocked["railyard"]["blocked"]["policy"], "allowlist",
        "{blocked}"
    );
    assert!(blocked["message"]["function_call"].is_null(), "{blocked}");

    // A declared one goes back in its own shape.
    backend.set(Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": null,
        "function_call": {"name": "lookup", "arguments": "{\"id\": \"7\"}"}}),
            "function_call",
        ),
    ));
    let called = sdk(
        &d,
        json!({"model": "m", "functions": functions, "messages": [user("go")]}),
    );
    assert_eq!(
        called["message"]["function_call"]["name"], "lookup",
        "{called}"
    );
    assert!(called["message"]["tool_calls"].is_null(), "{called}");

    // The history: the call and its `function` result, which the tool_result rail judges.
    backend.set(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "done"}), "stop"),
    ));
    let before = backend.seen().len();
    let r = post(
        d.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "functions": functions,
        "messages": [user("go"),
            {"role": "assistant", "content": null, "function_call": {"name": "lookup", "arguments": "{\"id\": \"7\"}"}},
            {"role": "function", "name": "lookup", "content": format!("owner: {PII}")}]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let sent = &backend.seen()[before].body;
    assert_eq!(sent["messages"][2]["role"], "function", "{sent}");
    assert_eq!(sent["messages"][2]["content"], "owner: [EMAIL]", "{sent}");
    assert!(sent["messages"][2].get("tool_call_id").is_none(), "{sent}");
    assert_eq!(
        sent["messages"][1]["function_call"]["name"], "lookup",
        "{sent}"
    );
    assert!(sent["messages"][1].get("tool_calls").is_none(), "{sent}");
    assert_eq!(
        r.json()["railyard"]["rails"]["tool_result"],
        "modify",
        "{}",
        r.body
    );

    // A tenant's allowlist hides a legacy function as it hides a tool.
    let hidden = post_as(
        d.addr,
        "/v1/chat/completions",
        Some("demo-support-key"),
        &json!({"model": "m",
        "functions": [{"name": "issue_refund"}, {"name": "lookup_order"}], "messages": [user("go")]}),
    );
    assert_eq!(hidden.status, 200, "{}", hidden.body);
    let sent = backend.seen().last().unwrap().body.clone();
    assert_eq!(
        sent["functions"],
        json!([{"name": "lookup_order"}]),
        "{sent}"
    );
}

#[test]
fn custom_tools_are_called_by_their_own_names() {
    let tools = json!([{"type": "custom", "custom": {"name": "run_sql",
        "description": "Run a query", "format": {"type": "text"}}}]);
    let call = |name: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "custom", "custom": {"name": name, "input": "select 1"}}]})
    };
    let (d, backend, _cfg) = daemon(call("drop_everything"));
    let blocked = sdk(
        &d,
        json!({"model": "m", "tools": tools, "messages": [user("go")]}),
    );
    assert_eq!(
        blocked["railyard"]["blocked"]["policy"], "allowlist",
        "{blocked}"
    );
    let reason = blocked["railyard"]["blocked"]["reason"].as_str().unwrap();
    assert!(reason.contains("'drop_everything'"), "{reason}");

    backend.set(Script::Json(200, completion(call("run_sql"), "tool_calls")));
    let ok = sdk(
        &d,
        json!({"model": "m", "tools": tools, "messages": [user("go")]}),
    );
    let got = &ok["message"]["tool_calls"][0];
    assert_eq!(got["type"], "custom", "{ok}");
    assert_eq!(
        got["custom"],
        json!({"name": "run_sql", "input": "select 1"}),
        "{ok}"
    );
    assert!(
        got["id"].as_str().unwrap().starts_with("ry2_"),
        "signed like a function call: {ok}"
    );

    // The support tenant's allowlist does not list run_sql: hidden from its model.
    let r = post_as(
        d.addr,
        "/v1/chat/completions",
        Some("demo-support-key"),
        &json!({"model": "m", "tools": tools, "messages": [user("go")]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let sent = backend.seen().last().unwrap().body.clone();
    assert!(sent.get("tools").is_none_or(|t| t == &json!([])), "{sent}");
}

#[test]
fn unknown_fields_can_be_refused() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let cfg = bundled_with(&[("unknown_fields = \"judge\"", "unknown_fields = \"refuse\"")]);
    let d = Daemon::start(&cfg.path, &backend.url());
    let known = json!({"model": "m", "temperature": 0.2, "metadata": {"a": "b"}, "stop": ["x"],
        "messages": [user("hi"), {"role": "assistant", "content": "yo", "refusal": null}]});
    assert_eq!(post(d.addr, "/v1/chat/completions", &known).status, 200);
    for (body, field) in [
        (
            json!({"model": "m", "x_vendor": "text", "messages": [user("hi")]}),
            "x_vendor",
        ),
        (
            json!({"model": "m", "messages": [user("hi"), {"role": "assistant", "content": "a", "thoughts": "t"}]}),
            "messages[1].thoughts",
        ),
    ] {
        let r = post(d.addr, "/v1/chat/completions", &body);
        assert_eq!(r.status, 400, "{}", r.body);
        let error = &r.json()["error"];
        assert_eq!(error["param"], field, "{error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("unknown_fields"),
            "{error}"
        );
    }
    assert_eq!(
        backend.seen().len(),
        1,
        "no refused request reached the backend"
    );
}

#[test]
fn a_replys_own_fields_and_its_choices_are_judged_and_log_probabilities_follow_the_text() {
    let mail = format!("mail {PII}");
    let tokens = json!({"content": [{"token": "mail", "logprob": -0.1, "bytes": [109], "top_logprobs": []}]});
    let reply = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "note": mail,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": mail}, "finish_reason": "stop",
             "logprobs": tokens, "vendor_hint": mail},
            {"index": 1, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop",
             "logprobs": tokens},
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    });
    let backend = MockBackend::start(Script::Json(200, reply));
    let cfg = bundled_with(&[]);
    let d = Daemon::start(&cfg.path, &backend.url());
    let r = post(
        d.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [user("hi")]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.contains(PII), "{}", r.body);
    let body = r.json();
    assert_eq!(body["note"], "mail [EMAIL]", "{body}");
    assert_eq!(body["choices"][0]["vendor_hint"], "mail [EMAIL]", "{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"], "mail [EMAIL]",
        "{body}"
    );
    // The edited choice's log-probabilities would spell out what was redacted: gone. The other
    // choice's text is as the backend wrote it, and so are they.
    assert!(body["choices"][0]["logprobs"].is_null(), "{body}");
    assert_eq!(body["choices"][1]["logprobs"], tokens, "{body}");
}

/// A streamed chunk with `delta` for choice 0.
fn delta(delta: Value) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "mock",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    .to_string()
}

/// `text` cut into pieces of 5 bytes, each as `field` of a delta.
fn pieces(field: &str, text: &str) -> Vec<String> {
    text.as_bytes()
        .chunks(5)
        .map(|c| delta(json!({field: String::from_utf8_lossy(c)})))
        .collect()
}

#[test]
fn a_streamed_replys_every_text_is_judged_as_it_streams() {
    let mail = format!("reach me at {PII} today");
    let mut events = vec![delta(json!({"role": "assistant", "content": ""}))];
    events.extend(pieces("reasoning_content", &mail));
    events.extend(pieces("refusal", &mail));
    events.push(delta(json!({"vendor_note": mail})));
    events.extend(pieces("content", "Here you are."));
    events.push(finish_chunk("stop"));
    events.push("[DONE]".into());
    let backend = MockBackend::start(Script::Sse(events, std::time::Duration::ZERO));
    let cfg = bundled_with(&[]);
    let d = Daemon::start(&cfg.path, &backend.url());
    let seen = sdk(
        &d,
        json!({"model": "m", "stream": true, "messages": [user("hi")]}),
    );
    assert!(!seen.to_string().contains(PII), "{seen}");
    let message = &seen["message"];
    for field in ["reasoning_content", "refusal", "vendor_note"] {
        let text = message[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field}: {seen}"));
        assert_eq!(text, "reach me at [EMAIL] today", "{field}: {seen}");
    }
    assert_eq!(message["content"], "Here you are.", "{seen}");
    assert_eq!(seen["finish"], "stop", "{seen}");
}

#[test]
fn streamed_legacy_and_custom_calls_are_judged_by_name() {
    let functions = json!([{"name": "lookup", "parameters": {"type": "object",
        "properties": {"id": {"type": "string"}}}}]);
    let legacy = |name: &str| {
        vec![
            delta(json!({"role": "assistant", "content": null,
                "function_call": {"name": name, "arguments": ""}})),
            delta(json!({"function_call": {"arguments": "{\"id\":"}})),
            delta(json!({"function_call": {"arguments": " \"7\"}"}})),
            finish_chunk("function_call"),
            "[DONE]".into(),
        ]
    };
    let backend = MockBackend::start(Script::Sse(
        legacy("delete_database"),
        std::time::Duration::ZERO,
    ));
    let cfg = bundled_with(&[]);
    let d = Daemon::start(&cfg.path, &backend.url());
    let request =
        json!({"model": "m", "stream": true, "functions": functions, "messages": [user("go")]});
    let blocked = sdk(&d, request.clone());
    assert!(blocked["raised"].is_string(), "{blocked}");
    assert!(
        blocked["message"]
            .as_str()
            .unwrap()
            .contains("delete_database"),
        "{blocked}"
    );

    backend.set(Script::Sse(legacy("lookup"), std::time::Duration::ZERO));
    let called = sdk(&d, request);
    assert_eq!(
        called["message"]["function_call"],
        json!({"name": "lookup", "arguments": "{\"id\": \"7\"}"}),
        "{called}"
    );
    assert_eq!(called["finish"], "function_call", "{called}");

    let tools = json!([{"type": "custom", "custom": {"name": "run_sql"}}]);
    let custom = |name: &str| {
        vec![
            delta(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "c1", "type": "custom",
                "custom": {"name": name, "input": "select "}}]}),
            ),
            delta(json!({"tool_calls": [{"index": 0, "custom": {"input": "1"}}]})),
            finish_chunk("tool_calls"),
            "[DONE]".into(),
        ]
    };
    backend.set(Script::Sse(custom("run_sql"), std::time::Duration::ZERO));
    let request = json!({"model": "m", "stream": true, "tools": tools, "messages": [user("go")]});
    let ok = sdk(&d, request.clone());
    let call = &ok["message"]["tool_calls"][0];
    assert_eq!(call["type"], "custom", "{ok}");
    assert_eq!(
        call["custom"],
        json!({"name": "run_sql", "input": "select 1"}),
        "{ok}"
    );
    backend.set(Script::Sse(custom("drop_it"), std::time::Duration::ZERO));
    let blocked = sdk(&d, request);
    assert!(blocked["raised"].is_string(), "{blocked}");
}

#[test]
fn a_streamed_error_event_is_judged_too() {
    let events = vec![
        delta(json!({"role": "assistant", "content": "Hi"})),
        json!({"error": {"message": format!("upstream failed for {PII}"), "type": "server_error"}})
            .to_string(),
    ];
    let backend = MockBackend::start(Script::Sse(events, std::time::Duration::ZERO));
    let cfg = bundled_with(&[]);
    let d = Daemon::start(&cfg.path, &backend.url());
    let r = post(
        d.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "stream": true, "messages": [user("hi")]}),
    );
    assert!(!r.body.contains(PII), "{}", r.body);
    assert!(r.body.contains("upstream failed for [EMAIL]"), "{}", r.body);
}

/// The Responses door: input items the model does not map (reasoning, a hosted call, an item
/// after the last message) and a reply's (reasoning, a hosted call's result) are judged as part
/// of the message they ride in.
#[test]
fn responses_items_beside_the_messages_are_judged_both_ways() {
    let mail = format!("mail {PII}");
    let said = format!("mail {MODELS}");
    let reply = json!({"id": "resp_1", "object": "response", "status": "completed", "model": "m",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": said}],
         "encrypted_content": "gAAAAB"},
        {"type": "mcp_call", "id": "mcp_1", "server_label": "crm", "name": "lookup",
         "arguments": "{}", "output": said},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "done", "annotations": []}]}
    ]});
    let backend = MockBackend::start(Script::Json(200, reply));
    let cfg = bundled_with(&[]);
    let d = Daemon::start(&cfg.path, &backend.url());
    let r = post(
        d.addr,
        "/v1/responses",
        &json!({"model": "m",
            "tools": [{"type": "mcp", "server_label": "crm", "server_url": "https://crm.example/mcp"}],
            "input": [
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text", "text": mail}],
             "encrypted_content": "gAAAAB"},
            {"type": "web_search_call", "id": "ws_0", "status": "completed",
             "action": {"type": "search", "query": mail}},
            {"role": "assistant", "content": "ok"},
            {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": mail}]}
        ]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!backend.seen().is_empty(), "{}", r.body);
    let sent = String::from_utf8_lossy(&backend.seen()[0].raw).into_owned();
    assert!(!sent.contains(PII), "{sent}");
    let sent = &backend.seen()[0].body;
    assert_eq!(
        sent["input"][1]["summary"][0]["text"], "mail [EMAIL]",
        "{sent}"
    );
    assert_eq!(sent["input"][1]["encrypted_content"], "gAAAAB", "{sent}");
    assert_eq!(
        sent["input"][2]["action"]["query"], "mail [EMAIL]",
        "{sent}"
    );
    assert_eq!(
        sent["input"][4]["summary"][0]["text"], "mail [EMAIL]",
        "{sent}"
    );
    assert!(
        !r.body.contains(PII) && !r.body.contains(MODELS),
        "{}",
        r.body
    );
    let out = &r.json()["output"];
    assert!(r.json()["railyard"]["blocked"].is_null(), "{}", r.body);
    assert_eq!(out[0]["summary"][0]["text"], "mail [EMAIL]", "{out}");
    assert_eq!(out[1]["output"], "mail [EMAIL]", "{out}");
    assert_eq!(out[2]["content"][0]["text"], "done", "{out}");
}

/// Items of kinds the model does not map, with no message at all in the input to ride in, are
/// judged all the same (they reached the backend unjudged).
#[test]
fn responses_items_without_a_message_are_judged() {
    let mail = format!("mail {PII}");
    let reply = json!({"id": "resp_1", "object": "response", "status": "completed", "model": "m",
        "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": []}]}]});
    let backend = MockBackend::start(Script::Json(200, reply));
    let cfg = bundled_with(&[]);
    let d = Daemon::start(&cfg.path, &backend.url());
    let instructions = json!({"model": "m", "instructions": "be brief",
        "input": [{"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text", "text": mail}]}]});
    let r = post(d.addr, "/v1/responses", &instructions);
    assert_eq!(r.status, 200, "{}", r.body);
    let text = backend.seen()[0].body.to_string();
    assert!(
        !text.contains(PII) && text.contains("mail [EMAIL]"),
        "{text}"
    );
    let sent = &backend.seen()[0].body;
    assert_eq!(sent["input"][0]["type"], "reasoning", "kept: {sent}");
    assert_eq!(sent["instructions"], "be brief", "{sent}");
    for input in [
        json!([{"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text", "text": mail}]}]),
        json!([{"type": "no_such_item", "text": mail}, {"type": "item_reference", "id": "msg_0"}]),
    ] {
        let r = post(
            d.addr,
            "/v1/responses",
            &json!({"model": "m", "input": input}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let seen = backend.seen();
        let sent = &seen.last().unwrap().body;
        let text = sent.to_string();
        assert!(!text.contains(PII), "{text}");
        assert!(text.contains("mail [EMAIL]"), "{text}");
        // Only the items: the turn that carried them writes nothing of its own.
        assert_eq!(
            sent["input"].as_array().unwrap().len(),
            input.as_array().unwrap().len(),
            "{sent}"
        );
        assert_eq!(sent["input"][0]["type"], input[0]["type"], "{sent}");
    }
}

/// The Messages door: blocks the model does not map (a thinking block in the history, a
/// server tool's result and thinking in a reply) and a text document's data are judged.
#[test]
fn anthropic_blocks_beside_the_text_are_judged_both_ways() {
    let mail = format!("mail {PII}");
    let said = format!("mail {MODELS}");
    let reply = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [
            {"type": "thinking", "thinking": said, "signature": "sig"},
            {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": said}},
            {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": [
                {"type": "web_search_result", "url": "https://example.org", "title": said,
                 "encrypted_content": "EqQ"}]},
            {"type": "text", "text": "done"}
        ],
        "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}});
    let backend = MockBackend::start(Script::Json(200, reply));
    let cfg = bundled_with(&[]);
    let d = Daemon::start(&cfg.path, &backend.url());
    let r = post_anthropic(
        d.addr,
        &json!({"model": "m", "max_tokens": 10,
            "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            "messages": [
            {"role": "user", "content": [{"type": "document", "source": {"type": "text",
                "media_type": "text/plain", "data": mail}}, {"type": "text", "text": "read it"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": mail, "signature": "sig"},
                {"type": "text", "text": "ok"}]},
            {"role": "user", "content": "go on"}
        ]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let sent = String::from_utf8_lossy(&backend.seen()[0].raw).into_owned();
    assert!(!sent.contains(PII), "{sent}");
    let sent = &backend.seen()[0].body;
    assert_eq!(
        sent["messages"][0]["content"][0]["source"]["data"], "mail [EMAIL]",
        "{sent}"
    );
    assert_eq!(
        sent["messages"][1]["content"][0]["thinking"], "mail [EMAIL]",
        "{sent}"
    );
    assert_eq!(
        sent["messages"][1]["content"][0]["signature"], "sig",
        "{sent}"
    );
    assert!(
        !r.body.contains(PII) && !r.body.contains(MODELS),
        "{}",
        r.body
    );
    let content = &r.json()["content"];
    assert_eq!(content[0]["thinking"], "mail [EMAIL]", "{content}");
    assert_eq!(content[1]["input"]["query"], "mail [EMAIL]", "{content}");
    assert_eq!(
        content[2]["content"][0]["title"], "mail [EMAIL]",
        "{content}"
    );
    assert_eq!(content[3]["text"], "done", "{content}");
}

/// Issue #46: a tool declaration's own strings beyond its name, description and schema (an
/// unknown field of a function or a custom tool, Anthropic's `input_examples`, a
/// Responses MCP server's description) reach the backend judged, on every door; a declaration a
/// tenant's allowlist hides takes its place with it, so the fields of the ones after it are
/// written where they belong; an MCP server's credentials pass untouched. The chat request is
/// sent twice: the second reads its tools from the thread's kept ones.
#[test]
fn a_declarations_own_fields_reach_the_backend_judged() {
    let (d, backend, _cfg) = daemon(json!({"role": "assistant", "content": "ok"}));
    let mail = format!("mail {PII}");
    let chat = json!({"model": "m", "messages": [user("hello")], "tools": [
        {"type": "function", "function": {"name": "send_email", "parameters": {"type": "object"},
            "x_examples": [mail]}},
        {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"},
            "strict": true, "x_examples": [mail]}, "x_note": mail},
        {"type": "custom", "custom": {"name": "get_time", "format": {"type": "grammar",
            "grammar": {"syntax": "regex", "definition": "[0-9]+"}}, "x_note": mail}},
    ]});
    for _ in 0..2 {
        let r = post_as(
            d.addr,
            "/v1/chat/completions",
            Some("demo-support-key"),
            &chat,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.json()["railyard"]["blocked"].is_null(), "{}", r.body);
        let sent = backend.seen().last().unwrap().body.clone();
        assert!(!sent.to_string().contains(PII), "{sent}");
        let tools = sent["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 2, "send_email is hidden from support: {sent}");
        assert_eq!(tools[0]["function"]["name"], "lookup_order");
        assert_eq!(
            tools[0]["function"]["x_examples"][0], "mail [EMAIL]",
            "{sent}"
        );
        assert_eq!(tools[0]["function"]["strict"], true);
        assert_eq!(tools[0]["x_note"], "mail [EMAIL]", "{sent}");
        assert_eq!(
            tools[1]["custom"]["format"]["grammar"]["definition"],
            "[0-9]+"
        );
        assert_eq!(tools[1]["custom"]["x_note"], "mail [EMAIL]", "{sent}");
    }

    backend.set(Script::Json(
        200,
        json!({"id": "resp_1", "object": "response", "status": "completed", "model": "m",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}]}]}),
    ));
    let token = "Bearer sk-live-0123456789abcdef0123456789abcdef";
    let responses = json!({"model": "m", "input": "hello", "tools": [
        {"type": "mcp", "server_label": "crm", "server_url": "https://crm.test/mcp",
         "server_description": format!("Customer records; escalations to {PII}"),
         "headers": {"Authorization": token}, "require_approval": "never"},
        {"type": "function", "name": "lookup_order", "parameters": {"type": "object"},
         "x_examples": [mail]},
    ]});
    let r = post(d.addr, "/v1/responses", &responses);
    assert_eq!(r.status, 200, "{}", r.body);
    let sent = backend.seen().last().unwrap().body.clone();
    assert!(!sent.to_string().contains(PII), "{sent}");
    assert_eq!(
        sent["tools"][0]["server_description"],
        "Customer records; escalations to [EMAIL]"
    );
    assert_eq!(sent["tools"][0]["headers"]["Authorization"], token);
    assert_eq!(sent["tools"][1]["x_examples"][0], "mail [EMAIL]");

    backend.set(Script::Json(
        200,
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1}}),
    ));
    let messages = json!({"model": "m", "max_tokens": 50, "messages": [user("hello")], "tools": [
        {"name": "send_email", "input_schema": {"type": "object"},
         "input_examples": [{"to": PII}], "cache_control": {"type": "ephemeral"}},
    ]});
    let r = post_anthropic(d.addr, &messages);
    assert_eq!(r.status, 200, "{}", r.body);
    let sent = backend.seen().last().unwrap().body.clone();
    assert!(!sent.to_string().contains(PII), "{sent}");
    assert_eq!(
        sent["tools"][0]["input_examples"][0]["to"], "[EMAIL]",
        "{sent}"
    );
    assert_eq!(sent["tools"][0]["cache_control"]["type"], "ephemeral");
}

/// Issue #46: a Responses reply echoes the request (instructions, metadata, tool declarations)
/// in its own fields, in a whole reply and in a stream's lifecycle events and final response;
/// a backend can write anything there. Those fields reach the client judged, whole and streamed
/// (the OpenAI SDK reading the stream).
#[test]
fn a_responses_echo_of_the_request_reaches_the_client_judged() {
    let said = format!("write to {PII}");
    let response = |status: &str, output: Value| {
        json!({"id": "resp_1", "object": "response", "status": status, "model": "m",
            "instructions": said, "metadata": {"owner": PII}, "output": output,
            "tools": [{"type": "function", "name": "lookup", "description": said,
                "parameters": {"type": "object"}}]})
    };
    let item = json!({"type": "message", "id": "msg_1", "role": "assistant",
        "status": "completed", "content": [{"type": "output_text", "text": "ok", "annotations": []}]});
    let backend = MockBackend::start(Script::Json(200, response("completed", json!([item]))));
    let cfg = bundled_with(&[]);
    let d = Daemon::start(&cfg.path, &backend.url());
    let request = json!({"model": "m", "input": "hello"});
    let r = post(d.addr, "/v1/responses", &request);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.contains(PII), "{}", r.body);
    let body = r.json();
    assert_eq!(body["instructions"], "write to [EMAIL]", "{body}");
    assert_eq!(body["metadata"]["owner"], "[EMAIL]", "{body}");
    assert_eq!(
        body["tools"][0]["description"], "write to [EMAIL]",
        "{body}"
    );
    assert_eq!(body["output"][0]["content"][0]["text"], "ok", "{body}");

    let events: Vec<String> = [
        json!({"type": "response.created", "response": response("in_progress", json!([]))}),
        json!({"type": "response.in_progress", "response": response("in_progress", json!([]))}),
        json!({"type": "response.output_item.added", "output_index": 0,
            "item": {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress",
                "content": []}}),
        json!({"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "delta": "ok"}),
        json!({"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "text": "ok"}),
        json!({"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "part": {"type": "output_text", "text": "ok", "annotations": []}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": response("completed", json!([item]))}),
    ]
    .iter()
    .map(Value::to_string)
    .collect();
    backend.set(Script::Sse(events, std::time::Duration::from_millis(1)));
    let seen = crate::doors::run(
        "read_stream.py",
        &[
            &format!("http://{}/v1", d.addr),
            "responses",
            &json!({"model": "m", "input": "hello"}).to_string(),
        ],
    );
    assert!(!seen.to_string().contains(PII), "{seen}");
    assert_eq!(seen["output_text"], "ok", "{seen}");
    for at in ["response.created", "response.in_progress", "final"] {
        let echo = &seen["echo"][at];
        assert_eq!(echo["instructions"], "write to [EMAIL]", "{at}: {seen}");
        assert_eq!(echo["metadata"]["owner"], "[EMAIL]", "{at}: {seen}");
    }
}

/// A Responses namespace groups tools under a name the model calls them by (`crm` +
/// `lookup_order`): its tools are declared, hidden and called as `crm.lookup_order`, so a
/// namespace's tool is never taken for a top-level tool of the same name, and a tool the tenant
/// may not call is hidden from inside its namespace. Through the OpenAI SDK, whole and streamed.
#[test]
fn a_namespaces_tools_are_judged_by_their_full_names() {
    let cfg = bundled_with(&[(
        r#"config = { allow = ["get_time", "lookup_order", "web_search"] }"#,
        r#"config = { allow = ["get_time", "lookup_order", "web_search", "crm.lookup_order"] }"#,
    )]);
    let function = |name: &str| {
        json!({"type": "function", "name": name,
        "parameters": {"type": "object", "properties": {"order": {"type": "string"}}}})
    };
    let namespace = |ns: &str| {
        json!({"type": "namespace", "name": ns, "description": format!("{ns} records of {PII}"),
            "tools": [function("lookup_order"), function("delete_all")]})
    };
    let tools = json!([
        function("lookup_order"),
        namespace("crm"),
        namespace("billing")
    ]);
    let call = |ns: &str, name: &str| {
        json!({"type": "function_call", "id": "fc_1", "call_id": "c1", "name": name,
            "namespace": ns, "arguments": "{\"order\":\"A1\"}", "status": "completed"})
    };
    let response = |output: Value| {
        json!({"id": "resp_1", "object": "response", "status": "completed", "model": "m",
            "output": output})
    };
    let backend = MockBackend::start(Script::Json(
        200,
        response(json!([call("crm", "lookup_order")])),
    ));
    let d = Daemon::start(&cfg.path, &backend.url());
    let ask = |request: Value| {
        crate::doors::run(
            "one_response.py",
            &[
                &format!("http://{}/v1", d.addr),
                "demo-support-key",
                &request.to_string(),
            ],
        )
    };
    let request = json!({"model": "m", "input": "look up A1", "tools": tools});

    // Offered: the top-level tool and crm's allowed one; billing has none left, so it goes.
    let seen = ask(request.clone());
    let sent = backend.seen().last().unwrap().body.clone();
    assert_eq!(
        sent["tools"],
        json!([function("lookup_order"), {"type": "namespace", "name": "crm",
            "description": "crm records of [EMAIL]", "tools": [function("lookup_order")]}]),
        "{sent}"
    );
    // Allowed, the call reaches the client as the model spelled it, its id signed.
    let got = &seen["output"][0];
    assert_eq!(got["name"], "lookup_order", "{seen}");
    assert_eq!(got["namespace"], "crm", "{seen}");
    assert!(
        got["call_id"].as_str().unwrap().starts_with("ry2_"),
        "{seen}"
    );

    // The same name in another namespace, or a tool hidden inside one, is refused.
    for (ns, name) in [("billing", "lookup_order"), ("crm", "delete_all")] {
        backend.set(Script::Json(200, response(json!([call(ns, name)]))));
        let seen = ask(request.clone());
        assert!(
            seen.to_string().contains("allowlist"),
            "{ns}.{name}: {seen}"
        );
        assert!(
            seen["output"]
                .as_array()
                .unwrap()
                .iter()
                .all(|i| i["type"] != "function_call"),
            "{ns}.{name}: {seen}"
        );
    }

    // Streamed: the call is named when it is added, and judged by its full name.
    let stream = |ns: &str| -> Vec<String> {
        let mut added = call(ns, "delete_all");
        added["arguments"] = json!("");
        added["status"] = json!("in_progress");
        [
            json!({"type": "response.created", "response": response(json!([]))}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                "output_index": 0, "delta": "{\"order\":\"A1\"}"}),
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_1",
                "output_index": 0, "arguments": "{\"order\":\"A1\"}"}),
            json!({"type": "response.output_item.done", "output_index": 0,
                "item": call(ns, "delete_all")}),
            json!({"type": "response.completed", "response": response(json!([call(ns, "delete_all")]))}),
        ]
        .iter()
        .map(Value::to_string)
        .collect()
    };
    backend.set(Script::Sse(stream("crm"), std::time::Duration::ZERO));
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let seen = ask(streamed);
    // The default `on_block_stream` ends the stream with an error event: the SDK raises.
    assert_eq!(seen["raised"], "APIError", "{seen}");
    let message = seen["message"].as_str().unwrap();
    assert!(message.contains("tool call 'crm.delete_all'"), "{seen}");

    // History: a namespaced call goes back to the backend as it was spelled.
    backend.set(Script::Json(200, response(json!([]))));
    let signed = got["call_id"].clone();
    let history = json!({"model": "m", "tools": tools, "input": [
        {"role": "user", "content": "look up A1"},
        {"type": "function_call", "call_id": signed, "name": "lookup_order", "namespace": "crm",
         "arguments": "{\"order\":\"A1\"}"},
        {"type": "function_call_output", "call_id": signed, "output": "shipped"}]});
    let seen = ask(history);
    assert!(seen.get("raised").is_none(), "{seen}");
    let sent = backend.seen().last().unwrap().body.clone();
    assert_eq!(sent["input"][1]["name"], "lookup_order", "{sent}");
    assert_eq!(sent["input"][1]["namespace"], "crm", "{sent}");
}

/// `unknown_fields = "refuse"` looks inside tool declarations too, on every door, and in the
/// chat door's tools the daemon keeps read from one request to the next.
#[test]
fn unknown_fields_in_declarations_can_be_refused() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let cfg = bundled_with(&[("unknown_fields = \"judge\"", "unknown_fields = \"refuse\"")]);
    let d = Daemon::start(&cfg.path, &backend.url());
    let known = json!({"model": "m", "messages": [user("hi")], "tools": [
        {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"},
         "strict": true}}]});
    for _ in 0..2 {
        let r = post(d.addr, "/v1/chat/completions", &known);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let mut unknown = known.clone();
    unknown["tools"][0]["function"]["x_examples"] = json!(["one"]);
    let responses = json!({"model": "m", "input": "hi", "tools": [
        {"type": "function", "name": "a", "parameters": {"type": "object"}, "strict": true},
        {"type": "namespace", "name": "crm", "description": "d", "tools": [
            {"type": "function", "name": "b", "x_hint": "h"}]}]});
    let messages = json!({"model": "m", "max_tokens": 5, "messages": [user("hi")], "tools": [
        {"name": "a", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2, "x_region": "eu"}]});
    let seen_before = backend.seen().len();
    for (path, body, field) in [
        (
            "/v1/chat/completions",
            &unknown,
            "tools[0].function.x_examples",
        ),
        (
            "/v1/chat/completions",
            &unknown,
            "tools[0].function.x_examples",
        ),
        ("/v1/responses", &responses, "tools[1].tools[0].x_hint"),
        ("/v1/messages", &messages, "tools[1].x_region"),
    ] {
        let r = post(d.addr, path, body);
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(r.body.contains(field), "{path}: {}", r.body);
    }
    assert_eq!(
        backend.seen().len(),
        seen_before,
        "none reached the backend"
    );
}
