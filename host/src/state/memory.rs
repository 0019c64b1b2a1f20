//! The memory backend: buckets and entries in this process (one replica, no setup).

use super::{gcra, settled, Rate, Taken, Unavailable};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Buckets by key, each its theoretical arrival time in µs since the store was made; and the
/// entries (values, sets, leases), each with its expiry and owner.
pub struct Memory {
    epoch: Instant,
    buckets: Mutex<HashMap<String, u64>>,
    table: Mutex<Table>,
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            epoch: Instant::now(),
            buckets: Mutex::default(),
            table: Mutex::default(),
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

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value at `key`; its life starts again at `refresh`, if given.
    pub fn get(&self, key: &str, refresh: Option<Duration>) -> Option<Bytes> {
        let now = Instant::now();
        let mut table = self.table();
        let entry = table.live(key, now)?;
        let Held::Bytes(b) = &entry.held else {
            return None;
        };
        let b = b.clone();
        if let Some(ttl) = refresh {
            entry.expires = now + ttl;
        }
        Some(b)
    }

    /// Set `key` (of `owner`) to `value` for `ttl`.
    pub fn put(
        &self,
        owner: &str,
        key: &str,
        value: Bytes,
        ttl: Duration,
    ) -> Result<(), Unavailable> {
        let now = Instant::now();
        self.table()
            .insert(owner, key, Held::Bytes(value), now + ttl, now)
    }

    /// Set `key` (of `owner`) to `value` for `ttl` if it holds `expected` now (`None`:
    /// nothing): whether it was set.
    pub fn swap(
        &self,
        owner: &str,
        key: &str,
        expected: Option<&[u8]>,
        value: Bytes,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let now = Instant::now();
        let mut table = self.table();
        let same = match table.live(key, now) {
            Some(Entry {
                held: Held::Bytes(b),
                ..
            }) => expected == Some(b.as_ref()),
            Some(_) => false,
            None => expected.is_none(),
        };
        if !same {
            return Ok(false);
        }
        table.insert(owner, key, Held::Bytes(value), now + ttl, now)?;
        Ok(true)
    }

    /// Drop `key`.
    pub fn delete(&self, key: &str) {
        self.table().remove(key);
    }

    /// See `Store::add_within`.
    pub fn add_within(
        &self,
        owner: &str,
        key: &str,
        delta: i64,
        limit: i64,
        ttl: Duration,
    ) -> Result<Option<i64>, Unavailable> {
        let now = Instant::now();
        let mut table = self.table();
        if let Some(Entry {
            held: Held::Bytes(b),
            ..
        }) = table.live(key, now)
        {
            // A live counter keeps its expiry (a fixed window).
            let new = counter(b).saturating_add(delta);
            if new > limit {
                return Ok(None);
            }
            *b = Bytes::from(new.to_string());
            // A counter's text changes length by a few bytes at most: accounted, not refused.
            table.resized(key);
            return Ok(Some(new));
        }
        // A new counter (one in place of anything else at `key`) starts at 0.
        if delta > limit {
            return Ok(None);
        }
        table.insert(
            owner,
            key,
            Held::Bytes(Bytes::from(delta.to_string())),
            now + ttl,
            now,
        )?;
        Ok(Some(delta))
    }

    /// Add `member` to the set `key` (of `owner`) unless it holds `cap` others; its life starts
    /// again at `ttl`. Whether the member is in the set now. (A member put in its own place.)
    pub fn add_member(
        &self,
        owner: &str,
        key: &str,
        member: &str,
        cap: usize,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        self.replace_member(owner, key, member, member, cap, ttl)
    }

