//! What a plugin is asked and what it answers, whichever contract version it speaks: the
//! request is the model (borrowed), the answer the newest contract's verdict (0.1's is a
//! subset). Conversions to and from each version's WIT records are in `convert`.

use crate::contract::{packed, wit, wit01};
use crate::model::{Context, Field, Message, Rail, ToolDef};

/// One evaluation's question.
#[derive(Clone, Copy)]
pub struct EvalRequest<'a> {
    /// The rail.
    pub rail: Rail,
    /// The conversation (and, on the reply rails, the reply last), or on the reply rails just
    /// the reply, for a plugin given no history.
    pub messages: &'a [Message],
    /// The tools plugins see (the request's merged with config's).
    pub tools: &'a [ToolDef],
    /// Other text fields that reach the model.
    pub fields: &'a [Field],
    /// Who is asking.
    pub ctx: &'a Context,
    /// The request's capability state (budgets, ledger), for plugins granted capabilities.
    pub caps: &'a crate::caps::RequestCaps,
    /// A streamed reply's text so far, with more to come.
    pub partial: bool,
}

impl EvalRequest<'_> {
    /// Messages, tool calls, tools and fields: the items a verdict can address.
    pub fn items(&self) -> usize {
        crate::model::addressable_items(self.messages, self.tools, self.fields)
    }
}

/// The WIT form of one question, built at most once per contract version and reused by every
/// plugin of a chain until an edit changes the payload.
#[derive(Default)]
pub struct Prepared {
    v01: Option<wit01::Request>,
    v02: Option<wit::Request>,
    packed: Option<packed::Request>,
}

impl Prepared {
    /// The question for a 0.1 plugin.
    pub fn v01(&mut self, src: &EvalRequest<'_>) -> &wit01::Request {
        self.v01
            .get_or_insert_with(|| super::convert::request01(src))
    }

    /// The question for a plugin built with the Rust SDK (0.2, packed).
    pub fn packed(&mut self, src: &EvalRequest<'_>) -> &packed::Request {
        self.packed.get_or_insert_with(|| super::pack::request(src))
    }

    /// The question for a 0.2 plugin.
    pub fn v02(&mut self, src: &EvalRequest<'_>) -> &wit::Request {
        self.v02
            .get_or_insert_with(|| super::convert::request02(src))
    }
}

/// Message content as a plugin wrote it (parts as JSON text).
#[derive(Debug, Clone, PartialEq)]
pub enum RawContent {
    /// A string.
    Text(String),
    /// JSON text (normally an array of content parts).
    Parts(String),
}

/// A tool call as a plugin wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawCall {
    /// Its id.
    pub id: String,
    /// `function`, or a hosted tool's type.
    pub kind: String,
    /// The function's name.
    pub name: String,
    /// Arguments, JSON text.
    pub arguments: String,
}

/// A message as a plugin wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawMessage {
    /// Its role.
    pub role: String,
    /// Its content.
    pub content: Option<RawContent>,
    /// Its name.
    pub name: Option<String>,
    /// The call it answers.
    pub tool_call_id: Option<String>,
    /// The calls it makes.
    pub tool_calls: Vec<RawCall>,
}

/// One change a plugin asks for; indices refer to the request it was given.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// New content for a message.
    Content {
        /// The message.
        message: u32,
        /// Its new content.
        content: RawContent,
    },
    /// New arguments for a call.
    Arguments {
        /// The message.
        message: u32,
        /// The call.
        call: u32,
        /// The new arguments.
        arguments: String,
    },
    /// Remove a call.
    RemoveCall {
        /// The message.
        message: u32,
        /// The call.
        call: u32,
    },
    /// Replace a run of messages with one.
    Replace {
        /// The first message of the run.
        start: u32,
        /// How many.
        count: u32,
        /// What stands in their place.
        message: RawMessage,
    },
    /// Insert a message.
    Insert {
        /// Before this message (the number of messages: at the end).
        before: u32,
        /// The message.
        message: RawMessage,
    },
    /// Add a call to an assistant message.
    AddCall {
        /// The message.
        message: u32,
        /// The call.
        call: RawCall,
    },
    /// Hide a tool from the model.
    HideTool(u32),
    /// A new description for a tool.
    DescribeTool {
        /// The tool.
        tool: u32,
        /// Its new description.
        description: String,
    },
    /// A new value for a request field.
    Field {
        /// The field's path.
        path: String,
        /// Its new value.
        value: String,
    },
}

/// What a rejection replaces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// A message's content.
    Message(u32),
    /// A tool call.
    Call {
        /// The message.
        message: u32,
        /// The call.
        call: u32,
    },
}

/// One rejected item.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// What it replaces.
    pub target: Target,
    /// Shown in its place.
    pub message: String,
}

/// A plugin's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum PluginVerdict {
    /// Nothing to do.
    Allow,
    /// Apply these edits.
    Modify {
        /// The edits.
        edits: Vec<Edit>,
        /// Why.
        reason: String,
    },
    /// Replace these items and go on.
    Reject(Vec<Rejection>),
    /// Refuse the whole request.
    Block(String),
}
