//! OpenAI Chat Completions JSON ⇄ the model: messages, tool calls and tool declarations. Parsing
//! keeps every field Railyard does not know in `extra`, so a payload written back out is the one
//! that came in, plus the edits the policies made. The check API and gRPC's JSON fields speak
//! this shape too.

use crate::codec::opt_string_at as string_at;
use crate::model::{
    Content, Message, Payload, PayloadError, Schema, ToolCall, ToolDef, Wire, CUSTOM, FUNCTION,
};
use serde_json::{Map, Value};
use std::borrow::Cow;

fn err(path: impl Into<String>, message: impl Into<String>) -> PayloadError {
    PayloadError::new(path, message)
}

impl Payload {
    /// Parse `{"messages": [...], "tools": [...]}` (other top-level fields are ignored here; the
    /// proxy keeps them itself).
    pub fn from_openai(body: &Value) -> Result<Payload, PayloadError> {
        let obj = body
            .as_object()
            .ok_or_else(|| err("$", "the body must be a JSON object"))?;
        Payload::from_openai_parts(obj.get("messages").cloned(), obj.get("tools"))
    }

    /// [`Payload::from_openai`] from a body's `messages` (taken, not copied) and `tools`.
    pub fn from_openai_parts(
        messages: Option<Value>,
        tools: Option<&Value>,
    ) -> Result<Payload, PayloadError> {
        let messages = match messages {
            Some(Value::Array(items)) => {
                let mut messages = items
                    .into_iter()
                    .enumerate()
                    .map(|(i, m)| Message::from_openai_owned(m, &format!("messages[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                link_legacy(&mut messages);
                messages
            }
            Some(_) => return Err(err("messages", "must be an array of messages")),
            None => return Err(err("messages", "is required")),
        };
        let tools = match tools {
            None | Some(Value::Null) => Vec::new(),
            Some(value) => ToolDef::list_from_openai(value, "tools")?,
        };
        Ok(Payload {
            messages,
            tools,
            ..Payload::default()
        })
    }

    /// The messages as OpenAI JSON.
    pub fn messages_json(&self) -> Value {
        Value::Array(self.messages.iter().map(Message::to_openai).collect())
    }

    /// `{"messages": [...], "tools": [...]}`.
    pub fn to_openai(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("messages".into(), self.messages_json());
        if !self.tools.is_empty() {
            obj.insert(
                "tools".into(),
                Value::Array(self.tools.iter().map(ToolDef::to_openai).collect()),
            );
        }
        Value::Object(obj)
    }
}

impl Message {
    /// Parse one OpenAI message; `path` names it in errors.
    pub fn from_openai(value: &Value, path: &str) -> Result<Message, PayloadError> {
        Message::from_openai_owned(value.clone(), path)
    }

    /// [`Message::from_openai`], taking the value.
    pub fn from_openai_owned(value: Value, path: &str) -> Result<Message, PayloadError> {
        let Value::Object(mut obj) = value else {
            return Err(err(path, "must be an object"));
        };
        let (content, content_absent) = match obj.remove("content") {
            None => (None, true),
            Some(Value::Null) => (None, false),
            Some(Value::String(s)) => (Some(Content::Text(s)), false),
            Some(other) => (Some(Content::Parts(other)), false),
        };
        let fields = Fields {
            role: obj.remove("role"),
            content,
            content_absent,
            name: obj.remove("name"),
            tool_call_id: obj.remove("tool_call_id"),
            tool_calls: obj.remove("tool_calls").map(Calls::Value),
            extra: obj,
        };
        fields.into_message(|| path.to_string())
    }

    /// This message as OpenAI JSON (known fields first, then the rest as they came).
    pub fn to_openai(&self) -> Value {
        let mut obj = Map::new();
        let spelling = Spelling::of(self);
        let legacy = spelling.legacy;
        let role = match legacy {
            Some(Legacy::Function) => "function",
            _ => self.role.as_str(),
        };
        obj.insert("role".into(), Value::String(role.to_string()));
        match &self.content {
            Some(Content::Text(t)) => {
                obj.insert("content".into(), Value::String(t.clone()));
            }
            Some(Content::Parts(p)) => {
                obj.insert("content".into(), p.clone());
            }
            None if spelling.content_absent => {}
            None => {
                obj.insert("content".into(), Value::Null);
            }
        }
        if let Some(name) = &self.name {
            obj.insert("name".into(), Value::String(name.clone()));
        }
        if let Some(id) = self
            .tool_call_id
            .as_ref()
            .filter(|_| legacy != Some(Legacy::Function))
        {
            obj.insert("tool_call_id".into(), Value::String(id.clone()));
        }
        match self.tool_calls.as_slice() {
            // The legacy call goes back as it came, without the id it never had.
            [call] if legacy == Some(Legacy::FunctionCall) && call.kind == FUNCTION => {
                let mut f = Map::new();
                f.insert("name".into(), Value::String(call.name.clone()));
                f.insert("arguments".into(), Value::String(call.arguments.clone()));
                for (k, v) in &call.function_extra {
                    f.insert(k.clone(), v.clone());
                }
                obj.insert("function_call".into(), Value::Object(f));
            }
            calls if spelling.empty_calls || !calls.is_empty() => {
                obj.insert(
                    "tool_calls".into(),
                    Value::Array(calls.iter().map(ToolCall::to_openai).collect()),
                );
            }
            _ => {}
        }
        for (k, v) in &self.extra {
            obj.insert(k.clone(), v.clone());
        }
        Value::Object(obj)
    }

    /// Appends [`Message::to_openai`]'s JSON text to `out`, the same bytes, without building the
    /// value (a reply's message is written back on every request whose calls were signed). A
    /// message whose extra fields repeat a key this writes itself (the value would replace that
    /// key in place) is written through the value.
    pub fn write_openai(&self, out: &mut Vec<u8>) {
        const KNOWN: [&str; 5] = ["role", "content", "name", "tool_call_id", "tool_calls"];
        let spelling = Spelling::of(self);
        if self.extra.keys().any(|k| KNOWN.contains(&k.as_str())) || spelling.legacy.is_some() {
            serde_json::to_writer(out, &self.to_openai()).expect("a Value always serialises");
            return;
        }
        let mut w = Object::open(out);
        w.string("role", &self.role);
        match &self.content {
            Some(Content::Text(t)) => w.string("content", t),
            Some(Content::Parts(p)) => w.value("content", p),
            None if spelling.content_absent => {}
            None => w.value("content", &Value::Null),
        }
        if let Some(name) = &self.name {
            w.string("name", name);
        }
        if let Some(id) = &self.tool_call_id {
            w.string("tool_call_id", id);
        }
        if spelling.empty_calls || !self.tool_calls.is_empty() {
            let out = w.key("tool_calls");
            out.push(b'[');
            for (i, call) in self.tool_calls.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if call.writes_plainly() {
                    call.write_plainly(out);
                } else {
                    serde_json::to_writer(&mut *out, &call.to_openai())
                        .expect("a Value always serialises");
                }
            }
            out.push(b']');
        }
        for (k, v) in &self.extra {
            w.value(k, v);
        }
        w.close();
    }
}

/// A JSON object written as text, one member after another.
struct Object<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Object<'a> {
    fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Object { out, first: true }
    }

