//! Anthropic Messages: `POST /v1/messages`.
//!
//! Request → model: `system` is a system message; a user message's `tool_result` blocks become
//! tool results (the `tool_result` rail links them to the `tool_use` blocks of the assistant
//! turn before), its other blocks (text, images, documents) one user message. An assistant
//! message is cut into turns at its server tools' results, so every call comes before the result
//! answering it: a turn's text blocks are its content, its `tool_use`, `server_tool_use` and
//! `mcp_tool_use` blocks its calls (`input` as argument JSON), and a server or MCP tool's result
//! block (`web_fetch_tool_result`, `mcp_tool_result`, ...) is a tool result of its own, which the
//! `tool_result` rail judges and `flow` counts like any other. Other blocks (thinking) ride in the
//! turn they start and are written back in place.
//!
//! A server tool's call is named as the tool is (`web_search`, `web_fetch`: its kind is that
//! name too); an MCP tool's `mcp__<server>__<tool>` (kind `mcp`), which a declared toolset
//! (`{"type": "mcp_toolset", "mcp_server_name": "crm"}`, declared as `mcp__crm`) covers.
//! Tools are function tools whose `input_schema` is the declared schema; server tools (with a
//! `type`) are declared by type.
//!
//! Reply → model: text blocks are the reply's content (as content parts, so a policy edits each
//! block), `tool_use`, `server_tool_use` and `mcp_tool_use` blocks its calls; the results of
//! server tools ride in it (judged as its text) and are dropped with a call a policy removed.
//! Streaming: `stream`.

mod blocks;
mod stream;

use super::closed::{Inert, Shape, ToolShape};
use super::{stream_flag, Codec, Door, Judged, Route};
use crate::model::{
    Content, Message, Payload, PayloadError, Schema, ToolCall, ToolDef, Wire, FUNCTION, MCP,
};
use blocks::{encode_blocks, rewrite_content};
use serde_json::{json, Map, Value};
pub use stream::MessagesStream;

/// The Messages door.
pub struct Messages;

/// A `tools` declaration: its name, description and `input_schema` are mapped; the words of
/// server tools' settings are inert; every other string (`input_examples`, a pinned MCP
/// listing's descriptions, an unknown field) is the request's field. The keys are those of the
/// Anthropic SDK's tool types (2.12, beta included).
const TOOL: ToolShape = ToolShape {
    tool: Shape {
        mapped: &["name", "description", "input_schema"],
        inert: &[
            ("type", Inert::Word),
            ("cache_control.type", Inert::Word),
            ("cache_control.ttl", Inert::Word),
            ("mcp_server_name", Inert::Word),
            ("allowed_domains[]", Inert::Word),
            ("blocked_domains[]", Inert::Word),
            ("allowed_callers[]", Inert::Word),
            ("user_location.type", Inert::Word),
            ("user_location.country", Inert::Word),
            ("user_location.timezone", Inert::Word),
            ("response_inclusion", Inert::Word),
            ("model", Inert::Word),
            ("caching.type", Inert::Word),
            ("caching.ttl", Inert::Word),
        ],
        known: &[
            "cache_control",
            "citations",
            "configs",
            "default_config",
            "defer_loading",
            "display_height_px",
            "display_number",
            "display_width_px",
            "eager_input_streaming",
            "enable_zoom",
            "input_examples",
            "max_characters",
            "max_content_tokens",
            "max_tokens",
            "max_uses",
            "strict",
            "tools",
            "url_sources",
            "use_cache",
        ],
    },
    inner: &[],
    nested: None,
};

/// A request's top-level fields (`codec::closed`), from Anthropic's SDK types.
const REQUEST: Shape = Shape {
    mapped: &["messages", "system", "tools"],
    inert: &[
        ("model", Inert::Word),
        ("tool_choice.type", Inert::Word),
        ("tool_choice.name", Inert::Word),
        ("thinking.type", Inert::Word),
        ("service_tier", Inert::Word),
        ("container", Inert::Id),
        ("container.id", Inert::Id),
    ],
    known: &[
        "container",
        "context_management",
        "max_tokens",
        "mcp_servers",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "thinking",
        "tool_choice",
        "top_k",
        "top_p",
    ],
};

