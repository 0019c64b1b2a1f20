//! OpenTelemetry traces (#20), received by a real OTLP/gRPC receiver (the collector's
//! TraceService with the `opentelemetry-proto` package's stubs) that decodes what it gets: a
//! server span per request under the caller's `traceparent`, rail and plugin spans under it, the
//! backend call as a client span whose context reached the backend, and never content.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The receiver, and the spans it printed so far.
struct Receiver {
    child: Child,
    port: u16,
    spans: Arc<Mutex<Vec<Value>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let mut child = Command::new(python())
            .arg(root().join("tests/clients/otlp_receiver.py"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let port = first
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("unexpected: {first}"))
            .parse()
            .unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let sink = spans.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock()
                    .unwrap()
                    .push(serde_json::from_str::<Value>(&line).unwrap());
            }
        });
        Receiver { child, port, spans }
    }

    fn spans(&self) -> Vec<Value> {
        self.spans.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

#[test]
fn requests_rails_plugins_and_the_backend_call_are_traced_without_content() {
    let receiver = Receiver::start();
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "noted"}), "stop"),
    ));
    // A guard model that calls everything safe, consulted by content-safety on the input rail.
    let guard = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "safe"}), "stop"),
    ));
    let cfg = write_config(&format!(
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\nservice_name = \"railyard-test\"\n\n[[guard_models]]\nname = \"llama-guard\"\nkind = \"llama-guard\"\nurl = \"{}\"\nmodel = \"g\"\ncache_entries = 0\n\n[[plugins]]\nname = \"pii\"\npath = \"{}\"\nrails = [\"input\", \"output\"]\n\n[[plugins]]\nname = \"content-safety\"\npath = \"{}\"\nrails = [\"input\"]\nguard_models = [\"llama-guard\"]\nconfig = {{ model = \"llama-guard\" }}\n",
        receiver.port,
        guard.url(),
        plugin("pii_filter").display(),
        plugin("content_safety").display()
    ));
    let mut daemon = Daemon::start(&cfg.path, &backend.url());
    let secret = "my SSN is 536-22-1234";
    let body = json!({"model": "m", "messages": [{"role": "user", "content": secret}]});
    let traced = request(
        daemon.addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("Content-Type", "application/json"),
            ("traceparent", &format!("00-{TRACE}-{CALLER_SPAN}-01")),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(traced.status, 200, "{}", traced.body);
    let untraced = post(daemon.addr, "/v1/chat/completions", &body);
    assert_eq!(untraced.status, 200);

    // The backend got the trace, with the client span as its parent.
    let seen = backend.seen();
    let header = |i: usize| {
        seen[i]
            .headers
            .iter()
            .find(|(k, _)| k == "traceparent")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no traceparent to the backend: {:?}", seen[i].headers))
    };
    let sent: Vec<String> = header(0).split('-').map(str::to_string).collect();
    assert_eq!((sent[0].as_str(), sent[1].as_str()), ("00", TRACE));
    assert_ne!(sent[2], CALLER_SPAN);
    let other: Vec<String> = header(1).split('-').map(str::to_string).collect();
    assert_ne!(
        other[1], TRACE,
        "a request without traceparent starts its own trace"
    );

    // SIGTERM: the daemon exports what it holds before it exits.
    daemon.signal("TERM");
    assert!(daemon
        .exited(Duration::from_secs(15))
        .expect("the daemon exits")
        .success());
    eventually("the spans reach the receiver", || {
        receiver.spans().iter().filter(|s| s["kind"] == 2).count() == 2
    });
    let spans = receiver.spans();
    let all = serde_json::to_string(&spans).unwrap();
    assert!(!all.contains("536-22-1234"), "no content in spans");
    assert!(spans.iter().all(|s| s["service"] == "railyard-test"));
    let ours: Vec<&Value> = spans.iter().filter(|s| s["trace_id"] == TRACE).collect();
    let one = |pred: &dyn Fn(&Value) -> bool, what: &str| -> Value {
        let found: Vec<&&Value> = ours.iter().filter(|s| pred(s)).collect();
        assert_eq!(found.len(), 1, "one {what} in {ours:#?}");
        (*found[0]).clone()
    };
    // SPAN_KIND_SERVER = 2, CLIENT = 3, INTERNAL = 1.
    let server = one(&|s| s["kind"] == 2, "server span");
    assert_eq!(server["name"], "POST /v1/chat/completions");
    assert_eq!(server["parent_span_id"], CALLER_SPAN);
    assert_eq!(server["attributes"]["http.response.status_code"], 200);
    assert_eq!(server["attributes"]["railyard.outcome"], "served");
    assert_eq!(server["attributes"]["railyard.door"], "chat");
    let client = one(
        &|s| s["kind"] == 3 && s["name"] == "POST backend",
        "client span",
    );
    assert_eq!(client["parent_span_id"], server["span_id"]);
    assert_eq!(
        client["span_id"], sent[2],
        "the backend saw the client span"
    );
    assert_eq!(client["attributes"]["http.response.status_code"], 200);
    let input = one(&|s| s["name"] == "rail input", "input rail span");
    assert_eq!(input["parent_span_id"], server["span_id"]);
    assert_eq!(input["attributes"]["railyard.verdict"], "modify");
    let output = one(&|s| s["name"] == "rail output", "output rail span");
    assert_eq!(output["attributes"]["railyard.verdict"], "allow");
    let pii = one(
        &|s| s["name"] == "plugin pii" && s["parent_span_id"] == input["span_id"],
        "pii span on the input rail",
    );
    assert_eq!(pii["attributes"]["railyard.verdict"], "modify");
    assert_eq!(pii["attributes"]["railyard.rail"], "input");
    // The guard-model call, a client span under the plugin that made it, without the text.
    let safety = one(
        &|s| s["name"] == "plugin content-safety",
        "content-safety span",
    );
    let call = one(
        &|s| s["name"] == "guard llama-guard guard",
        "guard call span",
    );
    assert_eq!(call["kind"], 3);
    assert_eq!(call["parent_span_id"], safety["span_id"]);
    assert_eq!(call["attributes"]["railyard.guard.flagged"], false);
    let inside = |outer: &Value, inner: &Value| {
        let n = |s: &Value, k: &str| s[k].as_u64().unwrap();
        n(outer, "start") <= n(inner, "start") && n(inner, "end") <= n(outer, "end")
    };
    assert!(
        inside(&safety, &call),
        "the call sits inside the plugin's span"
    );
    // Children sit inside their parents, in order.
    let n = |s: &Value, k: &str| s[k].as_u64().unwrap();
    assert!(n(&server, "start") <= n(&input, "start"));
    assert!(n(&input, "start") <= n(&pii, "start") && n(&pii, "end") <= n(&input, "end"));
    assert!(n(&input, "end") <= n(&client, "start"));
    assert!(n(&client, "end") <= n(&output, "start"));
    assert!(n(&output, "end") <= n(&server, "end"));
    // The request without a traceparent is a root.
    let roots: Vec<&Value> = spans
        .iter()
        .filter(|s| s["kind"] == 2 && s["trace_id"] != TRACE)
        .collect();
    assert_eq!(roots.len(), 1);
    assert_eq!(roots[0]["parent_span_id"], "");
}

#[test]
fn telemetry_settings_are_checked() {
    let bad = policy_error("[telemetry]\notlp_endpoint = \"127.0.0.1:4317\"\nsample_ratio = 2.0\n");
    assert!(bad.contains("telemetry.otlp_endpoint"), "{bad}");
    assert!(bad.contains("telemetry.sample_ratio"), "{bad}");
}
