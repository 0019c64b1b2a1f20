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
//! rail: applied or turned into a fault, never a panic, never half-applied).

use crate::support::*;
use railyard::chain::{run, Evaluate, Mode, OnError};
use railyard::codec::sse::SseParser;
use railyard::codec::{chat::Chat, messages::Messages, responses::Responses, Codec};
use railyard::config::Config;
use railyard::engine::verdict::{Edit, RawCall, RawContent, RawMessage, Rejection, Target};
use railyard::engine::{EvalRequest, PluginFault, PluginVerdict, Prepared};
use railyard::model::{Context, Payload, Rail};
use serde_json::{json, Map, Value};
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

fn object(data: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice::<Value>(data) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// Decoding a request, re-encoding it and decoding that gives the same conversation.
fn round_trip<C: Codec>(data: &[u8]) -> Result<(), String> {
    let Some(body) = object(data) else {
        return Ok(());
    };
    let Ok((request, payload)) = C::decode_request(body) else {
        return Ok(());
    };
    for edited in [false, true] {
        let bytes = C::encode_request(&request, &payload, edited);
        let again = object(&bytes).ok_or("the re-encoded request is not a JSON object")?;
        let (_, decoded) = C::decode_request(again).map_err(|e| {
            format!("the re-encoded request does not decode (edited: {edited}): {e}")
        })?;
        // Compared as the rails' wire view (a call without `type` gets `"type": "function"`).
        if decoded.to_openai() != payload.to_openai() {
            return Err(format!(
                "the backend would get another conversation than the rails judged (edited: {edited}):\n{payload:?}\n{decoded:?}"
            ));
        }
    }
    Ok(())
}

#[test]
fn fuzz_chat_request() {
    fuzz("chat", round_trip::<Chat>);
}

#[test]
fn fuzz_responses_request() {
    fuzz("responses", round_trip::<Responses>);
}

#[test]
fn fuzz_messages_request() {
    fuzz("messages", round_trip::<Messages>);
}

#[test]
fn fuzz_backend_replies() {
    fuzz("reply", |data| {
        if let Some(body) = object(data) {
            let _ = Chat::decode_reply(body.clone());
            let _ = Responses::decode_reply(body.clone());
            let _ = Messages::decode_reply(body);
        }
        Ok(())
    });
}

#[test]
fn fuzz_sse_parser() {
    let events = |data: &[u8], cuts: &[usize]| -> Result<Vec<String>, String> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        let mut at = 0;
        for &cut in cuts.iter().chain([data.len()].iter()) {
            let cut = cut.clamp(at, data.len());
            parser.push(&data[at..cut])?;
            at = cut;
            while let Some(block) = parser.next_block() {
                out.push(block);
            }
        }
        Ok(out)
    };
    fuzz("sse", |data| {
        let whole = events(data, &[]);
        // The same bytes split at three places derived from the input.
        let n = data.len().max(1);
        let seed = data
            .iter()
            .fold(7usize, |h, b| h.wrapping_mul(31) ^ *b as usize);
        let mut cuts = vec![seed % n, (seed / 7) % n, (seed / 49) % n];
        cuts.sort();
        let split = events(data, &cuts);
        match (whole, split) {
            (Ok(a), Ok(b)) if a != b => Err(format!(
                "splitting the bytes changed the events: {a:?} vs {b:?}"
            )),
            (Ok(_), Err(e)) => Err(format!("splitting the bytes made them invalid: {e}")),
            _ => Ok(()),
        }
    });
}

#[test]
fn fuzz_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("railyard.toml");
    fuzz("config", |data| {
        let _ = Config::parse(&path, &String::from_utf8_lossy(data));
        Ok(())
    });
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
        if outcomes.is_empty() && object(data).is_some_and(|o| o.get("rail").is_some()) {
            return Err("a one-case file gave no outcome".into());
        }
        Ok(())
    });
}

/// A plugin that answers whatever verdict the fuzzer built.
struct Scripted(PluginVerdict);

impl Evaluate for Scripted {
    fn id(&self) -> &str {
        "fuzzed"
    }
    fn evaluate(
        &self,
        _: &EvalRequest<'_>,
        _: &mut Prepared,
    ) -> Result<PluginVerdict, PluginFault> {
        Ok(self.0.clone())
    }
}

