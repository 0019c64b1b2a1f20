//! OpenTelemetry traces, off unless `[telemetry] otlp_endpoint` is set: one server span per
//! request (a caller's W3C `traceparent` is its parent), a child span per rail run and, under it,
//! per plugin (verdict, duration, fault), and the backend call as a client span whose context goes
//! to the backend in `traceparent`. Spans carry names, verdicts and timings, never content.
//!
//! Rails and plugins are recorded after the chain ran, from the times the chain measured, so the
//! chain itself does not know about tracing and costs nothing more when it is off.

use crate::codec::Door;
use crate::config::TelemetryConfig;
use crate::policy::chain::Evaluation;
use crate::policy::record::{DecisionRecord, Outcome};
use axum::http::{HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{Span, SpanKind, Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};
use std::time::{Duration, Instant, SystemTime};

/// The exporter and the tracer requests use.
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    propagator: TraceContextPropagator,
}

impl Telemetry {
    /// Start exporting to `config.otlp_endpoint` (OTLP over gRPC). Needs a Tokio runtime: the
    /// exporter's channel runs on it.
    pub fn start(config: &TelemetryConfig) -> Result<Telemetry, String> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(config.otlp_endpoint.clone())
            .with_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("cannot export traces to {}: {e}", config.otlp_endpoint))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            // A caller's sampling decision stands; new traces are sampled at the configured ratio.
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                config.sample_ratio,
            ))))
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(config.service_name.clone())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("railyard");
        Ok(Telemetry {
            provider,
            tracer,
            propagator: TraceContextPropagator::new(),
        })
    }

    /// The trace of a request that just arrived on `door` (`headers`: the caller's, for its
    /// `traceparent`).
    pub fn request(&self, door: Door, headers: &axum::http::HeaderMap) -> RequestTrace {
        let (method, path) = door.route();
        let parent = self.propagator.extract(&HeaderExtractor(headers));
        let span = self
            .tracer
            .span_builder(format!("{method} {path}"))
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("http.request.method", method),
                KeyValue::new("http.route", path),
                KeyValue::new("railyard.door", door.as_str()),
            ])
            .start_with_context(&self.tracer, &parent);
        RequestTrace {
            tracer: self.tracer.clone(),
            propagator: self.propagator.clone(),
            cx: parent.with_span(span),
            backend: None,
        }
    }

    /// Export what is buffered and stop (at exit).
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            tracing::warn!("exporting the last traces failed: {e}");
        }
    }
}

/// One request's spans.
pub struct RequestTrace {
    tracer: SdkTracer,
    propagator: TraceContextPropagator,
    /// The request's server span, as the parent of the others.
    cx: Context,
    /// The backend call, while it runs.
    backend: Option<Context>,
}

impl RequestTrace {
    /// Record a chain run that just ended: a span for the rail, one per plugin under it.
    pub fn rail(&self, eval: &Evaluation) {
        let now = (Instant::now(), SystemTime::now());
        let at = |i: Instant| now.1 - now.0.saturating_duration_since(i);
        let rail = self
            .tracer
            .span_builder(format!("rail {}", eval.rail))
            .with_kind(SpanKind::Internal)
            .with_start_time(at(eval.started))
            .with_attributes([
                KeyValue::new("railyard.rail", eval.rail.as_str()),
                KeyValue::new("railyard.verdict", eval.verdict.as_str()),
            ])
            .start_with_context(&self.tracer, &self.cx);
        let rail_cx = self.cx.with_span(rail);
        for d in &eval.decisions {
            let start = at(eval.started) + d.offset;
            let mut attributes = vec![
                KeyValue::new("railyard.plugin", d.plugin.clone()),
                KeyValue::new("railyard.rail", eval.rail.as_str()),
                KeyValue::new("railyard.verdict", d.verdict.as_str()),
                KeyValue::new("railyard.duration_us", d.duration_us.as_micros() as i64),
            ];
            if let Some(fault) = d.fault {
                attributes.push(KeyValue::new("railyard.fault", fault.as_str()));
            }
            if let Some(on_error) = d.on_error {
                attributes.push(KeyValue::new("railyard.on_error", on_error.as_str()));
            }
            if d.shadow {
                attributes.push(KeyValue::new("railyard.shadow", true));
            }
            let mut span = self
                .tracer
                .span_builder(format!("plugin {}", d.plugin))
                .with_kind(SpanKind::Internal)
                .with_start_time(start)
                .with_attributes(attributes)
                .start_with_context(&self.tracer, &rail_cx);
            if d.fault.is_some() {
                span.set_status(Status::error(format!("plugin fault ({})", d.plugin)));
            }
            if d.guard.is_empty() {
                span.end_with_timestamp(start + d.duration_us);
                continue;
            }
            // The guard models it consulted, one after the other from its start (a plugin waits
            // on one call at a time): client spans, never with text.
            let plugin_cx = rail_cx.with_span(span);
            let mut at_call = start;
            for g in &d.guard {
                let model = crate::policy::record::name(&g.model);
                let mut attributes = vec![
                    KeyValue::new("railyard.guard.model", model.clone()),
                    KeyValue::new("railyard.guard.operation", g.operation),
                    KeyValue::new("railyard.guard.cached", g.cached),
                    KeyValue::new("railyard.duration_us", g.duration_us.as_micros() as i64),
                ];
                if let Some(flagged) = g.flagged {
                    attributes.push(KeyValue::new("railyard.guard.flagged", flagged));
                }
                if let Some(error) = g.error {
                    attributes.push(KeyValue::new("railyard.guard.error", error));
                }
                let mut call = self
                    .tracer
                    .span_builder(format!("guard {model} {}", g.operation))
                    .with_kind(SpanKind::Client)
                    .with_start_time(at_call)
                    .with_attributes(attributes)
                    .start_with_context(&self.tracer, &plugin_cx);
                if let Some(error) = g.error {
                    call.set_status(Status::error(format!("guard model call failed ({error})")));
                }
                call.end_with_timestamp(at_call + g.duration_us);
                at_call += g.duration_us;
            }
            plugin_cx.span().end_with_timestamp(start + d.duration_us);
        }
        rail_cx.span().end_with_timestamp(now.1);
    }

