//! Shared fixtures for the black-box tests.

use railyard::config::Config;
use railyard::engine::{ComponentCache, Engine};
use railyard::payload::{Context, Payload};
use railyard::policy::PolicySet;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A compiled plugin, by crate name (`scripted`, `pii_filter`, ...).
pub fn plugin(name: &str) -> PathBuf {
    let path = Path::new(env!("RAILYARD_PLUGIN_DIR")).join(format!("{name}.wasm"));
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// One engine for the whole test binary (as in the daemon), caching compiled plugins in a
/// directory of its own.
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("railyard-test-cache-{}", std::process::id()));
        Engine::new(ComponentCache::new(Some(dir))).expect("engine")
    })
}

/// A config file in a fresh temporary directory (kept alive by the returned guard).
pub struct TempConfig {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

/// A config that says nothing of `[auth]` runs open, as it says so outright (`[auth] open =
/// true`): the daemon refuses to start on a config that does not say how callers authenticate.
pub fn write_config(toml: &str) -> TempConfig {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("railyard.toml");
    std::fs::write(&path, with_auth(toml)).unwrap();
    TempConfig { _dir: dir, path }
}

/// `toml` with `[auth] open = true` when it has no `[auth]` of its own.
pub fn with_auth(toml: &str) -> String {
    if toml.contains("[auth]") || toml.contains("[[auth.") {
        toml.to_string()
    } else {
        // At the end, so the lines tests name in config errors stay where they were.
        format!("{toml}\n\n[auth]\nopen = true\n")
    }
}

/// TOML for one `[[plugins]]` entry of the scripted test plugin.
pub fn scripted(name: &str, rails: &str, extra: &str, config: &str) -> String {
    format!(
        "[[plugins]]\nname = \"{name}\"\npath = \"{}\"\nrails = {rails}\n{extra}\nconfig = {config}\n\n",
        plugin("scripted").display()
    )
}

/// Build a policy set from config text.
pub fn policy_set(toml: &str) -> PolicySet {
    let cfg = write_config(toml);
    let config = Config::load(&cfg.path).unwrap_or_else(|e| panic!("{e}"));
    PolicySet::build(config, engine()).unwrap_or_else(|e| panic!("{e}"))
}

/// Build a policy set, expecting an error; returns its text.
pub fn policy_error(toml: &str) -> String {
    let cfg = write_config(toml);
    let result = Config::load(&cfg.path).and_then(|c| PolicySet::build(c, engine()));
    match result {
        Ok(_) => panic!("config was accepted:\n{toml}"),
        Err(e) => e.to_string(),
    }
}

/// A payload from OpenAI JSON.
pub fn payload(body: Value) -> Payload {
    Payload::from_openai(&body).unwrap()
}

/// A one-user-message payload.
pub fn user(text: &str) -> Payload {
    payload(json!({"messages": [{"role": "user", "content": text}]}))
}

/// A context with a request id.
pub fn ctx() -> Context {
    Context {
        request_id: "test".into(),
        ..Context::default()
    }
}

/// A generous bound for "eventually": reloads take ~100 ms; CI machines can be slow.
pub const EVENTUALLY: std::time::Duration = std::time::Duration::from_secs(20);

/// Poll `f` until it holds, failing the test after [`EVENTUALLY`].
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + EVENTUALLY;
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "not within {EVENTUALLY:?}: {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
}

/// The SHA-256 (hex) config stores for an API key.
pub fn hash(key: &str) -> String {
    railyard::auth::hash_hex(key)
}

/// One API key entry in `[[table]]` (`auth.keys` in a config, `keys` in a keys file).
pub fn key_entry(table: &str, key: &str, principal: &str, tenant: Option<&str>) -> String {
    let tenant = tenant
        .map(|t| format!("tenant = \"{t}\"\n"))
        .unwrap_or_default();
    format!(
        "[[{table}]]\nsha256 = \"{}\"\nprincipal = \"{principal}\"\n{tenant}\n",
        hash(key)
    )
}

/// The bundled config (`policies/railyard.toml`) in a temporary directory, with its relative
/// paths made absolute and each `(from, to)` text replacement applied (each must match).
pub fn bundled_with(edits: &[(&str, &str)]) -> TempConfig {
    let policies = root().join("policies");
    let mut text = std::fs::read_to_string(policies.join("railyard.toml")).unwrap();
    text = text
        .replace(
            "path = \"../target/",
            &format!("path = \"{}/target/", root().display()),
        )
        .replace(
            "keys_file = \"keys.toml\"",
            &format!("keys_file = \"{}\"", policies.join("keys.toml").display()),
        );
    for (from, to) in edits {
        assert!(text.contains(from), "the bundled config has no {from:?}");
        text = text.replacen(from, to, 1);
    }
    write_config(&text)
}

/// The model's own id inside a tool-call id the daemon signed, or the id as it is.
pub use railyard::model::model_id;

/// The venv's Python, with the client SDKs the tests drive (`scripts/setup.sh` makes it).
pub fn python() -> PathBuf {
    let python = root().join(".venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run scripts/setup.sh (it installs the SDKs and grpcio the tests use)",
        python.display()
    );
    python
}

/// `calls` (JSON tool calls) with the daemon's signed ids replaced by the model's own.
pub fn unsigned(mut calls: serde_json::Value) -> serde_json::Value {
    if let Some(list) = calls.as_array_mut() {
        for c in list {
            if let Some(id) = c["id"].as_str() {
                c["id"] = serde_json::Value::String(model_id(id).to_string());
            }
        }
    }
    calls
}

/// Runs a policy set's chains where nothing waits (no plugin in these tests is granted guard
/// models), so a check finishes at its first poll.
pub trait CheckNow {
    /// [`PolicySet::check`], finished.
    fn check_now(
        &self,
        rail: railyard::model::Rail,
        payload: Payload,
        ctx: &Context,
    ) -> railyard::policy::chain::Evaluation;
    /// [`PolicySet::check_with`], finished.
    fn check_with_now(
        &self,
        rail: railyard::model::Rail,
        payload: Payload,
        ctx: &Context,
        partial: bool,
    ) -> railyard::policy::chain::Evaluation;
}

impl CheckNow for PolicySet {
    fn check_now(
        &self,
        rail: railyard::model::Rail,
        payload: Payload,
        ctx: &Context,
    ) -> railyard::policy::chain::Evaluation {
        now(self.check(rail, payload, ctx))
    }
    fn check_with_now(
        &self,
        rail: railyard::model::Rail,
        payload: Payload,
        ctx: &Context,
        partial: bool,
    ) -> railyard::policy::chain::Evaluation {
        now(self.check_with(rail, payload, ctx, &railyard::caps::NONE, partial))
    }
}

/// `future`, which must not wait, finished.
pub fn now<F: std::future::Future>(future: F) -> F::Output {
    futures_util::FutureExt::now_or_never(future).expect("nothing in these checks waits")
}

/// `text` with each of the vault's placeholders (`[EMAIL_7KQ2M9XA]`, pii's `reversible`, which
/// the bundled config turns on) written as its type's (`[EMAIL]`): what was redacted, whichever
/// way.
pub fn typed(text: &str) -> String {
    railyard::caps::vault::rewrite(text, &mut |kind, _| format!("[{kind}]"))
}

/// `value` with [`typed`] applied to every string and key.
pub fn typed_json(value: &Value) -> Value {
    railyard::caps::vault::rewrite_json(value, &mut |kind, _| format!("[{kind}]"))
}
