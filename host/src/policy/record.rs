//! The decision record: one per request, whatever its outcome, built from what the rails did.
//! One type serves the response's `railyard` object, the decision log (its fields are JSON in
//! `--log-format json`) and gRPC. It never carries content: no messages, no arguments, no
//! rejection messages (a plugin may quote what it caught); only block reasons, which policies
//! write for developers and which are capped in size.

use super::chain::Evaluation;
use super::Revision;
use crate::codec::Door;
use crate::engine::FaultKind;
use crate::model::{Decided, OnError, Rail, Verdict};
use serde::ser::SerializeMap;
use serde::Serialize;

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Answered: the backend's reply (judged), or a check's verdict.
    Served,
    /// A policy blocked it (a refusal or a `policy_violation` error).
    Refused,
    /// No valid API key (401).
    Unauthorized,
    /// Over its tenant's limits (413, 429).
    Throttled,
    /// The request itself was invalid (400, 404).
    Invalid,
    /// The backend failed (502, 504, or an error mid-stream).
    BackendError,
    /// The client went away before the answer was complete.
    Disconnected,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 7] = [
        Outcome::Served,
        Outcome::Refused,
        Outcome::Unauthorized,
        Outcome::Throttled,
        Outcome::Invalid,
        Outcome::BackendError,
        Outcome::Disconnected,
    ];

    /// The outcome spelled `name` (as records spell it).
    pub fn parse(name: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// The record spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Served => "served",
            Outcome::Refused => "refused",
            Outcome::Unauthorized => "unauthorized",
            Outcome::Throttled => "throttled",
            Outcome::Invalid => "invalid",
            Outcome::BackendError => "backend_error",
            Outcome::Disconnected => "disconnected",
        }
    }
}

/// What became of the backend call of a request that a plugin running beside it refused: the
/// call was made (and the provider may bill it), its answer never reached the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendCall {
    /// The refusal came first: the call was dropped while the backend was still answering.
    Cancelled,
    /// The backend had answered (or its stream had begun): the answer was thrown away.
    Discarded,
}

impl BackendCall {
    /// The record spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendCall::Cancelled => "cancelled",
            BackendCall::Discarded => "discarded",
        }
    }
}

/// Each rail's strongest verdict, as a map in rail order (`{"input": "modify"}`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RailVerdicts(pub Vec<(Rail, Verdict)>);

impl Serialize for RailVerdicts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (rail, verdict) in &self.0 {
            map.serialize_entry(rail.as_str(), verdict)?;
        }
        map.end()
    }
}

/// One plugin's part on one rail (a streamed reply runs the output rail once per window: the
/// runs are summed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginRecord {
    /// The rail.
    pub rail: Rail,
    /// The plugin's id.
    pub plugin: String,
    /// Its strongest decision.
    pub verdict: Decided,
    /// How many times it ran.
    pub runs: u32,
    /// How many of those runs reused a verdict kept for the same question (`memo = true`).
    #[serde(skip_serializing_if = "is_zero")]
    pub memo: u32,
    /// How many of those runs made no call: the request held none of the plugin's triggers.
    #[serde(skip_serializing_if = "is_zero")]
    pub skipped: u32,
    /// Total time in it, µs.
    pub duration_us: u64,
    /// Its fault kind, if it faulted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultKind>,
    /// It runs in shadow mode: its verdict was recorded, not applied.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shadow: bool,
}

/// A fault and how it was resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FaultRecord {
    /// The rail.
    pub rail: Rail,
    /// The plugin.
    pub policy: String,
    /// The fault kind.
    pub fault: FaultKind,
    /// How it was resolved (for a shadow plugin: how it would have been).
    pub on_error: OnError,
    /// The plugin runs in shadow mode: the fault changed nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shadow: bool,
}

/// Who blocked, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockRecord {
    /// The rail.
    pub rail: Rail,
    /// The plugin.
    pub policy: String,
    /// Its reason (for a fault: which plugin failed and how, never the guest's output).
    pub reason: String,
    /// Whether a fault resolved by `on_error = "block"` caused it.
    pub fault: bool,
}

