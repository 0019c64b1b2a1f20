//! The same policy in Rust, JavaScript and Python: the `deny-phrases` plugin that
//! `railyard new --lang rust|js|python` scaffolds (identical logic in each template), built from
//! the templates, judging the same 2 KB request. Measures what a policy author chooses between:
//! component size, first compile, cached load, memory of a warm instance, the cost of a call on a
//! pooled instance and of a call on a fresh instance (`isolation = "per-call"`).
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

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Scaffold and build `lang`'s template once; the component's path.
fn component(lang: Lang, label: &str) -> PathBuf {
    let base = root().join("target/lang-bench");
    let dir = base.join(label);
    let wasm = dir.join(format!("{NAME}.wasm"));
    if wasm.is_file() {
        return wasm;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&base).unwrap();
    scaffold(lang, NAME, &dir).unwrap_or_else(|e| panic!("scaffold {label}: {e}"));
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

fn config(dir: &Path, wasm: &Path, isolation: &str) -> PathBuf {
    let path = dir.join(format!("railyard-{isolation}.toml"));
    std::fs::write(
        &path,
        format!(
            "[[plugins]]\nname = \"{NAME}\"\npath = \"{}\"\nrails = [\"input\"]\nisolation = \"{isolation}\"\nmemory_mb = 256\ntimeout_ms = 1000\nconfig = {{ phrases = [\"ignore previous instructions\", \"reveal your system prompt\", \"developer mode\"], action = \"block\" }}\n",
            wasm.display()
        ),
    )
    .unwrap();
    path
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
    let ctx = Context::default();
    let payload = payload();
    let scratch = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    for (lang, label) in [
        (Lang::Rust, "rust"),
        (Lang::Js, "js"),
        (Lang::Python, "python"),
    ] {
        let wasm = component(lang, label);
        let size = std::fs::metadata(&wasm).unwrap().len();
        let cache = scratch.path().join(format!("cache-{label}"));
        let pooled = config(scratch.path(), &wasm, "pooled");

        // First load compiles with Cranelift; a second engine on the same cache loads the
        // compiled artifact. Both include describe + configure on one instance.
        let started = Instant::now();
        let engine = Engine::new(ComponentCache::new(Some(cache.clone()))).unwrap();
        let set = PolicySet::build(Config::load(&pooled).unwrap(), &engine).unwrap();
        let compile = started.elapsed();
        drop(set);
        let started = Instant::now();
        let engine = Engine::new(ComponentCache::new(Some(cache))).unwrap();
        let set = PolicySet::build(Config::load(&pooled).unwrap(), &engine).unwrap();
        let cached = started.elapsed();
        let eval = set.check(Rail::Input, payload.clone(), &ctx);
        assert_eq!(eval.verdict.as_str(), "allow", "{:?}", eval.decisions);
        let memory = set.plugins()[0].idle_instance_memory();
        rows.push(format!(
            "{label:<7} component {:>6.2} MB   first load (compile) {:>7.2} s   cached load {:>7.1} ms   warm instance memory {:>6.1} MiB",
            size as f64 / 1e6,
            compile.as_secs_f64(),
            cached.as_secs_f64() * 1e3,
            memory as f64 / (1 << 20) as f64
        ));

        let per_call_config = config(scratch.path(), &wasm, "per-call");
        let per_call = PolicySet::build(Config::load(&per_call_config).unwrap(), &engine).unwrap();
        let mut group = c.benchmark_group(format!("languages/{label}"));
        group.bench_function("pooled", |b| {
            b.iter(|| set.check(Rail::Input, payload.clone(), &ctx))
        });
        group.sample_size(20);
        group.bench_function("per-call (fresh instance)", |b| {
            b.iter(|| per_call.check(Rail::Input, payload.clone(), &ctx))
        });
        group.finish();
    }
    println!();
    for row in rows {
        println!("{row}");
    }
    c.final_summary();
}
