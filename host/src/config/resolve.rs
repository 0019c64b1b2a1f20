//! From what the file says to what the daemon uses: limits with their ranges, tenants and their
//! chains, plugins; every problem recorded with its line, all reported at once.

use super::raw::{RawConfig, RawLimits, RawPlugin, RawTenant};
use super::{
    AnthropicBackend, BackendConfig, PluginConfig, Problems, ServerConfig, StartupConfig,
    TelemetryConfig, TenantConfig, MAX_MEMORY_MB, MAX_TIMEOUT_MS,
};
use crate::model::Limits;
use crate::model::{Rail, ToolDef};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use toml::Spanned;

/// What a stream may hold without releasing any of it, by default: far more than any secret or
/// value a policy looks for, little enough that judging it again as it grows stays cheap.
const STREAM_HOLD_MAX_BYTES: usize = 64 << 10;

/// `[server]`, `[backend]`, `[admin] listen` and `cache_dir`: the start-up settings and the
/// reloadable server ones.
pub(super) fn server(
    p: &mut Problems<'_>,
    raw: &RawConfig,
    base: &Path,
) -> (StartupConfig, ServerConfig) {
    let max_body_bytes = positive(
        p,
        &raw.server.max_body_bytes,
        "server.max_body_bytes",
        4 << 20,
    ) as usize;
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
    let stream_hold_max_bytes = match &raw.server.stream_hold_max_bytes {
        Some(v) if !(4 * stream_window_bytes as u64..=(16 << 20)).contains(v.get_ref()) => {
            p.at(
                v.span(),
                "server.stream_hold_max_bytes",
                format!(
                    "must be between 4 times stream_window_bytes ({}) and 16777216, got {}",
                    4 * stream_window_bytes,
                    v.get_ref()
                ),
            );
            STREAM_HOLD_MAX_BYTES
        }
        Some(v) => *v.get_ref() as usize,
        None => STREAM_HOLD_MAX_BYTES.max(4 * stream_window_bytes),
    };
    let server = ServerConfig {
        refusal: raw
            .server
            .refusal
            .clone()
            .unwrap_or_else(|| "I can't help with that request.".into()),
        on_block: raw.server.on_block.unwrap_or_default(),
        on_block_stream: raw.server.on_block_stream.unwrap_or_default(),
        max_body_bytes,
        allow_rail_overrides: raw.server.allow_rail_overrides.unwrap_or(false),
        stream_window_bytes,
        stream_hold_max_bytes,
        unknown_fields: raw.server.unknown_fields.unwrap_or_default(),
    };
    let timeout = Duration::from_millis(positive(
        p,
        &raw.backend.timeout_ms,
        "backend.timeout_ms",
        60_000,
    ));
    let url = raw
        .backend
        .url
        .clone()
        .unwrap_or_else(|| "http://127.0.0.1:8000/v1".into())
        .trim_end_matches('/')
        .to_string();
    let anthropic = raw.backend.anthropic.as_ref();
    let backend = BackendConfig {
        anthropic: AnthropicBackend {
            url: anthropic
                .and_then(|a| a.url.clone())
                .map(|u| u.trim_end_matches('/').to_string())
                .unwrap_or_else(|| url.clone()),
            api_key_env: anthropic.and_then(|a| a.api_key_env.clone()),
        },
        url,
        timeout,
        api_key_env: raw.backend.api_key_env.clone(),
        forward_client_authorization: raw
            .backend
            .forward_client_authorization
            .as_ref()
            .is_some_and(|f| *f.get_ref()),
    };
    let cache_dir = match &raw.cache_dir {
        Some(dir) if dir.is_empty() => None,
        Some(dir) => Some(base.join(dir)),
        None => crate::util::default_cache_dir(),
    };
    let max_connections = positive(
        p,
        &raw.server.max_connections,
        "server.max_connections",
        4096,
    ) as usize;
    let workers = match &raw.server.workers {
        Some(w) if *w.get_ref() > 1024 => {
            p.at(
                w.span(),
                "server.workers",
                format!("must be at most 1024 (0: one per CPU), got {}", w.get_ref()),
            );
            0
        }
        Some(w) => *w.get_ref() as usize,
        None => 0,
    };
    let header_read_timeout = Duration::from_millis(positive(
        p,
        &raw.server.header_read_timeout_ms,
        "server.header_read_timeout_ms",
        30_000,
    ));
    let shutdown_delay = Duration::from_millis(raw.server.shutdown_delay_ms.unwrap_or(0));
    let shutdown_timeout = Duration::from_millis(positive(
        p,
        &raw.server.shutdown_timeout_ms,
        "server.shutdown_timeout_ms",
        30_000,
    ));
    let t = &raw.telemetry;
    let telemetry = match &t.otlp_endpoint {
        None => None,
        Some(url) => {
            let endpoint = url.get_ref().trim();
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                p.at(
                    url.span(),
                    "telemetry.otlp_endpoint",
                    format!("'{endpoint}' is not an http:// or https:// URL (e.g. http://127.0.0.1:4317, an OTLP/gRPC collector)"),
                );
            }
            let sample_ratio = match &t.sample_ratio {
                Some(r) if !(0.0..=1.0).contains(r.get_ref()) => {
                    p.at(
                        r.span(),
                        "telemetry.sample_ratio",
                        format!("must be between 0 and 1, got {}", r.get_ref()),
                    );
                    1.0
                }
                Some(r) => *r.get_ref(),
                None => 1.0,
            };
            Some(TelemetryConfig {
                otlp_endpoint: endpoint.to_string(),
                service_name: t.service_name.clone().unwrap_or_else(|| "railyard".into()),
                sample_ratio,
            })
        }
    };
    let state = state(p, &raw.state);
    let startup = StartupConfig {
        listen: raw
            .server
            .listen
            .clone()
            .unwrap_or_else(|| "127.0.0.1:8080".into()),
        grpc_listen: raw.server.grpc_listen.clone().filter(|g| !g.is_empty()),
        admin_listen: raw.admin.listen.clone().filter(|l| !l.is_empty()),
        backend,
        cache_dir,
        max_connections,
        workers,
        header_read_timeout,
        shutdown_delay,
        shutdown_timeout,
        telemetry,
        state,
    };
    (startup, server)
}

