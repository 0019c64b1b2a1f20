//! `[pins]`: tool definitions pinned per tenant and source (an MCP server, or the app behind an
//! API key on the model doors), and how a tool seen for the first time is taken.

use serde::Deserialize;

/// How a source's tools are pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PinMode {
    /// Not pinned: every definition is offered as it comes.
    #[default]
    Off,
    /// The first definition seen of a tool is pinned as it is; a later change is held.
    TrustOnFirstUse,
    /// Only tools listed in config (`trusted_tools`) are pinned at first sight; any other new
    /// tool, like any change, is held until a person accepts it.
    Listed,
}

impl PinMode {
    /// As written in config.
    pub fn as_str(self) -> &'static str {
        match self {
            PinMode::Off => "off",
            PinMode::TrustOnFirstUse => "trust_on_first_use",
            PinMode::Listed => "listed",
        }
    }
}

/// `[pins]`, resolved.
#[derive(Debug, Clone, Default)]
pub struct PinsConfig {
    /// MCP servers' tools, unless a server or tenant says otherwise.
    pub mcp: PinMode,
    /// The tools an app declares on the model doors, pinned per tenant and principal.
    pub models: PinMode,
    /// On the model doors, the tools `listed` trusts at first sight.
    pub trusted_tools: Vec<String>,
}

/// A tenant's own `pins = { ... }`: what it sets replaces `[pins]` (and a server's `pins`) for
/// its requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantPins {
    /// In place of `[pins] mcp` and the servers' `pins`.
    pub mcp: Option<PinMode>,
    /// In place of `[pins] models`.
    pub models: Option<PinMode>,
}

/// `[pins]` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPins {
    pub(super) mcp: Option<PinMode>,
    pub(super) models: Option<PinMode>,
    #[serde(default)]
    pub(super) trusted_tools: Vec<String>,
}

/// A tenant's `pins` as written.
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTenantPins {
    pub(super) mcp: Option<PinMode>,
    pub(super) models: Option<PinMode>,
}

impl RawPins {
    pub(super) fn resolve(&self) -> PinsConfig {
        PinsConfig {
            mcp: self.mcp.unwrap_or_default(),
            models: self.models.unwrap_or_default(),
            trusted_tools: self.trusted_tools.clone(),
        }
    }
}

impl RawTenantPins {
    pub(super) fn resolve(&self) -> TenantPins {
        TenantPins {
            mcp: self.mcp,
            models: self.models,
        }
    }
}
