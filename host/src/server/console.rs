//! The console: a page for operators at `/console`, shipped inside the binary (no CDN, no
//! separate server), and the one endpoint only it needs, the live decisions.
//!
//! The page, its script and its style are static and hold no data: they are served without a
//! key. Everything they show comes from the admin endpoints (`/v1/policies`, `/metrics`,
//! `/v1/admin/decisions`, `/v1/admin/check`, `/v1/admin/reload`), with the admin key the
//! operator typed into the page's login form (kept in the tab's session storage only).
//!
//! Live decisions are the decision records, as `/v1/admin/decisions` streams them (`live`).

mod live;

pub(crate) use live::{decisions, Live};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

const PAGE: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The page runs only its own script and talks only to this daemon; no frame may hold it.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `GET /console`.
pub(crate) async fn page() -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

/// `GET /console/console.js`.
pub(crate) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /console/console.css`.
pub(crate) async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}
