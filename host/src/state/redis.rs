//! The Redis (or Valkey) backend: buckets as keys under `key_prefix`, taken from by one Lua
//! script each (atomic on the server, timed by the server's clock), each key expiring once its
//! bucket is back at rest. One multiplexed connection, reconnected by the client when it drops
//! and made anew after any call that failed (a connection that stopped answering is never kept:
//! a restarted Redis is reached by the next call, at most one attempt each [`RETRY`]); every
//! call bounded by `timeout_ms`. Each call's outcome tells the store's [`Dependency`].

use super::{Rate, Taken, Unavailable};
use crate::config::StateConfig;
use crate::health::Dependency;
use bytes::Bytes;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::time::{Duration, Instant};

/// The least time between two attempts to connect while the store does not answer.
const RETRY: Duration = Duration::from_millis(250);

/// GCRA (see `super::gcra`, its twin): `KEYS[1]` the bucket, `ARGV` the interval and burst in
/// µs and the cost. `-1` when taken, else the µs until the cost would fit.
const TAKE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then tat = now end
local new = tat + cost * interval
if new - now > burst then return new - now - burst end
redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.floor((new - now) / 1000) + 1000)
return -1
";

/// A settlement (see `super::settled`, its twin): `ARGV` the interval in µs and the delta.
const SETTLE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then tat = now end
local new = tat + tonumber(ARGV[2]) * tonumber(ARGV[1])
if new <= now then redis.call('DEL', KEYS[1]) return 0 end
redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.floor((new - now) / 1000) + 1000)
return 1
";

/// What an owner (a tenant) holds, kept beside its keys by every script that writes one of its
/// values or sets, so that on Redis too no tenant holds more than its share (`OWNER_BYTES`,
/// `OWNER_QUOTA`, as in memory) and fills a `noeviction` server for the others. `KEYS[2]` indexes
/// its keys by when they end, `KEYS[3]` their sizes, `KEYS[4]` the sum. Keys whose time has come
/// leave the sum as the next write finds them; one whose life a read renewed is indexed at its new
/// end instead.
const OWNED: &str = r"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function purge(now)
  local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 64)
  for _, k in ipairs(due) do
    local left = redis.call('PTTL', k)
    if left > 0 then
      redis.call('ZADD', KEYS[2], now + left, k)
    else
      local s = tonumber(redis.call('HGET', KEYS[3], k) or '0') or 0
      redis.call('DECRBY', KEYS[4], s)
      redis.call('HDEL', KEYS[3], k)
      redis.call('ZREM', KEYS[2], k)
    end
  end
end
local function old_size()
  return tonumber(redis.call('HGET', KEYS[3], KEYS[1]) or '0') or 0
end
local function fits(size, max_bytes, max_entries)
  local old = old_size()
  local total = tonumber(redis.call('GET', KEYS[4]) or '0') or 0
  if total - old + size > max_bytes then return false end
  if redis.call('ZSCORE', KEYS[2], KEYS[1]) == false
    and redis.call('ZCARD', KEYS[2]) >= max_entries then return false end
  return true
end
local function account(size, ttl, now)
  local old = old_size()
  redis.call('HSET', KEYS[3], KEYS[1], size)
  redis.call('INCRBY', KEYS[4], size - old)
  redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
  for i = 2, 4 do
    if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
  end
end
";

/// Set `KEYS[1]` to `ARGV[1]` for `ARGV[2]` ms within its owner's share (`ARGV[3]` bytes,
/// `ARGV[4]` entries): `1` set, `-1` past the share (nothing changed).
const PUT: &str = r"
local now = now_ms()
purge(now)
local size = #KEYS[1] + #ARGV[1]
if not fits(size, tonumber(ARGV[3]), tonumber(ARGV[4])) then return -1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
account(size, tonumber(ARGV[2]), now)
return 1
";

