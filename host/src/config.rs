//! `railyard.toml`: parsed into serde types (unknown keys are errors), then resolved into a
//! [`Config`] with paths made absolute and defaults filled in. Every problem names the file, the
//! line and the key, and all problems are reported at once.
//!
//! Loading the plugins a config names (and checking each plugin's config against the schema the
//! plugin declares) is the next phase: see [`crate::policy`].

use crate::auth::{ApiKey, KeyDigest};
use crate::chain::OnError;
use crate::engine::{Isolation, Limits};
use crate::payload::{Rail, ToolDef};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// Most memory a plugin may be given, in MiB (wasm32 cannot address more than 4 GiB).
const MAX_MEMORY_MB: u64 = 4096;
/// Longest CPU deadline a plugin may be given: anything longer is a mistake in a request path.
const MAX_TIMEOUT_MS: u64 = 60_000;

/// What the daemon does when a rail blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnBlock {
    /// HTTP 200 with the refusal text as the assistant message.
    #[default]
    Refuse,
    /// HTTP 400 with an OpenAI-style error of type `policy_violation`.
    Error,
}

/// `[server]`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Listen address.
    pub listen: String,
    /// gRPC listen address; no gRPC server when absent.
    pub grpc_listen: Option<String>,
    /// Assistant text sent when a request is refused.
    pub refusal: String,
    /// What a block looks like to the client.
    pub on_block: OnBlock,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Whether a request may switch rails off with `"railyard": {"rails": {...}}`.
    pub allow_rail_overrides: bool,
    /// Streaming: bytes of model text held back so a value split across chunks is judged whole.
    pub stream_window_bytes: usize,
}

/// `[backend]`.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// Base URL of the OpenAI-compatible server (e.g. `http://127.0.0.1:8000/v1`).
    pub url: String,
    /// Timeout for a whole backend call.
    pub timeout: Duration,
    /// Name of an environment variable holding the backend API key (sent instead of the
    /// client's `Authorization`).
    pub api_key_env: Option<String>,
    /// Forward the client's own `Authorization` to the backend (only when Railyard does not
    /// authenticate callers: otherwise that header carries a Railyard key).
    pub forward_client_authorization: bool,
}

/// `[auth]`: callers must present one of these keys. Absent: the daemon runs open.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// Every key: `[[auth.keys]]` then the keys file's.
    pub keys: Vec<ApiKey>,
    /// The keys file (absolute), watched and reloaded with the config.
    pub keys_file: Option<PathBuf>,
}

