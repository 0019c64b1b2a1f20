//! Exports `railyard:policy/plugin@0.2.0`: the host speaks 0.1.0 and must refuse this at load.
// A component only: natively (e.g. `cargo test --workspace`) there is nothing to build.
#![cfg(target_arch = "wasm32")]

wit_bindgen::generate!({ path: "wit", world: "policy" });

struct Future;

impl exports::railyard::policy::plugin::Guest for Future {
    fn describe() -> railyard::policy::types::Info {
        railyard::policy::types::Info {
            name: "wrong-version".into(),
            version: "0.2.0".into(),
        }
    }
}

export!(Future);
