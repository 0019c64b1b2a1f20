//! Fixtures for plugins' native unit tests (not built for wasm): requests, messages, calls and
//! tools with every field of the contract filled in, so a test says only what it is about, and a
//! new field in the contract is added here once rather than in every plugin's tests.
//!
//! ```
//! use railyard_plugin_sdk::testing::*;
//! use railyard_plugin_sdk::Rail;
//!
//! let req = request(
//!     Rail::ToolCall,
//!     vec![user("weather?"), assistant_calls(vec![call("c1", "get_weather", "{}")])],
//! )
//! .with_tools(vec![function("get_weather", Some(r#"{"type":"object"}"#))])
//! .with_principal("alice");
//! assert_eq!(req.messages[1].tool_calls[0].kind, "function");
//! ```

use crate::{
    Content, Context, Field, Message, Modification, Rail, Rejection, Request, ToolCall, ToolDef,
    Verdict, FUNCTION,
};

/// A context with a request id and nothing else (no principal, tenant or model; door `check`).
pub fn context() -> Context {
    Context {
        request_id: "req-1".into(),
        principal: None,
        tenant: None,
        metadata: vec![],
        model: None,
        door: "check".into(),
    }
}

/// A request on `rail`: no tools, no fields, not partial.
pub fn request(rail: Rail, messages: Vec<Message>) -> Request {
    Request {
        rail,
        messages,
        tools: vec![],
        fields: vec![],
        context: context(),
        partial: false,
    }
}

impl Request {
    /// These declared tools.
    pub fn with_tools(mut self, tools: Vec<ToolDef>) -> Request {
        self.tools = tools;
        self
    }

    /// These request fields.
    pub fn with_fields(mut self, fields: Vec<Field>) -> Request {
        self.fields = fields;
        self
    }

    /// This authenticated principal.
    pub fn with_principal(mut self, principal: &str) -> Request {
        self.context.principal = Some(principal.into());
        self
    }

    /// This model in the context.
    pub fn with_model(mut self, model: &str) -> Request {
        self.context.model = Some(model.into());
        self
    }

    /// A streamed reply's text so far (`partial = true`).
    pub fn partial(mut self) -> Request {
        self.partial = true;
        self
    }
}

/// A message of `role` with `content` and nothing else.
pub fn message(role: &str, content: Option<Content>) -> Message {
    Message {
        role: role.into(),
        content,
        name: None,
        tool_call_id: None,
        tool_calls: vec![],
    }
}

/// A message of `role` whose content is `text`.
pub fn text(role: &str, text: &str) -> Message {
    message(role, Some(Content::Text(text.into())))
}

/// A user message.
pub fn user(t: &str) -> Message {
    text("user", t)
}

/// A system message.
pub fn system(t: &str) -> Message {
    text("system", t)
}

/// An assistant message with text and no calls.
pub fn assistant(t: &str) -> Message {
    text("assistant", t)
}

/// An assistant message with these calls and no content.
pub fn assistant_calls(calls: Vec<ToolCall>) -> Message {
    Message {
        tool_calls: calls,
        ..message("assistant", None)
    }
}

/// A tool result answering `call_id`.
pub fn tool_result(call_id: &str, t: &str) -> Message {
    Message {
        tool_call_id: Some(call_id.into()),
        ..text("tool", t)
    }
}

/// A function call.
pub fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        kind: FUNCTION.into(),
        name: name.into(),
        arguments: arguments.into(),
        provenance: None,
    }
}

/// A function tool, optionally with its `parameters` schema (JSON text).
pub fn function(name: &str, parameters: Option<&str>) -> ToolDef {
    ToolDef {
        kind: FUNCTION.into(),
        name: Some(name.into()),
        description: None,
        parameters: parameters.map(Into::into),
        result_schema: None,
        hidden_by: None,
    }
}

/// A hosted tool declared by type only (e.g. `web_search`).
pub fn hosted(kind: &str) -> ToolDef {
    ToolDef {
        kind: kind.into(),
        name: None,
        description: None,
        parameters: None,
        result_schema: None,
        hidden_by: None,
    }
}

/// A request field.
pub fn field(path: &str, value: &str) -> Field {
    Field {
        path: path.into(),
        value: value.into(),
    }
}

/// The reason of a block; panics on any other verdict.
pub fn expect_block(verdict: Verdict) -> String {
    match verdict {
        Verdict::Block(reason) => reason,
        other => panic!("expected block, got {other:?}"),
    }
}

/// The modification of a modify; panics on any other verdict.
pub fn expect_modify(verdict: Verdict) -> Modification {
    match verdict {
        Verdict::Modify(m) => m,
        other => panic!("expected modify, got {other:?}"),
    }
}

/// The rejections of a reject; panics on any other verdict.
pub fn expect_reject(verdict: Verdict) -> Vec<Rejection> {
    match verdict {
        Verdict::Reject(r) => r,
        other => panic!("expected reject, got {other:?}"),
    }
}

/// Panics unless the verdict is allow.
pub fn assert_allow(verdict: Verdict) {
    assert!(
        matches!(verdict, Verdict::Allow),
        "expected allow, got {verdict:?}"
    );
}
