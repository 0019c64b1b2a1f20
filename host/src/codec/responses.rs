//! OpenAI Responses: `POST /v1/responses`.
//!
//! Request → model: `instructions` is a system message; `input` (a string, or a list of items)
//! becomes messages: message items as they are, consecutive `function_call` items one assistant
//! message with those calls (a turn), `function_call_output` items tool results. Items the model
//! does not know (reasoning, references, hosted calls in history) ride along with the next message
//! and are written back in place. Tools: function tools are flat (`{"type": "function", "name",
//! "parameters"}`); hosted tools are declared by type (a `_preview` suffix dropped, so
//! `web_search_preview` allows the `web_search_call` items it produces).
//!
//! Reply → model: the message items' text parts are the reply's content (as content parts, so a
//! policy edits each part), `function_call` items its calls, other `*_call` items hosted calls.
//! Streaming: `stream`.

mod output;
mod stream;

use super::closed::{Inert, Shape};
use super::{opt_string, stream_flag, Codec, Door, Judged, Route};
use crate::model::{Content, Message, Payload, PayloadError, Schema, ToolCall, ToolDef, FUNCTION};
use output::rewrite_output;
pub(crate) use output::{message_item, response_object};
use serde_json::{json, Map, Value};
pub use stream::ResponsesStream;

/// The Responses door.
pub struct Responses;

/// A request's top-level fields (`codec::closed`), from OpenAI's API reference (openapi.json
/// 2.3.0).
const REQUEST: Shape = Shape {
    mapped: &["input", "instructions", "tools"],
    inert: &[
        ("model", Inert::Word),
        ("previous_response_id", Inert::Id),
        ("conversation", Inert::Id),
        ("conversation.id", Inert::Id),
        ("prompt.id", Inert::Id),
        ("prompt.version", Inert::Word),
        ("text.format.type", Inert::Word),
        ("text.format.name", Inert::Word),
        ("text.verbosity", Inert::Word),
        ("reasoning.effort", Inert::Word),
        ("reasoning.summary", Inert::Word),
        ("reasoning.generate_summary", Inert::Word),
        ("tool_choice", Inert::Word),
        ("tool_choice.type", Inert::Word),
        ("tool_choice.name", Inert::Word),
        ("tool_choice.mode", Inert::Word),
        ("tool_choice.server_label", Inert::Word),
        ("tool_choice.tools[].type", Inert::Word),
        ("tool_choice.tools[].name", Inert::Word),
        ("include[]", Inert::Word),
        ("truncation", Inert::Word),
        ("service_tier", Inert::Word),
        ("prompt_cache_retention", Inert::Word),
    ],
    known: &[
        "background",
        "context_management",
        "max_output_tokens",
        "max_tool_calls",
        "metadata",
        "parallel_tool_calls",
        "prompt",
        "prompt_cache_key",
        "reasoning",
        "safety_identifier",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "text",
        "top_logprobs",
        "top_p",
        "user",
    ],
};

/// Where the items the model does not map ride in the message after them (a request's) or in
/// the reply (a reply's).
pub(crate) const ITEMS: &str = "railyard.items";
/// Where the items after a request's last message ride in it.
const AFTER: &str = "railyard.after";

/// An input item's fields beyond those the model maps (a message item's, a call's, a hosted
/// call's whole item), and the items riding in a message: their text is judged, their ids,
/// words and encrypted parts are not.
const ITEM: Shape = Shape {
    mapped: &[],
    inert: &[
        ("type", Inert::Word),
        ("id", Inert::Id),
        ("status", Inert::Word),
        ("call_id", Inert::Id),
        ("railyard.items[].type", Inert::Word),
        ("railyard.items[].id", Inert::Id),
        ("railyard.items[].status", Inert::Word),
        ("railyard.items[].call_id", Inert::Id),
        ("railyard.items[].encrypted_content", Inert::Data),
        ("railyard.items[].summary[].type", Inert::Word),
        ("railyard.items[].content[].type", Inert::Word),
        ("railyard.items[].approval_request_id", Inert::Id),
        ("railyard.after[].type", Inert::Word),
        ("railyard.after[].id", Inert::Id),
        ("railyard.after[].status", Inert::Word),
        ("railyard.after[].call_id", Inert::Id),
        ("railyard.after[].encrypted_content", Inert::Data),
        ("railyard.after[].summary[].type", Inert::Word),
        ("railyard.after[].content[].type", Inert::Word),
        ("railyard.after[].approval_request_id", Inert::Id),
    ],
    known: &["type", "id", "status", ITEMS, AFTER],
};

