//! Waiting with a deadline, on a data-plane worker, without the worker waking itself.
//!
//! tokio's timer wakes its own thread (an eventfd write, then an extra `epoll_wait`) whenever a
//! timer is armed earlier than the earliest one it saw when it last slept. A keep-alive
//! connection arms its header timer (`header_read_timeout` ahead) after every answer; had the
//! backend wait before it been armed further out (the backend timeout, 60 s by default, against
//! 30 s), that header timer would be the earliest and cost two system calls per request at low
//! concurrency (measured: 7.4 → 6.0 per request at concurrency 1; BENCHMARKS.md §25). So a worker's
//! waits arm the timer at most [`arm_at_most`] ahead and re-arm it as the steps pass: all of the
//! worker's timers are then armed the same distance ahead, and a new one is never the earliest.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;
use tokio::time::Instant;

/// The shortest step: a tiny header timeout must not wake a long wait every few milliseconds (it
/// then only loses the saving).
const MIN_STEP: Duration = Duration::from_millis(250);

thread_local! {
    static STEP: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// On this thread, arm timers at most `step` ahead (the listener's header timeout, on a worker),
/// or [`MIN_STEP`] if that is longer.
pub fn arm_at_most(step: Duration) {
    STEP.with(|s| s.set(Some(step.max(MIN_STEP))));
}

/// The instant `after` from now (far in the future rather than past the clock's range).
pub fn after(after: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(after)
        .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

/// `fut`'s output, or `None` once `deadline` has passed first.
pub async fn within<F: Future>(deadline: Instant, fut: F) -> Option<F::Output> {
    let step = STEP.with(Cell::get);
    let arm = |now: Instant| match step {
        Some(step) => deadline.min(now.checked_add(step).unwrap_or(deadline)),
        None => deadline,
    };
    let mut fut = pin!(fut);
    // Registered with the timer on its first poll only, so a future that is done at once arms
    // nothing.
    let mut sleep = pin!(tokio::time::sleep_until(arm(Instant::now())));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        while sleep.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            if now >= deadline {
                return Poll::Ready(None);
            }
            sleep.as_mut().reset(arm(now));
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn a_wait_longer_than_the_step_ends_at_its_deadline_not_at_a_step() {
        std::thread::spawn(|| {
            // Below the floor: steps of MIN_STEP.
            arm_at_most(Duration::from_millis(20));
            assert_eq!(STEP.with(Cell::get), Some(MIN_STEP));
            runtime().block_on(async {
                let start = Instant::now();
                let deadline = start + MIN_STEP * 2 + MIN_STEP / 2;
                let out = within(deadline, std::future::pending::<()>()).await;
                assert_eq!(out, None);
                assert!(Instant::now() >= deadline, "ended before its deadline");
                // A future that ends between steps is answered.
                let slow = async {
                    tokio::time::sleep(MIN_STEP + MIN_STEP / 2).await;
                    7
                };
                assert_eq!(within(after(Duration::from_secs(5)), slow).await, Some(7));
                assert_eq!(within(Instant::now(), async { 1 }).await, Some(1));
            });
        })
        .join()
        .unwrap();
    }

    #[test]
    fn without_a_step_the_deadline_is_armed_at_once() {
        runtime().block_on(async {
            let deadline = Instant::now() + Duration::from_millis(30);
            assert_eq!(within(deadline, std::future::pending::<()>()).await, None);
            assert!(Instant::now() >= deadline);
            assert!(after(Duration::MAX) > Instant::now());
        });
    }
}
