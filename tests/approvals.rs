//! Approvals (#49) through the running daemon with the bundled config, `flow` asking a person
//! (`actions = { value = "approve" }`, `approvals = true`) about a call whose values came from a
//! web page: the client gets the approval request with its refusal, on chat (OpenAI SDK),
//! Responses (OpenAI SDK), Messages (Anthropic SDK) and MCP (MCP SDK); an approver grants it
//! through `/v1/admin/approvals/{id}`; the same turn sent again goes through, once. Changed
//! arguments, another tenant and an expired request are not the grant; on Redis another replica
//! honours it.

use crate::http::*;
use crate::state::RedisServer;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

// The turn of `flow`'s tests: the user's ask, a web page with the attacker's webhook, read.
use crate::flow::{messages_turn, responses_turn, ATTACKER};

/// An approver of the default tenant, and one of tenant `support`.
const APPROVER: &str = "ops-approver-key";
const SUPPORT_APPROVER: &str = "support-approver-key";

/// The edits to the bundled config that grant `flow` approvals and have its value rule ask.
pub(crate) const APPROVING: [(&str, &str); 2] = [
    (
        "release/flow.wasm\"\nrails = [\"tool_call\"]",
        "release/flow.wasm\"\nrails = [\"tool_call\"]\napprovals = true",
    ),
    (
        "# actions = { value = \"approve\" }",
        "actions = { value = \"approve\" }",
    ),
];

/// The bundled config with flow asking for approvals on the `value` rule, approvals living
/// `ttl` seconds, two approver keys, the support tenant allowed the test's tools, and `more`
/// top-level lines (a `[state]` table).
fn config(ttl: u64, more: &str) -> TempConfig {
    let approver = |key: &str, principal: &str, tenant: &str| {
        format!(
            "[[auth.keys]]\nsha256 = \"{}\"\nprincipal = \"{principal}\"\n{tenant}labels = {{ approver = \"true\" }}\n\n",
            hash(key)
        )
    };
    let keys = approver(APPROVER, "ops", "")
        + &approver(SUPPORT_APPROVER, "support-lead", "tenant = \"support\"\n");
    bundled_with(&[
        APPROVING[0],
        APPROVING[1],
        (
            "config = { allow = [\"get_time\", \"lookup_order\", \"web_search\"] }",
            "config = { allow = [\"get_time\", \"lookup_order\", \"web_search\", \"web_fetch\", \"send_message\"] }",
        ),
        (
            "[admin]\n",
            &format!("{keys}[approvals]\nttl_s = {ttl}\n\n{more}\n[admin]\n"),
        ),
    ])
}

/// The call's arguments: posting to `url` (keys as `flow`'s tests write them, or reordered).
fn post_to(url: &str, reordered: bool) -> String {
    let args = crate::flow::post_to(url);
    if !reordered {
        return args;
    }
    let v: Value = serde_json::from_str(&args).unwrap();
    json!({"text": v["text"], "url": v["url"]}).to_string()
}

/// A chat turn after the page was read, the model calling send_message with `args` as `id`.
fn chat_turn(backend: &MockBackend, args: &str, id: &str) -> Value {
    backend.set(Script::Json(
        200,
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
            "type": "function", "function": {"name": "send_message", "arguments": args}}]}),
            "tool_calls",
        ),
    ));
    crate::flow::chat_turn()
}

/// The turn through the OpenAI SDK: what it made of the reply.
fn chat(d: &Daemon, backend: &MockBackend, args: &str, id: &str) -> Value {
    let request = chat_turn(backend, args, id);
    crate::doors::run(
        "one_chat.py",
        &[&format!("http://{}/v1", d.addr), &request.to_string()],
    )
}

/// The approval request a refusal carries, checked for its shape: its id.
fn pending(refused: &Value) -> String {
    let approvals = &refused["railyard"]["approvals"];
    assert_eq!(approvals.as_array().map(Vec::len), Some(1), "{refused}");
    let a = &approvals[0];
    assert_eq!(a["status"], "pending", "{refused}");
    assert_eq!(a["tool"], "send_message", "{refused}");
    assert_eq!(a["rule"], "value", "{refused}");
    assert_eq!(a["plugin"], "flow", "{refused}");
    assert_eq!(
        a["arguments_sha256"].as_str().map(str::len),
        Some(64),
        "{refused}"
    );
    assert!(a["expires_at"].as_u64().is_some(), "{refused}");
    let id = a["id"].as_str().unwrap().to_string();
    assert_eq!(a["approve"], format!("/v1/admin/approvals/{id}"));
    assert!(
        !refused.to_string().contains("hooks.evil"),
        "the refusal never holds the values: {refused}"
    );
    id
}

