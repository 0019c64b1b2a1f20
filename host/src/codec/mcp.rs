//! MCP's JSON-RPC messages, as far as the rails need them: `tools/list` results become declared
//! tools (and are rewritten for what a caller may see), a `tools/call` request becomes one tool
//! call, its result a tool message. Everything else passes the door untouched.
//!
//! A result reaches plugins as a `tool` message whose content is parts: the result's content
//! blocks as they are, then, when the result has `structuredContent`, one more part
//! `{"type": "structured", "structured": <value>}`, then, when it has any other field a client
//! reads (`_meta`, the 2024-11-05 `toolResult`, fields this door does not know), one part
//! `{"type": "fields", "fields": {<name>: <value>, ...}}`: nothing a client reads escapes the
//! rail. Only `isError` (a boolean) and `resultType` (a word) are inert. A JSON-RPC error answer
//! is a tool message too: its `message` a text part, its `data` and other fields the fields
//! part. Edited parts are split back the same way.

#[cfg(test)]
mod tests;

pub mod elicitation;
pub mod sampling;
pub mod walk;

/// A server's request of the client the rails judge before the client sees it: the rail it
/// passes, how its params become the payload, and how the judged payload goes back into them.
pub struct Asked {
    /// The rail.
    pub rail: crate::model::Rail,
    /// The params → the payload.
    pub payload: fn(&Map<String, Value>) -> crate::model::Payload,
    /// The judged payload → the params.
    pub apply: fn(&mut Map<String, Value>, &crate::model::Payload) -> Result<(), String>,
}

/// How the rails judge a server's request `method`, if they do: a sampling request (what the
/// client's model will read) on the input rail, an elicitation (what its user will read) on the
/// output rail.
pub fn asked(method: &str) -> Option<Asked> {
    use crate::model::Rail;
    match method {
        sampling::METHOD => Some(Asked {
            rail: Rail::Input,
            payload: sampling::payload,
            apply: sampling::apply,
        }),
        elicitation::METHOD => Some(Asked {
            rail: Rail::Output,
            payload: elicitation::payload,
            apply: elicitation::apply,
        }),
        _ => None,
    }
}

use crate::model::{Content, Message, Schema, ToolCall, ToolDef, FUNCTION};
use serde_json::{json, Map, Value};

/// The type of the part carrying a result's `structuredContent`.
pub const STRUCTURED: &str = "structured";
/// The type of the part carrying a result's (or an error's) other fields.
pub const FIELDS: &str = "fields";

/// Whether `value` is one a result's inert field `key` may hold: those alone are not judged.
fn inert(key: &str, value: &Value) -> bool {
    match key {
        "isError" => value.is_boolean(),
        "resultType" => value.as_str().is_some_and(|w| {
            w.len() <= 32 && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }),
        _ => false,
    }
}

/// A result's fields but `content`, `structuredContent` and the inert ones, as one part.
fn fields_part(obj: &Map<String, Value>, judged: &[&str]) -> Option<Value> {
    let fields: Map<String, Value> = obj
        .iter()
        .filter(|(k, v)| !judged.contains(&k.as_str()) && !inert(k, v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!fields.is_empty()).then(|| json!({"type": FIELDS, FIELDS: fields}))
}

/// JSON-RPC: the body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the request is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: invalid params (MCP answers an unknown tool with it).
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: a server error. The daemon's own failures (the upstream unreachable, an answer it
/// cannot read) use it.
pub const INTERNAL_ERROR: i64 = -32603;
/// A request a policy blocked. In the part of JSON-RPC's range for implementation-defined
/// server errors that MCP leaves to implementations (-32000 to -32019; since 2026-07-28 the
/// specification assigns -32020 to -32099).
pub const POLICY_VIOLATION: i64 = -32015;
/// The upstream MCP server could not be reached or did not answer in time, or answered with
/// something that cannot be judged.
pub const UPSTREAM_ERROR: i64 = -32016;
/// The caller's routing headers do not match its body (MCP 2026-07-28: `HeaderMismatch`).
pub const HEADER_MISMATCH: i64 = -32020;

/// What a JSON-RPC message is.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A request: it has an id and a method.
    Request {
        /// Its id (a string or a number).
        id: Value,
        /// Its method.
        method: String,
    },
    /// A notification: a method, no id.
    Notification {
        /// Its method.
        method: String,
    },
    /// A response (a result or an error) to the request with this id.
    Response {
        /// The id it answers.
        id: Value,
    },
    /// Not a JSON-RPC message.
    Other,
}

