//! Rust bindings for the `railyard:policy` contract (`../../wit`, version 0.3.0), shared by every
//! Rust plugin so the contract is generated in one place.
//!
//! A plugin implements [`PolicyPlugin`] and calls `railyard_plugin_sdk::export_policy!(MyPlugin);`
//! (or implements the raw [`Plugin`] trait and calls `railyard_plugin_sdk::export!(MyPlugin);`).
//!
//! The component exports contract 0.3.0 with its request packed (`../../wit/packed`): the host
//! passes it in a handful of allocations instead of one per string, and [`unpack`] turns it back
//! into the contract's [`Request`] before the plugin sees it.

wit_bindgen::generate!({
    path: ["../../wit", "../../wit/packed"],
    world: "railyard:policy-packed/sdk",
    pub_export_macro: true,
    default_bindings_module: "railyard_plugin_sdk",
    export_macro_name: "__export_packed",
    generate_all,
});

#[cfg(any(
    test,
    all(
        feature = "fast-alloc",
        target_family = "wasm",
        not(target_feature = "atomics")
    )
))]
mod alloc;

pub mod by_text;
pub mod glob;
pub mod json;
pub mod reason;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
#[doc(hidden)]
pub mod unpack;

pub use railyard::policy::types::*;

/// Approvals (contract 0.3): ask that a person approve a call of the reply under judgement
/// instead of refusing it outright. Granted per plugin entry (`approvals = true`); without the
/// grant every call answers [`approvals::ApprovalError::Denied`]. Callable from `evaluate` only,
/// on the `tool-call` rail.
pub mod approvals {
    pub use crate::railyard::policy::approvals::*;
}

/// The vault (contract 0.3): reversible redaction. Hide a value behind a placeholder the host
/// makes (`conceal`), and get it back later in the same request (`reveal`), to write it where the
/// client executes it. Granted per plugin entry (`vault = true`); without the grant every call
/// answers [`vault::VaultError::Denied`]. Callable from `evaluate` only; never waits.
pub mod vault {
    pub use crate::railyard::policy::vault::*;
}

/// Guard models (contract 0.3): ask a model the operator configured, by its configured name.
/// Granted per plugin entry (`guard_models = [...]`); without the grant every call answers
/// [`guard::GuardError::Denied`]. Callable from `evaluate` only.
pub mod guard {
    pub use crate::railyard::policy::guard_models::*;

    /// What went wrong, worded for a plugin's error (a fault's message): what the model did,
    /// never what it was asked.
    pub fn describe(error: &GuardError) -> String {
        match error {
            GuardError::Denied(m) => format!("was denied: {m}"),
            GuardError::Timeout => "did not answer in time".into(),
            GuardError::BudgetExhausted => "is over the request's budget".into(),
            GuardError::RateLimited => "is rate limited".into(),
            GuardError::Unavailable(m) => format!("is unavailable: {m}"),
            GuardError::InvalidOutput(m) => format!("answered something unreadable: {m}"),
        }
    }
}

/// The plugin interface of contract 0.3.0 (`railyard:policy/plugin`), as [`export!`] exports it.
pub trait Plugin {
    /// Name, version, rails and config schema. Called once at load.
    fn describe() -> Info;
    /// Receives the plugin's config as JSON text, already valid against its schema.
    fn configure(config: String) -> Result<(), String>;
    /// Judge one request on one rail; an error is a fault.
    fn evaluate(request: Request) -> Result<Verdict, String>;
    /// Texts one of which every request this plugin does not simply allow contains: the host
    /// leaves it out of the others (see [`PolicyPlugin::triggers`]). Asked once, after
    /// `configure`. By default `None`: called on every request.
    fn triggers() -> Option<Vec<String>> {
        None
    }
}

