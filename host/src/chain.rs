//! Running one rail's chain: plugins in config order, edits threaded from one plugin to the next,
//! faults contained and resolved fail-closed unless configured otherwise.
//!
//! Semantics, exactly:
//! - `allow`: nothing changes; the next plugin runs.
//! - `modify`: every edit is checked first (indices in range, arguments valid JSON, and on the
//!   `tool_call`/`output` rails only the model's reply may be touched); if all are valid they are
//!   applied together and the next plugin sees the edited payload. One invalid edit makes the whole
//!   verdict a fault and none of it is applied.
//! - `reject`: each target is replaced (a message's content becomes the rejection message; a tool
//!   call is removed from its message) and the chain goes on.
//! - `block`: the chain stops; the request is refused.
//! - fault (trap, deadline, memory cap, invalid verdict): resolved by the plugin's `on_error`:
//!   `block` (the default) stops the chain like a block, `allow` skips the plugin.
//!
//! The overall verdict is the strongest seen: block > reject > modify > allow.

use crate::engine::bindings::wit;
use crate::engine::{FaultKind, Plugin, PluginFault};
use crate::payload::{Content, Context, Payload, Rail};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to do when a plugin faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
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

/// Overall verdict of a chain, ordered by strength.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
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

/// The record of one plugin's turn in a chain.
#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    /// The plugin's id in the config.
    pub plugin: String,
    /// What it decided.
    pub verdict: Decided,
    /// Its reason (block reason, modify reason, rejection messages, or the fault).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The fault kind, for faults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultKind>,
    /// How a fault was resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_error: Option<OnError>,
    /// Wall time of the call, including applying its edits.
    #[serde(serialize_with = "micros")]
    pub duration_us: Duration,
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

/// An item a plugin rejected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rejected {
    /// The plugin.
    pub plugin: String,
    /// Index of the message (in the payload as it was when the plugin ran).
    pub message: usize,
    /// For a removed tool call: its id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a removed tool call: the tool's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The rejection message.
    pub reason: String,
}

/// Who blocked, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Blocked {
    /// The plugin.
    pub plugin: String,
    /// Its reason (for a fault: what failed).
    pub reason: String,
    /// Whether the block came from a fault resolved by `on_error = "block"`.
    pub fault: bool,
}

/// The result of running a chain.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The rail.
    pub rail: Rail,
    /// The overall verdict.
    pub verdict: Verdict,
    /// The payload after every applied edit and rejection.
    pub payload: Payload,
    /// One decision per plugin that ran, in order.
    pub decisions: Vec<Decision>,
    /// Items replaced or removed by rejections.
    pub rejections: Vec<Rejected>,
    /// Set when the verdict is block.
    pub blocked: Option<Blocked>,
}

impl Evaluation {
    /// The machine-readable form, shared by `railyard check --json` and the check APIs.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "rail": self.rail,
            "verdict": self.verdict,
            "blocked": self.blocked,
            "rejections": self.rejections,
            "decisions": self.decisions,
            "payload": self.payload.to_openai(),
        })
    }
}

/// One plugin in a chain.
#[derive(Clone)]
pub struct Step {
    /// The plugin.
    pub plugin: Arc<Plugin>,
    /// Fault resolution.
    pub on_error: OnError,
}

/// The plugins of one rail, in order.
#[derive(Clone)]
pub struct Chain {
    rail: Rail,
    steps: Vec<Step>,
}

enum Applied {
    Allow,
    Modify(String),
    Reject(Vec<Rejected>),
    Block(String),
}

impl Chain {
    /// A chain for `rail`.
    pub fn new(rail: Rail, steps: Vec<Step>) -> Chain {
        Chain { rail, steps }
    }

    /// The rail.
    pub fn rail(&self) -> Rail {
        self.rail
    }

