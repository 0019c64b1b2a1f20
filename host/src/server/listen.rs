//! The client listener: HTTP/1.1 connections with the limits a daemon on a shared network needs.
//! A client that stalls before its request head is complete (slowloris), or keeps a connection
//! idle, is cut off after `header_read_timeout`; connections beyond `max_connections` get a 503
//! and are closed at once, so file descriptors cannot be exhausted. On shutdown the listener
//! stops accepting, idle connections close, and requests in flight finish.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

/// What the listener allows each client.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Open connections at most.
    pub max_connections: usize,
    /// Time to send a whole request head, including the wait for the next one on a kept-alive
    /// connection.
    pub header_read_timeout: Duration,
    /// How long requests in flight may take to finish after shutdown begins.
    pub drain_timeout: Duration,
}

/// The answer to a connection over the cap, written before it is closed.
const OVER_CAPACITY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\nContent-Length: 96\r\nConnection: close\r\n\r\n{\"error\":{\"message\":\"too many open connections\",\"type\":\"server_error\",\"code\":\"connection_limit\"}}";

/// Serve `router` on `listener` until `shutdown` completes, then drain: stop accepting, close
/// idle connections, let requests in flight finish within the drain timeout.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (stop, stopped) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        while conns.try_join_next().is_some() {}
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors or the like: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            let _ = stream.try_write(OVER_CAPACITY);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let mut stopped = stopped.clone();
        conns.spawn(async move {
            let _slot = slot;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stopped.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    let _ = stop.send(true);
    let drained = tokio::time::timeout(limits.drain_timeout, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = conns.len(),
            "shutdown: requests still in flight after {} ms are cut",
            limits.drain_timeout.as_millis()
        );
        conns.abort_all();
    }
    Ok(())
}
