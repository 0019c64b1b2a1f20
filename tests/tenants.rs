//! Callers and tenants: API keys over HTTP and gRPC (missing, wrong, revoked by a reload of the
//! keys file), the principal coming only from the key, tenants with their own chains and limits,
//! and protected admin endpoints. All against the real daemon.

use crate::grpc::{client_with, runtime};
use crate::http::*;
use crate::support::*;
use railyard::server::grpc::proto;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

fn hello() -> Value {
    json!({"rail": "input", "messages": [{"role": "user", "content": "hello"}]})
}

/// The gRPC status code of a Check on the input rail presenting `key`.
pub(crate) fn grpc_check(grpc: SocketAddr, key: Option<&str>) -> tonic::Code {
    runtime().block_on(async {
        let mut client = client_with(format!("http://{grpc}"), key).await;
        let result = client
            .check(proto::CheckRequest {
                rail: proto::Rail::Input as i32,
                messages: vec![proto::Message {
                    role: "user".into(),
                    content: Some("hello".into()),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .await;
        match result {
            Ok(_) => tonic::Code::Ok,
            Err(status) => status.code(),
        }
    })
}

#[test]
fn missing_wrong_and_revoked_keys_over_http_and_grpc() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    let both =
        key_entry("keys", "key-one", "one", None) + &key_entry("keys", "key-two", "two", None);
    std::fs::write(&keys, &both).unwrap();
    let config = dir.path().join("railyard.toml");
    std::fs::write(
        &config,
        format!(
            "[auth]\nkeys_file = \"keys.toml\"\n\n{}",
            scripted("noop", "[\"input\"]", "", "{ mode = \"allow\" }")
        ),
    )
    .unwrap();
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start_with(
        &config,
        &["--backend", &backend.url(), "--grpc-listen", "127.0.0.1:0"],
    );
    let grpc = daemon.grpc.unwrap();

    let missing = post_as(daemon.addr, "/v1/check", None, &hello());
    assert_eq!(missing.status, 401, "{}", missing.body);
    assert_eq!(missing.json()["error"]["code"], "invalid_api_key");
    assert!(missing.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("missing API key"));
    assert_eq!(missing.header("www-authenticate"), Some("Bearer"));
    let wrong = post_as(daemon.addr, "/v1/check", Some("key-three"), &hello());
    assert_eq!(wrong.status, 401);
    assert!(
        !wrong.body.contains("key-three"),
        "errors never echo a presented key"
    );
    let chat = post_as(
        daemon.addr,
        "/v1/chat/completions",
        Some("nope"),
        &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(chat.status, 401);
    assert!(
        backend.seen().is_empty(),
        "an unknown caller never reaches the model"
    );
    let ok = post_as(daemon.addr, "/v1/check", Some("key-one"), &hello());
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.json()["caller"]["principal"], "one");

    assert_eq!(grpc_check(grpc, None), tonic::Code::Unauthenticated);
    assert_eq!(
        grpc_check(grpc, Some("key-three")),
        tonic::Code::Unauthenticated
    );
    assert_eq!(grpc_check(grpc, Some("key-one")), tonic::Code::Ok);

    // Revoke key-one by rewriting the keys file: the watcher reloads it.
    std::fs::write(&keys, key_entry("keys", "key-two", "two", None)).unwrap();
    eventually("key-one revoked", || {
        post_as(daemon.addr, "/v1/check", Some("key-one"), &hello()).status == 401
    });
    assert_eq!(
        grpc_check(grpc, Some("key-one")),
        tonic::Code::Unauthenticated
    );
    assert_eq!(
        post_as(daemon.addr, "/v1/check", Some("key-two"), &hello()).status,
        200
    );
    assert_eq!(grpc_check(grpc, Some("key-two")), tonic::Code::Ok);

    // A broken keys file is refused as a whole: the keys in force stay in force.
    std::fs::write(&keys, "[[keys]]\nsha256 = \"short\"\nprincipal = \"x\"\n").unwrap();
    let policies = request(
        daemon.addr,
        "GET",
        "/v1/policies",
        &[("Authorization", "")],
        b"",
    );
    assert_eq!(policies.status, 200, "no admin key configured: open");
    eventually("the broken keys file refused", || {
        let p = get(daemon.addr, "/v1/policies").json();
        p["last_reload_error"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("keys.toml:2") && e.contains("sha256"))
    });
    assert_eq!(
        post_as(daemon.addr, "/v1/check", Some("key-two"), &hello()).status,
        200
    );
    assert_eq!(
        post_as(daemon.addr, "/v1/check", Some("key-one"), &hello()).status,
        401
    );
}

fn refund_call() -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "refund", "arguments": "{\"order\":\"A1\",\"amount\":20}"}}]})
}

