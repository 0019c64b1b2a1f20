//! OpenAI Chat Completions: `POST /v1/chat/completions`, streamed (SSE chunks ending with
//! `data: [DONE]`) or not. The model's JSON shapes are in `chat/json.rs`.

mod json;
mod read;

use super::stream::{Down, Finish, Frame, StreamCodec, Up};
use super::{sse, stream_flag, Codec, Door, Judged, Route};
use crate::model::{Content, Message, Payload, PayloadError, Schema};
use serde_json::{json, Map, Value};

/// The Chat Completions door.
pub struct Chat;

/// A decoded chat request: the body as it came (its `messages` replaced on the way up).
pub struct ChatRequest {
    body: Map<String, Value>,
    stream: bool,
    /// Where each message's content sat in the body, when it was read from text.
    contents: Vec<Option<std::ops::Range<usize>>>,
    /// By tool, its `parameters` when they were kept as text (a null in `body`).
    schemas: Vec<Option<Schema>>,
}

/// What the chat door decodes as it reads a body: the messages and where their contents sit,
/// and the tools' schemas as text.
pub struct ReadMessages {
    messages: Option<Result<Vec<Message>, PayloadError>>,
    contents: Vec<Option<std::ops::Range<usize>>>,
    schemas: Vec<Option<Schema>>,
}

impl ChatRequest {
    /// The requested model.
    pub fn model(&self) -> Value {
        self.body.get("model").cloned().unwrap_or(Value::Null)
    }
}

/// A decoded chat reply: the body, whose `choices[i].message` the judged messages replace.
pub struct ChatReply {
    body: Map<String, Value>,
    /// Choice positions that carried a message, in order.
    with_message: Vec<usize>,
}

impl Codec for Chat {
    const DOOR: Door = Door::Chat;
    const ROUTE: Route = Route::Chat;
    type Request = ChatRequest;
    type Reply = ChatReply;
    type Stream = ChatStream;

    type Decoded = ReadMessages;

    /// The messages are decoded as they are read, each content's place in the body noted.
    fn parse_request(bytes: &[u8]) -> serde_json::Result<Option<super::Parsed<ReadMessages>>> {
        Ok(read::read(bytes)?.map(|r| super::Parsed {
            body: r.body,
            decoded: ReadMessages {
                messages: r.messages,
                contents: r.contents,
                schemas: r.schemas,
            },
            repeats: r.repeats,
        }))
    }

    fn decode_parsed(
        body: Map<String, Value>,
        read: ReadMessages,
    ) -> Result<(ChatRequest, Payload), PayloadError> {
        let stream = stream_flag(&body)?;
        let messages = match read.messages {
            Some(messages) => messages?,
            None => return Err(PayloadError::new("messages", "is required")),
        };
        let mut payload = Payload::with_openai_tools(messages, body.get("tools"), &read.schemas)?;
        payload.fields.extend(super::read_field(&body, "user"));
        let request = ChatRequest {
            body,
            stream,
            contents: read.contents,
            schemas: read.schemas,
        };
        Ok((request, payload))
    }

    fn decode_request(
        mut body: Map<String, Value>,
    ) -> Result<(ChatRequest, Payload), PayloadError> {
        let stream = stream_flag(&body)?;
        // The messages move into the payload (a null keeps their place in the body): the body
        // is only written again from the payload.
        let messages = body.get_mut("messages").map(std::mem::take);
        let mut payload = Payload::from_openai_parts(messages, body.get("tools"))?;
        payload.fields.extend(super::read_field(&body, "user"));
        let request = ChatRequest {
            body,
            stream,
            contents: Vec::new(),
            schemas: Vec::new(),
        };
        Ok((request, payload))
    }

    fn stream_requested(request: &ChatRequest) -> bool {
        request.stream
    }

