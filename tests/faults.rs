//! Containment on the path users run (#13): a hostile plugin (`plugins/testing/hostile`) driven
//! through every misbehaviour inside the running daemon, over every door (chat completions,
//! `/v1/check`, gRPC `Check`), fail-closed and fail-open. Each fault resolves through
//! `on_error`, answers the caller, writes one decision record naming the fault, and leaves the
//! daemon serving; a thousand faults leave its memory where it was.

use crate::grpc::{client_with, runtime};
use crate::http::*;
use crate::support::*;
use railyard::server::grpc::proto;
use serde_json::{json, Value};

/// Every misbehaviour of the hostile plugin and the fault kind the host must report.
const MODES: &[(&str, &str)] = &[
    ("loop", "deadline"),
    ("oom", "memory_cap"),
    ("recursion", "trap"),
    ("panic", "trap"),
    ("abort", "trap"),
    ("unreachable", "trap"),
    ("exit", "exit"),
    ("huge-reason", "verdict_too_large"),
    ("huge-edit", "verdict_too_large"),
    ("many-edits", "verdict_too_large"),
    ("many-rejections", "verdict_too_large"),
    ("aliased-edits", "verdict_too_large"),
    ("bad-index", "invalid_verdict"),
    ("log-flood", "output_flood"),
    ("huge-log-line", "output_flood"),
    ("stderr-flood", "output_flood"),
    ("sleep", "sleep"),
];

const CLOSED_KEY: &str = "closed-key";
const OPEN_KEY: &str = "open-key";

/// One daemon, two tenants: the same hostile plugin fails closed for one and open for the other,
/// on the input rail.
fn config() -> TempConfig {
    config_on("input")
}

fn config_on(rail: &str) -> TempConfig {
    let plugin = |name: &str, on_error: &str| {
        format!(
            "[[plugins]]\nname = \"{name}\"\npath = \"{}\"\nrails = []\non_error = \"{on_error}\"\ntimeout_ms = 500\n# room for the 100 MB verdicts to reach the host's caps\nmemory_mb = 256\n\n",
            plugin("hostile").display()
        )
    };
    write_config(&format!(
        "[auth]\n{}{}\n[tenants.closed]\nchains = {{ {rail} = [\"hostile-closed\"] }}\n\n[tenants.open]\nchains = {{ {rail} = [\"hostile-open\"] }}\n\n{}{}",
        key_entry("auth.keys", CLOSED_KEY, "svc-closed", Some("closed")),
        key_entry("auth.keys", OPEN_KEY, "svc-open", Some("open")),
        plugin("hostile-closed", "block"),
        plugin("hostile-open", "allow"),
    ))
}

fn chat(text: &str) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": text}]})
}

fn check(text: &str) -> Value {
    json!({"rail": "input", "messages": [{"role": "user", "content": text}]})
}

/// The decision record of `request_id` among the daemon's JSON log lines.
fn record<'a>(logs: &'a [Value], request_id: &str) -> Vec<&'a Value> {
    logs.iter()
        .filter(|l| l["target"] == "railyard::decision" && l["fields"]["request_id"] == request_id)
        .collect()
}

fn request_id(reply: &Reply) -> String {
    reply
        .header("x-request-id")
        .expect("request id")
        .to_string()
}

