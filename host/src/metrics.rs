//! Prometheus metrics, rendered in the text exposition format at `GET /metrics`.
//!
//! A small registry of labelled counters and histograms: the label sets are few (rails ×
//! policies × verdicts), so a map behind a mutex per family is simpler than a metrics framework
//! and cheap next to a plugin call.

use crate::policy::chain::Evaluation;
use crate::shard::PerWorker;
use std::fmt::Write;
use std::hash::{Hash, Hasher};
use std::time::Duration;

/// Histogram buckets in seconds, from 10 µs (a pooled plugin call) to 30 s (a slow model).
const BUCKETS: [f64; 16] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 1.0, 10.0, 30.0,
];

/// A histogram as observed: each value counted in the one bucket it falls in (the exposition's
/// cumulative counts are summed when rendered, not at every observation).
#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        // Past the last bucket: counted in `count` alone (the `+Inf` bucket).
        let bucket = BUCKETS.partition_point(|le| *le < seconds);
        if let Some(c) = self.counts.get_mut(bucket) {
            *c += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }
}

/// Label names and values, in order.
type Labels<'a> = &'a [(&'static str, &'a str)];

/// A series' labels as stored: hashed and compared as the [`Labels`] a count is made with, so
/// counting a series that exists writes no text and allocates nothing; the label text is written
/// when the metrics are rendered. Only the values are hashed: a family's label names are the same
/// few constants at each call site (they are still compared).
#[derive(PartialEq, Eq)]
struct Key(Box<[(&'static str, Box<str>)]>);

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_values(self.0.iter().map(|(_, v)| &**v), state);
    }
}

/// [`Labels`] looked up as a [`Key`].
struct Lookup<'a, 'b>(&'a [(&'static str, &'b str)]);

impl Hash for Lookup<'_, '_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_values(self.0.iter().map(|(_, v)| *v), state);
    }
}

/// The one hash of a [`Key`] and a [`Lookup`] of the same labels.
fn hash_values<'v, H: Hasher>(values: impl ExactSizeIterator<Item = &'v str>, state: &mut H) {
    state.write_usize(values.len());
    for v in values {
        v.hash(state);
    }
}

impl hashbrown::Equivalent<Key> for Lookup<'_, '_> {
    fn equivalent(&self, key: &Key) -> bool {
        self.0.len() == key.0.len()
            && self
                .0
                .iter()
                .zip(key.0.iter())
                // A name is the call site's constant: the same pointer, short of a copy of it.
                .all(|((n, v), (kn, kv))| (std::ptr::eq(*n, *kn) || n == kn) && *v == &**kv)
    }
}

impl Key {
    /// `a="x",b="y"`, escaped: how the series is written out.
    fn text(&self) -> String {
        let mut out = String::new();
        for (i, (name, value)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(name);
            out.push_str("=\"");
            escape_into(&mut out, value);
            out.push('"');
        }
        out
    }
}

/// What a series holds, and how two workers' counts of one series add up.
trait Series: Default + Clone {
    fn add(&mut self, other: &Self);
}

impl Series for u64 {
    fn add(&mut self, other: &Self) {
        *self += other;
    }
}

impl Series for Histogram {
    fn add(&mut self, other: &Self) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
        self.sum += other.sum;
        self.count += other.count;
    }
}

/// One family: its series by their labels, counted apart by each worker and added up when
/// rendered. A count is then a write to the worker's own memory: with one map for all, every
/// verdict moved the map's lock and counters between the cores.
struct Family<T> {
    name: &'static str,
    help: &'static str,
    series: PerWorker<hashbrown::HashMap<Key, T>>,
}

impl<T: Series> Family<T> {
    fn new(name: &'static str, help: &'static str) -> Self {
        Family {
            name,
            help,
            series: PerWorker::default(),
        }
    }

    fn with(&self, labels: Labels<'_>, f: impl FnOnce(&mut T)) {
        let mut map = self.series.mine();
        match map.get_mut(&Lookup(labels)) {
            Some(series) => f(series),
            None => {
                let key = Key(labels.iter().map(|(n, v)| (*n, Box::from(*v))).collect());
                f(map.entry(key).or_default())
            }
        }
    }

    /// The series by their label text, in its order, every worker's counts added.
    fn snapshot(&self) -> Vec<(String, T)> {
        let mut all: std::collections::BTreeMap<String, T> = std::collections::BTreeMap::new();
        for map in self.series.all() {
            for (k, v) in map.iter() {
                all.entry(k.text()).or_default().add(v);
            }
        }
        all.into_iter().collect()
    }
}

