//! Railyard's black-box tests: one binary, real compiled plugins (built from `plugins/` by
//! `host/build.rs`), the real engine and chain, the real `railyard` executable.
//!
//! - `support`: shared fixtures (plugin paths, temporary configs, one engine);
//! - `runtime`: the sandbox: every verdict, every kind of fault contained, contract checks;
//! - `chain`: edits threading through plugins, reject vs block, fault resolution;
//! - `config`: config errors and their messages;
//! - `cli`: `railyard check` and `railyard plugins`;
//! - `policies`: the golden cases under `policies/tests/` against the bundled config;
//! - `http`: loopback test doubles (HTTP client, scripted model backend, daemon handle);
//! - `proxy`, `streaming`, `api`: the real daemon over real HTTP;
//! - `grpc`, `clients`: the gRPC service, and real client libraries (OpenAI SDK, grpcio);
//! - `doors`: the Responses and Messages APIs and models, with the OpenAI, Agents and Anthropic SDKs;
//! - `records`: exactly one decision record per request, whatever the outcome;
//! - `reload`: hot reload under traffic;
//! - `polyglot`: JavaScript and Python plugins, and `railyard new` for each language;
//! - `tenants`: API keys, principals, tenants' chains and limits, protected admin endpoints;
//! - `faults`: a hostile plugin through the running daemon's every door (containment, #13);
//! - `contract`: contract 0.2 through the daemon (0.1 beside 0.2, tool availability, structural
//!   edits, tool calls written as text, request fields);
//! - `flow`: the data-flow rule (untrusted results, privileged calls) through the daemon (#18);
//! - `mcp`: the MCP door with the MCP Python SDK on both sides (#17);
//! - `conformance`: the official MCP conformance suite against a reference server (the MCP Python
//!   SDK) directly and through the daemon, 2025-11-25 and 2026-07-28: what passes directly
//!   passes through, but for the known failures in `tests/conformance/known.txt` (#65);
//! - `provenance`: signed tool-call ids across turns and replicas (#18);
//! - `shadow`: shadow mode through the proxy: recorded, counted, never applied (#20);
//! - `budgets`: limits and token budgets an attacker cannot bend: a key's own limits, streams
//!   metered without a usage report, a bound however written, a reservation given back (#66);
//! - `readiness`: `/readyz` and the log tell which dependencies are down and when they are back
//!   (#66);
//! - `state`: rate limits in the shared state store, in memory and on a real Redis (#48);
//! - `replicas`: three daemons on one Redis behind nginx: one agent's MCP session over them, the
//!   upstream's changed tool list, a tenant's concurrency limit (#48);
//! - `deploy`: the Kubernetes base rendered by `kubectl kustomize`, and its config run (#20);
//! - `telemetry`: OpenTelemetry traces into a real OTLP receiver (#20);
//! - `fuzz`: every decoder fuzzed for a bounded time from the corpus in `tests/fuzz/corpus` (#20);
//! - `hardening`: connection limits and timeouts with raw sockets, graceful shutdown (#20);
//! - `tool_rules`: the tool rails' rules (NeMo IORails, Lutum) through the proxy (#14);
//! - `console`: the console in headless Chromium, live decisions and the admin check (#51);
//! - `closed`: the closed world on the chat door: every field judged, every call kind a call
//!   (#46);
//! - `hosted`: every call kind a call, every result kind a result: provider-run tools, MCP
//!   tools and custom tools on the Responses and Messages doors (#46);
//! - `guard`: guard models granted to plugins (contract 0.3), with the bundled content-safety
//!   plugin and scripted guards in each kind's wire format (#47);
//! - `whole_text`: text a reader takes as one judged as one: values split across parts, blocks
//!   and stream events longer than the window (#46);
//! - `pii_calls`: personal data in the model's tool calls, on every door and MCP (#50);
//! - `pii_encoded`: personal data percent-encoded, HTML-escaped, in base64 or hex, or in the other
//!   shapes a reader still reads (#65), on every door and
//!   in tool calls, and a hostile mebibyte judged within the deadline (#50);
//! - `approvals`: a person's approval of a call flow would refuse, on every door and MCP, once,
//!   and honoured by another replica on Redis (#49);
//! - `oracle`: traffic generated from the SDKs' own types, a canary in every leaf, through every
//!   door both ways; crossings checked against the ledger `tests/oracle/known.json` (#65);
//! - `structures`: what declares a tool, connects a server or makes a call is mapped or refused
//!   wherever it sits, keys and numbers are leaves, with the real SDKs (#65);
//! - `pins`: tool definitions pinned: a tool changed upstream (or by an app on the model doors)
//!   hidden until a person accepts the diff, with the MCP, OpenAI and Anthropic SDKs, on one
//!   replica and three on Redis (#70);
//! - `vault`: reversible redaction: a value hidden from the model comes back to the client only,
//!   with the OpenAI and Anthropic SDKs, streamed and not (#67).

mod api;
mod approvals;
mod budgets;
mod chain;
mod cli;
mod clients;
mod closed;
mod config;
mod conformance;
mod console;
mod contract;
mod deploy;
mod doors;
mod faults;
mod flow;
mod fuzz;
mod grpc;
mod guard;
mod hardening;
mod hosted;
mod http;
mod mcp;
mod oracle;
mod pii_calls;
mod pii_encoded;
mod pins;
mod policies;
mod polyglot;
mod provenance;
mod proxy;
mod readiness;
mod records;
mod reload;
mod replicas;
mod runtime;
mod shadow;
mod state;
mod streaming;
mod structures;
mod support;
mod telemetry;
mod tenants;
mod tool_rules;
mod vault;
mod whole_text;
