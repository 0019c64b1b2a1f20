//! `[[mcp.servers]]`: the MCP servers the daemon guards, each at `/mcp/<name>` (reloadable).

use super::Problems;
use axum::http::{HeaderName, HeaderValue, Uri};
use std::time::Duration;

/// Headers the transport owns: a server entry may neither set nor forward them.
const TRANSPORT_HEADERS: [&str; 10] = [
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "te",
];

/// `[mcp]`.
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// The servers, in file order.
    pub servers: Vec<McpServer>,
    /// The hosts a request to the door may name in `Host` (lower case, no port; `*`: any), and
    /// the origins it may come from (`Origin`, scheme and host, any port; `*`: any): what the
    /// specification asks a server to check against DNS rebinding. Loopback by default.
    pub allowed_hosts: Vec<String>,
    /// See `allowed_hosts`.
    pub allowed_origins: Vec<String>,
}

/// The loopback names: what a door answers by default.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

impl Default for McpConfig {
    fn default() -> McpConfig {
        McpConfig {
            servers: Vec::new(),
            allowed_hosts: LOOPBACK.iter().map(|h| h.to_string()).collect(),
            allowed_origins: LOOPBACK
                .iter()
                .flat_map(|h| {
                    let h = if h.contains(':') {
                        format!("[{h}]")
                    } else {
                        h.to_string()
                    };
                    [format!("http://{h}"), format!("https://{h}")]
                })
                .collect(),
        }
    }
}

impl McpConfig {
    /// The server named `name`.
    pub fn server(&self, name: &str) -> Option<&McpServer> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// Whether a request naming `host` (a `Host` header's value) may be served.
    pub fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        self.allowed_hosts.iter().any(|h| h == "*" || *h == name)
    }

    /// Whether a request from `origin` (an `Origin` header's value) may be served.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        let bare = format!("{scheme}://{}", strip_port(rest));
        self.allowed_origins.iter().any(|o| o == "*" || *o == bare)
    }
}

/// A `Host` value's name: lower case, without its port (an IPv6 address without its brackets).
fn host_name(host: &str) -> String {
    let h = host.trim().to_ascii_lowercase();
    let bare = strip_port(&h);
    bare.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

/// `host[:port]` without the port (`[::1]:80` keeps its brackets).
fn strip_port(h: &str) -> &str {
    if let Some(end) = h.find(']') {
        return &h[..=end];
    }
    match h.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => h,
    }
}

/// One upstream MCP server (Streamable HTTP).
#[derive(Debug, Clone)]
pub struct McpServer {
    /// Its name: the daemon serves it at `/mcp/<name>`.
    pub name: String,
    /// The upstream's MCP endpoint.
    pub url: Uri,
    /// Headers sent to the upstream on every request (its own credentials): `headers`, then
    /// `headers_env` read from the environment when the config loads.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Caller headers passed on to the upstream (lower case). Nothing else of the caller's is.
    pub forward_headers: Vec<HeaderName>,
    /// Longest wait for the upstream's answer to begin, and longest pause in a stream.
    pub timeout: Duration,
    /// How its tools are pinned, where it says (else `[pins] mcp`).
    pub pins: Option<super::pins::PinMode>,
    /// The tools pinned at first sight when its tools are pinned `listed`.
    pub trusted_tools: Vec<String>,
}

fn header_name(
    p: &mut Problems<'_>,
    span: std::ops::Range<usize>,
    key: &str,
    name: &str,
) -> Option<HeaderName> {
    match HeaderName::try_from(name) {
        Err(_) => {
            p.at(span, key, format!("'{name}' is not a valid header name"));
            None
        }
        Ok(h) if TRANSPORT_HEADERS.contains(&h.as_str()) => {
            p.at(
                span,
                key,
                format!("'{name}' belongs to the MCP transport, which the daemon sets itself"),
            );
            None
        }
        Ok(h) => Some(h),
    }
}

