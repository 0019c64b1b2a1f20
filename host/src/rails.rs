//! The request flow, whatever the door and the transport: a [`RequestScope`] holds one request's
//! policy snapshot, caller and decision record; [`RequestScope::inbound`] runs the `tool_result`
//! and `input` rails on what the caller sent, [`RequestScope::reply`] the `tool_call` and
//! `output` rails on what the model answered; `relay` does the same for a streamed reply, with
//! `window` holding text back so values split across events are judged whole.
//!
//! Exactly one decision record per request: the scope writes it when it is finished, or, if it
//! is dropped unfinished (the client went away), as a disconnect.

mod join;
pub mod options;
mod pins;
pub mod provenance;
pub mod relay;
mod vault;
pub mod window;

use crate::auth::Caller;
use crate::codec::Door;
use crate::model::{Context, Message, Payload, Rail, Verdict};
use crate::policy::chain::{Decided, Evaluation, Part, Rejected, Then};
use crate::policy::record::{BackendCall, DecisionRecord, Outcome, Target};
use crate::policy::PolicySet;
pub use options::RequestOptions;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// Where a request's evaluations and its record go (metrics and the decision log).
pub trait Observer: Send + Sync + 'static {
    /// A chain ran for `tenant`.
    fn evaluation(&self, eval: &Evaluation, tenant: &str);
    /// A request ended: its one record.
    fn record(&self, record: &DecisionRecord);
    /// A request of `tenant` ended with these approval requests, as the client was shown them.
    fn approvals(&self, _asked: &[Value], _tenant: &str) {}
}

/// Why a request was refused.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The rail that blocked.
    pub rail: Rail,
    /// The plugin.
    pub policy: String,
    /// Its reason.
    pub reason: String,
    /// Whether a fault (resolved fail-closed) caused it.
    pub fault: bool,
}

impl Refusal {
    /// The refusal of a chain run that blocked.
    pub fn from_eval(eval: &Evaluation) -> Option<Refusal> {
        eval.blocked.as_ref().map(|b| Refusal {
            rail: eval.rail,
            policy: b.plugin.clone(),
            reason: b.reason.clone(),
            fault: b.fault,
        })
    }

    /// The message of a `policy_violation` error.
    pub fn message(&self) -> String {
        format!(
            "request blocked by policy '{}' on the {} rail: {}",
            self.policy, self.rail, self.reason
        )
    }
}

/// The refusal of a run beside the backend call ([`RequestScope::beside`]): its block, or the
/// first change a plugin would have made (what was sent cannot be changed any more, so a
/// plugin that would have changed it refuses it).
pub fn refused_beside(eval: &Evaluation) -> Option<Refusal> {
    Refusal::from_eval(eval).or_else(|| {
        let changed = eval
            .decisions
            .iter()
            .find(|d| !d.shadow && matches!(d.verdict, Decided::Modify | Decided::Reject))?;
        Some(Refusal {
            rail: Rail::Input,
            policy: changed.plugin.clone(),
            reason: format!(
                "it runs beside the backend call and would have changed the request, which was already sent ({})",
                changed.reason.as_deref().unwrap_or("no reason given")
            ),
            fault: false,
        })
    })
}

/// What the inbound rails decided.
pub enum Inbound {
    /// Send this payload to the backend (`edited`: the rails changed it).
    Forward {
        /// The payload as the rails left it.
        payload: Payload,
        /// Whether any rail changed it.
        edited: bool,
    },
    /// Refuse the request; the backend is never called.
    Refuse(Refusal),
}

/// The run of the input rail's `parallel` plugins beside the backend call.
pub type Beside = std::pin::Pin<Box<dyn std::future::Future<Output = Evaluation> + Send>>;

/// One request's policy snapshot, caller, options and decision record.
pub struct RequestScope {
    set: Arc<PolicySet>,
    ctx: Context,
    /// Its capability state (guard budget, approvals ledger, target server), passed to every
    /// chain that judges it.
    caps: crate::caps::RequestCaps,
    options: RequestOptions,
    record: DecisionRecord,
    rejections: Vec<Value>,
    observer: Arc<dyn Observer>,
    started: Instant,
    ended: bool,
    /// Whether a reply rail changed a reply message.
    reply_edited: bool,
    /// Whether the rails left the client nothing of the reply but the refusal (its only calls
    /// removed): the request is refused, though no plugin blocked it.
    reply_refused: bool,
    /// Its trace, when traces are on.
    trace: Option<crate::telemetry::RequestTrace>,
    /// A model door calls the backend: the input rail's `parallel` plugins are left out of
    /// [`RequestScope::inbound`] and run beside that call ([`RequestScope::beside`]).
    calls_backend: bool,
    /// The caller's key's id and own token budget (tokens per minute), if it has one.
    key_budget: Option<(String, u32)>,
    /// Where its vault is kept for the conversation's next request, when the backend (or the
    /// MCP door) keeps the conversation rather than the client resending it.
    vault_threads: Option<Box<vault::Threads>>,
}

