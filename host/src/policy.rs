//! A policy set: a resolved config with its plugins loaded, configured and arranged into one
//! chain per rail. This is what the daemon serves and what a reload replaces as a whole.
//!
//! Building one runs every check that can fail before traffic sees it: each plugin loads and
//! matches the contract, runs on the rails it is configured for, has a config valid against the
//! schema it declares, and accepts that config in `configure`.

mod apply;
pub mod chain;
pub mod memo;
pub mod record;

use crate::config::{Config, ConfigError, Problem};
use crate::engine::{Engine, FaultKind, Plugin};
use crate::model::{Context, Payload, Rail, ToolDef};
use chain::{Chain, Evaluation, Part, Running, Step};
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
    chains: [Chain; 5],
    /// Each tenant's chains (the default chains, replaced or extended per rail).
    tenants: Vec<(String, [Chain; 5])>,
    /// What an operator should know about the set that is not an error (logged at each load,
    /// shown on `/v1/policies`).
    warnings: Vec<String>,
    /// When it was built, in seconds since the Unix epoch.
    loaded_at: u64,
    /// The guard models its plugins may consult.
    guard_models: Arc<crate::guard::GuardModels>,
    /// The daemon's shared services: the store tenants' guard-model minutes, plugins' state and
    /// approvals live in (it outlives reloads: a reload does not hand a tenant a fresh minute).
    services: Arc<crate::services::Services>,
    /// The vault's key (from the provenance key that signs): its placeholders, and the seal of
    /// what a conversation's vault keeps between requests.
    vault_key: Arc<[u8; 32]>,
}

fn rail_index(rail: Rail) -> usize {
    rail.index()
}

impl PolicySet {
    /// Load every plugin `config` names and build the chains, with services of its own (its
    /// store in memory). All problems are reported at once.
    pub fn build(config: Config, engine: &Engine) -> Result<PolicySet, ConfigError> {
        let services = Arc::new(crate::services::Services::in_memory());
        PolicySet::build_after(config, engine, &services, None)
    }

