//! allowlist policy plugin (rail: tool_call).
//!
//! A model can name any tool it likes — a hallucinated one, or one a prompt injection asked for.
//! The application should only ever run tools it offered in this request, and operators often
//! need to narrow that further (a global allow/deny list, and per-principal lists keyed by the
//! principal the daemon authenticated). This plugin blocks the reply when any of its tool calls
//! falls outside those sets, naming each offending call and why.
//!
//! The decision logic lives in [`policy`] so it can be unit-tested natively; this file is only
//! the WIT glue.

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

    struct Allowlist;

    impl Plugin for Allowlist {
        fn describe() -> Info {
            Info {
                name: "allowlist".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                rails: vec![Rail::ToolCall],
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
                // Fail closed: without its config the plugin cannot know what is allowed.
                None => {
                    Verdict::Block("allowlist plugin was evaluated before it was configured".into())
                }
            })
        }
    }

    export!(Allowlist);
}
