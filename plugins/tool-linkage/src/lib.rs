//! tool-linkage policy plugin (rail: tool_result).
//!
//! Tool results are the application's word that a tool ran and returned something. A result
//! that answers no call, answers one call twice, claims another tool's name, or carries content
//! of the wrong shape is either a bug in the application or an injection (text dressed up as a
//! tool's output). Such conversations are blocked with a reason naming the message and the call
//! id, before the model treats the text as a tool's output.
//!
//! The logic lives in [`policy`] (natively unit-tested); this file is only the WIT glue.

pub mod policy;

use railyard_plugin_sdk::{export_policy, Info, PolicyPlugin, Rail, Request, Verdict};

/// The plugin: its parsed config.
pub struct ToolLinkage {
    config: policy::Config,
}

impl PolicyPlugin for ToolLinkage {
    fn info() -> Info {
        Info {
            name: "tool-linkage".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            rails: vec![Rail::ToolResult],
            config_schema: Some(policy::CONFIG_SCHEMA.into()),
        }
    }

    fn configure(config: &str) -> Result<Self, String> {
        Ok(ToolLinkage {
            config: policy::Config::parse(config)?,
        })
    }

    fn evaluate(&mut self, request: &Request) -> Verdict {
        policy::evaluate(&self.config, request)
    }
}

export_policy!(ToolLinkage);