/// A decoded Responses request.
pub struct ResponsesRequest {
    body: Map<String, Value>,
    stream: bool,
    /// Items after the last message (written back at the end).
    trailing: Vec<Value>,
}

/// A decoded Responses reply.
pub struct ResponsesReply {
    body: Map<String, Value>,
}

/// Where a model message came from.
const FROM_INSTRUCTIONS: &str = "instructions";
const FROM_INPUT_STRING: &str = "input";
const FROM_CALLS: &str = "function_call";

fn wire(from: Option<&str>) -> Value {
    let mut w = Map::new();
    if let Some(from) = from {
        w.insert("from".into(), json!(from));
    }
    Value::Object(w)
}

/// Items before `m` the model does not map (reasoning, hosted calls, MCP items) ride in it,
/// where the rails judge their text as part of it (`codec::closed`).
fn attach(m: &mut Message, attached: Vec<Value>) {
    if !attached.is_empty() {
        m.extra.insert(ITEMS.into(), Value::Array(attached));
    }
}

fn from(message: &Message) -> Option<&str> {
    message.wire.get("from").and_then(Value::as_str)
}

/// The kind of hosted call an output item type names (`web_search_call` → `web_search`).
pub(crate) fn hosted_kind(item_type: &str) -> Option<&str> {
    item_type
        .strip_suffix("_call")
        .filter(|k| *k != FUNCTION && !k.is_empty())
}

fn content(value: Value) -> Option<Content> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(Content::Text(s)),
        other => Some(Content::Parts(other)),
    }
}

fn content_json(content: &Option<Content>) -> Value {
    match content {
        None => Value::Null,
        Some(Content::Text(t)) => Value::String(t.clone()),
        Some(Content::Parts(p)) => p.clone(),
    }
}

fn decode_tools(body: &Map<String, Value>) -> Result<Vec<ToolDef>, PayloadError> {
    let Some(tools) = body.get("tools").filter(|t| !t.is_null()) else {
        return Ok(Vec::new());
    };
    let tools = tools
        .as_array()
        .ok_or_else(|| PayloadError::new("tools", "must be an array of tools"))?;
    tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let path = format!("tools[{i}]");
            let kind = t
                .get("type")
                .and_then(Value::as_str)
                .ok_or_else(|| PayloadError::new(format!("{path}.type"), "is required"))?;
            if kind != FUNCTION {
                let kind = kind.strip_suffix("_preview").unwrap_or(kind);
                let name = t.get("name").and_then(Value::as_str);
                return Ok(ToolDef::declared(kind, name, None, None));
            }
            let name = t.get("name").and_then(Value::as_str).ok_or_else(|| {
                PayloadError::new(format!("{path}.name"), "is required and must be a string")
            })?;
            Ok(ToolDef::declared(
                FUNCTION,
                Some(name),
                t.get("description").and_then(Value::as_str),
                t.get("parameters").filter(|p| !p.is_null()).map(Schema::of),
            ))
        })
        .collect()
}

/// `input` items → messages; returns the messages and the items after the last one.
fn decode_items(items: &[Value]) -> Result<(Vec<Message>, Vec<Value>), PayloadError> {
    let mut messages: Vec<Message> = Vec::new();
    let mut attached: Vec<Value> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("input[{i}]");
        let Value::Object(obj) = item else {
            return Err(PayloadError::new(path, "must be an object"));
        };
        let mut obj = obj.clone();
        let kind = obj.get("type").and_then(Value::as_str).map(str::to_string);
        match kind.as_deref() {
            Some("message") | None if obj.contains_key("role") => {
                let role = opt_string(&mut obj, "role", &path)?.unwrap_or_default();
                let mut m = Message::new(&role, content(obj.remove("content").unwrap_or_default()));
                m.content_null = false;
                m.extra = obj;
                m.wire = wire(None);
                attach(&mut m, std::mem::take(&mut attached));
                messages.push(m);
            }
            Some("function_call") => {
                let call_id = opt_string(&mut obj, "call_id", &path)?.unwrap_or_default();
                let name = opt_string(&mut obj, "name", &path)?
                    .ok_or_else(|| PayloadError::new(format!("{path}.name"), "is required"))?;
                let arguments = opt_string(&mut obj, "arguments", &path)?.unwrap_or_default();
                let mut call = ToolCall::function(call_id, name, arguments);
                call.extra = obj;
                let continues = attached.is_empty()
                    && messages.last().is_some_and(|m| from(m) == Some(FROM_CALLS));
                if continues {
                    messages.last_mut().expect("checked").tool_calls.push(call);
                } else {
                    let mut m = Message::reply(None, vec![call]);
                    m.wire = wire(Some(FROM_CALLS));
                    attach(&mut m, std::mem::take(&mut attached));
                    messages.push(m);
                }
            }
            Some("function_call_output") => {
                let call_id = opt_string(&mut obj, "call_id", &path)?;
                let mut m = Message::new("tool", content(obj.remove("output").unwrap_or_default()));
                m.tool_call_id = call_id;
                m.extra = obj;
                m.wire = wire(None);
                attach(&mut m, std::mem::take(&mut attached));
                messages.push(m);
            }
            _ => attached.push(item.clone()),
        }
    }
    Ok((messages, attached))
}

