//! The verdict on a reply, as plain functions over the SDK types (no host imports) so it is
//! unit-testable natively.
//!
//! Only the last message (the model's reply) is judged; its text is its string content, or the
//! `text` of each of its content parts (each part on its own).
//!
//! - `convert`, the final judgement (`partial = false`): every call's markup is removed from the
//!   text (with the whitespace right after it; a text left with only whitespace becomes `""`) by
//!   one `content` edit, and each call is added to the reply with an `add-call` edit, in order:
//!   kind `function`, id `call_txt_<n>` (the first free n from 1), the name, and the arguments
//!   object serialised.
//! - `convert`, while streaming (`partial = true`): nothing is added yet. The text from the first
//!   call (complete or not, or a marker cut short at the end) to the end is edited out, so the
//!   host holds it back instead of releasing call markup as text; the final judgement sees it
//!   again, whole, and converts it. Holding back everything from the first call, not just the
//!   markup, keeps the host from releasing past a call it would then never show again.
//! - `block`: a recognised call, final or while streaming, blocks the reply; the reason names the
//!   formats, never the arguments. An unfinished call while streaming is held back as in
//!   `convert`, so no markup is released before the verdict.
//!
//! Markup whose JSON does not parse stays text in both modes (see `scan`).

use crate::scan::{scan, Format, Found, Scan};
use railyard_plugin_sdk::{
    AddCallEdit, Content, ContentEdit, Edit, Modification, Request, ToolCall, Verdict, FUNCTION,
};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;

/// JSON Schema of the plugin's config, as given to the host in `describe`.
pub const CONFIG_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "text-tool-calls plugin config",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "mode": {
      "description": "convert (default): turn tool calls written as text into tool calls, judged by the tool_call rail; block: refuse a reply that writes one.",
      "enum": ["convert", "block"]
    }
  }
}"#;

/// What to do with a tool call written as text.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Make it a tool call.
    #[default]
    Convert,
    /// Refuse the reply.
    Block,
}

/// The plugin's config, parsed from the JSON the host validated against [`CONFIG_SCHEMA`].
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub mode: Mode,
}

impl Config {
    /// Parses the config JSON text.
    pub fn parse(text: &str) -> Result<Config, String> {
        serde_json::from_str(text).map_err(|e| format!("invalid text-tool-calls config: {e}"))
    }
}

/// The reply's texts: its string content, or its content parts' `text`s.
enum Texts {
    Text(String),
    /// The parts array, and the indices of the parts with a `text`.
    Parts(Vec<Value>, Vec<usize>),
}

impl Texts {
    fn of(content: &Content) -> Option<Texts> {
        match content {
            Content::Text(t) => Some(Texts::Text(t.clone())),
            Content::Parts(json) => {
                let Ok(Value::Array(parts)) = serde_json::from_str::<Value>(json) else {
                    return None;
                };
                let with_text = (0..parts.len())
                    .filter(|&i| parts[i].get("text").is_some_and(Value::is_string))
                    .collect();
                Some(Texts::Parts(parts, with_text))
            }
        }
    }

    fn list(&self) -> Vec<&str> {
        match self {
            Texts::Text(t) => vec![t.as_str()],
            Texts::Parts(parts, with_text) => with_text
                .iter()
                .filter_map(|&i| parts[i]["text"].as_str())
                .collect(),
        }
    }

    /// The content with the texts replaced (in the order of [`Texts::list`]).
    fn rebuild(self, texts: Vec<String>) -> Content {
        match self {
            Texts::Text(_) => Content::Text(texts.into_iter().next().unwrap_or_default()),
            Texts::Parts(mut parts, with_text) => {
                for (i, text) in with_text.into_iter().zip(texts) {
                    parts[i]["text"] = Value::String(text);
                }
                Content::Parts(Value::Array(parts).to_string())
            }
        }
    }
}

