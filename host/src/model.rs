//! What every layer talks about: the rails, the conversation a chain judges (messages, tool
//! calls, declared tools), who is asking, and the verdicts. Plain data with serde only; the wire
//! formats are codecs (`crate::codec`), the plugins' WIT records are the engine's
//! (`crate::engine::convert`).

use serde_json::{Map, Value};
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The rails: the four of contract 0.1, and `tools` (0.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rail {
    /// The conversation the application sends.
    Input,
    /// Tool results the application sends back.
    ToolResult,
    /// Tool calls the model emits.
    ToolCall,
    /// The text the model returns.
    Output,
    /// The tools the model is offered (contract 0.2).
    Tools,
}

impl Rail {
    /// Every rail, in the order they run for a request.
    pub const ALL: [Rail; 5] = [
        Rail::ToolResult,
        Rail::Input,
        Rail::Tools,
        Rail::ToolCall,
        Rail::Output,
    ];

    /// The config spelling (`tool_call`).
    pub fn as_str(self) -> &'static str {
        match self {
            Rail::Input => "input",
            Rail::ToolResult => "tool_result",
            Rail::ToolCall => "tool_call",
            Rail::Output => "output",
            Rail::Tools => "tools",
        }
    }

    /// The names a config or request may use, for error messages.
    pub const EXPECTED: &'static str = "input, tool_result, tools, tool_call or output";

    /// Parse the config spelling.
    pub fn parse(s: &str) -> Option<Rail> {
        Rail::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether only the last message (the model's reply) is under judgement on this rail.
    pub fn judges_reply_only(self) -> bool {
        matches!(self, Rail::ToolCall | Rail::Output)
    }

    /// Position in [`Rail::ALL`].
    pub fn index(self) -> usize {
        match self {
            Rail::ToolResult => 0,
            Rail::Input => 1,
            Rail::Tools => 2,
            Rail::ToolCall => 3,
            Rail::Output => 4,
        }
    }
}

impl fmt::Display for Rail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Message content.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// A string.
    Text(String),
    /// Anything else (normally an array of content parts), kept as JSON.
    Parts(Value),
}

impl Content {
    /// Whether there is any text or part to show.
    pub fn is_empty(&self) -> bool {
        match self {
            Content::Text(t) => t.is_empty(),
            Content::Parts(p) => p.is_null() || p.as_array().is_some_and(|a| a.is_empty()),
        }
    }
}

/// The `type` of a function tool and of a call to one.
pub const FUNCTION: &str = "function";

/// The `type` of a custom tool (free-text input, run by the client) and of a call to one.
pub const CUSTOM: &str = "custom";

/// The kind of a call to a provider's MCP tool, and of the server declared as a tool.
pub const MCP: &str = "mcp";

/// The name a provider's MCP server goes by as a declared tool: `mcp__<server>`.
pub fn mcp_toolset(server: &str) -> String {
    format!("mcp__{server}")
}

/// The name a call to a provider's MCP tool goes by: `mcp__<server>__<tool>`.
pub fn mcp_tool(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
}

/// The tool's own name in `name` (an [`mcp_tool`] name for `server`), or `name` itself.
pub fn mcp_tool_name<'a>(name: &'a str, server: &str) -> &'a str {
    name.strip_prefix("mcp__")
        .and_then(|rest| rest.strip_prefix(server))
        .and_then(|rest| rest.strip_prefix("__"))
        .unwrap_or(name)
}

/// One tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// `id`.
    pub id: String,
    /// `function` for a function call, `custom` for a call to a custom tool; for a call to a
    /// hosted tool (a call that carries a `type` such as `web_search` and no `function`
    /// object), that type.
    pub kind: String,
    /// `function.name` (a custom tool's name); for a hosted call, its type (what policies
    /// match it by).
    pub name: String,
    /// `function.arguments`, JSON text as the model wrote it; a custom tool's free-text input.
    pub arguments: String,
    /// Other fields of the call, re-emitted by the codec that read it.
    pub extra: Map<String, Value>,
    /// Other fields of `function`.
    pub function_extra: Map<String, Value>,
    /// For a call in the history the caller sent: whether the daemon relayed it (its signed id
    /// verified). `None` for the reply under judgement.
    pub provenance: Option<Provenance>,
}

/// How a tool-call id the daemon signs starts (see `rails::provenance`).
pub const SIGNED_ID_PREFIX: &str = "ry2_";
/// How the ids it signed before they carried the tool's name start (still verified).
pub const LEGACY_SIGNED_ID_PREFIX: &str = "ry1_";
/// The longest tool name a signed id carries (Anthropic's limit on a tool's name).
pub const SIGNED_NAME_MAX: usize = 128;