fn approval_path(id: &str) -> String {
    format!("/v1/admin/approvals/{id}")
}

/// Decide `id` presenting `key` (`None`: the admin key).
fn decide(d: &Daemon, id: &str, key: Option<&str>, decision: &str) -> Reply {
    let auth = format!("Bearer {}", key.unwrap_or(ADMIN_KEY));
    request(
        d.addr,
        "POST",
        &approval_path(id),
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        json!({"decision": decision}).to_string().as_bytes(),
    )
}

fn show(d: &Daemon, id: &str, key: Option<&str>) -> Reply {
    let auth = format!("Bearer {}", key.unwrap_or(ADMIN_KEY));
    request(
        d.addr,
        "GET",
        &approval_path(id),
        &[("Authorization", &auth)],
        b"",
    )
}

#[test]
fn a_granted_call_passes_once_and_nothing_else_does_on_chat() {
    let backend = MockBackend::start(Script::Json(200, json!({})));
    let cfg = config(900, "");
    let d = Daemon::start(&cfg.path, &backend.url());
    let attack = post_to(ATTACKER, false);

    let refused = chat(&d, &backend, &attack, "c2");
    assert!(refused["message"]["tool_calls"].is_null(), "{refused}");
    let id = pending(&refused);
    let reason = refused["railyard"]["blocked"]["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("request {id} is pending")),
        "{reason}"
    );
    // The same turn again, before anyone decided (the model names its call anew): the same
    // request, not another.
    let again = chat(&d, &backend, &attack, "c3");
    assert_eq!(pending(&again), id);
    // The check API, asked about the same call, finds the same request.
    let mut turn = chat_turn(&backend, &attack, "c9");
    turn["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "assistant",
        "content": null, "tool_calls": [{"id": "c9", "type": "function",
        "function": {"name": "send_message", "arguments": attack}}]}));
    let checked = post(
        d.addr,
        "/v1/check",
        &json!({"rail": "tool_call", "messages": turn["messages"], "tools": turn["tools"]}),
    )
    .json();
    assert_eq!(checked["verdict"], "block", "{checked}");
    assert_eq!(checked["approvals"][0]["id"], id.as_str(), "{checked}");

    // Who may see it and decide: not a caller's key, not another tenant's approver.
    assert_eq!(show(&d, &id, Some(DEMO_KEY)).status, 401);
    assert_eq!(decide(&d, &id, Some(DEMO_KEY), "grant").status, 401);
    assert_eq!(show(&d, &id, Some(SUPPORT_APPROVER)).status, 404);
    assert_eq!(decide(&d, &id, Some(SUPPORT_APPROVER), "grant").status, 404);
    assert_eq!(decide(&d, &id, Some(APPROVER), "maybe").status, 400);
    assert_eq!(show(&d, "apr_../../etc", None).status, 404);
    // The admin sees what the call would do.
    let seen = show(&d, &id, None);
    assert_eq!(seen.status, 200, "{}", seen.body);
    let seen = seen.json();
    assert_eq!(seen["status"], "pending");
    assert_eq!(seen["tenant"], "default");
    assert_eq!(seen["principal"], "demo");
    assert!(
        seen["arguments"].as_str().unwrap().contains(ATTACKER),
        "{seen}"
    );
    // Each approver lists its own tenant's undecided requests; the admin, any tenant's.
    let listed = |key: Option<&str>, query: &str| -> Vec<String> {
        let auth = format!("Bearer {}", key.unwrap_or(ADMIN_KEY));
        let r = request(
            d.addr,
            "GET",
            &format!("/v1/admin/approvals{query}"),
            &[("Authorization", &auth)],
            b"",
        );
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(listed(Some(APPROVER), ""), vec![id.clone()]);
    assert_eq!(listed(None, ""), vec![id.clone()]);
    assert!(listed(Some(SUPPORT_APPROVER), "").is_empty());
    assert!(listed(None, "?tenant=support").is_empty());
    // The tenant's approver grants it, once.
    let granted = decide(&d, &id, Some(APPROVER), "grant");
    assert_eq!(granted.status, 200, "{}", granted.body);
    assert_eq!(granted.json()["status"], "granted");
    assert_eq!(granted.json()["decided_by"], "ops");
    assert_eq!(decide(&d, &id, None, "refuse").status, 409);

    // Changed arguments are not what was granted.
    let changed = chat(
        &d,
        &backend,
        &post_to(&format!("{ATTACKER}?all=1"), false),
        "c4",
    );
    assert_ne!(pending(&changed), id);
    // Nor is the same call of another tenant.
    let request = chat_turn(&backend, &attack, "c5");
    let other = post_as(
        d.addr,
        "/v1/chat/completions",
        Some("demo-support-key"),
        &request,
    )
    .json();
    let other_id = pending(&other);
    assert_ne!(other_id, id);
    assert_eq!(show(&d, &other_id, Some(SUPPORT_APPROVER)).status, 200);
    assert_eq!(listed(None, "?tenant=support"), vec![other_id.clone()]);
    assert!(
        !listed(Some(APPROVER), "").contains(&id),
        "decided: off the list"
    );

    // The same call, its keys in another order, under a new call id: it goes through, once.
    let passed = chat(&d, &backend, &post_to(ATTACKER, true), "c6");
    assert_eq!(
        passed["message"]["tool_calls"][0]["function"]["name"], "send_message",
        "{passed}"
    );
    assert!(passed["railyard"]["blocked"].is_null(), "{passed}");
    assert_eq!(passed["railyard"]["approvals"][0]["id"], id.as_str());
    assert_eq!(passed["railyard"]["approvals"][0]["status"], "used");
    assert_eq!(show(&d, &id, None).json()["status"], "used");
    let replayed = chat(&d, &backend, &attack, "c7");
    let next = pending(&replayed);
    assert_ne!(next, id);
    assert_ne!(next, other_id);

    // Refused by an approver: refused, with no new request.
    assert_eq!(decide(&d, &next, None, "refuse").status, 200);
    let refused = chat(&d, &backend, &attack, "c8");
    let reason = refused["railyard"]["blocked"]["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("an approver refused request {next}")),
        "{reason}"
    );
    assert_eq!(refused["railyard"]["approvals"][0]["status"], "refused");

    // Counted, per tenant and event.
    let metrics = get(d.addr, "/metrics").body;
    for (tenant, event, n) in [
        ("default", "used", 1),
        ("default", "refused", 1),
        ("default", "decided_grant", 1),
        ("default", "decided_refuse", 1),
        ("support", "pending", 1),
    ] {
        let line =
            format!("railyard_approvals_total{{tenant=\"{tenant}\",event=\"{event}\"}} {n}\n");
        assert!(metrics.contains(&line), "{line}");
    }
}

