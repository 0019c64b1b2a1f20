//! Which tools may be offered and called, as plain functions over the SDK types (no host
//! imports), so the whole decision is unit-testable on the build machine.
//!
//! `tool_call` rail. Order of checks for each call of the last message (the model's reply),
//! first failure wins:
//! 1. the name is declared in `request.tools` (the request's tools merged with the config's
//!    `[[tools]]` by the host): a function name, a hosted tool's type when the hosted tool is
//!    declared by type only (`{"type": "web_search"}`), or a hosted tool's name when it has one;
//! 2. the tool was not hidden from the model by a `tools`-rail policy (`hidden-by`): the model
//!    was never offered it, so a call to it is a hallucination or an injection;
//! 3. the name is not declared as a function more than once: a call to a duplicated function
//!    name is ambiguous (which declaration the application runs is unknown). A function and a
//!    hosted type of the same name are not a duplicate: the function wins (see below);
//! 4. the name is not in the config's `deny` list;
//! 5. when `allow` is given, the name is in it;
//! 6. when `principals` is given, the request's principal is listed and the name is in its list
//!    (a principal that is missing from the map, or a request without a principal, follows
//!    `unknown_principal`: `deny` — the default, fail closed — or `default`, the rules above only).
//!
//! Rules 1 and 3 are NeMo Guardrails' IORails tool-call allowlist; 4-6 are Railyard's narrowing.
//! In every list the entry `"*"` matches any name; matching is otherwise exact.
//!
//! `tools` rail: every declared tool that rules 4-6 would refuse a call to is hidden
//! (`hide-tool`), so the model is not offered what the caller may not call; rule 2 then blocks a
//! call to it all the same.
//!
//! Hosted calls: a reply's call to a hosted tool (`{"type": "web_search", ...}` with no
//! `function` object) reaches plugins as a call named after its type. The allowlist cannot tell
//! it from a function call of that name, and need not: either way the name must be declared, and
//! the lists above apply to it.
//!
//! MCP toolsets: a provider's MCP server is declared as one tool, `mcp__<server>`, and its tools
//! are called as `mcp__<server>__<tool>`. Such a call is declared (and hidden) when its toolset
//! is, and a list entry naming the toolset covers each of its tools.

use railyard_plugin_sdk::reason::quote;
use railyard_plugin_sdk::{
    mcp_toolset, Edit, Modification, Rail, Request, ToolDef, Verdict, FUNCTION,
};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// JSON Schema of the plugin's config, as given to the host in `describe`.
pub const CONFIG_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "allowlist plugin config",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "allow": {
      "description": "When given, only these tools may be called (on top of being declared). \"*\" matches any tool.",
      "type": "array",
      "items": {"type": "string", "minLength": 1},
      "uniqueItems": true
    },
    "deny": {
      "description": "Tools that may never be called, even when declared. \"*\" matches any tool.",
      "type": "array",
      "items": {"type": "string", "minLength": 1},
      "uniqueItems": true
    },
    "principals": {
      "description": "Authenticated principal -> the tools it may call (on top of the rules above). \"*\" matches any tool.",
      "type": "object",
      "additionalProperties": {
        "type": "array",
        "items": {"type": "string", "minLength": 1},
        "uniqueItems": true
      }
    },
    "unknown_principal": {
      "description": "When principals is given: what a principal missing from it (or no principal at all) gets. deny (default): no tool call is allowed; default: only the allow/deny rules apply.",
      "enum": ["deny", "default"]
    }
  }
}"#;

/// Wildcard entry matching any tool name in `allow`, `deny` and `principals` lists.
const ANY: &str = "*";
/// At most this many distinct problems are spelled out in one reason.
const MAX_REPORTED: usize = 10;
/// What a principal missing from `principals` gets.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownPrincipal {
    /// No tool call is allowed (fail closed).
    #[default]
    Deny,
    /// Only the global rules (declared, `allow`, `deny`) apply.
    Default,
}

/// The plugin's config, parsed from the JSON the host validated against [`CONFIG_SCHEMA`].
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub principals: Option<BTreeMap<String, Vec<String>>>,
    #[serde(default)]
    pub unknown_principal: UnknownPrincipal,
}

