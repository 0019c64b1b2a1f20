//! The chat door's stream codec: every chunk's choices are split into text, tool-call fragments,
//! finish reasons and the rest; Railyard's own chunks reuse the backend's top-level fields.
//!
//! A model streams its reply a token or two per chunk, so the common chunk (text for a choice,
//! maybe its finish, nothing else) is read without building a `Value` and our text chunks are
//! written straight from the backend's fields serialised once; every other chunk goes the
//! general way.

use super::super::sse;
use super::super::stream::{Down, Finish, Frame, Part, StreamCodec, Up};
use super::shape;
use serde_json::{json, Map, Value};

/// Chat streaming: every chunk's choices are split into text, tool-call fragments, finish
/// reasons and the rest (role, refusal, logprobs: passed on at once); Railyard's own chunks
/// reuse the backend's top-level fields (id, model, created).
#[derive(Default)]
pub struct ChatStream {
    template: Option<Map<String, Value>>,
    /// The template as JSON text without its closing brace, made once: how our text chunks
    /// start.
    prefix: Option<String>,
    /// Choices whose call came as the legacy `function_call`, and goes back as one.
    legacy: std::collections::BTreeSet<u32>,
}

/// The text a delta carries beside its content, each streamed as a text part of its own
/// (windowed and judged as the content is) and written back under its own key: the part is the
/// choice's, plus the field's number times 2^32.
const TEXT_FIELDS: [(u64, &str); 4] = [
    (1, "refusal"),
    (2, "reasoning_content"),
    (3, "reasoning"),
    (4, "audio.transcript"),
];

fn text_part(choice: u32, field: u64) -> Part {
    choice as u64 | (field << 32)
}

/// A chunk of the common kind, borrowed from its text: choices carrying only text (or nothing)
/// and maybe a finish reason. Anything it does not list, or lists twice, makes it fail to read,
/// and the chunk goes the general way.
#[derive(serde::Deserialize)]
struct TextChunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<TextChoice<'a>>,
    #[serde(borrow, default)]
    usage: Option<&'a serde_json::value::RawValue>,
}

#[derive(serde::Deserialize)]
struct TextChoice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    finish_reason: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    delta: Option<TextDelta<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TextDelta<'a> {
    #[serde(borrow, default)]
    content: Option<std::borrow::Cow<'a, str>>,
}

impl ChatStream {
    /// The events of a common chunk, once the template is known; `None`: go the general way.
    fn text_only(&self, data: &str) -> Option<Vec<Up>> {
        // The template comes from the first chunk, and an error event is passed whole: both are
        // the general way's (a text that merely contains the word is sent there too).
        if self.template.is_none() || data.contains("\"error\"") {
            return None;
        }
        let chunk: TextChunk = serde_json::from_str(data).ok()?;
        if chunk.usage.is_some() {
            return None;
        }
        let mut up = Vec::with_capacity(chunk.choices.len());
        for choice in chunk.choices {
            let index = choice.index.unwrap_or(0) as u32;
            if let Some(text) = choice.delta.and_then(|d| d.content) {
                up.push(Up::Text {
                    choice: index,
                    part: index as u64,
                    text: text.into_owned(),
                });
            }
            if let Some(finish) = choice.finish_reason {
                up.push(Up::PartEnd {
                    choice: index,
                    part: index as u64,
                });
                up.push(Up::ChoiceEnd {
                    choice: index,
                    finish: Some(finish.into_owned()),
                });
            }
        }
        Some(up)
    }

    /// A chunk with `text` for `choice`, written from the serialised template (what
    /// `chunk(...).to_string()` writes, without building it).
    fn text_chunk(&mut self, choice: u32, text: &str) -> Option<String> {
        let template = self.template.as_ref()?;
        let prefix = self.prefix.get_or_insert_with(|| {
            let mut t = serde_json::to_string(template).unwrap_or_else(|_| "{}".into());
            t.pop();
            t
        });
        let mut out = String::with_capacity(prefix.len() + text.len() + 80);
        out.push_str(prefix);
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str("\"choices\":[{\"index\":");
        out.push_str(&choice.to_string());
        out.push_str(",\"delta\":{\"content\":");
        out.push_str(&serde_json::to_string(text).ok()?);
        out.push_str("},\"finish_reason\":null}]}");
        Some(out)
    }

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
    fn call_shape(&self) -> &'static crate::codec::closed::Shape {
        &shape::CALL
    }

    fn open(&mut self, id: &str, model: Option<&str>, out: &mut Vec<u8>) {
        let mut template = Map::new();
        template.insert("id".into(), json!(format!("chatcmpl-{id}")));
        template.insert("object".into(), json!("chat.completion.chunk"));
        template.insert("created".into(), json!(crate::util::unix_secs()));
        template.insert("model".into(), json!(model));
        self.template = Some(template);
        let role = self.chunk(vec![Self::choice(
            0,
            json!({"role": "assistant"}),
            Value::Null,
        )]);
        sse::write(out, None, &role.to_string());
    }

    fn decode(&mut self, event: sse::SseEvent) -> Result<Vec<Up>, String> {
        if event.data.trim() == "[DONE]" {
            return Ok(vec![Up::Done]);
        }
        match self.text_only(&event.data) {
            Some(up) => Ok(up),
            None => self.general(event),
        }
    }

    fn encode(&mut self, down: Down, out: &mut Vec<u8>) {
        self.write(down, out)
    }
}