    /// [`PolicySet::build`] over the daemon's `services`, as the successor of `previous` (a
    /// reload): guard models whose config is unchanged keep their cached answers.
    pub fn build_after(
        config: Config,
        engine: &Engine,
        services: &Arc<crate::services::Services>,
        previous: Option<&PolicySet>,
    ) -> Result<PolicySet, ConfigError> {
        let mut problems = Vec::new();
        let guard_models = match crate::guard::GuardModels::new(
            &config.guard_models,
            previous.map(|p| &*p.guard_models),
            services,
        ) {
            Ok(g) => Arc::new(g),
            Err(message) => {
                return Err(ConfigError {
                    file: config.path.clone(),
                    problems: vec![Problem {
                        line: None,
                        key: "guard_models".into(),
                        message,
                    }],
                })
            }
        };
        // The vault's placeholders are keyed by the provenance key that signs: replicas that
        // share a keys file write a value the same way.
        let vault_key = crate::caps::vault::key_of(&config.provenance.keys);
        let mut loaded: Vec<(Arc<Plugin>, Vec<Rail>)> = Vec::new();
        for (i, pc) in config.plugins.iter().enumerate() {
            let key = format!("plugins[{i}] ({})", pc.name);
            let mut problem = |line: Option<usize>, key: String, message: String| {
                problems.push(Problem { line, key, message })
            };
            let grant = |component: &str| {
                let store = services.store();
                let ttl = config.approvals_ttl;
                crate::caps::Grants::of(pc, component, &guard_models, store, ttl, &vault_key)
            };
            let plugin = match engine.load_plugin(&pc.name, &pc.path, pc.limits.clone(), grant) {
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
            if pc.parallel && !rails.contains(&Rail::Input) {
                problem(
                    pc.parallel_line.or(Some(pc.line)),
                    format!("{key}.parallel"),
                    format!(
                        "plugin '{}' does not run on the input rail, the only one that runs beside the backend call",
                        info.name
                    ),
                );
                continue;
            }
            if pc.memo && !info.rails.contains(&Rail::Tools) {
                problem(
                    pc.memo_line.or(Some(pc.line)),
                    format!("{key}.memo"),
                    format!(
                        "plugin '{}' does not handle the tools rail, the only one where verdicts are kept",
                        info.name
                    ),
                );
                continue;
            }
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
                    match fault.kind {
                        FaultKind::Configure => {
                            format!("plugin refused its config: {}", fault.message)
                        }
                        _ => format!("plugin failed to configure: {}", fault.message),
                    },
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
        // Every plugin is loaded now, so `loaded` and `config.plugins` line up.
        // One memo per plugin, shared by every chain it is in (its question names the tenant).
        let memos: Vec<Option<Arc<memo::Memo>>> = config
            .plugins
            .iter()
            .map(|pc| pc.memo.then(Default::default))
            .collect();
        // `modes`: a tenant's overrides of the plugins' modes.
        let step = |i: usize, modes: &[(String, crate::model::Mode)]| Step {
            plugin: loaded[i].0.clone(),
            on_error: config.plugins[i].on_error,
            models: config.plugins[i].models.clone().into(),
            history: config.plugins[i].history,
            declared_tools: config.plugins[i].declared_tools,
            memo: memos[i].clone(),
            parallel: config.plugins[i].parallel,
            mode: modes
                .iter()
                .find(|(id, _)| *id == config.plugins[i].name)
                .map_or(config.plugins[i].mode, |(_, m)| *m),
        };
        // Plugin indices per rail, in rail_index order (which is Rail::ALL's).
        let defaults: Vec<Vec<usize>> = Rail::ALL
            .into_iter()
            .map(|rail| {
                (0..loaded.len())
                    .filter(|&i| loaded[i].1.contains(&rail))
                    .collect()
            })
            .collect();
        let arrange = |ids: &[Vec<usize>], modes: &[(String, crate::model::Mode)]| -> [Chain; 5] {
            Rail::ALL.map(|rail| {
                Chain::new(
                    rail,
                    ids[rail_index(rail)]
                        .iter()
                        .map(|&i| step(i, modes))
                        .collect(),
                )
            })
        };
        let chains = arrange(&defaults, &[]);
        let mut tenants = Vec::new();
        let mut warnings = Vec::new();
        for tenant in &config.tenants {
            let ids: Vec<Vec<usize>> = Rail::ALL
                .into_iter()
                .map(|rail| {
                    let replaced = tenant.chains.iter().find(|(r, _)| *r == rail);
                    let extended = tenant.extend.iter().find(|(r, _)| *r == rail);
                    let mut ids = match replaced {
                        Some(_) => Vec::new(),
                        None => defaults[rail_index(rail)].clone(),
                    };
                    for id in replaced.or(extended).map_or(&[][..], |(_, ids)| ids) {
                        let Some(i) = config.plugins.iter().position(|pc| &pc.name == id) else {
                            continue; // reported by Config::parse
                        };
                        let info = loaded[i].0.info();
                        if !info.rails.contains(&rail) {
                            let handles: Vec<_> = info.rails.iter().map(|r| r.as_str()).collect();
                            problems.push(Problem {
                                line: Some(tenant.line),
                                key: format!("tenants.{}", tenant.name),
                                message: format!(
                                    "plugin '{id}' does not handle the {rail} rail (it handles: {})",
                                    handles.join(", ")
                                ),
                            });
                        }
                        ids.push(i);
                    }
                    if replaced.is_some() {
                        // A default plugin this chain leaves out, with no plugin of the same
                        // component in its place (a tenant's own allowlist): an operator who
                        // added it to the defaults may believe it applies everywhere.
                        for &d in &defaults[rail_index(rail)] {
                            let stands_in = ids
                                .iter()
                                .any(|&o| o == d || loaded[o].0.shares_code_with(&loaded[d].0));
                            if !stands_in {
                                warnings.push(format!(
                                    "tenant '{}' replaces the {rail} chain and leaves out '{}', which the default {rail} chain runs: its requests are not judged by it (add it to the tenant's chain, or use `extend` to add to the defaults)",
                                    tenant.name, config.plugins[d].name
                                ));
                            }
                        }
                    }
                    ids
                })
                .collect();
            tenants.push((tenant.name.clone(), arrange(&ids, &tenant.modes)));
        }
        if !problems.is_empty() {
            return Err(ConfigError {
                file: config.path.clone(),
                problems,
            });
        }
        let mut hasher = String::with_capacity(64 * (loaded.len() + 1));
        hasher.push_str(&config.digest);
        for (plugin, _) in &loaded {
            hasher.push_str(plugin.digest());
        }
        Ok(PolicySet {
            revision: Revision {
                number: 1,
                hash: crate::util::sha256_hex(hasher.as_bytes()),
            },
            plugins: loaded.into_iter().map(|(p, _)| p).collect(),
            config,
            chains,
            tenants,
            warnings,
            loaded_at: crate::util::unix_secs(),
            guard_models,
            services: services.clone(),
            vault_key,
        })
    }

    /// A fresh guard-model scope for one request of `tenant` (its `[guard]` budget, and its
    /// tenant's minute when that is limited), when any guard model is configured.
    pub fn guard_scope(&self, tenant: Option<&str>) -> Option<Arc<crate::caps::guard::Scope>> {
        if self.config.guard_models.is_empty() {
            return None;
        }
        let b = &self.config.guard_budget;
        let mut scope = crate::caps::guard::Scope::new(b.calls_per_request, b.wait_per_request);
        let limits = match self.tenant(tenant) {
            Some(t) => t.guard_budget(b.per_tenant),
            None => b.per_tenant,
        };
        if limits.calls.is_some() || limits.wait.is_some() {
            scope.tenant = Some(crate::caps::guard::TenantSpend::new(
                self.services.store().clone(),
                tenant.unwrap_or(crate::auth::DEFAULT_TENANT),
                limits.calls,
                limits.wait,
            ));
        }
        Some(Arc::new(scope))
    }

    /// What an operator should know about this set that is not an error.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Read the config at `path` and build its policy set.
    pub fn load(path: &std::path::Path, engine: &Engine) -> Result<PolicySet, ConfigError> {
        PolicySet::build(Config::load(path)?, engine)
    }

    /// This set's revision.
    pub fn revision(&self) -> &Revision {
        &self.revision
    }

    /// The `[state]` store its plugins reach (one per daemon).
    pub fn store(&self) -> &Arc<crate::state::Store> {
        self.services.store()
    }

    /// Tool definitions pinned (one per daemon).
    pub fn pins(&self) -> &crate::pins::Pins {
        self.services.pins()
    }

    /// The vault's key.
    pub fn vault_key(&self) -> &[u8; 32] {
        &self.vault_key
    }

    /// Whether a plugin of the set hides values in the vault (`vault = true`).
    pub fn has_vault(&self) -> bool {
        self.config.plugins.iter().any(|p| p.vault)
    }

    /// Whether a plugin of the set may ask for approvals (`approvals = true`).
    pub fn asks_approvals(&self) -> bool {
        self.config.plugins.iter().any(|p| p.approvals)
    }

    /// Run with `startup` (the settings the daemon was started with: a reload cannot change
    /// them, see [`crate::config::StartupConfig::changes`]).
    pub fn with_startup(mut self, startup: crate::config::StartupConfig) -> PolicySet {
        self.config.startup = startup;
        self
    }

    /// This set with the API keys of `auth` instead of its own (a keys file changed while the
    /// config itself could not be loaded: revocation never waits for a config fix). `digest`
    /// is the keys file's text, so the revision's hash changes with it.
    pub fn with_keys(&self, auth: crate::config::AuthConfig, keys_text: &str) -> PolicySet {
        let mut config = self.config.clone();
        config.auth = Some(auth);
        let hash = crate::util::sha256_hex(format!("{}{keys_text}", self.revision.hash).as_bytes());
        PolicySet {
            revision: Revision {
                number: self.revision.number,
                hash,
            },
            config,
            plugins: self.plugins.clone(),
            chains: self.chains.clone(),
            tenants: self.tenants.clone(),
            warnings: self.warnings.clone(),
            loaded_at: crate::util::unix_secs(),
            guard_models: self.guard_models.clone(),
            services: self.services.clone(),
            vault_key: self.vault_key.clone(),
        }
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

    /// The rails `plugin` (by id) runs on in this set (in any tenant's chains), in the order
    /// rails run.
    pub fn rails_of(&self, plugin: &str) -> Vec<Rail> {
        let runs_in = |chain: &Chain| chain.steps().iter().any(|s| s.plugin.id() == plugin);
        Rail::ALL
            .into_iter()
            .filter(|r| {
                runs_in(self.chain(*r))
                    || self
                        .tenants
                        .iter()
                        .any(|(_, chains)| runs_in(&chains[rail_index(*r)]))
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
                    "contract": p.contract_version(),
                    "path": p.path(),
                    "rails": self.rails_of(p.id()),
                    "on_error": pc.on_error,
                    "mode": pc.mode,
                    "models": (!pc.models.is_empty()).then_some(&pc.models),
                    "history": pc.history,
                    "declared_tools": pc.declared_tools,
                    "triggers": p.triggers(),
                    "limits": {
                        "timeout_ms": p.limits().timeout.as_millis() as u64,
                        "memory_mb": p.limits().memory_bytes >> 20,
                        "isolation": p.limits().isolation,
                    },
                    "config_schema": p.info().config_schema,
                    "config": pc.config,
                    "memo": pc.memo,
                    "guard_models": (!pc.guard_models.is_empty()).then_some(&pc.guard_models),
                    "state": pc.state.then_some(true),
                    "waits": p.waits(),
                    "parallel": pc.parallel,
                })
            })
            .collect();
        let chains = |tenant: Option<&str>| -> serde_json::Map<String, serde_json::Value> {
            Rail::ALL
                .into_iter()
                .map(|r| {
                    let ids: Vec<&str> = self
                        .chain_for(tenant, r)
                        .steps()
                        .iter()
                        .map(|s| s.plugin.id())
                        .collect();
                    (r.to_string(), serde_json::json!(ids))
                })
                .collect()
        };
        let tenants: serde_json::Map<String, serde_json::Value> = self
            .config
            .tenants
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    serde_json::json!({
                        "chains": chains(Some(&t.name)),
                        "modes": t.modes.iter().map(|(id, m)| (id.clone(), serde_json::json!(m))).collect::<serde_json::Map<_, _>>(),
                        "max_body_bytes": t.max_body_bytes,
                        "max_concurrent": t.max_concurrent,
                    }),
                )
            })
            .collect();
        serde_json::json!({
            "config": self.config.path,
            "revision": self.revision,
            "loaded_at": self.loaded_at,
            "auth": match &self.config.auth {
                Some(a) => serde_json::json!({"keys": a.keys.len(), "keys_file": a.keys_file}),
                None => serde_json::json!("open"),
            },
            "plugins": plugins,
            "guard_models": self.config.guard_models.iter().map(|g| serde_json::json!({
                "name": g.name,
                "kind": g.kind,
                "url": g.url.to_string(),
                "model": g.model,
                "timeout_ms": g.timeout.as_millis() as u64,
                "max_concurrent": g.max_concurrent,
                "cache_entries": g.cache_entries,
            })).collect::<Vec<_>>(),
            "chains": chains(None),
            "tenants": tenants,
            "warnings": self.warnings,
        })
    }

    /// The default chain of `rail`.
    pub fn chain(&self, rail: Rail) -> &Chain {
        &self.chains[rail_index(rail)]
    }

    /// The chain of `rail` for `tenant` (`None`, or a tenant without its own chains: the
    /// default chain).
    pub fn chain_for(&self, tenant: Option<&str>, rail: Rail) -> &Chain {
        match tenant.and_then(|t| self.tenants.iter().find(|(name, _)| name == t)) {
            Some((_, chains)) => &chains[rail_index(rail)],
            None => self.chain(rail),
        }
    }

    /// Whether config defines `tenant`.
    pub fn has_tenant(&self, tenant: &str) -> bool {
        self.config.tenants.iter().any(|t| t.name == tenant)
    }

    /// The config of `tenant`, if it has one.
    pub fn tenant(&self, tenant: Option<&str>) -> Option<&crate::config::TenantConfig> {
        tenant.and_then(|t| self.config.tenants.iter().find(|c| c.name == t))
    }

    /// Largest body `tenant` may send.
    pub fn max_body_bytes(&self, tenant: Option<&str>) -> usize {
        self.tenant(tenant)
            .map(|t| t.max_body_bytes)
            .unwrap_or(self.config.server.max_body_bytes)
    }

    /// Run `rail`'s chain (the caller's tenant's, per `ctx.tenant`). Tools declared in config are merged into the payload's tools for the
    /// plugins (a config tool replaces a request tool of the same name: the operator's schema is
    /// authoritative); the returned payload keeps the request's own tools.
    pub fn check<'a>(&'a self, rail: Rail, payload: Payload, ctx: &'a Context) -> Running<'a> {
        self.check_explained(rail, payload, ctx, &crate::caps::NONE, false, false)
    }

    /// [`PolicySet::check`] with the request's capability state `caps`, saying whether the
    /// payload's reply is a streamed text so far. On the
    /// `tools` rail plugins see the request's own tools (what the model is offered) and their
    /// edits are kept.
    pub fn check_with<'a>(
        &'a self,
        rail: Rail,
        payload: Payload,
        ctx: &'a Context,
        caps: &'a crate::caps::RequestCaps,
        partial: bool,
    ) -> Running<'a> {
        self.check_explained(rail, payload, ctx, caps, partial, false)
    }

    /// [`PolicySet::check_with`]; `explain`: keep the payload after each edit. Ready at once
    /// unless a plugin in the chain may wait.
    pub fn check_explained<'a>(
        &'a self,
        rail: Rail,
        payload: Payload,
        ctx: &'a Context,
        caps: &'a crate::caps::RequestCaps,
        partial: bool,
        explain: bool,
    ) -> Running<'a> {
        self.check_part(rail, payload, ctx, caps, partial, explain, Part::All)
    }

    /// [`PolicySet::check_explained`] over the steps of the chain that `part` takes.
    // The one entry every other `check` narrows: its arguments are the run's whole question.
    #[allow(clippy::too_many_arguments)]
    pub fn check_part<'a>(
        &'a self,
        rail: Rail,
        payload: Payload,
        ctx: &'a Context,
        caps: &'a crate::caps::RequestCaps,
        partial: bool,
        explain: bool,
        part: Part,
    ) -> Running<'a> {
        let chain = self.chain_for(ctx.tenant.as_deref(), rail);
        // The operator's tools are merged in only for a chain with a plugin that reads them.
        if rail == Rail::Tools
            || self.config.tools.is_empty()
            || !chain.reads_declared_tools(ctx.model.as_deref())
        {
            return chain.run_part(payload, ctx, caps, partial, explain, part);
        }
        // The request's tools are moved in and out, not copied: only the operator's few are.
        let mut payload = payload;
        let (merged, replaced) =
            merge_tools(std::mem::take(&mut payload.tools), &self.config.tools);
        payload.tools = merged;
        let config_len = self.config.tools.len();
        chain::then(
            chain.run_part(payload, ctx, caps, partial, explain, part),
            move |mut eval: Evaluation| {
                for (_, after) in &mut eval.explained {
                    let merged = std::mem::take(&mut after.tools);
                    after.tools = unmerge_tools(merged, replaced.clone(), config_len);
                }
                let merged = std::mem::take(&mut eval.payload.tools);
                eval.payload.tools = unmerge_tools(merged, replaced, config_len);
                eval
            },
        )
    }

    /// Whether the `part` of `rail`'s chain for `ctx`'s tenant has a plugin for its model that
    /// may wait.
    pub fn waits(&self, rail: Rail, ctx: &Context, part: Part) -> bool {
        self.chain_for(ctx.tenant.as_deref(), rail)
            .waits(ctx.model.as_deref(), part)
    }
}