    /// Writes `"key":` and hands back the buffer for its value.
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        string_into(self.out, key);
        self.out.push(b':');
        self.out
    }

    fn string(&mut self, key: &str, value: &str) {
        string_into(self.key(key), value);
    }

    fn value(&mut self, key: &str, value: &Value) {
        serde_json::to_writer(self.key(key), value).expect("a Value always serialises");
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

/// `s` as a JSON string, escaped as serde_json escapes it.
fn string_into(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(out, s).expect("a str always serialises");
}

/// A message's fields as read from its JSON object, before they are checked: the content
/// already sorted out, the other known fields as they came, the rest in `extra`.
pub(crate) struct Fields {
    pub role: Option<Value>,
    pub content: Option<Content>,
    /// No `content` key at all (written back without one; else a missing content is `null`).
    pub content_absent: bool,
    pub name: Option<Value>,
    pub tool_call_id: Option<Value>,
    pub tool_calls: Option<Calls>,
    pub extra: Map<String, Value>,
}

/// A message's `tool_calls` as read: a `Value`, or an array read call by call without building
/// each call's objects as maps first (the common case: a reply's calls).
pub(crate) enum Calls {
    Value(Value),
    Read(Vec<CallRead>),
}

/// One element of a `tool_calls` array as read.
pub(crate) enum CallRead {
    /// An object: its keys in the order they first came, each with the last value given for it.
    Object(Entries<Item>),
    /// Anything else (an error when checked).
    Other(Value),
}

/// An object's keys in the order they first came, each with its last value: what a
/// `serde_json::Map` of it holds, in the same order, without hashing a key. The known keys are
/// not allocated.
pub(crate) type Entries<T> = Vec<(Cow<'static, str>, T)>;

/// A value in a tool-call object: `function`'s object kept as entries, anything else as it came.
pub(crate) enum Item {
    Function(Entries<Value>),
    Value(Value),
}

impl Item {
    fn is_string_or_null(&self) -> bool {
        matches!(self, Item::Value(Value::String(_) | Value::Null))
    }
}

fn into_map<T: Into<Value>>(entries: Entries<T>) -> Map<String, Value> {
    entries
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v.into()))
        .collect()
}