/// [`PUT`] only if `KEYS[1]` holds `ARGV[3]` now (`ARGV[4]` = `0`: holds nothing): `1` set, `0`
/// it holds something else (nothing changed), `-1` past the share. `ARGV[5]`, `ARGV[6]`: the
/// share.
const SWAP: &str = r"
local now_v = redis.call('GET', KEYS[1])
if ARGV[4] == '0' then
  if now_v then return 0 end
elseif now_v ~= ARGV[3] then return 0 end
local now = now_ms()
purge(now)
local size = #KEYS[1] + #ARGV[1]
if not fits(size, tonumber(ARGV[5]), tonumber(ARGV[6])) then return -1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
account(size, tonumber(ARGV[2]), now)
return 1
";

/// `ARGV[2]` in place of `ARGV[1]` in the set, unless it holds `ARGV[3]` others (`ARGV[1]` not
/// counted) or its owner's share (`ARGV[5]` bytes, `ARGV[6]` entries) would be passed; its life
/// started again at `ARGV[4]` ms: `1` replaced, `0` full, `-1` past the share (nothing changed).
/// With `ARGV[1]` = `ARGV[2]` it adds a member to the set.
const REPLACE_MEMBER: &str = r"
local now = now_ms()
purge(now)
local adds = redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 0
local removes = ARGV[1] ~= ARGV[2] and redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1
if adds then
  local others = redis.call('SCARD', KEYS[1]) - (removes and 1 or 0)
  if others >= tonumber(ARGV[3]) then return 0 end
