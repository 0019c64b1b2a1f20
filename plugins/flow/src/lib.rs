//! flow policy plugin (rail: tool_call).
//!
//! The worst agent failures are data-flow failures: text from an untrusted tool (a web page, an
//! email, a file) enters the conversation and steers the model into calling a privileged tool
//! (send an email, move money, delete). This plugin labels tools by name as `untrusted` (their
//! results may carry injected text) and `privileged` (their calls have side effects); once any
//! result of an untrusted tool is in the conversation, a call to a privileged tool is refused.
//!
//! The logic lives in [`policy`] (natively unit-tested); this file is only the WIT glue.

pub mod asks;
pub mod policy;
pub mod private;
pub mod values;

use railyard_plugin_sdk::{export_policy, CallRef, Info, PolicyPlugin, Rail, Request, Verdict};

/// The plugin: its parsed config.
pub struct Flow {
    config: policy::Config,
}

impl PolicyPlugin for Flow {
    fn info() -> Info {
        Info {
            name: "flow".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            rails: vec![Rail::ToolCall],
            config_schema: Some(policy::CONFIG_SCHEMA.into()),
        }
    }

    fn configure(config: &str) -> Result<Self, String> {
        Ok(Flow {
            config: policy::Config::parse(config)?,
        })
    }

    fn evaluate(&mut self, request: &Request) -> Verdict {
        policy::evaluate_asking(&self.config, request, &mut ask)
    }

    fn triggers(&self) -> Option<Vec<String>> {
        policy::triggers(&self.config)
    }
}

/// The host's approvals, asked about a call a rule whose action is `approve` refuses.
fn ask(call: CallRef, rule: &str, reason: &str) -> policy::Asked {
    use railyard_plugin_sdk::approvals::{request, Approval, ApprovalError};
    match request(call, rule, reason) {
        Ok(Approval::Granted(_)) => policy::Asked::Granted,
        Ok(Approval::Pending(id)) => policy::Asked::Pending(id),
        Ok(Approval::Refused(id)) => policy::Asked::Refused(id),
        Err(ApprovalError::Denied(m) | ApprovalError::Unavailable(m)) => policy::Asked::Failed(m),
    }
}

export_policy!(Flow);
