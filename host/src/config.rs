//! `railyard.toml`: parsed into serde types (`raw`: unknown keys are errors), then resolved into a
//! [`Config`] (`resolve`, `keys`) with paths made absolute and defaults filled in. Every problem
//! names the file, the line and the key, and all problems are reported at once.
//!
//! Settings come in two kinds. [`StartupConfig`] (listen addresses, the backends, the compiled
//! plugin cache) is read when the daemon starts; a reload that changes it is told that it needs a
//! restart (see [`StartupConfig::changes`]). Everything else is the policy config a reload
//! replaces. Loading the plugins a config names is the next phase: see [`crate::policy`].

mod guard;
mod keys;
mod mcp;
mod pins;
mod provenance;
mod raw;
mod resolve;
#[cfg(test)]
mod tests;

use crate::auth::{ApiKey, KeyDigest};
use crate::model::Limits;
use crate::model::{Mode, OnError, Rail, ToolDef};
pub use guard::{GuardBudgetConfig, GuardKind, GuardModelConfig, TenantGuardBudget};
pub use mcp::{McpConfig, McpServer};
pub use pins::{PinMode, PinsConfig, TenantPins};
pub use provenance::{load_keyring, ProvenanceConfig, SigningKey};
use raw::RawConfig;
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Most memory a plugin may be given, in MiB (wasm32 cannot address more than 4 GiB).
const MAX_MEMORY_MB: u64 = 4096;
/// Longest CPU deadline a plugin may be given: anything longer is a mistake in a request path.
const MAX_TIMEOUT_MS: u64 = 60_000;

/// What the daemon does when a rail blocks a request or a whole (non-streamed) reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnBlock {
    /// HTTP 200 with the refusal text as the assistant's reply.
    #[default]
    Refuse,
    /// HTTP 400 with an error of type `policy_violation`.
    Error,
}

/// What a streamed reply does when a rail blocks it mid-stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnBlockStream {
    /// An error event (SDKs raise it as an exception).
    #[default]
    Error,
    /// The refusal text and the door's normal ending (`content_filter`, a completed response,
    /// `stop_reason: "refusal"`): SDKs see an ordinary reply.
    Finish,
}

/// What a request naming a field its door does not know gets (`[server] unknown_fields`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownFields {
    /// Its strings are judged as text, as part of the request or message it is in.
    #[default]
    Judge,
    /// The request is refused with a 400 naming the field.
    Refuse,
}

/// Read at start-up only: where the daemon listens and what it talks to.
#[derive(Debug, Clone, PartialEq)]
pub struct StartupConfig {
    /// `[server] listen`.
    pub listen: String,
    /// `[server] grpc_listen`; no gRPC server when absent.
    pub grpc_listen: Option<String>,
    /// `[admin] listen`: admin endpoints on their own listener.
    pub admin_listen: Option<String>,
    /// `[backend]`.
    pub backend: BackendConfig,
    /// Where compiled plugins are cached.
    pub cache_dir: Option<PathBuf>,
    /// `[server] max_connections`: open client connections beyond it are answered 503 and
    /// closed.
    pub max_connections: usize,
    /// `[server] workers`: data-plane threads, each serving its connections to the end (`0`:
    /// one per CPU).
    pub workers: usize,
    /// `[server] header_read_timeout_ms`: a connection that has not sent a whole request head
    /// within it (a stalled client, or an idle keep-alive connection) is closed.
    pub header_read_timeout: std::time::Duration,
    /// `[server] shutdown_delay_ms`: on SIGTERM, how long `/readyz` says not-ready while the
    /// listener still accepts (for a load balancer to stop sending), before draining.
    pub shutdown_delay: std::time::Duration,
    /// `[server] shutdown_timeout_ms`: how long requests in flight may take to finish once
    /// draining starts; what is left then is cut.
    pub shutdown_timeout: std::time::Duration,
    /// `[telemetry]`: OTLP traces; `None`: off.
    pub telemetry: Option<TelemetryConfig>,
    /// `[state]`: where state shared by replicas lives.
    pub state: StateConfig,
}