/// `[[tools]]`: declared like a request's `tools`, plus an optional `result_schema` (the JSON
/// Schema the tool's results must match, checked on the tool_result rail by schema-validator).
pub(super) fn tools(p: &mut Problems<'_>, raw: &[Spanned<toml::Value>]) -> Vec<ToolDef> {
    let mut tools = Vec::new();
    for (i, tool) in raw.iter().enumerate() {
        let key = format!("tools[{i}]");
        match serde_json::to_value(tool.get_ref()) {
            Ok(json) => match ToolDef::from_openai(&json, &key) {
                Ok(mut t) => match json.get("result_schema") {
                    None => tools.push(t),
                    Some(schema @ (serde_json::Value::Object(_) | serde_json::Value::Bool(_)))
                        if &*t.kind == "function" =>
                    {
                        t.result_schema = Some(crate::model::Schema::of(schema));
                        tools.push(t);
                    }
                    Some(_) if &*t.kind != "function" => p.at(
                        tool.span(),
                        format!("{key}.result_schema"),
                        "only function tools declare a result schema",
                    ),
                    Some(_) => p.at(
                        tool.span(),
                        format!("{key}.result_schema"),
                        "must be a JSON Schema (a table or a boolean)",
                    ),
                },
                Err(e) => p.at(tool.span(), e.path, e.message),
            },
            Err(e) => p.at(tool.span(), key, e.to_string()),
        }
    }
    tools
}

/// A setting that must be greater than 0 (`default` when absent, or when 0, which is then a
/// problem).
fn positive(p: &mut Problems<'_>, v: &Option<Spanned<u64>>, key: &str, default: u64) -> u64 {
    match v {
        Some(v) if *v.get_ref() == 0 => {
            p.at(v.span(), key, "must be greater than 0");
            default
        }
        Some(v) => *v.get_ref(),
        None => default,
    }
}

