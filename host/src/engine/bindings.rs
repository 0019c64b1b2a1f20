//! The host side of the `railyard:policy` contract, in every version the host speaks: one
//! `bindgen!` per version, in private modules; the rest of the host sees only the names below.
//! `wit` is the newest contract (0.2.0), `wit01` the one before it (0.1.0, `wit/v0.1/`).
#![allow(missing_docs)]

// Generated from the WIT, whose doc comments are the documentation.
#[allow(missing_docs)]
mod v02 {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../wit",
        // `log` may stop the call (a plugin flooding the log is faulted, see `sandbox`).
        imports: { "railyard:policy/host.log": trappable },
    });
}

#[allow(missing_docs)]
mod v01 {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../wit/v0.1",
        imports: { "railyard:policy/host.log": trappable },
    });
}

pub use v01::railyard::policy::host::Host as LogImport01;
pub use v01::railyard::policy::types as wit01;
pub use v01::{Policy as Policy01, PolicyPre as PolicyPre01};
pub use v02::railyard::policy::host::Host as LogImport;
pub use v02::railyard::policy::types as wit;
pub use v02::{Policy, PolicyPre};

/// The contract package this host speaks.
pub const CONTRACT_PACKAGE: &str = "railyard:policy";
/// The newest contract version this host speaks (the `package` line of `wit/policy.wit`).
pub const CONTRACT_VERSION: &str = "0.2.0";
/// Every contract version this host speaks, newest first.
pub const CONTRACT_VERSIONS: [&str; 2] = ["0.2.0", "0.1.0"];
/// The interface every plugin exports, without its version suffix.
pub const PLUGIN_INTERFACE: &str = "railyard:policy/plugin";