/// A tool-call id the daemon signed, taken apart: `ry2_<key>_<time>_<macs>_<n>_<name>_<id>`
/// (`n` the name's length; `ry1_<key>_<time>_<macs>_<id>` before names were carried).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedId<'a> {
    /// The signing key's id.
    pub kid: &'a str,
    /// Unix seconds when it was signed.
    pub ts: &'a str,
    /// The macs, hex.
    pub macs: &'a str,
    /// The called tool's name (empty when it was not one an id can carry); `None` in a legacy id.
    pub name: Option<&'a str>,
    /// The model's own id.
    pub original: &'a str,
}

/// Whether a tool's name fits in a signed id: letters, digits, `_` and `-`, as every door's
/// function names are, and `.` (a Responses namespace's tool, `<namespace>.<name>`).
pub fn carriable_name(name: &str) -> bool {
    name.len() <= SIGNED_NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

impl<'a> SignedId<'a> {
    /// `id` taken apart, when it is shaped like a signed id (its macs are not checked here).
    pub fn parse(id: &'a str) -> Option<SignedId<'a>> {
        let (rest, legacy) = match id.strip_prefix(SIGNED_ID_PREFIX) {
            Some(rest) => (rest, false),
            None => (id.strip_prefix(LEGACY_SIGNED_ID_PREFIX)?, true),
        };
        let mut parts = rest.splitn(if legacy { 4 } else { 5 }, '_');
        let (kid, ts, macs) = (parts.next()?, parts.next()?, parts.next()?);
        let (name, original) = if legacy {
            (None, parts.next()?)
        } else {
            let len = parts.next()?;
            let tail = parts.next()?;
            if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let len: usize = len.parse().ok()?;
            let name = tail.get(..len)?;
            let original = tail.get(len..)?.strip_prefix('_')?;
            carriable_name(name).then_some(())?;
            (Some(name), original)
        };
        let well_formed = !kid.is_empty()
            && !ts.is_empty()
            && ts.len() <= 12
            && ts.bytes().all(|b| b.is_ascii_digit())
            && !macs.is_empty()
            && macs.bytes().all(|b| b.is_ascii_hexdigit());
        well_formed.then_some(SignedId {
            kid,
            ts,
            macs,
            name,
            original,
        })
    }

    /// Whether `id` starts as a signed id does (well formed or not).
    pub fn looks_signed(id: &str) -> bool {
        id.starts_with(SIGNED_ID_PREFIX) || id.starts_with(LEGACY_SIGNED_ID_PREFIX)
    }
}

/// The model's own id inside a tool-call id the daemon signed, or `id` itself. Codecs that
/// derive other ids from a call's (Responses item ids) use it, so no signed id ends up where the
/// backend would see it again.
pub fn model_id(id: &str) -> &str {
    SignedId::parse(id).map_or(id, |s| s.original)
}

/// Where a tool call in the history came from, by its id (see `rails::provenance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Signed by the daemon (this one or one sharing its keyring), unaltered, in time.
    Valid,
    /// Not a signed id: the model's own id, or one the caller made up.
    Unsigned,
    /// Looks signed, but no key signed it for this call: made up, or signed by a key not held.
    Forged,
    /// Signed, but its name or arguments were changed since.
    Altered,
    /// Signed for another tenant.
    OtherTenant,
    /// Signed longer ago than `[provenance] max_age_s`.
    Expired,
}

impl Provenance {
    /// The config and record spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Valid => "valid",
            Provenance::Unsigned => "unsigned",
            Provenance::Forged => "forged",
            Provenance::Altered => "altered",
            Provenance::OtherTenant => "other_tenant",
            Provenance::Expired => "expired",
        }
    }
}

impl ToolCall {
    /// A function call.
    pub fn function(id: String, name: String, arguments: String) -> ToolCall {
        ToolCall {
            id,
            kind: FUNCTION.into(),
            name,
            arguments,
            extra: Map::new(),
            function_extra: Map::new(),
            provenance: None,
        }
    }

    /// A call to a hosted tool of type `kind` (matched by policies as a call named `kind`).
    pub fn hosted(id: String, kind: String, extra: Map<String, Value>) -> ToolCall {
        ToolCall {
            id,
            name: kind.clone(),
            kind,
            arguments: String::new(),
            extra,
            function_extra: Map::new(),
            provenance: None,
        }
    }