/// `[admin]`: how `/v1/policies`, `/v1/admin/*` and `/metrics` are protected.
#[derive(Debug, Clone, Default)]
pub struct AdminConfig {
    /// A separate listen address for the admin endpoints (then absent from the main one).
    pub listen: Option<String>,
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
    /// Line of the tenant's table.
    pub line: usize,
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
    /// Hex SHA-256 of the file's text.
    pub digest: String,
    /// `[server]`.
    pub server: ServerConfig,
    /// `[backend]`.
    pub backend: BackendConfig,
    /// `[auth]`; `None` runs open (every caller anonymous, in the default tenant).
    pub auth: Option<AuthConfig>,
    /// `[admin]`.
    pub admin: AdminConfig,
    /// `[tenants.*]`, in file order.
    pub tenants: Vec<TenantConfig>,
    /// Where compiled plugins are cached.
    pub cache_dir: Option<PathBuf>,
    /// `[[tools]]` declared in config, merged into every request's tools for validation.
    pub tools: Vec<ToolDef>,
    /// Plugins in order.
    pub plugins: Vec<PluginConfig>,
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

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    backend: RawBackend,
    #[serde(default)]
    defaults: RawLimits,
    auth: Option<Spanned<RawAuth>>,
    #[serde(default)]
    admin: RawAdmin,
    #[serde(default)]
    tenants: BTreeMap<String, Spanned<RawTenant>>,
    cache_dir: Option<String>,
    #[serde(default)]
    tools: Vec<Spanned<toml::Value>>,
    #[serde(default)]
    plugins: Vec<Spanned<RawPlugin>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: Option<String>,
    grpc_listen: Option<String>,
    refusal: Option<String>,
    on_block: Option<OnBlock>,
    max_body_bytes: Option<Spanned<u64>>,
    allow_rail_overrides: Option<bool>,
    stream_window_bytes: Option<Spanned<u64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawBackend {
    url: Option<String>,
    timeout_ms: Option<Spanned<u64>>,
    api_key_env: Option<String>,
    forward_client_authorization: Option<Spanned<bool>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    keys_file: Option<Spanned<String>>,
    #[serde(default)]
    keys: Vec<Spanned<RawKey>>,
}

/// One key, in `[[auth.keys]]` or a keys file's `[[keys]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    sha256: Spanned<String>,
    principal: Spanned<String>,
    tenant: Option<Spanned<String>>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKeysFile {
    #[serde(default)]
    keys: Vec<Spanned<RawKey>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAdmin {
    listen: Option<String>,
    #[serde(default)]
    keys_sha256: Vec<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    max_body_bytes: Option<Spanned<u64>>,
    max_concurrent: Option<Spanned<u64>>,
    #[serde(default)]
    chains: BTreeMap<String, Spanned<Vec<String>>>,
    #[serde(default)]
    extend: BTreeMap<String, Spanned<Vec<String>>>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    timeout_ms: Option<Spanned<u64>>,
    memory_mb: Option<Spanned<u64>>,
    isolation: Option<Isolation>,
    max_idle_instances: Option<Spanned<u64>>,
    on_error: Option<OnError>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlugin {
    name: Spanned<String>,
    path: Spanned<String>,
    rails: Option<Vec<Spanned<String>>>,
    on_error: Option<OnError>,
    timeout_ms: Option<Spanned<u64>>,
    memory_mb: Option<Spanned<u64>>,
    isolation: Option<Isolation>,
    max_idle_instances: Option<Spanned<u64>>,
    config: Option<Spanned<toml::Value>>,
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Deserialize `text` (read from `file`); a syntax or type error names the file and the line.
fn from_toml<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        ConfigError::single(file, line, "", e.message().trim().to_string())
    })
}

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
    /// Read and resolve the config at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::single(path, None, "", format!("cannot read config: {e}")))?;
        Config::parse(path, &text)
    }

    /// Resolve config `text`; relative paths in it are taken from `path`'s directory.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = from_toml(path, text)?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let base = if base.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base
        };
        let mut p = Problems {
            text,
            list: Vec::new(),
        };

        let max_body_bytes = match &raw.server.max_body_bytes {
            Some(v) if *v.get_ref() == 0 => {
                p.at(v.span(), "server.max_body_bytes", "must be greater than 0");
                0
            }
            Some(v) => *v.get_ref() as usize,
            None => 4 << 20,
        };
        let stream_window_bytes = match &raw.server.stream_window_bytes {
            Some(v) if !(16..=65536).contains(v.get_ref()) => {
                p.at(
                    v.span(),
                    "server.stream_window_bytes",
                    format!("must be between 16 and 65536, got {}", v.get_ref()),
                );
                256
            }
            Some(v) => *v.get_ref() as usize,
            None => 256,
        };
        let server = ServerConfig {
            listen: raw.server.listen.unwrap_or_else(|| "127.0.0.1:8080".into()),
            grpc_listen: raw.server.grpc_listen.filter(|g| !g.is_empty()),
            refusal: raw
                .server
                .refusal
                .unwrap_or_else(|| "I can't help with that request.".into()),
            on_block: raw.server.on_block.unwrap_or_default(),
            max_body_bytes,
            allow_rail_overrides: raw.server.allow_rail_overrides.unwrap_or(false),
            stream_window_bytes,
        };
        let backend_timeout = match &raw.backend.timeout_ms {
            Some(v) if *v.get_ref() == 0 => {
                p.at(v.span(), "backend.timeout_ms", "must be greater than 0");
                Duration::from_secs(60)
            }
            Some(v) => Duration::from_millis(*v.get_ref()),
            None => Duration::from_secs(60),
        };
        let backend = BackendConfig {
            url: raw
                .backend
                .url
                .unwrap_or_else(|| "http://127.0.0.1:8000/v1".into())
                .trim_end_matches('/')
                .to_string(),
            timeout: backend_timeout,
            api_key_env: raw.backend.api_key_env,
            forward_client_authorization: raw
                .backend
                .forward_client_authorization
                .as_ref()
                .is_some_and(|f| *f.get_ref()),
        };

        let defaults = resolve_limits(&mut p, "defaults", &raw.defaults, &Limits::default());
        let default_on_error = raw.defaults.on_error.unwrap_or_default();

        let mut tools = Vec::new();
        for (i, tool) in raw.tools.iter().enumerate() {
            let key = format!("tools[{i}]");
            match serde_json::to_value(tool.get_ref()) {
                Ok(json) => match ToolDef::from_openai(&json, &key) {
                    Ok(t) => tools.push(t),
                    Err(e) => p.at(tool.span(), e.path, e.message),
                },
                Err(e) => p.at(tool.span(), key, e.to_string()),
            }
        }

        let mut plugins: Vec<PluginConfig> = Vec::new();
        for (i, entry) in raw.plugins.iter().enumerate() {
            let span = entry.span();
            let raw = entry.get_ref();
            let name = raw.name.get_ref().clone();
            let key = format!("plugins[{i}]");
            let valid_name = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
            if !valid_name {
                p.at(raw.name.span(), format!("{key}.name"), format!("'{name}' is not a valid plugin name (expected lowercase letters, digits, '-' and '_')"));
            }
            if plugins.iter().any(|q| q.name == name) {
                p.at(
                    raw.name.span(),
                    format!("{key}.name"),
                    format!("plugin name '{name}' is used twice"),
                );
            }
            let rails = raw.rails.as_ref().map(|list| {
                let mut rails = Vec::new();
                for r in list {
                    match Rail::parse(r.get_ref()) {
                        Some(rail) if rails.contains(&rail) => p.at(r.span(), format!("{key}.rails"), format!("rail '{rail}' is listed twice")),
                        Some(rail) => rails.push(rail),
                        None => p.at(r.span(), format!("{key}.rails"), format!("unknown rail '{}' (expected one of: input, tool_result, tool_call, output)", r.get_ref())),
                    }
                }
                rails
            });
            let limits = resolve_limits(
                &mut p,
                &key,
                &RawLimits {
                    timeout_ms: raw.timeout_ms.clone(),
                    memory_mb: raw.memory_mb.clone(),
                    isolation: raw.isolation,
                    max_idle_instances: raw.max_idle_instances.clone(),
                    on_error: None,
                },
                &defaults,
            );
            let config = match &raw.config {
                None => serde_json::Value::Object(Default::default()),
                Some(c) => match serde_json::to_value(c.get_ref()) {
                    Ok(v) => v,
                    Err(e) => {
                        p.at(c.span(), format!("{key}.config"), e.to_string());
                        serde_json::Value::Null
                    }
                },
            };
            let plugin_path = raw.path.get_ref();
            if plugin_path.is_empty() {
                p.at(raw.path.span(), format!("{key}.path"), "must not be empty");
            }
            plugins.push(PluginConfig {
                name,
                path: base.join(plugin_path),
                rails,
                on_error: raw.on_error.unwrap_or(default_on_error),
                limits,
                config,
                line: line_of(text, span.start),
                config_line: raw.config.as_ref().map(|c| line_of(text, c.span().start)),
            });
        }

        let tenants = resolve_tenants(&mut p, &raw.tenants, &plugins, max_body_bytes);
        let tenant_names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
        let mut keys_file_error = None;
        let mut keys_text = String::new();
        let auth = raw.auth.as_ref().map(|auth| {
            let mut keys = resolve_keys(&mut p, "auth.keys", &auth.get_ref().keys, &tenant_names);
            let keys_file = auth
                .get_ref()
                .keys_file
                .as_ref()
                .map(|f| base.join(f.get_ref()));
            if let Some(file) = &keys_file {
                match load_keys_file(file, &tenant_names) {
                    Ok((more, text)) => {
                        keys.extend(more);
                        keys_text = text;
                    }
                    Err(e) => keys_file_error = Some(e),
                }
            }
            let mut seen: Vec<&KeyDigest> = Vec::new();
            for k in &keys {
                if seen.contains(&&k.digest) {
                    p.at(
                        auth.span(),
                        "auth",
                        format!(
                            "the key of principal '{}' is configured twice (same sha256)",
                            k.principal
                        ),
                    );
                }
                seen.push(&k.digest);
            }
            AuthConfig { keys, keys_file }
        });
        if let (Some(f), Some(_)) = (&raw.backend.forward_client_authorization, &auth) {
            if *f.get_ref() {
                p.at(f.span(), "backend.forward_client_authorization", "cannot be true while [auth] is on: the client's Authorization header carries its Railyard key");
            }
        }
        let mut admin_keys = Vec::new();
        for (i, k) in raw.admin.keys_sha256.iter().enumerate() {
            match crate::auth::parse_digest(k.get_ref()) {
                Ok(d) => admin_keys.push(d),
                Err(e) => p.at(k.span(), format!("admin.keys_sha256[{i}]"), e),
            }
        }
        let admin = AdminConfig {
            listen: raw.admin.listen.filter(|l| !l.is_empty()),
            keys: admin_keys,
        };

        let cache_dir = match raw.cache_dir {
            Some(dir) if dir.is_empty() => None,
            Some(dir) => Some(base.join(dir)),
            None => crate::engine::ComponentCache::default_dir(),
        };

        if !p.list.is_empty() {
            p.list.sort_by_key(|p| p.line);
            return Err(ConfigError {
                file: path.to_owned(),
                problems: p.list,
            });
        }
        if let Some(e) = keys_file_error {
            return Err(e);
        }
        // The keys file is part of what a revision names: a revoked key changes the hash.
        let digest_input = format!("{text}{keys_text}");
        Ok(Config {
            path: path.to_owned(),
            digest: crate::engine::sha256_hex(digest_input.as_bytes()),
            server,
            backend,
            auth,
            admin,
            tenants,
            cache_dir,
            tools,
            plugins,
        })
    }
}

