//! What a plugin says: its stdout and stderr, captured per call, and the lines it sends to the
//! daemon's log (its own `log` import, stdio, and the host's fault reports about it).
//!
//! A plugin sees the content it judges, so anything it prints may be that content. Two limits
//! keep that out of the daemon's log beyond one short line: every forwarded line is cut to
//! [`LOG_LINE_BYTES`], and each plugin has a line budget ([`LogBudget`]) refilled at
//! [`LOG_LINES_PER_SECOND`]; lines past it are counted and dropped. Far past what any policy
//! needs, a call is stopped as an `output_flood` fault instead ([`STDIO_BYTES_PER_CALL`],
//! [`LOG_LINES_PER_CALL`], [`LOG_BYTES_PER_CALL`]): a plugin printing in a loop is broken, and
//! failing it (closed by default) shows it.

use super::SandboxTrap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// Most bytes a plugin may write to stdout, and to stderr, in one call before it is stopped.
pub const STDIO_BYTES_PER_CALL: usize = 1 << 20;
/// Most `log` lines a plugin may send in one call before it is stopped.
pub const LOG_LINES_PER_CALL: u32 = 1_000;
/// Most bytes of `log` lines a plugin may send in one call before it is stopped.
pub const LOG_BYTES_PER_CALL: usize = 1 << 20;
/// Longest line of a plugin's that reaches the daemon's log; the rest is cut.
pub const LOG_LINE_BYTES: usize = 512;
/// Most lines of one plugin's forwarded per call; the rest are counted as suppressed.
const LOG_LINES_FORWARDED_PER_CALL: u32 = 16;
/// A plugin's sustained log rate across calls.
pub const LOG_LINES_PER_SECOND: f64 = 20.0;
/// The burst a plugin may log above its sustained rate.
const LOG_BURST: f64 = 100.0;
/// Bytes of stdout/stderr kept per call (the end: where a panic message is).
const KEPT_BYTES: usize = 4096;

/// The last at most `max` bytes of `s`, on a char boundary.
pub(crate) fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// One plugin's log-line budget, shared by all its instances (a token bucket).
pub struct LogBudget {
    state: Mutex<Bucket>,
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
    suppressed: u64,
}

impl Default for LogBudget {
    fn default() -> Self {
        LogBudget {
            state: Mutex::new(Bucket {
                tokens: LOG_BURST,
                refilled: Instant::now(),
                suppressed: 0,
            }),
        }
    }
}

impl LogBudget {
    /// Take one line from the budget. `Some(n)`: the line may be written, and `n` earlier lines
    /// were suppressed since the last one written (say so). `None`: drop it.
    pub fn take(&self) -> Option<u64> {
        let mut b = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(b.refilled).as_secs_f64() * LOG_LINES_PER_SECOND;
        b.tokens = (b.tokens + refill).min(LOG_BURST);
        b.refilled = now;
        if b.tokens < 1.0 {
            b.suppressed += 1;
            return None;
        }
        b.tokens -= 1.0;
        Some(std::mem::take(&mut b.suppressed))
    }

    /// Count lines dropped without asking (past the per-call forwarding limit).
    pub fn suppress(&self, lines: u64) {
        let mut b = self.state.lock().unwrap_or_else(|e| e.into_inner());
        b.suppressed += lines;
    }
}

/// Severity of a forwarded line.
#[derive(Clone, Copy)]
pub(crate) enum Severity {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Write one of `plugin`'s lines to the daemon's log, cut and within its budget.
pub(crate) fn forward(
    budget: &LogBudget,
    plugin: &str,
    source: &'static str,
    severity: Severity,
    line: &str,
) {
    let enabled = match severity {
        Severity::Trace => tracing::enabled!(tracing::Level::TRACE),
        Severity::Debug => tracing::enabled!(tracing::Level::DEBUG),
        Severity::Info => tracing::enabled!(tracing::Level::INFO),
        Severity::Warn => tracing::enabled!(tracing::Level::WARN),
        Severity::Error => tracing::enabled!(tracing::Level::ERROR),
    };
    if !enabled {
        return;
    }
    let Some(suppressed) = budget.take() else {
        return;
    };
    if suppressed > 0 {
        tracing::warn!(
            plugin,
            suppressed,
            "log lines of this plugin were dropped by its rate limit ({LOG_LINES_PER_SECOND}/s)"
        );
    }
    let cut = crate::util::truncate(line, LOG_LINE_BYTES);
    let more = line.len() - cut.len();
    // One record per line: a plugin's newlines cannot forge log lines of their own.
    let mut message: String = cut
        .chars()
        .flat_map(|c| match c {
            '\n' => vec!['\\', 'n'],
            '\r' => vec!['\\', 'r'],
            c if c.is_control() => vec!['\u{fffd}'],
            c => vec![c],
        })
        .collect();
    if more > 0 {
        message.push_str(&format!("… ({more} more bytes cut)"));
    }
    match severity {
        Severity::Trace => tracing::trace!(plugin, source, "{message}"),
        Severity::Debug => tracing::debug!(plugin, source, "{message}"),
        Severity::Info => tracing::info!(plugin, source, "{message}"),
        Severity::Warn => tracing::warn!(plugin, source, "{message}"),
        Severity::Error => tracing::error!(plugin, source, "{message}"),
    }
}

/// Per-call counters of the `log` import.
#[derive(Default)]
pub(crate) struct LogLines {
    lines: u32,
    bytes: usize,
}

impl LogLines {
    pub(crate) fn reset(&mut self) {
        *self = LogLines::default();
    }

