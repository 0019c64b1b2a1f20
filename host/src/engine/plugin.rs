//! One loaded plugin: its compiled component, what it says about itself, its limits and its pool
//! of configured instances.
//!
//! Measured on a 2-core machine: a reused instance answers a 2 KB call in a few µs; a fresh one
//! costs tens of µs for a small Rust plugin and milliseconds for plugins that build regexes or
//! schemas in `configure`. So instances are pooled by default; `isolation = "per-call"` trades that
//! cost for a clean instance every time. Any instance that faults is dropped, never reused.

use super::prefilter::{self, Triggers};
use super::sandbox::{forward, tail, CallOutput, HostState, LogBudget, SandboxTrap, Severity};
use super::typed::{Checked, Sig};
use super::verdict::{EvalRequest, PluginVerdict, Prepared};
use super::{FaultKind, Isolation, Limits, LoadError, PluginFault, CONFIGURE_TIMEOUT};
use crate::caps::Grants;
use crate::contract::{
    packed, wit, wit01, Policy, Policy01, PolicyIndicesPacked, PolicyPacked, PolicyPre, PolicyPre01,
};
use crate::guard::GuardCall;
use crate::shard::PerWorker;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use wasmtime::component::{ComponentExportIndex, Instance as ComponentInstance, InstancePre};
use wasmtime::Store;

/// Where in the guest a trap happened: the innermost named functions of its backtrace (a
/// component built with its name section, as a C plugin is by default), innermost first, each
/// cut and kept to the characters of a symbol.
fn guest_frames(err: &wasmtime::Error) -> Option<String> {
    const FRAMES: usize = 3;
    const NAME: usize = 64;
    let backtrace = err.downcast_ref::<wasmtime::WasmBacktrace>()?;
    let names: Vec<String> = backtrace
        .frames()
        .iter()
        .filter_map(|f| f.func_name())
        .map(|n| {
            n.chars()
                .filter(|c| c.is_ascii_alphanumeric() || "_:.<>$-".contains(*c))
                .take(NAME)
                .collect::<String>()
        })
        .filter(|n| !n.is_empty())
        .take(FRAMES)
        .collect();
    (!names.is_empty()).then(|| names.join(" < "))
}

/// Longest guest stderr excerpt put into a fault message.
const FAULT_STDERR_CAP: usize = 512;
/// Longest error message a plugin may return (0.2 `evaluate`); the rest is cut.
const FAULT_MESSAGE_CAP: usize = 1024;

/// What a plugin says about itself (`describe`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct PluginInfo {
    /// The plugin's own name.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// Rails the plugin can run on.
    pub rails: Vec<crate::model::Rail>,
    /// JSON Schema of its config, parsed.
    pub config_schema: Option<serde_json::Value>,
}

/// A plugin's linked component, for the contract version it was built against.
pub(super) enum Pre {
    V01(PolicyPre01<HostState>),
    V02(PolicyPre<HostState>),
    /// 0.2 with its request packed (the Rust SDK's plugins), and its `prefilter`'s `triggers`
    /// when it exports one.
    Packed {
        pre: InstancePre<HostState>,
        indices: PolicyIndicesPacked,
        triggers: Option<ComponentExportIndex>,
    },
    /// 0.3, packed (the Rust SDK) or not, called through typed functions over 0.2's types;
    /// `waits`: linked on the engine with async support (the plugin is granted guard models).
    V03 {
        pre: InstancePre<HostState>,
        exports: Exports03,
        waits: bool,
    },
}

/// Where a 0.3 component's functions are.
pub(super) struct Exports03 {
    /// Its request is packed (`railyard:policy-packed/plugin@0.3.0`).
    pub packed: bool,
    pub describe: ComponentExportIndex,
    pub configure: ComponentExportIndex,
    pub evaluate: ComponentExportIndex,
    pub triggers: Option<ComponentExportIndex>,
}

