//! The floor of the daemon's HTTP stack: a forwarder made of the same parts as its data plane
//! (tokio, hyper's HTTP/1 server and client connections, `TCP_NODELAY`, keep-alive both ways)
//! that judges nothing: no body read, no parse, no record, no metrics. Each client connection
//! gets its own backend connection, as nginx's keep-alive upstream gives it one. `bench/cpu.sh`
//! measures it beside nginx and the daemon with `HOP=1` (BENCHMARKS.md §26): what tokio and hyper
//! cost before Railyard does anything.
//!
//! Usage: cargo run --release --example bare_hop -- LISTEN_ADDR BACKEND_ADDR   (host:port each)

use hyper::body::Incoming;
use hyper::client::conn::http1 as client;
use hyper::server::conn::http1 as server;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(backend)) = (args.next(), args.next()) else {
        eprintln!("usage: bare_hop LISTEN_ADDR BACKEND_ADDR");
        std::process::exit(2);
    };
    let parse = |a: String| -> SocketAddr {
        a.parse().unwrap_or_else(|_| {
            eprintln!("bare_hop: {a:?} is not host:port");
            std::process::exit(2)
        })
    };
    let (listen, backend) = (parse(listen), parse(backend));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(listen).await?;
        loop {
            let (stream, _) = listener.accept().await?;
            tokio::spawn(relay(stream, backend));
        }
    })
}

/// Serves one client connection, sending each request on to the backend as it came.
async fn relay(stream: TcpStream, backend: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let Ok(upstream) = TcpStream::connect(backend).await else {
        return;
    };
    let _ = upstream.set_nodelay(true);
    let Ok((sender, connection)) = client::handshake(TokioIo::new(upstream)).await else {
        return;
    };
    tokio::spawn(connection);
    // HTTP/1 serves one request at a time, so the lock is never contended.
    let sender = Arc::new(Mutex::new(sender));
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let sender = sender.clone();
        async move {
            let mut sender = sender.lock().await;
            sender.ready().await?;
            let response: Response<Incoming> = sender.send_request(request).await?;
            Ok::<_, hyper::Error>(response)
        }
    });
    let _ = server::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}
