//! What a plugin instance may touch: the per-store state, the memory limiter, the WASI subset it
//! links against (`wasi`: nothing that can block or reach outside), what it prints and logs
//! (`output`: captured, capped, rate-limited) and frozen clocks.
//!
//! Every instance gets an empty WASI context (no preopened directories, no environment, no args,
//! no network, stdin closed), so a wasm32-wasip2 guest links but reaches nothing. The clocks are
//! frozen so plugins cannot time anything (no timing side channels, no time-dependent verdicts).
//! What it may reach beyond that is `crate::caps`': its part of the state is `caps`.

mod output;
mod wasi;

pub(crate) use output::{forward, tail, Severity};
pub use output::{
    LogBudget, LOG_BYTES_PER_CALL, LOG_LINES_PER_CALL, LOG_LINES_PER_SECOND, LOG_LINE_BYTES,
    STDIO_BYTES_PER_CALL,
};
pub(crate) use wasi::add_to_linker;

use crate::contract::{wit, wit01, LogImport, LogImport01, LogImport03};
use output::{GuestOutput, LogLines};
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::ResourceTable;
use wasmtime::ResourceLimiter;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Table elements a guest may grow to (function tables; guards against table-growth abuse).
const TABLE_ELEMENTS_CAP: usize = 100_000;

/// Why the sandbox stopped a call, when it was the sandbox's doing (not the guest's own trap).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum SandboxTrap {
    /// The guest waited on a clock; time is frozen, so the wait could never end.
    #[error("waited on a clock (time is frozen in the sandbox, so the wait could never end)")]
    Sleep,
    /// Too much stdout/stderr in one call.
    #[error("wrote {what} in one call")]
    OutputFlood {
        /// What overflowed.
        what: String,
    },
    /// Too many `log` lines (or bytes of them) in one call.
    #[error("sent {what} in one call")]
    LogFlood {
        /// What overflowed.
        what: String,
    },
}

/// State held by each plugin instance's `Store`.
pub struct HostState {
    plugin: Arc<str>,
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    stdout: GuestOutput,
    stderr: GuestOutput,
    log: LogLines,
    budget: Arc<LogBudget>,
    /// Set when a host function stops the call (see [`SandboxTrap`]).
    trap: Option<SandboxTrap>,
    /// The running call's deadline (`super::ticker::Ticker::running`).
    due: u64,
    /// What it may reach beyond its request (contract 0.3's capabilities: none unless granted).
    pub(crate) caps: crate::caps::Caps,
}

impl super::ticker::Due for HostState {
    fn due(&mut self) -> &mut u64 {
        &mut self.due
    }
    fn entry(&mut self, entry: u64) {
        self.caps.entered(entry);
    }
}

/// What one call printed, once it is over.
pub(crate) struct CallOutput {
    /// The end of its stderr (for fault messages).
    pub stderr: String,
    /// Why the sandbox stopped it, if it did.
    pub trap: Option<SandboxTrap>,
}

impl HostState {
    pub(crate) fn new(plugin: Arc<str>, memory_cap: usize, budget: Arc<LogBudget>) -> Self {
        let stdout = GuestOutput::new("stdout");
        let stderr = GuestOutput::new("stderr");
        let wasi = WasiCtx::builder()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .build();
        HostState {
            plugin,
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                cap: memory_cap,
                hit: false,
                peak: 0,
            },
            stdout,
            stderr,
            log: LogLines::default(),
            budget,
            trap: None,
            due: 0,
            caps: crate::caps::Caps::default(),
        }
    }

    /// Reset per-call state before a call.
    pub(crate) fn begin_call(&mut self) {
        self.limiter.hit = false;
        self.log.reset();
        self.trap = None;
        self.caps.begin_call();
    }

    /// End a call: forward what the guest printed to the log (cut, within the plugin's budget;
    /// stderr only when `stderr_to_log`: a fault report carries its tail instead) and say why the
    /// sandbox stopped it, if it did.
    pub(crate) fn end_call(&mut self, stderr_to_log: bool) -> CallOutput {
        let (out, out_flooded) = self.stdout.take();
        let (err, err_flooded) = self.stderr.take();
        for (text, source, severity, wanted) in [
            (&out, "stdout", Severity::Info, true),
            (&err, "stderr", Severity::Warn, stderr_to_log),
        ] {
            let text = text.trim();
            if wanted && !text.is_empty() {
                forward(&self.budget, &self.plugin, source, severity, text);
            }
        }
        let trap = self.trap.take().or_else(|| {
            (out_flooded || err_flooded).then(|| SandboxTrap::OutputFlood {
                what: format!(
                    "more than {STDIO_BYTES_PER_CALL} bytes to {}",
                    if out_flooded { "stdout" } else { "stderr" }
                ),
            })
        });
        CallOutput { stderr: err, trap }
    }

    /// The plugin's log budget (shared by its instances and its fault reports).
    pub(crate) fn budget(&self) -> &LogBudget {
        &self.budget
    }
}

impl crate::caps::HasCaps for HostState {
    fn caps(&mut self) -> (&mut crate::caps::Caps, &mut u64) {
        (&mut self.caps, &mut self.due)
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wit::Host for HostState {}
impl wit01::Host for HostState {}

impl LogImport for HostState {
    fn log(&mut self, level: wit::Level, message: String) -> wasmtime::Result<()> {
        let severity = match level {
            wit::Level::Trace => Severity::Trace,
            wit::Level::Debug => Severity::Debug,
            wit::Level::Info => Severity::Info,
            wit::Level::Warn => Severity::Warn,
            wit::Level::Error => Severity::Error,
        };
        self.log_line(severity, message)
    }
}

impl LogImport03 for HostState {
    fn log(&mut self, level: wit::Level, message: String) -> wasmtime::Result<()> {
        LogImport::log(self, level, message)
    }
}

impl LogImport01 for HostState {
    fn log(&mut self, level: wit01::Level, message: String) -> wasmtime::Result<()> {
        let severity = match level {
            wit01::Level::Trace => Severity::Trace,
            wit01::Level::Debug => Severity::Debug,
            wit01::Level::Info => Severity::Info,
            wit01::Level::Warn => Severity::Warn,
            wit01::Level::Error => Severity::Error,
        };
        self.log_line(severity, message)
    }
}

impl HostState {
    /// A `log` line: counted against the per-call caps, forwarded within the plugin's budget.
    fn log_line(&mut self, severity: Severity, message: String) -> wasmtime::Result<()> {
        match self.log.count(message.len()) {
            Err(trap) => {
                self.trap = Some(trap.clone());
                Err(trap.into())
            }
            Ok(false) => {
                self.budget.suppress(1);
                Ok(())
            }
            Ok(true) => {
                forward(&self.budget, &self.plugin, "log", severity, &message);
                Ok(())
            }
        }
    }
}

/// Caps linear memory per instance and remembers whether the cap was hit, so that the trap a
/// denied allocation causes (usually an abort in the guest allocator) is reported as a memory
/// fault rather than a generic trap.
pub struct MemoryLimiter {
    cap: usize,
    pub(crate) hit: bool,
    /// Largest linear memory this instance was allowed (what it costs while pooled).
    pub(crate) peak: usize,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.hit = true;
            return Ok(false);
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= TABLE_ELEMENTS_CAP)
    }
}

/// A clock that never moves.
struct FrozenClock;

impl wasmtime_wasi::HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl wasmtime_wasi::HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}
