//! The Redis (or Valkey) backend: buckets as keys under `key_prefix`, taken from by one Lua
//! script each (atomic on the server, timed by the server's clock), each key expiring once its
//! bucket is back at rest. One multiplexed connection, reconnected by the client when it drops;
//! every call bounded by `timeout_ms`.

use super::{Rate, Taken, Unavailable};
use crate::config::StateConfig;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::time::Duration;
use tokio::sync::OnceCell;

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

/// A Redis store.
pub struct Redis {
    client: redis::Client,
    connection: OnceCell<ConnectionManager>,
    prefix: String,
    timeout: Duration,
    take: redis::Script,
    settle: redis::Script,
}

impl Redis {
    /// A store at `url` (checked by the config already); not connected until first used.
    pub fn new(url: &str, config: &StateConfig) -> Redis {
        Redis {
            client: redis::Client::open(url).expect("the config checked the URL"),
            connection: OnceCell::new(),
            prefix: config.key_prefix.clone(),
            timeout: config.timeout,
            take: redis::Script::new(TAKE),
            settle: redis::Script::new(SETTLE),
        }
    }

    async fn connection(&self) -> Result<ConnectionManager, Unavailable> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1);
        self.connection
            .get_or_try_init(|| self.client.get_connection_manager_with_config(config))
            .await
            .cloned()
            .map_err(|e| Unavailable(e.to_string()))
    }

    /// Take `cost` from bucket `key`, within the timeout.
    pub async fn take(&self, key: &str, rate: Rate, cost: u32) -> Result<Taken, Unavailable> {
        let call = async {
            let mut connection = self.connection().await?;
            let waited: i64 = self
                .take
                .key(format!("{}{key}", self.prefix))
                .arg(rate.interval_us())
                .arg(Rate::BURST_US)
                .arg(cost)
                .invoke_async(&mut connection)
                .await
                .map_err(|e| Unavailable(e.to_string()))?;
            Ok(match waited {
                w if w < 0 => Taken::Yes,
                w => Taken::No {
                    retry_after: Duration::from_micros(w as u64),
                },
            })
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(answer) => answer,
            Err(_) => Err(Unavailable(format!(
                "no answer within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    /// Settle `delta` on bucket `key`, within the timeout (see `Store::settle`).
    pub async fn settle(&self, key: &str, rate: Rate, delta: i64) -> Result<(), Unavailable> {
        let call = async {
            let mut connection = self.connection().await?;
            let _: i64 = self
                .settle
                .key(format!("{}{key}", self.prefix))
                .arg(rate.interval_us())
                .arg(delta)
                .invoke_async(&mut connection)
                .await
                .map_err(|e| Unavailable(e.to_string()))?;
            Ok(())
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .unwrap_or_else(|_| Err(Unavailable("no answer in time".into())))
    }
}