/// `[state]`: the store that holds what replicas share (rate limits today).
#[derive(Debug, Clone, PartialEq)]
pub struct StateConfig {
    /// `redis://...` for Redis or Valkey; `None`: in this process (`backend = "memory"`).
    pub redis_url: Option<String>,
    /// Prepended to every key (several deployments on one Redis).
    pub key_prefix: String,
    /// The longest a request waits for the store.
    pub timeout: std::time::Duration,
    /// What a request gets when the store cannot answer in time: refused (`closed`, the
    /// default) or let through unlimited (`open`).
    pub fail_open: bool,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            redis_url: None,
            key_prefix: "railyard:".into(),
            timeout: std::time::Duration::from_millis(50),
            fail_open: false,
        }
    }
}

/// `[telemetry]`: where traces go, and how many.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// The OTLP/gRPC endpoint (a collector), e.g. `http://127.0.0.1:4317`.
    pub otlp_endpoint: String,
    /// `service.name` of the spans.
    pub service_name: String,
    /// The share of new traces sampled (a caller's `traceparent` decides for its own traces).
    pub sample_ratio: f64,
}

impl StartupConfig {
    /// The settings that differ from `running`, each as `key (running → new)`: what a reload
    /// cannot apply.
    pub fn changes(&self, running: &StartupConfig) -> Vec<String> {
        let mut out = Vec::new();
        let mut diff = |key: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{key} ({a} → {b})"));
            }
        };
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "unset".into());
        diff("server.listen", running.listen.clone(), self.listen.clone());
        diff(
            "server.grpc_listen",
            opt(&running.grpc_listen),
            opt(&self.grpc_listen),
        );
        diff(
            "admin.listen",
            opt(&running.admin_listen),
            opt(&self.admin_listen),
        );
        diff(
            "server.max_connections",
            running.max_connections.to_string(),
            self.max_connections.to_string(),
        );
        diff(
            "server.workers",
            running.workers.to_string(),
            self.workers.to_string(),
        );
        let ms = |d: std::time::Duration| d.as_millis().to_string();
        diff(
            "server.header_read_timeout_ms",
            ms(running.header_read_timeout),
            ms(self.header_read_timeout),
        );
        diff(
            "server.shutdown_delay_ms",
            ms(running.shutdown_delay),
            ms(self.shutdown_delay),
        );
        diff(
            "server.shutdown_timeout_ms",
            ms(running.shutdown_timeout),
            ms(self.shutdown_timeout),
        );
        let (a, b) = (&running.backend, &self.backend);
        diff("backend.url", a.url.clone(), b.url.clone());
        diff("backend.timeout_ms", ms(a.timeout), ms(b.timeout));
        diff(
            "backend.api_key_env",
            opt(&a.api_key_env),
            opt(&b.api_key_env),
        );
        diff(
            "backend.forward_client_authorization",
            a.forward_client_authorization.to_string(),
            b.forward_client_authorization.to_string(),
        );
        diff(
            "backend.anthropic.url",
            a.anthropic.url.clone(),
            b.anthropic.url.clone(),
        );
        diff(
            "backend.anthropic.api_key_env",
            opt(&a.anthropic.api_key_env),
            opt(&b.anthropic.api_key_env),
        );
        let dir = |d: &Option<PathBuf>| {
            d.as_ref()
                .map_or("unset".into(), |p| p.display().to_string())
        };
        diff("cache_dir", dir(&running.cache_dir), dir(&self.cache_dir));
        let telemetry = |t: &Option<TelemetryConfig>| {
            t.as_ref().map_or("off".into(), |t| {
                format!("{} {} {}", t.otlp_endpoint, t.service_name, t.sample_ratio)
            })
        };
        diff(
            "telemetry",
            telemetry(&running.telemetry),
            telemetry(&self.telemetry),
        );
        let state = |s: &StateConfig| {
            format!(
                "{} {} {}ms {}",
                s.redis_url.as_deref().map_or("memory", |_| "redis"),
                s.key_prefix,
                s.timeout.as_millis(),
                if s.fail_open { "open" } else { "closed" }
            )
        };
        diff("state", state(&running.state), state(&self.state));
        out
    }
}