/// Export a [`Plugin`] as the component's plugin interface (0.3.0, its request packed).
#[macro_export]
macro_rules! export {
    ($ty:ty) => {
        const _: () = {
            struct Unpacking;

            impl $crate::unpack::Packed for Unpacking {
                fn describe() -> $crate::Info {
                    <$ty as $crate::Plugin>::describe()
                }

                fn configure(
                    config: ::std::string::String,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    <$ty as $crate::Plugin>::configure(config)
                }

                fn evaluate(
                    request: $crate::unpack::Request,
                ) -> ::std::result::Result<$crate::Verdict, ::std::string::String> {
                    <$ty as $crate::Plugin>::evaluate($crate::unpack::unpack(request))
                }
            }

            impl $crate::unpack::Prefilter for Unpacking {
                fn triggers() -> ::std::option::Option<::std::vec::Vec<::std::string::String>> {
                    <$ty as $crate::Plugin>::triggers()
                }
            }

            $crate::__export_packed!(Unpacking);
        };
    };
}

/// The contract version these bindings speak.
pub const CONTRACT_VERSION: &str = "0.3.0";

/// `kind` of a function call and of a function tool.
pub const FUNCTION: &str = "function";

/// `kind` of a call to a custom tool (free-text input, run by the client).
pub const CUSTOM: &str = "custom";

/// How the host names a provider's MCP tools: the server as a declared tool `mcp__<server>`,
/// a call to one of its tools `mcp__<server>__<tool>`.
pub const MCP_PREFIX: &str = "mcp__";

/// The MCP toolset (`mcp__<server>`) a call to one of its tools (`mcp__<server>__<tool>`)
/// belongs to.
pub fn mcp_toolset(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(MCP_PREFIX)?;
    let end = rest.find("__")?;
    Some(&name[..MCP_PREFIX.len() + end])
}

/// The names a tool goes by, for a rule that restricts it: its name as called, and the tool's
/// own name inside it (after a provider's MCP server, `mcp__<server>__<tool>`, and after a
/// namespace, `<namespace>.<tool>`), so that `send_message` matches `ns.send_message` and
/// `mcp__slack__send_message`. A rule that permits matches the name as called only: a
/// namespace's tool is another tool than a top-level one of the same name.
pub fn tool_names(name: &str) -> impl Iterator<Item = &str> {
    let mut own = name;
    if let Some(toolset) = mcp_toolset(name) {
        own = name[toolset.len()..].trim_start_matches('_');
    }
    if let Some((_, last)) = own.rsplit_once('.') {
        own = last;
    }
    std::iter::once(name).chain((own != name && !own.is_empty()).then_some(own))
}

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

    /// The message's text whatever its shape: its string, or the `text` of its content parts
    /// joined by newlines (`None` when it has neither).
    pub fn all_text(&self) -> Option<String> {
        match &self.content {
            None => None,
            Some(Content::Text(t)) => Some(t.clone()),
            Some(Content::Parts(json)) => {
                let parts: serde_json::Value = serde_json::from_str(json).ok()?;
                let texts: Vec<&str> = parts
                    .as_array()?
                    .iter()
                    .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
                    .collect();
                (!texts.is_empty()).then(|| texts.join("\n"))
            }
        }
    }
}

impl Request {
    /// The `tool` messages, each with the tool it is a result of: the call it answers (by
    /// `tool-call-id`, among the assistant messages before it), else its own `name`.
    pub fn tool_results(&self) -> Vec<(usize, Option<&str>)> {
        let mut called: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
        let mut results = Vec::new();
        for (index, message) in self.messages.iter().enumerate() {
            for call in &message.tool_calls {
                called.insert(call.id.as_str(), call.name.as_str());
            }
            if message.role == "tool" {
                let tool = message
                    .tool_call_id
                    .as_deref()
                    .and_then(|id| called.get(id).copied())
                    .or(message.name.as_deref());
                results.push((index, tool));
            }
        }
        results
    }

    /// Index of the last message (the model's reply on the `tool-call` and `output` rails), as
    /// edits address it; `None` when there are no messages.
    pub fn last_index(&self) -> Option<u32> {
        self.messages.len().checked_sub(1).map(|i| i as u32)
    }
}

