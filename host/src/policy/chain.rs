//! Running one rail's chain: plugins in config order, edits threaded from one plugin to the next,
//! faults contained and resolved fail-closed unless configured otherwise.
//!
//! Semantics, exactly:
//! - `allow`: nothing changes; the next plugin runs.
//! - `modify`: every edit is checked first (see `apply`); if all are valid they are applied
//!   together and the next plugin sees the edited payload. One invalid edit makes the whole
//!   verdict a fault and none of it is applied.
//! - `reject`: each target is replaced (a message's content becomes the rejection message; a tool
//!   call is removed from its message) and the chain goes on.
//! - `block`: the chain stops; the request is refused.
//! - fault (trap, deadline, memory cap, invalid verdict, ...): resolved by the plugin's
//!   `on_error`: `block` (the default) stops the chain like a block, `allow` skips the plugin.
//!
//! The overall verdict is the strongest seen: block > reject > modify > allow.
//!
//! A plugin in `shadow` mode runs like any other and its decision is recorded (edits are still
//! checked, on a copy), but nothing it says is applied: the payload, the verdict and the chain's
//! course are as if it had allowed. The first block it would have caused (its own, or its fault's
//! under `on_error = "block"`) is kept as [`Evaluation::would_block`].
//!
//! The chain depends on [`Evaluate`], not on wasmtime, so these semantics have native unit tests
//! with a fake plugin. The WIT request is built once per run and rebuilt only after an edit.

use super::apply::{apply, Applied};
use super::memo::{Memo, Question};
use crate::engine::{EvalRequest, FaultKind, Plugin, PluginFault, PluginVerdict, Prepared};
use crate::guard::GuardCall;
use crate::model::{Context, Payload, Rail};
pub use crate::model::{Decided, Mode, OnError, Verdict};
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a chain needs of a plugin.
pub trait Evaluate: Send + Sync {
    /// The plugin's id in the config.
    fn id(&self) -> &str;
    /// Judge one request (`prepared` caches its WIT form for the next plugins).
    fn evaluate(
        &self,
        request: &EvalRequest<'_>,
        prepared: &mut Prepared,
    ) -> Result<PluginVerdict, PluginFault>;
    /// Whether the plugin is to be called on `request` at all: `false` when it said what it
    /// acts on (its triggers) and `request` holds none of it, so its verdict is `allow`.
    fn concerns(&self, _request: &EvalRequest<'_>, _prepared: &mut Prepared) -> bool {
        true
    }
    /// [`Evaluate::evaluate`], noting in `guard` the guard-model calls the plugin tried (a
    /// plugin granted none is refused each, and the record says so).
    fn evaluate_noting(
        &self,
        request: &EvalRequest<'_>,
        prepared: &mut Prepared,
        _guard: &mut Vec<GuardCall>,
    ) -> Result<PluginVerdict, PluginFault> {
        self.evaluate(request, prepared)
    }
    /// Whether `evaluate` may wait (a plugin granted guard models): the chain then awaits
    /// [`Evaluate::evaluate_waiting`] instead, and its worker serves others meanwhile.
    fn waits(&self) -> bool {
        false
    }
    /// [`Evaluate::evaluate`] for a plugin that waits, with the guard-model calls it made.
    fn evaluate_waiting<'a>(
        &'a self,
        request: &'a EvalRequest<'_>,
        prepared: &'a mut Prepared,
    ) -> Waiting<'a> {
        Box::pin(std::future::ready((
            self.evaluate(request, prepared),
            Vec::new(),
        )))
    }
}

/// A plugin's evaluation that may wait, and the guard-model calls it made.
pub type Waiting<'a> =
    Pin<Box<dyn Future<Output = (Result<PluginVerdict, PluginFault>, Vec<GuardCall>)> + Send + 'a>>;

