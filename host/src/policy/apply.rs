//! Checking a plugin's verdict against the payload it judged, then applying it: every edit and
//! rejection is validated first (indices in range, arguments valid JSON, the rail's scope, edits
//! that do not overlap, the size caps), and only then applied, all together. One invalid item
//! makes the whole verdict a fault and none of it is applied.
//!
//! Scope: on the `tool_call` and `output` rails only the model's reply (the last message) may
//! change, and no message may be added or removed there (a call may be added to the reply);
//! tool edits only on the `tools` rail, field edits only on the `input` rail.

use super::chain::Rejected;
use crate::engine::verdict::{Edit, PluginVerdict, RawCall, RawContent, RawMessage, Target};
use crate::engine::{FaultKind, PluginFault};
use crate::model::{addressable_items, Content, Message, Payload, Rail, ToolCall, FUNCTION};

/// What an applied verdict did.
pub(super) enum Applied {
    Allow,
    Modify(String),
    Reject(Vec<Rejected>),
    Block(String),
}

/// Longest reason a verdict may give (block, modify) and longest rejection message, in bytes:
/// reasons go into decision records and answers, not whole documents.
pub const MAX_REASON_BYTES: usize = 4096;
/// Bytes of new content and arguments one modify verdict may carry, beyond four times the text
/// of the request it edits: room to rewrite everything several times over, not to balloon it.
pub const EDIT_BYTES_HEADROOM: usize = 1 << 20;

fn too_large(message: String) -> PluginFault {
    PluginFault {
        kind: FaultKind::VerdictTooLarge,
        message,
    }
}

fn invalid(message: String) -> PluginFault {
    PluginFault {
        kind: FaultKind::InvalidVerdict,
        message,
    }
}

fn check_reason(what: &str, reason: &str) -> Result<(), PluginFault> {
    if reason.len() > MAX_REASON_BYTES {
        return Err(too_large(format!(
            "{what} is {} bytes (at most {MAX_REASON_BYTES})",
            reason.len()
        )));
    }
    Ok(())
}

/// Items a verdict can address: messages, tool calls, tools, fields.
fn items(payload: &Payload) -> usize {
    addressable_items(&payload.messages, &payload.tools, &payload.fields)
}

/// Bytes of text and arguments in `payload` (the base of the edit budget).
fn text_bytes(payload: &Payload) -> usize {
    payload
        .messages
        .iter()
        .map(|m| {
            let content = match &m.content {
                Some(Content::Text(t)) => t.len(),
                Some(Content::Parts(p)) => p.to_string().len(),
                None => 0,
            };
            content
                + m.tool_calls
                    .iter()
                    .map(|c| c.arguments.len())
                    .sum::<usize>()
        })
        .sum()
}

fn raw_bytes(m: &RawMessage) -> usize {
    let content = match &m.content {
        Some(RawContent::Text(t) | RawContent::Parts(t)) => t.len(),
        None => 0,
    };
    content
        + m.tool_calls
            .iter()
            .map(|c| c.arguments.len())
            .sum::<usize>()
}

fn edit_bytes(edit: &Edit) -> usize {
    match edit {
        Edit::Content { content, .. } => match content {
            RawContent::Text(t) | RawContent::Parts(t) => t.len(),
        },
        Edit::Arguments { arguments, .. } => arguments.len(),
        Edit::Replace { message, .. } | Edit::Insert { message, .. } => raw_bytes(message),
        Edit::AddCall { call, .. } => call.arguments.len(),
        Edit::DescribeTool { description, .. } => description.len(),
        Edit::Field { value, .. } => value.len(),
        Edit::RemoveCall { .. } | Edit::HideTool(_) => 0,
    }
}

