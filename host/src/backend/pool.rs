//! Connections to an `http://` backend: one pool per data-plane worker of hyper's own HTTP/1
//! connections, each driven by a task on the worker that opened it.
//!
//! hyper-util's pooled client did the same job with machinery this proxy does not need on its
//! hot path (a pool key hashed several times per call, waiters, a task spawned per response to
//! hand the connection back once idle): about 10k instructions per backend call. Here a call
//! takes the most recently used connection that is ready, or opens one. Connections the backend
//! closed, or unused for a minute, are dropped at the next call. `https://` backends keep
//! hyper-util's client (TLS).

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, HOST};
use hyper::{Request, Response, Uri};
use hyper_util::rt::TokioIo;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// An idle connection is closed after this long unused (hyper-util's setting here was the same).
const IDLE: Duration = Duration::from_secs(60);

/// A connection and when it last took a request.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    used: Instant,
}

/// One worker's connections to one backend.
pub(super) struct Pool {
    /// `host:port`, to connect to.
    address: String,
    /// The `Host` header: the URL's authority (as hyper-util wrote it).
    host: HeaderValue,
    connect_timeout: Duration,
    /// Oldest first; a connection in use stays listed (its sender is busy until its response
    /// has been read).
    conns: Mutex<Vec<Conn>>,
}

impl Pool {
    /// A pool for the backend at `url` (an `http://` URL with a host).
    pub(super) fn new(url: &Uri, connect_timeout: Duration) -> Result<Pool, String> {
        let authority = url
            .authority()
            .ok_or_else(|| format!("backend URL '{url}' has no host"))?;
        let port = authority.port_u16().unwrap_or(80);
        // The host, and the port unless it is the default (as hyper-util wrote it).
        let host = match port {
            80 => authority.host().to_string(),
            _ => format!("{}:{port}", authority.host()),
        };
        Ok(Pool {
            address: format!("{}:{port}", authority.host()),
            host: HeaderValue::from_str(&host)
                .map_err(|_| format!("backend URL '{url}': its host is not a valid header"))?,
            connect_timeout,
            conns: Mutex::new(Vec::new()),
        })
    }

    /// Send `request` (its URI absolute, as built for the backend) on a ready connection or a
    /// new one. A request a reused connection could not take (it closed meanwhile) is sent
    /// again on a new connection, as hyper-util's client did.
    pub(super) async fn send(
        &self,
        mut request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, String> {
        let origin = request
            .uri()
            .path_and_query()
            .map(|p| Uri::from(p.clone()))
            .unwrap_or_else(|| Uri::from_static("/"));
        *request.uri_mut() = origin;
        request
            .headers_mut()
            .entry(HOST)
            .or_insert_with(|| self.host.clone());
        if let Some(mut sender) = self.checkout() {
            match sender.try_send_request(request).await {
                Ok(response) => {
                    self.put(sender);
                    return Ok(response);
                }
                Err(mut e) => match e.take_message() {
                    // Never written: the connection was gone. A new one gets it.
                    Some(again) => request = again,
                    None => return Err(super::error_chain(&e.into_error())),
                },
            }
        }
        let mut sender = self.connect().await?;
        match sender.send_request(request).await {
            Ok(response) => {
                self.put(sender);
                Ok(response)
            }
            Err(e) => Err(super::error_chain(&e)),
        }
    }

    /// The most recently used connection that can take a request now; connections that closed
    /// or sat idle past [`IDLE`] are dropped on the way.
    fn checkout(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        conns.retain(|c| !c.sender.is_closed() && now.duration_since(c.used) < IDLE);
        let i = conns.iter().rposition(|c| c.sender.is_ready())?;
        Some(conns.remove(i).sender)
    }

    /// Lists a connection again once it has taken a request (busy until its response is read).
    fn put(&self, sender: SendRequest<Full<Bytes>>) {
        let conn = Conn {
            sender,
            used: Instant::now(),
        };
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(conn);
    }

    /// A new connection, driven by a task on this worker.
    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, String> {
        let stream = tokio::time::timeout(
            self.connect_timeout,
            tokio::net::TcpStream::connect(&self.address),
        )
        .await
        .map_err(|_| format!("connect to {}: timed out", self.address))?
        .map_err(|e| format!("connect to {}: {e}", self.address))?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| super::error_chain(&e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "backend connection ended");
            }
        });
        Ok(sender)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::sync::Arc;

    /// A backend that answers one request per connection, keep-alive by its headers, then
    /// closes the connection a moment later; it counts the connections.
    fn one_per_connection() -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = count.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 2 {
                    line.clear();
                }
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                // After the client has read the answer, as an idle connection is closed.
                std::thread::sleep(Duration::from_millis(10));
                let _ = conn.shutdown(std::net::Shutdown::Both);
            }
        });
        (addr, count)
    }

    fn get(addr: std::net::SocketAddr) -> Request<Full<Bytes>> {
        Request::get(format!("http://{addr}/v1/models"))
            .body(Full::new(Bytes::new()))
            .unwrap()
    }

    /// A connection the backend closed after answering is not used again: the next request
    /// goes on a new one. (A request written to a connection that closes before answering is
    /// not sent again: a POST may have been acted on. hyper-util's client did not either.)
    #[tokio::test(flavor = "current_thread")]
    async fn a_connection_the_backend_closed_is_not_used_again() {
        let (addr, count) = one_per_connection();
        let pool = Pool::new(
            &format!("http://{addr}/v1").parse().unwrap(),
            Duration::from_secs(5),
        )
        .unwrap();
        for i in 0..5 {
            let response = pool.send(get(addr)).await.expect("answered");
            assert_eq!(response.status(), 200);
            let body = http_body_util::BodyExt::collect(response.into_body()).await;
            assert_eq!(body.unwrap().to_bytes(), "ok", "request {i}");
            tokio::time::sleep(Duration::from_millis(30)).await;
            assert!(
                pool.checkout().is_none(),
                "request {i}: its connection closed"
            );
        }
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 5);
    }
}
