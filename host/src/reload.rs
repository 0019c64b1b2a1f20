//! Hot reload: build a new policy set exactly as at start-up, and publish it only if all of it
//! loads; otherwise keep serving the old one and say why, loudly.
//!
//! Triggers: file changes (the config, its keys file and every plugin it names, watched with
//! `notify` and debounced), `SIGHUP`, and `POST /v1/admin/reload`. Reloads are serialised. Readers get whole
//! snapshots through a `watch` channel: a request keeps the set it started with, the next one sees
//! the new set.
//!
//! File changes are detected by a fingerprint (size, mtime, inode of each watched file, following
//! symlinks, plus the config's content) taken after every burst of events in the watched
//! directories. That covers how files really change: written in place, an editor's temp file
//! renamed over the original, deleted and recreated, or a whole directory swapped through a
//! symlink as Kubernetes does for mounted ConfigMaps (`..data` replaced atomically).

use crate::config::{Config, ConfigError};
use crate::engine::Engine;
use crate::metrics::Metrics;
use crate::policy::{PolicySet, Revision};
use crate::services::Services;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// Quiet time after the last file event before the files are looked at: editors and
/// `kubectl` write in several steps.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

/// How often the files are looked at without an event: a watch the system dropped (a directory
/// replaced, a watch limit reached) costs at most this long, and is said and set up again.
pub const POLL: Duration = Duration::from_secs(2);

/// What wakes the watcher.
enum Wake {
    /// A file event (or the watcher's error).
    Event,
    /// A reload not started by a file change (`SIGHUP`, the admin API): watch every directory
    /// afresh, whatever was watched before.
    Rewatch,
}

/// Settings given on the command line that outlive reloads.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<String>,
    /// `--backend` (or the demo backend's URL).
    pub backend: Option<String>,
    /// `--grpc-listen`.
    pub grpc_listen: Option<String>,
    /// The demo backend's MCP server, served as `/mcp/demo` unless the config names a `demo`.
    pub mcp_demo: Option<String>,
    /// The demo backend's scripted guard models (its base URL): every guard model of a kind it
    /// scripts is asked there instead.
    pub guard_demo: Option<String>,
}

impl Overrides {
    /// Apply to a freshly loaded config. A backend given on the command line is also the
    /// Anthropic backend, unless the config names one of its own.
    pub fn apply(&self, config: &mut Config) {
        if let Some(url) = &self.mcp_demo {
            if config.mcp.server("demo").is_none() {
                if let Ok(url) = url.parse() {
                    config.mcp.servers.push(crate::config::McpServer {
                        name: "demo".into(),
                        url,
                        headers: Vec::new(),
                        forward_headers: Vec::new(),
                        timeout: std::time::Duration::from_secs(30),
                        pins: None,
                        trusted_tools: Vec::new(),
                    });
                }
            }
        }
        if let Some(base) = &self.guard_demo {
            use crate::config::GuardKind;
            for g in &mut config.guard_models {
                let path = match g.kind {
                    GuardKind::Classifier | GuardKind::Entities => "",
                    _ => "/v1",
                };
                if let Ok(url) = format!("{base}/guard/{}{path}", g.kind.as_str()).parse() {
                    g.url = url;
                    g.api_key = None;
                }
            }
        }
        let startup = &mut config.startup;
        if let Some(listen) = &self.listen {
            startup.listen = listen.clone();
        }
        if let Some(grpc) = &self.grpc_listen {
            startup.grpc_listen = Some(grpc.clone());
        }
        if let Some(url) = &self.backend {
            let url = url.trim_end_matches('/').to_string();
            if startup.backend.anthropic.url == startup.backend.url {
                startup.backend.anthropic.url = url.clone();
            }
            startup.backend.url = url;
        }
    }
}

/// A reload that was refused.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadFailure {
    /// When, in seconds since the Unix epoch.
    pub at: u64,
    /// What triggered it.
    pub cause: String,
    /// Why it was refused (names the file and the problem).
    pub error: String,
}

/// One reload attempt, as announced to watchers (gRPC `WatchPolicies`).
#[derive(Debug, Clone)]
pub struct ReloadEvent {
    /// The revision served after the attempt.
    pub revision: Revision,
    /// Whether the attempt succeeded.
    pub ok: bool,
    /// Why it was refused.
    pub error: Option<String>,
    /// When, in seconds since the Unix epoch.
    pub at: u64,
}