/// Where the blocks of an assistant message the model does not map ride in it.
pub(crate) const BEFORE: &str = "railyard.before";

/// A message's (and a tool_result block's) fields beyond those the model maps, and the blocks
/// riding in it: their text is judged, their signatures, ids and encrypted parts are not.
const MESSAGE: Shape = Shape {
    mapped: &[],
    inert: &[
        ("cache_control.type", Inert::Word),
        ("cache_control.ttl", Inert::Word),
        ("railyard.before[].type", Inert::Word),
        ("railyard.before[].id", Inert::Id),
        ("railyard.before[].tool_use_id", Inert::Id),
        ("railyard.before[].signature", Inert::Data),
        ("railyard.before[].data", Inert::Data),
        ("railyard.before[].cache_control.type", Inert::Word),
        ("railyard.before[].content.type", Inert::Word),
        ("railyard.before[].content[].type", Inert::Word),
        ("railyard.before[].content[].encrypted_content", Inert::Data),
        ("railyard.before[].content.encrypted_stdout", Inert::Data),
    ],
    known: &["cache_control", "is_error", BEFORE],
};

/// A call's fields beyond those the model maps: an MCP tool's server is a word.
pub(crate) const CALL: Shape = Shape {
    mapped: &[],
    inert: &[
        ("server_name", Inert::Word),
        ("cache_control.type", Inert::Word),
        ("cache_control.ttl", Inert::Word),
        ("caller.type", Inert::Word),
        ("caller.tool_id", Inert::Id),
    ],
    known: &["cache_control", "caller"],
};

/// A server tool's result block, as a tool result: its result's words, ids and encrypted parts
/// carry no text; everything else it holds (titles, urls, fetched pages, outputs) is judged.
const RESULT: Shape = Shape {
    mapped: &[],
    inert: &[
        ("railyard.block", Inert::Word),
        ("cache_control.type", Inert::Word),
        ("content.type", Inert::Word),
        ("content.error_code", Inert::Word),
        ("content.retrieved_at", Inert::Word),
        ("content.encrypted_stdout", Inert::Data),
        ("content.content.type", Inert::Word),
        ("content.content.source.type", Inert::Word),
        ("content.content.source.media_type", Inert::Word),
        ("content.content.source.data", Inert::Data),
        ("content.content[].type", Inert::Word),
        ("content[].type", Inert::Word),
        ("content[].encrypted_content", Inert::Data),
        ("content[].page_age", Inert::Word),
        ("content[].tool_name", Inert::Word),
    ],
    known: &["content", "cache_control", BLOCK],
};

/// Where a server tool's result block keeps its own type, in the tool result made of it.
const BLOCK: &str = "railyard.block";

/// Where a reply's own fields ride in its message, judged as its text.
const REPLY_KEY: &str = "railyard.reply";

/// A reply's own fields (the SDK's `Message`, beta included): `content` is mapped; its ids,
/// words and times are inert; the rest (the stop sequence it matched, what a newer API adds) is
/// judged as the reply's text, in a whole reply and in a stream's `message_start` and
/// `message_delta` alike.
pub(crate) const REPLY: Shape = Shape {
    mapped: &["content"],
    inert: &[
        ("id", Inert::Id),
        ("type", Inert::Word),
        ("role", Inert::Word),
        ("model", Inert::Word),
        ("stop_reason", Inert::Word),
        ("container.id", Inert::Id),
        ("container.expires_at", Inert::Time),
        ("usage.service_tier", Inert::Word),
        ("usage.inference_geo", Inert::Word),
        ("context_management.applied_edits[].type", Inert::Word),
    ],
    known: &[],
};

/// An MCP server's listing of its tools a reply carried (`mcp_tool_listing`): sent back, the
/// provider uses it for the server's toolset, so each tool it lists is a declaration.
const LISTING: &str = "mcp_tool_listing";

/// The tools the listings in the request's messages list, each an MCP tool's declaration.
fn listings(body: &Map<String, Value>) -> Result<Vec<ToolDef>, PayloadError> {
    let Some(Value::Array(messages)) = body.get("messages") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let Some(Value::Array(blocks)) = m.get("content") else {
            continue;
        };
        for (j, b) in blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b["type"] == LISTING)
        {
            let server = server_name(
                &b["mcp_server_name"],
                &format!("messages[{i}].content[{j}].mcp_server_name"),
            )?;
            out.extend(super::responses::listed_tools(server, b.get("tools")));
        }
    }
    Ok(out)
}

