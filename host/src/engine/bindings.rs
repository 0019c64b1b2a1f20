//! The host side of the `railyard:policy` contract, in every version the host speaks: one
//! `bindgen!` per version, in private modules; the rest of the host sees only the names below.
//! `wit` is the newest contract (0.2.0), `wit01` the one before it (0.1.0, `wit/v0.1/`), `packed`
//! 0.2.0's request as the Rust SDK's plugins take it (`wit/packed/`).
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

/// Contract 0.2.0 with its request packed (`wit/packed/`): the Rust SDK's plugins. Only the
/// request differs; the types, verdict and log import are 0.2.0's own.
#[allow(missing_docs)]
mod v02packed {
    wasmtime::component::bindgen!({
        world: "railyard:policy-packed/policy",
        path: ["../wit", "../wit/packed"],
        with: {
            "railyard:policy/types": super::v02::railyard::policy::types,
            "railyard:policy/host": super::v02::railyard::policy::host,
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

/// The contract package this host speaks.
pub const CONTRACT_PACKAGE: &str = "railyard:policy";
/// The newest contract version this host speaks (the `package` line of `wit/policy.wit`).
pub const CONTRACT_VERSION: &str = "0.2.0";
/// Every contract version this host speaks, newest first.
pub const CONTRACT_VERSIONS: [&str; 2] = ["0.2.0", "0.1.0"];
/// The interface every plugin exports, without its version suffix.
pub const PLUGIN_INTERFACE: &str = "railyard:policy/plugin";
/// What a plugin built with the Rust SDK exports instead: 0.2.0 with its request packed.
pub const PACKED_INTERFACE: &str = "railyard:policy-packed/plugin@0.2.0";
/// What a plugin built with the Rust SDK may export beside it: the texts it acts on
/// (`wit/packed/`, `prefilter`), looked up when present.
pub const PREFILTER_INTERFACE: &str = "railyard:policy-packed/prefilter@0.2.0";
