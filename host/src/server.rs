//! The daemon's faces: the model doors (OpenAI chat completions and responses, Anthropic
//! messages, models), the check API, gRPC and the admin endpoints, all sharing one live
//! [`PolicySet`], one way in (`ingress`) and one request flow (`crate::rails`).
//!
//! A data-plane connection is served by `front`: a model door's `POST` goes straight to the
//! door's pipeline, the front giving it its id, echoing that and counting the request as the
//! router's first layer does; every other request goes through the router. The router's
//! stack, outermost first: request id (every response carries `x-request-id`; every request is
//! counted) → the route: a handler takes the request through `ingress` (authenticate, admit,
//! size) itself, so that every request, refused or not, has its scope and its one decision
//! record; admin routes sit behind `require_admin`.
//!
//! - `proxy`: the pipeline of every model door, generic over the door's codec;
//! - `check`, `models`, `admin`: the other HTTP endpoints;
//! - `mcp`: the MCP door, `/mcp/<name>` in front of each configured MCP server;
//! - `grpc`: `railyard.v1.PolicyService`, health and reflection;
//! - `error`: every failure as a response in the door's shape; `limits`: tenants' in-flight
//!   counters.

mod admin;
mod approvals;
mod budget;
mod check;
mod console;
pub mod error;
mod front;
pub mod grpc;
mod health;
mod ingress;
mod limits;
pub mod listen;
mod mcp;
mod models;
mod proxy;

pub use front::Front;

use crate::backend::Backend;
use crate::codec::chat::Chat;
use crate::codec::messages::Messages;
use crate::codec::responses::Responses;
use crate::codec::Door;
use crate::config::StartupConfig;
use crate::metrics::Metrics;
use crate::policy::chain::Evaluation;
use crate::policy::record::DecisionRecord;
use crate::policy::PolicySet;
use crate::rails::Observer;
use crate::reload::Reloader;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::Router;
use error::ApiError;
use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Header carrying the request id, on every response.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// How decision records are written (`set_record_format`).
static RECORD_FORMAT: AtomicU8 = AtomicU8::new(RecordFormat::Tracing as u8);

/// How decision records are written: an event through the log formatter, or the same line
/// written directly to stderr. A record is written for every request, and the text formatter
/// passes a message through `Debug` and its escaping one character at a time (~10k
/// instructions per record, BENCHMARKS.md §26); written directly it is one buffer and one
/// `write`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum RecordFormat {
    /// Through `tracing` (a terminal: the formatter's colours).
    Tracing,
    /// The line the text formatter writes without colours, written directly.
    Text,
    /// One JSON object per line, fields as JSON values (`--log-format json`).
    Json,
}

/// Set how decision records are written (once, when logging is set up).
pub fn set_record_format(format: RecordFormat) {
    RECORD_FORMAT.store(format as u8, Ordering::Relaxed);
}

/// Shared state of a running daemon.
pub struct App {
    reloader: Arc<Reloader>,
    backend: Backend,
    startup: StartupConfig,
    metrics: Arc<Metrics>,
    limits: limits::TenantLimits,
    observer: Arc<Sink>,
    id_prefix: String,
    next_id: AtomicU64,
    mcp_upstream: crate::backend::mcp::McpUpstream,
    mcp_tools: mcp::ToolCache,
    /// Set when shutdown begins: `/readyz` turns not-ready.
    draining: std::sync::atomic::AtomicBool,
    /// Traces, when `[telemetry]` is on.
    telemetry: Option<crate::telemetry::Telemetry>,
    /// What replicas share (`[state]`).
    state: Arc<crate::state::Store>,
    /// The dependencies it watches.
    watched: health::Watched,
}

impl App {
    /// A daemon serving the policy sets `reloader` publishes, in front of `backend`, with the
    /// start-up settings it was started with. What replicas share is kept in the store of the
    /// daemon's services (one per daemon).
    pub fn new(
        reloader: Arc<Reloader>,
        backend: Backend,
        startup: StartupConfig,
        metrics: Arc<Metrics>,
    ) -> App {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let state = reloader.services().store().clone();
        App {
            watched: health::Watched::new(&startup),
            reloader,
            backend,
            state,
            startup,
            observer: Arc::new(Sink {
                metrics: metrics.clone(),
                live: Arc::default(),
            }),
            metrics,
            limits: limits::TenantLimits::default(),
            id_prefix: format!(
                "{:08x}",
                (nanos as u64 ^ (std::process::id() as u64) << 32) as u32
            ),
            next_id: AtomicU64::new(1),
            mcp_upstream: crate::backend::mcp::McpUpstream::new(),
            mcp_tools: mcp::ToolCache::default(),
            draining: std::sync::atomic::AtomicBool::new(false),
            telemetry: None,
        }
    }