    /// Put `new` in the set `key` in place of `old` unless it holds `cap` others (`old` not
    /// counted): whether `new` is in it now.
    pub fn replace_member(
        &self,
        owner: &str,
        key: &str,
        old: &str,
        new: &str,
        cap: usize,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let now = Instant::now();
        let mut table = self.table();
        let owner = match table.live(key, now) {
            Some(Entry {
                held: Held::Set(set),
                expires,
                owner,
                ..
            }) => {
                *expires = now + ttl;
                let has = |m: &str| set.iter().any(|s| s == m);
                if has(new) {
                    None
                } else if set.len() - usize::from(has(old)) >= cap {
                    return Ok(false);
                } else {
                    Some(owner.clone())
                }
            }
            _ => {
                let set = Held::Set(vec![new.to_string()]);
                table.insert(owner, key, set, now + ttl, now)?;
                return Ok(true);
            }
        };
        if let Some(owner) = owner {
            table.room(&owner, member_size(new), now)?;
        }
        if let Some(Entry {
            held: Held::Set(set),
            ..
        }) = table.entries.get_mut(key)
        {
            if !set.iter().any(|m| m == new) {
                set.push(new.to_string());
            }
            if old != new {
                set.retain(|m| m != old);
            }
        }
        table.resized(key);
        Ok(true)
    }

    /// Take `member` out of the set `key`.
    pub fn remove_member(&self, key: &str, member: &str) {
        let now = Instant::now();
        let mut table = self.table();
        if let Some(Entry {
            held: Held::Set(set),
            ..
        }) = table.live(key, now)
        {
            set.retain(|m| m != member);
            table.resized(key);
        }
    }

    /// The members of the set `key`, sorted; its life starts again at `ttl`.
    pub fn members(&self, key: &str, ttl: Duration) -> Vec<String> {
        let now = Instant::now();
        let mut table = self.table();
        match table.live(key, now) {
            Some(Entry {
                held: Held::Set(set),
                expires,
                ..
            }) => {
                *expires = now + ttl;
                let mut out = set.clone();
                out.sort();
                out
            }
            _ => Vec::new(),
        }
    }

    /// Hold lease `id` in `key` (of `owner`) for `ttl`, unless `limit` others are held.
    pub fn lease(
        &self,
        owner: &str,
        key: &str,
        id: &str,
        limit: usize,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let now = Instant::now();
        let mut table = self.table();
        match table.live(key, now) {
            Some(Entry {
                held: Held::Leases(leases),
                expires,
                owner,
                ..
            }) => {
                leases.retain(|(l, until)| *until > now && l != id);
                *expires = now + ttl;
                if leases.len() >= limit {
                    table.resized(key);
                    return Ok(false);
                }
                let owner = owner.clone();
                table.resized(key);
                table.room(&owner, lease_size(id), now)?;
                if let Some(Entry {
                    held: Held::Leases(leases),
                    ..
                }) = table.entries.get_mut(key)
                {
                    leases.push((id.to_string(), now + ttl));
                }
                table.resized(key);
                Ok(true)
            }
            _ => {
                if limit == 0 {
                    return Ok(false);
                }
                let leases = Held::Leases(vec![(id.to_string(), now + ttl)]);
                table.insert(owner, key, leases, now + ttl, now)?;
                Ok(true)
            }
        }
    }

    /// Let lease `id` in `key` go.
    pub fn release(&self, key: &str, id: &str) {
        let now = Instant::now();
        let mut table = self.table();
        let empty = match table.live(key, now) {
            Some(Entry {
                held: Held::Leases(leases),
                ..
            }) => {
                leases.retain(|(l, until)| *until > now && l != id);
                leases.is_empty()
            }
            _ => false,
        };
        if empty {
            table.remove(key);
        } else {
            table.resized(key);
        }
    }
}

/// Most live entries one owner (a tenant) may hold in the memory store: past it, its writes fail
/// (and `on_unavailable` decides), so no tenant can push out another's state.
pub const OWNER_QUOTA: usize = 100_000;

/// Most bytes one owner's live entries may take in the memory store (keys and what they hold,
/// with a fixed overhead per entry, member and lease): a count alone lets a tenant hold 100,000
/// large values. Past it, as past [`OWNER_QUOTA`], its writes fail.
pub const OWNER_BYTES: usize = 64 << 20;

/// What an entry costs beyond its key and contents (the map's slot, its expiry and owner).
const ENTRY_OVERHEAD: usize = 64;

fn member_size(member: &str) -> usize {
    member.len() + 24
}

fn lease_size(id: &str) -> usize {
    id.len() + 40
}

