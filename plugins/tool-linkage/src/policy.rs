//! Checks that every tool result links to a tool call, as plain functions over the SDK types (no
//! host imports) so it is unit-testable natively.
//!
//! For each `role: "tool"` message, in order (message indices in reasons are 0-based positions
//! in the request's `messages`):
//! - it carries a non-empty `tool_call_id`;
//! - that id was made by an earlier assistant message (when several earlier assistant messages
//!   used the same id, the latest one is the call being answered);
//! - no other result answers the same id within the same turn — a turn being the messages after
//!   an assistant message, up to the next assistant message;
//! - its `name`, when given, equals the called tool's name (and with `require_name` it must be
//!   given);
//! - its content is a string, or a list of content-part objects each with a string `type`.
//!
//! Every violation is reported (up to a cap), each naming the message index and the call id.

use railyard_plugin_sdk::reason::quote;
use railyard_plugin_sdk::{Content, Message, Request, ToolCall, Verdict};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

/// JSON Schema of the plugin's config, as given to the host in `describe`.
pub const CONFIG_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "tool-linkage plugin config",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "require_name": {
      "description": "Also require every tool result to carry the called tool's name (default false: the name is checked only when given).",
      "type": "boolean"
    }
  }
}"#;

/// At most this many violations are spelled out in one reason.
const MAX_REPORTED: usize = 10;

/// The plugin's config, parsed from the JSON the host validated against [`CONFIG_SCHEMA`].
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub require_name: bool,
}

impl Config {
    /// Parses the config JSON text.
    pub fn parse(text: &str) -> Result<Config, String> {
        serde_json::from_str(text).map_err(|e| format!("invalid tool-linkage config: {e}"))
    }
}

/// Judges every tool result in the conversation.
pub fn evaluate(config: &Config, request: &Request) -> Verdict {
    let problems = violations(config, &request.messages);
    if problems.is_empty() {
        return Verdict::Allow;
    }
    let extra = problems.len().saturating_sub(MAX_REPORTED);
    let mut reason = problems
        .into_iter()
        .take(MAX_REPORTED)
        .collect::<Vec<_>>()
        .join("; ");
    if extra > 0 {
        reason.push_str(&format!("; and {extra} more tool-result problems"));
    }
    Verdict::Block(reason)
}

/// Every linkage problem in the conversation, in message order.
pub fn violations(config: &Config, messages: &[Message]) -> Vec<String> {
    // Call id -> (index of the assistant message that made it, the call).
    let mut calls: HashMap<&str, (usize, &ToolCall)> = HashMap::new();
    // Call id -> index of the tool message that answered it in the current turn.
    let mut answered: HashMap<&str, usize> = HashMap::new();
    let mut problems = Vec::new();

    for (index, message) in messages.iter().enumerate() {
        match message.role.as_str() {
            "assistant" => {
                answered.clear();
                for call in &message.tool_calls {
                    // The first call with an id in a message is the one a result answers.
                    let made_here =
                        matches!(calls.get(call.id.as_str()), Some((i, _)) if *i == index);
                    if !made_here {
                        calls.insert(call.id.as_str(), (index, call));
                    }
                }
            }
            "tool" => check_result(config, index, message, &calls, &mut answered, &mut problems),
            _ => {}
        }
    }
    problems
}