    /// Probe what the daemon depends on from now on, saying in the log when one goes or comes
    /// back (`/readyz` shows it).
    pub fn watch_dependencies(self: &Arc<App>) {
        health::spawn(self.clone());
    }

    /// Trace requests with `telemetry`.
    pub fn with_telemetry(mut self, telemetry: Option<crate::telemetry::Telemetry>) -> App {
        self.telemetry = telemetry;
        self
    }

    /// Traces, when on.
    pub fn telemetry(&self) -> Option<&crate::telemetry::Telemetry> {
        self.telemetry.as_ref()
    }

    /// The policy set new requests use. A request keeps the snapshot it started with.
    pub fn policies(&self) -> Arc<PolicySet> {
        self.reloader.current()
    }

    /// The reloader.
    pub fn reloader(&self) -> &Arc<Reloader> {
        &self.reloader
    }

    /// Metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The settings the daemon was started with.
    pub fn startup(&self) -> &StartupConfig {
        &self.startup
    }

    pub(crate) fn mcp_upstream(&self) -> &crate::backend::mcp::McpUpstream {
        &self.mcp_upstream
    }

    pub(crate) fn mcp_tools(&self) -> &mcp::ToolCache {
        &self.mcp_tools
    }

    pub(crate) fn observer(&self) -> Arc<dyn Observer> {
        self.observer.clone()
    }

    /// Where decision records go to the console's open streams.
    pub(crate) fn live(&self) -> &Arc<console::Live> {
        &self.observer.live
    }

    /// Shutdown began: say not-ready from now on.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Whether shutdown began.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub(crate) fn new_request_id(&self) -> String {
        request_id_text(
            &self.id_prefix,
            self.next_id.fetch_add(1, Ordering::Relaxed),
        )
    }
}

/// `ry-{prefix}-{n:06x}`, without the formatting machinery (every request makes one).
fn request_id_text(prefix: &str, n: u64) -> String {
    let digits = (64 - n.leading_zeros()).div_ceil(4).max(6);
    let mut id = String::with_capacity(4 + prefix.len() + digits as usize);
    id.push_str("ry-");
    id.push_str(prefix);
    id.push('-');
    for i in (0..digits).rev() {
        id.push(char::from(
            b"0123456789abcdef"[(n >> (4 * i)) as usize & 0xf],
        ));
    }
    id
}

/// Where evaluations and decision records go: metrics, the decision log and the console's live
/// decisions.
struct Sink {
    metrics: Arc<Metrics>,
    live: Arc<console::Live>,
}

impl Observer for Sink {
    fn evaluation(&self, eval: &Evaluation, tenant: &str) {
        self.metrics.evaluation(eval, Some(tenant));
    }

    fn approvals(&self, asked: &[serde_json::Value], tenant: &str) {
        for a in asked {
            if let Some(status) = a["status"].as_str() {
                self.metrics.approval(tenant, status);
            }
        }
    }

    fn record(&self, record: &DecisionRecord) {
        self.live.send(record);
        if !tracing::enabled!(target: "railyard::decision", tracing::Level::INFO) {
            return;
        }
        let format = RECORD_FORMAT.load(Ordering::Relaxed);
        if format == RecordFormat::Text as u8 {
            let mut out = String::with_capacity(512);
            push_timestamp(&mut out);
            out.push(' ');
            text_record(&mut out, record);
            out.push('\n');
            let _ = std::io::stderr().lock().write_all(out.as_bytes());
        } else if format == RecordFormat::Json as u8 {
            // The same envelope as the JSON log formatter's lines, with the record's fields as
            // JSON values (the formatter would make them strings).
            let mut fields = serde_json::to_value(record).unwrap_or_default();
            fields["message"] = "decision".into();
            let line = serde_json::json!({
                "timestamp": timestamp(),
                "level": "INFO",
                "fields": fields,
                "target": "railyard::decision",
            });
            let mut out = line.to_string();
            out.push('\n');
            let _ = std::io::stderr().lock().write_all(out.as_bytes());
        } else {
            trace_record(record);
        }
    }
}

/// A decision record as an event, for the log formatter (a terminal's colours).
fn trace_record(record: &DecisionRecord) {
    tracing::info!(
        target: "railyard::decision",
        request_id = %record.request_id,
        "decision {}",
        record.line()
    );
}

