//! Test doubles on loopback for the daemon tests: a blocking HTTP/1.1 client, a scripted mock
//! model backend, and a handle on a running `railyard serve`.

use crate::support::typed_json;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A response as the client saw it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
    /// [`Reply::json`] with the vault's placeholders written as their types' (`[EMAIL]`): what
    /// a check API caller sees redacted, whichever way.
    pub fn typed(&self) -> Value {
        typed_json(&self.json())
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// The `data:` payloads of an SSE body, in order.
    pub fn events(&self) -> Vec<String> {
        self.body
            .split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .map(str::to_string)
            .collect()
    }
    /// The text a streaming client would assemble from `delta.content`.
    pub fn streamed_text(&self) -> String {
        self.events()
            .iter()
            .filter_map(|e| serde_json::from_str::<Value>(e).ok())
            .filter_map(|v| {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect()
    }
}

fn read_head(reader: &mut impl BufRead) -> Option<(String, Vec<(String, String)>)> {
    let mut first = String::new();
    if reader.read_line(&mut first).ok()? == 0 {
        return None;
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Some((first.trim_end().to_string(), headers))
}

/// Header names and values, in order.
type Headers = Vec<(String, String)>;

/// One request off a connection: its headers and its body (`Content-Length` bytes); `None` when
/// the connection ends first.
fn read_request(reader: &mut impl BufRead) -> Option<(Headers, Vec<u8>)> {
    let (_, headers) = read_head(reader)?;
    let len: usize = header(&headers, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some((headers, body))
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The demo API key of the bundled config (`policies/keys.toml`): principal `demo`, default tenant.
pub const DEMO_KEY: &str = "demo-key";
/// The bundled config's demo admin key.
pub const ADMIN_KEY: &str = "demo-admin-key";

fn is_admin_path(path: &str) -> bool {
    path == "/metrics" || path == "/v1/policies" || path.starts_with("/v1/admin/")
}

/// Send one request (`Connection: close`) and read the whole response. Unless `headers` has an
/// `Authorization`, the bundled config's demo key goes along (its admin key for admin paths;
/// open configs ignore it); an empty `Authorization` value sends none.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let default_auth = format!(
        "Bearer {}",
        if is_admin_path(path) {
            ADMIN_KEY
        } else {
            DEMO_KEY
        }
    );
    let mut all: Vec<(&str, &str)> = headers
        .iter()
        .filter(|(k, v)| !(k.eq_ignore_ascii_case("authorization") && v.is_empty()))
        .copied()
        .collect();
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
    {
        all.push(("Authorization", &default_auth));
    }
    send(addr, method, path, &all, body)
}

fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    let mut reader = BufReader::new(stream);
    let (status_line, headers) = read_head(&mut reader).expect("no response");
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let mut body = Vec::new();
    if header(&headers, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk).unwrap();
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(len) = header(&headers, "content-length") {
        let mut buf = vec![0; len.parse().unwrap()];
        reader.read_exact(&mut buf).unwrap();
        body = buf;
    } else {
        reader.read_to_end(&mut body).unwrap();
    }
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// POST JSON.
pub fn post(addr: SocketAddr, path: &str, body: &Value) -> Reply {
    request(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
}

/// POST JSON to `/v1/messages` as the Anthropic SDK does (the demo key as `x-api-key`).
pub fn post_anthropic(addr: SocketAddr, body: &Value) -> Reply {
    request(
        addr,
        "POST",
        "/v1/messages",
        &[
            ("x-api-key", "demo-key"),
            ("anthropic-version", "2023-06-01"),
            ("Authorization", ""),
        ],
        body.to_string().as_bytes(),
    )
}

/// POST JSON presenting `key` as the bearer token (`None`: no Authorization header at all).
pub fn post_as(addr: SocketAddr, path: &str, key: Option<&str>, body: &Value) -> Reply {
    let auth = key.map(|k| format!("Bearer {k}")).unwrap_or_default();
    request(
        addr,
        "POST",
        path,
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
        ],
        body.to_string().as_bytes(),
    )
}

/// GET.
pub fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, &[], b"")
}

/// What the mock backend answers.
#[derive(Clone)]
pub enum Script {
    /// A JSON body with a status.
    Json(u16, Value),
    /// SSE events (each the text after `data: `), with a pause between them.
    Sse(Vec<String>, Duration),
    /// Never answer (for timeouts).
    Hang,
    /// A status, extra header lines ("Name: value") and a body of any type.
    Raw(u16, Vec<String>, String),
    /// The script after a pause; a client that hangs up during the pause sets `hung_up` (and
    /// gets nothing).
    Slow(Duration, Box<Script>),
}

/// A request the mock backend received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub headers: Vec<(String, String)>,
    /// The body as JSON, each of the vault's placeholders written as its type's (`[EMAIL]` for
    /// `[EMAIL_7KQ2M9XA]`: the bundled pii is reversible): what was redacted, whichever way.
    /// `raw` has them as they came.
    pub body: Value,
    /// The body's bytes as they arrived.
    pub raw: Vec<u8>,
}

