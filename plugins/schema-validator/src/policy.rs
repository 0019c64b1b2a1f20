//! Validation of tool-call arguments against the declared `parameters` schemas, as plain
//! functions over the SDK types (no host imports) so it is unit-testable natively.
//!
//! These are NeMo Guardrails' IORails tool-call argument rules. For every call of the last
//! message (the model's reply), first failure wins:
//! 1. The call must name a declared tool, declared once. A function tool declared under that name
//!    comes first; a name declared as a function more than once is ambiguous and blocks (which
//!    schema the application applies is unknown).
//! 2. Hosted tools: when no function of that name is declared but a hosted tool of that type (or
//!    name) is, the call is allowed without a schema check: its shape belongs to the provider and
//!    `request.tools` does not describe it. Its arguments need only be empty (a hosted call
//!    without a `function` object reaches plugins with empty arguments) or a JSON object. With
//!    `allow_hosted_tools: false` such calls block instead. A provider's MCP server is declared as
//!    one hosted tool, `mcp__<server>`, and covers calls to its tools, `mcp__<server>__<tool>`.
//! 3. Arguments are either absent (the empty string, which is also what the host passes when
//!    the model sent none) or a well-formed JSON object without duplicate keys (a duplicate key
//!    means the application may read another value than the one validated). `null`, arrays,
//!    strings, numbers and booleans are not objects and block; so does anything malformed,
//!    including whitespace alone. Absent arguments are validated as `{}`.
//! 4. A declared schema that is not JSON, not a valid JSON Schema, or refers to external documents
//!    (no network or file access here) blocks: a call is never let through unvalidated.
//! 5. The arguments must be valid against the declared schema.
//! 6. No-argument tools: a function that declares no `parameters`, or a schema that declares no
//!    way to pass an argument (`{}`, `true`, or an object schema with no `properties` and no
//!    `additionalProperties`, `patternProperties`, `unevaluatedProperties` or combinator/reference
//!    keyword), takes no arguments: `""` and `"{}"` pass, any supplied argument blocks. JSON
//!    Schema itself would let anything through such a schema; `plain_json_schema: true` reads
//!    the schema as JSON Schema does (for declarations that are loose on purpose), leaving the
//!    rule to functions that declare no `parameters` at all.
//!
//! Reasons name the tool, the call, the JSON path (`at /location/lat`) and the failing schema
//! keyword, never argument values: arguments can carry personal data, and reasons end up in
//! decision logs. Even property names the model chose are masked (`/*/x`, "1 undeclared
//! property"): only names the schema declares are shown. `include_values` lifts the masking.

use jsonschema::error::ValidationErrorKind;
use jsonschema::paths::LocationSegment;
use jsonschema::{ValidationError, Validator};
use railyard_plugin_sdk::by_text::ByText;
pub use railyard_plugin_sdk::json::parse_strict;
use railyard_plugin_sdk::reason::{call_label, push_segment, quote};
use railyard_plugin_sdk::{Request, ToolCall, ToolDef, Verdict};
use serde::Deserialize;
use serde_json::{Map, Value};
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
      "description": "Quote the offending argument values and property names in reasons (default false: reasons go to decision logs, arguments may hold personal data).",
      "type": "boolean"
    },
    "allow_hosted_tools": {
      "description": "Let calls to hosted tools declared by type only (no schema) through when their arguments are empty or a JSON object (default true); false blocks them.",
      "type": "boolean"
    },
    "plain_json_schema": {
      "description": "Read an object schema without properties ({\"type\": \"object\"}) as JSON Schema does, accepting any object (default false: NeMo Guardrails' rule, such a tool takes no arguments).",
      "type": "boolean"
    }
  }
}"#;

