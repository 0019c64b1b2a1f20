//! `GET /v1/models`: the backend's model list, passed through (behind the same way in as every
//! door, so an unknown caller learns nothing about the backend).

use super::error::ApiError;
use super::ingress;
use super::{App, RequestId};
use crate::codec::Door;
use crate::policy::record::Outcome;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::Response;
use axum::Extension;
use std::sync::Arc;

/// The handler.
pub(crate) async fn models(
    State(app): State<Arc<App>>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    headers: HeaderMap,
) -> Response {
    let app = &app;
    ingress::routed(
        app,
        Door::Models,
        request_id,
        &headers,
        |mut scope| async move {
            let result = async {
                let response = app.backend.models().await?;
                let status = response.status();
                let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
                let bytes = app
                    .backend
                    .read_body(response.into_body(), app.backend.timeout())
                    .await?;
                Ok::<_, ApiError>((status, content_type, bytes))
            }
            .await;
            match result {
                Ok((status, content_type, bytes)) => {
                    let outcome = if status.is_success() {
                        Outcome::Served
                    } else {
                        Outcome::BackendError
                    };
                    scope.finish(status.as_u16(), outcome);
                    let mut r = Response::new(Body::from(bytes));
                    *r.status_mut() = status;
                    if let Some(ct) = content_type {
                        r.headers_mut().insert(header::CONTENT_TYPE, ct);
                    }
                    r
                }
                Err(error) => {
                    app.metrics().backend_error(error.parts().2);
                    let (status, _, _) = error.parts();
                    scope.finish(status.as_u16(), error.outcome());
                    error.into_response_for(Door::Models)
                }
            }
        },
    )
    .await
}
