//! The memory backend: buckets in this process (one replica, no setup).

use super::{gcra, settled, Rate, Taken};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Buckets by key, each its theoretical arrival time in µs since the store was made.
pub struct Memory {
    epoch: Instant,
    buckets: Mutex<HashMap<String, u64>>,
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            epoch: Instant::now(),
            buckets: Mutex::default(),
        }
    }
}

/// Past this many buckets, those at rest are dropped (a bucket at rest is the same as none).
const SWEEP_AT: usize = 4096;

impl Memory {
    /// Take `cost` from bucket `key`.
    pub fn take(&self, key: &str, rate: Rate, cost: u32) -> Taken {
        let now = self.epoch.elapsed().as_micros() as u64;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let (next, taken) = gcra(buckets.get(key).copied(), now, rate, cost);
        if let Some(tat) = next {
            if buckets.len() >= SWEEP_AT && !buckets.contains_key(key) {
                buckets.retain(|_, t| *t > now);
            }
            buckets.insert(key.to_string(), tat);
        }
        taken
    }

    /// Settle `delta` on bucket `key` (see `Store::settle`).
    pub fn settle(&self, key: &str, rate: Rate, delta: i64) {
        let now = self.epoch.elapsed().as_micros() as u64;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        match settled(buckets.get(key).copied(), now, rate, delta) {
            Some(tat) => {
                buckets.insert(key.to_string(), tat);
            }
            None => {
                buckets.remove(key);
            }
        }
    }
}