/// Compiled validators kept per instance; beyond this many distinct schemas the cache starts over.
const MAX_CACHED_SCHEMAS: usize = 256;
/// At most this many failing calls are spelled out in one reason.
const MAX_REPORTED_CALLS: usize = 10;
/// Longest chain of local `$ref`s followed when naming a path.
const MAX_REF_HOPS: usize = 16;
/// Stands in for a property name the schema does not declare (the model chose it).
const UNDECLARED: &str = "*";
/// Keywords through which a schema can accept properties it does not list in `properties`.
const OPENING_KEYWORDS: [&str; 12] = [
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "dependentSchemas",
    "dependencies",
];

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
    #[serde(default)]
    pub plain_json_schema: bool,
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
            plain_json_schema: false,
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

/// A declared schema, ready to validate with.
pub struct Compiled {
    pub(crate) validator: Validator,
    /// The schema itself, to tell declared property names from the model's.
    pub(crate) schema: Value,
    /// The schema declares no way to pass an argument (rule 6).
    takes_no_arguments: bool,
}

impl Compiled {
    /// Why `value` does not match the schema (at most `max_errors` errors, then "and more"), or
    /// `None` when it does. A valid value, the common case, is answered without building any
    /// error.
    pub(crate) fn mismatches(&self, config: &Config, value: &Value) -> Option<String> {
        if self.validator.is_valid(value) {
            return None;
        }
        let mut errors = self.validator.iter_errors(value);
        let mut described: Vec<String> = errors
            .by_ref()
            .take(config.max_errors)
            .map(|e| describe_error(&e, &self.schema, config.include_values))
            .collect();
        if described.is_empty() {
            return None;
        }
        if errors.next().is_some() {
            described.push("and more".into());
        }
        Some(described.join("; "))
    }
}

/// Compiled validators keyed by the schema's exact text; failures are cached too, so a broken
/// schema is not recompiled on every request.
pub struct SchemaCache {
    compiled: ByText<Result<Rc<Compiled>, String>>,
    compilations: usize,
}

impl Default for SchemaCache {
    fn default() -> Self {
        SchemaCache {
            compiled: ByText::new(MAX_CACHED_SCHEMAS, usize::MAX),
            compilations: 0,
        }
    }
}

impl SchemaCache {
    /// The validator for this schema text, compiling it on first use.
    pub fn get(&mut self, schema_text: &str) -> Result<Rc<Compiled>, String> {
        let compilations = &mut self.compilations;
        self.compiled
            .get_or_insert_with(schema_text, |text| {
                *compilations += 1;
                compile(text)
            })
            .clone()
    }

    /// How many schemas were compiled so far (for tests and diagnostics).
    pub fn compilations(&self) -> usize {
        self.compilations
    }
}

fn compile(schema_text: &str) -> Result<Rc<Compiled>, String> {
    let schema: Value =
        serde_json::from_str(schema_text).map_err(|e| format!("it is not valid JSON ({e})"))?;
    let validator = jsonschema::validator_for(&schema).map_err(|e| {
        let at = e.instance_path().to_string();
        if at.is_empty() {
            format!("it is not a usable JSON Schema ({e})")
        } else {
            format!("it is not a usable JSON Schema (at {at}: {e})")
        }
    })?;
    Ok(Rc::new(Compiled {
        validator,
        takes_no_arguments: takes_no_arguments(&schema),
        schema,
    }))
}

