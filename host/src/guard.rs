//! Guard models: the models the operator configured (`[[guard_models]]`) that plugins granted
//! them consult through contract 0.3's `guard-models` capability. The host owns everything
//! between a plugin's typed question and the typed answer: each kind's wire format and prompt
//! (`wire`), the connection, the timeout, the limit of calls in flight, the cache (`cache`) and
//! the record of each call. A plugin sees neither the URL nor the key; an answer that cannot be
//! parsed is an error, never a safe verdict.

mod cache;
mod wire;

use crate::config::{GuardKind, GuardModelConfig};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use cache::Cache;

/// Longest answer read from a guard model.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// Why a guard model gave no answer (the WIT `guard-error`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GuardError {
    /// Not granted, not configured, or the wrong kind for the operation.
    #[error("denied: {0}")]
    Denied(String),
    /// No answer within the model's timeout.
    #[error("timed out")]
    Timeout,
    /// The request's budget of guard calls is spent.
    #[error("budget exhausted")]
    BudgetExhausted,
    /// The model answered 429.
    #[error("rate limited")]
    RateLimited,
    /// Unreachable, or an error status.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// An answer not in the kind's shape.
    #[error("invalid output: {0}")]
    InvalidOutput(String),
}

impl GuardError {
    /// Its name in records and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            GuardError::Denied(_) => "denied",
            GuardError::Timeout => "timeout",
            GuardError::BudgetExhausted => "budget_exhausted",
            GuardError::RateLimited => "rate_limited",
            GuardError::Unavailable(_) => "unavailable",
            GuardError::InvalidOutput(_) => "invalid_output",
        }
    }
}

/// A category a model scored or named.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Category {
    /// As the model names it.
    pub name: String,
    /// Whether the text is counted in it.
    pub flagged: bool,
    /// Its score, when the model gives one.
    pub score: Option<f32>,
}

/// A moderation answer for one text.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Moderation {
    /// Flagged in any category.
    pub flagged: bool,
    /// Every category answered.
    pub categories: Vec<Category>,
}

/// Whose turn a guard judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The last user turn.
    User,
    /// The assistant's reply.
    Assistant,
}

/// One turn shown to a guard.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Turn {
    /// `user` or `assistant`.
    pub role: String,
    /// Its text.
    pub content: String,
}

/// A safety guard's verdict.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Guarded {
    /// Safe or not.
    pub safe: bool,
    /// Violated categories.
    pub categories: Vec<Category>,
    /// Probability of unsafe, from first-token log-probabilities when given.
    pub score: Option<f32>,
}

/// A classifier's label.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Label {
    /// The label.
    pub label: String,
    /// Its score.
    pub score: f32,
}

/// A named entity, in bytes of the text.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Entity {
    /// Its type as the model names it.
    pub entity_type: String,
    /// First byte.
    pub start: u32,
    /// Byte after the last.
    pub end: u32,
    /// The model's confidence.
    pub score: f32,
}

/// What a plugin asks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Question {
    /// `moderate`.
    Moderate(Vec<String>),
    /// `guard`.
    Guard(Role, Vec<Turn>),
    /// `classify`.
    Classify(Vec<String>),
    /// `entities`.
    Entities(String, Option<String>),
    /// `judge`: instructions, input, schema.
    Judge(String, String, String),
}

impl Question {
    /// Its texts, when it is a batch that each text of is answered on its own (a moderation's
    /// or a classifier's of more than one).
    fn batch(&self) -> Option<&[String]> {
        match self {
            Question::Moderate(t) | Question::Classify(t) if t.len() > 1 => Some(t),
            _ => None,
        }
    }

    /// The same operation on `texts` (of a batch).
    fn of_texts(&self, texts: Vec<String>) -> Question {
        match self {
            Question::Moderate(_) => Question::Moderate(texts),
            _ => Question::Classify(texts),
        }
    }