/// Bytes read as choices: what a plugin could answer.
struct Choices<'a>(&'a [u8], usize);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.0.get(self.1).copied().unwrap_or(0);
        self.1 += 1;
        b
    }
    fn index(&mut self) -> u32 {
        match self.byte() {
            250..=255 => u32::MAX - self.byte() as u32,
            b => (b % 8) as u32,
        }
    }
    fn text(&mut self) -> String {
        const WORDS: &[&str] = &[
            "",
            "x",
            "{}",
            "{\"a\":1}",
            "[{\"type\":\"text\",\"text\":\"hi\"}]",
            "[1]",
            "{\"n\":",
            "user",
            "assistant",
            "tool",
            "system",
            "c1",
            "get_time",
            "\u{0}",
            "é\u{1F600}",
            "tools.0.function",
            "temperature",
            "0.5",
            "null",
        ];
        let n = self.byte() as usize;
        if n >= 240 {
            let len = self.byte() as usize * 64;
            return "a".repeat(len);
        }
        WORDS[n % WORDS.len()].to_string()
    }
    fn content(&mut self) -> RawContent {
        if self.byte().is_multiple_of(2) {
            RawContent::Text(self.text())
        } else {
            RawContent::Parts(self.text())
        }
    }
    fn call(&mut self) -> RawCall {
        RawCall {
            id: self.text(),
            kind: if self.byte().is_multiple_of(4) {
                self.text()
            } else {
                "function".into()
            },
            name: self.text(),
            arguments: self.text(),
        }
    }
    fn message(&mut self) -> RawMessage {
        RawMessage {
            role: self.text(),
            content: (!self.byte().is_multiple_of(3)).then(|| self.content()),
            name: (self.byte().is_multiple_of(4)).then(|| self.text()),
            tool_call_id: (self.byte().is_multiple_of(3)).then(|| self.text()),
            tool_calls: (0..self.byte() % 3).map(|_| self.call()).collect(),
        }
    }
    fn edit(&mut self) -> Edit {
        match self.byte() % 10 {
            0 => Edit::Content {
                message: self.index(),
                content: self.content(),
            },
            1 => Edit::Arguments {
                message: self.index(),
                call: self.index(),
                arguments: self.text(),
            },
            2 => Edit::RemoveCall {
                message: self.index(),
                call: self.index(),
            },
            3 => Edit::Replace {
                start: self.index(),
                count: self.index(),
                message: self.message(),
            },
            4 => Edit::Insert {
                before: self.index(),
                message: self.message(),
            },
            5 => Edit::AddCall {
                message: self.index(),
                call: self.call(),
            },
            6 => Edit::HideTool(self.index()),
            7 => Edit::DescribeTool {
                tool: self.index(),
                description: self.text(),
            },
            _ => Edit::Field {
                path: self.text(),
                value: self.text(),
            },
        }
    }
    fn verdict(&mut self) -> PluginVerdict {
        match self.byte() % 4 {
            0 => PluginVerdict::Allow,
            1 => PluginVerdict::Modify {
                edits: (0..self.byte() % 5).map(|_| self.edit()).collect(),
                reason: self.text(),
            },
            2 => PluginVerdict::Reject(
                (0..self.byte() % 4)
                    .map(|_| Rejection {
                        target: if self.byte().is_multiple_of(2) {
                            Target::Message(self.index())
                        } else {
                            Target::Call {
                                message: self.index(),
                                call: self.index(),
                            }
                        },
                        message: self.text(),
                    })
                    .collect(),
            ),
            _ => PluginVerdict::Block(self.text()),
        }
    }
}

#[test]
fn fuzz_plugin_verdicts() {
    let base = payload(json!({
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "time?"}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"UTC\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
            {"role": "assistant", "content": "It is noon.", "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}],
        "tools": [
            {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "lookup", "description": "d"}}],
        "temperature": 0.2
    }));
    let ctx = Context::default();
    fuzz("verdict", |data| {
        let mut choices = Choices(data, 0);
        let rail = Rail::ALL[choices.byte() as usize % Rail::ALL.len()];
        let plugins: Vec<Scripted> = (0..1 + choices.byte() % 3)
            .map(|_| Scripted(choices.verdict()))
            .collect();
        let eval = run(
            rail,
            plugins.iter().map(|p| (p, OnError::Allow, Mode::Enforce)),
            base.clone(),
            &ctx,
            false,
        );
        // Whatever was applied, the payload is still one the wire formats carry.
        let wire = eval.payload.to_openai();
        Payload::from_openai(&wire)
            .map_err(|e| format!("the edited payload is not valid any more: {e}\n{wire}"))?;
        // A verdict that faulted changed nothing: with one plugin, a fault leaves the payload as
        // it was.
        if plugins.len() == 1 && eval.decisions[0].fault.is_some() && eval.payload != base {
            return Err("a faulted verdict was partly applied".into());
        }
        Ok(())
    });
}