impl ChatStream {
    /// Any chunk, read as a `Value`.
    fn general(&mut self, event: sse::SseEvent) -> Result<Vec<Up>, String> {
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
        let mut up = Vec::new();
        if self.template.is_none() {
            // The chunks' own fields repeat in every chunk Railyard writes: those a client reads
            // no text in (id, model, ...) make the template; any other is judged, once.
            let mut own = Map::new();
            for (k, v) in std::mem::take(&mut chunk) {
                if !crate::codec::closed::carries_text(&k, &v, &shape::CHUNK) {
                    self.template.get_or_insert_with(Map::new).insert(k, v);
                } else {
                    own.insert(k, v);
                }
            }
            self.template.get_or_insert_with(Map::new);
            if !own.is_empty() {
                let mut data = self.chunk(Vec::new());
                if let Some(obj) = data.as_object_mut() {
                    obj.extend(own);
                }
                up.push(Up::Judge {
                    frame: Frame { event: None, data },
                    shape: &shape::CHUNK,
                });
            }
        }
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
            let legacy = delta.remove("function_call");
            let mut texts = Vec::new();
            for (field, key) in TEXT_FIELDS {
                let text = match key.split_once('.') {
                    Some((outer, inner)) => delta
                        .get_mut(outer)
                        .and_then(Value::as_object_mut)
                        .and_then(|o| o.remove(inner)),
                    None => delta.remove(key),
                };
                match text {
                    Some(Value::String(t)) => texts.push((field, t)),
                    Some(Value::Null) | None => {}
                    // Not a string: judged with the rest of the delta.
                    Some(other) => {
                        let (outer, inner) = key.split_once('.').unwrap_or((key, ""));
                        match inner {
                            "" => delta.insert(outer.into(), other),
                            _ => delta
                                .get_mut(outer)
                                .and_then(Value::as_object_mut)
                                .and_then(|o| o.insert(inner.into(), other)),
                        };
                    }
                }
            }
            if delta
                .get("audio")
                .is_some_and(|a| a.as_object().is_some_and(Map::is_empty))
            {
                delta.remove("audio");
            }
            // Whatever else the delta carries passes once the output rail judged its text (the
            // role and the rest that carry none pass at once).
            if !delta.is_empty() {
                let data = self.chunk(vec![Self::choice(index, Value::Object(delta), Value::Null)]);
                let textless = data.as_object().is_none_or(|d| {
                    d.iter()
                        .all(|(k, v)| !crate::codec::closed::carries_text(k, v, &shape::CHUNK))
                });
                let frame = Frame { event: None, data };
                up.push(match textless {
                    true => Up::Pass(frame),
                    false => Up::Judge {
                        frame,
                        shape: &shape::CHUNK,
                    },
                });
            }
            for (field, text) in texts {
                up.push(Up::Text {
                    choice: index,
                    part: text_part(index, field),
                    text,
                });
            }
            if let Some(Value::Array(fragments)) = fragments {
                for f in fragments {
                    up.push(call_fragment(index, f));
                }
            }
            if let Some(Value::Object(f)) = legacy {
                // The legacy call: one per choice, its name and arguments in fragments.
                self.legacy.insert(index);
                up.push(Up::Call {
                    choice: index,
                    index: 0,
                    id: None,
                    name: f.get("name").and_then(Value::as_str).map(str::to_string),
                    kind: Some(crate::model::FUNCTION.into()),
                    arguments: f
                        .get("arguments")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    extra: Map::new(),
                });
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
            // Counts carry nothing; anything else in it (a key, a number that could be a card)
            // is judged before it passes.
            let carries = crate::codec::closed::carries_text("usage", &usage, &shape::CHUNK);
            let mut c = self.chunk(Vec::new());
            c["usage"] = usage;
            let frame = Frame {
                event: None,
                data: c,
            };
            up.push(match carries {
                true => Up::Judge {
                    frame,
                    shape: &shape::CHUNK,
                },
                false => Up::Pass(frame),
            });
        }
        Ok(up)
    }

