//! Rust bindings for the `railyard:policy` contract (`../../wit`), shared by every Rust plugin so
//! the contract is generated in one place.
//!
//! A plugin implements [`Plugin`] and calls `railyard_plugin_sdk::export!(MyPlugin);`.

wit_bindgen::generate!({
    path: "../../wit",
    world: "policy",
    pub_export_macro: true,
    default_bindings_module: "railyard_plugin_sdk",
    export_macro_name: "export",
});

pub use exports::railyard::policy::plugin::Guest as Plugin;
pub use railyard::policy::types::*;

/// Write a line to the daemon's log (tagged with the plugin's name by the host).
pub fn log(level: Level, message: &str) {
    railyard::policy::host::log(level, message);
}

impl Message {
    /// The message's text, if its content is plain text.
    pub fn text(&self) -> Option<&str> {
        match &self.content {
            Some(Content::Text(t)) => Some(t),
            _ => None,
        }
    }
}