fn resolve_keys(
    p: &mut Problems<'_>,
    key: &str,
    raw: &[Spanned<RawKey>],
    tenants: &[&str],
) -> Vec<ApiKey> {
    let mut keys = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
        let k = entry.get_ref();
        let at = format!("{key}[{i}]");
        let digest = match crate::auth::parse_digest(k.sha256.get_ref()) {
            Ok(d) => Some(d),
            Err(e) => {
                p.at(k.sha256.span(), format!("{at}.sha256"), e);
                None
            }
        };
        let principal = k.principal.get_ref().trim().to_string();
        if principal.is_empty() {
            p.at(
                k.principal.span(),
                format!("{at}.principal"),
                "must not be empty",
            );
        }
        if let Some(t) = &k.tenant {
            if !tenants.contains(&t.get_ref().as_str()) {
                let known = if tenants.is_empty() {
                    "none are configured".to_string()
                } else {
                    format!("configured: {}", tenants.join(", "))
                };
                p.at(
                    t.span(),
                    format!("{at}.tenant"),
                    format!("unknown tenant '{}' ({known})", t.get_ref()),
                );
            }
        }
        if let Some(digest) = digest {
            keys.push(ApiKey {
                digest,
                principal,
                tenant: k.tenant.as_ref().map(|t| t.get_ref().clone()),
                labels: k.labels.clone().into_iter().collect(),
            });
        }
    }
    keys
}

