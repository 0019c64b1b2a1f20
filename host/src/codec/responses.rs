//! OpenAI Responses: `POST /v1/responses`.
//!
//! Request → model: `instructions` is a system message; `input` (a string, or a list of items)
//! becomes messages: message items as they are; consecutive call items one assistant message
//! with those calls (a turn): `function_call`s, `custom_tool_call`s (custom calls, by their own
//! names) and hosted calls (`web_search_call`, `mcp_call`, ...: a call of the hosted tool's type,
//! followed by a tool result holding what the item returned, so the `tool_result` rail judges it
//! and `flow` counts the read); `function_call_output` and the other `*_output` items tool
//! results. Items the model does not know (reasoning, references, approvals) ride along with the
//! next message and are written back in place. Tools: function tools are flat (`{"type":
//! "function", "name", "parameters"}`); hosted tools are declared by type (a `_preview` suffix
//! dropped, so `web_search_preview` allows the `web_search_call` items it produces); an MCP
//! server (`{"type": "mcp", "server_label": "crm"}`) as `mcp__crm`, whose tools are called as
//! `mcp__crm__<tool>`.
//!
//! Reply → model: the message items' text parts are the reply's content (as content parts, so a
//! policy edits each part), `function_call` and `custom_tool_call` items its calls, other
//! `*_call` items hosted calls (what they returned rides in them, judged as the reply's text).
//! Streaming: `stream`.

mod output;
mod stream;

use super::closed::{Inert, Shape, ToolShape};
use super::{opt_string, stream_flag, Codec, Door, Judged, Route};
use crate::model::{
    Content, Message, Payload, PayloadError, Schema, ToolCall, ToolDef, Wire, FUNCTION,
};
use output::rewrite_output;
pub(crate) use output::{message_item, response_object};
use serde_json::{json, Map, Value};
pub use stream::ResponsesStream;

/// The Responses door.
pub struct Responses;

/// A `tools` declaration: a function's or custom tool's name, description and parameters are
/// mapped (a hosted tool's description too), and a namespace's tools are declarations of their
/// own; the words and ids of hosted tools' settings are inert, and an MCP server's credentials
/// (`headers`, `authorization`) opaque; every other string (an MCP server's description, a
/// grammar, an unknown field) is the request's field. The keys are those of the OpenAI SDK's
/// tool types (3.54).
const TOOL: ToolShape = ToolShape {
    tool: Shape {
        mapped: &["name", "description", "parameters", NAMESPACE_TOOLS],
        inert: &[
            ("type", Inert::Word),
            ("format.type", Inert::Word),
            ("format.syntax", Inert::Word),
            ("server_label", Inert::Word),
            ("server_url", Inert::Id),
            ("connector_id", Inert::Id),
            ("headers.*", Inert::Data),
            ("authorization", Inert::Data),
            ("require_approval", Inert::Word),
            ("require_approval.always.tool_names[]", Inert::Word),
            ("require_approval.never.tool_names[]", Inert::Word),
            ("allowed_tools[]", Inert::Word),
            ("allowed_tools.tool_names[]", Inert::Word),
            ("vector_store_ids[]", Inert::Id),
            ("ranking_options.ranker", Inert::Word),
            ("search_context_size", Inert::Word),
            ("user_location.type", Inert::Word),
            ("user_location.country", Inert::Word),
            ("user_location.timezone", Inert::Word),
            ("filters.allowed_domains[]", Inert::Word),
            ("container", Inert::Id),
            ("container.type", Inert::Word),
            ("container.file_ids[]", Inert::Id),
            ("environment", Inert::Word),
            ("model", Inert::Word),
            ("quality", Inert::Word),
            ("size", Inert::Word),
            ("output_format", Inert::Word),
            ("background", Inert::Word),
            ("moderation", Inert::Word),
            ("input_fidelity", Inert::Word),
            ("allowed_callers[]", Inert::Word),
            ("tunnel_id", Inert::Id),
            ("execution", Inert::Word),
            ("search_content_types[]", Inert::Word),
        ],
        known: &[
            "action",
            "async",
            "complexity",
            "defer_loading",
            "display_height",
            "display_width",
            "external_web_access",
            "filters",
            "format",
            "frame_count",
            "frame_duration_ms",
            "input_image_mask",
            "max_num_results",
            "output_compression",
            "output_schema",
            "partial_images",
            "ranking_options",
            "server_description",
            "strict",
            "svg",
            "user_location",
        ],
    },
    inner: &[],
    nested: Some(NAMESPACE_TOOLS),
};

/// Where a namespace declares its tools.
const NAMESPACE_TOOLS: &str = "tools";

/// Where a reply's own fields ride in its message, judged as its text.
const REPLY_KEY: &str = "railyard.reply";

