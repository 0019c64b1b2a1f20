//! Giving freed memory back to the OS once a policy set is loaded. Loading one (components read
//! and instantiated, configs parsed) frees tens of MB; the allocator returns freed pages to the
//! OS only when it is next used after a delay, which an idle daemon never reaches: its resident
//! memory kept 13-27 MB it had freed (BENCHMARKS.md §25).

use std::sync::OnceLock;

static RELEASE: OnceLock<fn()> = OnceLock::new();

/// What [`release`] calls: set once, by the binary, for the allocator it installs.
pub fn on_release(release: fn()) {
    let _ = RELEASE.set(release);
}

/// Return freed memory to the OS now (nothing without an allocator that can).
pub fn release() {
    if let Some(release) = RELEASE.get() {
        release();
    }
}
