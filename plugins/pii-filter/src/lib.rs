//! pii-filter: finds personal data and credentials in LLM traffic and redacts them (or blocks
//! the request), so they don't reach the model provider or come back to the application.
//!
//! The detection, redaction and verdict logic lives in plain modules that test natively; only
//! the component glue below touches the host.

pub mod config;
pub mod detect;
pub mod evaluate;
pub mod json;
pub mod redact;
pub mod types;
pub mod validate;

#[cfg(test)]
mod dataset;
#[cfg(test)]
mod quality;

/// The component glue. Native builds (the tests) leave it out: its exports are wasm-only.
#[cfg(target_arch = "wasm32")]
mod component {
    use crate::config::{self, Policy};
    use crate::evaluate;
    use railyard_plugin_sdk::{export, Info, Plugin, Rail, Request, Verdict};
    use std::cell::RefCell;

    thread_local! {
        /// The policy of this instance, set by `configure`.
        static POLICY: RefCell<Policy> = RefCell::new(Policy::default());
    }

    struct PiiFilter;

    impl Plugin for PiiFilter {
        fn describe() -> Info {
            Info {
                name: "pii-filter".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                rails: vec![Rail::Input, Rail::Output, Rail::ToolResult],
                config_schema: Some(config::schema()),
            }
        }

        fn configure(config: String) -> Result<(), String> {
            let policy = Policy::from_json(&config)?;
            railyard_plugin_sdk::log(
                railyard_plugin_sdk::Level::Info,
                &format!("configured: {}", policy.summary()),
            );
            POLICY.with(|p| *p.borrow_mut() = policy);
            Ok(())
        }

        fn evaluate(request: Request) -> Verdict {
            POLICY.with(|p| evaluate::evaluate(&request, &p.borrow()))
        }
    }

    export!(PiiFilter);
}
