//! The upstream model servers: any OpenAI-compatible HTTP(S) endpoint (vLLM, llama.cpp server,
//! Ollama, OpenAI and other hosted APIs) for chat completions, responses and models, and an
//! Anthropic-compatible one for messages. HTTP/1.1 connections pooled per data-plane worker
//! (`pool.rs` for `http://`); `https://` URLs use rustls with the system's CA certificates.
//!
//! Errors are typed so the server can map them to exactly one status: unreachable → 502,
//! timeout → 504. A backend that answers with an error status is not an error here: its status
//! and body are passed through to the client.

pub mod mcp;
mod pool;

use crate::codec::Route;
use crate::config::BackendConfig;
use crate::util::deadline::{self, within};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Request, Response, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::Duration;

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// Could not connect or the connection broke: why, for the log (callers are not shown it:
    /// it names the backend's internal address).
    #[error("model backend unreachable")]
    Unreachable(String),
    /// No answer within the configured timeout.
    #[error("model backend did not answer within {0} ms")]
    Timeout(u128),
}

/// One worker's connections: to `http://` backends its own pools of hyper connections (no TLS
/// layer on the hot path; one for the OpenAI-compatible backend, one for the Anthropic one when
/// it is elsewhere), rustls through hyper-util's pooled client for `https://`.
#[derive(Clone)]
enum Upstream {
    Plain {
        openai: Arc<pool::Pool>,
        anthropic: Arc<pool::Pool>,
    },
    Tls(Box<Client<HttpsConnector<HttpConnector>, Full<Bytes>>>),
}

/// Client for the configured backends.
#[derive(Clone)]
pub struct Backend {
    /// One connection pool per data-plane worker (`crate::shard`), and one for the rest: a
    /// backend connection is then driven on the thread of the requests that use it.
    clients: Vec<Upstream>,
    chat: Uri,
    responses: Uri,
    models: Uri,
    messages: Uri,
    timeout: Duration,
    api_key: Option<HeaderValue>,
    anthropic_key: Option<HeaderValue>,
}

fn endpoint(key: &str, base: &str, path: &str) -> Result<Uri, String> {
    let url: Uri = format!("{base}/{path}")
        .parse()
        .map_err(|e| format!("{key} '{base}' is not a valid URL: {e}"))?;
    match url.scheme_str() {
        Some("http" | "https") => Ok(url),
        Some(other) => Err(format!(
            "{key} '{base}': scheme '{other}' is not supported (use http:// or https://)"
        )),
        None => Err(format!(
            "{key} '{base}' needs a scheme (http:// or https://)"
        )),
    }
}

/// The value of environment variable `var`, as a sensitive header value (`prefix` + key).
fn key_from_env(key: &str, var: &str, prefix: &str) -> Result<HeaderValue, String> {
    let value =
        std::env::var(var).map_err(|_| format!("{key}: environment variable {var} is not set"))?;
    let mut header = HeaderValue::from_str(&format!("{prefix}{value}"))
        .map_err(|_| format!("{key}: {var} holds characters not allowed in a header"))?;
    header.set_sensitive(true);
    Ok(header)
}

impl Backend {
    /// A client for `config` (`http://` or `https://`).
    pub fn new(config: &BackendConfig) -> Result<Backend, String> {
        Backend::for_workers(config, 0)
    }