/// The daemon's metrics.
pub struct Metrics {
    requests: Family<u64>,
    verdicts: Family<u64>,
    faults: Family<u64>,
    plugin_latency: Family<Histogram>,
    rail_latency: Family<Histogram>,
    backend_latency: Family<Histogram>,
    backend_errors: Family<u64>,
    reloads: Family<u64>,
    auth_failures: Family<u64>,
    throttled: Family<u64>,
    approvals: Family<u64>,
    guard_calls: Family<u64>,
    guard_latency: Family<Histogram>,
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
            rail_latency: Family::new(
                "railyard_rail_duration_seconds",
                "Time one run of a rail's chain took (its plugins, their edits applied), by rail.",
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
            approvals: Family::new(
                "railyard_approvals_total",
                "Approval requests by what happened: a call refused while one is pending, passed on a grant (used) or refused by an approver's no; an approver's grant or refusal (decided_grant, decided_refuse).",
            ),
            throttled: Family::new(
                "railyard_tenant_throttled_total",
                "Requests refused with 429 because their tenant was at max_concurrent.",
            ),
            guard_calls: Family::new(
                "railyard_guard_calls_total",
                "Guard-model calls by model, operation and result (ok, cached, or the error's kind).",
            ),
            guard_latency: Family::new(
                "railyard_guard_duration_seconds",
                "Time a guard-model call took (cache hits excluded), by model.",
            ),
        }
    }
}