    /// A call to the custom tool `name` with its free-text `input` as its arguments.
    pub fn custom(id: String, name: String, input: String) -> ToolCall {
        ToolCall {
            kind: CUSTOM.into(),
            ..ToolCall::function(id, name, input)
        }
    }

    /// Whether this is a call to a hosted tool (one the provider runs: not a function or a
    /// custom tool, which the client runs).
    pub fn is_hosted(&self) -> bool {
        self.kind != FUNCTION && self.kind != CUSTOM
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The content; `None` when absent or null.
    pub content: Option<Content>,
    /// `name`.
    pub name: Option<String>,
    /// For a tool result: the call it answers.
    pub tool_call_id: Option<String>,
    /// For an assistant message: the calls it made.
    pub tool_calls: Vec<ToolCall>,
    /// Fields of the wire message the model does not know, re-emitted by the codec that read it.
    pub extra: Map<String, Value>,
    /// What the codec that read this message needs to write it back where it came from (where
    /// in the wire body it was, how it was spelled); that codec's own type, read by no other.
    pub wire: Wire,
    /// Text from outside the content the codec folded into it for the rails to judge, and how
    /// to put it back (`codec::closed`); private to that codec.
    pub folded: Option<Box<Folded>>,
    /// An assistant turn the backend keeps and the request only answers (a Responses
    /// continuation): its calls are known by the results' ids alone (their names from the ids
    /// the daemon signed). Judged like any turn, never written back.
    pub unseen: bool,
}

/// A message's round-trip state, of the type its codec chose (`Wire::of`, `Wire::get`): the
/// model names no door's spelling, and a message made elsewhere (by a policy, by another door)
/// has none, so each codec writes it in its own default way.
#[derive(Clone, Default)]
pub struct Wire(Option<Arc<dyn WireState>>);

/// What a codec's round-trip state must be: comparable (a door's fast and general readings of
/// one body are checked equal), printable, shareable.
trait WireState: Any + fmt::Debug + Send + Sync {
    fn same(&self, other: &dyn WireState) -> bool;
}

impl<T: Any + fmt::Debug + PartialEq + Send + Sync> WireState for T {
    fn same(&self, other: &dyn WireState) -> bool {
        (other as &dyn Any).downcast_ref::<T>() == Some(self)
    }
}

impl Wire {
    /// `state`, kept for the codec whose type it is.
    pub fn of<T: Any + fmt::Debug + PartialEq + Send + Sync>(state: T) -> Wire {
        Wire(Some(Arc::new(state)))
    }

    /// The state, when it is of type `T` (the reading codec's).
    pub fn get<T: Any>(&self) -> Option<&T> {
        let state: &dyn Any = self.0.as_deref()?;
        state.downcast_ref()
    }
}

impl PartialEq for Wire {
    fn eq(&self, other: &Wire) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => a.same(&**b),
            _ => false,
        }
    }
}

impl fmt::Debug for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("Wire(none)"),
            Some(state) => state.fmt(f),
        }
    }
}

/// Text a codec folded into a message's content: string leaves of fields outside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Folded {
    /// What the content was before.
    pub was: FoldedContent,
    /// How many of the folded content's parts are the content's own (the leaves follow).
    pub own: usize,
    /// Where each leaf came from, in the order of their parts.
    pub leaves: Vec<Leaf>,
}

/// A message's content before folding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldedContent {
    /// None (absent or `null`: the codec's round-trip state tells which).
    Absent,
    /// A string.
    Text,
    /// An array of parts.
    Parts,
    /// Any other JSON.
    Other,
}

/// Where a folded leaf came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    /// The value it is in.
    pub root: Root,
    /// Its path in that value (for a key, the path to its member).
    pub path: Vec<Seg>,
    /// It is the key of the member at `path`, not its value.
    pub key: bool,
}

/// The value a folded leaf is in.
#[derive(Debug, Clone, PartialEq)]
pub enum Root {
    /// The message's `extra`.
    Extra,
    /// A call's `extra` (or `function_extra`): the call with this id, at this place when folded.
    Call {
        /// Its id.
        id: String,
        /// Its place among the message's calls.
        index: usize,
        /// `function_extra` rather than `extra`.
        function: bool,
    },
}

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// An object's key.
    Key(String),
    /// An array's index.
    Index(usize),
}