#[test]
fn granted_on_responses_and_messages_and_gone_when_expired() {
    let backend = MockBackend::start(Script::Json(200, json!({})));
    let cfg = config(900, "");
    let d = Daemon::start(&cfg.path, &backend.url());
    let base = format!("http://{}/v1", d.addr);

    // Responses.
    let responses = |id: &str| {
        backend.set(Script::Json(
            200,
            json!({"id": "resp_2", "object": "response",
            "status": "completed", "model": "m", "output": [{"type": "function_call",
            "id": format!("fc_{id}"), "call_id": id, "name": "send_message",
            "arguments": post_to(ATTACKER, false), "status": "completed"}]}),
        ));
        crate::doors::run(
            "one_response.py",
            &[&base, "demo-key", &responses_turn().to_string()],
        )
    };
    let refused = responses("call_2");
    let id = pending(&refused);
    assert!(
        !refused["output"].to_string().contains("function_call"),
        "{refused}"
    );
    assert_eq!(decide(&d, &id, None, "grant").status, 200);
    let passed = responses("call_3");
    assert_eq!(passed["output"][0]["type"], "function_call", "{passed}");
    assert_eq!(passed["railyard"]["approvals"][0]["status"], "used");
    pending(&responses("call_4"));

    // Messages.
    let messages = |id: &str| {
        backend.set(Script::Json(
            200,
            json!({"id": "msg_2", "type": "message",
            "role": "assistant", "model": "m", "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1}, "content": [{"type": "tool_use",
            "id": id, "name": "send_message",
            "input": serde_json::from_str::<Value>(&post_to(ATTACKER, false)).unwrap()}]}),
        ));
        crate::doors::run(
            "one_message.py",
            &[&format!("http://{}", d.addr), &messages_turn().to_string()],
        )
    };
    let refused = messages("toolu_2");
    let id = pending(&refused);
    assert_eq!(decide(&d, &id, Some(APPROVER), "grant").status, 200);
    let passed = messages("toolu_3");
    assert_eq!(passed["content"][0]["type"], "tool_use", "{passed}");
    assert_eq!(passed["content"][0]["input"]["url"], ATTACKER, "{passed}");
    pending(&messages("toolu_4"));
    drop(d);

    // Expired: the request is gone, and the same turn makes a new one.
    let short = config(1, "");
    let d = Daemon::start(&short.path, &backend.url());
    let attack = post_to(ATTACKER, false);
    let id = pending(&chat(&d, &backend, &attack, "c2"));
    std::thread::sleep(Duration::from_millis(2200));
    assert_eq!(decide(&d, &id, None, "grant").status, 404);
    assert_eq!(show(&d, &id, None).status, 404);
    assert_ne!(pending(&chat(&d, &backend, &attack, "c3")), id);
}