/// A response object's own fields: `output` is mapped; its ids, words and settings are inert;
/// the rest (what it echoes of the request: instructions, metadata, tool declarations; an
/// error's message; anything unknown) is judged as the reply's text, in a whole reply and in a
/// stream's lifecycle events alike.
pub(crate) const REPLY: Shape = Shape {
    mapped: &["output"],
    inert: &[
        ("id", Inert::Id),
        ("object", Inert::Word),
        ("status", Inert::Word),
        ("model", Inert::Word),
        ("previous_response_id", Inert::Id),
        ("tool_choice", Inert::Word),
        ("tool_choice.type", Inert::Word),
        ("tool_choice.name", Inert::Word),
        ("tool_choice.mode", Inert::Word),
        ("truncation", Inert::Word),
        ("service_tier", Inert::Word),
        ("reasoning.effort", Inert::Word),
        ("reasoning.summary", Inert::Word),
        ("reasoning.generate_summary", Inert::Word),
        ("text.format.type", Inert::Word),
        ("text.format.name", Inert::Word),
        ("text.verbosity", Inert::Word),
        ("tools[].type", Inert::Word),
        ("tools[].name", Inert::Word),
        ("tools[].server_label", Inert::Word),
        ("tools[].server_url", Inert::Id),
        ("tools[].connector_id", Inert::Id),
        ("tools[].headers.*", Inert::Data),
        ("tools[].authorization", Inert::Data),
        ("tools[].require_approval", Inert::Word),
        ("tools[].vector_store_ids[]", Inert::Id),
        ("tools[].search_context_size", Inert::Word),
        ("tools[].environment", Inert::Word),
        ("conversation.id", Inert::Id),
        ("prompt.id", Inert::Id),
        ("prompt.version", Inert::Word),
        ("prompt_cache_retention", Inert::Word),
        ("incomplete_details.reason", Inert::Word),
        ("error.code", Inert::Word),
        ("include[]", Inert::Word),
        ("billing.payer", Inert::Word),
    ],
    known: &[],
};

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
/// Where a reply's message items' own fields (but their content) ride in it, one object per
/// message item, in order.
pub(crate) const MESSAGES: &str = "railyard.messages";

/// An input item's fields beyond those the model maps (a message item's, a call's, a hosted
/// call's whole item), and the items riding in a message: their text is judged, their ids,
/// words and encrypted parts are not.
pub(crate) const ITEM: Shape = Shape {
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
        ("railyard.messages[].id", Inert::Id),
        ("railyard.messages[].role", Inert::Word),
        ("railyard.messages[].status", Inert::Word),
        ("railyard.messages[].phase", Inert::Word),
        // What a hosted call returned, in the tool result made of it.
        ("result", Inert::Data),
        ("outputs[].type", Inert::Word),
        ("results[].file_id", Inert::Id),
        ("error.type", Inert::Word),
        ("error.code", Inert::Word),
        // A call's (or its output's) namespace, name and caller; a message's phase.
        ("namespace", Inert::Word),
        ("name", Inert::Word),
        ("caller.type", Inert::Word),
        ("caller.caller_id", Inert::Id),
        ("created_by", Inert::Id),
        ("phase", Inert::Word),
    ],
    known: &[
        "async",
        "max_output_length",
        "type",
        "id",
        "status",
        ITEMS,
        AFTER,
        "output",
        "outputs",
        "results",
        "result",
        "error",
        "acknowledged_safety_checks",
    ],
};

/// A decoded Responses request.
pub struct ResponsesRequest {
    body: Map<String, Value>,
    stream: bool,
}

/// A decoded Responses reply.
pub struct ResponsesReply {
    body: Map<String, Value>,
}

/// Where a message came from, when not from an input item of its own kind (a message, a
/// `function_call_output`): the message's `wire`, to write it back there.
#[derive(Debug, Clone, PartialEq, Eq)]
enum From {
    /// `instructions`.
    Instructions,
    /// `input` as a string.
    InputString,
    /// Call items, joined into a turn.
    Calls,
    /// What a hosted call returned (written back inside its call's item, in the turn before).
    Hosted,
    /// An item of this type answering a call the client ran (`custom_tool_call_output`, ...).
    Output(String),
}

/// Items before `m` the model does not map (reasoning, hosted calls, MCP items) ride in it,
/// where the rails judge their text as part of it (`codec::closed`).
fn attach(m: &mut Message, attached: Vec<Value>) {
    if !attached.is_empty() {
        m.extra.insert(ITEMS.into(), Value::Array(attached));
    }
}

fn from(message: &Message) -> Option<&From> {
    message.wire.get()
}

/// The item type of a result that is not a `function_call_output`.
fn output_type(message: &Message) -> Option<&str> {
    match from(message)? {
        From::Output(t) => Some(t),
        _ => None,
    }
}

/// The kind of hosted call an output item type names (`web_search_call` → `web_search`); a
/// custom tool's call is the client's, not a hosted one.
pub(crate) fn hosted_kind(item_type: &str) -> Option<&str> {
    item_type
        .strip_suffix("_call")
        .filter(|k| *k != FUNCTION && *k != "custom_tool" && !k.is_empty())
}

/// An MCP server's request that a person approve a call (the call it would make).
const APPROVAL_REQUEST: &str = "mcp_approval_request";

