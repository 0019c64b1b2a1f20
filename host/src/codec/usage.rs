//! What a model's answer says it used: the `usage` object of each door, in a whole answer or in
//! the events of a stream (OpenAI chat: `prompt_tokens`/`completion_tokens`, in the last chunk
//! when the client asked for it; Responses: `input_tokens`/`output_tokens` under `response` in
//! `response.completed`; Anthropic: `input_tokens` under `message` in `message_start`, the
//! running `output_tokens` in `message_delta`).

use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};

/// Tokens in and out.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// The prompt's tokens.
    pub input: u64,
    /// The answer's tokens.
    pub output: u64,
}

impl Usage {
    /// In and out together (a backend's absurd counts saturate rather than wrap).
    pub fn total(self) -> u64 {
        self.input.saturating_add(self.output)
    }
}

/// The usage `value` (an answer, or a stream event's data) reports, wherever its door puts it.
pub fn of(value: &Value) -> Option<Usage> {
    let usage = [
        &value["usage"],
        &value["message"]["usage"],
        &value["response"]["usage"],
    ]
    .into_iter()
    .find(|u| u.is_object())?;
    let n = |keys: &[&str]| keys.iter().find_map(|k| usage[*k].as_u64());
    let (input, output) = (
        n(&["prompt_tokens", "input_tokens"]),
        n(&["completion_tokens", "output_tokens"]),
    );
    // An empty `usage` (or one of other counts) reports nothing: not a free answer.
    if input.is_none() && output.is_none() {
        return None;
    }
    Some(Usage {
        input: input.unwrap_or(0),
        output: output.unwrap_or(0),
    })
}

/// The usage a stream has reported so far: each count the largest seen (Anthropic's running
/// `output_tokens` grows; a count given once stays); and what the model wrote (text and calls'
/// names and arguments, in bytes), and whether its final count came (chat's usage chunk,
/// Responses' `response.completed`, Anthropic's `message_delta`: not the count that opens an
/// Anthropic stream).
#[derive(Debug, Default)]
pub struct Meter {
    input: AtomicU64,
    output: AtomicU64,
    written: AtomicU64,
    last: std::sync::atomic::AtomicBool,
}

impl Meter {
    /// Note a stream event's data, when it holds a usage.
    pub fn note(&self, data: &str) {
        // Most events hold none: parsed only when the word is there.
        if !data.contains("\"usage\"") {
            return;
        }
        let Ok(value) = serde_json::from_str::<Value>(data) else {
            return;
        };
        if let Some(u) = of(&value) {
            self.input.fetch_max(u.input, Ordering::Relaxed);
            self.output.fetch_max(u.output, Ordering::Relaxed);
            if !value["message"]["usage"].is_object() {
                self.last.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Note `bytes` more of what the model wrote.
    pub fn wrote(&self, bytes: usize) {
        self.written.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Bytes the model wrote so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Whether the stream's final count came.
    pub fn last(&self) -> bool {
        self.last.load(Ordering::Relaxed)
    }

    /// What was reported, if anything.
    pub fn usage(&self) -> Option<Usage> {
        let u = Usage {
            input: self.input.load(Ordering::Relaxed),
            output: self.output.load(Ordering::Relaxed),
        };
        (u.total() > 0).then_some(u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_doors_usage_is_read_where_it_puts_it() {
        let chat =
            json!({"usage": {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42}});
        assert_eq!(of(&chat).map(Usage::total), Some(42));
        let responses = json!({"type": "response.completed", "response": {"usage": {"input_tokens": 5, "output_tokens": 7}}});
        assert_eq!(of(&responses).map(Usage::total), Some(12));
        assert_eq!(of(&json!({"choices": []})), None);
        assert_eq!(
            of(&json!({"usage": {}})),
            None,
            "an empty usage reports nothing"
        );
        // Anthropic's stream: input in message_start, the running output in message_delta.
        let meter = Meter::default();
        meter.note(r#"{"type": "message_start", "message": {"usage": {"input_tokens": 20, "output_tokens": 1}}}"#);
        assert!(
            !meter.last(),
            "the count that opens the stream is not its last"
        );
        meter.note(r#"{"type": "content_block_delta", "delta": {"text": "hi"}}"#);
        meter.note(r#"{"type": "message_delta", "usage": {"output_tokens": 15}}"#);
        assert!(meter.last());
        assert_eq!(
            meter.usage(),
            Some(Usage {
                input: 20,
                output: 15
            })
        );
        assert_eq!(Meter::default().usage(), None);
        let absurd = json!({"usage": {"input_tokens": u64::MAX, "output_tokens": 7}});
        assert_eq!(of(&absurd).map(Usage::total), Some(u64::MAX));
    }
}
