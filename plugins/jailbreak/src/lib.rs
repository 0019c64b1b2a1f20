//! jailbreak policy plugin (rails: input, tool_result).
//!
//! Asks a classifier the operator configured (`[[guard_models]]` of kind `classifier`, granted to
//! this entry: Prompt Guard, a DeBERTa injection model on Hugging Face TEI) whether the user's
//! last turn (input rail) or each tool result (tool_result rail: indirect injection, instructions
//! hidden in what a tool fetched) is an injection or a jailbreak. A text whose label is one of
//! `labels` at `threshold` or above is blocked (input) or replaced with a refusal (tool results,
//! `action = "reject"`: the conversation goes on without the poisoned result). Long texts are
//! judged in chunks by the host, never cut. A classifier that cannot answer is an error: the
//! entry's `on_error` decides.

pub mod policy;

use railyard_plugin_sdk::guard;
use railyard_plugin_sdk::{export_policy, Info, PolicyPlugin, Rail, Request, Verdict};

/// The plugin: its parsed config.
pub struct Jailbreak {
    config: policy::Config,
}

/// The host's guard models.
struct Host;

impl policy::Classify for Host {
    fn classify(
        &mut self,
        model: &str,
        texts: &[String],
    ) -> Result<Vec<Vec<(String, f32)>>, String> {
        let labels = guard::classify(model, texts).map_err(|e| guard::describe(&e))?;
        Ok(labels
            .into_iter()
            .map(|per_text| per_text.into_iter().map(|l| (l.label, l.score)).collect())
            .collect())
    }
}

impl PolicyPlugin for Jailbreak {
    fn info() -> Info {
        Info {
            name: "jailbreak".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            rails: vec![Rail::Input, Rail::ToolResult],
            config_schema: Some(policy::CONFIG_SCHEMA.into()),
        }
    }

    fn configure(config: &str) -> Result<Self, String> {
        Ok(Jailbreak {
            config: policy::Config::parse(config)?,
        })
    }

    fn evaluate(&mut self, request: &Request) -> Verdict {
        self.try_evaluate(request)
            .unwrap_or_else(|e| Verdict::Block(format!("injections could not be looked for: {e}")))
    }

    fn try_evaluate(&mut self, request: &Request) -> Result<Verdict, String> {
        policy::evaluate(&self.config, request, &mut Host)
    }
}

export_policy!(Jailbreak);
