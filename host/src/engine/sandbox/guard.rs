//! The guard-models capability as a plugin instance reaches it (contract 0.3): refused outright
//! for a plugin run synchronously (it is granted nothing), asked through the plugin's grant for
//! one granted guard models, whose calls wait without blocking the worker. Each call is recorded
//! for the plugin's decision; the time waited is given back to the plugin's CPU deadline.

use super::HostState;
use crate::engine::bindings::{guard as g, guard_async as ga};
use crate::engine::ticker::Ticker;
use crate::guard::{self as domain, GuardCall, GuardError, Question};
use std::sync::Arc;

/// What one instance may consult, and what it consulted in the running call.
#[derive(Default)]
pub(crate) struct GuardAccess {
    pub(crate) grant: domain::Grant,
    /// The ticker of the engine the instance runs on, to move its deadline past a wait.
    ticker: Option<Arc<Ticker>>,
    /// The running call's entry in the ticker.
    pub(crate) entry: u64,
    /// Whether guard models may be consulted now (in `evaluate`, not in `describe`,
    /// `configure` or `prefilter`, which must answer at once).
    pub(crate) open: bool,
    /// The calls made in the running call.
    pub(crate) calls: Vec<GuardCall>,
    /// The running call's request's guard scope (budget, recorded answers).
    pub(crate) scope: Option<Arc<crate::util::GuardScope>>,
    /// The running call's request's tenant (whose state the plugin reaches).
    pub(crate) tenant: String,
    /// What the running call may ask approvals about (a plugin granted them).
    pub(crate) asking: Option<super::Asking>,
}

impl GuardAccess {
    pub(crate) fn new(grant: domain::Grant, ticker: Arc<Ticker>) -> Self {
        GuardAccess {
            grant,
            ticker: Some(ticker),
            ..Default::default()
        }
    }
}

/// At most this many guard calls are recorded per plugin call; more are counted in the last.
const RECORDED_CALLS: usize = 32;

impl HostState {
    fn record(&mut self, call: GuardCall) {
        let calls = &mut self.guard.calls;
        if calls.len() < RECORDED_CALLS {
            calls.push(call);
        }
    }

    /// Run `wait` (a call on a capability), giving the time waited back to the call's deadline.
    pub(super) async fn waiting<T>(&mut self, wait: impl std::future::Future<Output = T>) -> T {
        let ticker = self.guard.ticker.clone();
        let began = ticker.as_ref().map(|t| t.now());
        let answer = wait.await;
        if let (Some(ticker), Some(began)) = (ticker, began) {
            let waited = ticker.now().saturating_sub(began);
            self.due = self.due.saturating_add(waited);
            ticker.postpone(self.guard.entry, self.due);
        }
        answer
    }

    /// Ask `model` `question` through the plugin's grant, waiting without holding the worker, and
    /// give the time waited back to the call's deadline.
    async fn ask(
        &mut self,
        model: String,
        question: Question,
    ) -> Result<domain::Answer, GuardError> {
        if !self.guard.open {
            let error = GuardError::Denied(
                "guard models may be consulted in evaluate only, not in describe, configure or prefilter".into(),
            );
            self.record(domain::refused(&model, &question, &error));
            return Err(error);
        }
        let grant = self.guard.grant.clone();
        let scope = self.guard.scope.clone();
        let (answer, call) = self
            .waiting(grant.ask(&model, &question, scope.as_deref()))
            .await;
        self.record(call);
        answer
    }

    /// A question refused at once, in a plugin that is granted no guard model.
    fn refuse(&mut self, model: &str, question: Question) -> GuardError {
        let error = domain::denied(model);
        self.record(domain::refused(model, &question, &error));
        error
    }
}

fn sync_error(e: GuardError) -> g::GuardError {
    match e {
        GuardError::Denied(m) => g::GuardError::Denied(m),
        GuardError::Timeout => g::GuardError::Timeout,
        GuardError::BudgetExhausted => g::GuardError::BudgetExhausted,
        GuardError::RateLimited => g::GuardError::RateLimited,
        GuardError::Unavailable(m) => g::GuardError::Unavailable(m),
        GuardError::InvalidOutput(m) => g::GuardError::InvalidOutput(m),
    }
}

fn turns<T>(conversation: Vec<T>, f: impl Fn(T) -> (String, String)) -> Vec<domain::Turn> {
    conversation
        .into_iter()
        .map(|t| {
            let (role, content) = f(t);
            domain::Turn { role, content }
        })
        .collect()
}

