//! Validation of tool-call arguments against the declared `parameters` schemas, as plain
//! functions over the SDK types (no host imports) so it is unit-testable natively.
//!
//! Rules, for every call of the last message (the model's reply):
//! - The call must name a declared function tool. A hosted tool declared by type only (e.g.
//!   `web_search`) has a provider-defined argument shape that `request.tools` does not describe:
//!   its arguments need only be a JSON object (or absent), unless `allow_hosted_tools` is false.
//!   Any other name is blocked: its arguments cannot be validated.
//! - Arguments must be well-formed JSON without duplicate keys (a duplicate key means the
//!   application may read a different value than the one validated), and must be an object.
//!   "No arguments" — empty or whitespace-only text, or JSON `null` — counts as `{}`, since
//!   models and SDKs send all of these for argument-less calls.
//! - A tool that declares no `parameters` takes no arguments: only "no arguments" or `{}` pass.
//! - Otherwise the object must be valid against the declared schema. A schema that is not JSON,
//!   not a valid JSON Schema, or refers to external documents (no network or file access here)
//!   blocks the call. When the same name is declared more than once with different schemas, the
//!   arguments must satisfy every one of them (which one the application uses is unknown).
//!
//! Reasons say which tool and which call, the instance path (`at /location/lat`) and what is
//! wrong, but not the argument values themselves unless `include_values` is set: arguments can
//! carry personal data, and reasons end up in decision logs.

use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
pub use railyard_plugin_sdk::json::parse_strict;
use railyard_plugin_sdk::reason::{call_label, quote};
use railyard_plugin_sdk::{Request, ToolCall, ToolDef, Verdict};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::rc::Rc;

/// JSON Schema of the plugin's config, as given to the host in `describe`.
pub const CONFIG_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "schema-validator plugin config",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "max_errors": {
      "description": "How many schema errors to spell out per tool call (default 3).",
      "type": "integer",
      "minimum": 1,
      "maximum": 50
    },
    "include_values": {
      "description": "Quote the offending argument values in reasons (default false: reasons go to decision logs, arguments may hold personal data).",
      "type": "boolean"
    },
    "allow_hosted_tools": {
      "description": "Let calls to hosted tools declared by type only (no schema) through when their arguments are a JSON object (default true); false blocks them.",
      "type": "boolean"
    }
  }
}"#;

/// Compiled validators kept per instance; beyond this many distinct schemas the cache starts over.
const MAX_CACHED_SCHEMAS: usize = 256;
/// At most this many failing calls are spelled out in one reason.
const MAX_REPORTED_CALLS: usize = 10;
/// The plugin's config, parsed from the JSON the host validated against [`CONFIG_SCHEMA`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "default_max_errors")]
    pub max_errors: usize,
    #[serde(default)]
    pub include_values: bool,
    #[serde(default = "default_true")]
    pub allow_hosted_tools: bool,
}

fn default_max_errors() -> usize {
    3
}

fn default_true() -> bool {
    true
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_errors: default_max_errors(),
            include_values: false,
            allow_hosted_tools: true,
        }
    }
}

impl Config {
    /// Parses the config JSON text.
    pub fn parse(text: &str) -> Result<Config, String> {
        let config: Config = serde_json::from_str(text)
            .map_err(|e| format!("invalid schema-validator config: {e}"))?;
        if config.max_errors == 0 {
            return Err("invalid schema-validator config: max_errors must be at least 1".into());
        }
        Ok(config)
    }
}

/// Compiled validators keyed by the schema's exact text; failures are cached too, so a broken
/// schema is not recompiled on every request.
#[derive(Default)]
pub struct SchemaCache {
    compiled: HashMap<String, Result<Rc<Validator>, String>>,
    compilations: usize,
}

impl SchemaCache {
    /// The validator for this schema text, compiling it on first use.
    pub fn get(&mut self, schema_text: &str) -> Result<Rc<Validator>, String> {
        if let Some(entry) = self.compiled.get(schema_text) {
            return entry.clone();
        }
        if self.compiled.len() >= MAX_CACHED_SCHEMAS {
            self.compiled.clear();
        }
        self.compilations += 1;
        let entry = compile(schema_text);
        self.compiled.insert(schema_text.to_string(), entry.clone());
        entry
    }

    /// How many schemas were compiled so far (for tests and diagnostics).
    pub fn compilations(&self) -> usize {
        self.compilations
    }
}