impl From<Item> for Value {
    fn from(item: Item) -> Value {
        match item {
            Item::Function(entries) => Value::Object(into_map(entries)),
            Item::Value(v) => v,
        }
    }
}

/// What `Map::remove` does to a map of `entries` (a swap with the last, as it is with
/// `preserve_order`), so that what is left comes in the same order as the map's.
fn take<T>(entries: &mut Entries<T>, key: &str) -> Option<T> {
    let i = entries.iter().position(|(k, _)| k == key)?;
    Some(entries.swap_remove(i).1)
}

/// A string or null taken from `entries`, known to be one (null or absent: empty).
fn take_string<T: Into<Value>>(entries: &mut Entries<T>, key: &str) -> String {
    match take(entries, key).map(Into::into) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    }
}

impl CallRead {
    /// The call, as [`ToolCall::read`] makes it of this element's `Value`: the common shape (a
    /// function call whose id, name and arguments are strings) directly, anything else through
    /// that `Value`.
    fn into_call(self, path: &dyn Fn() -> String) -> Result<ToolCall, PayloadError> {
        let entries = match self {
            CallRead::Object(entries) if common(&entries) => entries,
            CallRead::Object(entries) => {
                return ToolCall::read(Value::Object(into_map(entries)), path)
            }
            CallRead::Other(value) => return ToolCall::read(value, path),
        };
        let mut obj = entries;
        let id = take_string(&mut obj, "id");
        let Some(Item::Function(mut function)) = take(&mut obj, "function") else {
            unreachable!("a call of the common shape has a function object");
        };
        let name = take_string(&mut function, "name");
        let arguments = take_string(&mut function, "arguments");
        Ok(ToolCall {
            id,
            kind: FUNCTION.into(),
            name,
            arguments,
            extra: into_map(obj),
            function_extra: into_map(function),
            provenance: None,
        })
    }
}

/// A function call whose `id` is a string, null or absent, with a `function` object whose `name`
/// is a string and whose `arguments` are a string, null or absent.
fn common(entries: &Entries<Item>) -> bool {
    let get = |key: &str| entries.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let Some(Item::Function(function)) = get("function") else {
        return false;
    };
    let fget = |key: &str| function.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    get("id").is_none_or(Item::is_string_or_null)
        && matches!(fget("name"), Some(Value::String(_)))
        && fget("arguments").is_none_or(|v| matches!(v, Value::String(_) | Value::Null))
}

