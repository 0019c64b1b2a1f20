//! The `railyard` command line: parses arguments and calls into the library.

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand, ValueEnum};
use railyard::chain::{Evaluation, Verdict};
use railyard::config::Config;
use railyard::engine::{ComponentCache, Engine};
use railyard::payload::{Context, Payload, Rail};
use railyard::policy::PolicySet;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
enum Command {
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
        #[arg(long)]
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
        /// Rail to run: input, tool_result, tool_call or output.
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
        /// Language: rust, js or python.
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
enum KeysCommand {
    /// Generate a new random key; print it once, with the config entry holding only its hash.
    New {
        /// Principal the key stands for.
        #[arg(long)]
        principal: String,
        /// Tenant of the key (default tenant when absent).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Print the SHA-256 of a key (read from standard input, one line), as config stores it.
    Hash,
}

fn parse_lang(s: &str) -> Result<railyard::scaffold::Lang, String> {
    s.parse()
}

fn parse_rail(s: &str) -> Result<Rail, String> {
    Rail::parse(s).ok_or_else(|| {
        format!("unknown rail '{s}' (expected input, tool_result, tool_call or output)")
    })
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
    match run(cli.command) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn serve(options: railyard::daemon::ServeOptions) -> ExitCode {
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
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => {
            railyard::server::set_json_logs(true);
            builder.json().init()
        }
    }
}

fn load(config: &std::path::Path) -> Result<PolicySet> {
    let config = Config::load(config).map_err(anyhow::Error::msg)?;
    let engine = Engine::new(ComponentCache::new(config.startup.cache_dir.clone()))
        .map_err(|e| anyhow::anyhow!("cannot start the wasm engine: {e}"))?;
    // The plugins keep the deadline ticker alive after the engine is dropped.
    PolicySet::build(config, &engine).map_err(anyhow::Error::msg)
}

fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Serve { .. } | Command::DemoBackend { .. } => unreachable!("handled in main"),
        Command::Keys { command } => keys(command),
        Command::Test { paths, quiet } => test(&paths, quiet),
        Command::New { lang, name, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let written =
                railyard::scaffold::scaffold(lang, &name, &dir).map_err(anyhow::Error::msg)?;
            println!(
                "created {} ({lang} plugin, {} files):",
                dir.display(),
                written.len()
            );
            for f in &written {
                println!("  {}", f.strip_prefix(&dir).unwrap_or(f).display());
            }
            println!(
                "\nnext:\n  cd {}\n  ./build.sh\n  railyard test",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Check {
            config,
            rail,
            principal,
            tenant,
            json,
            file,
        } => {
            let text = if file == "-" {
                let mut s = String::new();
                std::io::stdin()
                    .read_to_string(&mut s)
                    .context("reading the payload from standard input")?;
                s
            } else {
                std::fs::read_to_string(&file).with_context(|| format!("reading {file}"))?
            };
            let body: serde_json::Value =
                serde_json::from_str(&text).with_context(|| format!("{file} is not valid JSON"))?;
            let payload =
                Payload::from_openai(&body).context("the payload is not an OpenAI chat payload")?;
            let set = load(&config)?;
            if let Some(t) = &tenant {
                anyhow::ensure!(
                    set.has_tenant(t),
                    "{} has no tenant '{t}'",
                    config.display()
                );
            }
            let ctx = Context {
                request_id: "cli".into(),
                principal,
                tenant,
                ..Context::default()
            };
            let eval = set.check(rail, payload, &ctx);
            if json {
                println!("{}", serde_json::to_string_pretty(&eval.to_json())?);
            } else {
                print_evaluation(&eval);
            }
            Ok(match eval.verdict {
                Verdict::Allow | Verdict::Modify => ExitCode::SUCCESS,
                Verdict::Reject | Verdict::Block => ExitCode::from(1),
            })
        }
        Command::Plugins { config, json } => {
            let set = load(&config)?;
            let described = set.describe();
            let list = described["plugins"].as_array().cloned().unwrap_or_default();
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                for p in &list {
                    println!(
                        "{}  {} {}  sha256:{}  rails: {}",
                        p["id"].as_str().unwrap_or(""),
                        p["name"].as_str().unwrap_or(""),
                        p["version"].as_str().unwrap_or(""),
                        &p["sha256"].as_str().unwrap_or("")[..16],
                        p["rails"]
                            .as_array()
                            .map(|r| r
                                .iter()
                                .filter_map(|x| x.as_str())
                                .collect::<Vec<_>>()
                                .join(", "))
                            .unwrap_or_default()
                    );
                    println!(
                        "    config schema: {}",
                        serde_json::to_string(&p["config_schema"]).unwrap_or_default()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn test(paths: &[PathBuf], quiet: bool) -> Result<ExitCode> {
    let files = railyard::cases::discover(paths).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        !files.is_empty(),
        "no case files found (JSON or YAML files inside a `tests` folder) under {}",
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let started = std::time::Instant::now();
    let mut runner = railyard::cases::Runner::new().map_err(anyhow::Error::msg)?;
    let cwd = std::env::current_dir().unwrap_or_default();
    let (mut passed, mut failed) = (0, 0);
    for file in &files {
        let shown = file.strip_prefix(&cwd).unwrap_or(file);
        let shown = shown
            .strip_prefix(".")
            .unwrap_or(shown)
            .display()
            .to_string();
        for outcome in runner.run_file(file) {
            match &outcome.failure {
                None => {
                    passed += 1;
                    if !quiet {
                        println!("ok    {shown}  {}", outcome.name);
                    }
                }
                Some(why) => {
                    failed += 1;
                    println!("FAIL  {shown}  {}", outcome.name);
                    for line in why.lines() {
                        println!("      {line}");
                    }
                }
            }
        }
    }
    println!(
        "\n{passed} passed, {failed} failed ({} case files, {:.2} s)",
        files.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn keys(command: KeysCommand) -> Result<ExitCode> {
    match command {
        KeysCommand::New { principal, tenant } => {
            let key = railyard::auth::generate().context("reading /dev/urandom")?;
            let hash = railyard::auth::hash_hex(&key);
            println!("# The key (give it to the caller; it is not stored anywhere):");
            println!("#   {key}");
            println!("# The entry for [auth] (as [[auth.keys]]) or a keys file (as [[keys]]):");
            println!("[[keys]]");
            println!("sha256 = \"{hash}\"");
            println!("principal = {}", toml_string(&principal));
            if let Some(t) = tenant {
                println!("tenant = {}", toml_string(&t));
            }
        }
        KeysCommand::Hash => {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .context("reading the key from standard input")?;
            let key = line.trim_end_matches(['\n', '\r']);
            anyhow::ensure!(!key.is_empty(), "no key on standard input");
            println!("{}", railyard::auth::hash_hex(key));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A TOML basic string (JSON string escaping is valid TOML).
fn toml_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn print_evaluation(eval: &Evaluation) {
    println!("verdict: {:?} ({} rail)", eval.verdict, eval.rail);
    if let Some(b) = &eval.blocked {
        println!("blocked by {}: {}", b.plugin, b.reason);
    }
    println!("decisions:");
    for d in &eval.decisions {
        println!(
            "  {:<18} {:<7} {:>7} µs  {}",
            d.plugin,
            format!("{:?}", d.verdict).to_lowercase(),
            d.duration_us.as_micros(),
            d.reason.as_deref().unwrap_or("")
        );
    }
    println!("payload:");
    println!(
        "{}",
        serde_json::to_string_pretty(&eval.payload.to_openai()).unwrap_or_default()
    );
}
