//! The check API, admin endpoints, and bad input: clear errors, nothing changed, still serving.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};

fn bundled() -> std::path::PathBuf {
    root().join("policies/railyard.toml")
}

#[test]
fn check_api_runs_one_rail_without_a_model() {
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&bundled(), &backend.url());
    let reply = post(
        daemon.addr,
        "/v1/check",
        &json!({"rail": "input",
        "messages": [{"role": "user", "content": "my SSN is 536-22-1234"}]}),
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.typed();
    assert_eq!(body["verdict"], "modify");
    assert_eq!(body["rail"], "input");
    assert!(body["payload"]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("[US_SSN]"));
    // llama31-compat is limited to Llama 3.1 models (`models`): with no model named it is
    // skipped without a call; pii edits.
    assert_eq!(body["decisions"].as_array().unwrap().len(), 1);
    assert_eq!(body["decisions"][0]["plugin"], "pii");
    assert!(body["decisions"][0]["duration_us"].is_u64());
    assert_eq!(body["request_id"].as_str(), reply.header("x-request-id"));
    assert!(!reply.body.contains("536-22-1234"));

    let reply = post(
        daemon.addr,
        "/v1/check",
        &json!({"rail": "tool_call", "messages": [
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "rm_rf", "arguments": "{}"}}]}]}),
    );
    let body = reply.json();
    assert_eq!(body["verdict"], "block");
    assert_eq!(body["blocked"]["plugin"], "allowlist");
    assert!(backend.seen().is_empty());
}

/// Issue #46: the check API judges what it is given as the chat door judges a request: a
/// message's fields beside its content with it, and the body's other strings (its own keys, a
/// declaration's unknown fields) as the payload's fields, answered by path.
#[test]
fn the_check_api_judges_every_string_it_is_given() {
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&bundled(), &backend.url());
    let mail = "jane.doe@example.com";
    let reply = post(
        daemon.addr,
        "/v1/check",
        &json!({"rail": "input", "model": "m", "metadata": {"who": mail},
            "messages": [{"role": "user", "content": "hi", "reasoning_content": mail}],
            "tools": [{"type": "function", "function": {"name": "f", "x_note": mail}}]}),
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(!reply.body.contains(mail), "{}", reply.body);
    let body = reply.typed();
    assert_eq!(body["verdict"], "modify", "{body}");
    let payload = &body["payload"];
    assert_eq!(
        payload["messages"][0]["reasoning_content"], "[EMAIL]",
        "{payload}"
    );
    assert_eq!(payload["messages"][0]["content"], "hi", "{payload}");
    assert_eq!(
        payload["fields"],
        json!([{"path": "metadata.who", "value": "[EMAIL]"},
            {"path": "tools[0].function.x_note", "value": "[EMAIL]"}]),
        "{payload}"
    );
}

#[test]
fn bad_input_gets_clear_errors_and_the_daemon_keeps_serving() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let cfg = write_config(&format!(
        "[server]\nmax_body_bytes = 2048\n\n[[plugins]]\nname = \"pii\"\npath = \"{}\"\n",
        plugin("pii_filter").display()
    ));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let chat = "/v1/chat/completions";

    let r = request(
        daemon.addr,
        "POST",
        chat,
        &[("Content-Type", "application/json")],
        b"{\"messages\": [",
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not valid JSON"));

    let r = post(
        daemon.addr,
        chat,
        &json!({"model": "m", "messages": [{"role": "user", "content": "a"}, {"content": "no role"}]}),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["param"], "messages[1].role");

    let r = post(daemon.addr, chat, &json!([1, 2]));
    assert_eq!(r.status, 400);

    let big = json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(5000)}]});
    let r = post(daemon.addr, chat, &big);
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["error"]["code"], "request_too_large");

    let r = post(
        daemon.addr,
        "/v1/check",
        &json!({"rail": "sideways", "messages": []}),
    );
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown rail 'sideways'"));

    let r = get(daemon.addr, "/v1/nothing");
    assert_eq!(r.status, 404);

    assert!(
        backend.seen().is_empty(),
        "no bad request reached the backend"
    );
    let r = post(
        daemon.addr,
        chat,
        &json!({"model": "m", "messages": [{"role": "user", "content": "still here?"}]}),
    );
    assert_eq!(r.status, 200);
}