/// `[server]`: how requests are answered (reloadable).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Assistant text sent when a request is refused.
    pub refusal: String,
    /// What a block looks like to the client.
    pub on_block: OnBlock,
    /// What a block in the middle of a stream looks like.
    pub on_block_stream: OnBlockStream,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Whether a request may switch rails off with `"railyard": {"rails": {...}}`.
    pub allow_rail_overrides: bool,
    /// Streaming: bytes of model text held back so a value split across chunks is judged whole.
    pub stream_window_bytes: usize,
    /// Streaming: the most text a stream may hold without releasing any (a run with no place
    /// to cut, or text a policy keeps holding back) before it is refused.
    pub stream_hold_max_bytes: usize,
    /// What a request naming a field its door does not know gets.
    pub unknown_fields: UnknownFields,
}

/// `[backend]`.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendConfig {
    /// Base URL of the OpenAI-compatible server (e.g. `http://127.0.0.1:8000/v1`).
    pub url: String,
    /// Timeout for a whole backend call.
    pub timeout: Duration,
    /// Name of an environment variable holding the backend API key.
    pub api_key_env: Option<String>,
    /// Forward the client's own `Authorization` to the backend (only when Railyard does not
    /// authenticate callers: otherwise that header carries a Railyard key).
    pub forward_client_authorization: bool,
    /// `[backend.anthropic]`: where `/v1/messages` goes.
    pub anthropic: AnthropicBackend,
}

/// `[backend.anthropic]`.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicBackend {
    /// Base URL of an Anthropic-compatible server (default: the OpenAI backend's URL).
    pub url: String,
    /// Name of an environment variable holding the key sent as `x-api-key`.
    pub api_key_env: Option<String>,
}

/// `[auth]`: callers must present one of these keys. Absent: the daemon runs open.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// Every key: `[[auth.keys]]` then the keys file's.
    pub keys: Vec<ApiKey>,
    /// How many of `keys` are `[[auth.keys]]` (the rest came from the keys file).
    pub inline: usize,
    /// The keys file (absolute), watched and reloaded with the config.
    pub keys_file: Option<PathBuf>,
}

/// `[admin]`: how `/v1/policies`, `/v1/admin/*` and `/metrics` are protected.
#[derive(Debug, Clone, Default)]
pub struct AdminConfig {
    /// Digests of admin keys; when any, admin endpoints require one of them.
    pub keys: Vec<KeyDigest>,
}

/// `[tenants.NAME]`: a tenant's chains and limits.
#[derive(Debug, Clone)]
pub struct TenantConfig {
    /// The name keys refer to.
    pub name: String,
    /// Largest request body this tenant may send.
    pub max_body_bytes: usize,
    /// Most requests in flight at once; `None` is unlimited.
    pub max_concurrent: Option<usize>,
    /// Rails whose chain this tenant replaces, with the plugin ids in order.
    pub chains: Vec<(Rail, Vec<String>)>,
    /// Rails whose default chain this tenant extends, with the plugin ids appended.
    pub extend: Vec<(Rail, Vec<String>)>,
    /// Plugins whose mode differs in this tenant's chains from their `[[plugins]]` entry.
    pub modes: Vec<(String, Mode)>,
    /// Requests it may make per minute, across replicas (counted in `[state]`'s store); `None`:
    /// no limit.
    pub requests_per_minute: Option<u32>,
    /// Tokens (prompt and answer) its requests may use per minute on the model doors, across
    /// replicas: reserved before the backend call, settled from the answer's `usage`.
    pub tokens_per_minute: Option<u32>,
    /// Guard-model calls per minute, where it replaces `[guard]`'s `tenant_calls_per_minute`
    /// (`Some(0)`: no limit).
    pub guard_calls_per_minute: Option<u32>,
    /// Time waited on guard models per minute, where it replaces `[guard]`'s
    /// `tenant_wait_ms_per_minute` (`Some(ZERO)`: no limit).
    pub guard_wait_per_minute: Option<Duration>,
    /// What it sets of `[pins]` for its own requests.
    pub pins: pins::TenantPins,
    /// Line of the tenant's table.
    pub line: usize,
}