/// The kind of call an item is, beside function and custom calls: a hosted call's (its type's
/// stem), an MCP approval request's (`mcp`: it asks to make the call it names, which the rails
/// judge as that call), or, for an item of a type this door does not know that names a tool
/// and carries arguments (a newer API's call), its type: a call until shown otherwise.
pub(crate) fn call_kind<'a>(item_type: &'a str, item: &Map<String, Value>) -> Option<&'a str> {
    if let Some(kind) = hosted_kind(item_type) {
        return Some(kind);
    }
    if item_type == APPROVAL_REQUEST {
        return Some(crate::model::MCP);
    }
    let known = item_type == "message"
        || item_type.ends_with("_output")
        || matches!(
            item_type,
            "function_call" | "custom_tool_call" | "reasoning"
        );
    let names = item.get("name").is_some_and(Value::is_string);
    let call = !known && names && item.contains_key("arguments");
    // An item typed as a call kind of the model's own (`function`, `custom`) would be written
    // back as that kind's item, not as itself: it is a call of its own kind.
    if item_type == crate::model::FUNCTION || item_type == crate::model::CUSTOM {
        return call.then_some(UNKNOWN_ITEM);
    }
    call.then_some(item_type)
}

/// The kind of a call made by an item whose type names one of the model's own call kinds.
const UNKNOWN_ITEM: &str = "unknown_item";

/// The fields of a hosted call item that are what it returned (the rest is the call).
const RETURNED: [&str; 5] = ["output", "outputs", "results", "result", "error"];

/// A hosted call item as a call: of the tool's type, named as the tool is (an MCP tool
/// `mcp__<server>__<tool>`), its arguments what the item says it was asked (an MCP call's own
/// arguments, else its other fields as JSON), the whole item kept to be written back.
pub(crate) fn hosted_call(kind: &str, item: &Map<String, Value>) -> ToolCall {
    let id = item.get("id").and_then(Value::as_str).unwrap_or("");
    let mut call = ToolCall::hosted(id.into(), kind.into(), item.clone());
    let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
    if kind == crate::model::MCP {
        call.name = crate::model::mcp_tool(field("server_label"), field("name"));
    } else if hosted_kind(field("type")).is_none() && !field("name").is_empty() {
        // A call of a kind this door does not know goes by the tool it names.
        call.name = namespaced(field("name").to_string(), item);
    }
    call.arguments = match item.get("arguments") {
        Some(Value::String(a)) => a.clone(),
        _ => {
            let asked: Map<String, Value> = item
                .iter()
                .filter(|(k, _)| asked_field(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Value::Object(asked).to_string()
        }
    };
    call
}

/// A hosted call as its item, as the rails left it: the item it came as, with its arguments
/// put back where [`hosted_call`] found them (an MCP call's `arguments`, else the fields they
/// were made of), so what a policy changed in them is what the client or the backend reads.
/// Its id is the call's (the daemon signs it).
pub(crate) fn hosted_item(call: &ToolCall) -> Map<String, Value> {
    let mut item = call.extra.clone();
    if item.get("arguments").is_some_and(Value::is_string) {
        item.insert("arguments".into(), json!(call.arguments));
    } else if let Ok(Value::Object(asked)) = serde_json::from_str::<Value>(&call.arguments) {
        // The fields the arguments were made of, as the rails left them (a key a policy
        // renamed replaces the one it was).
        item.retain(|k, _| !asked_field(k));
        item.extend(asked.into_iter().filter(|(k, _)| asked_field(k)));
    }
    // An item without an id is not given one.
    if !call.id.is_empty() || item.contains_key("id") {
        item.insert("id".into(), json!(call.id));
    }
    item
}

/// Whether a hosted call item's field `k` is one of those its arguments are made of.
fn asked_field(k: &str) -> bool {
    !RETURNED.contains(&k) && !matches!(k, "type" | "id" | "status" | "call_id")
}

/// A custom tool's call item (`custom_tool_call`) as a custom call.
pub(crate) fn custom_call(item: &Map<String, Value>) -> ToolCall {
    let mut extra = item.clone();
    let mut take = |k: &str| {
        extra
            .remove(k)
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let (id, name, input) = (take("call_id"), take("name"), take("input"));
    extra.remove("type");
    let mut call = ToolCall::custom(id, namespaced(name, &extra), input);
    call.extra = extra;
    call
}

/// A custom call as its item.
pub(crate) fn custom_item(call: &ToolCall) -> Value {
    let mut item = call.extra.clone();
    item.insert("type".into(), json!("custom_tool_call"));
    item.insert("call_id".into(), json!(call.id));
    item.insert("name".into(), json!(item_name(call)));
    item.insert("input".into(), json!(call.arguments));
    Value::Object(item)
}

/// Items that answer a call the client ran: their `call_id` (or `id`) is the call's.
fn is_output(kind: &str) -> bool {
    kind.ends_with("_call_output") && kind != "function_call_output"
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
    match body.get("tools").filter(|t| !t.is_null()) {
        Some(tools) => decode_tool_list(tools, "tools"),
        None => Ok(Vec::new()),
    }
}

/// Input items that declare tools beside the request's `tools`, each in its own `tools`: a
/// developer's tools added mid-conversation, a tool search's findings. The model is offered
/// them as it is the request's, so the tools rail judges them as declarations too.
const DECLARING: [&str; 2] = ["additional_tools", "tool_search_output"];

/// The tools the input items declare ([`DECLARING`]), in order, after the request's; then
/// those MCP servers' listings replayed in the input declare ([`listed`]).
fn decode_item_tools(body: &Map<String, Value>) -> Result<Vec<ToolDef>, PayloadError> {
    let mut out = Vec::new();
    let Some(Value::Array(items)) = body.get("input") else {
        return Ok(out);
    };
    let mut listings = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == LISTING {
            server_label(item, &format!("input[{i}].server_label"))?;
            listings.extend(listed(item));
            continue;
        }
        if !DECLARING.contains(&kind) {
            continue;
        }
        match item.get("tools") {
            Some(tools @ Value::Array(_)) => {
                out.extend(decode_tool_list(tools, &format!("input[{i}].tools"))?)
            }
            _ => {
                return Err(PayloadError::new(
                    format!("input[{i}].tools"),
                    "must be an array of tools",
                ))
            }
        }
    }
    out.extend(listings);
    Ok(out)
}

/// An MCP server's listing of its tools, as a response carried it (`mcp_list_tools`): sent
/// back, the provider offers the model those tools, so each is a declaration of the tool it
/// lists (`mcp__<server>__<tool>`, as its calls are named).
const LISTING: &str = "mcp_list_tools";

/// The tools a listing (an `mcp_list_tools` item, an Anthropic `mcp_tool_listing` block) lists,
/// each as the declaration of an MCP tool of `server`.
pub(crate) fn listed_tools(server: &str, tools: Option<&Value>) -> Vec<ToolDef> {
    let Some(Value::Array(tools)) = tools else {
        return Vec::new();
    };
    tools
        .iter()
        .map(|t| {
            let name = t.get("name").and_then(Value::as_str).unwrap_or("");
            ToolDef::declared(
                crate::model::MCP,
                Some(&crate::model::mcp_tool(server, name)),
                t.get("description").and_then(Value::as_str),
                t.get("input_schema")
                    .filter(|s| s.is_object())
                    .map(Schema::of),
            )
        })
        .collect()
}

/// An MCP server's label where it names the toolset its tools are called through: a word (it
/// is matched as a name, never judged as text).
fn server_label<'v>(item: &'v Value, at: &str) -> Result<&'v str, PayloadError> {
    item.get("server_label")
        .and_then(Value::as_str)
        .filter(|n| super::closed::Inert::Word.holds(n))
        .ok_or_else(|| {
            PayloadError::new(at, "must be a server's label (letters, digits and _-.:/)")
        })
}