#[test]
fn backend_failures_map_to_502_504_and_pass_through() {
    let backend = MockBackend::start(Script::Json(
        503,
        json!({"error": {"message": "overloaded", "type": "server_error"}}),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let req = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let r = post(daemon.addr, "/v1/chat/completions", &req);
    assert_eq!(
        r.status, 503,
        "backend errors pass through with their status"
    );
    assert_eq!(r.json()["error"]["message"], "overloaded");
    assert_eq!(r.json()["error"]["type"], "server_error");

    // An HTML error page becomes an error an OpenAI client can parse; the page is not shown.
    backend.set(Script::Raw(
        500,
        vec!["Content-Type: text/html".into()],
        "<html><body>Internal Server Error at /srv/app</body></html>".into(),
    ));
    let r = post(daemon.addr, "/v1/chat/completions", &req);
    assert_eq!(r.status, 500);
    assert!(r
        .header("content-type")
        .unwrap()
        .contains("application/json"));
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("HTTP 500"), "{message}");
    assert!(!r.body.contains("<html>"), "{}", r.body);

    // Retry-After survives, so clients' back-off works.
    backend.set(Script::Raw(
        429,
        vec![
            "Retry-After: 7".into(),
            "Content-Type: application/json".into(),
        ],
        json!({"error": {"message": "slow down", "type": "rate_limit_error"}}).to_string(),
    ));
    let r = post(daemon.addr, "/v1/chat/completions", &req);
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("7"));
    assert_eq!(r.json()["error"]["type"], "rate_limit_error");
    assert_eq!(r.json()["error"]["message"], "slow down");

    // An error message echoing the user's personal data is judged by the output rail.
    backend.set(Script::Json(
        400,
        json!({"error": {"message": "invalid prompt: 'mail jane.doe@example.com'", "type": "invalid_request_error"}}),
    ));
    let r = post(daemon.addr, "/v1/chat/completions", &req);
    assert_eq!(r.status, 400);
    assert!(!r.body.contains("jane.doe@example.com"), "{}", r.body);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("invalid prompt"));

    // The same on the Anthropic door, in Anthropic's error shape.
    backend.set(Script::Raw(
        503,
        vec!["Retry-After: 3".into()],
        "upstream down".into(),
    ));
    let r = post(
        daemon.addr,
        "/v1/messages",
        &json!({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("3"));
    assert_eq!(r.json()["type"], "error");
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("HTTP 503"));

    // Nothing listens on this port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let daemon = Daemon::start(&bundled(), &format!("http://{closed}/v1"));
    let r = post(daemon.addr, "/v1/chat/completions", &req);
    assert_eq!(r.status, 502);
    assert_eq!(r.json()["error"]["code"], "backend_unreachable");

    // https:// to a server that speaks plain HTTP: the TLS handshake fails, a 502 that says so.
    let plain = MockBackend::start(Script::Json(200, json!({})));
    let daemon = Daemon::start(&bundled(), &format!("https://{}/v1", plain.addr));
    let r = post(daemon.addr, "/v1/chat/completions", &req);
    assert_eq!(r.status, 502, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "backend_unreachable");

    let cfg = write_config("[backend]\ntimeout_ms = 300\n");
    let hang = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&cfg.path, &hang.url());
    let r = post(daemon.addr, "/v1/chat/completions", &req);
    assert_eq!(r.status, 504);
    assert_eq!(r.json()["error"]["code"], "backend_timeout");
}