/// Read a keys file (`[[keys]]` entries): its keys and its text. Its problems name the keys file.
fn load_keys_file(file: &Path, tenants: &[&str]) -> Result<(Vec<ApiKey>, String), ConfigError> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        ConfigError::single(file, None, "", format!("cannot read the keys file: {e}"))
    })?;
    let raw: RawKeysFile = from_toml(file, &text)?;
    let mut p = Problems {
        text: &text,
        list: Vec::new(),
    };
    let keys = resolve_keys(&mut p, "keys", &raw.keys, tenants);
    if p.list.is_empty() {
        Ok((keys, text))
    } else {
        Err(ConfigError {
            file: file.to_owned(),
            problems: p.list,
        })
    }
}

fn resolve_tenants(
    p: &mut Problems<'_>,
    raw: &BTreeMap<String, Spanned<RawTenant>>,
    plugins: &[PluginConfig],
    default_body: usize,
) -> Vec<TenantConfig> {
    let mut tenants: Vec<TenantConfig> = Vec::new();
    for (name, entry) in raw {
        let t = entry.get_ref();
        let key = format!("tenants.{name}");
        if name.is_empty()
            || name == crate::auth::DEFAULT_TENANT
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            p.at(entry.span(), &key, format!("'{name}' is not a valid tenant name (letters, digits, '-' and '_'; 'default' is reserved)"));
        }
        let max_body_bytes = match &t.max_body_bytes {
            Some(v) if *v.get_ref() == 0 => {
                p.at(
                    v.span(),
                    format!("{key}.max_body_bytes"),
                    "must be greater than 0",
                );
                default_body
            }
            Some(v) => *v.get_ref() as usize,
            None => default_body,
        };
        let max_concurrent = match &t.max_concurrent {
            Some(v) if *v.get_ref() == 0 => {
                p.at(
                    v.span(),
                    format!("{key}.max_concurrent"),
                    "must be greater than 0",
                );
                None
            }
            Some(v) => Some(*v.get_ref() as usize),
            None => None,
        };
        let mut rails_of = |table: &BTreeMap<String, Spanned<Vec<String>>>, what: &str| {
            let mut out = Vec::new();
            for (rail_name, ids) in table {
                let Some(rail) = Rail::parse(rail_name) else {
                    p.at(ids.span(), format!("{key}.{what}"), format!("unknown rail '{rail_name}' (expected one of: input, tool_result, tool_call, output)"));
                    continue;
                };
                for id in ids.get_ref() {
                    if !plugins.iter().any(|pc| &pc.name == id) {
                        p.at(
                            ids.span(),
                            format!("{key}.{what}.{rail_name}"),
                            format!("no plugin named '{id}' in [[plugins]]"),
                        );
                    }
                }
                out.push((rail, ids.get_ref().clone()));
            }
            out
        };
        let chains = rails_of(&t.chains, "chains");
        let extend = rails_of(&t.extend, "extend");
        for (rail, _) in &extend {
            if chains.iter().any(|(r, _)| r == rail) {
                p.at(
                    entry.span(),
                    &key,
                    format!(
                        "the {rail} rail is both replaced (chains) and extended (extend): pick one"
                    ),
                );
            }
        }
        tenants.push(TenantConfig {
            name: name.clone(),
            max_body_bytes,
            max_concurrent,
            chains,
            extend,
            line: line_of(p.text, entry.span().start),
        });
    }
    tenants.sort_by_key(|t| t.line);
    tenants
}

