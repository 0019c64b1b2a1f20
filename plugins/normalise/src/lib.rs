//! normalise policy plugin (rail: tool_call, verdict: modify).
//!
//! Models often get argument *types* slightly wrong in ways whose intent is unambiguous given
//! the tool's declared schema: `"true"` for a boolean, `"3"` for an integer, a lone value where
//! an array is declared. Blocking those calls (schema-validator would) costs a round trip for
//! nothing, so this plugin runs before the validator and repairs exactly those cases, guided by
//! the schema, and nothing else. What it changes is listed by path in the reason, never by value.
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

    struct Normalise;

    impl Plugin for Normalise {
        fn describe() -> Info {
            Info {
                name: "normalise".into(),
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
                // Repairing is a convenience, never a guard: unconfigured, change nothing.
                None => Verdict::Allow,
            })
        }
    }

    export!(Normalise);
}
