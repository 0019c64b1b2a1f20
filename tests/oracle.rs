//! The oracle (#65): requests, replies, stream events and MCP messages generated from the SDKs'
//! own type definitions (OpenAI, Anthropic, MCP 2025-11-25 and 2026-07-28), a canary in every
//! leaf (an e-mail address, a card number as text and as a JSON number, an SSN, an e-mail
//! address as an object key, an enum word) and the hidden tool's name wherever a tool is named,
//! sent through the running daemon both ways by `tests/oracle/run.py`, which is the model
//! backend, the MCP upstream and the client at once.
//!
//! Many leaves still cross today; `tests/oracle/known.json` lists them (door, direction, the
//! leaf's JSON path). The test fails on a crossing the ledger does not list, and on a ledger
//! entry whose leaf was planted and no longer crosses, so the ledger only shrinks as leaks are
//! fixed. The run here is a bounded, deterministic spread over every door and direction
//! (`RAILYARD_ORACLE_BUDGET` cases, 700 by default; `all` for every case,
//! `RAILYARD_ORACLE_RANDOM` for random instances drawn with hypothesis on top).

use crate::http::Daemon;
use crate::support::*;
use serde_json::Value;
use std::process::Command;

/// The MCP servers the oracle's upstream serves, as run.py's `config_tail` writes them.
fn mcp_servers(port: u16) -> String {
    ["o25", "o26", "o26l"]
        .iter()
        .map(|name| {
            format!(
                "\n[[mcp.servers]]\nname = \"{name}\"\nurl = \"http://127.0.0.1:{port}/mcp/{name}\"\ntimeout_ms = 10000\n"
            )
        })
        .collect()
}

#[test]
fn generated_traffic_crosses_only_the_known_leaks() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = bundled_with(&[]);
    let text = std::fs::read_to_string(&cfg.path).unwrap() + &mcp_servers(port);
    std::fs::write(&cfg.path, text).unwrap();
    let d = Daemon::start_logged(
        &cfg.path,
        &["--backend", &format!("http://127.0.0.1:{port}/v1")],
    );
    let out = tempfile::tempdir().unwrap();
    let budget = std::env::var("RAILYARD_ORACLE_BUDGET").unwrap_or_else(|_| "700".into());
    let known = root().join("tests/oracle/known.json");
    let run = Command::new(python())
        .arg(root().join("tests/oracle/run.py"))
        .args(["--daemon", &d.addr.to_string(), "--port", &port.to_string()])
        .arg("--known")
        .arg(&known)
        .arg("--out")
        .arg(out.path())
        .env("RAILYARD_ORACLE_BUDGET", &budget)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    let summary: Value = std::fs::read(out.path().join("summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| {
            panic!(
                "run.py wrote no summary ({}): {stderr}\n{}",
                run.status,
                String::from_utf8_lossy(&run.stdout)
            )
        });
    // The coverage table: per door and direction, the types generated, leaves per type, the
    // canaries planted and what became of them.
    println!(
        "{}\n{} crossed paths in {} s",
        summary["table"].as_str().unwrap_or(""),
        summary["crossings"].as_array().map_or(0, Vec::len),
        summary["seconds"]
    );
    let rows = summary["rows"].as_array().unwrap();
    let doors: Vec<&str> = rows.iter().filter_map(|r| r["door"].as_str()).collect();
    for door in [
        "chat",
        "responses",
        "messages",
        "models",
        "mcp-2025-11-25",
        "mcp-2026-07-28",
    ] {
        assert!(doors.contains(&door), "no case ran on {door}: {rows:?}");
    }
    let errors: u64 = rows.iter().filter_map(|r| r["errors"].as_u64()).sum();
    assert_eq!(errors, 0, "cases the oracle could not run: {stderr}");

    let list = |key: &str| -> Vec<String> {
        summary[key]
            .as_array()
            .unwrap_or_else(|| panic!("no {key} in the summary"))
            .iter()
            .map(|e| {
                let example = e["examples"][0]["value"].as_str().unwrap_or("");
                format!("{} {} {} {example}", e["door"], e["direction"], e["path"])
            })
            .collect()
    };
    let new = list("new");
    let stale = list("stale");
    assert!(
        new.is_empty(),
        "{} crossings not in tests/oracle/known.json (a canary or hidden tool that crossed \
         unjudged; fix it, or add it to the ledger):\n{}",
        new.len(),
        new.join("\n")
    );
    assert!(
        stale.is_empty(),
        "{} entries of tests/oracle/known.json no longer cross: remove them\n{}",
        stale.len(),
        stale.join("\n")
    );
    assert!(run.status.success(), "run.py: {stderr}");
}