#[test]
fn every_fault_resolves_through_on_error_on_every_door() {
    let cfg = config();
    let backend = MockBackend::start(Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": "backend says hi"}),
            "stop",
        ),
    ));
    let daemon = Daemon::start_logged(
        &cfg.path,
        &["--backend", &backend.url(), "--grpc-listen", "127.0.0.1:0"],
    );
    let grpc = format!("http://{}", daemon.grpc.unwrap());
    for &(mode, kind) in MODES {
        for (key, closed) in [(CLOSED_KEY, true), (OPEN_KEY, false)] {
            let plugin = if closed {
                "hostile-closed"
            } else {
                "hostile-open"
            };
            let what = format!("{mode} ({plugin})");

            // Chat completions: fail closed is a refusal, fail open reaches the model.
            let reply = post_as(daemon.addr, "/v1/chat/completions", Some(key), &chat(mode));
            assert_eq!(reply.status, 200, "{what}: {}", reply.body);
            let body = reply.json();
            let fault = &body["railyard"]["faults"][0];
            assert_eq!(fault["fault"], kind, "{what}: {body}");
            assert_eq!(fault["policy"], plugin, "{what}: {body}");
            if closed {
                assert_eq!(
                    body["choices"][0]["finish_reason"], "content_filter",
                    "{what}"
                );
                assert_eq!(body["railyard"]["blocked"]["fault"], true, "{what}");
                assert_eq!(fault["on_error"], "block", "{what}");
            } else {
                assert_eq!(
                    body["choices"][0]["message"]["content"], "backend says hi",
                    "{what}: fail open passes the request on"
                );
                assert_eq!(fault["on_error"], "allow", "{what}");
            }
            let id = request_id(&reply);
            eventually(&format!("{what}: one decision record"), || {
                record(&daemon.logs(), &id).len() == 1
            });
            let logs = daemon.logs();
            let rec = &record(&logs, &id)[0]["fields"];
            assert_eq!(rec["faults"][0]["rail"], "input", "{what}: {rec}");
            assert_eq!(rec["faults"][0]["policy"], plugin, "{what}: {rec}");
            assert_eq!(rec["faults"][0]["fault"], kind, "{what}: {rec}");
            assert_eq!(rec["door"], "chat", "{what}: {rec}");
            assert_eq!(rec["status"], 200, "{what}: {rec}");

            // The check API: the verdict, and the fault in the decision.
            let reply = post_as(daemon.addr, "/v1/check", Some(key), &check(mode));
            assert_eq!(reply.status, 200, "{what}: {}", reply.body);
            let body = reply.json();
            assert_eq!(
                body["verdict"],
                if closed { "block" } else { "allow" },
                "{what}: {body}"
            );
            assert_eq!(body["decisions"][0]["verdict"], "fault", "{what}");
            assert_eq!(body["decisions"][0]["fault"], kind, "{what}: {body}");
            let id = body["request_id"].as_str().unwrap().to_string();
            eventually(&format!("{what}: check decision record"), || {
                record(&daemon.logs(), &id).len() == 1
            });

            // gRPC Check.
            let answer = runtime().block_on(async {
                let mut client = client_with(grpc.clone(), Some(key)).await;
                client
                    .check(proto::CheckRequest {
                        rail: proto::Rail::Input as i32,
                        messages: vec![proto::Message {
                            role: "user".into(),
                            content: Some(mode.into()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    })
                    .await
                    .unwrap()
                    .into_inner()
            });
            let want = if closed {
                proto::Verdict::Block
            } else {
                proto::Verdict::Allow
            };
            assert_eq!(answer.verdict(), want, "{what}");
            assert_eq!(answer.decisions[0].fault, kind, "{what}");
            let id = answer.request_id.clone();
            eventually(&format!("{what}: gRPC decision record"), || {
                record(&daemon.logs(), &id).len() == 1
            });

            // The next request is served normally.
            let next = post_as(daemon.addr, "/v1/check", Some(key), &check("allow"));
            assert_eq!(next.status, 200, "after {what}");
            assert_eq!(
                next.json()["verdict"],
                "allow",
                "after {what}: {}",
                next.body
            );
        }
    }
}

/// The output rail of a streamed reply: a fault fails the stream closed (an error event, nothing
/// unjudged released) or open (the text flows on), and the stream says which.
#[test]
fn a_fault_on_the_streamed_output_rail_resolves_through_on_error() {
    let cfg = config_on("output");
    let backend = MockBackend::start(Script::Sse(
        vec![
            text_chunk("panic "),
            text_chunk("at the disco"),
            finish_chunk("stop"),
            "[DONE]".into(),
        ],
        std::time::Duration::from_millis(5),
    ));
    let daemon = Daemon::start_logged(&cfg.path, &["--backend", &backend.url()]);
    let body = json!({"model": "m", "stream": true,
        "messages": [{"role": "user", "content": "sing"}]});

    let closed = post_as(daemon.addr, "/v1/chat/completions", Some(CLOSED_KEY), &body);
    assert_eq!(closed.status, 200);
    assert!(!closed.streamed_text().contains("disco"), "{}", closed.body);
    let error = closed
        .events()
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .find(|e| e.get("error").is_some())
        .expect("an error event");
    assert_eq!(error["error"]["type"], "policy_violation");
    assert_eq!(error["railyard"]["faults"][0]["fault"], "trap");
    assert_eq!(closed.events().last().map(String::as_str), Some("[DONE]"));

    let open = post_as(daemon.addr, "/v1/chat/completions", Some(OPEN_KEY), &body);
    assert_eq!(open.streamed_text(), "panic at the disco");
    let last = open
        .events()
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .rfind(|e| e.get("railyard").is_some())
        .expect("a railyard chunk");
    assert_eq!(last["railyard"]["faults"][0]["on_error"], "allow");
    for reply in [&closed, &open] {
        let id = request_id(reply);
        eventually("one decision record per stream", || {
            record(&daemon.logs(), &id).len() == 1
        });
    }
}

/// A figure in KiB from `/proc/PID/status`: `VmRSS` (resident now) or `VmHWM` (its peak).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// The daemon on `cfg` whose memory is read: mimalloc hands freed pages back to the system a
/// second after they were freed, on a later free, so a reading would count the last second's
/// faults (each drops an instance and makes another) as kept. Handing them back at once leaves
/// only what is kept.
fn measured_daemon(cfg: &TempConfig, backend: &MockBackend) -> Daemon {
    Daemon::start_logged_env(
        &cfg.path,
        &["--backend", &backend.url()],
        &[("MIMALLOC_PURGE_DELAY", "0")],
    )
}

#[test]
fn a_thousand_faults_leave_memory_where_it_was() {
    let cfg = config();
    let backend = MockBackend::start(Script::Hang);
    let daemon = measured_daemon(&cfg, &backend);
    // Cheap faults, each dropping its instance: traps, exits, invalid and oversized verdicts.
    let modes = [
        "panic",
        "abort",
        "unreachable",
        "exit",
        "bad-index",
        "many-edits",
        "recursion",
    ];
    let run = |n: usize| {
        for i in 0..n {
            let mode = modes[i % modes.len()];
            let reply = post_as(daemon.addr, "/v1/check", Some(CLOSED_KEY), &check(mode));
            assert_eq!(reply.status, 200, "{mode}: {}", reply.body);
            assert_eq!(reply.json()["verdict"], "block", "{mode}");
        }
    };
    run(200); // warm up: allocator arenas, code caches
    let before = status_kib(daemon.pid(), "VmRSS");
    run(1000);
    let after = status_kib(daemon.pid(), "VmRSS");
    assert!(
        after < before + 32 * 1024,
        "RSS grew from {before} KiB to {after} KiB over 1,000 faults"
    );
    let next = post_as(daemon.addr, "/v1/check", Some(CLOSED_KEY), &check("allow"));
    assert_eq!(next.json()["verdict"], "allow");
}

/// An answer is read only up to a bound set by the question (8 MiB and 8 times its text): past
/// it, it is refused unread. A 100 MiB reason would otherwise be copied whole, and one 1 MiB
/// text named by a thousand edits copied until wasmtime's default bound (128 MiB) stops it.
#[test]
fn answers_past_their_bound_are_refused_unread() {
    let cfg = config();
    let backend = MockBackend::start(Script::Hang);
    let daemon = measured_daemon(&cfg, &backend);
    let pid = daemon.pid();
    // The plugin's own memory is in the daemon's RSS too: 1 MiB for the aliases, ~100 MiB for
    // the others. The host's copies would add 128 MiB (where wasmtime stops by default) or
    // 100 MiB again.
    for (mode, plugin_mib) in [
        ("aliased-edits", 1),
        ("huge-reason", 100),
        ("huge-edit", 100),
        ("many-rejections", 100),
    ] {
        let allow = post_as(daemon.addr, "/v1/check", Some(CLOSED_KEY), &check("allow"));
        assert_eq!(allow.json()["verdict"], "allow");
        // Linux: "5" resets the peak RSS to the current RSS.
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
        let before = status_kib(pid, "VmRSS");
        let reply = post_as(daemon.addr, "/v1/check", Some(CLOSED_KEY), &check(mode));
        assert_eq!(reply.json()["verdict"], "block", "{mode}: {}", reply.body);
        let grew = status_kib(pid, "VmHWM").saturating_sub(before) >> 10;
        assert!(
            grew < plugin_mib + 40,
            "{mode}: the peak RSS grew by {grew} MiB"
        );
        let id = request_id(&reply);
        eventually("its decision record", || {
            record(&daemon.logs(), &id).len() == 1
        });
        let logs = daemon.logs();
        let faults = &record(&logs, &id)[0]["fields"]["faults"];
        assert_eq!(faults[0]["fault"], "verdict_too_large", "{mode}: {faults}");
    }
}

/// A plugin that logs and prints the content it was given (a secret) gets at most one cut,
/// rate-limited line of it into the daemon's log.
#[test]
fn a_plugin_leaking_what_it_sees_reaches_the_log_only_cut_and_rate_limited() {
    let cfg = config();
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start_logged(&cfg.path, &["--backend", &backend.url()]);
    let secret = format!("secret-log {}", "S3CR3T-".repeat(300));
    for _ in 0..300 {
        let reply = post_as(daemon.addr, "/v1/check", Some(CLOSED_KEY), &check(&secret));
        assert_eq!(reply.json()["verdict"], "allow", "{}", reply.body);
    }
    let logs = daemon.logs();
    let leaked: Vec<&Value> = logs
        .iter()
        .filter(|l| l.to_string().contains("S3CR3T-"))
        .collect();
    assert!(!leaked.is_empty(), "the plugin's lines are forwarded");
    for line in &leaked {
        let text = line.to_string();
        assert!(
            !text.contains(&secret[..1000]),
            "a whole secret in the log: {text}"
        );
        assert!(
            text.len() < 1500,
            "a line longer than the cap: {} bytes",
            text.len()
        );
    }
    // 300 calls x 3 lines (log, stderr, stdout): the budget lets through its burst and refill,
    // not 900 lines.
    assert!(
        leaked.len() < 300,
        "{} lines of the secret in the log",
        leaked.len()
    );
    assert!(
        logs.iter()
            .any(|l| l["fields"]["suppressed"].as_u64().is_some()),
        "suppressed lines are counted"
    );
}

/// Components that import the filesystem or sockets are refused at load: by a reload of the
/// running daemon (which keeps serving the old set) and at start (exit 64).
#[test]
fn filesystem_and_socket_imports_are_refused_at_load() {
    let backend = MockBackend::start(Script::Hang);
    let cfg = write_config(&format!(
        "[[plugins]]\nname = \"ok\"\npath = \"{}\"\nrails = [\"input\"]\n",
        plugin("hostile").display()
    ));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    for (name, import) in [
        ("fs_reader", "wasi:filesystem"),
        ("net_client", "wasi:sockets"),
    ] {
        std::fs::write(
            &cfg.path,
            with_auth(&format!(
                "[[plugins]]\nname = \"bad\"\npath = \"{}\"\nrails = [\"input\"]\n",
                plugin(name).display()
            )),
        )
        .unwrap();
        let reply = request(daemon.addr, "POST", "/v1/admin/reload", &[], b"");
        assert!(reply.body.contains(import), "{name}: {}", reply.body);
        let next = post(daemon.addr, "/v1/check", &check("allow"));
        assert_eq!(
            next.json()["verdict"],
            "allow",
            "the old set serves: {}",
            next.body
        );
        assert_eq!(next.json()["decisions"][0]["plugin"], "ok");
    }
}