fn compile(schema_text: &str) -> Result<Rc<Validator>, String> {
    let schema: Value =
        serde_json::from_str(schema_text).map_err(|e| format!("it is not valid JSON ({e})"))?;
    jsonschema::validator_for(&schema)
        .map(Rc::new)
        .map_err(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                format!("it is not a usable JSON Schema ({e})")
            } else {
                format!("it is not a usable JSON Schema (at {at}: {e})")
            }
        })
}

/// Judges the tool calls of the request's last message.
pub fn evaluate(config: &Config, cache: &mut SchemaCache, request: &Request) -> Verdict {
    let Some(reply) = request.messages.last() else {
        return Verdict::Allow;
    };
    let mut problems = Vec::new();
    for (index, call) in reply.tool_calls.iter().enumerate() {
        if let Err(problem) = check_call(config, cache, &request.tools, call) {
            problems.push(format!("{problem} ({})", call_label(call, index)));
        }
    }
    if problems.is_empty() {
        return Verdict::Allow;
    }
    let extra = problems.len().saturating_sub(MAX_REPORTED_CALLS);
    problems.truncate(MAX_REPORTED_CALLS);
    let mut reason = problems.join("; ");
    if extra > 0 {
        reason.push_str(&format!(
            "; and {extra} more tool calls with invalid arguments"
        ));
    }
    Verdict::Block(reason)
}

