//! The one place where failures become responses: each cause mapped to a status, headers, an
//! error body in the shape of the door the request came through (`crate::codec::error`:
//! OpenAI's or Anthropic's; JSON-RPC's on the MCP door) and how the decision record counts it. Handlers return
//! [`ApiError`] and never build error bodies themselves.

use crate::backend::BackendError;
use crate::codec::Door;
use crate::policy::record::Outcome;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;

/// A request that could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed JSON or a payload of the wrong shape (400).
    #[error("{message}")]
    BadRequest {
        /// What was wrong.
        message: String,
        /// The offending field, if known.
        param: Option<String>,
    },
    /// Body over the configured limit (413).
    #[error("request body is larger than the {limit} byte limit")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// Backend unreachable (502) or too slow (504).
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The backend answered something that is not a reply of the door's kind (502).
    #[error("model backend sent an invalid response: {0}")]
    BadBackendResponse(String),
    /// No such endpoint (404).
    #[error("no route for {0}")]
    NotFound(String),
    /// An endpoint asked with a method it does not answer (405).
    #[error("{method} is not allowed on {path}: send {allow}")]
    MethodNotAllowed {
        /// The method asked.
        method: String,
        /// The path.
        path: String,
        /// The methods it answers.
        allow: &'static str,
    },
    /// No API key (401). OpenAI's wording, so SDKs and proxies that match on it know it.
    #[error("You didn't provide an API key: missing API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")]
    MissingKey,
    /// An `Authorization` header that is not a bearer token (401).
    #[error("Incorrect API key provided: the Authorization header must be 'Bearer <key>'.")]
    MalformedKey,
    /// An API key no configured key matches (401). Never echoes the key.
    #[error(
        "Incorrect API key provided. Ask your Railyard operator for a key (`railyard keys new`)."
    )]
    WrongKey,
    /// An admin endpoint without an admin key (401).
    #[error("admin endpoints require an admin key: send 'Authorization: Bearer <admin key>'")]
    AdminKey,
    /// The caller's tenant has too many requests in flight (429, with `Retry-After`).
    #[error("tenant '{tenant}' already has {limit} requests in flight (its max_concurrent); retry shortly")]
    TooManyRequests {
        /// The tenant.
        tenant: String,
        /// Its limit.
        limit: usize,
    },
    /// The caller's tenant or key is over its `requests_per_minute` (429, with `Retry-After`).
    #[error("{who} is over its limit of {limit} {unit} per minute; retry after {retry_after} s")]
    RateLimited {
        /// Whose limit: "tenant 'x'" or "the key of 'p'".
        who: String,
        /// Its limit.
        limit: u32,
        /// What it counts: `requests` or `tokens`.
        unit: &'static str,
        /// Whole seconds until a request fits again.
        retry_after: u64,
    },
    /// The state store did not answer in time and `[state] on_unavailable = "closed"` (503).
    #[error("the shared state this request needs (its limits, its agent session's reads) cannot be read right now (the state store is unavailable); retry shortly")]
    StateUnavailable,
    /// The model backend answered an error status: its message (judged by the output rail, or
    /// withheld when it is not JSON) in the door's error shape, with its status and Retry-After.
    #[error("{message}")]
    Upstream {
        /// The backend's status.
        status: StatusCode,
        /// What the client is told.
        message: String,
        /// The backend's `Retry-After`, so clients' back-off works.
        retry_after: Option<HeaderValue>,
    },
    /// A policy blocked the request and `on_block = "error"` (400 `policy_violation`).
    #[error("{message}")]
    Blocked {
        /// What blocked it, and why.
        message: String,
        /// The `railyard` object.
        railyard: Value,
    },
}

impl From<crate::auth::AuthError> for ApiError {
    fn from(e: crate::auth::AuthError) -> ApiError {
        match e {
            crate::auth::AuthError::Missing => ApiError::MissingKey,
            crate::auth::AuthError::Malformed => ApiError::MalformedKey,
            crate::auth::AuthError::Unknown => ApiError::WrongKey,
        }
    }
}

impl ApiError {
    /// Shorthand for a 400.
    pub fn bad_request(message: impl Into<String>, param: Option<String>) -> ApiError {
        ApiError::BadRequest {
            message: message.into(),
            param,
        }
    }

