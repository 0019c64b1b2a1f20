//! Shadow mode (#20): a shadow plugin runs and is recorded (decision record, metrics with a
//! `shadow` label, the `railyard` object's "would block"), but its verdict changes nothing. A
//! tenant can enforce a plugin the default chains only shadow. Through the real daemon.

use crate::http::*;
use crate::records::record;
use crate::support::*;
use serde_json::{json, Value};

const STRICT_KEY: &str = "shadow-strict-key";
const LAX_KEY: &str = "shadow-lax-key";

fn config() -> TempConfig {
    write_config(&format!(
        "[auth]\n{}{}\n[tenants.strict]\nmodes = {{ blocker = \"enforce\" }}\n\n[tenants.lax]\n\n[[plugins]]\nname = \"pii\"\npath = \"{}\"\nrails = [\"input\"]\nmode = \"shadow\"\n\n{}",
        key_entry("auth.keys", STRICT_KEY, "s", Some("strict")),
        key_entry("auth.keys", LAX_KEY, "l", Some("lax")),
        plugin("pii_filter").display(),
        scripted(
            "blocker",
            "[\"input\"]",
            "mode = \"shadow\"",
            "{ mode = \"block\", text = \"refunds are not for this assistant\" }"
        ),
    ))
}

/// A backend answering "done", and the daemon with [`config`] (JSON logs) in front of it.
fn start() -> (MockBackend, TempConfig, Daemon) {
    let backend = MockBackend::start(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "done"}), "stop"),
    ));
    let cfg = config();
    let daemon = Daemon::start_logged(&cfg.path, &["--backend", &backend.url()]);
    (backend, cfg, daemon)
}

fn chat() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "refund me, my SSN is 536-22-1234"}]})
}

fn send(daemon: &Daemon, key: &str, id: &str) -> Reply {
    crate::records::send(daemon, id, Some(key), chat().to_string().as_bytes())
}

#[test]
fn a_shadow_block_lets_the_request_through_and_records_the_would_be_block() {
    let (backend, _cfg, daemon) = start();

    let reply = send(&daemon, LAX_KEY, "shadow-lax");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["choices"][0]["message"]["content"], "done");
    // Neither the block nor pii's edit was applied: the backend got the text as sent.
    let seen = backend.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].body["messages"][0]["content"],
        "refund me, my SSN is 536-22-1234"
    );
    // The answer says what enforcing would have done.
    let railyard = &body["railyard"];
    assert_eq!(railyard["rails"]["input"], "allow", "{railyard}");
    assert!(railyard["blocked"].is_null());
    assert_eq!(railyard["would_block"]["policy"], "blocker", "{railyard}");
    assert_eq!(railyard["would_block"]["rail"], "input");
    assert_eq!(
        railyard["would_block"]["reason"],
        "refunds are not for this assistant"
    );
    let plugins = railyard["plugins"].as_array().unwrap();
    let of = |id: &str| plugins.iter().find(|p| p["plugin"] == id).unwrap().clone();
    assert_eq!(of("pii")["verdict"], "modify");
    assert_eq!(of("pii")["shadow"], true);
    assert_eq!(of("blocker")["verdict"], "block");
    assert_eq!(of("blocker")["shadow"], true);

    // The decision record has the same, and no content.
    let r = record(&daemon, "shadow-lax");
    assert_eq!(r["status"], 200);
    assert_eq!(r["outcome"], "served");
    assert_eq!(r["would_block"]["policy"], "blocker");
    assert!(r["blocked"].is_null());
    assert!(!r.to_string().contains("536-22-1234"));

    // Metrics count shadow verdicts apart from enforced ones.
    let metrics = get(daemon.addr, "/metrics").body;
    assert!(
        metrics.contains("railyard_verdicts_total{tenant=\"lax\",rail=\"input\",policy=\"blocker\",verdict=\"block\",shadow=\"true\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains(
        "railyard_verdicts_total{tenant=\"lax\",rail=\"input\",policy=\"pii\",verdict=\"modify\",shadow=\"true\"} 1"
    ));

    // The policies endpoint shows each plugin's mode and the tenant's overrides.
    let policies = request(
        daemon.addr,
        "GET",
        "/v1/policies",
        &[("Authorization", &format!("Bearer {LAX_KEY}"))],
        b"",
    );
    assert_eq!(policies.status, 200, "{}", policies.body);
    let p = policies.json();
    let modes: Vec<_> = p["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["mode"].clone())
        .collect();
    assert_eq!(modes, [json!("shadow"), json!("shadow")], "{p}");
    assert_eq!(p["tenants"]["strict"]["modes"]["blocker"], "enforce", "{p}");
}

#[test]
fn a_tenant_can_enforce_what_the_default_chains_only_shadow() {
    let (backend, _cfg, daemon) = start();

    let reply = send(&daemon, STRICT_KEY, "shadow-strict");
    // The bundled refusal style: a 200 whose message is the refusal, or a policy_violation error.
    let body = reply.json();
    assert_eq!(body["railyard"]["blocked"]["policy"], "blocker", "{body}");
    assert!(body["railyard"]["would_block"].is_null());
    assert!(backend.seen().is_empty(), "the block was enforced");
    let r = record(&daemon, "shadow-strict");
    assert_eq!(r["outcome"], "refused");
    assert_eq!(r["blocked"]["policy"], "blocker");
    // pii stays in shadow for this tenant too.
    let pii = r["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["plugin"] == "pii")
        .cloned()
        .unwrap();
    assert_eq!(pii["shadow"], true);
}

#[test]
fn modes_are_checked_like_the_rest_of_the_config() {
    let bad_mode = policy_error(&format!(
        "[[plugins]]\nname = \"p\"\npath = \"{}\"\nmode = \"dry-run\"\n",
        plugin("allow_all").display()
    ));
    assert!(bad_mode.contains("dry-run"), "{bad_mode}");
    assert!(bad_mode.contains("enforce"), "{bad_mode}");
    let unknown = policy_error(&format!(
        "[tenants.t]\nmodes = {{ nobody = \"shadow\" }}\n\n[[plugins]]\nname = \"p\"\npath = \"{}\"\n",
        plugin("allow_all").display()
    ));
    assert!(
        unknown.contains("tenants.t.modes.nobody") && unknown.contains("no plugin named 'nobody'"),
        "{unknown}"
    );
}
