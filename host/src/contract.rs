//! The host side of the `railyard:policy` contract, in every version the host speaks: one
//! `bindgen!` per version, in private modules; the rest of the host sees only the names below.
//! `wit` is contract 0.2.0's types (`wit/v0.2/`), which 0.3.0 (`wit/`) shares field for field,
//! `wit01` 0.1.0's (`wit/v0.1/`), `packed` the request as the Rust SDK's plugins take it
//! (`wit/packed/`, `wit/v0.2/packed/`).
//!
//! 0.3.0 only adds imports (capabilities), so its plugins' exports are called through typed
//! functions over 0.2.0's Rust types (the component model checks records by shape, not by
//! package): one conversion of the request serves both versions. Its imports are bound twice:
//! `guard` for plugins run synchronously (granted nothing, every call is denied) and
//! `guard_async` for plugins granted guard models, whose calls wait without blocking.
#![allow(missing_docs)]

// Generated from the WIT, whose doc comments are the documentation.
#[allow(missing_docs)]
mod v02 {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../wit/v0.2",
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

/// Contract 0.2.0 with its request packed (`wit/packed/`): the Rust SDK's plugins. Only the
/// request differs; the types, verdict and log import are 0.2.0's own.
#[allow(missing_docs)]
mod v02packed {
    wasmtime::component::bindgen!({
        world: "railyard:policy-packed/policy",
        path: ["../wit/v0.2", "../wit/v0.2/packed"],
        with: {
            "railyard:policy/types": super::v02::railyard::policy::types,
            "railyard:policy/host": super::v02::railyard::policy::host,
        },
    });
}

/// Contract 0.3.0's imports, bound for synchronous calls. Its types are 0.2.0's.
#[allow(missing_docs)]
mod v03 {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../wit",
        imports: { "railyard:policy/host.log": trappable },
        with: { "railyard:policy/types": super::v02::railyard::policy::types },
    });
}

/// Contract 0.3.0's guard models, bound for calls that wait (plugins granted guard models run
/// with wasmtime's async support).
#[allow(missing_docs)]
mod v03async {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../wit",
        imports: {
            "railyard:policy/guard-models": async,
            "railyard:policy/state": async,
            "railyard:policy/approvals": async,
            default: trappable,
        },
        exports: { default: async },
        with: {
            "railyard:policy/types": super::v02::railyard::policy::types,
            "railyard:policy/host": super::v03::railyard::policy::host,
        },
    });
}

pub use v01::railyard::policy::host::Host as LogImport01;
pub use v01::railyard::policy::types as wit01;
pub use v01::{Policy as Policy01, PolicyPre as PolicyPre01};
pub use v02::railyard::policy::host::Host as LogImport;
pub use v02::railyard::policy::types as wit;
pub use v02::{Policy, PolicyPre};
pub use v02packed::exports::railyard::policy_packed::plugin as packed;
pub use v02packed::{Policy as PolicyPacked, PolicyIndices as PolicyIndicesPacked};
pub use v03::railyard::policy::approvals;
pub use v03::railyard::policy::guard_models as guard;
pub use v03::railyard::policy::host as log03;
pub use v03::railyard::policy::host::Host as LogImport03;
pub use v03::railyard::policy::state;
pub use v03::railyard::policy::vault;
pub use v03async::railyard::policy::approvals as approvals_async;
pub use v03async::railyard::policy::guard_models as guard_async;
pub use v03async::railyard::policy::state as state_async;
pub use v03async::railyard::policy::vault as vault_async;

/// The contract package this host speaks.
pub const CONTRACT_PACKAGE: &str = "railyard:policy";
/// The newest contract version this host speaks (the `package` line of `wit/policy.wit`).
pub const CONTRACT_VERSION: &str = "0.3.0";
/// Every contract version this host speaks, newest first.
pub const CONTRACT_VERSIONS: [&str; 3] = ["0.3.0", "0.2.0", "0.1.0"];
/// The interface every plugin exports, without its version suffix.
pub const PLUGIN_INTERFACE: &str = "railyard:policy/plugin";
/// What a plugin built with the Rust SDK exports instead, by contract version (newest first):
/// the plugin interface with its request packed.
pub const PACKED_INTERFACES: [(&str, &str); 2] = [
    ("0.3.0", "railyard:policy-packed/plugin@0.3.0"),
    ("0.2.0", "railyard:policy-packed/plugin@0.2.0"),
];
/// What a plugin built with the Rust SDK may export beside it, by contract version: the texts it
/// acts on (`prefilter`), looked up when present.
pub const PREFILTER_INTERFACES: [(&str, &str); 2] = [
    ("0.3.0", "railyard:policy-packed/prefilter@0.3.0"),
    ("0.2.0", "railyard:policy-packed/prefilter@0.2.0"),
];
/// The guard-models capability's interface (contract 0.3.0).
pub const GUARD_INTERFACE: &str = "railyard:policy/guard-models@0.3.0";
