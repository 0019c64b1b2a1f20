//! The state replicas share (`[state]`): in this process (`memory`, the default) or in Redis or
//! Valkey (`redis`), so that N replicas behind a load balancer hold one limit, not N.
//!
//! What it holds:
//! - rate limits and token budgets, as GCRA buckets (the "generic cell rate algorithm": one
//!   timestamp per bucket, the theoretical arrival time of the next unit). A limit of L per
//!   minute lets L through at once from rest and then one every 60/L s, with no window edge at
//!   which twice the limit gets through;
//! - concurrency limits, as leases that end by themselves if their replica dies;
//! - small values and sets with a time to live: MCP tool lists, the tools an agent session has
//!   read (`flow`'s memory on MCP).
//!
//! On Redis every check-and-change is one script, run atomically on the server with the server's
//! clock, so replicas never race or disagree on time. Each owner (a tenant) holds at most
//! `OWNER_QUOTA` entries and `OWNER_BYTES` bytes of values and sets, in memory and on Redis
//! alike (there counted by the scripts that write them), so no tenant can push out another's
//! state, fill the process, or fill a Redis and have every other tenant refused; on Redis
//! nothing is pushed out while the server keeps its default `noeviction` policy.
//!
//! A store that does not answer within `timeout_ms` is `Unavailable`; the caller decides what
//! that means (`on_unavailable`). Nothing waits on it longer.

pub mod key;
mod memory;
pub use memory::{OWNER_BYTES, OWNER_QUOTA};
mod redis;

use crate::config::StateConfig;
use bytes::Bytes;
use std::time::Duration;

/// What taking from a bucket gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Taken.
    Yes,
    /// Over the limit: how long until the cost would fit.
    No {
        /// Time until a retry can succeed.
        retry_after: Duration,
    },
}

/// The store did not answer in time, or failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the state store is unavailable: {0}")]
pub struct Unavailable(pub String);

/// A rate: `per_minute` units a minute, all of them at once from rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Units per minute.
    pub per_minute: u32,
}

impl Rate {
    /// The time one unit takes to come back, in microseconds: fractional, so a limit of
    /// millions of tokens a minute keeps its rate (an integer would round it to 0, no limit).
    fn interval_us(self) -> f64 {
        60_000_000.0 / f64::from(self.per_minute.max(1))
    }
    /// How far ahead of now a bucket may run: a whole minute's worth.
    const BURST_US: u64 = 60_000_000;
}

/// The most units one settlement moves a bucket (with a unit per µs, about 12 days).
const MAX_SETTLE: i64 = 1 << 40;

/// The store.
pub enum Store {
    /// In this process.
    Memory(memory::Memory),
    /// In Redis or Valkey (boxed: its client is large, and there is one store per daemon).
    Redis(Box<redis::Redis>),
}

impl Store {
    /// The store `config` describes. Connecting to Redis waits for its first use, so a daemon
    /// starts (and answers what needs no state) while the store is down.
    pub fn new(config: &StateConfig) -> Store {
        match &config.redis_url {
            None => Store::Memory(memory::Memory::default()),
            Some(url) => Store::Redis(Box::new(redis::Redis::new(url, config))),
        }
    }

