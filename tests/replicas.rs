//! Many replicas, one state (#48), through a load balancer: three daemons sharing one real Redis
//! behind nginx round-robin on loopback. One agent's MCP session spread over the replicas is one
//! conversation (a read through one, a privileged call through the others: refused), also across
//! two MCP servers and in the stateless protocol; an upstream's changed tool list is the list
//! every replica judges by; a tenant's `max_concurrent` holds across the replicas, not per
//! replica.

use crate::http::*;
use crate::mcp::{client_in, config as mcp_config, Upstream};
use crate::state::RedisServer;
use crate::support::*;
use serde_json::{json, Value};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};

/// nginx on a loopback port, round-robin over `upstreams`, as a plain reverse proxy that keeps
/// streams open (the MCP SDK's GET stream lasts its session); stopped when dropped.
pub(crate) struct Nginx {
    child: Child,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Nginx {
    pub fn start(upstreams: &[SocketAddr]) -> Nginx {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let servers: String = upstreams.iter().map(|a| format!("server {a};")).collect();
        let d = dir.path().display();
        let conf = format!(
            "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n access_log off;\n client_body_temp_path {d}/body;\n\
             proxy_temp_path {d}/proxy;\n fastcgi_temp_path {d}/fastcgi;\n\
             uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n\
             upstream replicas {{ {servers} keepalive 16; }}\n\
             server {{\n  listen 127.0.0.1:{port};\n  location / {{\n\
             proxy_pass http://replicas;\n   proxy_http_version 1.1;\n\
             proxy_set_header Connection \"\";\n   proxy_buffering off;\n\
             proxy_read_timeout 300s;\n  }}\n }}\n}}\n"
        );
        let path = dir.path().join("nginx.conf");
        std::fs::write(&path, conf).unwrap();
        let binary = ["/usr/sbin/nginx", "nginx"]
            .into_iter()
            .find(|b| std::path::Path::new(b).exists())
            .unwrap_or("nginx");
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&path)
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("nginx did not start ({e}): install nginx-light (scripts/setup.sh does)")
            });
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        eventually("nginx to listen", || TcpStream::connect(addr).is_ok());
        Nginx {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cfg` with `[state]` on `redis`.
pub(crate) fn on_redis(cfg: &TempConfig, redis: &RedisServer) {
    let text = std::fs::read_to_string(&cfg.path).unwrap()
        + &format!(
            "\n[state]\nbackend = \"redis\"\nurl = \"{}\"\ntimeout_ms = 500\n",
            redis.url()
        );
    std::fs::write(&cfg.path, text).unwrap();
}

/// The MCP decision records each replica wrote: (replica, tool, outcome).
fn calls(replicas: &[Daemon]) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for (i, d) in replicas.iter().enumerate() {
        for l in d.logs() {
            let r = &l["fields"];
            if l["target"] == "railyard::decision"
                && r["door"] == "mcp"
                && r["target"]["method"] == "tools/call"
            {
                let tool = r["target"]["tool"].as_str().unwrap_or("").to_string();
                let outcome = r["outcome"].as_str().unwrap_or("").to_string();
                out.push((i, tool, outcome));
            }
        }
    }
    out
}

/// The test MCP server behind three daemons on one Redis, behind nginx.
struct McpReplicas {
    replicas: Vec<Daemon>,
    lb: Nginx,
    _up: Upstream,
    _cfg: TempConfig,
    _redis: RedisServer,
}

impl McpReplicas {
    fn start() -> McpReplicas {
        McpReplicas::start_with(|_| {})
    }

    /// Three replicas of `mcp_config`, `edit` done to their config first.
    fn start_with(edit: impl FnOnce(&TempConfig)) -> McpReplicas {
        let redis = RedisServer::start();
        let up = Upstream::start();
        let cfg = mcp_config(&up);
        edit(&cfg);
        on_redis(&cfg, &redis);
        // nginx names its upstream group in `Host`: the name the door must answer to behind it
        // (#65: the door checks `Host` against DNS rebinding, loopback by default).
        let text = std::fs::read_to_string(&cfg.path).unwrap()
            + "\n[mcp]\nallowed_hosts = [\"127.0.0.1\", \"replicas\"]\n";
        std::fs::write(&cfg.path, text).unwrap();
        let replicas: Vec<Daemon> = (0..3)
            .map(|_| Daemon::start_logged(&cfg.path, &[]))
            .collect();
        let lb = Nginx::start(&replicas.iter().map(|d| d.addr).collect::<Vec<_>>());
        McpReplicas {
            replicas,
            lb,
            _up: up,
            _cfg: cfg,
            _redis: redis,
        }
    }
}

const FETCH: &str = r#"web_fetch:{"url": "https://shop.example/deals"}"#;
/// The refund the page asks for: refused after the page is read, by value where the session kept
/// the page's text (a JSON answer, through any replica), by tool where it could not (a stream).
const REFUND: &str = r#"issue_refund:{"order_id": "o-666", "amount": 20}"#;
/// A refund the page does not name.
const OTHER_REFUND: &str = r#"issue_refund:{"order_id": "o-1", "amount": 20}"#;

fn refused(step: &Value) -> bool {
    step["error"]["code"] == -32015
        && step["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("policy 'flow'") && m.contains("web_fetch"))
}

#[test]
fn one_agent_over_three_replicas_and_two_servers_is_one_conversation() {
    let set = McpReplicas::start();
    let (replicas, lb) = (&set.replicas, &set.lb);
    let url = |server: &str| format!("http://{}/mcp/{server}", lb.addr);

    // One MCP session through the balancer: the read goes through one replica, the five
    // refunds after it round the replicas (whatever the SDK sends between them), so some of
    // them through replicas that did not relay the read. All refused.
    let seen = client_in(
        Some("agent-1"),
        &url("json"),
        "demo-key",
        "legacy",
        &[FETCH, REFUND, REFUND, REFUND, REFUND, REFUND],
    );
    let steps = seen["steps"].as_array().unwrap();
    assert!(
        steps[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("great deals")),
        "{seen}"
    );
    for step in &steps[1..] {
        assert!(refused(step), "{seen}");
    }
    let records = calls(replicas);
    let reader = records
        .iter()
        .find(|(_, tool, _)| tool == "web_fetch")
        .map(|(i, _, _)| *i)
        .unwrap_or_else(|| panic!("{records:?}"));
    let elsewhere = records
        .iter()
        .filter(|(i, tool, outcome)| tool == "issue_refund" && outcome == "refused" && *i != reader)
        .count();
    assert!(
        elsewhere >= 2,
        "refused by replicas that did not read: {records:?}"
    );

    // The same agent on two MCP servers: a read through `sse`, then refunds through `json` in
    // sessions of their own (and in the stateless protocol, which has none).
    let read = client_in(Some("agent-2"), &url("sse"), "demo-key", "legacy", &[FETCH]);
    assert!(read["steps"][0]["text"].is_string(), "{read}");
    for mode in ["legacy", "2026-07-28"] {
        let seen = client_in(
            Some("agent-2"),
            &url("json"),
            "demo-key",
            mode,
            &[REFUND, REFUND],
        );
        for step in seen["steps"].as_array().unwrap() {
            assert!(refused(step), "{mode}: {seen}");
        }
    }
    // Stateless, naming no session: the key's own conversation, which spans its requests.
    let bare = |steps: &[&str]| client_in(None, &url("json"), "demo-key", "2026-07-28", steps);
    let first = bare(&[OTHER_REFUND]);
    assert_eq!(
        first["steps"][0]["text"], "Refunded 20.00 on order o-1 (refund #1).",
        "{first}"
    );
    bare(&[FETCH]);
    let after = bare(&[REFUND, REFUND, REFUND]);
    for step in after["steps"].as_array().unwrap() {
        assert!(refused(step), "{after}");
    }
    // Another agent of the same key has read nothing: its refund runs (the server's second).
    let other = client_in(
        Some("agent-3"),
        &url("json"),
        "demo-key",
        "legacy",
        &[REFUND],
    );
    assert_eq!(
        other["steps"][0]["text"], "Refunded 20.00 on order o-666 (refund #2).",
        "{other}"
    );
}

#[test]
fn every_replica_judges_by_the_upstreams_changed_tool_list() {
    let set = McpReplicas::start();
    let (replicas, lb) = (&set.replicas, &set.lb);
    let add = r#"add:{"a": 1, "b": 2}"#;
    let late = r#"late_tool:{"note": "hi"}"#;
    // Calls through every replica judge by the session's list; then the upstream declares a
    // new tool and says so on the session's stream (which one replica relays). Every replica's
    // next call of the new tool is judged by the new list. (The SDK client asks for the list
    // itself between calls too: six calls go round the three replicas whatever it interleaves.)
    let seen = client_in(
        Some("lists"),
        &format!("http://{}/mcp/sse", lb.addr),
        "demo-key",
        "legacy",
        &[
            add,
            add,
            add,
            "grow",
            "sleep:0.5",
            late,
            late,
            late,
            late,
            late,
            late,
            "list",
        ],
    );
    let steps = seen["steps"].as_array().unwrap();
    for step in &steps[..3] {
        assert_eq!(step["text"], "3", "{seen}");
    }
    // (`sleep` is no step of its own.)
    for step in &steps[4..10] {
        assert_eq!(step["text"], "late: hi", "{seen}");
    }
    assert!(steps[10]["tools"]
        .as_array()
        .unwrap()
        .contains(&json!("late_tool")));
    // Every replica passed some of them on (each answered above). A record says `served`, or
    // `disconnected` when the client closed the SSE answer once it had read the result; never
    // `refused`.
    let records = calls(replicas);
    let late: Vec<_> = records
        .iter()
        .filter(|(_, t, _)| t == "late_tool")
        .collect();
    assert!(
        late.iter()
            .all(|(_, _, o)| o == "served" || o == "disconnected"),
        "{records:?}"
    );
    let replicas: std::collections::BTreeSet<usize> = late.iter().map(|(i, _, _)| *i).collect();
    assert_eq!(replicas.len(), 3, "{records:?}");
}

#[test]
fn a_tenants_concurrency_limit_holds_across_replicas() {
    let redis = RedisServer::start();
    let backend = MockBackend::start(Script::Slow(
        std::time::Duration::from_millis(1500),
        Box::new(Script::Json(
            200,
            completion(json!({"role": "assistant", "content": "hi"}), "stop"),
        )),
    ));
    let cfg = write_config(&format!(
        "[auth]\n{}\n[tenants.small]\nmax_concurrent = 2\n\n[state]\nbackend = \"redis\"\nurl = \"{}\"\ntimeout_ms = 500\n\n{}",
        key_entry("auth.keys", "small-key", "s", Some("small")),
        redis.url(),
        scripted("noop", "[\"input\"]", "", "{ mode = \"allow\" }")
    ));
    let replicas: Vec<Daemon> = (0..3)
        .map(|_| Daemon::start(&cfg.path, &backend.url()))
        .collect();
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]});
    // Six at once, two to each replica: per replica each would be within the limit.
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let (addr, chat) = (replicas[i % 3].addr, chat.clone());
            std::thread::spawn(move || {
                let r = post_as(addr, "/v1/chat/completions", Some("small-key"), &chat);
                (r.status, r.json())
            })
        })
        .collect();
    let answers: Vec<(u16, Value)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let served = answers.iter().filter(|(s, _)| *s == 200).count();
    assert_eq!(served, 2, "{answers:?}");
    for (status, body) in answers.iter().filter(|(s, _)| *s != 200) {
        assert_eq!(*status, 429, "{body}");
        assert_eq!(body["error"]["code"], "tenant_concurrency_limit", "{body}");
    }
    // A caller's request id does not name its place: three at once, all sent as one id, still
    // take three places, so the third is refused (once the six above have let theirs go).
    let in_flight = || {
        let out = Command::new("redis-cli")
            .args([
                "-p",
                &redis.port.to_string(),
                "ZCARD",
                "railyard:inflight:tenant:small",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    eventually("the six to let their places go", || in_flight() == "0");
    let threads: Vec<_> = (0..3)
        .map(|i| {
            let (addr, body) = (replicas[i % 3].addr, chat.to_string());
            std::thread::spawn(move || {
                let headers = [
                    ("Content-Type", "application/json"),
                    ("Authorization", "Bearer small-key"),
                    ("x-request-id", "one-id"),
                ];
                request(
                    addr,
                    "POST",
                    "/v1/chat/completions",
                    &headers,
                    body.as_bytes(),
                )
                .status
            })
        })
        .collect();
    let mut statuses: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    statuses.sort();
    assert_eq!(statuses, [200, 200, 429]);
    // Finished requests let their places go, through whichever replica.
    eventually("the leases to be released", || {
        post_as(
            replicas[2].addr,
            "/v1/chat/completions",
            Some("small-key"),
            &chat,
        )
        .status
            == 200
    });
}

#[test]
fn a_store_that_stops_answering_withholds_what_it_cannot_remember() {
    // `on_unavailable = "open"` lets limits go uncounted, never flow forget: the same answers.
    for on in ["closed", "open"] {
        a_store_that_stops_answering_withholds_on(on);
    }
}

fn a_store_that_stops_answering_withholds_on(on: &str) {
    let mut redis = RedisServer::start();
    let up = Upstream::start();
    let cfg = mcp_config(&up);
    on_redis(&cfg, &redis);
    let text = std::fs::read_to_string(&cfg.path).unwrap();
    std::fs::write(&cfg.path, format!("{text}on_unavailable = \"{on}\"\n")).unwrap();
    let d = Daemon::start_logged(&cfg.path, &[]);
    let url = format!("http://{}/mcp/json", d.addr);
    let ok = client_in(Some("down"), &url, "demo-key", "2026-07-28", &["list"]);
    assert!(ok["steps"][0]["tools"].is_array(), "{ok}");

    // The store gone: a read is not handed over unremembered, and a call cannot be judged
    // without the session's reads; both are errors, not hangs.
    redis.stop();
    let started = std::time::Instant::now();
    let seen = client_in(
        Some("down"),
        &url,
        "demo-key",
        "2026-07-28",
        &[
            FETCH,
            r#"add:{"a": 1, "b": 2}"#,
            "read:crm://customers/c-17",
        ],
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let steps = seen["steps"].as_array().unwrap();
    for step in steps {
        let message = step["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("{seen}"));
        assert!(message.contains("state store is unavailable"), "{seen}");
        assert!(!step.to_string().contains("great deals"), "{seen}");
    }
    // The resource was read upstream (no call to judge first), and its answer withheld.
    assert!(
        steps[2]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("withheld"),
        "{seen}"
    );
    assert!(!seen.to_string().contains("Lovelace"), "{seen}");

    // Back on the same port: the same agent reads, and its refund after the read is refused.
    let _back = RedisServer::on(redis.port);
    eventually("the daemon to reach the store again", || {
        let seen = client_in(Some("down"), &url, "demo-key", "2026-07-28", &[FETCH]);
        seen["steps"][0]["text"].is_string()
    });
    let after = client_in(Some("down"), &url, "demo-key", "2026-07-28", &[REFUND]);
    assert!(refused(&after["steps"][0]), "{after}");
    // Every request above got its one record, the failed ones too.
    let records = calls(&[d]);
    assert!(
        records.iter().any(|(_, _, outcome)| outcome == "throttled"),
        "{records:?}"
    );
}

/// A refund the model asks for, and the check of it on the `tool_call` rail.
fn refund_check(amount: u32) -> Value {
    let call = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
        "type": "function", "function": {"name": "refund",
        "arguments": format!("{{\"order\":\"A1\",\"amount\":{amount}}}")}}]});
    let tool = json!({"type": "function", "function": {"name": "refund", "parameters": {
        "type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["order", "amount"]}}});
    json!({"rail": "tool_call", "tools": [tool],
        "messages": [{"role": "user", "content": "refund order A1"}, call]})
}

#[test]
fn a_plugins_cumulative_limit_holds_across_replicas() {
    // The bundled tool-limits (Python, contract 0.3 `state`): at most 3 refunds a day for the
    // payments tenant's principal, counted in the store every replica shares.
    let redis = RedisServer::start();
    let cfg = bundled_with(&[(
        "calls = { \"billing-service\" = 200",
        "calls = { \"billing-service\" = 3",
    )]);
    on_redis(&cfg, &redis);
    let replicas: Vec<Daemon> = (0..3).map(|_| Daemon::start_with(&cfg.path, &[])).collect();
    let verdicts: Vec<String> = (0..5)
        .map(|i| {
            let r = post_as(
                replicas[i % 3].addr,
                "/v1/check",
                Some("demo-payments-key"),
                &refund_check(20),
            )
            .json();
            r["verdict"]
                .as_str()
                .unwrap_or_else(|| panic!("{r}"))
                .to_string()
        })
        .collect();
    assert_eq!(
        verdicts,
        ["allow", "allow", "allow", "reject", "reject"],
        "{verdicts:?}"
    );
    let refused = post_as(
        replicas[1].addr,
        "/v1/check",
        Some("demo-payments-key"),
        &refund_check(20),
    )
    .json();
    let reason = refused.to_string();
    assert!(
        reason.contains("would pass the limit 'refunds-per-day' for 86400 s (3)"),
        "{reason}"
    );
    // The other limit, the day's total (20,000 for this principal), is counted too: the three
    // refunds that passed made 60 of it, and one of 19,941 would pass it. (A refused call is
    // taken back from the limits it had already counted against.)
    let mut redis_cli = Command::new("redis-cli");
    redis_cli.args([
        "-p",
        &redis.port.to_string(),
        "--scan",
        "--pattern",
        "railyard:plugin:tool-limits:*",
    ]);
    let keys = String::from_utf8(redis_cli.output().unwrap().stdout).unwrap();
    assert_eq!(keys.lines().count(), 2, "{keys}");
    for key in keys.lines() {
        let value = Command::new("redis-cli")
            .args(["-p", &redis.port.to_string(), "GET", key])
            .output()
            .unwrap()
            .stdout;
        let value = String::from_utf8(value).unwrap();
        let expected = if key.ends_with("refunds-per-day:billing-service") {
            "3"
        } else {
            "6000"
        };
        assert_eq!(value.trim(), expected, "{key}");
    }
}

#[test]
fn a_plugin_not_granted_state_cannot_count() {
    // Without `state = true` the same plugin's state calls are denied: a fault, which its
    // entry's on_error (closed) turns into a block, never an unlimited allow.
    let cfg = bundled_with(&[("timeout_ms = 250\nstate = true\n", "timeout_ms = 250\n")]);
    let d = Daemon::start_with(&cfg.path, &[]);
    let r = post_as(
        d.addr,
        "/v1/check",
        Some("demo-payments-key"),
        &refund_check(20),
    )
    .json();
    assert_eq!(r["verdict"], "block", "{r}");
    assert!(r.to_string().contains("not granted state"), "{r}");
    // With the memory store (the default), the grant counts in this process.
    let cfg = bundled_with(&[(
        "calls = { \"billing-service\" = 200",
        "calls = { \"billing-service\" = 1",
    )]);
    let d = Daemon::start_with(&cfg.path, &[]);
    let check = |d: &Daemon| {
        post_as(
            d.addr,
            "/v1/check",
            Some("demo-payments-key"),
            &refund_check(20),
        )
        .json()["verdict"]
            .clone()
    };
    assert_eq!(check(&d), "allow");
    assert_eq!(check(&d), "reject");
    // A memo cannot stand in for a plugin with state.
    let error = policy_error(&std::fs::read_to_string(&cfg.path).unwrap().replace(
        "timeout_ms = 250\nstate = true\n",
        "timeout_ms = 250\nstate = true\nmemo = true\n",
    ));
    assert!(error.contains("cannot have `memo = true`"), "{error}");
}

/// Reversible redaction across replicas (#67): replicas that share the provenance keys (and so
/// the vault's key) and the store write a value the same way and keep an agent session's values
/// together. A result's address, hidden behind a placeholder by one replica, comes back in the
/// calls that name it whichever replica relays them.
#[test]
fn a_value_one_replica_hid_comes_back_through_every_replica() {
    let set = McpReplicas::start_with(|cfg| {
        let dir = cfg.path.parent().unwrap();
        std::fs::write(
            dir.join("provenance-keys.toml"),
            format!("[[keys]]\nid = \"k1\"\nsecret = \"{}\"\n", "ab".repeat(32)),
        )
        .unwrap();
        crate::mcp::allow_send_email(cfg);
        let text = std::fs::read_to_string(&cfg.path).unwrap()
            + "\n[provenance]\nkeys_file = \"provenance-keys.toml\"\n";
        std::fs::write(&cfg.path, text).unwrap();
    });
    let url = format!("http://{}/mcp/json", set.lb.addr);
    let looked = client_in(
        Some("agent-v"),
        &url,
        "demo-key",
        "legacy",
        &[r#"lookup_customer:{"customer_id": "c-17"}"#],
    );
    let text = looked["steps"][0]["text"].as_str().unwrap().to_string();
    assert!(!text.contains("ada.lovelace@"), "{looked}");
    let at = text.find("[EMAIL_").unwrap_or_else(|| panic!("{looked}"));
    let p = &text[at..at + "[EMAIL_XXXXXXXX]".len()];
    let send = format!(r#"send_email:{{"to": "{p}", "body": "Your order shipped."}}"#);
    let seen = client_in(
        Some("agent-v"),
        &url,
        "demo-key",
        "legacy",
        &[&send, &send, &send, &send],
    );
    let steps = seen["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4, "{seen}");
    for step in steps {
        assert_eq!(step["text"], "Sent to the customer.", "{seen}");
    }
    let records = calls(&set.replicas);
    let relayed: std::collections::BTreeSet<usize> = records
        .iter()
        .filter(|(_, tool, _)| tool == "send_email")
        .map(|(i, _, _)| *i)
        .collect();
    assert!(
        relayed.len() >= 2,
        "through more than one replica: {records:?}"
    );
}
