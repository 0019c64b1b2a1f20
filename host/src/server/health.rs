//! The daemon's dependencies as the server watches them (`crate::health`): the model backends
//! and the OTLP collector (start-up settings), the guard models of the policy set being served,
//! and the state store; probed every [`PROBE_EVERY`] from the start, so one that is down when
//! the daemon starts is said at once. `/readyz` is not ready while a backend or the store is
//! down (no request that needs them can be served); a guard model that is down is shown there
//! too, but what it means is its policies' (`on_error`).

use super::App;
use crate::health::{authority, probe_tcp, Dependency, Down, PROBE_EVERY};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// What the server watches.
pub(crate) struct Watched {
    /// The model backends (one, or the Anthropic one apart) and the collector, by address.
    fixed: Vec<(Dependency, String, bool)>,
    /// The served set's guard models, by name (made as they appear).
    guards: Mutex<BTreeMap<String, Arc<Dependency>>>,
}

impl Watched {
    /// What `startup` depends on.
    pub(crate) fn new(startup: &crate::config::StartupConfig) -> Watched {
        let mut fixed = Vec::new();
        let backend = &startup.backend;
        if let Some(a) = authority(&backend.url) {
            fixed.push((Dependency::new("the model backend"), a, true));
        }
        if backend.anthropic.url != backend.url {
            if let Some(a) = authority(&backend.anthropic.url) {
                fixed.push((Dependency::new("the Anthropic backend"), a, true));
            }
        }
        if let Some(t) = &startup.telemetry {
            if let Some(a) = authority(&t.otlp_endpoint) {
                fixed.push((Dependency::new("the OTLP collector"), a, false));
            }
        }
        Watched {
            fixed,
            guards: Mutex::default(),
        }
    }

    /// Probe everything once.
    async fn probe(&self, app: &App) {
        let set = app.policies();
        let guards: Vec<(Arc<Dependency>, Option<String>)> = {
            let mut known = self.guards.lock().unwrap_or_else(|e| e.into_inner());
            let served = &set.config().guard_models;
            known.retain(|name, _| served.iter().any(|g| &g.name == name));
            served
                .iter()
                .map(|g| {
                    let d = known
                        .entry(g.name.clone())
                        .or_insert_with(|| {
                            Arc::new(Dependency::new(format!("guard model '{}'", g.name)))
                        })
                        .clone();
                    (d, authority(&g.url.to_string()))
                })
                .collect()
        };
        drop(set);
        let fixed = self.fixed.iter().map(|(d, a, _)| probe_tcp(d, a));
        let guards = guards
            .iter()
            .filter_map(|(d, a)| a.as_deref().map(|a| probe_tcp(d, a)));
        futures_util::future::join3(
            futures_util::future::join_all(fixed),
            futures_util::future::join_all(guards),
            app.state.ping(),
        )
        .await;
    }

    /// What is down now: what readiness needs (backends, the store), and the rest.
    pub(crate) fn down(&self, app: &App) -> (Vec<Down>, Vec<Down>) {
        let mut needed: Vec<Down> = self
            .fixed
            .iter()
            .filter(|(_, _, needed)| *needed)
            .filter_map(|(d, _, _)| d.is_down())
            .collect();
        needed.extend(app.state.health().and_then(Dependency::is_down));
        let mut other: Vec<Down> = self
            .fixed
            .iter()
            .filter(|(_, _, needed)| !*needed)
            .filter_map(|(d, _, _)| d.is_down())
            .collect();
        other.extend(
            self.guards
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .filter_map(|d| d.is_down()),
        );
        (needed, other)
    }
}

/// Probe `app`'s dependencies now and every [`PROBE_EVERY`], for as long as the daemon runs.
pub(crate) fn spawn(app: Arc<App>) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(PROBE_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            app.watched.probe(&app).await;
        }
    });
}
