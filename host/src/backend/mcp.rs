//! The upstream MCP servers (Streamable HTTP): one pooled client for all of them, `http://` and
//! `https://` alike. A request resolves when the upstream's response headers arrive, within the
//! server's timeout; the body (JSON or an SSE stream) is read by the caller.

use super::{error_chain, BackendError};
use crate::config::McpServer;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// hyper-util's pooled client (one pool for every server, keyed by host), with TLS when the
/// system's CA certificates could be loaded.
#[derive(Clone)]
enum Upstream {
    Plain(Client<HttpConnector, Full<Bytes>>),
    Tls(Client<HttpsConnector<HttpConnector>, Full<Bytes>>),
}

/// Client for the configured MCP servers.
#[derive(Clone)]
pub struct McpUpstream {
    client: Upstream,
}

impl McpUpstream {
    /// A client for `http://` and `https://` servers (rustls, the system's CA certificates;
    /// without them, only `http://` servers can be reached, and `https://` ones fail clearly).
    pub fn new() -> McpUpstream {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.enforce_http(false);
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        let builder = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .clone();
        let client = match hyper_rustls::HttpsConnectorBuilder::new().with_native_roots() {
            Ok(b) => Upstream::Tls(
                builder.build(b.https_or_http().enable_http1().wrap_connector(connector)),
            ),
            Err(e) => {
                tracing::warn!("no system CA certificates, so no https:// MCP servers: {e}");
                Upstream::Plain(builder.build(connector))
            }
        };
        McpUpstream { client }
    }

    /// Send `method` with `headers` and `body` to `server`. The request carries the server's
    /// configured headers after `headers`; the `Host` is the upstream's own.
    pub async fn send(
        &self,
        server: &McpServer,
        method: Method,
        headers: hyper::HeaderMap,
        body: Bytes,
    ) -> Result<Response<Incoming>, BackendError> {
        let mut request = Request::builder()
            .method(method)
            .uri(server.url.clone())
            .body(Full::new(body))
            .map_err(|e| BackendError::Unreachable(e.to_string()))?;
        *request.headers_mut() = headers;
        for (name, value) in &server.headers {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        let call = async {
            match &self.client {
                Upstream::Plain(c) => c.request(request).await,
                Upstream::Tls(c) => c.request(request).await,
            }
        };
        match tokio::time::timeout(server.timeout, call).await {
            Err(_) => Err(BackendError::Timeout(server.timeout.as_millis())),
            Ok(Err(e)) => Err(BackendError::Unreachable(error_chain(&e))),
            Ok(Ok(response)) => Ok(response),
        }
    }
}

impl Default for McpUpstream {
    fn default() -> Self {
        McpUpstream::new()
    }
}