impl RequestScope {
    /// A scope for a request that just arrived on `door`, judged by `set`.
    pub fn new(
        observer: Arc<dyn Observer>,
        set: Arc<PolicySet>,
        door: Door,
        request_id: String,
    ) -> RequestScope {
        RequestScope {
            record: DecisionRecord::new(request_id.clone(), door, set.revision()),
            ctx: Context {
                request_id,
                door: door.as_str().to_string(),
                ..Context::default()
            },
            caps: crate::caps::RequestCaps {
                // Only a set with a plugin that may ask for approvals keeps a ledger.
                approvals: set.asks_approvals().then(Default::default),
                vault: set.has_vault().then(Default::default),
                ..Default::default()
            },
            set,
            options: RequestOptions::default(),
            rejections: Vec::new(),
            observer,
            started: Instant::now(),
            ended: false,
            reply_edited: false,
            reply_refused: false,
            trace: None,
            calls_backend: false,
            key_budget: None,
            vault_threads: None,
        }
    }

    /// The request goes on to a backend: plugins with `parallel = true` run beside that call
    /// rather than before it.
    pub fn calls_backend(&mut self) {
        self.calls_backend = true;
    }

    /// The steps of `rail`'s chain that run where the rails are run.
    fn part(&self, rail: Rail) -> Part {
        match rail {
            Rail::Input if self.calls_backend => Part::Before,
            _ => Part::All,
        }
    }

    /// Trace this request with `trace`.
    pub fn set_trace(&mut self, trace: crate::telemetry::RequestTrace) {
        self.trace = Some(trace);
    }

    /// Its trace, when traces are on (for the backend call's span).
    pub fn trace(&mut self) -> Option<&mut crate::telemetry::RequestTrace> {
        self.trace.as_mut()
    }

    /// Who is calling (what authentication established; never the body).
    pub fn set_caller(&mut self, caller: &Caller) {
        self.ctx.principal = caller.principal.clone();
        self.ctx.tenant = caller.tenant.clone();
        self.ctx.metadata = caller.labels.clone();
        self.record.tenant = caller.tenant_name().to_string();
        self.record.principal = caller.principal.clone();
        self.key_budget = caller
            .tokens_per_minute
            .and_then(|t| Some((caller.key_id()?, t)));
    }

    /// The caller's key's id and own token budget, if it has one.
    pub fn key_budget(&self) -> Option<&(String, u32)> {
        self.key_budget.as_ref()
    }

    /// Labels the caller claimed in the request (namespaced `request.`, so they can never pose
    /// as a key's labels).
    pub fn add_claimed_metadata(&mut self, mut claimed: Vec<(String, String)>) {
        claimed.sort();
        self.ctx.metadata.extend(
            claimed
                .into_iter()
                .map(|(k, v)| (format!("request.{k}"), v)),
        );
    }

    /// A label the daemon itself sets (e.g. `mcp.server`), seen by plugins in their context.
    pub fn add_metadata(&mut self, key: &str, value: &str) {
        self.ctx.metadata.push((key.to_string(), value.to_string()));
    }

    /// The daemon refused the request itself, for a policy's decision (an MCP call to a tool a
    /// `tools` plugin hid): recorded as that rail's block.
    pub fn refuse(&mut self, refusal: &Refusal) {
        self.record.block(
            refusal.rail,
            &refusal.policy,
            &refusal.reason,
            refusal.fault,
        );
    }

    /// The model the request asks for (plugins see it in their context).
    pub fn set_model(&mut self, model: Option<String>) {
        self.ctx.model = model;
    }

    /// The request's own options.
    pub fn set_options(&mut self, options: RequestOptions) {
        self.options = options;
    }

    /// Tell the caller something about how far the rails could see.
    pub fn note(&mut self, note: &str) {
        self.record.notes.push(note.to_string());
    }