impl Evaluate for Plugin {
    fn id(&self) -> &str {
        Plugin::id(self)
    }
    fn evaluate(
        &self,
        request: &EvalRequest<'_>,
        prepared: &mut Prepared,
    ) -> Result<PluginVerdict, PluginFault> {
        Plugin::evaluate(self, request, prepared)
    }
    fn evaluate_noting(
        &self,
        request: &EvalRequest<'_>,
        prepared: &mut Prepared,
        guard: &mut Vec<GuardCall>,
    ) -> Result<PluginVerdict, PluginFault> {
        Plugin::evaluate_noting(self, request, prepared, guard)
    }
    fn concerns(&self, request: &EvalRequest<'_>, prepared: &mut Prepared) -> bool {
        Plugin::concerns(self, request, prepared)
    }
    fn waits(&self) -> bool {
        Plugin::waits(self)
    }
    fn evaluate_waiting<'a>(
        &'a self,
        request: &'a EvalRequest<'_>,
        prepared: &'a mut Prepared,
    ) -> Waiting<'a> {
        Box::pin(Plugin::evaluate_async(self, request, prepared))
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
    /// The plugin runs in shadow mode: this decision was recorded, not applied.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shadow: bool,
    /// The verdict was the one kept for the same question (`memo = true`): no call was made.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub memo: bool,
    /// The request held none of the plugin's triggers (its `prefilter`): no call was made, and
    /// the verdict is the `allow` the plugin gives such requests.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
    /// The guard models it consulted (contract 0.3), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guard: Vec<GuardCall>,
    /// Wall time of the call, including applying its edits (and waits on guard models).
    #[serde(serialize_with = "micros")]
    pub duration_us: Duration,
    /// When the call started, from the start of the chain run (for trace spans).
    #[serde(skip)]
    pub offset: Duration,
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
    /// The first block (or fault that would block) by a shadow plugin: what enforcing it would
    /// have done.
    pub would_block: Option<Blocked>,
    /// When the run started.
    pub started: Instant,
    /// Asked for (`explain`): the payload after each decision that edited it, by the decision's
    /// index (a shadow plugin's: what it would have been), for the playground's diffs.
    pub explained: Vec<(usize, Payload)>,
}

impl Evaluation {
    /// The machine-readable form, shared by `railyard check --json` and the check APIs.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "rail": self.rail,
            "verdict": self.verdict,
            "blocked": self.blocked,
            "would_block": self.would_block,
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
    /// The models it runs for (globs); empty: every request.
    pub models: Arc<[String]>,
    /// Enforced or shadow.
    pub mode: Mode,
    /// On the reply rails, whether the plugin is given the conversation before the reply
    /// (`history = false` in its entry: the reply alone).
    pub history: bool,
    /// Off the tools rail, whether the plugin is given the declared tools (`declared_tools =
    /// false` in its entry: an empty list).
    pub declared_tools: bool,
    /// On the tools rail, its kept verdicts (`memo = true` in its entry); shared by every chain
    /// the plugin is in.
    pub memo: Option<Arc<Memo>>,
    /// On the input rail of a model door, it runs beside the backend call (`parallel = true`).
    pub parallel: bool,
}

/// Which of a chain's steps a run takes: on the input rail of a model door, the steps that run
/// beside the backend call are taken apart from the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Every step, in order (where there is no backend call to run beside).
    All,
    /// The steps that run before the backend is called.
    Before,
    /// The steps that run beside the backend call (`parallel = true`).
    Beside,
}

impl Part {
    /// Whether a run of this part takes `step`.
    pub fn takes(self, step: &Step) -> bool {
        match self {
            Part::All => true,
            Part::Before => !step.parallel,
            Part::Beside => step.parallel,
        }
    }
}

impl Step {
    /// Whether the step runs for a request naming `model` (a request without a model runs
    /// only the steps that are not limited to some models).
    pub fn runs_for(&self, model: Option<&str>) -> bool {
        self.models.is_empty()
            || model.is_some_and(|m| self.models.iter().any(|g| crate::util::glob_match(g, m)))
    }
}

/// The plugins of one rail, in order.
#[derive(Clone)]
pub struct Chain {
    rail: Rail,
    steps: Vec<Step>,
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

