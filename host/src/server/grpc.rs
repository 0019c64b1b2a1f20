//! gRPC: `railyard.v1.PolicyService` (see `proto/railyard/v1/policy.proto`) on its own listen
//! address, sharing the live policy set and the chain code path with the HTTP check API, plus
//! the standard health service and server reflection so generic clients (grpcurl) work without
//! the proto file.
//!
//! Errors map to status codes: a malformed payload is `INVALID_ARGUMENT`; a policy block is a
//! normal response with verdict block, never an error.

use super::App;
use crate::chain::{Decided, Evaluation, Verdict};
use crate::payload::{Content, Message, Payload, Rail, ToolCall, ToolDef};
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

fn invalid(message: String) -> Status {
    Status::invalid_argument(message)
}

fn rail_of(value: i32) -> Result<Rail, Status> {
    match proto::Rail::try_from(value) {
        Ok(proto::Rail::Input) => Ok(Rail::Input),
        Ok(proto::Rail::ToolResult) => Ok(Rail::ToolResult),
        Ok(proto::Rail::ToolCall) => Ok(Rail::ToolCall),
        Ok(proto::Rail::Output) => Ok(Rail::Output),
        _ => Err(invalid(
            "rail is required: RAIL_INPUT, RAIL_TOOL_RESULT, RAIL_TOOL_CALL or RAIL_OUTPUT".into(),
        )),
    }
}

fn message_in(i: usize, m: proto::Message) -> Result<Message, Status> {
    if m.role.is_empty() {
        return Err(invalid(format!("messages[{i}].role is required")));
    }
    let content = match (m.content, m.content_json) {
        (Some(_), Some(_)) => {
            return Err(invalid(format!(
                "messages[{i}]: give content or content_json, not both"
            )))
        }
        (Some(text), None) => Some(Content::Text(text)),
        (None, Some(json)) => Some(Content::Parts(serde_json::from_str(&json).map_err(
            |e| invalid(format!("messages[{i}].content_json is not valid JSON: {e}")),
        )?)),
        (None, None) => None,
    };
    Ok(Message {
        role: m.role,
        content_null: content.is_none(),
        content,
        name: m.name,
        tool_call_id: m.tool_call_id,
        tool_calls_present: !m.tool_calls.is_empty(),
        tool_calls: m
            .tool_calls
            .into_iter()
            .map(|c| ToolCall::function(c.id, c.name, c.arguments))
            .collect(),
        extra: Default::default(),
    })
}

fn tool_in(i: usize, t: proto::Tool) -> Result<ToolDef, Status> {
    if t.r#type.is_empty() {
        return Err(invalid(format!("tools[{i}].type is required")));
    }
    if t.r#type == "function" && t.name.as_deref().unwrap_or("").is_empty() {
        return Err(invalid(format!(
            "tools[{i}].name is required for function tools"
        )));
    }
    let parameters =
        match t.parameters_json {
            None => None,
            Some(json) => Some(serde_json::from_str(&json).map_err(|e| {
                invalid(format!("tools[{i}].parameters_json is not valid JSON: {e}"))
            })?),
        };
    Ok(ToolDef {
        kind: t.r#type,
        name: t.name,
        description: t.description,
        parameters,
    })
}

