//! Wire formats at the edge: one codec per door, each turning its requests, replies and stream
//! events into the model (`crate::model`) and back. Every field is accounted for, both ways:
//! mapped, inert, or its strings judged as text (`closed`).
//!
//! - `chat`: OpenAI Chat Completions (and the check API's payload shape);
//! - `responses`: OpenAI Responses;
//! - `messages`: Anthropic Messages;
//! - `mcp`: MCP's JSON-RPC messages, as far as the rails need them;
//! - `sse`: server-sent events; `stream`: the neutral vocabulary of streamed replies;
//! - `error`: error objects in each format's shape; `json`: JSON text in, noting repeated keys;
//! - `structure`: what an item no codec maps does (declares, connects, calls, approves).

pub mod chat;
pub mod closed;
pub mod error;
pub mod json;
pub mod mcp;
pub mod messages;
pub mod responses;
pub mod sse;
pub mod stream;
pub mod structure;
pub mod usage;

use crate::model::{Message, Payload, PayloadError};
use serde_json::{Map, Value};

/// Where a request came in: named in decision records and metrics, and it picks the error shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Door {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/messages` (Anthropic).
    Messages,
    /// `GET /v1/models`.
    Models,
    /// `POST /v1/check`.
    Check,
    /// gRPC `railyard.v1.PolicyService`.
    Grpc,
    /// An MCP server behind `/mcp/<name>`.
    Mcp,
    /// Admin endpoints and health.
    Admin,
}

impl Door {
    /// Every door.
    pub const ALL: [Door; 8] = [
        Door::Chat,
        Door::Responses,
        Door::Messages,
        Door::Models,
        Door::Check,
        Door::Grpc,
        Door::Mcp,
        Door::Admin,
    ];

    /// The door spelled `name` (as records spell it).
    pub fn parse(name: &str) -> Option<Door> {
        Door::ALL.into_iter().find(|d| d.as_str() == name)
    }

    /// The spelling in records and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Door::Chat => "chat",
            Door::Responses => "responses",
            Door::Messages => "messages",
            Door::Models => "models",
            Door::Check => "check",
            Door::Grpc => "grpc",
            Door::Mcp => "mcp",
            Door::Admin => "admin",
        }
    }

    /// Its HTTP method and route: where the router serves it, and its trace span's name.
    pub const fn route(self) -> (&'static str, &'static str) {
        match self {
            Door::Chat => ("POST", "/v1/chat/completions"),
            Door::Responses => ("POST", "/v1/responses"),
            Door::Messages => ("POST", "/v1/messages"),
            Door::Models => ("GET", "/v1/models"),
            Door::Check => ("POST", "/v1/check"),
            Door::Grpc => ("POST", "/railyard.v1.PolicyService"),
            Door::Mcp => ("POST", "/mcp/{name}"),
            Door::Admin => ("GET", "/v1/admin"),
        }
    }

    /// Whether errors on this door take Anthropic's shape.
    pub fn anthropic(self) -> bool {
        self == Door::Messages
    }
}

/// What the rails made of one reply message (one per choice).
#[derive(Debug, Clone)]
pub struct Judged {
    /// The message after the outbound rails.
    pub message: Message,
    /// The model made tool calls and policies removed all of them.
    pub calls_removed: bool,
    /// A policy found tool calls written in the text and made them calls.
    pub calls_added: bool,
    /// A policy changed the message's text: what the backend derived from its text
    /// (chat's log-probabilities) no longer describes it.
    pub edited: bool,
}

/// A whole reply read in one pass (see [`Codec::read_reply`]).
#[derive(Debug)]
pub struct ReadReply {
    /// Its assistant messages, as [`Codec::decode_reply`] decodes them.
    pub messages: Vec<Message>,
    /// Where each message's value sits in the body.
    pub spans: Vec<std::ops::Range<usize>>,
}

/// `original` with the values at `spans` (in order, not overlapping) replaced by what `write`
/// writes for each; `None` when a span is out of place or a write fails.
pub(crate) fn splice<T>(
    original: &[u8],
    pieces: impl IntoIterator<Item = (std::ops::Range<usize>, T)>,
    mut write: impl FnMut(&mut Vec<u8>, T) -> Option<()>,
) -> Option<Vec<u8>> {
    // Room for what grows: a reply's call ids become signed ones (about 100 bytes each).
    let mut out = Vec::with_capacity(original.len() + 256);
    let mut at = 0;
    for (span, piece) in pieces {
        out.extend_from_slice(original.get(at..span.start)?);
        write(&mut out, piece)?;
        at = span.end;
    }
    out.extend_from_slice(original.get(at..)?);
    Some(out)
}

