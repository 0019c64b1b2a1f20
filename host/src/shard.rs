//! The data plane runs thread-per-core: each worker thread has its own single-threaded runtime,
//! serves the client connections it is given from start to end, and has its own pool of backend
//! connections. A request then never changes threads (no cross-thread wake-up between the
//! client's connection, the handler and the backend connection), which on a small machine is a
//! large part of one hop's latency. The control plane (reloads, gRPC, admin listener, signals)
//! stays on the main runtime.

use std::cell::Cell;
use std::sync::{Mutex, MutexGuard};

thread_local! {
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// Runtimes that serve requests, for the tasks gauge.
static RUNTIMES: Mutex<Vec<tokio::runtime::Handle>> = Mutex::new(Vec::new());

/// Which worker this thread is: `1..=n` on a data-plane worker, `0` elsewhere.
pub fn index() -> usize {
    INDEX.with(Cell::get)
}

/// How many parts a [`PerWorker`] has: one per CPU, and one for the threads off the workers.
fn slots() -> usize {
    static SLOTS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *SLOTS.get_or_init(|| count(0) + 1)
}

/// A `T` per worker (a plugin's idle instances, metrics, a memo), each behind its own lock on
/// cache lines of its own: what a worker writes on every request then stays in its core's cache
/// instead of moving between the cores. Threads off the workers share part `0`; more workers
/// than CPUs share parts.
pub struct PerWorker<T>(Box<[Part<T>]>);

#[repr(align(128))]
struct Part<T>(Mutex<T>);

impl<T: Default> Default for PerWorker<T> {
    fn default() -> Self {
        PerWorker((0..slots()).map(|_| Part(Mutex::default())).collect())
    }
}

impl<T> PerWorker<T> {
    /// This thread's part.
    pub fn mine(&self) -> MutexGuard<'_, T> {
        lock(&self.0[index() % self.0.len()])
    }

    /// Every part, locked one at a time as the iterator reaches it.
    pub fn all(&self) -> impl Iterator<Item = MutexGuard<'_, T>> {
        self.0.iter().map(lock)
    }

    /// How many parts there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never: there is always part `0` (for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A part's lock; a panic while it was held leaves its counts or instances as they were.
fn lock<T>(part: &Part<T>) -> MutexGuard<'_, T> {
    part.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// Mark this thread as worker `index` whose runtime is `handle`.
pub fn enter(index: usize, handle: tokio::runtime::Handle) {
    mark(index);
    register(handle);
}

/// Mark this thread as worker `index` (tests: what is kept per worker, without a runtime).
pub fn mark(index: usize) {
    INDEX.with(|i| i.set(index));
}

/// Count `handle`'s tasks in [`alive_tasks`] (the main runtime, when workers serve).
pub fn register(handle: tokio::runtime::Handle) {
    RUNTIMES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(handle);
}

/// The number of data-plane workers for `configured` (`0`: one per CPU the process may use).
pub fn count(configured: usize) -> usize {
    if configured > 0 {
        return configured;
    }
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Tasks alive in the runtimes that serve requests (the current one when none registered).
pub fn alive_tasks() -> usize {
    let runtimes = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
    if runtimes.is_empty() {
        return tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
    }
    runtimes.iter().map(|h| h.metrics().num_alive_tasks()).sum()
}
