//! `railyard serve`: load everything, bind, serve until SIGINT/SIGTERM.
//!
//! The config and every plugin are loaded and checked before any port is bound, so a bad config
//! never produces a half-working daemon.

use crate::backend::Backend;
use crate::config::{Config, ConfigError};
use crate::engine::{ComponentCache, Engine};
use crate::policy::PolicySet;
use crate::server::{router, App};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// What `railyard serve` was asked to do.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Config file.
    pub config: PathBuf,
    /// Listen address override.
    pub listen: Option<String>,
    /// Backend URL override.
    pub backend: Option<String>,
    /// Start the built-in demo model and use it as the backend.
    pub demo_backend: bool,
}

/// Why the daemon could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    /// The config (or a plugin it names) is invalid.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The backend settings are unusable.
    #[error("{0}")]
    Backend(String),
    /// The wasm engine could not start.
    #[error("cannot start the wasm engine: {0}")]
    Engine(String),
    /// Binding or serving failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Run the daemon.
pub async fn serve(options: ServeOptions) -> Result<(), DaemonError> {
    let mut config = Config::load(&options.config)?;
    if let Some(listen) = &options.listen {
        config.server.listen = listen.clone();
    }
    if let Some(url) = &options.backend {
        config.backend.url = url.trim_end_matches('/').to_string();
    }
    if options.demo_backend {
        config.backend.url = crate::demo::start().await?;
        tracing::info!(url = %config.backend.url, "demo backend started");
    }
    let backend = Backend::new(&config.backend).map_err(DaemonError::Backend)?;
    let engine = Engine::new(ComponentCache::new(config.cache_dir.clone()))
        .map_err(|e| DaemonError::Engine(e.to_string()))?;
    let listen = config.server.listen.clone();
    let started = std::time::Instant::now();
    let set = tokio::task::block_in_place(|| PolicySet::build(config, &engine))?;
    tracing::info!(
        plugins = set.plugins().len(),
        ms = started.elapsed().as_millis() as u64,
        "policy set loaded"
    );
    let (_policies_tx, policies_rx) = tokio::sync::watch::channel(Arc::new(set));
    let app = Arc::new(App::new(policies_rx, backend));

    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {listen}: {e}")))?;
    let addr = listener.local_addr()?;
    // The first line on stdout says where we listen (tests and scripts read it with port 0).
    println!("railyard listening on http://{addr}");
    let _ = std::io::stdout().flush();
    tracing::info!(%addr, "listening");
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown())
        .await?;
    drop(engine);
    Ok(())
}

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down");
}