/// Classify one message.
pub fn kind(message: &Value) -> Kind {
    let Some(obj) = message.as_object() else {
        return Kind::Other;
    };
    let id = obj.get("id").filter(|id| id.is_string() || id.is_number());
    match (obj.get("method").and_then(Value::as_str), id) {
        (Some(method), Some(id)) => Kind::Request {
            id: id.clone(),
            method: method.to_string(),
        },
        (Some(method), None) if !obj.contains_key("id") => Kind::Notification {
            method: method.to_string(),
        },
        (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
            Kind::Response { id: id.clone() }
        }
        _ => Kind::Other,
    }
}

/// An id as the text plugins see as the call's id (a string as it is, a number as written).
pub fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An error response.
pub fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// A result response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A tool result reporting an error (`isError`), which MCP clients hand to the model.
pub fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// The tools of a `tools/list` result, as declared tools (`inputSchema` as the parameters,
/// `outputSchema` as the result schema). Tools without a string name are left out.
pub fn tools_of(result: &Value) -> Result<Vec<ToolDef>, String> {
    let tools = result
        .get("tools")
        .and_then(Value::as_array)
        .ok_or("a tools/list result has no 'tools' array")?;
    Ok(tools
        .iter()
        .filter_map(|t| {
            let name = t.get("name")?.as_str()?;
            Some(ToolDef {
                result_schema: t
                    .get("outputSchema")
                    .filter(|s| s.is_object())
                    .map(Schema::of),
                ..ToolDef::declared(
                    FUNCTION,
                    Some(name),
                    t.get("description").and_then(Value::as_str),
                    t.get("inputSchema")
                        .filter(|s| s.is_object())
                        .map(Schema::of),
                )
            })
        })
        .collect())
}

/// The fields of a `tools/list` result the tools rail does not map: every tool's but its name,
/// description and input schema (as `tools`, one object per tool, in order), and the result's
/// own but `tools` (taken out of `result`; [`put_list_rest`] puts them back).
pub fn list_rest(result: &mut Value) -> Value {
    let mut rest = Map::new();
    let Some(obj) = result.as_object_mut() else {
        return Value::Object(rest);
    };
    let mut tools = Vec::new();
    if let Some(Value::Array(list)) = obj.get_mut("tools") {
        for tool in list.iter_mut() {
            let mut own = Map::new();
            if let Some(t) = tool.as_object_mut() {
                let keys: Vec<String> = t
                    .keys()
                    .filter(|k| !LISTED.contains(&k.as_str()))
                    .cloned()
                    .collect();
                for k in keys {
                    if let Some(v) = t.shift_remove(&k) {
                        own.insert(k, v);
                    }
                }
            }
            tools.push(Value::Object(own));
        }
    }
    let keys: Vec<String> = obj.keys().filter(|k| *k != "tools").cloned().collect();
    for k in keys {
        if let Some(v) = obj.shift_remove(&k) {
            rest.insert(k, v);
        }
    }
    rest.insert("tools".into(), Value::Array(tools));
    Value::Object(rest)
}

/// A tool's fields the tools rail maps.
const LISTED: [&str; 3] = ["name", "description", "inputSchema"];

/// Put what [`list_rest`] took out (as the rails left it) back into `result`.
pub fn put_list_rest(result: &mut Value, rest: Value) {
    let (Some(obj), Value::Object(mut rest)) = (result.as_object_mut(), rest) else {
        return;
    };
    if let (Some(Value::Array(list)), Some(Value::Array(own))) =
        (obj.get_mut("tools"), rest.shift_remove("tools"))
    {
        for (tool, own) in list.iter_mut().zip(own) {
            if let (Some(t), Value::Object(own)) = (tool.as_object_mut(), own) {
                t.extend(own);
            }
        }
    }
    obj.extend(rest);
}