/// A decision record's event as the text formatter writes it without colours, after the
/// timestamp and its space: level, target, the message, the request id. The message gets the
/// formatter's escapes (terminal control characters), and line breaks are escaped too, so that
/// a name a client chose (an MCP tool's) cannot start a line of its own.
fn text_record(out: &mut String, record: &DecisionRecord) {
    use std::fmt::Write as _;
    out.push_str(" INFO railyard::decision: decision ");
    let start = out.len();
    record.write_line(out);
    // Looked for sixteen bytes at a time with a test that has no branch (it vectorises), a
    // superset of what is escaped: control bytes, DEL, and a C1 control's lead byte.
    let may_escape = |chunk: &[u8]| {
        chunk.iter().fold(false, |any, &b| {
            any | (b < 0x20) | (b == 0x7f) | (b == 0xc2)
        })
    };
    if out.as_bytes()[start..].chunks(16).any(may_escape) {
        let line = out.split_off(start);
        for ch in line.chars() {
            match ch {
                '\x1b' => out.push_str("\\x1b"),
                '\x07' => out.push_str("\\x07"),
                '\x08' => out.push_str("\\x08"),
                '\x0c' => out.push_str("\\x0c"),
                '\x7f' => out.push_str("\\x7f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                // C1 controls (UTF-8 0xc2 0x80-0x9f).
                c if ('\u{80}'..='\u{9f}').contains(&c) => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
    }
    out.push_str(" request_id=");
    out.push_str(&record.request_id);
}

/// Now, as RFC 3339 in UTC with microseconds (what the log formatter writes).
/// (The formatter's own goes through `Display` field by field: ~2.5k instructions a record.)
fn timestamp() -> String {
    let mut out = String::with_capacity(27);
    push_timestamp(&mut out);
    out
}

/// [`timestamp`], appended to `out`.
fn push_timestamp(out: &mut String) {
    use std::fmt::Write as _;
    let _ = write!(
        out,
        "{}",
        humantime::format_rfc3339_micros(std::time::SystemTime::now())
    );
}

/// The tenant a response was served for (for the request metrics).
#[derive(Clone, Default)]
pub(crate) struct TenantLabel(pub String);

/// The request id a handler works under (set by the middleware).
#[derive(Clone)]
pub(crate) struct RequestId(pub String);

/// The router: the doors and the check API, health, and the admin endpoints unless they have a
/// listener of their own (`[admin] listen`).
pub fn router(app: Arc<App>, with_admin: bool) -> Router {
    let path = |door: Door| door.route().1;
    let api = Router::new()
        .route(path(Door::Chat), post(proxy::door::<Chat>))
        .route(path(Door::Responses), post(proxy::door::<Responses>))
        .route(path(Door::Messages), post(proxy::door::<Messages>))
        .route(path(Door::Models), get(models::models))
        .route(path(Door::Check), post(check::check))
        .route(path(Door::Mcp), any(mcp::door));
    let mut router = Router::new().merge(api).merge(health());
    if with_admin {
        router = router.merge(admin(app.clone()));
    }
    finish(router, app)
}

/// The data plane's service: the model doors' `POST`s straight to their pipeline, the rest
/// through [`router`].
pub fn front(app: Arc<App>, with_admin: bool) -> Front {
    Front::new(app.clone(), router(app, with_admin))
}

/// The router of a separate admin listener: admin endpoints and health.
pub fn admin_router(app: Arc<App>) -> Router {
    finish(Router::new().merge(admin(app.clone())).merge(health()), app)
}

/// Health and admin paths (the doors' are their routes, `Door::route`).
const HEALTHZ: &str = "/healthz";
const READYZ: &str = "/readyz";
const POLICIES: &str = "/v1/policies";
const RELOAD: &str = "/v1/admin/reload";
const METRICS: &str = "/metrics";
const DECISIONS: &str = "/v1/admin/decisions";
const ADMIN_CHECK: &str = "/v1/admin/check";
const APPROVALS: &str = "/v1/admin/approvals";
const APPROVAL: &str = "/v1/admin/approvals/{id}";
const PINS: &str = "/v1/admin/pins";
const CONSOLE: &str = "/console";
const CONSOLE_SCRIPT: &str = "/console/console.js";
const CONSOLE_STYLE: &str = "/console/console.css";

fn health() -> Router<Arc<App>> {
    Router::new()
        .route(HEALTHZ, get(admin::healthz))
        .route(READYZ, get(admin::readyz))
}

/// The admin endpoints (behind the admin key) and the console's page, which holds no data and
/// asks for the key itself.
fn admin(app: Arc<App>) -> Router<Arc<App>> {
    Router::new()
        .route(POLICIES, get(admin::policies))
        .route(RELOAD, post(admin::reload))
        .route(METRICS, get(admin::metrics))
        .route(DECISIONS, get(console::decisions))
        .route(ADMIN_CHECK, post(check::admin_check))
        .layer(axum::middleware::from_fn_with_state(app, require_admin))
        // Its own check: approver keys may too, for their tenant.
        .route(APPROVALS, get(approvals::list))
        .route(APPROVAL, get(approvals::show).post(approvals::decide))
        .route(PINS, get(approvals::pins))
        .route(CONSOLE, get(console::page))
        .route(CONSOLE_SCRIPT, get(console::script))
        .route(CONSOLE_STYLE, get(console::style))
}

fn finish(router: Router<Arc<App>>, app: Arc<App>) -> Router {
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            request_id,
        ))
        .with_state(app)
}

/// Admin endpoints require an admin key when `[admin] keys_sha256` names any.
async fn require_admin(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    if !is_admin(&app, &request) {
        app.metrics.auth_failure();
        return ApiError::AdminKey.into_response();
    }
    next.run(request).await
}

/// Whether `request` presents an admin key, or none is needed (`[admin] keys_sha256` is empty).
fn is_admin(app: &App, request: &Request) -> bool {
    let set = app.policies();
    let keys = &set.config().admin.keys;
    keys.is_empty() || {
        let presented = request
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        crate::auth::bearer(presented).is_ok_and(|token| crate::auth::matches_any(keys, token))
    }
}

/// A path's error answered in the shape its clients read: Anthropic's under `/v1/messages`
/// (`count_tokens`, batches), OpenAI's elsewhere.
fn door_for(path: &str) -> Door {
    let messages = Door::Messages.route().1;
    match path.strip_prefix(messages) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => Door::Messages,
        _ => Door::Chat,
    }
}