fn message_out(m: &Message) -> proto::Message {
    let (content, content_json) = match &m.content {
        None => (None, None),
        Some(Content::Text(t)) => (Some(t.clone()), None),
        Some(Content::Parts(p)) => (None, Some(p.to_string())),
    };
    proto::Message {
        role: m.role.clone(),
        content,
        content_json,
        name: m.name.clone(),
        tool_call_id: m.tool_call_id.clone(),
        tool_calls: m
            .tool_calls
            .iter()
            .map(|c| proto::ToolCall {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect(),
    }
}

fn verdict_out(v: Verdict) -> proto::Verdict {
    match v {
        Verdict::Allow => proto::Verdict::Allow,
        Verdict::Modify => proto::Verdict::Modify,
        Verdict::Reject => proto::Verdict::Reject,
        Verdict::Block => proto::Verdict::Block,
    }
}

fn response_out(
    eval: &Evaluation,
    revision: &crate::policy::Revision,
    request_id: String,
) -> proto::CheckResponse {
    proto::CheckResponse {
        verdict: verdict_out(eval.verdict) as i32,
        messages: eval.payload.messages.iter().map(message_out).collect(),
        decisions: eval
            .decisions
            .iter()
            .map(|d| proto::Decision {
                plugin: d.plugin.clone(),
                verdict: d.verdict.as_str().into(),
                reason: d.reason.clone().unwrap_or_default(),
                fault: d.fault.map(|f| f.as_str().into()).unwrap_or_default(),
                on_error: if d.verdict == Decided::Fault {
                    d.on_error.map(|o| o.as_str().into()).unwrap_or_default()
                } else {
                    String::new()
                },
                duration_us: d.duration_us.as_micros() as u64,
            })
            .collect(),
        rejections: eval
            .rejections
            .iter()
            .map(|r| proto::Rejection {
                plugin: r.plugin.clone(),
                message: r.message as u32,
                tool_call_id: r.tool_call_id.clone().unwrap_or_default(),
                tool: r.tool.clone().unwrap_or_default(),
                reason: r.reason.clone(),
            })
            .collect(),
        blocked: eval.blocked.as_ref().map(|b| proto::Blocked {
            plugin: b.plugin.clone(),
            reason: b.reason.clone(),
            fault: b.fault,
        }),
        revision: Some(revision_out(revision)),
        request_id,
    }
}

fn revision_out(r: &crate::policy::Revision) -> proto::Revision {
    proto::Revision {
        number: r.number,
        hash: r.hash.clone(),
    }
}

/// The `authorization` metadata of a call, as text.
fn authorization<T>(request: &Request<T>) -> Option<String> {
    request
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Who presents `authorization` under `set`'s keys, as a gRPC status on failure.
fn caller(
    app: &App,
    set: &crate::policy::PolicySet,
    authorization: Option<&str>,
) -> Result<crate::auth::Caller, Status> {
    app.authenticate(set, authorization)
        .map_err(|e| Status::unauthenticated(e.to_string()))
}

/// One check, counted in the request metrics under `endpoint` and the caller's tenant.
fn counted_check(
    app: &App,
    endpoint: &str,
    authorization: Option<&str>,
    request: proto::CheckRequest,
) -> Result<proto::CheckResponse, Status> {
    let mut tenant = String::new();
    let result = check(app, authorization, request, &mut tenant);
    app.metrics()
        .request(endpoint, &tenant, status_code(&result));
    result
}

/// One check: the same path as `POST /v1/check`. The key is checked against the policy set of
/// this very check, so a key revoked by a reload stops working mid-stream too.
fn check(
    app: &App,
    authorization: Option<&str>,
    request: proto::CheckRequest,
    tenant: &mut String,
) -> Result<proto::CheckResponse, Status> {
    let set = app.policies();
    let caller = caller(app, &set, authorization)?;
    tenant.push_str(caller.tenant_name());
    let _permit = app
        .admit(&set, &caller)
        .map_err(|e| Status::resource_exhausted(e.to_string()))?;
    let size = prost::Message::encoded_len(&request);
    let max = set.max_body_bytes(caller.tenant.as_deref());
    if size > max {
        return Err(Status::resource_exhausted(format!(
            "request is {size} bytes, over the {max} byte limit"
        )));
    }
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
    let request_id = if request.request_id.is_empty() {
        app.new_request_id()
    } else {
        request.request_id.chars().take(128).collect()
    };
    // The key's labels as they are; the request's own metadata is the caller's claim, so it is
    // namespaced and can never pose as a label.
    let mut ctx = super::context(&request_id, &caller);
    let mut claimed: Vec<(String, String)> = request
        .metadata
        .into_iter()
        .map(|(k, v)| (format!("request.{k}"), v))
        .collect();
    claimed.sort();
    ctx.metadata.extend(claimed);
    let eval = app.check(&set, rail, Payload { messages, tools }, &ctx);
    super::log_decisions(&request_id, "grpc", &ctx, set.revision(), &[&eval]);
    Ok(response_out(&eval, set.revision(), request_id))
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
        caller(&app, &app.policies(), auth.as_deref())?;
        let out = request.into_inner().map(move |item| {
            item.and_then(|r| counted_check(&app, "grpc.CheckStream", auth.as_deref(), r))
        });
        Ok(Response::new(Box::pin(out)))
    }

    type WatchPoliciesStream = BoxStream<proto::PolicyEvent>;

    async fn watch_policies(
        &self,
        request: Request<proto::WatchPoliciesRequest>,
    ) -> Result<Response<Self::WatchPoliciesStream>, Status> {
        caller(
            &self.app,
            &self.app.policies(),
            authorization(&request).as_deref(),
        )?;
        let reloader = self.app.reloader();
        // Subscribe before reading the current state, so no reload falls in between.
        let events = tokio_stream::wrappers::BroadcastStream::new(reloader.events());
        let current = reloader.current();
        let failure = reloader.last_failure();
        let first = proto::PolicyEvent {
            revision: Some(revision_out(current.revision())),
            ok: failure.is_none(),
            error: failure
                .as_ref()
                .map(|f| f.error.clone())
                .unwrap_or_default(),
            at: failure.map(|f| f.at).unwrap_or_default(),
        };
        let rest = events.filter_map(|event| async move {
            // A watcher too slow to keep up skips missed events; the next one carries the
            // current revision anyway.
            event.ok().map(|e| {
                Ok(proto::PolicyEvent {
                    revision: Some(revision_out(&e.revision)),
                    ok: e.ok,
                    error: e.error.unwrap_or_default(),
                    at: e.at,
                })
            })
        });
        Ok(Response::new(Box::pin(
            futures_util::stream::once(async move { Ok(first) }).chain(rest),
        )))
    }
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
