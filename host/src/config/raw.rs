//! `railyard.toml` as written: serde structs with `deny_unknown_fields`, spans kept for line
//! numbers. Nothing here is checked beyond types; `resolve` turns it into a [`super::Config`].

use super::{OnBlock, OnBlockStream};
use crate::model::Isolation;
use crate::model::{Mode, OnError};
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub(super) server: RawServer,
    #[serde(default)]
    pub(super) backend: RawBackend,
    #[serde(default)]
    pub(super) defaults: RawLimits,
    pub(super) auth: Option<Spanned<RawAuth>>,
    #[serde(default)]
    pub(super) admin: RawAdmin,
    #[serde(default)]
    pub(super) tenants: BTreeMap<String, Spanned<RawTenant>>,
    pub(super) cache_dir: Option<String>,
    #[serde(default)]
    pub(super) tools: Vec<Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) plugins: Vec<Spanned<RawPlugin>>,
    #[serde(default)]
    pub(super) mcp: RawMcp,
    #[serde(default)]
    pub(super) provenance: Option<Spanned<RawProvenance>>,
    #[serde(default)]
    pub(super) telemetry: RawTelemetry,
    #[serde(default)]
    pub(super) guard_models: Vec<Spanned<RawGuardModel>>,
    #[serde(default)]
    pub(super) guard: RawGuard,
    #[serde(default)]
    pub(super) state: RawState,
    #[serde(default)]
    pub(super) approvals: RawApprovals,
    #[serde(default)]
    pub(super) pins: super::pins::RawPins,
}

/// `[approvals]`: how long an approval request lives.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApprovals {
    pub(super) ttl_s: Option<Spanned<u64>>,
}

/// `[state]`: the shared state store.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawState {
    pub(super) backend: Option<Spanned<String>>,
    pub(super) url: Option<Spanned<String>>,
    pub(super) key_prefix: Option<String>,
    pub(super) timeout_ms: Option<Spanned<u64>>,
    pub(super) on_unavailable: Option<Spanned<String>>,
}

/// `[guard]`: budgets.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGuard {
    pub(super) calls_per_request: Option<Spanned<u64>>,
    pub(super) wait_ms_per_request: Option<Spanned<u64>>,
    pub(super) tenant_calls_per_minute: Option<Spanned<u64>>,
    pub(super) tenant_wait_ms_per_minute: Option<Spanned<u64>>,
}

/// One `[[guard_models]]` entry.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGuardModel {
    pub(super) name: Spanned<String>,
    pub(super) kind: Spanned<super::guard::GuardKind>,
    pub(super) url: Spanned<String>,
    pub(super) model: Option<Spanned<String>>,
    pub(super) api_key_env: Option<Spanned<String>>,
    pub(super) timeout_ms: Option<Spanned<u64>>,
    pub(super) max_concurrent: Option<Spanned<u64>>,
    pub(super) cache_entries: Option<Spanned<u64>>,
    pub(super) max_input_chars: Option<Spanned<u64>>,
}

/// `[telemetry]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    pub(super) otlp_endpoint: Option<Spanned<String>>,
    pub(super) service_name: Option<String>,
    pub(super) sample_ratio: Option<Spanned<f64>>,
}

/// `[mcp]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    #[serde(default)]
    pub(super) servers: Vec<Spanned<RawMcpServer>>,
    pub(super) allowed_hosts: Option<Vec<Spanned<String>>>,
    pub(super) allowed_origins: Option<Vec<Spanned<String>>>,
}

/// One `[[mcp.servers]]` entry.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcpServer {
    pub(super) name: Spanned<String>,
    pub(super) url: Spanned<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub(super) headers_env: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub(super) forward_headers: Vec<Spanned<String>>,
    pub(super) timeout_ms: Option<Spanned<u64>>,
    pub(super) pins: Option<super::pins::PinMode>,
    #[serde(default)]
    pub(super) trusted_tools: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub(super) listen: Option<String>,
    pub(super) grpc_listen: Option<String>,
    pub(super) refusal: Option<String>,
    pub(super) on_block: Option<OnBlock>,
    pub(super) max_body_bytes: Option<Spanned<u64>>,
    pub(super) allow_rail_overrides: Option<bool>,
    pub(super) stream_window_bytes: Option<Spanned<u64>>,
    pub(super) stream_hold_max_bytes: Option<Spanned<u64>>,
    pub(super) on_block_stream: Option<OnBlockStream>,
    pub(super) unknown_fields: Option<super::UnknownFields>,
    pub(super) max_connections: Option<Spanned<u64>>,
    pub(super) workers: Option<Spanned<u64>>,
    pub(super) header_read_timeout_ms: Option<Spanned<u64>>,
    pub(super) shutdown_delay_ms: Option<u64>,
    pub(super) shutdown_timeout_ms: Option<Spanned<u64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBackend {
    pub(super) url: Option<String>,
    pub(super) timeout_ms: Option<Spanned<u64>>,
    pub(super) api_key_env: Option<String>,
    pub(super) forward_client_authorization: Option<Spanned<bool>>,
    pub(super) anthropic: Option<RawAnthropic>,
}

