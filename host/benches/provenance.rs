//! Signed tool-call ids: what signing a call the daemon relays, and verifying one that comes
//! back (and giving the model's id back), cost per call. Arguments of a typical call (~100 bytes
//! of JSON) and a large one (~4 KB).
//!
//! Run: `cargo bench --bench provenance`.

use criterion::{criterion_group, criterion_main, Criterion};
use railyard::config::{ProvenanceConfig, SigningKey};
use railyard::model::{Message, Payload, ToolCall};
use railyard::rails::provenance;
use std::hint::black_box;
use std::sync::Arc;

fn config() -> ProvenanceConfig {
    ProvenanceConfig {
        keys: Arc::new(vec![SigningKey {
            id: "k1".into(),
            secret: vec![7; 32],
        }]),
        ..ProvenanceConfig::default()
    }
}

fn call(arguments: String) -> ToolCall {
    ToolCall::function(
        "call_8f2a61c0d9b34e7f".into(),
        "send_email".into(),
        arguments,
    )
}

fn bench(c: &mut Criterion) {
    let cfg = config();
    let tenants = ["default", "support", "payments"];
    let small = r#"{"to": "bob@example.com", "subject": "Quarterly report", "body": "See the attached figures."}"#.to_string();
    let large = format!(
        r#"{{"to": "bob@example.com", "body": "{}"}}"#,
        "lorem ipsum ".repeat(340)
    );
    for (name, args) in [("100B", small), ("4KB", large)] {
        c.bench_function(&format!("provenance/sign/{name}"), |b| {
            b.iter(|| {
                let mut c = call(args.clone());
                provenance::sign(&cfg.keys, "support", &mut c, 1_795_000_000);
                black_box(c)
            })
        });
        let mut signed = call(args.clone());
        provenance::sign(
            &cfg.keys,
            "support",
            &mut signed,
            railyard::util::unix_secs(),
        );
        let payload = Payload {
            messages: vec![Message::reply(None, vec![signed])],
            ..Payload::default()
        };
        c.bench_function(&format!("provenance/verify-and-restore/{name}"), |b| {
            b.iter(|| {
                let mut p = payload.clone();
                black_box(provenance::check_history(
                    &cfg,
                    &tenants,
                    "support",
                    &mut p,
                    railyard::util::unix_secs(),
                ))
            })
        });
        // The clone the verify bench includes, alone, to subtract.
        c.bench_function(&format!("provenance/clone-baseline/{name}"), |b| {
            b.iter(|| black_box(payload.clone()))
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench
}
criterion_main!(benches);
