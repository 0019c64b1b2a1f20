//! Capabilities: what a plugin may reach beyond the request it judges (contract 0.3's imports
//! other than `log`). After Spin's factors, each is one module with the same parts:
//!
//! - a `Grant`, made from a plugin entry's config (where config becomes permission);
//! - an `Instance`, its host side for one plugin instance, reached through a [`View`] of its own
//!   part of the instance's state and the running call's;
//! - `link`, which adds its interface to the two linkers: refused at once on the synchronous
//!   one (plugins granted nothing), served on the waiting one (plugins granted something, whose
//!   calls wait without blocking the worker).
//!
//! This file lists them: [`Grants`] (one entry's), [`Caps`] (one instance's) and [`RequestCaps`]
//! (one request's: its scope owns it and passes it to the chain). A new capability is a module
//! here and a field in each.

pub mod approvals;
pub mod guard;
pub mod state;
pub mod vault;

use crate::config::PluginConfig;
use crate::guard::{GuardCall, GuardModels};
use crate::model::{Context, Message, Rail};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::{HasData, Linker};

/// What one plugin entry is granted.
#[derive(Clone, Default)]
pub struct Grants {
    /// The guard models it may consult (`guard_models`).
    pub guard: guard::Grant,
    /// Its state (`state = true`).
    pub state: Option<state::Grant>,
    /// Its approvals (`approvals = true`).
    pub approvals: Option<approvals::Grant>,
    /// Its vault (`vault = true`).
    pub vault: Option<vault::Grant>,
}

impl Grants {
    /// What `entry` grants its plugin: the configured guard models it names, and state and
    /// approvals in `store` (an approval lives `approvals_ttl`).
    pub fn of(
        entry: &PluginConfig,
        component: &str,
        models: &GuardModels,
        store: &Arc<crate::state::Store>,
        approvals_ttl: Duration,
        vault_key: &Arc<[u8; 32]>,
    ) -> Grants {
        Grants {
            guard: guard::Grant::of(models, &entry.guard_models),
            state: entry
                .state
                .then(|| state::Grant::new(store.clone(), &entry.name)),
            approvals: entry
                .approvals
                .then(|| approvals::Grant::of(entry, component, store, approvals_ttl)),
            vault: entry
                .vault
                .then(|| vault::Grant::new(&entry.name, vault_key.clone())),
        }
    }

    /// Whether it grants nothing that waits (the plugin then runs on the synchronous path; the
    /// vault never waits).
    pub fn is_empty(&self) -> bool {
        self.guard.is_empty() && self.state.is_none() && self.approvals.is_none()
    }

    /// Whether it grants anything at all (its instances then hold capabilities).
    pub fn any(&self) -> bool {
        !self.is_empty() || self.vault.is_some()
    }
}

/// One request's capability state, shared by every plugin that judges it.
#[derive(Clone, Default, Debug)]
pub struct RequestCaps {
    /// Its dealings with guard models: budget, recorded answers (made when a plugin that may
    /// consult one is first to run, and only when a guard model is configured).
    pub guard: Option<Arc<guard::Scope>>,
    /// The approval requests its plugins made (when a plugin of its set may ask for any).
    pub approvals: Option<Arc<approvals::Ledger>>,
    /// The values its plugins hid behind placeholders (when a plugin of its set has the vault).
    pub vault: Option<Arc<vault::Ledger>>,
    /// The MCP server it goes to (an approval is bound to it).
    pub server: Option<String>,
}

/// A request with no capability state: every capability a plugin is granted still answers,
/// with no budget and no ledger (the CLI's `check`, tests).
pub static NONE: RequestCaps = RequestCaps {
    guard: None,
    approvals: None,
    vault: None,
    server: None,
};

/// What one evaluation gives the capabilities of the instance that runs it.
pub struct Asked<'a> {
    /// Who is asking.
    pub ctx: &'a Context,
    /// The request's capability state.
    pub caps: &'a RequestCaps,
    /// The rail.
    pub rail: Rail,
    /// The messages the plugin is given (the reply last, on the reply rails).
    pub messages: &'a [Message],
}

/// The time a plugin's call may run, as the engine's ticker keeps it: a capability's wait is
/// given back to it.
pub trait Clock: Send + Sync {
    /// Now, in the clock's units.
    fn now(&self) -> u64;
    /// Move the running call `entry`'s deadline to `due`.
    fn postpone(&self, entry: u64, due: u64);
}

/// What every capability of an instance shares in the running call.
#[derive(Default)]
pub struct Call {
    /// Whether capabilities may be reached now: in `evaluate`, not in `describe`, `configure`
    /// or `prefilter`, which must answer at once.
    open: bool,
    /// The running request's tenant (whose state and approvals are reached).
    tenant: String,
    /// The running request's principal.
    principal: Option<String>,
    clock: Option<Arc<dyn Clock>>,
    /// The running call's entry in the clock's list.
    entry: u64,
}

impl Call {
    /// Whether capabilities may be reached now.
    pub fn open(&self) -> bool {
        self.open
    }

    /// The running request's tenant.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }
}

/// One capability's part of an instance's state, with the running call's.
pub struct View<'a, I> {
    /// The capability's own part.
    pub cap: &'a mut I,
    /// The running call.
    pub call: &'a mut Call,
    /// The running call's deadline.
    due: &'a mut u64,
}

