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

/// Each tenant's guard-model spending in the current minute, in this process; kept across
/// reloads, so a reload does not hand every tenant a fresh minute.
#[derive(Debug, Default)]
pub struct TenantWindows(std::sync::Mutex<std::collections::HashMap<String, Window>>);

/// One tenant's minute.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    start: std::time::Instant,
    calls: u32,
    wait: std::time::Duration,
}

/// One request's part of its tenant's minute: the tenant, its limits, and where its spending is
/// counted.
#[derive(Debug)]
pub struct TenantSpend {
    windows: std::sync::Arc<TenantWindows>,
    tenant: String,
    calls: Option<u32>,
    wait: Option<std::time::Duration>,
}

impl TenantSpend {
    /// `tenant`'s spending, counted in `windows`, limited to `calls` calls and `wait` waited per
    /// minute (`None`: no limit).
    pub fn new(
        windows: std::sync::Arc<TenantWindows>,
        tenant: &str,
        calls: Option<u32>,
        wait: Option<std::time::Duration>,
    ) -> TenantSpend {
        TenantSpend {
            windows,
            tenant: tenant.to_string(),
            calls,
            wait,
        }
    }

    /// With this minute's window of the tenant (a new one once a minute has passed).
    fn window<T>(&self, f: impl FnOnce(&mut Window) -> T) -> T {
        let now = std::time::Instant::now();
        let mut all = self.windows.0.lock().unwrap_or_else(|e| e.into_inner());
        let w = all.entry(self.tenant.clone()).or_insert(Window {
            start: now,
            calls: 0,
            wait: std::time::Duration::ZERO,
        });
        if now.duration_since(w.start) >= std::time::Duration::from_secs(60) {
            *w = Window {
                start: now,
                calls: 0,
                wait: std::time::Duration::ZERO,
            };
        }
        f(w)
    }

    /// Take one call of the tenant's minute, if its calls and time waited are not spent.
    pub fn take_call(&self) -> bool {
        self.window(|w| {
            let spent =
                self.calls.is_some_and(|c| w.calls >= c) || self.wait.is_some_and(|l| w.wait >= l);
            if !spent {
                w.calls += 1;
            }
            !spent
        })
    }

    /// Count `waited` against the tenant's minute.
    pub fn spend(&self, waited: std::time::Duration) {
        if self.wait.is_some() {
            self.window(|w| w.wait += waited);
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

pub mod deadline;
pub mod memory;

/// Name patterns (`*` matches any run, case-insensitive): the plugin SDK's own matcher, so a
/// pattern means the same in the daemon's config (`models`) as in a plugin's.
#[path = "../../plugins/sdk/src/glob.rs"]
mod glob;
pub use glob::glob_match;
