//! Railyard: a policy engine for LLM traffic.
//!
//! Requests and responses pass through four rails (`input`, `tool_result`, `tool_call`,
//! `output`); on each, a chain of sandboxed WebAssembly policy plugins judges and edits the
//! payload. The layers, in the order a request meets them:
//!
//! - [`config`]: `railyard.toml`, parsed and explained;
//! - [`auth`]: API keys: who is calling, as a principal, a tenant and labels;
//! - [`engine`]: wasmtime, the component cache, the sandbox and instance pools;
//! - [`policy`]: a loaded, configured policy set with one chain per rail;
//! - [`chain`]: running one rail's chain with exact, fail-closed semantics;
//! - [`payload`]: OpenAI JSON and the WIT records plugins see;
//! - [`server`], [`backend`], [`daemon`]: the HTTP daemon around a model backend;
//! - [`reload`]: hot reload of config and plugins;
//! - [`scaffold`]: `railyard new`, plugin project templates for Rust, JavaScript and Python;
//! - [`cases`]: `railyard test`, policy test cases run through the real chains;
//! - [`metrics`]: Prometheus metrics; [`demo`]: a scripted model for trying Railyard out.

#![deny(missing_docs)]

pub mod auth;
pub mod backend;
pub mod cases;
pub mod chain;
pub mod config;
pub mod daemon;
pub mod demo;
pub mod engine;
pub mod metrics;
pub mod payload;
pub mod policy;
pub mod reload;
pub mod scaffold;
pub mod server;