pub(super) fn resolve_tenants(
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
        let max_body_bytes = positive(
            p,
            &t.max_body_bytes,
            &format!("{key}.max_body_bytes"),
            default_body as u64,
        ) as usize;
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
                    p.at(
                        ids.span(),
                        format!("{key}.{what}"),
                        format!("unknown rail '{rail_name}' (expected {})", Rail::EXPECTED),
                    );
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
        let mut modes = Vec::new();
        for (id, mode) in &t.modes {
            if !plugins.iter().any(|pc| &pc.name == id) {
                p.at(
                    mode.span(),
                    format!("{key}.modes.{id}"),
                    format!("no plugin named '{id}' in [[plugins]]"),
                );
            }
            modes.push((id.clone(), *mode.get_ref()));
        }
        let requests_per_minute = super::per_minute_limit(
            p,
            &t.requests_per_minute,
            format!("{key}.requests_per_minute"),
            super::MOST_REQUESTS_PER_MINUTE,
        );
        let tokens_per_minute = super::per_minute_limit(
            p,
            &t.tokens_per_minute,
            format!("{key}.tokens_per_minute"),
            super::MOST_TOKENS_PER_MINUTE,
        );
        // Given, 0 is "no limit" (not the `[guard]` default): `TenantConfig::guard_budget`.
        let guard_calls_per_minute = t.guard_calls_per_minute.as_ref().map(|_| {
            let key = format!("{key}.guard_calls_per_minute");
            super::guard::ranged(p, &t.guard_calls_per_minute, key, 0..=100_000_000, 0) as u32
        });
        let guard_wait_per_minute = t.guard_wait_ms_per_minute.as_ref().map(|_| {
            let key = format!("{key}.guard_wait_ms_per_minute");
            let ms =
                super::guard::ranged(p, &t.guard_wait_ms_per_minute, key, 0..=1_000_000_000, 0);
            Duration::from_millis(ms)
        });
        tenants.push(TenantConfig {
            name: name.clone(),
            max_body_bytes,
            max_concurrent,
            chains,
            extend,
            modes,
            requests_per_minute,
            tokens_per_minute,
            guard_calls_per_minute,
            guard_wait_per_minute,
            pins: t.pins.resolve(),
            line: super::line_of(p.text, entry.span().start),
        });
    }
    tenants.sort_by_key(|t| t.line);
    tenants
}

