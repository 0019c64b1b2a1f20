//! Exports `railyard:policy/plugin@9.9.0`: the host speaks 0.1.0 and 0.2.0 and must refuse this
//! at load, naming both the plugin's version and its own.
// A component only: natively (e.g. `cargo test --workspace`) there is nothing to build.
#![cfg(target_arch = "wasm32")]

wit_bindgen::generate!({ path: "wit", world: "policy" });

struct Future;

impl exports::railyard::policy::plugin::Guest for Future {
    fn describe() -> railyard::policy::types::Info {
        railyard::policy::types::Info {
            name: "wrong-version".into(),
            version: "9.9.0".into(),
        }
    }
}

export!(Future);