#[test]
fn admin_endpoints_report_what_is_loaded_and_what_happened() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    assert_eq!(get(daemon.addr, "/healthz").status, 200);
    assert_eq!(get(daemon.addr, "/readyz").status, 200);
    let policies = get(daemon.addr, "/v1/policies").json();
    assert_eq!(policies["plugins"].as_array().unwrap().len(), 14);
    assert_eq!(
        policies["chains"]["tool_call"],
        json!(["normalise", "allowlist", "flow", "schema-validator", "pii"])
    );
    assert_eq!(
        policies["chains"]["tool_result"],
        json!(["tool-linkage", "schema-validator", "pii", "jailbreak"])
    );
    // The guard models, and who may consult them (never a key).
    let guards: Vec<&str> = policies["guard_models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(guards, ["llama-guard", "injection-classifier"]);
    let safety = policies["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "content-safety")
        .unwrap();
    assert_eq!(safety["guard_models"], json!(["llama-guard"]));
    assert_eq!(safety["waits"], true);
    assert_eq!(safety["contract"], "0.3.0");
    assert_eq!(policies["plugins"][1]["sha256"].as_str().unwrap().len(), 64);

    post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [{"role": "user", "content": "mail a.b@example.org"}]}),
    );
    let metrics = get(daemon.addr, "/metrics");
    assert_eq!(metrics.status, 200);
    let text = metrics.body;
    assert!(
        text.contains(
            "railyard_requests_total{endpoint=\"/v1/chat/completions\",tenant=\"default\",status=\"200\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "railyard_verdicts_total{tenant=\"default\",rail=\"input\",policy=\"pii\",verdict=\"modify\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("railyard_plugin_duration_seconds_count{policy=\"pii\"}"),
        "{text}"
    );
    assert!(
        text.contains("railyard_backend_duration_seconds_count 1"),
        "{text}"
    );
}

#[test]
fn request_ids_are_echoed_or_made() {
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&bundled(), &backend.url());
    let r = request(
        daemon.addr,
        "GET",
        "/healthz",
        &[("X-Request-Id", "trace-abc-123")],
        b"",
    );
    assert_eq!(r.header("x-request-id"), Some("trace-abc-123"));
    // An id, not a place for text (#46): what is not made like one is replaced by a new id, so
    // no decision record carries it (a log line forged with `outcome=served`, an address).
    for given in [
        "a outcome=served",
        "mail=jane@example.com",
        "x\"y",
        &"z".repeat(129),
    ] {
        let r = request(
            daemon.addr,
            "GET",
            "/healthz",
            &[("X-Request-Id", given)],
            b"",
        );
        let id = r.header("x-request-id").unwrap();
        assert!(id.starts_with("ry-") && id != given, "{given:?} -> {id}");
    }
    let a = get(daemon.addr, "/healthz");
    let b = get(daemon.addr, "/healthz");
    assert_ne!(a.header("x-request-id"), b.header("x-request-id"));
}