fn encode_items(messages: &[Message], trailing: &[Value], input: &mut Vec<Value>) {
    for m in messages {
        if let Some(Value::Array(before)) = m.extra.get(ITEMS) {
            input.extend(before.iter().cloned());
        }
        let mut extra = m.extra.clone();
        extra.remove(ITEMS);
        extra.remove(AFTER);
        let after = match m.extra.get(AFTER) {
            Some(Value::Array(after)) => after.as_slice(),
            _ => &[],
        };
        if m.role == "tool" {
            let mut item = extra.clone();
            item.insert("type".into(), json!("function_call_output"));
            item.insert("call_id".into(), json!(m.tool_call_id));
            item.insert("output".into(), content_json(&m.content));
            input.push(Value::Object(item));
            input.extend(after.iter().cloned());
            continue;
        }
        if m.has_text() || from(m) != Some(FROM_CALLS) {
            let mut item = Map::new();
            item.insert("role".into(), json!(m.role));
            item.insert("content".into(), content_json(&m.content));
            item.extend(extra.clone());
            input.push(Value::Object(item));
        }
        for call in &m.tool_calls {
            let mut item = call.extra.clone();
            item.insert("type".into(), json!("function_call"));
            item.insert("call_id".into(), json!(call.id));
            item.insert("name".into(), json!(call.name));
            item.insert("arguments".into(), json!(call.arguments));
            input.push(Value::Object(item));
        }
        input.extend(after.iter().cloned());
    }
    input.extend(trailing.iter().cloned());
}

impl Codec for Responses {
    const DOOR: Door = Door::Responses;
    const ROUTE: Route = Route::Responses;
    type Request = ResponsesRequest;
    type Reply = ResponsesReply;
    type Stream = ResponsesStream;

    type Decoded = ();

    const SHAPE: Shape = REQUEST;
    const MESSAGE: Shape = ITEM;
    const CALL: Shape = ITEM;

    fn parse_request(bytes: &[u8], _scope: &str) -> serde_json::Result<Option<super::Parsed<()>>> {
        super::parse_object(bytes)
    }

    fn decode_parsed(
        body: Map<String, Value>,
        _: (),
    ) -> Result<(ResponsesRequest, Payload), PayloadError> {
        Self::decode_request(body)
    }

