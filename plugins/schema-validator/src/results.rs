//! Validation of tool results against the result schemas their tools declare (rail
//! `tool_result`), as plain functions over the SDK types so it is unit-testable natively.
//!
//! A result schema is an MCP tool's `outputSchema`, or `result_schema` of a tool declared in the
//! daemon's config. For every `tool` message whose call names a function declaring one (the call
//! found by `tool_call_id` among earlier assistant messages, else the message's `name`):
//! 1. The result's JSON: for parts (MCP), the `structured` part's value when there is one, else
//!    the text parts joined; for text, the text. A result that is not JSON cannot be validated,
//!    and is rejected.
//! 2. A schema that is not usable rejects the result (nothing passes unvalidated).
//! 3. The JSON must be valid against the schema.
//!
//! A failing result is rejected: its content is replaced by the reason, so the model (or the MCP
//! client) learns the tool misbehaved rather than acting on data of the wrong shape, and the
//! conversation goes on. Reasons follow the argument rules: paths show only names the schema
//! declares, never values (results carry personal data too), unless `include_values`.

use crate::policy::{Config, SchemaCache};
use railyard_plugin_sdk::json::parse_strict;
use railyard_plugin_sdk::reason::quote;
use railyard_plugin_sdk::{Content, Message, Rejection, Request, Target, ToolDef, Verdict};
use serde_json::Value;

/// The content part that carries an MCP result's `structuredContent`.
const STRUCTURED: &str = "structured";

/// Judges every tool result whose tool declares a result schema.
pub fn evaluate(config: &Config, cache: &mut SchemaCache, request: &Request) -> Verdict {
    let mut rejections = Vec::new();
    for (index, name) in request.tool_results() {
        let message = &request.messages[index];
        let Some(schema) = name.and_then(|n| result_schema(&request.tools, n)) else {
            continue;
        };
        let tool = quote(name.unwrap_or_default());
        if let Err(problem) = check(config, cache, schema, message) {
            rejections.push(Rejection {
                target: Target::Message(index as u32),
                message: format!("The result of tool {tool} was withheld: {problem}"),
            });
        }
    }
    if rejections.is_empty() {
        Verdict::Allow
    } else {
        Verdict::Reject(rejections)
    }
}

/// The result schema of the one function declared as `name`, if it declares one. A name declared
/// twice is left to the argument rules (its calls block there).
fn result_schema<'a>(tools: &'a [ToolDef], name: &str) -> Option<&'a str> {
    let mut functions = tools
        .iter()
        .filter(|t| t.kind == "function" && t.name.as_deref() == Some(name));
    match (functions.next(), functions.next()) {
        (Some(def), None) => def.result_schema.as_deref(),
        _ => None,
    }
}

/// Checks one result; the error says why, without values.
fn check(
    config: &Config,
    cache: &mut SchemaCache,
    schema_text: &str,
    message: &Message,
) -> Result<(), String> {
    let value = result_json(message)?;
    let compiled = cache.get(schema_text).map_err(|why| {
        format!(
            "the tool's result schema cannot be used, so its results cannot be validated: {why}"
        )
    })?;
    match compiled.mismatches(config, &value) {
        None => Ok(()),
        Some(why) => Err(format!("it does not match the tool's result schema: {why}")),
    }
}

