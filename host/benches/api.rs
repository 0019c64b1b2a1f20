//! The check API over HTTP (`POST /v1/check`) vs gRPC (`PolicyService.Check`): the same 2 KB
//! payload, the same daemon, the same run. Latency percentiles and throughput at concurrency 1
//! and 16 (closed loop, keep-alive connections).
//!
//! Run: `cargo bench --bench api` (spawns the release `railyard` binary on loopback).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use railyard::server::grpc::proto;
use serde_json::json;
use std::io::BufRead;
use std::time::{Duration, Instant};

const SECONDS: u64 = 5;

fn conversation() -> serde_json::Value {
    let s = "The quarterly report is attached; please review the figures before Friday. ";
    let mut messages = vec![json!({"role": "system", "content": "You are a helpful assistant."})];
    for i in 0..7 {
        let mut t = s.repeat(3);
        if i == 6 {
            t.push_str("Reach me at jane.doe@example.com if unclear.");
        }
        messages.push(json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": t}));
    }
    json!({"rail": "input", "messages": messages})
}

fn summary(name: &str, conc: usize, mut lat: Vec<Duration>, elapsed: Duration) {
    lat.sort();
    let p =
        |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)].as_secs_f64() * 1000.0;
    println!(
        "{name:<6} c={conc:<3} p50 {:.3} ms  p99 {:.3} ms  {:.0} req/s  ({} requests)",
        p(0.50),
        p(0.99),
        lat.len() as f64 / elapsed.as_secs_f64(),
        lat.len()
    );
}

async fn http_load(addr: String, body: Bytes, conc: usize) {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(SECONDS);
    let tasks: Vec<_> = (0..conc)
        .map(|_| {
            let (client, body, url) = (
                client.clone(),
                body.clone(),
                format!("http://{addr}/v1/check"),
            );
            tokio::spawn(async move {
                let mut lat = Vec::new();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let req = hyper::Request::post(&url)
                        .header("content-type", "application/json")
                        .header("authorization", "Bearer demo-key")
                        .body(Full::new(body.clone()))
                        .unwrap();
                    let res = client.request(req).await.unwrap();
                    assert!(res.status().is_success());
                    res.into_body().collect().await.unwrap();
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    summary("http", conc, lat, started.elapsed());
}

async fn grpc_load(addr: String, request: proto::CheckRequest, conc: usize) {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(SECONDS);
    let tasks: Vec<_> = (0..conc)
        .map(|_| {
            let mut client =
                proto::policy_service_client::PolicyServiceClient::new(channel.clone());
            let request = request.clone();
            tokio::spawn(async move {
                let mut lat = Vec::new();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let mut call = tonic::Request::new(request.clone());
                    call.metadata_mut()
                        .insert("authorization", "Bearer demo-key".parse().unwrap());
                    let r = client.check(call).await.unwrap().into_inner();
                    assert_eq!(r.verdict(), proto::Verdict::Modify);
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    summary("grpc", conc, lat, started.elapsed());
}

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no filters.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
            "--no-watch",
        ])
        .arg("--config")
        .arg(root.join("policies/railyard.toml"))
        .args(["--backend", "http://127.0.0.1:9/v1"])
        .env("RAILYARD_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (mut http, mut grpc) = (String::new(), String::new());
    for _ in 0..2 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        if let Some(a) = line.trim().strip_prefix("railyard grpc listening on ") {
            grpc = a.to_string();
        } else if let Some(a) = line.trim().strip_prefix("railyard listening on http://") {
            http = a.to_string();
        }
    }
    let body = conversation();
    let request = proto::CheckRequest {
        rail: proto::Rail::Input as i32,
        messages: body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| proto::Message {
                role: m["role"].as_str().unwrap().into(),
                content: m["content"].as_str().map(str::to_string),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let bytes = Bytes::from(body.to_string());
    println!(
        "payload: {} bytes of JSON; {SECONDS} s per run; {} cores",
        bytes.len(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for conc in [1, 16] {
        rt.block_on(http_load(http.clone(), bytes.clone(), conc));
        rt.block_on(grpc_load(grpc.clone(), request.clone(), conc));
    }
    let _ = child.kill();
    let _ = child.wait();
}
