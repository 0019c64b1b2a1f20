//! Folding parallel tool calls for Llama 3.1, as plain functions over the SDK types (no host
//! imports) so it is unit-testable natively.
//!
//! When `context.model` matches one of the config's `models` globs (`*` matches any run of
//! characters, case-insensitively; the whole name must match), every assistant message of the
//! conversation with two or more tool calls that is directly followed by one or more `tool`
//! messages is rewritten:
//! - its calls are removed (`remove-call` edits); if it is then left without text, its content
//!   becomes `Calling tools: NAME, NAME.` (a `content` edit);
//! - the run of `tool` messages after it is replaced by one `user` message (a `replace` edit)
//!   with one line per result, in order: `Tool 'NAME' returned: CONTENT`. NAME is the name of
//!   the call the result answers (by `tool_call_id`), else the result's own `name`, else `tool`;
//!   CONTENT is the result's text (content parts: the `text` of each part, one per line).
//!
//! Turns of one call, calls nobody answered yet, and every other message are left alone. Other
//! models (or a request without a model): allow. The reason counts what was folded and where,
//! never what the messages said.

use railyard_plugin_sdk::glob::glob_match;
use railyard_plugin_sdk::{
    CallRef, Content, ContentEdit, Edit, Message, Modification, ReplaceEdit, Request, Verdict,
};
use serde::Deserialize;
use serde_json::Value;

/// JSON Schema of the plugin's config, as given to the host in `describe`.
pub const CONFIG_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "llama31-compat plugin config",
  "type": "object",
  "additionalProperties": false,
  "required": ["models"],
  "properties": {
    "models": {
      "description": "Models (context.model, as the caller named it) whose conversations are folded: globs where * matches any run of characters, case-insensitive, e.g. \"llama-3.1*\".",
      "type": "array",
      "items": {"type": "string", "minLength": 1},
      "uniqueItems": true
    }
  }
}"#;

/// The plugin's config, parsed from the JSON the host validated against [`CONFIG_SCHEMA`].
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub models: Vec<String>,
}

impl Config {
    /// Parses the config JSON text.
    pub fn parse(text: &str) -> Result<Config, String> {
        serde_json::from_str(text).map_err(|e| format!("invalid llama31-compat config: {e}"))
    }

    /// Whether `model` matches one of the globs.
    pub fn applies_to(&self, model: &str) -> bool {
        self.models.iter().any(|glob| glob_match(glob, model))
    }
}

/// Folds the request's answered parallel tool calls when its model is configured.
pub fn evaluate(config: &Config, request: &Request) -> Verdict {
    let Some(model) = request.context.model.as_deref() else {
        return Verdict::Allow;
    };
    if !config.applies_to(model) {
        return Verdict::Allow;
    }
    let messages = &request.messages;
    let mut edits = Vec::new();
    let mut reasons = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let turn = &messages[i];
        let results = messages[i + 1..]
            .iter()
            .take_while(|m| m.role == "tool")
            .count();
        if turn.role != "assistant" || turn.tool_calls.len() < 2 || results == 0 {
            i += 1;
            continue;
        }
        let run = &messages[i + 1..i + 1 + results];
        fold(i, turn, run, &mut edits);
        let last = i + results;
        let span = if results == 1 {
            format!("message {last}")
        } else {
            format!("messages {}-{last}", i + 1)
        };
        reasons.push(format!(
            "folded the {} parallel tool calls of message {i} and their {results} result{} \
             ({span}) into one user message",
            turn.tool_calls.len(),
            if results == 1 { "" } else { "s" }
        ));
        i += 1 + results;
    }
    if edits.is_empty() {
        return Verdict::Allow;
    }
    Verdict::Modify(Modification {
        edits,
        reason: format!("for model {}: {}", quoted_model(model), reasons.join("; ")),
    })
}

/// The edits for one turn at `index` and its results `run`.
fn fold(index: usize, turn: &Message, run: &[Message], edits: &mut Vec<Edit>) {
    let at = index as u32;
    for c in 0..turn.tool_calls.len() {
        edits.push(Edit::RemoveCall(CallRef {
            message: at,
            call: c as u32,
        }));
    }
    if !has_text(turn) {
        let names: Vec<&str> = turn.tool_calls.iter().map(|c| c.name.as_str()).collect();
        edits.push(Edit::Content(ContentEdit {
            message: at,
            content: Content::Text(format!("Calling tools: {}.", names.join(", "))),
        }));
    }
    let lines: Vec<String> = run
        .iter()
        .map(|result| {
            let name = result
                .tool_call_id
                .as_deref()
                .and_then(|id| turn.tool_calls.iter().find(|c| c.id == id))
                .map(|c| c.name.as_str())
                .or(result.name.as_deref())
                .unwrap_or("tool");
            format!("Tool '{name}' returned: {}", content_text(result))
        })
        .collect();
    edits.push(Edit::Replace(ReplaceEdit {
        start: at + 1,
        count: run.len() as u32,
        message: Message {
            role: "user".into(),
            content: Some(Content::Text(lines.join("\n"))),
            name: None,
            tool_call_id: None,
            tool_calls: vec![],
        },
    }));
}