fn refund_tool() -> Value {
    json!({"type": "function", "function": {"name": "refund", "parameters": {"type": "object",
        "properties": {"order": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["order", "amount"]}}})
}

#[test]
fn two_tenants_get_different_verdicts_for_the_same_tool_call() {
    let backend = MockBackend::start(Script::Json(200, completion(refund_call(), "tool_calls")));
    let daemon = Daemon::start(&root().join("policies/railyard.toml"), &backend.url());
    let check = json!({"rail": "tool_call", "tools": [refund_tool()],
        "messages": [{"role": "user", "content": "refund order A1"}, refund_call()]});

    let support = post_as(daemon.addr, "/v1/check", Some("demo-support-key"), &check).json();
    assert_eq!(support["verdict"], "block", "{support}");
    assert_eq!(support["blocked"]["plugin"], "allowlist-support");
    assert_eq!(support["caller"]["tenant"], "support");
    let payments = post_as(daemon.addr, "/v1/check", Some("demo-payments-key"), &check).json();
    assert_eq!(payments["verdict"], "allow", "{payments}");
    assert_eq!(payments["caller"]["tenant"], "payments");

    // The same through the proxy: the model emits the same call for both callers.
    let chat = json!({"model": "m", "tools": [refund_tool()],
        "messages": [{"role": "user", "content": "refund order A1"}]});
    let support = post_as(
        daemon.addr,
        "/v1/chat/completions",
        Some("demo-support-key"),
        &chat,
    )
    .json();
    assert_eq!(
        support["railyard"]["blocked"]["policy"],
        "allowlist-support"
    );
    assert!(support["choices"][0]["message"]["tool_calls"].is_null());
    let payments = post_as(
        daemon.addr,
        "/v1/chat/completions",
        Some("demo-payments-key"),
        &chat,
    )
    .json();
    assert_eq!(
        payments["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "refund",
        "{payments}"
    );

    // Metrics carry the tenant.
    let metrics = get(daemon.addr, "/metrics").body;
    for tenant in ["support", "payments"] {
        assert!(
            metrics.contains(&format!(
                "railyard_verdicts_total{{tenant=\"{tenant}\",rail=\"tool_call\""
            )),
            "{metrics}"
        );
    }
    assert!(metrics.contains(
        "tenant=\"support\",rail=\"tool_call\",policy=\"allowlist-support\",verdict=\"block\""
    ));
}

#[test]
fn the_principal_comes_from_the_key_never_from_the_body() {
    let cfg = write_config(&format!(
        "[auth]\n{}\n[tenants.red]\n\n{}",
        key_entry("auth.keys", "bob-key", "bob", Some("red")).replace(
            "tenant = \"red\"\n",
            "tenant = \"red\"\nlabels = { team = \"blue\" }\n"
        ),
        scripted("echo", "[\"input\"]", "", "{ mode = \"echo-context\" }")
    ));
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start_with(
        &cfg.path,
        &["--backend", &backend.url(), "--grpc-listen", "127.0.0.1:0"],
    );
    // Every place a body could claim an identity.
    let chat = json!({"model": "m", "user": "alice", "principal": "alice", "tenant": "green",
        "metadata": {"principal": "alice", "team": "evil"},
        "messages": [{"role": "user", "content": "hi", "name": "alice"}]});
    let reply = request(
        daemon.addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer bob-key"),
            ("X-Railyard-Principal", "alice"),
            ("X-Principal", "alice"),
        ],
        chat.to_string().as_bytes(),
    );
    let reason = reply.json()["railyard"]["blocked"]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("principal=bob tenant=red"), "{reason}");
    assert!(reason.contains("(\"team\", \"blue\")"), "{reason}");
    assert!(
        !reason.contains("alice") && !reason.contains("evil") && !reason.contains("green"),
        "{reason}"
    );

    // gRPC request metadata is the caller's claim: namespaced, never a label.
    let reason = runtime().block_on(async {
        let mut client =
            client_with(format!("http://{}", daemon.grpc.unwrap()), Some("bob-key")).await;
        let r = client
            .check(proto::CheckRequest {
                rail: proto::Rail::Input as i32,
                messages: vec![proto::Message {
                    role: "user".into(),
                    content: Some("hi".into()),
                    ..Default::default()
                }],
                metadata: [("team".to_string(), "evil".to_string())].into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        r.blocked.unwrap().reason
    });
    assert!(reason.contains("principal=bob tenant=red"), "{reason}");
    assert!(
        reason.contains("(\"team\", \"blue\")") && reason.contains("(\"request.team\", \"evil\")"),
        "{reason}"
    );
}

#[test]
fn admin_endpoints_need_the_admin_key() {
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&root().join("policies/railyard.toml"), &backend.url());
    for (method, path) in [
        ("GET", "/v1/policies"),
        ("GET", "/metrics"),
        ("POST", "/v1/admin/reload"),
    ] {
        for auth in ["", "Bearer demo-key", "Bearer wrong", "demo-admin-key"] {
            let r = request(daemon.addr, method, path, &[("Authorization", auth)], b"");
            assert_eq!(r.status, 401, "{method} {path} with {auth:?}: {}", r.body);
            assert!(r.body.contains("admin key"), "{}", r.body);
        }
        let r = request(
            daemon.addr,
            method,
            path,
            &[("Authorization", "Bearer demo-admin-key")],
            b"",
        );
        assert_eq!(r.status, 200, "{method} {path}: {}", r.body);
    }
    // Health stays open for probes.
    let r = request(
        daemon.addr,
        "GET",
        "/healthz",
        &[("Authorization", "")],
        b"",
    );
    assert_eq!(r.status, 200);
    // The admin key is not an API key.
    let r = post_as(daemon.addr, "/v1/check", Some("demo-admin-key"), &hello());
    assert_eq!(r.status, 401);
}

#[test]
fn admin_endpoints_on_their_own_listener() {
    let cfg = write_config(&format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n\n{}",
        scripted("noop", "[\"input\"]", "", "{ mode = \"allow\" }")
    ));
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let admin = daemon.admin.expect("an admin listener");
    assert_eq!(get(daemon.addr, "/v1/policies").status, 404);
    assert_eq!(get(daemon.addr, "/metrics").status, 404);
    assert_eq!(get(admin, "/v1/policies").status, 200);
    assert!(get(admin, "/metrics")
        .body
        .contains("railyard_requests_total"));
    assert_eq!(
        get(admin, "/v1/check").status,
        404,
        "no API on the admin port"
    );
    assert_eq!(
        post_as(daemon.addr, "/v1/check", None, &hello()).status,
        200,
        "open: no [auth]"
    );
}

