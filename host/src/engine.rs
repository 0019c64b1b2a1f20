//! The wasmtime side of Railyard: one [`Engine`] compiles and caches plugin components, links
//! them against a sandbox, and hands out [`Plugin`]s that evaluate requests under CPU and memory
//! limits.
//!
//! Phases, each with its own error: **load** ([`Engine::load_plugin`]: read, compile or fetch
//! from cache, check the contract version and imports, `describe`), **configure**
//! ([`Plugin::configure`]), **evaluate** ([`Plugin::evaluate`], failures are [`PluginFault`]s).

mod cache;
pub mod convert;
mod pack;
mod plugin;
mod prefilter;
mod sandbox;
mod ticker;
mod typed;
pub mod verdict;

pub use crate::model::{Isolation, Limits};
pub use crate::util::sha256_hex;
pub use cache::ComponentCache;
use plugin::Given;
pub use plugin::{Plugin, PluginInfo};
pub use sandbox::{
    LOG_BYTES_PER_CALL, LOG_LINES_PER_CALL, LOG_LINES_PER_SECOND, LOG_LINE_BYTES,
    STDIO_BYTES_PER_CALL,
};
pub use verdict::{EvalRequest, PluginVerdict, Prepared};

use crate::caps::Grants;
use crate::contract::{
    self as bindings, Policy, Policy01, CONTRACT_PACKAGE, CONTRACT_VERSION, CONTRACT_VERSIONS,
    PACKED_INTERFACES, PLUGIN_INTERFACE, PREFILTER_INTERFACES,
};
use sandbox::HostState;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use ticker::Ticker;
use wasmtime::component::{HasSelf, Linker};

/// Deadline for instantiating a plugin and running its `configure` (JS and Python runtimes start
/// slowly, and `configure` may compile schemas or patterns).
pub const CONFIGURE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read plugin {path}: {source}")]
    Read {
        /// The plugin file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The bytes are not a valid WebAssembly component.
    #[error("{path} is not a valid WebAssembly component: {reason}")]
    Compile {
        /// The plugin file.
        path: PathBuf,
        /// What wasmtime said.
        reason: String,
    },
    /// Granted guard models, but built against a contract without them.
    #[error("{path} is granted capabilities (`guard_models`, `state` or `approvals`), which only plugins built against contract 0.3.0 can use; it was built against {version}: rebuild it against wit/policy.wit, or remove the grant")]
    Grant {
        /// The plugin file.
        path: PathBuf,
        /// Its contract version.
        version: &'static str,
    },
    /// Built against another version of the contract.
    #[error("{path} was built against {package}@{found}, but this Railyard speaks {package}@{expected} (and 0.2.0 and 0.1.0); rebuild the plugin against wit/policy.wit")]
    ContractVersion {
        /// The plugin file.
        path: PathBuf,
        /// Always `railyard:policy`.
        package: &'static str,
        /// The version the host speaks.
        expected: &'static str,
        /// The version the plugin was built against.
        found: String,
    },
    /// Not a Railyard plugin at all.
    #[error("{path} is not a Railyard policy plugin: it does not export {PLUGIN_INTERFACE}@{CONTRACT_VERSION} (exports: {exports})")]
    NotAPlugin {
        /// The plugin file.
        path: PathBuf,
        /// What it exports instead.
        exports: String,
    },
    /// Imports something the sandbox does not provide.
    #[error("{path} imports {import}, which Railyard does not provide: plugins get no filesystem, network or host functions beyond railyard:policy/host")]
    ForbiddenImport {
        /// The plugin file.
        path: PathBuf,
        /// The offending import.
        import: String,
    },
    /// The component's types do not match the contract.
    #[error("{path} does not match the railyard:policy contract: {reason}")]
    Link {
        /// The plugin file.
        path: PathBuf,
        /// What wasmtime said.
        reason: String,
    },
    /// `describe` failed.
    #[error("{path}: describe failed: {fault}")]
    Describe {
        /// The plugin file.
        path: PathBuf,
        /// The fault.
        fault: PluginFault,
    },
}

