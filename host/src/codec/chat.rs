//! OpenAI Chat Completions: `POST /v1/chat/completions`, streamed (SSE chunks ending with
//! `data: [DONE]`) or not. The model's JSON shapes are in `chat/json.rs`.

mod json;
mod read;
mod reply;
mod shape;
mod stream;

pub use stream::ChatStream;

use super::{stream_flag, Codec, Door, Judged, Route};
use crate::model::{Content, Message, Payload, PayloadError};
use serde_json::{json, Map, Value};

/// The Chat Completions door.
pub struct Chat;

/// A decoded chat request: the body as it came (its `messages` replaced on the way up).
pub struct ChatRequest {
    body: Map<String, Value>,
    stream: bool,
    /// Where each message's content sat in the body, when it was read from text.
    contents: Vec<Option<std::ops::Range<usize>>>,
    /// Whether `tools` was read from the body's text into declarations (a null in `body`): a body
    /// written anew reads its value again from the caller's bytes.
    tools: bool,
    /// How many of the payload's tools are the legacy `functions` (the last ones).
    functions: usize,
}

/// What the chat door decodes as it reads a body: the messages and where their contents sit,
/// and the tools with their text.
pub struct ReadMessages {
    messages: Option<Result<Vec<Message>, PayloadError>>,
    contents: Vec<Option<std::ops::Range<usize>>>,
    tools: Option<read::Tools>,
    /// What the tools' declarations hold beyond what the door maps (`shape::TOOL`).
    beyond: read::Beyond,
}

/// The strings of the request's `tools` declarations the door does not map, as its fields.
pub(crate) fn tool_fields(body: &Map<String, Value>) -> Vec<crate::model::Field> {
    super::closed::tool_fields(body, "tools", &shape::TOOL)
}

