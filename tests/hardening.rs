//! The client listener under hostile or careless clients, with raw sockets: stalled request
//! heads and idle connections are cut off, connections past the cap are refused with a 503, and
//! SIGTERM drains requests in flight before the process exits 0.

use crate::http::*;
use crate::support::*;
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn limited(extra: &str) -> TempConfig {
    write_config(&format!("[server]\n{extra}\n"))
}

/// Read until the peer closes (or `within` passes); what was read, and whether it closed.
fn read_to_close(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&got).into(), true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (String::from_utf8_lossy(&got).into(), true)
            }
            Err(_) => return (String::from_utf8_lossy(&got).into(), false),
        }
    }
}

/// A chat completion sent from another thread (it is in flight while the test signals).
fn in_background(addr: SocketAddr, body: serde_json::Value) -> std::thread::JoinHandle<Reply> {
    std::thread::spawn(move || {
        request(
            addr,
            "POST",
            "/v1/chat/completions",
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        )
    })
}

fn healthy(addr: SocketAddr) -> bool {
    request(addr, "GET", "/healthz", &[], b"").status == 200
}

#[test]
fn stalled_heads_and_idle_connections_are_cut_off() {
    let backend = MockBackend::start(Script::Json(200, json!({})));
    let cfg = limited("header_read_timeout_ms = 400");
    let daemon = Daemon::start(&cfg.path, &backend.url());

    // Half a request head, then nothing (slowloris).
    let mut stalled = TcpStream::connect(daemon.addr).unwrap();
    stalled
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: app")
        .unwrap();
    // A connection that never sends a byte.
    let mut idle = TcpStream::connect(daemon.addr).unwrap();
    let started = Instant::now();
    let (_, closed) = read_to_close(&mut stalled, Duration::from_secs(5));
    assert!(closed, "a stalled head is cut off");
    let (_, closed) = read_to_close(&mut idle, Duration::from_secs(5));
    assert!(closed, "an idle connection is cut off");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(healthy(daemon.addr), "the daemon goes on serving");
}

#[test]
fn connections_past_the_cap_get_a_503_and_are_closed() {
    let backend = MockBackend::start(Script::Json(200, json!({})));
    let cfg = limited("max_connections = 3\nheader_read_timeout_ms = 2000");
    let daemon = Daemon::start(&cfg.path, &backend.url());
    eventually("the health check's connection is released", || {
        TcpStream::connect(daemon.addr).is_ok()
    });
    std::thread::sleep(Duration::from_millis(200));
    let held: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(daemon.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut extra = TcpStream::connect(daemon.addr).unwrap();
    let (answer, closed) = read_to_close(&mut extra, Duration::from_secs(2));
    assert!(closed, "refused at once");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("Retry-After: 1"), "{answer}");
    assert!(answer.contains("connection_limit"), "{answer}");
    // Once the held connections go, new ones are served again.
    drop(held);
    eventually("served again below the cap", || healthy(daemon.addr));
}

#[test]
fn sigterm_drains_requests_in_flight_then_exits_0() {
    // A streamed reply that takes about a second: it is in flight when SIGTERM arrives.
    let events: Vec<String> = (0..10)
        .map(|i| text_chunk(&format!("part {i} ")))
        .chain([finish_chunk("stop"), "[DONE]".to_string()])
        .collect();
    let backend = MockBackend::start(Script::Sse(events, Duration::from_millis(100)));
    let cfg = limited("shutdown_delay_ms = 400");
    let mut daemon = Daemon::start(&cfg.path, &backend.url());
    let addr = daemon.addr;
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let in_flight = in_background(addr, body);
    std::thread::sleep(Duration::from_millis(300));
    daemon.signal("TERM");
    // Not-ready first, while the listener still answers (a load balancer stops sending).
    std::thread::sleep(Duration::from_millis(100));
    let ready = request(addr, "GET", "/readyz", &[], b"");
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(ready.body.contains("draining"), "{}", ready.body);
    let reply = in_flight.join().unwrap();
    assert_eq!(reply.status, 200);
    assert!(
        reply.body.contains("part 9"),
        "the stream finished: {}",
        reply.body
    );
    assert!(reply.body.contains("[DONE]"), "{}", reply.body);
    let exit = daemon
        .exited(Duration::from_secs(10))
        .expect("the daemon exits");
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn requests_still_in_flight_at_the_drain_deadline_are_cut_and_the_daemon_exits() {
    let backend = MockBackend::start(Script::Hang);
    let cfg = limited("shutdown_timeout_ms = 300\n[backend]\ntimeout_ms = 60000");
    let mut daemon = Daemon::start(&cfg.path, &backend.url());
    let addr = daemon.addr;
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let stuck = in_background(addr, body);
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    daemon.signal("TERM");
    let exit = daemon
        .exited(Duration::from_secs(10))
        .expect("the daemon exits");
    assert!(exit.success(), "{exit:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let _ = stuck.join();
}

/// The gRPC listener (HTTP/2) announces its stream limit in its first SETTINGS frame, read with a
/// raw socket speaking the HTTP/2 preface.
#[test]
fn grpc_connections_carry_an_http2_stream_limit() {
    let backend = MockBackend::start(Script::Hang);
    let cfg = limited("grpc_listen = \"127.0.0.1:0\"");
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let mut s = TcpStream::connect(daemon.grpc.expect("gRPC listening")).unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).unwrap(); // an empty SETTINGS frame
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut head = [0u8; 9];
    s.read_exact(&mut head).unwrap();
    assert_eq!(head[3], 4, "the server's first frame is SETTINGS");
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    let settings: Vec<(u16, u32)> = body
        .chunks(6)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
            )
        })
        .collect();
    // 0x3: SETTINGS_MAX_CONCURRENT_STREAMS; 0x6: SETTINGS_MAX_HEADER_LIST_SIZE.
    assert!(
        settings.contains(&(0x3, railyard::server::grpc::GRPC_MAX_STREAMS)),
        "{settings:?}"
    );
    assert!(
        settings.contains(&(0x6, railyard::server::grpc::GRPC_MAX_HEADER_BYTES)),
        "{settings:?}"
    );
}

/// The admin listener has the main one's limits: a stalled request head is cut off there too.
#[test]
fn the_admin_listener_cuts_stalled_heads_too() {
    let backend = MockBackend::start(Script::Hang);
    let cfg = write_config(
        "[server]\nheader_read_timeout_ms = 300\n\n[admin]\nlisten = \"127.0.0.1:0\"\n",
    );
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let mut s = TcpStream::connect(daemon.admin.expect("admin listening")).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let (_, closed) = read_to_close(&mut s, Duration::from_secs(5));
    assert!(closed, "the stalled admin connection was closed");
}
