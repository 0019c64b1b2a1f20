//! The guard-models capability (contract 0.3's `guard-models`): the configured models a plugin
//! entry names in `guard_models`, each call within what the request's [`Scope`] has left and its
//! tenant's minute. Refused outright for a plugin run synchronously (it is granted nothing);
//! asked, for one granted models, without blocking the worker. Each call is recorded for the
//! plugin's decision; the time waited is given back to the plugin's CPU deadline.

use super::{Call, HasCaps, Project, View};
use crate::contract::{guard as g, guard_async as ga};
use crate::guard::{self as domain, GuardCall, GuardError, GuardModel, GuardModels, Question};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::Linker;

/// The guard models one plugin entry may consult.
#[derive(Clone, Default)]
pub struct Grant {
    models: Vec<Arc<GuardModel>>,
}

impl Grant {
    /// The grant of an entry naming `names` (config has checked that each is configured).
    pub fn of(models: &GuardModels, names: &[String]) -> Grant {
        Grant {
            models: names
                .iter()
                .filter_map(|n| models.get(n).cloned())
                .collect(),
        }
    }

    /// Whether it grants no model.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// Ask model `name` `question`, if granted, within what the request's `scope` has left (or
    /// from its recorded answers, in `railyard test`).
    pub async fn ask(
        &self,
        name: &str,
        question: &Question,
        scope: Option<&Scope>,
    ) -> (Result<domain::Answer, GuardError>, GuardCall) {
        let Some(model) = self.models.iter().find(|m| m.config().name == name) else {
            let error = domain::denied(name);
            let call = domain::refused(name, question, &error);
            return (Err(error), call);
        };
        if let Some(recorded) = scope.and_then(|s| s.recorded.as_ref()) {
            return model.replay(question, recorded);
        }
        let left = scope.map(|b| b.wait_left());
        if scope.is_some_and(|b| !b.take_call()) || left.is_some_and(|l| l.is_zero()) {
            let error = GuardError::BudgetExhausted;
            let call = domain::refused(name, question, &error);
            return (Err(error), call);
        }
        // The tenant's minute, after the request's own budget: a request over its own budget
        // takes nothing from its tenant.
        let tenant = scope.and_then(|b| b.tenant.as_ref());
        // The most this call may wait is taken from the tenant's minute before it starts, and
        // settled to what it waited after.
        let timeout = model.config().timeout;
        let reserve = left.map_or(timeout, |l| l.min(timeout));
        if let Some(t) = tenant {
            if !t.take_call(reserve).await {
                let error = GuardError::RateLimited;
                let call = domain::refused(name, question, &error);
                return (Err(error), call);
            }
        }
        let (answer, call) = model.ask(question, left).await;
        if let Some(b) = scope {
            b.spend(call.duration_us);
        }
        if let Some(t) = tenant {
            t.spend(call.duration_us, reserve).await;
        }
        (answer, call)
    }
}

/// One request's dealings with guard models, shared by every plugin that judges it: what it may
/// still spend (calls, and time waited: `[guard]`), and, in `railyard test`, the answers each
/// model gives instead of being asked.
#[derive(Debug)]
pub struct Scope {
    calls: AtomicU32,
    wait_us: AtomicU64,
    /// Recorded answers by model name (a case's `guard`): when set, no model is asked.
    pub recorded: Option<Vec<(String, serde_json::Value)>>,
    /// What the request's tenant may still spend this minute, when it is limited.
    pub tenant: Option<TenantSpend>,
}

impl Scope {
    /// A budget of `calls` calls and `wait` of waiting.
    pub fn new(calls: u32, wait: Duration) -> Scope {
        Scope {
            calls: calls.into(),
            wait_us: (wait.as_micros() as u64).into(),
            recorded: None,
            tenant: None,
        }
    }

    /// Take one call, if one is left.
    pub fn take_call(&self) -> bool {
        self.calls
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| c.checked_sub(1))
            .is_ok()
    }

    /// The waiting left.
    pub fn wait_left(&self) -> Duration {
        Duration::from_micros(self.wait_us.load(Ordering::Relaxed))
    }

    /// Count `waited` against it.
    pub fn spend(&self, waited: Duration) {
        let us = waited.as_micros() as u64;
        let _ = self
            .wait_us
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                Some(w.saturating_sub(us))
            });
    }
}