/// Whether a schema declares no way to pass an argument: the empty schema (`{}` or `true`), or
/// an object schema without `properties` that opens no other channel for them.
pub fn takes_no_arguments(schema: &Value) -> bool {
    let node = match schema {
        Value::Bool(accepts) => return *accepts,
        Value::Object(node) => node,
        _ => return false,
    };
    let is_object_type = match node.get("type") {
        None => true,
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        Some(_) => false,
    };
    let empty_object = |key: &str| match node.get(key) {
        None => true,
        Some(Value::Object(map)) => map.is_empty(),
        Some(_) => false,
    };
    let closed = |key: &str| matches!(node.get(key), None | Some(Value::Bool(false)));
    is_object_type
        && empty_object("properties")
        && empty_object("patternProperties")
        && closed("additionalProperties")
        && closed("unevaluatedProperties")
        && !OPENING_KEYWORDS.iter().any(|k| node.contains_key(*k))
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
    let tool = Quoted(&call.name);
    // A custom tool's input is free text in the format it declares (text or a grammar), not
    // JSON: there is no schema to hold it to, only its declaration to find.
    if call.kind == "custom" {
        let declared = tools
            .iter()
            .any(|def| def.kind == "custom" && def.name.as_deref() == Some(call.name.as_str()));
        return match declared {
            true => Ok(()),
            false => Err(format!("tool call {tool} names no declared custom tool")),
        };
    }
    let functions: Vec<&ToolDef> = tools
        .iter()
        .filter(|def| def.kind == "function" && def.name.as_deref() == Some(call.name.as_str()))
        .collect();
    let def = match functions.as_slice() {
        [def] => *def,
        [] => {
            // An MCP toolset (`mcp__<server>`) declares its server's tools
            // (`mcp__<server>__<tool>`).
            let hosted = tools.iter().any(|def| {
                let name = def.name.as_deref().unwrap_or(def.kind.as_str());
                def.kind != "function"
                    && (name == call.name
                        || (def.kind == "mcp"
                            && railyard_plugin_sdk::mcp_toolset(&call.name) == Some(name)))
            });
            if !hosted {
                return Err(format!(
                    "tool call {tool} names no declared tool, so its arguments cannot be validated"
                ));
            }
            if !config.allow_hosted_tools {
                return Err(format!(
                    "tool call {tool} is to a hosted tool, which declares no parameters schema, \
                     and the schema-validator config blocks hosted tool calls"
                ));
            }
            parse_arguments(config, &tool, &call.arguments)?;
            return Ok(());
        }
        many => {
            return Err(format!(
                "tool call {tool} is ambiguous: the request's tools declare function {tool} {} \
                 times, so which schema applies is unknown",
                many.len()
            ))
        }
    };

    let arguments = parse_arguments(config, &tool, &call.arguments)?.unwrap_or_default();
    let Some(schema_text) = def.parameters.as_deref() else {
        return no_arguments(&tool, &arguments);
    };
    let compiled = cache.get(schema_text).map_err(|why| {
        format!(
            "the parameters schema declared for tool {tool} cannot be used, so its calls cannot \
             be validated: {why}"
        )
    })?;
    let arguments = Value::Object(arguments);
    if let Some(why) = compiled.mismatches(config, &arguments) {
        return Err(format!(
            "arguments for tool {tool} do not match its schema: {why}"
        ));
    }
    if compiled.takes_no_arguments && !config.plain_json_schema {
        if let Value::Object(map) = &arguments {
            return no_arguments(&tool, map);
        }
    }
    Ok(())
}

/// A tool's name as reasons quote it, written only into a reason: a valid call makes none.
struct Quoted<'a>(&'a str);

impl std::fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&quote(self.0))
    }
}

/// Rule 6: a tool that declares no parameters takes none.
fn no_arguments(tool: &Quoted<'_>, arguments: &Map<String, Value>) -> Result<(), String> {
    match arguments.len() {
        0 => Ok(()),
        n => Err(format!(
            "arguments for tool {tool} are not allowed: the tool declares no parameters, but the \
             call passes {n} argument{}",
            if n == 1 { "" } else { "s" }
        )),
    }
}

/// Parses a call's arguments: `None` when absent (empty text), else the JSON object.
fn parse_arguments(
    config: &Config,
    tool: &Quoted<'_>,
    text: &str,
) -> Result<Option<Map<String, Value>>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    match parse_strict(text) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(other) => Err(format!(
            "arguments for tool {tool} are not a JSON object (they are {})",
            type_phrase(&other)
        )),
        Err(e) => {
            let message = e.to_string();
            // The strict parser quotes a duplicate key, which the model chose.
            let message = if !config.include_values && message.starts_with("duplicate key") {
                format!(
                    "a key appears twice in one object at line {} column {}",
                    e.line(),
                    e.column()
                )
            } else {
                message
            };
            Err(format!(
                "arguments for tool {tool} are not valid JSON: {message}"
            ))
        }
    }
}