/// A scripted model backend on loopback. It answers every request with its current script.
pub struct MockBackend {
    pub addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Set when a client stopped reading an SSE stream (write failed).
    pub hung_up: Arc<Mutex<bool>>,
}

impl MockBackend {
    pub fn start(script: Script) -> MockBackend {
        MockBackend::start_on(0, script)
    }

    /// On `port` (0: any free one): a backend that comes up where a daemon already points.
    pub fn start_on(port: u16, script: Script) -> MockBackend {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let addr = listener.local_addr().unwrap();
        let script = Arc::new(Mutex::new(script));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let hung_up = Arc::new(Mutex::new(false));
        let (s, v, h) = (script.clone(), seen.clone(), hung_up.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (s, v, h) = (s.clone(), v.clone(), h.clone());
                std::thread::spawn(move || serve_one(conn, &s, &v, &h));
            }
        });
        MockBackend {
            addr,
            script,
            seen,
            hung_up,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn set(&self, script: Script) {
        *self.script.lock().unwrap() = script;
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve_one(
    conn: TcpStream,
    script: &Mutex<Script>,
    seen: &Mutex<Vec<Seen>>,
    hung_up: &Mutex<bool>,
) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let Some((headers, raw)) = read_request(&mut reader) else {
        return;
    };
    let body = serde_json::from_slice(&raw).map_or(Value::Null, |b| typed_json(&b));
    seen.lock().unwrap().push(Seen { headers, body, raw });
    let mut script = script.lock().unwrap().clone();
    if let Script::Slow(pause, then) = script {
        if client_left_within(&conn, pause) {
            *hung_up.lock().unwrap() = true;
            return;
        }
        script = *then;
    }
    let mut conn = conn;
    match script {
        Script::Json(status, value) => {
            let text = value.to_string();
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
        }
        Script::Sse(events, pause) => {
            let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
            for e in events {
                let data = format!("data: {e}\n\n");
                let ok = write!(conn, "{:x}\r\n{data}\r\n", data.len()).and_then(|_| conn.flush());
                if ok.is_err() {
                    *hung_up.lock().unwrap() = true;
                    return;
                }
                std::thread::sleep(pause);
            }
            let _ = write!(conn, "0\r\n\r\n");
        }
        Script::Hang => std::thread::sleep(Duration::from_secs(30)),
        Script::Slow(..) => unreachable!("the pause was taken above"),
        Script::Raw(status, headers, body) => {
            let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    }
}

/// Wait `pause` on `conn`; whether the client closed the connection meanwhile.
fn client_left_within(conn: &TcpStream, pause: Duration) -> bool {
    let until = std::time::Instant::now() + pause;
    let mut byte = [0u8; 1];
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            let _ = conn.set_read_timeout(None);
            return false;
        }
        let _ = conn.set_read_timeout(Some(left.min(Duration::from_millis(20))));
        match conn.peek(&mut byte) {
            Ok(0) => return true,
            Ok(_) => std::thread::sleep(Duration::from_millis(5)),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
}

/// A model backend that keeps connections alive, as real servers do: it answers every request
/// with `reply`, counts the connections it accepted and notes each request's `Host`. With
/// `one_each`, it closes each connection right after its first answer without saying so (no
/// `Connection: close`), as a server closing idle keep-alive connections can, and counts the
/// connections it has closed.
pub struct KeepAliveBackend {
    pub addr: SocketAddr,
    /// Connections that carried a request.
    pub connections: Arc<Mutex<usize>>,
    pub closed: Arc<Mutex<usize>>,
    pub hosts: Arc<Mutex<Vec<String>>>,
}

impl KeepAliveBackend {
    pub fn start(reply: Value, one_each: bool) -> KeepAliveBackend {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(Mutex::new(0));
        let closed = Arc::new(Mutex::new(0));
        let hosts = Arc::new(Mutex::new(Vec::new()));
        let (count, seen, shut) = (connections.clone(), hosts.clone(), closed.clone());
        let text = reply.to_string();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let (seen, text, shut, count) =
                    (seen.clone(), text.clone(), shut.clone(), count.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(conn.try_clone().unwrap());
                    let mut first = true;
                    while let Some((headers, _)) = read_request(&mut reader) {
                        // A connection counts once it carries a request (the daemon's readiness
                        // probe opens one that carries none).
                        if std::mem::take(&mut first) {
                            *count.lock().unwrap() += 1;
                        }
                        let host = header(&headers, "host").unwrap_or_default().to_string();
                        seen.lock().unwrap().push(host);
                        let _ = write!(
                            conn,
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
                            text.len()
                        );
                        if one_each {
                            let _ = conn.shutdown(std::net::Shutdown::Both);
                            *shut.lock().unwrap() += 1;
                            return;
                        }
                    }
                });
            }
        });
        KeepAliveBackend {
            addr,
            connections,
            closed,
            hosts,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

/// SSE chunk JSON for a text delta.
pub fn text_chunk(text: &str) -> String {
    serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "mock",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    .to_string()
}

/// SSE chunk JSON for a finish.
pub fn finish_chunk(reason: &str) -> String {
    serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "mock",
        "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    .to_string()
}

/// A non-streaming completion with `message`.
pub fn completion(message: Value, finish: &str) -> Value {
    serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "mock",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}, "x-backend-extra": {"kept": true}})
}

