//! Schema-guided repair of tool-call arguments, as plain functions over the SDK types (no host
//! imports) so it is unit-testable natively.
//!
//! Only the calls of the last message (the model's reply) are repaired, and only where the
//! tool's declared `parameters` schema says what the value should be:
//! - `"true"` / `"false"` (any letter case) where only a boolean (not a string) is allowed;
//! - a numeric string where a number is allowed, or an integer only, in which case the string
//!   must be an integer (`"3"`, not `"3.0"`); strings are read with JSON's number grammar, so
//!   `"+3"`, `" 3"`, `"0x10"`, `"NaN"` are left alone;
//! - a single non-null value where an array is allowed and the value's own type is not: it is
//!   wrapped in an array, then its item is repaired by the `items` schema.
//!
//! The walk follows `properties`, `items` / `prefixItems`, local `$ref`s (`#/...`) and the
//! "X or null" `anyOf`/`oneOf` idiom; any other combinator is left alone, as is every field the
//! schema does not describe. By default nothing is ever added or removed.
//!
//! Two repairs that add arguments are opt-in, per tool, top-level arguments only (EXO's
//! tool-call repairs), and run before the type repairs:
//! - `aliases`: groups of names for one argument (`{"write_file": [["file", "filePath"]]}`); when
//!   one name of a group is present and others are absent, the value is copied to the absent
//!   ones, so the call carries every name (the first present name in the group's order is the
//!   source);
//! - `fill`: a required argument the model left out, derived from another argument
//!   (`{"bash": {"description": {"from": "command", "prefix": "Run: "}}}`): only when the
//!   tool's schema lists it in its top-level `required`, it is absent, and the source is a
//!   string, number or boolean (the new value is `prefix` + the source as text).
//!
//! Arguments that are not a well-formed JSON object (including duplicate keys), tools that are
//! not declared or declared ambiguously (same name, different schemas), and unparsable schemas
//! are left untouched for schema-validator to judge. Repaired arguments are re-serialised
//! compactly, keeping key order (added arguments go last); numbers elsewhere in them keep their
//! value but may change spelling (`1e2` becomes `100.0`).

pub use crate::plan::Change;
use crate::plan::{Plan, Repairs, MAX_REF_HOPS};
use railyard_plugin_sdk::by_text::ByText;
pub use railyard_plugin_sdk::json::parse_strict;
use railyard_plugin_sdk::reason::{call_label, push_segment, quote};
use railyard_plugin_sdk::{ArgumentsEdit, Edit, Modification, Request, ToolCall, ToolDef, Verdict};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// JSON Schema of the plugin's config, as given to the host in `describe`.
pub const CONFIG_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "normalise plugin config",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "booleans": {
      "description": "Turn \"true\"/\"false\" strings into booleans where the schema wants a boolean (default true).",
      "type": "boolean"
    },
    "numbers": {
      "description": "Turn numeric strings into numbers where the schema wants a number or an integer (default true).",
      "type": "boolean"
    },
    "arrays": {
      "description": "Wrap a single value in an array where the schema wants an array (default true).",
      "type": "boolean"
    },
    "fill": {
      "description": "Per tool, per argument: fill a required argument the model left out from another argument, e.g. {\"bash\": {\"description\": {\"from\": \"command\", \"prefix\": \"Run: \"}}}. Off unless given.",
      "type": "object",
      "additionalProperties": {
        "type": "object",
        "additionalProperties": {
          "type": "object",
          "additionalProperties": false,
          "required": ["from"],
          "properties": {
            "from": {"description": "The argument whose value is used.", "type": "string", "minLength": 1},
            "prefix": {"description": "Text put before it (default none).", "type": "string"}
          }
        }
      }
    },
    "aliases": {
      "description": "Per tool: groups of names of one argument; when one is present and another absent, the value is copied so both exist, e.g. {\"write_file\": [[\"file\", \"filePath\"]]}. Off unless given.",
      "type": "object",
      "additionalProperties": {
        "type": "array",
        "items": {
          "type": "array",
          "items": {"type": "string", "minLength": 1},
          "minItems": 2,
          "uniqueItems": true
        }
      }
    }
  }
}"#;

/// The plugin's config, parsed from the JSON the host validated against [`CONFIG_SCHEMA`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "yes")]
    pub booleans: bool,
    #[serde(default = "yes")]
    pub numbers: bool,
    #[serde(default = "yes")]
    pub arrays: bool,
    /// Tool -> argument -> where to fill it from when it is missing.
    #[serde(default)]
    pub fill: BTreeMap<String, BTreeMap<String, Fill>>,
    /// Tool -> groups of names of one argument.
    #[serde(default)]
    pub aliases: BTreeMap<String, Vec<Vec<String>>>,
}

