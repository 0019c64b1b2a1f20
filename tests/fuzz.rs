//! Fuzzing every decoder (#20), bounded so CI runs it: each target replays its corpus
//! (`tests/fuzz/corpus/<target>/`, in the repository) and then mutates it (bit flips, byte
//! edits, JSON tokens, splices) for `RAILYARD_FUZZ_SECS` seconds (default 2; e.g.
//! `RAILYARD_FUZZ_SECS=600 cargo test -- fuzz_` for a longer run). A target fails on a panic or
//! on a broken invariant, and the input that did it is written to `target/fuzz-failures/` (add it
//! to the corpus once fixed).
//!
//! Targets: the three doors' request decoders (and re-encoding what they decoded must decode to
//! the same conversation: what the rails judged is what the backend gets), the backends' reply
//! decoders, the SSE parser (however the bytes are split), the config file, the keys file, case
//! files (run through the real chain), and plugin verdicts (any edits, rejections or block, on any
//! rail: applied or turned into a fault, never a panic, never half-applied). Their bodies are in
//! `tests/fuzz/targets.rs`, shared with the coverage-guided cargo-fuzz targets in `fuzz/`.

#[path = "fuzz/targets.rs"]
mod targets;

use crate::support::*;
use railyard::config::Config;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// xorshift64*: deterministic per target, so a CI failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Tokens that make decoders take their rarer paths.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1e999",
    "-0.0",
    "18446744073709551616",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\\n",
    "\n\n",
    "data: ",
    "event: ",
    "[DONE]",
    "\r\n",
    "\"role\"",
    "\"content\"",
    "\"tool_calls\"",
    "\"tools\"",
    "\"type\"",
    "\"function\"",
    "\"arguments\"",
    "\"id\"",
    "\"name\"",
    "\"text\"",
    "\"input\"",
    "\"messages\"",
    "\"tool_use\"",
    "\"tool_result\"",
    "\"function_call\"",
    "\"function_call_output\"",
    "\"call_id\"",
    "\"stream\"",
    "\"railyard\"",
    "\"model\"",
    "[[plugins]]",
    "[[keys]]",
    "[server]",
    "[tenants.t]",
    "rails = []",
    "= \"",
    "\u{feff}",
    "é",
    "\u{1F600}",
    "\\\"",
];

fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = out.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                out[i] = rng.next() as u8;
            }
            2 | 3 => {
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                let at = rng.below(len + 1);
                out.splice(at..at, token.iter().copied());
            }
            4 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(16)).min(len);
                out.drain(a..b);
            }
            5 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                let piece = out[a..b].to_vec();
                let at = rng.below(len + 1);
                out.splice(at..at, piece);
            }
            6 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                if !other.is_empty() {
                    let a = rng.below(other.len());
                    let b = (a + 1 + rng.below(128)).min(other.len());
                    let at = rng.below(len + 1);
                    out.splice(at..at, other[a..b].iter().copied());
                }
            }
            _ if len > 0 => {
                // Truncate: half a request, half an event.
                out.truncate(rng.below(len));
            }
            _ => out.push(rng.next() as u8),
        }
    }
    out.truncate(64 << 10);
    out
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = root().join("tests/fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} has no seeds", dir.display());
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

fn budget() -> Duration {
    let secs = std::env::var("RAILYARD_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(2.0);
    Duration::from_secs_f64(secs)
}

/// Replay `target`'s corpus through `check`, then mutate it for the time budget. `check` returns
/// an error for a broken invariant; a panic counts as one.
fn fuzz(target: &str, mut check: impl FnMut(&[u8]) -> Result<(), String>) {
    let seeds = corpus(target);
    let mut rng =
        Rng(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64 ^ (target.as_bytes()[0] as u64) << 32);
    let fail = |input: &[u8], why: String| -> ! {
        let dir = root().join("target/fuzz-failures");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!(
            "{target}-{}",
            &railyard::util::sha256_hex(input)[..16]
        ));
        std::fs::write(&file, input).unwrap();
        panic!(
            "fuzz target {target}: {why}\ninput saved to {}",
            file.display()
        );
    };
    let mut one = |input: &[u8]| match catch_unwind(AssertUnwindSafe(|| check(input))) {
        Ok(Ok(())) => {}
        Ok(Err(why)) => fail(input, why),
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            fail(input, format!("panicked: {why}"))
        }
    };
    for seed in &seeds {
        one(seed);
    }
    let started = Instant::now();
    let mut runs = 0u64;
    while started.elapsed() < budget() {
        let base = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, base, &seeds);
        one(&input);
        runs += 1;
    }
    eprintln!(
        "fuzz {target}: {} seeds, {runs} mutated inputs",
        seeds.len()
    );
}

#[test]
fn fuzz_chat_request() {
    fuzz("chat", targets::chat);
}

#[test]
fn fuzz_responses_request() {
    fuzz("responses", targets::responses);
}

#[test]
fn fuzz_messages_request() {
    fuzz("messages", targets::messages);
}

#[test]
fn fuzz_backend_replies() {
    fuzz("reply", targets::replies);
}

#[test]
fn fuzz_sse_parser() {
    fuzz("sse", targets::sse);
}

#[test]
fn fuzz_config_file() {
    fuzz("config", targets::config);
}

#[test]
fn fuzz_keys_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("railyard.toml");
    std::fs::write(&config, "[auth]\nkeys_file = \"keys.toml\"\n").unwrap();
    let keys = dir.path().join("keys.toml");
    fuzz("keys", |data| {
        std::fs::write(&keys, data).unwrap();
        let _ = Config::load(&config);
        Ok(())
    });
}

#[test]
fn fuzz_case_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("railyard.toml"),
        format!(
            "[[plugins]]\nname = \"pii\"\npath = \"{}\"\n",
            plugin("pii_filter").display()
        ),
    )
    .unwrap();
    let tests = dir.path().join("tests");
    std::fs::create_dir_all(&tests).unwrap();
    let file = tests.join("case.json");
    let mut runner = railyard::cases::Runner::new().unwrap();
    fuzz("cases", |data| {
        std::fs::write(&file, data).unwrap();
        let outcomes = runner.run_file(&file);
        if outcomes.is_empty() && targets::object(data).is_some_and(|o| o.get("rail").is_some()) {
            return Err("a one-case file gave no outcome".into());
        }
        Ok(())
    });
}

#[test]
fn fuzz_plugin_verdicts() {
    let base = targets::verdict_base();
    fuzz("verdict", |data| targets::verdict(&base, data));
}