/// An MCP server's name where it names the toolset its tools are called through: a word (it is
/// matched as a name, never judged as text).
fn server_name<'v>(name: &'v Value, at: &str) -> Result<&'v str, PayloadError> {
    name.as_str()
        .filter(|n| super::closed::Inert::Word.holds(n))
        .ok_or_else(|| PayloadError::new(at, "must be a server's name (letters, digits and _-.:/)"))
}

/// The MCP servers a request connects the provider to (`mcp_servers`), each declared as the
/// toolset of its tools (`mcp__<name>`, as an `mcp_toolset` in `tools` is): connecting a
/// server offers the model its tools, so the tools rail judges it like any declaration, and a
/// server it hides is not connected. A server without a name is refused: its tools could not
/// be told apart.
fn mcp_servers(body: &Map<String, Value>) -> Result<Vec<ToolDef>, PayloadError> {
    let servers = match body.get("mcp_servers") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(servers)) => servers,
        Some(_) => {
            return Err(PayloadError::new(
                "mcp_servers",
                "must be an array of servers",
            ))
        }
    };
    servers
        .iter()
        .enumerate()
        .map(|(i, server)| {
            let name = server_name(
                server.get("name").unwrap_or(&Value::Null),
                &format!("mcp_servers[{i}].name"),
            )?;
            let toolset = crate::model::mcp_toolset(name);
            Ok(ToolDef::declared(MCP, Some(&toolset), None, None))
        })
        .collect()
}

/// A call block (`tool_use`, `server_tool_use`, `mcp_tool_use`) as a call; `None` for another
/// block. `Err`: an input that is not an object (what the rails would judge is not what the
/// backend would get back).
pub(super) fn call_of(block: &Value) -> Option<Result<ToolCall, ()>> {
    let kind = block.get("type").and_then(Value::as_str)?;
    if !matches!(kind, "tool_use" | "server_tool_use" | "mcp_tool_use") {
        return None;
    }
    let mut b = block.as_object().cloned().unwrap_or_default();
    let text = |b: &mut Map<String, Value>, k: &str| {
        b.remove(k)
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let id = text(&mut b, "id");
    let name = text(&mut b, "name");
    let input = match b.remove("input") {
        None => json!({}),
        Some(input @ Value::Object(_)) => input,
        Some(_) => return Some(Err(())),
    };
    b.remove("type");
    let mut call = ToolCall::function(id, name, input.to_string());
    match kind {
        "server_tool_use" => call.kind = call.name.clone(),
        "mcp_tool_use" => {
            let server = b.get("server_name").and_then(Value::as_str).unwrap_or("");
            call.name = crate::model::mcp_tool(server, &call.name);
            call.kind = MCP.into();
        }
        _ => {}
    }
    call.extra = b;
    Some(Ok(call))
}

/// A call as the block it came from.
pub(super) fn call_block(call: &ToolCall) -> Map<String, Value> {
    let mut b = Map::new();
    let (kind, name) = match call.kind.as_str() {
        FUNCTION | crate::model::CUSTOM => ("tool_use", call.name.as_str()),
        MCP => {
            let server = call
                .extra
                .get("server_name")
                .and_then(Value::as_str)
                .unwrap_or("");
            (
                "mcp_tool_use",
                crate::model::mcp_tool_name(&call.name, server),
            )
        }
        _ => ("server_tool_use", call.name.as_str()),
    };
    b.insert("type".into(), json!(kind));
    b.insert("id".into(), json!(call.id));
    b.insert("name".into(), json!(name));
    let input = serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or(json!({}));
    b.insert("input".into(), input);
    b.extend(call.extra.clone());
    b
}

/// Whether a block of an assistant message is a server tool's result.
fn is_result(kind: &str) -> bool {
    kind.ends_with("_tool_result")
}

/// A decoded Messages request.
pub struct MessagesRequest {
    body: Map<String, Value>,
    stream: bool,
}

/// A decoded Messages reply.
pub struct MessagesReply {
    body: Map<String, Value>,
}

/// Where in the body a message came from, to be written back there (the message's `wire`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    /// `system`.
    System,
    /// `messages[i]` with a string content, or a user's tool result in it.
    Message(usize),
    /// `messages[i]`'s blocks (other than a user's tool results).
    Blocks(usize),
    /// A server tool's result in the assistant's `messages[i]`.
    Server(usize),
}

