//! `railyard serve`: load everything, bind, serve until SIGINT/SIGTERM.
//!
//! The config and every plugin are loaded and checked before any port is bound, so a bad config
//! never produces a half-working daemon.

use crate::backend::Backend;
use crate::config::{Config, ConfigError};
use crate::engine::{ComponentCache, Engine};
use crate::metrics::Metrics;
use crate::reload::{Overrides, Reloader};
use crate::server::App;
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
    /// gRPC listen address override.
    pub grpc_listen: Option<String>,
    /// Start the built-in demo model and use it as the backend.
    pub demo_backend: bool,
    /// Do not watch files for changes (reload only on SIGHUP or the admin API).
    pub no_watch: bool,
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
    let mut overrides = Overrides {
        listen: options.listen.clone(),
        backend: options.backend.clone(),
        grpc_listen: options.grpc_listen.clone(),
        mcp_demo: None,
        guard_demo: None,
    };
    // Read the config once up front for what cannot change on reload (engine cache, backend).
    let mut config = Config::load(&options.config)?;
    if options.demo_backend {
        let url = crate::demo::start().await?;
        tracing::info!(%url, "demo backend started");
        let base = url.trim_end_matches("/v1");
        overrides.mcp_demo = Some(format!("{base}/mcp"));
        overrides.guard_demo = Some(base.to_string());
        overrides.backend = Some(url);
    }
    overrides.apply(&mut config);
    let workers = crate::shard::count(config.startup.workers);
    let backend =
        Backend::for_workers(&config.startup.backend, workers).map_err(DaemonError::Backend)?;
    // One store for the daemon: its limits and sessions, and its plugins' state.
    let store = Arc::new(crate::state::Store::new(&config.startup.state));
    let services = Arc::new(crate::services::Services::new(store));
    let engine = Engine::new(ComponentCache::new(config.startup.cache_dir.clone()))
        .map_err(|e| DaemonError::Engine(e.to_string()))?;
    let engine = Arc::new(engine);
    let metrics = Arc::new(Metrics::default());
    let started = std::time::Instant::now();
    let (reloader, _) = tokio::task::block_in_place(|| {
        Reloader::start(
            engine.clone(),
            services,
            options.config.clone(),
            overrides,
            metrics.clone(),
        )
    })?;
    let set = reloader.current();
    let startup = set.config().startup.clone();
    let listen = startup.listen.clone();
    let grpc_listen = startup.grpc_listen.clone();
    let admin_listen = startup.admin_listen.clone();
    let limits = crate::server::listen::ConnLimits {
        max_connections: startup.max_connections,
        header_read_timeout: startup.header_read_timeout,
        drain_timeout: startup.shutdown_timeout,
    };
    let shutdown_delay = startup.shutdown_delay;
    warn_if_open(set.config(), &listen);
    tracing::info!(
        plugins = set.plugins().len(),
        revision = %&set.revision().hash[..16],
        ms = started.elapsed().as_millis() as u64,
        "policy set loaded"
    );
    drop(set);
    if options.no_watch {
        tracing::info!("file watching is off: reload with SIGHUP or POST /v1/admin/reload");
    } else if let Err(e) = crate::reload::watch_files(reloader.clone()) {
        tracing::error!("cannot watch the config and plugin files ({e}); reload with SIGHUP or POST /v1/admin/reload");
    }
    spawn_sighup(reloader.clone());
    let telemetry = match &startup.telemetry {
        None => None,
        Some(t) => {
            let telemetry = crate::telemetry::Telemetry::start(t)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            tracing::info!(endpoint = %t.otlp_endpoint, "exporting traces (OTLP/gRPC)");
            Some(telemetry)
        }
    };
    let app = Arc::new(App::new(reloader, backend, startup, metrics).with_telemetry(telemetry));
    app.watch_dependencies();

    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {listen}: {e}")))?;
    let addr = listener.local_addr()?;
    if let Some(grpc_listen) = grpc_listen {
        let grpc = tokio::net::TcpListener::bind(&grpc_listen)
            .await
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot listen on {grpc_listen} (gRPC): {e}"),
                )
            })?;
        let grpc_addr = grpc.local_addr()?;
        println!("railyard grpc listening on {grpc_addr}");
        tracing::info!(addr = %grpc_addr, "gRPC listening");
        let app = app.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::server::grpc::serve(app, grpc, shutdown()).await {
                tracing::error!("gRPC server failed: {e}");
            }
        });
    }
    if let Some(admin_listen) = &admin_listen {
        let admin = tokio::net::TcpListener::bind(admin_listen)
            .await
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot listen on {admin_listen} (admin): {e}"),
                )
            })?;
        let admin_addr = admin.local_addr()?;
        println!("railyard admin listening on http://{admin_addr}");
        tracing::info!(addr = %admin_addr, "admin endpoints listening");
        let router = crate::server::admin_router(app.clone());
        // The same connection limits and timeouts as the main listener; on SIGTERM it keeps
        // answering (/readyz: draining) through the delay, like the main one.
        let until = async move {
            shutdown().await;
            tokio::time::sleep(shutdown_delay).await;
        };
        tokio::spawn(async move {
            let service = hyper_util::service::TowerToHyperService::new(router);
            if let Err(e) = crate::server::listen::serve(admin, service, limits, until).await {
                tracing::error!("admin server failed: {e}");
            }
        });
    }
    crate::util::memory::release();
    // The last line on stdout says where we listen (tests and scripts read it with port 0).
    println!("railyard listening on http://{addr}");
    let _ = std::io::stdout().flush();
    tracing::info!(%addr, "listening");
    let front = crate::server::front(app.clone(), admin_listen.is_none());
    let last = app.clone();
    // SIGTERM: not-ready first (a load balancer stops sending), then drain.
    let draining = async move {
        shutdown().await;
        app.start_draining();
        tokio::time::sleep(shutdown_delay).await;
    };
    crate::server::listen::serve_workers(listener, front, limits, draining, workers).await?;
    if last.telemetry().is_some() {
        // The exporter's last batch: on a blocking thread, the channel needs the runtime.
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(t) = last.telemetry() {
                t.shutdown();
            }
        })
        .await;
    }
    tracing::info!("drained; exiting");
    Ok(())
}

/// Say loudly when callers are not authenticated or admin endpoints are unprotected.
fn warn_if_open(config: &Config, listen: &str) {
    if config.auth.is_none() {
        tracing::warn!(
            "[auth] open = true: the daemon is OPEN on {listen}; every caller is anonymous (no principal, default tenant). Name keys in [auth] of {} to close it",
            config.path.display()
        );
    }
    if config.provenance.random_key() {
        tracing::info!(
            "provenance: no [provenance] keys_file, so tool-call ids are signed with a random key made at start: they verify on this process only, until it restarts (give replicas one keys file)"
        );
    }
    if config.admin.keys.is_empty() && config.startup.admin_listen.is_none() {
        tracing::warn!(
            "admin endpoints (/v1/policies, /v1/admin/reload, /metrics) are unprotected on {listen}: set [admin] keys_sha256 or a separate [admin] listen"
        );
    }
}

/// Reload on SIGHUP.
fn spawn_sighup(reloader: Arc<Reloader>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP");
        return;
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let r = reloader.clone();
            let _ = tokio::task::spawn_blocking(move || r.reload("SIGHUP")).await;
        }
    });
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