    /// Which backend it is (`memory` or `redis`).
    pub fn backend(&self) -> &'static str {
        match self {
            Store::Memory(_) => "memory",
            Store::Redis(_) => "redis",
        }
    }

    /// Whether it answers (`None`: in this process, it always does).
    pub fn health(&self) -> Option<&crate::health::Dependency> {
        match self {
            Store::Memory(_) => None,
            Store::Redis(r) => Some(&r.health),
        }
    }

    /// Ask whether it answers (the probe): its [`Store::health`] learns the answer.
    pub async fn ping(&self) {
        if let Store::Redis(r) = self {
            let _ = r.ping().await;
        }
    }

    /// Whether replicas share it (a limit counted in this process holds for the replica only).
    pub fn shared(&self) -> bool {
        matches!(self, Store::Redis(_))
    }

    /// Whether what needs the store goes on without it when it cannot answer
    /// (`on_unavailable = "open"`; the memory store always answers).
    pub fn fails_open(&self) -> bool {
        match self {
            Store::Memory(_) => false,
            Store::Redis(r) => r.fail_open,
        }
    }

    /// Take `cost` units from the bucket `key` under `rate`, if they fit.
    pub async fn take(&self, key: &str, rate: Rate, cost: u32) -> Result<Taken, Unavailable> {
        match self {
            Store::Memory(m) => Ok(m.take(key, rate, cost)),
            Store::Redis(r) => r.take(key, rate, cost).await,
        }
    }

    /// Settle a reservation on bucket `key`: `delta` more units taken whether they fit or not
    /// (what was used beyond what was reserved), or `-delta` given back (what was not).
    pub async fn settle(&self, key: &str, rate: Rate, delta: i64) -> Result<(), Unavailable> {
        if delta == 0 {
            return Ok(());
        }
        // A backend's absurd count moves a bucket far ahead, not past what a clock or Redis's
        // expiry can hold.
        let delta = delta.clamp(-MAX_SETTLE, MAX_SETTLE);
        match self {
            Store::Memory(m) => {
                m.settle(key, rate, delta);
                Ok(())
            }
            Store::Redis(r) => r.settle(key, rate, delta).await,
        }
    }

    /// The value at `key`, if any.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>, Unavailable> {
        match self {
            Store::Memory(m) => Ok(m.get(key, None)),
            Store::Redis(r) => r.get(key).await,
        }
    }

    /// The value at `key` (one of `owner`'s), if any; its life starts again at `ttl`, and it
    /// stays counted in `owner`'s share for as long.
    pub async fn get_renewed(
        &self,
        owner: &str,
        key: &str,
        ttl: Duration,
    ) -> Result<Option<Bytes>, Unavailable> {
        match self {
            Store::Memory(m) => Ok(m.get(key, Some(ttl))),
            Store::Redis(r) => r.get_renewed(owner, key, ttl).await,
        }
    }

    /// Set `key`, one of `owner`'s (a tenant: the memory store bounds what each holds), to
    /// `value` for `ttl`.
    pub async fn put(
        &self,
        owner: &str,
        key: &str,
        value: Bytes,
        ttl: Duration,
    ) -> Result<(), Unavailable> {
        match self {
            Store::Memory(m) => m.put(owner, key, value, ttl),
            Store::Redis(r) => r.put(owner, key, value, ttl).await,
        }
    }

    /// Set `key` (one of `owner`'s) to `value` for `ttl` if it holds `expected` now (`None`:
    /// nothing), as one step across replicas: whether it was set. What changes a value many
    /// replicas may change at once (read, change, swap; again if another came first).
    pub async fn swap(
        &self,
        owner: &str,
        key: &str,
        expected: Option<&[u8]>,
        value: Bytes,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        match self {
            Store::Memory(m) => m.swap(owner, key, expected, value, ttl),
            Store::Redis(r) => r.swap(owner, key, expected, value, ttl).await,
        }
    }

    /// Drop `key`.
    pub async fn delete(&self, key: &str) -> Result<(), Unavailable> {
        match self {
            Store::Memory(m) => {
                m.delete(key);
                Ok(())
            }
            Store::Redis(r) => r.delete(key).await,
        }
    }

    /// Add `delta` to the counter `key` (`owner`'s) unless its value would pass `limit`: the new
    /// value, or `None` (unchanged). A new counter starts at 0 and lives `ttl`; later additions
    /// keep its expiry (a fixed window). Counters are decimal text, read by [`Store::get`].
    pub async fn add_within(
        &self,
        owner: &str,
        key: &str,
        delta: i64,
        limit: i64,
        ttl: Duration,
    ) -> Result<Option<i64>, Unavailable> {
        // Within what Redis's Lua numbers (doubles) hold exactly.
        const EXACT: i64 = 1 << 53;
        let (delta, limit) = (delta.clamp(-EXACT, EXACT), limit.clamp(-EXACT, EXACT));
        match self {
            Store::Memory(m) => m.add_within(owner, key, delta, limit, ttl),
            Store::Redis(r) => r.add_within(owner, key, delta, limit, ttl).await,
        }
    }

    /// Add `member` to the set `key` (`owner`'s) unless it already holds `cap` others, and start
    /// the set's life again at `ttl`: whether `member` is in the set now (`false`: it was full).
    pub async fn add_member(
        &self,
        owner: &str,
        key: &str,
        member: &str,
        cap: usize,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        match self {
            Store::Memory(m) => m.add_member(owner, key, member, cap, ttl),
            // A member put in its own place: one script for both.
            Store::Redis(r) => r.replace_member(owner, key, member, member, cap, ttl).await,
        }
    }

    /// Put `new` in the set `key` (`owner`'s) in place of `old`, as one step, unless the set
    /// holds `cap` others: whether `new` is in the set now (`false`: full, and `old` stays). Its
    /// life starts again at `ttl`. On Redis one round trip, where adding and taking out are two.
    pub async fn replace_member(
        &self,
        owner: &str,
        key: &str,
        old: &str,
        new: &str,
        cap: usize,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        match self {
            Store::Memory(m) => m.replace_member(owner, key, old, new, cap, ttl),
            Store::Redis(r) => r.replace_member(owner, key, old, new, cap, ttl).await,
        }
    }

    /// Take `member` out of the set `key` (nothing if it is not there).
    pub async fn remove_member(&self, key: &str, member: &str) -> Result<(), Unavailable> {
        match self {
            Store::Memory(m) => {
                m.remove_member(key, member);
                Ok(())
            }
            Store::Redis(r) => r.remove_member(key, member).await,
        }
    }

    /// The members of the set `key`, sorted (none if there is no set); its life starts again at
    /// `ttl`, and it stays counted in `owner`'s share for as long.
    pub async fn members(
        &self,
        owner: &str,
        key: &str,
        ttl: Duration,
    ) -> Result<Vec<String>, Unavailable> {
        match self {
            Store::Memory(m) => Ok(m.members(key, ttl)),
            Store::Redis(r) => r.members(owner, key, ttl).await,
        }
    }

    /// Hold the lease `id` among `key`'s (`owner`'s) for at most `ttl`, unless `limit` others
    /// are held: whether it is held. A lease nobody releases (its replica died) ends at `ttl`.
    pub async fn lease(
        &self,
        owner: &str,
        key: &str,
        id: &str,
        limit: usize,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        match self {
            Store::Memory(m) => m.lease(owner, key, id, limit, ttl),
            Store::Redis(r) => r.lease(owner, key, id, limit, ttl).await,
        }
    }

    /// Let the lease `id` among `key`'s go.
    pub async fn release(&self, key: &str, id: &str) -> Result<(), Unavailable> {
        match self {
            Store::Memory(m) => {
                m.release(key, id);
                Ok(())
            }
            Store::Redis(r) => r.release(key, id).await,
        }
    }
}

