//! schema-validator policy plugin (rail: tool_call).
//!
//! Applications hand tool arguments straight to code. A model that gets them wrong — a missing
//! required field, a string where a number is needed, malformed JSON, fields the tool does not
//! take — should be stopped here with a reason naming the tool and the failing path, not deep
//! inside the application. Every call of the model's reply is validated against the
//! `parameters` JSON Schema its tool declared; anything that cannot be validated is blocked.
//!
//! The logic lives in [`policy`] (natively unit-tested); this file is only the WIT glue plus the
//! per-instance cache of compiled validators.

pub mod policy;

// The component glue exists only in the wasm build: natively (unit tests) the crate is the
// policy logic alone, since the exported symbol names do not link on native targets.
#[cfg(target_arch = "wasm32")]
mod component {
    use super::policy::{self, Config, SchemaCache};
    use railyard_plugin_sdk::{export, Info, Plugin, Rail, Request, Verdict};
    use std::cell::RefCell;

    thread_local! {
        static CONFIG: RefCell<Option<Config>> = const { RefCell::new(None) };
        // Compiling a schema costs milliseconds; the same tools come back on every request.
        static CACHE: RefCell<SchemaCache> = RefCell::new(SchemaCache::default());
    }

    struct SchemaValidator;

    impl Plugin for SchemaValidator {
        fn describe() -> Info {
            Info {
                name: "schema-validator".into(),
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
                Some(config) => {
                    CACHE.with(|cache| policy::evaluate(config, &mut cache.borrow_mut(), &request))
                }
                // Fail closed: never let an unvalidated call through.
                None => Verdict::Block(
                    "schema-validator plugin was evaluated before it was configured".into(),
                ),
            })
        }
    }

    export!(SchemaValidator);
}
