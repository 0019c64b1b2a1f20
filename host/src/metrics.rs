//! Prometheus metrics, rendered in the text exposition format at `GET /metrics`.
//!
//! A small registry of labelled counters and histograms: the label sets are few (rails ×
//! policies × verdicts), so a map behind a mutex per family is simpler than a metrics framework
//! and cheap next to a plugin call.

use crate::policy::chain::Evaluation;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Histogram buckets in seconds, from 10 µs (a pooled plugin call) to 30 s (a slow model).
const BUCKETS: [f64; 16] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 1.0, 10.0, 30.0,
];

#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (i, le) in BUCKETS.iter().enumerate() {
            if seconds <= *le {
                self.counts[i] += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }
}

type Labels = Vec<(&'static str, String)>;

struct Family<T> {
    name: &'static str,
    help: &'static str,
    series: Mutex<BTreeMap<Labels, T>>,
}

impl<T: Default + Clone> Family<T> {
    const fn new(name: &'static str, help: &'static str) -> Self {
        Family {
            name,
            help,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    fn with(&self, labels: Labels, f: impl FnOnce(&mut T)) {
        let mut map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        f(map.entry(labels).or_default());
    }

    fn snapshot(&self) -> Vec<(Labels, T)> {
        let map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

/// The daemon's metrics.
pub struct Metrics {
    requests: Family<u64>,
    verdicts: Family<u64>,
    faults: Family<u64>,
    plugin_latency: Family<Histogram>,
    backend_latency: Family<Histogram>,
    backend_errors: Family<u64>,
    reloads: Family<u64>,
    auth_failures: Family<u64>,
    throttled: Family<u64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Family::new(
                "railyard_requests_total",
                "Requests by endpoint, tenant (empty before authentication) and status code.",
            ),
            verdicts: Family::new(
                "railyard_verdicts_total",
                "Plugin decisions by tenant, rail, policy and verdict; shadow=\"true\" marks a shadow plugin's (recorded, not applied).",
            ),
            faults: Family::new(
                "railyard_plugin_faults_total",
                "Plugin faults by policy and kind.",
            ),
            plugin_latency: Family::new(
                "railyard_plugin_duration_seconds",
                "Time spent in one plugin call, by policy.",
            ),
            backend_latency: Family::new(
                "railyard_backend_duration_seconds",
                "Time to the model backend's response headers.",
            ),
            backend_errors: Family::new(
                "railyard_backend_errors_total",
                "Backend calls that failed, by kind.",
            ),
            reloads: Family::new("railyard_reloads_total", "Policy reloads by result."),
            auth_failures: Family::new(
                "railyard_auth_failures_total",
                "Requests refused for a missing or unknown API or admin key.",
            ),
            throttled: Family::new(
                "railyard_tenant_throttled_total",
                "Requests refused with 429 because their tenant was at max_concurrent.",
            ),
        }
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn label_text(labels: &Labels, extra: Option<(&str, String)>) -> String {
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

impl Metrics {
    /// Count one request (`tenant` empty when no caller was authenticated, e.g. health checks).
    pub fn request(&self, endpoint: &str, tenant: &str, status: u16) {
        self.requests.with(
            vec![
                ("endpoint", endpoint.to_string()),
                ("tenant", tenant.to_string()),
                ("status", status.to_string()),
            ],
            |c| *c += 1,
        );
    }

    /// Count a refused key.
    pub fn auth_failure(&self) {
        self.auth_failures.with(Vec::new(), |c| *c += 1);
    }

    /// Count a request refused by its tenant's concurrency limit.
    pub fn throttled(&self, tenant: &str) {
        self.throttled
            .with(vec![("tenant", tenant.to_string())], |c| *c += 1);
    }

    /// Record every decision of an evaluation made for `tenant` (`None`: the default tenant).
    pub fn evaluation(&self, eval: &Evaluation, tenant: Option<&str>) {
        let tenant = tenant.unwrap_or(crate::auth::DEFAULT_TENANT);
        for d in &eval.decisions {
            let mut labels = vec![
                ("tenant", tenant.to_string()),
                ("rail", eval.rail.to_string()),
                ("policy", d.plugin.clone()),
                ("verdict", d.verdict.as_str().to_string()),
            ];
            // A shadow plugin's verdicts are counted apart: they were not applied.
            if d.shadow {
                labels.push(("shadow", "true".to_string()));
            }
            self.verdicts.with(labels, |c| *c += 1);
            if let Some(kind) = d.fault {
                let kind = kind.as_str().to_string();
                self.faults
                    .with(vec![("policy", d.plugin.clone()), ("kind", kind)], |c| {
                        *c += 1
                    });
            }
            self.plugin_latency
                .with(vec![("policy", d.plugin.clone())], |h| {
                    h.observe(d.duration_us.as_secs_f64())
                });
        }
    }

    /// Record a backend call's latency to headers.
    pub fn backend(&self, elapsed: Duration) {
        self.backend_latency
            .with(Vec::new(), |h| h.observe(elapsed.as_secs_f64()));
    }

    /// Count a failed backend call.
    pub fn backend_error(&self, kind: &str) {
        self.backend_errors
            .with(vec![("kind", kind.to_string())], |c| *c += 1);
    }

    /// Count a reload attempt.
    pub fn reload(&self, ok: bool) {
        self.reloads.with(
            vec![("result", if ok { "success" } else { "error" }.to_string())],
            |c| *c += 1,
        );
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for family in [
            &self.requests,
            &self.verdicts,
            &self.faults,
            &self.backend_errors,
            &self.reloads,
            &self.auth_failures,
            &self.throttled,
        ] {
            let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(out, "# TYPE {} counter", family.name);
            for (labels, value) in family.snapshot() {
                let _ = writeln!(out, "{}{} {value}", family.name, label_text(&labels, None));
            }
        }
        for family in [&self.plugin_latency, &self.backend_latency] {
            let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(out, "# TYPE {} histogram", family.name);
            for (labels, h) in family.snapshot() {
                for (i, le) in BUCKETS.iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "{}_bucket{} {}",
                        family.name,
                        label_text(&labels, Some(("le", le.to_string()))),
                        h.counts[i]
                    );
                }
                let _ = writeln!(
                    out,
                    "{}_bucket{} {}",
                    family.name,
                    label_text(&labels, Some(("le", "+Inf".into()))),
                    h.count
                );
                let _ = writeln!(
                    out,
                    "{}_sum{} {}",
                    family.name,
                    label_text(&labels, None),
                    h.sum
                );
                let _ = writeln!(
                    out,
                    "{}_count{} {}",
                    family.name,
                    label_text(&labels, None),
                    h.count
                );
            }
        }
        out
    }
}
