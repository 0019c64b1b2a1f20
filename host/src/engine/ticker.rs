//! The epoch ticker: advances the engine's epoch when a running call's deadline has come, which
//! is what stops a plugin that runs past it.
//!
//! A call notes its deadline in its worker's slot before any guest code runs ([`Ticker::running`]),
//! and its store sets the epoch deadline one tick ahead. A tick then reaches every call running;
//! each store's callback ([`Ticker::watch`]) compares the time with its own call's deadline and
//! either stops the call or lets it go on. So the ticker need not tick at a fixed pace: it sleeps
//! until the earliest deadline of the calls running, and never longer than the shortest deadline
//! any call has had, since a call begun while it sleeps is due no sooner than that. With the
//! bundled 100 ms deadlines it wakes about 10 times a second under load (a fixed 1 ms tick woke
//! it 1,000 times, ~1.2 % of a core, and preempted the workers on a small machine; BENCHMARKS.md
//! §35). When no call has begun for [`IDLE`] it parks, and the next call wakes it.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};
use wasmtime::{Store, UpdateDeadline};

/// No call for this long: the ticker parks.
const IDLE: Duration = Duration::from_secs(1);

/// The least the ticker sleeps after advancing the epoch: a call past its deadline inside a host
/// function sees the tick only when it is back in guest code, and the ticker must not spin
/// meanwhile.
const AFTER_TICK: Duration = Duration::from_millis(1);

/// The longest sleep before any call has said its deadline.
const FIRST_NAP: Duration = Duration::from_millis(100);

/// A store whose calls the ticker stops at their deadlines: where it keeps the running call's
/// deadline ([`Ticker::running`] writes it, the callback of [`Ticker::watch`] reads it).
pub(crate) trait Due {
    fn due(&mut self) -> &mut u64;
    /// The running call's entry in the ticker's list, for a call that may pause
    /// ([`Ticker::running_apart`]); the store keeps it to move its deadline
    /// ([`Ticker::postpone`]).
    fn entry(&mut self, _entry: u64) {}
}

/// Keeps the ticker running: the engine and every plugin loaded from it hold one, and the
/// thread stops when the last of them is gone. (Tied to the engine alone, a policy set that
/// outlived its engine would silently run without deadlines.)
pub(crate) struct Ticker {
    /// Deadlines are nanoseconds after this.
    origin: Instant,
    /// The deadline of the call each worker (`crate::shard::index`) runs, `0` when none: a worker
    /// runs one call at a time, and writes only its own slot, on its own cache line.
    workers: Box<[Slot]>,
    /// The deadlines of calls on other threads (the control plane, tests) and of calls that may
    /// pause (a plugin waiting on a guard model), any number at once, by entry.
    others: Mutex<Vec<(u64, u64)>>,
    /// The next entry in `others`.
    entries: AtomicU64,
    /// The shortest deadline any call has had (ns): the longest the ticker sleeps.
    shortest: AtomicU64,
    /// A call began since the ticker last looked.
    active: AtomicBool,
    parked: AtomicBool,
    thread: OnceLock<std::thread::Thread>,
}

#[repr(align(128))]
struct Slot(AtomicU64);

/// A call that may run guest code, noted with its deadline until it is dropped.
pub(crate) struct Running<'a> {
    ticker: &'a Ticker,
    /// Its worker's slot, or `None` for one of the others.
    slot: Option<usize>,
    /// Its entry in the others.
    entry: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        match self.slot {
            Some(i) => self.ticker.workers[i].0.store(0, Ordering::Release),
            None => {
                let mut others = lock(&self.ticker.others);
                if let Some(at) = others.iter().position(|&(e, _)| e == self.entry) {
                    others.swap_remove(at);
                }
            }
        }
    }
}

