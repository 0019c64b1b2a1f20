//! pii-filter: finds personal data and credentials in LLM traffic and redacts them (or blocks
//! the request), so they don't reach the model provider or come back to the application.
//!
//! The detection, redaction and verdict logic lives in plain modules that test natively; only
//! the component glue below touches the host.

pub mod config;
pub mod detect;
pub mod entities;
pub mod evaluate;
pub mod json;
pub mod memo;
pub mod redact;
pub mod restore;
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

use railyard_plugin_sdk::{export_policy, guard, Info, PolicyPlugin, Rail, Request, Verdict};

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
            rails: vec![
                Rail::Input,
                Rail::Output,
                Rail::ToolResult,
                Rail::Tools,
                Rail::ToolCall,
            ],
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

    fn try_evaluate(&mut self, request: &Request) -> Result<Verdict, String> {
        if self.policy.reversible {
            return redact::with_vault(HostVault, || self.judge(request)).and_then(|v| v);
        }
        self.judge(request)
    }
}

/// The host's vault (contract 0.3's `vault`, granted by `vault = true`).
struct HostVault;

impl redact::Vault for HostVault {
    fn conceal(&mut self, kind: types::PiiType, value: &str) -> Result<String, String> {
        railyard_plugin_sdk::vault::conceal(kind.name(), value).map_err(vault_error)
    }
    fn reveal(&mut self, placeholder: &str) -> Result<Option<String>, String> {
        railyard_plugin_sdk::vault::reveal(placeholder).map_err(vault_error)
    }
    fn conceal_again(&mut self, values: &[redact::Concealed]) -> Result<bool, String> {
        use railyard_plugin_sdk::vault;
        let values: Vec<vault::Concealed> = values
            .iter()
            .map(|c| vault::Concealed {
                kind: c.kind.name().into(),
                value: c.value.to_string(),
                placeholder: c.placeholder.to_string(),
            })
            .collect();
        vault::conceal_again(&values).map_err(vault_error)
    }
}

fn vault_error(e: railyard_plugin_sdk::vault::VaultError) -> String {
    match e {
        railyard_plugin_sdk::vault::VaultError::Denied(m) => {
            format!("`reversible = true` needs the host's vault, which refused: {m}")
        }
    }
}

impl PiiFilter {
    /// The verdict, asking the entities model when one is configured.
    fn judge(&mut self, request: &Request) -> Result<Verdict, String> {
        let Some(e) = self.policy.entities.clone() else {
            return Ok(self.evaluate(request));
        };
        let ask = move |text: &str| {
            let found = guard::entities(&e.model, text, e.language.as_deref()).map_err(|err| {
                format!("the entities model '{}' {}", e.model, guard::describe(&err))
            })?;
            Ok(found
                .into_iter()
                .map(|f| entities::Found {
                    entity_type: f.entity_type,
                    start: f.start as usize,
                    end: f.end as usize,
                    score: f.score,
                })
                .collect())
        };
        let (policy, memo) = (&self.policy, &mut self.memo);
        let verdict = entities::asking(ask, || evaluate::evaluate_with(request, policy, memo));
        if verdict.is_err() {
            // Texts scanned before the error were kept with what the model had found; those
            // after it, without: none may answer a later request.
            self.memo = memo::Memo::new(self.policy.memo_bytes());
        }
        verdict
    }
}

export_policy!(PiiFilter);
