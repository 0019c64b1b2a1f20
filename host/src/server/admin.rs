//! Admin endpoints: what is loaded, liveness, readiness, metrics.

use super::App;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// `GET /v1/policies`: loaded plugins with versions, hashes, rails and limits; the chains.
pub(crate) async fn policies(State(app): State<Arc<App>>) -> Response {
    let mut out = app.policies().describe();
    out["last_reload_error"] =
        serde_json::to_value(app.reloader().last_failure()).unwrap_or_default();
    out["restart_needed"] = serde_json::json!(app.reloader().restart_needed());
    let (needed, other) = app.watched.down(&app);
    out["down"] =
        serde_json::to_value(needed.iter().chain(&other).collect::<Vec<_>>()).unwrap_or_default();
    super::json_response(StatusCode::OK, out)
}

/// `POST /v1/admin/reload`: reload now; answers whether it worked and, if not, why (the old set
/// keeps serving).
pub(crate) async fn reload(State(app): State<Arc<App>>) -> Response {
    let reloader = app.reloader().clone();
    let result = tokio::task::spawn_blocking(move || reloader.reload("admin API")).await;
    match result {
        Ok(Ok(revision)) => super::json_response(
            StatusCode::OK,
            serde_json::json!({"reloaded": true, "revision": revision}),
        ),
        Ok(Err(error)) => super::json_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            serde_json::json!({
                "reloaded": false,
                "error": error,
                "revision": app.policies().revision(),
            }),
        ),
        Err(e) => super::json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({"reloaded": false, "error": format!("reload task failed: {e}")}),
        ),
    }
}

/// `GET /healthz`: the process is up.
pub(crate) async fn healthz() -> Response {
    (StatusCode::OK, "ok\n").into_response()
}

/// `GET /readyz`: a policy set is loaded and the backends and the state store answer, so
/// requests are judged and served; each dependency that is down is named, since when (a guard
/// model's does not make the daemon unready: its policies say what it means).
pub(crate) async fn readyz(State(app): State<Arc<App>>) -> Response {
    if app.draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining: shutting down\n").into_response();
    }
    let (needed, other) = app.watched.down(&app);
    let mut text = if needed.is_empty() {
        format!("ready: {} plugins loaded\n", app.policies().plugins().len())
    } else {
        "not ready\n".to_string()
    };
    // Names and times only: an error may hold an internal address, and /readyz is open.
    for d in needed.iter().chain(&other) {
        text.push_str(&format!("{} is unreachable since {}\n", d.name, d.since));
    }
    let status = match needed.is_empty() {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, text).into_response()
}

/// `GET /metrics`: Prometheus text format.
pub(crate) async fn metrics(State(app): State<Arc<App>>) -> Response {
    let mut text = app.metrics().render();
    // Tasks alive in the runtime: flat under steady load, or something leaks (a relay, a
    // backend call nobody cancelled).
    let tasks = crate::shard::alive_tasks();
    text.push_str(&format!(
        "# HELP railyard_runtime_tasks Tasks alive in the daemon's async runtime.\n# TYPE railyard_runtime_tasks gauge\nrailyard_runtime_tasks {tasks}\n"
    ));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        text,
    )
        .into_response()
}
