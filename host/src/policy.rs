//! A policy set: a resolved config with its plugins loaded, configured and arranged into one
//! chain per rail. This is what the daemon serves and what a reload replaces as a whole.
//!
//! Building one runs every check that can fail before traffic sees it: each plugin loads and
//! matches the contract, runs on the rails it is configured for, has a config valid against the
//! schema it declares, and accepts that config in `configure`.

use crate::chain::{Chain, Evaluation, Step};
use crate::config::{Config, ConfigError, Problem};
use crate::engine::{Engine, Plugin};
use crate::payload::{Context, Payload, Rail, ToolDef};
use std::sync::Arc;

/// Which policies made a decision: a counter (bumped by every successful reload) and a hash
/// of the config text and every plugin's component.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Revision {
    /// 1 for the set loaded at start, then one more per successful reload.
    pub number: u64,
    /// Hex SHA-256 over the config file and the plugin components, in order.
    pub hash: String,
}

/// Loaded plugins and their chains.
pub struct PolicySet {
    revision: Revision,
    config: Config,
    plugins: Vec<Arc<Plugin>>,
    chains: [Chain; 4],
}

fn rail_index(rail: Rail) -> usize {
    match rail {
        Rail::ToolResult => 0,
        Rail::Input => 1,
        Rail::ToolCall => 2,
        Rail::Output => 3,
    }
}

impl PolicySet {
    /// Load every plugin `config` names and build the chains. All problems are reported at once.
    pub fn build(config: Config, engine: &Engine) -> Result<PolicySet, ConfigError> {
        let mut problems = Vec::new();
        let mut loaded: Vec<(Arc<Plugin>, Vec<Rail>)> = Vec::new();
        for (i, pc) in config.plugins.iter().enumerate() {
            let key = format!("plugins[{i}] ({})", pc.name);
            let mut problem = |line: Option<usize>, key: String, message: String| {
                problems.push(Problem { line, key, message })
            };
            let plugin = match engine.load_plugin(&pc.name, &pc.path, pc.limits.clone()) {
                Ok(p) => p,
                Err(e) => {
                    problem(Some(pc.line), format!("{key}.path"), e.to_string());
                    continue;
                }
            };
            let info = plugin.info();
            let rails = match &pc.rails {
                None => info.rails.clone(),
                Some(rails) => {
                    let mut ok = true;
                    for rail in rails {
                        if !info.rails.contains(rail) {
                            ok = false;
                            let handles: Vec<_> = info.rails.iter().map(|r| r.as_str()).collect();
                            problem(
                                Some(pc.line),
                                format!("{key}.rails"),
                                format!(
                                    "plugin '{}' does not handle the {rail} rail (it handles: {})",
                                    info.name,
                                    handles.join(", ")
                                ),
                            );
                        }
                    }
                    if !ok {
                        continue;
                    }
                    rails.clone()
                }
            };
            let config_line = pc.config_line.or(Some(pc.line));
            if let Some(schema) = &info.config_schema {
                match jsonschema::validator_for(schema) {
                    Err(e) => {
                        problem(
                            Some(pc.line),
                            key.clone(),
                            format!(
                                "plugin '{}' declares an invalid config schema: {e}",
                                info.name
                            ),
                        );
                        continue;
                    }
                    Ok(validator) => {
                        let errors: Vec<String> = validator
                            .iter_errors(&pc.config)
                            .map(|e| {
                                let at = e.instance_path().to_string();
                                if at.is_empty() {
                                    e.to_string()
                                } else {
                                    format!("at {at}: {e}")
                                }
                            })
                            .collect();
                        if !errors.is_empty() {
                            for e in errors {
                                problem(config_line, format!("{key}.config"), e);
                            }
                            continue;
                        }
                    }
                }
            }
            if let Err(fault) = plugin.configure(pc.config.to_string()) {
                problem(
                    config_line,
                    format!("{key}.config"),
                    format!("plugin refused its config: {}", fault.message),
                );
                continue;
            }
            loaded.push((Arc::new(plugin), rails));
        }
        if !problems.is_empty() {
            problems.sort_by_key(|p| p.line);
            return Err(ConfigError {
                file: config.path.clone(),
                problems,
            });
        }
        let chain_for = |rail: Rail| {
            let steps = loaded
                .iter()
                .zip(&config.plugins)
                .filter(|((_, rails), _)| rails.contains(&rail))
                .map(|((plugin, _), pc)| Step {
                    plugin: plugin.clone(),
                    on_error: pc.on_error,
                })
                .collect();
            Chain::new(rail, steps)
        };
        let chains = [
            chain_for(Rail::ToolResult),
            chain_for(Rail::Input),
            chain_for(Rail::ToolCall),
            chain_for(Rail::Output),
        ];
        let mut hasher = String::with_capacity(64 * (loaded.len() + 1));
        hasher.push_str(&config.digest);
        for (plugin, _) in &loaded {
            hasher.push_str(plugin.digest());
        }
        Ok(PolicySet {
            revision: Revision {
                number: 1,
                hash: crate::engine::sha256_hex(hasher.as_bytes()),
            },
            plugins: loaded.into_iter().map(|(p, _)| p).collect(),
            config,
            chains,
        })
    }