fn check_result<'m>(
    config: &Config,
    index: usize,
    message: &'m Message,
    calls: &HashMap<&str, (usize, &'m ToolCall)>,
    answered: &mut HashMap<&'m str, usize>,
    problems: &mut Vec<String>,
) {
    let here = format!("message {index} (tool result)");
    let id = match message.tool_call_id.as_deref() {
        Some(id) if !id.is_empty() => id,
        _ => {
            problems.push(format!(
                "{here} has no tool_call_id, so it answers no tool call"
            ));
            if let Some(why) = content_problem(message.content.as_ref()) {
                problems.push(format!("{here} {why}"));
            }
            return;
        }
    };
    let quoted_id = quote(id);
    let Some((_, call)) = calls.get(id) else {
        problems.push(format!(
            "{here} answers tool call {quoted_id} which no earlier assistant message made"
        ));
        if let Some(why) = content_problem(message.content.as_ref()) {
            problems.push(format!("{here} for tool call {quoted_id} {why}"));
        }
        return;
    };
    if let Some(first) = answered.insert(id, index) {
        // Keep pointing at the first answer for any later duplicate.
        answered.insert(id, first);
        problems.push(format!(
            "{here} answers tool call {quoted_id} which message {first} already answered in the same turn"
        ));
    }
    match message.name.as_deref() {
        Some(name) if name != call.name => problems.push(format!(
            "{here} for tool call {quoted_id} names tool {}, but the call was to {}",
            quote(name),
            quote(&call.name)
        )),
        None if config.require_name => problems.push(format!(
            "{here} for tool call {quoted_id} has no name, and the tool-linkage config requires \
             one (the call was to {})",
            quote(&call.name)
        )),
        _ => {}
    }
    if let Some(why) = content_problem(message.content.as_ref()) {
        problems.push(format!("{here} for tool call {quoted_id} {why}"));
    }
}

/// Why the content is not a string or a list of content-part objects, if it isn't.
fn content_problem(content: Option<&Content>) -> Option<String> {
    let parts = match content {
        None => return Some("has no content".into()),
        Some(Content::Text(_)) => return None,
        Some(Content::Parts(json)) => json,
    };
    let items = match serde_json::from_str::<Value>(parts) {
        Ok(Value::Array(items)) => items,
        Ok(other) => {
            return Some(format!(
                "has content that is neither a string nor a list of content parts (it is {})",
                type_phrase(&other)
            ))
        }
        Err(e) => return Some(format!("has content that is not valid JSON ({e})")),
    };
    for (k, item) in items.iter().enumerate() {
        let Some(object) = item.as_object() else {
            return Some(format!(
                "has content part {k} that is not an object (it is {})",
                type_phrase(item)
            ));
        };
        match object.get("type") {
            Some(Value::String(_)) => {}
            Some(other) => {
                return Some(format!(
                    "has content part {k} whose \"type\" is not a string (it is {})",
                    type_phrase(other)
                ))
            }
            None => return Some(format!("has content part {k} without a \"type\"")),
        }
    }
    None
}