/// A message's calls, each named in errors after the message's `path`.
fn read_calls(
    calls: impl IntoIterator<Item = CallRead>,
    path: &dyn Fn() -> String,
) -> Result<Vec<ToolCall>, PayloadError> {
    calls
        .into_iter()
        .enumerate()
        .map(|(i, c)| c.into_call(&|| format!("{}.tool_calls[{i}]", path())))
        .collect()
}

/// An optional string field (`null`: absent).
fn opt_field(
    value: Option<Value>,
    path: &dyn Fn() -> String,
    key: &str,
) -> Result<Option<String>, PayloadError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(err(format!("{}.{key}", path()), "must be a string")),
    }
}

impl Fields {
    /// The message, or what is wrong with it; `path` names it in errors (made only for one).
    pub fn into_message(self, path: impl Fn() -> String) -> Result<Message, PayloadError> {
        let role = match self.role {
            Some(Value::String(s)) => s,
            Some(_) => return Err(err(format!("{}.role", path()), "must be a string")),
            None => return Err(err(format!("{}.role", path()), "is required")),
        };
        let name = opt_field(self.name, &path, "name")?;
        let tool_call_id = opt_field(self.tool_call_id, &path, "tool_call_id")?;
        let (tool_calls, calls_key) = match self.tool_calls {
            None | Some(Calls::Value(Value::Null)) => (Vec::new(), false),
            Some(Calls::Read(calls)) => (read_calls(calls, &path)?, true),
            Some(Calls::Value(Value::Array(calls))) => (
                read_calls(calls.into_iter().map(CallRead::Other), &path)?,
                true,
            ),
            Some(_) => return Err(err(format!("{}.tool_calls", path()), "must be an array")),
        };
        let mut spelling = Spelling {
            content_absent: self.content_absent,
            empty_calls: calls_key && tool_calls.is_empty(),
            legacy: None,
        };
        let mut message = Message {
            role,
            content: self.content,
            name,
            tool_call_id,
            tool_calls,
            extra: self.extra,
            wire: Wire::default(),
            folded: None,
            unseen: false,
        };
        spelling.legacy = legacy(&mut message, &path)?;
        if spelling != Spelling::default() {
            message.wire = Wire::of(spelling);
        }
        Ok(message)
    }
}

/// How a chat message was spelled where that is not how the codec writes a message by default
/// (content `null` when there is none, `tool_calls` only when there are some, today's shapes):
/// kept in the message's `wire`, so it is written back as it came.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Spelling {
    /// No `content` key.
    content_absent: bool,
    /// `tool_calls: []`.
    empty_calls: bool,
    /// One of the legacy function-calling shapes.
    legacy: Option<Legacy>,
}

/// The legacy function-calling shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Legacy {
    /// An assistant's `function_call`.
    FunctionCall,
    /// A `function` message: its result.
    Function,
}

impl Spelling {
    fn of(message: &Message) -> Spelling {
        message.wire.get().copied().unwrap_or_default()
    }
}