/// Judges the reply (the last message).
pub fn evaluate(config: &Config, request: &Request) -> Verdict {
    let Some(index) = request.last_index() else {
        return Verdict::Allow;
    };
    let reply = &request.messages[index as usize];
    let Some(texts) = reply.content.as_ref().and_then(Texts::of) else {
        return Verdict::Allow;
    };
    let complete = !request.partial;
    let scans: Vec<Scan> = texts.list().iter().map(|t| scan(t, complete)).collect();
    let found: Vec<&Found> = scans.iter().flat_map(|s| &s.calls).collect();
    if config.mode == Mode::Block && !found.is_empty() {
        return Verdict::Block(format!(
            "the reply contains {} written as text ({}); tool calls written as text are blocked \
             by policy",
            count(found.len(), "tool call"),
            formats(found.iter().map(|f| f.format))
        ));
    }
    if request.partial {
        return hold_back(index, texts, &scans);
    }
    if found.is_empty() {
        return Verdict::Allow;
    }
    let new_texts = texts
        .list()
        .iter()
        .zip(&scans)
        .map(|(text, s)| without_calls(text, &s.calls))
        .collect();
    let mut edits = vec![Edit::Content(ContentEdit {
        message: index,
        content: texts.rebuild(new_texts),
    })];
    let mut taken: BTreeSet<&str> = reply.tool_calls.iter().map(|c| c.id.as_str()).collect();
    let mut ids = Vec::new();
    let mut n = 0;
    for _ in &found {
        let id = loop {
            n += 1;
            let id = format!("call_txt_{n}");
            if !taken.contains(id.as_str()) {
                break id;
            }
        };
        ids.push(id);
    }
    for (call, id) in found.iter().zip(&ids) {
        taken.insert(id);
        edits.push(Edit::AddCall(AddCallEdit {
            message: index,
            call: ToolCall {
                id: id.clone(),
                kind: FUNCTION.into(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                provenance: None,
            },
        }));
    }
    let names: Vec<String> = found
        .iter()
        .map(|f| railyard_plugin_sdk::reason::quote(&f.name))
        .collect();
    Verdict::Modify(Modification {
        edits,
        reason: format!(
            "converted {} written as text ({}) into tool calls: {}",
            count(found.len(), "tool call"),
            formats(found.iter().map(|f| f.format)),
            names.join(", ")
        ),
    })
}

/// While streaming: edit out each text from its first call (complete or not) to its end.
fn hold_back(index: u32, texts: Texts, scans: &[Scan]) -> Verdict {
    let list = texts.list();
    let mut changed = false;
    let mut seen: Vec<Option<Format>> = Vec::new();
    let mut held = Vec::with_capacity(list.len());
    for (text, s) in list.iter().zip(scans) {
        let first_call = s.calls.first().map(|f| f.start);
        let unfinished = s.unfinished.map(|(at, _)| at);
        let from = match (first_call, unfinished) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        seen.extend(s.calls.iter().map(|f| Some(f.format)));
        seen.extend(s.unfinished.map(|(_, f)| f));
        match from {
            Some(from) => {
                changed = true;
                held.push(text[..from].to_string());
            }
            None => held.push(text.to_string()),
        }
    }
    if !changed {
        return Verdict::Allow;
    }
    let known: Vec<Format> = seen.iter().flatten().copied().collect();
    let what = if known.is_empty() {
        "text that may begin a tool call written as text".to_string()
    } else {
        format!(
            "text from a tool call written as text ({})",
            formats(known.into_iter())
        )
    };
    Verdict::Modify(Modification {
        edits: vec![Edit::Content(ContentEdit {
            message: index,
            content: texts.rebuild(held),
        })],
        reason: format!("held back {what} until the reply is complete"),
    })
}

/// `text` without the calls' markup (and the whitespace right after each); only whitespace
/// left: `""`; a call at the very end takes the whitespace before it too.
fn without_calls(text: &str, calls: &[Found]) -> String {
    if calls.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for call in calls {
        out.push_str(&text[pos..call.start]);
        pos = call.end + (text[call.end..].len() - text[call.end..].trim_start().len());
    }
    out.push_str(&text[pos..]);
    if out.trim().is_empty() {
        return String::new();
    }
    if pos == text.len() {
        out.truncate(out.trim_end().len());
    }
    out
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The distinct formats, in a fixed order: "Hermes/Qwen <tool_call> markup, ...".
fn formats(found: impl Iterator<Item = Format>) -> String {
    let set: BTreeSet<Format> = found.collect();
    set.iter().map(|f| f.label()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_plugin_sdk::testing::{
        assert_allow, assistant, call, expect_block, expect_modify, request, user,
    };
    use railyard_plugin_sdk::Rail;

    fn reply(text: &str) -> Request {
        request(
            Rail::Output,
            vec![user("weather in Paris?"), assistant(text)],
        )
    }

    fn convert() -> Config {
        Config::default()
    }

    fn block() -> Config {
        Config::parse(r#"{"mode":"block"}"#).unwrap()
    }

    /// The new text and the added calls (id, name, arguments) of a modify.
    fn converted(verdict: Verdict) -> (String, Vec<(String, String, String)>, String) {
        let m = expect_modify(verdict);
        let mut text = None;
        let mut calls = Vec::new();
        for e in &m.edits {
            match e {
                Edit::Content(c) => {
                    assert_eq!(c.message, 1);
                    text = Some(match &c.content {
                        Content::Text(t) => t.clone(),
                        Content::Parts(p) => p.clone(),
                    });
                }
                Edit::AddCall(a) => {
                    assert_eq!(a.message, 1);
                    assert_eq!(a.call.kind, "function");
                    calls.push((
                        a.call.id.clone(),
                        a.call.name.clone(),
                        a.call.arguments.clone(),
                    ));
                }
                other => panic!("unexpected edit {other:?}"),
            }
        }
        (text.expect("a content edit"), calls, m.reason)
    }

    fn c(id: &str, name: &str, arguments: &str) -> (String, String, String) {
        (id.into(), name.into(), arguments.into())
    }

    #[test]
    fn converts_hermes_markup() {
        let (text, calls, reason) = converted(evaluate(
            &convert(),
            &reply(
                "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
            ),
        ));
        assert_eq!(text, "Let me check.");
        assert_eq!(
            calls,
            vec![c("call_txt_1", "get_weather", r#"{"city":"Paris"}"#)]
        );
        assert_eq!(
            reason,
            "converted 1 tool call written as text (Hermes/Qwen <tool_call> markup) into tool \
             calls: 'get_weather'"
        );
        assert!(!reason.contains("Paris"));
    }

    #[test]
    fn converts_each_format() {
        for (text, format) in [
            (
                r#"<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom_id|>"#,
                "Llama 3.1 <|python_tag|> markup",
            ),
            (
                r#"<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}"#,
                "Llama 3.1 <|python_tag|> markup",
            ),
            (
                r#"{"name": "get_weather", "parameters": {"city": "Paris"}}"#,
                "a Llama 3.1 JSON reply",
            ),
            (
                r#"<function=get_weather>{"city": "Paris"}</function>"#,
                "<function=NAME> markup",
            ),
        ] {
            let (new_text, calls, reason) = converted(evaluate(&convert(), &reply(text)));
            assert_eq!(new_text, "", "{text}");
            assert_eq!(
                calls,
                vec![c("call_txt_1", "get_weather", r#"{"city":"Paris"}"#)],
                "{text}"
            );
            assert!(reason.contains(format), "{reason}");
        }
    }

    #[test]
    fn several_calls_keep_their_order_and_the_text_around() {
        let text = "I'll get both.\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>\n<tool_call>{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\"}}</tool_call>\nOne moment.";
        let (new_text, calls, reason) = converted(evaluate(&convert(), &reply(text)));
        assert_eq!(new_text, "I'll get both.\nOne moment.");
        assert_eq!(
            calls,
            vec![
                c("call_txt_1", "get_weather", r#"{"city":"Paris"}"#),
                c("call_txt_2", "get_time", r#"{"tz":"Europe/Paris"}"#),
            ]
        );
        assert!(reason.starts_with("converted 2 tool calls"), "{reason}");
        assert!(reason.ends_with("'get_weather', 'get_time'"), "{reason}");
    }

    #[test]
    fn ids_do_not_collide_with_the_replys_own_calls() {
        let mut req = reply(r#"<tool_call>{"name":"b"}</tool_call>"#);
        req.messages[1].tool_calls = vec![call("call_txt_1", "a", "{}")];
        let (_, calls, _) = converted(evaluate(&convert(), &req));
        assert_eq!(calls, vec![c("call_txt_2", "b", "{}")]);
    }

    #[test]
    fn malformed_markup_and_plain_replies_are_left_as_text() {
        for text in [
            r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Paris",}}</tool_call>"#,
            "Use <tool_call> tags to call a tool.",
            "The weather in Paris is 18°C.",
            r#"{"city": "Paris", "temp": 18}"#,
            r#"Here it is: {"name": "get_weather", "parameters": {}}"#,
        ] {
            assert_allow(evaluate(&convert(), &reply(text)));
        }
        let empty = request(Rail::Output, vec![]);
        assert_allow(evaluate(&convert(), &empty));
        let mut no_content = reply("");
        no_content.messages[1].content = None;
        assert_allow(evaluate(&convert(), &no_content));
    }

    #[test]
    fn content_parts_are_converted_part_by_part() {
        let mut req = reply("");
        req.messages[1].content = Some(Content::Parts(
            r#"[{"type":"text","text":"Checking. <function=get_time>{\"tz\":\"UTC\"}</function>"},{"type":"image_url","image_url":{"url":"x"}}]"#.into(),
        ));
        let (text, calls, _) = converted(evaluate(&convert(), &req));
        assert_eq!(
            text,
            r#"[{"type":"text","text":"Checking."},{"type":"image_url","image_url":{"url":"x"}}]"#
        );
        assert_eq!(calls, vec![c("call_txt_1", "get_time", r#"{"tz":"UTC"}"#)]);
    }

    // --- while streaming ---

    fn partial(text: &str) -> Request {
        reply(text).partial()
    }

    fn held(verdict: Verdict) -> (String, String) {
        let m = expect_modify(verdict);
        let [Edit::Content(ContentEdit {
            message: 1,
            content: Content::Text(t),
        })] = m.edits.as_slice()
        else {
            panic!("expected one content edit of the reply: {:?}", m.edits)
        };
        (t.clone(), m.reason)
    }

    #[test]
    fn streaming_holds_back_from_the_first_call_and_adds_nothing() {
        // A complete call, text after it, and an unfinished one.
        let text = "Sure. <tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call> and then <tool_call>{\"name\": \"b\", \"argu";
        let (kept, reason) = held(evaluate(&convert(), &partial(text)));
        assert_eq!(kept, "Sure. ");
        assert_eq!(
            reason,
            "held back text from a tool call written as text (Hermes/Qwen <tool_call> markup) \
             until the reply is complete"
        );
        for (text, kept) in [
            (r#"Sure. <tool_call>{"name": "x", "argu"#, "Sure. "),
            (r#"<|python_tag|>{"name": "x", "parameters": {"#, ""),
            ("Let me see <function=get_wea", "Let me see "),
            ("Let me see <tool_", "Let me see "),
            (r#"{"name": "get_weather", "#, ""),
        ] {
            assert_eq!(held(evaluate(&convert(), &partial(text))).0, kept, "{text}");
        }
        let (_, reason) = held(evaluate(&convert(), &partial("Hmm <")));
        assert_eq!(
            reason,
            "held back text that may begin a tool call written as text until the reply is complete"
        );
        // Nothing that looks like a call: nothing to hold.
        assert_allow(evaluate(
            &convert(),
            &partial("The weather is fine. 3 < 4."),
        ));
        assert_allow(evaluate(
            &convert(),
            &partial("<tool_call>not json</tool_call> and more"),
        ));
    }

    #[test]
    fn streaming_then_final_converts() {
        let first = "Checking now. <tool_call>{\"name\": \"get_weather\", \"arg";
        let whole = format!("{first}uments\": {{\"city\": \"Paris\"}}}}</tool_call>");
        assert_eq!(
            held(evaluate(&convert(), &partial(first))).0,
            "Checking now. "
        );
        assert_eq!(
            held(evaluate(&convert(), &partial(&whole))).0,
            "Checking now. "
        );
        let (text, calls, _) = converted(evaluate(&convert(), &reply(&whole)));
        assert_eq!(text, "Checking now.");
        assert_eq!(
            calls,
            vec![c("call_txt_1", "get_weather", r#"{"city":"Paris"}"#)]
        );
    }

    // --- block ---

    #[test]
    fn block_mode_blocks_naming_the_format_not_the_arguments() {
        let text = r#"<tool_call>{"name": "transfer", "arguments": {"to": "DE89370400440532013000"}}</tool_call> <function=f>{}</function>"#;
        let reason = expect_block(evaluate(&block(), &reply(text)));
        assert_eq!(
            reason,
            "the reply contains 2 tool calls written as text (Hermes/Qwen <tool_call> markup, \
             <function=NAME> markup); tool calls written as text are blocked by policy"
        );
        assert!(!reason.contains("DE89") && !reason.contains("transfer"));
        // While streaming too, as soon as a call is complete.
        assert!(expect_block(evaluate(&block(), &partial(text))).contains("2 tool calls"));
        // An unfinished one is held back until it is known.
        assert_eq!(
            held(evaluate(&block(), &partial("ok <tool_call>{\"na"))).0,
            "ok "
        );
        assert_allow(evaluate(&block(), &reply("no calls here")));
        assert_allow(evaluate(
            &block(),
            &reply(r#"<tool_call>{"name": broken}</tool_call>"#),
        ));
    }

    #[test]
    fn config() {
        assert_eq!(Config::parse("{}").unwrap().mode, Mode::Convert);
        assert_eq!(
            Config::parse(r#"{"mode":"block"}"#).unwrap().mode,
            Mode::Block
        );
        assert!(Config::parse(r#"{"mode":"warn"}"#).is_err());
        assert!(Config::parse(r#"{"other":1}"#).is_err());
        let schema: Value = serde_json::from_str(CONFIG_SCHEMA).unwrap();
        assert_eq!(schema["additionalProperties"], false);
    }

    /// The host skips this plugin on a finished reply holding none of [`crate::scan::TRIGGERS`]
    /// (the plugin's `triggers`): it must then allow every such reply. Every call text the
    /// tests convert, and each of them with one character taken out, replaced or doubled
    /// anywhere (markers broken, braces gone, keys misspelt), in both modes: whatever is not
    /// allowed holds a trigger.
    #[test]
    fn a_reply_without_triggers_is_allowed() {
        let seeds = [
            r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#,
            r#"<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom_id|>"#,
            r#"  {"name": "get_weather", "parameters": {"city": "Paris"}, "type": "function"} "#,
            r#"<function=get_weather>{"city": "Paris"}</function>"#,
            "Sure.\n<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>",
            r#"<function=f></function>"#,
            "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
        ];
        let mut texts = Vec::new();
        for seed in seeds {
            let chars: Vec<char> = seed.chars().collect();
            texts.push(seed.to_string());
            for i in 0..chars.len() {
                let mut cut = chars.clone();
                let c = cut.remove(i);
                texts.push(cut.iter().collect());
                let mut doubled = chars.clone();
                doubled.insert(i, c);
                texts.push(doubled.iter().collect());
                for other in ['{', '<', ' ', 'X', '\u{ff1c}'] {
                    let mut swapped = chars.clone();
                    swapped[i] = other;
                    texts.push(swapped.iter().collect());
                }
            }
        }
        let (mut acted, mut without) = (0, 0);
        for text in &texts {
            let has_trigger = crate::scan::TRIGGERS.iter().any(|t| text.contains(t));
            without += usize::from(!has_trigger);
            for config in [convert(), block()] {
                let verdict = evaluate(&config, &reply(text));
                if !matches!(verdict, Verdict::Allow) {
                    acted += 1;
                    assert!(has_trigger, "acted on a reply without a trigger: {text:?}");
                }
            }
        }
        // The test means something: many texts acted on, many without a trigger.
        assert!(
            acted > 1000 && without > 40,
            "{acted} acted on, {without} without"
        );
    }

    #[test]
    fn without_calls_trims_only_around_calls() {
        let m = |text: &str| {
            let s = scan(text, true);
            without_calls(text, &s.calls)
        };
        assert_eq!(m("  <function=f>{}</function>  "), "");
        assert_eq!(m("a <function=f>{}</function> b"), "a b");
        assert_eq!(m(" a\n<function=f>{}</function>\n"), " a");
        assert_eq!(m("no calls  "), "no calls  ");
    }
}
