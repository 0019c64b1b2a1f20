//! `GET /v1/models`: the backend's model list (behind the same way in as every door, so an
//! unknown caller learns nothing about the backend). What a client reads in it (a model's
//! display name, a vendor's fields, a key or a number that could hold a value) passes the
//! `output` rail first; its ids, words and times are inert when they look the part. A list
//! that is not JSON is not passed on.

use super::error::ApiError;
use super::ingress;
use super::{App, RequestId};
use crate::codec::closed::{Inert, Shape};
use crate::codec::Door;
use crate::model::{Message, Rail};
use crate::policy::record::Outcome;
use crate::rails::RequestScope;
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
                    let bytes = match judge(&mut scope, bytes).await {
                        Ok(bytes) => bytes,
                        Err(error) => {
                            let (status, _, _) = error.parts();
                            scope.finish(status.as_u16(), error.outcome());
                            return error.into_response_for(Door::Models);
                        }
                    };
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

/// What of a model list is inert: the OpenAI and Anthropic SDKs' `Model`/`ModelInfo` and list
/// types' ids, words and times.
const LIST: Shape = Shape {
    mapped: &[],
    inert: &[
        ("object", Inert::Word),
        ("first_id", Inert::Id),
        ("last_id", Inert::Id),
        ("data[].id", Inert::Id),
        ("data[].object", Inert::Word),
        ("data[].type", Inert::Word),
        ("data[].owned_by", Inert::Word),
        ("data[].created", Inert::Time),
        ("data[].created_at", Inert::Time),
    ],
    known: &[],
};

/// The backend's list as the client gets it: its leaves judged on the output rail, written
/// anew when a policy changed one; refused when a policy blocks. A body that is not JSON is
/// not passed on (nothing could judge it).
async fn judge(scope: &mut RequestScope, bytes: bytes::Bytes) -> Result<bytes::Bytes, ApiError> {
    if !scope.runs(Rail::Output) {
        return Ok(bytes);
    }
    let Ok(list) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Err(ApiError::BadBackendResponse(
            "the model list is not JSON, so it cannot be judged".into(),
        ));
    };
    let mut judged = list.clone();
    let reply = Message::reply(None, Vec::new());
    match scope
        .judge_value(Rail::Output, Vec::new(), reply, &mut judged, &LIST)
        .await
    {
        Err(refusal) => Err(ApiError::Blocked {
            message: refusal.message(),
            railyard: scope.railyard(),
        }),
        Ok(()) if judged == list => Ok(bytes),
        Ok(()) => Ok(bytes::Bytes::from(judged.to_string())),
    }
}
