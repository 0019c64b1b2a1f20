//! A plugin for the host's own tests. Its config picks one behaviour (`mode`), so one component
//! exercises every verdict and every kind of fault the host must contain (`error`: `evaluate`
//! returns an error worded by the plugin, `text`).
// A component only: natively (e.g. `cargo test --workspace`) there is nothing to build.
#![cfg(target_arch = "wasm32")]

use railyard_plugin_sdk::{
    export, log, ArgumentsEdit, CallRef, Content, ContentEdit, Edit, Info, Level, Modification,
    Plugin, Rail, Rejection, Request, Target, Verdict,
};
use serde_json::Value;
use std::cell::RefCell;

thread_local! {
    static CONFIG: RefCell<Value> = const { RefCell::new(Value::Null) };
}

struct Scripted;

fn config_str(key: &str) -> String {
    CONFIG.with(|c| {
        c.borrow()
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    })
}

impl Plugin for Scripted {
    fn describe() -> Info {
        Info {
            name: "scripted".into(),
            version: "0.1.0".into(),
            rails: vec![Rail::Input, Rail::Output, Rail::ToolCall, Rail::ToolResult],
            config_schema: Some(
                r#"{"type":"object","required":["mode"],"properties":{
                    "mode":{"enum":["allow","block","append","reject-last","reject-tool",
                        "set-arguments","bad-index","bad-arguments","loop","oom","trap",
                        "configure-error","log","echo-context","by-message","error","count",
                        "block-if-all"]},
                    "text":{"type":"string"},
                    "triggers":{"anyOf":[{"type":"array","items":{"type":"string"}},{"const":"trap"}]},
                    "tool":{"type":"string"}}}"#
                    .into(),
            ),
        }
    }

    fn configure(config: String) -> Result<(), String> {
        let value: Value = serde_json::from_str(&config).map_err(|e| e.to_string())?;
        if value.get("mode").and_then(Value::as_str) == Some("configure-error") {
            return Err("configure refused: mode is configure-error".into());
        }
        CONFIG.with(|c| *c.borrow_mut() = value);
        Ok(())
    }

    /// `triggers` in the config, as given (the host checks them); `"trap"` traps instead.
    fn triggers() -> Option<Vec<String>> {
        let triggers = CONFIG.with(|c| c.borrow().get("triggers").cloned())?;
        if triggers == "trap" {
            panic!("scripted plugin asked to trap in triggers");
        }
        serde_json::from_value(triggers).ok()
    }

    fn evaluate(request: Request) -> Result<Verdict, String> {
        let last = request.messages.len().saturating_sub(1) as u32;
        let text = config_str("text");
        let mut mode = config_str("mode");
        if mode == "by-message" {
            // The behaviour is the last message's text, so one pooled plugin can be driven
            // through a fault and then asked to work normally again.
            mode = request
                .messages
                .last()
                .and_then(|m| m.text())
                .unwrap_or("allow")
                .to_string();
        }
        Ok(match mode.as_str() {
            "block" => Verdict::Block(text),
            // Blocks a last message holding every comma-separated word of `text`: a verdict on
            // the text as a whole, which no window of it gives.
            "block-if-all" => {
                let last = request.messages.last().and_then(|m| m.text()).unwrap_or("");
                match text.split(',').all(|w| last.contains(w)) {
                    true => Verdict::Block(format!("holds all of {text}")),
                    false => Verdict::Allow,
                }
            }
            // The plugin's own error: a fault the host resolves by on_error.
            "error" => return Err(text),
            "append" => {
                let old = request
                    .messages
                    .last()
                    .and_then(|m| m.text())
                    .unwrap_or("")
                    .to_string();
                Verdict::Modify(Modification {
                    edits: vec![Edit::Content(ContentEdit {
                        message: last,
                        content: Content::Text(old + &text),
                    })],
                    reason: format!("appended {} bytes", text.len()),
                })
            }
            // How many messages and declared tools it was given, appended to the last message
            // (`history = false`, `declared_tools = false`).
            "count" => Verdict::Modify(Modification {
                edits: vec![Edit::Content(ContentEdit {
                    message: last,
                    content: Content::Text(format!(
                        "{}{text}[{} messages, {} tools]",
                        request.messages.last().and_then(|m| m.text()).unwrap_or(""),
                        request.messages.len(),
                        request.tools.len()
                    )),
                })],
                reason: "counted".into(),
            }),
            "reject-last" => Verdict::Reject(vec![Rejection {
                target: Target::Message(last),
                message: text,
            }]),
            "reject-tool" => {
                let tool = config_str("tool");
                let mut out = Vec::new();
                for (m, msg) in request.messages.iter().enumerate() {
                    for (c, call) in msg.tool_calls.iter().enumerate() {
                        if call.name == tool {
                            out.push(Rejection {
                                target: Target::ToolCall(CallRef {
                                    message: m as u32,
                                    call: c as u32,
                                }),
                                message: format!("{text} ({})", call.name),
                            });
                        }
                    }
                }
                if out.is_empty() {
                    Verdict::Allow
                } else {
                    Verdict::Reject(out)
                }
            }
            "set-arguments" | "bad-arguments" => {
                let args = if mode == "bad-arguments" {
                    "{not json".to_string()
                } else {
                    text
                };
                let mut edits = Vec::new();
                for (m, msg) in request.messages.iter().enumerate() {
                    for c in 0..msg.tool_calls.len() {
                        edits.push(Edit::Arguments(ArgumentsEdit {
                            message: m as u32,
                            call: c as u32,
                            arguments: args.clone(),
                        }));
                    }
                }
                Verdict::Modify(Modification {
                    edits,
                    reason: "arguments replaced".into(),
                })
            }
            "bad-index" => Verdict::Modify(Modification {
                edits: vec![Edit::Content(ContentEdit {
                    message: last + 100,
                    content: Content::Text("out of range".into()),
                })],
                reason: "edit out of range".into(),
            }),
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "oom" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![7u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "trap" => panic!("scripted plugin asked to trap"),
            "log" => {
                log(Level::Warn, "hello from the guest log import");
                eprintln!("hello from guest stderr");
                Verdict::Allow
            }
            "echo-context" => Verdict::Block(format!(
                "principal={} tenant={} request={} rail={:?} metadata={:?}",
                request.context.principal.as_deref().unwrap_or("-"),
                request.context.tenant.as_deref().unwrap_or("-"),
                request.context.request_id,
                request.rail,
                request.context.metadata,
            )),
            _ => Verdict::Allow,
        })
    }
}

export!(Scripted);
