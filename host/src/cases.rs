//! `railyard test`: policy unit tests, in the spirit of `opa test`. Case files next to a policy or
//! config give a rail, a payload, a caller and what must come out; the runner loads the real
//! components through the real chain (the same [`PolicySet::check`] the daemon runs) and reports
//! each case, with a diff when an edited payload differs.
//!
//! A case file is JSON or YAML (`.yaml`/`.yml`, the same structure): one case, or
//! `{"config": "...", "cases": [...]}`. A case:
//!
//! ```json
//! {"name": "...", "rail": "input", "config": "../railyard.toml",
//!  "context": {"principal": "alice", "tenant": "acme", "metadata": {"k": "v"}},
//!  "payload": {"messages": [...], "tools": [...]},
//!  "expect": {"verdict": "modify", "reason_contains": "...", "messages": [...],
//!             "absent": ["..."]}}
//! ```
//!
//! `config` (on the case, else on the file) is relative to the case file; without one, the
//! nearest `railyard.toml` in the case file's folder or above is used. `"rail"` may list rails
//! run in order (`["tools", "tool_call"]`); `"partial": true` judges an output as streamed text
//! with more to come.

use crate::engine::{ComponentCache, Engine};
use crate::model::Verdict;
use crate::model::{Context, Payload, Rail};
use crate::policy::PolicySet;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Folders never searched for case files.
const SKIPPED_DIRS: [&str; 4] = ["node_modules", "target", "templates", "__pycache__"];

/// One case's outcome.
#[derive(Debug)]
pub struct Outcome {
    /// The case file.
    pub file: PathBuf,
    /// The case's name (its `name`, else `description`, else its position).
    pub name: String,
    /// `None` when it passed; otherwise what went wrong, ready to print (may span lines).
    pub failure: Option<String>,
}

/// Every case file under `paths`: files given are taken as they are; folders are searched for
/// `*.json`, `*.yaml` and `*.yml` files inside a `tests` folder (so `package.json` and friends are
/// left alone),
/// skipping hidden folders, `node_modules`, `target` and `templates`.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    for path in paths {
        if path.is_file() {
            found.push(path.clone());
        } else if path.is_dir() {
            let abs = std::path::absolute(path).unwrap_or_else(|_| path.clone());
            let in_tests = abs.components().any(|c| c.as_os_str() == "tests");
            walk(path, in_tests, &mut found).map_err(|e| format!("{}: {e}", path.display()))?;
        } else {
            return Err(format!("{}: no such file or folder", path.display()));
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

fn walk(dir: &Path, in_tests: bool, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name.starts_with('.') || SKIPPED_DIRS.contains(&name) {
                continue;
            }
            walk(&path, in_tests || name == "tests", out)?;
        } else if in_tests && [".json", ".yaml", ".yml"].iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
    Ok(())
}

/// Runs cases, loading each config once.
pub struct Runner {
    engine: Engine,
    sets: HashMap<PathBuf, Result<PolicySet, String>>,
}

impl Runner {
    /// A runner with its own engine (compiled plugins cached in the default cache folder).
    pub fn new() -> Result<Runner, String> {
        let engine = Engine::new(ComponentCache::new(ComponentCache::default_dir()))
            .map_err(|e| format!("cannot start the wasm engine: {e}"))?;
        Ok(Runner {
            engine,
            sets: HashMap::new(),
        })
    }

