//! Small helpers every layer may use.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// `s` cut to at most `max` bytes on a char boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Where compiled plugins are cached by default: `$RAILYARD_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/railyard`, else `$HOME/.cache/railyard`; no cache if none of them is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("RAILYARD_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(Path::new(&dir).join("railyard"));
    }
    std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache").join("railyard"))
}

/// Fill `bytes` from the OS's CSPRNG.
pub fn random_bytes(bytes: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(bytes)
}

/// Run `future` to its end on this thread, off any runtime (the CLI): a chain with a plugin
/// that waits on a guard model needs a reactor and timers from its first poll (the guard call's
/// timeout is set then), so every future runs on this thread's small runtime, made once.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the CLI");
    }
    RUNTIME.with(|runtime| runtime.block_on(future))
}

/// One request's dealings with guard models, shared by every plugin that judges it: what it may
/// still spend (calls, and time waited: `[guard]`), and, in `railyard test`, the answers each
/// model gives instead of being asked.
#[derive(Debug)]
pub struct GuardScope {
    calls: std::sync::atomic::AtomicU32,
    wait_us: std::sync::atomic::AtomicU64,
    /// Recorded answers by model name (a case's `guard`): when set, no model is asked.
    pub recorded: Option<Vec<(String, serde_json::Value)>>,
    /// What the request's tenant may still spend this minute, when it is limited.
    pub tenant: Option<TenantSpend>,
}

/// Where a tenant's guard-model spending is counted: the `[state]` store, so every replica
/// holds the tenant to one minute (`state::Store` implements it; a trait here keeps the layers
/// below `state` free of it).
pub trait TenantMeter: Send + Sync {
    /// Take one call of `tenant`'s minute, and `reserve` of its `wait` per minute (the most the
    /// call may wait, taken before it starts so calls in flight at once cannot overspend it),
    /// unless either is spent (`None`: no limit).
    fn take_call<'a>(
        &'a self,
        tenant: &'a str,
        calls: Option<u32>,
        wait: Option<std::time::Duration>,
        reserve: std::time::Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>>;

    /// Settle `tenant`'s `wait` per minute to `waited`, of which `reserve` was taken.
    fn spend<'a>(
        &'a self,
        tenant: &'a str,
        wait: std::time::Duration,
        waited: std::time::Duration,
        reserve: std::time::Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;
}

/// One request's part of its tenant's minute: the tenant, its limits, and where its spending is
/// counted.
pub struct TenantSpend {
    meter: std::sync::Arc<dyn TenantMeter>,
    tenant: String,
    calls: Option<u32>,
    wait: Option<std::time::Duration>,
}

impl std::fmt::Debug for TenantSpend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantSpend")
            .field("tenant", &self.tenant)
            .field("calls", &self.calls)
            .field("wait", &self.wait)
            .finish()
    }
}

impl TenantSpend {
    /// `tenant`'s spending, counted by `meter`, limited to `calls` calls and `wait` waited per
    /// minute (`None`: no limit).
    pub fn new(
        meter: std::sync::Arc<dyn TenantMeter>,
        tenant: &str,
        calls: Option<u32>,
        wait: Option<std::time::Duration>,
    ) -> TenantSpend {
        TenantSpend {
            meter,
            tenant: tenant.to_string(),
            calls,
            wait,
        }
    }

    /// Take one call of the tenant's minute and `reserve` of its time waited, if neither is
    /// spent.
    pub async fn take_call(&self, reserve: std::time::Duration) -> bool {
        self.meter
            .take_call(&self.tenant, self.calls, self.wait, reserve)
            .await
    }

    /// Settle the tenant's minute to `waited`, of which `reserve` was taken.
    pub async fn spend(&self, waited: std::time::Duration, reserve: std::time::Duration) {
        if let Some(wait) = self.wait {
            self.meter.spend(&self.tenant, wait, waited, reserve).await;
        }
    }
}

impl GuardScope {
    /// A budget of `calls` calls and `wait` of waiting.
    pub fn new(calls: u32, wait: std::time::Duration) -> GuardScope {
        GuardScope {
            calls: calls.into(),
            wait_us: (wait.as_micros() as u64).into(),
            recorded: None,
            tenant: None,
        }
    }

    /// Take one call, if one is left.
    pub fn take_call(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.calls
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| c.checked_sub(1))
            .is_ok()
    }

    /// The waiting left.
    pub fn wait_left(&self) -> std::time::Duration {
        std::time::Duration::from_micros(self.wait_us.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Count `waited` against it.
    pub fn spend(&self, waited: std::time::Duration) {
        use std::sync::atomic::Ordering;
        let us = waited.as_micros() as u64;
        let _ = self
            .wait_us
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                Some(w.saturating_sub(us))
            });
    }
}

/// Budgets do not tell contexts apart.
impl PartialEq for GuardScope {
    fn eq(&self, _: &GuardScope) -> bool {
        true
    }
}

/// One request's approval requests (`crate::approvals`): those its plugins made, found or
/// spent, as the client is shown them (made only when a plugin of the set may ask).
#[derive(Debug, Default)]
pub struct ApprovalLedger {
    asked: std::sync::Mutex<Vec<serde_json::Value>>,
}

impl ApprovalLedger {
    /// Note a request as the client is shown it (once per id: the last word stands).
    pub fn note(&self, shown: serde_json::Value) {
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        asked.retain(|a| a["id"] != shown["id"]);
        asked.push(shown);
    }

    /// Whether none was noted.
    pub fn is_empty(&self) -> bool {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// The requests noted so far.
    pub fn asked(&self) -> Vec<serde_json::Value> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl PartialEq for ApprovalLedger {
    fn eq(&self, _: &ApprovalLedger) -> bool {
        true
    }
}

pub mod deadline;
pub mod memory;

/// Name patterns (`*` matches any run, case-insensitive): the plugin SDK's own matcher, so a
/// pattern means the same in the daemon's config (`models`) as in a plugin's.
#[path = "../../plugins/sdk/src/glob.rs"]
mod glob;
pub use glob::glob_match;
