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

/// The bytes hex digits (either case) spell, if they do.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
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

pub mod deadline;
pub mod memory;

/// Name patterns (`*` matches any run, case-insensitive): the plugin SDK's own matcher, so a
/// pattern means the same in the daemon's config (`models`) as in a plugin's.
#[path = "../../plugins/sdk/src/glob.rs"]
mod glob;
pub use glob::glob_match;
