//! The gRPC door: a Rust tonic client and a Python grpcio client (stubs generated from the proto
//! by grpcio-tools, plus server reflection through grpcio-reflection) against the real daemon:
//! the same chains as HTTP.

use crate::http::{Daemon, MockBackend, Script};
use crate::support::*;
use railyard::server::grpc::proto;
use railyard::server::grpc::proto::policy_service_client::PolicyServiceClient;
use std::time::Duration;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// Adds `authorization: Bearer KEY` to every call (no header when `None`).
#[derive(Clone)]
pub struct Key(pub Option<String>);

impl tonic::service::Interceptor for Key {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(key) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {key}").parse().unwrap());
        }
        Ok(request)
    }
}

pub type Client = PolicyServiceClient<InterceptedService<Channel, Key>>;

/// A client presenting `key`.
pub async fn client_with(url: String, key: Option<&str>) -> Client {
    let channel = Channel::from_shared(url).unwrap().connect().await.unwrap();
    PolicyServiceClient::with_interceptor(channel, Key(key.map(str::to_string)))
}

/// A client presenting the bundled config's demo key.
async fn client(url: String) -> Client {
    client_with(url, Some(crate::http::DEMO_KEY)).await
}

/// A single-threaded runtime for a test's async client code.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn start(config: &std::path::Path) -> (Daemon, MockBackend) {
    let backend = MockBackend::start(Script::Hang);
    let daemon = Daemon::start_with(
        config,
        &["--backend", &backend.url(), "--grpc-listen", "127.0.0.1:0"],
    );
    (daemon, backend)
}

fn user(text: &str) -> proto::Message {
    proto::Message {
        role: "user".into(),
        content: Some(text.into()),
        ..Default::default()
    }
}

fn call(name: &str, args: &str) -> proto::Message {
    proto::Message {
        role: "assistant".into(),
        tool_calls: vec![proto::ToolCall {
            id: "call_1".into(),
            name: name.into(),
            arguments: args.into(),
        }],
        ..Default::default()
    }
}