impl Config {
    /// Parses the config JSON text.
    pub fn parse(text: &str) -> Result<Config, String> {
        serde_json::from_str(text).map_err(|e| format!("invalid allowlist config: {e}"))
    }
}

/// The principal rule that applies to this request.
enum PrincipalRule<'a> {
    /// No per-principal restriction.
    Unrestricted,
    /// Only the listed tools.
    Only(&'a str, &'a [String]),
    /// Nothing at all; the text says why.
    Nothing(String),
}

/// Judges the request on its rail: the declared tools on `tools`, the reply's calls otherwise.
pub fn evaluate(config: &Config, request: &Request) -> Verdict {
    match request.rail {
        Rail::Tools => hide_tools(config, request),
        _ => judge_calls(config, request),
    }
}

/// Judges the tool calls of the request's last message.
pub fn judge_calls(config: &Config, request: &Request) -> Verdict {
    let Some(reply) = request.messages.last() else {
        return Verdict::Allow;
    };
    if reply.tool_calls.is_empty() {
        return Verdict::Allow;
    }
    let declared = declared_names(&request.tools);
    let hidden = hidden_names(&request.tools);
    let duplicated = duplicated_functions(&request.tools);
    let rule = principal_rule(config, request.context.principal.as_deref());

    let mut problems: Vec<String> = Vec::new();
    for call in &reply.tool_calls {
        let set = mcp_toolset(&call.name);
        let named = |name: &str| name == call.name || Some(name) == set;
        let why = if !declared.iter().any(|d| named(d)) {
            Some("it is not declared in the request's tools".to_string())
        } else if let Some(by) = hidden.iter().find(|(d, _)| named(d)).map(|(_, by)| *by) {
            Some(format!(
                "the tool was hidden from the model by policy {}",
                quote(by)
            ))
        } else if let Some(times) = duplicated.get(call.name.as_str()) {
            Some(format!(
                "it is ambiguous, as the request's tools declare function {} {times} times",
                quote(&call.name)
            ))
        } else {
            why_not_allowed(config, &rule, &call.name)
        };
        if let Some(why) = why {
            let problem = format!(
                "tool call {} is not an allowed tool: {why}",
                quote(&call.name)
            );
            if !problems.contains(&problem) {
                problems.push(problem);
            }
        }
    }
    if problems.is_empty() {
        Verdict::Allow
    } else {
        Verdict::Block(join_problems(problems, "disallowed tool calls"))
    }
}

/// On the `tools` rail: hides every declared tool the caller may not call (by the lists; being
/// declared is a given here), so the model is never offered it. Tools another policy already hid
/// are left alone; a nameless function cannot be called and is left alone too.
pub fn hide_tools(config: &Config, request: &Request) -> Verdict {
    let rule = principal_rule(config, request.context.principal.as_deref());
    let mut edits = Vec::new();
    // Why -> the names hidden for it, in the order first seen.
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for (index, tool) in request.tools.iter().enumerate() {
        if tool.hidden_by.is_some() {
            continue;
        }
        let Some(name) = callable_name(tool) else {
            continue;
        };
        let Some(why) = why_not_allowed(config, &rule, name) else {
            continue;
        };
        edits.push(Edit::HideTool(index as u32));
        let quoted = quote(name);
        match groups.iter_mut().find(|(w, _)| *w == why) {
            Some((_, names)) if !names.contains(&quoted) => names.push(quoted),
            Some(_) => {}
            None => groups.push((why, vec![quoted])),
        }
    }
    if edits.is_empty() {
        return Verdict::Allow;
    }
    let problems = groups
        .into_iter()
        .map(|(why, names)| {
            let (noun, pronoun) = if names.len() == 1 {
                ("tool", "it is")
            } else {
                ("tools", "they are")
            };
            let why = match why.strip_prefix("it is ") {
                Some(rest) => format!("{pronoun} {rest}"),
                None => why,
            };
            format!("hid {noun} {} from the model: {why}", names.join(", "))
        })
        .collect();
    Verdict::Modify(Modification {
        edits,
        reason: join_problems(problems, "reasons to hide tools"),
    })
}

/// The name a call to this tool uses: a function's (or a named hosted tool's) name, else a
/// hosted tool's type; `None` for a function without a name.
fn callable_name(tool: &ToolDef) -> Option<&str> {
    match (tool.kind.as_str(), tool.name.as_deref()) {
        (_, Some(name)) => Some(name),
        (FUNCTION, None) => None,
        (kind, None) => Some(kind),
    }
}