/// The legacy function-calling shapes as today's: an assistant's `function_call` is its one
/// call (no id: the codec links it to the `function` result after it), a `function` message is
/// a tool result. Returns which, to be written back as it came.
fn legacy(
    message: &mut Message,
    path: &dyn Fn() -> String,
) -> Result<Option<Legacy>, PayloadError> {
    let mut legacy = None;
    match message.extra.get("function_call") {
        None | Some(Value::Null) => {}
        Some(Value::Object(_)) if !message.tool_calls.is_empty() => {
            return Err(err(
                format!("{}.function_call", path()),
                "cannot be given beside tool_calls: which one the backend runs is not known",
            ))
        }
        Some(Value::Object(_)) => {
            let Some(Value::Object(mut f)) = message.extra.remove("function_call") else {
                unreachable!("matched above");
            };
            let fpath = || format!("{}.function_call", path());
            let name = string_at(&mut f, "name", &fpath)?
                .ok_or_else(|| err(format!("{}.name", fpath()), "is required"))?;
            let arguments = match f.remove("arguments") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s,
                Some(other) => other.to_string(),
            };
            let mut call = ToolCall::function(String::new(), name, arguments);
            call.function_extra = f;
            message.tool_calls.push(call);
            legacy = Some(Legacy::FunctionCall);
        }
        Some(_) => {
            return Err(err(
                format!("{}.function_call", path()),
                "must be an object with a name",
            ))
        }
    }
    if message.role == "function" {
        message.role = "tool".into();
        legacy = Some(Legacy::Function);
    }
    Ok(legacy)
}

/// Link each legacy `function` result to the legacy call before it, by an id of the daemon's
/// making (the shapes have none; it never reaches the wire): the rails then see a call and its
/// result as they do for tool calls.
pub(crate) fn link_legacy(messages: &mut [Message]) {
    let mut open: Option<String> = None;
    for (i, m) in messages.iter_mut().enumerate() {
        match Spelling::of(m).legacy {
            Some(Legacy::FunctionCall) => {
                let id = format!("railyard-legacy-{i}");
                if let Some(call) = m.tool_calls.first_mut().filter(|c| c.id.is_empty()) {
                    call.id = id.clone();
                }
                open = Some(id);
            }
            Some(Legacy::Function) if m.tool_call_id.is_none() => m.tool_call_id = open.take(),
            _ => {}
        }
    }
}

impl ToolCall {
    /// Parse one OpenAI tool call: a function call, or a call to a hosted tool, which carries
    /// its `type` (e.g. `web_search`) and no `function` object.
    pub fn from_openai(value: &Value, path: &str) -> Result<ToolCall, PayloadError> {
        ToolCall::from_openai_owned(value.clone(), path)
    }

    /// [`ToolCall::from_openai`], taking the value.
    pub fn from_openai_owned(value: Value, path: &str) -> Result<ToolCall, PayloadError> {
        ToolCall::read(value, &|| path.to_string())
    }