    /// Whether any step that runs for `model` is given the declared tools.
    pub fn reads_declared_tools(&self, model: Option<&str>) -> bool {
        self.steps
            .iter()
            .any(|s| (self.rail == Rail::Tools || s.declared_tools) && s.runs_for(model))
    }

    /// Run the chain over `payload` (`partial`: a streamed reply's text so far). Steps limited
    /// to other models than the request's are skipped without a call.
    pub fn run<'a>(&'a self, payload: Payload, ctx: &'a Context, partial: bool) -> Running<'a> {
        self.run_explained(payload, ctx, partial, false)
    }

    /// [`Chain::run`], keeping the payload after each edit when `explain` is set.
    ///
    /// A chain none of whose steps for the request's model waits (no plugin granted guard
    /// models) runs here and now, and the future it returns is ready: the run's state (the
    /// payload, its WIT forms) then never lives in a future that every caller up to the door
    /// would move. A chain that may wait runs boxed.
    pub fn run_explained<'a>(
        &'a self,
        payload: Payload,
        ctx: &'a Context,
        partial: bool,
        explain: bool,
    ) -> Running<'a> {
        self.run_part(
            payload,
            ctx,
            &crate::caps::NONE,
            partial,
            explain,
            Part::All,
        )
    }

    /// [`Chain::run_explained`] over the steps `part` takes, with the request's capability
    /// state `caps`.
    pub fn run_part<'a>(
        &'a self,
        payload: Payload,
        ctx: &'a Context,
        caps: &'a crate::caps::RequestCaps,
        partial: bool,
        explain: bool,
        part: Part,
    ) -> Running<'a> {
        let model = ctx.model.as_deref();
        let turns = self.steps_for(part, model).map(|s| Turn {
            plugin: &*s.plugin,
            on_error: s.on_error,
            mode: s.mode,
            history: s.history,
            declared_tools: s.declared_tools,
            memo: s.memo.as_deref(),
        });
        if self.waits(model, part) {
            return Then::Right(Box::pin(run_explained(
                self.rail, turns, payload, ctx, caps, partial, explain,
            )));
        }
        let run = std::pin::pin!(run_explained(
            self.rail, turns, payload, ctx, caps, partial, explain
        ));
        let done = futures_util::FutureExt::now_or_never(run)
            .expect("a chain of plugins that never wait finishes at once");
        Then::Left(std::future::ready(done))
    }

    /// The steps of `part` that run for `model`, in order.
    pub fn steps_for<'a>(
        &'a self,
        part: Part,
        model: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Step> + Send + 'a {
        self.steps
            .iter()
            .filter(move |s| part.takes(s) && s.runs_for(model))
    }

    /// Whether a step of `part` that runs for `model` may wait (a plugin granted guard models).
    pub fn waits(&self, model: Option<&str>, part: Part) -> bool {
        self.steps_for(part, model).any(|s| s.plugin.waits())
    }

    /// Whether `part` takes any step of the chain.
    pub fn has(&self, part: Part) -> bool {
        self.steps.iter().any(|s| part.takes(s))
    }
}

/// Work on the rails that is done at once (ready) unless a plugin in it may wait (boxed): what
/// runs at once keeps its state out of the futures that every caller up to the door moves.
pub type Then<'a, T> = futures_util::future::Either<
    std::future::Ready<T>,
    Pin<Box<dyn Future<Output = T> + Send + 'a>>,
>;

/// A chain's run.
pub type Running<'a> = Then<'a, Evaluation>;

/// `then` applied to what `work` gives: at once when it is ready, else after it.
pub fn then<'a, T: Send + 'a, U: 'a>(
    work: Then<'a, T>,
    then: impl FnOnce(T) -> U + Send + 'a,
) -> Then<'a, U> {
    match work {
        Then::Left(ready) => Then::Left(std::future::ready(then(ready.into_inner()))),
        Then::Right(waiting) => Then::Right(Box::pin(async move { then(waiting.await) })),
    }
}