fn listed(item: &Value) -> Vec<ToolDef> {
    let server = item
        .get("server_label")
        .and_then(Value::as_str)
        .unwrap_or("");
    listed_tools(server, item.get("tools"))
}

/// A listing's tools the model is offered: those a policy hid (in `hidden`, by the names the
/// rails know them by) left out.
pub(crate) fn offer_listed(server: &str, tools: &mut Value, hidden: &[&str]) {
    if let Value::Array(list) = tools {
        list.retain(|t| {
            let name = t.get("name").and_then(Value::as_str).unwrap_or("");
            !hidden.contains(&crate::model::mcp_tool(server, name).as_str())
        });
    }
}

/// The items written upstream, each declaring item's tools as the model is offered them
/// (`tools`: the request's declared tools, the items' after them, as [`decode_item_tools`]
/// found them): those a policy hid left out, rewritten descriptions in place.
fn offer_item_tools(input: &mut [Value], tools: &[ToolDef]) {
    let mut at = 0;
    for item in input.iter_mut() {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        if !DECLARING.contains(&kind) {
            continue;
        }
        let Some(list) = item.get("tools").cloned() else {
            continue;
        };
        let n = decode_tool_list(&list, "tools").map_or(0, |t| t.len());
        let own = &tools[at.min(tools.len())..(at + n).min(tools.len())];
        at += n;
        if let Value::Array(original) = &list {
            item["tools"] = Value::Array(offered(original, own));
        }
    }
}

/// A list of declarations (the request's `tools`, or an item's): a namespace's members each a
/// declaration of its own.
fn decode_tool_list(tools: &Value, at: &str) -> Result<Vec<ToolDef>, PayloadError> {
    let tools = tools
        .as_array()
        .ok_or_else(|| PayloadError::new(at, "must be an array of tools"))?;
    let mut out = Vec::with_capacity(tools.len());
    for (i, t) in tools.iter().enumerate() {
        let path = format!("{at}[{i}]");
        if !is_namespace(t) {
            out.push(decode_tool(t, &path, None)?);
            continue;
        }
        // A namespace's tools are declared each on its own, named `<namespace>.<tool>` as
        // their calls are (`namespaced`); the namespace itself is not a tool.
        let ns = t
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| PayloadError::new(format!("{path}.name"), "is required"))?;
        let members = t
            .get(NAMESPACE_TOOLS)
            .and_then(Value::as_array)
            .ok_or_else(|| PayloadError::new(format!("{path}.tools"), "must be an array"))?;
        for (j, m) in members.iter().enumerate() {
            let mpath = format!("{path}.tools[{j}]");
            let kind = m.get("type").and_then(Value::as_str);
            if !matches!(kind, Some(FUNCTION | crate::model::CUSTOM)) {
                return Err(PayloadError::new(
                    format!("{mpath}.type"),
                    "must be \"function\" or \"custom\" in a namespace",
                ));
            }
            out.push(decode_tool(m, &mpath, Some(ns))?);
        }
    }
    Ok(out)
}