impl g::Host for HostState {
    fn moderate(
        &mut self,
        model: String,
        texts: Vec<String>,
    ) -> Result<Vec<g::Moderation>, g::GuardError> {
        Err(sync_error(self.refuse(&model, Question::Moderate(texts))))
    }
    fn guard(
        &mut self,
        model: String,
        role: g::Role,
        conversation: Vec<g::Turn>,
    ) -> Result<g::Guarded, g::GuardError> {
        let role = match role {
            g::Role::User => domain::Role::User,
            g::Role::Assistant => domain::Role::Assistant,
        };
        let q = Question::Guard(role, turns(conversation, |t| (t.role, t.content)));
        Err(sync_error(self.refuse(&model, q)))
    }
    fn classify(
        &mut self,
        model: String,
        texts: Vec<String>,
    ) -> Result<Vec<Vec<g::Label>>, g::GuardError> {
        Err(sync_error(self.refuse(&model, Question::Classify(texts))))
    }
    fn entities(
        &mut self,
        model: String,
        text: String,
        language: Option<String>,
    ) -> Result<Vec<g::Entity>, g::GuardError> {
        Err(sync_error(
            self.refuse(&model, Question::Entities(text, language)),
        ))
    }
    fn judge(
        &mut self,
        model: String,
        instructions: String,
        input: String,
        schema: String,
    ) -> Result<String, g::GuardError> {
        Err(sync_error(self.refuse(
            &model,
            Question::Judge(instructions, input, schema),
        )))
    }
}

fn async_error(e: GuardError) -> ga::GuardError {
    match e {
        GuardError::Denied(m) => ga::GuardError::Denied(m),
        GuardError::Timeout => ga::GuardError::Timeout,
        GuardError::BudgetExhausted => ga::GuardError::BudgetExhausted,
        GuardError::RateLimited => ga::GuardError::RateLimited,
        GuardError::Unavailable(m) => ga::GuardError::Unavailable(m),
        GuardError::InvalidOutput(m) => ga::GuardError::InvalidOutput(m),
    }
}

fn category(c: domain::Category) -> ga::Category {
    ga::Category {
        name: c.name,
        flagged: c.flagged,
        score: c.score,
    }
}

/// The answer of the wrong shape for the question: cannot happen (the kind fixes both), and is
/// reported as invalid output rather than trusted.
fn mismatched() -> ga::GuardError {
    ga::GuardError::InvalidOutput("the answer does not fit the question".into())
}

impl ga::Host for HostState {
    async fn moderate(
        &mut self,
        model: String,
        texts: Vec<String>,
    ) -> Result<Vec<ga::Moderation>, ga::GuardError> {
        match self
            .ask(model, Question::Moderate(texts))
            .await
            .map_err(async_error)?
        {
            domain::Answer::Moderated(all) => Ok(all
                .into_iter()
                .map(|m| ga::Moderation {
                    flagged: m.flagged,
                    categories: m.categories.into_iter().map(category).collect(),
                })
                .collect()),
            _ => Err(mismatched()),
        }
    }
    async fn guard(
        &mut self,
        model: String,
        role: ga::Role,
        conversation: Vec<ga::Turn>,
    ) -> Result<ga::Guarded, ga::GuardError> {
        let role = match role {
            ga::Role::User => domain::Role::User,
            ga::Role::Assistant => domain::Role::Assistant,
        };
        let q = Question::Guard(role, turns(conversation, |t| (t.role, t.content)));
        match self.ask(model, q).await.map_err(async_error)? {
            domain::Answer::Guarded(g) => Ok(ga::Guarded {
                safe: g.safe,
                categories: g.categories.into_iter().map(category).collect(),
                score: g.score,
            }),
            _ => Err(mismatched()),
        }
    }
    async fn classify(
        &mut self,
        model: String,
        texts: Vec<String>,
    ) -> Result<Vec<Vec<ga::Label>>, ga::GuardError> {
        match self
            .ask(model, Question::Classify(texts))
            .await
            .map_err(async_error)?
        {
            domain::Answer::Classified(all) => Ok(all
                .into_iter()
                .map(|labels| {
                    labels
                        .into_iter()
                        .map(|l| ga::Label {
                            label: l.label,
                            score: l.score,
                        })
                        .collect()
                })
                .collect()),
            _ => Err(mismatched()),
        }
    }
    async fn entities(
        &mut self,
        model: String,
        text: String,
        language: Option<String>,
    ) -> Result<Vec<ga::Entity>, ga::GuardError> {
        match self
            .ask(model, Question::Entities(text, language))
            .await
            .map_err(async_error)?
        {
            domain::Answer::Entities(all) => Ok(all
                .into_iter()
                .map(|e| ga::Entity {
                    entity_type: e.entity_type,
                    start: e.start,
                    end: e.end,
                    score: e.score,
                })
                .collect()),
            _ => Err(mismatched()),
        }
    }
    async fn judge(
        &mut self,
        model: String,
        instructions: String,
        input: String,
        schema: String,
    ) -> Result<String, ga::GuardError> {
        match self
            .ask(model, Question::Judge(instructions, input, schema))
            .await
            .map_err(async_error)?
        {
            domain::Answer::Judged(json) => Ok(json),
            _ => Err(mismatched()),
        }
    }
}