/// The decision record of one request.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionRecord {
    /// The request id (also the `x-request-id` header).
    pub request_id: String,
    /// Where it came in.
    pub door: Door,
    /// The caller's tenant (`default` when none; empty before authentication).
    pub tenant: String,
    /// The caller's principal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The policy revision that judged it.
    pub revision: u64,
    /// The first 16 hex digits of the revision's hash.
    pub policy_hash: String,
    /// The HTTP status (for gRPC, the equivalent).
    pub status: u16,
    /// How it ended.
    pub outcome: Outcome,
    /// Time from arrival to the end of the answer, µs.
    pub latency_us: u64,
    /// Each rail's strongest verdict.
    pub rails: RailVerdicts,
    /// Each plugin's part.
    pub plugins: Vec<PluginRecord>,
    /// Faults, with their resolution.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultRecord>,
    /// The block, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<BlockRecord>,
    /// The first block a shadow plugin would have caused ("would have blocked"), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_block: Option<BlockRecord>,
    /// What the request was about, for doors that have a target (MCP: the server and tool).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// What the caller should know about how far the rails could see (e.g. a Responses request
    /// whose earlier turns are kept by the backend).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// How many of the history's tool calls had each provenance (signed ids), when it had any.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub provenance: std::collections::BTreeMap<&'static str, u32>,
    /// The guard models the plugins consulted, per plugin, model and operation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guard: Vec<GuardRecord>,
    /// A plugin running beside the backend call refused the request after the call was made:
    /// what became of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendCall>,
}

/// A plugin's calls to one guard model for one operation on one rail, summed (a streamed reply
/// is judged once per window). Never the text: the model's name, what it answered in category
/// names, and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuardRecord {
    /// The rail.
    pub rail: Rail,
    /// The plugin that asked.
    pub plugin: String,
    /// The guard model, by its configured name.
    pub model: String,
    /// `moderate`, `guard`, `classify`, `entities` or `judge`.
    pub operation: &'static str,
    /// Calls made.
    pub calls: u32,
    /// How many were answered from the cache.
    #[serde(skip_serializing_if = "is_zero")]
    pub cached: u32,
    /// Total time waited, µs.
    pub duration_us: u64,
    /// Whether any answer flagged the text (moderation and safety guards).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub flagged: bool,
    /// Categories flagged, top labels, or entity types found.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// The kinds of the errors the calls met (`timeout`, `unavailable`, `invalid_output`, ...).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<&'static str>,
}

/// A category name a guard model gave, as a record may hold it: its letters, digits, spaces and
/// `_-./()` when that is all it is and it is short, else only its length (a model's answer is
/// shaped by the text it judged).
fn category(s: &str) -> String {
    let plain =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '-' | '.' | '/' | '(' | ')');
    if !s.is_empty() && s.len() <= MAX_NAME && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("<not a name: {} bytes>", s.len())
    }
}

/// Most guard records a decision record holds (plugins x models x operations x rails).
const MAX_GUARD_RECORDS: usize = 32;
/// Most category names a guard record holds.
const MAX_CATEGORIES: usize = 16;

/// Longest caller-chosen name (an MCP server, method or tool) a record holds as it is.
pub const MAX_NAME: usize = 64;

/// A caller-chosen name as a record may hold it: as it is when it is shaped like a name (at
/// most [`MAX_NAME`] ASCII letters, digits and `_-.:/`, what tool names, JSON-RPC methods and
/// server names are), else only its length. A record never carries free text a caller chose:
/// not a sentence, an address or a control character that would forge a log line.
pub fn name(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/');
    if !s.is_empty() && s.len() <= MAX_NAME && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("<not a name: {} bytes>", s.len())
    }
}

/// [`name`] in single quotes, when it is one (for reasons that name a caller's tool).
pub fn quoted(s: &str) -> String {
    let shown = name(s);
    if shown == s {
        format!("'{s}'")
    } else {
        shown
    }
}

/// The target of a request on a door that has one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Target {
    /// The upstream server (MCP).
    pub server: String,
    /// The JSON-RPC method.
    pub method: String,
    /// The tool, for `tools/call`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