/// Issue #46: a config that would open the daemon is refused: at start without `[auth]` (an
/// empty file too), on reload when it is truncated to nothing or says `open = true`; and a key
/// deleted from the keys file stops working while the config itself does not load, through the
/// file watcher and an admin reload alike.
#[test]
fn a_config_that_would_open_the_daemon_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("railyard.toml");
    let plugin = scripted("noop", "[\"input\"]", "", "{ mode = \"allow\" }");
    for text in [plugin.clone(), String::new()] {
        std::fs::write(&config, &text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_railyard"))
            .args(["serve", "--config", config.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0", "--no-watch"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{text:?}: {stderr}");
        assert!(
            stderr.contains("[auth]") && stderr.contains("open = true"),
            "{stderr}"
        );
    }

    let keys = dir.path().join("keys.toml");
    let one = key_entry("keys", "key-one", "one", None);
    std::fs::write(
        &keys,
        one.clone() + &key_entry("keys", "key-two", "two", None),
    )
    .unwrap();
    let closed = format!("[auth]\nkeys_file = \"keys.toml\"\n\n{plugin}");
    std::fs::write(&config, &closed).unwrap();
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&config, &backend.url());
    let status = |key: Option<&str>| post_as(daemon.addr, "/v1/check", key, &hello()).status;
    assert_eq!(status(Some("key-two")), 200);
    assert_eq!(status(None), 401);
    let refused = |why: &str| {
        eventually(&format!("a reload refused for {why:?}"), || {
            get(daemon.addr, "/v1/policies").json()["last_reload_error"]["error"]
                .as_str()
                .is_some_and(|e| e.contains(why))
        });
    };

    // Truncated to nothing, as a failed write leaves it: refused, the keys still hold.
    std::fs::write(&config, "").unwrap();
    refused("there is no [auth] table");
    assert_eq!(status(None), 401);
    // A reload cannot turn authentication off.
    std::fs::write(&config, format!("[auth]\nopen = true\n\n{plugin}")).unwrap();
    refused("cannot turn authentication off");
    assert_eq!(status(None), 401);
    assert_eq!(status(Some("key-two")), 200);

    // The config broken, a key revoked: it stops working all the same.
    std::fs::write(&config, "[auth\nbroken").unwrap();
    refused("railyard.toml");
    std::fs::write(&keys, &one).unwrap();
    eventually("the revoked key is refused", || {
        status(Some("key-two")) == 401
    });
    assert_eq!(status(Some("key-one")), 200);
    let reload = request(daemon.addr, "POST", "/v1/admin/reload", &[], b"");
    assert_eq!(reload.status, 422, "{}", reload.body);
    assert_eq!(status(Some("key-two")), 401);
    assert_eq!(status(Some("key-one")), 200);
    // Fixed, the config loads again with the keys as the file has them.
    std::fs::write(&config, &closed).unwrap();
    eventually("the fixed config loads", || {
        get(daemon.addr, "/v1/policies").json()["last_reload_error"].is_null()
    });
    assert_eq!(status(Some("key-two")), 401);
    assert_eq!(status(Some("key-one")), 200);
}

