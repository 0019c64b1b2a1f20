//! The commands that run and exit (`check`, `test`, `new`, `keys`, `plugins`): anyhow lives here
//! only, the library below has typed errors.

use crate::{Command, KeysCommand};
use anyhow::{Context as _, Result};
use railyard::chain::{Evaluation, Verdict};
use railyard::config::Config;
use railyard::engine::{ComponentCache, Engine};
use railyard::model::{Context, Payload};
use railyard::policy::PolicySet;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

fn load(config: &std::path::Path) -> Result<PolicySet> {
    let config = Config::load(config).map_err(anyhow::Error::msg)?;
    let engine = Engine::new(ComponentCache::new(config.startup.cache_dir.clone()))
        .map_err(|e| anyhow::anyhow!("cannot start the wasm engine: {e}"))?;
    // The plugins keep the deadline ticker alive after the engine is dropped.
    PolicySet::build(config, &engine).map_err(anyhow::Error::msg)
}

/// Run a command other than `serve` and `demo-backend`; the exit code of its outcome.
pub(crate) fn run(command: Command) -> Result<ExitCode> {
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
            let eval = railyard::util::block_on(set.check(rail, payload, &ctx));
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
        KeysCommand::New {
            principal,
            tenant,
            config,
        } => {
            // A key for a tenant the config lacks would make the keys file fail to load, and
            // callers would only see "Incorrect API key": refuse it here.
            if let Some(t) = &tenant {
                // Only the config's tenant names are read: its keys file may not exist yet.
                let text = std::fs::read_to_string(&config).with_context(|| {
                    format!(
                        "cannot check tenant '{t}': reading {} (name the config with --config)",
                        config.display()
                    )
                })?;
                let table: toml::Table = text.parse().with_context(|| {
                    format!(
                        "cannot check tenant '{t}': {} is not TOML",
                        config.display()
                    )
                })?;
                let names: Vec<&str> = table
                    .get("tenants")
                    .and_then(toml::Value::as_table)
                    .map(|t| t.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                anyhow::ensure!(
                    names.contains(&t.as_str()),
                    "{} has no tenant '{t}' ({}): a key for it could never be used",
                    config.display(),
                    if names.is_empty() {
                        "it configures none".to_string()
                    } else {
                        format!("it configures {}", names.join(", "))
                    }
                );
            }
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