/// What went wrong inside a plugin call. A fault is never a policy verdict: the chain resolves
/// it by the plugin's `on_error` setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct PluginFault {
    /// The kind of fault.
    pub kind: FaultKind,
    /// Human-readable detail (trap message, guest panic message, what was invalid).
    pub message: String,
}

/// Kinds of plugin fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FaultKind {
    /// The call ran past its CPU deadline.
    Deadline,
    /// The instance tried to grow memory past its cap.
    MemoryCap,
    /// The guest trapped (panic, exception, abort, stack overflow, ...).
    Trap,
    /// The plugin answered something the host cannot apply (bad index, non-JSON arguments, ...).
    InvalidVerdict,
    /// `configure` refused the config when a new instance was made.
    Configure,
    /// The plugin returned an error of its own (contract 0.2), e.g. a caught exception.
    GuestError,
    /// The verdict is past a size cap (reason, rejection message, number or size of edits).
    VerdictTooLarge,
    /// The plugin printed or logged past a per-call cap.
    OutputFlood,
    /// The plugin waited on a clock (time is frozen in the sandbox: the wait could never end).
    Sleep,
    /// The plugin called `exit`.
    Exit,
}

impl FaultKind {
    /// The wire spelling (as serialized), e.g. `memory_cap`.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Deadline => "deadline",
            FaultKind::MemoryCap => "memory_cap",
            FaultKind::Trap => "trap",
            FaultKind::InvalidVerdict => "invalid_verdict",
            FaultKind::Configure => "configure",
            FaultKind::VerdictTooLarge => "verdict_too_large",
            FaultKind::OutputFlood => "output_flood",
            FaultKind::Sleep => "sleep",
            FaultKind::Exit => "exit",
            FaultKind::GuestError => "guest_error",
        }
    }

    /// Every kind, in declaration order.
    pub const ALL: [FaultKind; 10] = [
        FaultKind::Deadline,
        FaultKind::MemoryCap,
        FaultKind::Trap,
        FaultKind::InvalidVerdict,
        FaultKind::Configure,
        FaultKind::VerdictTooLarge,
        FaultKind::OutputFlood,
        FaultKind::Sleep,
        FaultKind::Exit,
        FaultKind::GuestError,
    ];
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FaultKind::Deadline => "deadline exceeded",
            FaultKind::MemoryCap => "memory cap exceeded",
            FaultKind::Trap => "trap",
            FaultKind::InvalidVerdict => "invalid verdict",
            FaultKind::Configure => "configure failed",
            FaultKind::VerdictTooLarge => "verdict too large",
            FaultKind::OutputFlood => "output flood",
            FaultKind::Sleep => "slept",
            FaultKind::Exit => "exited",
            FaultKind::GuestError => "plugin error",
        })
    }
}

/// Interfaces a plugin may import. Everything a wasm32-wasip2 guest needs to link is served by an
/// empty WASI context (see `sandbox`); filesystem and sockets are refused outright.
const ALLOWED_IMPORT_PREFIXES: &[&str] = &[
    "wasi:io/",
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:random/",
    "railyard:policy/",
];

/// Compiles, caches and sandboxes plugin components. One per process: compiled artifacts are
/// tied to its settings.
pub struct Engine {
    engine: wasmtime::Engine,
    /// What plugins link against: capabilities refused (a plugin granted none).
    linker: Linker<HostState>,
    /// What plugins granted capabilities link against: their calls wait without blocking (a
    /// component importing them is then called through wasmtime's async support, on a fiber of
    /// its own; the others are spared that cost).
    waiting: Linker<HostState>,
    cache: ComponentCache,
    ticker: Arc<Ticker>,
    /// Linked components by digest and linker, while some plugin uses them: plugins loaded from
    /// the same component (one allowlist per tenant, say) share its compiled code.
    linked: Mutex<Vec<(String, bool, Weak<plugin::Pre>)>>,
}