    /// The operation's name.
    pub fn operation(&self) -> &'static str {
        match self {
            Question::Moderate(_) => "moderate",
            Question::Guard(..) => "guard",
            Question::Classify(_) => "classify",
            Question::Entities(..) => "entities",
            Question::Judge(..) => "judge",
        }
    }

    /// Which kinds answer it.
    fn answered_by(&self, kind: GuardKind) -> bool {
        matches!(
            (self, kind),
            (Question::Moderate(_), GuardKind::OpenaiModeration)
                | (
                    Question::Guard(..),
                    GuardKind::LlamaGuard | GuardKind::Nemoguard
                )
                | (Question::Classify(_), GuardKind::Classifier)
                | (Question::Entities(..), GuardKind::Entities)
                | (Question::Judge(..), GuardKind::Judge)
        )
    }
}

/// A model's typed answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Answer {
    /// To `moderate`.
    Moderated(Vec<Moderation>),
    /// To `guard`.
    Guarded(Guarded),
    /// To `classify`.
    Classified(Vec<Vec<Label>>),
    /// To `entities`.
    Entities(Vec<Entity>),
    /// To `judge`: JSON text matching the schema.
    Judged(String),
}

impl Answer {
    /// A batch's answer as one answer per text, of `n` texts (a model that answered another
    /// number of texts answered nonsense).
    fn split(self, n: usize) -> Result<Vec<Answer>, GuardError> {
        let each: Vec<Answer> = match self {
            Answer::Moderated(all) => all
                .into_iter()
                .map(|m| Answer::Moderated(vec![m]))
                .collect(),
            Answer::Classified(all) => all
                .into_iter()
                .map(|l| Answer::Classified(vec![l]))
                .collect(),
            _ => Vec::new(),
        };
        match each.len() == n {
            true => Ok(each),
            false => Err(GuardError::InvalidOutput(format!(
                "the model answered {} texts of {n}",
                each.len()
            ))),
        }
    }

    /// Answers to one text each, as the answer to `question`, their batch.
    fn join(question: &Question, each: impl Iterator<Item = Answer>) -> Answer {
        let mut moderated = Vec::new();
        let mut classified = Vec::new();
        for answer in each {
            match answer {
                Answer::Moderated(m) => moderated.extend(m),
                Answer::Classified(c) => classified.extend(c),
                _ => {}
            }
        }
        match question {
            Question::Moderate(_) => Answer::Moderated(moderated),
            _ => Answer::Classified(classified),
        }
    }

    /// Its verdict in a record: the flagged category names, or `safe`/`unsafe`, or the labels
    /// and entity types found (never text).
    fn summary(&self) -> (Option<bool>, Vec<String>) {
        let mut names: Vec<String> = Vec::new();
        let mut add = |n: &str| {
            if !names.iter().any(|m| m == n) && names.len() < 16 {
                names.push(crate::util::truncate(n, 64).to_string());
            }
        };
        match self {
            Answer::Moderated(all) => {
                for c in all.iter().flat_map(|m| &m.categories).filter(|c| c.flagged) {
                    add(&c.name);
                }
                (Some(all.iter().any(|m| m.flagged)), names)
            }
            Answer::Guarded(g) => {
                for c in &g.categories {
                    add(&c.name);
                }
                (Some(!g.safe), names)
            }
            Answer::Classified(all) => {
                for l in all.iter().filter_map(|labels| labels.first()) {
                    add(&l.label);
                }
                (None, names)
            }
            Answer::Entities(all) => {
                for e in all {
                    add(&e.entity_type);
                }
                (None, names)
            }
            Answer::Judged(_) => (None, names),
        }
    }
}

/// The record of one guard-model call: in the decision record and the trace, never with text.
#[derive(Debug, Clone, Serialize)]
pub struct GuardCall {
    /// The configured model's name.
    pub model: String,
    /// `moderate`, `guard`, `classify`, `entities` or `judge`.
    pub operation: &'static str,
    /// Wall time of the call (0 for a cache hit or a call refused before it was made).
    #[serde(serialize_with = "micros")]
    pub duration_us: Duration,
    /// Answered from the cache.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// For a moderation or a guard: whether it flagged the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flagged: Option<bool>,
    /// Flagged categories, top labels or entity types.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// For a call that failed: the error's kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'static str>,
}

