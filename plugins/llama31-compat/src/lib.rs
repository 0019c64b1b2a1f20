//! llama31-compat policy plugin (rail: input, verdict: modify).
//!
//! Llama 3.1's chat template takes one tool call per assistant turn: a conversation whose history
//! holds an assistant message with parallel tool calls is refused by the serving stack ("This
//! model only supports single tool-calls at once!"). For the models it is configured for, this
//! plugin rewrites each such turn that has been answered: the calls are removed from the
//! assistant message (which says in words which tools it called) and the tool results that
//! answer them become one user message, one line per result.
//!
//! The logic lives in [`policy`] (natively unit-tested); this file is only the WIT glue.

pub mod policy;

use railyard_plugin_sdk::{export_policy, Info, PolicyPlugin, Rail, Request, Verdict};

/// The plugin: its parsed config.
pub struct Llama31Compat {
    config: policy::Config,
}

impl PolicyPlugin for Llama31Compat {
    fn info() -> Info {
        Info {
            name: "llama31-compat".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            rails: vec![Rail::Input],
            config_schema: Some(policy::CONFIG_SCHEMA.into()),
        }
    }

    fn configure(config: &str) -> Result<Self, String> {
        Ok(Llama31Compat {
            config: policy::Config::parse(config)?,
        })
    }

    fn evaluate(&mut self, request: &Request) -> Verdict {
        policy::evaluate(&self.config, request)
    }
}

export_policy!(Llama31Compat);