impl Ticker {
    /// Start the ticker thread for `engine`.
    pub(crate) fn start(engine: wasmtime::Engine) -> std::io::Result<Arc<Ticker>> {
        let ticker = Arc::new(Ticker {
            origin: Instant::now(),
            // Worker indices start at 1 (0 is off the workers).
            workers: (0..=crate::shard::count(0))
                .map(|_| Slot(AtomicU64::new(0)))
                .collect(),
            others: Mutex::new(Vec::new()),
            entries: AtomicU64::new(1),
            shortest: AtomicU64::new(nanos(FIRST_NAP)),
            active: AtomicBool::new(false),
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

    /// Stop `store`'s calls at their deadlines: on a tick, a call past its [`Due`] traps (as an
    /// epoch interrupt), and any other waits for the next tick. Set once, when the store is made.
    pub(crate) fn watch<T: Due + 'static>(&self, store: &mut Store<T>) {
        let origin = self.origin;
        store.epoch_deadline_callback(move |mut store| {
            Ok(if since(origin) >= *store.data_mut().due() {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Continue(1)
            })
        });
    }

    /// Note a call on `store` that may run guest code, due `deadline` from now, before any does:
    /// the deadline goes in the worker's slot and the store's [`Due`], and the store's epoch
    /// deadline one tick ahead. Wakes the ticker if it parked, or if this deadline is shorter
    /// than any before.
    pub(crate) fn running<T: Due>(&self, store: &mut Store<T>, deadline: Duration) -> Running<'_> {
        let index = crate::shard::index();
        let slot = (index > 0 && index < self.workers.len()).then_some(index);
        self.note(store, deadline, slot)
    }

    /// [`Ticker::running`] for a call that may pause while others run on its worker (a plugin
    /// waiting on a guard model): noted in the list, never in the worker's slot, so the call
    /// that runs meanwhile cannot clear it.
    pub(crate) fn running_apart<T: Due>(
        &self,
        store: &mut Store<T>,
        deadline: Duration,
    ) -> Running<'_> {
        self.note(store, deadline, None)
    }

    /// Move the deadline of the paused call noted as `entry` to `due` (a wait on a guard model
    /// does not count against the plugin's CPU deadline).
    pub(crate) fn postpone(&self, entry: u64, due: u64) {
        if let Some(e) = lock(&self.others).iter_mut().find(|(e, _)| *e == entry) {
            e.1 = due;
        }
    }