/// Rewrite a `tools/list` result for a caller: tools a plugin hid are left out, descriptions a
/// plugin rewrote are replaced. `judged` are the tools as the `tools` rail left them.
pub fn rewrite_tools(result: &mut Value, judged: &[ToolDef]) {
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
        return;
    };
    tools.retain_mut(|t| {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            return true;
        };
        let Some(def) = judged.iter().find(|d| d.name.as_deref() == Some(name)) else {
            return true;
        };
        if def.hidden_by.is_some() {
            return false;
        }
        let current = t.get("description").and_then(Value::as_str);
        if def.description.as_deref() != current {
            match &def.description {
                Some(d) => t["description"] = Value::String(d.to_string()),
                None => {
                    if let Some(obj) = t.as_object_mut() {
                        obj.remove("description");
                    }
                }
            }
        }
        true
    });
}

/// Requests whose answers reach a model though no tool made them: a resource's contents, a
/// prompt's messages, the lists of them a client shows its model or its user (their names and
/// descriptions), and the completions it offers for a prompt's arguments. Each answer is judged
/// as the result of a call named after its method.
pub const READS: [&str; 6] = [
    "resources/read",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
    "completion/complete",
];

/// A `resources/read` or `prompts/get` request as the call its answer is the result of: named
/// after the method, its params but `_meta` as the arguments.
pub fn read_of(id: &Value, method: &str, params: Option<&Value>) -> ToolCall {
    let mut args = params
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    args.remove("_meta");
    ToolCall::function(id_text(id), method.into(), Value::Object(args).to_string())
}

/// The call a `tools/call` request makes: its id, the tool's name and its arguments as JSON
/// text (`{}` when absent).
pub fn call_of(id: &Value, params: Option<&Value>) -> Result<ToolCall, String> {
    let params = params
        .and_then(Value::as_object)
        .ok_or("tools/call needs params with a tool name")?;
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or("tools/call params.name must be a string")?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => "{}".to_string(),
        Some(a @ Value::Object(_)) => a.to_string(),
        Some(_) => return Err("tools/call params.arguments must be an object".into()),
    };
    Ok(ToolCall::function(id_text(id), name.to_string(), arguments))
}

/// The assistant message that made `call` (what a result answers).
pub fn call_message(call: ToolCall) -> Message {
    Message::reply(None, vec![call])
}

/// A `tools/call` result as the `tool` message answering `call`. A result that is not an
/// object (no client reads such a thing as a result) is one fields part holding it.
pub fn result_message(call: &ToolCall, result: &Value) -> Message {
    let mut parts: Vec<Value> = Vec::new();
    match result.as_object() {
        Some(obj) => {
            match obj.get("content") {
                Some(Value::Array(blocks)) => parts.extend(blocks.iter().cloned()),
                None | Some(Value::Null) => {}
                Some(other) => parts.push(json!({"type": FIELDS, FIELDS: {"content": other}})),
            }
            if let Some(structured) = obj.get("structuredContent") {
                parts.push(json!({"type": STRUCTURED, STRUCTURED: structured}));
            }
            parts.extend(fields_part(obj, &["content", "structuredContent"]));
        }
        None => parts.push(json!({"type": FIELDS, FIELDS: {"result": result}})),
    }
    tool_message(call, parts)
}

