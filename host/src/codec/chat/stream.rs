//! The chat door's stream codec: every chunk's choices are split into text, tool-call fragments,
//! finish reasons and the rest; Railyard's own chunks reuse the backend's top-level fields.
//!
//! A model streams its reply a token or two per chunk, so the common chunk (text for a choice,
//! maybe its finish, nothing else) is read without building a `Value` and our text chunks are
//! written straight from the backend's fields serialised once; every other chunk goes the
//! general way.

use super::super::sse;
use super::super::stream::{Down, Finish, Frame, StreamCodec, Up};
use serde_json::{json, Map, Value};

/// Chat streaming: every chunk's choices are split into text, tool-call fragments, finish
/// reasons and the rest (role, refusal, logprobs: passed on at once); Railyard's own chunks
/// reuse the backend's top-level fields (id, model, created).
#[derive(Default)]
pub struct ChatStream {
    template: Option<Map<String, Value>>,
}

impl ChatStream {
    fn chunk(&self, choices: Vec<Value>) -> Value {
        let mut obj = self.template.clone().unwrap_or_else(|| {
            let mut m = Map::new();
            m.insert("object".into(), json!("chat.completion.chunk"));
            m
        });
        obj.insert("choices".into(), Value::Array(choices));
        Value::Object(obj)
    }

    fn choice(index: u32, delta: Value, finish: Value) -> Value {
        json!({"index": index, "delta": delta, "finish_reason": finish})
    }
}

impl StreamCodec for ChatStream {
    fn decode(&mut self, event: sse::SseEvent) -> Result<Vec<Up>, String> {
        if event.data.trim() == "[DONE]" {
            return Ok(vec![Up::Done]);
        }
        let Ok(Value::Object(mut chunk)) = serde_json::from_str::<Value>(&event.data) else {
            return Err("an event that is not a JSON object".into());
        };
        if chunk.contains_key("error") {
            return Ok(vec![Up::Error(Frame {
                event: event.event,
                data: Value::Object(chunk),
            })]);
        }
        let choices = match chunk.remove("choices") {
            Some(Value::Array(c)) => c,
            _ => Vec::new(),
        };
        let usage = chunk.remove("usage");
        if self.template.is_none() {
            self.template = Some(chunk);
        }
        let mut up = Vec::new();
        for choice in choices {
            let Value::Object(mut choice) = choice else {
                continue;
            };
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0) as u32;
            let finish = choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .map(str::to_string);
            let mut delta = match choice.remove("delta") {
                Some(Value::Object(d)) => d,
                _ => Map::new(),
            };
            let content = delta.remove("content");
            let fragments = delta.remove("tool_calls");
            // Whatever else the delta carries (role, refusal, ...) passes at once.
            if !delta.is_empty() {
                up.push(Up::Pass(Frame {
                    event: None,
                    data: self.chunk(vec![Self::choice(index, Value::Object(delta), Value::Null)]),
                }));
            }
            if let Some(Value::Array(fragments)) = fragments {
                for f in fragments {
                    up.push(call_fragment(index, f));
                }
            }
            if let Some(Value::String(text)) = content {
                up.push(Up::Text {
                    choice: index,
                    part: index as u64,
                    text,
                });
            }
            if finish.is_some() {
                up.push(Up::PartEnd {
                    choice: index,
                    part: index as u64,
                });
                up.push(Up::ChoiceEnd {
                    choice: index,
                    finish,
                });
            }
        }
        if let Some(usage) = usage.filter(|u| !u.is_null()) {
            let mut c = self.chunk(Vec::new());
            c["usage"] = usage;
            up.push(Up::Pass(Frame {
                event: None,
                data: c,
            }));
        }
        Ok(up)
    }

    fn encode(&mut self, down: Down, out: &mut Vec<u8>) {
        let data = match down {
            Down::Pass(frame) => frame.data,
            Down::Text { choice, text, .. } => self.chunk(vec![Self::choice(
                choice,
                json!({"content": text}),
                Value::Null,
            )]),
            Down::PartEnd { .. } => return,
            Down::Calls { choice, calls } => {
                let calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let mut v = c.to_openai();
                        v["index"] = json!(i);
                        v
                    })
                    .collect();
                self.chunk(vec![Self::choice(
                    choice,
                    json!({"tool_calls": calls}),
                    Value::Null,
                )])
            }
            Down::ChoiceEnd { choice, finish } => {
                let reason = match finish {
                    Finish::Filtered => json!("content_filter"),
                    Finish::ToolCalls => json!("tool_calls"),
                    Finish::Backend(reason) => json!(reason),
                };
                self.chunk(vec![Self::choice(choice, json!({}), reason)])
            }
            Down::Done { railyard } => {
                if let Some(railyard) = railyard {
                    let mut c = self.chunk(Vec::new());
                    c["railyard"] = railyard;
                    sse::write(out, None, &c.to_string());
                }
                sse::write(out, None, "[DONE]");
                return;
            }
            Down::Refused {
                finish: true,
                text,
                railyard,
                ..
            } => {
                let text = self.chunk(vec![Self::choice(0, json!({"content": text}), Value::Null)]);
                sse::write(out, None, &text.to_string());
                let mut end = self.chunk(vec![Self::choice(0, json!({}), json!("content_filter"))]);
                end["railyard"] = railyard;
                sse::write(out, None, &end.to_string());
                sse::write(out, None, "[DONE]");
                return;
            }
            Down::Refused {
                message, railyard, ..
            } => {
                let (kind, code) = super::super::error::POLICY_VIOLATION;
                let mut error = super::super::error::openai(&message, kind, code, None);
                error["railyard"] = railyard;
                sse::write(out, None, &error.to_string());
                sse::write(out, None, "[DONE]");
                return;
            }
            Down::BackendError(frame) => {
                sse::write(out, None, &frame.data.to_string());
                sse::write(out, None, "[DONE]");
                return;
            }
            Down::Error {
                message,
                kind,
                code,
            } => {
                let error = super::super::error::openai(&message, &kind, &code, None);
                sse::write(out, None, &error.to_string());
                sse::write(out, None, "[DONE]");
                return;
            }
        };
        sse::write(out, None, &data.to_string());
    }
}

/// One `delta.tool_calls[]` fragment: a function call's pieces, or a hosted call (a `type` and
/// no `function` object).
fn call_fragment(choice: u32, f: Value) -> Up {
    let Value::Object(mut f) = f else {
        return Up::Call {
            choice,
            index: 0,
            id: None,
            name: None,
            kind: None,
            arguments: String::new(),
            extra: Map::new(),
        };
    };
    let index = f.remove("index").and_then(|i| i.as_u64()).unwrap_or(0);
    let id = f.remove("id").and_then(|v| v.as_str().map(str::to_string));
    let kind = f
        .remove("type")
        .and_then(|v| v.as_str().map(str::to_string));
    let (name, arguments) = match f.remove("function") {
        Some(func) => (
            func.get("name").and_then(Value::as_str).map(str::to_string),
            func.get("arguments")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        ),
        None => (None, String::new()),
    };
    Up::Call {
        choice,
        index,
        id,
        name,
        kind,
        arguments,
        extra: f,
    }
}