    /// [`Backend::new`] with a connection pool of its own for each of `workers` workers.
    pub fn for_workers(config: &BackendConfig, workers: usize) -> Result<Backend, String> {
        let chat = endpoint("backend.url", &config.url, "chat/completions")?;
        let responses = endpoint("backend.url", &config.url, "responses")?;
        let models = endpoint("backend.url", &config.url, "models")?;
        let messages = endpoint("backend.anthropic.url", &config.anthropic.url, "messages")?;
        let api_key = match &config.api_key_env {
            None => None,
            Some(var) => Some(key_from_env("backend.api_key_env", var, "Bearer ")?),
        };
        let anthropic_key = match &config.anthropic.api_key_env {
            None => None,
            Some(var) => Some(key_from_env("backend.anthropic.api_key_env", var, "")?),
        };
        let tls = [&chat, &messages]
            .iter()
            .any(|u| u.scheme_str() == Some("https"));
        let connect_timeout = config.timeout.min(Duration::from_secs(10));
        // A clone of a client shares its pool: each pool is a client of its own.
        let clients = if tls {
            let mut connector = HttpConnector::new();
            connector.set_nodelay(true);
            connector.enforce_http(false);
            connector.set_connect_timeout(Some(connect_timeout));
            let builder = Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(60))
                .clone();
            let connector = hyper_rustls::HttpsConnectorBuilder::new()
                .with_native_roots()
                .map_err(|e| {
                    format!("cannot load the system's CA certificates for https backends: {e}")
                })?
                .https_only()
                .enable_http1()
                .wrap_connector(connector);
            (0..=workers)
                .map(|_| Upstream::Tls(Box::new(builder.build(connector.clone()))))
                .collect()
        } else {
            let same = chat.authority() == messages.authority();
            (0..=workers)
                .map(|_| {
                    let openai = Arc::new(pool::Pool::new(&chat, connect_timeout)?);
                    let anthropic = match same {
                        true => openai.clone(),
                        false => Arc::new(pool::Pool::new(&messages, connect_timeout)?),
                    };
                    Ok(Upstream::Plain { openai, anthropic })
                })
                .collect::<Result<_, String>>()?
        };
        Ok(Backend {
            clients,
            chat,
            responses,
            models,
            messages,
            timeout: config.timeout,
            api_key,
            anthropic_key,
        })
    }

    /// The configured timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Where `route` goes.
    pub fn url(&self, route: Route) -> String {
        match route {
            Route::Chat => &self.chat,
            Route::Responses => &self.responses,
            Route::Messages => &self.messages,
        }
        .to_string()
    }

    /// POST `body` to `route`. `client_auth` is the caller's `Authorization`, forwarded unless a
    /// backend key is configured; `headers` are the caller's headers the route carries on (e.g.
    /// `anthropic-version`). Resolves when the response headers arrive.
    pub async fn post(
        &self,
        route: Route,
        body: Bytes,
        client_auth: Option<HeaderValue>,
        headers: Vec<(HeaderName, HeaderValue)>,
    ) -> Result<Response<Incoming>, BackendError> {
        let url = match route {
            Route::Chat => &self.chat,
            Route::Responses => &self.responses,
            Route::Messages => &self.messages,
        };
        let mut request = Request::post(url.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(body))
            .map_err(|e| BackendError::Unreachable(e.to_string()))?;
        for (name, value) in headers {
            request.headers_mut().insert(name, value);
        }
        if route == Route::Messages {
            if let Some(key) = self.anthropic_key.clone() {
                request
                    .headers_mut()
                    .insert(HeaderName::from_static("x-api-key"), key);
            }
        } else if let Some(auth) = self.api_key.clone().or(client_auth) {
            request.headers_mut().insert(AUTHORIZATION, auth);
        }
        self.send(request, route == Route::Messages).await
    }

    /// `GET {backend}/models`.
    pub async fn models(&self) -> Result<Response<Incoming>, BackendError> {
        let mut request = Request::get(self.models.clone())
            .body(Full::new(Bytes::new()))
            .map_err(|e| BackendError::Unreachable(e.to_string()))?;
        if let Some(auth) = self.api_key.clone() {
            request.headers_mut().insert(AUTHORIZATION, auth);
        }
        self.send(request, false).await
    }

    /// Send `request` to the OpenAI-compatible backend, or (`to_anthropic`) the Anthropic one.
    async fn send(
        &self,
        request: Request<Full<Bytes>>,
        to_anthropic: bool,
    ) -> Result<Response<Incoming>, BackendError> {
        let client = &self.clients[crate::shard::index() % self.clients.len()];
        let call = async {
            match client {
                Upstream::Plain { openai, anthropic } => {
                    let pool = if to_anthropic { anthropic } else { openai };
                    pool.send(request).await
                }
                Upstream::Tls(c) => c.request(request).await.map_err(|e| error_chain(&e)),
            }
        };
        match within(deadline::after(self.timeout), call).await {
            None => Err(BackendError::Timeout(self.timeout.as_millis())),
            Some(Err(e)) => Err(BackendError::Unreachable(e)),
            Some(Ok(response)) => Ok(response),
        }
    }

    /// Read a whole response body within what is left of the timeout.
    pub async fn read_body(&self, body: Incoming, left: Duration) -> Result<Bytes, BackendError> {
        match within(deadline::after(left), body.collect()).await {
            None => Err(BackendError::Timeout(self.timeout.as_millis())),
            Some(Err(e)) => Err(BackendError::Unreachable(error_chain(&e))),
            Some(Ok(collected)) => Ok(collected.to_bytes()),
        }
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> BackendConfig {
        BackendConfig {
            url: url.into(),
            timeout: Duration::from_secs(1),
            api_key_env: None,
            forward_client_authorization: false,
            anthropic: crate::config::AnthropicBackend {
                url: url.into(),
                api_key_env: None,
            },
        }
    }

    #[test]
    fn accepts_http_and_https_refuses_the_rest() {
        assert!(Backend::new(&config("http://127.0.0.1:8000/v1")).is_ok());
        assert!(Backend::new(&config("https://api.example.com/v1")).is_ok());
        let e = Backend::new(&config("ftp://example.com")).err().unwrap();
        assert!(e.contains("scheme 'ftp' is not supported"), "{e}");
        let e = Backend::new(&config("localhost:8000")).err().unwrap();
        assert!(e.contains("localhost:8000"), "{e}");
        let mut c = config("http://127.0.0.1:8000/v1");
        c.api_key_env = Some("RAILYARD_TEST_SURELY_UNSET_KEY".into());
        let e = Backend::new(&c).err().unwrap();
        assert!(
            e.contains("RAILYARD_TEST_SURELY_UNSET_KEY is not set"),
            "{e}"
        );
    }
}