fn from(message: &Message) -> Option<From> {
    message.wire.get().copied()
}

fn origin(message: &Message) -> Option<usize> {
    match from(message)? {
        From::System => None,
        From::Message(i) | From::Blocks(i) | From::Server(i) => Some(i),
    }
}

fn is_system(message: &Message) -> bool {
    from(message) == Some(From::System)
}

fn blocks_of(value: Option<&Value>, path: &str) -> Result<Vec<Value>, PayloadError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![json!({"type": "text", "text": s})]),
        Some(Value::Array(a)) => Ok(a.clone()),
        Some(_) => Err(PayloadError::new(
            path,
            "must be a string or a list of blocks",
        )),
    }
}

fn decode_message(i: usize, raw: &Value, out: &mut Vec<Message>) -> Result<(), PayloadError> {
    let path = format!("messages[{i}]");
    let obj = raw
        .as_object()
        .ok_or_else(|| PayloadError::new(&path, "must be an object"))?;
    let role = obj
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| PayloadError::new(format!("{path}.role"), "is required"))?;
    let mut extra = obj.clone();
    extra.remove("role");
    let content = extra.remove("content");
    let wire = Wire::of(From::Message(i));
    if let Some(Value::String(text)) = &content {
        let mut m = Message::new(role, Some(Content::Text(text.clone())));
        m.extra = extra;
        m.wire = wire;
        out.push(m);
        return Ok(());
    }
    if matches!(content, None | Some(Value::Null)) {
        // Not a message the rails could judge; forwarded as is, the backend might read it.
        return Err(PayloadError::new(format!("{path}.content"), "is required"));
    }
    let blocks = blocks_of(content.as_ref(), &format!("{path}.content"))?;
    if role == "assistant" {
        return decode_turns(i, &path, blocks, extra, out);
    }
    let no_blocks = blocks.is_empty();
    let mut rest = Vec::new();
    for block in blocks {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        match (role, kind) {
            ("user", "tool_result") => {
                let mut b = block.as_object().cloned().unwrap_or_default();
                let id = b
                    .remove("tool_use_id")
                    .and_then(|v| v.as_str().map(str::to_string));
                let content = match b.remove("content") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) => Some(Content::Text(s)),
                    Some(other) => Some(Content::Parts(other)),
                };
                b.remove("type");
                let mut m = Message::new("tool", content);
                m.tool_call_id = id;
                m.extra = b;
                m.wire = wire.clone();
                out.push(m);
            }
            _ => rest.push(block),
        }
    }
    if no_blocks || !rest.is_empty() || role != "user" {
        let mut m = Message::new(role, Some(Content::Parts(Value::Array(rest))));
        m.extra = extra;
        m.wire = Wire::of(From::Blocks(i));
        out.push(m);
    }
    Ok(())
}