/// Whether a message has any text a model would read.
fn has_text(message: &Message) -> bool {
    match &message.content {
        None => false,
        Some(Content::Text(t)) => !t.trim().is_empty(),
        Some(Content::Parts(_)) => !content_text(message).trim().is_empty(),
    }
}

/// A message's content as text: a string as it is; content parts by the `text` of each part,
/// one per line; any other JSON as its text.
fn content_text(message: &Message) -> String {
    match &message.content {
        None => String::new(),
        Some(Content::Text(t)) => t.clone(),
        Some(Content::Parts(json)) => match serde_json::from_str::<Value>(json) {
            Ok(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| match p {
                    Value::String(s) => Some(s.as_str()),
                    _ => p.get("text").and_then(Value::as_str),
                })
                .collect::<Vec<_>>()
                .join("\n"),
            _ => json.clone(),
        },
    }
}

/// The model's name for a reason (the caller's words: quoted and cut).
fn quoted_model(model: &str) -> String {
    railyard_plugin_sdk::reason::quote(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_plugin_sdk::testing::{
        self, assert_allow, assistant_calls, call, expect_modify, request, system, tool_result,
        user,
    };
    use railyard_plugin_sdk::Rail;

    fn llama() -> Config {
        Config::parse(r#"{"models":["llama-3.1*","*/Meta-Llama-3.1-*"]}"#).unwrap()
    }

    fn weather_turn() -> Vec<Message> {
        vec![
            system("You are helpful."),
            user("Weather and time in Paris?"),
            assistant_calls(vec![
                call("c1", "get_weather", r#"{"city":"Paris"}"#),
                call("c2", "get_time", r#"{"tz":"Europe/Paris"}"#),
            ]),
            tool_result("c1", "18°C, cloudy"),
            tool_result("c2", "14:05"),
        ]
    }

    fn for_model(messages: Vec<Message>, model: &str) -> Request {
        request(Rail::Input, messages).with_model(model)
    }

    #[test]
    fn folds_parallel_calls_and_their_results() {
        let m = expect_modify(evaluate(
            &llama(),
            &for_model(weather_turn(), "llama-3.1-8b-instruct"),
        ));
        assert_eq!(m.edits.len(), 4);
        assert!(matches!(
            m.edits[0],
            Edit::RemoveCall(CallRef {
                message: 2,
                call: 0
            })
        ));
        assert!(matches!(
            m.edits[1],
            Edit::RemoveCall(CallRef {
                message: 2,
                call: 1
            })
        ));
        let Edit::Content(ContentEdit {
            message: 2,
            content: Content::Text(said),
        }) = &m.edits[2]
        else {
            panic!("expected a content edit of message 2: {:?}", m.edits[2])
        };
        assert_eq!(said, "Calling tools: get_weather, get_time.");
        let Edit::Replace(r) = &m.edits[3] else {
            panic!("expected a replace: {:?}", m.edits[3])
        };
        assert_eq!((r.start, r.count), (3, 2));
        assert_eq!(r.message.role, "user");
        assert!(r.message.tool_calls.is_empty() && r.message.tool_call_id.is_none());
        assert_eq!(
            r.message.text(),
            Some("Tool 'get_weather' returned: 18°C, cloudy\nTool 'get_time' returned: 14:05")
        );
        assert_eq!(
            m.reason,
            "for model 'llama-3.1-8b-instruct': folded the 2 parallel tool calls of message 2 \
             and their 2 results (messages 3-4) into one user message"
        );
        assert!(!m.reason.contains("Paris") && !m.reason.contains("14:05"));
    }

    #[test]
    fn other_models_are_left_alone() {
        for model in [
            "llama-3.2-3b",
            "gpt-4o",
            "qwen2.5-7b",
            "meta-llama/llama-3.1",
        ] {
            assert_allow(evaluate(&llama(), &for_model(weather_turn(), model)));
        }
        assert_allow(evaluate(&llama(), &request(Rail::Input, weather_turn())));
        let none = Config::parse(r#"{"models":[]}"#).unwrap();
        assert_allow(evaluate(&none, &for_model(weather_turn(), "llama-3.1-8b")));
        // A pattern with a slash matches served names with an organisation.
        assert!(matches!(
            evaluate(
                &llama(),
                &for_model(weather_turn(), "meta-llama/Meta-Llama-3.1-8B-Instruct")
            ),
            Verdict::Modify(_)
        ));
    }

    #[test]
    fn single_calls_and_unanswered_turns_are_left_alone() {
        let single = vec![
            user("Weather?"),
            assistant_calls(vec![call("c1", "get_weather", "{}")]),
            tool_result("c1", "sunny"),
        ];
        assert_allow(evaluate(&llama(), &for_model(single, "llama-3.1")));
        // Parallel calls not yet answered (no tool messages after them).
        let unanswered = vec![
            user("Weather and time?"),
            assistant_calls(vec![call("c1", "a", "{}"), call("c2", "b", "{}")]),
            user("Never mind."),
        ];
        assert_allow(evaluate(&llama(), &for_model(unanswered, "llama-3.1")));
    }

    #[test]
    fn assistant_text_is_kept() {
        let mut messages = weather_turn();
        messages[2].content = Some(Content::Text("Let me check both.".into()));
        let m = expect_modify(evaluate(&llama(), &for_model(messages, "llama-3.1")));
        assert!(
            !m.edits.iter().any(|e| matches!(e, Edit::Content(_))),
            "{:?}",
            m.edits
        );
        // Whitespace or empty parts are no text.
        let mut messages = weather_turn();
        messages[2].content = Some(Content::Parts(r#"[{"type":"text","text":" "}]"#.into()));
        let m = expect_modify(evaluate(&llama(), &for_model(messages, "llama-3.1")));
        assert!(m.edits.iter().any(|e| matches!(e, Edit::Content(_))));
    }

    #[test]
    fn result_names_and_content_shapes() {
        let mut unmatched = tool_result("zzz", "from a name");
        unmatched.name = Some("lookup".into());
        let mut parts = tool_result("c2", "");
        parts.content = Some(Content::Parts(
            r#"[{"type":"text","text":"line one"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"line two"}]"#.into(),
        ));
        let mut object = tool_result("c3", "");
        object.content = Some(Content::Parts(r#"{"temp":18}"#.into()));
        let mut empty = tool_result("c4", "");
        empty.content = None;
        let anonymous = Message {
            tool_call_id: None,
            ..tool_result("", "anonymous")
        };
        let messages = vec![
            user("go"),
            assistant_calls(vec![
                call("c1", "a", "{}"),
                call("c2", "b", "{}"),
                call("c3", "c", "{}"),
                call("c4", "d", "{}"),
            ]),
            unmatched,
            parts,
            object,
            empty,
            anonymous,
        ];
        let m = expect_modify(evaluate(&llama(), &for_model(messages, "llama-3.1")));
        let Some(Edit::Replace(r)) = m.edits.last() else {
            panic!("expected a replace last")
        };
        assert_eq!((r.start, r.count), (2, 5));
        assert_eq!(
            r.message.text().unwrap(),
            "Tool 'lookup' returned: from a name\n\
             Tool 'b' returned: line one\nline two\n\
             Tool 'c' returned: {\"temp\":18}\n\
             Tool 'd' returned: \n\
             Tool 'tool' returned: anonymous"
        );
        assert!(m
            .reason
            .contains("4 parallel tool calls of message 1 and their 5 results (messages 2-6)"));
    }

    #[test]
    fn several_turns_are_folded_each() {
        let mut messages = weather_turn();
        messages.push(testing::assistant("It is 18°C and 14:05."));
        messages.push(user("And in Rome?"));
        messages.push(assistant_calls(vec![
            call("c3", "get_weather", "{}"),
            call("c4", "get_time", "{}"),
            call("c5", "get_time", "{}"),
        ]));
        messages.push(tool_result("c3", "20°C"));
        let m = expect_modify(evaluate(&llama(), &for_model(messages, "llama-3.1")));
        let replaces: Vec<(u32, u32)> = m
            .edits
            .iter()
            .filter_map(|e| match e {
                Edit::Replace(r) => Some((r.start, r.count)),
                _ => None,
            })
            .collect();
        assert_eq!(replaces, vec![(3, 2), (8, 1)]);
        let removed = m
            .edits
            .iter()
            .filter(|e| matches!(e, Edit::RemoveCall(c) if c.message == 7))
            .count();
        assert_eq!(removed, 3);
        assert!(m.edits.iter().any(|e| matches!(
            e,
            Edit::Content(ContentEdit { message: 7, content: Content::Text(t) })
                if t == "Calling tools: get_weather, get_time, get_time."
        )));
        assert!(
            m.reason.ends_with(
                "; folded the 3 parallel tool calls of message 7 and their 1 result (message 8) \
                 into one user message"
            ),
            "{}",
            m.reason
        );
    }

    #[test]
    fn config() {
        assert!(Config::parse("{}").is_err());
        assert!(Config::parse(r#"{"models":["x"],"other":1}"#).is_err());
        let schema: Value = serde_json::from_str(CONFIG_SCHEMA).unwrap();
        assert_eq!(schema["required"][0], "models");
    }
}