/// One request's part of its tenant's minute: the tenant, its limits, and the store every
/// replica counts it in.
pub struct TenantSpend {
    store: Arc<crate::state::Store>,
    tenant: String,
    calls: Option<u32>,
    wait: Option<Duration>,
}

impl std::fmt::Debug for TenantSpend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantSpend")
            .field("tenant", &self.tenant)
            .field("calls", &self.calls)
            .field("wait", &self.wait)
            .finish()
    }
}

impl TenantSpend {
    /// `tenant`'s spending, counted in `store`, limited to `calls` calls and `wait` waited per
    /// minute (`None`: no limit).
    pub fn new(
        store: Arc<crate::state::Store>,
        tenant: &str,
        calls: Option<u32>,
        wait: Option<Duration>,
    ) -> TenantSpend {
        TenantSpend {
            store,
            tenant: tenant.to_string(),
            calls,
            wait,
        }
    }

    /// Take one call of the tenant's minute and `reserve` of its time waited, if neither is
    /// spent.
    pub async fn take_call(&self, reserve: Duration) -> bool {
        self.store
            .take_guard_call(&self.tenant, self.calls, self.wait, reserve)
            .await
    }

    /// Settle the tenant's minute to `waited`, of which `reserve` was taken.
    pub async fn spend(&self, waited: Duration, reserve: Duration) {
        if let Some(wait) = self.wait {
            self.store
                .settle_guard_wait(&self.tenant, wait, waited, reserve)
                .await;
        }
    }
}

/// One instance's guard models, and what it consulted in the running call.
#[derive(Default)]
pub struct Instance {
    grant: Grant,
    /// The running call's request's scope.
    pub(super) scope: Option<Arc<Scope>>,
    /// The calls made in the running call.
    pub(super) calls: Vec<GuardCall>,
}

impl Instance {
    /// An instance's part for `grant`.
    pub fn new(grant: Grant) -> Instance {
        Instance {
            grant,
            ..Instance::default()
        }
    }
}

/// At most this many guard calls are recorded per plugin call; more are counted in the last.
const RECORDED_CALLS: usize = 32;

fn part(caps: &mut super::Caps) -> (&mut Instance, &mut Call) {
    (&mut caps.guard, &mut caps.call)
}

/// Add `guard-models` to `sync` (refused) and `waiting` (asked).
pub(super) fn link<T: HasCaps>(
    sync: &mut Linker<T>,
    waiting: &mut Linker<T>,
) -> wasmtime::Result<()> {
    g::add_to_linker::<T, Project<Instance>>(sync, |t| super::view(t, part))?;
    ga::add_to_linker::<T, Project<Instance>>(waiting, |t| super::view(t, part))
}