/// Tenants' guard-model minutes (`[guard] tenant_calls_per_minute`, `tenant_wait_ms_per_minute`):
/// a bucket of calls, taken one a call, and one of milliseconds waited, from which each call
/// reserves the most it may wait before it starts and is settled to what it waited after (so
/// calls in flight at once overspend it by nothing). A store that cannot answer lets the call
/// through only with `on_unavailable = "open"`.
impl Store {
    /// Take one call of `tenant`'s minute, and `reserve` of its `wait` per minute (the most the
    /// call may wait, taken before it starts so calls in flight at once cannot overspend it),
    /// unless either is spent (`None`: no limit).
    pub async fn take_guard_call(
        &self,
        tenant: &str,
        calls: Option<u32>,
        wait: Option<Duration>,
        reserve: Duration,
    ) -> bool {
        let buckets = [
            wait.map(|w| (key::guard_wait(tenant), wait_rate(w), held_ms(reserve, w))),
            calls.map(|c| (key::guard_calls(tenant), Rate { per_minute: c }, 1)),
        ];
        let mut taken: Option<(String, Rate, u32)> = None;
        for (key, rate, cost) in buckets.into_iter().flatten() {
            match self.take(&key, rate, cost).await {
                Ok(Taken::Yes) => taken = Some((key, rate, cost)),
                Ok(Taken::No { .. }) => {
                    // The wait reserved before a call refused goes back.
                    if let Some((key, rate, cost)) = taken {
                        let _ = self.settle(&key, rate, -i64::from(cost)).await;
                    }
                    return false;
                }
                Err(e) if self.fails_open() => {
                    tracing::warn!(error = %e, "state store unavailable: a guard-model call made without its tenant's minute (on_unavailable = \"open\")");
                    return true;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "state store unavailable: a guard-model call refused (on_unavailable = \"closed\")");
                    return false;
                }
            }
        }
        true
    }

    /// Settle `tenant`'s `wait` per minute to `waited`, of which `reserve` was taken.
    pub async fn settle_guard_wait(
        &self,
        tenant: &str,
        wait: Duration,
        waited: Duration,
        reserve: Duration,
    ) {
        let key = key::guard_wait(tenant);
        let ms = waited.as_millis().min(i64::MAX as u128) as i64;
        let delta = ms - i64::from(held_ms(reserve, wait));
        if let Err(e) = self.settle(&key, wait_rate(wait), delta).await {
            tracing::warn!(error = %e, "a tenant's guard-model wait was not counted");
        }
    }
}