pub(super) fn resolve_limits(
    p: &mut Problems<'_>,
    key: &str,
    raw: &RawLimits,
    base: &Limits,
) -> Limits {
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

/// `[[plugins]]`, with limits over `defaults`; relative paths are taken from `base`.
pub(super) fn resolve_plugins(
    p: &mut Problems<'_>,
    raw: &[Spanned<RawPlugin>],
    defaults: &Limits,
    default_on_error: crate::model::OnError,
    base: &std::path::Path,
    guard_models: &[super::GuardModelConfig],
) -> Vec<PluginConfig> {
    let text = p.text;
    let mut plugins: Vec<PluginConfig> = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
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
                    Some(rail) if rails.contains(&rail) => p.at(
                        r.span(),
                        format!("{key}.rails"),
                        format!("rail '{rail}' is listed twice"),
                    ),
                    Some(rail) => rails.push(rail),
                    None => p.at(
                        r.span(),
                        format!("{key}.rails"),
                        format!(
                            "unknown rail '{}' (expected {})",
                            r.get_ref(),
                            Rail::EXPECTED
                        ),
                    ),
                }
            }
            rails
        });
        let limits = resolve_limits(
            p,
            &key,
            &RawLimits {
                timeout_ms: raw.timeout_ms.clone(),
                memory_mb: raw.memory_mb.clone(),
                isolation: raw.isolation,
                max_idle_instances: raw.max_idle_instances.clone(),
                on_error: None,
            },
            defaults,
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
        let mut models = Vec::new();
        for m in raw.models.iter().flatten() {
            if m.get_ref().trim().is_empty() {
                p.at(
                    m.span(),
                    format!("{key}.models"),
                    "a model pattern must not be empty",
                );
            }
            models.push(m.get_ref().clone());
        }
        if raw.models.as_ref().is_some_and(|m| m.is_empty()) {
            p.at(
                span.clone(),
                format!("{key}.models"),
                "an empty list would never run the plugin; leave `models` out to run it for every model",
            );
        }
        let mut granted: Vec<String> = Vec::new();
        for g in raw.guard_models.iter().flatten() {
            let wanted = g.get_ref();
            if granted.contains(wanted) {
                p.at(
                    g.span(),
                    format!("{key}.guard_models"),
                    format!("'{wanted}' is listed twice"),
                );
            } else if !guard_models.iter().any(|m| &m.name == wanted) {
                let configured = match guard_models.len() {
                    0 => "there is no [[guard_models]] entry".to_string(),
                    _ => format!(
                        "configured: {}",
                        guard_models
                            .iter()
                            .map(|m| m.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                p.at(
                    g.span(),
                    format!("{key}.guard_models"),
                    format!("'{wanted}' is not a configured guard model ({configured})"),
                );
            }
            granted.push(wanted.clone());
        }
        let parallel = raw.parallel.as_ref().is_some_and(|v| *v.get_ref());
        if let Some(v) = raw.parallel.as_ref().filter(|_| parallel) {
            // Beside the backend call only waiting pays: a plugin that never waits takes
            // microseconds, and could have changed the request had it run before.
            if granted.is_empty() {
                p.at(
                    v.span(),
                    format!("{key}.parallel"),
                    "only a plugin granted guard models waits long enough to run beside the backend call; grant it `guard_models` or leave `parallel` out",
                );
            }
            if rails.as_ref().is_some_and(|r| !r.contains(&Rail::Input)) {
                p.at(
                    v.span(),
                    format!("{key}.parallel"),
                    "`parallel` applies to the input rail, which this entry does not run",
                );
            }
        }
        // A memoised verdict would answer without reaching the capability.
        let memo = raw.memo.as_ref().is_some_and(|m| *m.get_ref());
        for (flag, name, why) in [
            (&raw.state, "state", "a plugin with state cannot have `memo = true`: a memoised verdict would answer without reaching the state (a counter would not count)"),
            (&raw.approvals, "approvals", "a plugin that asks for approvals cannot have `memo = true`: a memoised verdict would answer without asking (a grant would never be spent)"),
        ] {
            if let Some(v) = flag.as_ref().filter(|v| memo && *v.get_ref()) {
                p.at(v.span(), format!("{key}.{name}"), why);
            }
        }
        let state = raw.state.as_ref().is_some_and(|v| *v.get_ref());
        let approvals = raw.approvals.as_ref().is_some_and(|v| *v.get_ref());
        let plugin_path = raw.path.get_ref();
        if plugin_path.is_empty() {
            p.at(raw.path.span(), format!("{key}.path"), "must not be empty");
        }
        plugins.push(PluginConfig {
            name,
            path: base.join(plugin_path),
            rails,
            on_error: raw.on_error.unwrap_or(default_on_error),
            mode: raw.mode.unwrap_or_default(),
            models,
            history: raw.history.unwrap_or(true),
            declared_tools: raw.declared_tools.unwrap_or(true),
            memo: raw.memo.as_ref().is_some_and(|m| *m.get_ref()),
            guard_models: granted,
            parallel,
            state,
            approvals,
            vault: raw.vault.unwrap_or(false),
            parallel_line: raw
                .parallel
                .as_ref()
                .map(|v| super::line_of(text, v.span().start)),
            memo_line: raw
                .memo
                .as_ref()
                .map(|m| super::line_of(text, m.span().start)),
            limits,
            config,
            line: super::line_of(text, span.start),
            config_line: raw
                .config
                .as_ref()
                .map(|c| super::line_of(text, c.span().start)),
        });
    }

    plugins
}

/// Resolve `[state]`.
fn state(p: &mut Problems<'_>, raw: &super::raw::RawState) -> super::StateConfig {
    let mut out = super::StateConfig::default();
    let backend = raw
        .backend
        .as_ref()
        .map(|b| (b.get_ref().as_str(), b.span()));
    match backend {
        None | Some(("memory", _)) => {
            if let Some(url) = &raw.url {
                p.at(
                    url.span(),
                    "state.url",
                    "the memory backend has no url: set backend = \"redis\" to use one",
                );
            }
        }
        Some(("redis", span)) => match &raw.url {
            None => p.at(
                span,
                "state.url",
                "backend = \"redis\" needs a url, e.g. \"redis://127.0.0.1:6379/0\"",
            ),
            Some(url) => {
                let text = url.get_ref().trim();
                match redis::Client::open(text) {
                    Ok(_) => out.redis_url = Some(text.to_string()),
                    Err(e) => p.at(
                        url.span(),
                        "state.url",
                        format!("'{text}' is not a Redis URL ({e}); e.g. redis://127.0.0.1:6379/0 or rediss:// for TLS"),
                    ),
                }
            }
        },
        Some((other, span)) => p.at(
            span,
            "state.backend",
            format!("unknown backend '{other}' (expected memory or redis)"),
        ),
    }
    if let Some(prefix) = &raw.key_prefix {
        out.key_prefix = prefix.clone();
    }
    if let Some(t) = &raw.timeout_ms {
        match *t.get_ref() {
            1..=60_000 => out.timeout = Duration::from_millis(*t.get_ref()),
            _ => p.at(t.span(), "state.timeout_ms", "must be between 1 and 60000"),
        }
    }
    if let Some(o) = &raw.on_unavailable {
        match o.get_ref().as_str() {
            "closed" => out.fail_open = false,
            "open" => out.fail_open = true,
            other => p.at(
                o.span(),
                "state.on_unavailable",
                format!("unknown value '{other}' (expected closed or open)"),
            ),
        }
    }
    out
}