/// Builds and publishes policy sets.
pub struct Reloader {
    events: tokio::sync::broadcast::Sender<ReloadEvent>,
    engine: Arc<Engine>,
    services: Arc<Services>,
    config_path: PathBuf,
    overrides: Overrides,
    tx: watch::Sender<Arc<PolicySet>>,
    metrics: Arc<Metrics>,
    last_failure: Mutex<Option<ReloadFailure>>,
    /// Start-up settings the running config changed since the daemon started.
    restart_needed: Mutex<Vec<String>>,
    serial: Mutex<()>,
    /// The file watcher's wake-up, once it runs.
    watcher: Mutex<Option<std::sync::mpsc::Sender<Wake>>>,
}

impl Reloader {
    /// Load the initial set; fails like start-up should.
    pub fn start(
        engine: Arc<Engine>,
        services: Arc<Services>,
        config_path: PathBuf,
        overrides: Overrides,
        metrics: Arc<Metrics>,
    ) -> Result<(Arc<Reloader>, watch::Receiver<Arc<PolicySet>>), ConfigError> {
        let set = build(&engine, &services, &config_path, &overrides, None)?;
        let (tx, rx) = watch::channel(Arc::new(set));
        let reloader = Arc::new(Reloader {
            events: tokio::sync::broadcast::channel(64).0,
            engine,
            services,
            config_path,
            overrides,
            tx,
            metrics,
            last_failure: Mutex::new(None),
            restart_needed: Mutex::new(Vec::new()),
            serial: Mutex::new(()),
            watcher: Mutex::new(None),
        });
        Ok((reloader, rx))
    }

    /// The engine its sets are built on.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The services its sets borrow (the store, the guard models' connections).
    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    /// The set being served.
    pub fn current(&self) -> Arc<PolicySet> {
        self.tx.borrow().clone()
    }

    /// A new receiver of published sets (each reload is one new value).
    pub fn subscribe(&self) -> watch::Receiver<Arc<PolicySet>> {
        self.tx.subscribe()
    }

    /// Reload attempts from now on.
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<ReloadEvent> {
        self.events.subscribe()
    }