/// What a call reserving `reserve` takes from a minute of `wait`: no more than the whole minute
/// (a call longer than it still starts from rest, and empties it).
fn held_ms(reserve: Duration, wait: Duration) -> u32 {
    reserve.min(wait).as_millis().min(u128::from(u32::MAX)) as u32
}

/// A tenant's waiting per minute as a rate of milliseconds.
fn wait_rate(wait: Duration) -> Rate {
    Rate {
        per_minute: wait.as_millis().clamp(1, u128::from(u32::MAX)) as u32,
    }
}

/// A bucket's `tat` (µs) at `now` after settling `delta` units: taken beyond the limit, or given
/// back no further than to rest; `None` when it is back at rest.
fn settled(tat: Option<u64>, now: u64, rate: Rate, delta: i64) -> Option<u64> {
    let tat = tat.unwrap_or(now).max(now) as i128;
    let new = tat + (delta as f64 * rate.interval_us()).round() as i128;
    (new > now as i128).then_some(new as u64)
}

/// GCRA on one bucket: `tat` (its theoretical arrival time, µs; `None`: at rest) at `now`; the
/// new `tat` when `cost` fits, and what taking gave. Shared by the memory backend and the tests
/// of the Redis script.
fn gcra(tat: Option<u64>, now: u64, rate: Rate, cost: u32) -> (Option<u64>, Taken) {
    let tat = tat.unwrap_or(now).max(now);
    let new = tat + (f64::from(cost) * rate.interval_us()).round() as u64;
    if new - now > Rate::BURST_US {
        let wait = new - now - Rate::BURST_US;
        return (
            None,
            Taken::No {
                retry_after: Duration::from_micros(wait),
            },
        );
    }
    (Some(new), Taken::Yes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_rate_still_limits() {
        // 100 million tokens a minute: a unit comes back every 0.6 ns.
        let rate = Rate {
            per_minute: 100_000_000,
        };
        let (tat, taken) = gcra(None, 0, rate, 100_000_000);
        assert_eq!((tat, taken), (Some(60_000_000), Taken::Yes));
        assert!(matches!(gcra(tat, 0, rate, 1_000).1, Taken::No { .. }));
        assert_eq!(gcra(tat, 1_000, rate, 1_000).1, Taken::Yes);
    }

    #[test]
    fn tls_urls_are_understood() {
        // rediss:// is Redis over TLS (rustls, the system's roots): a managed Redis needs it.
        assert!(::redis::Client::open("rediss://railyard:secret@redis.example:6380/0").is_ok());
    }

    #[test]
    fn a_full_minute_at_once_then_one_per_interval() {
        let rate = Rate { per_minute: 100 };
        let mut tat = None;
        let mut taken = 0;
        for _ in 0..300 {
            let (next, t) = gcra(tat, 1_000_000, rate, 1);
            if t == Taken::Yes {
                tat = next;
                taken += 1;
            }
        }
        assert_eq!(taken, 100);
        let (_, t) = gcra(tat, 1_000_000, rate, 1);
        assert_eq!(
            t,
            Taken::No {
                retry_after: Duration::from_millis(600)
            }
        );
        // 0.6 s later, one more fits.
        assert_eq!(gcra(tat, 1_600_000, rate, 1).1, Taken::Yes);
    }

    #[test]
    fn settling_takes_past_the_limit_and_gives_back_no_further_than_rest() {
        let rate = Rate { per_minute: 60 }; // one a second
        let (tat, _) = gcra(None, 0, rate, 10);
        assert_eq!(tat, Some(10_000_000));
        // Used 70 more than reserved: the bucket is over, and the next take waits.
        let over = settled(tat, 0, rate, 70);
        assert_eq!(over, Some(80_000_000));
        assert!(matches!(gcra(over, 0, rate, 1).1, Taken::No { .. }));
        // Used 4 fewer than reserved: 4 come back; giving back more than was taken stops at rest.
        assert_eq!(settled(tat, 0, rate, -4), Some(6_000_000));
        assert_eq!(settled(tat, 0, rate, -40), None);
    }
}
