//! The tool rails' rules (#14: NeMo IORails' tool-calling rules plus Lutum's "every call
//! answered") through the running daemon with the bundled policies: each rule allowed and
//! blocked, over the proxy, streaming included for hosted calls. The same rules run as policy
//! cases in `policies/tests/{allowlist,schema,linkage,all-results}`.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};

fn bundled() -> std::path::PathBuf {
    root().join("policies/railyard.toml")
}

fn function(name: &str, parameters: Option<Value>) -> Value {
    let mut f = json!({"name": name, "description": "a tool"});
    if let Some(p) = parameters {
        f["parameters"] = p;
    }
    json!({"type": "function", "function": f})
}

fn weather() -> Value {
    function(
        "get_weather",
        Some(
            json!({"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"], "additionalProperties": false}),
        ),
    )
}

fn call(id: &str, name: &str, arguments: Option<&str>) -> Value {
    let mut f = json!({"name": name});
    if let Some(a) = arguments {
        f["arguments"] = json!(a);
    }
    json!({"id": id, "type": "function", "function": f})
}

/// A reply carrying `calls`.
fn calls_reply(calls: Vec<Value>) -> Script {
    Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": calls}),
            "tool_calls",
        ),
    )
}

fn ask(tools: Vec<Value>) -> Value {
    json!({"model": "m", "tools": tools, "messages": [{"role": "user", "content": "go"}]})
}

/// Whether the reply was refused by a policy, and by which.
fn blocked_by(reply: &Reply) -> Option<(String, String)> {
    let body = reply.json();
    let b = &body["railyard"]["blocked"];
    b.is_object().then(|| {
        (
            b["policy"].as_str().unwrap().to_string(),
            b["reason"].as_str().unwrap().to_string(),
        )
    })
}

fn passed_calls(reply: &Reply) -> Value {
    // The ids the daemon signed, back to the model's: the rest must pass as the model wrote it.
    unsigned(reply.json()["choices"][0]["message"]["tool_calls"].clone())
}

#[test]
fn rule_1_a_call_must_name_one_declared_tool() {
    let backend = MockBackend::start(calls_reply(vec![call(
        "c1",
        "get_weather",
        Some(r#"{"city":"Paris"}"#),
    )]));
    let daemon = Daemon::start(&bundled(), &backend.url());

    let ok = post(daemon.addr, "/v1/chat/completions", &ask(vec![weather()]));
    assert_eq!(blocked_by(&ok), None, "{}", ok.body);
    assert_eq!(passed_calls(&ok)[0]["function"]["name"], "get_weather");

    // Declared twice: which one the application runs is unknown.
    let twice = post(
        daemon.addr,
        "/v1/chat/completions",
        &ask(vec![weather(), weather()]),
    );
    let (policy, reason) = blocked_by(&twice).expect("blocked");
    assert_eq!(policy, "allowlist");
    assert!(
        reason.contains("ambiguous") && reason.contains("'get_weather' 2 times"),
        "{reason}"
    );

    // Not declared at all.
    let none = post(
        daemon.addr,
        "/v1/chat/completions",
        &ask(vec![function("other", None)]),
    );
    let (_, reason) = blocked_by(&none).expect("blocked");
    assert!(reason.contains("not declared"), "{reason}");
}

#[test]
fn rule_2_hosted_calls_pass_by_type_streamed_and_not_and_are_never_a_502() {
    let hosted = json!({"id": "ws_1", "type": "web_search", "status": "completed"});
    let backend = MockBackend::start(calls_reply(vec![hosted.clone()]));
    let daemon = Daemon::start(&bundled(), &backend.url());

    let ok = post(
        daemon.addr,
        "/v1/chat/completions",
        &ask(vec![json!({"type": "web_search"})]),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(blocked_by(&ok), None, "{}", ok.body);
    assert_eq!(
        passed_calls(&ok),
        json!([hosted]),
        "the call passes exactly as the model wrote it"
    );

    // Not declared: blocked by the allowlist, still a normal answer.
    let undeclared = post(daemon.addr, "/v1/chat/completions", &ask(vec![weather()]));
    assert_eq!(undeclared.status, 200);
    let (policy, _) = blocked_by(&undeclared).expect("blocked");
    assert_eq!(policy, "allowlist");

    // Streamed: the call arrives whole, with its type and no function object.
    backend.set(Script::Sse(
        vec![
            json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
                    {"index": 0, "id": "ws_1", "type": "web_search"}]}, "finish_reason": null}]})
            .to_string(),
            finish_chunk("tool_calls"),
            "[DONE]".into(),
        ],
        std::time::Duration::from_millis(2),
    ));
    let mut body = ask(vec![json!({"type": "web_search"})]);
    body["stream"] = json!(true);
    let streamed = post(daemon.addr, "/v1/chat/completions", &body);
    assert_eq!(streamed.status, 200);
    let calls: Vec<Value> = streamed
        .events()
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|e| e["choices"][0]["delta"]["tool_calls"].as_array().cloned())
        .flatten()
        .collect();
    assert_eq!(calls.len(), 1, "{}", streamed.body);
    assert_eq!(calls[0]["type"], "web_search");
    // Signed like any call the daemon relays.
    let id = calls[0]["id"].as_str().unwrap();
    assert!(id.starts_with("ry2_") && model_id(id) == "ws_1", "{id}");
    assert!(calls[0].get("function").is_none(), "{}", calls[0]);
}

