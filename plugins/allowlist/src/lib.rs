//! allowlist policy plugin (rails: tool_call, tools).
//!
//! A model can name any tool it likes — a hallucinated one, or one a prompt injection asked for.
//! The application should only ever run tools it offered in this request, and operators often
//! need to narrow that further (a global allow/deny list, and per-principal lists keyed by the
//! principal the daemon authenticated). This plugin blocks the reply when any of its tool calls
//! falls outside those sets, naming each offending call and why; on the `tools` rail it hides the
//! tools outside them, so the model is not offered what the caller may not call.
//!
//! The decision logic lives in [`policy`] so it can be unit-tested natively; this file is only
//! the WIT glue.

pub mod policy;

use railyard_plugin_sdk::{export_policy, Info, PolicyPlugin, Rail, Request, Verdict};

/// The plugin: its parsed config.
pub struct Allowlist {
    config: policy::Config,
}

impl PolicyPlugin for Allowlist {
    fn info() -> Info {
        Info {
            name: "allowlist".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            rails: vec![Rail::ToolCall, Rail::Tools],
            config_schema: Some(policy::CONFIG_SCHEMA.into()),
        }
    }

    fn configure(config: &str) -> Result<Self, String> {
        Ok(Allowlist {
            config: policy::Config::parse(config)?,
        })
    }

    fn evaluate(&mut self, request: &Request) -> Verdict {
        policy::evaluate(&self.config, request)
    }
}

export_policy!(Allowlist);