impl<I> View<'_, I> {
    /// Run `wait` (a call on a capability), giving the time waited back to the call's deadline.
    pub async fn waiting<T>(&mut self, wait: impl std::future::Future<Output = T>) -> T {
        let clock = self.call.clock.clone();
        let began = clock.as_ref().map(|c| c.now());
        let answer = wait.await;
        if let (Some(clock), Some(began)) = (clock, began) {
            *self.due = self.due.saturating_add(clock.now().saturating_sub(began));
            clock.postpone(self.call.entry, *self.due);
        }
        answer
    }
}

/// A [`View`] as wasmtime's linker names the data an interface is projected onto.
pub struct Project<I>(PhantomData<fn() -> I>);

impl<I: 'static> HasData for Project<I> {
    type Data<'a> = View<'a, I>;
}

/// An instance's state that holds capabilities.
pub trait HasCaps: Send + 'static {
    /// Its capabilities, and the running call's deadline (which a wait moves).
    fn caps(&mut self) -> (&mut Caps, &mut u64);
}

/// One plugin instance's capabilities.
#[derive(Default)]
pub struct Caps {
    call: Call,
    guard: guard::Instance,
    state: state::Instance,
    approvals: approvals::Instance,
    vault: vault::Instance,
}

impl Caps {
    /// The capabilities `grants` gives one instance, its waits given back through `clock`.
    pub fn new(grants: &Grants, clock: Arc<dyn Clock>) -> Caps {
        Caps {
            call: Call {
                clock: Some(clock),
                ..Call::default()
            },
            guard: guard::Instance::new(grants.guard.clone()),
            state: state::Instance::new(grants.state.clone()),
            approvals: approvals::Instance::new(grants.approvals.clone()),
            vault: vault::Instance::new(grants.vault.clone()),
        }
    }

    /// The running call is `entry` in the clock's list.
    pub fn entered(&mut self, entry: u64) {
        self.call.entry = entry;
    }

    /// Before any call: closed, nothing recorded.
    pub fn begin_call(&mut self) {
        self.call.open = false;
        self.guard.calls.clear();
    }

    /// Open them for one `evaluate` of `asked`.
    pub fn open(&mut self, asked: &Asked<'_>) {
        self.call.open = true;
        // Whose state and approvals it reaches (a plugin granted only guard models needs no
        // caller).
        if self.state.granted() || self.approvals.granted() || self.vault.granted() {
            self.call.tenant.clear();
            self.call.tenant.push_str(
                asked
                    .ctx
                    .tenant
                    .as_deref()
                    .unwrap_or(crate::auth::DEFAULT_TENANT),
            );
            self.call.principal.clone_from(&asked.ctx.principal);
        }
        self.guard.scope = asked.caps.guard.clone();
        self.approvals.open(asked);
        if self.vault.granted() {
            self.vault.ledger.clone_from(&asked.caps.vault);
            self.vault.reply = matches!(
                asked.rail,
                crate::model::Rail::Output | crate::model::Rail::ToolCall
            );
        }
    }

    /// Close them after the call; what was asked of guard models, for the decision.
    pub fn close(&mut self) -> Vec<GuardCall> {
        self.call.open = false;
        self.guard.scope = None;
        self.approvals.close();
        self.vault.ledger = None;
        self.take_calls()
    }

    /// The guard-model calls made (or refused) since the call began.
    pub fn take_calls(&mut self) -> Vec<GuardCall> {
        std::mem::take(&mut self.guard.calls)
    }
}

/// Add every capability's interface to `sync` (refused) and `waiting` (served).
pub fn link<T: HasCaps>(sync: &mut Linker<T>, waiting: &mut Linker<T>) -> wasmtime::Result<()> {
    guard::link(sync, waiting)?;
    state::link(sync, waiting)?;
    approvals::link(sync, waiting)?;
    vault::link(sync, waiting)?;
    Ok(())
}

/// The view of one capability's part, chosen by `part`.
fn view<T: HasCaps, I>(state: &mut T, part: fn(&mut Caps) -> (&mut I, &mut Call)) -> View<'_, I> {
    let (caps, due) = state.caps();
    let (cap, call) = part(caps);
    View { cap, call, due }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A capability's host side, driven without wasm: a call opened on a request.
    use super::*;

    /// One instance's state, as a plugin instance would hold it.
    pub(crate) struct Host {
        pub caps: Caps,
        pub due: u64,
    }

    impl HasCaps for Host {
        fn caps(&mut self) -> (&mut Caps, &mut u64) {
            (&mut self.caps, &mut self.due)
        }
    }

    /// A clock that moves a millisecond each time it is read; postponing is recorded.
    #[derive(Default)]
    pub(crate) struct Ticks {
        pub now: std::sync::atomic::AtomicU64,
        pub postponed: std::sync::Mutex<Vec<(u64, u64)>>,
    }

    impl Clock for Ticks {
        fn now(&self) -> u64 {
            self.now.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        }
        fn postpone(&self, entry: u64, due: u64) {
            self.postponed.lock().unwrap().push((entry, due));
        }
    }

    impl Host {
        /// An instance granted `grants`.
        pub fn new(grants: &Grants) -> (Host, Arc<Ticks>) {
            let ticks = Arc::new(Ticks::default());
            let host = Host {
                caps: Caps::new(grants, ticks.clone()),
                due: 100,
            };
            (host, ticks)
        }

        /// The view of `I`'s part, as the linker projects it.
        pub fn view<I>(&mut self, part: fn(&mut Caps) -> (&mut I, &mut Call)) -> View<'_, I> {
            view(self, part)
        }
    }

    /// A context of `tenant`.
    pub(crate) fn ctx(tenant: &str) -> Context {
        Context {
            tenant: Some(tenant.into()),
            principal: Some("svc".into()),
            ..Context::default()
        }
    }
}