impl TenantConfig {
    /// Its guard-model budget per minute: its own limits where it sets them, else `default`'s.
    pub fn guard_budget(&self, default: TenantGuardBudget) -> TenantGuardBudget {
        TenantGuardBudget {
            calls: match self.guard_calls_per_minute {
                Some(0) => None,
                Some(n) => Some(n),
                None => default.calls,
            },
            wait: match self.guard_wait_per_minute {
                Some(d) if d.is_zero() => None,
                Some(d) => Some(d),
                None => default.wait,
            },
        }
    }
}

/// One `[[plugins]]` entry, resolved.
#[derive(Debug, Clone)]
pub struct PluginConfig {
    /// Id, unique in the file.
    pub name: String,
    /// Absolute path of the component.
    pub path: PathBuf,
    /// Rails it runs on; `None` means every rail the plugin handles.
    pub rails: Option<Vec<Rail>>,
    /// Fault resolution.
    pub on_error: OnError,
    /// Whether its verdicts are applied or only recorded.
    pub mode: Mode,
    /// Models the plugin runs for (globs, `*` any run, case-insensitive); empty: every request.
    /// The daemon skips the plugin for other models without calling it.
    pub models: Vec<String>,
    /// On the reply rails (`tool_call`, `output`), whether the plugin is given the conversation
    /// before the reply under judgement; `false` (`history = false`): the reply alone, for a
    /// plugin that reads nothing else there, so a long conversation costs it nothing.
    pub history: bool,
    /// On the rails but `tools`, whether the plugin is given the request's declared tools;
    /// `false` (`declared_tools = false`): an empty list, for a plugin that reads them on the
    /// tools rail alone or never, so the tools are not copied into it at every call. The tools
    /// rail always has them.
    pub declared_tools: bool,
    /// On the tools rail, whether the plugin's verdict depends on the tools and the caller alone
    /// (`memo = true`): the daemon then keeps it and reuses it for the same question instead of
    /// calling the plugin (see `policy::memo`).
    pub memo: bool,
    /// Line of `memo` in the entry, if set.
    pub memo_line: Option<usize>,
    /// The guard models it may consult (`guard_models = [...]`), by name; empty: none.
    pub guard_models: Vec<String>,
    /// On the input rail of the model doors, whether the plugin runs beside the backend call
    /// (`parallel = true`) instead of before it: it can refuse the request (the backend's answer
    /// is then dropped, the call cancelled where it is still running), not change it.
    pub parallel: bool,
    /// Line of `parallel` in the entry, if set.
    pub parallel_line: Option<usize>,
    /// Whether it reaches counters and values in the `[state]` store (`state = true`).
    pub state: bool,
    /// Whether it may ask for a person's approval of a call (`approvals = true`).
    pub approvals: bool,
    /// Whether it hides values behind placeholders the host writes back later in the request
    /// (`vault = true`).
    pub vault: bool,
    /// Limits.
    pub limits: Limits,
    /// The plugin's own config, as JSON.
    pub config: serde_json::Value,
    /// Line of the entry (for error messages).
    pub line: usize,
    /// Line of the entry's `config` table, if any.
    pub config_line: Option<usize>,
}