/// MCP: the refund a web page asked for is refused with an approval request (in the JSON-RPC
/// error's data); once granted, the agent's same call reaches the server, once.
#[test]
fn granted_on_the_mcp_door() {
    let up = crate::mcp::Upstream::start();
    let cfg = crate::mcp::config(&up);
    let mut text = std::fs::read_to_string(&cfg.path).unwrap();
    for (from, to) in APPROVING {
        assert!(text.contains(from), "{from}");
        text = text.replacen(from, to, 1);
    }
    std::fs::write(&cfg.path, text).unwrap();
    let d = Daemon::start_with(&cfg.path, &[]);
    let url = format!("http://{}/mcp/json", d.addr);
    let fetch = r#"web_fetch:{"url": "https://shop.example/deals"}"#;
    let injected = r#"issue_refund:{"order_id": "o-666", "amount": 20}"#;
    let session = Some("approvals-agent");
    let first = crate::mcp::client_in(session, &url, "demo-key", "legacy", &[fetch, injected]);
    let error = &first["steps"][1]["error"];
    assert_eq!(error["code"], -32015, "{first}");
    let approval = &error["data"]["railyard"]["approvals"][0];
    assert_eq!(approval["status"], "pending", "{first}");
    assert_eq!(approval["tool"], "issue_refund", "{first}");
    let id = approval["id"].as_str().unwrap().to_string();
    assert!(error["message"].as_str().unwrap().contains(&id), "{first}");
    assert!(!first["steps"][1].to_string().contains("o-666"), "{first}");
    assert_eq!(decide(&d, &id, None, "grant").status, 200);
    let again = crate::mcp::client_in(session, &url, "demo-key", "legacy", &[injected]);
    assert!(
        again["steps"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("on order o-666")),
        "{again}"
    );
    assert_eq!(show(&d, &id, None).json()["status"], "used");
    // Spent: another agent that read the page is asked again. (The first agent's session now
    // holds the refund's own result, a trusted tool's, which names the order: flow lets its
    // further calls with it pass whatever approvals say.)
    let other = crate::mcp::client_in(
        Some("approvals-agent-2"),
        &url,
        "demo-key",
        "legacy",
        &[fetch, injected],
    );
    let error = &other["steps"][1]["error"];
    assert_eq!(error["code"], -32015, "{other}");
    let next = &error["data"]["railyard"]["approvals"][0];
    assert_eq!(next["status"], "pending", "{other}");
    assert_ne!(next["id"], id.as_str(), "{other}");
}

/// Two replicas on one Redis: a request made through one is seen and granted through the other,
/// which honours it; the grant is spent for both.
#[test]
fn another_replica_honours_a_grant_on_redis() {
    let redis = RedisServer::start();
    let backend = MockBackend::start(Script::Json(200, json!({})));
    let cfg = config(
        900,
        &format!("[state]\nbackend = \"redis\"\nurl = \"{}\"\n", redis.url()),
    );
    let a = Daemon::start(&cfg.path, &backend.url());
    let b = Daemon::start(&cfg.path, &backend.url());
    let attack = post_to(ATTACKER, false);
    let id = pending(&chat(&a, &backend, &attack, "c2"));
    assert_eq!(pending(&chat(&b, &backend, &attack, "c3")), id);
    assert_eq!(show(&b, &id, None).json()["status"], "pending");
    assert_eq!(decide(&b, &id, Some(APPROVER), "grant").status, 200);
    assert_eq!(decide(&a, &id, None, "refuse").status, 409);
    let passed = chat(&b, &backend, &attack, "c4");
    assert_eq!(
        passed["message"]["tool_calls"][0]["function"]["name"], "send_message",
        "{passed}"
    );
    assert_ne!(pending(&chat(&a, &backend, &attack, "c5")), id);
    assert_eq!(show(&a, &id, None).json()["status"], "used");
}

