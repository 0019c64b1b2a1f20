//! A request's vault across the requests of its conversation, where the client does not resend
//! the earlier turns (`caps::vault::thread`): read before the rails run, kept after the reply.

use super::RequestScope;
use crate::caps::vault::thread::{Kind, Thread};
use crate::codec::Kept;

/// Where a request's vault is kept after its reply.
#[derive(Debug, Default)]
pub(super) struct Threads {
    /// Kept under these whatever the reply.
    fixed: Vec<Thread>,
    /// Kept under the reply's id too (Responses, unless the backend does not store it).
    by_reply: bool,
    /// The thread the reply continued keeps its values in (`Thread::load_chain`): the reply's
    /// own thread is then a link to it, and what this request hid is added there.
    chain: Option<Thread>,
}

impl RequestScope {
    /// The conversation `kept` names is kept by the backend: the values its earlier requests hid
    /// are put in this request's vault (so a placeholder the model repeats from an earlier turn
    /// comes back), and [`RequestScope::keep_vault`] keeps this one's for the next. Nothing
    /// without a plugin granted the vault (`kept` is then not asked: no ids are copied).
    pub async fn open_vault(&mut self, kept: impl FnOnce() -> Kept) {
        let Some(ledger) = self.caps.vault.clone() else {
            return;
        };
        let kept = kept();
        if kept.previous.is_none() && kept.conversation.is_none() && !kept.by_reply {
            return;
        }
        let (tenant, principal) = (self.tenant_name(), self.ctx.principal.as_deref());
        let previous = kept
            .previous
            .map(|id| Thread::named(tenant, principal, Kind::Response, &id));
        let conversation = kept
            .conversation
            .map(|id| Thread::named(tenant, principal, Kind::Conversation, &id));
        // The reply continued is read, and its conversation's values added to; the
        // conversation is read and kept.
        let mut chain = None;
        if let Some(thread) = previous {
            let (store, key) = (self.set.store(), self.set.vault_key());
            chain = Some(thread.load_chain(store, key, &ledger).await);
        }
        self.vault_threads = Some(Box::new(Threads {
            fixed: conversation.into_iter().collect(),
            by_reply: kept.by_reply,
            chain,
        }));
        self.read_vault().await;
    }

    /// The agent session `id` names (the MCP door's) keeps its vault: what this request hides
    /// is added by [`RequestScope::keep_vault`]; [`RequestScope::read_vault`] puts what earlier
    /// requests hid in this one's.
    pub fn open_agent_vault(&mut self, id: &str) {
        if self.caps.vault.is_none() {
            return;
        }
        let thread = Thread::named(
            self.tenant_name(),
            self.ctx.principal.as_deref(),
            Kind::Agent,
            id,
        );
        self.vault_threads = Some(Box::new(Threads {
            fixed: vec![thread],
            by_reply: false,
            chain: None,
        }));
    }

    /// Put what earlier requests of its threads hid in this request's vault (on MCP: a call,
    /// whose arguments may name their placeholders).
    pub async fn read_vault(&self) {
        let (Some(threads), Some(ledger)) = (&self.vault_threads, &self.caps.vault) else {
            return;
        };
        for thread in &threads.fixed {
            thread
                .load(self.set.store(), self.set.vault_key(), ledger)
                .await;
        }
    }

    /// Whether the reply's id is wanted by [`RequestScope::keep_vault`] (the vault holds
    /// something to keep under it).
    pub fn keeps_vault_by_reply(&self) -> bool {
        self.vault_threads.as_ref().is_some_and(|t| t.by_reply)
            && self.caps.vault.as_ref().is_some_and(|l| !l.is_empty())
    }

    /// Keep what the vault holds for the conversation's next request: under its threads, and
    /// under `reply` (the reply's id) where the next request names it. Nothing for a request
    /// whose conversation the client resends, or a vault holding nothing.
    pub async fn keep_vault(&mut self, reply: Option<&str>) {
        let (Some(threads), Some(ledger)) = (self.vault_threads.take(), self.caps.vault.clone())
        else {
            return;
        };
        if ledger.is_empty() {
            return;
        }
        let (tenant, principal) = (self.tenant_name(), self.ctx.principal.as_deref());
        let by_reply = reply
            .filter(|_| threads.by_reply)
            .map(|id| Thread::named(tenant, principal, Kind::Response, id));
        // A fixed thread (read or added to) gets what this request hid. The reply's is a link
        // to the chain continued, which gets what this request hid; a first reply's, all.
        let (store, key) = (self.set.store(), self.set.vault_key());
        for thread in &threads.fixed {
            thread.save(store, key, &ledger, true).await;
        }
        match (by_reply, &threads.chain) {
            (Some(reply), Some(chain)) => {
                chain.save(store, key, &ledger, true).await;
                reply.link(store, key, chain).await;
            }
            (Some(reply), None) => reply.save(store, key, &ledger, false).await,
            (None, _) => {}
        }
    }
}