/// Checks one call; the error is the reason, without the call label.
pub fn check_call(
    config: &Config,
    cache: &mut SchemaCache,
    tools: &[ToolDef],
    call: &ToolCall,
) -> Result<(), String> {
    let tool = quote(&call.name);
    let mut schemas: Vec<Option<&str>> = Vec::new();
    for def in tools {
        if def.kind == "function" && def.name.as_deref() == Some(call.name.as_str()) {
            let params = def.parameters.as_deref();
            if !schemas.contains(&params) {
                schemas.push(params);
            }
        }
    }
    if schemas.is_empty() {
        let hosted = tools.iter().any(|def| {
            def.kind != "function" && def.name.as_deref().unwrap_or(def.kind.as_str()) == call.name
        });
        if !hosted {
            return Err(format!(
                "tool call {tool} names no declared tool, so its arguments cannot be validated"
            ));
        }
        if !config.allow_hosted_tools {
            return Err(format!(
                "tool call {tool} is to a hosted tool, which declares no parameters schema, and the \
                 schema-validator config blocks hosted tool calls"
            ));
        }
        parse_arguments(&tool, &call.arguments)?;
        return Ok(());
    }

    let arguments = Value::Object(parse_arguments(&tool, &call.arguments)?);
    for schema in schemas {
        match schema {
            None => {
                if let Some(map) = arguments.as_object().filter(|m| !m.is_empty()) {
                    let keys: Vec<String> = map.keys().map(|k| quote(k)).collect();
                    return Err(format!(
                        "arguments for tool {tool} are not allowed: the tool declares no parameters, \
                         but the call passes {}",
                        keys.join(", ")
                    ));
                }
            }
            Some(text) => {
                let validator = cache.get(text).map_err(|why| {
                    format!(
                        "the parameters schema declared for tool {tool} cannot be used, so its calls \
                         cannot be validated: {why}"
                    )
                })?;
                let mut errors = validator.iter_errors(&arguments);
                let mut described: Vec<String> = errors
                    .by_ref()
                    .take(config.max_errors)
                    .map(|e| describe_error(&e, config.include_values))
                    .collect();
                if !described.is_empty() {
                    if errors.next().is_some() {
                        described.push("and more".into());
                    }
                    return Err(format!(
                        "arguments for tool {tool} do not match its schema: {}",
                        described.join("; ")
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Parses a call's arguments into a JSON object ("no arguments" becomes `{}`).
fn parse_arguments(tool: &str, text: &str) -> Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match parse_strict(text) {
        Ok(Value::Null) => Ok(Map::new()),
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "arguments for tool {tool} are not a JSON object (they are {})",
            type_phrase(&other)
        )),
        Err(e) => Err(format!("arguments for tool {tool} are not valid JSON: {e}")),
    }
}

/// One schema error as text: the instance path when not the root, then what is wrong.
fn describe_error(error: &ValidationError<'_>, include_values: bool) -> String {
    let what = match error.kind() {
        // The library prints the property as JSON ("city"); quote it like every other name.
        ValidationErrorKind::Required { property } => match property.as_str() {
            Some(name) => format!("{} is a required property", quote(name)),
            None => error.to_string(),
        },
        _ if include_values => error.to_string(),
        _ => error.masked_with(type_phrase(error.instance())).to_string(),
    };
    let at = error.instance_path().to_string();
    if at.is_empty() {
        what
    } else {
        format!("at {at}: {what}")
    }
}

/// "a string", "an object", ...: stands in for a value in reasons.
fn type_phrase(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_plugin_sdk::{Context, Message, Rail};

    const WEATHER: &str = r#"{
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "units": {"enum": ["metric", "imperial"]},
            "location": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"]
            }
        },
        "required": ["city"],
        "additionalProperties": false
    }"#;

    fn function(name: &str, parameters: Option<&str>) -> ToolDef {
        ToolDef {
            kind: "function".into(),
            name: Some(name.into()),
            description: None,
            parameters: parameters.map(Into::into),
        }
    }

    fn hosted(kind: &str) -> ToolDef {
        ToolDef {
            kind: kind.into(),
            name: None,
            description: None,
            parameters: None,
        }
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn message(role: &str, tool_calls: Vec<ToolCall>) -> Message {
        Message {
            role: role.into(),
            content: None,
            name: None,
            tool_call_id: None,
            tool_calls,
        }
    }

    fn request(messages: Vec<Message>, tools: Vec<ToolDef>) -> Request {
        Request {
            rail: Rail::ToolCall,
            messages,
            tools,
            context: Context {
                request_id: "req-1".into(),
                principal: None,
                tenant: None,
                metadata: vec![],
            },
        }
    }

    fn reply(calls: Vec<ToolCall>, tools: Vec<ToolDef>) -> Request {
        request(
            vec![message("user", vec![]), message("assistant", calls)],
            tools,
        )
    }

    fn weather_tools() -> Vec<ToolDef> {
        vec![
            function("get_weather", Some(WEATHER)),
            function("ping", None),
            hosted("web_search"),
        ]
    }

    fn run(config: &Config, req: &Request) -> Verdict {
        evaluate(config, &mut SchemaCache::default(), req)
    }

    fn check(arguments: &str) -> Verdict {
        run(
            &Config::default(),
            &reply(
                vec![call("call_1", "get_weather", arguments)],
                weather_tools(),
            ),
        )
    }

    fn block_reason(verdict: Verdict) -> String {
        match verdict {
            Verdict::Block(reason) => reason,
            other => panic!("expected block, got {other:?}"),
        }
    }

    fn assert_allow(verdict: Verdict) {
        assert!(
            matches!(verdict, Verdict::Allow),
            "expected allow, got {verdict:?}"
        );
    }

    #[test]
    fn valid_arguments_pass() {
        assert_allow(check(r#"{"city":"Paris"}"#));
        assert_allow(check(
            r#"{"city":"Paris","days":3,"units":"metric","location":{"lat":48.8,"lon":2.3}}"#,
        ));
    }

    #[test]
    fn missing_required_property_is_named() {
        assert_eq!(
            block_reason(check(r#"{"days":3}"#)),
            "arguments for tool 'get_weather' do not match its schema: 'city' is a required property (call 'call_1')"
        );
    }

    #[test]
    fn nested_errors_carry_the_instance_path_without_values() {
        let reason = block_reason(check(
            r#"{"city":"Paris","location":{"lat":"north","lon":2.3}}"#,
        ));
        assert_eq!(
            reason,
            "arguments for tool 'get_weather' do not match its schema: at /location/lat: a string is not of type \"number\" (call 'call_1')"
        );
        assert!(!reason.contains("north"));
    }

    #[test]
    fn values_are_quoted_only_when_configured() {
        let config = Config {
            include_values: true,
            ..Config::default()
        };
        let req = reply(
            vec![call(
                "call_1",
                "get_weather",
                r#"{"city":"Paris","days":99}"#,
            )],
            weather_tools(),
        );
        let reason = block_reason(run(&config, &req));
        assert!(
            reason.contains("at /days: 99 is greater than the maximum of 14"),
            "{reason}"
        );
        let masked = block_reason(run(&Config::default(), &req));
        assert!(
            masked.contains("at /days: an integer is greater than the maximum of 14"),
            "{masked}"
        );
    }

    #[test]
    fn several_errors_are_listed_up_to_max_errors() {
        let bad = r#"{"days":0,"units":"kelvin","extra":1,"location":{}}"#;
        let reason = block_reason(check(bad));
        assert_eq!(reason.matches("; ").count(), 3, "{reason}"); // 3 errors + "and more"
        assert!(reason.contains("and more"), "{reason}");
        let config = Config {
            max_errors: 10,
            ..Config::default()
        };
        let all = block_reason(run(
            &config,
            &reply(vec![call("c", "get_weather", bad)], weather_tools()),
        ));
        for expected in [
            "'city' is a required property",
            "Additional properties are not allowed ('extra' was unexpected)",
            "at /days: an integer is less than the minimum of 1",
            "at /units: a string is not one of",
            "at /location: 'lat' is a required property",
        ] {
            assert!(all.contains(expected), "missing {expected:?} in {all}");
        }
        assert!(!all.contains("and more"));
    }

    #[test]
    fn malformed_json_is_blocked() {
        let reason = block_reason(check(r#"{"city": "Paris""#));
        assert!(
            reason.starts_with(
                "arguments for tool 'get_weather' are not valid JSON: EOF while parsing"
            ),
            "{reason}"
        );
        let trailing = block_reason(check(r#"{"city":"Paris"} x"#));
        assert!(
            trailing.contains("not valid JSON: trailing characters"),
            "{trailing}"
        );
    }

    #[test]
    fn duplicate_keys_are_blocked() {
        let reason = block_reason(check(r#"{"city":"Paris","city":""}"#));
        assert!(
            reason.contains("not valid JSON: duplicate key 'city'"),
            "{reason}"
        );
        let nested = block_reason(check(
            r#"{"city":"Paris","location":{"lat":1,"lat":2,"lon":3}}"#,
        ));
        assert!(nested.contains("duplicate key 'lat'"), "{nested}");
    }

    #[test]
    fn non_object_arguments_are_blocked() {
        assert_eq!(
            block_reason(check(r#"["Paris"]"#)),
            "arguments for tool 'get_weather' are not a JSON object (they are an array) (call 'call_1')"
        );
        assert!(block_reason(check(r#""Paris""#)).contains("(they are a string)"));
    }

    #[test]
    fn absent_arguments_count_as_empty_object() {
        // Against a schema with a required property, "no arguments" still fails, by name.
        for empty in ["", "  ", "null", "{}"] {
            assert!(block_reason(check(empty)).contains("'city' is a required property"));
        }
        let optional = vec![function(
            "list",
            Some(r#"{"type":"object","properties":{}}"#),
        )];
        for empty in ["", "null", "{}"] {
            assert_allow(run(
                &Config::default(),
                &reply(vec![call("c", "list", empty)], optional.clone()),
            ));
        }
    }

    #[test]
    fn tool_without_parameters_takes_no_arguments() {
        for empty in ["", "{}", "null", " { } "] {
            assert_allow(run(
                &Config::default(),
                &reply(vec![call("c", "ping", empty)], weather_tools()),
            ));
        }
        assert_eq!(
            block_reason(run(
                &Config::default(),
                &reply(vec![call("c1", "ping", r#"{"host":"x","n":1}"#)], weather_tools()),
            )),
            "arguments for tool 'ping' are not allowed: the tool declares no parameters, but the call passes 'host', 'n' (call 'c1')"
        );
        assert!(block_reason(run(
            &Config::default(),
            &reply(vec![call("c1", "ping", "[]")], weather_tools()),
        ))
        .contains("not a JSON object"));
    }

    #[test]
    fn undeclared_tool_is_blocked() {
        assert_eq!(
            block_reason(run(
                &Config::default(),
                &reply(vec![call("c9", "delete_database", "{}")], weather_tools()),
            )),
            "tool call 'delete_database' names no declared tool, so its arguments cannot be validated (call 'c9')"
        );
    }

    #[test]
    fn hosted_tool_needs_only_an_object() {
        let tools = weather_tools();
        let config = Config::default();
        assert_allow(run(
            &config,
            &reply(
                vec![call("c", "web_search", r#"{"query":"rust"}"#)],
                tools.clone(),
            ),
        ));
        assert!(block_reason(run(
            &config,
            &reply(vec![call("c", "web_search", "{oops")], tools.clone()),
        ))
        .contains("not valid JSON"));
        let strict = Config {
            allow_hosted_tools: false,
            ..Config::default()
        };
        assert!(block_reason(run(
            &strict,
            &reply(vec![call("c", "web_search", "{}")], tools),
        ))
        .contains("hosted tool"));
    }

    #[test]
    fn invalid_declared_schema_blocks() {
        let tools = vec![
            function("broken_json", Some(r#"{"type":"object""#)),
            function("bad_schema", Some(r#"{"type":"objekt"}"#)),
            function(
                "remote_ref",
                Some(r#"{"$ref":"https://example.com/s.json"}"#),
            ),
        ];
        for name in ["broken_json", "bad_schema", "remote_ref"] {
            let reason = block_reason(run(
                &Config::default(),
                &reply(vec![call("c", name, "{}")], tools.clone()),
            ));
            assert!(
                reason.starts_with(&format!(
                    "the parameters schema declared for tool '{name}' cannot be used, so its calls cannot be validated: it is not"
                )),
                "{reason}"
            );
        }
    }

    #[test]
    fn parallel_calls_report_each_failing_call() {
        let req = reply(
            vec![
                call("call_a", "get_weather", r#"{"city":"Paris"}"#),
                call("call_b", "get_weather", r#"{"city":""}"#),
                call("call_c", "ping", "{}"),
                call("call_d", "get_weather", r#"{"city":"Rome","days":"3"}"#),
                call("call_e", "web_search", r#"{"q":"x"}"#),
            ],
            weather_tools(),
        );
        assert_eq!(
            block_reason(run(&Config::default(), &req)),
            "arguments for tool 'get_weather' do not match its schema: at /city: a string is shorter than 1 character (call 'call_b'); \
             arguments for tool 'get_weather' do not match its schema: at /days: a string is not of type \"integer\" (call 'call_d')"
        );
    }

    #[test]
    fn parallel_valid_calls_pass() {
        let req = reply(
            vec![
                call("call_a", "get_weather", r#"{"city":"Paris"}"#),
                call("call_b", "get_weather", r#"{"city":"Rome","days":2}"#),
                call("call_c", "ping", ""),
            ],
            weather_tools(),
        );
        assert_allow(run(&Config::default(), &req));
    }

    #[test]
    fn only_the_last_message_is_judged() {
        let req = request(
            vec![
                message("user", vec![]),
                message("assistant", vec![call("old", "get_weather", "{broken")]),
                message("tool", vec![]),
                message(
                    "assistant",
                    vec![call("new", "get_weather", r#"{"city":"Oslo"}"#)],
                ),
            ],
            weather_tools(),
        );
        assert_allow(run(&Config::default(), &req));
        assert_allow(run(&Config::default(), &request(vec![], vec![])));
    }

    #[test]
    fn conflicting_declarations_must_all_be_satisfied() {
        let tools = vec![
            function("f", Some(r#"{"type":"object","required":["a"]}"#)),
            function("f", Some(r#"{"type":"object","required":["b"]}"#)),
        ];
        let reason = block_reason(run(
            &Config::default(),
            &reply(vec![call("c", "f", r#"{"a":1}"#)], tools.clone()),
        ));
        assert!(reason.contains("'b' is a required property"), "{reason}");
        assert_allow(run(
            &Config::default(),
            &reply(vec![call("c", "f", r#"{"a":1,"b":2}"#)], tools),
        ));
    }

    #[test]
    fn compiled_validators_are_cached_per_schema_text() {
        let mut cache = SchemaCache::default();
        let req = reply(
            vec![
                call("a", "get_weather", r#"{"city":"Paris"}"#),
                call("b", "get_weather", r#"{"city":"Rome"}"#),
            ],
            weather_tools(),
        );
        for _ in 0..5 {
            assert_allow(evaluate(&Config::default(), &mut cache, &req));
        }
        assert_eq!(cache.compilations(), 1);
        // A broken schema is remembered too.
        let broken = reply(
            vec![call("a", "x", "{}")],
            vec![function("x", Some(r#"{"type":1}"#))],
        );
        for _ in 0..3 {
            block_reason(evaluate(&Config::default(), &mut cache, &broken));
        }
        assert_eq!(cache.compilations(), 2);
    }

    #[test]
    fn local_refs_are_followed() {
        let schema = r##"{"type":"object","$defs":{"pos":{"type":"integer","minimum":0}},
            "properties":{"n":{"$ref":"#/$defs/pos"}}}"##;
        let tools = vec![function("f", Some(schema))];
        assert_allow(run(
            &Config::default(),
            &reply(vec![call("c", "f", r#"{"n":2}"#)], tools.clone()),
        ));
        let reason = block_reason(run(
            &Config::default(),
            &reply(vec![call("c", "f", r#"{"n":-2}"#)], tools),
        ));
        assert!(
            reason.contains("at /n: an integer is less than the minimum of 0"),
            "{reason}"
        );
    }

    #[test]
    fn config_parsing() {
        assert!(Config::parse("{}").is_ok());
        assert!(Config::parse(r#"{"max_errors":0}"#).is_err());
        assert!(Config::parse(r#"{"verbose":true}"#).is_err());
        let schema: Value = serde_json::from_str(CONFIG_SCHEMA).unwrap();
        assert_eq!(schema["additionalProperties"], false);
        assert!(jsonschema::validator_for(&schema).is_ok());
    }
}