/// `[backend.anthropic]`: where `/v1/messages` goes.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAnthropic {
    pub(super) url: Option<String>,
    pub(super) api_key_env: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    /// `open = true`: run without keys, said outright (a config without `[auth]` is refused).
    pub(super) open: Option<Spanned<bool>>,
    pub(super) keys_file: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) keys: Vec<Spanned<RawKey>>,
}

/// One key, in `[[auth.keys]]` or a keys file's `[[keys]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKey {
    pub(super) sha256: Spanned<String>,
    pub(super) principal: Spanned<String>,
    pub(super) tenant: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) labels: BTreeMap<String, String>,
    pub(super) requests_per_minute: Option<Spanned<u64>>,
    pub(super) tokens_per_minute: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKeysFile {
    #[serde(default)]
    pub(super) keys: Vec<Spanned<RawKey>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdmin {
    pub(super) listen: Option<String>,
    #[serde(default)]
    pub(super) keys_sha256: Vec<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTenant {
    pub(super) max_body_bytes: Option<Spanned<u64>>,
    pub(super) max_concurrent: Option<Spanned<u64>>,
    #[serde(default)]
    pub(super) chains: BTreeMap<String, Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) extend: BTreeMap<String, Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) modes: BTreeMap<String, Spanned<Mode>>,
    pub(super) requests_per_minute: Option<Spanned<u64>>,
    pub(super) tokens_per_minute: Option<Spanned<u64>>,
    pub(super) guard_calls_per_minute: Option<Spanned<u64>>,
    pub(super) guard_wait_ms_per_minute: Option<Spanned<u64>>,
    #[serde(default)]
    pub(super) pins: super::pins::RawTenantPins,
}

#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) timeout_ms: Option<Spanned<u64>>,
    pub(super) memory_mb: Option<Spanned<u64>>,
    pub(super) isolation: Option<Isolation>,
    pub(super) max_idle_instances: Option<Spanned<u64>>,
    pub(super) on_error: Option<OnError>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlugin {
    pub(super) name: Spanned<String>,
    pub(super) path: Spanned<String>,
    pub(super) rails: Option<Vec<Spanned<String>>>,
    pub(super) on_error: Option<OnError>,
    pub(super) mode: Option<Mode>,
    pub(super) timeout_ms: Option<Spanned<u64>>,
    pub(super) memory_mb: Option<Spanned<u64>>,
    pub(super) isolation: Option<Isolation>,
    pub(super) max_idle_instances: Option<Spanned<u64>>,
    pub(super) models: Option<Vec<Spanned<String>>>,
    pub(super) history: Option<bool>,
    pub(super) declared_tools: Option<bool>,
    pub(super) memo: Option<Spanned<bool>>,
    pub(super) guard_models: Option<Vec<Spanned<String>>>,
    pub(super) parallel: Option<Spanned<bool>>,
    pub(super) state: Option<Spanned<bool>>,
    pub(super) approvals: Option<Spanned<bool>>,
    pub(super) vault: Option<bool>,
    pub(super) config: Option<Spanned<toml::Value>>,
}

/// `[provenance]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvenance {
    pub(super) keys_file: Option<Spanned<String>>,
    pub(super) require: Option<bool>,
    pub(super) max_age_s: Option<Spanned<u64>>,
}

/// A provenance keyring file.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKeyring {
    #[serde(default)]
    pub(super) keys: Vec<Spanned<RawSigningKey>>,
}

/// One signing key: an id and its secret (hex).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSigningKey {
    pub(super) id: Spanned<String>,
    pub(super) secret: Spanned<String>,
}