/// A running `railyard serve`, killed on drop.
pub struct Daemon {
    pub addr: SocketAddr,
    /// The gRPC address, when the daemon serves gRPC.
    pub grpc: Option<SocketAddr>,
    /// The admin address, when admin endpoints have their own listener.
    pub admin: Option<SocketAddr>,
    child: Child,
    /// Its log lines (JSON), when started with [`Daemon::start_logged`].
    logs: Option<Arc<Mutex<Vec<String>>>>,
}

impl Daemon {
    /// Start the daemon with `config` (a file) against `backend`.
    pub fn start(config: &Path, backend: &str) -> Daemon {
        Daemon::start_with(config, &["--backend", backend])
    }

    pub fn start_with(config: &Path, extra: &[&str]) -> Daemon {
        Daemon::spawn(config, extra, false, &[])
    }

    /// Start the daemon with JSON logs (`--log-format json`, info level) kept for [`Daemon::logs`].
    pub fn start_logged(config: &Path, extra: &[&str]) -> Daemon {
        Daemon::spawn(config, extra, true, &[])
    }

    /// [`Daemon::start_logged`] with more variables in the daemon's environment.
    pub fn start_logged_env(config: &Path, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        Daemon::spawn(config, extra, true, env)
    }

    /// The daemon's log lines so far, parsed.
    pub fn logs(&self) -> Vec<Value> {
        let lines = self.logs.as_ref().expect("started with start_logged");
        lines
            .lock()
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    /// The messages of its log lines so far (started with [`Daemon::start_logged`]).
    pub fn messages(&self) -> Vec<String> {
        self.logs()
            .iter()
            .filter_map(|l| l["fields"]["message"].as_str().map(str::to_string))
            .collect()
    }

    fn spawn(config: &Path, extra: &[&str], logged: bool, env: &[(&str, &str)]) -> Daemon {
        let mut command = Command::new(env!("CARGO_BIN_EXE_railyard"));
        command.envs(env.iter().copied());
        if logged {
            command
                .args(["--log-format", "json"])
                .env("RAILYARD_LOG", "info")
                .stderr(Stdio::piped());
        } else {
            command
                .env("RAILYARD_LOG", "warn,railyard::decision=info")
                .stderr(Stdio::inherit());
        }
        let mut child = command
            .args([
                "serve",
                "--config",
                config.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ])
            .args(extra)
            .env(
                "RAILYARD_CACHE_DIR",
                std::env::temp_dir().join("railyard-daemon-test-cache"),
            )
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let logs = child.stderr.take().map(|stderr| {
            let lines = Arc::new(Mutex::new(Vec::new()));
            let sink = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    sink.lock().unwrap().push(line);
                }
            });
            lines
        });
        // stdout: "railyard grpc listening on ADDR" and "railyard admin listening on http://ADDR"
        // (when enabled), then the HTTP line.
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut grpc = None;
        let mut admin = None;
        let addr = loop {
            let mut line = String::new();
            if stdout.read_line(&mut line).unwrap() == 0 {
                panic!("the daemon exited before listening");
            }
            if let Some(g) = line.trim().strip_prefix("railyard grpc listening on ") {
                grpc = Some(g.parse().unwrap());
                continue;
            }
            if let Some(a) = line
                .trim()
                .strip_prefix("railyard admin listening on http://")
            {
                admin = Some(a.parse().unwrap());
                continue;
            }
            break line
                .trim()
                .strip_prefix("railyard listening on http://")
                .unwrap_or_else(|| panic!("unexpected line: {line:?}"))
                .parse()
                .unwrap();
        };
        Daemon {
            addr,
            grpc,
            admin,
            child,
            logs,
        }
    }
}

impl Daemon {
    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send the daemon `signal` (`TERM`, `HUP`) with `kill`.
    pub fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}: {status}");
    }
}

impl Daemon {
    /// Wait up to `within` for the process to exit on its own; its status, if it did.
    pub fn exited(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let until = std::time::Instant::now() + within;
        while std::time::Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