/// One schema error as text: where (instance path), which keyword, and what is wrong.
fn describe_error(error: &ValidationError<'_>, schema: &Value, include_values: bool) -> String {
    let kind = error.kind();
    let what = match kind {
        // The library prints the property as JSON ("city"); quote it like every other name. The
        // name comes from the schema's `required`.
        ValidationErrorKind::Required { property } => match property.as_str() {
            Some(name) => format!("{} is a required property", quote(name)),
            None => error.to_string(),
        },
        _ if include_values => error.to_string(),
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            format!(
                "{} not allowed",
                count_properties("undeclared", unexpected.len())
            )
        }
        ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            format!(
                "{} not allowed",
                count_properties("unevaluated", unexpected.len())
            )
        }
        // The instance there is a property name the model chose.
        ValidationErrorKind::PropertyNames { .. } => {
            "a property name does not match the schema for property names".into()
        }
        _ => error.masked_with(type_phrase(error.instance())).to_string(),
    };
    let at = if include_values {
        error.instance_path().to_string()
    } else {
        declared_path(schema, error.instance_path().iter())
    };
    let at = if at.is_empty() {
        "the top level".to_string()
    } else {
        at
    };
    format!("at {at}, keyword {}: {what}", quote(kind.keyword()))
}

/// "1 undeclared property is", "2 undeclared properties are".
fn count_properties(adjective: &str, n: usize) -> String {
    if n == 1 {
        format!("1 {adjective} property is")
    } else {
        format!("{n} {adjective} properties are")
    }
}

/// The instance path as a JSON Pointer, keeping array indices and the property names the
/// schema declares in `properties` (following local `$ref`s), masking every other name.
fn declared_path<'a>(
    schema: &Value,
    segments: impl Iterator<Item = LocationSegment<'a>>,
) -> String {
    let mut path = String::new();
    let mut current = Some(schema);
    for segment in segments {
        let node = current.map(|s| resolve(schema, s));
        match segment {
            LocationSegment::Index(i) => {
                path.push('/');
                path.push_str(&i.to_string());
                current = node.and_then(|n| item_schema(n, i));
            }
            LocationSegment::Property(name) => {
                let sub = node
                    .and_then(|n| n.get("properties"))
                    .and_then(|p| p.get(name.as_ref()));
                if sub.is_some() {
                    push_segment(&mut path, &name);
                } else {
                    path.push('/');
                    path.push_str(UNDECLARED);
                }
                current = sub;
            }
        }
    }
    path
}

/// Follows local `$ref`s (`#/...`) from a schema node.
fn resolve<'s>(root: &'s Value, mut node: &'s Value) -> &'s Value {
    for _ in 0..MAX_REF_HOPS {
        let Some(pointer) = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
        else {
            break;
        };
        let target = if pointer.is_empty() {
            Some(root)
        } else {
            root.pointer(pointer)
        };
        match target {
            Some(target) => node = target,
            None => break,
        }
    }
    node
}