    /// Always from the payload (`edited` or not): the decoded body no longer holds the messages.
    fn encode_request(request: &ChatRequest, payload: &Payload, _edited: bool) -> Vec<u8> {
        let mut body = super::body_for_edit(&request.body, "messages");
        body.insert("messages".into(), payload.messages_json());
        // The schemas kept as text go back where they were.
        if let Some(Value::Array(tools)) = body.get_mut("tools") {
            for (tool, schema) in tools.iter_mut().zip(&request.schemas) {
                if let (Some(schema), Some(slot)) =
                    (schema, tool.pointer_mut("/function/parameters"))
                {
                    *slot = schema.value();
                }
            }
        }
        super::encode_body(body, payload, |t, d| {
            t["function"]["description"] = json!(d);
        })
    }

    fn splice_contents(
        request: &ChatRequest,
        original: &[u8],
        payload: &Payload,
    ) -> Option<Vec<u8>> {
        if request.contents.len() != payload.messages.len() {
            return None;
        }
        let mut wanted = payload.changes.contents.clone();
        wanted.sort_unstable();
        wanted.dedup();
        let mut out = Vec::with_capacity(original.len() + 64);
        let mut at = 0;
        for i in wanted {
            // A message that had no content cannot get one in place.
            let span = request.contents.get(i)?.clone()?;
            out.extend_from_slice(original.get(at..span.start)?);
            match payload.messages[i].content.as_ref()? {
                Content::Text(t) => serde_json::to_writer(&mut out, t).ok()?,
                Content::Parts(p) => serde_json::to_writer(&mut out, p).ok()?,
            }
            at = span.end;
        }
        out.extend_from_slice(original.get(at..)?);
        Some(out)
    }

    fn decode_reply(mut body: Map<String, Value>) -> Result<(ChatReply, Vec<Message>), String> {
        let Some(Value::Array(choices)) = body.get_mut("choices") else {
            return Err("'choices' is missing or not an array".into());
        };
        let mut messages = Vec::new();
        let mut with_message = Vec::new();
        for (i, choice) in choices.iter_mut().enumerate() {
            // Taken (a null in its place): encode_reply writes the judged message there.
            let Some(raw) = choice.get_mut("message").map(std::mem::take) else {
                continue;
            };
            let message = Message::from_openai_owned(raw, &format!("choices[{i}].message"))
                .map_err(|e| e.to_string())?;
            messages.push(message);
            with_message.push(i);
        }
        Ok((ChatReply { body, with_message }, messages))
    }

    fn encode_reply(reply: ChatReply, judged: Vec<Judged>, railyard: Option<Value>) -> Value {
        let ChatReply {
            mut body,
            with_message,
        } = reply;
        if let Some(Value::Array(choices)) = body.get_mut("choices") {
            for (i, judged) in with_message.into_iter().zip(judged) {
                let choice = &mut choices[i];
                choice["message"] = judged.message.to_openai();
                if judged.calls_removed {
                    if let Some(m) = choice["message"].as_object_mut() {
                        m.remove("tool_calls");
                    }
                    choice["finish_reason"] = json!("content_filter");
                } else if judged.calls_added {
                    choice["finish_reason"] = json!("tool_calls");
                }
            }
        }
        if let Some(railyard) = railyard {
            body.insert("railyard".into(), railyard);
        }
        Value::Object(body)
    }

    fn refusal(request: &ChatRequest, id: &str, text: &str, railyard: Value) -> Value {
        json!({
            "id": format!("chatcmpl-{id}"),
            "object": "chat.completion",
            "created": crate::util::unix_secs(),
            "model": request.model(),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "content_filter"
            }],
            "railyard": railyard,
        })
    }

    fn model(request: &ChatRequest) -> Option<String> {
        request
            .body
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn stream(_request: &ChatRequest) -> ChatStream {
        ChatStream::default()
    }
}

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
                let (kind, code) = super::error::POLICY_VIOLATION;
                let mut error = super::error::openai(&message, kind, code, None);
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
                let error = super::error::openai(&message, &kind, &code, None);
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

#[cfg(test)]
mod tests;