/// Names a call may use: function names, plus the type of every hosted tool declared by type
/// only (and the name of a hosted tool that has one).
fn declared_names(tools: &[ToolDef]) -> BTreeSet<&str> {
    tools.iter().filter_map(callable_name).collect()
}

/// Names of declared tools a `tools`-rail policy hid from the model, with that policy's id. A
/// name declared more than once counts as hidden when any of its declarations is.
fn hidden_names(tools: &[ToolDef]) -> BTreeMap<&str, &str> {
    let mut hidden = BTreeMap::new();
    for tool in tools {
        if let (Some(name), Some(by)) = (callable_name(tool), tool.hidden_by.as_deref()) {
            hidden.entry(name).or_insert(by);
        }
    }
    hidden
}

/// Function names declared more than once, with how many times.
fn duplicated_functions(tools: &[ToolDef]) -> BTreeMap<&str, usize> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for tool in tools.iter().filter(|t| t.kind == FUNCTION) {
        if let Some(name) = tool.name.as_deref() {
            *counts.entry(name).or_default() += 1;
        }
    }
    counts.retain(|_, n| *n > 1);
    counts
}

fn principal_rule<'a>(config: &'a Config, principal: Option<&'a str>) -> PrincipalRule<'a> {
    let Some(map) = &config.principals else {
        return PrincipalRule::Unrestricted;
    };
    if let Some((name, list)) = principal.and_then(|p| map.get_key_value(p)) {
        return PrincipalRule::Only(name, list);
    }
    match config.unknown_principal {
        UnknownPrincipal::Default => PrincipalRule::Unrestricted,
        UnknownPrincipal::Deny => PrincipalRule::Nothing(match principal {
            Some(p) => format!(
                "principal {} is not listed in the allowlist config's principals, and unknown principals are denied",
                quote(p)
            ),
            None => "the request has no authenticated principal, and the allowlist config only \
                     allows principals listed in its principals"
                .to_string(),
        }),
    }
}

/// Rules 3-5 (the config's lists) for a declared, unambiguous name.
fn why_not_allowed(config: &Config, rule: &PrincipalRule<'_>, name: &str) -> Option<String> {
    if listed(&config.deny, name) {
        return Some("it is denied by the allowlist config's deny list".into());
    }
    if let Some(allow) = &config.allow {
        if !listed(allow, name) {
            return Some("it is not in the allowlist config's allow list".into());
        }
    }
    match rule {
        PrincipalRule::Unrestricted => None,
        PrincipalRule::Only(principal, list) => (!listed(list, name))
            .then(|| format!("it is not allowed for principal {}", quote(principal))),
        PrincipalRule::Nothing(why) => Some(why.clone()),
    }
}

fn listed(list: &[String], name: &str) -> bool {
    let set = mcp_toolset(name);
    list.iter()
        .any(|entry| entry == ANY || entry == name || Some(entry.as_str()) == set)
}