impl View<'_, Instance> {
    fn record(&mut self, call: GuardCall) {
        if self.cap.calls.len() < RECORDED_CALLS {
            self.cap.calls.push(call);
        }
    }

    /// Ask `model` `question` through the plugin's grant, waiting without holding the worker, and
    /// give the time waited back to the call's deadline.
    async fn ask(
        &mut self,
        model: String,
        question: Question,
    ) -> Result<domain::Answer, GuardError> {
        if !self.call.open() {
            let error = GuardError::Denied(
                "guard models may be consulted in evaluate only, not in describe, configure or prefilter".into(),
            );
            self.record(domain::refused(&model, &question, &error));
            return Err(error);
        }
        let grant = self.cap.grant.clone();
        let scope = self.cap.scope.clone();
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

impl g::Host for View<'_, Instance> {
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

impl ga::Host for View<'_, Instance> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::testing::{ctx, Host};
    use crate::caps::{Asked, Grants, RequestCaps};
    use crate::config::{GuardKind, GuardModelConfig};
    use crate::model::Rail;
    use serde_json::json;

    /// A moderation model at `url`, granted.
    fn granted(url: &str) -> Grants {
        let config = GuardModelConfig {
            name: "mod".into(),
            kind: GuardKind::OpenaiModeration,
            url: url.parse().unwrap(),
            model: None,
            api_key: None,
            timeout: Duration::from_secs(2),
            max_concurrent: 4,
            cache_entries: 0,
            max_input_chars: 1000,
        };
        let services = crate::services::Services::in_memory();
        let models = GuardModels::new(&[config], None, &services).unwrap();
        Grants {
            guard: Grant::of(&models, &["mod".into()]),
            ..Grants::default()
        }
    }

    fn open(host: &mut Host, caps: &RequestCaps) {
        host.caps.open(&Asked {
            ctx: &ctx("acme"),
            caps,
            rail: Rail::Input,
            messages: &[],
        });
    }

    async fn moderate(host: &mut Host) -> Result<Vec<ga::Moderation>, ga::GuardError> {
        ga::Host::moderate(&mut host.view(part), "mod".into(), vec!["hi".into()]).await
    }

    #[tokio::test]
    async fn a_refused_question_is_recorded_for_the_decision() {
        // Granted nothing: refused at once on the synchronous path, and recorded.
        let (mut bare, _) = Host::new(&Grants::default());
        let r = g::Host::moderate(&mut bare.view(part), "mod".into(), vec!["hi".into()]);
        assert!(matches!(r, Err(g::GuardError::Denied(m)) if m.contains("not granted")));
        let calls = bare.caps.take_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].error, Some("denied"));
        // Granted, but outside evaluate: refused and recorded too.
        let (mut host, _) = Host::new(&granted("http://127.0.0.1:1/v1"));
        let e = moderate(&mut host).await.unwrap_err();
        assert!(matches!(e, ga::GuardError::Denied(m) if m.contains("evaluate only")));
        assert_eq!(host.caps.take_calls().len(), 1);
        // A model it is not granted, asked in evaluate.
        open(&mut host, &RequestCaps::default());
        let e = ga::Host::moderate(&mut host.view(part), "other".into(), vec![]).await;
        assert!(matches!(e, Err(ga::GuardError::Denied(m)) if m.contains("'other'")));
        assert_eq!(host.caps.close().len(), 1);
    }

    #[tokio::test]
    async fn a_request_past_its_budget_asks_nothing() {
        let (mut host, ticks) = Host::new(&granted("http://127.0.0.1:1/v1"));
        let scope = Arc::new(Scope::new(1, Duration::from_secs(5)));
        let caps = RequestCaps {
            guard: Some(scope.clone()),
            ..RequestCaps::default()
        };
        open(&mut host, &caps);
        // The first call is made (and fails: nothing listens there), and its wait is given back
        // to the call's deadline.
        let first = moderate(&mut host).await.unwrap_err();
        assert!(matches!(first, ga::GuardError::Unavailable(_)), "{first:?}");
        assert!(host.due > 100);
        assert!(!ticks.postponed.lock().unwrap().is_empty());
        // The second is past the request's one call.
        let second = moderate(&mut host).await.unwrap_err();
        assert!(matches!(second, ga::GuardError::BudgetExhausted));
        let calls = host.caps.close();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].error, Some("budget_exhausted"));
        assert!(!scope.take_call());
    }

    #[tokio::test]
    async fn recorded_answers_are_given_without_asking() {
        let (mut host, _) = Host::new(&granted("http://127.0.0.1:1/v1"));
        let mut scope = Scope::new(4, Duration::from_secs(5));
        scope.recorded = Some(vec![(
            "mod".into(),
            json!({"results": [{"flagged": true, "categories": {"violence": true}}]}),
        )]);
        let caps = RequestCaps {
            guard: Some(Arc::new(scope)),
            ..RequestCaps::default()
        };
        open(&mut host, &caps);
        let answer = moderate(&mut host).await.unwrap();
        assert!(answer[0].flagged);
        assert_eq!(answer[0].categories[0].name, "violence");
        let calls = host.caps.close();
        assert_eq!(calls[0].flagged, Some(true));
    }
}