/// One plugin's turn in a run, and how it takes it.
pub struct Turn<'a, E> {
    /// The plugin.
    pub plugin: &'a E,
    /// Fault resolution.
    pub on_error: OnError,
    /// Enforced or shadow.
    pub mode: Mode,
    /// On the reply rails, whether the plugin is given the conversation before the reply (else
    /// the reply alone, whose indices its verdict then uses).
    pub history: bool,
    /// Off the tools rail, whether the plugin is given the declared tools (else an empty list).
    pub declared_tools: bool,
    /// On the tools rail, where its verdicts are kept for the same question.
    pub memo: Option<&'a Memo>,
}

/// Run `steps` in order over `payload` on `rail`: the chain's semantics, whatever evaluates.
/// Nothing in it waits but a plugin that [waits](Evaluate::waits).
pub async fn run<'a, E: Evaluate + 'a>(
    rail: Rail,
    steps: impl Iterator<Item = Turn<'a, E>> + Send,
    payload: Payload,
    ctx: &Context,
    partial: bool,
) -> Evaluation {
    run_explained(
        rail,
        steps,
        payload,
        ctx,
        &crate::caps::NONE,
        partial,
        false,
    )
    .await
}

/// [`run`] with the request's capability state `caps`; `explain`: keep the payload after each
/// edit ([`Evaluation::explained`]).
pub async fn run_explained<'a, E: Evaluate + 'a>(
    rail: Rail,
    steps: impl Iterator<Item = Turn<'a, E>> + Send,
    mut payload: Payload,
    ctx: &Context,
    caps: &crate::caps::RequestCaps,
    partial: bool,
    explain: bool,
) -> Evaluation {
    let mut eval = Evaluation {
        rail,
        verdict: Verdict::Allow,
        payload: Payload::default(),
        decisions: Vec::with_capacity(steps.size_hint().0),
        rejections: Vec::new(),
        blocked: None,
        would_block: None,
        started: Instant::now(),
        explained: Vec::new(),
    };
    // The plugins' WIT request is rebuilt only after an edit: one for each view a plugin may be
    // given (the whole conversation or the reply alone, with or without the declared tools).
    let mut prepared: [Prepared; 4] = Default::default();
    // The tools rail's question for the plugins with a memo, likewise made once and made again
    // only after an edit (`None` inside: too long to keep).
    let mut asked: Option<Option<Question>> = None;
    for turn in steps {
        let Turn {
            plugin,
            on_error,
            mode,
            history,
            declared_tools,
            memo,
        } = turn;
        let started = Instant::now();
        let id = plugin.id().to_string();
        let from = match payload.messages.len() {
            n if rail.judges_reply_only() && !history && n > 1 => n - 1,
            _ => 0,
        };
        // Tool edits are the tools rail's alone, so a plugin given no tools elsewhere cannot
        // point at one it was not shown.
        let tools = match rail == Rail::Tools || declared_tools {
            true => &payload.tools[..],
            false => &[],
        };
        let view = usize::from(from > 0) | usize::from(tools.is_empty()) << 1;
        // A memo holds verdicts on the tools rail alone, where the question repeats turn after
        // turn; a question too long to keep is asked every time.
        let memo = match memo.filter(|_| rail == Rail::Tools) {
            Some(m) => asked
                .get_or_insert_with(|| Question::of(&payload.tools, &payload.fields, ctx))
                .as_ref()
                .map(|q| (m, q)),
            None => None,
        };
        let kept = memo.and_then(|(m, q)| m.answer(q));
        let memoised = kept.is_some();
        let request = EvalRequest {
            rail,
            messages: &payload.messages[from..],
            tools,
            fields: &payload.fields,
            ctx,
            caps,
            partial,
        };
        let skipped = !memoised && !plugin.concerns(&request, &mut prepared[view]);
        let mut guard = Vec::new();
        let answer = match kept {
            Some(verdict) => Ok(verdict),
            None if skipped => Ok(PluginVerdict::Allow),
            None => match plugin.waits() {
                false => plugin.evaluate_noting(&request, &mut prepared[view], &mut guard),
                true => {
                    let (answer, calls) =
                        plugin.evaluate_waiting(&request, &mut prepared[view]).await;
                    guard = calls;
                    answer
                }
            }
            .and_then(|verdict| match from {
                0 => Ok(verdict),
                _ => super::apply::from_view(verdict, from as u32, payload.messages.len() - from),
            }),
        };
        if let (Some((m, q)), Ok(verdict), false, false) = (memo, &answer, memoised, skipped) {
            m.keep(q, verdict);
        }
        // A shadow plugin's edits are checked on a copy: recorded as they would be, not applied.
        let mut copy = None;
        let outcome = answer.and_then(|verdict| match (mode, verdict) {
            (Mode::Shadow, PluginVerdict::Allow) => Ok(Applied::Allow),
            (Mode::Shadow, verdict) => apply(copy.insert(payload.clone()), rail, &id, verdict),
            (Mode::Enforce, verdict) => apply(&mut payload, rail, &id, verdict),
        });
        if explain && matches!(outcome, Ok(Applied::Modify(_) | Applied::Reject(_))) {
            let after = copy.take().unwrap_or_else(|| payload.clone());
            eval.explained.push((eval.decisions.len(), after));
        }
        let mut decision = Decision {
            plugin: id,
            verdict: Decided::Allow,
            reason: None,
            fault: None,
            on_error: None,
            shadow: mode == Mode::Shadow,
            memo: memoised,
            skipped,
            guard,
            duration_us: started.elapsed(),
            offset: started.duration_since(eval.started),
        };
        let (verdict, rejections, block) = decide(&mut decision, outcome, on_error);
        eval.decisions.push(decision);
        if mode == Mode::Shadow {
            if eval.would_block.is_none() {
                eval.would_block = block;
            }
            continue;
        }
        if matches!(verdict, Verdict::Modify | Verdict::Reject) {
            prepared = Default::default();
            asked = None;
        }
        eval.rejections.extend(rejections);
        eval.verdict = eval.verdict.max(verdict);
        if block.is_some() {
            eval.blocked = block;
            break;
        }
    }
    eval.payload = payload;
    eval
}

