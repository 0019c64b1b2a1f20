//! Railyard: a policy engine for LLM traffic.
//!
//! Requests and responses pass through four rails (`input`, `tool_result`, `tool_call`,
//! `output`); on each, a chain of sandboxed WebAssembly policy plugins judges and edits the
//! payload. The layers, each importing only the ones above it:
//!
//! - [`util`], [`model`]: small helpers; what every layer talks about (messages, tool calls,
//!   rails, verdicts), plain data;
//! - [`codec`]: one wire format per door (OpenAI chat completions and responses, Anthropic
//!   messages), to and from the model, requests, replies and stream events;
//! - [`auth`], [`config`]: API keys; `railyard.toml`, startup and reloadable settings;
//! - [`state`], [`approvals`], [`guard`], [`services`]: the store, approval requests, guard
//!   models, and the one owner of what the daemon shares;
//! - [`contract`], [`caps`]: the WIT bindings; capabilities, one module each;
//! - [`engine`]: wasmtime, the component cache, the sandbox, instance pools, the WIT records;
//! - [`policy`]: a loaded policy set, one chain per rail and tenant, the chain's semantics, the
//!   decision record;
//! - [`telemetry`]: OpenTelemetry traces of requests, rails, plugins and backend calls;
//! - [`rails`]: one request's flow through the rails, whatever the door; streamed replies;
//! - [`server`], [`backend`], [`daemon`], [`reload`], [`metrics`]: the daemon around it;
//! - [`cases`], [`scaffold`]: `railyard test` and `railyard new`; [`demo`]: a scripted model.

#![deny(missing_docs)]

pub mod approvals;
pub mod auth;
pub mod backend;
pub mod caps;
pub mod cases;
pub mod codec;
pub mod config;
pub mod contract;
pub mod daemon;
pub mod demo;
pub mod engine;
pub mod guard;
pub mod health;
pub mod metrics;
pub mod model;
pub mod pins;
pub mod policy;
pub mod rails;
pub mod reload;
pub mod scaffold;
pub mod server;
pub mod services;
pub mod shard;
pub mod state;
pub mod telemetry;
pub mod util;

/// The model under its earlier name (the payload a chain judges).
pub use model as payload;
/// The chain's semantics, where they were before the policy layer held them.
pub use policy::chain;