impl Pre {
    fn instantiate(&self, store: &mut Store<HostState>) -> wasmtime::Result<Bindings> {
        Ok(match self {
            Pre::V01(pre) => Bindings::V01(pre.instantiate(store)?),
            Pre::V02(pre) => Bindings::V02(pre.instantiate(store)?),
            Pre::Packed { pre, indices, .. } => {
                let instance = pre.instantiate(&mut *store)?;
                Bindings::Packed(indices.load(&mut *store, &instance)?, instance)
            }
            Pre::V03 {
                pre,
                exports,
                waits,
            } => {
                let instance = match waits {
                    true => at_once(pre.instantiate_async(&mut *store))??,
                    false => pre.instantiate(&mut *store)?,
                };
                Bindings::V03(Funcs03::load(exports, &instance, store, *waits)?)
            }
        })
    }

    fn version(&self) -> &'static str {
        match self {
            Pre::V01(_) => "0.1.0",
            Pre::V02(_) | Pre::Packed { .. } => "0.2.0",
            Pre::V03 { .. } => "0.3.0",
        }
    }
}

/// Run `future`, which must not wait: a call on the engine with async support outside
/// `evaluate` (instantiate, `describe`, `configure`, `prefilter`), where guard models are closed,
/// so nothing in it can pause.
fn at_once<F: Future>(future: F) -> wasmtime::Result<F::Output> {
    use futures_util::FutureExt;
    future
        .now_or_never()
        .ok_or_else(|| wasmtime::Error::msg("the plugin waited outside evaluate"))
}

/// `describe`.
struct Describe;
impl Sig for Describe {
    type Params<'a> = ();
    type Results = (wit::Info,);
}

/// `configure`.
struct Configure;
impl Sig for Configure {
    type Params<'a> = (&'a str,);
    type Results = (Result<(), String>,);
}

/// `evaluate`, packed (the Rust SDK).
struct EvaluatePacked;
impl Sig for EvaluatePacked {
    type Params<'a> = (&'a packed::Request,);
    type Results = (Result<wit::Verdict, String>,);
}

/// `evaluate`.
struct Evaluate;
impl Sig for Evaluate {
    type Params<'a> = (&'a wit::Request,);
    type Results = (Result<wit::Verdict, String>,);
}

/// `prefilter`'s `triggers`.
struct TriggersSig;
impl Sig for TriggersSig {
    type Params<'a> = ();
    type Results = (Option<Vec<String>>,);
}

/// A 0.3 instance's functions, their types checked once when it is made.
struct Funcs03 {
    waits: bool,
    describe: Checked<Describe>,
    configure: Checked<Configure>,
    evaluate: Evaluator,
    triggers: Option<Checked<TriggersSig>>,
}

enum Evaluator {
    Packed(Checked<EvaluatePacked>),
    Plain(Checked<Evaluate>),
}

impl Funcs03 {
    fn load(
        exports: &Exports03,
        instance: &ComponentInstance,
        store: &mut Store<HostState>,
        waits: bool,
    ) -> wasmtime::Result<Funcs03> {
        let func = |store: &mut Store<HostState>, index: &ComponentExportIndex| {
            instance
                .get_func(&mut *store, index)
                .ok_or_else(|| wasmtime::Error::msg("a plugin function is missing"))
        };
        let evaluate = func(store, &exports.evaluate)?;
        Ok(Funcs03 {
            waits,
            describe: Checked::new(func(store, &exports.describe)?, &*store)?,
            configure: Checked::new(func(store, &exports.configure)?, &*store)?,
            evaluate: match exports.packed {
                true => Evaluator::Packed(Checked::new(evaluate, &*store)?),
                false => Evaluator::Plain(Checked::new(evaluate, &*store)?),
            },
            triggers: match &exports.triggers {
                Some(i) => Some(Checked::new(func(store, i)?, &*store)?),
                None => None,
            },
        })
    }

    /// Call `f` with `params`, outside `evaluate`: on an instance that waits, it cannot.
    fn now<S: Sig>(
        &self,
        store: &mut Store<HostState>,
        f: Checked<S>,
        params: S::Params<'_>,
    ) -> wasmtime::Result<S::Results> {
        match self.waits {
            true => at_once(f.typed().call_async(&mut *store, params))?,
            false => f.typed().call(&mut *store, params),
        }
    }