/// A declaration that is not a namespace; in namespace `ns`, named as its calls are.
fn decode_tool(t: &Value, path: &str, ns: Option<&str>) -> Result<ToolDef, PayloadError> {
    let kind = t
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| PayloadError::new(format!("{path}.type"), "is required"))?;
    // A declaration's type is a word, and only a namespace declares tools inside it: anything
    // else would be a declaration no rail could read.
    if !super::closed::Inert::Word.holds(kind) {
        return Err(PayloadError::new(
            format!("{path}.type"),
            "is not a tool type",
        ));
    }
    if t.get(NAMESPACE_TOOLS).is_some_and(|v| !v.is_null()) {
        return Err(PayloadError::new(
            format!("{path}.tools"),
            "only a namespace declares tools inside it",
        ));
    }
    if kind == crate::model::MCP {
        // An MCP server's tools, called as `mcp__<server>__<tool>`.
        let server = server_label(t, &format!("{path}.server_label"))?;
        let name = crate::model::mcp_toolset(server);
        return Ok(ToolDef::declared(kind, Some(&name), None, None));
    }
    let name = t.get("name").and_then(Value::as_str);
    let description = t.get("description").and_then(Value::as_str);
    let in_ns = |name: &str| ns.map_or_else(|| name.to_string(), |ns| format!("{ns}.{name}"));
    if kind != FUNCTION {
        let kind = kind.strip_suffix("_preview").unwrap_or(kind);
        let name = name.map(in_ns);
        // A schema it gives is judged with it, whatever its kind.
        let parameters = t.get("parameters").filter(|p| !p.is_null()).map(Schema::of);
        return Ok(ToolDef::declared(
            kind,
            name.as_deref(),
            description,
            parameters,
        ));
    }
    let name = name.ok_or_else(|| {
        PayloadError::new(format!("{path}.name"), "is required and must be a string")
    })?;
    Ok(ToolDef::declared(
        FUNCTION,
        Some(&in_ns(name)),
        description,
        t.get("parameters").filter(|p| !p.is_null()).map(Schema::of),
    ))
}

/// A namespace declaration, and where it declares its tools.
const NAMESPACE: &str = "namespace";

fn is_namespace(declaration: &Value) -> bool {
    declaration.get("type").and_then(Value::as_str) == Some(NAMESPACE)
}

/// A namespace's description, which is no tool's (its tools are the declarations), as a field
/// of the request.
fn namespace_descriptions(body: &Map<String, Value>) -> Vec<crate::model::Field> {
    let Some(Value::Array(tools)) = body.get("tools") else {
        return Vec::new();
    };
    tools
        .iter()
        .enumerate()
        .filter(|(_, t)| is_namespace(t))
        .filter_map(|(i, t)| {
            Some(crate::model::Field {
                path: format!("tools[{i}].description"),
                value: t.get("description")?.as_str()?.to_string(),
            })
        })
        .collect()
}

/// A call's name as the rails know it: in a namespace, `<namespace>.<name>` (a function's name
/// cannot hold a `.`, so no top-level tool can pose as a namespace's, nor one namespace's tool
/// as another's). `item` holds the call's other fields, `namespace` among them.
fn namespaced(name: String, item: &Map<String, Value>) -> String {
    match item.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() => format!("{ns}.{name}"),
        _ => name,
    }
}

/// A call's name as its item spells it (the name [`namespaced`] made, taken apart again).
fn item_name(call: &ToolCall) -> &str {
    let ns = call.extra.get("namespace").and_then(Value::as_str);
    ns.filter(|ns| !ns.is_empty())
        .and_then(|ns| call.name.strip_prefix(ns)?.strip_prefix('.'))
        .unwrap_or(&call.name)
}