/// Likewise for the legacy `functions`.
fn function_fields(body: &Map<String, Value>) -> Vec<crate::model::Field> {
    super::closed::tool_fields(body, "functions", &shape::FUNCTION)
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

    const SHAPE: super::closed::Shape = shape::REQUEST;
    const DECLARATIONS: &'static [(&'static str, super::closed::ToolShape)] =
        &[("tools", shape::TOOL), ("functions", shape::FUNCTION)];
    const MESSAGE: super::closed::Shape = shape::MESSAGE;

    /// The tools were read apart (the body holds a null in their place), what is unknown in
    /// them found then; the legacy `functions` are in the body.
    fn unknown_in_declarations(body: &Map<String, Value>, read: &ReadMessages) -> Option<String> {
        read.beyond
            .unknown
            .clone()
            .or_else(|| super::closed::unknown_in_declarations(body, Self::DECLARATIONS))
    }
    const CALL: super::closed::Shape = shape::CALL;

    /// The messages are decoded as they are read, each content's place in the body noted.
    fn parse_request(
        bytes: &[u8],
        scope: &str,
    ) -> serde_json::Result<Option<super::Parsed<ReadMessages>>> {
        Ok(read::read(bytes, Some(scope))?.map(|r| super::Parsed {
            body: r.body,
            decoded: ReadMessages {
                messages: r.messages,
                contents: r.contents,
                tools: r.tools,
                beyond: r.beyond,
            },
            repeats: r.repeats,
        }))
    }

    fn decode_parsed(
        body: Map<String, Value>,
        read: ReadMessages,
    ) -> Result<(ChatRequest, Payload), PayloadError> {
        let stream = stream_flag(&body)?;
        let mut messages = match read.messages {
            Some(messages) => messages?,
            None => return Err(PayloadError::new("messages", "is required")),
        };
        json::link_legacy(&mut messages);
        let (tools, declared) = match read.tools {
            Some(tools) => (tools?, true),
            None => (Vec::new(), false),
        };
        let mut payload = Payload {
            messages,
            tools,
            ..Payload::default()
        };
        let functions = legacy_functions(&body, &mut payload)?;
        payload.fields = super::closed::fields(&body, &Self::SHAPE);
        // The tools were read apart (the body holds a null in their place).
        payload.fields.extend(read.beyond.fields);
        payload.fields.extend(function_fields(&body));
        let request = ChatRequest {
            body,
            stream,
            contents: read.contents,
            tools: declared,
            functions,
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
        let functions = legacy_functions(&body, &mut payload)?;
        payload.fields = super::closed::fields(&body, &Self::SHAPE);
        payload.fields.extend(tool_fields(&body));
        payload.fields.extend(function_fields(&body));
        let request = ChatRequest {
            body,
            stream,
            contents: Vec::new(),
            tools: false,
            functions,
        };
        Ok((request, payload))
    }

    fn stream_requested(request: &ChatRequest) -> bool {
        request.stream
    }

    /// Always from the payload (`edited` or not): the decoded body no longer holds the messages.
    fn encode_request(
        request: &ChatRequest,
        payload: &Payload,
        _edited: bool,
        original: &[u8],
    ) -> Vec<u8> {
        let mut body = super::body_for_edit(&request.body, "messages");
        body.insert("messages".into(), payload.messages_json());
        // Tools read into declarations go back where they were, as a value read again from the
        // caller's bytes (only a body written anew pays for it).
        if request.tools {
            body.insert("tools".into(), read::tools_value(original));
        }
        // Fields first: a declaration's are addressed by its place among all declared.
        super::write_fields(&mut body, &payload.fields);
        // The legacy `functions` as the model is offered them, as `tools` are below.
        let functions = request.functions.min(payload.tools.len());
        let declared = &payload.tools[payload.tools.len() - functions..];
        if let Some(Value::Array(original)) = body.get_mut("functions") {
            *original = super::offered_tools(original, declared, |f, d| {
                f["description"] = json!(d);
            });
        }
        super::encode_offered(body, payload, |t, d| {
            let at = if t["type"] == crate::model::CUSTOM {
                "custom"
            } else {
                "function"
            };
            t[at]["description"] = json!(d);
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
        // A message that had no content cannot get one in place.
        let spans = wanted
            .iter()
            .map(|&i| request.contents.get(i)?.clone().map(|span| (span, i)))
            .collect::<Option<Vec<_>>>()?;
        super::splice(original, spans, |out, i| {
            match payload.messages[i].content.as_ref()? {
                Content::Text(t) => serde_json::to_writer(out, t).ok(),
                Content::Parts(p) => serde_json::to_writer(out, p).ok(),
            }
        })
    }

    fn read_reply(bytes: &[u8]) -> Option<super::ReadReply> {
        reply::read(bytes)
    }

    /// Declined when a choice's `finish_reason` must change (its calls were removed or added).
    fn splice_reply(
        original: &[u8],
        spans: &[std::ops::Range<usize>],
        judged: &[Judged],
    ) -> Option<Vec<u8>> {
        if spans.len() != judged.len() || judged.iter().any(|j| j.calls_removed || j.calls_added) {
            return None;
        }
        super::splice(original, spans.iter().cloned().zip(judged), |out, j| {
            j.message.write_openai(out);
            Some(())
        })
    }

    fn decode_reply(mut body: Map<String, Value>) -> Result<(ChatReply, Vec<Message>), String> {
        // The reply's own fields a client reads as text ride in its first message, its
        // choices' in theirs, for the output rail to judge with the message (`shape::REPLY`).
        let top = super::closed::take_outside(&mut body, &shape::REPLY);
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
            let mut message = Message::from_openai_owned(raw, &format!("choices[{i}].message"))
                .map_err(|e| e.to_string())?;
            if message.extra.contains_key(shape::CHOICE_KEY)
                || message.extra.contains_key(shape::REPLY_KEY)
            {
                return Err("a message holds a field of Railyard's own name".into());
            }
            if let Some(obj) = choice.as_object_mut() {
                if let Some(fields) = super::closed::take_outside(obj, &shape::CHOICE) {
                    message.extra.insert(shape::CHOICE_KEY.into(), fields);
                }
            }
            messages.push(message);
            with_message.push(i);
        }
        if let (Some(top), Some(first)) = (top, messages.first_mut()) {
            first.extra.insert(shape::REPLY_KEY.into(), top);
        }
        Ok((ChatReply { body, with_message }, messages))
    }

    fn encode_reply(reply: ChatReply, judged: Vec<Judged>, railyard: Option<Value>) -> Value {
        let ChatReply {
            mut body,
            with_message,
        } = reply;
        let mut top_fields = Map::new();
        if let Some(Value::Array(choices)) = body.get_mut("choices") {
            for (i, mut judged) in with_message.into_iter().zip(judged) {
                let choice = &mut choices[i];
                if let Some(Value::Object(top)) = judged.message.extra.remove(shape::REPLY_KEY) {
                    top_fields.extend(top);
                }
                if let Some(Value::Object(fields)) = judged.message.extra.remove(shape::CHOICE_KEY)
                {
                    if let Some(obj) = choice.as_object_mut() {
                        obj.extend(fields);
                    }
                }
                // Log-probabilities spell out the text the backend wrote (as tokens, or as their
                // bytes): once a policy changed it, they would spell out what it took away.
                if judged.edited && choice.get("logprobs").is_some_and(|l| !l.is_null()) {
                    choice["logprobs"] = Value::Null;
                }
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
        body.extend(top_fields);
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

    fn chosen(request: &ChatRequest) -> Vec<String> {
        super::chosen_in(&request.body, &["tool_choice", "function_call"])
    }

    fn stream(_request: &ChatRequest) -> ChatStream {
        ChatStream::default()
    }
}

/// The legacy `functions` declarations, as function tools after the request's own: the tools
/// rail hides and describes them, the tool_call rail judges calls against them. How many.
fn legacy_functions(
    body: &Map<String, Value>,
    payload: &mut Payload,
) -> Result<usize, PayloadError> {
    let Some(functions) = body.get("functions").filter(|f| !f.is_null()) else {
        return Ok(0);
    };
    let list = functions
        .as_array()
        .ok_or_else(|| PayloadError::new("functions", "must be an array of functions"))?;
    for (i, f) in list.iter().enumerate() {
        let tool = crate::model::ToolDef::from_openai(
            &json!({"type": "function", "function": f}),
            &format!("functions[{i}]"),
        )
        .map_err(|e| PayloadError::new(e.path.replace(".function", ""), e.message))?;
        payload.tools.push(tool);
    }
    Ok(list.len())
}

#[cfg(test)]
mod tests;
