//! Test plugin that allows every request; its twin decides the other way.
// A component only: natively (e.g. `cargo test --workspace`) there is nothing to build.
#![cfg(target_arch = "wasm32")]

const NAME: &str = "allow-all";
const BLOCK: bool = false;

include!("../../constant.rs");
