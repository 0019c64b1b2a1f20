//! The official MCP conformance suite through the daemon (#65): `@modelcontextprotocol/conformance`
//! (npm, pinned by tests/conformance/package-lock.json and run on the Node 22 of npm's `node`
//! package, both installed by scripts/setup.sh) acts as a client against the reference server
//! (tests/conformance/server.py, the MCP Python SDK) directly and through `/mcp/<name>` of the
//! bundled config, every server scenario of the 2025-11-25 and the 2026-07-28 revisions
//! (`--suite all --spec-version V`: the extensions, tasks and skills, are on no revision's
//! timeline and are not run).
//!
//! Every scenario the reference server passes directly must pass through Railyard, except those
//! listed in tests/conformance/known.txt, which must still fail through it: a fix shrinks the
//! list. The suite cannot send a Railyard key, so the daemon runs `[auth] open = true` on
//! loopback; the bundled chains run as for the default tenant. The table of every scenario,
//! direct and through, is printed (`cargo test --test main conformance -- --nocapture`, and in
//! a failure's message). About 25 s on two idle cores.

use crate::http::Daemon;
use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The revisions run, each at its own wire (the session era, the stateless protocol).
const VERSIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];

/// Longest one run of the suite (one revision, one way) may take; it takes about ten seconds.
const RUN_LIMIT: Duration = Duration::from_secs(180);

fn dir() -> PathBuf {
    root().join("tests/conformance")
}

/// The Node 22 binary and the suite's entry point, installed by scripts/setup.sh.
fn suite_command() -> (PathBuf, PathBuf) {
    let node = dir().join("node_modules/node/bin/node");
    let cli = dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.is_file() && cli.is_file(),
        "{} or {} is missing: run scripts/setup.sh (it installs the MCP conformance suite and \
         Node 22 into tests/conformance/node_modules)",
        node.display(),
        cli.display()
    );
    (node, cli)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The reference server on a loopback port of its own.
struct Reference {
    port: u16,
    child: Child,
}

