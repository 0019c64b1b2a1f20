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

/// Loaded plugins and their chains.
pub struct PolicySet {
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
        Ok(PolicySet {
            plugins: loaded.into_iter().map(|(p, _)| p).collect(),
            config,
            chains,
        })
    }

    /// Read the config at `path` and build its policy set.
    pub fn load(path: &std::path::Path, engine: &Engine) -> Result<PolicySet, ConfigError> {
        PolicySet::build(Config::load(path)?, engine)
    }

    /// The config this set was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Loaded plugins, in config order.
    pub fn plugins(&self) -> &[Arc<Plugin>] {
        &self.plugins
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
