//! normalise policy plugin (rail: tool_call, verdict: modify).
//!
//! Models often get argument *types* slightly wrong in ways whose intent is unambiguous given
//! the tool's declared schema: `"true"` for a boolean, `"3"` for an integer, a lone value where
//! an array is declared. Blocking those calls (schema-validator would) costs a round trip for
//! nothing, so this plugin runs before the validator and repairs exactly those cases, guided by
//! the schema, and nothing else. Opt-in per tool, it also adds what a model reliably leaves out:
//! a required argument derived from another (`fill`), and an argument's other name (`aliases`).
//! What it changes is listed by path in the reason, never by value.
//!
//! The logic lives in [`policy`] and the schema walk in `plan` (natively unit-tested); this file
//! is only the WIT glue.

mod plan;
pub mod policy;

use railyard_plugin_sdk::{export_policy, Info, PolicyPlugin, Rail, Request, Verdict};

/// The plugin: its parsed config, and the schemas it has parsed.
pub struct Normalise {
    config: policy::Config,
    schemas: policy::Schemas,
}

impl PolicyPlugin for Normalise {
    fn info() -> Info {
        Info {
            name: "normalise".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            rails: vec![Rail::ToolCall],
            config_schema: Some(policy::CONFIG_SCHEMA.into()),
        }
    }

    fn configure(config: &str) -> Result<Self, String> {
        Ok(Normalise {
            config: policy::Config::parse(config)?,
            schemas: policy::Schemas::default(),
        })
    }

    fn evaluate(&mut self, request: &Request) -> Verdict {
        policy::evaluate(&self.config, &mut self.schemas, request)
    }
}

export_policy!(Normalise);