    fn describe(&self, store: &mut Store<HostState>) -> wasmtime::Result<wit::Info> {
        Ok(self.now(store, self.describe, ())?.0)
    }

    fn configure(
        &self,
        store: &mut Store<HostState>,
        config: &str,
    ) -> wasmtime::Result<Result<(), String>> {
        Ok(self.now(store, self.configure, (config,))?.0)
    }

    fn triggers(&self, store: &mut Store<HostState>) -> wasmtime::Result<Option<Vec<String>>> {
        match self.triggers {
            Some(t) => Ok(self.now(store, t, ())?.0),
            None => Ok(None),
        }
    }

    /// `evaluate`, synchronously (an instance granted no guard model).
    fn evaluate(
        &self,
        store: &mut Store<HostState>,
        src: &EvalRequest<'_>,
        prepared: &mut Prepared,
    ) -> wasmtime::Result<Result<wit::Verdict, String>> {
        match self.evaluate {
            Evaluator::Packed(f) => {
                let request = prepared.packed(src);
                store.set_hostcall_fuel(answer_bytes(request.text.len(), src));
                Ok(f.typed().call(&mut *store, (request,))?.0)
            }
            Evaluator::Plain(f) => {
                let request = prepared.v02(src);
                store.set_hostcall_fuel(answer_bytes(super::convert::bytes02(request), src));
                Ok(f.typed().call(&mut *store, (request,))?.0)
            }
        }
    }

    /// `evaluate` on an instance granted guard models: it may wait on them.
    async fn evaluate_async(
        &self,
        store: &mut Store<HostState>,
        src: &EvalRequest<'_>,
        prepared: &mut Prepared,
    ) -> wasmtime::Result<Result<wit::Verdict, String>> {
        match self.evaluate {
            Evaluator::Packed(f) => {
                let request = prepared.packed(src);
                store.set_hostcall_fuel(answer_bytes(request.text.len(), src));
                Ok(f.typed().call_async(&mut *store, (request,)).await?.0)
            }
            Evaluator::Plain(f) => {
                let request = prepared.v02(src);
                store.set_hostcall_fuel(answer_bytes(super::convert::bytes02(request), src));
                Ok(f.typed().call_async(&mut *store, (request,)).await?.0)
            }
        }
    }
}

enum Bindings {
    V01(Policy01),
    V02(Policy),
    /// With the instance itself, for the optional `prefilter`.
    Packed(PolicyPacked, ComponentInstance),
    V03(Funcs03),
}

struct Instance {
    store: Store<HostState>,
    bindings: Bindings,
}

/// What `describe` says, whichever version said it.
struct Described {
    name: String,
    version: String,
    rails: Vec<crate::model::Rail>,
    config_schema: Option<String>,
}

/// A loaded plugin, shareable across threads.
pub struct Plugin {
    id: Arc<str>,
    path: PathBuf,
    digest: String,
    from_cache: bool,
    info: PluginInfo,
    engine: wasmtime::Engine,
    /// Advances the epoch while this plugin runs (its deadlines).
    ticker: Arc<super::Ticker>,
    pre: Arc<Pre>,
    limits: Limits,
    config: OnceLock<String>,
    /// What its `prefilter` said after `configure` (`None`: it has none, or said `none`).
    triggers: OnceLock<Option<Triggers>>,
    /// Idle instances, a pool per worker thread: an instance then stays on the core that last ran
    /// it, with its linear memory in that core's cache, instead of moving between the workers
    /// call after call.
    pools: PerWorker<Vec<Instance>>,
    /// Lines this plugin may write to the daemon's log (its own and the host's about it).
    budget: Arc<LogBudget>,
    /// The guard models it may consult (only a 0.3 plugin on the engine with async support).
    grant: Grants,
}

