//! The client listener: HTTP/1.1 connections with the limits a daemon on a shared network needs.
//! A client that stalls before its request head is complete (slowloris), or keeps a connection
//! idle, is cut off after `header_read_timeout`; connections beyond `max_connections` get a 503
//! and are closed at once, so file descriptors cannot be exhausted. On shutdown the listener
//! stops accepting, idle connections close, and requests in flight finish.
//!
//! [`serve_workers`] is the same listener for the data plane: it hands each accepted connection
//! to the least busy of the worker threads (`crate::shard`), which serves it to the end.

use axum::http::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
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

/// What a connection is served with: the data plane's [`Front`](super::Front), or a router
/// (`hyper_util::service::TowerToHyperService`).
pub trait Service:
    hyper::service::Service<
        Request<Incoming>,
        Response = Response,
        Error = Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> Service for S where
    S: hyper::service::Service<
            Request<Incoming>,
            Response = Response,
            Error = Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// The answer to a connection over the cap, written before it is closed.
const OVER_CAPACITY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\nContent-Length: 96\r\nConnection: close\r\n\r\n{\"error\":{\"message\":\"too many open connections\",\"type\":\"server_error\",\"code\":\"connection_limit\"}}";

/// Serve `service` on `listener` until `shutdown` completes, then drain: stop accepting, close
/// idle connections, let requests in flight finish within the drain timeout.
pub async fn serve(
    listener: TcpListener,
    service: impl Service,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let (stop, stopped) = watch::channel(false);
    let mut conns = JoinSet::new();
    accept(&listener, limits, shutdown, |stream, slot| {
        while conns.try_join_next().is_some() {}
        conns.spawn(connection(
            stream,
            Held {
                _slot: slot,
                load: None,
            },
            service.clone(),
            limits,
            stopped.clone(),
        ));
    })
    .await;
    drain(stop, conns, limits).await;
    Ok(())
}

/// [`serve`] on `workers` threads, each with its own single-threaded runtime: a connection is
/// handed to the worker serving the fewest, and stays there. Returns once every worker has
/// drained.
pub async fn serve_workers(
    listener: TcpListener,
    service: impl Service,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
    workers: usize,
) -> std::io::Result<()> {
    crate::shard::register(tokio::runtime::Handle::current());
    let mut queues = Vec::with_capacity(workers);
    let mut done = Vec::with_capacity(workers);
    for index in 1..=workers {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (queue, incoming) = mpsc::unbounded_channel::<(std::net::TcpStream, Held)>();
        let (finished, finish) = oneshot::channel::<()>();
        let service = service.clone();
        std::thread::Builder::new()
            .name(format!("railyard-worker-{index}"))
            .spawn(move || {
                crate::shard::enter(index, runtime.handle().clone());
                crate::util::deadline::arm_at_most(limits.header_read_timeout);
                runtime.block_on(worker(incoming, service, limits));
                // Tasks left (a relay whose client is gone) end with the runtime.
                drop(runtime);
                let _ = finished.send(());
            })?;
        queues.push((queue, Arc::new(AtomicUsize::new(0))));
        done.push(finish);
    }
    accept(&listener, limits, shutdown, |stream, slot| {
        let Some((queue, load)) = queues.iter().min_by_key(|(_, l)| l.load(Ordering::Relaxed))
        else {
            return;
        };
        let Ok(stream) = stream.into_std() else {
            return;
        };
        load.fetch_add(1, Ordering::Relaxed);
        let held = Held {
            _slot: slot,
            load: Some(load.clone()),
        };
        let _ = queue.send((stream, held));
    })
    .await;
    // Closing the queues tells the workers to drain.
    drop(queues);
    for finish in done {
        let _ = finish.await;
    }
    Ok(())
}

/// One worker: serve the connections it is handed until the queue closes, then drain.
async fn worker(
    mut incoming: mpsc::UnboundedReceiver<(std::net::TcpStream, Held)>,
    service: impl Service,
    limits: ConnLimits,
) {
    let (stop, stopped) = watch::channel(false);
    let mut conns = JoinSet::new();
    while let Some((stream, held)) = incoming.recv().await {
        while conns.try_join_next().is_some() {}
        let Ok(stream) = TcpStream::from_std(stream) else {
            continue;
        };
        conns.spawn(connection(
            stream,
            held,
            service.clone(),
            limits,
            stopped.clone(),
        ));
    }
    drain(stop, conns, limits).await;
}

/// Accept until `shutdown`; a connection within the cap goes to `serve` with its slot, one past
/// it gets the 503 and is closed.
async fn accept(
    listener: &TcpListener,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
    mut serve: impl FnMut(TcpStream, OwnedSemaphorePermit),
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
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
        serve(stream, slot);
    }
}

/// A connection's place under the cap, and on its worker's count.
struct Held {
    _slot: OwnedSemaphorePermit,
    load: Option<Arc<AtomicUsize>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(load) = &self.load {
            load.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Serve one connection to its end, or, once `stopped` says so, until its request in flight is
/// answered.
async fn connection(
    stream: TcpStream,
    held: Held,
    service: impl Service,
    limits: ConnLimits,
    mut stopped: watch::Receiver<bool>,
) {
    let _held = held;
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
}

/// Stop every connection (idle ones close, requests in flight finish) within the drain timeout.
async fn drain(stop: watch::Sender<bool>, mut conns: JoinSet<()>, limits: ConnLimits) {
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
}