    /// Read the config at `path` and build its policy set.
    pub fn load(path: &std::path::Path, engine: &Engine) -> Result<PolicySet, ConfigError> {
        PolicySet::build(Config::load(path)?, engine)
    }

    /// This set's revision.
    pub fn revision(&self) -> &Revision {
        &self.revision
    }

    /// Give this set its place in the reload sequence.
    pub fn with_revision_number(mut self, number: u64) -> PolicySet {
        self.revision.number = number;
        self
    }

    /// The config this set was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Loaded plugins, in config order.
    pub fn plugins(&self) -> &[Arc<Plugin>] {
        &self.plugins
    }

    /// The rails `plugin` (by id) runs on in this set, in the order rails run.
    pub fn rails_of(&self, plugin: &str) -> Vec<Rail> {
        Rail::ALL
            .into_iter()
            .filter(|r| {
                self.chain(*r)
                    .steps()
                    .iter()
                    .any(|s| s.plugin.id() == plugin)
            })
            .collect()
    }

    /// What is loaded, as JSON (for `railyard plugins` and `GET /v1/policies`).
    pub fn describe(&self) -> serde_json::Value {
        let plugins: Vec<_> = self
            .plugins
            .iter()
            .zip(&self.config.plugins)
            .filter(|(p, pc)| p.id() == pc.name)
            .map(|(p, pc)| {
                serde_json::json!({
                    "id": p.id(),
                    "name": p.info().name,
                    "version": p.info().version,
                    "sha256": p.digest(),
                    "path": p.path(),
                    "rails": self.rails_of(p.id()),
                    "on_error": pc.on_error,
                    "limits": {
                        "timeout_ms": p.limits().timeout.as_millis() as u64,
                        "memory_mb": p.limits().memory_bytes >> 20,
                        "isolation": p.limits().isolation,
                    },
                    "config_schema": p.info().config_schema,
                })
            })
            .collect();
        let chains: serde_json::Map<String, serde_json::Value> = Rail::ALL
            .into_iter()
            .map(|r| {
                let ids: Vec<&str> = self
                    .chain(r)
                    .steps()
                    .iter()
                    .map(|s| s.plugin.id())
                    .collect();
                (r.to_string(), serde_json::json!(ids))
            })
            .collect();
        serde_json::json!({
            "config": self.config.path,
            "revision": self.revision,
            "plugins": plugins,
            "chains": chains,
        })
    }

    /// The chain of `rail`.
    pub fn chain(&self, rail: Rail) -> &Chain {
        &self.chains[rail_index(rail)]
    }

    /// Run `rail`'s chain. Tools declared in config are merged into the payload's tools for the
    /// plugins (a config tool replaces a request tool of the same name: the operator's schema is
    /// authoritative); the returned payload keeps the request's own tools.
    pub fn check(&self, rail: Rail, payload: Payload, ctx: &Context) -> Evaluation {
        let own_tools = payload.tools.clone();
        let mut payload = payload;
        payload.tools = merge_tools(&payload.tools, &self.config.tools);
        let mut eval = self.chain(rail).run(payload, ctx);
        eval.payload.tools = own_tools;
        eval
    }
}

fn merge_tools(request: &[ToolDef], config: &[ToolDef]) -> Vec<ToolDef> {
    if config.is_empty() {
        return request.to_vec();
    }
    let same = |a: &ToolDef, b: &ToolDef| a.kind == b.kind && a.name == b.name;
    let mut merged: Vec<ToolDef> = request
        .iter()
        .filter(|t| !config.iter().any(|c| same(c, t)))
        .cloned()
        .collect();
    merged.extend(config.iter().cloned());
    merged
}