/// Resolve `[[mcp.servers]]`. `auth_on`: callers present Railyard keys in `Authorization`, which
/// must then never be forwarded.
pub(super) fn resolve(p: &mut Problems<'_>, mcp: &super::raw::RawMcp, auth_on: bool) -> McpConfig {
    let raw = &mcp.servers;
    let mut config = McpConfig::default();
    if let Some(hosts) = &mcp.allowed_hosts {
        config.allowed_hosts = Vec::new();
        for h in hosts {
            let name = h.get_ref().trim().to_ascii_lowercase();
            if name.is_empty() || name.contains(['/', ' ']) {
                p.at(
                    h.span(),
                    "mcp.allowed_hosts",
                    format!(
                        "'{}' is not a host name (no scheme, no path; '*' for any)",
                        h.get_ref()
                    ),
                );
                continue;
            }
            config.allowed_hosts.push(host_name(&name));
        }
    }
    if let Some(origins) = &mcp.allowed_origins {
        config.allowed_origins = Vec::new();
        for o in origins {
            let origin = o.get_ref().trim().to_ascii_lowercase();
            let ok = origin == "*"
                || origin.split_once("://").is_some_and(|(scheme, rest)| {
                    !scheme.is_empty() && !rest.is_empty() && !rest.contains('/')
                });
            if !ok {
                p.at(
                    o.span(),
                    "mcp.allowed_origins",
                    format!(
                        "'{}' is not an origin (scheme://host, any port; '*' for any)",
                        o.get_ref()
                    ),
                );
                continue;
            }
            let bare = match origin.split_once("://") {
                Some((scheme, rest)) => format!("{scheme}://{}", strip_port(rest)),
                None => origin,
            };
            config.allowed_origins.push(bare);
        }
    }
    let mut servers: Vec<McpServer> = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
        let s = entry.get_ref();
        let key = |field: &str| format!("mcp.servers[{i}].{field}");
        let name = s.name.get_ref();
        if !super::short_name(name) {
            p.at(
                s.name.span(),
                key("name"),
                format!("'{name}' must be 1 to 64 letters, digits, '-' or '_' (it is a URL path segment)"),
            );
        } else if servers.iter().any(|o| &o.name == name) {
            p.at(
                s.name.span(),
                key("name"),
                format!("'{name}' is used twice"),
            );
        }
        let url = match s.url.get_ref().parse::<Uri>() {
            Ok(u) if matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some() => {
                Some(u)
            }
            _ => {
                p.at(
                    s.url.span(),
                    key("url"),
                    format!("'{}' is not an http:// or https:// URL", s.url.get_ref()),
                );
                None
            }
        };
        let mut headers = Vec::new();
        for (h, v) in &s.headers {
            let Some(name) = header_name(p, v.span(), &key("headers"), h) else {
                continue;
            };
            match HeaderValue::from_str(v.get_ref()) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    headers.push((name, value));
                }
                Err(_) => p.at(
                    v.span(),
                    key("headers"),
                    format!("the value of '{h}' is not a valid header value"),
                ),
            }
        }
        for (h, var) in &s.headers_env {
            let Some(name) = header_name(p, var.span(), &key("headers_env"), h) else {
                continue;
            };
            match std::env::var(var.get_ref()) {
                Err(_) => p.at(
                    var.span(),
                    key("headers_env"),
                    format!(
                        "environment variable {} (for '{h}') is not set",
                        var.get_ref()
                    ),
                ),
                Ok(text) => match HeaderValue::from_str(&text) {
                    Ok(mut value) => {
                        value.set_sensitive(true);
                        headers.push((name, value));
                    }
                    Err(_) => p.at(
                        var.span(),
                        key("headers_env"),
                        format!("{} holds characters not allowed in a header", var.get_ref()),
                    ),
                },
            }
        }
        let mut forward_headers = Vec::new();
        for h in &s.forward_headers {
            let Some(name) = header_name(p, h.span(), &key("forward_headers"), h.get_ref()) else {
                continue;
            };
            if auth_on && name == axum::http::header::AUTHORIZATION {
                p.at(
                    h.span(),
                    key("forward_headers"),
                    "cannot forward 'authorization' while [auth] is on: it carries the caller's Railyard key",
                );
                continue;
            }
            forward_headers.push(name);
        }
        let timeout = match &s.timeout_ms {
            Some(v) if *v.get_ref() == 0 || *v.get_ref() > 3_600_000 => {
                p.at(v.span(), key("timeout_ms"), "must be between 1 and 3600000");
                Duration::from_secs(30)
            }
            Some(v) => Duration::from_millis(*v.get_ref()),
            None => Duration::from_secs(30),
        };
        if let Some(url) = url {
            servers.push(McpServer {
                name: name.clone(),
                url,
                headers,
                forward_headers,
                timeout,
                pins: s.pins,
                trusted_tools: s.trusted_tools.clone(),
            });
        }
    }
    config.servers = servers;
    config
}
