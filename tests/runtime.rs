//! The sandboxed runtime: verdicts from real components, faults contained, contract enforced.

use crate::support::*;
use railyard::chain::{Decided, Verdict};
use railyard::engine::{FaultKind, Isolation, Limits, LoadError};
use railyard::payload::{Content, Rail};
use serde_json::json;
use std::time::Duration;

fn by_message(extra: &str) -> railyard::policy::PolicySet {
    policy_set(&scripted(
        "driven",
        "[\"input\"]",
        extra,
        "{ mode = \"by-message\" }",
    ))
}

#[test]
fn each_verdict_kind_from_a_real_component() {
    let allow = policy_set(&scripted("p", "[\"input\"]", "", "{ mode = \"allow\" }"));
    let e = allow.check_now(Rail::Input, user("hello"), &ctx());
    assert_eq!(e.verdict, Verdict::Allow);
    assert_eq!(e.decisions.len(), 1);
    assert_eq!(e.decisions[0].verdict, Decided::Allow);

    let modify = policy_set(&scripted(
        "p",
        "[\"input\"]",
        "",
        "{ mode = \"append\", text = \"!\" }",
    ));
    let e = modify.check_now(Rail::Input, user("hello"), &ctx());
    assert_eq!(e.verdict, Verdict::Modify);
    assert_eq!(
        e.payload.messages[0].content,
        Some(Content::Text("hello!".into()))
    );
    assert_eq!(e.decisions[0].reason.as_deref(), Some("appended 1 bytes"));

    let reject = policy_set(&scripted(
        "p",
        "[\"input\"]",
        "",
        "{ mode = \"reject-last\", text = \"[withheld]\" }",
    ));
    let e = reject.check_now(Rail::Input, user("hello"), &ctx());
    assert_eq!(e.verdict, Verdict::Reject);
    assert_eq!(
        e.payload.messages[0].content,
        Some(Content::Text("[withheld]".into()))
    );
    assert_eq!(e.rejections.len(), 1);

    let block = policy_set(&scripted(
        "p",
        "[\"input\"]",
        "",
        "{ mode = \"block\", text = \"no way\" }",
    ));
    let e = block.check_now(Rail::Input, user("hello"), &ctx());
    assert_eq!(e.verdict, Verdict::Block);
    let blocked = e.blocked.unwrap();
    assert_eq!(
        (
            blocked.plugin.as_str(),
            blocked.reason.as_str(),
            blocked.fault
        ),
        ("p", "no way", false)
    );
}

/// Each fault is contained, reported as a fault (not a policy block), and the same plugin answers
/// the next call normally.
#[test]
fn faults_are_contained_and_the_next_call_is_served() {
    // The deadline is wall-clock epochs: on a busy machine, growing to the memory cap could take
    // longer than a deadline short enough for the loop case, so that case has its own set.
    let short = by_message("timeout_ms = 50\nmemory_mb = 16");
    let long = by_message("timeout_ms = 5000\nmemory_mb = 16");
    let cases = [
        ("loop", FaultKind::Deadline, "50 ms CPU deadline"),
        ("oom", FaultKind::MemoryCap, "16 MiB cap"),
        ("trap", FaultKind::Trap, "scripted plugin asked to trap"),
        (
            "bad-index",
            FaultKind::InvalidVerdict,
            "message index 100 is out of range",
        ),
    ];
    for (mode, kind, detail) in cases {
        let set = if mode == "loop" { &short } else { &long };
        let e = set.check_now(Rail::Input, user(mode), &ctx());
        assert_eq!(e.verdict, Verdict::Block, "{mode}");
        let d = &e.decisions[0];
        assert_eq!(d.verdict, Decided::Fault, "{mode}");
        assert_eq!(d.fault, Some(kind), "{mode}");
        assert!(
            d.reason.as_deref().unwrap().contains(detail),
            "{mode}: {:?}",
            d.reason
        );
        let blocked = e.blocked.unwrap();
        assert!(blocked.fault, "{mode}: a fault is not a policy block");
        assert_eq!(
            e.payload.messages[0].content,
            Some(Content::Text(mode.into())),
            "payload untouched"
        );

        let next = set.check_now(Rail::Input, user("allow"), &ctx());
        assert_eq!(
            next.verdict,
            Verdict::Allow,
            "after {mode}: {:?}",
            next.decisions
        );
    }
}