impl Engine {
    /// An engine with epoch-based deadlines and the given compiled-component cache.
    pub fn new(cache: ComponentCache) -> wasmtime::Result<Self> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        // Deadlines by epoch, not fuel: no per-instruction cost on the hot path.
        config.epoch_interruption(true);
        config.cranelift_opt_level(wasmtime::OptLevel::Speed);
        // Profiling aid: name the plugins' compiled functions for `perf` (/tmp/perf-PID.map).
        if std::env::var_os("RAILYARD_PERFMAP").is_some_and(|v| v == "1") {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = wasmtime::Engine::new(&config)?;

        let mut linker = Linker::new(&engine);
        sandbox::add_to_linker(&mut linker)?;
        Policy::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
        Policy01::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
        bindings::log03::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;

        let mut waiting = Linker::new(&engine);
        sandbox::add_to_linker(&mut waiting)?;
        bindings::log03::add_to_linker::<HostState, HasSelf<HostState>>(&mut waiting, |s| s)?;
        // Capabilities: refused on `linker`, served on `waiting`.
        crate::caps::link(&mut linker, &mut waiting)?;

        let ticker = Ticker::start(engine.clone())?;
        Ok(Engine {
            engine,
            linker,
            waiting,
            cache,
            ticker,
            linked: Mutex::new(Vec::new()),
        })
    }