impl Message {
    /// A message with `role` and `content`.
    pub fn new(role: &str, content: Option<Content>) -> Message {
        Message {
            role: role.to_string(),
            content,
            name: None,
            tool_call_id: None,
            tool_calls: Vec::new(),
            extra: Map::new(),
            wire: Wire::default(),
            folded: None,
            unseen: false,
        }
    }

    /// An assistant reply.
    pub fn reply(content: Option<Content>, tool_calls: Vec<ToolCall>) -> Message {
        let mut m = Message::new("assistant", content);
        m.tool_calls = tool_calls;
        m
    }

    /// Whether the message carries any text or content parts.
    pub fn has_text(&self) -> bool {
        self.content.as_ref().is_some_and(|c| !c.is_empty())
    }
}

/// A declared tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// `function`, or a hosted tool's type. (The texts are shared: each worker keeps the
    /// tools it read lately, and a request's are a copy of those.)
    pub kind: Arc<str>,
    /// The function's name.
    pub name: Option<Arc<str>>,
    /// The function's description.
    pub description: Option<Arc<str>>,
    /// The function's `parameters` schema.
    pub parameters: Option<Schema>,
    /// The schema its results must match (MCP `outputSchema`, config `result_schema`).
    pub result_schema: Option<Schema>,
    /// Set when a plugin on the `tools` rail hid the tool from the model: its id.
    pub hidden_by: Option<String>,
}

/// A JSON Schema kept as JSON text. Plugins are given the text, and on every rail of every
/// request, while the host needs the schema's parts only here and there (a body written anew,
/// MCP routing headers): so it is not held as a tree of maps that would be built, cloned,
/// serialised and dropped on every request. Cloning shares the text.
#[derive(Clone)]
pub struct Schema(std::sync::Arc<str>);

impl Schema {
    /// The schema `value`, as its JSON text.
    pub fn of(value: &Value) -> Schema {
        Schema(serde_json::to_string(value).unwrap_or_default().into())
    }

    /// A schema from its JSON text, which the caller has already read as one JSON value.
    pub fn from_json_text(text: &str) -> Schema {
        Schema(text.into())
    }

    /// The JSON text (as the caller wrote it, or as the host wrote the value).
    pub fn text(&self) -> &str {
        &self.0
    }

    /// The schema as a value.
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

/// Schemas are equal when their values are, however their text is spaced.
impl PartialEq for Schema {
    fn eq(&self, other: &Schema) -> bool {
        self.0 == other.0 || self.value() == other.value()
    }
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Schema({})", self.0)
    }
}

impl ToolDef {
    /// A tool as a request (or server) declares it: no result schema, not hidden.
    pub fn declared(
        kind: &str,
        name: Option<&str>,
        description: Option<&str>,
        parameters: Option<Schema>,
    ) -> ToolDef {
        ToolDef {
            kind: kind.into(),
            name: name.map(Into::into),
            description: description.map(Into::into),
            parameters,
            result_schema: None,
            hidden_by: None,
        }
    }

    /// `parameters` as JSON text.
    pub fn parameters_text(&self) -> Option<String> {
        self.parameters.as_ref().map(|s| s.text().to_string())
    }

    /// Whether this declaration is the same tool as `other` (kind and name).
    pub fn same(&self, other: &ToolDef) -> bool {
        self.kind == other.kind && self.name == other.name
    }
}

/// Another text field of the request that reaches the model (e.g. the top-level `user`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Field {
    /// Its JSON path, e.g. `user` or `metadata.user_id`.
    pub path: String,
    /// Its value.
    pub value: String,
}

/// Messages and tools: what a rail's chain judges and edits.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Payload {
    /// The conversation (on `tool_call`/`output`, ending with the model's reply).
    pub messages: Vec<Message>,
    /// Declared tools.
    pub tools: Vec<ToolDef>,
    /// Other text fields that reach the model.
    pub fields: Vec<Field>,
    /// What the rails changed, so a codec can write the request again by replacing only that.
    pub changes: Changes,
}

/// Messages, tool calls, tools and fields: the items a verdict can address, in a payload or in
/// the part of it a plugin is shown.
pub fn addressable_items(messages: &[Message], tools: &[ToolDef], fields: &[Field]) -> usize {
    messages.len()
        + messages.iter().map(|m| m.tool_calls.len()).sum::<usize>()
        + tools.len()
        + fields.len()
}

