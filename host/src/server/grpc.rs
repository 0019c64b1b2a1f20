//! gRPC: `railyard.v1.PolicyService` (see `proto/railyard/v1/policy.proto`) on its own listen
//! address, sharing the live policy set and the chain code path with the HTTP check API, plus
//! the standard health service and server reflection so generic clients (grpcurl) work without
//! the proto file.
//!
//! Errors map to status codes: a malformed payload is `INVALID_ARGUMENT`; a policy block is a
//! normal response with verdict block, never an error.

mod convert;

use super::App;
use crate::codec::Door;
use crate::model::Payload;
use crate::policy::record::Outcome;
use convert::{message_in, rail_of, response_out, revision_out, tool_in};
use futures_util::{Stream, StreamExt};
use std::pin::Pin;
use std::sync::Arc;
use tonic::{Request, Response, Status, Streaming};

/// The generated protobuf types, server and client.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("railyard.v1");

    /// The encoded descriptor set, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/railyard_v1_descriptor.bin"));
}

use proto::policy_service_server::{PolicyService, PolicyServiceServer};

/// The service implementation.
pub struct Grpc {
    app: Arc<App>,
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The `authorization` metadata of a call, as text.
fn authorization<T>(request: &Request<T>) -> Option<String> {
    request
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Who presents `authorization` under the current keys, as a gRPC status on failure.
fn authenticate(app: &App, authorization: Option<&str>) -> Result<crate::auth::Caller, Status> {
    let set = app.policies();
    let keys = set.config().auth.as_ref().map(|a| a.keys.as_slice());
    crate::auth::authenticate(keys, authorization).map_err(|e| {
        app.metrics().auth_failure();
        Status::unauthenticated(e.to_string())
    })
}

/// One check, counted in the request metrics under `endpoint` and the caller's tenant.
async fn counted_check(
    app: &Arc<App>,
    endpoint: &str,
    authorization: Option<&str>,
    request: proto::CheckRequest,
) -> Result<proto::CheckResponse, Status> {
    let mut tenant = String::new();
    let result = check(app, authorization, request, &mut tenant).await;
    app.metrics()
        .request(endpoint, &tenant, status_code(&result));
    result
}

/// One check: the same way in as every HTTP door (the shared ingress), then one rail. The key
/// is checked against the policy set of this very check, so a key revoked by a reload stops
/// working mid-stream too.
async fn check(
    app: &Arc<App>,
    authorization: Option<&str>,
    request: proto::CheckRequest,
    tenant: &mut String,
) -> Result<proto::CheckResponse, Status> {
    let request_id = if request.request_id.is_empty() {
        app.new_request_id()
    } else {
        request.request_id.chars().take(128).collect()
    };
    let admitted =
        super::ingress::admit(app, Door::Grpc, request_id.clone(), authorization, None).await;
    let super::ingress::Admitted {
        mut scope,
        permit: _permit,
    } = match admitted {
        Ok(admitted) => admitted,
        Err(refused) => {
            let (mut scope, error) = *refused;
            tenant.push_str(&scope.record().tenant);
            let (status, _, _) = error.parts();
            scope.finish(status.as_u16(), error.outcome());
            return Err(match status.as_u16() {
                401 => Status::unauthenticated(error.to_string()),
                503 => Status::unavailable(error.to_string()),
                _ => Status::resource_exhausted(error.to_string()),
            });
        }
    };
    tenant.push_str(scope.tenant_name());
    let size = prost::Message::encoded_len(&request);
    let max = scope.set().max_body_bytes(scope.ctx().tenant.as_deref());
    let fail = |scope: &mut crate::rails::RequestScope, status: Status, code: u16| {
        let outcome = if code == 413 {
            Outcome::Throttled
        } else {
            Outcome::Invalid
        };
        scope.finish(code, outcome);
        status
    };
    if size > max {
        let status = Status::resource_exhausted(format!(
            "request is {size} bytes, over the {max} byte limit"
        ));
        return Err(fail(&mut scope, status, 413));
    }
    let parsed = (|| {
        let rail = rail_of(request.rail)?;
        let messages = request
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| message_in(i, m))
            .collect::<Result<_, _>>()?;
        let tools = request
            .tools
            .into_iter()
            .enumerate()
            .map(|(i, t)| tool_in(i, t))
            .collect::<Result<_, _>>()?;
        Ok::<_, Status>((
            rail,
            Payload {
                messages,
                tools,
                ..Payload::default()
            },
        ))
    })();
    let (rail, payload) = match parsed {
        Ok(p) => p,
        Err(status) => return Err(fail(&mut scope, status, 400)),
    };
    // The request's own metadata is the caller's claim: namespaced, it can never pose as a
    // key's label.
    scope.add_claimed_metadata(request.metadata.into_iter().collect());
    let eval = scope.check(rail, payload).await;
    let revision = scope.set().revision().clone();
    scope.finish(200, Outcome::Served);
    Ok(response_out(&eval, &revision, request_id))
}

#[tonic::async_trait]
impl PolicyService for Grpc {
    async fn check(
        &self,
        request: Request<proto::CheckRequest>,
    ) -> Result<Response<proto::CheckResponse>, Status> {
        let auth = authorization(&request);
        counted_check(
            &self.app,
            "grpc.Check",
            auth.as_deref(),
            request.into_inner(),
        )
        .await
        .map(Response::new)
    }

