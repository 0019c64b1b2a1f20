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

pub mod json;
pub mod reason;

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

/// A policy whose config is parsed once per instance: implement this and call
/// [`export_policy!`] instead of writing the component glue by hand.
///
/// The host calls `configure` once per instance before any `evaluate`; an instance that was
/// never configured blocks (fail closed) rather than guess.
pub trait PolicyPlugin: Sized + 'static {
    /// Name, version, rails and config schema.
    fn info() -> Info;
    /// Build the policy from its config (JSON text, already valid against the schema).
    fn configure(config: &str) -> Result<Self, String>;
    /// Judge one request. `&mut self` so a policy can keep caches (e.g. compiled schemas).
    fn evaluate(&mut self, request: &Request) -> Verdict;
}

/// Export a [`PolicyPlugin`] as the component's `railyard:policy/plugin`. Expands to nothing
/// on native targets, where the plugin's logic builds for unit tests alone.
#[macro_export]
macro_rules! export_policy {
    ($ty:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            ::std::thread_local! {
                static STATE: ::std::cell::RefCell<::std::option::Option<$ty>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }

            struct Glue;

            impl $crate::Plugin for Glue {
                fn describe() -> $crate::Info {
                    <$ty as $crate::PolicyPlugin>::info()
                }

                fn configure(
                    config: ::std::string::String,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    let policy = <$ty as $crate::PolicyPlugin>::configure(&config)?;
                    STATE.with(|s| *s.borrow_mut() = ::std::option::Option::Some(policy));
                    ::std::result::Result::Ok(())
                }

                fn evaluate(request: $crate::Request) -> $crate::Verdict {
                    STATE.with(|s| match s.borrow_mut().as_mut() {
                        ::std::option::Option::Some(policy) => {
                            $crate::PolicyPlugin::evaluate(policy, &request)
                        }
                        ::std::option::Option::None => $crate::Verdict::Block(::std::format!(
                            "plugin '{}' was evaluated before it was configured",
                            <$ty as $crate::PolicyPlugin>::info().name
                        )),
                    })
                }
            }

            $crate::export!(Glue);
        };
    };
}
