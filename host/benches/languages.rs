//! The same policy in Rust, JavaScript and Python: the `deny-phrases` plugin that
//! `railyard new --lang rust|js|python` scaffolds (identical logic in each template), built from
//! the templates, judging the same 2 KB request. Measures what a policy author chooses between:
//! component size, first compile, cached load, memory of a warm instance, the cost of a call on a
//! pooled instance and of a call on a fresh instance (`isolation = "per-call"`).
//!
//! C: the C template's policy (`confine-paths`, `railyard new --lang c`) against its Rust twin
//! (`plugins/testing/confine-paths`, the same contract bindings and cases) on a 2 KB tool-call
//! request; measured when the C toolchain is installed (scripts/setup.sh), else said so.
//!
//! Run: `cargo bench --bench languages` (needs scripts/setup.sh: npm and componentize-py). The
//! templates are scaffolded and built once into `target/lang-bench/`. Figures go into
//! BENCHMARKS.md.

use criterion::Criterion;
use railyard::config::Config;
use railyard::engine::{ComponentCache, Engine};
use railyard::payload::{Context, Payload, Rail};
use railyard::policy::PolicySet;
use railyard::scaffold::{scaffold, Lang};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const NAME: &str = "deny-phrases";
/// The C template's policy.
const C_NAME: &str = "confine-paths";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Scaffold and build `lang`'s template once; the component's path.
fn component(lang: Lang, label: &str) -> PathBuf {
    let name = if lang == Lang::C { C_NAME } else { NAME };
    let base = root().join("target/lang-bench");
    let dir = base.join(label);
    let wasm = dir.join(format!("{name}.wasm"));
    if wasm.is_file() {
        return wasm;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&base).unwrap();
    scaffold(lang, name, &dir).unwrap_or_else(|e| panic!("scaffold {label}: {e}"));
    let path = format!(
        "{}:{}",
        root().join(".venv/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let status = Command::new("bash")
        .arg(dir.join("build.sh"))
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", base.join("cargo-target"))
        .status()
        .unwrap();
    assert!(status.success(), "building the {label} template failed");
    wasm
}

/// What a benchmark row runs: the policy's config entry (after its path and isolation), its
/// rail and its request.
struct Policy {
    entry: &'static str,
    rail: Rail,
    payload: Payload,
}

fn config(dir: &Path, label: &str, wasm: &Path, isolation: &str, policy: &Policy) -> PathBuf {
    let path = dir.join(format!("railyard-{label}-{isolation}.toml"));
    std::fs::write(
        &path,
        format!(
            "[[plugins]]\nname = \"p\"\npath = \"{}\"\nisolation = \"{isolation}\"\nmemory_mb = 256\ntimeout_ms = 1000\n{}\n",
            wasm.display(),
            policy.entry
        ),
    )
    .unwrap();
    path
}

fn deny_phrases() -> Policy {
    Policy {
        entry: "rails = [\"input\"]\nconfig = { phrases = [\"ignore previous instructions\", \"reveal your system prompt\", \"developer mode\"], action = \"block\" }",
        rail: Rail::Input,
        payload: payload(),
    }
}

/// The 2 KB conversation ending in a reply of four file-tool calls, every argument a path
/// inside the allowed folder or prose (every string is read, nothing is refused).
fn confine_paths() -> Policy {
    let sentence = "The quarterly report is attached; please review the figures before Friday. ";
    let mut messages = vec![json!({"role": "system", "content": "You are a helpful assistant."})];
    for i in 0..5 {
        messages.push(
            json!({"role": if i % 2 == 0 { "user" } else { "assistant" },
            "content": sentence.repeat(2)}),
        );
    }
    let calls: Vec<_> = (0..4)
        .map(|i| {
            let args = json!({"path": format!("/workspace/reports/q{i}/figures.md"),
                "backup": format!("archive/q{i}/../q{i}-old.md"), "note": sentence, "lines": [1, 40]});
            json!({"id": format!("call_{i}"), "type": "function",
                "function": {"name": "read_file", "arguments": args.to_string()}})
        })
        .collect();
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
    Policy {
        entry:
            "rails = [\"tool_call\"]\nconfig = { allowed = [\"/workspace\"], action = \"reject\" }",
        rail: Rail::ToolCall,
        payload: Payload::from_openai(&json!({ "messages": messages })).unwrap(),
    }
}

/// Whether this machine can build the C template (scripts/setup.sh installs what it needs).
fn c_toolchain() -> bool {
    ["clang", "wasm-ld", "wit-bindgen"].iter().all(|tool| {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    }) && Path::new("/usr/lib/wasm32-wasi/libc.a").is_file()
}

/// The chain benchmark's 2 KB conversation: 8 messages of prose, no denied phrase (every
/// message is scanned, nothing is found).
fn payload() -> Payload {
    let sentence = "The quarterly report is attached; please review the figures before Friday. ";
    let mut messages = vec![json!({"role": "system", "content": "You are a helpful assistant."})];
    for i in 0..7 {
        messages.push(
            json!({"role": if i % 2 == 0 { "user" } else { "assistant" },
            "content": sentence.repeat(3)}),
        );
    }
    Payload::from_openai(&json!({ "messages": messages })).unwrap()
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let scratch = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    for (lang, label) in [
        (Lang::Rust, "rust"),
        (Lang::Js, "js"),
        (Lang::Python, "python"),
    ] {
        let wasm = component(lang, label);
        measure(
            &mut c,
            &mut rows,
            scratch.path(),
            label,
            &wasm,
            &deny_phrases(),
        );
    }
    if c_toolchain() {
        let c_wasm = component(Lang::C, "c");
        let twin = root().join("target/plugins/wasm32-wasip2/release/confine_paths.wasm");
        let policy = confine_paths();
        measure(&mut c, &mut rows, scratch.path(), "c", &c_wasm, &policy);
        measure(
            &mut c,
            &mut rows,
            scratch.path(),
            "c-twin-rust",
            &twin,
            &policy,
        );
    } else {
        rows.push(
            "c       not measured: the C toolchain is not installed (scripts/setup.sh)".into(),
        );
    }
    println!();
    for row in rows {
        println!("{row}");
    }
    c.final_summary();
}

/// One language's row and its two benchmarks.
fn measure(
    c: &mut Criterion,
    rows: &mut Vec<String>,
    scratch: &Path,
    label: &str,
    wasm: &Path,
    policy: &Policy,
) {
    let ctx = Context::default();
    let size = std::fs::metadata(wasm).unwrap().len();
    let cache = scratch.join(format!("cache-{label}"));
    let pooled = config(scratch, label, wasm, "pooled", policy);

    // First load compiles with Cranelift; a second engine on the same cache loads the compiled
    // artifact. Both include describe + configure on one instance.
    let started = Instant::now();
    let engine = Engine::new(ComponentCache::new(Some(cache.clone()))).unwrap();
    let set = PolicySet::build(Config::load(&pooled).unwrap(), &engine).unwrap();
    let compile = started.elapsed();
    drop(set);
    let started = Instant::now();
    let engine = Engine::new(ComponentCache::new(Some(cache))).unwrap();
    let set = PolicySet::build(Config::load(&pooled).unwrap(), &engine).unwrap();
    let cached = started.elapsed();
    let eval = now(set.check(policy.rail, policy.payload.clone(), &ctx));
    assert_eq!(
        eval.verdict.as_str(),
        "allow",
        "{label}: {:?}",
        eval.decisions
    );
    let memory = set.plugins()[0].idle_instance_memory();
    rows.push(format!(
        "{label:<11} component {:>6.2} MB   first load (compile) {:>7.2} s   cached load {:>7.1} ms   warm instance memory {:>6.1} MiB",
        size as f64 / 1e6,
        compile.as_secs_f64(),
        cached.as_secs_f64() * 1e3,
        memory as f64 / (1 << 20) as f64
    ));

    let per_call_config = config(scratch, label, wasm, "per-call", policy);
    let per_call = PolicySet::build(Config::load(&per_call_config).unwrap(), &engine).unwrap();
    let mut group = c.benchmark_group(format!("languages/{label}"));
    group.bench_function("pooled", |b| {
        b.iter(|| now(set.check(policy.rail, policy.payload.clone(), &ctx)))
    });
    group.sample_size(20);
    group.bench_function("per-call (fresh instance)", |b| {
        b.iter(|| now(per_call.check(policy.rail, policy.payload.clone(), &ctx)))
    });
    group.finish();
}

/// A check, finished: none of these plugins waits, so it finishes at its first poll.
fn now<F: std::future::Future>(future: F) -> F::Output {
    futures_util::FutureExt::now_or_never(future).expect("nothing here waits")
}
