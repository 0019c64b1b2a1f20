//! tool-linkage policy plugin (rail: tool_result).
//!
//! Tool results are the application's word that a tool ran and returned something. A result
//! that answers no call, answers one call twice, claims another tool's name, or carries content
//! of the wrong shape is either a bug in the application or an injection (text dressed up as a
//! tool's output). Such conversations are blocked with a reason naming the message and the call
//! id, before the model treats the text as a tool's output.
//!
//! The logic lives in [`policy`] (natively unit-tested); this file is only the WIT glue.

pub mod policy;

// The component glue exists only in the wasm build: natively (unit tests) the crate is the
// policy logic alone, since the exported symbol names do not link on native targets.
#[cfg(target_arch = "wasm32")]
mod component {
    use super::policy::{self, Config};
    use railyard_plugin_sdk::{export, Info, Plugin, Rail, Request, Verdict};
    use std::cell::RefCell;

    thread_local! {
        static CONFIG: RefCell<Option<Config>> = const { RefCell::new(None) };
    }

    struct ToolLinkage;

    impl Plugin for ToolLinkage {
        fn describe() -> Info {
            Info {
                name: "tool-linkage".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                rails: vec![Rail::ToolResult],
                config_schema: Some(policy::CONFIG_SCHEMA.into()),
            }
        }

        fn configure(config: String) -> Result<(), String> {
            let parsed = Config::parse(&config)?;
            CONFIG.with(|c| *c.borrow_mut() = Some(parsed));
            Ok(())
        }

        fn evaluate(request: Request) -> Verdict {
            CONFIG.with(|c| match c.borrow().as_ref() {
                Some(config) => policy::evaluate(config, &request),
                // Fail closed.
                None => Verdict::Block(
                    "tool-linkage plugin was evaluated before it was configured".into(),
                ),
            })
        }
    }

    export!(ToolLinkage);
}
