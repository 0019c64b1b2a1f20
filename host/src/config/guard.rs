//! `[[guard_models]]`: the models plugins may consult through the guard-models capability, and
//! each plugin entry's grant (`guard_models = [...]`).

use super::raw::{RawGuard, RawGuardModel};
use super::Problems;
use axum::http::{HeaderValue, Uri};
use std::time::Duration;
use toml::Spanned;

/// What a guard model is, which fixes the operation it answers and its wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuardKind {
    /// OpenAI's `/v1/moderations` (and servers that speak it): `moderate`.
    OpenaiModeration,
    /// Llama Guard 3/4 on an OpenAI-compatible chat endpoint: `guard`.
    LlamaGuard,
    /// NVIDIA NemoGuard content safety on an OpenAI-compatible chat endpoint: `guard`.
    Nemoguard,
    /// A text classifier (Hugging Face TEI `/predict`): `classify`.
    Classifier,
    /// A named-entity service (Presidio analyzer `/analyze`): `entities`.
    Entities,
    /// Any OpenAI-compatible chat model, asked for JSON matching a schema: `judge`.
    Judge,
}

impl GuardKind {
    /// Every kind, as written in config.
    pub const EXPECTED: &'static str =
        "openai-moderation, llama-guard, nemoguard, classifier, entities or judge";

    /// As written in config.
    pub fn as_str(self) -> &'static str {
        match self {
            GuardKind::OpenaiModeration => "openai-moderation",
            GuardKind::LlamaGuard => "llama-guard",
            GuardKind::Nemoguard => "nemoguard",
            GuardKind::Classifier => "classifier",
            GuardKind::Entities => "entities",
            GuardKind::Judge => "judge",
        }
    }
}

/// One `[[guard_models]]` entry, resolved.
#[derive(Debug, Clone)]
pub struct GuardModelConfig {
    /// The name plugins ask for it by.
    pub name: String,
    /// What it is.
    pub kind: GuardKind,
    /// Its base URL (`http://host:port/v1`); the kind's path is added to it.
    pub url: Uri,
    /// The model name sent to it, when the kind's wire format names one.
    pub model: Option<String>,
    /// `Authorization: Bearer` from `api_key_env`, read when the config loads.
    pub api_key: Option<HeaderValue>,
    /// Longest wait for an answer, queueing for a connection included.
    pub timeout: Duration,
    /// Calls in flight to it at once, from this process; more wait their turn within the timeout.
    pub max_concurrent: usize,
    /// Answers kept (0: none).
    pub cache_entries: usize,
    /// A classifier's longest input, in characters: longer texts are judged in chunks.
    pub max_input_chars: usize,
}

pub(super) fn ranged(
    p: &mut Problems<'_>,
    v: &Option<Spanned<u64>>,
    key: String,
    range: std::ops::RangeInclusive<u64>,
    default: u64,
) -> u64 {
    match v {
        Some(v) if !range.contains(v.get_ref()) => {
            p.at(
                v.span(),
                key,
                format!("must be between {} and {}", range.start(), range.end()),
            );
            default
        }
        Some(v) => *v.get_ref(),
        None => default,
    }
}

