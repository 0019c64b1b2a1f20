//! The model ⇄ the WIT records plugins see, for every contract version: every conversion in one
//! place.

use super::verdict::{
    Edit, EvalRequest, PluginVerdict, RawCall, RawContent, RawMessage, Rejection, Target,
};
use crate::contract::{wit, wit01};
use crate::model::{Content, Context, Message, Provenance, Rail, ToolCall, ToolDef};

impl From<wit::Rail> for Rail {
    fn from(r: wit::Rail) -> Rail {
        match r {
            wit::Rail::Input => Rail::Input,
            wit::Rail::Output => Rail::Output,
            wit::Rail::ToolCall => Rail::ToolCall,
            wit::Rail::ToolResult => Rail::ToolResult,
            wit::Rail::Tools => Rail::Tools,
        }
    }
}

impl From<Rail> for wit::Rail {
    fn from(r: Rail) -> wit::Rail {
        match r {
            Rail::Input => wit::Rail::Input,
            Rail::Output => wit::Rail::Output,
            Rail::ToolCall => wit::Rail::ToolCall,
            Rail::ToolResult => wit::Rail::ToolResult,
            Rail::Tools => wit::Rail::Tools,
        }
    }
}

impl From<wit01::Rail> for Rail {
    fn from(r: wit01::Rail) -> Rail {
        match r {
            wit01::Rail::Input => Rail::Input,
            wit01::Rail::Output => Rail::Output,
            wit01::Rail::ToolCall => Rail::ToolCall,
            wit01::Rail::ToolResult => Rail::ToolResult,
        }
    }
}

/// A 0.1 plugin never runs on the `tools` rail (it cannot declare it); should one be asked, it
/// sees the input rail's name, which changes nothing it may edit.
fn rail01(r: Rail) -> wit01::Rail {
    match r {
        Rail::Input | Rail::Tools => wit01::Rail::Input,
        Rail::Output => wit01::Rail::Output,
        Rail::ToolCall => wit01::Rail::ToolCall,
        Rail::ToolResult => wit01::Rail::ToolResult,
    }
}