/// An assistant message's blocks as turns: each turn's leading other blocks (thinking), its
/// text and its calls, in that order; a server tool's result a tool result after the turn
/// holding its call. A block that would come out of order (text after a call, thinking after
/// text) starts a new turn, so the blocks go back exactly where they were.
fn decode_turns(
    i: usize,
    path: &str,
    blocks: Vec<Value>,
    extra: Map<String, Value>,
    out: &mut Vec<Message>,
) -> Result<(), PayloadError> {
    #[derive(Default)]
    struct Turn {
        before: Vec<Value>,
        text: Vec<Value>,
        calls: Vec<ToolCall>,
    }
    let mut extra = Some(extra);
    let mut turn = Turn::default();
    let mut any = false;
    let mut flush = |turn: &mut Turn, out: &mut Vec<Message>, last: bool| {
        let turn = std::mem::take(turn);
        let empty = turn.before.is_empty() && turn.text.is_empty() && turn.calls.is_empty();
        if empty && (any || !last) {
            return;
        }
        any = true;
        let content =
            (!turn.text.is_empty() || empty).then(|| Content::Parts(Value::Array(turn.text)));
        let mut m = Message::new("assistant", content);
        m.tool_calls = turn.calls;
        // The wire message's own keys ride on its first turn.
        m.extra = extra.take().unwrap_or_default();
        // Blocks the model does not map (thinking) ride in the turn, where the rails judge
        // their text as part of it (`codec::closed`); written back before its own.
        if !turn.before.is_empty() {
            m.extra.insert(BEFORE.into(), Value::Array(turn.before));
        }
        m.wire = Wire::of(From::Blocks(i));
        out.push(m);
    };
    for (k, block) in blocks.into_iter().enumerate() {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        if let Some(call) = call_of(&block) {
            let call = call.map_err(|()| {
                PayloadError::new(format!("{path}.content[{k}].input"), "must be an object")
            })?;
            turn.calls.push(call);
        } else if is_result(kind) {
            flush(&mut turn, out, false);
            let mut b = block.as_object().cloned().unwrap_or_default();
            let id = b
                .remove("tool_use_id")
                .and_then(|v| v.as_str().map(str::to_string));
            b.remove("type");
            b.insert(BLOCK.into(), json!(kind));
            // Its content is judged as the result's fields (`RESULT`), whatever its shape.
            let mut m = Message::new("tool", Some(Content::Parts(json!([]))));
            m.tool_call_id = id;
            m.extra = b;
            m.wire = Wire::of(From::Server(i));
            out.push(m);
        } else if kind == "text" {
            if !turn.calls.is_empty() {
                flush(&mut turn, out, false);
            }
            turn.text.push(block);
        } else {
            if !turn.text.is_empty() || !turn.calls.is_empty() {
                flush(&mut turn, out, false);
            }
            turn.before.push(block);
        }
    }
    flush(&mut turn, out, true);
    Ok(())
}

/// Whether a tool result is a server tool's, from an assistant message.
fn server_result(m: &Message) -> bool {
    m.role == "tool" && matches!(from(m), Some(From::Server(_)))
}

fn wire_role(m: &Message) -> &str {
    if server_result(m) {
        "assistant"
    } else if m.role == "tool" {
        "user"
    } else {
        &m.role
    }
}

impl Codec for Messages {
    const DOOR: Door = Door::Messages;
    const ROUTE: Route = Route::Messages;
    type Request = MessagesRequest;
    type Reply = MessagesReply;
    type Stream = MessagesStream;

    type Decoded = ();