/// What a plugin entry gives the plugin it loads: its limits and its grant.
pub(super) struct Given {
    pub limits: Limits,
    pub grant: Grants,
}

impl Plugin {
    pub(super) fn new(
        id: &str,
        path: &Path,
        (digest, from_cache): (String, bool),
        owner: &super::Engine,
        pre: Arc<Pre>,
        Given { limits, grant }: Given,
    ) -> Result<Plugin, LoadError> {
        let mut plugin = Plugin {
            id: Arc::from(id),
            path: path.to_owned(),
            digest,
            from_cache,
            info: PluginInfo {
                name: String::new(),
                version: String::new(),
                rails: Vec::new(),
                config_schema: None,
            },
            engine: owner.engine.clone(),
            ticker: owner.ticker.clone(),
            pre,
            limits,
            config: OnceLock::new(),
            triggers: OnceLock::new(),
            pools: PerWorker::default(),
            budget: Arc::default(),
            grant,
        };
        let describe_fault = |fault| LoadError::Describe {
            path: path.to_owned(),
            fault,
        };
        let mut instance = plugin.instantiate_raw().map_err(describe_fault)?;
        let info = plugin
            .call(&mut instance, CONFIGURE_TIMEOUT, |b, s| {
                Ok(match b {
                    Bindings::V01(b) => {
                        let i = b.railyard_policy_plugin().call_describe(s)?;
                        Described {
                            name: i.name,
                            version: i.version,
                            rails: i.rails.into_iter().map(Into::into).collect(),
                            config_schema: i.config_schema,
                        }
                    }
                    Bindings::V02(b) => described(b.railyard_policy_plugin().call_describe(s)?),
                    Bindings::Packed(b, _) => {
                        described(b.railyard_policy_packed_plugin().call_describe(s)?)
                    }
                    Bindings::V03(f) => described(f.describe(s)?),
                })
            })
            .map_err(describe_fault)?;
        let config_schema = match info.config_schema {
            None => None,
            Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
                describe_fault(PluginFault {
                    kind: FaultKind::InvalidVerdict,
                    message: format!("config schema is not valid JSON: {e}"),
                })
            })?),
        };
        plugin.info = PluginInfo {
            name: info.name,
            version: info.version,
            rails: info.rails,
            config_schema,
        };
        Ok(plugin)
    }

    /// The id this plugin has in the config (used in logs and decisions).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What the plugin says about itself.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// The plugin file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Hex SHA-256 of the component bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Whether the compiled component came from the cache.
    pub fn from_cache(&self) -> bool {
        self.from_cache
    }

    /// Whether this plugin and `other` run the same compiled code (loaded from one component,
    /// e.g. one allowlist configured per tenant).
    pub fn shares_code_with(&self, other: &Plugin) -> bool {
        Arc::ptr_eq(&self.pre, &other.pre)
    }

    /// The plugin's limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Give the plugin its config (JSON text, already validated against its schema) and try it
    /// on a fresh instance, so a config the plugin refuses is found at load, not on the first
    /// request; that instance is then asked for its triggers (`prefilter`), if it has any. It is
    /// not kept: a pool fills on use, so a plugin no request reaches (a tenant's, a model's)
    /// costs no instance memory. Calling it twice is an error: a plugin's config is fixed for its
    /// lifetime.
    pub fn configure(&self, config: String) -> Result<(), PluginFault> {
        if self.config.set(config).is_err() {
            return Err(PluginFault {
                kind: FaultKind::Configure,
                message: "plugin is already configured".into(),
            });
        }
        let mut instance = self.instantiate()?;
        let triggers = self
            .asked_triggers(&mut instance)?
            .map(Triggers::new)
            .transpose()
            .map_err(|message| PluginFault {
                kind: FaultKind::InvalidVerdict,
                message,
            })?;
        let _ = self.triggers.set(triggers);
        Ok(())
    }

    /// What a configured instance's `prefilter` says, when the component exports one. The
    /// answer is read up to a bound, as `evaluate`'s is.
    fn asked_triggers(&self, instance: &mut Instance) -> Result<Option<Vec<String>>, PluginFault> {
        let index = match &*self.pre {
            Pre::Packed {
                triggers: Some(index),
                ..
            } => Some(*index),
            Pre::V03 { exports, .. } if exports.triggers.is_some() => None,
            _ => return Ok(None),
        };
        self.call(instance, CONFIGURE_TIMEOUT, |b, s| {
            s.set_hostcall_fuel(prefilter::ANSWER_BYTES);
            match (b, index) {
                (Bindings::V03(f), _) => f.triggers(s),
                (Bindings::Packed(_, raw), Some(index)) => {
                    let triggers =
                        raw.get_typed_func::<(), (Option<Vec<String>>,)>(&mut *s, index)?;
                    Ok(triggers.call(&mut *s, ())?.0)
                }
                _ => unreachable!("a packed component's instance is bound as packed"),
            }
        })
        .map_err(|fault| match fault.kind {
            FaultKind::VerdictTooLarge => PluginFault {
                kind: FaultKind::InvalidVerdict,
                message: format!(
                    "its prefilter answered with more than {} bytes, left unread",
                    prefilter::ANSWER_BYTES
                ),
            },
            _ => fault,
        })
    }

    /// Whether the plugin is to be called on `src`: always, unless it gave triggers (its
    /// `prefilter`) and `src` is a finished request none of whose strings holds one. The strings
    /// are searched in the packed request (made here for the call that may follow); a trigger
    /// found across two of them only makes a call that was not needed.
    pub fn concerns(&self, src: &EvalRequest<'_>, prepared: &mut Prepared) -> bool {
        match self.triggers.get() {
            Some(Some(triggers)) if !src.partial => triggers.found_in(&prepared.packed(src).text),
            _ => true,
        }
    }

    /// The plugin's triggers (its `prefilter`), if it gave any.
    pub fn triggers(&self) -> Option<&[String]> {
        self.triggers.get()?.as_ref().map(Triggers::texts)
    }

    /// The contract version the plugin was built against.
    pub fn contract_version(&self) -> &'static str {
        self.pre.version()
    }

    /// Evaluate one request (`prepared` caches its WIT form per contract version). The instance
    /// used is returned to the pool unless the call faulted; an error the plugin returns (0.2) is
    /// a fault too, but its instance is sound and goes back to the pool.
    pub fn evaluate(
        &self,
        src: &EvalRequest<'_>,
        prepared: &mut Prepared,
    ) -> Result<PluginVerdict, PluginFault> {
        self.evaluate_noting(src, prepared, &mut Vec::new())
    }

    /// [`Plugin::evaluate`], noting in `guard` the guard-model calls the plugin tried (refused
    /// each: a plugin that does not wait is granted none).
    pub fn evaluate_noting(
        &self,
        src: &EvalRequest<'_>,
        prepared: &mut Prepared,
        guard: &mut Vec<GuardCall>,
    ) -> Result<PluginVerdict, PluginFault> {
        if self.waits() {
            // Called where nothing can wait (a test, the CLI without a runtime): fine until the
            // plugin consults a guard model.
            return at_once(self.evaluate_async(src, prepared))
                .map_err(|_| PluginFault {
                    kind: FaultKind::GuestError,
                    message: "consulted a guard model where the host cannot wait".into(),
                })
                .and_then(|(answer, calls)| {
                    *guard = calls;
                    answer
                });
        }
        let mut instance = match self.checkout() {
            Some(instance) => instance,
            None => self.instantiate()?,
        };
        // The vault never waits: a plugin granted it alone is called here, its calls opened on
        // the request (the request's own vault) for the evaluation.
        let vault = self.grant.vault.is_some();
        let answer = self.call(&mut instance, self.limits.timeout, |b, s| {
            if vault {
                s.data_mut().caps.open(&asked(src));
            }
            Ok(match b {
                Bindings::V01(b) => {
                    let request: &wit01::Request = prepared.v01(src);
                    s.set_hostcall_fuel(answer_bytes(super::convert::bytes01(request), src));
                    Ok(b.railyard_policy_plugin().call_evaluate(s, request)?.into())
                }
                Bindings::V02(b) => {
                    let request: &wit::Request = prepared.v02(src);
                    s.set_hostcall_fuel(answer_bytes(super::convert::bytes02(request), src));
                    b.railyard_policy_plugin()
                        .call_evaluate(s, request)?
                        .map(Into::into)
                }
                Bindings::Packed(b, _) => {
                    let request: &packed::Request = prepared.packed(src);
                    s.set_hostcall_fuel(answer_bytes(request.text.len(), src));
                    b.railyard_policy_packed_plugin()
                        .call_evaluate(s, request)?
                        .map(Into::into)
                }
                Bindings::V03(f) => f.evaluate(s, src, prepared)?.map(Into::into),
            })
        });
        if vault {
            instance.store.data_mut().caps.close();
        }
        if matches!(instance.bindings, Bindings::V03(_)) {
            // Only a 0.3 plugin can have tried: its calls were refused, and the record says so.
            let tried = instance.store.data_mut().caps.take_calls();
            if !tried.is_empty() {
                *guard = tried;
            }
        }
        let answer = answer?;
        if self.limits.isolation == Isolation::Pooled {
            self.checkin(instance);
        }
        self.answered(answer)
    }

    /// Whether the plugin runs on the engine with async support: granted guard models, its
    /// `evaluate` may wait, and is called with [`Plugin::evaluate_async`].
    pub fn waits(&self) -> bool {
        matches!(&*self.pre, Pre::V03 { waits: true, .. })
    }

    /// [`Plugin::evaluate`] for a plugin that [waits](Plugin::waits): while it waits on a guard
    /// model its worker serves other requests, and the wait does not count against its CPU
    /// deadline. Returns the guard-model calls it made too, for its decision.
    pub async fn evaluate_async(
        &self,
        src: &EvalRequest<'_>,
        prepared: &mut Prepared,
    ) -> (Result<PluginVerdict, PluginFault>, Vec<GuardCall>) {
        let mut instance = match self.checkout() {
            Some(instance) => instance,
            None => match self.instantiate() {
                Ok(instance) => instance,
                Err(fault) => return (Err(fault), Vec::new()),
            },
        };
        let deadline = self.limits.timeout;
        let Instance { store, bindings } = &mut instance;
        let Bindings::V03(funcs) = bindings else {
            unreachable!("only a 0.3 plugin waits")
        };
        store.data_mut().begin_call();
        store.data_mut().caps.open(&asked(src));
        let running = self.ticker.running_apart(store, deadline);
        let result = funcs.evaluate_async(store, src, prepared).await;
        drop(running);
        let calls = store.data_mut().caps.close();
        let answer = match result {
            Ok(answer) => {
                store.data_mut().end_call(true);
                answer.map(Into::into)
            }
            Err(err) => return (Err(self.fault(store, err, deadline)), calls),
        };
        if self.limits.isolation == Isolation::Pooled {
            self.checkin(instance);
        }
        (self.answered(answer), calls)
    }

    /// A plugin's answer: its error (0.2 and later) is a fault, logged within its budget.
    fn answered(
        &self,
        answer: Result<PluginVerdict, String>,
    ) -> Result<PluginVerdict, PluginFault> {
        answer.map_err(|message| {
            let message = crate::util::truncate(&message, FAULT_MESSAGE_CAP).to_string();
            forward(
                &self.budget,
                &self.id,
                "fault",
                Severity::Warn,
                &format!("plugin error: {message}"),
            );
            PluginFault {
                kind: FaultKind::GuestError,
                message,
            }
        })
    }

    /// Number of idle instances in the pools (for tests and metrics).
    pub fn idle_instances(&self) -> usize {
        self.pools.all().map(|p| p.len()).sum()
    }

    /// The largest linear memory among idle instances, in bytes: what one warm instance costs.
    pub fn idle_instance_memory(&self) -> usize {
        self.pools
            .all()
            .filter_map(|p| p.iter().map(|i| i.store.data().limiter.peak).max())
            .max()
            .unwrap_or(0)
    }

    /// An idle instance: this thread's pool's newest, else one from another pool (a new instance
    /// costs far more than one moved between cores).
    fn checkout(&self) -> Option<Instance> {
        if self.limits.isolation == Isolation::PerCall {
            return None;
        }
        let own = self.pools.mine().pop();
        own.or_else(|| self.pools.all().find_map(|mut p| p.pop()))
    }

    /// Back into this thread's pool, which keeps at most `max_idle_instances`.
    fn checkin(&self, instance: Instance) {
        let mut pool = self.pools.mine();
        if pool.len() < self.limits.max_idle_instances {
            pool.push(instance);
        }
    }

    /// A new instance, configured if a config has been given.
    fn instantiate(&self) -> Result<Instance, PluginFault> {
        let mut instance = self.instantiate_raw()?;
        if let Some(config) = self.config.get() {
            self.call(&mut instance, CONFIGURE_TIMEOUT, |b, s| match b {
                Bindings::V01(b) => b.railyard_policy_plugin().call_configure(s, config),
                Bindings::V02(b) => b.railyard_policy_plugin().call_configure(s, config),
                Bindings::Packed(b, _) => {
                    b.railyard_policy_packed_plugin().call_configure(s, config)
                }
                Bindings::V03(f) => f.configure(s, config),
            })?
            .map_err(|message| PluginFault {
                kind: FaultKind::Configure,
                message,
            })?;
        }
        Ok(instance)
    }

    fn instantiate_raw(&self) -> Result<Instance, PluginFault> {
        let mut store = Store::new(
            &self.engine,
            HostState::new(
                self.id.clone(),
                self.limits.memory_bytes,
                self.budget.clone(),
            ),
        );
        store.limiter(|s| &mut s.limiter);
        if self.grant.any() {
            store.data_mut().caps = crate::caps::Caps::new(&self.grant, self.ticker.clone());
        }
        self.ticker.watch(&mut store);
        let _running = self.ticker.running(&mut store, CONFIGURE_TIMEOUT);
        store.data_mut().begin_call();
        match self.pre.instantiate(&mut store) {
            Ok(bindings) => Ok(Instance { store, bindings }),
            Err(err) => Err(self.fault(&mut store, err, CONFIGURE_TIMEOUT)),
        }
    }

    /// Run `f` on `instance` under `deadline`, forwarding guest output and turning traps into
    /// faults.
    fn call<R>(
        &self,
        instance: &mut Instance,
        deadline: Duration,
        f: impl FnOnce(&Bindings, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginFault> {
        let Instance { store, bindings } = instance;
        store.data_mut().begin_call();
        let _running = self.ticker.running(store, deadline);
        let result = f(bindings, store);
        match result {
            Ok(value) => {
                store.data_mut().end_call(true);
                Ok(value)
            }
            Err(err) => Err(self.fault(store, err, deadline)),
        }
    }

    fn fault(
        &self,
        store: &mut Store<HostState>,
        err: wasmtime::Error,
        deadline: Duration,
    ) -> PluginFault {
        let CallOutput { stderr, trap } = store.data_mut().end_call(false);
        let wasm_trap = err.downcast_ref::<wasmtime::Trap>().copied();
        let (kind, mut message) = if wasm_trap == Some(wasmtime::Trap::Interrupt) {
            (
                FaultKind::Deadline,
                format!("ran past its {} ms CPU deadline", deadline.as_millis()),
            )
        } else if let Some(trap) = trap {
            let kind = match trap {
                SandboxTrap::Sleep => FaultKind::Sleep,
                SandboxTrap::OutputFlood { .. } | SandboxTrap::LogFlood { .. } => {
                    FaultKind::OutputFlood
                }
            };
            (kind, trap.to_string())
        } else if store.data().limiter.hit {
            (
                FaultKind::MemoryCap,
                format!(
                    "tried to grow memory past its {} MiB cap",
                    self.limits.memory_bytes >> 20
                ),
            )
        } else if let Some(exit) = err.downcast_ref::<wasmtime_wasi::I32Exit>() {
            (FaultKind::Exit, format!("called exit({})", exit.0))
        } else if fuel_ran_out(&err) {
            let fuel = store.hostcall_fuel();
            // With guest frames on the error it was a call into the host (a log line, a write);
            // without, it was the answer, read after the guest returned.
            if err.downcast_ref::<wasmtime::WasmBacktrace>().is_some() {
                (
                    FaultKind::OutputFlood,
                    format!("passed the host more than {fuel} bytes in one call"),
                )
            } else {
                (
                    FaultKind::VerdictTooLarge,
                    format!(
                        "answered with more than {fuel} bytes ({} MiB, {ANSWER_PER_SHOWN_BYTE} times the text it was shown and {} KiB an item), left unread",
                        ANSWER_FLOOR >> 20,
                        ANSWER_PER_ITEM >> 10
                    ),
                )
            }
        } else {
            let mut what = match wasm_trap {
                Some(trap) => trap.to_string(),
                None => err.root_cause().to_string(),
            };
            if let Some(place) = guest_frames(&err) {
                what.push_str(" (in ");
                what.push_str(&place);
                what.push(')');
            }
            (FaultKind::Trap, what)
        };
        let stderr = stderr.trim();
        if !stderr.is_empty() && kind != FaultKind::OutputFlood {
            message.push_str(&format!(
                " (guest stderr: {})",
                tail(stderr, FAULT_STDERR_CAP)
            ));
        }
        forward(
            store.data().budget(),
            &self.id,
            "fault",
            Severity::Warn,
            &format!("plugin fault ({}): {message}", kind.as_str()),
        );
        PluginFault { kind, message }
    }
}

/// What a 0.2 plugin's `describe` says (packed or not, the same `info`).
fn described(i: wit::Info) -> Described {
    Described {
        name: i.name,
        version: i.version,
        rails: i.rails.into_iter().map(Into::into).collect(),
        config_schema: i.config_schema,
    }
}

/// Bytes of a plugin's answer the host reads before refusing it unread, for a question of
/// `shown` bytes: wasmtime's hostcall fuel, which counts every string's bytes and every list's
/// items at their size on the host. At wasmtime's default (128 MiB a call) an answer naming one
/// 1 MiB string a thousand times had the host copy 128 MiB, whatever the plugin's memory cap.
/// The verdict caps (`policy::apply`) allow edits of 4 times the request's text and 1 MiB, and
/// 4 KiB a reason or rejection; this leaves room for those and for the edits' own size.
fn answer_bytes(shown: usize, src: &EvalRequest<'_>) -> usize {
    ANSWER_FLOOR
        .saturating_add(shown.saturating_mul(ANSWER_PER_SHOWN_BYTE))
        .saturating_add(src.items().saturating_mul(ANSWER_PER_ITEM))
}

/// [`answer_bytes`]' parts: a floor, bytes per byte of text shown, bytes per item.
const ANSWER_FLOOR: usize = 8 << 20;
const ANSWER_PER_SHOWN_BYTE: usize = 8;
const ANSWER_PER_ITEM: usize = 8 << 10;

/// Whether `err` is wasmtime's hostcall fuel running out (its error type is private; its message
/// is pinned by the hostile plugin's `aliased-edits` and `huge-log-line` tests).
fn fuel_ran_out(err: &wasmtime::Error) -> bool {
    err.chain().any(|e| {
        e.to_string()
            .contains("fuel allocated for hostcalls has been exhausted")
    })
}

/// What an evaluation of `src` gives the capabilities of the instance that runs it.
fn asked<'a>(src: &'a EvalRequest<'_>) -> crate::caps::Asked<'a> {
    crate::caps::Asked {
        ctx: src.ctx,
        caps: src.caps,
        rail: src.rail,
        messages: src.messages,
    }
}
