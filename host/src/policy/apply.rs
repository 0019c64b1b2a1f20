//! Checking a plugin's verdict against the payload it judged, then applying it: every edit and
//! rejection is validated first (indices in range, arguments valid JSON, the rail's scope, the
//! size caps), and only then applied, all together. One invalid item makes the whole verdict a
//! fault and none of it is applied.

use super::chain::Rejected;
use crate::engine::bindings::wit;
use crate::engine::{FaultKind, PluginFault};
use crate::model::{Content, Payload, Rail};

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

fn check_reason(what: &str, reason: &str) -> Result<(), PluginFault> {
    if reason.len() > MAX_REASON_BYTES {
        return Err(too_large(format!(
            "{what} is {} bytes (at most {MAX_REASON_BYTES})",
            reason.len()
        )));
    }
    Ok(())
}

/// Items a verdict can address: messages and tool calls. No valid verdict names more edits or
/// rejections than there are items.
fn items(payload: &Payload) -> usize {
    payload.messages.len()
        + payload
            .messages
            .iter()
            .map(|m| m.tool_calls.len())
            .sum::<usize>()
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

fn edit_bytes(edit: &wit::Edit) -> usize {
    match edit {
        wit::Edit::Content(e) => match &e.content {
            wit::Content::Text(t) | wit::Content::Parts(t) => t.len(),
        },
        wit::Edit::Arguments(e) => e.arguments.len(),
    }
}

fn invalid(message: String) -> PluginFault {
    PluginFault {
        kind: FaultKind::InvalidVerdict,
        message,
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

pub(super) fn parse_content(content: wit::Content) -> Result<Content, PluginFault> {
    match content {
        wit::Content::Text(t) => Ok(Content::Text(t)),
        wit::Content::Parts(json) => serde_json::from_str(&json)
            .map(Content::Parts)
            .map_err(|e| invalid(format!("content parts are not valid JSON: {e}"))),
    }
}

/// Validate a plugin's verdict against the payload, then apply it.
pub(super) fn apply(
    payload: &mut Payload,
    rail: Rail,
    plugin: &str,
    verdict: wit::Verdict,
) -> Result<Applied, PluginFault> {
    match verdict {
        wit::Verdict::Allow => Ok(Applied::Allow),
        wit::Verdict::Block(reason) => {
            check_reason("the block reason", &reason)?;
            Ok(Applied::Block(if reason.trim().is_empty() {
                format!("blocked by policy '{plugin}'")
            } else {
                reason
            }))
        }
        wit::Verdict::Modify(modification) => {
            if modification.edits.is_empty() {
                return Err(invalid("modify verdict carries no edits".into()));
            }
            check_reason("the modify reason", &modification.reason)?;
            let addressable = items(payload);
            if modification.edits.len() > addressable {
                return Err(too_large(format!(
                    "{} edits for a request of {addressable} messages and tool calls",
                    modification.edits.len()
                )));
            }
            let bytes: usize = modification.edits.iter().map(edit_bytes).sum();
            let budget = text_bytes(payload)
                .saturating_mul(4)
                .saturating_add(EDIT_BYTES_HEADROOM);
            if bytes > budget {
                return Err(too_large(format!(
                    "the edits carry {bytes} bytes (at most {budget} for this request)"
                )));
            }
            // Validate everything before touching the payload: all or nothing.
            enum Change {
                Content(usize, Content),
                Arguments(usize, usize, String),
            }
            let mut changes = Vec::with_capacity(modification.edits.len());
            for edit in modification.edits {
                match edit {
                    wit::Edit::Content(e) => {
                        let i = check_message(payload, rail, e.message)?;
                        changes.push(Change::Content(i, parse_content(e.content)?));
                    }
                    wit::Edit::Arguments(e) => {
                        let (m, c) = check_call(payload, rail, e.message, e.call)?;
                        if let Err(err) =
                            serde_json::from_str::<serde::de::IgnoredAny>(&e.arguments)
                        {
                            return Err(invalid(format!(
                                "new arguments for tool call {c} of message {m} are not valid JSON: {err}"
                            )));
                        }
                        changes.push(Change::Arguments(m, c, e.arguments));
                    }
                }
            }
            for change in changes {
                match change {
                    Change::Content(i, content) => {
                        payload.messages[i].content = Some(content);
                    }
                    Change::Arguments(m, c, args) => {
                        payload.messages[m].tool_calls[c].arguments = args;
                    }
                }
            }
            Ok(Applied::Modify(modification.reason))
        }
        wit::Verdict::Reject(rejections) => {
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
                    wit::Target::Message(m) => {
                        messages.push((check_message(payload, rail, m)?, r.message))
                    }
                    wit::Target::ToolCall(c) => {
                        let (m, c) = check_call(payload, rail, c.message, c.call)?;
                        calls.push((m, c, r.message));
                    }
                }
            }
            let mut records = Vec::new();
            for (i, message) in messages {
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
                let call = payload.messages[m].tool_calls.remove(c);
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
    }
}