/// Check a message index against the payload and the rail's scope.
fn check_message(payload: &Payload, rail: Rail, index: u32) -> Result<usize, PluginFault> {
    let i = index as usize;
    let len = payload.messages.len();
    if i >= len {
        return Err(invalid(format!(
            "message index {i} is out of range (the request has {len} messages)"
        )));
    }
    if rail.judges_reply_only() && i + 1 != len {
        return Err(invalid(format!(
            "on the {rail} rail only the model's reply (message {}) may be changed, not message {i}",
            len - 1
        )));
    }
    Ok(i)
}

fn check_call(
    payload: &Payload,
    rail: Rail,
    m: u32,
    c: u32,
) -> Result<(usize, usize), PluginFault> {
    let mi = check_message(payload, rail, m)?;
    let calls = payload.messages[mi].tool_calls.len();
    let ci = c as usize;
    if ci >= calls {
        return Err(invalid(format!(
            "tool call index {ci} is out of range (message {mi} has {calls} tool calls)"
        )));
    }
    Ok((mi, ci))
}

pub(super) fn parse_content(content: RawContent) -> Result<Content, PluginFault> {
    match content {
        RawContent::Text(t) => Ok(Content::Text(t)),
        RawContent::Parts(json) => serde_json::from_str(&json)
            .map(Content::Parts)
            .map_err(|e| invalid(format!("content parts are not valid JSON: {e}"))),
    }
}

fn parse_call(call: RawCall) -> Result<ToolCall, PluginFault> {
    if !call.arguments.is_empty() {
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&call.arguments) {
            return Err(invalid(format!(
                "the arguments of added call {:?} are not valid JSON: {e}",
                call.id
            )));
        }
    }
    if call.kind == FUNCTION || call.kind.is_empty() {
        Ok(ToolCall::function(call.id, call.name, call.arguments))
    } else {
        let mut c = ToolCall::hosted(call.id, call.kind, Default::default());
        c.arguments = call.arguments;
        Ok(c)
    }
}

fn parse_message(m: RawMessage) -> Result<Message, PluginFault> {
    let content = m.content.map(parse_content).transpose()?;
    let mut message = Message::new(&m.role, content);
    message.name = m.name;
    message.tool_call_id = m.tool_call_id;
    message.tool_calls = m
        .tool_calls
        .into_iter()
        .map(parse_call)
        .collect::<Result<_, _>>()?;
    Ok(message)
}

/// A validated change, ready to apply.
enum Change {
    Content(usize, Content),
    Arguments(usize, usize, String),
    RemoveCall(usize, usize),
    AddCall(usize, ToolCall),
    HideTool(usize),
    DescribeTool(usize, String),
    Field(usize, String),
    /// Replace messages `start..start+count` (count 0: insert) with `message`.
    Splice(usize, usize, Message),
}

/// A verdict given about a view of the payload that starts at message `offset` and holds
/// `len` messages (a plugin given the reply alone), with its message indices made the payload's.
/// An index past the view is the plugin's mistake, named as it saw the request.
pub(super) fn from_view(
    verdict: PluginVerdict,
    offset: u32,
    len: usize,
) -> Result<PluginVerdict, PluginFault> {
    let shift = |m: u32| -> Result<u32, PluginFault> {
        if m as usize >= len {
            return Err(invalid(format!(
                "message index {m} is out of range (the plugin was given the reply alone: {len} message)"
            )));
        }
        Ok(m + offset)
    };
    Ok(match verdict {
        PluginVerdict::Modify { edits, reason } => PluginVerdict::Modify {
            reason,
            edits: edits
                .into_iter()
                .map(|edit| {
                    Ok(match edit {
                        Edit::Content { message, content } => Edit::Content {
                            message: shift(message)?,
                            content,
                        },
                        Edit::Arguments {
                            message,
                            call,
                            arguments,
                        } => Edit::Arguments {
                            message: shift(message)?,
                            call,
                            arguments,
                        },
                        Edit::RemoveCall { message, call } => Edit::RemoveCall {
                            message: shift(message)?,
                            call,
                        },
                        Edit::AddCall { message, call } => Edit::AddCall {
                            message: shift(message)?,
                            call,
                        },
                        // Never valid on the reply rails; left for `apply` to say so.
                        edit @ (Edit::Replace { .. }
                        | Edit::Insert { .. }
                        | Edit::HideTool(_)
                        | Edit::DescribeTool { .. }
                        | Edit::Field { .. }) => edit,
                    })
                })
                .collect::<Result<_, PluginFault>>()?,
        },
        PluginVerdict::Reject(rejections) => PluginVerdict::Reject(
            rejections
                .into_iter()
                .map(|r| {
                    let target = match r.target {
                        Target::Message(m) => Target::Message(shift(m)?),
                        Target::Call { message, call } => Target::Call {
                            message: shift(message)?,
                            call,
                        },
                    };
                    Ok(crate::engine::verdict::Rejection {
                        target,
                        message: r.message,
                    })
                })
                .collect::<Result<_, PluginFault>>()?,
        ),
        verdict @ (PluginVerdict::Allow | PluginVerdict::Block(_)) => verdict,
    })
}