/// The tools plugins see off the `tools` rail: the request's (`request`), those the operator
/// also declares replaced by the operator's declaration (which keeps the request tool's
/// `hidden_by`: a tool hidden from the model stays hidden), the operator's last. Also returns
/// the replaced request tools with their positions, for [`unmerge_tools`].
fn merge_tools(request: Vec<ToolDef>, config: &[ToolDef]) -> (Vec<ToolDef>, Vec<(usize, ToolDef)>) {
    let mut merged = Vec::with_capacity(request.len() + config.len());
    let mut replaced = Vec::new();
    for (i, tool) in request.into_iter().enumerate() {
        if config.iter().any(|c| c.same(&tool)) {
            replaced.push((i, tool));
        } else {
            merged.push(tool);
        }
    }
    merged.extend(config.iter().map(|c| {
        let mut c = c.clone();
        c.hidden_by = replaced
            .iter()
            .find(|(_, t)| t.same(&c))
            .and_then(|(_, t)| t.hidden_by.clone());
        c
    }));
    (merged, replaced)
}

/// The request's own tools again, from what [`merge_tools`] made (off the `tools` rail no plugin
/// edits tools, so it is unchanged): the operator's `config_len` tools dropped, the replaced
/// ones put back where they were.
fn unmerge_tools(
    mut merged: Vec<ToolDef>,
    replaced: Vec<(usize, ToolDef)>,
    config_len: usize,
) -> Vec<ToolDef> {
    merged.truncate(merged.len().saturating_sub(config_len));
    for (i, tool) in replaced {
        merged.insert(i.min(merged.len()), tool);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> ToolDef {
        ToolDef::declared("function", Some(name), Some(description), None)
    }

    #[test]
    fn merged_tools_come_apart_as_the_request_had_them() {
        let mut hidden = tool("b", "request's b");
        hidden.hidden_by = Some("allowlist".into());
        let request = vec![
            tool("a", "a"),
            hidden,
            tool("c", "c"),
            tool("d", "request's d"),
        ];
        let config = vec![
            tool("d", "operator's d"),
            tool("b", "operator's b"),
            tool("e", "e"),
        ];
        let (merged, replaced) = merge_tools(request.clone(), &config);
        let seen: Vec<(&str, &str, bool)> = merged
            .iter()
            .map(|t| {
                let name = t.name.as_deref().unwrap();
                (
                    name,
                    t.description.as_deref().unwrap(),
                    t.hidden_by.is_some(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("a", "a", false),
                ("c", "c", false),
                ("d", "operator's d", false),
                ("b", "operator's b", true),
                ("e", "e", false),
            ]
        );
        assert_eq!(unmerge_tools(merged, replaced, config.len()), request);
    }
}