    /// Status code, OpenAI error type and code.
    pub fn parts(&self) -> (StatusCode, &'static str, &'static str) {
        match self {
            ApiError::BadRequest { .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_request",
            ),
            ApiError::TooLarge { .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "request_too_large",
            ),
            ApiError::Backend(BackendError::Timeout(_)) => (
                StatusCode::GATEWAY_TIMEOUT,
                "backend_error",
                "backend_timeout",
            ),
            ApiError::Backend(_) => (
                StatusCode::BAD_GATEWAY,
                "backend_error",
                "backend_unreachable",
            ),
            ApiError::BadBackendResponse(_) => (
                StatusCode::BAD_GATEWAY,
                "backend_error",
                "backend_invalid_response",
            ),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "invalid_request_error", "not_found"),
            ApiError::MethodNotAllowed { .. } => (
                StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request_error",
                "method_not_allowed",
            ),
            ApiError::MissingKey
            | ApiError::MalformedKey
            | ApiError::WrongKey
            | ApiError::AdminKey => (
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                "invalid_api_key",
            ),
            ApiError::TooManyRequests { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "tenant_concurrency_limit",
            ),
            ApiError::RateLimited { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "tenant_rate_limit",
            ),
            ApiError::StateUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "state_unavailable",
            ),
            ApiError::Blocked { .. } => (StatusCode::BAD_REQUEST, "policy_violation", "blocked"),
            ApiError::Upstream { status, .. } => {
                let kind = match status.as_u16() {
                    429 => "rate_limit_error",
                    400..=499 => "invalid_request_error",
                    _ => "server_error",
                };
                (*status, kind, "backend_status")
            }
        }
    }

    /// How the decision record counts it.
    pub fn outcome(&self) -> Outcome {
        match self {
            ApiError::BadRequest { .. }
            | ApiError::NotFound(_)
            | ApiError::MethodNotAllowed { .. } => Outcome::Invalid,
            ApiError::TooLarge { .. }
            | ApiError::TooManyRequests { .. }
            | ApiError::RateLimited { .. }
            | ApiError::StateUnavailable => Outcome::Throttled,
            ApiError::Backend(_) | ApiError::BadBackendResponse(_) | ApiError::Upstream { .. } => {
                Outcome::BackendError
            }
            ApiError::MissingKey
            | ApiError::MalformedKey
            | ApiError::WrongKey
            | ApiError::AdminKey => Outcome::Unauthorized,
            ApiError::Blocked { .. } => Outcome::Refused,
        }
    }

    /// The OpenAI-shaped body.
    pub fn body(&self) -> Value {
        let (_, kind, code) = self.parts();
        let param = match self {
            ApiError::BadRequest { param, .. } => param.as_deref(),
            _ => None,
        };
        let mut body = crate::codec::error::openai(&self.to_string(), kind, code, param);
        if let ApiError::Blocked { railyard, .. } = self {
            body["railyard"] = railyard.clone();
        }
        body
    }

    /// The Anthropic-shaped body.
    pub fn anthropic_body(&self) -> Value {
        let (status, _, _) = self.parts();
        let kind = match self {
            ApiError::Blocked { .. } => crate::codec::error::POLICY_VIOLATION.0,
            _ => crate::codec::error::anthropic_kind(status.as_u16()),
        };
        let mut body = crate::codec::error::anthropic(kind, &self.to_string());
        if let ApiError::Blocked { railyard, .. } = self {
            body["railyard"] = railyard.clone();
        }
        body
    }

    /// The JSON-RPC error body (the MCP door): the code for its kind, the OpenAI type and
    /// code in `data`.
    pub fn mcp_body(&self) -> Value {
        use crate::codec::mcp;
        let (_, kind, code) = self.parts();
        let number = match self {
            ApiError::Backend(_) | ApiError::BadBackendResponse(_) | ApiError::Upstream { .. } => {
                mcp::UPSTREAM_ERROR
            }
            ApiError::Blocked { .. } => mcp::POLICY_VIOLATION,
            _ => mcp::INVALID_REQUEST,
        };
        let data = serde_json::json!({"type": kind, "code": code});
        mcp::error(&Value::Null, number, &self.to_string(), Some(data))
    }

    /// The response on `door`.
    pub fn into_response_for(self, door: Door) -> Response {
        let (status, _, _) = self.parts();
        let body = if door.anthropic() {
            self.anthropic_body()
        } else if door == Door::Mcp {
            self.mcp_body()
        } else {
            self.body()
        };
        let mut response = super::json_response(status, body);
        let headers = response.headers_mut();
        match self {
            ApiError::MissingKey
            | ApiError::MalformedKey
            | ApiError::WrongKey
            | ApiError::AdminKey => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            // Requests in flight are short: a second is a fair first back-off.
            ApiError::TooManyRequests { .. } | ApiError::StateUnavailable => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            ApiError::RateLimited { retry_after, .. } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            }
            ApiError::Upstream {
                retry_after: Some(after),
                ..
            } => {
                headers.insert(header::RETRY_AFTER, after);
            }
            ApiError::MethodNotAllowed { allow, .. } => {
                headers.insert(header::ALLOW, HeaderValue::from_static(allow));
            }
            _ => {}
        }
        response
    }
}

impl axum::response::IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.into_response_for(Door::Chat)
    }
}