/// Validate a plugin's verdict against the payload, then apply it.
pub(super) fn apply(
    payload: &mut Payload,
    rail: Rail,
    plugin: &str,
    verdict: PluginVerdict,
) -> Result<Applied, PluginFault> {
    match verdict {
        PluginVerdict::Allow => Ok(Applied::Allow),
        PluginVerdict::Block(reason) => {
            check_reason("the block reason", &reason)?;
            Ok(Applied::Block(if reason.trim().is_empty() {
                format!("blocked by policy '{plugin}'")
            } else {
                reason
            }))
        }
        PluginVerdict::Modify { edits, reason } => {
            if edits.is_empty() {
                return Err(invalid("modify verdict carries no edits".into()));
            }
            check_reason("the modify reason", &reason)?;
            let addressable = items(payload);
            if edits.len() > 2 * addressable + 16 {
                return Err(too_large(format!(
                    "{} edits for a request of {addressable} messages, tool calls, tools and fields",
                    edits.len()
                )));
            }
            let bytes: usize = edits.iter().map(edit_bytes).sum();
            let budget = text_bytes(payload)
                .saturating_mul(4)
                .saturating_add(EDIT_BYTES_HEADROOM);
            if bytes > budget {
                return Err(too_large(format!(
                    "the edits carry {bytes} bytes (at most {budget} for this request)"
                )));
            }
            let changes = validate(payload, rail, plugin, edits)?;
            commit(payload, plugin, changes);
            Ok(Applied::Modify(reason))
        }
        PluginVerdict::Reject(rejections) => reject(payload, rail, plugin, rejections),
    }
}