/// What a plugin's outcome means: its decision's verdict and reason (filled in), the verdict it
/// gives the chain, the items it rejected, and the block it causes (a fault's, when `on_error`
/// says block; a fault resolved by `allow` gives the chain nothing). The plugin's name is copied
/// for a block alone.
fn decide(
    decision: &mut Decision,
    outcome: Result<Applied, PluginFault>,
    on_error: OnError,
) -> (Verdict, Vec<Rejected>, Option<Blocked>) {
    match outcome {
        Ok(Applied::Allow) => (Verdict::Allow, Vec::new(), None),
        Ok(Applied::Modify(reason)) => {
            decision.verdict = Decided::Modify;
            decision.reason = Some(reason);
            (Verdict::Modify, Vec::new(), None)
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
            (Verdict::Reject, items, None)
        }
        Ok(Applied::Block(reason)) => {
            decision.verdict = Decided::Block;
            decision.reason = Some(reason.clone());
            let block = Blocked {
                plugin: decision.plugin.clone(),
                reason,
                fault: false,
            };
            (Verdict::Block, Vec::new(), Some(block))
        }
        Err(fault) => {
            decision.verdict = Decided::Fault;
            decision.reason = Some(fault.to_string());
            decision.fault = Some(fault.kind);
            decision.on_error = Some(on_error);
            if on_error == OnError::Allow {
                return (Verdict::Allow, Vec::new(), None);
            }
            let block = Blocked {
                reason: format!("policy '{}' failed ({})", decision.plugin, fault.kind),
                plugin: decision.plugin.clone(),
                fault: true,
            };
            (Verdict::Block, Vec::new(), Some(block))
        }
    }
}

#[cfg(test)]
mod tests;