/// The model doors' `POST`s skip the router (`server/front.rs`): each still echoes or makes the
/// request id, is counted under its door and tenant, and refuses in its own shape; any other
/// method on a door's path still gets the router's 405.
#[test]
fn the_doors_keep_the_routers_promises() {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let daemon = Daemon::start(&bundled(), &backend.url());
    // An address for pii to redact: the reply then carries the `railyard` object, and its id.
    let body =
        json!({"model": "m", "messages": [{"role": "user", "content": "mail a.b@example.org"}]})
            .to_string();
    let chat = |id: &str| crate::records::send(&daemon, id, Some("demo-key"), body.as_bytes());

    let given = chat("trace-door-1");
    assert_eq!(given.status, 200, "{}", given.body);
    assert_eq!(given.header("x-request-id"), Some("trace-door-1"));
    assert_eq!(given.json()["railyard"]["request_id"], "trace-door-1");
    // An id that is not sane (a space, or over 128 bytes) is replaced, on the reply and in
    // the record alike.
    for insane in ["two words", &"x".repeat(129)] {
        let made = chat(insane);
        let id = made.header("x-request-id").unwrap();
        assert!(id.starts_with("ry-"), "{id}");
        assert_eq!(made.json()["railyard"]["request_id"], id);
    }

    // Refused before any policy: each door answers in its own shape, with an id.
    for (path, shape) in [
        ("/v1/chat/completions", "error"),
        ("/v1/responses", "error"),
        ("/v1/messages", "type"),
    ] {
        let refused = post_as(daemon.addr, path, Some("no-such-key"), &json!({}));
        assert_eq!(refused.status, 401, "{path}: {}", refused.body);
        assert!(
            refused.json().get(shape).is_some(),
            "{path}: {}",
            refused.body
        );
        assert!(refused.header("x-request-id").unwrap().starts_with("ry-"));
    }

    let other = get(daemon.addr, "/v1/chat/completions");
    assert_eq!(other.status, 405);
    assert_eq!(other.header("allow"), Some("POST"));
    assert!(other.header("x-request-id").is_some());
    // Said in the door's error shape, as an SDK reads it (#51: it was an empty body).
    assert_eq!(
        other.json()["error"]["code"],
        "method_not_allowed",
        "{}",
        other.body
    );
    let models = request(daemon.addr, "DELETE", "/v1/models", &[], b"");
    assert_eq!(models.status, 405);
    assert_eq!(models.header("allow"), Some("GET"));
    // Under the Messages door a path it does not serve answers in Anthropic's shape.
    for (method, path, status) in [
        ("POST", "/v1/messages/count_tokens", 404),
        ("GET", "/v1/messages", 405),
    ] {
        let r = request(daemon.addr, method, path, &[], b"{}");
        assert_eq!(r.status, status, "{path}: {}", r.body);
        assert_eq!(r.json()["type"], "error", "{path}: {}", r.body);
        assert!(r.json()["error"]["type"].is_string(), "{path}: {}", r.body);
    }

    let metrics = get(daemon.addr, "/metrics").body;
    for line in [
        "railyard_requests_total{endpoint=\"/v1/chat/completions\",tenant=\"default\",status=\"200\"} 3",
        "railyard_requests_total{endpoint=\"/v1/chat/completions\",tenant=\"\",status=\"401\"} 1",
        "railyard_requests_total{endpoint=\"/v1/responses\",tenant=\"\",status=\"401\"} 1",
        "railyard_requests_total{endpoint=\"/v1/messages\",tenant=\"\",status=\"401\"} 1",
        "railyard_requests_total{endpoint=\"/v1/chat/completions\",tenant=\"\",status=\"405\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
}

#[test]
fn demo_backend_serves_the_readme_walkthrough() {
    let daemon = Daemon::start_with(&bundled(), &["--demo-backend"]);
    let r = post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "demo", "messages": [{"role": "user", "content": "reach me at jane.doe@example.com"}]}),
    );
    // The model was shown a placeholder (pii modified the input), and the reply the client gets
    // has the address back (pii modified the output).
    assert_eq!(
        r.json()["choices"][0]["message"]["content"],
        "You said: reach me at jane.doe@example.com"
    );
    assert_eq!(
        r.json()["railyard"]["rails"],
        json!({"input": "modify", "output": "modify"}),
        "{}",
        r.body
    );
    let r = post(
        daemon.addr,
        "/v1/chat/completions",
        &json!({"model": "demo", "stream": true,
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
        "messages": [{"role": "user", "content": "call get_weather {\"city\": \"Paris\"}"}]}),
    );
    assert!(r.body.contains("\"name\":\"get_weather\""), "{}", r.body);

    // Two replies within a second have their own ids, on every door (#51: LangGraph merged two
    // turns that shared one), and the model is the one the README's examples name.
    let ask = |path: &str, body: Value| {
        let r = if path == "/v1/messages" {
            post_anthropic(daemon.addr, &body)
        } else {
            post(daemon.addr, path, &body)
        };
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r.json()["id"].as_str().unwrap().to_string()
    };
    let said = json!([{"role": "user", "content": "hello"}]);
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": "demo", "messages": said}),
        ),
        ("/v1/responses", json!({"model": "demo", "input": "hello"})),
        (
            "/v1/messages",
            json!({"model": "demo", "max_tokens": 20, "messages": said}),
        ),
    ] {
        assert_ne!(ask(path, body.clone()), ask(path, body), "{path}");
    }
    let models = get(daemon.addr, "/v1/models").json();
    assert_eq!(models["data"][0]["id"], "demo", "{models}");
}
