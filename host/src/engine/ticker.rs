//! The epoch ticker: advances the engine's epoch every [`EPOCH_TICK`] while plugins may run,
//! which is what makes their CPU deadlines fire. When no call has been running for
//! [`IDLE_TICKS`] ticks it parks, so an idle daemon does not wake a core a thousand times a
//! second (measured: ~2 % of a core, idle or not); the next call wakes it before any guest code
//! runs, so a deadline counts from there as before.

use super::EPOCH_TICK;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

/// Ticks without any call before the ticker parks.
const IDLE_TICKS: u32 = 100;

/// Keeps the ticker running: the engine and every plugin loaded from it hold one, and the
/// thread stops when the last of them is gone. (Tied to the engine alone, a policy set that
/// outlived its engine would silently run without deadlines.)
pub(crate) struct Ticker {
    /// Calls begun and ended: none runs when they are equal.
    begun: AtomicU64,
    ended: AtomicU64,
    parked: AtomicBool,
    thread: OnceLock<std::thread::Thread>,
}

/// A call that may run guest code: the ticker keeps ticking until it is dropped.
pub(crate) struct Running<'a>(&'a Ticker);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.ended.fetch_add(1, Ordering::SeqCst);
    }
}

impl Ticker {
    /// Start the ticker thread for `engine`.
    pub(crate) fn start(engine: wasmtime::Engine) -> std::io::Result<Arc<Ticker>> {
        let ticker = Arc::new(Ticker {
            begun: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            parked: AtomicBool::new(false),
            thread: OnceLock::new(),
        });
        let alive = Arc::downgrade(&ticker);
        let thread = std::thread::Builder::new()
            .name("railyard-epoch".into())
            .spawn(move || run(&alive, &engine))?;
        let _ = ticker.thread.set(thread.thread().clone());
        Ok(ticker)
    }

    /// Mark a call that may run guest code (call it before setting the call's deadline): wakes
    /// the ticker if it parked.
    pub(crate) fn running(&self) -> Running<'_> {
        self.begun.fetch_add(1, Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst) {
            if let Some(thread) = self.thread.get() {
                thread.unpark();
            }
        }
        Running(self)
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        // A parked ticker would otherwise never notice it is no longer needed.
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }
}

fn run(alive: &Weak<Ticker>, engine: &wasmtime::Engine) {
    let mut seen = u64::MAX;
    let mut quiet = 0;
    loop {
        std::thread::sleep(EPOCH_TICK);
        engine.increment_epoch();
        let Some(ticker) = alive.upgrade() else {
            return;
        };
        let begun = ticker.begun.load(Ordering::SeqCst);
        let idle = begun == ticker.ended.load(Ordering::SeqCst);
        if begun != seen || !idle {
            seen = begun;
            quiet = 0;
            continue;
        }
        quiet += 1;
        if quiet < IDLE_TICKS {
            continue;
        }
        // Nothing ran for a while: park until a call begins. Announce it first and look again,
        // so a call that began meanwhile is seen here or sees `parked` and unparks.
        ticker.parked.store(true, Ordering::SeqCst);
        if ticker.begun.load(Ordering::SeqCst) == seen {
            drop(ticker);
            std::thread::park();
            let Some(ticker) = alive.upgrade() else {
                return;
            };
            ticker.parked.store(false, Ordering::SeqCst);
        } else {
            ticker.parked.store(false, Ordering::SeqCst);
        }
        quiet = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn parks_when_idle_and_ticks_again_for_a_call() {
        let engine = wasmtime::Engine::new(wasmtime::Config::new().epoch_interruption(true))
            .expect("engine");
        let ticker = Ticker::start(engine).expect("ticker");
        // Idle: it parks after IDLE_TICKS ticks (allow a slow machine plenty of time).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ticker.parked.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the ticker never parked");
            std::thread::sleep(Duration::from_millis(5));
        }
        // A call wakes it, and it keeps ticking while the call runs.
        let running = ticker.running();
        let deadline = Instant::now() + Duration::from_secs(10);
        while ticker.parked.load(Ordering::SeqCst) {
            assert!(
                Instant::now() < deadline,
                "the ticker did not wake for a call"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(EPOCH_TICK * (IDLE_TICKS + 50));
        assert!(
            !ticker.parked.load(Ordering::SeqCst),
            "the ticker parked while a call was running"
        );
        drop(running);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ticker.parked.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the ticker never parked again");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