/// How to fill a missing required argument.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fill {
    /// The argument whose value is used.
    pub from: String,
    /// Text put before it.
    #[serde(default)]
    pub prefix: String,
}

fn yes() -> bool {
    true
}

impl Default for Config {
    fn default() -> Self {
        Config {
            booleans: true,
            numbers: true,
            arrays: true,
            fill: BTreeMap::new(),
            aliases: BTreeMap::new(),
        }
    }
}

impl Config {
    /// The type repairs it turns on.
    fn repairs(&self) -> Repairs {
        Repairs {
            booleans: self.booleans,
            numbers: self.numbers,
            arrays: self.arrays,
        }
    }

    /// Parses the config JSON text.
    pub fn parse(text: &str) -> Result<Config, String> {
        let config: Config =
            serde_json::from_str(text).map_err(|e| format!("invalid normalise config: {e}"))?;
        for (tool, fills) in &config.fill {
            for (field, fill) in fills {
                if fill.from == *field {
                    return Err(format!(
                        "invalid normalise config: fill.{tool}.{field} is filled from itself"
                    ));
                }
            }
        }
        for (tool, groups) in &config.aliases {
            for (i, group) in groups.iter().enumerate() {
                let mut names: Vec<&String> = group.iter().collect();
                names.sort();
                names.dedup();
                if group.len() < 2 || names.len() != group.len() {
                    return Err(format!(
                        "invalid normalise config: aliases.{tool}[{i}] must name two or more \
                         different arguments"
                    ));
                }
            }
        }
        Ok(config)
    }
}

/// The tools' parameter schemas, parsed and compiled, by their text. Agents declare the same
/// tools on every turn and a pooled instance judges many turns, so each schema is parsed and
/// compiled once, not per call.
pub struct Schemas {
    parsed: ByText<Compiled>,
}

/// A schema compiled: what the repairs read of it.
pub struct Compiled {
    /// The names in its top-level `required` (the arguments `fill` may add).
    required: Vec<String>,
    plan: Plan,
}

impl Default for Schemas {
    fn default() -> Self {
        Schemas {
            parsed: ByText::new(usize::MAX, Self::MAX_BYTES),
        }
    }
}

impl Schemas {
    /// Schema text kept, in bytes: past it, the cache starts afresh with the next schema.
    pub const MAX_BYTES: usize = 256 * 1024;

    /// The schema compiled, or `None` when the text is not JSON.
    fn get(&mut self, text: &str) -> Option<&Compiled> {
        self.parsed.get_or_make(text, |t| {
            let schema: Value = serde_json::from_str(t).ok()?;
            Some(Compiled {
                required: required_arguments(&schema),
                plan: Plan::new(&schema),
            })
        })
    }

    /// Schemas kept.
    pub fn len(&self) -> usize {
        self.parsed.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.parsed.is_empty()
    }
}

/// Repairs the tool calls of the request's last message.
pub fn evaluate(config: &Config, schemas: &mut Schemas, request: &Request) -> Verdict {
    let Some(reply) = request.messages.last() else {
        return Verdict::Allow;
    };
    let message = (request.messages.len() - 1) as u32;
    let mut edits = Vec::new();
    let mut summaries = Vec::new();
    for (index, call) in reply.tool_calls.iter().enumerate() {
        let Some((arguments, changes)) = repair_call(config, schemas, &request.tools, call) else {
            continue;
        };
        let listed: Vec<String> = changes
            .iter()
            .map(|c| format!("{} {}", c.path, c.kind))
            .collect();
        summaries.push(format!(
            "normalised {} arguments: {} ({})",
            quote(&call.name),
            listed.join(", "),
            call_label(call, index)
        ));
        edits.push(Edit::Arguments(ArgumentsEdit {
            message,
            call: index as u32,
            arguments,
        }));
    }
    if edits.is_empty() {
        Verdict::Allow
    } else {
        Verdict::Modify(Modification {
            edits,
            reason: summaries.join("; "),
        })
    }
}