    /// The steps, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Run the chain over `payload`.
    pub fn run(&self, mut payload: Payload, ctx: &Context) -> Evaluation {
        let tools = payload.wit_tools();
        let mut eval = Evaluation {
            rail: self.rail,
            verdict: Verdict::Allow,
            payload: Payload::default(),
            decisions: Vec::with_capacity(self.steps.len()),
            rejections: Vec::new(),
            blocked: None,
        };
        for step in &self.steps {
            let started = Instant::now();
            let id = step.plugin.id().to_string();
            let request = payload.to_wit(self.rail, &tools, ctx);
            let outcome = step
                .plugin
                .evaluate(&request)
                .and_then(|verdict| apply(&mut payload, self.rail, &id, verdict));
            let duration_us = started.elapsed();
            let mut decision = Decision {
                plugin: id.clone(),
                verdict: Decided::Allow,
                reason: None,
                fault: None,
                on_error: None,
                duration_us,
            };
            match outcome {
                Ok(Applied::Allow) => {}
                Ok(Applied::Modify(reason)) => {
                    decision.verdict = Decided::Modify;
                    decision.reason = Some(reason);
                    eval.verdict = eval.verdict.max(Verdict::Modify);
                }
                Ok(Applied::Reject(items)) => {
                    decision.verdict = Decided::Reject;
                    decision.reason = Some(
                        items
                            .iter()
                            .map(|r| r.reason.as_str())
                            .collect::<Vec<_>>()
                            .join("; "),
                    );
                    eval.rejections.extend(items);
                    eval.verdict = eval.verdict.max(Verdict::Reject);
                }
                Ok(Applied::Block(reason)) => {
                    decision.verdict = Decided::Block;
                    decision.reason = Some(reason.clone());
                    eval.decisions.push(decision);
                    eval.verdict = Verdict::Block;
                    eval.blocked = Some(Blocked {
                        plugin: id,
                        reason,
                        fault: false,
                    });
                    break;
                }
                Err(fault) => {
                    decision.verdict = Decided::Fault;
                    decision.reason = Some(fault.to_string());
                    decision.fault = Some(fault.kind);
                    decision.on_error = Some(step.on_error);
                    eval.decisions.push(decision);
                    if step.on_error == OnError::Block {
                        eval.verdict = Verdict::Block;
                        eval.blocked = Some(Blocked {
                            plugin: id.clone(),
                            reason: format!("policy '{id}' failed ({})", fault.kind),
                            fault: true,
                        });
                        break;
                    }
                    continue;
                }
            }
            eval.decisions.push(decision);
        }
        eval.payload = payload;
        eval
    }
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

fn parse_content(content: wit::Content) -> Result<Content, PluginFault> {
    match content {
        wit::Content::Text(t) => Ok(Content::Text(t)),
        wit::Content::Parts(json) => serde_json::from_str(&json)
            .map(Content::Parts)
            .map_err(|e| invalid(format!("content parts are not valid JSON: {e}"))),
    }
}

/// Validate a plugin's verdict against the payload, then apply it.
fn apply(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `as_str` spellings (logs, metrics, gRPC) are the serialized ones (JSON APIs).
    #[test]
    fn spellings_match_serde() {
        let same = |json: serde_json::Value, s: &str| assert_eq!(json, serde_json::json!(s));
        for v in [
            Verdict::Allow,
            Verdict::Modify,
            Verdict::Reject,
            Verdict::Block,
        ] {
            same(serde_json::to_value(v).unwrap(), v.as_str());
        }
        for d in [
            Decided::Allow,
            Decided::Modify,
            Decided::Reject,
            Decided::Block,
            Decided::Fault,
        ] {
            same(serde_json::to_value(d).unwrap(), d.as_str());
        }
        for o in [OnError::Block, OnError::Allow] {
            same(serde_json::to_value(o).unwrap(), o.as_str());
        }
        for f in FaultKind::ALL {
            same(serde_json::to_value(f).unwrap(), f.as_str());
        }
    }
}
