//! Checks that every tool result links to a tool call of its own turn, as plain functions over the
//! SDK types (no host imports) so it is unit-testable natively.
//!
//! The rules are NeMo Guardrails' IORails tool-result rules, plus one from Lutum's commit
//! validation (every call answered). A *turn* is an assistant message with `tool_calls`; the
//! results of a turn are the `tool` messages that directly follow it. Message indices in reasons
//! are 0-based positions in the request's `messages`.
//!
//! For each `role: "tool"` message, in order:
//! 1. it follows a turn: the nearest preceding message that is not a `tool` message is an
//!    assistant message with tool calls (a result after a user, system or developer message, an
//!    assistant message without tool calls, or at the very start answers no turn);
//! 2. it carries a non-empty `tool_call_id`;
//! 3. that id is a call of its own turn (an id made only by an earlier turn is named as such;
//!    reusing an id in a later turn is fine: each turn answers its own calls);
//! 4. its turn does not carry two calls with that id (checked once per turn that has results:
//!    any duplicate id in it makes linkage ambiguous);
//! 5. no earlier result of the same turn answers the same id;
//! 6. its `name`, when given, equals the called tool's name (with `require_name` it must be given);
//! 7. its content is a string, or a list of content-part objects each with a string `type`.
//!
//! With `require_all_results`, a turn followed by results must have a result for each of its
//! calls (a call without an id can never be answered). A turn with no results at all is not
//! checked: the application may not have run its calls yet.
//!
//! Every violation is reported (up to a cap), each naming the message index and the call id,
//! never the result's content.

use railyard_plugin_sdk::reason::quote;
use railyard_plugin_sdk::{Content, Message, Request, ToolCall, Verdict};
use serde::Deserialize;
use serde_json::Value;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

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
    },
    "require_all_results": {
      "description": "A turn of tool calls that is followed by results must have one result for each of its calls; a missing one blocks (default false, as in NeMo Guardrails).",
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
    #[serde(default)]
    pub require_all_results: bool,
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

/// One assistant message with tool calls, and the results that followed it so far.
struct Turn<'m> {
    /// Index of the assistant message.
    index: usize,
    calls: &'m [ToolCall],
    /// Call id -> the first call with it.
    by_id: HashMap<&'m str, &'m ToolCall>,
    /// Ids that more than one call of this turn carries.
    ambiguous: HashSet<&'m str>,
    /// Call id -> index of the first result answering it.
    answered: HashMap<&'m str, usize>,
    /// How many results followed the turn.
    results: usize,
}