#[test]
fn invalid_arguments_edit_is_a_fault_and_changes_nothing() {
    let set = policy_set(&scripted(
        "p",
        "[\"tool_call\"]",
        "",
        "{ mode = \"bad-arguments\" }",
    ));
    let body = json!({"messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}]});
    let e = set.check_now(Rail::ToolCall, payload(body.clone()), &ctx());
    assert_eq!(e.decisions[0].fault, Some(FaultKind::InvalidVerdict));
    assert!(e.decisions[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("not valid JSON"));
    assert_eq!(e.payload.messages_json(), body["messages"]);
}

#[test]
fn deadline_and_memory_faults_in_per_call_isolation() {
    let set = by_message("timeout_ms = 20\nmemory_mb = 8\nisolation = \"per-call\"");
    assert_eq!(set.plugins()[0].limits().isolation, Isolation::PerCall);
    assert_eq!(
        set.check_now(Rail::Input, user("loop"), &ctx()).decisions[0].fault,
        Some(FaultKind::Deadline)
    );
    // A deadline the memory cap is surely reached within, even on a busy machine.
    let roomy = by_message("timeout_ms = 5000\nmemory_mb = 8\nisolation = \"per-call\"");
    assert_eq!(
        roomy.check_now(Rail::Input, user("oom"), &ctx()).decisions[0].fault,
        Some(FaultKind::MemoryCap)
    );
    assert_eq!(
        set.check_now(Rail::Input, user("allow"), &ctx()).verdict,
        Verdict::Allow
    );
    assert_eq!(
        set.plugins()[0].idle_instances(),
        0,
        "per-call keeps no instances"
    );
}

#[test]
fn pooled_instances_are_reused_and_faulted_ones_discarded() {
    let set = by_message("");
    let plugin = set.plugins()[0].clone();
    assert_eq!(
        plugin.idle_instances(),
        0,
        "configure keeps no instance: the pool fills on use"
    );
    for _ in 0..5 {
        set.check_now(Rail::Input, user("allow"), &ctx());
    }
    assert_eq!(
        plugin.idle_instances(),
        1,
        "sequential calls reuse one instance"
    );
    set.check_now(Rail::Input, user("trap"), &ctx());
    assert_eq!(plugin.idle_instances(), 0, "a trapped instance is dropped");
    set.check_now(Rail::Input, user("allow"), &ctx());
    assert_eq!(plugin.idle_instances(), 1);
}

#[test]
fn each_worker_keeps_its_own_instances_and_borrows_before_making_one() {
    let set = std::sync::Arc::new(by_message(""));
    let plugin = set.plugins()[0].clone();
    let on_worker = |worker: usize, text: &'static str| {
        let set = set.clone();
        std::thread::spawn(move || {
            railyard::shard::mark(worker);
            set.check_now(Rail::Input, user(text), &ctx()).verdict
        })
        .join()
        .unwrap()
    };
    for _ in 0..3 {
        assert_eq!(on_worker(1, "allow"), Verdict::Allow);
    }
    assert_eq!(plugin.idle_instances(), 1, "worker 1 reuses its instance");
    // Worker 2 has none: it takes worker 1's rather than making one, and keeps it.
    assert_eq!(on_worker(2, "allow"), Verdict::Allow);
    assert_eq!(plugin.idle_instances(), 1, "borrowed, not made");
    // A fault on the worker holding it still drops it.
    assert_eq!(on_worker(2, "trap"), Verdict::Block);
    assert_eq!(plugin.idle_instances(), 0, "a trapped instance is dropped");
    // Two workers at once each end with one of their own.
    let both: Vec<_> = (1..=2)
        .map(|worker| {
            let set = set.clone();
            std::thread::spawn(move || {
                railyard::shard::mark(worker);
                for _ in 0..20 {
                    assert_eq!(
                        set.check_now(Rail::Input, user("allow"), &ctx()).verdict,
                        Verdict::Allow
                    );
                }
            })
        })
        .collect();
    for t in both {
        t.join().unwrap();
    }
    let idle = plugin.idle_instances();
    assert!((1..=2).contains(&idle), "{idle} idle instances");
}

#[test]
fn plugins_from_one_component_share_its_code_not_their_config() {
    let set = policy_set(&format!(
        "{}{}",
        scripted(
            "a",
            "[\"input\"]",
            "",
            "{ mode = \"append\", text = \"!\" }"
        ),
        scripted(
            "b",
            "[\"input\"]",
            "",
            "{ mode = \"append\", text = \"?\" }"
        ),
    ));
    let (a, b) = (&set.plugins()[0], &set.plugins()[1]);
    assert!(a.shares_code_with(b));
    let e = set.check_now(Rail::Input, user("hi"), &ctx());
    assert_eq!(
        e.payload.messages[0].content,
        Some(Content::Text("hi!?".into())),
        "each keeps its own config"
    );
    let other = policy_set(&scripted("c", "[\"input\"]", "", "{ mode = \"allow\" }"));
    assert!(
        a.shares_code_with(&other.plugins()[0]),
        "a set loaded while another uses the component shares it too"
    );
}

#[test]
fn concurrent_evaluations_share_the_pool() {
    let set = std::sync::Arc::new(by_message(""));
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let set = set.clone();
            std::thread::spawn(move || {
                for j in 0..25 {
                    let text = if (i + j) % 10 == 0 { "trap" } else { "allow" };
                    let e = set.check_now(Rail::Input, user(text), &ctx());
                    let want = if text == "trap" {
                        Verdict::Block
                    } else {
                        Verdict::Allow
                    };
                    assert_eq!(e.verdict, want);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(set.plugins()[0].idle_instances() <= 16);
}

#[test]
fn context_reaches_the_plugin() {
    let set = policy_set(&scripted(
        "p",
        "[\"input\"]",
        "",
        "{ mode = \"echo-context\" }",
    ));
    let mut context = ctx();
    context.principal = Some("alice".into());
    context.tenant = Some("acme".into());
    context.metadata = vec![("team".into(), "billing".into())];
    let e = set.check_now(Rail::Input, user("hi"), &context);
    let reason = e.blocked.unwrap().reason;
    assert!(
        reason.contains("principal=alice tenant=acme request=test rail=Rail::Input"),
        "{reason}"
    );
    assert!(reason.contains("billing"), "{reason}");
}

#[test]
fn wrong_contract_version_is_refused_naming_both_versions() {
    let err = engine()
        .load_plugin(
            "future",
            &plugin("wrong_version"),
            Limits::default(),
            |_: &str| Default::default(),
        )
        .err()
        .expect("must be refused");
    assert!(matches!(err, LoadError::ContractVersion { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("railyard:policy@9.9.0") && text.contains("railyard:policy@0.3.0"),
        "{text}"
    );
}

#[test]
fn filesystem_imports_are_refused() {
    let err = engine()
        .load_plugin("fs", &plugin("fs_reader"), Limits::default(), |_: &str| {
            Default::default()
        })
        .err()
        .expect("must be refused");
    assert!(matches!(err, LoadError::ForbiddenImport { .. }), "{err}");
    assert!(err.to_string().contains("wasi:filesystem"), "{err}");
}

#[test]
fn garbage_and_core_modules_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"\0asm\x01\0\0\0this is not wasm").unwrap();
    let err = engine()
        .load_plugin("g", &garbage, Limits::default(), |_: &str| {
            Default::default()
        })
        .err()
        .unwrap();
    assert!(matches!(err, LoadError::Compile { .. }), "{err}");

    let missing = dir.path().join("missing.wasm");
    let err = engine()
        .load_plugin("m", &missing, Limits::default(), |_: &str| {
            Default::default()
        })
        .err()
        .unwrap();
    assert!(matches!(err, LoadError::Read { .. }), "{err}");
}

#[test]
fn compiled_components_are_cached_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let engine = railyard::engine::Engine::new(railyard::engine::ComponentCache::new(Some(
        dir.path().to_path_buf(),
    )))
    .unwrap();
    let first = engine
        .load_plugin("a", &plugin("scripted"), Limits::default(), |_: &str| {
            Default::default()
        })
        .unwrap();
    assert!(!first.from_cache());
    let second = engine
        .load_plugin("b", &plugin("scripted"), Limits::default(), |_: &str| {
            Default::default()
        })
        .unwrap();
    assert!(second.from_cache());
    assert_eq!(first.digest(), second.digest());
    assert!(first.shares_code_with(&second));
    // The running code is a private mapping: an artifact rewritten in place under the daemon
    // changes nothing in it (a shared mapping of a shortened file would be a SIGBUS).
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        std::fs::write(entry.unwrap().path(), b"corrupt").unwrap();
    }
    first
        .configure("{ \"mode\": \"allow\" }".into())
        .expect("a fresh instance of the mapped code");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "the private copies are unlinked"
    );
    drop((first, second));
    // A corrupt artifact is discarded and recompiled, never trusted.
    let third = engine
        .load_plugin("c", &plugin("scripted"), Limits::default(), |_: &str| {
            Default::default()
        })
        .unwrap();
    assert!(!third.from_cache());
    assert_eq!(third.info().name, "scripted");
}

#[test]
fn describe_reports_name_rails_and_schema() {
    let p = engine()
        .load_plugin(
            "s",
            &plugin("scripted"),
            Limits {
                timeout: Duration::from_millis(50),
                ..Limits::default()
            },
            |_: &str| Default::default(),
        )
        .unwrap();
    assert_eq!(p.info().name, "scripted");
    assert_eq!(p.info().rails.len(), 4);
    assert!(p.info().config_schema.as_ref().unwrap()["properties"]["mode"].is_object());
}

#[test]
fn deadlines_hold_after_the_engine_is_dropped() {
    // The plugins keep the epoch ticker alive: a set that outlives its engine still stops a
    // looping plugin at its deadline.
    let cfg = write_config(&scripted(
        "driven",
        "[\"input\"]",
        "timeout_ms = 20",
        "{ mode = \"by-message\" }",
    ));
    let dir = tempfile::tempdir().unwrap();
    let engine = railyard::engine::Engine::new(railyard::engine::ComponentCache::new(Some(
        dir.path().to_path_buf(),
    )))
    .unwrap();
    let set = railyard::policy::PolicySet::load(&cfg.path, &engine).unwrap();
    drop(engine);
    assert_eq!(
        set.check_now(Rail::Input, user("loop"), &ctx()).decisions[0].fault,
        Some(FaultKind::Deadline)
    );
}

#[test]
fn a_plugin_limited_to_models_is_skipped_for_others_without_a_call() {
    let set = policy_set(&scripted(
        "p",
        "[\"input\"]",
        "models = [\"llama-3.1*\", \"*/llama-3.1*\"]",
        "{ mode = \"block\", text = \"no\" }",
    ));
    let with_model = |model: Option<&str>| {
        let mut c = ctx();
        c.model = model.map(str::to_string);
        set.check_now(Rail::Input, user("hi"), &c)
    };
    for model in [Some("Llama-3.1-8B-Instruct"), Some("meta/llama-3.1-70b")] {
        assert_eq!(with_model(model).verdict, Verdict::Block, "{model:?}");
    }
    for model in [Some("gpt-4o"), Some("llama-3.2"), None] {
        let e = with_model(model);
        assert_eq!(e.verdict, Verdict::Allow, "{model:?}");
        assert!(e.decisions.is_empty(), "skipped, not called: {model:?}");
    }
    let err = policy_error(&scripted(
        "p",
        "[\"input\"]",
        "models = []",
        "{ mode = \"allow\" }",
    ));
    assert!(err.contains("plugins[0].models"), "{err}");
}