/// A function call item as a call (the item's other fields kept to be written back).
pub(crate) fn function_call(mut item: Map<String, Value>) -> ToolCall {
    let mut take = |k: &str| {
        item.remove(k)
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let (id, name, arguments) = (take("call_id"), take("name"), take("arguments"));
    item.remove("type");
    let mut call = ToolCall::function(id, namespaced(name, &item), arguments);
    call.extra = item;
    call
}

/// A function call as its item.
pub(crate) fn function_item(call: &ToolCall) -> Map<String, Value> {
    let mut item = call.extra.clone();
    item.insert("type".into(), json!("function_call"));
    item.insert("call_id".into(), json!(call.id));
    item.insert("name".into(), json!(item_name(call)));
    item.insert("arguments".into(), json!(call.arguments));
    item
}

/// The declarations in `original` (the request's `tools`) as the model is offered them, as
/// [`super::offered_tools`] writes them, a namespace's tools each judged on its own: a
/// namespace left with none is left out.
fn offered(original: &[Value], tools: &[ToolDef]) -> Vec<Value> {
    let describe = |t: &mut Value, d: &str| t["description"] = json!(d);
    let mut at = 0;
    let mut out = Vec::with_capacity(original.len());
    for json in original {
        // A declaration and the tools it declares: itself, or a namespace's members.
        let (declared, members) = match json.get(NAMESPACE_TOOLS) {
            Some(Value::Array(m)) if is_namespace(json) => (m.as_slice(), true),
            _ => (std::slice::from_ref(json), false),
        };
        let own = &tools[at.min(tools.len())..(at + declared.len()).min(tools.len())];
        at += declared.len();
        let kept = super::offered_tools(declared, own, describe);
        if !members {
            out.extend(kept);
        } else if !kept.is_empty() {
            let mut ns = json.clone();
            ns[NAMESPACE_TOOLS] = Value::Array(kept);
            out.push(ns);
        }
    }
    out
}

/// A call of the history: it joins the turn before it when nothing came between, else starts
/// one (with the items that came between riding in it).
fn push_call(messages: &mut Vec<Message>, attached: &mut Vec<Value>, call: ToolCall) {
    let continues = attached.is_empty()
        && messages
            .last()
            .is_some_and(|m| from(m) == Some(&From::Calls));
    if continues {
        messages.last_mut().expect("checked").tool_calls.push(call);
    } else {
        let mut m = Message::reply(None, vec![call]);
        m.wire = Wire::of(From::Calls);
        attach(&mut m, std::mem::take(attached));
        messages.push(m);
    }
}

/// Whether the request continues a response the backend stored.
fn continues(body: &Map<String, Value>) -> bool {
    matches!(body.get("previous_response_id"), Some(Value::String(id)) if !id.is_empty())
}

/// `input` items → messages; returns the messages and the items after the last one.
/// `restored`: an id the daemon signed was given back its own (the body must be written anew).
fn decode_items(
    items: &[Value],
    restored: &mut bool,
) -> Result<(Vec<Message>, Vec<Value>), PayloadError> {
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
                m.extra = obj;
                attach(&mut m, std::mem::take(&mut attached));
                messages.push(m);
            }
            Some(t @ "function_call") | Some(t @ "custom_tool_call") => {
                let call = if t == "custom_tool_call" {
                    custom_call(&obj)
                } else {
                    if !obj.get("name").is_some_and(Value::is_string) {
                        let path = format!("{path}.name");
                        return Err(PayloadError::new(path, "is required and must be a string"));
                    }
                    let not_string =
                        |k: &&&str| obj.get(**k).is_some_and(|v| !v.is_null() && !v.is_string());
                    if let Some(k) = ["call_id", "arguments", "namespace"]
                        .iter()
                        .find(not_string)
                    {
                        return Err(PayloadError::new(format!("{path}.{k}"), "must be a string"));
                    }
                    function_call(obj)
                };
                push_call(&mut messages, &mut attached, call);
            }
            Some(t) if call_kind(t, &obj).is_some() => {
                // The provider ran it (or asks to): a call, and what it returned a result of it.
                let kind = call_kind(t, &obj).unwrap_or(t);
                let mut call = hosted_call(kind, &obj);
                let mut returned = Map::new();
                for k in RETURNED {
                    if let Some(v) = call.extra.remove(k) {
                        returned.insert(k.into(), v);
                    }
                }
                let id = call.id.clone();
                push_call(&mut messages, &mut attached, call);
                // Its own content is what it returned, folded in (`codec::closed`).
                let mut m = Message::new("tool", Some(Content::Parts(json!([]))));
                m.tool_call_id = Some(id);
                m.extra = returned;
                m.wire = Wire::of(From::Hosted);
                messages.push(m);
            }
            Some(t) if is_output(t) => {
                // What a call the client ran (a custom tool, a shell, a computer) returned.
                let call_id = match opt_string(&mut obj, "call_id", &path)? {
                    Some(id) => Some(id),
                    None => obj.get("id").and_then(Value::as_str).map(str::to_string),
                };
                let mut m = Message::new("tool", content(obj.remove("output").unwrap_or_default()));
                m.tool_call_id = call_id;
                m.extra = obj;
                m.wire = Wire::of(From::Output(t.to_string()));
                attach(&mut m, std::mem::take(&mut attached));
                messages.push(m);
            }
            Some("function_call_output") => {
                let call_id = opt_string(&mut obj, "call_id", &path)?;
                let mut m = Message::new("tool", content(obj.remove("output").unwrap_or_default()));
                m.tool_call_id = call_id;
                m.extra = obj;
                attach(&mut m, std::mem::take(&mut attached));
                messages.push(m);
            }
            Some("mcp_approval_response") => {
                // It answers an approval request the client was shown under the id the daemon
                // signed it with (`call_kind`): the backend knows the request by its own.
                let mut item = obj;
                if let Some(Value::String(id)) = item.get_mut("approval_request_id") {
                    let own = crate::model::model_id(id).to_string();
                    *restored |= own != *id;
                    *id = own;
                }
                attached.push(Value::Object(item));
            }
            _ => attached.push(item.clone()),
        }
    }
    Ok((messages, attached))
}