    /// [`ToolCall::from_openai_owned`] with the path made only for an error: a request's calls
    /// are read on every request, and their paths are wanted only when one is wrong.
    fn read(value: Value, path: &dyn Fn() -> String) -> Result<ToolCall, PayloadError> {
        let Value::Object(mut obj) = value else {
            return Err(err(path(), "must be an object"));
        };
        let id = string_at(&mut obj, "id", path)?.unwrap_or_default();
        let mut function = match obj.remove("function") {
            Some(Value::Object(f)) => f,
            Some(_) => return Err(err(format!("{}.function", path()), "must be an object")),
            None => match obj.get("type") {
                Some(Value::String(kind)) if kind == CUSTOM => {
                    // `{"type": "custom", "custom": {"name", "input"}}`: its name and its
                    // free-text input are what the rails judge.
                    let cpath = || format!("{}.custom", path());
                    let mut custom = match obj.remove("custom") {
                        Some(Value::Object(c)) => c,
                        _ => return Err(err(cpath(), "is required and must be an object")),
                    };
                    let name = string_at(&mut custom, "name", &cpath)?
                        .ok_or_else(|| err(format!("{}.name", cpath()), "is required"))?;
                    let input = string_at(&mut custom, "input", &cpath)?.unwrap_or_default();
                    let mut call = ToolCall::custom(id, name, input);
                    call.extra = obj;
                    call.function_extra = custom;
                    return Ok(call);
                }
                Some(Value::String(kind)) if kind != FUNCTION => {
                    let kind = kind.clone();
                    return Ok(ToolCall::hosted(id, kind, obj));
                }
                _ => return Err(err(format!("{}.function", path()), "is required")),
            },
        };
        let fpath = || format!("{}.function", path());
        let name = string_at(&mut function, "name", &fpath)?
            .ok_or_else(|| err(format!("{}.name", fpath()), "is required"))?;
        let arguments = match function.remove("arguments") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            // Some servers send an object; keep its JSON text so policies judge what was sent.
            Some(other) => other.to_string(),
        };
        Ok(ToolCall {
            id,
            kind: FUNCTION.into(),
            name,
            arguments,
            extra: obj,
            function_extra: function,
            provenance: None,
        })
    }

    /// This call as OpenAI JSON.
    pub fn to_openai(&self) -> Value {
        if self.kind == CUSTOM {
            let mut custom = Map::new();
            custom.insert("name".into(), Value::String(self.name.clone()));
            custom.insert("input".into(), Value::String(self.arguments.clone()));
            for (k, v) in &self.function_extra {
                custom.insert(k.clone(), v.clone());
            }
            let mut obj = Map::new();
            obj.insert("id".into(), Value::String(self.id.clone()));
            obj.insert("type".into(), Value::String(CUSTOM.into()));
            for (k, v) in &self.extra {
                obj.insert(k.clone(), v.clone());
            }
            obj.insert("custom".into(), Value::Object(custom));
            return Value::Object(obj);
        }
        if self.is_hosted() {
            let mut obj = Map::new();
            obj.insert("id".into(), Value::String(self.id.clone()));
            obj.insert("type".into(), Value::String(self.kind.to_string()));
            for (k, v) in &self.extra {
                obj.insert(k.clone(), v.clone());
            }
            return Value::Object(obj);
        }
        let mut function = Map::new();
        function.insert("name".into(), Value::String(self.name.clone()));
        function.insert("arguments".into(), Value::String(self.arguments.clone()));
        for (k, v) in &self.function_extra {
            function.insert(k.clone(), v.clone());
        }
        let mut obj = Map::new();
        obj.insert("id".into(), Value::String(self.id.clone()));
        if !self.extra.contains_key("type") {
            obj.insert("type".into(), Value::String("function".into()));
        }
        for (k, v) in &self.extra {
            obj.insert(k.clone(), v.clone());
        }
        obj.insert("function".into(), Value::Object(function));
        Value::Object(obj)
    }

    /// Whether [`ToolCall::write_plainly`] writes what [`ToolCall::to_openai`] does: a function
    /// call whose extra fields repeat none of the keys written for it (the others, rare, are
    /// written through their value).
    fn writes_plainly(&self) -> bool {
        self.kind == FUNCTION
            && !self
                .extra
                .keys()
                .any(|k| matches!(k.as_str(), "id" | "function"))
            && !self
                .function_extra
                .keys()
                .any(|k| matches!(k.as_str(), "name" | "arguments"))
    }

    /// Appends [`ToolCall::to_openai`]'s JSON text for a call that [`ToolCall::writes_plainly`].
    fn write_plainly(&self, out: &mut Vec<u8>) {
        let mut w = Object::open(out);
        w.string("id", &self.id);
        if !self.extra.contains_key("type") {
            w.string("type", FUNCTION);
        }
        for (k, v) in &self.extra {
            w.value(k, v);
        }
        let mut f = Object::open(w.key("function"));
        f.string("name", &self.name);
        f.string("arguments", &self.arguments);
        for (k, v) in &self.function_extra {
            f.value(k, v);
        }
        f.close();
        w.close();
    }
}

/// A custom tool, `{"type": "custom", "custom": {"name", "description", "format"}}`: its name
/// and description as a function's, its input `format` (free text, or a grammar, whose
/// definition the model reads) as its parameters.
pub(super) fn custom_tool(obj: &Map<String, Value>, path: &str) -> Result<ToolDef, PayloadError> {
    let cpath = format!("{path}.custom");
    let custom = match obj.get("custom") {
        Some(Value::Object(c)) => c,
        _ => {
            return Err(err(
                cpath,
                "is required for custom tools and must be an object",
            ))
        }
    };
    let name = match custom.get("name") {
        Some(Value::String(s)) => s.as_str(),
        _ => {
            return Err(err(
                format!("{cpath}.name"),
                "is required and must be a string",
            ))
        }
    };
    Ok(ToolDef::declared(
        CUSTOM,
        Some(name),
        custom.get("description").and_then(Value::as_str),
        custom
            .get("format")
            .filter(|f| !f.is_null())
            .map(Schema::of),
    ))
}