/// A whole `railyard.toml`, resolved.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from.
    pub path: PathBuf,
    /// Hex SHA-256 of the file's text (and its keys file's).
    pub digest: String,
    /// What is read at start-up only.
    pub startup: StartupConfig,
    /// `[server]`.
    pub server: ServerConfig,
    /// `[auth]`; `None` runs open (every caller anonymous, in the default tenant).
    pub auth: Option<AuthConfig>,
    /// Whether the file has an `[auth]` table at all. The daemon serves only a config that
    /// says how callers authenticate: keys, or `open = true` (see [`Config::check_auth`]).
    pub auth_stated: bool,
    /// `[admin]`.
    pub admin: AdminConfig,
    /// `[tenants.*]`, in file order.
    pub tenants: Vec<TenantConfig>,
    /// `[[tools]]` declared in config, merged into every request's tools for validation.
    pub tools: Vec<ToolDef>,
    /// Plugins in order.
    pub plugins: Vec<PluginConfig>,
    /// `[[mcp.servers]]`.
    pub mcp: McpConfig,
    /// `[provenance]`: signed tool-call ids.
    pub provenance: ProvenanceConfig,
    /// `[[guard_models]]`: what plugins granted them may consult.
    pub guard_models: Vec<GuardModelConfig>,
    /// `[guard]`: what one request may spend on them.
    pub guard_budget: GuardBudgetConfig,
    /// `[approvals] ttl_s`: how long an approval request (and its grant) lives.
    pub approvals_ttl: std::time::Duration,
    /// `[pins]`: tool definitions pinned.
    pub pins: pins::PinsConfig,
}

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The key, e.g. `plugins[1].timeout_ms`.
    pub key: String,
    /// What was expected.
    pub message: String,
}

/// Everything wrong with a config file.
#[derive(Debug, Clone, thiserror::Error)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// The problems, in file order.
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            match p.line {
                Some(line) => write!(f, "{}:{line}: ", self.file.display())?,
                None => write!(f, "{}: ", self.file.display())?,
            }
            if p.key.is_empty() {
                write!(f, "{}", p.message)?;
            } else {
                write!(f, "{}: {}", p.key, p.message)?;
            }
        }
        Ok(())
    }
}

impl ConfigError {
    pub(crate) fn single(file: &Path, line: Option<usize>, key: &str, message: String) -> Self {
        ConfigError {
            file: file.to_owned(),
            problems: vec![Problem {
                line,
                key: key.to_string(),
                message,
            }],
        }
    }
}

/// The most `requests_per_minute` a tenant or a key may be given.
const MOST_REQUESTS_PER_MINUTE: u32 = 100_000_000;
/// The largest token budget a tenant or a key may have.
const MOST_TOKENS_PER_MINUTE: u32 = 4_000_000_000;

/// A limit per minute an operator may leave out (no limit), else from 1 to `most`: a tenant's or
/// a key's `requests_per_minute`, a tenant's `tokens_per_minute`.
fn per_minute_limit(
    p: &mut Problems<'_>,
    v: &Option<toml::Spanned<u64>>,
    key: String,
    most: u32,
) -> Option<u32> {
    let v = v.as_ref()?;
    if !(1..=u64::from(most)).contains(v.get_ref()) {
        p.at(
            v.span(),
            key,
            format!("must be between 1 and {most} (leave it out for no limit)"),
        );
        return None;
    }
    Some(*v.get_ref() as u32)
}

/// Whether `name` is 1 to 64 ASCII letters, digits, `-` or `_`: what names of MCP servers and
/// guard models may be (a URL path segment, a metric label).
fn short_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Deserialize `text` (read from `file`); a syntax or type error names the file, the line and,
/// for a value of the wrong type, its key (`plugins[0].memory_mb`).
fn from_toml<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        let key = e.span().and_then(|s| key_at(text, s)).unwrap_or_default();
        ConfigError::single(file, line, &key, e.message().trim().to_string())
    })
}

/// The path of the innermost value of `text` whose span holds `at` (a type error's span), as
/// config errors name keys: `defaults.timeout_ms`, `plugins[0].config.action`. A table's own
/// span is its header, not its body, so every table is looked into.
fn key_at(text: &str, at: std::ops::Range<usize>) -> Option<String> {
    use toml::de::{DeTable, DeValue};
    let holds = |span: std::ops::Range<usize>| span.start <= at.start && at.end <= span.end;
    fn find(
        value: &DeValue<'_>,
        holds: &dyn Fn(std::ops::Range<usize>) -> bool,
        path: &mut String,
    ) -> bool {
        let len = path.len();
        let found = match value {
            DeValue::Table(t) => t.iter().any(|(key, v)| {
                path.truncate(len);
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key.get_ref());
                find(v.get_ref(), holds, path) || holds(v.span())
            }),
            DeValue::Array(items) => items.iter().enumerate().any(|(i, v)| {
                path.truncate(len);
                path.push_str(&format!("[{i}]"));
                find(v.get_ref(), holds, path) || holds(v.span())
            }),
            _ => false,
        };
        if !found {
            path.truncate(len);
        }
        found
    }
    let doc = DeTable::parse(text).ok()?;
    let mut path = String::new();
    find(&DeValue::Table(doc.into_inner()), &holds, &mut path).then_some(path)
}