/// A continuation (`previous_response_id`): the backend keeps the turn whose calls the first
/// results answer, and the request carries only the results. Each run of results answering
/// calls the request does not show gets a turn of its own before it, its calls known by the
/// results' ids (provenance names them from the ids the daemon signed), so the results are
/// judged as results of that turn; the turn is never written back.
fn link_unseen(messages: Vec<Message>) -> Vec<Message> {
    let mut shown: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut out: Vec<Message> = Vec::with_capacity(messages.len() + 1);
    for m in messages {
        shown.extend(m.tool_calls.iter().map(|c| c.id.clone()));
        let answers_unseen = m.role == "tool"
            && from(&m) != Some(&From::Hosted)
            && m.tool_call_id
                .as_deref()
                .is_some_and(|id| !id.is_empty() && !shown.contains(id));
        if answers_unseen {
            let id = m.tool_call_id.clone().unwrap_or_default();
            let call = match output_type(&m) {
                None => ToolCall::function(id.clone(), String::new(), String::new()),
                Some("custom_tool_call_output") => {
                    ToolCall::custom(id.clone(), String::new(), String::new())
                }
                Some(t) => {
                    let kind = t.strip_suffix("_output").and_then(hosted_kind).unwrap_or(t);
                    ToolCall::hosted(id.clone(), kind.into(), Map::new())
                }
            };
            // Results follow their turn: a run of results gets one unseen turn at its head. A
            // run after a turn the request shows is left as it stands, for linkage to judge.
            if out.last().is_some_and(|o| o.role == "tool") {
                let head = out.iter().rposition(|o| o.role != "tool");
                if let Some(i) = head.filter(|&i| out[i].unseen) {
                    out[i].tool_calls.push(call);
                }
            } else {
                let mut turn = Message::reply(None, vec![call]);
                turn.unseen = true;
                out.push(turn);
            }
            shown.insert(id);
        }
        out.push(m);
    }
    out
}

fn encode_items(messages: &[Message], input: &mut Vec<Value>) {
    for (i, m) in messages.iter().enumerate() {
        if m.unseen {
            continue;
        }
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
            if from(m) == Some(&From::Hosted) {
                // Written back inside its call's item.
                input.extend(after.iter().cloned());
                continue;
            }
            let mut item = extra.clone();
            let kind = output_type(m);
            item.insert("type".into(), json!(kind.unwrap_or("function_call_output")));
            if kind.is_none() || item.contains_key("call_id") || !item.contains_key("id") {
                item.insert("call_id".into(), json!(m.tool_call_id));
            }
            item.insert("output".into(), content_json(&m.content));
            input.push(Value::Object(item));
            input.extend(after.iter().cloned());
            continue;
        }
        if m.has_text() || from(m) != Some(&From::Calls) {
            let mut item = Map::new();
            item.insert("role".into(), json!(m.role));
            item.insert("content".into(), content_json(&m.content));
            item.extend(extra.clone());
            input.push(Value::Object(item));
        }
        for call in &m.tool_calls {
            input.push(call_input_item(call, &messages[i + 1..]));
        }
        input.extend(after.iter().cloned());
    }
}