impl ToolDef {
    /// Parse an OpenAI `tools` array.
    pub fn list_from_openai(value: &Value, path: &str) -> Result<Vec<ToolDef>, PayloadError> {
        let items = value
            .as_array()
            .ok_or_else(|| err(path, "must be an array of tools"))?;
        items
            .iter()
            .enumerate()
            .map(|(i, t)| ToolDef::from_openai(t, &format!("{path}[{i}]")))
            .collect()
    }

    /// Parse one OpenAI tool: `{"type": "function", "function": {...}}` or a hosted tool
    /// declared by type (`{"type": "web_search"}`).
    pub fn from_openai(value: &Value, path: &str) -> Result<ToolDef, PayloadError> {
        let obj = value
            .as_object()
            .ok_or_else(|| err(path, "must be an object"))?;
        let kind = match obj.get("type") {
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(err(format!("{path}.type"), "must be a string")),
            None => return Err(err(format!("{path}.type"), "is required")),
        };
        if kind == CUSTOM {
            return custom_tool(obj, path);
        }
        if kind != "function" {
            let name = obj.get("name").and_then(Value::as_str);
            return Ok(ToolDef::declared(kind, name, None, None));
        }
        let fpath = format!("{path}.function");
        let function = match obj.get("function") {
            Some(Value::Object(f)) => f,
            _ => {
                return Err(err(
                    fpath,
                    "is required for function tools and must be an object",
                ))
            }
        };
        let name = match function.get("name") {
            Some(Value::String(s)) => s.as_str(),
            _ => {
                return Err(err(
                    format!("{fpath}.name"),
                    "is required and must be a string",
                ))
            }
        };
        let description = function.get("description").and_then(Value::as_str);
        let parameters = match function.get("parameters") {
            None | Some(Value::Null) => None,
            Some(p @ Value::Object(_)) | Some(p @ Value::Bool(_)) => Some(Schema::of(p)),
            Some(_) => {
                return Err(err(
                    format!("{fpath}.parameters"),
                    "must be a JSON Schema object",
                ))
            }
        };
        Ok(ToolDef::declared(kind, Some(name), description, parameters))
    }