impl GuardCall {
    /// The record of asking `model` `question`, before it is answered.
    fn of(model: &str, question: &Question) -> GuardCall {
        GuardCall {
            model: crate::util::truncate(model, 64).to_string(),
            operation: question.operation(),
            duration_us: Duration::ZERO,
            cached: false,
            flagged: None,
            categories: Vec::new(),
            error: None,
        }
    }

    /// What `answer` says, noted: flagged and its categories, or the error's kind.
    fn answered(&mut self, answer: &Result<Answer, GuardError>) {
        match answer {
            Ok(a) => (self.flagged, self.categories) = a.summary(),
            Err(e) => self.error = Some(e.kind()),
        }
    }
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

/// The guard models' HTTP client (one per daemon: `crate::services`).
pub type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One configured guard model.
pub struct GuardModel {
    config: GuardModelConfig,
    client: HttpClient,
    /// Calls in flight at once (`max_concurrent`).
    slots: tokio::sync::Semaphore,
    cache: Cache,
    /// The store replicas share their answers in, with Redis (`None`: this replica's only).
    shared: Option<Arc<crate::state::Store>>,
}

/// How long an answer is kept in the shared store.
const SHARED_TTL: Duration = Duration::from_secs(600);

impl GuardModel {
    /// Its config.
    pub fn config(&self) -> &GuardModelConfig {
        &self.config
    }

    /// Ask `question`, waiting at most `left` (what the request's budget has left, when less
    /// than the model's timeout), and say what happened for the record.
    pub async fn ask(
        &self,
        question: &Question,
        left: Option<Duration>,
    ) -> (Result<Answer, GuardError>, GuardCall) {
        if let Some(texts) = question.batch() {
            return self.ask_each(question, texts, left).await;
        }
        let started = Instant::now();
        let mut record = GuardCall::of(&self.config.name, question);
        let key = self.cache.key(self.config.kind, &self.asked(), question);
        let answer = match self.kept(&key).await {
            Some(answer) => {
                record.cached = true;
                Ok(answer)
            }
            None => {
                let answer = self.fetch(question, left).await;
                if let Ok(a) = &answer {
                    self.keep(key, a);
                }
                answer
            }
        };
        record.duration_us = started.elapsed();
        record.answered(&answer);
        (answer, record)
    }

    /// Who is asked (its URL and model), as cache keys name it.
    fn asked(&self) -> String {
        format!(
            "{}\0{}",
            self.config.url,
            self.config.model.as_deref().unwrap_or("")
        )
    }

    /// Ask a batch of `texts` (a moderation's or a classifier's), each text's answer kept on its
    /// own: a conversation judged again with one more turn sends the model only the new turn,
    /// so what judging it costs does not grow with its length.
    async fn ask_each(
        &self,
        question: &Question,
        texts: &[String],
        left: Option<Duration>,
    ) -> (Result<Answer, GuardError>, GuardCall) {
        let started = Instant::now();
        let mut record = GuardCall::of(&self.config.name, question);
        let asked = self.asked();
        let keys: Vec<cache::Key> = texts
            .iter()
            .map(|t| {
                let one = question.of_texts(vec![t.clone()]);
                self.cache.key(self.config.kind, &asked, &one)
            })
            .collect();
        let mut each: Vec<Option<Answer>> = Vec::with_capacity(texts.len());
        for key in &keys {
            each.push(self.kept(key).await);
        }
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| each[i].is_none()).collect();
        record.cached = missing.is_empty();
        let fetched = match missing.is_empty() {
            true => Ok(Vec::new()),
            false => {
                let asked = question.of_texts(missing.iter().map(|&i| texts[i].clone()).collect());
                let answer = self.fetch(&asked, left).await;
                answer.and_then(|a| a.split(missing.len()))
            }
        };
        let answer = fetched.map(|answers| {
            for (&i, answer) in missing.iter().zip(answers) {
                self.keep(keys[i], &answer);
                each[i] = Some(answer);
            }
            Answer::join(question, each.into_iter().flatten())
        });
        record.duration_us = started.elapsed();
        record.answered(&answer);
        (answer, record)
    }