async fn not_found(request: Request) -> Response {
    let path = request.uri().path();
    ApiError::NotFound(format!("{} {path}", request.method())).into_response_for(door_for(path))
}

/// A known path asked with another method: the error in the door's shape, with `Allow`.
async fn method_not_allowed(request: Request) -> Response {
    let path = request.uri().path().to_string();
    let allow = if [
        POLICIES,
        HEALTHZ,
        READYZ,
        METRICS,
        DECISIONS,
        CONSOLE,
        CONSOLE_SCRIPT,
        CONSOLE_STYLE,
        Door::Models.route().1,
    ]
    .contains(&path.as_str())
    {
        "GET"
    } else {
        "POST"
    };
    let door = door_for(&path);
    ApiError::MethodNotAllowed {
        method: request.method().to_string(),
        path,
        allow,
    }
    .into_response_for(door)
}

/// The paths counted under their own name in the request metrics (others: `/mcp`, `other`).
const ENDPOINTS: [&str; 12] = [
    Door::Chat.route().1,
    Door::Responses.route().1,
    Door::Messages.route().1,
    Door::Models.route().1,
    Door::Check.route().1,
    POLICIES,
    HEALTHZ,
    READYZ,
    METRICS,
    DECISIONS,
    ADMIN_CHECK,
    CONSOLE,
];

/// Give every request an id (the caller's `x-request-id` when it is sane), echo it on the
/// response, and count the request.
async fn request_id(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    let (id, echo) = app.request_id(request.headers());
    let endpoint = endpoint(request.uri().path());
    request.extensions_mut().insert(RequestId(id));
    let mut response = next.run(request).await;
    let tenant = response
        .extensions_mut()
        .remove::<TenantLabel>()
        .unwrap_or_default();
    app.answered(endpoint, echo, &tenant.0, &mut response);
    response
}

/// The name `path` is counted under in the request metrics.
fn endpoint(path: &str) -> &'static str {
    match ENDPOINTS.iter().find(|e| **e == path) {
        Some(e) => e,
        None if path.starts_with("/mcp/") => "/mcp",
        None => "other",
    }
}

impl App {
    /// The id a request works under (the caller's `x-request-id` when it is sane, else a new
    /// one), and the header value its response echoes.
    fn request_id(&self, headers: &axum::http::HeaderMap) -> (String, Option<HeaderValue>) {
        let given = headers.get(REQUEST_ID_HEADER).and_then(|v| {
            // An id, not a place for text: what UUIDs, ULIDs and trace ids are made of.
            let sane = !v.is_empty()
                && v.len() <= 128
                && v.as_bytes()
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
            Some((v.to_str().ok().filter(|_| sane)?, v))
        });
        match given {
            // The header's own value echoed: no copy of its bytes.
            Some((id, value)) => (id.to_string(), Some(value.clone())),
            None => {
                let id = self.new_request_id();
                let echo = HeaderValue::from_str(&id).ok();
                (id, echo)
            }
        }
    }

