//! What a plugin instance may touch: the per-store state, the memory limiter, captured stdio and
//! frozen clocks.
//!
//! Every instance gets an empty WASI context (no preopened directories, no environment, no args,
//! no network, stdin closed), so a wasm32-wasip2 guest links but reaches nothing. The clocks are
//! frozen so plugins cannot time anything (no timing side channels, no time-dependent verdicts).
//! Guest stdout/stderr are captured into bounded buffers and forwarded to `tracing` after each
//! call, tagged with the plugin name.

use crate::engine::bindings::{wit, LogImport};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasmtime::component::ResourceTable;
use wasmtime::ResourceLimiter;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Most bytes of guest stdout or stderr kept per call; the rest is dropped (not an error, so a
/// chatty plugin cannot trap itself by printing).
const GUEST_OUTPUT_CAP: usize = 16 * 1024;
/// Most `log` import lines forwarded per call: a plugin must not be able to flood the daemon log.
const LOG_LINES_PER_CALL: u32 = 64;
/// Longest `log` line forwarded, in bytes.
const LOG_LINE_CAP: usize = 2048;
/// Table elements a guest may grow to (function tables; guards against table-growth abuse).
const TABLE_ELEMENTS_CAP: usize = 100_000;

/// State held by each plugin instance's `Store`.
pub struct HostState {
    plugin: Arc<str>,
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: GuestOutput,
    pub(crate) stderr: GuestOutput,
    log_lines: u32,
}

impl HostState {
    pub(crate) fn new(plugin: Arc<str>, memory_cap: usize) -> Self {
        let stdout = GuestOutput::default();
        let stderr = GuestOutput::default();
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
            log_lines: 0,
        }
    }

    /// Reset per-call counters before a call.
    pub(crate) fn begin_call(&mut self) {
        self.limiter.hit = false;
        self.log_lines = 0;
    }

    /// Forward what the guest printed during the last call to tracing; returns the stderr text
    /// (for fault messages).
    pub(crate) fn flush_output(&mut self) -> String {
        let out = self.stdout.take();
        if !out.is_empty() {
            tracing::info!(plugin = %self.plugin, stream = "stdout", "{}", out.trim_end());
        }
        let err = self.stderr.take();
        if !err.is_empty() {
            tracing::warn!(plugin = %self.plugin, stream = "stderr", "{}", err.trim_end());
        }
        err
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

impl LogImport for HostState {
    fn log(&mut self, level: wit::Level, message: String) {
        self.log_lines += 1;
        if self.log_lines > LOG_LINES_PER_CALL {
            if self.log_lines == LOG_LINES_PER_CALL + 1 {
                tracing::warn!(plugin = %self.plugin, "log lines past {LOG_LINES_PER_CALL} in one call dropped");
            }
            return;
        }
        let message = truncate(&message, LOG_LINE_CAP);
        let plugin = &*self.plugin;
        match level {
            wit::Level::Trace => tracing::trace!(plugin, "{message}"),
            wit::Level::Debug => tracing::debug!(plugin, "{message}"),
            wit::Level::Info => tracing::info!(plugin, "{message}"),
            wit::Level::Warn => tracing::warn!(plugin, "{message}"),
            wit::Level::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

/// Cut `s` to at most `max` bytes on a char boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
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

/// A bounded in-memory sink for guest stdout/stderr that silently drops bytes past its cap.
#[derive(Clone, Default)]
pub(crate) struct GuestOutput(Arc<Mutex<Vec<u8>>>);

impl GuestOutput {
    fn take(&self) -> String {
        let bytes = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn push(&self, bytes: &[u8]) {
        let mut buf = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let room = GUEST_OUTPUT_CAP.saturating_sub(buf.len());
        buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        // Only WASIp3 guests use this path; Railyard plugins are WASIp2.
        Box::new(tokio::io::sink())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}
