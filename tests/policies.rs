//! The golden cases in `policies/tests/**/*.json` (format in `policies/tests/README.md`), run
//! through the real bundled plugins and chains.

use crate::support::*;
use railyard::payload::{Context, Payload, Rail};
use railyard::policy::PolicySet;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn cases(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            cases(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

fn context(case: &Value) -> Context {
    let c = &case["context"];
    Context {
        request_id: "golden".into(),
        principal: c["principal"].as_str().map(str::to_string),
        tenant: c["tenant"].as_str().map(str::to_string),
        metadata: c["metadata"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Run one case; returns what went wrong, if anything.
fn run(case_path: &Path, sets: &mut HashMap<PathBuf, PolicySet>) -> Result<(), String> {
    let text = std::fs::read_to_string(case_path).unwrap();
    let case: Value = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    let dir = root().join("policies/tests");
    let config = match case["config"].as_str() {
        Some(rel) => dir.join(rel),
        None => root().join("policies/railyard.toml"),
    };
    if !sets.contains_key(&config) {
        let set = PolicySet::load(&config, engine()).map_err(|e| e.to_string())?;
        sets.insert(config.clone(), set);
    }
    let set = &sets[&config];
    let rail = Rail::parse(case["rail"].as_str().unwrap_or("")).ok_or("missing or unknown rail")?;
    let payload = Payload::from_openai(&case["payload"]).map_err(|e| e.to_string())?;
    let eval = set.check(rail, payload, &context(&case));
    let result = eval.to_json();
    let expect = &case["expect"];
    let got = result["verdict"].as_str().unwrap_or_default();
    if Some(got) != expect["verdict"].as_str() {
        return Err(format!(
            "verdict {got}, expected {}; decisions: {}",
            expect["verdict"], result["decisions"]
        ));
    }
    let reasons: Vec<String> = eval
        .decisions
        .iter()
        .filter_map(|d| d.reason.clone())
        .collect();
    if let Some(want) = expect["reason_contains"].as_str() {
        if !reasons.iter().any(|r| r.contains(want)) {
            return Err(format!("no reason contains {want:?}; reasons: {reasons:?}"));
        }
    }
    if !expect["messages"].is_null() && result["payload"]["messages"] != expect["messages"] {
        return Err(format!(
            "edited messages differ\n  got:      {}\n  expected: {}",
            result["payload"]["messages"], expect["messages"]
        ));
    }
    if let Some(absent) = expect["absent"].as_array() {
        // A blocked payload is the caller's own input, returned unchanged: only what Railyard
        // says (reasons, rejections) must not repeat it.
        let mut said = result.clone();
        if eval.verdict == railyard::chain::Verdict::Block {
            said["payload"] = Value::Null;
        }
        let everything = format!("{said}");
        for value in absent.iter().filter_map(Value::as_str) {
            if everything.contains(value) {
                return Err(format!("{value:?} still appears in the result or a reason"));
            }
        }
    }
    Ok(())
}

#[test]
fn golden_policy_cases() {
    let mut paths = Vec::new();
    cases(&root().join("policies/tests"), &mut paths);
    paths.sort();
    assert!(!paths.is_empty(), "no golden cases found");
    let mut sets = HashMap::new();
    let mut failures = Vec::new();
    for path in &paths {
        if let Err(e) = run(path, &mut sets) {
            failures.push(format!(
                "{}: {e}",
                path.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden cases failed:\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}
