//! One rail's chain on a 2 KB request through real compiled plugins: pooled vs per-call
//! isolation, and each bundled plugin alone.
//!
//! Run: `cargo bench --bench chain`. Figures go into BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, Criterion};
use railyard::config::Config;
use railyard::engine::{ComponentCache, Engine};
use railyard::payload::{Context, Payload, Rail};
use railyard::policy::PolicySet;
use serde_json::json;
use std::path::Path;

fn plugin(name: &str) -> String {
    Path::new(env!("RAILYARD_PLUGIN_DIR"))
        .join(format!("{name}.wasm"))
        .display()
        .to_string()
}

fn set(engine: &Engine, toml: &str) -> PolicySet {
    let dir = std::env::temp_dir().join(format!("railyard-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("railyard.toml");
    std::fs::write(&path, toml).unwrap();
    PolicySet::build(Config::load(&path).unwrap(), engine).unwrap_or_else(|e| panic!("{e}"))
}

/// A 2 KB conversation: 8 messages of ordinary prose with one email address to redact.
fn input_payload() -> Payload {
    let sentence = "The quarterly report is attached; please review the figures before Friday. ";
    let mut messages = vec![json!({"role": "system", "content": "You are a helpful assistant."})];
    for i in 0..7 {
        let mut text = sentence.repeat(3);
        if i == 3 {
            text.push_str("Reach me at jane.doe@example.com if anything is unclear.");
        }
        messages
            .push(json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": text}));
    }
    let p = Payload::from_openai(&json!({ "messages": messages })).unwrap();
    let size: usize = p.messages_json().to_string().len();
    assert!((1800..2600).contains(&size), "payload is {size} bytes");
    p
}

fn tool_call_payload() -> Payload {
    Payload::from_openai(&json!({
        "messages": [
            {"role": "user", "content": "What's the weather in Paris for the next 3 days?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": \"3\"}"}}]}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "required": ["city"], "additionalProperties": false,
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}}}}}]
    }))
    .unwrap()
}

/// ~1 MiB of mixed text: prose with a personal value or a look-alike every ~200 bytes.
fn pii_corpus() -> Payload {
    let prose = "The quarterly report is ready for review; the deployment pipeline failed twice \
                 overnight, so we rolled back at 03:00 and will retry after the fix lands. ";
    let values = [
        "jane.doe@example.com",
        "+44 20 7946 0958",
        "4111 1111 1111 1111",
        "order #123456789012",
        "536-22-1234",
        "GB82 WEST 1234 5698 7654 32",
        "version 1.2.3.4",
        "10.20.30.40",
        "550e8400-e29b-41d4-a716-446655440000",
        "AKIAIOSFODNN7EXAMPLE",
    ];
    let mut text = String::with_capacity(1 << 20);
    let mut i = 0;
    while text.len() < 1 << 20 {
        text.push_str(prose);
        text.push_str(values[i % values.len()]);
        text.push(' ');
        i += 1;
    }
    Payload::from_openai(&json!({"messages": [{"role": "user", "content": text}]})).unwrap()
}

// The hostile text pii-filter's own throughput test uses (long digit runs, near-misses under
// their types' words, escapes back to back, base64 three levels deep).
include!("../../plugins/pii-filter/src/adversarial.rs");

fn bench(c: &mut Criterion) {
    let cache = std::env::temp_dir().join("railyard-bench-cache");
    let engine = Engine::new(ComponentCache::new(Some(cache))).unwrap();
    let ctx = Context {
        request_id: "bench".into(),
        ..Context::default()
    };
    let input = input_payload();
    let calls = tool_call_payload();

    let mut group = c.benchmark_group("input-rail-2KB");
    for isolation in ["pooled", "per-call"] {
        let s = set(
            &engine,
            &format!(
                "[[plugins]]\nname = \"pii\"\npath = \"{}\"\nisolation = \"{isolation}\"\n",
                plugin("pii_filter")
            ),
        );
        group.bench_function(format!("pii/{isolation}"), |b| {
            b.iter(|| now(s.check(Rail::Input, input.clone(), &ctx)))
        });
    }
    let noop = set(
        &engine,
        &format!(
            "[[plugins]]\nname = \"noop\"\npath = \"{}\"\nconfig = {{ mode = \"allow\" }}\n",
            plugin("scripted")
        ),
    );
    group.bench_function("noop-plugin/pooled", |b| {
        b.iter(|| now(noop.check(Rail::Input, input.clone(), &ctx)))
    });
    group.finish();

    let corpus = pii_corpus();
    let bytes = corpus.messages_json().to_string().len() as u64;
    let pii = set(
        &engine,
        &format!(
            "[[plugins]]\nname = \"pii\"\npath = \"{}\"\n",
            plugin("pii_filter")
        ),
    );
    let mut group = c.benchmark_group("pii-throughput");
    group.throughput(criterion::Throughput::Bytes(bytes));
    group.bench_function("input-rail-1MiB", |b| {
        b.iter(|| now(pii.check(Rail::Input, corpus.clone(), &ctx)))
    });
    let hostile = Payload::from_openai(
        &json!({"messages": [{"role": "user", "content": adversarial(1 << 20)}]}),
    )
    .unwrap();
    group.throughput(criterion::Throughput::Bytes(
        hostile.messages_json().to_string().len() as u64,
    ));
    group.bench_function("input-rail-adversarial-1MiB", |b| {
        b.iter(|| now(pii.check(Rail::Input, hostile.clone(), &ctx)))
    });
    group.finish();

    let mut group = c.benchmark_group("tool-call-rail");
    for (name, file) in [
        ("normalise", "normalise"),
        ("allowlist", "allowlist"),
        ("schema-validator", "schema_validator"),
    ] {
        for isolation in ["pooled", "per-call"] {
            let s = set(
                &engine,
                &format!(
                    "[[plugins]]\nname = \"{name}\"\npath = \"{}\"\nisolation = \"{isolation}\"\n",
                    plugin(file)
                ),
            );
            group.bench_function(format!("{name}/{isolation}"), |b| {
                b.iter(|| now(s.check(Rail::ToolCall, calls.clone(), &ctx)))
            });
        }
    }
    let bundled = PolicySet::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/railyard.toml"),
        &engine,
    )
    .unwrap();
    group.bench_function(
        "bundled-chain (normalise, allowlist, schema-validator)",
        |b| b.iter(|| now(bundled.check(Rail::ToolCall, calls.clone(), &ctx))),
    );
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_secs(1)).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);

/// A check, finished: none of these plugins waits, so it finishes at its first poll.
fn now<F: std::future::Future>(future: F) -> F::Output {
    futures_util::FutureExt::now_or_never(future).expect("nothing here waits")
}
