//! schema-validator policy plugin (rails: tool_call, tool_result).
//!
//! Applications hand tool arguments straight to code. A model that gets them wrong — a missing
//! required field, a string where a number is needed, malformed JSON, fields the tool does not
//! take — should be stopped here with a reason naming the tool and the failing path, not deep
//! inside the application. Every call of the model's reply is validated against the
//! `parameters` JSON Schema its tool declared; anything that cannot be validated is blocked.
//!
//! On the `tool_result` rail, results of tools that declare a result schema (an MCP tool's
//! `outputSchema`, a config tool's `result_schema`) are validated against it ([`results`]).
//!
//! The logic lives in [`policy`] and [`results`] (natively unit-tested); this file is only the WIT glue plus the
//! per-instance cache of compiled validators.

pub mod policy;
pub mod results;

use railyard_plugin_sdk::{export_policy, Info, PolicyPlugin, Rail, Request, Verdict};

/// The plugin: its parsed config, plus caches.
pub struct SchemaValidator {
    config: policy::Config,
    /// Compiling a schema costs milliseconds; the same tools come back on every request.
    cache: policy::SchemaCache,
}

impl PolicyPlugin for SchemaValidator {
    fn info() -> Info {
        Info {
            name: "schema-validator".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            rails: vec![Rail::ToolCall, Rail::ToolResult],
            config_schema: Some(policy::CONFIG_SCHEMA.into()),
        }
    }

    fn configure(config: &str) -> Result<Self, String> {
        Ok(SchemaValidator {
            config: policy::Config::parse(config)?,
            cache: policy::SchemaCache::default(),
        })
    }

    fn evaluate(&mut self, request: &Request) -> Verdict {
        match request.rail {
            Rail::ToolResult => results::evaluate(&self.config, &mut self.cache, request),
            _ => policy::evaluate(&self.config, &mut self.cache, request),
        }
    }
}

export_policy!(SchemaValidator);