    /// Start-up settings the config on disk changed that only a restart applies (e.g.
    /// `server.listen (127.0.0.1:8080 → 0.0.0.0:8080)`); empty when none.
    pub fn restart_needed(&self) -> Vec<String> {
        self.restart_needed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The last refused reload, if the latest attempt failed.
    pub fn last_failure(&self) -> Option<ReloadFailure> {
        self.last_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Build the config afresh and publish it if everything loads. Blocking (compiles plugins):
    /// call from a blocking thread.
    pub fn reload(&self, cause: &str) -> Result<Revision, String> {
        if cause != FILE_CHANGE {
            // Whatever happened to the watches, a reload asked for by hand sets them up again.
            if let Some(tx) = &*self.watcher.lock().unwrap_or_else(|e| e.into_inner()) {
                let _ = tx.send(Wake::Rewatch);
            }
        }
        let _serial = self.serial.lock().unwrap_or_else(|e| e.into_inner());
        let started = std::time::Instant::now();
        let next = self.current().revision().number + 1;
        let running = self.current();
        let built = build(
            &self.engine,
            &self.services,
            &self.config_path,
            &self.overrides,
            Some(&running),
        );
        drop(running);
        match built {
            Ok(set) => {
                let set = set.with_revision_number(next);
                let revision = set.revision().clone();
                // The running daemon keeps its start-up settings: say what a restart would apply.
                let current = self.current();
                let running = &current.config().startup;
                let changes = set.config().startup.changes(running);
                if !changes.is_empty() {
                    tracing::warn!(
                        cause,
                        "the config changes settings read at start-up only; they need a restart (still using the old values): {}",
                        changes.join(", ")
                    );
                }
                *self
                    .restart_needed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = changes;
                // Requests keep using the start-up settings the daemon runs with.
                let set = set.with_startup(running.clone());
                drop(current);
                self.tx.send_replace(Arc::new(set));
                *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = None;
                self.metrics.reload(true);
                let _ = self.events.send(ReloadEvent {
                    revision: revision.clone(),
                    ok: true,
                    error: None,
                    at: crate::util::unix_secs(),
                });
                tracing::info!(
                    cause,
                    revision = revision.number,
                    hash = %&revision.hash[..16],
                    ms = started.elapsed().as_millis() as u64,
                    "policy set reloaded"
                );
                crate::util::memory::release();
                Ok(revision)
            }
            Err(err) => {
                let error = err.to_string();
                self.metrics.reload(false);
                // The keys first: the refusal then names the revision served after it.
                self.rekey(cause);
                tracing::error!(
                    cause,
                    "reload refused, still serving revision {}: {error}",
                    self.current().revision().number
                );
                let at = crate::util::unix_secs();
                let _ = self.events.send(ReloadEvent {
                    revision: self.current().revision().clone(),
                    ok: false,
                    error: Some(error.clone()),
                    at,
                });
                *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(ReloadFailure {
                        at,
                        cause: cause.to_string(),
                        error: error.clone(),
                    });
                Err(error)
            }
        }
    }

    /// The running set with its keys file read again, published when the file now holds other
    /// keys: a key deleted to revoke it stops working even while the config has an error.
    fn rekey(&self, cause: &str) {
        let current = self.current();
        match current.config().reread_keys() {
            Ok(None) => {}
            Ok(Some((auth, text))) => {
                let set = current
                    .with_keys(auth, &text)
                    .with_revision_number(current.revision().number + 1);
                let revision = set.revision().clone();
                self.tx.send_replace(Arc::new(set));
                tracing::warn!(
                    cause,
                    revision = revision.number,
                    "keys file reloaded on its own: the config is refused, but its keys apply now"
                );
            }
            Err(e) => tracing::error!(cause, "the keys file cannot be read either: {e}"),
        }
    }

    /// The files a reload depends on: the config, and the plugins it names now (read from the
    /// file on disk, so a plugin added by an edit that failed to load is watched too).
    fn watched_files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.config_path.clone()];
        let named = |config: &Config| {
            let keys = config.auth.as_ref().and_then(|a| a.keys_file.clone());
            keys.into_iter()
                .chain(config.provenance.keys_file.clone())
                .chain(config.plugins.iter().map(|p| p.path.clone()))
                .collect::<Vec<_>>()
        };
        match Config::load(&self.config_path) {
            Ok(config) => files.extend(named(&config)),
            Err(_) => files.extend(named(self.current().config())),
        }
        files
    }
}

/// The cause of a reload the watcher starts.
const FILE_CHANGE: &str = "file change";

/// Load and check the config at `path` and build its set; `running` is the config served now
/// (`None` at start), which decides whether the new one may open the daemon.
fn build(
    engine: &Engine,
    services: &Arc<Services>,
    path: &Path,
    overrides: &Overrides,
    running: Option<&PolicySet>,
) -> Result<PolicySet, ConfigError> {
    let mut config = Config::load(path)?;
    config.check_auth(running.map(|s| s.config()))?;
    overrides.apply(&mut config);
    let set = PolicySet::build_after(config, engine, services, running)?;
    for warning in set.warnings() {
        tracing::warn!("{}: {warning}", path.display());
    }
    Ok(set)
}

/// What a file looks like now: enough to tell that it changed, without reading plugins.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Missing,
    File {
        len: u64,
        modified: Option<SystemTime>,
        inode: u64,
    },
}

fn fingerprint(files: &[PathBuf], config: &Path) -> (Vec<Seen>, Option<String>) {
    use std::os::unix::fs::MetadataExt;
    let seen = files
        .iter()
        .map(|f| match std::fs::metadata(f) {
            Ok(m) => Seen::File {
                len: m.len(),
                modified: m.modified().ok(),
                inode: m.ino(),
            },
            Err(_) => Seen::Missing,
        })
        .collect();
    let text = std::fs::read(config)
        .ok()
        .map(|b| crate::util::sha256_hex(&b));
    (seen, text)
}

