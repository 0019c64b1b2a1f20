//! Test plugin that blocks every request; its twin decides the other way.
// A component only: natively (e.g. `cargo test --workspace`) there is nothing to build.
#![cfg(target_arch = "wasm32")]

const NAME: &str = "block-all";
const BLOCK: bool = true;

include!("../../constant.rs");