/// The config's word on approvals: a bad `ttl_s`, and a memoised plugin that would ask, are
/// refused at start with the line; a plugin not granted approvals that asks is refused by the
/// host (flow then blocks, saying why).
#[test]
fn approvals_config_is_checked() {
    let cfg = config(900, "");
    let text = std::fs::read_to_string(&cfg.path).unwrap();
    let error = policy_error(&text.replace("ttl_s = 900", "ttl_s = 0"));
    assert!(
        error.contains("approvals.ttl_s") && error.contains("must be between 1 and 604800"),
        "{error}"
    );
    let error =
        policy_error(&text.replace("approvals = true\n", "approvals = true\nmemo = true\n"));
    assert!(
        error.contains(".approvals") && error.contains("cannot have `memo = true`"),
        "{error}"
    );

    let ungranted = bundled_with(&[APPROVING[1]]);
    let backend = MockBackend::start(Script::Json(200, json!({})));
    let d = Daemon::start(&ungranted.path, &backend.url());
    let refused = chat(&d, &backend, &post_to(ATTACKER, false), "c2");
    let reason = refused["railyard"]["blocked"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("no approval could be asked: this plugin is not granted approvals"),
        "{reason}"
    );
    assert!(refused["railyard"]["approvals"].is_null(), "{refused}");
}

/// A grant binds to the policy that asked: a reload that changes flow's config makes it serve
/// nothing, one that changes something else (a new API key) keeps it.
#[test]
fn a_changed_policy_voids_a_grant_and_a_new_key_does_not() {
    let backend = MockBackend::start(Script::Json(200, json!({})));
    let cfg = config(900, "");
    let d = Daemon::start(&cfg.path, &backend.url());
    let attack = post_to(ATTACKER, false);
    let revision = || get(d.addr, "/v1/policies").json()["revision"]["number"].clone();
    let reload = |from: &str, to: &str, number: u64| {
        let text = std::fs::read_to_string(&cfg.path).unwrap();
        assert!(text.contains(from), "{from}");
        std::fs::write(&cfg.path, text.replacen(from, to, 1)).unwrap();
        eventually("the reload", || revision() == json!(number));
    };

    let id = pending(&chat(&d, &backend, &attack, "c2"));
    assert_eq!(decide(&d, &id, None, "grant").status, 200);
    let key = key_entry("auth.keys", "another-key", "another", None);
    reload("[approvals]", &format!("{key}[approvals]"), 2);
    let passed = chat(&d, &backend, &attack, "c3");
    assert_eq!(
        passed["message"]["tool_calls"][0]["function"]["name"], "send_message",
        "{passed}"
    );

    let id = pending(&chat(&d, &backend, &attack, "c4"));
    assert_eq!(decide(&d, &id, None, "grant").status, 200);
    reload("mode = \"values\"", "mode = \"values\"\nmin_digits = 7", 3);
    let refused = chat(&d, &backend, &attack, "c5");
    assert_ne!(pending(&refused), id);
}

#[test]
fn a_call_longer_than_an_approver_is_shown_can_only_be_refused() {
    // The attacker's address after 70 KB of padding: the approver is shown the first 64 KiB,
    // marked cut, and granting it is refused (409), so nobody grants what they did not see.
    let backend = MockBackend::start(Script::Json(200, json!({})));
    let cfg = config(900, "");
    let d = Daemon::start(&cfg.path, &backend.url());
    let call: Value = serde_json::from_str(&post_to(ATTACKER, false)).unwrap();
    let attack = json!({
        "text": format!("{}{}", "padding ".repeat(9_000), call["text"].as_str().unwrap()),
        "url": call["url"],
    })
    .to_string();
    let refused = chat(&d, &backend, &attack, "c1");
    let id = pending(&refused);
    let seen = show(&d, &id, None).json();
    assert_eq!(seen["arguments_cut"], true, "{}", seen["arguments_bytes"]);
    assert_eq!(seen["arguments_bytes"].as_u64(), Some(attack.len() as u64));
    assert!(seen["arguments"].as_str().unwrap().len() <= 64 << 10);
    let granted = decide(&d, &id, Some(APPROVER), "grant");
    assert_eq!(granted.status, 409, "{}", granted.body);
    assert_eq!(granted.json()["error"]["code"], "arguments_not_shown");
    assert_eq!(show(&d, &id, None).json()["status"], "pending");
    assert_eq!(decide(&d, &id, Some(APPROVER), "refuse").status, 200);
    // Sent again, the call stays refused.
    let again = chat(&d, &backend, &attack, "c2");
    assert!(again["message"]["tool_calls"].is_null(), "{again}");
}