    /// Run every case of `file`.
    pub fn run_file(&mut self, file: &Path) -> Vec<Outcome> {
        let fail = |name: String, why: String| {
            vec![Outcome {
                file: file.to_owned(),
                name,
                failure: Some(why),
            }]
        };
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => return fail("(file)".into(), format!("cannot read: {e}")),
        };
        let yaml = file.extension().is_some_and(|e| e == "yaml" || e == "yml");
        let doc: Result<Value, String> = if yaml {
            yaml_serde::from_str(&text).map_err(|e| format!("not valid YAML: {e}"))
        } else {
            serde_json::from_str(&text).map_err(|e| format!("not valid JSON: {e}"))
        };
        let doc = match doc {
            Ok(v) => v,
            Err(e) => return fail("(file)".into(), e),
        };
        let (file_config, cases): (Option<&str>, Vec<&Value>) = match &doc["cases"] {
            Value::Array(list) => (doc["config"].as_str(), list.iter().collect()),
            Value::Null if doc.get("rail").is_some() => (None, vec![&doc]),
            _ => {
                return fail(
                    "(file)".into(),
                    "not a case file: expected an object with \"rail\" (one case) or \"cases\" (a list)"
                        .into(),
                )
            }
        };
        let dir = file.parent().unwrap_or(Path::new("."));
        cases
            .into_iter()
            .enumerate()
            .map(|(i, case)| {
                let name = case["name"]
                    .as_str()
                    .or(case["description"].as_str())
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("case {}", i + 1));
                let config = case["config"].as_str().or(file_config);
                let failure = self.run_case(dir, config, case).err();
                Outcome {
                    file: file.to_owned(),
                    name,
                    failure,
                }
            })
            .collect()
    }

    fn set(&mut self, config: PathBuf) -> Result<&PolicySet, String> {
        let engine = &self.engine;
        self.sets
            .entry(config.clone())
            .or_insert_with(|| PolicySet::load(&config, engine).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| format!("the config does not load:\n{e}"))
    }

    fn run_case(&mut self, dir: &Path, config: Option<&str>, case: &Value) -> Result<(), String> {
        let config = match config {
            Some(rel) => dir.join(rel),
            None => nearest_config(dir).ok_or_else(|| {
                format!(
                    "no \"config\" given and no railyard.toml in {} or above",
                    dir.display()
                )
            })?,
        };
        let rails = rails(&case["rail"])?;
        let partial = match &case["partial"] {
            Value::Null => false,
            Value::Bool(b) if !*b || rails.last() == Some(&Rail::Output) => *b,
            _ => {
                return Err(
                    "\"partial\" must be a boolean, and true only on the output rail".into(),
                )
            }
        };
        let mut payload = Payload::from_openai(&case["payload"])
            .map_err(|e| format!("\"payload\" is not an OpenAI chat payload: {e}"))?;
        // The text fields the doors pass to plugins (chat's `user`, Anthropic's user id).
        if let Some(body) = case["payload"].as_object() {
            for path in ["user", "metadata.user_id"] {
                payload.fields.extend(crate::codec::read_field(body, path));
            }
        }
        let expect = &case["expect"];
        let want = expect["verdict"]
            .as_str()
            .ok_or("\"expect.verdict\" is required (allow, modify, reject or block)")?;
        if !["allow", "modify", "reject", "block"].contains(&want) {
            return Err(format!(
                "\"expect.verdict\" '{want}' is not one of allow, modify, reject, block"
            ));
        }
        let ctx = context(&case["context"]);
        let set = self.set(config)?;
        // Guard models are never asked here: a case gives their answers (`guard`, by model
        // name), and a model without one is unavailable, so cases stay deterministic.
        let recorded: Vec<(String, Value)> = match &case["guard"] {
            Value::Null => Vec::new(),
            Value::Object(answers) => answers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            _ => return Err("\"guard\" must map guard model names to their answers".into()),
        };
        let mut caps = crate::caps::RequestCaps {
            vault: set.has_vault().then(Default::default),
            ..Default::default()
        };
        if let Some(scope) = set.guard_scope(ctx.tenant.as_deref()) {
            let mut scope = std::sync::Arc::into_inner(scope).expect("a fresh scope");
            scope.recorded = Some(recorded);
            caps.guard = Some(std::sync::Arc::new(scope));
        } else if !recorded.is_empty() {
            return Err("\"guard\" gives answers, but the config has no [[guard_models]]".into());
        }
        if let Some(t) = &ctx.tenant {
            if !set.has_tenant(t) {
                return Err(format!("the config has no tenant '{t}'"));
            }
        }
        let eval = crate::util::block_on(run_rails(set, &rails, payload, &ctx, &caps, partial));
        let result = eval.to_json();
        let decisions: Vec<String> = eval
            .decisions
            .iter()
            .map(|d| {
                let reason = d
                    .reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                format!("{} {}{reason}", d.plugin, d.verdict.as_str())
            })
            .collect();
        let mut problems = String::new();
        if eval.verdict.as_str() != want {
            let _ = writeln!(
                problems,
                "verdict: expected {want}, got {}",
                eval.verdict.as_str()
            );
        }
        if let Some(part) = expect["reason_contains"].as_str() {
            if !eval
                .decisions
                .iter()
                .any(|d| d.reason.as_deref().is_some_and(|r| r.contains(part)))
            {
                let _ = writeln!(problems, "no reason contains {part:?}");
            }
        }
        // The vault's placeholders depend on the daemon's key: a case writes them by number.
        let got = crate::caps::vault::Numbering::default().json(&result["payload"]["messages"]);
        if !expect["messages"].is_null() && got != expect["messages"] {
            let _ = writeln!(problems, "edited messages differ (- expected, + got):");
            problems.push_str(&diff(&expect["messages"], &got));
        }
        if let Some(absent) = expect["absent"].as_array() {
            // A blocked payload is the caller's own input, returned as it came: only what
            // Railyard says about it (reasons, rejections) must not repeat it.
            let mut said = result.clone();
            if eval.verdict == Verdict::Block {
                said["payload"] = Value::Null;
            }
            let everything = said.to_string();
            for value in absent.iter().filter_map(Value::as_str) {
                if everything.contains(value) {
                    let _ = writeln!(
                        problems,
                        "{value:?} still appears in the result or a reason"
                    );
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            let _ = writeln!(problems, "decisions:");
            for d in decisions {
                let _ = writeln!(problems, "  {d}");
            }
            Err(problems.trim_end().to_string())
        }
    }
}

/// `"rail"`: one rail, or several run in order as the daemon does (`["tools", "tool_call"]`: a
/// call to a tool the tools rail hid).
fn rails(value: &Value) -> Result<Vec<Rail>, String> {
    let bad = || {
        format!(
            "\"rail\" must be one of {}, or a list of them",
            Rail::EXPECTED
        )
    };
    let names: Vec<&Value> = match value {
        Value::Array(list) if !list.is_empty() => list.iter().collect(),
        Value::String(_) => vec![value],
        _ => return Err(bad()),
    };
    names
        .into_iter()
        .map(|n| n.as_str().and_then(Rail::parse).ok_or_else(bad))
        .collect()
}

/// Runs `rails` in order, each on the payload the previous one left, until one blocks. The
/// result is the last evaluation, with every rail's decisions and rejections and the strongest
/// verdict.
async fn run_rails(
    set: &PolicySet,
    rails: &[Rail],
    payload: Payload,
    ctx: &Context,
    caps: &crate::caps::RequestCaps,
    partial: bool,
) -> crate::policy::chain::Evaluation {
    let (last, earlier) = rails.split_last().expect("at least one rail");
    let mut payload = payload;
    let mut decisions = Vec::new();
    let mut rejections = Vec::new();
    let mut verdict = Verdict::Allow;
    for rail in earlier {
        let eval = set.check_with(*rail, payload, ctx, caps, false).await;
        if eval.verdict == Verdict::Block {
            let mut eval = eval;
            decisions.append(&mut eval.decisions);
            eval.decisions = decisions;
            return eval;
        }
        verdict = verdict.max(eval.verdict);
        decisions.extend(eval.decisions);
        rejections.extend(eval.rejections);
        payload = eval.payload;
    }
    let mut eval = set.check_with(*last, payload, ctx, caps, partial).await;
    decisions.append(&mut eval.decisions);
    rejections.append(&mut eval.rejections);
    eval.decisions = decisions;
    eval.rejections = rejections;
    eval.verdict = eval.verdict.max(verdict);
    eval
}

/// The nearest `railyard.toml` in `dir` or above.
fn nearest_config(dir: &Path) -> Option<PathBuf> {
    let dir = std::path::absolute(dir).ok()?;
    dir.ancestors()
        .map(|d| d.join("railyard.toml"))
        .find(|p| p.is_file())
}

fn context(c: &Value) -> Context {
    Context {
        request_id: "railyard-test".into(),
        principal: c["principal"].as_str().map(str::to_string),
        tenant: c["tenant"].as_str().map(str::to_string),
        metadata: c["metadata"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map_or_else(|| v.to_string(), str::to_string),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        model: c["model"].as_str().map(str::to_string),
        door: c["door"].as_str().unwrap_or("check").to_string(),
    }
}

/// A line diff of two JSON values, pretty-printed.
fn diff(expected: &Value, got: &Value) -> String {
    let a = serde_json::to_string_pretty(expected).unwrap_or_default();
    let b = serde_json::to_string_pretty(got).unwrap_or_default();
    let mut out = String::new();
    for change in similar::TextDiff::from_lines(&a, &b).iter_all_changes() {
        let sign = match change.tag() {
            similar::ChangeTag::Delete => "-",
            similar::ChangeTag::Insert => "+",
            similar::ChangeTag::Equal => " ",
        };
        let _ = writeln!(out, "  {sign} {}", change.value().trim_end_matches('\n'));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_marks_changed_lines() {
        let d = diff(
            &serde_json::json!({"a": 1, "b": 2}),
            &serde_json::json!({"a": 1, "b": 3}),
        );
        assert!(
            d.contains("  -   \"b\": 2") && d.contains("  +   \"b\": 3"),
            "{d}"
        );
    }

    #[test]
    fn discovery_takes_json_under_tests_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "package.json",
            "tests/a.json",
            "tests/deep/b.json",
            "node_modules/tests/c.json",
            "x/tests/d.json",
            "tests/readme.md",
            "tests/e.yaml",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "{}").unwrap();
        }
        let found = discover(&[root.to_path_buf()]).unwrap();
        let rel: Vec<_> = found
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(
            rel,
            [
                "tests/a.json",
                "tests/deep/b.json",
                "tests/e.yaml",
                "x/tests/d.json"
            ]
        );
        assert!(discover(&[root.join("missing")]).is_err());
    }
}