fn join_problems(mut problems: Vec<String>, more: &str) -> String {
    let extra = problems.len().saturating_sub(MAX_REPORTED);
    problems.truncate(MAX_REPORTED);
    let mut reason = problems.join("; ");
    if extra > 0 {
        reason.push_str(&format!("; and {extra} more {more}"));
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_plugin_sdk::reason::MAX_QUOTED;
    use railyard_plugin_sdk::testing::{self, assert_allow, call, context, function, hosted};
    use railyard_plugin_sdk::{Context, Message, Modification};

    fn message(role: &str, calls: &[&str]) -> Message {
        Message {
            tool_calls: calls
                .iter()
                .enumerate()
                .map(|(i, name)| call(&format!("call_{i}"), name, "{}"))
                .collect(),
            ..testing::message(role, None)
        }
    }

    fn tool(name: &str) -> ToolDef {
        function(name, Some(r#"{"type":"object"}"#))
    }

    fn request(messages: Vec<Message>, tools: Vec<ToolDef>, principal: Option<&str>) -> Request {
        let mut req = testing::request(Rail::ToolCall, messages).with_tools(tools);
        req.context = Context {
            principal: principal.map(Into::into),
            ..context()
        };
        req
    }

    fn reply(calls: &[&str], tools: Vec<ToolDef>) -> Request {
        request(
            vec![message("user", &[]), message("assistant", calls)],
            tools,
            None,
        )
    }

    fn config(json: &str) -> Config {
        Config::parse(json).expect("config parses")
    }

    use railyard_plugin_sdk::testing::expect_block as block_reason;

    #[test]
    fn declared_function_is_allowed() {
        let req = reply(&["get_weather"], vec![tool("get_weather")]);
        assert_allow(evaluate(&config("{}"), &req));
    }

    #[test]
    fn undeclared_function_is_blocked() {
        let req = reply(&["delete_database"], vec![tool("get_weather")]);
        assert_eq!(
            block_reason(evaluate(&config("{}"), &req)),
            "tool call 'delete_database' is not an allowed tool: it is not declared in the request's tools"
        );
    }

    #[test]
    fn no_tools_declared_blocks_every_call() {
        let req = reply(&["get_weather"], vec![]);
        assert!(block_reason(evaluate(&config("{}"), &req)).contains("not declared"));
    }

    #[test]
    fn reply_without_calls_is_allowed() {
        let req = reply(&[], vec![]);
        assert_allow(evaluate(&config("{}"), &req));
        let empty = request(vec![], vec![], None);
        assert_allow(evaluate(&config("{}"), &empty));
    }

    #[test]
    fn only_the_last_message_is_judged() {
        // An earlier assistant message called a tool no longer declared: that is history.
        let req = request(
            vec![
                message("user", &[]),
                message("assistant", &["old_tool"]),
                message("tool", &[]),
                message("assistant", &["get_weather"]),
            ],
            vec![tool("get_weather")],
            None,
        );
        assert_allow(evaluate(&config("{}"), &req));
    }

    #[test]
    fn hosted_tool_declared_by_type_allows_calls_by_type() {
        let tools = vec![hosted("web_search"), tool("get_weather")];
        assert_allow(evaluate(
            &config("{}"),
            &reply(&["web_search"], tools.clone()),
        ));
        let reason = block_reason(evaluate(&config("{}"), &reply(&["file_search"], tools)));
        assert!(reason.starts_with("tool call 'file_search' is not an allowed tool"));
    }

    #[test]
    fn duplicated_function_name_is_ambiguous() {
        let tools = vec![tool("get_weather"), tool("send_email"), tool("get_weather")];
        assert_eq!(
            block_reason(evaluate(&config("{}"), &reply(&["get_weather"], tools.clone()))),
            "tool call 'get_weather' is not an allowed tool: it is ambiguous, as the request's tools \
             declare function 'get_weather' 2 times"
        );
        // Only calls to the duplicated name are affected.
        assert_allow(evaluate(
            &config("{}"),
            &reply(&["send_email"], tools.clone()),
        ));
        // Identical declarations are still two declarations.
        let mut same = tools;
        same.push(tool("get_weather"));
        assert!(
            block_reason(evaluate(&config("{}"), &reply(&["get_weather"], same)))
                .ends_with("declare function 'get_weather' 3 times")
        );
        // Being ambiguous comes before the lists: an admin cannot call it either.
        let cfg = config(r#"{"principals":{"admin":["*"]}}"#);
        let req = request(
            vec![message("user", &[]), message("assistant", &["f"])],
            vec![tool("f"), tool("f")],
            Some("admin"),
        );
        assert!(block_reason(evaluate(&cfg, &req)).contains("ambiguous"));
    }

    #[test]
    fn function_and_hosted_type_of_one_name_are_not_duplicates() {
        // The function declaration wins (schema-validator validates against it).
        let tools = vec![hosted("web_search"), tool("web_search")];
        assert_allow(evaluate(&config("{}"), &reply(&["web_search"], tools)));
        // Two hosted declarations of one type carry nothing that could differ.
        let tools = vec![hosted("web_search"), hosted("web_search")];
        assert_allow(evaluate(&config("{}"), &reply(&["web_search"], tools)));
    }

    #[test]
    fn hosted_call_record_is_allowlisted_by_type() {
        // The host presents a hosted call (no function object) as a call named after its type,
        // with empty arguments.
        let mut req = reply(&["web_search"], vec![hosted("web_search")]);
        req.messages[1].tool_calls[0].arguments = String::new();
        assert_allow(evaluate(&config("{}"), &req));
        // Declared by type only; a call to another hosted type is not.
        let mut other = reply(&["code_interpreter"], vec![hosted("web_search")]);
        other.messages[1].tool_calls[0].arguments = String::new();
        assert!(block_reason(evaluate(&config("{}"), &other)).contains("not declared"));
        // The tenants' allow lists apply to hosted types like to functions.
        let support = config(r#"{"allow":["get_time","lookup_order","web_search"]}"#);
        assert_allow(evaluate(&support, &req));
        let payments = config(r#"{"allow":["get_time","lookup_order","refund","transfer"]}"#);
        assert!(block_reason(evaluate(&payments, &req)).contains("allow list"));
    }

    #[test]
    fn an_mcp_toolset_covers_its_tools() {
        let crm = ToolDef {
            name: Some("mcp__crm".into()),
            ..hosted("mcp")
        };
        let req = reply(&["mcp__crm__lookup"], vec![crm.clone()]);
        assert_allow(evaluate(&config("{}"), &req));
        // Another server's tool, or a name that only starts like the toolset's, is not.
        for name in ["mcp__billing__pay", "mcp__crmx__lookup", "mcp_crm__lookup"] {
            let other = reply(&[name], vec![crm.clone()]);
            let why = block_reason(evaluate(&config("{}"), &other));
            assert!(why.contains("not declared"), "{name}: {why}");
        }
        // A list entry naming the toolset covers its tools; one naming a tool, that tool.
        assert!(block_reason(evaluate(&config(r#"{"deny":["mcp__crm"]}"#), &req)).contains("deny"));
        assert_allow(evaluate(&config(r#"{"allow":["mcp__crm__lookup"]}"#), &req));
        let only_other = config(r#"{"allow":["mcp__crm__update"]}"#);
        assert!(block_reason(evaluate(&only_other, &req)).contains("allow list"));
    }

    #[test]
    fn hosted_tool_with_a_name_is_called_by_name() {
        let named = ToolDef {
            name: Some("my_search".into()),
            ..hosted("web_search")
        };
        assert_allow(evaluate(&config("{}"), &reply(&["my_search"], vec![named])));
    }

    #[test]
    fn function_kind_is_not_a_callable_name() {
        // A nameless function declaration must not make "function" callable.
        let nameless = ToolDef {
            name: None,
            ..tool("x")
        };
        let reason = block_reason(evaluate(
            &config("{}"),
            &reply(&["function"], vec![nameless]),
        ));
        assert!(reason.contains("not declared"));
    }

    #[test]
    fn parallel_calls_report_every_offender_once() {
        let req = reply(
            &["get_weather", "rm_rf", "get_time", "rm_rf", "exfiltrate"],
            vec![tool("get_weather"), tool("get_time")],
        );
        assert_eq!(
            block_reason(evaluate(&config("{}"), &req)),
            "tool call 'rm_rf' is not an allowed tool: it is not declared in the request's tools; \
             tool call 'exfiltrate' is not an allowed tool: it is not declared in the request's tools"
        );
    }

    #[test]
    fn parallel_calls_all_allowed() {
        let req = reply(
            &["get_weather", "get_time", "get_weather", "web_search"],
            vec![tool("get_weather"), tool("get_time"), hosted("web_search")],
        );
        assert_allow(evaluate(&config("{}"), &req));
    }

    #[test]
    fn deny_list_overrides_declaration() {
        let tools = vec![tool("get_weather"), tool("send_email")];
        let cfg = config(r#"{"deny":["send_email"]}"#);
        assert_allow(evaluate(&cfg, &reply(&["get_weather"], tools.clone())));
        assert_eq!(
            block_reason(evaluate(&cfg, &reply(&["send_email"], tools))),
            "tool call 'send_email' is not an allowed tool: it is denied by the allowlist config's deny list"
        );
    }

    #[test]
    fn allow_list_restricts_further() {
        let tools = vec![tool("get_weather"), tool("send_email")];
        let cfg = config(r#"{"allow":["get_weather","not_declared"]}"#);
        assert_allow(evaluate(&cfg, &reply(&["get_weather"], tools.clone())));
        assert_eq!(
            block_reason(evaluate(&cfg, &reply(&["send_email"], tools.clone()))),
            "tool call 'send_email' is not an allowed tool: it is not in the allowlist config's allow list"
        );
        // Being in `allow` does not make an undeclared tool callable.
        assert!(
            block_reason(evaluate(&cfg, &reply(&["not_declared"], tools))).contains("not declared")
        );
    }

    #[test]
    fn deny_wins_over_allow_and_wildcards() {
        let tools = vec![tool("a"), tool("b")];
        let cfg = config(r#"{"allow":["*"],"deny":["b"]}"#);
        assert_allow(evaluate(&cfg, &reply(&["a"], tools.clone())));
        assert!(block_reason(evaluate(&cfg, &reply(&["b"], tools))).contains("deny list"));
    }

    #[test]
    fn allow_list_applies_to_hosted_types() {
        let tools = vec![hosted("web_search"), tool("get_weather")];
        let cfg = config(r#"{"allow":["get_weather"]}"#);
        assert!(block_reason(evaluate(&cfg, &reply(&["web_search"], tools))).contains("allow list"));
    }

    const PRINCIPALS: &str =
        r#"{"principals":{"alice":["get_weather","send_email"],"admin":["*"]}}"#;

    fn as_principal(calls: &[&str], principal: Option<&str>) -> Request {
        request(
            vec![message("user", &[]), message("assistant", calls)],
            vec![tool("get_weather"), tool("send_email"), tool("drop_table")],
            principal,
        )
    }

    #[test]
    fn principal_list_restricts_tools() {
        let cfg = config(PRINCIPALS);
        assert_allow(evaluate(
            &cfg,
            &as_principal(&["send_email"], Some("alice")),
        ));
        assert_eq!(
            block_reason(evaluate(&cfg, &as_principal(&["drop_table"], Some("alice")))),
            "tool call 'drop_table' is not an allowed tool: it is not allowed for principal 'alice'"
        );
        assert_allow(evaluate(
            &cfg,
            &as_principal(&["drop_table"], Some("admin")),
        ));
    }

    #[test]
    fn unknown_principal_is_denied_by_default() {
        let cfg = config(PRINCIPALS);
        assert_eq!(
            block_reason(evaluate(&cfg, &as_principal(&["get_weather"], Some("bob")))),
            "tool call 'get_weather' is not an allowed tool: principal 'bob' is not listed in the \
             allowlist config's principals, and unknown principals are denied"
        );
        let reason = block_reason(evaluate(&cfg, &as_principal(&["get_weather"], None)));
        assert!(reason.contains("no authenticated principal"), "{reason}");
    }

    #[test]
    fn unknown_principal_default_falls_back_to_global_rules() {
        let cfg = config(
            r#"{"principals":{"alice":["get_weather"]},"unknown_principal":"default","deny":["drop_table"]}"#,
        );
        assert_allow(evaluate(&cfg, &as_principal(&["send_email"], Some("bob"))));
        assert_allow(evaluate(&cfg, &as_principal(&["send_email"], None)));
        assert!(
            block_reason(evaluate(&cfg, &as_principal(&["drop_table"], Some("bob"))))
                .contains("deny list")
        );
        // A listed principal is still held to its list.
        assert!(block_reason(evaluate(
            &cfg,
            &as_principal(&["send_email"], Some("alice"))
        ))
        .contains("principal 'alice'"));
    }

    #[test]
    fn principal_is_ignored_without_principals_map() {
        let cfg = config("{}");
        assert_allow(evaluate(
            &cfg,
            &as_principal(&["drop_table"], Some("anyone")),
        ));
    }

    #[test]
    fn principal_list_cannot_grant_undeclared_or_denied_tools() {
        let cfg = config(r#"{"principals":{"admin":["*"]},"deny":["drop_table"]}"#);
        assert!(block_reason(evaluate(
            &cfg,
            &as_principal(&["drop_table"], Some("admin"))
        ))
        .contains("deny list"));
        assert!(
            block_reason(evaluate(&cfg, &as_principal(&["shell"], Some("admin"))))
                .contains("not declared")
        );
    }

    #[test]
    fn unknown_config_fields_are_refused() {
        assert!(Config::parse(r#"{"alow":["x"]}"#).is_err());
        assert!(Config::parse(r#"{"unknown_principal":"maybe"}"#).is_err());
        assert!(Config::parse("null").is_err());
    }

    #[test]
    fn config_schema_is_json() {
        let schema: serde_json::Value = serde_json::from_str(CONFIG_SCHEMA).unwrap();
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn hostile_names_are_described_not_quoted() {
        assert_eq!(quote("get_weather"), "'get_weather'");
        assert_eq!(quote("a'b\nc"), "<5 bytes, not a name: not shown>");
        assert_eq!(
            quote("mail jane@example.com"),
            "<21 bytes, not a name: not shown>"
        );
        let long = "x".repeat(MAX_QUOTED + 1);
        assert!(!quote(&long).contains('x'));
        assert_eq!(quote(&"x".repeat(MAX_QUOTED)).len(), MAX_QUOTED + 2);
    }

    #[test]
    fn many_offenders_are_capped() {
        let names: Vec<String> = (0..15).map(|i| format!("t{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let reason = block_reason(evaluate(&config("{}"), &reply(&refs, vec![])));
        assert!(
            reason.ends_with("; and 5 more disallowed tool calls"),
            "{reason}"
        );
    }

    // --- the tools rail ---

    fn offered(tools: Vec<ToolDef>, principal: Option<&str>) -> Request {
        let mut req = request(vec![message("user", &[])], tools, principal);
        req.rail = Rail::Tools;
        req
    }

    fn hidden(m: &Modification) -> Vec<u32> {
        m.edits
            .iter()
            .map(|e| match e {
                Edit::HideTool(t) => *t,
                other => panic!("unexpected edit {other:?}"),
            })
            .collect()
    }

    #[test]
    fn tools_rail_offers_everything_without_lists() {
        let tools = vec![tool("get_weather"), hosted("web_search")];
        assert_allow(evaluate(&config("{}"), &offered(tools, Some("anyone"))));
        assert_allow(evaluate(&config("{}"), &offered(vec![], None)));
    }

    #[test]
    fn tools_rail_hides_denied_tools() {
        let tools = vec![tool("get_weather"), tool("send_email")];
        let m = testing::expect_modify(evaluate(
            &config(r#"{"deny":["send_email"]}"#),
            &offered(tools, None),
        ));
        assert_eq!(hidden(&m), vec![1]);
        assert_eq!(
            m.reason,
            "hid tool 'send_email' from the model: it is denied by the allowlist config's deny list"
        );
    }

    #[test]
    fn tools_rail_hides_what_the_allow_list_leaves_out() {
        let tools = vec![
            tool("get_weather"),
            tool("send_email"),
            hosted("web_search"),
        ];
        let m = testing::expect_modify(evaluate(
            &config(r#"{"allow":["get_weather"]}"#),
            &offered(tools, None),
        ));
        assert_eq!(hidden(&m), vec![1, 2]);
        assert_eq!(
            m.reason,
            "hid tools 'send_email', 'web_search' from the model: they are not in the allowlist \
             config's allow list"
        );
    }

    #[test]
    fn tools_rail_hides_per_principal() {
        let cfg = config(PRINCIPALS);
        let tools = || vec![tool("get_weather"), tool("send_email"), tool("drop_table")];
        let m = testing::expect_modify(evaluate(&cfg, &offered(tools(), Some("alice"))));
        assert_eq!(hidden(&m), vec![2]);
        assert_eq!(
            m.reason,
            "hid tool 'drop_table' from the model: it is not allowed for principal 'alice'"
        );
        assert_allow(evaluate(&cfg, &offered(tools(), Some("admin"))));
        // Unknown principals are denied everything, so they are offered nothing.
        let m = testing::expect_modify(evaluate(&cfg, &offered(tools(), Some("bob"))));
        assert_eq!(hidden(&m), vec![0, 1, 2]);
        assert!(
            m.reason.starts_with(
                "hid tools 'get_weather', 'send_email', 'drop_table' from the model: principal \
                 'bob' is not listed"
            ),
            "{}",
            m.reason
        );
        let m = testing::expect_modify(evaluate(&cfg, &offered(tools(), None)));
        assert!(
            m.reason.contains("no authenticated principal"),
            "{}",
            m.reason
        );
        // unknown_principal = default: only the global lists.
        let lenient = config(
            r#"{"principals":{"alice":["get_weather"]},"unknown_principal":"default","deny":["drop_table"]}"#,
        );
        let m = testing::expect_modify(evaluate(&lenient, &offered(tools(), Some("bob"))));
        assert_eq!(hidden(&m), vec![2]);
    }

    #[test]
    fn tools_rail_leaves_hidden_and_nameless_tools_alone() {
        let mut already = tool("send_email");
        already.hidden_by = Some("other-policy".into());
        let nameless = ToolDef {
            name: None,
            ..tool("x")
        };
        let cfg = config(r#"{"allow":["get_weather"]}"#);
        let req = offered(vec![already, nameless, tool("get_weather")], None);
        assert_allow(evaluate(&cfg, &req));
    }

    #[test]
    fn tools_rail_mixes_reasons_and_names_each_tool_once() {
        let cfg = config(r#"{"deny":["a"],"principals":{"alice":["b"]}}"#);
        let req = offered(
            vec![tool("a"), tool("b"), tool("c"), tool("a")],
            Some("alice"),
        );
        let m = testing::expect_modify(evaluate(&cfg, &req));
        assert_eq!(hidden(&m), vec![0, 2, 3]);
        assert_eq!(
            m.reason,
            "hid tool 'a' from the model: it is denied by the allowlist config's deny list; \
             hid tool 'c' from the model: it is not allowed for principal 'alice'"
        );
    }

    #[test]
    fn tools_rail_hides_exactly_what_the_tool_call_rail_blocks() {
        let configs = [
            "{}",
            r#"{"deny":["send_email"]}"#,
            r#"{"allow":["get_weather","web_search"]}"#,
            PRINCIPALS,
            r#"{"principals":{"alice":["get_weather"]},"unknown_principal":"default","deny":["drop_table"]}"#,
        ];
        let names = ["get_weather", "send_email", "drop_table", "web_search"];
        let tools = || {
            vec![
                tool("get_weather"),
                tool("send_email"),
                tool("drop_table"),
                hosted("web_search"),
            ]
        };
        for cfg in configs {
            for principal in [None, Some("alice"), Some("admin"), Some("bob")] {
                let cfg = config(cfg);
                let hid = match evaluate(&cfg, &offered(tools(), principal)) {
                    Verdict::Allow => vec![],
                    v => hidden(&testing::expect_modify(v)),
                };
                for (i, name) in names.iter().enumerate() {
                    let req = request(
                        vec![message("user", &[]), message("assistant", &[name])],
                        tools(),
                        principal,
                    );
                    let blocked = matches!(evaluate(&cfg, &req), Verdict::Block(_));
                    assert_eq!(
                        hid.contains(&(i as u32)),
                        blocked,
                        "{name} for {principal:?}"
                    );
                }
            }
        }
    }

    // --- a call to a hidden tool ---

    #[test]
    fn call_to_a_hidden_tool_is_blocked_naming_the_policy() {
        let mut refund = tool("refund");
        refund.hidden_by = Some("allowlist-support".into());
        let req = reply(&["get_time", "refund"], vec![tool("get_time"), refund]);
        // Even a config that would allow it: the model was never offered the tool.
        assert_eq!(
            block_reason(evaluate(&config("{}"), &req)),
            "tool call 'refund' is not an allowed tool: the tool was hidden from the model by \
             policy 'allowlist-support'"
        );
        // An undeclared name still says so; a visible tool is still allowed.
        let mut other = tool("x");
        other.hidden_by = Some("p".into());
        assert!(
            block_reason(evaluate(&config("{}"), &reply(&["y"], vec![other.clone()])))
                .contains("not declared")
        );
        assert_allow(evaluate(
            &config("{}"),
            &reply(&["get_time"], vec![tool("get_time"), other]),
        ));
    }

    #[test]
    fn hidden_hosted_tool_is_blocked_by_type() {
        let mut search = hosted("web_search");
        search.hidden_by = Some("allowlist".into());
        let reason = block_reason(evaluate(
            &config("{}"),
            &reply(&["web_search"], vec![search]),
        ));
        assert!(
            reason.ends_with("hidden from the model by policy 'allowlist'"),
            "{reason}"
        );
    }
}