/// JSON as text for a plugin (to_string, not Display: the formatter path is a third slower).
fn json_text(value: &serde_json::Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

impl From<&Content> for wit::Content {
    fn from(c: &Content) -> wit::Content {
        match c {
            Content::Text(t) => wit::Content::Text(t.clone()),
            Content::Parts(p) => wit::Content::Parts(json_text(p)),
        }
    }
}

impl From<&Content> for wit01::Content {
    fn from(c: &Content) -> wit01::Content {
        match c {
            Content::Text(t) => wit01::Content::Text(t.clone()),
            Content::Parts(p) => wit01::Content::Parts(json_text(p)),
        }
    }
}

impl From<&ToolCall> for wit::ToolCall {
    fn from(c: &ToolCall) -> wit::ToolCall {
        wit::ToolCall {
            id: c.id.clone(),
            kind: c.kind.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
            provenance: c.provenance.map(provenance02),
        }
    }
}

fn provenance02(p: Provenance) -> wit::Provenance {
    match p {
        Provenance::Valid => wit::Provenance::Valid,
        Provenance::Unsigned => wit::Provenance::Unsigned,
        Provenance::Forged => wit::Provenance::Forged,
        Provenance::Altered => wit::Provenance::Altered,
        Provenance::OtherTenant => wit::Provenance::OtherTenant,
        Provenance::Expired => wit::Provenance::Expired,
    }
}

impl From<&ToolCall> for wit01::ToolCall {
    fn from(c: &ToolCall) -> wit01::ToolCall {
        wit01::ToolCall {
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        }
    }
}

impl From<&Message> for wit::Message {
    fn from(m: &Message) -> wit::Message {
        wit::Message {
            role: m.role.clone(),
            content: m.content.as_ref().map(Into::into),
            name: m.name.clone(),
            tool_call_id: m.tool_call_id.clone(),
            tool_calls: m.tool_calls.iter().map(Into::into).collect(),
        }
    }
}

impl From<&Message> for wit01::Message {
    fn from(m: &Message) -> wit01::Message {
        wit01::Message {
            role: m.role.clone(),
            content: m.content.as_ref().map(Into::into),
            name: m.name.clone(),
            tool_call_id: m.tool_call_id.clone(),
            tool_calls: m.tool_calls.iter().map(Into::into).collect(),
        }
    }
}

impl From<&ToolDef> for wit::ToolDef {
    fn from(t: &ToolDef) -> wit::ToolDef {
        wit::ToolDef {
            kind: t.kind.to_string(),
            name: t.name.as_deref().map(str::to_string),
            description: t.description.as_deref().map(str::to_string),
            parameters: t.parameters_text(),
            result_schema: t.result_schema.as_ref().map(|s| s.text().to_string()),
            hidden_by: t.hidden_by.clone(),
        }
    }
}

impl From<&ToolDef> for wit01::ToolDef {
    fn from(t: &ToolDef) -> wit01::ToolDef {
        wit01::ToolDef {
            kind: t.kind.to_string(),
            name: t.name.as_deref().map(str::to_string),
            description: t.description.as_deref().map(str::to_string),
            parameters: t.parameters_text(),
        }
    }
}

impl From<&Context> for wit::Context {
    fn from(ctx: &Context) -> wit::Context {
        wit::Context {
            request_id: ctx.request_id.clone(),
            principal: ctx.principal.clone(),
            tenant: ctx.tenant.clone(),
            metadata: ctx.metadata.clone(),
            model: ctx.model.clone(),
            door: ctx.door.clone(),
        }
    }
}

impl From<&Context> for wit01::Context {
    fn from(ctx: &Context) -> wit01::Context {
        wit01::Context {
            request_id: ctx.request_id.clone(),
            principal: ctx.principal.clone(),
            tenant: ctx.tenant.clone(),
            metadata: ctx.metadata.clone(),
        }
    }
}

/// The question for a 0.2 plugin.
pub fn request02(src: &EvalRequest<'_>) -> wit::Request {
    wit::Request {
        rail: src.rail.into(),
        messages: src.messages.iter().map(Into::into).collect(),
        tools: src.tools.iter().map(Into::into).collect(),
        fields: src
            .fields
            .iter()
            .map(|f| wit::Field {
                path: f.path.clone(),
                value: f.value.clone(),
            })
            .collect(),
        context: src.ctx.into(),
        partial: src.partial,
    }
}

fn opt_len(s: &Option<String>) -> usize {
    s.as_ref().map_or(0, String::len)
}

/// Bytes of text in a 0.2 question, content parts as the JSON text it carries them in (what
/// the bound on its answer counts; the packed form's text is that length already).
pub fn bytes02(r: &wit::Request) -> usize {
    let messages: usize = r
        .messages
        .iter()
        .map(|m| {
            let content = match &m.content {
                Some(wit::Content::Text(t) | wit::Content::Parts(t)) => t.len(),
                None => 0,
            };
            let calls: usize = m
                .tool_calls
                .iter()
                .map(|c| c.id.len() + c.kind.len() + c.name.len() + c.arguments.len())
                .sum();
            m.role.len() + content + opt_len(&m.name) + opt_len(&m.tool_call_id) + calls
        })
        .sum();
    let tools: usize = r
        .tools
        .iter()
        .map(|t| {
            t.kind.len()
                + opt_len(&t.name)
                + opt_len(&t.description)
                + opt_len(&t.parameters)
                + opt_len(&t.result_schema)
                + opt_len(&t.hidden_by)
        })
        .sum();
    let fields: usize = r.fields.iter().map(|f| f.path.len() + f.value.len()).sum();
    messages + tools + fields
}

/// [`bytes02`] for a 0.1 question.
pub fn bytes01(r: &wit01::Request) -> usize {
    let messages: usize = r
        .messages
        .iter()
        .map(|m| {
            let content = match &m.content {
                Some(wit01::Content::Text(t) | wit01::Content::Parts(t)) => t.len(),
                None => 0,
            };
            let calls: usize = m
                .tool_calls
                .iter()
                .map(|c| c.id.len() + c.name.len() + c.arguments.len())
                .sum();
            m.role.len() + content + opt_len(&m.name) + opt_len(&m.tool_call_id) + calls
        })
        .sum();
    let tools: usize = r
        .tools
        .iter()
        .map(|t| t.kind.len() + opt_len(&t.name) + opt_len(&t.description) + opt_len(&t.parameters))
        .sum();
    messages + tools
}

/// The question for a 0.1 plugin (tools hidden by policy are left out: it cannot tell them apart).
pub fn request01(src: &EvalRequest<'_>) -> wit01::Request {
    wit01::Request {
        rail: rail01(src.rail),
        messages: src.messages.iter().map(Into::into).collect(),
        tools: src
            .tools
            .iter()
            .filter(|t| t.hidden_by.is_none())
            .map(Into::into)
            .collect(),
        context: src.ctx.into(),
    }
}

fn content02(c: wit::Content) -> RawContent {
    match c {
        wit::Content::Text(t) => RawContent::Text(t),
        wit::Content::Parts(p) => RawContent::Parts(p),
    }
}

fn call02(c: wit::ToolCall) -> RawCall {
    RawCall {
        id: c.id,
        kind: c.kind,
        name: c.name,
        arguments: c.arguments,
    }
}

fn message02(m: wit::Message) -> RawMessage {
    RawMessage {
        role: m.role,
        content: m.content.map(content02),
        name: m.name,
        tool_call_id: m.tool_call_id,
        tool_calls: m.tool_calls.into_iter().map(call02).collect(),
    }
}

impl From<wit::Verdict> for PluginVerdict {
    fn from(v: wit::Verdict) -> PluginVerdict {
        match v {
            wit::Verdict::Allow => PluginVerdict::Allow,
            wit::Verdict::Block(reason) => PluginVerdict::Block(reason),
            wit::Verdict::Modify(m) => PluginVerdict::Modify {
                reason: m.reason,
                edits: m
                    .edits
                    .into_iter()
                    .map(|e| match e {
                        wit::Edit::Content(e) => Edit::Content {
                            message: e.message,
                            content: content02(e.content),
                        },
                        wit::Edit::Arguments(e) => Edit::Arguments {
                            message: e.message,
                            call: e.call,
                            arguments: e.arguments,
                        },
                        wit::Edit::RemoveCall(c) => Edit::RemoveCall {
                            message: c.message,
                            call: c.call,
                        },
                        wit::Edit::Replace(e) => Edit::Replace {
                            start: e.start,
                            count: e.count,
                            message: message02(e.message),
                        },
                        wit::Edit::Insert(e) => Edit::Insert {
                            before: e.before,
                            message: message02(e.message),
                        },
                        wit::Edit::AddCall(e) => Edit::AddCall {
                            message: e.message,
                            call: call02(e.call),
                        },
                        wit::Edit::HideTool(t) => Edit::HideTool(t),
                        wit::Edit::DescribeTool(e) => Edit::DescribeTool {
                            tool: e.tool,
                            description: e.description,
                        },
                        wit::Edit::Field(e) => Edit::Field {
                            path: e.path,
                            value: e.value,
                        },
                    })
                    .collect(),
            },
            wit::Verdict::Reject(rs) => PluginVerdict::Reject(
                rs.into_iter()
                    .map(|r| Rejection {
                        target: match r.target {
                            wit::Target::Message(m) => Target::Message(m),
                            wit::Target::ToolCall(c) => Target::Call {
                                message: c.message,
                                call: c.call,
                            },
                        },
                        message: r.message,
                    })
                    .collect(),
            ),
        }
    }
}

impl From<wit01::Verdict> for PluginVerdict {
    fn from(v: wit01::Verdict) -> PluginVerdict {
        let content = |c: wit01::Content| match c {
            wit01::Content::Text(t) => RawContent::Text(t),
            wit01::Content::Parts(p) => RawContent::Parts(p),
        };
        match v {
            wit01::Verdict::Allow => PluginVerdict::Allow,
            wit01::Verdict::Block(reason) => PluginVerdict::Block(reason),
            wit01::Verdict::Modify(m) => PluginVerdict::Modify {
                reason: m.reason,
                edits: m
                    .edits
                    .into_iter()
                    .map(|e| match e {
                        wit01::Edit::Content(e) => Edit::Content {
                            message: e.message,
                            content: content(e.content),
                        },
                        wit01::Edit::Arguments(e) => Edit::Arguments {
                            message: e.message,
                            call: e.call,
                            arguments: e.arguments,
                        },
                    })
                    .collect(),
            },
            wit01::Verdict::Reject(rs) => PluginVerdict::Reject(
                rs.into_iter()
                    .map(|r| Rejection {
                        target: match r.target {
                            wit01::Target::Message(m) => Target::Message(m),
                            wit01::Target::ToolCall(c) => Target::Call {
                                message: c.message,
                                call: c.call,
                            },
                        },
                        message: r.message,
                    })
                    .collect(),
            ),
        }
    }
}