fn tenants_config(dir: &Path) -> std::path::PathBuf {
    let config = dir.join("railyard.toml");
    std::fs::write(
        &config,
        format!(
            "[auth]\n{}{}\n[tenants.noisy]\nmax_concurrent = 1\nmax_body_bytes = 1024\n\n[tenants.quiet]\nmax_concurrent = 1\n\n{}",
            key_entry("auth.keys", "noisy-key", "noisy-svc", Some("noisy")),
            key_entry("auth.keys", "quiet-key", "quiet-svc", Some("quiet")),
            scripted("noop", "[\"input\"]", "", "{ mode = \"allow\" }")
        ),
    )
    .unwrap();
    config
}

#[test]
fn a_tenant_at_its_concurrency_limit_gets_429_while_another_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let config = tenants_config(dir.path());
    // A slow streamed answer: 20 chunks, 100 ms apart.
    let events: Vec<String> = (0..20)
        .map(|i| text_chunk(&format!("w{i} ")))
        .chain([finish_chunk("stop"), "[DONE]".into()])
        .collect();
    let backend = MockBackend::start(Script::Sse(events, Duration::from_millis(100)));
    let daemon = Daemon::start(&config, &backend.url());
    let addr = daemon.addr;
    let stream =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let first = {
        let stream = stream.clone();
        std::thread::spawn(move || {
            post_as(addr, "/v1/chat/completions", Some("noisy-key"), &stream)
        })
    };
    eventually("the first stream reaches the backend", || {
        !backend.seen().is_empty()
    });

    let refused = post_as(addr, "/v1/chat/completions", Some("noisy-key"), &stream);
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(refused.json()["error"]["type"], "rate_limit_error");
    assert!(refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("tenant 'noisy'"));
    assert_eq!(
        post_as(addr, "/v1/check", Some("noisy-key"), &hello()).status,
        429
    );

    // The other tenant is served meanwhile, stream and all.
    let quiet = post_as(addr, "/v1/chat/completions", Some("quiet-key"), &stream);
    assert_eq!(quiet.status, 200);
    assert!(quiet.streamed_text().contains("w19"), "{}", quiet.body);

    let first = first.join().unwrap();
    assert!(first.streamed_text().contains("w19"));
    // The permit went with the finished stream.
    assert_eq!(
        post_as(addr, "/v1/check", Some("noisy-key"), &hello()).status,
        200
    );
    let metrics = get(addr, "/metrics").body;
    assert!(
        metrics.contains("railyard_tenant_throttled_total{tenant=\"noisy\"} 2"),
        "{metrics}"
    );
}

#[test]
fn body_limits_are_per_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let config = tenants_config(dir.path());
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&config, &backend.url());
    let big = json!({"rail": "input", "messages": [{"role": "user", "content": "x".repeat(2000)}]});
    let noisy = post_as(daemon.addr, "/v1/check", Some("noisy-key"), &big);
    assert_eq!(noisy.status, 413, "{}", noisy.body);
    assert!(noisy.body.contains("1024 byte limit"), "{}", noisy.body);
    assert_eq!(
        post_as(daemon.addr, "/v1/check", Some("quiet-key"), &big).status,
        200
    );
}

