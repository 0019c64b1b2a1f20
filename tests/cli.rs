//! The `railyard` executable: `check` exit codes and output, `plugins`.

use crate::support::*;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

pub fn railyard(args: &[&str], stdin: &str) -> (i32, String, String) {
    railyard_with_env(args, stdin, &[])
}

/// Start `railyard` with `args` and extra environment, `stdin` written to it.
fn spawn_railyard(args: &[&str], stdin: &str, env: &[(&str, &str)]) -> std::process::Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args(args)
        .envs(env.iter().copied())
        .env(
            "RAILYARD_CACHE_DIR",
            std::env::temp_dir().join("railyard-cli-test-cache"),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The child may exit before reading (e.g. on a usage error): a broken pipe is fine here.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child
}

/// Run `railyard` with `args`, `stdin` and extra environment; (exit code, stdout, stderr).
pub fn railyard_with_env(
    args: &[&str],
    stdin: &str,
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let out = spawn_railyard(args, stdin, env).wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_exit_codes_follow_the_verdict() {
    let cfg = write_config(&scripted(
        "driven",
        "[\"input\"]",
        "",
        "{ mode = \"by-message\" }",
    ));
    let config = cfg.path.to_str().unwrap();
    let body = |text: &str| format!(r#"{{"messages": [{{"role": "user", "content": "{text}"}}]}}"#);

    let (code, out, _) = railyard(
        &["check", "--config", config, "--rail", "input", "--json"],
        &body("allow"),
    );
    assert_eq!(code, 0, "{out}");
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["verdict"], "allow");
    assert_eq!(json["decisions"][0]["plugin"], "driven");
    assert!(json["decisions"][0]["duration_us"].is_u64());

    let (code, out, _) = railyard(
        &["check", "--config", config, "--rail", "input", "--json"],
        &body("bad-index"),
    );
    assert_eq!(code, 1, "{out}");
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["verdict"], "block");
    assert_eq!(json["decisions"][0]["verdict"], "fault");
    assert_eq!(json["decisions"][0]["fault"], "invalid_verdict");

    let (code, _, err) = railyard(
        &["check", "--config", config, "--rail", "input"],
        "{not json",
    );
    assert_eq!(code, 2);
    assert!(err.contains("is not valid JSON"), "{err}");

    let (code, _, err) = railyard(
        &["check", "--config", config, "--rail", "input"],
        r#"{"messages": 1}"#,
    );
    assert_eq!(code, 2);
    assert!(err.contains("messages: must be an array"), "{err}");

    let (code, _, err) = railyard(&["check", "--config", config, "--rail", "sideways"], "{}");
    assert_eq!(code, 2);
    assert!(err.contains("unknown rail 'sideways'"), "{err}");
}

#[test]
fn check_prints_a_human_summary() {
    let cfg = write_config(&scripted(
        "tail",
        "[\"output\"]",
        "",
        "{ mode = \"append\", text = \" (checked)\" }",
    ));
    let (code, out, _) = railyard(
        &[
            "check",
            "--config",
            cfg.path.to_str().unwrap(),
            "--rail",
            "output",
        ],
        r#"{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "answer"}]}"#,
    );
    assert_eq!(code, 0);
    assert!(out.starts_with("verdict: Modify (output rail)"), "{out}");
    assert!(
        out.contains("tail") && out.contains("modify") && out.contains("answer (checked)"),
        "{out}"
    );
}

#[test]
fn config_errors_exit_2_with_the_message() {
    let cfg = write_config("[server]\nlisten = 5\n");
    let (code, _, err) = railyard(&["plugins", "--config", cfg.path.to_str().unwrap()], "");
    assert_eq!(code, 2);
    assert!(err.contains("railyard.toml:2:"), "{err}");
}

#[test]
fn plugins_lists_the_bundled_set() {
    let config = root().join("policies/railyard.toml");
    let (code, out, err) = railyard(
        &["plugins", "--config", config.to_str().unwrap(), "--json"],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let list: Value = serde_json::from_str(&out).unwrap();
    let ids: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "tool-linkage",
            "llama31-compat",
            "text-tool-calls",
            "normalise",
            "allowlist",
            "flow",
            "schema-validator",
            "pii",
            "content-safety",
            "jailbreak",
            "allowlist-support",
            "allowlist-payments",
            "prompt-guard",
            "tool-limits"
        ]
    );
    for p in list.as_array().unwrap() {
        assert_eq!(p["sha256"].as_str().unwrap().len(), 64);
        assert!(p["config_schema"].is_object(), "{p}");
    }
    assert_eq!(
        list[7]["rails"],
        serde_json::json!(["tool_result", "input", "tools", "tool_call", "output"])
    );
}

#[test]
fn guest_output_and_log_lines_reach_the_log_tagged_with_the_plugin() {
    let cfg = write_config(&scripted("chatty", "[\"input\"]", "", "{ mode = \"log\" }"));
    let (_, _, err) = railyard_with_env(
        &[
            "check",
            "--config",
            cfg.path.to_str().unwrap(),
            "--rail",
            "input",
        ],
        r#"{"messages": [{"role": "user", "content": "hi"}]}"#,
        &[("RAILYARD_LOG", "info"), ("NO_COLOR", "1")],
    );
    assert!(
        err.lines()
            .any(|l| l.contains("plugin=\"chatty\"")
                && l.contains("hello from the guest log import")),
        "{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.contains("chatty") && l.contains("hello from guest stderr")),
        "{err}"
    );
}

#[test]
fn json_logs_are_one_json_object_per_line() {
    let cfg = write_config(&scripted("chatty", "[\"input\"]", "", "{ mode = \"log\" }"));
    let (_, _, err) = railyard_with_env(
        &[
            "--log-format",
            "json",
            "check",
            "--config",
            cfg.path.to_str().unwrap(),
            "--rail",
            "input",
        ],
        r#"{"messages": [{"role": "user", "content": "hi"}]}"#,
        &[("RAILYARD_LOG", "info")],
    );
    let lines: Vec<Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["fields"]["plugin"] == "chatty"
            && l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("guest log import"))),
        "{err}"
    );
}

#[test]
fn serve_refuses_a_bad_config_with_exit_64_before_binding() {
    let cfg = write_config("[[plugins]]\nname = \"ghost\"\npath = \"ghost.wasm\"\n");
    let (code, out, err) = railyard(
        &[
            "serve",
            "--config",
            cfg.path.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
        "",
    );
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("railyard.toml:1: plugins[0] (ghost).path"),
        "{err}"
    );
    assert!(!out.contains("listening"), "nothing was bound: {out}");
}

#[test]
fn check_enforces_plugin_deadlines() {
    // The CLI must keep its engine (and so the epoch ticker) alive while plugins run: a looping
    // plugin is stopped by its deadline and the request is blocked, not left hanging.
    let cfg = write_config(&scripted(
        "spin",
        "[\"input\"]",
        "timeout_ms = 50",
        "{ mode = \"by-message\" }",
    ));
    let payload = serde_json::json!({"messages": [{"role": "user", "content": "loop"}]});
    let config = cfg.path.to_str().unwrap();
    let mut child = spawn_railyard(
        &[
            "check", "--config", config, "--rail", "input", "--json", "-",
        ],
        &payload.to_string(),
        &[],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("railyard check never returned: the plugin deadline was not enforced");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["decisions"][0]["fault"], "deadline", "{result}");
}
