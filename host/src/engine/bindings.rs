//! The host side of the `railyard:policy` contract: the one `bindgen!` in the host.
//!
//! Generated code stays in a private module; the rest of the host sees only the names below.
#![allow(missing_docs)]

// Generated from the WIT, whose doc comments are the documentation.
#[allow(missing_docs)]
mod generated {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../wit",
        // `log` may stop the call (a plugin flooding the log is faulted, see `sandbox`).
        imports: { "railyard:policy/host.log": trappable },
    });
}

pub use generated::railyard::policy::host::Host as LogImport;
pub use generated::railyard::policy::types as wit;
pub use generated::{Policy, PolicyPre};

/// The contract package this host speaks.
pub const CONTRACT_PACKAGE: &str = "railyard:policy";
/// The contract version this host speaks (the `package` line of `wit/policy.wit`).
pub const CONTRACT_VERSION: &str = "0.1.0";
/// The interface every plugin exports, without its version suffix.
pub const PLUGIN_INTERFACE: &str = "railyard:policy/plugin";