#[test]
fn every_verdict_kind_over_grpc() {
    let (daemon, _backend) = start(&root().join("policies/railyard.toml"));
    let url = format!("http://{}", daemon.grpc.expect("gRPC is on"));
    runtime().block_on(async {
        let mut client = client(url.clone()).await;

        let allow = client
            .check(proto::CheckRequest {
                rail: proto::Rail::Input as i32,
                messages: vec![user("hello there")],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(allow.verdict(), proto::Verdict::Allow);
        // llama31-compat only runs for the models it is limited to; no model is named here.
        assert_eq!(allow.decisions.len(), 1);
        assert_eq!(allow.decisions[0].plugin, "pii");
        assert_eq!(allow.revision.as_ref().unwrap().number, 1);
        assert!(!allow.request_id.is_empty());

        let modify = client
            .check(proto::CheckRequest {
                rail: proto::Rail::Input as i32,
                messages: vec![user("mail jane.doe@example.com")],
                request_id: "grpc-test-1".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(modify.verdict(), proto::Verdict::Modify);
        assert_eq!(
            modify.messages[0].content.as_deref().map(typed).as_deref(),
            Some("mail [EMAIL]")
        );
        assert_eq!(modify.request_id, "grpc-test-1");

        let weather = proto::Tool {
            r#type: "function".into(),
            name: Some("get_weather".into()),
            parameters_json: Some(
                r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
                    .into(),
            ),
            ..Default::default()
        };
        let block = client
            .check(proto::CheckRequest {
                rail: proto::Rail::ToolCall as i32,
                messages: vec![user("weather"), call("get_weather", "{}")],
                tools: vec![weather],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            block.verdict(),
            proto::Verdict::Block,
            "a block is a response, not an error"
        );
        let blocked = block.blocked.unwrap();
        assert_eq!(blocked.plugin, "schema-validator");
        assert!(
            blocked.reason.contains("'city' is a required property"),
            "{}",
            blocked.reason
        );

        // The tools rail (#51: HTTP's /v1/check had it, gRPC did not): the support tenant's
        // allowlist hides what it may not call, pii rewrites a description.
        let support = client_with(url.clone(), Some("demo-support-key")).await;
        let tool = |name: &str, description: &str| proto::Tool {
            r#type: "function".into(),
            name: Some(name.into()),
            description: Some(description.into()),
            parameters_json: Some(r#"{"type":"object"}"#.into()),
            ..Default::default()
        };
        let offered = support
            .clone()
            .check(proto::CheckRequest {
                rail: proto::Rail::Tools as i32,
                tools: vec![
                    tool(
                        "lookup_order",
                        "Look up an order; escalate to ops@example.com",
                    ),
                    tool("delete_database", "Drop everything"),
                ],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(offered.verdict(), proto::Verdict::Modify, "{offered:?}");
        assert_eq!(offered.tools.len(), 2, "{offered:?}");
        assert_eq!(offered.tools[0].hidden_by, None);
        assert_eq!(
            offered.tools[0]
                .description
                .as_deref()
                .map(typed)
                .as_deref(),
            Some("Look up an order; escalate to [EMAIL]")
        );
        assert_eq!(
            offered.tools[1].hidden_by.as_deref(),
            Some("allowlist-support")
        );

        let bad = client
            .check(proto::CheckRequest {
                rail: proto::Rail::Unspecified as i32,
                messages: vec![user("x")],
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(bad.code(), tonic::Code::InvalidArgument);
        assert!(bad.message().contains("rail is required"));

        let bad = client
            .check(proto::CheckRequest {
                rail: proto::Rail::Input as i32,
                messages: vec![proto::Message {
                    role: "user".into(),
                    content_json: Some("[not json".into()),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(bad.code(), tonic::Code::InvalidArgument);
        assert!(
            bad.message().contains("messages[0].content_json"),
            "{}",
            bad.message()
        );

        // Many checks on one stream.
        let requests: Vec<_> = ["a@b.co", "nothing", "c@d.org"]
            .iter()
            .map(|t| proto::CheckRequest {
                rail: proto::Rail::Input as i32,
                messages: vec![user(&format!("mail {t}"))],
                ..Default::default()
            })
            .collect();
        let mut answers = client
            .check_stream(tokio_stream::iter(requests))
            .await
            .unwrap()
            .into_inner();
        let mut verdicts = Vec::new();
        while let Some(a) = answers.message().await.unwrap() {
            verdicts.push(a.verdict());
        }
        assert_eq!(
            verdicts,
            [
                proto::Verdict::Modify,
                proto::Verdict::Allow,
                proto::Verdict::Modify
            ]
        );
    });
}

/// The next event of a `WatchPolicies` stream, within 20 s.
async fn next(events: &mut tonic::Streaming<proto::PolicyEvent>) -> proto::PolicyEvent {
    tokio::time::timeout(Duration::from_secs(20), events.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

#[test]
fn reject_and_reloads_are_seen_over_grpc() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("railyard.toml");
    // Open to callers, with an admin key: reload errors (paths, lines, the values on them) are
    // an operator's business, shown to the admin key alone.
    let entry = |mode: &str| {
        format!(
            "[auth]\nopen = true\n\n[admin]\nkeys_sha256 = [\"{}\"]\n\n{}",
            hash(crate::http::ADMIN_KEY),
            scripted(
                "gate",
                "[\"tool_call\"]",
                "",
                &format!("{{ mode = \"{mode}\", tool = \"rm\", text = \"no rm\" }}"),
            )
        )
    };
    std::fs::write(&config, entry("reject-tool")).unwrap();
    let (daemon, _backend) = start(&config);
    let url = format!("http://{}", daemon.grpc.unwrap());
    runtime().block_on(async {
        let mut client = client(url.clone()).await;
        let reject = client
            .check(proto::CheckRequest {
                rail: proto::Rail::ToolCall as i32,
                messages: vec![call("rm", "{}")],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(reject.verdict(), proto::Verdict::Reject);
        assert!(reject.messages[0].tool_calls.is_empty());
        assert_eq!(reject.rejections[0].tool_call_id, "call_1");
        assert_eq!(reject.rejections[0].reason, "no rm (rm)");

        let mut events = client
            .watch_policies(proto::WatchPoliciesRequest {})
            .await
            .unwrap()
            .into_inner();
        let mut admin = client_with(url.clone(), Some(crate::http::ADMIN_KEY)).await;
        let mut admin_events = admin
            .watch_policies(proto::WatchPoliciesRequest {})
            .await
            .unwrap()
            .into_inner();
        let first = events.message().await.unwrap().unwrap();
        assert!(first.ok);
        assert_eq!(first.revision.unwrap().number, 1);
        assert!(admin_events.message().await.unwrap().unwrap().ok);

        std::fs::write(&config, "[[plugins]\nbroken").unwrap();
        let refused = next(&mut events).await;
        assert!(!refused.ok);
        assert!(
            !refused.error.contains("railyard.toml") && refused.error.contains("admin"),
            "{}",
            refused.error
        );
        assert_eq!(
            refused.revision.unwrap().number,
            1,
            "the old set keeps serving"
        );
        let told = next(&mut admin_events).await;
        assert!(!told.ok);
        assert!(told.error.contains("railyard.toml:1"), "{}", told.error);

        std::fs::write(&config, entry("block")).unwrap();
        let loaded = tokio::time::timeout(Duration::from_secs(20), events.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(loaded.ok, "{}", loaded.error);
        assert_eq!(loaded.revision.unwrap().number, 2);
    });
}

#[test]
fn health_service_reports_serving() {
    let (daemon, _backend) = start(&root().join("policies/railyard.toml"));
    let url = format!("http://{}", daemon.grpc.unwrap());
    runtime().block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(url)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: "railyard.v1.PolicyService".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            status.status(),
            tonic_health::pb::health_check_response::ServingStatus::Serving
        );
    });
}

#[test]
fn python_grpcio_client_calls_check() {
    let (daemon, _backend) = start(&root().join("policies/railyard.toml"));
    let out = std::process::Command::new(python())
        .arg(root().join("tests/clients/grpc_client.py"))
        .arg(root().join("proto"))
        .arg(daemon.grpc.unwrap().to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: serde_json::Value = typed_json(&serde_json::from_slice(&out.stdout).unwrap());
    assert_eq!(seen["verdict"], "VERDICT_MODIFY");
    assert_eq!(seen["content"], "call me on [PHONE]");
    assert_eq!(seen["plugin"], "pii");
    assert_eq!(seen["blocked_verdict"], "VERDICT_BLOCK");
    assert_eq!(seen["invalid_code"], "INVALID_ARGUMENT");
    assert_eq!(seen["no_key_code"], "UNAUTHENTICATED");
    let services = seen["services"].as_array().unwrap();
    assert!(
        services.contains(&"railyard.v1.PolicyService".into()),
        "{services:?}"
    );
    assert!(
        services.contains(&"grpc.health.v1.Health".into()),
        "{services:?}"
    );
    assert_eq!(seen["check_input"], "railyard/v1/policy.proto");

    // The README's command-line example (#51: grpcurl is not in Debian): scripts/grpc-check.py.
    let example = |key: &str, rail: &str, text: &str| {
        std::process::Command::new(python())
            .arg(root().join("scripts/grpc-check.py"))
            .args([&daemon.grpc.unwrap().to_string(), key, rail, text])
            .output()
            .unwrap()
    };
    let out = example("demo-key", "input", "mail me at jane.doe@example.com");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value = typed_json(&serde_json::from_slice(&out.stdout).unwrap());
    assert_eq!(answer["verdict"], "VERDICT_MODIFY", "{answer}");
    assert_eq!(answer["messages"][0]["content"], "mail me at [EMAIL]");
    let out = example("demo-key", "tools", "Escalate to ops@example.com");
    let answer: serde_json::Value = typed_json(&serde_json::from_slice(&out.stdout).unwrap());
    assert_eq!(
        answer["tools"][0]["description"], "Escalate to [EMAIL]",
        "{answer}"
    );
    let out = example("wrong-key", "input", "hello");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("UNAUTHENTICATED"));
}
