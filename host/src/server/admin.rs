//! Admin endpoints: what is loaded, liveness, readiness, metrics.

use super::App;
use crate::payload::Rail;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::Arc;

/// `GET /v1/policies`: loaded plugins with versions, hashes, rails and limits.
pub(crate) async fn policies(State(app): State<Arc<App>>) -> Response {
    let set = app.policies();
    let plugins: Vec<_> = set
        .plugins()
        .iter()
        .map(|p| {
            let rails: Vec<Rail> = Rail::ALL
                .into_iter()
                .filter(|r| {
                    set.chain(*r)
                        .steps()
                        .iter()
                        .any(|s| s.plugin.id() == p.id())
                })
                .collect();
            let on_error = set
                .chain(rails.first().copied().unwrap_or(Rail::Input))
                .steps()
                .iter()
                .find(|s| s.plugin.id() == p.id())
                .map(|s| s.on_error);
            json!({
                "id": p.id(),
                "name": p.info().name,
                "version": p.info().version,
                "sha256": p.digest(),
                "path": p.path(),
                "rails": rails,
                "on_error": on_error,
                "limits": {
                    "timeout_ms": p.limits().timeout.as_millis() as u64,
                    "memory_mb": p.limits().memory_bytes >> 20,
                    "isolation": p.limits().isolation,
                },
            })
        })
        .collect();
    let chains: serde_json::Map<String, serde_json::Value> = Rail::ALL
        .into_iter()
        .map(|r| {
            let ids: Vec<&str> = set.chain(r).steps().iter().map(|s| s.plugin.id()).collect();
            (r.to_string(), json!(ids))
        })
        .collect();
    super::json_response(
        StatusCode::OK,
        json!({
            "config": set.config().path,
            "plugins": plugins,
            "chains": chains,
            "last_reload_error": null,
        }),
    )
}

/// `GET /healthz`: the process is up.
pub(crate) async fn healthz() -> Response {
    (StatusCode::OK, "ok\n").into_response()
}

/// `GET /readyz`: a policy set is loaded, so requests are judged.
pub(crate) async fn readyz(State(app): State<Arc<App>>) -> Response {
    let set = app.policies();
    (
        StatusCode::OK,
        format!("ready: {} plugins loaded\n", set.plugins().len()),
    )
        .into_response()
}

/// `GET /metrics`: Prometheus text format.
pub(crate) async fn metrics(State(app): State<Arc<App>>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.metrics().render(),
    )
        .into_response()
}