    /// What the request is about (MCP: server, method, tool).
    pub fn set_target(&mut self, target: Target) {
        // An approval is bound to the server it was asked on.
        self.caps.server = Some(target.server.clone());
        self.record.target = Some(target);
    }

    /// The policy snapshot that judges this request from start to end.
    pub fn set(&self) -> &Arc<PolicySet> {
        &self.set
    }

    /// The context plugins see.
    pub fn ctx(&self) -> &Context {
        &self.ctx
    }

    /// The request id.
    pub fn request_id(&self) -> &str {
        &self.ctx.request_id
    }

    /// The caller's tenant's name.
    pub fn tenant_name(&self) -> &str {
        self.ctx
            .tenant
            .as_deref()
            .unwrap_or(crate::auth::DEFAULT_TENANT)
    }

    /// Whether `rail` runs for this request: not switched off, and the tenant's chain has plugins.
    pub fn runs(&self, rail: Rail) -> bool {
        !self.options.disabled(rail)
            && self
                .set
                .chain_for(self.ctx.tenant.as_deref(), rail)
                .has(self.part(rail))
    }

    /// Run `rail`'s chain on `payload`, recording it.
    pub fn check(&mut self, rail: Rail, payload: Payload) -> Then<'_, Evaluation> {
        self.check_explained(rail, payload, false, false)
    }

    /// [`RequestScope::check`]; `partial`: the reply is a streamed text so far.
    pub fn check_with(
        &mut self,
        rail: Rail,
        payload: Payload,
        partial: bool,
    ) -> Then<'_, Evaluation> {
        self.check_explained(rail, payload, partial, false)
    }

    /// [`RequestScope::check_with`]; `explain`: keep the payload after each edit (the check
    /// APIs' `explain`). Done at once unless a plugin in the chain may wait.
    pub fn check_explained(
        &mut self,
        rail: Rail,
        mut payload: Payload,
        partial: bool,
        explain: bool,
    ) -> Then<'_, Evaluation> {
        let part = self.part(rail);
        if self.set.waits(rail, &self.ctx, part) {
            self.open_guard_scope();
            return Then::Right(Box::pin(async move {
                let joined = join::join(&mut payload);
                let set = self.set.clone();
                let eval = set
                    .check_part(rail, payload, &self.ctx, &self.caps, partial, explain, part)
                    .await;
                self.checked(eval, joined)
            }));
        }
        let joined = join::join(&mut payload);
        let eval = match self
            .set
            .check_part(rail, payload, &self.ctx, &self.caps, partial, explain, part)
        {
            Then::Left(ready) => ready.into_inner(),
            Then::Right(_) => unreachable!("a chain that does not wait runs at once"),
        };
        Then::Left(std::future::ready(self.checked(eval, joined)))
    }

    /// The request's guard scope (its budget), made when a plugin that may consult a guard
    /// model is first to run: requests no such plugin judges never need one.
    fn open_guard_scope(&mut self) {
        if self.caps.guard.is_none() {
            self.caps.guard = self.set.guard_scope(self.ctx.tenant.as_deref());
        }
    }

    /// A run's text parts split back as they came, and the run recorded.
    fn checked(&mut self, mut eval: Evaluation, joined: Option<join::Joined>) -> Evaluation {
        if let Some(joined) = joined {
            for (_, after) in &mut eval.explained {
                join::split(after, joined.clone());
            }
            join::split(&mut eval.payload, joined);
        }
        self.observe(&eval);
        eval
    }

    /// Plugins see the request as having come through `door` (the playground trying a door's
    /// policies; the record keeps the door it really came through).
    pub fn judge_as(&mut self, door: Door) {
        self.ctx.door = door.as_str().to_string();
    }

    fn observe(&mut self, eval: &Evaluation) {
        let tenant = self.tenant_name().to_string();
        self.observer.evaluation(eval, &tenant);
        self.record.add(eval);
        if let Some(trace) = &self.trace {
            trace.rail(eval);
        }
        self.rejections
            .extend(eval.rejections.iter().map(|r: &Rejected| {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                v["rail"] = json!(eval.rail);
                v
            }));
    }

    /// The inbound rails (`tool_result`, then `input`) on what the caller sent, then the `tools`
    /// rail on what the model will be offered.
    pub async fn inbound(&mut self, mut payload: Payload) -> Inbound {
        // The history's tool calls first: their provenance is what the rails below see, and the
        // backend gets the model's own ids back.
        let (mut edited, refusal) = self.check_provenance(&mut payload);
        // A restored call id is a change no codec can splice in.
        payload.changes.other |= edited;
        if let Some(refusal) = refusal {
            self.refuse(&refusal);
            return Inbound::Refuse(refusal);
        }
        // The tool_result rail judges tool results: a conversation without any has nothing for
        // it; the tools rail, tools.
        let has_tool_results = payload.messages.iter().any(|m| m.role == "tool");
        if !payload.tools.is_empty() && !self.options.disabled(Rail::Tools) {
            match self.pin_models(&mut payload.tools).await {
                Ok(hid) => {
                    // Hidden tools are left out of what goes upstream: not the caller's bytes.
                    payload.changes.other |= hid;
                    edited |= hid;
                }
                Err(e) => {
                    // Unpinned tools are never offered as pinned: the request is refused.
                    tracing::warn!(error = %e, "state store unavailable: a request's tools could not be checked against their pins");
                    let refusal = Refusal {
                        rail: Rail::Tools,
                        policy: pins::PINS.into(),
                        reason:
                            "the tools' pins could not be read (the state store did not answer)"
                                .into(),
                        fault: true,
                    };
                    self.refuse(&refusal);
                    return Inbound::Refuse(refusal);
                }
            }
        }
        for rail in [Rail::ToolResult, Rail::Input, Rail::Tools] {
            let nothing = match rail {
                Rail::ToolResult => !has_tool_results,
                Rail::Tools => payload.tools.is_empty(),
                _ => false,
            };
            if !self.runs(rail) || nothing {
                continue;
            }
            let mut eval = self.check(rail, payload).await;
            if let Some(refusal) = Refusal::from_eval(&eval) {
                return Inbound::Refuse(refusal);
            }
            edited |= eval.verdict != Verdict::Allow;
            payload = std::mem::take(&mut eval.payload);
        }
        Inbound::Forward { payload, edited }
    }

    /// The input rail's `parallel` plugins on `payload` (what goes to the backend, as the rails
    /// left it), to run beside the backend call; `None` when there are none for this request.
    /// The run owns what it needs, so the backend call can go on at the same time.
    pub fn beside(&mut self, payload: &Payload) -> Option<Beside> {
        let chain = self.set.chain_for(self.ctx.tenant.as_deref(), Rail::Input);
        let model = self.ctx.model.as_deref();
        if !self.calls_backend
            || self.options.disabled(Rail::Input)
            || chain.steps_for(Part::Beside, model).next().is_none()
        {
            return None;
        }
        self.open_guard_scope();
        let set = self.set.clone();
        let ctx = self.ctx.clone();
        let caps = self.caps.clone();
        let mut payload = payload.clone();
        Some(Box::pin(async move {
            // Text parts are judged joined; nothing of this run is ever applied, so they need
            // not be split back.
            join::join(&mut payload);
            set.check_part(
                Rail::Input,
                payload,
                &ctx,
                &caps,
                false,
                false,
                Part::Beside,
            )
            .await
        }))
    }

    /// Record the run of [`RequestScope::beside`]; the refusal when it refuses the request.
    /// A run beside the backend call cannot change what was sent: a plugin that would have
    /// changed it (modify, reject) refuses it instead. `backend`: what became of the call.
    pub fn settle_beside(&mut self, eval: Evaluation, backend: BackendCall) -> Option<Refusal> {
        self.observe(&eval);
        let refusal = refused_beside(&eval)?;
        if eval.blocked.is_none() {
            self.refuse(&refusal);
        }
        self.record.backend = Some(backend);
        Some(refusal)
    }

    /// Verify the signed ids of the calls in the history; whether an id was restored, and the
    /// refusal when `[provenance] require` is on and a call is not validly signed.
    fn check_provenance(&mut self, payload: &mut Payload) -> (bool, Option<Refusal>) {
        if !payload
            .messages
            .iter()
            .any(|m| !m.tool_calls.is_empty() || m.tool_call_id.is_some())
        {
            return (false, None);
        }
        let set = self.set.clone();
        let config = set.config();
        let tenants: Vec<&str> = std::iter::once(crate::auth::DEFAULT_TENANT)
            .chain(config.tenants.iter().map(|t| t.name.as_str()))
            .collect();
        let tenant = self.tenant_name().to_string();
        let (restored, unproven) = provenance::check_history(
            &config.provenance,
            &tenants,
            &tenant,
            payload,
            crate::util::unix_secs(),
        );
        self.record.provenance(payload);
        if !config.provenance.require || unproven.is_empty() {
            return (restored, None);
        }
        let shown: Vec<String> = unproven
            .iter()
            .take(5)
            .map(|u| {
                format!(
                    "message {} call {} (tool {}) is {}",
                    u.message,
                    u.call,
                    crate::policy::record::quoted(&u.tool),
                    u.provenance.as_str().replace('_', " ")
                )
            })
            .collect();
        let more = unproven.len().saturating_sub(shown.len());
        let mut reason = format!(
            "the history holds tool calls this daemon did not relay: {}",
            shown.join("; ")
        );
        if more > 0 {
            reason.push_str(&format!("; and {more} more"));
        }
        let refusal = Refusal {
            rail: Rail::ToolResult,
            policy: "provenance".into(),
            reason,
            fault: false,
        };
        (restored, Some(refusal))
    }

    /// The outbound rails for one reply message: `tool_call` on its calls, then `output` on its
    /// text, then `tool_call` again on calls the output rail found written in the text (a tool
    /// call written as text never bypasses the tool_call rail). `conversation` is what led to
    /// it; it is lent to the chains and given back as it was.
    pub async fn reply(
        &mut self,
        conversation: &mut Payload,
        mut message: Message,
    ) -> Result<Message, Refusal> {
        for call in &mut message.tool_calls {
            if let Some(one) = crate::codec::canonical_arguments(&call.arguments) {
                call.arguments = one;
                self.reply_edited = true;
            }
        }
        let mut judged_calls = 0;
        for rail in [Rail::ToolCall, Rail::Output, Rail::ToolCall] {
            let applies = match rail {
                Rail::ToolCall => message.tool_calls.len() > judged_calls,
                _ => message.has_text(),
            };
            if !applies || !self.runs(rail) {
                continue;
            }
            let (eval, judged) = self.judge(rail, conversation, message, false).await;
            if let Some(refusal) = Refusal::from_eval(&eval) {
                return Err(refusal);
            }
            self.reply_edited |= eval.verdict != Verdict::Allow;
            message = judged;
            if rail == Rail::ToolCall {
                judged_calls = message.tool_calls.len();
            }
        }
        // The calls leave with signed ids, so the next turn can show the daemon relayed them.
        let tenant = self.tenant_name().to_string();
        provenance::sign_reply(
            &self.set.config().provenance,
            &tenant,
            &mut message.tool_calls,
        );
        Ok(message)
    }

    /// Run `rail` on `conversation` + `message`; the conversation is restored (on the reply
    /// rails only the last message can change), the judged message returned. `partial`: the
    /// message is a streamed reply's text so far.
    pub fn judge<'a>(
        &'a mut self,
        rail: Rail,
        conversation: &'a mut Payload,
        message: Message,
        partial: bool,
    ) -> Then<'a, (Evaluation, Message)> {
        let mut payload = std::mem::take(conversation);
        payload.messages.push(message);
        crate::policy::chain::then(
            self.check_with(rail, payload, partial),
            move |mut eval: Evaluation| {
                let mut payload = std::mem::take(&mut eval.payload);
                let judged = payload
                    .messages
                    .pop()
                    .expect("the reply is the last message");
                *conversation = payload;
                (eval, judged)
            },
        )
    }

    /// Judge the leaves of `value` that `shape` does not call inert (`codec::closed`: strings,
    /// numbers that can hold a value, keys that are no names) on `rail`, as the text of
    /// `message`, which ends `before` (what it belongs to: the call a result answers), and write
    /// what the rail left back into `value`. Nothing runs when there is no such leaf or the rail
    /// does not run. A value that is not an object is judged as the member `value` of one.
    pub async fn judge_value(
        &mut self,
        rail: Rail,
        before: Vec<Message>,
        mut message: Message,
        value: &mut Value,
        shape: &crate::codec::closed::Shape,
    ) -> Result<(), Refusal> {
        use crate::codec::closed;
        if !self.runs(rail) {
            return Ok(());
        }
        let wrapped = !value.is_object();
        let fields = match std::mem::take(value) {
            Value::Object(fields) => fields,
            other => serde_json::Map::from_iter([("value".to_string(), other)]),
        };
        message.extra = fields;
        closed::fold(&mut message, shape, shape);
        if message.folded.is_some() {
            let mut conversation = Payload {
                messages: before,
                ..Payload::default()
            };
            let (eval, judged) = self.judge(rail, &mut conversation, message, false).await;
            if let Some(refusal) = Refusal::from_eval(&eval) {
                return Err(refusal);
            }
            message = judged;
            closed::unfold(&mut message);
        }
        let mut fields = std::mem::take(&mut message.extra);
        *value = match wrapped {
            true => fields.remove("value").unwrap_or(Value::Null),
            false => Value::Object(fields),
        };
        Ok(())
    }

    /// The rails removed every call of the reply, which had no text: the client reads only the
    /// refusal, so the request is recorded as refused.
    pub fn refuse_reply(&mut self) {
        self.reply_refused = true;
    }

    /// Whether the request is refused so far (a block, or a reply left as only the refusal).
    fn refused(&self) -> bool {
        self.record.blocked.is_some() || self.reply_refused
    }

    /// The outcome of a request answered now with a reply: refused or served.
    pub fn reply_outcome(&self) -> Outcome {
        if self.refused() {
            Outcome::Refused
        } else {
            Outcome::Served
        }
    }

    /// Whether a reply rail changed a reply message (its calls' signed ids aside).
    pub fn reply_edited(&self) -> bool {
        self.reply_edited
    }

    /// Whether any rail did more than allow, or a plugin faulted.
    pub fn acted(&self) -> bool {
        self.record.acted() || self.caps.approvals.as_ref().is_some_and(|l| !l.is_empty())
    }

    /// The `railyard` object of a response: the record so far, and what was rejected.
    pub fn railyard(&self) -> Value {
        // The record as it would end now (serialised, then patched: no copy of the record).
        let mut v = serde_json::to_value(&self.record).unwrap_or_default();
        v["status"] = json!(200);
        v["latency_us"] = json!(self.started.elapsed().as_micros() as u64);
        if self.refused() {
            v["outcome"] = json!(Outcome::Refused);
        }
        if !self.rejections.is_empty() {
            v["rejections"] = Value::Array(self.rejections.clone());
        }
        if let Some(asked) = self.approvals() {
            v["approvals"] = Value::Array(asked);
        }
        v
    }

    /// The approval requests the request's plugins made, found or spent, if any.
    pub fn approvals(&self) -> Option<Vec<Value>> {
        let ledger = self.caps.approvals.as_ref()?;
        (!ledger.is_empty()).then(|| ledger.asked())
    }

    /// [`RequestScope::railyard`] as JSON text, written straight from the record (no `Value`).
    pub fn railyard_text(&mut self) -> Vec<u8> {
        let approvals = self.approvals();
        self.shown(|record, rejections| {
            let mut out = Vec::with_capacity(512);
            record.write_json(&mut out);
            for (key, items) in [
                (&b",\"rejections\":"[..], rejections),
                (b",\"approvals\":", approvals.as_deref().unwrap_or_default()),
            ] {
                if !items.is_empty() && out.last() == Some(&b'}') {
                    out.pop();
                    out.extend_from_slice(key);
                    let _ = serde_json::to_writer(&mut out, items);
                    out.push(b'}');
                }
            }
            out
        })
    }

    /// `f` on the record as it would end now (answered, 200), and the rejections; the record is
    /// patched for the call and put back, not copied.
    fn shown<R>(&mut self, f: impl FnOnce(&DecisionRecord, &[Value]) -> R) -> R {
        let kept = (
            self.record.status,
            self.record.outcome,
            self.record.latency_us,
        );
        self.record.status = 200;
        self.record.latency_us = self.started.elapsed().as_micros() as u64;
        if self.refused() {
            self.record.outcome = Outcome::Refused;
        }
        let out = f(&self.record, &self.rejections);
        (
            self.record.status,
            self.record.outcome,
            self.record.latency_us,
        ) = kept;
        out
    }

    /// The record so far (for gRPC answers).
    pub fn record(&self) -> &DecisionRecord {
        &self.record
    }

    /// The request is answered with `status`: write its record (once; later calls do nothing).
    pub fn finish(&mut self, status: u16, outcome: Outcome) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.record.status = status;
        self.record.outcome = outcome;
        self.record.latency_us = self.started.elapsed().as_micros() as u64;
        if let Some(trace) = &mut self.trace {
            trace.end(&self.record);
        }
        if let Some(asked) = self.approvals() {
            self.observer.approvals(&asked, self.tenant_name());
        }
        self.observer.record(&self.record);
    }
}

impl Drop for RequestScope {
    /// Dropped unfinished: the client went away (499, as nginx counts it) before the answer was
    /// complete, or the request was cancelled.
    fn drop(&mut self) {
        self.finish(499, Outcome::Disconnected);
    }
}