    /// Put the request's id on `response`, and count it under `endpoint` and `tenant`.
    fn answered(
        &self,
        endpoint: &'static str,
        echo: Option<HeaderValue>,
        tenant: &str,
        response: &mut Response,
    ) {
        if let Some(value) = echo {
            response.headers_mut().insert(REQUEST_ID_HEADER, value);
        }
        self.metrics
            .request(endpoint, tenant, response.status().as_u16());
    }
}

/// A JSON response with a status.
pub(crate) fn json_response(status: axum::http::StatusCode, value: serde_json::Value) -> Response {
    // to_vec, not to_string: the Display path goes through a formatter, a third slower.
    json_bytes(
        status,
        serde_json::to_vec(&value).unwrap_or_default().into(),
    )
}

/// A response with a status and a body that is JSON already.
pub(crate) fn json_bytes(status: axum::http::StatusCode, body: bytes::Bytes) -> Response {
    let mut response = Response::new(axum::body::Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Door;
    use crate::policy::record::Target;
    use crate::policy::Revision;
    use std::sync::Mutex;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What the text formatter writes for the record's event, without the time and colours.
    fn formatted(record: &DecisionRecord) -> String {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || trace_record(record));
        let out = buffer.0.lock().unwrap().clone();
        String::from_utf8(out).unwrap()
    }

    fn direct(record: &DecisionRecord) -> String {
        let mut out = String::new();
        text_record(&mut out, record);
        out.push('\n');
        out
    }

    fn record(tool: &str) -> DecisionRecord {
        let revision = Revision {
            number: 3,
            hash: "0123456789abcdef".into(),
        };
        let mut r = DecisionRecord::new("ry-1".into(), Door::Mcp, &revision);
        r.tenant = "support".into();
        r.principal = Some("démo".into());
        r.target = Some(Target {
            server: "files".into(),
            method: "tools/call".into(),
            tool: Some(tool.into()),
        });
        r
    }

    /// Written directly, a record is the line the formatter writes, its escapes included.
    #[test]
    fn a_record_written_directly_is_the_formatters_line() {
        for tool in [
            "read",
            "",
            "r\u{1b}[31mred\u{7}\u{8}\u{c}\u{7f}",
            "c1\u{85}\u{9b}x\u{a0}é\t",
        ] {
            let r = record(tool);
            assert_eq!(direct(&r), formatted(&r), "{tool:?}");
        }
        let plain = DecisionRecord::new(
            "id".into(),
            Door::Chat,
            &Revision {
                number: 1,
                hash: "h".into(),
            },
        );
        assert_eq!(direct(&plain), formatted(&plain));
    }

    /// Request ids are `ry-{prefix}-{n:06x}`: at least six lowercase hex digits, more as needed.
    #[test]
    fn request_ids_are_the_prefix_and_the_counter_in_hex() {
        for n in [0, 1, 0xa, 0xabcdef, 0x100_0000, 0xfff_ffff_ffff, u64::MAX] {
            assert_eq!(request_id_text("1a2b", n), format!("ry-1a2b-{n:06x}"));
        }
        assert_eq!(request_id_text("p", 0x2a), "ry-p-00002a");
    }

    /// The timestamp is the one the log formatter writes (the same shape, the same instant to
    /// the minute; tried again if a minute turned between the two).
    #[test]
    fn the_timestamp_is_the_formatters() {
        use tracing_subscriber::fmt::time::FormatTime;
        for _ in 0..3 {
            let ours = timestamp();
            let mut theirs = String::new();
            tracing_subscriber::fmt::time::SystemTime
                .format_time(&mut tracing_subscriber::fmt::format::Writer::new(
                    &mut theirs,
                ))
                .unwrap();
            assert_eq!(ours.len(), theirs.len(), "{ours} {theirs}");
            let shape = |s: &str| s.bytes().map(|b| b.is_ascii_digit()).collect::<Vec<_>>();
            assert_eq!(shape(&ours), shape(&theirs), "{ours} {theirs}");
            assert!(ours.ends_with('Z') && theirs.ends_with('Z'));
            if ours[..16] == theirs[..16] {
                return;
            }
        }
        panic!("the two timestamps differ by more than a minute");
    }

    /// A line break in a name a client chose is escaped: a record stays one line.
    #[test]
    fn a_record_is_one_line() {
        let line = direct(&record("a\nb\r\n2026-11-26T00:00:00Z  INFO forged"));
        assert_eq!(line.matches('\n').count(), 1);
        assert!(line.contains("tools/call:a\\nb\\r\\n2026"), "{line}");
    }
}