fn size_of(key: &str, held: &Held) -> usize {
    ENTRY_OVERHEAD
        + key.len()
        + match held {
            Held::Bytes(b) => b.len(),
            Held::Set(set) => set.iter().map(|m| member_size(m)).sum(),
            Held::Leases(leases) => leases.iter().map(|(id, _)| lease_size(id)).sum(),
        }
}

/// A counter's value from its decimal text (0 when it is not one).
fn counter(text: &[u8]) -> i64 {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

/// What an entry holds.
enum Held {
    Bytes(Bytes),
    Set(Vec<String>),
    Leases(Vec<(String, Instant)>),
}

struct Entry {
    held: Held,
    expires: Instant,
    owner: Arc<str>,
    /// Bytes it is counted for in its owner's [`Usage`].
    size: usize,
}

/// What an owner holds: live entries, and their bytes.
#[derive(Default, Clone, Copy)]
struct Usage {
    entries: usize,
    bytes: usize,
}

/// Entries by key, and what each owner holds.
#[derive(Default)]
struct Table {
    entries: HashMap<String, Entry>,
    owned: HashMap<Arc<str>, Usage>,
}

impl Table {
    /// The live entry at `key` (an expired one is dropped).
    fn live(&mut self, key: &str, now: Instant) -> Option<&mut Entry> {
        if self.entries.get(key).is_some_and(|e| e.expires <= now) {
            self.remove(key);
        }
        self.entries.get_mut(key)
    }

    fn remove(&mut self, key: &str) {
        if let Some(e) = self.entries.remove(key) {
            if let Some(u) = self.owned.get_mut(&e.owner) {
                u.entries -= 1;
                u.bytes -= e.size;
                if u.entries == 0 {
                    self.owned.remove(&e.owner);
                }
            }
        }
    }

    fn usage(&self, owner: &str) -> Usage {
        self.owned.get(owner).copied().unwrap_or_default()
    }

    /// Whether `owner` may hold `bytes` more in an entry it has; expired entries are dropped
    /// first when it is at a bound.
    fn room(&mut self, owner: &str, bytes: usize, now: Instant) -> Result<(), Unavailable> {
        self.room_for(owner, 0, bytes, now)
    }

    /// Whether `owner` may hold `entries` more entries and `bytes` more bytes.
    fn room_for(
        &mut self,
        owner: &str,
        entries: usize,
        bytes: usize,
        now: Instant,
    ) -> Result<(), Unavailable> {
        let over = |u: Usage| u.entries + entries > OWNER_QUOTA || u.bytes + bytes > OWNER_BYTES;
        if over(self.usage(owner)) {
            let expired: Vec<String> = self
                .entries
                .iter()
                .filter(|(_, e)| e.expires <= now)
                .map(|(k, _)| k.clone())
                .collect();
            for k in expired {
                self.remove(&k);
            }
            let u = self.usage(owner);
            if u.entries + entries > OWNER_QUOTA {
                return Err(Unavailable(format!(
                    "'{owner}' holds {OWNER_QUOTA} entries in the memory store, its most"
                )));
            }
            if u.bytes + bytes > OWNER_BYTES {
                return Err(Unavailable(format!(
                    "'{owner}' holds {} bytes in the memory store, and {bytes} more is past its {OWNER_BYTES}",
                    u.bytes
                )));
            }
        }
        Ok(())
    }

    /// Counts the entry at `key` at its size now (after a change in place).
    fn resized(&mut self, key: &str) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        let size = size_of(key, &e.held);
        let old = std::mem::replace(&mut e.size, size);
        if let Some(u) = self.owned.get_mut(&e.owner) {
            u.bytes = u.bytes + size - old;
        }
    }

    /// Make `key` a new entry of `owner`, if the owner's bounds allow it.
    fn insert(
        &mut self,
        owner: &str,
        key: &str,
        held: Held,
        expires: Instant,
        now: Instant,
    ) -> Result<(), Unavailable> {
        self.remove(key);
        let size = size_of(key, &held);
        self.room_for(owner, 1, size, now)?;
        let owner: Arc<str> = match self.owned.get_key_value(owner) {
            Some((k, _)) => k.clone(),
            None => Arc::from(owner),
        };
        let u = self.owned.entry(owner.clone()).or_default();
        u.entries += 1;
        u.bytes += size;
        self.entries.insert(
            key.to_string(),
            Entry {
                held,
                expires,
                owner,
                size,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn a_tenant_that_fills_its_share_pushes_nobody_out() {
        let m = Memory::default();
        m.add_member("victim", "flow:victim", "web_fetch", 8, MINUTE)
            .unwrap();
        for i in 0..OWNER_QUOTA {
            m.add_member("noisy", &format!("flow:noisy:{i}"), "x", 8, MINUTE)
                .unwrap();
        }
        // Past its share, the noisy tenant's writes fail (`on_unavailable` decides)...
        assert!(m
            .add_member("noisy", "flow:noisy:more", "x", 8, MINUTE)
            .is_err());
        assert!(m.put("noisy", "v", Bytes::new(), MINUTE).is_err());
        // ...and the victim's memory is whole, and it can still write.
        assert_eq!(m.members("flow:victim", MINUTE), ["web_fetch"]);
        m.add_member("victim", "flow:victim", "other", 8, MINUTE)
            .unwrap();
        // Entries that expired make room again.
        m.put("brief", "a", Bytes::from_static(b"1"), Duration::ZERO)
            .unwrap();
        assert!(m.get("a", None).is_none());
    }

    #[test]
    fn a_tenant_is_bounded_in_bytes_too() {
        let m = Memory::default();
        m.put("victim", "v", Bytes::from_static(b"kept"), MINUTE)
            .unwrap();
        // A few large values fill the noisy tenant's bytes long before its count.
        let mib = Bytes::from(vec![b'x'; 1 << 20]);
        let fit = OWNER_BYTES / ((1 << 20) + ENTRY_OVERHEAD + 8);
        for i in 0..fit {
            m.put("noisy", &format!("big:{i}"), mib.clone(), MINUTE)
                .unwrap();
        }
        let err = m.put("noisy", "big:more", mib.clone(), MINUTE).unwrap_err();
        assert!(err.0.contains("bytes"), "{}", err.0);
        // Growing a set or a lease set in place is bounded the same way.
        assert!(m
            .add_member("noisy", "set", &"m".repeat(1 << 20), 8, MINUTE)
            .is_err());
        // Another tenant writes as before; the noisy one gets room back as entries go.
        m.put("victim", "w", mib.clone(), MINUTE).unwrap();
        assert_eq!(m.get("v", None).as_deref(), Some(&b"kept"[..]));
        m.delete("big:0");
        m.put("noisy", "big:more", mib, MINUTE).unwrap();
    }

    #[test]
    fn sizes_follow_changes_in_place() {
        let m = Memory::default();
        for i in 0..5 {
            m.add_member("t", "s", &format!("member-{i}"), 8, MINUTE)
                .unwrap();
        }
        assert!(m.lease("t", "l", "a", 2, MINUTE).unwrap());
        assert_eq!(m.add_within("t", "c", 5, 100, MINUTE).unwrap(), Some(5));
        assert_eq!(m.add_within("t", "c", 50, 100, MINUTE).unwrap(), Some(55));
        let counted = m.table().usage("t").bytes;
        let actual: usize = m
            .table()
            .entries
            .iter()
            .map(|(k, e)| size_of(k, &e.held))
            .sum();
        assert_eq!(counted, actual);
        m.release("l", "a");
        m.delete("s");
        m.delete("c");
        assert_eq!(m.table().usage("t").bytes, 0);
        assert_eq!(m.table().usage("t").entries, 0);
    }

    #[test]
    fn leases_hold_a_limit_and_end_by_themselves() {
        let m = Memory::default();
        assert!(m.lease("t", "k", "a", 2, MINUTE).unwrap());
        assert!(m.lease("t", "k", "b", 2, MINUTE).unwrap());
        assert!(!m.lease("t", "k", "c", 2, MINUTE).unwrap());
        m.release("k", "a");
        assert!(m.lease("t", "k", "c", 2, MINUTE).unwrap());
        // A lease nobody releases ends at its time.
        let n = Memory::default();
        assert!(n
            .lease("t", "k", "dead", 1, Duration::from_millis(1))
            .unwrap());
        std::thread::sleep(Duration::from_millis(5));
        assert!(n.lease("t", "k", "next", 1, MINUTE).unwrap());
    }
}