    /// The answer kept for `key`: this replica's, or one another replica shared.
    async fn kept(&self, key: &cache::Key) -> Option<Answer> {
        match self.cache.get(key) {
            Some(answer) => Some(answer),
            None => self.shared_answer(key).await,
        }
    }

    /// Keep `answer` for `key`, here and (off the request's path) for the other replicas.
    fn keep(&self, key: cache::Key, answer: &Answer) {
        self.cache.put(key, answer.clone());
        self.share(&key, answer);
    }

    /// Its answer for `key` another replica kept in the shared store (then kept here too).
    async fn shared_answer(&self, key: &cache::Key) -> Option<Answer> {
        let store = self
            .shared
            .as_ref()
            .filter(|_| self.config.cache_entries > 0)?;
        let stored = store.get(&self.shared_key(key)).await.ok()??;
        let answer: Answer = serde_json::from_slice(&stored).ok()?;
        self.cache.put(*key, answer.clone());
        Some(answer)
    }

    /// Keep `answer` for `key` in the shared store, off the request's path.
    fn share(&self, key: &cache::Key, answer: &Answer) {
        let Some(store) = self
            .shared
            .clone()
            .filter(|_| self.config.cache_entries > 0)
        else {
            return;
        };
        let (Ok(json), Ok(runtime)) = (
            serde_json::to_vec(answer),
            tokio::runtime::Handle::try_current(),
        ) else {
            return;
        };
        let key = self.shared_key(key);
        runtime.spawn(async move {
            let value = Bytes::from(json);
            if let Err(e) = store.put("guard-cache", &key, value, SHARED_TTL).await {
                tracing::debug!(error = %e, "a guard model's answer was not shared");
            }
        });
    }

    fn shared_key(&self, key: &cache::Key) -> String {
        format!("guard-cache:{}:{}", self.config.name, crate::util::hex(key))
    }

    /// The answer `recorded` holds for this model, through the same parser as a live one: a
    /// chat-based kind's recording is the reply's text, any other's the response body. A model
    /// with no recording is unavailable, never safe.
    pub(crate) fn replay(
        &self,
        question: &Question,
        recorded: &[(String, serde_json::Value)],
    ) -> (Result<Answer, GuardError>, GuardCall) {
        let answer = match recorded.iter().find(|(n, _)| *n == self.config.name) {
            None => Err(GuardError::Unavailable(format!(
                "no recorded answer for guard model '{}'",
                self.config.name
            ))),
            Some(_) if !question.answered_by(self.config.kind) => Err(GuardError::Denied(format!(
                "guard model '{}' is a {} model, which does not answer {}",
                self.config.name,
                self.config.kind.as_str(),
                question.operation()
            ))),
            Some((_, value)) => {
                let body = match (self.config.kind, value) {
                    (
                        GuardKind::LlamaGuard | GuardKind::Nemoguard | GuardKind::Judge,
                        serde_json::Value::String(text),
                    ) => {
                        serde_json::json!({"choices": [{"message": {"role": "assistant", "content": text}}]})
                    }
                    (_, other) => other.clone(),
                };
                wire::requests(&self.config, question).and_then(|_| {
                    wire::answer(&self.config, question, &[Bytes::from(body.to_string())])
                })
            }
        };
        let mut record = GuardCall::of(&self.config.name, question);
        record.answered(&answer);
        (answer, record)
    }

    async fn fetch(
        &self,
        question: &Question,
        left: Option<Duration>,
    ) -> Result<Answer, GuardError> {
        if !question.answered_by(self.config.kind) {
            return Err(GuardError::Denied(format!(
                "guard model '{}' is a {} model, which does not answer {}",
                self.config.name,
                self.config.kind.as_str(),
                question.operation()
            )));
        }
        let calls = wire::requests(&self.config, question)?;
        let work = async {
            let _slot = self
                .slots
                .acquire()
                .await
                .map_err(|_| GuardError::Unavailable("shutting down".into()))?;
            let mut answers = Vec::with_capacity(calls.len());
            for (path, body) in &calls {
                answers.push(self.post(path, body).await?);
            }
            wire::answer(&self.config, question, &answers)
        };
        let budgeted = left.filter(|l| *l < self.config.timeout);
        match tokio::time::timeout(budgeted.unwrap_or(self.config.timeout), work).await {
            Ok(answer) => answer,
            // The request's budget ran out before the model's timeout did.
            Err(_) if budgeted.is_some() => Err(GuardError::BudgetExhausted),
            Err(_) => Err(GuardError::Timeout),
        }
    }