fn validate(
    payload: &Payload,
    rail: Rail,
    plugin: &str,
    edits: Vec<Edit>,
) -> Result<Vec<Change>, PluginFault> {
    let len = payload.messages.len();
    let mut changes = Vec::with_capacity(edits.len());
    for edit in edits {
        changes.push(match edit {
            Edit::Content { message, content } => {
                Change::Content(check_message(payload, rail, message)?, parse_content(content)?)
            }
            Edit::Arguments {
                message,
                call,
                arguments,
            } => {
                let (m, c) = check_call(payload, rail, message, call)?;
                if let Err(err) = serde_json::from_str::<serde::de::IgnoredAny>(&arguments) {
                    return Err(invalid(format!(
                        "new arguments for tool call {c} of message {m} are not valid JSON: {err}"
                    )));
                }
                Change::Arguments(m, c, arguments)
            }
            Edit::RemoveCall { message, call } => {
                let (m, c) = check_call(payload, rail, message, call)?;
                Change::RemoveCall(m, c)
            }
            Edit::AddCall { message, call } => {
                let m = check_message(payload, rail, message)?;
                if payload.messages[m].role != "assistant" {
                    return Err(invalid(format!(
                        "a call can only be added to an assistant message, not message {m} ({})",
                        payload.messages[m].role
                    )));
                }
                Change::AddCall(m, parse_call(call)?)
            }
            Edit::Replace {
                start,
                count,
                message,
            } => {
                let (s, n) = (start as usize, count as usize);
                if rail.judges_reply_only() || rail == Rail::Tools {
                    return Err(invalid(format!(
                        "messages cannot be replaced on the {rail} rail"
                    )));
                }
                if n == 0 || s.checked_add(n).is_none_or(|end| end > len) {
                    return Err(invalid(format!(
                        "replace of {n} messages from {s} is out of range (the request has {len} messages)"
                    )));
                }
                Change::Splice(s, n, parse_message(message)?)
            }
            Edit::Insert { before, message } => {
                let b = before as usize;
                if rail.judges_reply_only() || rail == Rail::Tools {
                    return Err(invalid(format!(
                        "messages cannot be inserted on the {rail} rail"
                    )));
                }
                if b > len {
                    return Err(invalid(format!(
                        "insert before message {b} is out of range (the request has {len} messages)"
                    )));
                }
                Change::Splice(b, 0, parse_message(message)?)
            }
            Edit::HideTool(t) | Edit::DescribeTool { tool: t, .. } if rail != Rail::Tools => {
                let _ = t;
                return Err(invalid(format!(
                    "tools can only be edited on the tools rail, not on the {rail} rail"
                )));
            }
            Edit::HideTool(t) => Change::HideTool(check_tool(payload, t)?),
            Edit::DescribeTool { tool, description } => {
                Change::DescribeTool(check_tool(payload, tool)?, description)
            }
            Edit::Field { path, value } => {
                if rail != Rail::Input {
                    return Err(invalid(format!(
                        "request fields can only be edited on the input rail, not on the {rail} rail"
                    )));
                }
                let i = payload
                    .fields
                    .iter()
                    .position(|f| f.path == path)
                    .ok_or_else(|| invalid(format!("the request has no field {path:?}")))?;
                Change::Field(i, value)
            }
        });
    }
    check_overlaps(&changes, plugin)?;
    Ok(changes)
}

fn check_tool(payload: &Payload, t: u32) -> Result<usize, PluginFault> {
    let i = t as usize;
    if i >= payload.tools.len() {
        return Err(invalid(format!(
            "tool index {i} is out of range (the request has {} tools)",
            payload.tools.len()
        )));
    }
    Ok(i)
}

/// Structural edits may not overlap each other or an edit of a message they remove.
fn check_overlaps(changes: &[Change], plugin: &str) -> Result<(), PluginFault> {
    let spans: Vec<(usize, usize)> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Splice(s, n, _) => Some((*s, *n)),
            _ => None,
        })
        .collect();
    let removed = |m: usize| spans.iter().any(|&(s, n)| m >= s && m < s + n);
    for (i, &(s, n)) in spans.iter().enumerate() {
        for &(s2, n2) in &spans[i + 1..] {
            let overlap = (n > 0 && n2 > 0 && s < s2 + n2 && s2 < s + n)
                || (n == 0 && s > s2 && s < s2 + n2)
                || (n2 == 0 && s2 > s && s2 < s + n)
                || (n == 0 && n2 == 0 && s == s2);
            if overlap {
                return Err(invalid(format!(
                    "policy '{plugin}' asks for overlapping message edits (at {s} and {s2})"
                )));
            }
        }
    }
    for c in changes {
        let touched = match c {
            Change::Content(m, _)
            | Change::Arguments(m, _, _)
            | Change::RemoveCall(m, _)
            | Change::AddCall(m, _) => Some(*m),
            _ => None,
        };
        if let Some(m) = touched.filter(|m| removed(*m)) {
            return Err(invalid(format!(
                "message {m} is both edited and replaced by the same verdict"
            )));
        }
    }
    Ok(())
}