/// The result as JSON (rule 1).
fn result_json(message: &Message) -> Result<Value, String> {
    let text = match &message.content {
        None => return Err("it is empty, so it cannot be validated".into()),
        Some(Content::Text(text)) => text.clone(),
        Some(Content::Parts(parts)) => {
            let parts: Value = serde_json::from_str(parts)
                .map_err(|_| "its content parts are not JSON".to_string())?;
            let parts = parts.as_array().cloned().unwrap_or_default();
            if let Some(structured) = parts
                .iter()
                .find(|p| p.get("type").and_then(Value::as_str) == Some(STRUCTURED))
            {
                return Ok(structured.get(STRUCTURED).cloned().unwrap_or(Value::Null));
            }
            parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("")
        }
    };
    match parse_strict(&text) {
        Ok(value) => Ok(value),
        Err(_) if text.trim().is_empty() => Err("it is empty, so it cannot be validated".into()),
        Err(_) => Err(format!(
            "it is not JSON (the tool declares a result schema), so it cannot be validated ({} \
             bytes of text)",
            text.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_plugin_sdk::testing::*;
    use railyard_plugin_sdk::Rail;

    const REPORT: &str = r#"{"type":"object","properties":{"quarter":{"type":"string"},"revenue":{"type":"number"}},"required":["quarter","revenue"]}"#;

    fn config() -> Config {
        Config::parse("{}").unwrap()
    }

    fn report_tool() -> ToolDef {
        ToolDef {
            result_schema: Some(REPORT.into()),
            ..function("quarterly_report", Some(r#"{"type":"object"}"#))
        }
    }

    fn judge(result: Message) -> Verdict {
        let req = request(
            Rail::ToolResult,
            vec![
                user("report?"),
                assistant_calls(vec![call("c1", "quarterly_report", "{}")]),
                result,
            ],
        )
        .with_tools(vec![report_tool(), function("other", None)]);
        evaluate(&config(), &mut SchemaCache::default(), &req)
    }

    fn parts(json: &str) -> Message {
        Message {
            content: Some(Content::Parts(json.into())),
            ..tool_result("c1", "")
        }
    }

    #[test]
    fn a_matching_result_passes() {
        assert_allow(judge(tool_result(
            "c1",
            r#"{"quarter":"Q1","revenue":12.5}"#,
        )));
        assert_allow(judge(parts(
            r#"[{"type":"text","text":"nice"},{"type":"structured","structured":{"quarter":"Q1","revenue":3}}]"#,
        )));
        // Text parts joined.
        assert_allow(judge(parts(
            r#"[{"type":"text","text":"{\"quarter\":\"Q1\","},{"type":"text","text":"\"revenue\":1}"}]"#,
        )));
    }

    #[test]
    fn a_mismatch_is_rejected_naming_the_declared_path_not_the_value() {
        let rejections = expect_reject(judge(parts(
            r#"[{"type":"text","text":"x"},{"type":"structured","structured":{"quarter":"Q1","revenue":"a lot"}}]"#,
        )));
        assert_eq!(rejections.len(), 1);
        assert!(matches!(rejections[0].target, Target::Message(2)));
        let reason = &rejections[0].message;
        assert!(reason.contains("'quarterly_report'"), "{reason}");
        assert!(
            reason.contains("/revenue") && reason.contains("'type'"),
            "{reason}"
        );
        assert!(!reason.contains("a lot"), "{reason}");
    }

    #[test]
    fn a_result_that_is_not_json_or_is_empty_is_rejected() {
        let reason = &expect_reject(judge(tool_result("c1", "a lot of revenue")))[0].message;
        assert!(
            reason.contains("not JSON") && !reason.contains("a lot"),
            "{reason}"
        );
        let reason = &expect_reject(judge(parts("[]")))[0].message;
        assert!(reason.contains("empty"), "{reason}");
    }

    #[test]
    fn tools_without_a_result_schema_and_unlinked_results_pass() {
        let req = request(
            Rail::ToolResult,
            vec![
                assistant_calls(vec![call("c1", "other", "{}")]),
                tool_result("c1", "not json"),
                tool_result("c9", "not json either"),
            ],
        )
        .with_tools(vec![report_tool(), function("other", None)]);
        assert_allow(evaluate(&config(), &mut SchemaCache::default(), &req));
    }

    #[test]
    fn the_name_serves_when_the_call_is_not_in_the_conversation() {
        let mut result = tool_result("c7", r#"{"quarter":"Q1"}"#);
        result.name = Some("quarterly_report".into());
        let req = request(Rail::ToolResult, vec![result]).with_tools(vec![report_tool()]);
        let reason =
            &expect_reject(evaluate(&config(), &mut SchemaCache::default(), &req))[0].message;
        assert!(
            reason.contains("'revenue' is a required property"),
            "{reason}"
        );
    }

    #[test]
    fn an_unusable_result_schema_rejects() {
        let tool = ToolDef {
            result_schema: Some(r#"{"type": 12}"#.into()),
            ..function("quarterly_report", None)
        };
        let req = request(
            Rail::ToolResult,
            vec![
                assistant_calls(vec![call("c1", "quarterly_report", "{}")]),
                tool_result("c1", "{}"),
            ],
        )
        .with_tools(vec![tool]);
        let reason =
            &expect_reject(evaluate(&config(), &mut SchemaCache::default(), &req))[0].message;
        assert!(reason.contains("cannot be used"), "{reason}");
    }
}