    fn note<T: Due>(
        &self,
        store: &mut Store<T>,
        deadline: Duration,
        slot: Option<usize>,
    ) -> Running<'_> {
        let length = nanos(deadline).max(1);
        let due = since(self.origin).saturating_add(length);
        let mut entry = 0;
        match slot {
            Some(i) => self.workers[i].0.store(due, Ordering::SeqCst),
            None => {
                entry = self.entries.fetch_add(1, Ordering::Relaxed);
                lock(&self.others).push((entry, due));
                fence(Ordering::SeqCst);
            }
        }
        store.data_mut().entry(entry);
        // Written only when it changes: the line is read by both workers on every call.
        if !self.active.load(Ordering::Relaxed) {
            self.active.store(true, Ordering::SeqCst);
        }
        let shorter = length < self.shortest.load(Ordering::Relaxed)
            && self.shortest.fetch_min(length, Ordering::SeqCst) > length;
        if shorter || self.parked.load(Ordering::SeqCst) {
            if let Some(thread) = self.thread.get() {
                thread.unpark();
            }
        }
        *store.data_mut().due() = due;
        store.set_epoch_deadline(1);
        Running {
            ticker: self,
            slot,
            entry,
        }
    }

    /// Whether a call's deadline has passed, and the earliest deadline still to come.
    fn scan(&self, now: u64) -> (bool, Option<u64>) {
        let mut due = false;
        let mut next: Option<u64> = None;
        let workers = self.workers.iter().map(|s| s.0.load(Ordering::SeqCst));
        for d in workers.chain(lock(&self.others).iter().map(|&(_, d)| d)) {
            if d == 0 {
                continue;
            }
            if d <= now {
                due = true;
            } else {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        (due, next)
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
    let mut quiet_since: Option<u64> = None;
    loop {
        let Some(ticker) = alive.upgrade() else {
            return;
        };
        let now = since(ticker.origin);
        let (due, next) = ticker.scan(now);
        if due {
            engine.increment_epoch();
        }
        let began = ticker.active.swap(false, Ordering::SeqCst);
        if began || due || next.is_some() {
            quiet_since = None;
        } else if now - *quiet_since.get_or_insert(now) >= nanos(IDLE) {
            // Nothing ran for a while: park until a call begins. Announce it first and look
            // again, so a call that began meanwhile is seen here or sees `parked` and unparks.
            ticker.parked.store(true, Ordering::SeqCst);
            if !ticker.active.load(Ordering::SeqCst) && ticker.scan(u64::MAX).1.is_none() {
                drop(ticker);
                std::thread::park();
                let Some(ticker) = alive.upgrade() else {
                    return;
                };
                ticker.parked.store(false, Ordering::SeqCst);
            } else {
                ticker.parked.store(false, Ordering::SeqCst);
            }
            quiet_since = None;
            continue;
        }
        let mut nap = ticker.shortest.load(Ordering::SeqCst);
        if let Some(next) = next {
            nap = nap.min(next - now);
        }
        if due {
            nap = nap.max(nanos(AFTER_TICK));
        }
        drop(ticker);
        // Woken early by a call with a shorter deadline, or when the ticker is dropped.
        std::thread::park_timeout(Duration::from_nanos(nap));
    }
}

impl Ticker {
    /// Now, on the deadlines' clock.
    pub(crate) fn now(&self) -> u64 {
        since(self.origin)
    }
}

/// A capability's wait is given back to the running call through the ticker.
impl crate::caps::Clock for Ticker {
    fn now(&self) -> u64 {
        Ticker::now(self)
    }
    fn postpone(&self, entry: u64, due: u64) {
        Ticker::postpone(self, entry, due)
    }
}

fn since(origin: Instant) -> u64 {
    nanos(origin.elapsed())
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(module (func (export "spin") (loop (br 0))))`
    const SPIN: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
        0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
        0x03, 0x02, 0x01, 0x00, // one function of that type
        0x07, 0x08, 0x01, 0x04, b's', b'p', b'i', b'n', 0x00, 0x00, // export "spin"
        0x0a, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, // loop { br 0 }
    ];

    struct Call(u64);

    impl Due for Call {
        fn due(&mut self) -> &mut u64 {
            &mut self.0
        }
    }

    fn engine() -> wasmtime::Engine {
        wasmtime::Engine::new(wasmtime::Config::new().epoch_interruption(true)).expect("engine")
    }

    /// Runs the endless loop under `deadline` on this thread; returns how long it ran and
    /// whether it stopped as an epoch interrupt.
    fn spin(ticker: &Ticker, module: &wasmtime::Module, deadline: Duration) -> (Duration, bool) {
        let mut store = Store::new(module.engine(), Call(0));
        ticker.watch(&mut store);
        let instance = wasmtime::Instance::new(&mut store, module, &[]).expect("instance");
        let f = instance
            .get_typed_func::<(), ()>(&mut store, "spin")
            .expect("spin");
        let start = Instant::now();
        let running = ticker.running(&mut store, deadline);
        let err = f
            .call(&mut store, ())
            .expect_err("an endless loop returned");
        drop(running);
        let interrupted = err.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt);
        (start.elapsed(), interrupted)
    }

    #[test]
    fn each_call_stops_at_its_own_deadline() {
        let engine = engine();
        let ticker = Ticker::start(engine.clone()).expect("ticker");
        let module = wasmtime::Module::new(&engine, SPIN).expect("module");
        // A long call beside short ones: their ticks reach it, and it goes on to its own. It runs
        // as worker 1 (its own slot), the short ones off the workers (the list).
        let (long, short) = std::thread::scope(|s| {
            let long = s.spawn(|| {
                crate::shard::mark(1);
                spin(&ticker, &module, Duration::from_millis(600))
            });
            let short: Vec<_> = (0..3)
                .map(|_| spin(&ticker, &module, Duration::from_millis(40)))
                .collect();
            (long.join().expect("long call"), short)
        });
        for (took, interrupted) in short {
            assert!(
                interrupted,
                "the short call was not stopped by its deadline"
            );
            assert!(took >= Duration::from_millis(40), "stopped early: {took:?}");
        }
        assert!(long.1, "the long call was not stopped by its deadline");
        assert!(
            long.0 >= Duration::from_millis(600),
            "stopped early: {:?}",
            long.0
        );
        // A deadline shorter than any before wakes the ticker from a longer sleep.
        let (took, interrupted) = spin(&ticker, &module, Duration::from_millis(5));
        assert!(interrupted && took >= Duration::from_millis(5), "{took:?}");
        assert!(
            took < Duration::from_secs(30),
            "the ticker overslept: {took:?}"
        );
    }

    #[test]
    fn parks_when_idle_and_wakes_for_a_call() {
        let engine = engine();
        let ticker = Ticker::start(engine.clone()).expect("ticker");
        let module = wasmtime::Module::new(&engine, SPIN).expect("module");
        let parked = |want: bool| {
            let deadline = Instant::now() + Duration::from_secs(20);
            while ticker.parked.load(Ordering::SeqCst) != want {
                assert!(
                    Instant::now() < deadline,
                    "the ticker never became parked={want}"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        parked(true);
        // A call wakes it, and it stops the call at its deadline.
        let (_, interrupted) = spin(&ticker, &module, Duration::from_millis(30));
        assert!(interrupted, "the call was not stopped by its deadline");
        // A call that runs past the idle time keeps it awake.
        let mut store = Store::new(&engine, Call(0));
        let running = ticker.running(&mut store, Duration::from_secs(60));
        parked(false);
        std::thread::sleep(IDLE * 2);
        assert!(
            !ticker.parked.load(Ordering::SeqCst),
            "the ticker parked while a call was running"
        );
        drop(running);
        parked(true);
    }
}