    /// Load the plugin at `path`: compile (or fetch from cache), check contract version and
    /// imports, link, and call `describe`. `id` names the plugin in logs and decisions; `grant`
    /// makes what it may reach from its component's digest (grants bind to the component; a
    /// plugin granted anything must be built against 0.3).
    pub fn load_plugin(
        &self,
        id: &str,
        path: &Path,
        limits: Limits,
        grant: impl FnOnce(&str) -> Grants,
    ) -> Result<Plugin, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        let digest = sha256_hex(&bytes);
        let grant = grant(&digest);
        let waits = !grant.is_empty();
        let linker = match waits {
            true => &self.waiting,
            false => &self.linker,
        };
        if let Some(pre) = self.shared(&digest, waits) {
            return Plugin::new(id, path, (digest, true), self, pre, Given { limits, grant });
        }
        let (component, cached) = self
            .cache
            .load_or_compile(&self.engine, &bytes, &digest, id)
            .map_err(|e| LoadError::Compile {
                path: path.to_owned(),
                reason: root_cause(&e),
            })?;
        drop(bytes);
        let version = self.check_contract(path, &component)?;
        if waits && !matches!(version, Export::V03 { .. }) {
            return Err(LoadError::Grant {
                path: path.to_owned(),
                version: match version {
                    Export::V01 => "0.1.0",
                    _ => "0.2.0",
                },
            });
        }
        let link = |e: wasmtime::Error| LoadError::Link {
            path: path.to_owned(),
            reason: format!("{e:#}"),
        };
        let pre = linker.instantiate_pre(&component).map_err(link)?;
        let pre = Arc::new(match version {
            Export::V01 => plugin::Pre::V01(bindings::PolicyPre01::new(pre).map_err(link)?),
            Export::V02 => plugin::Pre::V02(bindings::PolicyPre::new(pre).map_err(link)?),
            Export::Packed => {
                // `prefilter` is optional: plugins built before it load as they did.
                let triggers = component
                    .get_export_index(None, PREFILTER_INTERFACES[1].1)
                    .and_then(|i| component.get_export_index(Some(&i), "triggers"));
                let indices = bindings::PolicyIndicesPacked::new(&pre).map_err(link)?;
                plugin::Pre::Packed {
                    pre,
                    indices,
                    triggers,
                }
            }
            Export::V03 { packed } => {
                let interface = match packed {
                    true => PACKED_INTERFACES[0].1.to_string(),
                    false => format!("{PLUGIN_INTERFACE}@0.3.0"),
                };
                let func = |name: &str| {
                    let i = component.get_export_index(None, &interface)?;
                    component.get_export_index(Some(&i), name)
                };
                let missing = |name: &str| LoadError::Link {
                    path: path.to_owned(),
                    reason: format!("{interface} has no `{name}`"),
                };
                let triggers = match packed {
                    true => component
                        .get_export_index(None, PREFILTER_INTERFACES[0].1)
                        .and_then(|i| component.get_export_index(Some(&i), "triggers")),
                    false => None,
                };
                plugin::Pre::V03 {
                    pre,
                    exports: plugin::Exports03 {
                        packed,
                        describe: func("describe").ok_or_else(|| missing("describe"))?,
                        configure: func("configure").ok_or_else(|| missing("configure"))?,
                        evaluate: func("evaluate").ok_or_else(|| missing("evaluate"))?,
                        triggers,
                    },
                    waits,
                }
            }
        });
        let mut linked = self.linked.lock().unwrap_or_else(|e| e.into_inner());
        linked.retain(|(_, _, pre)| pre.strong_count() > 0);
        linked.push((digest.clone(), waits, Arc::downgrade(&pre)));
        drop(linked);
        Plugin::new(
            id,
            path,
            (digest, cached),
            self,
            pre,
            Given { limits, grant },
        )
    }

    /// The linked component with `digest`, if a live plugin already uses it.
    fn shared(&self, digest: &str, waits: bool) -> Option<Arc<plugin::Pre>> {
        let linked = self.linked.lock().unwrap_or_else(|e| e.into_inner());
        linked
            .iter()
            .find(|(d, w, _)| d == digest && *w == waits)
            .and_then(|(_, _, pre)| pre.upgrade())
    }

    /// Check the component exports a contract version this host speaks and imports nothing
    /// beyond the sandbox; returns what it exports.
    fn check_contract(
        &self,
        path: &Path,
        component: &wasmtime::component::Component,
    ) -> Result<Export, LoadError> {
        let ty = component.component_type();
        let exports: Vec<String> = ty
            .exports(&self.engine)
            .map(|(n, _)| n.to_string())
            .collect();
        let packed = PACKED_INTERFACES
            .into_iter()
            .find(|(_, name)| exports.iter().any(|e| e == name))
            .map(|(v, _)| v);
        let found = if packed.is_some() {
            packed
        } else {
            CONTRACT_VERSIONS
                .into_iter()
                .find(|v| exports.contains(&format!("{PLUGIN_INTERFACE}@{v}")))
        };
        let Some(version) = found else {
            let prefix = format!("{CONTRACT_PACKAGE}/");
            if let Some(other) = exports.iter().find(|e| e.starts_with(&prefix)) {
                return Err(wrong_version(path, other));
            }
            return Err(LoadError::NotAPlugin {
                path: path.to_owned(),
                exports: if exports.is_empty() {
                    "nothing".into()
                } else {
                    exports.join(", ")
                },
            });
        };
        let mut forbidden = Vec::new();
        for (import, _) in ty.imports(&self.engine) {
            if import.starts_with("railyard:policy/") && !import.ends_with(&format!("@{version}")) {
                return Err(wrong_version(path, import));
            }
            if !ALLOWED_IMPORT_PREFIXES
                .iter()
                .any(|p| import.starts_with(p))
            {
                forbidden.push(import.to_string());
            }
        }
        if !forbidden.is_empty() {
            return Err(LoadError::ForbiddenImport {
                path: path.to_owned(),
                import: forbidden.join(", "),
            });
        }
        Ok(match (version, packed.is_some()) {
            ("0.3.0", packed) => Export::V03 { packed },
            (_, true) => Export::Packed,
            ("0.1.0", _) => Export::V01,
            _ => Export::V02,
        })
    }
}

/// Which plugin interface a component exports.
enum Export {
    V01,
    V02,
    /// 0.2 with its request packed (`wit/v0.2/packed/`, the Rust SDK before 0.3).
    Packed,
    /// 0.3, with its request packed (the Rust SDK) or not.
    V03 {
        packed: bool,
    },
}

/// The error for a component whose `railyard:policy/...` interface `name` has another version.
fn wrong_version(path: &Path, name: &str) -> LoadError {
    let found = name
        .split_once('@')
        .map(|(_, v)| v)
        .unwrap_or("unversioned");
    LoadError::ContractVersion {
        path: path.to_owned(),
        package: CONTRACT_PACKAGE,
        expected: CONTRACT_VERSION,
        found: found.to_string(),
    }
}

/// The innermost cause of a wasmtime error, which is what a user needs to read.
fn root_cause(err: &wasmtime::Error) -> String {
    err.root_cause().to_string()
}