/// A call of the history as its input item: a hosted call's item with what it returned (the
/// tool result after it) put back in.
fn call_input_item(call: &ToolCall, later: &[Message]) -> Value {
    match call.kind.as_str() {
        FUNCTION => Value::Object(function_item(call)),
        crate::model::CUSTOM => custom_item(call),
        _ => {
            let mut item = hosted_item(call);
            let result = later.iter().find(|r| {
                from(r) == Some(&From::Hosted) && r.tool_call_id.as_deref() == Some(&call.id)
            });
            if let Some(result) = result {
                // What it returned; the items around it are written around it, not in it.
                item.extend(
                    result
                        .extra
                        .iter()
                        .filter(|(k, _)| k.as_str() != ITEMS && k.as_str() != AFTER)
                        .map(|(k, v)| (k.clone(), v.clone())),
                );
            }
            Value::Object(item)
        }
    }
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
    const DECLARATIONS: &'static [(&'static str, ToolShape)] = &[("tools", TOOL)];

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
        let mut restored = false;
        match body.get("instructions") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                let mut m = Message::new("system", Some(Content::Text(s.clone())));
                m.wire = Wire::of(From::Instructions);
                messages.push(m);
            }
            Some(_) => return Err(PayloadError::new("instructions", "must be a string")),
        }
        match body.get("input") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                let mut m = Message::new("user", Some(Content::Text(s.clone())));
                m.wire = Wire::of(From::InputString);
                messages.push(m);
            }
            Some(Value::Array(items)) => {
                let (mut more, trailing) = decode_items(items, &mut restored)?;
                if continues(&body) {
                    more = link_unseen(more);
                }
                if !trailing.is_empty() {
                    // Items after the last message of the input ride in it (after its own);
                    // with none to ride in (the instructions' is written elsewhere), a turn of
                    // no text and no calls carries them, so that they are judged and written
                    // back: it writes nothing of its own.
                    if more.is_empty() {
                        let mut carrier = Message::reply(None, Vec::new());
                        carrier.wire = Wire::of(From::Calls);
                        more.push(carrier);
                    }
                    if let Some(last) = more.last_mut() {
                        last.extra.insert(AFTER.into(), Value::Array(trailing));
                    }
                }
                messages.extend(more);
            }
            Some(_) => {
                return Err(PayloadError::new(
                    "input",
                    "must be a string or a list of items",
                ))
            }
        }
        let mut tools = decode_tools(&body)?;
        tools.extend(decode_item_tools(&body)?);
        let mut fields = super::closed::fields(&body, &Self::SHAPE);
        fields.extend(super::closed::tool_fields(&body, "tools", &TOOL));
        fields.extend(namespace_descriptions(&body));
        let request = ResponsesRequest { body, stream };
        let mut payload = Payload {
            messages,
            tools,
            fields,
            ..Payload::default()
        };
        payload.changes.other = restored;
        Ok((request, payload))
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
            if from(m) == Some(&From::Instructions) {
                body.insert("instructions".into(), content_json(&m.content));
            } else {
                rest.push(m.clone());
            }
        }
        let input = match rest.as_slice() {
            [only] if from(only) == Some(&From::InputString) => content_json(&only.content),
            _ => {
                let mut items = Vec::new();
                encode_items(&rest, &mut items);
                let declared = match body.get("tools") {
                    Some(tools) if !tools.is_null() => {
                        decode_tool_list(tools, "tools").map_or(0, |t| t.len())
                    }
                    _ => 0,
                };
                offer_item_tools(&mut items, payload.tools.get(declared..).unwrap_or(&[]));
                let hidden: Vec<&str> = payload
                    .tools
                    .iter()
                    .filter(|t| t.hidden_by.is_some())
                    .filter_map(|t| t.name.as_deref())
                    .collect();
                for item in items.iter_mut().filter(|i| i["type"] == LISTING) {
                    let server = item["server_label"].as_str().unwrap_or("").to_string();
                    if let Some(tools) = item.get_mut("tools") {
                        offer_listed(&server, tools, &hidden);
                    }
                }
                Value::Array(items)
            }
        };
        body.insert("input".into(), input);
        // Fields first: a declaration's are addressed by its place among all declared.
        super::write_fields(&mut body, &payload.fields);
        if let Some(Value::Array(tools)) = body.get("tools") {
            let kept = offered(tools, &payload.tools);
            body.insert("tools".into(), Value::Array(kept));
        }
        serde_json::to_vec(&body).unwrap_or_default()
    }

    fn decode_reply(
        mut body: Map<String, Value>,
    ) -> Result<(ResponsesReply, Vec<Message>), String> {
        let Some(Value::Array(output)) = body.get("output") else {
            return Err("'output' is missing or not an array".into());
        };
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        let mut others = Vec::new();
        let mut own = Vec::new();
        for item in output {
            match item.get("type").and_then(Value::as_str) {
                Some("message") => {
                    if let Some(Value::Array(content)) = item.get("content") {
                        parts.extend(content.iter().cloned());
                    }
                    // Its own fields (its id, status, phase, what a newer API adds) ride in
                    // the reply too, judged with it and written back in place.
                    let fields: Map<String, Value> = item
                        .as_object()
                        .into_iter()
                        .flatten()
                        .filter(|(k, _)| !matches!(k.as_str(), "content" | "type"))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    own.push(Value::Object(fields));
                }
                Some("function_call") => {
                    calls.push(function_call(item.as_object().cloned().unwrap_or_default()));
                }
                Some("custom_tool_call") => {
                    calls.push(custom_call(item.as_object().unwrap_or(&Map::new())));
                }
                Some(t) if call_kind(t, item.as_object().unwrap_or(&Map::new())).is_some() => {
                    let obj = item.as_object().cloned().unwrap_or_default();
                    let kind = call_kind(t, &obj).unwrap_or(t);
                    calls.push(hosted_call(kind, &obj));
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
        if own
            .iter()
            .any(|f| f.as_object().is_some_and(|o| !o.is_empty()))
        {
            message.extra.insert(MESSAGES.into(), Value::Array(own));
        }
        // So do the response's own fields that carry text (what it echoes of the request).
        if let Some(fields) = super::closed::take_outside(&mut body, &REPLY) {
            message.extra.insert(REPLY_KEY.into(), fields);
        }
        Ok((ResponsesReply { body }, vec![message]))
    }

    fn encode_reply(reply: ResponsesReply, judged: Vec<Judged>, railyard: Option<Value>) -> Value {
        let mut body = reply.body;
        if let Some(mut judged) = judged.into_iter().next() {
            if let Some(output) = body.get_mut("output") {
                *output = rewrite_output(std::mem::take(output), &judged.message);
            }
            if let Some(Value::Object(fields)) = judged.message.extra.remove(REPLY_KEY) {
                body.extend(fields);
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

    fn chosen(request: &ResponsesRequest) -> Vec<String> {
        super::chosen_in(&request.body, &["tool_choice"])
    }

    fn kept(request: &ResponsesRequest) -> super::Kept {
        let id = |v: Option<&Value>| match v {
            Some(Value::String(id)) if !id.is_empty() => Some(id.clone()),
            _ => None,
        };
        let conversation = request.body.get("conversation");
        super::Kept {
            previous: id(request.body.get("previous_response_id")),
            // A conversation is named by its id, or by an object holding it.
            conversation: id(conversation).or_else(|| id(conversation?.get("id"))),
            // `store: false`: no later request can name the reply.
            by_reply: request.body.get("store") != Some(&Value::Bool(false)),
        }
    }

    fn reply_id(bytes: &[u8]) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Id {
            id: Option<String>,
        }
        serde_json::from_slice::<Id>(bytes).ok()?.id
    }

    fn notes(request: &ResponsesRequest) -> Vec<&'static str> {
        if continues(&request.body) {
            vec![
                "previous_response_id: the backend keeps the earlier turns; results answering them were linked to the calls by their signed ids, and the rails saw only the items this request carried",
            ]
        } else {
            Vec::new()
        }
    }

    fn stream(request: &ResponsesRequest) -> ResponsesStream {
        ResponsesStream::new(request.body.get("model").cloned().unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests;