/// Read a file the config names (a keys file, a keyring): its TOML as `T`, resolved by
/// `resolve`, whose problems name that file. Returns the result and the file's text.
fn load_named_file<T: serde::de::DeserializeOwned, R>(
    file: &Path,
    what: &str,
    resolve: impl FnOnce(&mut Problems<'_>, T) -> R,
) -> Result<(R, String), ConfigError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| ConfigError::single(file, None, "", format!("cannot read the {what}: {e}")))?;
    let raw: T = from_toml(file, &text)?;
    let mut p = Problems {
        text: &text,
        list: Vec::new(),
    };
    let resolved = resolve(&mut p, raw);
    if p.list.is_empty() {
        Ok((resolved, text))
    } else {
        Err(ConfigError {
            file: file.to_owned(),
            problems: p.list,
        })
    }
}

/// Problems found so far in one file.
struct Problems<'a> {
    text: &'a str,
    list: Vec<Problem>,
}

impl Problems<'_> {
    fn at(
        &mut self,
        span: std::ops::Range<usize>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.list.push(Problem {
            line: Some(line_of(self.text, span.start)),
            key: key.into(),
            message: message.into(),
        });
    }
}

impl Config {
    /// Whether the daemon may serve this config, given the one it serves now (`None` at
    /// start). A config must say how callers authenticate: an empty or truncated file, or one
    /// that lost its `[auth]` table, would otherwise open the daemon to every caller. Running
    /// open takes `[auth] open = true` at start; a reload cannot turn authentication off.
    pub fn check_auth(&self, running: Option<&Config>) -> Result<(), ConfigError> {
        if !self.auth_stated {
            return Err(ConfigError::single(
                &self.path,
                None,
                "auth",
                "there is no [auth] table, so every caller would be let in: name the keys \
                 (`[auth] keys_file = \"keys.toml\"`), or say `[auth] open = true` to run open"
                    .into(),
            ));
        }
        if self.auth.is_none() && running.is_some_and(|r| r.auth.is_some()) {
            return Err(ConfigError::single(
                &self.path,
                None,
                "auth.open",
                "a reload cannot turn authentication off: the daemon keeps its keys (restart it \
                 with `[auth] open = true` to run open)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// This config's keys with its keys file read again, when that file now holds other keys
    /// than the config was loaded with: `None` when it holds the same ones (or there is none).
    /// Returns the keys and the file's text.
    pub fn reread_keys(&self) -> Result<Option<(AuthConfig, String)>, ConfigError> {
        let Some(auth) = &self.auth else {
            return Ok(None);
        };
        let Some(file) = &auth.keys_file else {
            return Ok(None);
        };
        let tenants: Vec<&str> = self.tenants.iter().map(|t| t.name.as_str()).collect();
        let (more, text) = keys::load_keys_file(file, &tenants)?;
        let mut keys = auth.keys[..auth.inline].to_vec();
        keys.extend(more);
        if keys == auth.keys {
            return Ok(None);
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(twice) = keys.iter().find(|k| !seen.insert(k.digest)) {
            return Err(ConfigError::single(
                file,
                None,
                "keys",
                format!(
                    "the key of principal '{}' is configured twice (same sha256)",
                    twice.principal
                ),
            ));
        }
        let auth = AuthConfig {
            keys,
            inline: auth.inline,
            keys_file: auth.keys_file.clone(),
        };
        Ok(Some((auth, text)))
    }

    /// The tenant named `name`, if configured.
    pub fn tenant(&self, name: &str) -> Option<&TenantConfig> {
        self.tenants.iter().find(|t| t.name == name)
    }

    /// How `tenant`'s tools from MCP server `server` are pinned: the tenant's `pins.mcp`, else
    /// the server's `pins`, else `[pins] mcp`; with the tools trusted at first sight.
    pub fn pins_mcp(&self, tenant: &str, server: &str) -> (PinMode, &[String]) {
        let s = self.mcp.server(server);
        let mode = self
            .tenant(tenant)
            .and_then(|t| t.pins.mcp)
            .or(s.and_then(|s| s.pins))
            .unwrap_or(self.pins.mcp);
        (mode, s.map(|s| s.trusted_tools.as_slice()).unwrap_or(&[]))
    }

    /// How the tools `tenant`'s apps declare on the model doors are pinned.
    pub fn pins_models(&self, tenant: &str) -> (PinMode, &[String]) {
        let mode = self
            .tenant(tenant)
            .and_then(|t| t.pins.models)
            .unwrap_or(self.pins.models);
        (mode, &self.pins.trusted_tools)
    }

    /// Read and resolve the config at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::single(path, None, "", format!("cannot read config: {e}")))?;
        Config::parse(path, &text)
    }

    /// Resolve config `text`; relative paths in it are taken from `path`'s directory.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = from_toml(path, text)?;
        let base = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut p = Problems {
            text,
            list: Vec::new(),
        };
        let (startup, server) = resolve::server(&mut p, &raw, &base);
        let defaults =
            resolve::resolve_limits(&mut p, "defaults", &raw.defaults, &Limits::default());
        let default_on_error = raw.defaults.on_error.unwrap_or_default();
        let tools = resolve::tools(&mut p, &raw.tools);
        let guard_models = guard::resolve(&mut p, &raw.guard_models);
        let guard_budget = guard::budget(&mut p, &raw.guard);
        let approvals_ttl = std::time::Duration::from_secs(guard::ranged(
            &mut p,
            &raw.approvals.ttl_s,
            "approvals.ttl_s".into(),
            1..=7 * 24 * 3600,
            900,
        ));
        let plugins = resolve::resolve_plugins(
            &mut p,
            &raw.plugins,
            &defaults,
            default_on_error,
            &base,
            &guard_models,
        );
        let tenants =
            resolve::resolve_tenants(&mut p, &raw.tenants, &plugins, server.max_body_bytes);
        let tenant_names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
        let (auth, keys_text, keys_file_error) =
            keys::resolve_auth(&mut p, raw.auth.as_ref(), &tenant_names, &base);
        if let (Some(f), Some(_)) = (&raw.backend.forward_client_authorization, &auth) {
            if *f.get_ref() {
                p.at(f.span(), "backend.forward_client_authorization", "cannot be true while [auth] is on: the client's Authorization header carries its Railyard key");
            }
        }
        let mcp = mcp::resolve(&mut p, &raw.mcp, auth.is_some());
        let (provenance, keyring_text, keyring_error) =
            provenance::resolve(&mut p, raw.provenance.as_ref(), &base);
        let mut admin_keys = Vec::new();
        for (i, k) in raw.admin.keys_sha256.iter().enumerate() {
            match crate::auth::parse_digest(k.get_ref()) {
                Ok(d) => admin_keys.push(d),
                Err(e) => p.at(k.span(), format!("admin.keys_sha256[{i}]"), e),
            }
        }
        if !p.list.is_empty() {
            p.list.sort_by_key(|p| p.line);
            return Err(ConfigError {
                file: path.to_owned(),
                problems: p.list,
            });
        }
        if let Some(e) = keys_file_error.or(keyring_error) {
            return Err(e);
        }
        // The keys files are part of what a revision names: a revoked key changes the hash.
        let digest_input = format!("{text}{keys_text}{keyring_text}");
        Ok(Config {
            path: path.to_owned(),
            digest: crate::util::sha256_hex(digest_input.as_bytes()),
            startup,
            server,
            auth,
            auth_stated: raw.auth.is_some(),
            admin: AdminConfig { keys: admin_keys },
            tenants,
            tools,
            plugins,
            mcp,
            provenance,
            guard_models,
            guard_budget,
            approvals_ttl,
            pins: raw.pins.resolve(),
        })
    }
}