    /// This tool as OpenAI JSON.
    pub fn to_openai(&self) -> Value {
        if &*self.kind == CUSTOM {
            let mut custom = Map::new();
            if let Some(name) = &self.name {
                custom.insert("name".into(), Value::String(name.to_string()));
            }
            if let Some(d) = &self.description {
                custom.insert("description".into(), Value::String(d.to_string()));
            }
            if let Some(format) = &self.parameters {
                custom.insert("format".into(), format.value());
            }
            return serde_json::json!({"type": CUSTOM, "custom": custom});
        }
        if &*self.kind != "function" {
            let mut obj = Map::new();
            obj.insert("type".into(), Value::String(self.kind.to_string()));
            if let Some(name) = &self.name {
                obj.insert("name".into(), Value::String(name.to_string()));
            }
            return Value::Object(obj);
        }
        let mut function = Map::new();
        if let Some(name) = &self.name {
            function.insert("name".into(), Value::String(name.to_string()));
        }
        if let Some(d) = &self.description {
            function.insert("description".into(), Value::String(d.to_string()));
        }
        if let Some(p) = &self.parameters {
            function.insert("parameters".into(), p.value());
        }
        serde_json::json!({"type": "function", "function": function})
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_unknown_fields_and_nulls() {
        let body = json!({"messages": [
            {"role": "user", "content": "hi", "x-custom": 1},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "index": 0,
                 "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]}
        ]});
        let payload = Payload::from_openai(&body).unwrap();
        assert_eq!(payload.messages.len(), 3);
        assert_eq!(payload.messages_json(), body["messages"]);
    }

    #[test]
    fn names_the_bad_path() {
        let body = json!({"messages": [{"role": "user", "content": "a"},
            {"role": "assistant", "tool_calls": [{"id": "x", "function": {"arguments": "{}"}}]}]});
        let e = Payload::from_openai(&body).unwrap_err();
        assert_eq!(e.path, "messages[1].tool_calls[0].function.name");
        assert!(Payload::from_openai(&json!({"messages": 3})).is_err());
        assert_eq!(Payload::from_openai(&json!([])).unwrap_err().path, "$");
    }

    #[test]
    fn hosted_calls_round_trip_without_a_function_object() {
        let call = json!({"id": "ws_1", "type": "web_search", "status": "completed"});
        let parsed = ToolCall::from_openai(&call, "c").unwrap();
        assert!(parsed.is_hosted());
        assert_eq!(
            (parsed.name.as_str(), parsed.arguments.as_str()),
            ("web_search", "")
        );
        assert_eq!(parsed.to_openai(), call);
        let e = ToolCall::from_openai(&json!({"id": "x", "type": "function"}), "c").unwrap_err();
        assert_eq!(e.path, "c.function");
    }

    /// The direct writer against the value it stands in for, byte for byte: parsed messages of
    /// every shape, and built ones whose extra fields repeat the keys written for them.
    #[test]
    fn a_message_is_written_as_its_value_serialises() {
        let body = json!({"messages": [
            {"role": "user", "content": "quote \" slash \\ nl \n tab \t ctrl \u{1} é 😀 \u{2028}"},
            {"x-first": [1, 2.5, {"b": null, "a": true}], "role": "assistant", "content": null,
             "tool_calls": [
                {"index": 0, "id": "c1", "function": {"arguments": "{\"a\":1}", "name": "f",
                 "strict": false}},
                {"id": "ry1_k_1_ab_c2", "type": "function", "extra": {"z": 1},
                 "function": {"name": "g\u{0}", "arguments": ""}},
                {"id": "ws_1", "type": "web_search", "status": "completed"}]},
            {"role": "assistant", "tool_calls": []},
            {"role": "tool", "tool_call_id": "c1", "name": "f",
             "content": [{"type": "text", "text": "ok"}]},
            {"role": "assistant"},
            {"role": "system", "content": "", "x": {"nested": ["é", "\u{7f}"]}}
        ]});
        let mut messages = Payload::from_openai(&body).unwrap().messages;
        // Not what parsing makes, but what a policy's edit or a codec could: extras that collide.
        let mut collide = messages[0].clone();
        collide.extra.insert("content".into(), json!(7));
        let mut call = messages[1].tool_calls[0].clone();
        call.extra.insert("function".into(), json!("shadow"));
        let mut fcall = messages[1].tool_calls[0].clone();
        fcall.function_extra.insert("name".into(), json!(1));
        let mut with_calls = messages[2].clone();
        with_calls.tool_calls = vec![call, fcall];
        messages.extend([collide, with_calls]);
        for (i, m) in messages.iter().enumerate() {
            let mut direct = Vec::new();
            m.write_openai(&mut direct);
            let via_value = serde_json::to_vec(&m.to_openai()).unwrap();
            assert_eq!(
                String::from_utf8(direct).unwrap(),
                String::from_utf8(via_value).unwrap(),
                "message {i}"
            );
        }
    }

    #[test]
    fn hosted_tools_by_type() {
        let tools = ToolDef::list_from_openai(&json!([{"type": "web_search"}]), "tools").unwrap();
        assert_eq!(&*tools[0].kind, "web_search");
        assert_eq!(tools[0].name, None);
    }
}