/// Whether a watched directory's event may be a change. Opening or reading a file is not (inotify
/// reports opens too); and the check a change starts opens the config, so passing opens on
/// would start the next check, ten times a second for as long as the daemon runs.
fn changes(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// Watch the config and plugin files and reload when they change. The watcher lives as long as
/// the returned handle's thread (the process).
pub fn watch_files(reloader: Arc<Reloader>) -> notify::Result<()> {
    use notify::{RecursiveMode, Watcher};
    use std::sync::mpsc::RecvTimeoutError;
    let (tx, rx) = std::sync::mpsc::channel();
    let events = tx.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        match event {
            Ok(e) if !changes(&e.kind) => return,
            Ok(_) => {}
            Err(e) => tracing::warn!("file watcher: {e}"),
        }
        let _ = events.send(Wake::Event);
    })?;
    *reloader.watcher.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
    let sync_dirs = |watcher: &mut notify::RecommendedWatcher,
                     dirs: &mut BTreeSet<PathBuf>,
                     files: &[PathBuf]| {
        // Each directory by its real path: one reached two ways (`plugins/..`) is one watch,
        // and letting one of its names go must not end the watch the other needs.
        let wanted: BTreeSet<PathBuf> = files
            .iter()
            .map(|f| match f.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            })
            .map(|d| std::fs::canonicalize(&d).unwrap_or(d))
            .collect();
        for gone in dirs.difference(&wanted) {
            let _ = watcher.unwatch(gone);
        }
        let mut watched = BTreeSet::new();
        for dir in wanted {
            if dirs.contains(&dir) {
                watched.insert(dir);
                continue;
            }
            // One that cannot be watched (not there yet) is tried again at the next sync.
            match watcher.watch(&dir, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    watched.insert(dir);
                }
                Err(e) => tracing::warn!(dir = %dir.display(), "cannot watch: {e}"),
            }
        }
        *dirs = watched;
    };
    let files = reloader.watched_files();
    sync_dirs(&mut watcher, &mut dirs, &files);
    let mut last = fingerprint(&files, &reloader.config_path);
    let mut last_files = files;
    std::thread::Builder::new()
        .name("railyard-watch".into())
        .spawn(move || loop {
            let evented = match rx.recv_timeout(POLL) {
                Ok(Wake::Event) => true,
                Ok(Wake::Rewatch) => {
                    for dir in std::mem::take(&mut dirs) {
                        let _ = watcher.unwatch(&dir);
                    }
                    sync_dirs(&mut watcher, &mut dirs, &reloader.watched_files());
                    continue;
                }
                Err(RecvTimeoutError::Timeout) => false,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            // Looked at without an event: the files of the last look first (no config is
            // parsed unless one of them changed).
            if !evented && fingerprint(&last_files, &reloader.config_path) == last {
                continue;
            }
            // Quiet first, whatever woke it: a change caught between its writes waits for the
            // last, and an event that comes meanwhile says the watch is there.
            let mut evented = evented;
            while let Ok(wake) = rx.recv_timeout(DEBOUNCE) {
                evented |= matches!(wake, Wake::Event);
            }
            {
                let files = reloader.watched_files();
                let now = fingerprint(&files, &reloader.config_path);
                if now == last {
                    last_files = files;
                    continue;
                }
                if !evented {
                    // Changed, and no event said so: a watch was lost. Set them all up again.
                    tracing::warn!(
                        "the config or a file it names changed without a file event (a watch was lost): watching again and reloading"
                    );
                    for dir in std::mem::take(&mut dirs) {
                        let _ = watcher.unwatch(&dir);
                    }
                }
                // An edit that names a plugin in a directory not watched yet: watch it now, or
                // a rebuild of that plugin would never be seen (the lists compared below were
                // both read after the edit, so they cannot tell).
                sync_dirs(&mut watcher, &mut dirs, &files);
                let _ = reloader.reload(FILE_CHANGE);
                // Compare later events against what this reload started from, so a change made
                // during the reload is not missed; if the config now names other plugins, watch
                // their directories too.
                let after = reloader.watched_files();
                if after == files {
                    last = now;
                } else {
                    // The files changed, so the config was edited during the reload: keep the
                    // config's text this reload started from, so that edit is reloaded next
                    // (its fingerprint taken now would say it was already seen).
                    sync_dirs(&mut watcher, &mut dirs, &after);
                    last = (fingerprint(&after, &reloader.config_path).0, now.1);
                }
                last_files = after;
            }
        })
        .map_err(|e| notify::Error::generic(&e.to_string()))?;
    Ok(())
}
