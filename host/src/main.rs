//! The `railyard` command line: parses arguments and calls into the library.

use clap::{Parser, Subcommand, ValueEnum};
mod alloc;
mod cli;

use railyard::model::Rail;
use std::path::PathBuf;
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: alloc::MiMalloc = alloc::MiMalloc;

#[derive(Parser)]
#[command(name = "railyard", version, about = "Policy engine for LLM traffic")]
struct Cli {
    /// Log format on stderr.
    #[arg(long, value_enum, default_value = "human", global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run the daemon: an OpenAI-compatible proxy with the rails, plus the check and admin APIs.
    Serve {
        /// Config file.
        #[arg(long, default_value = "policies/railyard.toml")]
        config: PathBuf,
        /// Listen address (overrides server.listen), e.g. 127.0.0.1:8080.
        #[arg(long)]
        listen: Option<String>,
        /// Backend base URL (overrides backend.url), e.g. http://127.0.0.1:8000/v1.
        #[arg(long)]
        backend: Option<String>,
        /// gRPC listen address (overrides server.grpc_listen), e.g. 127.0.0.1:8081.
        #[arg(long)]
        grpc_listen: Option<String>,
        /// Use a built-in scripted model instead of a real backend (for trying Railyard out).
        /// It replaces any backend, so it cannot be given with `--backend`.
        #[arg(long, conflicts_with = "backend")]
        demo_backend: bool,
        /// Do not watch the config and plugin files (reload with SIGHUP or the admin API).
        #[arg(long)]
        no_watch: bool,
    },
    /// Run one rail's chain on an OpenAI-style payload ({"messages": [...], "tools": [...]}).
    ///
    /// Exit code: 0 allow or modify, 1 reject or block, 2 error.
    Check {
        /// Config file.
        #[arg(long, default_value = "policies/railyard.toml")]
        config: PathBuf,
        /// Rail to run: input, tool_result, tools, tool_call or output.
        #[arg(long, value_parser = parse_rail)]
        rail: Rail,
        /// Principal to put in the context (as if authenticated).
        #[arg(long)]
        principal: Option<String>,
        /// Tenant whose chains run (as if authenticated with one of its keys).
        #[arg(long)]
        tenant: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Payload file, or - for standard input.
        #[arg(default_value = "-")]
        file: String,
    },
    /// Run only the built-in scripted demo model (the backend `serve --demo-backend` uses), e.g.
    /// as the "straight to the backend" baseline in load tests.
    DemoBackend {
        /// Listen address.
        #[arg(long, default_value = "127.0.0.1:9000")]
        listen: String,
    },
    /// Run policy test cases: each case's payload and caller through the real plugins of its
    /// config, checked against the expected verdict, reason and edits.
    ///
    /// Case files are JSON or YAML files inside a `tests` folder (or given by name). Exit code:
    /// 0 all passed, 1 a case failed, 2 error.
    Test {
        /// Case files, or folders to search.
        #[arg(default_value = ".")]
        paths: Vec<PathBuf>,
        /// Print failures and the summary only.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Scaffold a plugin project: sources, the WIT contract, a build script, a config that loads
    /// it and test cases that pass out of the box.
    New {
        /// Language: rust, js, python or c.
        #[arg(long, value_parser = parse_lang)]
        lang: railyard::scaffold::Lang,
        /// Plugin name (lowercase kebab-case, e.g. deny-phrases).
        name: String,
        /// Folder to create (default: ./NAME).
        dir: Option<PathBuf>,
    },
    /// API keys: make one, or hash one for `[auth]` / a keys file.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// List the plugins a config loads, with version, hash, rails and config schema.
    Plugins {
        /// Config file.
        #[arg(long, default_value = "policies/railyard.toml")]
        config: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub(crate) enum KeysCommand {
    /// Generate a new random key; print it once, with the config entry holding only its hash.
    New {
        /// Principal the key stands for.
        #[arg(long)]
        principal: String,
        /// Tenant of the key (default tenant when absent); it must be one the config has.
        #[arg(long)]
        tenant: Option<String>,
        /// The config whose tenants `--tenant` is checked against.
        #[arg(long, default_value = "policies/railyard.toml")]
        config: PathBuf,
    },
    /// Print the SHA-256 of a key (read from standard input, one line), as config stores it.
    Hash,
}

fn parse_lang(s: &str) -> Result<railyard::scaffold::Lang, String> {
    s.parse()
}

fn parse_rail(s: &str) -> Result<Rail, String> {
    Rail::parse(s).ok_or_else(|| format!("unknown rail '{s}' (expected {})", Rail::EXPECTED))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Serve {
        config,
        listen,
        backend,
        grpc_listen,
        demo_backend,
        no_watch,
    } = cli.command
    {
        init_logging(cli.log_format, "info");
        return serve(railyard::daemon::ServeOptions {
            config,
            listen,
            backend,
            grpc_listen,
            demo_backend,
            no_watch,
        });
    }
    if let Command::DemoBackend { listen } = cli.command {
        init_logging(cli.log_format, "warn");
        return block_on(railyard::demo::serve(&listen), |_| 1);
    }
    init_logging(cli.log_format, "warn");
    match cli::run(cli.command) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn serve(options: railyard::daemon::ServeOptions) -> ExitCode {
    railyard::util::memory::on_release(alloc::release);
    block_on(railyard::daemon::serve(options), |err| match err {
        // EX_USAGE: the config is wrong, nothing was bound.
        railyard::daemon::DaemonError::Config(_) | railyard::daemon::DaemonError::Backend(_) => 64,
        _ => 1,
    })
}

/// Run a daemon future on a multi-threaded runtime; print its error and exit with `code(err)`.
fn block_on<E: std::fmt::Display>(
    future: impl std::future::Future<Output = Result<(), E>>,
    code: impl FnOnce(&E) -> u8,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(future) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(code(&err))
        }
    }
}

fn init_logging(format: LogFormat, default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RAILYARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    use railyard::server::{set_record_format, RecordFormat};
    match format {
        LogFormat::Human => {
            set_record_format(if ansi {
                RecordFormat::Tracing
            } else {
                RecordFormat::Text
            });
            builder.init()
        }
        LogFormat::Json => {
            set_record_format(RecordFormat::Json);
            builder.json().init()
        }
    }
}