    async fn post(&self, path: &str, body: &serde_json::Value) -> Result<Bytes, GuardError> {
        let base = self.config.url.to_string();
        let url = format!("{}{path}", base.trim_end_matches('/'));
        let body = serde_json::to_vec(body).map_err(|e| GuardError::Denied(e.to_string()))?;
        let mut request = hyper::Request::post(url)
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| GuardError::Unavailable(e.to_string()))?;
        if let Some(key) = &self.config.api_key {
            request.headers_mut().insert(AUTHORIZATION, key.clone());
        }
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| GuardError::Unavailable(format!("cannot reach it: {}", root(&e))))?;
        let status = response.status();
        if status == hyper::StatusCode::TOO_MANY_REQUESTS {
            return Err(GuardError::RateLimited);
        }
        let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| {
                GuardError::Unavailable(format!(
                    "its answer broke off or passed {MAX_ANSWER_BYTES} bytes: {e}"
                ))
            })?
            .to_bytes();
        if !status.is_success() {
            return Err(GuardError::Unavailable(format!(
                "it answered HTTP {}",
                status.as_u16()
            )));
        }
        Ok(body)
    }
}

fn root(err: &dyn std::error::Error) -> String {
    let mut source = err;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}

/// Every configured guard model, shared by the plugins granted them.
#[derive(Default)]
pub struct GuardModels {
    models: Vec<Arc<GuardModel>>,
}

impl GuardModels {
    /// The models of `configs`, over `services`' connections and store. `previous`' caches are
    /// kept for models whose config is unchanged (a reload), so a reload does not empty them.
    pub fn new(
        configs: &[GuardModelConfig],
        previous: Option<&GuardModels>,
        services: &crate::services::Services,
    ) -> Result<Self, String> {
        if configs.is_empty() {
            return Ok(GuardModels::default());
        }
        let client = services.guard_client()?;
        let store = services.store();
        let models = configs
            .iter()
            .map(|c| {
                let kept = previous
                    .and_then(|p| p.get(&c.name))
                    .filter(|m| same(&m.config, c))
                    .map(|m| m.cache.clone());
                Arc::new(GuardModel {
                    config: c.clone(),
                    client: client.clone(),
                    slots: tokio::sync::Semaphore::new(c.max_concurrent),
                    cache: kept.unwrap_or_else(|| Cache::new(c.cache_entries)),
                    shared: store.shared().then(|| store.clone()),
                })
            })
            .collect();
        Ok(GuardModels { models })
    }

    /// The model named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<GuardModel>> {
        self.models.iter().find(|m| m.config.name == name)
    }
}

/// A client for guard models over `http://` or `https://` (the system's CA certificates).
pub(crate) fn client() -> Result<HttpClient, String> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.enforce_http(false);
    connector.set_connect_timeout(Some(Duration::from_secs(5)));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| format!("cannot load the system's CA certificates for guard models: {e}"))?
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .build(connector))
}

/// Whether two configs of a model ask the same model the same way (its cache stays valid).
fn same(a: &GuardModelConfig, b: &GuardModelConfig) -> bool {
    a.kind == b.kind
        && a.url == b.url
        && a.model == b.model
        && a.cache_entries == b.cache_entries
        && a.max_input_chars == b.max_input_chars
}

/// The error for a model the plugin is not granted (or that is not configured: the plugin
/// cannot tell which).
pub fn denied(name: &str) -> GuardError {
    GuardError::Denied(format!(
        "this plugin is not granted guard model '{}'",
        crate::util::truncate(name, 64)
    ))
}

/// The record of a call refused before it was made.
pub fn refused(name: &str, question: &Question, error: &GuardError) -> GuardCall {
    GuardCall {
        error: Some(error.kind()),
        ..GuardCall::of(name, question)
    }
}