/// What the rails changed in a payload since it was decoded: the messages whose content they
/// replaced, or that something else changed. A codec that knows where each message's content
/// sat in the body it read can then forward that body with only those values replaced (see
/// `Codec::splice_contents`). Bookkeeping, not part of the payload's value: equal to any other.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// Messages, by their place in the request as it came, whose content was replaced (in the
    /// order it happened, possibly twice). Meaningful only while `other` is false.
    pub contents: Vec<usize>,
    /// Anything else changed: a message added, removed or replaced, a call, its arguments or
    /// its id, a tool, a field.
    pub other: bool,
}

impl Changes {
    /// Only contents of messages in place changed (or nothing).
    pub fn contents_only(&self) -> bool {
        !self.other
    }
}

impl PartialEq for Changes {
    fn eq(&self, _: &Changes) -> bool {
        true
    }
}

/// Who is asking (from the daemon's authentication, never from the body).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    /// Request id.
    pub request_id: String,
    /// Authenticated principal.
    pub principal: Option<String>,
    /// Tenant.
    pub tenant: Option<String>,
    /// Extra labels.
    pub metadata: Vec<(String, String)>,
    /// The model the request asks for.
    pub model: Option<String>,
    /// The door it came through (`chat`, `responses`, ...).
    pub door: String,
}

/// A payload that is not shaped like its wire format; names the offending path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct PayloadError {
    /// JSON path of the problem, e.g. `messages[2].tool_calls[0].function.arguments`.
    pub path: String,
    /// What was expected.
    pub message: String,
}

impl PayloadError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> PayloadError {
        PayloadError {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// What to do when a plugin faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// Refuse the request (fail closed).
    #[default]
    Block,
    /// Skip the plugin and go on (fail open).
    Allow,
}

impl OnError {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Block => "block",
            OnError::Allow => "allow",
        }
    }
}

/// Whether a plugin's verdicts count (`enforce`) or are only recorded (`shadow`: it runs and its
/// decisions are logged and counted, but the request goes on as if it had allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Verdicts are applied.
    #[default]
    Enforce,
    /// Verdicts are recorded, never applied.
    Shadow,
}

impl Mode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Shadow => "shadow",
        }
    }
}

/// Overall verdict of a chain, ordered by strength.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Nothing changed.
    Allow,
    /// The payload was edited.
    Modify,
    /// Items were replaced or removed.
    Reject,
    /// The request is refused.
    Block,
}

impl Verdict {
    /// The wire spelling (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Modify => "modify",
            Verdict::Reject => "reject",
            Verdict::Block => "block",
        }
    }
}

/// One plugin's decision, as recorded; ordered by strength (a fault is the strongest: it is
/// what an operator must see first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decided {
    /// Allowed.
    Allow,
    /// Modified.
    Modify,
    /// Rejected items.
    Reject,
    /// Blocked.
    Block,
    /// Faulted (see `fault` and `on_error`).
    Fault,
}

impl Decided {
    /// The wire spelling (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            Decided::Allow => "allow",
            Decided::Modify => "modify",
            Decided::Reject => "reject",
            Decided::Block => "block",
            Decided::Fault => "fault",
        }
    }
}

/// How a plugin's instances are used across evaluations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// Configured instances are kept in a pool and reused (a few µs per call). State a plugin
    /// keeps between calls survives; an instance that faults is discarded.
    Pooled,
    /// A fresh instance for every evaluation, configured anew (tens of µs for a small Rust
    /// plugin, milliseconds for plugins that compile schemas or start a JS/Python runtime).
    PerCall,
}

/// Resource limits for one plugin.
#[derive(Debug, Clone)]
pub struct Limits {
    /// CPU deadline for one evaluation.
    pub timeout: Duration,
    /// Cap on the instance's linear memory.
    pub memory_bytes: usize,
    /// Instance reuse.
    pub isolation: Isolation,
    /// Most idle instances kept per plugin (pooled isolation).
    pub max_idle_instances: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_millis(100),
            memory_bytes: 64 << 20,
            isolation: Isolation::Pooled,
            max_idle_instances: 16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mcp_tools_name_goes_back_to_the_tools_own() {
        let name = mcp_tool("crm", "lookup__by_id");
        assert_eq!(name, "mcp__crm__lookup__by_id");
        assert_eq!(mcp_tool_name(&name, "crm"), "lookup__by_id");
        // Another server's, or a name not made so, stays as it is.
        assert_eq!(mcp_tool_name(&name, "cr"), name);
        assert_eq!(mcp_tool_name("lookup", "crm"), "lookup");
        assert_eq!(mcp_toolset("crm"), "mcp__crm");
    }
}