impl Reference {
    fn start() -> Reference {
        let port = free_port();
        let child = Command::new(python())
            .arg(dir().join("server.py"))
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the reference MCP server did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Reference { port, child }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one scenario came to: passed (no check failed), and its failed checks (id: message).
#[derive(Clone, Debug, Default)]
struct Outcome {
    passed: bool,
    failures: Vec<String>,
}

/// One run of the suite (`version`, against `url`), results under `out`.
struct Run {
    child: Child,
    out: PathBuf,
    what: String,
    started: Instant,
}

impl Run {
    fn start(url: &str, version: &str, out: &Path, what: &str) -> Run {
        let (node, cli) = suite_command();
        std::fs::create_dir_all(out).unwrap();
        let log = std::fs::File::create(out.join("stdout.txt")).unwrap();
        let child = Command::new(node)
            .arg(cli)
            .args([
                "server",
                "--url",
                url,
                "--suite",
                "all",
                "--spec-version",
                version,
            ])
            .args(["--timeout", "20000", "-o"])
            .arg(out.join("results"))
            .current_dir(out)
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Run {
            child,
            out: out.to_path_buf(),
            what: what.to_string(),
            started: Instant::now(),
        }
    }

    /// Wait for the run (killed past [`RUN_LIMIT`]) and read every scenario's outcome: the
    /// summary's verdict, each failed check from the scenario's checks.json.
    fn finish(mut self) -> BTreeMap<String, Outcome> {
        loop {
            if self.child.try_wait().unwrap().is_some() {
                break;
            }
            if self.started.elapsed() > RUN_LIMIT {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the conformance suite ({}) ran past {RUN_LIMIT:?}",
                    self.what
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let stdout = std::fs::read_to_string(self.out.join("stdout.txt")).unwrap();
        let mut outcomes = BTreeMap::new();
        let mut current: Option<String> = None;
        let mut summary = false;
        for line in stdout.lines() {
            if let Some(name) = line
                .strip_prefix("=== Running scenario: ")
                .and_then(|l| l.strip_suffix(" ==="))
            {
                current = Some(name.to_string());
            } else if let (Some(dir), Some(name)) =
                (line.strip_prefix("Results saved to "), current.as_ref())
            {
                let outcome: &mut Outcome = outcomes.entry(name.clone()).or_default();
                outcome.failures = failed_checks(Path::new(dir.trim()));
            } else if line.trim() == "=== SUMMARY ===" {
                summary = true;
            } else if summary {
                // "✓ name: 3 passed, 0 failed" or "✗ name: 1 passed, 2 failed"
                let Some((mark, rest)) = line.split_once(' ') else {
                    continue;
                };
                let Some((name, _)) = rest.split_once(": ") else {
                    continue;
                };
                if mark == "✓" || mark == "✗" {
                    let outcome = outcomes.entry(name.to_string()).or_default();
                    outcome.passed = mark == "✓";
                    if !outcome.passed && outcome.failures.is_empty() {
                        outcome.failures.push("the scenario did not run".into());
                    }
                }
            }
        }
        assert!(
            summary && !outcomes.is_empty(),
            "the conformance suite ({}) printed no summary:\n{stdout}",
            self.what
        );
        outcomes
    }
}

/// `id: message` of every failed check in a scenario's results.
fn failed_checks(dir: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(dir.join("checks.json")) else {
        return vec!["no checks.json".into()];
    };
    let checks: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
    checks
        .iter()
        .filter(|c| c["status"] == "FAILURE")
        .map(|c| {
            let message = c["errorMessage"].as_str().unwrap_or("");
            let message: String = message.chars().take(240).collect();
            format!("{}: {message}", c["id"].as_str().unwrap_or("?"))
        })
        .collect()
}

/// tests/conformance/known.txt: `version scenario` per line (`#` starts a comment).
fn known() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(dir().join("known.txt")).unwrap();
    text.lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut words = l.split_whitespace();
            let (Some(v), Some(s), None) = (words.next(), words.next(), words.next()) else {
                panic!("known.txt: '{l}' is not 'VERSION SCENARIO'");
            };
            assert!(
                VERSIONS.contains(&v),
                "known.txt: '{v}' is not a revision run here"
            );
            (v.to_string(), s.to_string())
        })
        .collect()
}

/// The bundled config, open on loopback (the suite sends no key), with one reference server per
/// revision at `/mcp/ref-<version>`. The plugins' CPU deadline is 1 s rather than 100 ms: beside
/// the suite's runs and the rest of the tests on two cores, a first call's schema compilation
/// can run past 100 ms, a fault the bundled `on_error = "block"` turns into a refusal, which is
/// not what this test is about.
fn config(servers: &[(&str, &Reference)]) -> TempConfig {
    let keys = root().join("policies/keys.toml");
    let cfg = bundled_with(&[
        (
            &format!("keys_file = \"{}\"", keys.display()),
            "open = true",
        ),
        ("timeout_ms = 100 ", "timeout_ms = 1000 "),
    ]);
    let mut text = std::fs::read_to_string(&cfg.path).unwrap();
    for (version, server) in servers {
        text += &format!(
            "\n[[mcp.servers]]\nname = \"ref-{version}\"\nurl = \"{}\"\n",
            server.url()
        );
    }
    std::fs::write(&cfg.path, text).unwrap();
    cfg
}

#[test]
fn the_mcp_conformance_suite_passes_through_the_daemon_as_it_does_directly() {
    suite_command();
    let known = known();
    // A reference server for each run: scenarios change a server's tool and prompt lists, so
    // runs side by side must not share one.
    let direct: Vec<Reference> = VERSIONS.iter().map(|_| Reference::start()).collect();
    let behind: Vec<Reference> = VERSIONS.iter().map(|_| Reference::start()).collect();
    let pairs: Vec<(&str, &Reference)> = VERSIONS.iter().copied().zip(behind.iter()).collect();
    let cfg = config(&pairs);
    let daemon = Daemon::start_logged(&cfg.path, &["--backend", "http://127.0.0.1:1"]);
    let work = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut table = Vec::new();
    // One revision at a time, direct and through side by side: two cores.
    for (i, version) in VERSIONS.iter().enumerate() {
        let through = format!("http://{}/mcp/ref-{version}", daemon.addr);
        let out = |way: &str| work.path().join(format!("{way}-{version}"));
        let d = Run::start(
            &direct[i].url(),
            version,
            &out("direct"),
            &format!("{version} direct"),
        );
        let t = Run::start(
            &through,
            version,
            &out("through"),
            &format!("{version} through Railyard"),
        );
        let (d, t) = (d.finish(), t.finish());
        for (scenario, direct) in d {
            let through = t.get(&scenario).cloned().unwrap_or(Outcome {
                passed: false,
                failures: vec!["not run through Railyard".into()],
            });
            table.push((*version, scenario, direct, through));
        }
    }
    let elapsed = started.elapsed();
    // What the daemon refused or faulted on, to tell a rail's refusal from the door's behaviour.
    let refusals: Vec<String> = daemon
        .logs()
        .into_iter()
        .filter(|l| l["target"] == "railyard::decision")
        .map(|l| l["fields"].clone())
        .filter(|f| {
            f["outcome"] == "refused" || f["faults"].as_str().is_some_and(|s| !s.is_empty())
        })
        .map(|f| {
            format!(
                "{} {} {} {}",
                f["target"], f["blocked"], f["reason"], f["faults"]
            )
        })
        .collect();
    drop(daemon);

    let mark = |passed: bool| if passed { "pass" } else { "FAIL" };
    let mut printed = format!(
        "MCP conformance suite, direct vs through Railyard ({:.1} s):\n{:<12} {:<48} {:<6} {:<7}\n",
        elapsed.as_secs_f64(),
        "revision",
        "scenario",
        "direct",
        "through"
    );
    for (version, scenario, direct, through) in &table {
        printed += &format!(
            "{version:<12} {scenario:<48} {:<6} {:<7}\n",
            mark(direct.passed),
            mark(through.passed)
        );
        if direct.passed && !through.passed {
            for f in &through.failures {
                printed += &format!("{:>14}{f}\n", "");
            }
        }
    }
    println!("{printed}");

    let mut problems = Vec::new();
    for (version, scenario, direct, through) in &table {
        let listed = known.iter().any(|(v, s)| v == version && s == scenario);
        if !direct.passed {
            problems.push(format!(
                "{version} {scenario} fails against the reference server itself: {}",
                direct.failures.join("; ")
            ));
        } else if listed && through.passed {
            problems.push(format!(
                "{version} {scenario} passes through Railyard now: remove it from tests/conformance/known.txt"
            ));
        } else if !listed && !through.passed {
            problems.push(format!(
                "{version} {scenario} passes directly but fails through Railyard: {}",
                through.failures.join("; ")
            ));
        }
    }
    for (v, s) in &known {
        if !table
            .iter()
            .any(|(version, scenario, _, _)| version == v && scenario == s)
        {
            problems.push(format!(
                "known.txt names {v} {s}, which the suite did not run"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n\n{printed}\nthe daemon's refusals and faults:\n{}",
        problems.join("\n"),
        refusals.join("\n")
    );
}