fn commit(payload: &mut Payload, plugin: &str, changes: Vec<Change>) {
    let mut removals: Vec<(usize, usize)> = Vec::new();
    let mut splices: Vec<(usize, usize, Message)> = Vec::new();
    for change in changes {
        // Contents replaced in place are noted by message; anything else only as "other".
        match &change {
            Change::Content(i, _) => payload.changes.contents.push(*i),
            _ => payload.changes.other = true,
        }
        match change {
            Change::Content(i, content) => {
                payload.messages[i].content = Some(content);
            }
            Change::Arguments(m, c, args) => payload.messages[m].tool_calls[c].arguments = args,
            Change::RemoveCall(m, c) => removals.push((m, c)),
            Change::AddCall(m, call) => {
                payload.messages[m].tool_calls.push(call);
            }
            Change::HideTool(t) => payload.tools[t].hidden_by = Some(plugin.to_string()),
            Change::DescribeTool(t, d) => payload.tools[t].description = Some(d.into()),
            Change::Field(f, value) => payload.fields[f].value = value,
            Change::Splice(s, n, m) => splices.push((s, n, m)),
        }
    }
    // From the back, so earlier indices stay valid; a call named twice goes once.
    removals.sort_by_key(|r| std::cmp::Reverse(*r));
    removals.dedup();
    for (m, c) in removals {
        remove_call(&mut payload.messages[m], c);
    }
    // Replacements before insertions at the same place: the insert lands before the new message.
    splices.sort_by_key(|(s, n, _)| std::cmp::Reverse((*s, *n)));
    for (s, n, m) in splices {
        payload.messages.splice(s..s + n, [m]);
    }
}

fn reject(
    payload: &mut Payload,
    rail: Rail,
    plugin: &str,
    rejections: Vec<crate::engine::verdict::Rejection>,
) -> Result<Applied, PluginFault> {
    if rejections.is_empty() {
        return Err(invalid("reject verdict names no item".into()));
    }
    let addressable = items(payload);
    if rejections.len() > addressable {
        return Err(too_large(format!(
            "{} rejections for a request of {addressable} messages and tool calls",
            rejections.len()
        )));
    }
    for r in &rejections {
        check_reason("a rejection message", &r.message)?;
    }
    let mut messages = Vec::new();
    let mut calls = Vec::new();
    for r in rejections {
        match r.target {
            Target::Message(m) => messages.push((check_message(payload, rail, m)?, r.message)),
            Target::Call { message, call } => {
                let (m, c) = check_call(payload, rail, message, call)?;
                calls.push((m, c, r.message));
            }
        }
    }
    let mut records = Vec::new();
    payload.changes.other |= !calls.is_empty();
    for (i, message) in messages {
        payload.changes.contents.push(i);
        payload.messages[i].content = Some(Content::Text(message.clone()));
        records.push(Rejected {
            plugin: plugin.to_string(),
            message: i,
            tool_call_id: None,
            tool: None,
            reason: message,
        });
    }
    // Remove from the back so earlier indices stay valid; a call named twice goes once.
    calls.sort_by_key(|c| std::cmp::Reverse((c.0, c.1)));
    calls.dedup_by(|a, b| (a.0, a.1) == (b.0, b.1));
    let mut removed = Vec::new();
    for (m, c, message) in calls {
        let call = remove_call(&mut payload.messages[m], c);
        removed.push(Rejected {
            plugin: plugin.to_string(),
            message: m,
            tool_call_id: Some(call.id),
            tool: Some(call.name),
            reason: message,
        });
    }
    removed.reverse();
    records.extend(removed);
    Ok(Applied::Reject(records))
}

/// Removes a call. A message left without calls is written without a `tool_calls` key (the
/// codecs write an empty list only where one came in), since an empty list breaks chat
/// templates (Llama 3.1) and OpenAI refuses it.
fn remove_call(message: &mut Message, c: usize) -> ToolCall {
    message.tool_calls.remove(c)
}