    /// Count a line: `Err` past the per-call caps, `Ok(true)` when it is to be forwarded.
    pub(crate) fn count(&mut self, len: usize) -> Result<bool, SandboxTrap> {
        self.lines += 1;
        self.bytes += len;
        if self.lines > LOG_LINES_PER_CALL {
            return Err(SandboxTrap::LogFlood {
                what: format!("more than {LOG_LINES_PER_CALL} log lines"),
            });
        }
        if self.bytes > LOG_BYTES_PER_CALL {
            return Err(SandboxTrap::LogFlood {
                what: format!("more than {LOG_BYTES_PER_CALL} bytes of log lines"),
            });
        }
        Ok(self.lines <= LOG_LINES_FORWARDED_PER_CALL)
    }
}

/// A captured stdout or stderr: keeps the end of what one call wrote, counts the rest, and stops
/// the call past [`STDIO_BYTES_PER_CALL`].
#[derive(Clone)]
pub(crate) struct GuestOutput {
    name: &'static str,
    inner: Arc<Mutex<Captured>>,
}

#[derive(Default)]
struct Captured {
    kept: Vec<u8>,
    total: usize,
    flooded: bool,
}

impl GuestOutput {
    pub(crate) fn new(name: &'static str) -> GuestOutput {
        GuestOutput {
            name,
            inner: Arc::default(),
        }
    }

    /// What the last call wrote (its end), and whether it flooded; resets for the next call.
    pub(crate) fn take(&self) -> (String, bool) {
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let captured = std::mem::take(&mut *c);
        (
            String::from_utf8_lossy(&captured.kept).into_owned(),
            captured.flooded,
        )
    }

    fn push(&self, bytes: &[u8]) -> StreamResult<()> {
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        c.total = c.total.saturating_add(bytes.len());
        if c.total > STDIO_BYTES_PER_CALL {
            c.flooded = true;
            return Err(StreamError::Trap(
                SandboxTrap::OutputFlood {
                    what: format!("more than {STDIO_BYTES_PER_CALL} bytes to {}", self.name),
                }
                .into(),
            ));
        }
        let bytes = &bytes[bytes.len().saturating_sub(KEPT_BYTES)..];
        let excess = (c.kept.len() + bytes.len()).saturating_sub(KEPT_BYTES);
        c.kept.drain(..excess);
        c.kept.extend_from_slice(bytes);
        Ok(())
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
        self.push(&bytes)
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_end_and_floods_past_the_cap() {
        let out = GuestOutput::new("stderr");
        out.push(&vec![b'a'; 10_000]).unwrap();
        out.push(b"the end").unwrap();
        let (text, flooded) = out.take();
        assert_eq!(text.len(), KEPT_BYTES);
        assert!(text.ends_with("the end") && !flooded);
        assert!(out.push(&vec![b'x'; STDIO_BYTES_PER_CALL + 1]).is_err());
        assert!(out.take().1, "flood recorded");
        assert!(out.push(b"next call").is_ok(), "reset by take");
    }

    #[test]
    fn budget_refills_and_counts_what_it_dropped() {
        let budget = LogBudget::default();
        for _ in 0..LOG_BURST as usize {
            assert_eq!(budget.take(), Some(0));
        }
        assert_eq!(budget.take(), None);
        budget.suppress(2);
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(budget.take(), Some(3), "1 dropped + 2 suppressed");
    }

    #[test]
    fn cuts_on_char_boundaries() {
        assert_eq!(crate::util::truncate("héllo", 2), "h");
        assert_eq!(tail("héllo", 4), "llo");
    }
}
