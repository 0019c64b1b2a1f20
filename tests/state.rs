//! Many replicas, one state (#48): rate limits held in `[state]`'s store, in this process
//! (`memory`) or in a real Redis server shared by several daemons; 429 with `Retry-After` in each
//! door's own shape (RESOURCE_EXHAUSTED on gRPC); a store that stops answering decided by
//! `on_unavailable`, within `timeout_ms`.

use crate::http::*;
use crate::records::record;
use crate::support::*;
use serde_json::{json, Value};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A real Redis server on a loopback port, nothing persisted; killed when dropped.
pub(crate) struct RedisServer {
    child: Child,
    pub port: u16,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        RedisServer::on(port)
    }

    /// On `port` (a restart keeps the daemons' URL).
    pub fn on(port: u16) -> RedisServer {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("redis-server did not start ({e}): install it (scripts/setup.sh does)")
            });
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        eventually("redis-server to listen", || {
            TcpStream::connect(addr).is_ok()
        });
        RedisServer { child, port }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A config: tenants `small` (key `small-key`, `rpm` requests a minute) and `other` (key
/// `other-key`, no limit), `state` as the `[state]` table's lines, one allow-all plugin.
fn config(rpm: u32, state: &str) -> TempConfig {
    write_config(&format!(
        "[auth]\n{}{}\n[tenants.small]\nrequests_per_minute = {rpm}\n\n[tenants.other]\n\n[state]\n{state}\n\n{}",
        key_entry("auth.keys", "small-key", "s", Some("small")),
        key_entry("auth.keys", "other-key", "o", Some("other")),
        scripted("noop", "[\"input\"]", "", "{ mode = \"allow\" }")
    ))
}

/// A chat request that bounds its answer (one that does not reserves 1,024 tokens for it).
fn chat() -> Value {
    json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hello"}]})
}

fn reply_backend() -> MockBackend {
    MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "hi"}), "stop"),
    ))
}

fn send(daemon: &Daemon, key: &str, id: &str) -> Reply {
    crate::records::send(daemon, id, Some(key), chat().to_string().as_bytes())
}

/// POST `body` to Anthropic's door presenting `key` as Anthropic's clients do.
fn send_anthropic(daemon: &Daemon, key: &str, id: &str, body: &Value) -> Reply {
    request(
        daemon.addr,
        "POST",
        "/v1/messages",
        &[
            ("Content-Type", "application/json"),
            ("x-api-key", key),
            ("anthropic-version", "2023-06-01"),
            ("Authorization", ""),
            ("x-request-id", id),
        ],
        body.to_string().as_bytes(),
    )
}

#[test]
fn a_tenant_over_its_rate_gets_429_in_each_doors_shape() {
    let backend = reply_backend();
    let cfg = config(3, "backend = \"memory\"");
    let daemon = Daemon::start_logged(
        &cfg.path,
        &["--backend", &backend.url(), "--grpc-listen", "127.0.0.1:0"],
    );
    for i in 0..3 {
        assert_eq!(send(&daemon, "small-key", &format!("ok-{i}")).status, 200);
    }
    let over = send(&daemon, "small-key", "over");
    assert_eq!(over.status, 429, "{}", over.body);
    let after: u64 = over.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=20).contains(&after), "retry-after {after}");
    assert_eq!(over.json()["error"]["type"], "rate_limit_error");
    assert_eq!(over.json()["error"]["code"], "tenant_rate_limit");
    let r = record(&daemon, "over");
    assert_eq!(
        (r["status"].as_u64(), &r["outcome"]),
        (Some(429), &json!("throttled"))
    );
    assert_eq!(
        backend.seen().len(),
        3,
        "a refused request never reaches the backend"
    );

    // Anthropic's door answers in Anthropic's error shape; gRPC with RESOURCE_EXHAUSTED.
    let messages = send_anthropic(
        &daemon,
        "small-key",
        "over-messages",
        &json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(messages.status, 429, "{}", messages.body);
    assert_eq!(messages.json()["type"], "error", "{}", messages.body);
    assert_eq!(messages.json()["error"]["type"], "rate_limit_error");
    assert!(messages.header("retry-after").is_some());
    assert_eq!(
        crate::tenants::grpc_check(daemon.grpc.unwrap(), Some("small-key")),
        tonic::Code::ResourceExhausted
    );

    // Another tenant is not held to it.
    for i in 0..5 {
        assert_eq!(
            send(&daemon, "other-key", &format!("other-{i}")).status,
            200
        );
    }
}