    type CheckStreamStream = BoxStream<proto::CheckResponse>;

    async fn check_stream(
        &self,
        request: Request<Streaming<proto::CheckRequest>>,
    ) -> Result<Response<Self::CheckStreamStream>, Status> {
        let app = self.app.clone();
        let auth = authorization(&request);
        // Refuse a stream with a bad key up front, rather than on its first message.
        authenticate(&app, auth.as_deref())?;
        let out = futures_util::StreamExt::then(request.into_inner(), move |item| {
            let (app, auth) = (app.clone(), auth.clone());
            async move {
                match item {
                    Ok(r) => counted_check(&app, "grpc.CheckStream", auth.as_deref(), r).await,
                    Err(status) => Err(status),
                }
            }
        });
        Ok(Response::new(Box::pin(out)))
    }

    type WatchPoliciesStream = BoxStream<proto::PolicyEvent>;

    async fn watch_policies(
        &self,
        request: Request<proto::WatchPoliciesRequest>,
    ) -> Result<Response<Self::WatchPoliciesStream>, Status> {
        // Reload errors name files, lines and the values on them: an operator's business. A
        // caller with an API key learns that a reload was refused, an admin key also why.
        let presented = authorization(&request);
        let admin = is_admin(&self.app, presented.as_deref());
        if !admin {
            authenticate(&self.app, presented.as_deref())?;
        }
        let shown = move |error: Option<String>| match error {
            Some(e) if admin => e,
            Some(_) => WITHHELD.to_string(),
            None => String::new(),
        };
        let reloader = self.app.reloader();
        // Subscribe before reading the current state, so no reload falls in between.
        let events = tokio_stream::wrappers::BroadcastStream::new(reloader.events());
        let current = reloader.current();
        let failure = reloader.last_failure();
        let first = proto::PolicyEvent {
            revision: Some(revision_out(current.revision())),
            ok: failure.is_none(),
            at: failure.as_ref().map(|f| f.at).unwrap_or_default(),
            error: shown(failure.map(|f| f.error)),
        };
        let rest = events.filter_map(move |event| async move {
            // A watcher too slow to keep up skips missed events; the next one carries the
            // current revision anyway.
            event.ok().map(|e| {
                Ok(proto::PolicyEvent {
                    revision: Some(revision_out(&e.revision)),
                    ok: e.ok,
                    error: shown(e.error),
                    at: e.at,
                })
            })
        });
        Ok(Response::new(Box::pin(
            futures_util::stream::once(async move { Ok(first) }).chain(rest),
        )))
    }
}

/// What a `WatchPolicies` caller without an admin key reads for a refused reload's error.
const WITHHELD: &str =
    "the reload was refused; its error is shown to admin keys ([admin] keys_sha256) and on GET /v1/policies";

/// Whether `authorization` carries one of the `[admin]` keys.
fn is_admin(app: &App, authorization: Option<&str>) -> bool {
    let set = app.policies();
    let keys = &set.config().admin.keys;
    !keys.is_empty()
        && crate::auth::bearer(authorization).is_ok_and(|t| crate::auth::matches_any(keys, t))
}

/// The HTTP-like status a gRPC outcome is counted under.
fn status_code<T>(result: &Result<T, Status>) -> u16 {
    match result {
        Ok(_) => 200,
        Err(s) if s.code() == tonic::Code::Unauthenticated => 401,
        Err(s) if s.code() == tonic::Code::ResourceExhausted => 429,
        Err(_) => 400,
    }
}

/// Concurrent streams (calls) per gRPC connection.
pub const GRPC_MAX_STREAMS: u32 = 128;
/// Largest header block a gRPC call may send.
pub const GRPC_MAX_HEADER_BYTES: u32 = 16 << 10;

/// Serve gRPC on `listener` until `shutdown` resolves.
pub async fn serve(
    app: Arc<App>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<PolicyServiceServer<Grpc>>().await;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| e.to_string())?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(|e| e.to_string())?;
    tonic::transport::Server::builder()
        // HTTP/2 limits: streams per connection, a peer that stops answering pings, the
        // rapid-reset flood (CVE-2023-44487), header blocks, and a deadline per call.
        .max_concurrent_streams(GRPC_MAX_STREAMS)
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(std::time::Duration::from_secs(10)))
        .http2_max_pending_accept_reset_streams(Some(20))
        .http2_max_header_list_size(GRPC_MAX_HEADER_BYTES)
        .timeout(std::time::Duration::from_secs(60))
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(PolicyServiceServer::new(Grpc { app }))
        .serve_with_incoming_shutdown(
            // No Nagle: small responses must not wait for the peer's delayed ACK (measured: 44 ms
            // per call without this).
            tokio_stream::wrappers::TcpListenerStream::new(listener).map(|conn| {
                if let Ok(conn) = &conn {
                    let _ = conn.set_nodelay(true);
                }
                conn
            }),
            shutdown,
        )
        .await
        .map_err(|e| e.to_string())
}