end
local base = old_size()
if redis.call('EXISTS', KEYS[1]) == 0 or base == 0 then base = #KEYS[1] end
local size = base + (adds and #ARGV[2] or 0) - (removes and #ARGV[1] or 0)
if not fits(size, tonumber(ARGV[5]), tonumber(ARGV[6])) then return -1 end
if adds then redis.call('SADD', KEYS[1], ARGV[2]) end
if removes then redis.call('SREM', KEYS[1], ARGV[1]) end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
account(size, tonumber(ARGV[4]), now)
return 1
";

/// The value at `KEYS[1]`, its life started again at `ARGV[1]` ms and indexed at its new end in its
/// owner's share (counted anew if the index had lost it), so a key kept alive by reads alone is
/// never left out of the sum.
const GET_RENEWED: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return false end
local ttl = tonumber(ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
local size = old_size()
if size == 0 then size = #KEYS[1] + #v end
account(size, ttl, now_ms())
return v
";

/// A set's members, its life started again at `ARGV[1]` ms and indexed as [`GET_RENEWED`] does.
const MEMBERS: &str = r"
local m = redis.call('SMEMBERS', KEYS[1])
if #m > 0 then
  local ttl = tonumber(ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ttl)
  local size = old_size()
  if size == 0 then
    size = #KEYS[1]
    for _, x in ipairs(m) do size = size + #x end
  end
  account(size, ttl, now_ms())
end
return m
";

/// Hold lease `ARGV[1]` for `ARGV[3]` ms unless `ARGV[2]` others are held (leases past their time,
/// a replica's that died mid-request, no longer count), within its owner's share (`ARGV[4]`
/// bytes, `ARGV[5]` entries; a lease counts as its id and 16 bytes): `1` held, `0` not, `-1` past
/// the share (nothing changed).
const LEASE: &str = r"
local now = now_ms()
purge(now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREM', KEYS[1], ARGV[1])
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[2]) then return 0 end
local ttl = tonumber(ARGV[3])
local size = #KEYS[1] + (held + 1) * (#ARGV[1] + 16)
if not fits(size, tonumber(ARGV[4]), tonumber(ARGV[5])) then return -1 end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
account(size, ttl, now)
return 1
";

/// Add `ARGV[1]` to the counter unless it would pass `ARGV[2]`; a new counter lives `ARGV[3]` ms
/// and counts in its owner's share (`ARGV[4]` bytes, `ARGV[5]` entries). `{1, new}` when added,
/// `{0, value}` when not, `{-1, 0}` when a new counter is past the share.
const ADD_WITHIN: &str = r"
local v = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local n = v + tonumber(ARGV[1])
if n > tonumber(ARGV[2]) then return {0, v} end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('SET', KEYS[1], string.format('%.0f', n), 'KEEPTTL')
else
  local now = now_ms()
  purge(now)
  local size = #KEYS[1] + 24
  if not fits(size, tonumber(ARGV[4]), tonumber(ARGV[5])) then return {-1, 0} end
  redis.call('SET', KEYS[1], string.format('%.0f', n), 'PX', ARGV[3])
  account(size, tonumber(ARGV[3]), now)
end
return {1, n}
";

/// The connection there is, and the last failed attempt to make one (when, and why).
type Connection = (Option<ConnectionManager>, Option<(Instant, String)>);

/// A Redis store.
pub struct Redis {
    client: redis::Client,
    /// The connection, and when the last attempt to make one failed.
    connection: tokio::sync::Mutex<Connection>,
    /// Whether it answers.
    pub health: Dependency,
    prefix: String,
    timeout: Duration,
    /// `on_unavailable = "open"`.
    pub fail_open: bool,
    take: redis::Script,
    settle: redis::Script,
    replace_member: redis::Script,
    put: redis::Script,
    swap: redis::Script,
    get_renewed: redis::Script,
    members: redis::Script,
    lease: redis::Script,
    add_within: redis::Script,
}

impl Redis {
    /// A store at `url` (checked by the config already); not connected until first used.
    pub fn new(url: &str, config: &StateConfig) -> Redis {
        Redis {
            client: redis::Client::open(url).expect("the config checked the URL"),
            connection: tokio::sync::Mutex::new((None, None)),
            health: Dependency::new("the state store"),
            prefix: config.key_prefix.clone(),
            timeout: config.timeout,
            fail_open: config.fail_open,
            take: redis::Script::new(TAKE),
            settle: redis::Script::new(SETTLE),
            replace_member: redis::Script::new(&format!("{OWNED}{REPLACE_MEMBER}")),
            put: redis::Script::new(&format!("{OWNED}{PUT}")),
            swap: redis::Script::new(&format!("{OWNED}{SWAP}")),
            get_renewed: redis::Script::new(&format!("{OWNED}{GET_RENEWED}")),
            members: redis::Script::new(&format!("{OWNED}{MEMBERS}")),
            lease: redis::Script::new(&format!("{OWNED}{LEASE}")),
            add_within: redis::Script::new(&format!("{OWNED}{ADD_WITHIN}")),
        }
    }

    async fn connection(&self) -> Result<ConnectionManager, Unavailable> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1);
        let mut held = self.connection.lock().await;
        if let Some(c) = &held.0 {
            return Ok(c.clone());
        }
        if let Some((at, why)) = &held.1 {
            if at.elapsed() < RETRY {
                return Err(Unavailable(why.clone()));
            }
        }
        match self.client.get_connection_manager_with_config(config).await {
            Ok(c) => {
                *held = (Some(c.clone()), None);
                Ok(c)
            }
            Err(e) => {
                held.1 = Some((Instant::now(), e.to_string()));
                Err(Unavailable(e.to_string()))
            }
        }
    }

    /// Let the connection go after a failed call: the next call makes a new one.
    async fn drop_connection(&self) {
        self.connection.lock().await.0 = None;
    }

    /// Whether the server answers a `PING` (the store's probe).
    pub async fn ping(&self) -> Result<(), Unavailable> {
        self.call(|mut c| async move { redis::cmd("PING").query_async::<()>(&mut c).await })
            .await
    }

    /// Take `cost` from bucket `key`, within the timeout.
    pub async fn take(&self, key: &str, rate: Rate, cost: u32) -> Result<Taken, Unavailable> {
        let key = self.key(key);
        self.call(|mut c| async move {
            let waited: i64 = self
                .take
                .key(&key)
                .arg(rate.interval_us())
                .arg(Rate::BURST_US)
                .arg(cost)
                .invoke_async(&mut c)
                .await?;
            Ok(match waited {
                w if w < 0 => Taken::Yes,
                w => Taken::No {
                    retry_after: Duration::from_micros(w as u64),
                },
            })
        })
        .await
    }

    /// Settle `delta` on bucket `key`, within the timeout (see `Store::settle`).
    pub async fn settle(&self, key: &str, rate: Rate, delta: i64) -> Result<(), Unavailable> {
        let key = self.key(key);
        self.call(|mut c| async move {
            self.settle
                .key(&key)
                .arg(rate.interval_us())
                .arg(delta)
                .invoke_async::<i64>(&mut c)
                .await
                .map(drop)
        })
        .await
    }

    /// Run `work` on the connection within the timeout.
    async fn call<T, F, Fut>(&self, work: F) -> Result<T, Unavailable>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let call = async {
            let connection = self.connection().await?;
            work(connection)
                .await
                .map_err(|e| Unavailable(e.to_string()))
        };
        let answer = match tokio::time::timeout(self.timeout, call).await {
            Ok(answer) => answer,
            Err(_) => Err(Unavailable(format!(
                "no answer within {} ms",
                self.timeout.as_millis()
            ))),
        };
        if answer.is_err() {
            self.drop_connection().await;
        }
        self.health.saw(&answer);
        answer
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// The value at `key`.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>, Unavailable> {
        let key = self.key(key);
        self.call(|mut c| async move {
            let value: Option<Vec<u8>> = redis::cmd("GET").arg(&key).query_async(&mut c).await?;
            Ok(value.map(Bytes::from))
        })
        .await
    }

    /// The value at `key`, one of `owner`'s, its life started again at `ttl`.
    pub async fn get_renewed(
        &self,
        owner: &str,
        key: &str,
        ttl: Duration,
    ) -> Result<Option<Bytes>, Unavailable> {
        let get = self.owned(&self.get_renewed, owner, key, |c| {
            c.arg(ttl.as_millis().max(1) as u64);
        });
        self.call(|mut c| async move {
            let value: Option<Vec<u8>> = get.invoke_async(&mut c).await?;
            Ok(value.map(Bytes::from))
        })
        .await
    }

    /// `script` (one of those that begin with [`OWNED`]) on `key`, one of `owner`'s: its keys
    /// and those that keep what `owner` holds; `args` then the owner's share (the script's last
    /// two arguments).
    fn owned<'s>(
        &self,
        script: &'s redis::Script,
        owner: &str,
        key: &str,
        args: impl FnOnce(&mut redis::ScriptInvocation<'s>),
    ) -> redis::ScriptInvocation<'s> {
        let mut call = script.prepare_invoke();
        call.key(self.key(key));
        let base = crate::state::key::owned(owner);
        for part in ["idx", "size", "total"] {
            call.key(self.key(&format!("{base}:{part}")));
        }
        args(&mut call);
        call.arg(super::OWNER_BYTES).arg(super::OWNER_QUOTA);
        call
    }

    /// Set `key`, one of `owner`'s, to `value` for `ttl`, within `owner`'s share.
    pub async fn put(
        &self,
        owner: &str,
        key: &str,
        value: Bytes,
        ttl: Duration,
    ) -> Result<(), Unavailable> {
        let put = self.owned(&self.put, owner, key, |c| {
            c.arg(value.as_ref()).arg(ttl.as_millis().max(1) as u64);
        });
        let set: i64 = self
            .call(|mut c| async move { put.invoke_async(&mut c).await })
            .await?;
        match set {
            1 => Ok(()),
            _ => Err(past_share(owner)),
        }
    }

    /// Set `key`, one of `owner`'s, to `value` for `ttl` if it holds `expected` now (`None`:
    /// nothing): whether it was set.
    pub async fn swap(
        &self,
        owner: &str,
        key: &str,
        expected: Option<&[u8]>,
        value: Bytes,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let swap = self.owned(&self.swap, owner, key, |c| {
            c.arg(value.as_ref())
                .arg(ttl.as_millis().max(1) as u64)
                .arg(expected.unwrap_or_default())
                .arg(if expected.is_some() { "1" } else { "0" });
        });
        let set: i64 = self
            .call(|mut c| async move { swap.invoke_async(&mut c).await })
            .await?;
        match set {
            1 => Ok(true),
            0 => Ok(false),
            _ => Err(past_share(owner)),
        }
    }

    /// Drop `key`.
    pub async fn delete(&self, key: &str) -> Result<(), Unavailable> {
        let key = self.key(key);
        self.call(
            |mut c| async move { redis::cmd("DEL").arg(&key).query_async::<()>(&mut c).await },
        )
        .await
    }

    /// See `Store::replace_member`: within `owner`'s share.
    pub async fn replace_member(
        &self,
        owner: &str,
        key: &str,
        old: &str,
        new: &str,
        cap: usize,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let replace = self.owned(&self.replace_member, owner, key, |c| {
            c.arg(old)
                .arg(new)
                .arg(cap)
                .arg(ttl.as_millis().max(1) as u64);
        });
        let replaced: i64 = self
            .call(|mut c| async move { replace.invoke_async(&mut c).await })
            .await?;
        match replaced {
            -1 => Err(past_share(owner)),
            r => Ok(r == 1),
        }
    }

    /// See `Store::remove_member`.
    pub async fn remove_member(&self, key: &str, member: &str) -> Result<(), Unavailable> {
        let key = self.key(key);
        self.call(|mut c| async move {
            redis::cmd("SREM")
                .arg(&key)
                .arg(member)
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }

    /// See `Store::members`.
    pub async fn members(
        &self,
        owner: &str,
        key: &str,
        ttl: Duration,
    ) -> Result<Vec<String>, Unavailable> {
        let members = self.owned(&self.members, owner, key, |c| {
            c.arg(ttl.as_millis().max(1) as u64);
        });
        self.call(|mut c| async move {
            let mut members: Vec<String> = members.invoke_async(&mut c).await?;
            members.sort();
            Ok(members)
        })
        .await
    }

    /// See `Store::lease`.
    pub async fn lease(
        &self,
        owner: &str,
        key: &str,
        id: &str,
        limit: usize,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let lease = self.owned(&self.lease, owner, key, |c| {
            c.arg(id).arg(limit).arg(ttl.as_millis().max(1) as u64);
        });
        let held: i64 = self
            .call(|mut c| async move { lease.invoke_async(&mut c).await })
            .await?;
        match held {
            -1 => Err(past_share(owner)),
            h => Ok(h == 1),
        }
    }

    /// See `Store::release`.
    pub async fn release(&self, key: &str, id: &str) -> Result<(), Unavailable> {
        let key = self.key(key);
        self.call(|mut c| async move {
            redis::cmd("ZREM")
                .arg(&key)
                .arg(id)
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }

    /// See `Store::add_within`.
    pub async fn add_within(
        &self,
        owner: &str,
        key: &str,
        delta: i64,
        limit: i64,
        ttl: Duration,
    ) -> Result<Option<i64>, Unavailable> {
        let add = self.owned(&self.add_within, owner, key, |c| {
            c.arg(delta).arg(limit).arg(ttl.as_millis().max(1) as u64);
        });
        let (added, value): (i64, i64) = self
            .call(|mut c| async move { add.invoke_async(&mut c).await })
            .await?;
        match added {
            -1 => Err(past_share(owner)),
            a => Ok((a == 1).then_some(value)),
        }
    }
}

/// A write refused because `owner` holds its share of the store (it alone is refused: the store
/// answers everyone else).
fn past_share(owner: &str) -> Unavailable {
    Unavailable(format!(
        "'{owner}' holds its share of the state store ({} bytes or {} entries), its most",
        super::OWNER_BYTES,
        super::OWNER_QUOTA
    ))
}