impl DecisionRecord {
    /// A record of a request that has not been judged yet.
    pub fn new(request_id: String, door: Door, revision: &Revision) -> DecisionRecord {
        DecisionRecord {
            request_id,
            door,
            tenant: String::new(),
            principal: None,
            revision: revision.number,
            policy_hash: revision.hash.get(..16).unwrap_or_default().to_string(),
            status: 0,
            outcome: Outcome::Served,
            latency_us: 0,
            rails: RailVerdicts::default(),
            plugins: Vec::new(),
            faults: Vec::new(),
            blocked: None,
            would_block: None,
            target: None,
            notes: Vec::new(),
            provenance: Default::default(),
            guard: Vec::new(),
            backend: None,
        }
    }

    /// The record as JSON, byte for byte what `serde_json::to_writer` writes (a test holds
    /// them equal), but written directly: an answer that policies acted on carries it, and
    /// serde's escaping of every key and value cost more than the rest of the answer's writing.
    /// The parts that are rare (faults, blocks, targets, notes, provenance) go through serde.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"request_id\":");
        json_str(out, &self.request_id);
        key_word(out, "door", self.door.as_str());
        key_str(out, "tenant", &self.tenant);
        if let Some(principal) = &self.principal {
            key_str(out, "principal", principal);
        }
        key_number(out, "revision", self.revision);
        key_str(out, "policy_hash", &self.policy_hash);
        key_number(out, "status", u64::from(self.status));
        key_word(out, "outcome", self.outcome.as_str());
        key_number(out, "latency_us", self.latency_us);
        out.extend_from_slice(b",\"rails\":{");
        for (i, (rail, verdict)) in self.rails.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(rail.as_str().as_bytes());
            out.extend_from_slice(b"\":\"");
            out.extend_from_slice(verdict.as_str().as_bytes());
            out.push(b'"');
        }
        out.extend_from_slice(b"},\"plugins\":[");
        for (i, p) in self.plugins.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"rail\":\"");
            out.extend_from_slice(p.rail.as_str().as_bytes());
            out.push(b'"');
            key_str(out, "plugin", &p.plugin);
            key_word(out, "verdict", p.verdict.as_str());
            key_number(out, "runs", u64::from(p.runs));
            if p.memo != 0 {
                key_number(out, "memo", u64::from(p.memo));
            }
            if p.skipped != 0 {
                key_number(out, "skipped", u64::from(p.skipped));
            }
            key_number(out, "duration_us", p.duration_us);
            if let Some(fault) = &p.fault {
                key_serde(out, "fault", fault);
            }
            if p.shadow {
                out.extend_from_slice(b",\"shadow\":true");
            }
            out.push(b'}');
        }
        out.push(b']');
        if !self.faults.is_empty() {
            key_serde(out, "faults", &self.faults);
        }
        if let Some(blocked) = &self.blocked {
            key_serde(out, "blocked", blocked);
        }
        if let Some(would_block) = &self.would_block {
            key_serde(out, "would_block", would_block);
        }
        if let Some(target) = &self.target {
            key_serde(out, "target", target);
        }
        if !self.notes.is_empty() {
            key_serde(out, "notes", &self.notes);
        }
        if !self.provenance.is_empty() {
            key_serde(out, "provenance", &self.provenance);
        }
        if !self.guard.is_empty() {
            key_serde(out, "guard", &self.guard);
        }
        out.push(b'}');
    }

    /// Fold one guard-model call into the record.
    fn add_guard(&mut self, rail: Rail, plugin: &str, call: &crate::guard::GuardCall) {
        let model = name(&call.model);
        let found = self.guard.iter().position(|g| {
            g.rail == rail
                && g.plugin == plugin
                && g.model == model
                && g.operation == call.operation
        });
        let g = match found {
            Some(i) => &mut self.guard[i],
            None if self.guard.len() >= MAX_GUARD_RECORDS => return,
            None => {
                self.guard.push(GuardRecord {
                    rail,
                    plugin: plugin.to_string(),
                    model,
                    operation: call.operation,
                    calls: 0,
                    cached: 0,
                    duration_us: 0,
                    flagged: false,
                    categories: Vec::new(),
                    errors: Vec::new(),
                });
                self.guard.last_mut().expect("just pushed")
            }
        };
        g.calls += 1;
        g.cached += u32::from(call.cached);
        g.duration_us += call.duration_us.as_micros() as u64;
        g.flagged |= call.flagged == Some(true);
        for c in &call.categories {
            let c = category(c);
            if g.categories.len() < MAX_CATEGORIES && !g.categories.contains(&c) {
                g.categories.push(c);
            }
        }
        if let Some(e) = call.error {
            if !g.errors.contains(&e) {
                g.errors.push(e);
            }
        }
    }

    /// Fold one chain run into the record.
    pub fn add(&mut self, eval: &Evaluation) {
        match self.rails.0.iter_mut().find(|(r, _)| *r == eval.rail) {
            Some((_, v)) => *v = (*v).max(eval.verdict),
            None => self.rails.0.push((eval.rail, eval.verdict)),
        }
        self.rails.0.sort_by_key(|(r, _)| r.index());
        for d in &eval.decisions {
            let micros = d.duration_us.as_micros() as u64;
            match self
                .plugins
                .iter_mut()
                .find(|p| p.rail == eval.rail && p.plugin == d.plugin)
            {
                Some(p) => {
                    p.verdict = p.verdict.max(d.verdict);
                    p.runs += 1;
                    p.memo += u32::from(d.memo);
                    p.skipped += u32::from(d.skipped);
                    p.duration_us += micros;
                    p.fault = p.fault.or(d.fault);
                }
                None => self.plugins.push(PluginRecord {
                    rail: eval.rail,
                    plugin: d.plugin.clone(),
                    verdict: d.verdict,
                    runs: 1,
                    memo: u32::from(d.memo),
                    skipped: u32::from(d.skipped),
                    duration_us: micros,
                    fault: d.fault,
                    shadow: d.shadow,
                }),
            }
            for call in &d.guard {
                self.add_guard(eval.rail, &d.plugin, call);
            }
            if let (Some(fault), Some(on_error)) = (d.fault, d.on_error) {
                self.faults.push(FaultRecord {
                    rail: eval.rail,
                    policy: d.plugin.clone(),
                    fault,
                    on_error,
                    shadow: d.shadow,
                });
            }
        }
        if let (None, Some(b)) = (&self.would_block, &eval.would_block) {
            self.would_block = Some(BlockRecord {
                rail: eval.rail,
                policy: b.plugin.clone(),
                reason: b.reason.clone(),
                fault: b.fault,
            });
        }
        if let Some(b) = &eval.blocked {
            self.blocked = Some(BlockRecord {
                rail: eval.rail,
                policy: b.plugin.clone(),
                reason: b.reason.clone(),
                fault: b.fault,
            });
        }
    }

    /// Record a step the daemon itself took on `rail` as `name` (pins), beside the plugins.
    pub fn host_step(
        &mut self,
        rail: Rail,
        name: &str,
        verdict: Decided,
        took: std::time::Duration,
    ) {
        let v = match verdict {
            Decided::Allow => Verdict::Allow,
            Decided::Modify => Verdict::Modify,
            Decided::Reject => Verdict::Reject,
            _ => Verdict::Block,
        };
        match self.rails.0.iter_mut().find(|(r, _)| *r == rail) {
            Some((_, old)) => *old = (*old).max(v),
            None => self.rails.0.push((rail, v)),
        }
        self.rails.0.sort_by_key(|(r, _)| r.index());
        let micros = took.as_micros() as u64;
        match self
            .plugins
            .iter_mut()
            .find(|p| p.rail == rail && p.plugin == name)
        {
            Some(p) => {
                p.verdict = p.verdict.max(verdict);
                p.runs += 1;
                p.duration_us += micros;
            }
            None => self.plugins.push(PluginRecord {
                rail,
                plugin: name.to_string(),
                verdict,
                runs: 1,
                memo: 0,
                skipped: 0,
                duration_us: micros,
                fault: None,
                shadow: false,
            }),
        }
    }

    /// Count the provenance of the history's calls (`payload` after it was checked).
    pub fn provenance(&mut self, payload: &crate::model::Payload) {
        for call in payload.messages.iter().flat_map(|m| &m.tool_calls) {
            if let Some(p) = call.provenance {
                *self.provenance.entry(p.as_str()).or_default() += 1;
            }
        }
    }

    /// Record a block the daemon enforced for `policy` on `rail`.
    pub fn block(&mut self, rail: Rail, policy: &str, reason: &str, fault: bool) {
        match self.rails.0.iter_mut().find(|(r, _)| *r == rail) {
            Some((_, v)) => *v = Verdict::Block,
            None => self.rails.0.push((rail, Verdict::Block)),
        }
        self.rails.0.sort_by_key(|(r, _)| r.index());
        self.blocked = Some(BlockRecord {
            rail,
            policy: policy.to_string(),
            reason: reason.to_string(),
            fault,
        });
    }

    /// Whether any rail did more than allow, a plugin faulted, a shadow plugin would have done
    /// more than allow, or there is a note for the caller: then the answer carries a `railyard`
    /// object.
    pub fn acted(&self) -> bool {
        self.rails.0.iter().any(|(_, v)| *v != Verdict::Allow)
            || !self.faults.is_empty()
            || !self.notes.is_empty()
            || self
                .plugins
                .iter()
                .any(|p| p.shadow && p.verdict != Decided::Allow)
    }

    /// One line for the human log format.
    pub fn line(&self) -> String {
        let mut out = String::with_capacity(256);
        self.write_line(&mut out);
        out
    }

    /// [`line`](Self::line), appended to `out` (one buffer, no part built apart). Every field
    /// is appended as it is, numbers by `itoa`: the formatting machinery cost more than the
    /// rest of the line (every request writes one).
    pub fn write_line(&self, out: &mut String) {
        out.push_str("door=");
        out.push_str(self.door.as_str());
        if let Some(t) = &self.target {
            push_all(out, &[" target=", &t.server, ":", &t.method]);
            if let Some(tool) = &t.tool {
                out.push(':');
                out.push_str(tool);
            }
        }
        out.push_str(" status=");
        push_number(out, u64::from(self.status));
        push_all(
            out,
            &[
                " outcome=",
                self.outcome.as_str(),
                " tenant=",
                if self.tenant.is_empty() {
                    "-"
                } else {
                    &self.tenant
                },
                " principal=",
                self.principal.as_deref().unwrap_or("-"),
                " revision=",
            ],
        );
        push_number(out, self.revision);
        push_all(out, &[" policy_hash=", &self.policy_hash, " latency_us="]);
        push_number(out, self.latency_us);
        out.push_str(" rails=");
        for (i, (rail, verdict)) in self.rails.0.iter().enumerate() {
            let comma = if i > 0 { "," } else { "" };
            push_all(out, &[comma, rail.as_str(), "=", verdict.as_str()]);
        }
        out.push_str(" plugins=");
        for (i, p) in self.plugins.iter().enumerate() {
            let comma = if i > 0 { "," } else { "" };
            let shadow = if p.shadow { "shadow-" } else { "" };
            push_all(
                out,
                &[
                    comma,
                    p.rail.as_str(),
                    ":",
                    &p.plugin,
                    ":",
                    shadow,
                    p.verdict.as_str(),
                ],
            );
            if p.runs > 1 {
                out.push('x');
                push_number(out, u64::from(p.runs));
            }
            if p.memo > 0 {
                out.push_str("+memo");
            }
            if p.skipped > 0 {
                out.push_str("+skipped");
            }
            out.push(':');
            push_number(out, p.duration_us);
            out.push_str("us");
        }
        out.push_str(" faults=");
        for (i, f) in self.faults.iter().enumerate() {
            let comma = if i > 0 { "," } else { "" };
            push_all(
                out,
                &[
                    comma,
                    f.rail.as_str(),
                    ":",
                    &f.policy,
                    ":",
                    f.fault.as_str(),
                    ":",
                    f.on_error.as_str(),
                ],
            );
        }
        if let Some(b) = &self.blocked {
            // The reason as the JSON record has it (#51), quoted: it is the plugin's words,
            // which never carry what it caught.
            push_all(
                out,
                &[" blocked=", b.rail.as_str(), ":", &b.policy, " reason="],
            );
            out.push_str(&serde_json::to_string(&b.reason).unwrap_or_default());
        }
        if let Some(b) = &self.would_block {
            push_all(out, &[" would_block=", b.rail.as_str(), ":", &b.policy]);
        }
        if let Some(b) = self.backend {
            push_all(out, &[" backend=", b.as_str()]);
        }
        for (i, (k, n)) in self.provenance.iter().enumerate() {
            let sep = if i > 0 { "," } else { " provenance=" };
            push_all(out, &[sep, k, ":"]);
            push_number(out, u64::from(*n));
        }
    }
}

