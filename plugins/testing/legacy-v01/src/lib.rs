//! A plugin built against contract 0.1.0 (`wit/v0.1/policy.wit`, its own bindings, not the SDK),
//! which the host still speaks: it appends a marker (config `marker`, default
//! ` [legacy-v01]`) to the text of the last user message, a modify, so a test can see a 0.1 and
//! a 0.2 plugin run in one chain with both edits landing.
// A component only: natively (e.g. `cargo test --workspace`) there is nothing to build.
#![cfg(target_arch = "wasm32")]

wit_bindgen::generate!({ path: "../../../wit/v0.1", world: "policy" });

use exports::railyard::policy::plugin::Guest;
use railyard::policy::types::{
    Content, ContentEdit, Edit, Info, Modification, Rail, Request, Verdict,
};
use std::cell::RefCell;

const DEFAULT_MARKER: &str = " [legacy-v01]";

thread_local! {
    static MARKER: RefCell<String> = RefCell::new(DEFAULT_MARKER.to_string());
}

struct Legacy;

impl Guest for Legacy {
    fn describe() -> Info {
        Info {
            name: "legacy-v01".into(),
            version: "0.1.0".into(),
            rails: vec![Rail::Input, Rail::ToolResult],
            config_schema: Some(
                r#"{"type":"object","additionalProperties":false,
                    "properties":{"marker":{"type":"string","minLength":1}}}"#
                    .into(),
            ),
        }
    }

    fn configure(config: String) -> Result<(), String> {
        let config: serde_json::Value =
            serde_json::from_str(&config).map_err(|e| format!("config: {e}"))?;
        if let Some(marker) = config.get("marker").and_then(|m| m.as_str()) {
            MARKER.with(|m| *m.borrow_mut() = marker.to_string());
        }
        Ok(())
    }

    fn evaluate(request: Request) -> Verdict {
        let Some((index, text)) = request
            .messages
            .iter()
            .enumerate()
            .rev()
            .find(|(_, m)| m.role == "user")
            .and_then(|(i, m)| match &m.content {
                Some(Content::Text(t)) => Some((i, t.clone())),
                _ => None,
            })
        else {
            return Verdict::Allow;
        };
        let marker = MARKER.with(|m| m.borrow().clone());
        Verdict::Modify(Modification {
            edits: vec![Edit::Content(ContentEdit {
                message: index as u32,
                content: Content::Text(text + &marker),
            })],
            reason: format!("legacy-v01 (contract 0.1.0) marked message {index}"),
        })
    }
}

export!(Legacy);