fn type_phrase(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_plugin_sdk::{Context, Rail};

    fn user(text: &str) -> Message {
        Message {
            role: "user".into(),
            content: Some(Content::Text(text.into())),
            name: None,
            tool_call_id: None,
            tool_calls: vec![],
        }
    }

    fn assistant(calls: &[(&str, &str)]) -> Message {
        Message {
            role: "assistant".into(),
            content: if calls.is_empty() {
                Some(Content::Text("done".into()))
            } else {
                None
            },
            name: None,
            tool_call_id: None,
            tool_calls: calls
                .iter()
                .map(|(id, name)| ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: "{}".into(),
                })
                .collect(),
        }
    }

    fn result(id: &str) -> Message {
        Message {
            role: "tool".into(),
            content: Some(Content::Text("42".into())),
            name: None,
            tool_call_id: Some(id.into()),
            tool_calls: vec![],
        }
    }

    fn named(mut message: Message, name: &str) -> Message {
        message.name = Some(name.into());
        message
    }

    fn with_content(mut message: Message, content: Option<Content>) -> Message {
        message.content = content;
        message
    }

    fn request(messages: Vec<Message>) -> Request {
        Request {
            rail: Rail::ToolResult,
            messages,
            tools: vec![],
            context: Context {
                request_id: "req-1".into(),
                principal: None,
                tenant: None,
                metadata: vec![],
            },
        }
    }

    fn run(messages: Vec<Message>) -> Verdict {
        evaluate(&Config::default(), &request(messages))
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
    fn conversation_without_tools_is_allowed() {
        assert_allow(run(vec![user("hi"), assistant(&[]), user("bye")]));
        assert_allow(run(vec![]));
    }

    #[test]
    fn single_call_and_result() {
        assert_allow(run(vec![
            user("weather?"),
            assistant(&[("call_1", "get_weather")]),
            named(result("call_1"), "get_weather"),
        ]));
    }

    #[test]
    fn parallel_calls_multi_turn() {
        assert_allow(run(vec![
            user("plan a trip"),
            assistant(&[
                ("call_1", "get_weather"),
                ("call_2", "get_time"),
                ("call_3", "get_weather"),
            ]),
            result("call_2"),
            result("call_1"),
            named(result("call_3"), "get_weather"),
            assistant(&[("call_4", "book_hotel")]),
            result("call_4"),
            assistant(&[]),
            user("and tomorrow?"),
            assistant(&[("call_5", "get_weather"), ("call_6", "get_weather")]),
            result("call_5"),
            result("call_6"),
        ]));
    }

    #[test]
    fn result_for_unknown_call_is_blocked() {
        assert_eq!(
            block_reason(run(vec![
                user("hi"),
                assistant(&[("call_1", "get_weather")]),
                result("call_1"),
                user("more"),
                result("call_9"),
            ])),
            "message 4 (tool result) answers tool call 'call_9' which no earlier assistant message made"
        );
    }

    #[test]
    fn result_before_its_call_is_blocked() {
        let reason = block_reason(run(vec![
            user("hi"),
            result("call_1"),
            assistant(&[("call_1", "get_weather")]),
            result("call_1"),
        ]));
        assert_eq!(
            reason,
            "message 1 (tool result) answers tool call 'call_1' which no earlier assistant message made"
        );
    }

    #[test]
    fn missing_tool_call_id_is_blocked() {
        let mut orphan = result("x");
        orphan.tool_call_id = None;
        let mut empty = result("x");
        empty.tool_call_id = Some(String::new());
        let reason = block_reason(run(vec![
            user("hi"),
            assistant(&[("call_1", "f")]),
            orphan,
            empty,
        ]));
        assert_eq!(
            reason,
            "message 2 (tool result) has no tool_call_id, so it answers no tool call; \
             message 3 (tool result) has no tool_call_id, so it answers no tool call"
        );
    }

    #[test]
    fn duplicate_result_in_a_turn_is_blocked() {
        assert_eq!(
            block_reason(run(vec![
                user("hi"),
                assistant(&[("call_1", "f"), ("call_2", "g")]),
                result("call_1"),
                result("call_2"),
                result("call_1"),
                result("call_1"),
            ])),
            "message 4 (tool result) answers tool call 'call_1' which message 2 already answered in the same turn; \
             message 5 (tool result) answers tool call 'call_1' which message 2 already answered in the same turn"
        );
    }

    #[test]
    fn same_id_in_a_later_turn_is_a_new_turn() {
        // Reusing an id across turns (some providers do) is fine: each turn answers its own call.
        assert_allow(run(vec![
            user("hi"),
            assistant(&[("call_1", "f")]),
            named(result("call_1"), "f"),
            assistant(&[("call_1", "g")]),
            named(result("call_1"), "g"),
        ]));
    }

    #[test]
    fn later_assistant_message_with_the_same_id_is_the_one_answered() {
        let reason = block_reason(run(vec![
            user("hi"),
            assistant(&[("call_1", "f")]),
            result("call_1"),
            assistant(&[("call_1", "g")]),
            named(result("call_1"), "f"),
        ]));
        assert_eq!(
            reason,
            "message 4 (tool result) for tool call 'call_1' names tool 'f', but the call was to 'g'"
        );
    }

    #[test]
    fn wrong_name_is_blocked() {
        assert_eq!(
            block_reason(run(vec![
                user("hi"),
                assistant(&[("call_1", "get_weather"), ("call_2", "get_time")]),
                named(result("call_1"), "get_weather"),
                named(result("call_2"), "get_weather"),
            ])),
            "message 3 (tool result) for tool call 'call_2' names tool 'get_weather', but the call was to 'get_time'"
        );
    }

    #[test]
    fn require_name() {
        let config = Config::parse(r#"{"require_name":true}"#).unwrap();
        let messages = vec![
            user("hi"),
            assistant(&[("call_1", "get_weather"), ("call_2", "get_time")]),
            named(result("call_1"), "get_weather"),
            result("call_2"),
        ];
        assert_eq!(
            block_reason(evaluate(&config, &request(messages.clone()))),
            "message 3 (tool result) for tool call 'call_2' has no name, and the tool-linkage config requires one (the call was to 'get_time')"
        );
        assert_allow(evaluate(&Config::default(), &request(messages)));
    }

    #[test]
    fn content_shapes() {
        let ok_parts = Content::Parts(
            r#"[{"type":"text","text":"42"},{"type":"image_url","image_url":{"url":"x"}}]"#.into(),
        );
        assert_allow(run(vec![
            user("hi"),
            assistant(&[("a", "f"), ("b", "f"), ("c", "f")]),
            with_content(result("a"), Some(ok_parts)),
            with_content(result("b"), Some(Content::Text(String::new()))),
            with_content(result("c"), Some(Content::Parts("[]".into()))),
        ]));

        let cases = [
            (None, "has no content"),
            (
                Some(Content::Parts(r#"{"type":"text"}"#.into())),
                "has content that is neither a string nor a list of content parts (it is an object)",
            ),
            (
                Some(Content::Parts("42".into())),
                "has content that is neither a string nor a list of content parts (it is a number)",
            ),
            (
                Some(Content::Parts(r#"[{"type":"text","text":"x"},"raw"]"#.into())),
                "has content part 1 that is not an object (it is a string)",
            ),
            (
                Some(Content::Parts(r#"[{"text":"x"}]"#.into())),
                "has content part 0 without a \"type\"",
            ),
            (
                Some(Content::Parts(r#"[{"type":7}]"#.into())),
                "has content part 0 whose \"type\" is not a string (it is a number)",
            ),
            (Some(Content::Parts("[{".into())), "has content that is not valid JSON"),
        ];
        for (content, expected) in cases {
            let reason = block_reason(run(vec![
                user("hi"),
                assistant(&[("call_7", "f")]),
                with_content(result("call_7"), content),
            ]));
            assert!(
                reason.starts_with(&format!(
                    "message 2 (tool result) for tool call 'call_7' {expected}"
                )),
                "{reason}"
            );
        }
    }

    #[test]
    fn every_violation_is_reported() {
        let reason = block_reason(run(vec![
            user("hi"),
            assistant(&[("call_1", "f"), ("call_2", "g")]),
            named(result("call_1"), "g"),
            with_content(result("call_2"), None),
            result("call_3"),
        ]));
        assert_eq!(
            reason,
            "message 2 (tool result) for tool call 'call_1' names tool 'g', but the call was to 'f'; \
             message 3 (tool result) for tool call 'call_2' has no content; \
             message 4 (tool result) answers tool call 'call_3' which no earlier assistant message made"
        );
    }

    #[test]
    fn reasons_are_capped() {
        let mut messages = vec![user("hi"), assistant(&[("a", "f")])];
        messages.extend((0..14).map(|i| result(&format!("ghost_{i}"))));
        let reason = block_reason(run(messages));
        assert!(
            reason.ends_with("; and 4 more tool-result problems"),
            "{reason}"
        );
    }

    #[test]
    fn hostile_ids_are_quoted_safely() {
        let reason = block_reason(run(vec![user("hi"), result("x'\n; message 0 is fine")]));
        assert!(reason.contains(r"'x\'\n; message 0 is fine'"), "{reason}");
    }

    #[test]
    fn config_parsing() {
        assert!(!Config::parse("{}").unwrap().require_name);
        assert!(Config::parse(r#"{"require":true}"#).is_err());
        let schema: Value = serde_json::from_str(CONFIG_SCHEMA).unwrap();
        assert_eq!(schema["additionalProperties"], false);
    }
}