    fn write(&mut self, down: Down, out: &mut Vec<u8>) {
        let data = match down {
            Down::Pass(frame) => frame.data,
            Down::Text { choice, part, text } if part >> 32 != 0 => {
                let key = TEXT_FIELDS
                    .iter()
                    .find(|(f, _)| *f == part >> 32)
                    .map_or("content", |(_, k)| k);
                let delta = match key.split_once('.') {
                    Some((outer, inner)) => json!({outer: {inner: text}}),
                    None => json!({key: text}),
                };
                self.chunk(vec![Self::choice(choice, delta, Value::Null)])
            }
            Down::Text { choice, text, .. } => match self.text_chunk(choice, &text) {
                Some(chunk) => return sse::write(out, None, &chunk),
                None => self.chunk(vec![Self::choice(
                    choice,
                    json!({"content": text}),
                    Value::Null,
                )]),
            },
            Down::PartEnd { .. } => return,
            Down::Calls { choice, calls }
                if self.legacy.contains(&choice)
                    && calls.len() == 1
                    && calls[0].kind == crate::model::FUNCTION =>
            {
                let call = &calls[0];
                self.chunk(vec![Self::choice(
                    choice,
                    json!({"function_call": {"name": call.name, "arguments": call.arguments}}),
                    Value::Null,
                )])
            }
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
    // A function call's pieces are under `function`, a custom tool call's under `custom`.
    let (name, arguments) = match f.remove("function").or_else(|| f.remove("custom")) {
        Some(func) => (
            func.get("name").and_then(Value::as_str).map(str::to_string),
            func.get("arguments")
                .or_else(|| func.get("input"))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn event(data: &str) -> sse::SseEvent {
        sse::SseEvent {
            event: None,
            data: data.into(),
        }
    }

    /// The common chunk read without values gives what reading it as a value gives; every
    /// other shape is left to the general way.
    #[test]
    fn text_chunks_read_fast_as_they_read_in_general() {
        let first = r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#;
        let fast = [
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hel\"lo\n\u00e9"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":1,"delta":{"content":"x"},"finish_reason":"stop","logprobs":null}],"model":"m"}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"length"}],"usage":null}"#,
            r#"{"choices":[{"index":0,"delta":{"content":null},"finish_reason":null}]}"#,
            r#"{"choices":[]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"},"finish_reason":"stop"}]}"#,
        ];
        let general_only = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"a"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]}}]}"#,
            r#"{"choices":[],"usage":{"total_tokens":3}}"#,
            r#"{"error":{"message":"overloaded"}}"#,
            r#"{"error":null,"choices":[]}"#,
            r#"{"choices":[{"index":-1,"delta":{"content":"a"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":3}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"choices":{"a":1}}"#,
            r#"{"choices":[3]}"#,
            "[1]",
            "not json",
        ];
        let primed = || {
            let mut s = ChatStream::default();
            s.decode(event(first)).unwrap();
            s
        };
        for data in fast {
            let got = primed()
                .text_only(data)
                .unwrap_or_else(|| panic!("not fast: {data}"));
            assert_eq!(Ok(got), primed().general(event(data)), "{data}");
        }
        for data in general_only {
            assert!(primed().text_only(data).is_none(), "read fast: {data}");
        }
        assert!(
            ChatStream::default().text_only(fast[0]).is_none(),
            "the first chunk"
        );
    }

    /// Text chunks written from the serialised template are the ones written from values.
    #[test]
    fn text_chunks_are_written_as_values_would_be() {
        for first in [
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}"#,
            r#"{"choices":[]}"#,
        ] {
            let mut s = ChatStream::default();
            s.decode(event(first)).unwrap();
            for text in ["plain", "q\"uote\\ \n é 😀 \u{1}"] {
                let mut fast = Vec::new();
                s.encode(
                    Down::Text {
                        choice: 2,
                        part: 2,
                        text: text.into(),
                    },
                    &mut fast,
                );
                let mut slow = Vec::new();
                sse::write(
                    &mut slow,
                    None,
                    &s.chunk(vec![ChatStream::choice(
                        2,
                        json!({"content": text}),
                        Value::Null,
                    )])
                    .to_string(),
                );
                assert_eq!(
                    String::from_utf8(fast).unwrap(),
                    String::from_utf8(slow).unwrap()
                );
            }
        }
    }
}