fn push_all(out: &mut String, parts: &[&str]) {
    for part in parts {
        out.push_str(part);
    }
}

fn push_number(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// `s` as a JSON string: as it is between quotes when nothing in it needs escaping (ids, names
/// and hashes, nearly always), else escaped by serde_json.
fn json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// `,"key":` (keys are plain words).
fn key(out: &mut Vec<u8>, key: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

fn key_str(out: &mut Vec<u8>, name: &str, s: &str) {
    key(out, name);
    json_str(out, s);
}

/// A value spelled as a plain word (an enum's record spelling).
fn key_word(out: &mut Vec<u8>, name: &str, word: &str) {
    key(out, name);
    out.push(b'"');
    out.extend_from_slice(word.as_bytes());
    out.push(b'"');
}

fn key_number(out: &mut Vec<u8>, name: &str, n: u64) {
    key(out, name);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

fn key_serde(out: &mut Vec<u8>, name: &str, value: &impl Serialize) {
    key(out, name);
    let _ = serde_json::to_writer(&mut *out, value);
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(rail: Rail, name: &str, verdict: Decided) -> PluginRecord {
        PluginRecord {
            rail,
            plugin: name.into(),
            verdict,
            runs: 1,
            memo: 0,
            skipped: 0,
            duration_us: 12,
            fault: None,
            shadow: false,
        }
    }

    fn block(policy: &str, reason: &str) -> BlockRecord {
        BlockRecord {
            rail: Rail::ToolCall,
            policy: policy.into(),
            reason: reason.into(),
            fault: true,
        }
    }

    /// Records with every field present and absent, and strings that need escaping.
    fn records() -> Vec<DecisionRecord> {
        let revision = Revision {
            number: 7,
            hash: "0123456789abcdef0123".into(),
        };
        let mut records = vec![DecisionRecord::new("ry-1".into(), Door::Chat, &revision)];
        let mut r = DecisionRecord::new("ry-\"2\"\n".into(), Door::Mcp, &revision);
        r.tenant = "t\\é\u{1}".into();
        r.principal = Some("p\u{7f}\u{2028}".into());
        r.status = 503;
        r.outcome = Outcome::BackendError;
        r.latency_us = u64::MAX;
        r.rails = RailVerdicts(vec![
            (Rail::ToolResult, Verdict::Allow),
            (Rail::Input, Verdict::Modify),
            (Rail::Tools, Verdict::Reject),
            (Rail::ToolCall, Verdict::Block),
            (Rail::Output, Verdict::Allow),
        ]);
        let mut faulted = plugin(Rail::ToolCall, "schema\"validator", Decided::Fault);
        faulted.fault = Some(FaultKind::Deadline);
        faulted.memo = 3;
        faulted.runs = 4;
        let mut shadow = plugin(Rail::Output, "pii", Decided::Modify);
        shadow.shadow = true;
        shadow.skipped = 2;
        shadow.runs = 3;
        for kind in [
            FaultKind::MemoryCap,
            FaultKind::OutputFlood,
            FaultKind::Trap,
        ] {
            let mut p = plugin(Rail::Input, "k", Decided::Fault);
            p.fault = Some(kind);
            r.plugins.push(p);
        }
        r.plugins.extend([
            plugin(Rail::Input, "pii", Decided::Modify),
            plugin(Rail::Tools, "x", Decided::Reject),
            plugin(Rail::ToolResult, "y", Decided::Block),
            faulted,
            shadow,
        ]);
        r.faults.push(FaultRecord {
            rail: Rail::ToolCall,
            policy: "schema".into(),
            fault: FaultKind::Deadline,
            on_error: OnError::Allow,
            shadow: true,
        });
        r.blocked = Some(block("allowlist", "tool \"rm\" is not allowed"));
        r.would_block = Some(block("shadowed", "would"));
        r.target = Some(Target {
            server: "files".into(),
            method: "tools/call".into(),
            tool: Some("read".into()),
        });
        r.notes.push("earlier turns are kept by the backend".into());
        r.provenance.insert("valid", 2);
        r.provenance.insert("forged", 1);
        records.push(r);
        let mut r = DecisionRecord::new(String::new(), Door::Responses, &revision);
        r.target = Some(Target {
            server: "s".into(),
            method: "tools/list".into(),
            tool: None,
        });
        records.push(r);
        for door in [
            Door::Messages,
            Door::Check,
            Door::Grpc,
            Door::Models,
            Door::Admin,
        ] {
            let mut r = DecisionRecord::new("id".into(), door, &revision);
            r.outcome = Outcome::Disconnected;
            records.push(r);
        }
        for outcome in [
            Outcome::Served,
            Outcome::Refused,
            Outcome::Unauthorized,
            Outcome::Throttled,
            Outcome::Invalid,
        ] {
            let mut r = DecisionRecord::new("id".into(), Door::Chat, &revision);
            r.outcome = outcome;
            records.push(r);
        }
        records
    }

    /// Written directly and by serde.
    #[test]
    fn written_directly_as_serde_writes_it() {
        for (i, record) in records().iter().enumerate() {
            let mut direct = Vec::new();
            record.write_json(&mut direct);
            let serde = serde_json::to_vec(record).unwrap();
            assert_eq!(
                String::from_utf8(direct).unwrap(),
                String::from_utf8(serde).unwrap(),
                "record {i}"
            );
        }
    }

    /// The log line of each of `records()`, field by field (these are the lines the former
    /// builder, a `String` per part, wrote for the same records, and the block since #51).
    #[test]
    fn the_line_is_unchanged() {
        let expected = [
            "door=chat status=0 outcome=served tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
            "door=mcp target=files:tools/call:read status=503 outcome=backend_error tenant=t\\é\u{1} principal=p\u{7f}\u{2028} revision=7 policy_hash=0123456789abcdef latency_us=18446744073709551615 rails=tool_result=allow,input=modify,tools=reject,tool_call=block,output=allow plugins=input:k:fault:12us,input:k:fault:12us,input:k:fault:12us,input:pii:modify:12us,tools:x:reject:12us,tool_result:y:block:12us,tool_call:schema\"validator:faultx4+memo:12us,output:pii:shadow-modifyx3+skipped:12us faults=tool_call:schema:deadline:allow blocked=tool_call:allowlist reason=\"tool \\\"rm\\\" is not allowed\" would_block=tool_call:shadowed provenance=forged:1,valid:2",
            "door=responses target=s:tools/list status=0 outcome=served tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
            "door=messages status=0 outcome=disconnected tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
            "door=check status=0 outcome=disconnected tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
            "door=grpc status=0 outcome=disconnected tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
            "door=models status=0 outcome=disconnected tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
            "door=admin status=0 outcome=disconnected tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
            "door=chat status=0 outcome=served tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
            "door=chat status=0 outcome=refused tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
            "door=chat status=0 outcome=unauthorized tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
            "door=chat status=0 outcome=throttled tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
            "door=chat status=0 outcome=invalid tenant=- principal=- revision=7 policy_hash=0123456789abcdef latency_us=0 rails= plugins= faults=",
        ];
        let records = records();
        assert_eq!(records.len(), expected.len());
        for (i, (record, line)) in records.iter().zip(expected).enumerate() {
            assert_eq!(record.line(), line, "record {i}");
        }
    }
}