    const SHAPE: Shape = REQUEST;
    const MESSAGE: Shape = MESSAGE;
    const CALL: Shape = CALL;
    const DECLARATIONS: &'static [(&'static str, ToolShape)] = &[("tools", TOOL)];

    fn own_shape(message: &Message) -> Option<&'static Shape> {
        server_result(message).then_some(&RESULT)
    }

    fn parse_request(bytes: &[u8], _scope: &str) -> serde_json::Result<Option<super::Parsed<()>>> {
        super::parse_object(bytes)
    }

    fn decode_parsed(
        body: Map<String, Value>,
        _: (),
    ) -> Result<(MessagesRequest, Payload), PayloadError> {
        Self::decode_request(body)
    }

    fn decode_request(
        body: Map<String, Value>,
    ) -> Result<(MessagesRequest, Payload), PayloadError> {
        let stream = stream_flag(&body)?;
        let mut messages = Vec::new();
        match body.get("system") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                let mut m = Message::new("system", Some(Content::Text(s.clone())));
                m.wire = Wire::of(From::System);
                messages.push(m);
            }
            Some(Value::Array(blocks)) => {
                let mut m = Message::new("system", Some(Content::Parts(json!(blocks))));
                m.wire = Wire::of(From::System);
                messages.push(m);
            }
            Some(_) => return Err(PayloadError::new("system", "must be a string or blocks")),
        }
        let raw = match body.get("messages") {
            Some(Value::Array(m)) => m,
            Some(_) => {
                return Err(PayloadError::new(
                    "messages",
                    "must be an array of messages",
                ))
            }
            None => return Err(PayloadError::new("messages", "is required")),
        };
        for (i, m) in raw.iter().enumerate() {
            decode_message(i, m, &mut messages)?;
        }
        let tools = match body.get("tools") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(tools)) => tools
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    if t.get("type").and_then(Value::as_str) == Some("mcp_toolset") {
                        // An MCP server's tools, called as `mcp__<server>__<tool>`.
                        let server = server_name(
                            t.get("mcp_server_name").unwrap_or(&Value::Null),
                            &format!("tools[{i}].mcp_server_name"),
                        )?;
                        let name = crate::model::mcp_toolset(server);
                        return Ok(ToolDef::declared(MCP, Some(&name), None, None));
                    }
                    let name = t.get("name").and_then(Value::as_str).ok_or_else(|| {
                        PayloadError::new(format!("tools[{i}].name"), "is required")
                    })?;
                    let kind = match t.get("type").and_then(Value::as_str) {
                        None | Some("custom") => FUNCTION,
                        Some(server_tool) if super::closed::Inert::Word.holds(server_tool) => {
                            server_tool
                        }
                        Some(_) => {
                            return Err(PayloadError::new(
                                format!("tools[{i}].type"),
                                "is not a tool type",
                            ))
                        }
                    };
                    // A schema it gives is judged with it, whatever its kind.
                    let parameters = t.get("input_schema").map(Schema::of);
                    Ok(ToolDef::declared(
                        kind,
                        Some(name),
                        t.get("description").and_then(Value::as_str),
                        parameters,
                    ))
                })
                .collect::<Result<_, PayloadError>>()?,
            Some(_) => return Err(PayloadError::new("tools", "must be an array of tools")),
        };
        let mut tools = tools;
        tools.extend(mcp_servers(&body)?);
        tools.extend(listings(&body)?);
        let mut fields = super::closed::fields(&body, &Self::SHAPE);
        fields.extend(super::closed::tool_fields(&body, "tools", &TOOL));
        Ok((
            MessagesRequest { body, stream },
            Payload {
                messages,
                tools,
                fields,
                ..Payload::default()
            },
        ))
    }

    fn stream_requested(request: &MessagesRequest) -> bool {
        request.stream
    }

    fn encode_request(
        request: &MessagesRequest,
        payload: &Payload,
        edited: bool,
        _original: &[u8],
    ) -> Vec<u8> {
        if !edited {
            return serde_json::to_vec(&request.body).unwrap_or_default();
        }
        let mut body = super::body_for_edit(&request.body, "messages");
        let mut wire: Vec<Value> = Vec::new();
        let mut group: Vec<&Message> = Vec::new();
        let flush = |group: &mut Vec<&Message>, wire: &mut Vec<Value>| {
            let Some(first) = group.first() else {
                return;
            };
            // The wire message's own keys ride on the part that is not a tool result (a tool
            // part's `extra` is its block's).
            let mut obj = group
                .iter()
                .find(|m| m.role != "tool")
                .map(|m| m.extra.clone())
                .unwrap_or_default();
            obj.remove(BEFORE);
            obj.insert("role".into(), json!(wire_role(first)));
            let single_text = group.len() == 1
                && group[0].role != "tool"
                && matches!(group[0].content, Some(Content::Text(_)))
                && group[0].tool_calls.is_empty()
                && !matches!(from(group[0]), Some(From::Blocks(_)));
            let content = match (&group[0].content, single_text) {
                (Some(Content::Text(t)), true) => json!(t),
                _ => encode_blocks(group),
            };
            obj.insert("content".into(), content);
            wire.push(Value::Object(obj));
            group.clear();
        };
        for m in &payload.messages {
            if is_system(m) {
                let system = match &m.content {
                    Some(Content::Text(t)) => json!(t),
                    Some(Content::Parts(p)) => p.clone(),
                    None => Value::Null,
                };
                body.insert("system".into(), system);
                continue;
            }
            let same = group.last().is_some_and(|last| {
                origin(last).is_some()
                    && origin(last) == origin(m)
                    && wire_role(last) == wire_role(m)
            });
            if !same {
                flush(&mut group, &mut wire);
            }
            group.push(m);
        }
        flush(&mut group, &mut wire);
        body.insert("messages".into(), Value::Array(wire));
        // A listing replayed offers the model what it lists: those a policy hid are left out.
        let hidden: Vec<&str> = payload
            .tools
            .iter()
            .filter(|t| t.hidden_by.is_some())
            .filter_map(|t| t.name.as_deref())
            .collect();
        if let Some(Value::Array(wire)) = body.get_mut("messages") {
            for block in wire
                .iter_mut()
                .filter_map(|m| m.get_mut("content").and_then(Value::as_array_mut))
                .flatten()
                .filter(|b| b["type"] == LISTING)
            {
                let server = block["mcp_server_name"].as_str().unwrap_or("").to_string();
                if let Some(tools) = block.get_mut("tools") {
                    super::responses::offer_listed(&server, tools, &hidden);
                }
            }
        }
        // The servers a policy hid are not connected (their toolsets follow the request's).
        let declared = match body.get("tools") {
            Some(Value::Array(tools)) => tools.len(),
            _ => 0,
        };
        if let Some(Value::Array(servers)) = body.get_mut("mcp_servers") {
            let defs = payload.tools.get(declared..).unwrap_or(&[]);
            let mut at = 0;
            servers.retain(|_| {
                at += 1;
                defs.get(at - 1).is_none_or(|d| d.hidden_by.is_none())
            });
        }
        super::encode_body(body, payload, |t, d| {
            t["description"] = json!(d);
        })
    }

    fn decode_reply(mut body: Map<String, Value>) -> Result<(MessagesReply, Vec<Message>), String> {
        let Some(Value::Array(content)) = body.get("content") else {
            return Err("'content' is missing or not an array".into());
        };
        let mut texts = Vec::new();
        let mut calls = Vec::new();
        let mut others = Vec::new();
        for block in content {
            if let Some(call) = call_of(block) {
                calls.push(call.map_err(|()| "a tool use's input is not an object".to_string())?);
                continue;
            }
            match block.get("type").and_then(Value::as_str) {
                Some("text") => texts.push(block.clone()),
                _ => others.push(block.clone()),
            }
        }
        let content = (!texts.is_empty()).then(|| Content::Parts(Value::Array(texts)));
        let mut message = Message::reply(content, calls);
        // Blocks the model does not map (thinking, server tools and their results, MCP blocks)
        // ride in the reply, whose rails judge their text; written back as they left them.
        if !others.is_empty() {
            message.extra.insert(BEFORE.into(), Value::Array(others));
        }
        // So do the reply's own fields that carry text.
        if let Some(fields) = super::closed::take_outside(&mut body, &REPLY) {
            message.extra.insert(REPLY_KEY.into(), fields);
        }
        Ok((MessagesReply { body }, vec![message]))
    }

    fn encode_reply(reply: MessagesReply, judged: Vec<Judged>, railyard: Option<Value>) -> Value {
        let mut body = reply.body;
        if let Some(mut judged) = judged.into_iter().next() {
            if let Some(content) = body.get_mut("content") {
                *content = rewrite_content(std::mem::take(content), &judged.message);
            }
            if let Some(Value::Object(fields)) = judged.message.extra.remove(REPLY_KEY) {
                body.extend(fields);
            }
            if judged.calls_removed {
                body.insert("stop_reason".into(), json!("end_turn"));
            } else if judged.calls_added {
                body.insert("stop_reason".into(), json!("tool_use"));
            }
        }
        if let Some(railyard) = railyard {
            body.insert("railyard".into(), railyard);
        }
        Value::Object(body)
    }

    fn refusal(request: &MessagesRequest, id: &str, text: &str, railyard: Value) -> Value {
        json!({
            "id": format!("msg_{id}"),
            "type": "message",
            "role": "assistant",
            "model": request.body.get("model").cloned().unwrap_or(Value::Null),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "refusal",
            "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0},
            "railyard": railyard,
        })
    }

    fn model(request: &MessagesRequest) -> Option<String> {
        request
            .body
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn chosen(request: &MessagesRequest) -> Vec<String> {
        super::chosen_in(&request.body, &["tool_choice"])
    }

    fn stream(_request: &MessagesRequest) -> MessagesStream {
        MessagesStream::default()
    }
}

#[cfg(test)]
mod tests;
