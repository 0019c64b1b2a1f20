//! What the daemon depends on, and whether it answers: the model backends, the state store, the
//! guard models, the OTLP collector. Each is a [`Dependency`] that learns from what happens to
//! it (every state store call) and from a probe every [`PROBE_EVERY`] (a TCP connection to each
//! address; the store answers a `PING`). It says so in the log once when one stops answering and
//! once when it answers again; `/readyz` and the console show which are down, and since when.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How often every dependency is probed.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);
/// How long a probe's connection may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

const UNKNOWN: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

/// One thing the daemon depends on.
#[derive(Debug)]
pub struct Dependency {
    /// What the log and `/readyz` call it (`the model backend`, `guard model 'x'`).
    name: String,
    state: AtomicU8,
    /// Unix seconds of the last change.
    since: AtomicU64,
    /// Why it is down (for the log and the admin; never a request's content).
    why: Mutex<String>,
}

/// A dependency that is down: its name, since when (Unix seconds), and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Down {
    /// What it is called.
    pub name: String,
    /// Since when, in Unix seconds.
    pub since: u64,
    /// Why (the last failure).
    pub error: String,
}

impl Dependency {
    /// A dependency called `name`, not yet seen.
    pub fn new(name: impl Into<String>) -> Dependency {
        Dependency {
            name: name.into(),
            state: AtomicU8::new(UNKNOWN),
            since: AtomicU64::new(crate::util::unix_secs()),
            why: Mutex::new(String::new()),
        }
    }

    /// It answered.
    pub fn up(&self) {
        if self.state.swap(UP, Ordering::AcqRel) == DOWN {
            self.since
                .store(crate::util::unix_secs(), Ordering::Relaxed);
            tracing::info!(dependency = %self.name, "{} is reachable again", self.name);
        }
    }

    /// It did not answer, for `why`.
    pub fn down(&self, why: &str) {
        *self.why.lock().unwrap_or_else(|e| e.into_inner()) = why.to_string();
        if self.state.swap(DOWN, Ordering::AcqRel) != DOWN {
            self.since
                .store(crate::util::unix_secs(), Ordering::Relaxed);
            tracing::warn!(dependency = %self.name, error = %why, "{} is unreachable: {why}", self.name);
        }
    }

    /// Note what a call to it gave.
    pub fn saw<T, E: std::fmt::Display>(&self, result: &Result<T, E>) {
        match result {
            Ok(_) => self.up(),
            Err(e) => self.down(&e.to_string()),
        }
    }

    /// Whether it is down now, and since when.
    pub fn is_down(&self) -> Option<Down> {
        (self.state.load(Ordering::Acquire) == DOWN).then(|| Down {
            name: self.name.clone(),
            since: self.since.load(Ordering::Relaxed),
            error: self.why.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        })
    }
}

/// Probe `dependency` at `authority` (`host:port`) by opening a TCP connection.
pub async fn probe_tcp(dependency: &Dependency, authority: &str) {
    let connect = tokio::net::TcpStream::connect(authority);
    match tokio::time::timeout(PROBE_TIMEOUT, connect).await {
        Ok(Ok(_)) => dependency.up(),
        Ok(Err(e)) => dependency.down(&format!("cannot connect to {authority}: {e}")),
        Err(_) => dependency.down(&format!(
            "no connection to {authority} within {} ms",
            PROBE_TIMEOUT.as_millis()
        )),
    }
}

/// The `host:port` of `url` (the scheme's port when it names none).
pub fn authority(url: &str) -> Option<String> {
    let uri: axum::http::Uri = url.parse().ok()?;
    let host = uri.host()?;
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    // An IPv6 literal keeps its brackets.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some(match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn said_once_when_it_goes_and_once_when_it_comes_back() {
        let d = Dependency::new("the model backend");
        assert!(d.is_down().is_none(), "not seen is not down");
        d.down("refused");
        d.down("refused again");
        let down = d.is_down().unwrap();
        assert_eq!(down.error, "refused again");
        d.up();
        assert!(d.is_down().is_none());
    }

    #[test]
    fn authorities_of_urls() {
        assert_eq!(
            authority("http://127.0.0.1:8000/v1").as_deref(),
            Some("127.0.0.1:8000")
        );
        assert_eq!(
            authority("https://api.example/v1").as_deref(),
            Some("api.example:443")
        );
        assert_eq!(authority("http://[::1]:9/x").as_deref(), Some("[::1]:9"));
        assert_eq!(authority("not a url"), None);
    }
}