/// The request's `tools` as the model is offered them: the tools a `tools`-rail plugin hid
/// left out, rewritten descriptions in place (`describe` writes one into a tool's JSON). The
/// model's tools are the request's, in order: that rail neither adds nor removes declarations.
/// The upstream body, serialised, after the rails: the offered tools in place of the request's
/// (see [`offered_tools`]; `describe` writes a rewritten description into a tool's JSON) and the
/// request fields written back.
pub(crate) fn encode_body(
    mut body: Map<String, Value>,
    payload: &crate::model::Payload,
    describe: impl Fn(&mut Value, &str),
) -> Vec<u8> {
    // Fields first: a declaration's are addressed by its place among all declared.
    write_fields(&mut body, &payload.fields);
    encode_offered(body, payload, describe)
}

/// [`encode_body`] for a body whose fields are written already.
pub(crate) fn encode_offered(
    mut body: Map<String, Value>,
    payload: &crate::model::Payload,
    describe: impl Fn(&mut Value, &str),
) -> Vec<u8> {
    if let Some(Value::Array(tools)) = body.get("tools") {
        let offered = offered_tools(tools, &payload.tools, describe);
        body.insert("tools".into(), Value::Array(offered));
    }
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The declarations in `original` (the request's JSON) as the model is offered them: those a
/// `tools`-rail plugin hid (in `tools`, the same declarations in order) left out, rewritten
/// descriptions written in by `describe`.
pub(crate) fn offered_tools(
    original: &[Value],
    tools: &[crate::model::ToolDef],
    describe: impl Fn(&mut Value, &str),
) -> Vec<Value> {
    original
        .iter()
        .zip(tools)
        .filter(|(_, t)| t.hidden_by.is_none())
        .map(|(json, t)| {
            let mut json = json.clone();
            if let Some(d) = &t.description {
                describe(&mut json, d);
            }
            json
        })
        .collect()
}

/// A copy of a request body to write the rails' payload into: the values under `fresh` (about
/// to be rebuilt from the payload, and the bulk of a body) are not copied, only held in place
/// with a null, so every key keeps its position.
pub(crate) fn body_for_edit(body: &Map<String, Value>, fresh: &str) -> Map<String, Value> {
    body.iter()
        .map(|(k, v)| {
            let v = if k == fresh { Value::Null } else { v.clone() };
            (k.clone(), v)
        })
        .collect()
}

/// Write the request's text fields back into `body`, each at its path.
pub(crate) fn write_fields(body: &mut Map<String, Value>, fields: &[crate::model::Field]) {
    closed::write_fields(body, fields);
}

/// A string field of `body` at `path` (dots for nesting), as a request field.
pub(crate) fn read_field(body: &Map<String, Value>, path: &str) -> Option<crate::model::Field> {
    let mut keys = path.split('.');
    let mut at = body.get(keys.next()?)?;
    for k in keys {
        at = at.get(k)?;
    }
    at.as_str().map(|v| crate::model::Field {
        path: path.to_string(),
        value: v.to_string(),
    })
}

/// A request body as read: its top-level keys in order, what the door decoded while reading
/// (the chat door: its messages), and whether an object in it repeats a key.
pub struct Parsed<T> {
    /// The top-level object (what the door decoded left as a null).
    pub body: Map<String, Value>,
    /// What the door decoded while reading.
    pub decoded: T,
    /// Whether an object repeats a key (such a body is never forwarded as it came).
    pub repeats: bool,
}

/// A body read as a JSON object, noting repeated keys: `None` when it is JSON but no object.
pub fn parse_object(bytes: &[u8]) -> serde_json::Result<Option<Parsed<()>>> {
    Ok(match json::parse_noting_repeats(bytes)? {
        (Value::Object(body), repeats) => Some(Parsed {
            body,
            decoded: (),
            repeats,
        }),
        _ => None,
    })
}

/// Where a door's requests go upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `{openai}/chat/completions`.
    Chat,
    /// `{openai}/responses`.
    Responses,
    /// `{anthropic}/messages`.
    Messages,
}

/// One door's wire format, as the request pipeline uses it.
pub trait Codec: Send + Sync + 'static {
    /// The door.
    const DOOR: Door;
    /// The upstream route.
    const ROUTE: Route;
    /// A decoded request: what is needed to write it upstream again.
    type Request: Send + Sync + 'static;
    /// A decoded reply: what is needed to write it back with judged messages.
    type Reply: Send + 'static;
    /// The door's stream codec.
    type Stream: stream::StreamCodec;

    /// What the door decodes while it reads a body.
    type Decoded: Send;

    /// The door's account of a request's top-level fields (`closed`): the string leaves of
    /// those neither mapped nor inert are the request's fields.
    const SHAPE: closed::Shape;
    /// Its account of a message's fields outside what the model maps (in a request or a
    /// reply): the string leaves of those not inert are folded into the message's content.
    const MESSAGE: closed::Shape;
    /// The shape of a message that is not shaped like the door's messages (a tool result made
    /// of a block of another kind); `None` for the door's own.
    fn own_shape(_message: &Message) -> Option<&'static closed::Shape> {
        None
    }
    /// Likewise for a tool call's fields outside what the model maps.
    const CALL: closed::Shape;
    /// The request's keys holding tool declarations, each with the door's account of them.
    const DECLARATIONS: &'static [(&'static str, closed::ToolShape)];
    /// The first key of a tool declaration the door does not know, by its path (for
    /// `unknown_fields = "refuse"`), in a body [`Codec::parse_request`] read.
    fn unknown_in_declarations(
        body: &Map<String, Value>,
        _decoded: &Self::Decoded,
    ) -> Option<String> {
        closed::unknown_in_declarations(body, Self::DECLARATIONS)
    }

    /// Read a request body (JSON text): `None` when it is JSON but not an object. `scope` (the
    /// caller's tenant) keys what a codec keeps from one request to the next (chat: the tools
    /// it read), so that no tenant's request is answered from what another's left.
    fn parse_request(
        bytes: &[u8],
        scope: &str,
    ) -> serde_json::Result<Option<Parsed<Self::Decoded>>>;
    /// Decode a body [`Codec::parse_request`] read (its `railyard` options taken out): the
    /// door's request and the payload the inbound rails judge, as [`Codec::decode_request`]
    /// would decode the whole body.
    fn decode_parsed(
        body: Map<String, Value>,
        decoded: Self::Decoded,
    ) -> Result<(Self::Request, Payload), PayloadError>;
    /// Decode a request body into the door's request and the payload the inbound rails judge.
    fn decode_request(body: Map<String, Value>) -> Result<(Self::Request, Payload), PayloadError>;
    /// Whether the client asked for a stream.
    fn stream_requested(request: &Self::Request) -> bool;
    /// The body for the backend: the request with `payload` (as the inbound rails left it) in
    /// place of what came in. `edited` says whether anything changed; `original` is the body as
    /// it came (a door may read what it left out of its request again from it).
    fn encode_request(
        request: &Self::Request,
        payload: &Payload,
        edited: bool,
        original: &[u8],
    ) -> Vec<u8>;
    /// The body for the backend when the rails replaced only contents of messages in place
    /// (`payload.changes`): `original`, the body as it came, with just those values replaced,
    /// so everything else crosses as the caller wrote it. `None` when the door cannot (then
    /// [`Codec::encode_request`] writes the body anew).
    fn splice_contents(
        _request: &Self::Request,
        _original: &[u8],
        _payload: &Payload,
    ) -> Option<Vec<u8>> {
        None
    }
    /// Decode a reply body: the door's reply, and its assistant messages (one per choice).
    fn decode_reply(body: Map<String, Value>) -> Result<(Self::Reply, Vec<Message>), String>;
    /// The reply for the client, with the judged messages in place and the `railyard` object.
    fn encode_reply(reply: Self::Reply, judged: Vec<Judged>, railyard: Option<Value>) -> Value;
    /// A whole reply read in one pass, its messages decoded as [`Codec::decode_reply`] decodes
    /// them, with where each sits in `bytes`, so that [`Codec::splice_reply`] can write judged
    /// messages into the backend's own bytes. `None` (the door cannot, or the reply is out of
    /// its common shape: an object repeating a key, a `railyard` key): the reply is decoded the
    /// general way.
    fn read_reply(_bytes: &[u8]) -> Option<ReadReply> {
        None
    }
    /// `original`, read by [`Codec::read_reply`] into `spans`, with the judged messages written
    /// in place of the ones that came: what [`Codec::encode_reply`] would give without a
    /// `railyard` object, but for the bytes around the messages, which cross as they came.
    /// `None` when the door cannot (then the reply is decoded again and encoded).
    fn splice_reply(
        _original: &[u8],
        _spans: &[std::ops::Range<usize>],
        _judged: &[Judged],
    ) -> Option<Vec<u8>> {
        None
    }
    /// The body for the backend, as the door decides: the caller's own bytes when the rails
    /// changed nothing and `as_it_came` (no repeated key, no `railyard` options taken out); with
    /// only replaced contents spliced in when the door can; else written anew from the payload.
    fn upstream(
        request: &Self::Request,
        payload: &Payload,
        edited: bool,
        original: bytes::Bytes,
        as_it_came: bool,
    ) -> bytes::Bytes {
        if !as_it_came {
            return Self::encode_request(request, payload, edited, &original).into();
        }
        if !edited {
            return original;
        }
        let spliced = payload
            .changes
            .contents_only()
            .then(|| Self::splice_contents(request, &original, payload))
            .flatten();
        spliced
            .unwrap_or_else(|| Self::encode_request(request, payload, edited, &original))
            .into()
    }
    /// Read a whole reply: its assistant messages (one per choice), and how it was read (in one
    /// pass when the door can and the reply has its common shape, else decoded).
    fn read_whole(bytes: &[u8]) -> Result<(WholeReply<Self::Reply>, Vec<Message>), String> {
        if let Some(read) = Self::read_reply(bytes) {
            return Ok((WholeReply::Read(read.spans), read.messages));
        }
        let d = decode_whole::<Self>(bytes)?;
        let decoded = WholeReply::Decoded {
            reply: d.reply,
            as_it_came: d.as_it_came,
        };
        Ok((decoded, d.messages))
    }
    /// The reply for the client written over the backend's own bytes, when the door can: those
    /// bytes as they came when `unchanged` (no rail changed a message, none has a call to sign)
    /// and the reply came in the common shape, or with the judged messages written in place.
    /// `None`: [`Codec::write_whole`] writes it anew.
    fn write_in_place(
        bytes: &bytes::Bytes,
        read: &WholeReply<Self::Reply>,
        judged: &[Judged],
        unchanged: bool,
    ) -> Option<bytes::Bytes> {
        match read {
            WholeReply::Decoded { as_it_came, .. } if unchanged && *as_it_came => {
                Some(bytes.clone())
            }
            WholeReply::Decoded { .. } => None,
            WholeReply::Read(_) if unchanged => Some(bytes.clone()),
            WholeReply::Read(spans) => Self::splice_reply(bytes, spans, judged).map(Into::into),
        }
    }
    /// The reply for the client written anew, with the judged messages and the `railyard`
    /// object (a reply read in one pass is decoded again for it).
    fn write_whole(
        bytes: &[u8],
        read: WholeReply<Self::Reply>,
        judged: Vec<Judged>,
        railyard: Option<Value>,
    ) -> Result<Value, String> {
        let reply = match read {
            WholeReply::Decoded { reply, .. } => reply,
            WholeReply::Read(_) => decode_whole::<Self>(bytes)?.reply,
        };
        Ok(Self::encode_reply(reply, judged, railyard))
    }
    /// A whole reply that stands for a refusal (`on_block = "refuse"`).
    fn refusal(request: &Self::Request, id: &str, text: &str, railyard: Value) -> Value;
    /// A stream codec for this request.
    fn stream(request: &Self::Request) -> Self::Stream;
    /// The model the request asks for.
    fn model(request: &Self::Request) -> Option<String>;
    /// What the caller should know about how far the rails could see this request.
    fn notes(_request: &Self::Request) -> Vec<&'static str> {
        Vec::new()
    }
    /// The tools the request forces or restricts the model to (`tool_choice`, its allowed
    /// tools), by the names the rails know them by: each must be one the model is offered.
    fn chosen(_request: &Self::Request) -> Vec<String> {
        Vec::new()
    }
    /// The conversation the backend keeps for this request, whose earlier turns the request
    /// does not carry (a Responses continuation): the ids that name it, by kind, for its vault
    /// between requests (`caps::vault::thread`). None for doors that resend every turn.
    fn kept(_request: &Self::Request) -> Kept {
        Kept::default()
    }
    /// A whole reply's id, which the conversation's next request names (`previous_response_id`).
    fn reply_id(_bytes: &[u8]) -> Option<String> {
        None
    }
}