fn escape_into(out: &mut String, v: &str) {
    if !v.contains(['\\', '"', '\n']) {
        out.push_str(v);
        return;
    }
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// `{labels}`, with `extra` (already safe) appended; nothing when there are no labels.
fn label_text(labels: &str, extra: Option<(&str, &str)>) -> String {
    match (labels.is_empty(), extra) {
        (true, None) => String::new(),
        (true, Some((k, v))) => format!("{{{k}=\"{v}\"}}"),
        (false, None) => format!("{{{labels}}}"),
        (false, Some((k, v))) => format!("{{{labels},{k}=\"{v}\"}}"),
    }
}

impl Metrics {
    /// Count one request (`tenant` empty when no caller was authenticated, e.g. health checks).
    pub fn request(&self, endpoint: &str, tenant: &str, status: u16) {
        // Counted without allocating: the status written into a stack buffer.
        let mut digits = itoa::Buffer::new();
        self.requests.with(
            &[
                ("endpoint", endpoint),
                ("tenant", tenant),
                ("status", digits.format(status)),
            ],
            |c| *c += 1,
        );
    }

    /// Count a refused key.
    pub fn auth_failure(&self) {
        self.auth_failures.with(&[], |c| *c += 1);
    }

    /// An approval event (`pending`, `used`, `refused`, `decided_grant`, `decided_refuse`) of
    /// `tenant`.
    pub fn approval(&self, tenant: &str, event: &str) {
        self.approvals
            .with(&[("tenant", tenant), ("event", event)], |c| *c += 1);
    }

    /// Count a request refused by its tenant's concurrency limit.
    pub fn throttled(&self, tenant: &str) {
        self.throttled.with(&[("tenant", tenant)], |c| *c += 1);
    }

    /// Record every decision of an evaluation made for `tenant` (`None`: the default tenant).
    pub fn evaluation(&self, eval: &Evaluation, tenant: Option<&str>) {
        let tenant = tenant.unwrap_or(crate::auth::DEFAULT_TENANT);
        // The run took until its last plugin's call ended (what follows is the chain's return):
        // no clock read of its own.
        if let Some(last) = eval.decisions.last() {
            let took = last.offset + last.duration_us;
            self.rail_latency
                .with(&[("rail", eval.rail.as_str())], |h| {
                    h.observe(took.as_secs_f64())
                });
        }
        for d in &eval.decisions {
            let verdict = [
                ("tenant", tenant),
                ("rail", eval.rail.as_str()),
                ("policy", d.plugin.as_str()),
                ("verdict", d.verdict.as_str()),
                ("shadow", "true"),
            ];
            // A shadow plugin's verdicts are counted apart: they were not applied.
            let labels = if d.shadow {
                &verdict[..]
            } else {
                &verdict[..4]
            };
            self.verdicts.with(labels, |c| *c += 1);
            if let Some(kind) = d.fault {
                self.faults
                    .with(&[("policy", &d.plugin), ("kind", kind.as_str())], |c| {
                        *c += 1
                    });
            }
            // A kept verdict reused (`memo`) or a plugin left out by its triggers is no call: it
            // would skew the calls' latency.
            if !d.memo && !d.skipped {
                self.plugin_latency.with(&[("policy", &d.plugin)], |h| {
                    h.observe(d.duration_us.as_secs_f64())
                });
            }
            for g in &d.guard {
                let model = crate::policy::record::name(&g.model);
                let result = match (g.error, g.cached) {
                    (Some(kind), _) => kind,
                    (None, true) => "cached",
                    (None, false) => "ok",
                };
                self.guard_calls.with(
                    &[
                        ("model", &model),
                        ("operation", g.operation),
                        ("result", result),
                    ],
                    |c| *c += 1,
                );
                if !g.cached && g.error.is_none() {
                    self.guard_latency.with(&[("model", &model)], |h| {
                        h.observe(g.duration_us.as_secs_f64())
                    });
                }
            }
        }
    }

    /// Record a backend call's latency to headers.
    pub fn backend(&self, elapsed: Duration) {
        self.backend_latency
            .with(&[], |h| h.observe(elapsed.as_secs_f64()));
    }

    /// Count a failed backend call.
    pub fn backend_error(&self, kind: &str) {
        self.backend_errors.with(&[("kind", kind)], |c| *c += 1);
    }

    /// Count a reload attempt.
    pub fn reload(&self, ok: bool) {
        self.reloads
            .with(&[("result", if ok { "success" } else { "error" })], |c| {
                *c += 1
            });
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
            &self.approvals,
            &self.guard_calls,
        ] {
            let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(out, "# TYPE {} counter", family.name);
            for (labels, value) in family.snapshot() {
                let _ = writeln!(out, "{}{} {value}", family.name, label_text(&labels, None));
            }
        }
        for family in [
            &self.plugin_latency,
            &self.rail_latency,
            &self.backend_latency,
            &self.guard_latency,
        ] {
            let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(out, "# TYPE {} histogram", family.name);
            for (labels, h) in family.snapshot() {
                let mut below = 0;
                for (i, le) in BUCKETS.iter().enumerate() {
                    below += h.counts[i];
                    let _ = writeln!(
                        out,
                        "{}_bucket{} {}",
                        family.name,
                        label_text(&labels, Some(("le", &le.to_string()))),
                        below
                    );
                }
                let _ = writeln!(
                    out,
                    "{}_bucket{} {}",
                    family.name,
                    label_text(&labels, Some(("le", "+Inf"))),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_counted_once_each_and_written_escaped() {
        let m = Metrics::default();
        m.request("/v1/chat", "de\"fault", 200);
        m.request("/v1/chat", "de\"fault", 200);
        m.request("/v1/chat", "other", 401);
        m.auth_failure();
        m.backend(Duration::from_millis(2));
        let text = m.render();
        assert!(
            text.contains(
                "railyard_requests_total{endpoint=\"/v1/chat\",tenant=\"de\\\"fault\",status=\"200\"} 2\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("tenant=\"other\",status=\"401\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("\nrailyard_auth_failures_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("railyard_backend_duration_seconds_bucket{le=\"0.0025\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("railyard_backend_duration_seconds_bucket{le=\"+Inf\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("railyard_backend_duration_seconds_count 1\n"),
            "{text}"
        );
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        for ms in [0.02, 2.0, 2.0, 20.0, 60_000.0] {
            m.backend(Duration::from_micros((ms * 1000.0) as u64));
        }
        let text = m.render();
        let bucket = |le: &str| {
            let line = format!("railyard_backend_duration_seconds_bucket{{le=\"{le}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&line))
                .unwrap_or_else(|| panic!("no bucket {le}: {text}"))
                .to_string()
        };
        assert_eq!(bucket("0.00001"), "0");
        assert_eq!(bucket("0.000025"), "1", "20 µs");
        assert_eq!(bucket("0.001"), "1");
        assert_eq!(bucket("0.0025"), "3", "and the two of 2 ms");
        assert_eq!(bucket("0.025"), "4");
        assert_eq!(bucket("30"), "4", "a minute is past the last bucket");
        assert_eq!(bucket("+Inf"), "5");
    }

    #[test]
    fn every_workers_counts_are_added_up() {
        let m = std::sync::Arc::new(Metrics::default());
        // Threads marked as workers 0..=3 count into their own parts (more than this machine
        // may have CPUs for, so two share one).
        let threads: Vec<_> = (0..4)
            .map(|worker| {
                let m = m.clone();
                std::thread::spawn(move || {
                    crate::shard::mark(worker);
                    for _ in 0..=worker {
                        m.request("/v1/chat", "t", 200);
                        m.backend(Duration::from_millis(2));
                    }
                    m.request("/v1/chat", &format!("only{worker}"), 200);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = m.render();
        assert!(
            text.contains("{endpoint=\"/v1/chat\",tenant=\"t\",status=\"200\"} 10\n"),
            "{text}"
        );
        assert_eq!(
            text.matches("tenant=\"t\"").count(),
            1,
            "one line per series: {text}"
        );
        for worker in 0..4 {
            assert!(text.contains(&format!("tenant=\"only{worker}\",status=\"200\"}} 1\n")));
        }
        assert!(
            text.contains("railyard_backend_duration_seconds_count 10\n"),
            "{text}"
        );
        assert!(
            text.contains("railyard_backend_duration_seconds_bucket{le=\"0.0025\"} 10\n"),
            "{text}"
        );
    }

    #[test]
    fn labels_with_one_value_under_two_names_are_two_series() {
        let f: Family<u64> = Family::new("f", "h");
        f.with(&[("a", "x")], |c| *c += 1);
        f.with(&[("b", "x")], |c| *c += 2);
        f.with(&[("a", "x")], |c| *c += 4);
        f.with(&[("a", "x"), ("b", "")], |c| *c += 8);
        let got = f.snapshot();
        assert_eq!(
            got,
            vec![
                ("a=\"x\"".to_string(), 5),
                ("a=\"x\",b=\"\"".to_string(), 8),
                ("b=\"x\"".to_string(), 2),
            ]
        );
    }
}