/// The schema for array item `i`: `prefixItems[i]`, else `items` (an object schema).
fn item_schema(node: &Value, i: usize) -> Option<&Value> {
    if let Some(item) = node
        .get("prefixItems")
        .and_then(Value::as_array)
        .and_then(|p| p.get(i))
    {
        return Some(item);
    }
    match node.get("items") {
        Some(items @ Value::Object(_)) => Some(items),
        Some(Value::Array(prefix)) => prefix.get(i),
        _ => None,
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
    use railyard_plugin_sdk::testing::{self, assert_allow, call, function, hosted};
    use railyard_plugin_sdk::{Message, Rail};

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

    fn message(role: &str, tool_calls: Vec<ToolCall>) -> Message {
        Message {
            tool_calls,
            ..testing::message(role, None)
        }
    }

    fn request(messages: Vec<Message>, tools: Vec<ToolDef>) -> Request {
        testing::request(Rail::ToolCall, messages).with_tools(tools)
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

    use railyard_plugin_sdk::testing::expect_block as block_reason;

    #[test]
    fn a_custom_tools_free_text_input_is_not_json_and_needs_its_declaration() {
        let custom = |name: &str| ToolCall {
            kind: "custom".into(),
            ..call("c1", name, "select * from users; -- not JSON")
        };
        let tools = vec![ToolDef {
            kind: "custom".into(),
            ..function("run_sql", Some(r#"{"type": "text"}"#))
        }];
        assert_allow(run(
            &Config::default(),
            &reply(vec![custom("run_sql")], tools.clone()),
        ));
        let reason = block_reason(run(
            &Config::default(),
            &reply(vec![custom("drop_it")], tools),
        ));
        assert!(reason.contains("names no declared custom tool"), "{reason}");
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
            "arguments for tool 'get_weather' do not match its schema: at the top level, keyword \
             'required': 'city' is a required property (call 'call_1')"
        );
    }

    #[test]
    fn nested_errors_carry_the_path_and_keyword_without_values() {
        let reason = block_reason(check(
            r#"{"city":"Paris","location":{"lat":"north","lon":2.3}}"#,
        ));
        assert_eq!(
            reason,
            "arguments for tool 'get_weather' do not match its schema: at /location/lat, keyword \
             'type': a string is not of type \"number\" (call 'call_1')"
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
            reason.contains("at /days, keyword 'maximum': 99 is greater than the maximum of 14"),
            "{reason}"
        );
        let masked = block_reason(run(&Config::default(), &req));
        assert!(
            masked.contains(
                "at /days, keyword 'maximum': an integer is greater than the maximum of 14"
            ),
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
            "at the top level, keyword 'required': 'city' is a required property",
            "at the top level, keyword 'additionalProperties': 1 undeclared property is not allowed",
            "at /days, keyword 'minimum': an integer is less than the minimum of 1",
            "at /units, keyword 'enum': a string is not one of",
            "at /location, keyword 'required': 'lat' is a required property",
        ] {
            assert!(all.contains(expected), "missing {expected:?} in {all}");
        }
        assert!(!all.contains("and more"));
        assert!(!all.contains("extra"), "{all}");
    }

    #[test]
    fn property_names_the_model_chose_are_masked() {
        let schema = r#"{
            "type": "object",
            "properties": {
                "tags": {"type": "object", "additionalProperties": {"type": "integer"}},
                "rows": {"type": "array", "items": {"type": "object",
                    "properties": {"n": {"type": "integer"}}, "additionalProperties": false}},
                "keys": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}
            },
            "additionalProperties": false
        }"#;
        let tools = vec![function("f", Some(schema))];
        let arguments = r#"{"tags":{"jo@example.com":"x"},"rows":[{"n":1},{"n":"2","secret":1}],
            "keys":{"Jo Smith":1},"ssn_123":1}"#;
        let config = Config {
            max_errors: 10,
            ..Config::default()
        };
        let reason = block_reason(run(
            &config,
            &reply(vec![call("c", "f", arguments)], tools.clone()),
        ));
        for expected in [
            "at the top level, keyword 'additionalProperties': 1 undeclared property is not allowed",
            "at /tags/*, keyword 'type': a string is not of type \"integer\"",
            "at /rows/1/n, keyword 'type': a string is not of type \"integer\"",
            "at /rows/1, keyword 'additionalProperties': 1 undeclared property is not allowed",
            "at /keys, keyword 'propertyNames': a property name does not match the schema for property names",
        ] {
            assert!(reason.contains(expected), "missing {expected:?} in {reason}");
        }
        for leaked in ["jo@example.com", "secret", "Jo Smith", "ssn_123"] {
            assert!(!reason.contains(leaked), "{leaked} in {reason}");
        }
        // include_values shows them.
        let verbose = Config {
            max_errors: 10,
            include_values: true,
            ..Config::default()
        };
        let reason = block_reason(run(
            &verbose,
            &reply(vec![call("c", "f", arguments)], tools),
        ));
        assert!(reason.contains("/tags/jo@example.com"), "{reason}");
        assert!(reason.contains("'ssn_123' was unexpected"), "{reason}");
    }

    #[test]
    fn declared_names_are_shown_through_local_refs() {
        let schema = r##"{"type":"object","$defs":{"pos":{"type":"object",
            "properties":{"lat":{"type":"number"}}}},
            "properties":{"at":{"$ref":"#/$defs/pos"},"pair":{"type":"array",
            "prefixItems":[{"type":"object","properties":{"x":{"type":"integer"}}}]}}}"##;
        let tools = vec![function("f", Some(schema))];
        let reason = block_reason(run(
            &Config::default(),
            &reply(
                vec![call("c", "f", r#"{"at":{"lat":"n"},"pair":[{"x":"1"}]}"#)],
                tools,
            ),
        ));
        assert!(reason.contains("at /at/lat, keyword 'type'"), "{reason}");
        assert!(reason.contains("at /pair/0/x, keyword 'type'"), "{reason}");
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
        assert!(!reason.contains("Paris"));
        let trailing = block_reason(check(r#"{"city":"Paris"} x"#));
        assert!(
            trailing.contains("not valid JSON: trailing characters"),
            "{trailing}"
        );
        // Whitespace alone is not JSON, and not "no arguments" either.
        assert!(block_reason(check("  ")).contains("not valid JSON: EOF while parsing"));
    }

    #[test]
    fn duplicate_keys_are_blocked_without_naming_them() {
        let reason = block_reason(check(
            r#"{"city":"Paris","jo@example.com":1,"jo@example.com":2}"#,
        ));
        assert!(
            reason.contains("not valid JSON: a key appears twice in one object at line 1 column"),
            "{reason}"
        );
        assert!(!reason.contains("jo@example.com"), "{reason}");
        let verbose = Config {
            include_values: true,
            ..Config::default()
        };
        let nested = block_reason(run(
            &verbose,
            &reply(
                vec![call(
                    "c",
                    "get_weather",
                    r#"{"city":"Paris","location":{"lat":1,"lat":2,"lon":3}}"#,
                )],
                weather_tools(),
            ),
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
        assert!(block_reason(check("3")).contains("(they are an integer)"));
        assert!(block_reason(check("true")).contains("(they are a boolean)"));
        assert_eq!(
            block_reason(check("null")),
            "arguments for tool 'get_weather' are not a JSON object (they are null) (call 'call_1')"
        );
    }

    #[test]
    fn absent_arguments_are_validated_as_an_empty_object() {
        // Against a schema with a required property, "no arguments" still fails, by name.
        for empty in ["", "{}"] {
            assert!(block_reason(check(empty)).contains("'city' is a required property"));
        }
        let optional = vec![function(
            "list",
            Some(r#"{"type":"object","properties":{"page":{"type":"integer"}}}"#),
        )];
        for empty in ["", "{}", " { } "] {
            assert_allow(run(
                &Config::default(),
                &reply(vec![call("c", "list", empty)], optional.clone()),
            ));
        }
        for not_absent in ["null", " "] {
            block_reason(run(
                &Config::default(),
                &reply(vec![call("c", "list", not_absent)], optional.clone()),
            ));
        }
    }

    #[test]
    fn tool_without_parameters_takes_no_arguments() {
        for empty in ["", "{}", " { } "] {
            assert_allow(run(
                &Config::default(),
                &reply(vec![call("c", "ping", empty)], weather_tools()),
            ));
        }
        assert_eq!(
            block_reason(run(
                &Config::default(),
                &reply(
                    vec![call("c1", "ping", r#"{"host":"x","n":1}"#)],
                    weather_tools()
                ),
            )),
            "arguments for tool 'ping' are not allowed: the tool declares no parameters, but the \
             call passes 2 arguments (call 'c1')"
        );
        assert!(block_reason(run(
            &Config::default(),
            &reply(
                vec![call("c1", "ping", r#"{"jo@example.com":null}"#)],
                weather_tools()
            ),
        ))
        .ends_with("but the call passes 1 argument (call 'c1')"));
        for not_an_object in ["[]", "null", "0"] {
            assert!(block_reason(run(
                &Config::default(),
                &reply(vec![call("c1", "ping", not_an_object)], weather_tools()),
            ))
            .contains("not a JSON object"));
        }
    }

    #[test]
    fn schema_without_properties_takes_no_arguments() {
        for schema in [
            r#"{"type":"object"}"#,
            r#"{"type":"object","properties":{}}"#,
            r#"{"type":"object","properties":{},"required":[]}"#,
            r#"{"type":["object","null"],"description":"no inputs"}"#,
            r#"{}"#,
            "true",
        ] {
            let tools = vec![function("now", Some(schema))];
            for empty in ["", "{}"] {
                assert_allow(run(
                    &Config::default(),
                    &reply(vec![call("c", "now", empty)], tools.clone()),
                ));
            }
            assert_eq!(
                block_reason(run(
                    &Config::default(),
                    &reply(vec![call("c", "now", r#"{"tz":"UTC"}"#)], tools.clone()),
                )),
                "arguments for tool 'now' are not allowed: the tool declares no parameters, but \
                 the call passes 1 argument (call 'c')",
                "{schema}"
            );
            assert!(block_reason(run(
                &Config::default(),
                &reply(vec![call("c", "now", "null")], tools.clone()),
            ))
            .contains("not a JSON object"));
            // Read as plain JSON Schema, the loose declaration takes any object.
            let plain = Config {
                plain_json_schema: true,
                ..Config::default()
            };
            assert_allow(run(
                &plain,
                &reply(vec![call("c", "now", r#"{"tz":"UTC"}"#)], tools),
            ));
        }
        // additionalProperties: false says the same in JSON Schema's own words.
        let closed = vec![function(
            "now",
            Some(r#"{"type":"object","properties":{},"additionalProperties":false}"#),
        )];
        assert_allow(run(
            &Config::default(),
            &reply(vec![call("c", "now", "{}")], closed.clone()),
        ));
        assert!(block_reason(run(
            &Config::default(),
            &reply(vec![call("c", "now", r#"{"tz":"UTC"}"#)], closed),
        ))
        .contains("keyword 'additionalProperties': 1 undeclared property is not allowed"));
    }

    #[test]
    fn schemas_that_open_another_channel_take_arguments() {
        for schema in [
            r#"{"type":"object","additionalProperties":true}"#,
            r#"{"type":"object","additionalProperties":{"type":"string"}}"#,
            r#"{"type":"object","patternProperties":{"^t":{"type":"string"}}}"#,
            r#"{"type":"object","unevaluatedProperties":{"type":"string"}}"#,
            r#"{"type":"object","anyOf":[{"properties":{"tz":{"type":"string"}}}]}"#,
            r##"{"$ref":"#/$defs/a","$defs":{"a":{"type":"object","properties":{"tz":{}}}}}"##,
        ] {
            let tools = vec![function("now", Some(schema))];
            assert_allow(run(
                &Config::default(),
                &reply(vec![call("c", "now", r#"{"tz":"UTC"}"#)], tools),
            ));
        }
    }

    #[test]
    fn takes_no_arguments_predicate() {
        let no = |s: &str| takes_no_arguments(&serde_json::from_str(s).unwrap());
        assert!(no("{}") && no("true") && no(r#"{"type":"object"}"#));
        assert!(!no("false")); // allows nothing at all: validation says so
        assert!(!no(r#"{"type":"string"}"#)); // not an object schema: validation says so
        assert!(!no(r#"{"type":"object","properties":{"a":{}}}"#));
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
    fn hosted_tool_calls_are_not_schema_checked() {
        let tools = weather_tools();
        let config = Config::default();
        // A hosted call without a function object reaches plugins as a call named after its type,
        // with empty arguments, or the JSON of what else the call carried.
        for arguments in [
            "",
            "{}",
            r#"{"web_search":{"query":"rust"}}"#,
            r#"{"query":"rust"}"#,
        ] {
            assert_allow(run(
                &config,
                &reply(vec![call("ws_1", "web_search", arguments)], tools.clone()),
            ));
        }
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
            &reply(vec![call("c", "web_search", "")], tools),
        ))
        .contains("hosted tool"));
    }

    #[test]
    fn a_function_wins_over_a_hosted_type_of_the_same_name() {
        let tools = vec![
            hosted("web_search"),
            function(
                "web_search",
                Some(r#"{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}"#),
            ),
        ];
        assert_allow(run(
            &Config::default(),
            &reply(
                vec![call("c", "web_search", r#"{"q":"rust"}"#)],
                tools.clone(),
            ),
        ));
        // A hosted-shaped call (empty arguments) is validated against the function's schema.
        assert!(block_reason(run(
            &Config::default(),
            &reply(vec![call("c", "web_search", "")], tools),
        ))
        .contains("'q' is a required property"));
        // And a function without parameters takes none, hosted type or not.
        let tools = vec![hosted("web_search"), function("web_search", None)];
        assert!(block_reason(run(
            &Config::default(),
            &reply(vec![call("c", "web_search", r#"{"q":"rust"}"#)], tools),
        ))
        .contains("declares no parameters"));
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
            function("not_a_schema", Some(r#""object""#)),
            function(
                "bad_keyword",
                Some(r#"{"type":"object","properties":{"a":{"minimum":"x"}}}"#),
            ),
        ];
        for name in [
            "broken_json",
            "bad_schema",
            "remote_ref",
            "not_a_schema",
            "bad_keyword",
        ] {
            // Even calls with no arguments: nothing passes unvalidated.
            for arguments in ["", "{}", r#"{"a":1}"#] {
                let reason = block_reason(run(
                    &Config::default(),
                    &reply(vec![call("c", name, arguments)], tools.clone()),
                ));
                assert!(
                    reason.starts_with(&format!(
                        "the parameters schema declared for tool '{name}' cannot be used, so its calls cannot be validated: it is not"
                    )),
                    "{reason}"
                );
            }
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
            "arguments for tool 'get_weather' do not match its schema: at /city, keyword 'minLength': a string is shorter than 1 character (call 'call_b'); \
             arguments for tool 'get_weather' do not match its schema: at /days, keyword 'type': a string is not of type \"integer\" (call 'call_d')"
        );
    }

    #[test]
    fn parallel_valid_calls_pass() {
        let req = reply(
            vec![
                call("call_a", "get_weather", r#"{"city":"Paris"}"#),
                call("call_b", "get_weather", r#"{"city":"Rome","days":2}"#),
                call("call_c", "ping", ""),
                call("call_d", "web_search", ""),
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
    fn duplicated_function_name_is_ambiguous() {
        let same = r#"{"type":"object","required":["a"]}"#;
        for tools in [
            vec![
                function("f", Some(same)),
                function("f", Some(r#"{"type":"object","required":["b"]}"#)),
            ],
            vec![function("f", Some(same)), function("f", Some(same))],
            vec![
                function("f", None),
                function("f", Some(same)),
                function("f", None),
            ],
        ] {
            let n = tools.len();
            assert_eq!(
                block_reason(run(
                    &Config::default(),
                    &reply(vec![call("c", "f", r#"{"a":1,"b":2}"#)], tools.clone()),
                )),
                format!(
                    "tool call 'f' is ambiguous: the request's tools declare function 'f' {n} \
                     times, so which schema applies is unknown (call 'c')"
                )
            );
        }
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
            reason.contains("at /n, keyword 'minimum': an integer is less than the minimum of 0"),
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
