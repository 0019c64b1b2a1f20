//! The pins' step of the `tools` rail (`crate::pins`): before the chain, the tools whose
//! definitions are not pinned are hidden (`hidden_by = "pins"`), so every plugin after sees them
//! hidden and a call to one is answered as for any hidden tool; their approval requests go to
//! the client with the answer (`railyard.approvals`) and the record names the step.

use super::RequestScope;
use crate::model::{Decided, Rail, ToolDef};
use crate::pins::{Declared, PinMode, Pinning};
use crate::state::Unavailable;
use std::time::Instant;

/// The name the step goes by in records and `hidden_by`.
pub const PINS: &str = crate::pins::PLUGIN;

impl RequestScope {
    /// Whether `server`'s tools are pinned for this request's tenant.
    pub fn pins_mcp(&self, server: &str) -> bool {
        self.set.config().pins_mcp(self.tenant_name(), server).0 != PinMode::Off
    }

    /// Hold the tools of MCP server `server` whose definitions are not pinned (whether any was).
    /// `declared`: the list's entries as pins read them; `complete`: it is the server's whole
    /// list.
    pub async fn pin_mcp(
        &mut self,
        server: &str,
        tools: &mut [ToolDef],
        declared: &[Declared],
        complete: bool,
    ) -> Result<bool, Unavailable> {
        let set = self.set.clone();
        let config = set.config();
        let tenant = self.tenant_name().to_string();
        let (mode, trusted) = config.pins_mcp(&tenant, server);
        let others: Vec<String> = config.mcp.servers.iter().map(|s| s.name.clone()).collect();
        let pinning = Pinning {
            tenant: &tenant,
            source: server,
            mode,
            trusted,
            complete,
            others: &others,
            approvals_ttl: config.approvals_ttl,
        };
        self.pin(&pinning, tools, declared).await
    }

    /// Hold the tools an app declares on a model door that are not pinned (for the tenant and
    /// the caller's principal), when its tenant pins them.
    pub(super) async fn pin_models(&mut self, tools: &mut [ToolDef]) -> Result<bool, Unavailable> {
        let set = self.set.clone();
        let config = set.config();
        let tenant = self.tenant_name().to_string();
        let (mode, trusted) = config.pins_models(&tenant);
        if mode == PinMode::Off || tools.is_empty() {
            return Ok(false);
        }
        let source = format!("app:{}", self.ctx.principal.as_deref().unwrap_or(""));
        let declared: Vec<Declared> = tools.iter().filter_map(Declared::of_tool).collect();
        let pinning = Pinning {
            tenant: &tenant,
            source: &source,
            mode,
            trusted,
            // An app may offer a part of its tools on a turn: none is taken as removed.
            complete: false,
            others: &[],
            approvals_ttl: config.approvals_ttl,
        };
        self.pin(&pinning, tools, &declared).await
    }

    async fn pin(
        &mut self,
        pinning: &Pinning<'_>,
        tools: &mut [ToolDef],
        declared: &[Declared],
    ) -> Result<bool, Unavailable> {
        if pinning.mode == PinMode::Off || declared.is_empty() {
            return Ok(false);
        }
        let started = Instant::now();
        let set = self.set.clone();
        let judged = set.pins().judge(pinning, declared).await?;
        let mut hid = false;
        for (i, _, shown) in &judged.held {
            let name = &declared[*i].name;
            for t in tools.iter_mut() {
                if t.name.as_deref() == Some(name.as_str()) && t.hidden_by.is_none() {
                    t.hidden_by = Some(PINS.to_string());
                    hid = true;
                }
            }
            if let Some(shown) = shown {
                self.caps
                    .approvals
                    .get_or_insert_with(Default::default)
                    .note(shown.clone());
            }
        }
        let verdict = if hid { Decided::Modify } else { Decided::Allow };
        self.record
            .host_step(Rail::Tools, PINS, verdict, started.elapsed());
        Ok(hid)
    }
}
