//! Exactly one decision record per request, whatever the outcome (#15): served, 401, 413, 429,
//! 400, 502, 504, a backend error in the middle of a stream, and a client that goes away
//! mid-stream. Records are JSON objects in `--log-format json`, their fields JSON values.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const KEY: &str = "records-key";

fn config() -> TempConfig {
    write_config(&format!(
        "[backend]\ntimeout_ms = 800\n\n[auth]\n{}\n[tenants.t]\nmax_concurrent = 1\nmax_body_bytes = 2000\n\n{}",
        key_entry("auth.keys", KEY, "svc", Some("t")),
        scripted("p", "[\"input\", \"output\"]", "", "{ mode = \"allow\" }"),
    ))
}

fn chat(stream: bool) -> Value {
    json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

/// POST a chat request with our own request id.
pub fn send(daemon: &Daemon, id: &str, key: Option<&str>, body: &[u8]) -> Reply {
    let auth = key.map(|k| format!("Bearer {k}")).unwrap_or_default();
    request(
        daemon.addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
            ("x-request-id", id),
        ],
        body,
    )
}

/// The one record of `id` (waiting for it), checked to be the only one.
pub fn record(daemon: &Daemon, id: &str) -> Value {
    let find = || -> Vec<Value> {
        daemon
            .logs()
            .into_iter()
            .filter(|l| l["target"] == "railyard::decision" && l["fields"]["request_id"] == id)
            .map(|l| l["fields"].clone())
            .collect()
    };
    eventually(&format!("a record of {id}"), || !find().is_empty());
    std::thread::sleep(Duration::from_millis(200));
    let records = find();
    assert_eq!(records.len(), 1, "exactly one record of {id}: {records:?}");
    records.into_iter().next().unwrap()
}

fn check(daemon: &Daemon, id: &str, status: u64, outcome: &str) -> Value {
    let r = record(daemon, id);
    assert_eq!(r["status"], status, "{id}: {r}");
    assert_eq!(r["outcome"], outcome, "{id}: {r}");
    assert_eq!(r["door"], "chat", "{id}: {r}");
    assert!(r["latency_us"].is_u64(), "{id}: {r}");
    assert!(
        r["revision"].is_u64() && r["rails"].is_object(),
        "{id}: {r}"
    );
    r
}

#[test]
fn one_record_per_request_whatever_the_outcome() {
    let cfg = config();
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "hello"}), "stop"),
    ));
    let daemon = Daemon::start_logged(&cfg.path, &["--backend", &backend.url()]);
    let body = chat(false).to_string();

    assert_eq!(
        send(&daemon, "rec-200", Some(KEY), body.as_bytes()).status,
        200
    );
    let served = check(&daemon, "rec-200", 200, "served");
    assert_eq!(served["tenant"], "t");
    assert_eq!(served["principal"], "svc");
    assert_eq!(
        served["rails"],
        json!({"input": "allow", "output": "allow"})
    );
    assert_eq!(served["plugins"][0]["plugin"], "p");
    assert!(
        !served.to_string().contains("hello"),
        "never content: {served}"
    );

    assert_eq!(send(&daemon, "rec-401", None, body.as_bytes()).status, 401);
    let unauthorized = check(&daemon, "rec-401", 401, "unauthorized");
    assert!(unauthorized.get("principal").is_none());

    let big = json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(3000)}]});
    let r = send(&daemon, "rec-413", Some(KEY), big.to_string().as_bytes());
    assert_eq!(r.status, 413);
    check(&daemon, "rec-413", 413, "throttled");

    assert_eq!(
        send(&daemon, "rec-400", Some(KEY), b"{not json").status,
        400
    );
    check(&daemon, "rec-400", 400, "invalid");

    backend.set(Script::Json(200, json!("not an object")));
    assert_eq!(
        send(&daemon, "rec-502", Some(KEY), body.as_bytes()).status,
        502
    );
    check(&daemon, "rec-502", 502, "backend_error");

    // A backend that never answers: 504; meanwhile the tenant is at its limit: 429.
    backend.set(Script::Hang);
    let slow = {
        let addr = daemon.addr;
        let body = body.clone();
        std::thread::spawn(move || {
            request(
                addr,
                "POST",
                "/v1/chat/completions",
                &[
                    ("Content-Type", "application/json"),
                    ("Authorization", &format!("Bearer {KEY}")),
                    ("x-request-id", "rec-504"),
                ],
                body.as_bytes(),
            )
            .status
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        send(&daemon, "rec-429", Some(KEY), body.as_bytes()).status,
        429
    );
    check(&daemon, "rec-429", 429, "throttled");
    assert_eq!(slow.join().unwrap(), 504);
    check(&daemon, "rec-504", 504, "backend_error");

    // The backend's own error event in the middle of a stream.
    backend.set(Script::Sse(
        vec![
            text_chunk("hello "),
            json!({"error": {"message": "overloaded", "type": "server_error"}}).to_string(),
        ],
        Duration::from_millis(5),
    ));
    let r = send(
        &daemon,
        "rec-mid",
        Some(KEY),
        chat(true).to_string().as_bytes(),
    );
    assert_eq!(r.status, 200);
    assert!(r.body.contains("overloaded"), "{}", r.body);
    check(&daemon, "rec-mid", 502, "backend_error");

    // The client goes away in the middle of a stream: the backend call is dropped too.
    backend.set(Script::Sse(
        (0..200).map(|i| text_chunk(&format!("word{i} "))).collect(),
        Duration::from_millis(20),
    ));
    let mut conn = TcpStream::connect(daemon.addr).unwrap();
    let body = chat(true).to_string();
    write!(
        conn,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer {KEY}\r\nx-request-id: rec-gone\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut first = [0u8; 512];
    let n = conn.read(&mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    drop(conn);
    check(&daemon, "rec-gone", 499, "disconnected");
    eventually("the backend stream is dropped", || {
        *backend.hung_up.lock().unwrap()
    });
}