impl<'m> Turn<'m> {
    fn new(index: usize, calls: &'m [ToolCall]) -> Turn<'m> {
        let mut by_id = HashMap::new();
        let mut ambiguous = HashSet::new();
        for call in calls.iter().filter(|c| !c.id.is_empty()) {
            match by_id.entry(call.id.as_str()) {
                Entry::Occupied(_) => {
                    ambiguous.insert(call.id.as_str());
                }
                Entry::Vacant(slot) => {
                    slot.insert(call);
                }
            }
        }
        Turn {
            index,
            calls,
            by_id,
            ambiguous,
            answered: HashMap::new(),
            results: 0,
        }
    }
}

/// What the messages before a tool result were.
enum Position<'m> {
    /// The conversation starts here.
    Start,
    /// Directly after this turn (and possibly other results of it).
    InTurn(Turn<'m>),
    /// After a message that is not a turn (not a tool message, and not an assistant message with
    /// tool calls): its index and role.
    After(usize, &'m str),
}

/// Every linkage problem in the conversation, in message order.
pub fn violations(config: &Config, messages: &[Message]) -> Vec<String> {
    // Call id -> index of the latest earlier turn that made it.
    let mut earlier: HashMap<&str, usize> = HashMap::new();
    let mut position = Position::Start;
    let mut problems = Vec::new();

    for (index, message) in messages.iter().enumerate() {
        if message.role == "tool" {
            check_result(
                config,
                index,
                message,
                &mut position,
                &earlier,
                &mut problems,
            );
            continue;
        }
        if let Position::InTurn(turn) = &position {
            close_turn(config, turn, &mut earlier, &mut problems);
        }
        if message.role == "assistant" && !message.tool_calls.is_empty() {
            let turn = Turn::new(index, &message.tool_calls);
            let answered_next = messages.get(index + 1).is_some_and(|m| m.role == "tool");
            if answered_next {
                let mut reported = HashSet::new();
                for call in turn.calls {
                    let id = call.id.as_str();
                    if turn.ambiguous.contains(id) && reported.insert(id) {
                        problems.push(format!(
                            "message {index} (assistant) makes more than one tool call with id {}, \
                             so its results cannot be linked to one call",
                            quote(id)
                        ));
                    }
                }
            }
            position = Position::InTurn(turn);
        } else {
            position = Position::After(index, message.role.as_str());
        }
    }
    if let Position::InTurn(turn) = &position {
        close_turn(config, turn, &mut earlier, &mut problems);
    }
    problems
}

/// The turn is over: with `require_all_results`, every call of a turn with results needs one;
/// then its ids become earlier turns' ids.
fn close_turn<'m>(
    config: &Config,
    turn: &Turn<'m>,
    earlier: &mut HashMap<&'m str, usize>,
    problems: &mut Vec<String>,
) {
    if config.require_all_results && turn.results > 0 {
        let mut seen = HashSet::new();
        for (k, call) in turn.calls.iter().enumerate() {
            let index = turn.index;
            if call.id.is_empty() {
                problems.push(format!(
                    "message {index} (assistant) makes tool call #{k} to {} without an id, so no \
                     result can answer it, and the tool-linkage config requires a result for \
                     every call",
                    quote(&call.name)
                ));
            } else if seen.insert(call.id.as_str())
                && !turn.ambiguous.contains(call.id.as_str())
                && !turn.answered.contains_key(call.id.as_str())
            {
                problems.push(format!(
                    "message {index} (assistant) makes tool call {} to {} which no result answers, \
                     and the tool-linkage config requires a result for every call",
                    quote(&call.id),
                    quote(&call.name)
                ));
            }
        }
    }
    for call in turn.calls.iter().filter(|c| !c.id.is_empty()) {
        earlier.insert(call.id.as_str(), turn.index);
    }
}

/// What a message that is not a turn is, for reasons.
fn describe_role(role: &str) -> String {
    match role {
        "user" | "system" | "developer" => format!("a {role} message"),
        "assistant" => "an assistant message without tool calls".into(),
        other => format!("a message with role {}", quote(other)),
    }
}

fn check_result<'m>(
    config: &Config,
    index: usize,
    message: &'m Message,
    position: &mut Position<'m>,
    earlier: &HashMap<&'m str, usize>,
    problems: &mut Vec<String>,
) {
    let here = format!("message {index} (tool result)");
    let id = message.tool_call_id.as_deref().filter(|id| !id.is_empty());
    let about = match id {
        Some(id) => format!("{here} for tool call {}", quote(id)),
        None => here.clone(),
    };
    let content = content_problem(message.content.as_ref());
    let turn = match position {
        Position::InTurn(turn) => turn,
        Position::Start => {
            problems.push(format!(
                "{about} is not preceded by an assistant message with tool calls, so it answers \
                 no turn"
            ));
            problems.extend(content.map(|why| format!("{about} {why}")));
            return;
        }
        Position::After(before, role) => {
            problems.push(format!(
                "{about} follows {} (message {before}) instead of the assistant message whose \
                 tool calls it answers",
                describe_role(role)
            ));
            problems.extend(content.map(|why| format!("{about} {why}")));
            return;
        }
    };
    turn.results += 1;
    let Some(id) = id else {
        problems.push(format!(
            "{here} has no tool_call_id, so it answers no tool call"
        ));
        problems.extend(content.map(|why| format!("{here} {why}")));
        return;
    };
    let quoted_id = quote(id);
    match turn.by_id.get(id) {
        None => match earlier.get(id) {
            Some(made) => problems.push(format!(
                "{here} answers tool call {quoted_id} of an earlier turn (message {made}), not a \
                 call of its own turn (message {})",
                turn.index
            )),
            None => problems.push(format!(
                "{here} answers tool call {quoted_id} which no assistant message made (its turn is \
                 message {})",
                turn.index
            )),
        },
        Some(call) => {
            if let Some(first) = turn.answered.get(id) {
                problems.push(format!(
                    "{here} answers tool call {quoted_id} which message {first} already answered \
                     in the same turn"
                ));
            } else {
                turn.answered.insert(id, index);
            }
            // With two calls under this id the turn is already reported; their names cannot be
            // told apart.
            if !turn.ambiguous.contains(id) {
                match message.name.as_deref() {
                    Some(name) if name != call.name => problems.push(format!(
                        "{about} names tool {}, but the call was to {}",
                        quote(name),
                        quote(&call.name)
                    )),
                    None if config.require_name => problems.push(format!(
                        "{about} has no name, and the tool-linkage config requires one (the call \
                         was to {})",
                        quote(&call.name)
                    )),
                    _ => {}
                }
            }
        }
    }
    problems.extend(content.map(|why| format!("{about} {why}")));
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
    use railyard_plugin_sdk::testing::{self, assistant_calls, call, tool_result, user};
    use railyard_plugin_sdk::Rail;

    fn assistant(calls: &[(&str, &str)]) -> Message {
        if calls.is_empty() {
            return testing::assistant("done");
        }
        assistant_calls(
            calls
                .iter()
                .map(|(id, name)| call(id, name, "{}"))
                .collect(),
        )
    }

    fn result(id: &str) -> Message {
        tool_result(id, "42")
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
        testing::request(Rail::ToolResult, messages)
    }

    fn run(messages: Vec<Message>) -> Verdict {
        evaluate(&Config::default(), &request(messages))
    }

    use railyard_plugin_sdk::testing::{assert_allow, expect_block as block_reason};

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
                result("call_9"),
            ])),
            "message 3 (tool result) answers tool call 'call_9' which no assistant message made \
             (its turn is message 1)"
        );
    }

    #[test]
    fn result_of_an_earlier_turn_is_blocked() {
        let messages = vec![
            user("hi"),
            assistant(&[("call_1", "get_weather")]),
            result("call_1"),
            user("and the time?"),
            assistant(&[("call_2", "get_time")]),
            result("call_2"),
            result("call_1"),
        ];
        assert_eq!(
            block_reason(run(messages.clone())),
            "message 6 (tool result) answers tool call 'call_1' of an earlier turn (message 1), \
             not a call of its own turn (message 4)"
        );
        // Two turns back to back: the results belong to the second one only.
        let reason = block_reason(run(vec![
            user("hi"),
            assistant(&[("call_1", "f")]),
            assistant(&[("call_2", "g")]),
            result("call_2"),
            result("call_1"),
        ]));
        assert_eq!(
            reason,
            "message 4 (tool result) answers tool call 'call_1' of an earlier turn (message 1), \
             not a call of its own turn (message 2)"
        );
        // The same conversation without the stray result is fine.
        let mut fine = messages;
        fine.pop();
        assert_allow(run(fine));
    }

    #[test]
    fn result_must_follow_its_call_turn() {
        // After a user message, even though the id was made by an earlier turn.
        assert_eq!(
            block_reason(run(vec![
                user("hi"),
                assistant(&[("call_1", "get_weather")]),
                result("call_1"),
                user("more"),
                result("call_1"),
            ])),
            "message 4 (tool result) for tool call 'call_1' follows a user message (message 3) \
             instead of the assistant message whose tool calls it answers"
        );
        // Before its call.
        assert_eq!(
            block_reason(run(vec![
                user("hi"),
                result("call_1"),
                assistant(&[("call_1", "get_weather")]),
                result("call_1"),
            ])),
            "message 1 (tool result) for tool call 'call_1' follows a user message (message 0) \
             instead of the assistant message whose tool calls it answers"
        );
        // After a system message, an assistant message without calls, or nothing at all.
        let mut system = user("be brief");
        system.role = "system".into();
        assert!(block_reason(run(vec![
            assistant(&[("call_1", "f")]),
            system,
            result("call_1"),
        ]))
        .contains("follows a system message (message 1)"));
        assert!(block_reason(run(vec![
            user("hi"),
            assistant(&[("call_1", "f")]),
            result("call_1"),
            assistant(&[]),
            result("call_1"),
        ]))
        .contains("follows an assistant message without tool calls (message 3)"));
        assert_eq!(
            block_reason(run(vec![result("call_1")])),
            "message 0 (tool result) for tool call 'call_1' is not preceded by an assistant \
             message with tool calls, so it answers no turn"
        );
        let mut odd = user("x");
        odd.role = "critic".into();
        assert!(block_reason(run(vec![odd, result("c")]))
            .contains("follows a message with role 'critic' (message 0)"));
    }

    #[test]
    fn duplicate_call_ids_in_a_turn_are_blocked() {
        let reason = block_reason(run(vec![
            user("hi"),
            assistant(&[
                ("call_1", "f"),
                ("call_2", "g"),
                ("call_1", "h"),
                ("call_1", "i"),
            ]),
            named(result("call_1"), "h"),
            result("call_2"),
        ]));
        assert_eq!(
            reason,
            "message 1 (assistant) makes more than one tool call with id 'call_1', so its results \
             cannot be linked to one call"
        );
        // A turn nobody answered (yet) links nothing: not this rule's business.
        assert_allow(run(vec![
            user("hi"),
            assistant(&[("call_1", "f"), ("call_1", "g")]),
            user("never mind"),
        ]));
        // Calls without ids are not duplicates of each other.
        assert_allow(run(vec![
            user("hi"),
            assistant(&[("", "f"), ("", "g"), ("call_1", "h")]),
            result("call_1"),
        ]));
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
             message 4 (tool result) answers tool call 'call_3' which no assistant message made (its turn is message 1)"
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
    fn hostile_ids_are_described_not_quoted() {
        let reason = block_reason(run(vec![user("hi"), result("x'\n; message 0 is fine")]));
        assert!(!reason.contains("is fine"), "{reason}");
        assert!(
            reason.contains("<22 bytes, not a name: not shown>"),
            "{reason}"
        );
    }

    fn all_results() -> Config {
        Config::parse(r#"{"require_all_results":true}"#).unwrap()
    }

    #[test]
    fn require_all_results() {
        let answered = vec![
            user("hi"),
            assistant(&[("call_1", "f"), ("call_2", "g")]),
            result("call_2"),
            result("call_1"),
            assistant(&[]),
            user("again"),
            assistant(&[("call_3", "f")]),
            result("call_3"),
        ];
        assert_allow(evaluate(&all_results(), &request(answered)));

        let missing = vec![
            user("hi"),
            assistant(&[("call_1", "f"), ("call_2", "g"), ("call_3", "h")]),
            result("call_2"),
            assistant(&[]),
            user("again"),
            assistant(&[("call_4", "f"), ("call_5", "g")]),
            result("call_4"),
        ];
        assert_eq!(
            block_reason(evaluate(&all_results(), &request(missing.clone()))),
            "message 1 (assistant) makes tool call 'call_1' to 'f' which no result answers, and \
             the tool-linkage config requires a result for every call; \
             message 1 (assistant) makes tool call 'call_3' to 'h' which no result answers, and \
             the tool-linkage config requires a result for every call; \
             message 5 (assistant) makes tool call 'call_5' to 'g' which no result answers, and \
             the tool-linkage config requires a result for every call"
        );
        // Off by default, as in NeMo.
        assert_allow(run(missing));
    }

    #[test]
    fn require_all_results_skips_turns_without_results() {
        // The last turn was not run yet, and an earlier one was abandoned: no results, no check.
        assert_allow(evaluate(
            &all_results(),
            &request(vec![
                user("hi"),
                assistant(&[("call_1", "f")]),
                user("forget it"),
                assistant(&[("call_2", "g")]),
            ]),
        ));
    }

    #[test]
    fn require_all_results_needs_ids() {
        assert_eq!(
            block_reason(evaluate(
                &all_results(),
                &request(vec![
                    user("hi"),
                    assistant(&[("call_1", "f"), ("", "g")]),
                    result("call_1"),
                ]),
            )),
            "message 1 (assistant) makes tool call #1 to 'g' without an id, so no result can \
             answer it, and the tool-linkage config requires a result for every call"
        );
    }

    #[test]
    fn require_all_results_does_not_repeat_other_findings() {
        // A duplicate result is one finding; the unanswered call beside it is the other.
        assert_eq!(
            block_reason(evaluate(
                &all_results(),
                &request(vec![
                    user("hi"),
                    assistant(&[("call_1", "f"), ("call_2", "g")]),
                    result("call_1"),
                    result("call_1"),
                ]),
            )),
            "message 3 (tool result) answers tool call 'call_1' which message 2 already answered \
             in the same turn; \
             message 1 (assistant) makes tool call 'call_2' to 'g' which no result answers, and \
             the tool-linkage config requires a result for every call"
        );
        // Duplicate call ids: reported once, not as a missing result as well.
        assert_eq!(
            block_reason(evaluate(
                &all_results(),
                &request(vec![
                    user("hi"),
                    assistant(&[("call_1", "f"), ("call_1", "g")]),
                    result("call_1"),
                ]),
            )),
            "message 1 (assistant) makes more than one tool call with id 'call_1', so its results \
             cannot be linked to one call"
        );
    }

    #[test]
    fn config_parsing() {
        assert!(!Config::parse("{}").unwrap().require_name);
        assert!(!Config::parse("{}").unwrap().require_all_results);
        assert!(Config::parse(r#"{"require":true}"#).is_err());
        let schema: Value = serde_json::from_str(CONFIG_SCHEMA).unwrap();
        assert_eq!(schema["additionalProperties"], false);
    }
}