#[test]
fn rule_3_a_tool_without_parameters_takes_no_arguments() {
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&bundled(), &backend.url());
    let tools = vec![
        function("ping", None),
        function("noop", Some(json!({"type": "object", "properties": {}}))),
    ];
    for (name, args, allowed) in [
        ("ping", None, true),
        ("ping", Some(""), true),
        ("ping", Some("{}"), true),
        ("noop", Some("{}"), true),
        ("ping", Some(r#"{"host":"x"}"#), false),
        ("noop", Some(r#"{"a":1}"#), false),
    ] {
        backend.set(calls_reply(vec![call("c1", name, args)]));
        let reply = post(daemon.addr, "/v1/chat/completions", &ask(tools.clone()));
        assert_eq!(
            blocked_by(&reply).is_none(),
            allowed,
            "{name} {args:?}: {}",
            reply.body
        );
    }
}

#[test]
fn rule_4_arguments_are_an_object_valid_against_the_schema() {
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&bundled(), &backend.url());
    for (args, allowed, why) in [
        (r#"{"city":"Paris"}"#, true, ""),
        ("null", false, "not a JSON object"),
        ("[]", false, "not a JSON object"),
        ("{\"city\":", false, "not valid JSON"),
        (r#"{"city":3}"#, false, "keyword 'type'"),
    ] {
        backend.set(calls_reply(vec![call("c1", "get_weather", Some(args))]));
        let reply = post(daemon.addr, "/v1/chat/completions", &ask(vec![weather()]));
        match blocked_by(&reply) {
            None => assert!(allowed, "{args}: {}", reply.body),
            Some((_, reason)) => {
                assert!(!allowed, "{args}: {reason}");
                assert!(reason.contains(why), "{args}: {reason}");
                assert!(!reason.contains("Paris"), "never the values: {reason}");
            }
        }
    }
    // A declared schema that is itself invalid never lets a call through.
    let broken = function(
        "get_weather",
        Some(json!({"type": "object", "properties": {"city": {"type": "strnig"}}})),
    );
    backend.set(calls_reply(vec![call(
        "c1",
        "get_weather",
        Some(r#"{"city":"Paris"}"#),
    )]));
    let reply = post(daemon.addr, "/v1/chat/completions", &ask(vec![broken]));
    assert_eq!(blocked_by(&reply).unwrap().0, "schema-validator");
}

fn turn(id: &str, name: &str) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [call(id, name, Some("{}"))]})
}

fn result(id: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": "ok"})
}

#[test]
fn rule_5_results_link_to_the_calls_of_their_own_turn() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "done"}), "stop"),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let user = json!({"role": "user", "content": "go"});
    let cases = [
        (
            "linked",
            vec![user.clone(), turn("a", "f"), result("a")],
            None,
        ),
        (
            "an id of an earlier turn",
            vec![
                user.clone(),
                turn("a", "f"),
                result("a"),
                turn("b", "f"),
                result("a"),
            ],
            Some("of an earlier turn"),
        ),
        (
            "after a user message",
            vec![user.clone(), turn("a", "f"), user.clone(), result("a")],
            Some("follows a user message"),
        ),
        (
            "a second result for one id",
            vec![user.clone(), turn("a", "f"), result("a"), result("a")],
            Some("already answered in the same turn"),
        ),
    ];
    for (what, messages, why) in cases {
        let before = backend.seen().len();
        let reply = post(
            daemon.addr,
            "/v1/chat/completions",
            &json!({"model": "m", "messages": messages}),
        );
        match why {
            None => {
                assert_eq!(blocked_by(&reply), None, "{what}: {}", reply.body);
                assert_eq!(backend.seen().len(), before + 1, "{what}: forwarded");
            }
            Some(why) => {
                let (policy, reason) = blocked_by(&reply).expect(what);
                assert_eq!(policy, "tool-linkage", "{what}");
                assert!(reason.contains(why), "{what}: {reason}");
                assert_eq!(backend.seen().len(), before, "{what}: never forwarded");
            }
        }
    }
}

#[test]
fn rule_6_every_call_answered_when_configured() {
    let cfg = write_config(&format!(
        "[[plugins]]\nname = \"tool-linkage\"\npath = \"{}\"\nrails = [\"tool_result\"]\nconfig = {{ require_all_results = true }}\n",
        plugin("tool_linkage").display()
    ));
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "done"}), "stop"),
    ));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let two = json!({"role": "assistant", "content": null, "tool_calls": [
        call("a", "f", Some("{}")), call("b", "g", Some("{}"))]});
    let user = json!({"role": "user", "content": "go"});
    let all = post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [user, two, result("a"), result("b")]}),
    );
    assert_eq!(blocked_by(&all), None, "{}", all.body);
    let missing = post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [user, two, result("a")]}),
    );
    let (policy, reason) = blocked_by(&missing).expect("blocked");
    assert_eq!(policy, "tool-linkage");
    assert!(
        reason.contains("tool call 'b'") && reason.contains("no result answers"),
        "{reason}"
    );
}