/// A JSON-RPC `error` answering `call` as the `tool` message a client would make of it: its
/// `message` as a text part, its `data` and any other field but `code` as the fields part.
pub fn error_message(call: &ToolCall, error: &Value) -> Message {
    let mut parts = Vec::new();
    match error.as_object() {
        Some(obj) => {
            if let Some(Value::String(text)) = obj.get("message") {
                parts.push(json!({"type": "text", "text": text}));
            }
            let fields: Map<String, Value> = obj
                .iter()
                .filter(|(k, v)| !(*k == "code" && code(v)))
                .filter(|(k, v)| !(*k == "message" && v.is_string()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !fields.is_empty() {
                parts.push(json!({"type": FIELDS, FIELDS: fields}));
            }
        }
        None => parts.push(json!({"type": FIELDS, FIELDS: {"error": error}})),
    }
    tool_message(call, parts)
}

/// Whether `v` is an error code as JSON-RPC writes one (a whole number holding no value a
/// policy looks for: `closed::number_carries`), which is inert; anything else in its place is
/// judged with the error's other fields.
fn code(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_i64() && !crate::codec::closed::number_carries(n),
        _ => false,
    }
}

fn tool_message(call: &ToolCall, parts: Vec<Value>) -> Message {
    let mut m = Message::new("tool", Some(Content::Parts(Value::Array(parts))));
    m.tool_call_id = Some(call.id.clone());
    m.name = Some(call.name.clone());
    m
}

/// An edited tool message's parts, by kind: content blocks, the structured value, the fields.
struct Split {
    blocks: Vec<Value>,
    structured: Option<Value>,
    fields: Option<Map<String, Value>>,
}

fn split(message: &Message) -> Result<Split, String> {
    let parts = match &message.content {
        Some(Content::Parts(Value::Array(parts))) => parts.clone(),
        Some(Content::Text(text)) => vec![json!({"type": "text", "text": text})],
        None => Vec::new(),
        Some(Content::Parts(_)) => {
            return Err("a policy left the tool result's content not a list of blocks".into())
        }
    };
    let mut out = Split {
        blocks: Vec::with_capacity(parts.len()),
        structured: None,
        fields: None,
    };
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some(STRUCTURED) => out.structured = part.get(STRUCTURED).cloned(),
            Some(FIELDS) => match part.get(FIELDS) {
                Some(Value::Object(f)) => out.fields.get_or_insert_with(Map::new).extend(f.clone()),
                _ => return Err("a policy left a fields part that is not an object".into()),
            },
            _ if part.is_object() => out.blocks.push(part),
            _ => {
                return Err(
                    "a policy left a tool result content block that is not an object".into(),
                )
            }
        }
    }
    Ok(out)
}

/// Put an edited tool message back into `result`: its parts become the content blocks, the
/// structured part `structuredContent`, the fields part the other fields (a field a policy took
/// out of it is removed). The inert fields stay.
pub fn apply_result_edit(result: &mut Value, message: &Message) -> Result<(), String> {
    let split = split(message)?;
    let obj = result
        .as_object_mut()
        .ok_or("the tool result is not an object")?;
    let judged = ["content", "structuredContent"];
    obj.retain(|k, v| judged.contains(&k.as_str()) || inert(k, v));
    if !split.blocks.is_empty() || obj.contains_key("content") {
        obj.insert("content".into(), Value::Array(split.blocks));
    }
    match split.structured {
        Some(s) => {
            obj.insert("structuredContent".into(), s);
        }
        None => {
            obj.remove("structuredContent");
        }
    }
    for (k, v) in split.fields.unwrap_or_default() {
        if !judged.contains(&k.as_str()) {
            obj.insert(k, v);
        }
    }
    Ok(())
}

/// Put an edited tool message back into a JSON-RPC `error`: its text parts (joined) become the
/// `message`, its fields part the other fields; `code` stays.
pub fn apply_error_edit(error: &mut Value, message: &Message) -> Result<(), String> {
    let split = split(message)?;
    let obj = error.as_object_mut().ok_or("the error is not an object")?;
    obj.retain(|k, v| k == "code" && code(v));
    // A code that was no code (judged as text) is the door's own.
    obj.entry("code").or_insert(json!(UPSTREAM_ERROR));
    let text: Vec<&str> = split
        .blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    obj.insert("message".into(), Value::String(text.join("\n")));
    for (k, v) in split.fields.unwrap_or_default() {
        if k != "code" && k != "message" {
            obj.insert(k, v);
        }
    }
    Ok(())
}

/// Set a `tools/call` request's arguments (after a policy edited them).
pub fn set_arguments(request: &mut Value, arguments: &str) -> Result<(), String> {
    let args: Value = serde_json::from_str(arguments)
        .map_err(|e| format!("edited arguments are not valid JSON: {e}"))?;
    if !args.is_object() {
        return Err("edited arguments are not a JSON object".into());
    }
    let params = request
        .get_mut("params")
        .and_then(Value::as_object_mut)
        .ok_or("the request has no params")?;
    params.insert("arguments".into(), args);
    Ok(())
}

/// A `tools/list` request the daemon sends itself, to learn a server's tools (`cursor`: the
/// next page). `meta`: the caller's `_meta` to carry (the stateless protocol puts its version
/// and capabilities there).
pub fn list_request(id: &str, cursor: Option<&str>, meta: Option<&Map<String, Value>>) -> Value {
    let mut params = Map::new();
    if let Some(c) = cursor {
        params.insert("cursor".into(), Value::String(c.to_string()));
    }
    if let Some(meta) = meta {
        params.insert("_meta".into(), Value::Object(meta.clone()));
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params})
}