fn resolve_limits(p: &mut Problems<'_>, key: &str, raw: &RawLimits, base: &Limits) -> Limits {
    let mut limits = base.clone();
    if let Some(v) = &raw.timeout_ms {
        let ms = *v.get_ref();
        if ms == 0 || ms > MAX_TIMEOUT_MS {
            p.at(
                v.span(),
                format!("{key}.timeout_ms"),
                format!("must be between 1 and {MAX_TIMEOUT_MS} (milliseconds), got {ms}"),
            );
        } else {
            limits.timeout = Duration::from_millis(ms);
        }
    }
    if let Some(v) = &raw.memory_mb {
        let mb = *v.get_ref();
        if mb == 0 || mb > MAX_MEMORY_MB {
            p.at(
                v.span(),
                format!("{key}.memory_mb"),
                format!("must be between 1 and {MAX_MEMORY_MB} (MiB), got {mb}"),
            );
        } else {
            limits.memory_bytes = (mb as usize) << 20;
        }
    }
    if let Some(isolation) = raw.isolation {
        limits.isolation = isolation;
    }
    if let Some(v) = &raw.max_idle_instances {
        let n = *v.get_ref();
        if n == 0 || n > 1024 {
            p.at(
                v.span(),
                format!("{key}.max_idle_instances"),
                format!("must be between 1 and 1024, got {n}"),
            );
        } else {
            limits.max_idle_instances = n as usize;
        }
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(Path::new("/etc/railyard/railyard.toml"), text)
    }

    #[test]
    fn defaults_and_relative_paths() {
        let c = parse("[[plugins]]\nname = \"a\"\npath = \"a.wasm\"\n").unwrap();
        assert_eq!(c.plugins[0].path, Path::new("/etc/railyard/a.wasm"));
        assert_eq!(c.plugins[0].on_error, OnError::Block);
        assert_eq!(c.server.on_block, OnBlock::Refuse);
        assert!(!c.server.allow_rail_overrides);
    }

    #[test]
    fn syntax_error_names_file_and_line() {
        let e = parse("[server]\nlisten = \"x\"\nrefusal = \n").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("/etc/railyard/railyard.toml:3: "),
            "{text}"
        );
    }

    #[test]
    fn unknown_key_is_an_error() {
        let e = parse("[server]\nlistne = \"x\"\n").unwrap_err().to_string();
        assert!(e.contains(":2:") && e.contains("listne"), "{e}");
    }

    #[test]
    fn all_semantic_problems_at_once() {
        let e = parse(
            "[[plugins]]\nname = \"Bad Name\"\npath = \"a.wasm\"\nrails = [\"inptu\"]\ntimeout_ms = 0\n\n[[plugins]]\nname = \"b\"\npath = \"b.wasm\"\nmemory_mb = 99999\n",
        )
        .unwrap_err();
        let keys: Vec<_> = e
            .problems
            .iter()
            .map(|p| (p.line, p.key.as_str()))
            .collect();
        assert_eq!(
            keys,
            vec![
                (Some(2), "plugins[0].name"),
                (Some(4), "plugins[0].rails"),
                (Some(5), "plugins[0].timeout_ms"),
                (Some(10), "plugins[1].memory_mb"),
            ],
            "{e}"
        );
        assert!(e.to_string().contains("unknown rail 'inptu'"));
    }

    #[test]
    fn config_tools_are_checked() {
        let e = parse("[[tools]]\ntype = \"function\"\nfunction = { description = \"x\" }\n")
            .unwrap_err();
        assert!(e.to_string().contains("tools[0].function.name"), "{e}");
    }

    #[test]
    fn keys_and_tenants_are_checked() {
        let hex = "ab".repeat(32);
        let e = parse(&format!(
            "[auth]\n[[auth.keys]]\nsha256 = \"{hex}\"\nprincipal = \"a\"\ntenant = \"nope\"\n\n[[auth.keys]]\nsha256 = \"xyz\"\nprincipal = \" \"\n\n[tenants.t]\nchains = {{ tool_call = [\"ghost\"] }}\nextend = {{ tool_call = [] }}\n\n[backend]\nforward_client_authorization = true\n"
        ))
        .unwrap_err();
        let text = e.to_string();
        for expected in [
            ":5: auth.keys[0].tenant: unknown tenant 'nope' (configured: t)",
            ":8: auth.keys[1].sha256: must be the SHA-256",
            ":9: auth.keys[1].principal: must not be empty",
            "tenants.t.chains.tool_call: no plugin named 'ghost'",
            "both replaced (chains) and extended (extend)",
            "backend.forward_client_authorization: cannot be true while [auth] is on",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
        }
    }

    #[test]
    fn open_without_auth_and_tenant_defaults() {
        let c = parse("[server]\nmax_body_bytes = 100\n[tenants.t]\nmax_concurrent = 3\n").unwrap();
        assert!(c.auth.is_none());
        assert_eq!(c.tenants[0].max_body_bytes, 100);
        assert_eq!(c.tenants[0].max_concurrent, Some(3));
        assert!(parse("[tenants.default]\n")
            .unwrap_err()
            .to_string()
            .contains("reserved"));
    }
}
