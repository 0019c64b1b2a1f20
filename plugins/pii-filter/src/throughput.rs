//! Native scan throughput on the same kind of text as the host benchmark
//! (`cargo bench --bench chain -- pii-throughput`): prose with a personal value or a look-alike
//! every ~200 bytes, 1 MiB, through the whole redaction path.
//!
//! `cargo test -p pii-filter --release throughput -- --ignored --nocapture`

use crate::config::Policy;
use crate::types::PiiType;
use std::time::Instant;

fn corpus(values: &[&str]) -> String {
    let prose = "The quarterly report is ready for review; the deployment pipeline failed twice \
                 overnight, so we rolled back at 03:00 and will retry after the fix lands. ";
    let mut text = String::with_capacity(1 << 20);
    let mut i = 0;
    while text.len() < 1 << 20 {
        text.push_str(prose);
        text.push_str(values[i % values.len()]);
        text.push(' ');
        i += 1;
    }
    text
}

include!("adversarial.rs");

fn measure(name: &str, text: &str) {
    if std::env::var("PII_ONLY").is_ok_and(|only| !name.starts_with(&only)) {
        return;
    }
    let policy = Policy::default();
    // `PII_ROUNDS=1` for an instruction count under valgrind, which is steadier than time on a
    // shared machine.
    let rounds = std::env::var("PII_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(40);
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let mut counts = [0; PiiType::COUNT];
        let t = Instant::now();
        let out = crate::redact::text(text, &policy, &mut counts);
        best = best.min(t.elapsed().as_secs_f64());
        assert!(out.is_ok());
    }
    let mib = text.len() as f64 / (1 << 20) as f64;
    println!("{name}: {:.0} MiB/s (best of {rounds})", mib / best);
}

#[test]
#[ignore]
fn throughput() {
    // The host benchmark's values (ASCII).
    let ascii = [
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
    measure("ascii mixed", &corpus(&ascii));
    // The same with some non-ASCII prose, which takes the normalising path.
    let mut mixed: Vec<&str> = ascii.to_vec();
    mixed.push("Grüße aus Köln — bis später");
    measure("non-ascii mixed", &corpus(&mixed));
}

/// The hostile text (`adversarial.rs`): how long a MiB of it takes, against the plugin's
/// 100 ms deadline.
#[test]
#[ignore]
fn adversarial_input() {
    let text = adversarial(1 << 20);
    measure("adversarial", &text);
    let found = crate::detect::scan(&text, None);
    println!(
        "adversarial: {} bytes, {} findings",
        text.len(),
        found.len()
    );
}