/// What names the conversation a backend keeps for a request ([`Codec::kept`]).
#[derive(Debug, Default)]
pub struct Kept {
    /// The reply it continues (`previous_response_id`): read, not written.
    pub previous: Option<String>,
    /// The conversation it belongs to (Responses' `conversation`): read and written.
    pub conversation: Option<String>,
    /// Whether the reply's id names the next request's thread (Responses).
    pub by_reply: bool,
}

/// The names `tool_choice` (a request's `body[key]`) and its allowed tools give: every string
/// under a `name` key, and `server_label`s as the toolsets they declare (`mcp__<server>`). A
/// word (`auto`, `required`) names none.
pub(crate) fn chosen_in(body: &Map<String, Value>, keys: &[&str]) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(server)) = o.get("server_label") {
                    // An MCP server's tool is chosen through the toolset that declares it.
                    out.push(crate::model::mcp_toolset(server));
                } else if let Some(Value::String(name)) = o.get("name") {
                    out.push(name.clone());
                }
                for (k, sub) in o {
                    if k != "name" && k != "server_label" {
                        walk(sub, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for key in keys {
        if let Some(v) = body.get(*key) {
            walk(v, &mut out);
        }
    }
    out
}

/// How a whole reply was read (see [`Codec::read_whole`]).
pub enum WholeReply<R> {
    /// In one pass: where each message's value sits in the bytes.
    Read(Vec<std::ops::Range<usize>>),
    /// Decoded the general way.
    Decoded {
        /// The door's reply.
        reply: R,
        /// It repeats no key and has no `railyard` key of its own: it may go back as it came.
        as_it_came: bool,
    },
}

/// A whole reply decoded the general way.
struct Decoded<R> {
    reply: R,
    messages: Vec<Message>,
    /// No repeated key and no `railyard` key of its own.
    as_it_came: bool,
}

fn decode_whole<C: Codec + ?Sized>(bytes: &[u8]) -> Result<Decoded<C::Reply>, String> {
    let (reply, repeats) = match json::parse_noting_repeats(bytes) {
        Ok((Value::Object(reply), repeats)) => (reply, repeats),
        _ => return Err("the body is not a JSON object".into()),
    };
    let as_it_came = !repeats && !reply.contains_key("railyard");
    let (reply, messages) = C::decode_reply(reply)?;
    Ok(Decoded {
        reply,
        messages,
        as_it_came,
    })
}

/// Refuse a history whose tool-call arguments repeat a key: parsers differ on which member
/// counts (serde_json, Python and JavaScript keep the last, others the first), so the member
/// the policies judged and provenance signed might not be the one the backend reads.
pub fn check_arguments(payload: &Payload) -> Result<(), PayloadError> {
    for (m, message) in payload.messages.iter().enumerate() {
        for (c, call) in message.tool_calls.iter().enumerate() {
            if json::checked(&call.arguments).unwrap_or(false) {
                return Err(PayloadError::new(
                    format!("messages[{m}].tool_calls[{c}].arguments"),
                    "repeats a key: parsers differ on which of two equal keys counts, so arguments \
                     must name each key once",
                ));
            }
        }
    }
    Ok(())
}

/// `arguments` with each repeated key kept once, as its last member (what serde_json and the
/// SDKs' parsers keep): `None` when no key repeats. For the calls a model makes, so what the
/// policies judge, what provenance signs and what the client runs are one member.
pub fn canonical_arguments(arguments: &str) -> Option<String> {
    if !json::checked(arguments).unwrap_or(false) {
        return None;
    }
    serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|v| serde_json::to_string(&v).ok())
}

/// `obj[key]` as an optional string; `path` names the object in errors.
pub(crate) fn opt_string(
    obj: &mut Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<String>, PayloadError> {
    opt_string_at(obj, key, &|| path.to_string())
}

/// [`opt_string`] with the path made only for an error (for what is read on every request).
pub(crate) fn opt_string_at(
    obj: &mut Map<String, Value>,
    key: &str,
    path: &dyn Fn() -> String,
) -> Result<Option<String>, PayloadError> {
    match obj.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(PayloadError::new(
            format!("{}.{key}", path()),
            "must be a string",
        )),
    }
}

/// `body["stream"]` as a boolean (absent: false).
pub(crate) fn stream_flag(body: &Map<String, Value>) -> Result<bool, PayloadError> {
    match body.get("stream") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(PayloadError::new("stream", "must be a boolean")),
    }
}