    fn decode_request(
        body: Map<String, Value>,
    ) -> Result<(ResponsesRequest, Payload), PayloadError> {
        let stream = stream_flag(&body)?;
        let mut messages = Vec::new();
        match body.get("instructions") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                let mut m = Message::new("system", Some(Content::Text(s.clone())));
                m.wire = wire(Some(FROM_INSTRUCTIONS));
                messages.push(m);
            }
            Some(_) => return Err(PayloadError::new("instructions", "must be a string")),
        }
        let trailing = match body.get("input") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => {
                let mut m = Message::new("user", Some(Content::Text(s.clone())));
                m.wire = wire(Some(FROM_INPUT_STRING));
                messages.push(m);
                Vec::new()
            }
            Some(Value::Array(items)) => {
                let (more, mut trailing) = decode_items(items)?;
                messages.extend(more);
                // Items after the last message ride in it too (after its own).
                if let Some(last) = messages.last_mut().filter(|_| !trailing.is_empty()) {
                    last.extra
                        .insert(AFTER.into(), Value::Array(std::mem::take(&mut trailing)));
                }
                trailing
            }
            Some(_) => {
                return Err(PayloadError::new(
                    "input",
                    "must be a string or a list of items",
                ))
            }
        };
        let tools = decode_tools(&body)?;
        let fields = super::closed::fields(&body, &Self::SHAPE);
        let request = ResponsesRequest {
            body,
            stream,
            trailing,
        };
        Ok((
            request,
            Payload {
                messages,
                tools,
                fields,
                ..Payload::default()
            },
        ))
    }

    fn stream_requested(request: &ResponsesRequest) -> bool {
        request.stream
    }

    fn encode_request(
        request: &ResponsesRequest,
        payload: &Payload,
        edited: bool,
        _original: &[u8],
    ) -> Vec<u8> {
        if !edited {
            return serde_json::to_vec(&request.body).unwrap_or_default();
        }
        let mut body = super::body_for_edit(&request.body, "input");
        let mut rest: Vec<Message> = Vec::new();
        for m in &payload.messages {
            if from(m) == Some(FROM_INSTRUCTIONS) {
                body.insert("instructions".into(), content_json(&m.content));
            } else {
                rest.push(m.clone());
            }
        }
        let input = match rest.as_slice() {
            [only] if from(only) == Some(FROM_INPUT_STRING) && request.trailing.is_empty() => {
                content_json(&only.content)
            }
            _ => {
                let mut items = Vec::new();
                encode_items(&rest, &request.trailing, &mut items);
                Value::Array(items)
            }
        };
        body.insert("input".into(), input);
        super::encode_body(body, payload, |t, d| {
            t["description"] = json!(d);
        })
    }

    fn decode_reply(body: Map<String, Value>) -> Result<(ResponsesReply, Vec<Message>), String> {
        let Some(Value::Array(output)) = body.get("output") else {
            return Err("'output' is missing or not an array".into());
        };
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        let mut others = Vec::new();
        for item in output {
            match item.get("type").and_then(Value::as_str) {
                Some("message") => {
                    if let Some(Value::Array(content)) = item.get("content") {
                        parts.extend(content.iter().cloned());
                    }
                }
                Some("function_call") => {
                    let mut extra = item.as_object().cloned().unwrap_or_default();
                    let field = |extra: &mut Map<String, Value>, k: &str| {
                        extra
                            .remove(k)
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default()
                    };
                    let id = field(&mut extra, "call_id");
                    let name = field(&mut extra, "name");
                    let arguments = field(&mut extra, "arguments");
                    let mut call = ToolCall::function(id, name, arguments);
                    call.extra = extra;
                    calls.push(call);
                }
                Some(t) if hosted_kind(t).is_some() => {
                    let kind = hosted_kind(t).unwrap_or(t);
                    let id = item.get("id").and_then(Value::as_str).unwrap_or("");
                    let extra = item.as_object().cloned().unwrap_or_default();
                    calls.push(ToolCall::hosted(id.into(), kind.into(), extra));
                }
                _ => others.push(item.clone()),
            }
        }
        let content = (!parts.is_empty()).then(|| Content::Parts(Value::Array(parts)));
        let mut message = Message::reply(content, calls);
        // Items the model does not map ride in the reply, whose rails judge their text.
        if !others.is_empty() {
            message.extra.insert(ITEMS.into(), Value::Array(others));
        }
        Ok((ResponsesReply { body }, vec![message]))
    }

    fn encode_reply(reply: ResponsesReply, judged: Vec<Judged>, railyard: Option<Value>) -> Value {
        let mut body = reply.body;
        if let Some(judged) = judged.into_iter().next() {
            if let Some(output) = body.get_mut("output") {
                *output = rewrite_output(std::mem::take(output), &judged.message);
            }
        }
        if let Some(railyard) = railyard {
            body.insert("railyard".into(), railyard);
        }
        Value::Object(body)
    }

    fn refusal(request: &ResponsesRequest, id: &str, text: &str, railyard: Value) -> Value {
        let mut out = response_object(request.body.get("model"), id);
        out["output"] = json!([message_item(&format!("msg_{id}"), text)]);
        out["railyard"] = railyard;
        out
    }

    fn model(request: &ResponsesRequest) -> Option<String> {
        request
            .body
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn notes(request: &ResponsesRequest) -> Vec<&'static str> {
        match request.body.get("previous_response_id") {
            Some(Value::String(_)) => vec![
                "previous_response_id: the backend keeps the earlier turns, so tool-result linkage covered only the items this request carried",
            ],
            _ => Vec::new(),
        }
    }

    fn stream(request: &ResponsesRequest) -> ResponsesStream {
        ResponsesStream::new(request.body.get("model").cloned().unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests;