/// A policy whose config is parsed once per instance: implement this and call
/// [`export_policy!`] instead of writing the component glue by hand.
///
/// The host calls `configure` once per instance before any `evaluate`; an instance that was
/// never configured answers with an error (a fault, resolved by the plugin's `on_error`) rather
/// than guess.
pub trait PolicyPlugin: Sized + 'static {
    /// Name, version, rails and config schema.
    fn info() -> Info;
    /// Build the policy from its config (JSON text, already valid against the schema).
    fn configure(config: &str) -> Result<Self, String>;
    /// Judge one request. `&mut self` so a policy can keep caches (e.g. compiled schemas).
    fn evaluate(&mut self, request: &Request) -> Verdict;
    /// Judge one request, or fail: an `Err` is a fault the host resolves by the plugin's
    /// `on_error`, and its message reaches the daemon's log and the decision record (say what
    /// went wrong and where, never what the request contained). The glue calls this; by default
    /// it is [`PolicyPlugin::evaluate`], which cannot fail.
    fn try_evaluate(&mut self, request: &Request) -> Result<Verdict, String> {
        Ok(self.evaluate(request))
    }
    /// Texts one of which every request this policy does not simply allow contains, in one of
    /// its strings (bytes, case as given): on a request with none of them the host takes `allow`
    /// without calling [`PolicyPlugin::evaluate`]. A policy that acts only on particular markup
    /// (`<tool_call>`, a secret's prefix) says which, and costs nothing on the requests without
    /// any. Wrong triggers let requests through unjudged: return only texts the policy cannot
    /// act without, and test that (text-tool-calls does). Asked once per policy, after
    /// `configure`; at most 32 texts of 1 to 256 bytes. By default `None`: every request.
    fn triggers(&self) -> Option<Vec<String>> {
        None
    }
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

            impl $crate::unpack::Packed for Glue {
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

                fn evaluate(
                    request: $crate::unpack::Request,
                ) -> ::std::result::Result<$crate::Verdict, ::std::string::String> {
                    $crate::unpack::over_last(request, |request| {
                        STATE.with(|s| match s.borrow_mut().as_mut() {
                            ::std::option::Option::Some(policy) => {
                                $crate::PolicyPlugin::try_evaluate(policy, request)
                            }
                            ::std::option::Option::None => {
                                ::std::result::Result::Err(::std::format!(
                                    "plugin '{}' was evaluated before it was configured",
                                    <$ty as $crate::PolicyPlugin>::info().name
                                ))
                            }
                        })
                    })
                }
            }

            impl $crate::unpack::Prefilter for Glue {
                fn triggers() -> ::std::option::Option<::std::vec::Vec<::std::string::String>> {
                    STATE.with(|s| {
                        s.borrow()
                            .as_ref()
                            .and_then(<$ty as $crate::PolicyPlugin>::triggers)
                    })
                }
            }

            $crate::__export_packed!(Glue);
        };
    };
}

#[cfg(test)]
mod names {
    use super::tool_names;

    #[test]
    fn a_tool_goes_by_its_name_and_its_own_inside_a_server_or_a_namespace() {
        fn all(n: &str) -> Vec<&str> {
            tool_names(n).collect()
        }
        assert_eq!(all("send_email"), ["send_email"]);
        assert_eq!(all("ns.send_email"), ["ns.send_email", "send_email"]);
        assert_eq!(
            all("mcp__mail__send_email"),
            ["mcp__mail__send_email", "send_email"]
        );
        assert_eq!(all("mcp__mail__ns.send"), ["mcp__mail__ns.send", "send"]);
        // A toolset is no tool of its own; a name ending in a dot has none inside it.
        assert_eq!(all("mcp__mail"), ["mcp__mail"]);
        assert_eq!(all("odd."), ["odd."]);
    }
}