#[test]
fn three_replicas_on_one_redis_hold_one_limit() {
    let redis = RedisServer::start();
    let backend = reply_backend();
    let cfg = config(
        100,
        &format!(
            "backend = \"redis\"\nurl = \"{}\"\ntimeout_ms = 200",
            redis.url()
        ),
    );
    let replicas: Vec<Daemon> = (0..3)
        .map(|_| Daemon::start_logged(&cfg.path, &["--backend", &backend.url()]))
        .collect();
    let lb = crate::replicas::Nginx::start(&replicas.iter().map(|d| d.addr).collect::<Vec<_>>());
    // 300 requests as fast as 12 clients can send them, through nginx round-robin.
    let started = Instant::now();
    let threads: Vec<_> = (0..12)
        .map(|_| {
            let addr = lb.addr;
            std::thread::spawn(move || {
                (0..25)
                    .map(|_| {
                        let r = post_as(addr, "/v1/chat/completions", Some("small-key"), &chat());
                        (r.status, r.header("retry-after").map(str::to_string))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let answers: Vec<(u16, Option<String>)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let took = started.elapsed();
    let served = answers.iter().filter(|(s, _)| *s == 200).count();
    // GCRA lets 100 through at once and then one every 0.6 s.
    let most = 100 + (took.as_millis() / 600) as usize;
    assert!(
        (100..=most.max(103)).contains(&served),
        "{served} served in {took:?}"
    );
    for (status, after) in &answers {
        assert!(*status == 200 || *status == 429, "status {status}");
        if *status == 429 {
            assert!(after.is_some(), "a 429 without Retry-After");
        }
    }
    assert_eq!(backend.seen().len(), served);
    // Every replica answered some of them.
    for d in &replicas {
        let records = d
            .logs()
            .into_iter()
            .filter(|l| l["target"] == "railyard::decision")
            .count();
        assert!(records >= 50, "a replica answered {records}");
    }
}

#[test]
fn a_store_that_stops_answering_is_decided_by_on_unavailable() {
    let mut redis = RedisServer::start();
    let backend = reply_backend();
    let state = |on: &str| {
        format!(
            "backend = \"redis\"\nurl = \"{}\"\ntimeout_ms = 100\non_unavailable = \"{on}\"",
            redis.url()
        )
    };
    let closed_cfg = config(1000, &state("closed"));
    let open_cfg = config(1000, &state("open"));
    let closed = Daemon::start_logged(&closed_cfg.path, &["--backend", &backend.url()]);
    let open = Daemon::start(&open_cfg.path, &backend.url());
    assert_eq!(send(&closed, "small-key", "up").status, 200);

    redis.stop();
    for i in 0..3 {
        let started = Instant::now();
        let refused = send(&closed, "small-key", &format!("down-{i}"));
        assert_eq!(refused.status, 503, "{}", refused.body);
        assert_eq!(refused.json()["error"]["code"], "state_unavailable");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "hung {:?} on a dead store",
            started.elapsed()
        );
        assert_eq!(send(&open, "small-key", &format!("open-{i}")).status, 200);
    }
    assert_eq!(record(&closed, "down-0")["outcome"], "throttled");
    // A tenant without a rate limit never touches the store.
    assert_eq!(send(&closed, "other-key", "no-limit").status, 200);

    // The store back on the same port: requests are counted again, the daemon never restarted.
    let _back = RedisServer::on(redis.port);
    eventually("the daemon to reach the store again", || {
        send(&closed, "small-key", "back").status == 200
    });
}

#[test]
fn a_store_that_answers_slowly_costs_no_more_than_timeout_ms() {
    let redis = RedisServer::start();
    let backend = reply_backend();
    let cfg = config(
        1000,
        &format!(
            "backend = \"redis\"\nurl = \"{}\"\ntimeout_ms = 100",
            redis.url()
        ),
    );
    let d = Daemon::start_logged(&cfg.path, &["--backend", &backend.url()]);
    assert_eq!(send(&d, "small-key", "before").status, 200);
    // The server stops answering clients for 3 s (it keeps their connections).
    let paused = Command::new("redis-cli")
        .args([
            "-p",
            &redis.port.to_string(),
            "CLIENT",
            "PAUSE",
            "3000",
            "ALL",
        ])
        .output()
        .unwrap();
    assert!(paused.status.success());
    let started = Instant::now();
    for i in 0..3 {
        let r = send(&d, "small-key", &format!("slow-{i}"));
        assert_eq!(r.status, 503, "{}", r.body);
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(1500),
        "3 requests took {took:?} on a store that does not answer"
    );
    // Requests that need no state are not slowed at all by it.
    assert_eq!(send(&d, "other-key", "no-limit").status, 200);
    // Once it answers again, so do limited requests.
    eventually("the store to answer again", || {
        send(&d, "small-key", "after").status == 200
    });
}

#[test]
fn a_state_table_that_cannot_work_is_refused_with_its_line() {
    for (state, line, want) in [
        (
            "backend = \"redis\"",
            2,
            "state.url: backend = \"redis\" needs a url",
        ),
        (
            "backend = \"redis\"\nurl = \"http://127.0.0.1:6379\"",
            3,
            "is not a Redis URL",
        ),
        (
            "backend = \"etcd\"",
            2,
            "unknown backend 'etcd' (expected memory or redis)",
        ),
        (
            "url = \"redis://127.0.0.1:6379\"",
            2,
            "the memory backend has no url",
        ),
        ("on_unavailable = \"maybe\"", 2, "expected closed or open"),
        (
            "timeout_ms = 0",
            2,
            "state.timeout_ms: must be between 1 and 60000",
        ),
    ] {
        let error = policy_error(&with_auth(&format!("[state]\n{state}\n")));
        assert!(error.contains(want), "{state}: {error}");
        assert!(
            error.contains(&format!(":{line}: state.")),
            "the line: {error}"
        );
    }
    let error = policy_error(&with_auth("[tenants.t]\nrequests_per_minute = 0\n"));
    assert!(
        error.contains("tenants.t.requests_per_minute: must be between 1"),
        "{error}"
    );
}

#[test]
fn a_key_has_a_limit_of_its_own_inside_its_tenant() {
    let backend = reply_backend();
    // Two keys of tenant `other` (no tenant limit); one of them limited to 2 a minute.
    let cfg = write_config(&format!(
        "[auth]\n{}{}\n[tenants.other]\n\n{}",
        key_entry("auth.keys", "capped-key", "capped", Some("other")).replace(
            "tenant = \"other\"\n",
            "tenant = \"other\"\nrequests_per_minute = 2\n"
        ),
        key_entry("auth.keys", "free-key", "free", Some("other")),
        scripted("noop", "[\"input\"]", "", "{ mode = \"allow\" }")
    ));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    assert_eq!(send(&daemon, "capped-key", "c0").status, 200);
    assert_eq!(send(&daemon, "capped-key", "c1").status, 200);
    let over = send(&daemon, "capped-key", "c2");
    assert_eq!(over.status, 429, "{}", over.body);
    assert!(
        over.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the key of 'capped' is over its limit of 2 requests per minute"),
        "{}",
        over.body
    );
    for i in 0..4 {
        assert_eq!(send(&daemon, "free-key", &format!("f{i}")).status, 200);
    }
}

/// A config whose tenant `small` (key `small-key`) may use `tpm` tokens a minute.
fn token_config(tpm: u32, state: &str) -> TempConfig {
    write_config(&format!(
        "[auth]\n{}\n[tenants.small]\ntokens_per_minute = {tpm}\n\n[state]\n{state}\n\n{}",
        key_entry("auth.keys", "small-key", "s", Some("small")),
        scripted("noop", "[\"input\"]", "", "{ mode = \"allow\" }")
    ))
}

#[test]
fn a_token_budget_is_reserved_then_settled_from_usage_on_memory_and_redis() {
    let redis = RedisServer::start();
    for state in [
        "backend = \"memory\"".to_string(),
        format!("backend = \"redis\"\nurl = \"{}\"", redis.url()),
    ] {
        // Each answer reports 400 tokens; the budget is 1,000 a minute.
        let mut answer = completion(json!({"role": "assistant", "content": "hi"}), "stop");
        answer["usage"] =
            json!({"prompt_tokens": 100, "completion_tokens": 300, "total_tokens": 400});
        let backend = MockBackend::start(Script::Json(200, answer));
        let cfg = token_config(1000, &state);
        let daemon = Daemon::start(&cfg.path, &backend.url());
        let mut statuses = Vec::new();
        for i in 0..5 {
            statuses.push(send(&daemon, "small-key", &format!("t{i}")).status);
            // Settling is off the request's path: give it a moment.
            std::thread::sleep(Duration::from_millis(100));
        }
        // Reserved ~30 each, settled to 400: 400, 800, 1,200 used; the fourth finds it spent.
        assert_eq!(statuses, [200, 200, 200, 429, 429], "{state}");
        let over = send(&daemon, "small-key", "over");
        assert!(
            over.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("1000 tokens per minute"),
            "{}",
            over.body
        );
        assert_eq!(backend.seen().len(), 3);

        // A request that asks for more than the budget has left is refused before the backend.
        // (A fresh bucket: another key prefix on the same store.)
        let fresh = token_config(1000, &format!("{state}\nkey_prefix = \"fresh:\""));
        drop(daemon);
        let daemon = Daemon::start(&fresh.path, &backend.url());
        let big = post_as(
            daemon.addr,
            "/v1/chat/completions",
            Some("small-key"),
            &json!({"model": "m", "max_tokens": 5000, "messages": [{"role": "user", "content": "hi"}]}),
        );
        assert_eq!(big.status, 200, "{state}: from rest it fits: {}", big.body);
    }
}

#[test]
fn a_key_has_a_token_budget_of_its_own_across_replicas() {
    // Tenant `small` has no token budget; the key of `s` has 1,000 a minute, held by three
    // replicas on one Redis behind nginx round-robin. Each answer reports 400 (`usage`).
    let redis = RedisServer::start();
    let mut answer = completion(json!({"role": "assistant", "content": "hi"}), "stop");
    answer["usage"] = json!({"prompt_tokens": 100, "completion_tokens": 300, "total_tokens": 400});
    let backend = MockBackend::start(Script::Json(200, answer));
    let keyed = key_entry("auth.keys", "small-key", "s", Some("small")).replace(
        "tenant = \"small\"\n",
        "tenant = \"small\"\ntokens_per_minute = 1000\n",
    );
    assert!(keyed.contains("tokens_per_minute"));
    let cfg = write_config(&format!(
        "[auth]\n{keyed}{}\n[tenants.small]\n\n[state]\nbackend = \"redis\"\nurl = \"{}\"\n\n{}",
        key_entry("auth.keys", "other-key", "o", Some("small")),
        redis.url(),
        scripted("noop", "[\"input\"]", "", "{ mode = \"allow\" }")
    ));
    let replicas: Vec<Daemon> = (0..3)
        .map(|_| Daemon::start(&cfg.path, &backend.url()))
        .collect();
    let lb = crate::replicas::Nginx::start(&replicas.iter().map(|d| d.addr).collect::<Vec<_>>());
    let ask = |key: &str| post_as(lb.addr, "/v1/chat/completions", Some(key), &chat());
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(ask("small-key").status);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    let over = ask("small-key").json();
    assert!(
        over["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the key of 's'"),
        "{over}"
    );
    // Another key of the same tenant is not held to it.
    for _ in 0..3 {
        assert_eq!(ask("other-key").status, 200);
    }
    assert_eq!(backend.seen().len(), 6);
}

#[test]
fn a_streamed_answer_settles_with_the_usage_its_events_report() {
    // Anthropic's stream: input tokens in message_start, the running output in message_delta.
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": null, "usage": {"input_tokens": 200, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hello"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 400}}),
        json!({"type": "message_stop"}),
    ]
    .map(|e| e.to_string())
    .to_vec();
    let backend = MockBackend::start(Script::Sse(events, Duration::from_millis(2)));
    let cfg = token_config(1000, "backend = \"memory\"");
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let stream = |i: usize| {
        send_anthropic(
            &daemon,
            "small-key",
            &format!("s{i}"),
            &json!({"model": "m", "max_tokens": 10, "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
        )
    };
    // 600 tokens each: the first two fit (600, then 1,200 used), the third is refused.
    assert_eq!(stream(0).status, 200);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(stream(1).status, 200);
    std::thread::sleep(Duration::from_millis(100));
    let third = stream(2);
    assert_eq!(third.status, 429, "{}", third.body);
    assert_eq!(third.json()["error"]["type"], "rate_limit_error");
}

#[test]
fn an_absurd_usage_spends_the_budget_and_never_refunds_it() {
    // A backend reporting more tokens than a count can hold: the daemon keeps serving, and the
    // tenant's budget is spent (not wrapped into a refund).
    let mut answer = completion(json!({"role": "assistant", "content": "hi"}), "stop");
    answer["usage"] = json!({"prompt_tokens": u64::MAX, "completion_tokens": u64::MAX});
    let backend = MockBackend::start(Script::Json(200, answer));
    let cfg = token_config(1000, "backend = \"memory\"");
    let daemon = Daemon::start(&cfg.path, &backend.url());
    assert_eq!(send(&daemon, "small-key", "absurd").status, 200);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(send(&daemon, "small-key", "after").status, 429);
    assert_eq!(get(daemon.addr, "/healthz").status, 200);
}

/// A set member replaced in one step (an MCP read settled from pending to its text), in memory
/// and on a real Redis: the old member goes, the new one comes, within the set's cap with the old
/// one not counted, and nothing changes when the set is full of others.
#[test]
fn a_member_is_replaced_in_one_step_on_memory_and_redis() {
    let redis = RedisServer::start();
    let minute = std::time::Duration::from_secs(60);
    for url in [None, Some(redis.url())] {
        let store = railyard::state::Store::new(&railyard::config::StateConfig {
            redis_url: url,
            ..Default::default()
        });
        railyard::util::block_on(async {
            for m in ["a", "pending"] {
                assert!(store.add_member("t", "s", m, 2, minute).await.unwrap());
            }
            // Full with the old one: it makes room for its replacement.
            assert!(store
                .replace_member("t", "s", "pending", "text", 2, minute)
                .await
                .unwrap());
            assert_eq!(
                store.members("t", "s", minute).await.unwrap(),
                ["a", "text"]
            );
            // Full of others (the old one is not there): nothing changes.
            assert!(!store
                .replace_member("t", "s", "gone", "more", 2, minute)
                .await
                .unwrap());
            assert_eq!(
                store.members("t", "s", minute).await.unwrap(),
                ["a", "text"]
            );
            // Already there: the old one still goes.
            assert!(store
                .replace_member("t", "s", "a", "text", 2, minute)
                .await
                .unwrap());
            assert_eq!(store.members("t", "s", minute).await.unwrap(), ["text"]);
        });
    }
}

#[test]
fn a_restarted_store_is_reached_again_however_long_it_was_down() {
    // Three ways a Redis restart goes: down when the daemon starts; restarted with no request
    // while it was down; down for a while with requests refused meanwhile. In each the daemon
    // serves limited requests again within moments of the store's return, without a restart,
    // and says so in its log: once when the store went, once when it came back.
    let backend = reply_backend();
    for case in ["down at start", "quiet restart", "long outage"] {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("redis://127.0.0.1:{port}/0");
        let cfg = config(
            1000,
            &format!("backend = \"redis\"\nurl = \"{url}\"\ntimeout_ms = 200"),
        );
        let mut redis = (case != "down at start").then(|| RedisServer::on(port));
        let daemon = Daemon::start_logged(&cfg.path, &["--backend", &backend.url()]);
        match case {
            "down at start" => {
                assert_eq!(send(&daemon, "small-key", "early").status, 503);
            }
            "quiet restart" => {
                assert_eq!(send(&daemon, "small-key", "before").status, 200);
                redis.as_mut().unwrap().stop();
                std::thread::sleep(Duration::from_secs(2));
            }
            _ => {
                assert_eq!(send(&daemon, "small-key", "before").status, 200);
                redis.as_mut().unwrap().stop();
                for i in 0..20 {
                    assert_eq!(send(&daemon, "small-key", &format!("down-{i}")).status, 503);
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        drop(redis);
        let _back = RedisServer::on(port);
        let back = Instant::now();
        let mut statuses = Vec::new();
        loop {
            let status = send(&daemon, "small-key", "after").status;
            statuses.push(status);
            if status == 200 {
                break;
            }
            assert!(
                back.elapsed() < Duration::from_secs(5),
                "{case}: still refused 5 s after the store came back: {statuses:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let said = |what: &str| {
            daemon
                .messages()
                .iter()
                .filter(|m| m.contains(what))
                .count()
        };
        eventually("the recovery to be logged", || {
            said("state store is reachable again") == 1
        });
        assert_eq!(said("state store is unreachable"), 1, "{case}: said once");
    }
}

/// One tenant cannot fill a shared Redis (#66): each holds at most its share (`OWNER_BYTES`,
/// as in memory), counted by the scripts that write its values and sets. Past it only that
/// tenant's writes fail; another's go on; what ends leaves the count.
#[test]
fn a_tenant_that_fills_its_share_of_redis_leaves_room_for_the_others() {
    let redis = RedisServer::start();
    let store = railyard::state::Store::new(&railyard::config::StateConfig {
        redis_url: Some(redis.url()),
        timeout: Duration::from_secs(2),
        ..Default::default()
    });
    let mib = bytes::Bytes::from(vec![b'x'; 1 << 20]);
    let short = Duration::from_secs(3);
    let minute = Duration::from_secs(60);
    railyard::util::block_on(async {
        let mut taken = 0;
        for i in 0..100 {
            match store
                .put("flood", &format!("big:{i}"), mib.clone(), short)
                .await
            {
                Ok(()) => taken += 1,
                Err(e) => {
                    assert!(e.to_string().contains("its share"), "{e}");
                    break;
                }
            }
        }
        let share = railyard::state::OWNER_BYTES >> 20;
        assert!((share - 1..=share).contains(&taken), "{taken} MiB taken");
        // Sets count too: what is left (under a MiB) takes few 16 KiB reads before they fail.
        let text = "t".repeat(16 << 10);
        let mut read = 0;
        while store
            .add_member("flood", "flow:x", &format!("{read}{text}"), 256, minute)
            .await
            .is_ok()
        {
            read += 1;
            assert!(read <= 64, "{read} reads of 16 KiB past the share");
        }
        // And a new counter (a plugin's `state`), though small.
        let mut counters = 0;
        while store
            .add_within("flood", &format!("count:{counters}"), 1, 10, minute)
            .await
            .is_ok()
        {
            counters += 1;
            assert!(counters <= 20_000, "{counters} counters past the share");
        }
        // Another tenant is not held to it.
        store
            .put("quiet", "small", mib.clone(), minute)
            .await
            .unwrap();
        assert_eq!(
            store
                .add_within("quiet", "count", 1, 10, minute)
                .await
                .unwrap(),
            Some(1)
        );
        assert!(store
            .add_member("quiet", "flow:y", &text, 256, minute)
            .await
            .unwrap());
        // Once the flood's values have ended, it may write again.
        tokio::time::sleep(short + Duration::from_millis(500)).await;
        store
            .put("flood", "again", mib.clone(), minute)
            .await
            .unwrap();
    });
}

/// What reads keep alive stays counted (#66): a value and a set whose lives reads renewed past
/// the time they were written for still count in their tenant's share once that time is past,
/// and a lease counts too, on memory and on Redis alike.
#[test]
fn what_reads_keep_alive_and_leases_count_in_a_tenants_share() {
    let redis = RedisServer::start();
    let mib = bytes::Bytes::from(vec![b'x'; 1 << 20]);
    let (second, minute) = (Duration::from_secs(1), Duration::from_secs(60));
    for url in [None, Some(redis.url())] {
        let store = railyard::state::Store::new(&railyard::config::StateConfig {
            redis_url: url.clone(),
            timeout: Duration::from_secs(2),
            ..Default::default()
        });
        railyard::util::block_on(async {
            store
                .put("reader", "kept", mib.clone(), second)
                .await
                .unwrap();
            let member = "m".repeat(512 << 10);
            assert!(store
                .add_member("reader", "set", &member, 4, second)
                .await
                .unwrap());
            tokio::time::sleep(Duration::from_millis(400)).await;
            let kept = store.get_renewed("reader", "kept", minute).await.unwrap();
            assert_eq!(kept.map(|b| b.len()), Some(1 << 20));
            assert_eq!(
                store.members("reader", "set", minute).await.unwrap().len(),
                1
            );
            // Past the time they were written for: both are still there, and still counted.
            tokio::time::sleep(Duration::from_millis(1200)).await;
            assert!(store.get("kept").await.unwrap().is_some(), "{url:?}");
            let mut taken = 0;
            while store
                .put("reader", &format!("big:{taken}"), mib.clone(), minute)
                .await
                .is_ok()
            {
                taken += 1;
                assert!(taken <= 64, "{url:?}: {taken} MiB");
            }
            let share = railyard::state::OWNER_BYTES >> 20;
            assert!(
                taken <= share - 2,
                "{url:?}: {taken} MiB taken beside 1.5 MiB kept alive by reads"
            );
            // Fill what is left with counters; a lease then counts as one more entry.
            let mut counters = 0;
            while store
                .add_within("reader", &format!("c:{counters}"), 1, 10, minute)
                .await
                .is_ok()
            {
                counters += 1;
                assert!(counters <= 50_000, "{url:?}: {counters} counters");
            }
            let lease = store.lease("reader", "inflight", "req-1", 8, minute).await;
            assert!(lease.is_err(), "{url:?}: a lease past the share: {lease:?}");
            // Another tenant's lease is not held to it.
            assert!(store
                .lease("other", "inflight-o", "req-1", 8, minute)
                .await
                .unwrap());
        });
    }
}
