//! pii-filter: finds personal data and credentials in LLM traffic and redacts them (or blocks
//! the request), so they don't reach the model provider or come back to the application.
//!
//! The detection, redaction and verdict logic lives in plain modules that test natively; only
//! the component glue below touches the host.

pub mod config;
pub mod detect;
pub mod evaluate;
pub mod json;
pub mod memo;
pub mod redact;
pub mod types;
pub mod validate;

#[cfg(test)]
mod dataset;
#[cfg(test)]
mod quality;
#[cfg(test)]
mod realtext;
#[cfg(test)]
mod throughput;

use railyard_plugin_sdk::{export_policy, Info, PolicyPlugin, Rail, Request, Verdict};

/// The plugin: the policy this instance was configured with.
pub struct PiiFilter {
    policy: config::Policy,
    /// Texts of earlier requests and what their scans gave (`memo.rs`).
    memo: memo::Memo,
}

impl PolicyPlugin for PiiFilter {
    fn info() -> Info {
        Info {
            name: "pii-filter".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            rails: vec![Rail::Input, Rail::Output, Rail::ToolResult, Rail::Tools],
            config_schema: Some(config::schema()),
        }
    }

    fn configure(config: &str) -> Result<Self, String> {
        let policy = config::Policy::from_json(config)?;
        #[cfg(target_arch = "wasm32")]
        railyard_plugin_sdk::log(
            railyard_plugin_sdk::Level::Info,
            &format!("configured: {}", policy.summary()),
        );
        let memo = memo::Memo::new(policy.memo_bytes());
        Ok(PiiFilter { policy, memo })
    }

    fn evaluate(&mut self, request: &Request) -> Verdict {
        evaluate::evaluate_with(request, &self.policy, &mut self.memo)
    }
}

export_policy!(PiiFilter);