/// Resolve `[[guard_models]]`.
pub(super) fn resolve(
    p: &mut Problems<'_>,
    raw: &[Spanned<RawGuardModel>],
) -> Vec<GuardModelConfig> {
    let mut models: Vec<GuardModelConfig> = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
        let g = entry.get_ref();
        let key = |field: &str| format!("guard_models[{i}].{field}");
        let name = g.name.get_ref();
        if !super::short_name(name) {
            p.at(
                g.name.span(),
                key("name"),
                format!("'{name}' must be 1 to 64 letters, digits, '-' or '_'"),
            );
        } else if models.iter().any(|m| &m.name == name) {
            p.at(
                g.name.span(),
                key("name"),
                format!("'{name}' is used twice"),
            );
        }
        let url = match g.url.get_ref().trim_end_matches('/').parse::<Uri>() {
            Ok(u) if matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some() => {
                Some(u)
            }
            _ => {
                p.at(
                    g.url.span(),
                    key("url"),
                    format!("'{}' is not an http:// or https:// URL", g.url.get_ref()),
                );
                None
            }
        };
        let kind = *g.kind.get_ref();
        let model = g.model.as_ref().map(|m| m.get_ref().clone());
        if model.is_none() && !matches!(kind, GuardKind::Classifier | GuardKind::Entities) {
            p.at(
                entry.span(),
                key("model"),
                format!(
                    "a {} model needs `model`: the name its server knows it by",
                    kind.as_str()
                ),
            );
        }
        let api_key = match &g.api_key_env {
            None => None,
            Some(var) => match std::env::var(var.get_ref()) {
                Err(_) => {
                    p.at(
                        var.span(),
                        key("api_key_env"),
                        format!("environment variable {} is not set", var.get_ref()),
                    );
                    None
                }
                Ok(secret) => match HeaderValue::from_str(&format!("Bearer {secret}")) {
                    Ok(mut v) => {
                        v.set_sensitive(true);
                        Some(v)
                    }
                    Err(_) => {
                        p.at(
                            var.span(),
                            key("api_key_env"),
                            format!("{} holds characters not allowed in a header", var.get_ref()),
                        );
                        None
                    }
                },
            },
        };
        let timeout = ranged(p, &g.timeout_ms, key("timeout_ms"), 1..=600_000, 2_000);
        let max_concurrent = ranged(p, &g.max_concurrent, key("max_concurrent"), 1..=100_000, 64);
        let cache_entries = ranged(
            p,
            &g.cache_entries,
            key("cache_entries"),
            0..=10_000_000,
            10_000,
        );
        let max_input_chars = ranged(
            p,
            &g.max_input_chars,
            key("max_input_chars"),
            64..=10_000_000,
            1_500,
        );
        if let Some(url) = url {
            models.push(GuardModelConfig {
                name: name.clone(),
                kind,
                url,
                model,
                api_key,
                timeout: Duration::from_millis(timeout),
                max_concurrent: max_concurrent as usize,
                cache_entries: cache_entries as usize,
                max_input_chars: max_input_chars as usize,
            });
        }
    }
    models
}

/// `[guard]`: what one request may spend on guard models, across every plugin that judges it.
#[derive(Debug, Clone)]
pub struct GuardBudgetConfig {
    /// Calls (cache hits included).
    pub calls_per_request: u32,
    /// Time waited on them.
    pub wait_per_request: Duration,
    /// What each tenant's requests may spend together per minute, unless its `[tenants.NAME]`
    /// says otherwise.
    pub per_tenant: TenantGuardBudget,
}

/// A tenant's guard-model calls and time waited per minute (each `None`: no limit), in this
/// process: past either, its plugins' calls answer `rate-limited` until the minute ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantGuardBudget {
    /// Calls per minute (cache hits included).
    pub calls: Option<u32>,
    /// Time waited per minute.
    pub wait: Option<Duration>,
}

/// A per-minute limit: 0 is none.
pub(super) fn per_minute(
    p: &mut Problems<'_>,
    v: &Option<Spanned<u64>>,
    key: String,
    most: u64,
) -> Option<u64> {
    Some(ranged(p, v, key, 0..=most, 0)).filter(|&n| n > 0)
}

/// Resolve `[guard]`.
pub(super) fn budget(p: &mut Problems<'_>, raw: &RawGuard) -> GuardBudgetConfig {
    GuardBudgetConfig {
        calls_per_request: ranged(
            p,
            &raw.calls_per_request,
            "guard.calls_per_request".into(),
            1..=100_000,
            32,
        ) as u32,
        wait_per_request: Duration::from_millis(ranged(
            p,
            &raw.wait_ms_per_request,
            "guard.wait_ms_per_request".into(),
            1..=3_600_000,
            10_000,
        )),
        per_tenant: TenantGuardBudget {
            calls: per_minute(
                p,
                &raw.tenant_calls_per_minute,
                "guard.tenant_calls_per_minute".into(),
                100_000_000,
            )
            .map(|n| n as u32),
            wait: per_minute(
                p,
                &raw.tenant_wait_ms_per_minute,
                "guard.tenant_wait_ms_per_minute".into(),
                1_000_000_000,
            )
            .map(Duration::from_millis),
        },
    }
}