#[test]
fn keys_new_makes_a_key_that_works() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("railyard.toml");
    std::fs::write(
        &config,
        format!(
            "[auth]\nkeys_file = \"keys.toml\"\n\n[tenants.t1]\n\n{}",
            scripted("noop", "[\"input\"]", "", "{ mode = \"allow\" }")
        ),
    )
    .unwrap();
    let keys_new = |tenant: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_railyard"))
            .args(["keys", "new", "--principal", "svc-a", "--tenant", tenant])
            .args(["--config", config.to_str().unwrap()])
            .output()
            .unwrap()
    };
    // A tenant the config lacks is refused here (#51: the keys file then failed to reload, and
    // callers saw only "Incorrect API key").
    let refused = keys_new("t2");
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("has no tenant 't2' (it configures t1)"),
        "{err}"
    );
    assert!(refused.stdout.is_empty(), "no key printed");

    let out = keys_new("t1");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let key = text
        .lines()
        .find_map(|l| l.trim_start_matches('#').trim().strip_prefix("ry_"))
        .map(|k| format!("ry_{k}"))
        .expect("the key is printed");
    let entry: String = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        entry.contains(&hash(&key)) && !entry.contains(&key),
        "{entry}"
    );

    // `keys hash` agrees.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args(["keys", "hash"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    writeln!(child.stdin.take().unwrap(), "{key}").unwrap();
    let hashed = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8(hashed.stdout).unwrap().trim(), hash(&key));

    // The printed entry, pasted into the keys file, lets the key in.
    std::fs::write(dir.path().join("keys.toml"), &entry).unwrap();
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&config, &backend.url());
    let r = post_as(daemon.addr, "/v1/check", Some(&key), &hello()).json();
    assert_eq!(r["caller"], json!({"principal": "svc-a", "tenant": "t1"}));
}

#[test]
fn a_tenant_chain_must_fit_its_plugins_rails() {
    let err = policy_error(&format!(
        "[tenants.t]\nextend = {{ input = [\"tools\"] }}\n\n[[plugins]]\nname = \"tools\"\npath = \"{}\"\nrails = []\n",
        plugin("allowlist").display()
    ));
    assert!(
        err.contains("railyard.toml:1: tenants.t: plugin 'tools' does not handle the input rail (it handles: tool_call, tools)"),
        "{err}"
    );
    // The same plugin where it belongs: only the tenant's tool_call chain has it.
    let set = policy_set(&format!(
        "[tenants.t]\nextend = {{ tool_call = [\"tools\"] }}\n\n[[plugins]]\nname = \"tools\"\npath = \"{}\"\nrails = []\n",
        plugin("allowlist").display()
    ));
    assert!(set
        .chain(railyard::payload::Rail::ToolCall)
        .steps()
        .is_empty());
    assert_eq!(
        set.chain_for(Some("t"), railyard::payload::Rail::ToolCall)
            .steps()
            .len(),
        1
    );
    assert_eq!(set.rails_of("tools"), [railyard::payload::Rail::ToolCall]);
}

/// #51: a plugin added to a default chain does not apply to a tenant whose `chains` replace that
/// rail. The set says so at load (logged, and on /v1/policies), naming the tenant and the
/// plugin, unless a plugin of the same component stands in (a tenant's own allowlist).
#[test]
fn a_tenant_chain_that_leaves_out_a_default_plugin_is_pointed_out() {
    let entry = |name: &str, file: &str| {
        format!(
            "[[plugins]]\nname = \"{name}\"\npath = \"{}\"\nrails = [\"tool_call\"]\nconfig = {{}}\n\n",
            plugin(file).display()
        )
    };
    let toml = format!(
        "[tenants.narrow]\nchains = {{ tool_call = [\"allowlist\"] }}\n\n[tenants.own]\nchains = {{ tool_call = [\"allowlist-own\", \"schema\"] }}\n\n[tenants.more]\nextend = {{ tool_call = [\"allowlist-own\"] }}\n\n{}{}[[plugins]]\nname = \"allowlist-own\"\npath = \"{}\"\nrails = []\nconfig = {{ allow = [\"a\"] }}\n",
        entry("allowlist", "allowlist"),
        entry("schema", "schema_validator"),
        plugin("allowlist").display()
    );
    let set = policy_set(&toml);
    let warnings = set.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .starts_with("tenant 'narrow' replaces the tool_call chain and leaves out 'schema'"),
        "{warnings:?}"
    );

    let cfg = write_config(&toml);
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let shown = get(daemon.addr, "/v1/policies").json();
    assert_eq!(shown["warnings"], json!(warnings), "{shown}");
    // The bundled config's tenants each replace a chain with their own allowlist: no warning.
    let bundled = bundled_with(&[]);
    let daemon = Daemon::start(&bundled.path, &backend.url());
    let shown = get(daemon.addr, "/v1/policies").json();
    assert_eq!(shown["warnings"], json!([]), "{shown}");
}
