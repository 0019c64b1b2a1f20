//! The model ⇄ the WIT records plugins see: every conversion in one place, as `From` impls.

use super::bindings::wit;
use crate::model::{Content, Context, Message, Payload, Rail, ToolCall, ToolDef};

impl From<wit::Rail> for Rail {
    fn from(r: wit::Rail) -> Rail {
        match r {
            wit::Rail::Input => Rail::Input,
            wit::Rail::Output => Rail::Output,
            wit::Rail::ToolCall => Rail::ToolCall,
            wit::Rail::ToolResult => Rail::ToolResult,
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
        }
    }
}

impl From<&Content> for wit::Content {
    fn from(c: &Content) -> wit::Content {
        match c {
            Content::Text(t) => wit::Content::Text(t.clone()),
            Content::Parts(p) => wit::Content::Parts(p.to_string()),
        }
    }
}

impl From<&ToolCall> for wit::ToolCall {
    fn from(c: &ToolCall) -> wit::ToolCall {
        wit::ToolCall {
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

impl From<&ToolDef> for wit::ToolDef {
    fn from(t: &ToolDef) -> wit::ToolDef {
        wit::ToolDef {
            kind: t.kind.clone(),
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.parameters.as_ref().map(|p| p.to_string()),
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
        }
    }
}

/// The request a plugin on `rail` sees; `tools` are the payload's, converted once per chain.
pub fn request(
    rail: Rail,
    payload: &Payload,
    tools: &[wit::ToolDef],
    ctx: &Context,
) -> wit::Request {
    wit::Request {
        rail: rail.into(),
        messages: payload.messages.iter().map(Into::into).collect(),
        tools: tools.to_vec(),
        context: ctx.into(),
    }
}
