//! The approvals capability as a plugin instance reaches it (contract 0.3): refused outright for a
//! plugin run synchronously (it is granted nothing), and through the plugin's grant for one whose
//! entry says `approvals = true`, about a call of the reply it judges on the `tool_call` rail,
//! waiting on the store without blocking the worker (the wait is given back to its deadline).
//! Each request made, found or spent is noted in the request's ledger for the client's refusal.

use super::HostState;
use crate::approvals::{Answer, Ask};
use crate::engine::bindings::{approvals as a, approvals_async as aa, wit};
use std::sync::Arc;

const NOT_GRANTED: &str =
    "this plugin is not granted approvals: its entry needs `approvals = true`";

/// What a call may ask about: the reply under judgement, on the `tool_call` rail.
pub(crate) struct Asking {
    pub(crate) tenant: String,
    pub(crate) principal: Option<String>,
    pub(crate) ledger: Option<Arc<crate::util::ApprovalLedger>>,
    /// The reply's index in the request the plugin was given.
    pub(crate) reply: u32,
    /// The reply's calls: id, tool, arguments.
    pub(crate) calls: Vec<(String, String, String)>,
    /// The MCP server the calls go to (`None`: a model door's).
    pub(crate) server: Option<String>,
}

impl a::Host for HostState {
    fn request(
        &mut self,
        _call: wit::CallRef,
        _rule: String,
        _reason: String,
    ) -> Result<a::Approval, a::ApprovalError> {
        Err(a::ApprovalError::Denied(NOT_GRANTED.into()))
    }
}

impl aa::Host for HostState {
    async fn request(
        &mut self,
        call: wit::CallRef,
        rule: String,
        reason: String,
    ) -> Result<aa::Approval, aa::ApprovalError> {
        let denied = |m: &str| Err(aa::ApprovalError::Denied(m.to_string()));
        let Some(grant) = self.guard.grant.approvals.clone() else {
            return denied(NOT_GRANTED);
        };
        if !self.guard.open {
            return denied("approvals may be asked in evaluate only");
        }
        let Some(asking) = &self.guard.asking else {
            return denied(
                "approvals are asked about the calls of the reply, on the tool_call rail",
            );
        };
        let found = (call.message == asking.reply)
            .then(|| asking.calls.get(call.call as usize))
            .flatten()
            .cloned();
        let Some((id, tool, arguments)) = found else {
            return denied(&format!(
                "message {} call {} is not a call of the reply under judgement",
                call.message, call.call
            ));
        };
        if rule.is_empty() || rule.len() > 64 {
            return denied("a rule's name is 1 to 64 bytes");
        }
        let (tenant, principal, ledger, server) = (
            asking.tenant.clone(),
            asking.principal.clone(),
            asking.ledger.clone(),
            asking.server.clone(),
        );
        let ask = Ask {
            tenant: &tenant,
            principal: principal.as_deref(),
            rule: &rule,
            reason: &reason,
            call_id: &id,
            tool: &tool,
            server: server.as_deref(),
            arguments: &arguments,
        };
        let (answer, request) = self
            .waiting(grant.ask(&ask))
            .await
            .map_err(|e| aa::ApprovalError::Unavailable(e.0.to_string()))?;
        if let Some(ledger) = ledger {
            ledger.note(request.shown());
        }
        Ok(match answer {
            Answer::Granted(id) => aa::Approval::Granted(id),
            Answer::Pending(id) => aa::Approval::Pending(id),
            Answer::Refused(id) => aa::Approval::Refused(id),
            Answer::Full => {
                return Err(aa::ApprovalError::Denied(format!(
                    "this caller has {} approval requests undecided: no more are filed until some are decided or expire",
                    crate::approvals::MAX_ASKED
                )))
            }
        })
    }
}