    /// The backend call starts (`url`: where it goes): the headers that carry its context
    /// (`traceparent`, and `tracestate` when the caller sent one), to send along.
    pub fn backend_starts(&mut self, method: &str, url: &str) -> Vec<(HeaderName, HeaderValue)> {
        let span = self
            .tracer
            .span_builder(format!("{method} backend"))
            .with_kind(SpanKind::Client)
            .with_attributes([
                KeyValue::new("http.request.method", method.to_string()),
                KeyValue::new("url.full", url.to_string()),
            ])
            .start_with_context(&self.tracer, &self.cx);
        let cx = self.cx.with_span(span);
        let mut headers = HeaderInjector(Vec::new());
        self.propagator.inject_context(&cx, &mut headers);
        self.backend = Some(cx);
        headers.0
    }

    /// The backend answered with `status` (its body may still be coming).
    pub fn backend_status(&self, status: u16) {
        if let Some(cx) = &self.backend {
            let span = cx.span();
            span.set_attribute(KeyValue::new("http.response.status_code", status as i64));
            if status >= 500 {
                span.set_status(Status::error(format!("HTTP {status}")));
            }
        }
    }

    /// The backend call failed (`kind`: timeout, unreachable, ...).
    pub fn backend_failed(&self, kind: &str) {
        if let Some(cx) = &self.backend {
            cx.span()
                .set_status(Status::error(format!("backend {kind}")));
        }
    }

    /// The backend call is over (its whole answer read, or abandoned).
    pub fn backend_ends(&mut self) {
        if let Some(cx) = self.backend.take() {
            cx.span().end();
        }
    }

    /// The request ended with `record`.
    pub fn end(&mut self, record: &DecisionRecord) {
        if record.outcome == Outcome::Disconnected {
            self.backend_failed("call cancelled: the client went away");
        }
        self.backend_ends();
        let span = self.cx.span();
        span.set_attributes([
            KeyValue::new("http.response.status_code", record.status as i64),
            KeyValue::new("railyard.outcome", record.outcome.as_str()),
            KeyValue::new("railyard.tenant", record.tenant.clone()),
            KeyValue::new("railyard.request_id", record.request_id.clone()),
            KeyValue::new("railyard.revision", record.revision as i64),
        ]);
        if let Some(b) = &record.blocked {
            span.set_attribute(KeyValue::new("railyard.blocked_by", b.policy.clone()));
        }
        if let Some(b) = &record.would_block {
            span.set_attribute(KeyValue::new("railyard.would_block", b.policy.clone()));
        }
        if record.status >= 500 {
            span.set_status(Status::error(format!("HTTP {}", record.status)));
        }
        span.end();
    }
}

struct HeaderExtractor<'a>(&'a axum::http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The W3C headers, as the backend request's.
struct HeaderInjector(Vec<(HeaderName, HeaderValue)>);

impl Injector for HeaderInjector {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(key), HeaderValue::from_str(&value)) {
            self.0.push((name, value));
        }
    }
}
