//! The one place where failures become HTTP responses: OpenAI-style error bodies
//! (`{"error": {"message", "type", "param", "code"}}`) with the right status. Handlers return
//! [`ApiError`] and never build error bodies themselves.

use crate::backend::BackendError;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

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
    /// The backend answered something that is not a chat completion (502).
    #[error("model backend sent an invalid response: {0}")]
    BadBackendResponse(String),
    /// No such endpoint (404).
    #[error("no route for {0}")]
    NotFound(String),
    /// Missing or unknown API key (401).
    #[error("{0}")]
    Unauthorized(String),
    /// The caller's tenant has too many requests in flight (429, with `Retry-After`).
    #[error("tenant '{tenant}' already has {limit} requests in flight (its max_concurrent); retry shortly")]
    TooManyRequests {
        /// The tenant.
        tenant: String,
        /// Its limit.
        limit: usize,
    },
}

impl ApiError {
    /// Shorthand for a 400.
    pub fn bad_request(message: impl Into<String>, param: Option<String>) -> ApiError {
        ApiError::BadRequest {
            message: message.into(),
            param,
        }
    }

    /// Status code, error type and code.
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
            ApiError::Unauthorized(_) => (
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                "invalid_api_key",
            ),
            ApiError::TooManyRequests { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "tenant_concurrency_limit",
            ),
        }
    }

    /// The OpenAI-style error body.
    pub fn body(&self) -> serde_json::Value {
        let (_, kind, code) = self.parts();
        let param = match self {
            ApiError::BadRequest { param, .. } => param.clone(),
            _ => None,
        };
        json!({"error": {"message": self.to_string(), "type": kind, "param": param, "code": code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, _, _) = self.parts();
        let mut response = (status, axum::Json(self.body())).into_response();
        let headers = response.headers_mut();
        match self {
            ApiError::Unauthorized(_) => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            // Requests in flight are short: a second is a fair first back-off.
            ApiError::TooManyRequests { .. } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        response
    }
}