/// The repaired arguments text and what changed, or `None` when nothing applies.
pub fn repair_call(
    config: &Config,
    schemas: &mut Schemas,
    tools: &[ToolDef],
    call: &ToolCall,
) -> Option<(String, Vec<Change>)> {
    let schema_text = unique_schema(tools, &call.name)?;
    let Compiled { required, plan } = schemas.get(schema_text)?;
    let mut arguments = parse_strict(&call.arguments).ok()?;
    let Value::Object(map) = &mut arguments else {
        return None;
    };
    let mut changes = Vec::new();
    if let Some(groups) = config.aliases.get(&call.name) {
        copy_aliases(groups, map, &mut changes);
    }
    if let Some(fills) = config.fill.get(&call.name) {
        fill_missing(fills, required, map, &mut changes);
    }
    changes.extend(plan.repair(config.repairs(), &mut arguments));
    if changes.is_empty() {
        return None;
    }
    let text = serde_json::to_string(&arguments).ok()?;
    Some((text, changes))
}

/// For each group of alias names with one present and others absent: copies the value of the
/// first present name to the absent ones.
fn copy_aliases(groups: &[Vec<String>], map: &mut Map<String, Value>, changes: &mut Vec<Change>) {
    for group in groups {
        let Some(source) = group.iter().find(|name| map.contains_key(*name)) else {
            continue;
        };
        let value = map[source].clone();
        let absent: Vec<&String> = group.iter().filter(|n| !map.contains_key(*n)).collect();
        for name in absent {
            map.insert(name.clone(), value.clone());
            changes.push(Change {
                path: pointer(name),
                kind: format!("copied from {}", pointer(source)),
            });
        }
    }
}

/// Fills each absent, required argument that has a fill rule from its source argument.
fn fill_missing(
    fills: &BTreeMap<String, Fill>,
    required: &[String],
    map: &mut Map<String, Value>,
    changes: &mut Vec<Change>,
) {
    for (field, fill) in fills {
        if map.contains_key(field) || !required.contains(field) {
            continue;
        }
        let source = match map.get(&fill.from) {
            Some(Value::String(s)) => s.clone(),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
            _ => continue,
        };
        map.insert(
            field.clone(),
            Value::String(format!("{}{source}", fill.prefix)),
        );
        changes.push(Change {
            path: pointer(field),
            kind: format!("filled from {}", pointer(&fill.from)),
        });
    }
}

/// The names in the top-level `required` of a parameters schema (following a local `$ref`).
fn required_arguments(schema: &Value) -> Vec<String> {
    let mut node = schema;
    for _ in 0..MAX_REF_HOPS {
        let target = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|p| {
                if p.is_empty() {
                    Some(schema)
                } else {
                    schema.pointer(p)
                }
            });
        match target {
            Some(t) if !node.get("required").is_some_and(Value::is_array) => node = t,
            _ => break,
        }
    }
    node.get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// `/name`, escaped as a JSON pointer segment.
fn pointer(name: &str) -> String {
    let mut path = String::new();
    push_segment(&mut path, name);
    path
}

