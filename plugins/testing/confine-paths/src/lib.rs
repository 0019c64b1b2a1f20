//! The Rust twin of the C template's policy (`host/templates/c/plugin.c`): the same contract
//! bindings as the C plugin (plain 0.2, not the SDK's packed request), the same behaviour and the
//! same test cases (`tests/polyglot.rs` runs the template's cases against both), so that
//! `cargo bench --bench languages` compares the languages and not two policies. See the C file
//! for what it does.
// A component only: natively (e.g. `cargo test --workspace`) there is nothing to build.
#![cfg(target_arch = "wasm32")]

use serde_json::Value;
use std::cell::RefCell;

wit_bindgen::generate!({
    path: "../../../wit/v0.2",
    world: "policy",
});

use exports::railyard::policy::plugin::Guest;
use railyard::policy::types::{CallRef, Info, Rail, Rejection, Request, Target, ToolCall, Verdict};

const NAME: &str = "confine-paths";
const MAX_DEPTH: usize = 64;

struct Config {
    /// Resolved, without a trailing `/`.
    allowed: Vec<String>,
    block: bool,
}

thread_local! {
    static CONFIG: RefCell<Option<Config>> = const { RefCell::new(None) };
}

struct ConfinePaths;

impl Guest for ConfinePaths {
    fn describe() -> Info {
        Info {
            name: NAME.into(),
            version: "0.1.0".into(),
            rails: vec![Rail::ToolCall],
            config_schema: Some(
                r#"{"type":"object","additionalProperties":false,"properties":{
                "allowed":{"type":"array","items":{"type":"string","pattern":"^/"},"minItems":1,"maxItems":64},
                "action":{"enum":["reject","block"]}}}"#
                    .into(),
            ),
        }
    }

    fn configure(text: String) -> Result<(), String> {
        let value: Value = serde_json::from_str(&text).map_err(|_| "config is not valid JSON")?;
        let mut config = Config {
            allowed: Vec::new(),
            block: false,
        };
        for (key, v) in value.as_object().ok_or("config must be an object")? {
            match (key.as_str(), v) {
                ("action", Value::String(a)) if a == "block" || a == "reject" => {
                    config.block = a == "block"
                }
                ("allowed", Value::Array(items)) => {
                    for item in items {
                        let s = item
                            .as_str()
                            .filter(|s| s.starts_with('/') && !s.contains('\0'));
                        let resolved = s.and_then(resolve);
                        config.allowed.push(
                            resolved.ok_or("every 'allowed' folder must be an absolute path")?,
                        );
                    }
                }
                _ => {
                    return Err(
                        "config fields are 'allowed' (a list of folders) and 'action'".into(),
                    )
                }
            }
        }
        if config.allowed.is_empty() {
            return Err("'allowed' must list at least one folder".into());
        }
        CONFIG.with(|c| *c.borrow_mut() = Some(config));
        Ok(())
    }

    fn evaluate(request: Request) -> Result<Verdict, String> {
        CONFIG.with(|c| {
            let c = c.borrow();
            let config = c.as_ref().ok_or("evaluated before it was configured")?;
            Ok(evaluate(config, &request))
        })
    }
}

export!(ConfinePaths);

fn evaluate(config: &Config, request: &Request) -> Verdict {
    if request.rail != Rail::ToolCall {
        return Verdict::Allow;
    }
    let Some(last) = request.messages.len().checked_sub(1) else {
        return Verdict::Allow;
    };
    let mut rejections = Vec::new();
    for (i, call) in request.messages[last].tool_calls.iter().enumerate() {
        let Some(why) = refusal(config, call, i) else {
            continue;
        };
        if config.block {
            return Verdict::Block(why);
        }
        rejections.push(Rejection {
            target: Target::ToolCall(CallRef {
                message: last as u32,
                call: i as u32,
            }),
            message: why,
        });
    }
    if rejections.is_empty() {
        Verdict::Allow
    } else {
        Verdict::Reject(rejections)
    }
}

fn refusal(config: &Config, call: &ToolCall, i: usize) -> Option<String> {
    let args = call.arguments.trim_matches([' ', '\n', '\t', '\r']);
    if args.is_empty() {
        return None;
    }
    let name: String = call.name.chars().take(64).collect();
    let Ok(value) = serde_json::from_str::<Value>(args) else {
        return Some(format!(
            "tool call {i} ('{name}') has arguments that are not valid JSON"
        ));
    };
    let (outside, key) = match &value {
        Value::Object(map) => map
            .iter()
            .find_map(|(k, v)| outside(config, v).then_some((true, Some(k.as_str()))))
            .unwrap_or((false, None)),
        v => (outside(config, v), None),
    };
    if depth(&value) > MAX_DEPTH {
        return Some(format!(
            "tool call {i} ('{name}') has arguments that are not valid JSON"
        ));
    }
    outside.then(|| {
        let plain = key.filter(|k| {
            !k.is_empty()
                && k.len() <= 64
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
        let argument = plain
            .map(|k| format!(" (argument '{k}')"))
            .unwrap_or_default();
        format!("tool call {i} ('{name}') names a path outside the allowed folders{argument}")
    })
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Whether a string in `v` is a path outside the allowed folders.
fn outside(config: &Config, v: &Value) -> bool {
    match v {
        Value::String(s) => is_path(s) && !allowed(config, s),
        Value::Array(a) => a.iter().any(|v| outside(config, v)),
        Value::Object(o) => o.values().any(|v| outside(config, v)),
        _ => false,
    }
}

fn is_sep(b: u8) -> bool {
    b == b'/' || b == b'\\'
}

fn is_path(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() {
        return false;
    }
    if b[0] == b'/' || b[0] == b'~' || b[0] == b'\\' || s.starts_with("file:") {
        return true;
    }
    if b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && is_sep(b[2]) {
        return true;
    }
    s.split(['/', '\\']).any(|seg| seg == "..")
}

/// `s` resolved lexically (`/a/b`), or `None` when a `..` climbs above its root.
fn resolve(s: &str) -> Option<String> {
    let mut out = String::new();
    for seg in s.split(['/', '\\']) {
        match seg {
            "" | "." => {}
            ".." => {
                let cut = out.rfind('/')?;
                out.truncate(cut);
            }
            seg => {
                out.push('/');
                out.push_str(seg);
            }
        }
    }
    Some(out)
}

fn allowed(config: &Config, s: &str) -> bool {
    if s.contains('\0') || s.starts_with('~') || s.as_bytes().get(1) == Some(&b':') {
        return false;
    }
    let (rest, relative) = match s.strip_prefix("file:") {
        Some(rest) => match rest.strip_prefix("//") {
            Some(r) if r.starts_with('/') => (r, false),
            Some(_) => return false,
            None => (rest, false),
        },
        None => (s, !(s.starts_with('/') || s.starts_with('\\'))),
    };
    let Some(resolved) = resolve(rest) else {
        return false;
    };
    relative
        || config.allowed.iter().any(|a| {
            resolved.starts_with(a.as_str())
                && matches!(resolved.as_bytes().get(a.len()), None | Some(b'/'))
        })
}
