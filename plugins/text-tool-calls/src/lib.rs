//! text-tool-calls policy plugin (rail: output).
//!
//! Models served without a tool-call parser (or with the wrong one) write their tool calls as
//! text: `<tool_call>{...}</tool_call>`, `<|python_tag|>{...}`, `<function=f>{...}</function>`,
//! or a bare JSON object. The application then shows the call to the user as prose, and none of
//! the `tool_call` rail's policies ever saw it. This plugin recognises those calls in the
//! model's reply and either turns them into real tool calls (`convert`: the host then judges
//! them on the `tool_call` rail like any other) or refuses the reply (`block`).
//!
//! The logic lives in [`scan`] (finding calls in a text) and [`policy`] (the verdict), both
//! natively unit-tested; this file is only the WIT glue.

pub mod policy;
pub mod scan;

use railyard_plugin_sdk::{export_policy, Info, PolicyPlugin, Rail, Request, Verdict};

/// The plugin: its parsed config.
pub struct TextToolCalls {
    config: policy::Config,
}

impl PolicyPlugin for TextToolCalls {
    fn info() -> Info {
        Info {
            name: "text-tool-calls".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            rails: vec![Rail::Output],
            config_schema: Some(policy::CONFIG_SCHEMA.into()),
        }
    }

    fn configure(config: &str) -> Result<Self, String> {
        Ok(TextToolCalls {
            config: policy::Config::parse(config)?,
        })
    }

    fn evaluate(&mut self, request: &Request) -> Verdict {
        policy::evaluate(&self.config, request)
    }

    fn triggers(&self) -> Option<Vec<String>> {
        Some(scan::TRIGGERS.map(String::from).to_vec())
    }
}

export_policy!(TextToolCalls);