/// The one parameters schema declared for this function name; `None` when the tool is not
/// declared as a function, declares no schema, or is declared with conflicting schemas.
fn unique_schema<'t>(tools: &'t [ToolDef], name: &str) -> Option<&'t str> {
    let mut found: Option<Option<&str>> = None;
    for def in tools {
        if def.kind != "function" || def.name.as_deref() != Some(name) {
            continue;
        }
        let params = def.parameters.as_deref();
        match found {
            None => found = Some(params),
            Some(previous) if previous == params => {}
            Some(_) => return None,
        }
    }
    found.flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_plugin_sdk::testing::{self, call, function, hosted};
    use railyard_plugin_sdk::{Message, Rail};

    /// Repairs `value` in place against `schema` (the root of the document, for `$ref`s).
    fn repair_value(config: &Config, schema: &Value, value: &mut Value) -> Vec<Change> {
        Plan::new(schema).repair(config.repairs(), value)
    }

    fn evaluate_fresh(config: &Config, request: &Request) -> Verdict {
        evaluate(config, &mut Schemas::default(), request)
    }

    fn repair_fresh(
        config: &Config,
        tools: &[ToolDef],
        call: &ToolCall,
    ) -> Option<(String, Vec<Change>)> {
        repair_call(config, &mut Schemas::default(), tools, call)
    }

    #[test]
    fn schemas_are_parsed_once_and_kept_within_a_bound() {
        let mut schemas = Schemas::default();
        let text = r#"{"type": "object", "properties": {"n": {"type": "integer"}}}"#;
        let tools = vec![function("count", Some(text))];
        let c = call("c", "count", r#"{"n": "3"}"#);
        for _ in 0..3 {
            let repaired = repair_call(&Config::default(), &mut schemas, &tools, &c);
            assert_eq!(repaired.map(|r| r.0), Some(r#"{"n":3}"#.to_string()));
        }
        assert_eq!(schemas.len(), 1);
        assert!(schemas.get("{not json").is_none());
        assert_eq!(schemas.len(), 1, "text that is not JSON is not kept");
        let big = format!(
            r#"{{"description": "{}"}}"#,
            "x".repeat(Schemas::MAX_BYTES / 2)
        );
        schemas.get(&big).unwrap();
        schemas.get(&big.replace('x', "y")).unwrap();
        assert!(schemas.len() <= 2 && schemas.parsed.bytes() <= Schemas::MAX_BYTES);
    }

    const WEATHER: &str = r##"{
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "threshold": {"type": "number"},
            "metric": {"type": "boolean"},
            "units": {"type": "array", "items": {"type": "string"}},
            "hours": {"type": "array", "items": {"type": "integer"}},
            "label": {"type": ["string", "integer"]},
            "tags": {"type": ["array", "string"]},
            "maybe_days": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "nullable_flag": {"type": ["boolean", "null"]},
            "location": {
                "type": "object",
                "properties": {
                    "lat": {"type": "number"},
                    "precise": {"type": "boolean"},
                    "points": {"type": "array", "items": {"$ref": "#/$defs/point"}}
                }
            },
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}]},
            "anything": {}
        },
        "required": ["city"],
        "$defs": {
            "point": {"type": "object", "properties": {"x": {"type": "integer"}}}
        }
    }"##;

    fn schema() -> Value {
        serde_json::from_str(WEATHER).unwrap()
    }

    fn repair(config: &Config, arguments: &str) -> (Value, Vec<String>) {
        let mut value: Value = serde_json::from_str(arguments).unwrap();
        let changes = repair_value(config, &schema(), &mut value);
        let listed = changes
            .iter()
            .map(|c| format!("{} {}", c.path, c.kind))
            .collect();
        (value, listed)
    }

    fn repaired(arguments: &str) -> (String, Vec<String>) {
        let (value, listed) = repair(&Config::default(), arguments);
        (serde_json::to_string(&value).unwrap(), listed)
    }

    #[test]
    fn booleans() {
        assert_eq!(
            repaired(r#"{"metric":"true","nullable_flag":"FALSE"}"#),
            (
                r#"{"metric":true,"nullable_flag":false}"#.into(),
                vec![
                    "/metric string→boolean".into(),
                    "/nullable_flag string→boolean".into()
                ]
            )
        );
        // Not a boolean spelling; a string where a string is allowed; a real boolean.
        for untouched in [
            r#"{"metric":"yes"}"#,
            r#"{"metric":"1"}"#,
            r#"{"metric":" true"}"#,
            r#"{"city":"true"}"#,
            r#"{"metric":true}"#,
        ] {
            assert_eq!(
                repaired(untouched),
                (untouched.into(), vec![]),
                "{untouched}"
            );
        }
    }

    #[test]
    fn numbers_and_integers() {
        assert_eq!(
            repaired(r#"{"days":"3","threshold":"-2.5e1","maybe_days":"7"}"#),
            (
                r#"{"days":3,"threshold":-25.0,"maybe_days":7}"#.into(),
                vec![
                    "/days string→integer".into(),
                    "/threshold string→number".into(),
                    "/maybe_days string→integer".into()
                ]
            )
        );
        assert_eq!(repaired(r#"{"threshold":"4"}"#).0, r#"{"threshold":4}"#);
        assert_eq!(repaired(r#"{"days":"-12"}"#).0, r#"{"days":-12}"#);
        assert_eq!(
            repaired(r#"{"days":"18446744073709551615"}"#).0,
            r#"{"days":18446744073709551615}"#
        );
        for untouched in [
            r#"{"days":"3.0"}"#,
            r#"{"days":"3.5"}"#,
            r#"{"days":"+3"}"#,
            r#"{"days":"03"}"#,
            r#"{"days":" 3"}"#,
            r#"{"days":"0x10"}"#,
            r#"{"days":"three"}"#,
            r#"{"days":""}"#,
            r#"{"days":"-"}"#,
            r#"{"days":"99999999999999999999999"}"#,
            r#"{"threshold":"NaN"}"#,
            r#"{"threshold":"1e999"}"#,
            r#"{"threshold":"Infinity"}"#,
            r#"{"threshold":".5"}"#,
            r#"{"label":"42"}"#,
            r#"{"maybe_days":null}"#,
            r#"{"days":3}"#,
        ] {
            assert_eq!(
                repaired(untouched),
                (untouched.into(), vec![]),
                "{untouched}"
            );
        }
    }

    #[test]
    fn arrays_are_wrapped_and_items_repaired() {
        assert_eq!(
            repaired(r#"{"units":"metric","hours":"9"}"#),
            (
                r#"{"units":["metric"],"hours":[9]}"#.into(),
                vec![
                    "/units value→array".into(),
                    "/hours value→array".into(),
                    "/hours/0 string→integer".into()
                ]
            )
        );
        assert_eq!(
            repaired(r#"{"hours":["1",2,"x"]}"#),
            (
                r#"{"hours":[1,2,"x"]}"#.into(),
                vec!["/hours/0 string→integer".into()]
            )
        );
        // Null is not "a single value"; a string is allowed where string|array is declared.
        for untouched in [r#"{"units":null}"#, r#"{"tags":"a"}"#, r#"{"units":[]}"#] {
            assert_eq!(
                repaired(untouched),
                (untouched.into(), vec![]),
                "{untouched}"
            );
        }
    }

    #[test]
    fn nested_objects_refs_and_tuples() {
        assert_eq!(
            repaired(
                r#"{"location":{"lat":"48.85","precise":"true","points":{"x":"5"},"note":"7"},"pair":["1","false","2"]}"#
            ),
            (
                r#"{"location":{"lat":48.85,"precise":true,"points":[{"x":5}],"note":"7"},"pair":[1,false,"2"]}"#.into(),
                vec![
                    "/location/lat string→number".into(),
                    "/location/precise string→boolean".into(),
                    "/location/points value→array".into(),
                    "/location/points/0/x string→integer".into(),
                    "/pair/0 string→integer".into(),
                    "/pair/1 string→boolean".into(),
                ]
            )
        );
    }

    #[test]
    fn undescribed_fields_and_required_values_are_left_alone() {
        let untouched = r#"{"extra":"true","anything":"3","other":{"days":"3"}}"#;
        assert_eq!(repaired(untouched), (untouched.into(), vec![]));
        // Required "city" is missing: nothing is invented.
        assert_eq!(repaired(r#"{"days":"2"}"#).0, r#"{"days":2}"#);
    }

    #[test]
    fn key_order_is_kept() {
        assert_eq!(
            repaired(r#"{"zeta":1,"days":"2","alpha":{"b":1,"a":2}}"#).0,
            r#"{"zeta":1,"days":2,"alpha":{"b":1,"a":2}}"#
        );
    }

    #[test]
    fn toggles_disable_each_repair() {
        let args = r#"{"metric":"true","days":"3","units":"metric"}"#;
        let off = |booleans, numbers, arrays| Config {
            booleans,
            numbers,
            arrays,
            ..Config::default()
        };
        assert_eq!(
            repair(&off(false, true, true), args).1,
            vec!["/days string→integer", "/units value→array"]
        );
        assert_eq!(
            repair(&off(true, false, true), args).1,
            vec!["/metric string→boolean", "/units value→array"]
        );
        assert_eq!(
            repair(&off(true, true, false), args).1,
            vec!["/metric string→boolean", "/days string→integer"]
        );
        assert!(repair(&off(false, false, false), args).1.is_empty());
    }

    #[test]
    fn escaped_paths() {
        let schema: Value = serde_json::from_str(
            r#"{"type":"object","properties":{"a/b":{"type":"integer"},"c~d":{"type":"boolean"}}}"#,
        )
        .unwrap();
        let mut value: Value = serde_json::from_str(r#"{"a/b":"1","c~d":"true"}"#).unwrap();
        let paths: Vec<String> = repair_value(&Config::default(), &schema, &mut value)
            .into_iter()
            .map(|c| c.path)
            .collect();
        assert_eq!(paths, vec!["/a~1b", "/c~0d"]);
    }

    #[test]
    fn recursive_refs_terminate() {
        let schema: Value = serde_json::from_str(
            r##"{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{
                "n":{"type":"integer"},"next":{"$ref":"#/$defs/node"},"loop":{"$ref":"#/$defs/a"}}},
                "a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}"##,
        )
        .unwrap();
        let mut value: Value =
            serde_json::from_str(r#"{"n":"1","next":{"n":"2","next":{"n":"3"}},"loop":"4"}"#)
                .unwrap();
        let changes = repair_value(&Config::default(), &schema, &mut value);
        assert_eq!(changes.len(), 3);
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            r#"{"n":1,"next":{"n":2,"next":{"n":3}},"loop":"4"}"#
        );
    }

    // --- whole-request behaviour ---

    fn message(role: &str, tool_calls: Vec<ToolCall>) -> Message {
        Message {
            tool_calls,
            ..testing::message(role, None)
        }
    }

    fn request(messages: Vec<Message>, tools: Vec<ToolDef>) -> Request {
        testing::request(Rail::ToolCall, messages).with_tools(tools)
    }

    fn tools() -> Vec<ToolDef> {
        vec![
            function("get_weather", Some(WEATHER)),
            function("ping", None),
            hosted("web_search"),
        ]
    }

    use railyard_plugin_sdk::testing::expect_modify as modification;

    fn edit(e: &Edit) -> (u32, u32, &str) {
        match e {
            Edit::Arguments(a) => (a.message, a.call, a.arguments.as_str()),
            other => panic!("unexpected edit {other:?}"),
        }
    }

    #[test]
    fn parallel_calls_produce_one_edit_per_changed_call() {
        let req = request(
            vec![
                message("user", vec![]),
                message(
                    "assistant",
                    vec![call("old", "get_weather", r#"{"days":"1"}"#)],
                ),
                message("tool", vec![]),
                message(
                    "assistant",
                    vec![
                        call("call_1", "get_weather", r#"{"city":"Paris","days":"3"}"#),
                        call("call_2", "get_weather", r#"{"city":"Rome"}"#),
                        call("call_3", "web_search", r#"{"q":"3"}"#),
                        call(
                            "call_4",
                            "get_weather",
                            r#"{"city":"Oslo","units":"metric","metric":"false"}"#,
                        ),
                    ],
                ),
            ],
            tools(),
        );
        let m = modification(evaluate_fresh(&Config::default(), &req));
        let edits: Vec<_> = m.edits.iter().map(edit).collect();
        assert_eq!(
            edits,
            vec![
                (3, 0, r#"{"city":"Paris","days":3}"#),
                (3, 3, r#"{"city":"Oslo","units":["metric"],"metric":false}"#),
            ]
        );
        assert_eq!(
            m.reason,
            "normalised 'get_weather' arguments: /days string→integer (call 'call_1'); \
             normalised 'get_weather' arguments: /units value→array, /metric string→boolean (call 'call_4')"
        );
        for value in ["Paris", "Oslo", "metric\"", "false"] {
            assert!(!m.reason.contains(value), "reason leaks {value}");
        }
    }

    #[test]
    fn nothing_to_do_is_allow() {
        let allow = |req: &Request| {
            assert!(matches!(
                evaluate_fresh(&Config::default(), req),
                Verdict::Allow
            ));
        };
        for (name, arguments) in [
            ("get_weather", r#"{"city":"Paris","days":3}"#),
            ("get_weather", r#"{"days":"3""#), // malformed: left for the validator
            ("get_weather", r#"{"days":"3","days":"4"}"#), // duplicate keys
            ("get_weather", r#"["3"]"#),
            ("get_weather", ""),
            ("undeclared", r#"{"days":"3"}"#),
            ("ping", r#"{"days":"3"}"#),
            ("web_search", r#"{"days":"3"}"#),
        ] {
            allow(&request(
                vec![
                    message("user", vec![]),
                    message("assistant", vec![call("c", name, arguments)]),
                ],
                tools(),
            ));
        }
        allow(&request(vec![], tools()));
        allow(&request(vec![message("assistant", vec![])], tools()));
    }

    #[test]
    fn hosted_calls_and_no_argument_tools_are_left_alone() {
        let mut tools = tools();
        tools.push(function("now", Some(r#"{"type":"object"}"#)));
        tools.push(function(
            "today",
            Some(r#"{"type":"object","properties":{}}"#),
        ));
        for (name, arguments) in [
            // A hosted call reaches plugins named after its type, with empty arguments or the
            // JSON of what else it carried: no schema, nothing to repair.
            ("web_search", ""),
            ("web_search", r#"{"web_search":{"limit":"5"}}"#),
            // No-argument tools: nothing is added, removed or converted at the top level.
            ("ping", ""),
            ("ping", "{}"),
            ("ping", r#"{"n":"1"}"#),
            ("now", ""),
            ("now", "{}"),
            ("now", r#"{"n":"1"}"#),
            ("today", r#"{"flag":"true"}"#),
        ] {
            let req = request(
                vec![
                    message("user", vec![]),
                    message("assistant", vec![call("c", name, arguments)]),
                ],
                tools.clone(),
            );
            assert!(
                matches!(evaluate_fresh(&Config::default(), &req), Verdict::Allow),
                "{name} {arguments}"
            );
        }
    }

    #[test]
    fn conflicting_or_broken_declarations_are_left_alone() {
        let conflicting = vec![
            function(
                "f",
                Some(r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#),
            ),
            function(
                "f",
                Some(r#"{"type":"object","properties":{"n":{"type":"string"}}}"#),
            ),
        ];
        let same = vec![
            function(
                "f",
                Some(r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#),
            ),
            function(
                "f",
                Some(r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#),
            ),
        ];
        let broken = vec![function("f", Some(r#"{"type":"object""#))];
        let c = call("c", "f", r#"{"n":"1"}"#);
        assert!(repair_fresh(&Config::default(), &conflicting, &c).is_none());
        assert!(repair_fresh(&Config::default(), &broken, &c).is_none());
        assert_eq!(
            repair_fresh(&Config::default(), &same, &c).map(|r| r.0),
            Some(r#"{"n":1}"#.to_string())
        );
    }

    #[test]
    fn config_parsing() {
        let all = Config::parse("{}").unwrap();
        assert!(all.booleans && all.numbers && all.arrays);
        assert!(!Config::parse(r#"{"arrays":false}"#).unwrap().arrays);
        assert!(Config::parse(r#"{"strings":true}"#).is_err());
        let schema: Value = serde_json::from_str(CONFIG_SCHEMA).unwrap();
        assert_eq!(schema["additionalProperties"], false);
    }

    // --- opt-in fills and aliases ---

    const BASH: &str = r#"{"type":"object","properties":{"command":{"type":"string"},
        "description":{"type":"string"},"timeout":{"type":"integer"}},
        "required":["command","description"]}"#;
    const WRITE: &str = r#"{"type":"object","properties":{"file":{"type":"string"},
        "filePath":{"type":"string"},"content":{"type":"string"},"mode":{"type":"integer"}}}"#;

    fn exo() -> Config {
        Config::parse(
            r#"{"fill":{"bash":{"description":{"from":"command","prefix":"Run: "}}},
                "aliases":{"write_file":[["file","filePath"]]}}"#,
        )
        .unwrap()
    }

    fn one_call(name: &str, arguments: &str) -> Request {
        request(
            vec![
                message("user", vec![]),
                message("assistant", vec![call("c1", name, arguments)]),
            ],
            vec![
                function("bash", Some(BASH)),
                function("write_file", Some(WRITE)),
            ],
        )
    }

    #[test]
    fn fill_derives_a_missing_required_argument() {
        let m = modification(evaluate_fresh(
            &exo(),
            &one_call("bash", r#"{"command":"ls -la /srv","timeout":"30"}"#),
        ));
        assert_eq!(
            m.edits.iter().map(edit).collect::<Vec<_>>(),
            vec![(
                1,
                0,
                r#"{"command":"ls -la /srv","timeout":30,"description":"Run: ls -la /srv"}"#
            )]
        );
        assert_eq!(
            m.reason,
            "normalised 'bash' arguments: /description filled from /command, /timeout \
             string→integer (call 'c1')"
        );
        assert!(!m.reason.contains("ls -la") && !m.reason.contains("Run:"));
    }

    #[test]
    fn fill_leaves_present_or_unsourced_arguments_alone() {
        for arguments in [
            r#"{"command":"ls","description":"list"}"#, // present
            r#"{"description":"list"}"#,                // no source
            r#"{"command":{"argv":["ls"]}}"#,           // a source that is not text
            r#"{"command":null}"#,
        ] {
            assert!(
                matches!(
                    evaluate_fresh(&exo(), &one_call("bash", arguments)),
                    Verdict::Allow
                ),
                "{arguments}"
            );
        }
        // A number or a boolean is used as its JSON text; an empty prefix is no prefix.
        let cfg = Config::parse(r#"{"fill":{"bash":{"description":{"from":"command"}}}}"#).unwrap();
        let m = modification(evaluate_fresh(&cfg, &one_call("bash", r#"{"command":42}"#)));
        assert_eq!(edit(&m.edits[0]).2, r#"{"command":42,"description":"42"}"#);
        // Off by default.
        assert!(matches!(
            evaluate_fresh(&Config::default(), &one_call("bash", r#"{"command":"ls"}"#)),
            Verdict::Allow
        ));
    }

    #[test]
    fn fill_only_adds_what_the_schema_requires() {
        // `timeout` is not required: nothing is added even with a rule for it.
        let cfg = Config::parse(r#"{"fill":{"bash":{"timeout":{"from":"command"}}}}"#).unwrap();
        assert!(matches!(
            evaluate_fresh(
                &cfg,
                &one_call("bash", r#"{"command":"ls","description":"d"}"#)
            ),
            Verdict::Allow
        ));
        // `required` behind a local $ref counts.
        let schema = r##"{"$ref":"#/$defs/args","$defs":{"args":{"type":"object",
            "properties":{"q":{"type":"string"},"title":{"type":"string"}},"required":["title"]}}}"##;
        let cfg = Config::parse(r#"{"fill":{"search":{"title":{"from":"q"}}}}"#).unwrap();
        let tools = vec![function("search", Some(schema))];
        let c = call("c", "search", r#"{"q":"rust"}"#);
        assert_eq!(
            repair_fresh(&cfg, &tools, &c).map(|r| r.0),
            Some(r#"{"q":"rust","title":"rust"}"#.to_string())
        );
        // An undeclared tool is left for the validator, fill or not.
        assert!(repair_fresh(&exo(), &[], &call("c", "bash", r#"{"command":"ls"}"#)).is_none());
    }

    #[test]
    fn aliases_copy_the_value_so_both_names_exist() {
        let m = modification(evaluate_fresh(
            &exo(),
            &one_call("write_file", r#"{"file":"/tmp/a.txt","content":"hi"}"#),
        ));
        assert_eq!(
            edit(&m.edits[0]).2,
            r#"{"file":"/tmp/a.txt","content":"hi","filePath":"/tmp/a.txt"}"#
        );
        assert_eq!(
            m.reason,
            "normalised 'write_file' arguments: /filePath copied from /file (call 'c1')"
        );
        assert!(!m.reason.contains("/tmp/a.txt"));
        // Either direction; any value.
        let m = modification(evaluate_fresh(
            &exo(),
            &one_call("write_file", r#"{"filePath":{"dir":"/tmp"}}"#),
        ));
        assert_eq!(
            edit(&m.edits[0]).2,
            r#"{"filePath":{"dir":"/tmp"},"file":{"dir":"/tmp"}}"#
        );
        // Both present (even different) or neither: untouched. Other tools: untouched.
        for (name, arguments) in [
            ("write_file", r#"{"file":"a","filePath":"b"}"#),
            ("write_file", r#"{"content":"x"}"#),
            ("bash", r#"{"command":"ls","description":"d","file":"x"}"#),
        ] {
            assert!(
                matches!(
                    evaluate_fresh(&exo(), &one_call(name, arguments)),
                    Verdict::Allow
                ),
                "{arguments}"
            );
        }
    }

    #[test]
    fn alias_groups_of_three_and_aliases_before_fills() {
        let cfg = Config::parse(
            r#"{"aliases":{"bash":[["cmd","command","script"]]},
                "fill":{"bash":{"description":{"from":"command"}}}}"#,
        )
        .unwrap();
        let tools = vec![function("bash", Some(BASH))];
        let (text, changes) =
            repair_fresh(&cfg, &tools, &call("c", "bash", r#"{"script":"make"}"#)).unwrap();
        assert_eq!(
            text,
            r#"{"script":"make","cmd":"make","command":"make","description":"make"}"#
        );
        let listed: Vec<String> = changes
            .iter()
            .map(|c| format!("{} {}", c.path, c.kind))
            .collect();
        assert_eq!(
            listed,
            vec![
                "/cmd copied from /script",
                "/command copied from /script",
                "/description filled from /command"
            ]
        );
    }

    #[test]
    fn fill_and_alias_config_is_checked() {
        let cfg = exo();
        assert_eq!(cfg.fill["bash"]["description"].prefix, "Run: ");
        assert!(Config::parse(r#"{"fill":{"bash":{"d":{"from":"d"}}}}"#).is_err());
        assert!(Config::parse(r#"{"fill":{"bash":{"d":{"form":"c"}}}}"#).is_err());
        assert!(Config::parse(r#"{"aliases":{"w":[["a"]]}}"#).is_err());
        assert!(Config::parse(r#"{"aliases":{"w":[["a","a"]]}}"#).is_err());
        let schema: Value = serde_json::from_str(CONFIG_SCHEMA).unwrap();
        assert!(schema["properties"]["fill"].is_object());
        assert!(schema["properties"]["aliases"].is_object());
    }
}
