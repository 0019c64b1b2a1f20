//! {{name}}: a Railyard policy plugin that stops denied phrases ("ignore previous instructions",
//! ...) from reaching the model.
//!
//! What it does, for every message whose role is listed in `roles`:
//! - it looks for each phrase in the message's text, ignoring case. The text is the content
//!   string, or the `text` of each content part when the content is a list of parts;
//! - with `"action": "block"`, the first message that contains a phrase blocks the request;
//! - with `"action": "redact"`, every match is replaced by `[redacted]` and the request goes on;
//! - with a `classifier` in the config, each of those messages that a phrase did not block is
//!   then shown to a classifier model the daemon lends the plugin (a guard model, see below); a
//!   message it scores at or above `threshold` for `label` blocks the request, in either action
//!   (a classifier says nothing about where in the text, so there is nothing to redact).
//!
//! Reasons name the message and count the phrases, but never quote them. Reasons end up in logs
//! and decision records, and the phrase list is often something an operator keeps private.
//!
//! Guard models: the daemon's config lists models (`[[guard_models]]`) and grants each plugin
//! entry the ones it may ask (`guard_models = [...]`). The plugin names a model, never a URL; the
//! host talks to it, waits for it without holding up other requests (the call looks synchronous
//! from here), and answers with the model's answer or a `GuardError`. An error is returned as
//! this plugin's error, a fault the entry's `on_error` resolves (block, by default): allowing on
//! an error would let everything through whenever the model is down.
//!
//! Rails: `describe` offers input, tool_result and output; railyard.toml chooses where it runs
//! (input only, by default). On output only the last message (the model's reply) is checked,
//! because the earlier messages were checked on the input rail, and the daemon refuses edits to
//! them on that rail.
//!
//! This plugin has JavaScript and Python twins (`railyard new --lang js|python`) with the same
//! logic and the same tests. If you change the behaviour here, tests/ tells you what the twins
//! expect.

use std::cell::RefCell;

use serde_json::Value;

// Generate Rust types and traits from the contract in wit/policy.wit. This gives us:
// - `exports::railyard::policy::plugin::Guest`, the trait the plugin implements;
// - the shared types (`Request`, `Verdict`, ...) in `railyard::policy::types`;
// - `railyard::policy::host::log`, which writes to the daemon's log;
// - `railyard::policy::guard_models`, the guard models the daemon lends (`classify`, ...);
// - the `export!` macro that wires our type up as the component's export.
wit_bindgen::generate!({
    path: "wit",
    world: "policy",
});

use exports::railyard::policy::plugin::Guest;
use railyard::policy::guard_models::{self, GuardError};
use railyard::policy::types::{
    Content, ContentEdit, Edit, Info, Modification, Rail, Request, Verdict,
};

/// Keep in sync with the names below and with the twins in the other languages.
const PLUGIN_NAME: &str = "{{name}}";

/// What replaces each match when `action` is `redact`.
const REDACTION: &str = "[redacted]";

/// Used when the config has no `phrases`. Examples only: list your own in railyard.toml.
const DEFAULT_PHRASES: &[&str] = &["ignore previous instructions", "reveal your system prompt"];

/// Used when the config has no `roles`: only what the end user typed is checked.
const DEFAULT_ROLES: &[&str] = &["user"];

/// Used when the config's `classifier` has no `label`: the label of an injection.
const DEFAULT_LABEL: &str = "INJECTION";

/// Used when the config's `classifier` has no `threshold`.
const DEFAULT_THRESHOLD: f64 = 0.9;

/// JSON Schema for the config, returned by `describe`. The daemon checks the config against it
/// before `configure` is called, so an operator's typo is reported when the daemon loads the
/// config, with the line in railyard.toml, not when the first request arrives.
const CONFIG_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "deny-phrases plugin config",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "phrases": {
      "description": "Phrases to look for, matched case-insensitively anywhere in the text.",
      "type": "array",
      "items": {"type": "string", "minLength": 1},
      "minItems": 1,
      "default": ["ignore previous instructions", "reveal your system prompt"]
    },
    "action": {
      "description": "block: refuse the request; redact: replace each match with [redacted].",
      "enum": ["block", "redact"],
      "default": "block"
    },
    "roles": {
      "description": "Only messages with one of these roles are checked.",
      "type": "array",
      "items": {"type": "string"},
      "minItems": 1,
      "default": ["user"]
    },
    "classifier": {
      "description": "Also ask this classifier about each checked message no phrase blocked.",
      "type": "object",
      "additionalProperties": false,
      "required": ["model"],
      "properties": {
        "model": {
          "description": "The classifier's [[guard_models]] name, granted in its entry.",
          "type": "string",
          "minLength": 1
        },
        "label": {
          "description": "The label that flags a message, exactly as the model names it.",
          "type": "string",
          "minLength": 1,
          "default": "INJECTION"
        },
        "threshold": {
          "description": "The score (0 to 1) from which the label flags a message.",
          "type": "number",
          "minimum": 0,
          "maximum": 1,
          "default": 0.9
        }
      }
    }
  }
}"#;

/// The config after `configure` has checked it.
struct Config {
    /// The phrases, already lowercased (see [`fold_char`]), without duplicates.
    phrases: Vec<String>,
    /// `true` for `"action": "redact"`, `false` for `"block"`.
    redact: bool,
    /// Roles whose messages are checked.
    roles: Vec<String>,
    /// The classifier to ask, when the config has one.
    classifier: Option<Classifier>,
}

/// The config's `classifier`.
struct Classifier {
    /// The guard model's name in the daemon's config.
    model: String,
    /// The label that flags a message.
    label: String,
    /// Scores arrive as 32-bit floats (`f32` in the contract), so the threshold is kept as one:
    /// a score of exactly 0.9 then reaches a threshold of 0.9 (the twins round it the same way).
    threshold: f32,
}

// The daemon calls `configure` once per instance, then `evaluate` many times, so the parsed
// config is kept between calls. A WebAssembly instance runs on a single thread, so a
// thread-local is all the synchronisation we need.
thread_local! {
    static CONFIG: RefCell<Option<Config>> = const { RefCell::new(None) };
}

/// The plugin. It has no fields: the state lives in `CONFIG`, because the generated trait's
/// functions take no `self`.
struct DenyPhrases;

impl Guest for DenyPhrases {
    fn describe() -> Info {
        Info {
            name: PLUGIN_NAME.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            rails: vec![Rail::Input, Rail::ToolResult, Rail::Output],
            config_schema: Some(CONFIG_SCHEMA.to_string()),
        }
    }

    fn configure(config: String) -> Result<(), String> {
        let parsed = parse_config(&config)?;
        CONFIG.with(|c| *c.borrow_mut() = Some(parsed));
        Ok(())
    }

    /// `Err(message)` is a fault the daemon resolves by the plugin's `on_error` (fail closed by
    /// default); its message reaches the daemon's log and the decision record, so say what went
    /// wrong, never what the request contained. (A panic is a fault too: its message is printed
    /// to stderr, which the daemon captures.)
    fn evaluate(request: Request) -> Result<Verdict, String> {
        CONFIG.with(|c| match c.borrow().as_ref() {
            Some(config) => evaluate(config, &request),
            // The daemon always configures an instance first. Should that ever not happen,
            // refuse rather than let the request through unchecked (fail closed).
            None => Ok(Verdict::Block(format!(
                "plugin '{PLUGIN_NAME}' was evaluated before it was configured"
            ))),
        })
    }
}

export!(DenyPhrases);

/// Checks the config and fills in the defaults. The daemon has already checked it against
/// `CONFIG_SCHEMA`, but a plugin must not trust that: the same component can be run by other
/// hosts, and a clear message here is cheap.
fn parse_config(text: &str) -> Result<Config, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("config is not valid JSON: {e}"))?;
    let Value::Object(fields) = value else {
        return Err("config must be a JSON object".to_string());
    };
    for key in fields.keys() {
        if !matches!(key.as_str(), "phrases" | "action" | "roles" | "classifier") {
            return Err(format!(
                "unknown config field '{key}' (expected phrases, action, roles, classifier)"
            ));
        }
    }

    let phrases = match fields.get("phrases") {
        Some(v) => string_list(v, "phrases")?,
        None => DEFAULT_PHRASES.iter().map(|s| s.to_string()).collect(),
    };
    if phrases.is_empty() {
        return Err("'phrases' must list at least one phrase".to_string());
    }
    let mut folded: Vec<String> = Vec::new();
    for (i, phrase) in phrases.iter().enumerate() {
        if phrase.is_empty() {
            return Err(format!("'phrases[{i}]' must not be empty"));
        }
        // Lowercase once here, so evaluate only has to lowercase the text. Two phrases that
        // differ only in case are the same phrase: keep one, so the counts in reasons are right.
        let phrase = fold(phrase).0;
        if !folded.contains(&phrase) {
            folded.push(phrase);
        }
    }

    let redact = match fields.get("action") {
        None => false,
        Some(Value::String(s)) if s == "block" => false,
        Some(Value::String(s)) if s == "redact" => true,
        Some(_) => return Err("'action' must be \"block\" or \"redact\"".to_string()),
    };

    let roles = match fields.get("roles") {
        Some(v) => string_list(v, "roles")?,
        None => DEFAULT_ROLES.iter().map(|s| s.to_string()).collect(),
    };
    if roles.is_empty() {
        return Err("'roles' must list at least one role".to_string());
    }

    let classifier = match fields.get("classifier") {
        Some(v) => Some(parse_classifier(v)?),
        None => None,
    };

    Ok(Config {
        phrases: folded,
        redact,
        roles,
        classifier,
    })
}

/// The config's `classifier` object.
fn parse_classifier(value: &Value) -> Result<Classifier, String> {
    let Value::Object(fields) = value else {
        return Err("'classifier' must be an object with model, label, threshold".to_string());
    };
    for key in fields.keys() {
        if !matches!(key.as_str(), "model" | "label" | "threshold") {
            return Err(format!(
                "unknown config field 'classifier.{key}' (expected model, label, threshold)"
            ));
        }
    }
    let model = match fields.get("model") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err("'classifier.model' must be a non-empty string".to_string()),
        None => return Err("'classifier.model' is required".to_string()),
    };
    let label = match fields.get("label") {
        None => DEFAULT_LABEL.to_string(),
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err("'classifier.label' must be a non-empty string".to_string()),
    };
    let threshold = match fields.get("threshold") {
        None => DEFAULT_THRESHOLD,
        Some(v) => match v.as_f64() {
            Some(t) if (0.0..=1.0).contains(&t) => t,
            _ => return Err("'classifier.threshold' must be a number from 0 to 1".to_string()),
        },
    };
    Ok(Classifier {
        model,
        label,
        threshold: threshold as f32,
    })
}

/// A JSON array of strings, or an error naming the field (and the item) that is wrong.
fn string_list(value: &Value, field: &str) -> Result<Vec<String>, String> {
    let Value::Array(items) = value else {
        return Err(format!("'{field}' must be a list of strings"));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s.clone()),
            _ => Err(format!("'{field}[{i}]' must be a string")),
        })
        .collect()
}

/// Judges one request: see the top of this file. `Err` is a fault: a guard model that gave no
/// answer.
fn evaluate(config: &Config, request: &Request) -> Result<Verdict, String> {
    // On the output rail the last message is the model's reply; everything before it was
    // already checked on the input rail, and the daemon only accepts edits to the reply there.
    let first = match request.rail {
        Rail::Output => request.messages.len().saturating_sub(1),
        _ => 0,
    };

    let mut edits = Vec::new();
    let mut notes = Vec::new();
    // The messages to show the classifier, with their text as it goes on to the model.
    let mut to_classify: Vec<(usize, String)> = Vec::new();
    for (index, message) in request.messages.iter().enumerate().skip(first) {
        if !config.roles.contains(&message.role) {
            continue;
        }
        // A message can have no content at all (an assistant message with only tool calls).
        let Some(content) = &message.content else {
            continue;
        };
        let redacted = match check_content(config, content) {
            None => None,
            Some((count, _)) if !config.redact => {
                // One offending message is enough to refuse the request: stop here.
                return Ok(Verdict::Block(format!(
                    "found {} in message {index}",
                    phrase_count(count)
                )));
            }
            Some((count, new_content)) => {
                notes.push(format!("{} in message {index}", phrase_count(count)));
                Some(new_content)
            }
        };
        if config.classifier.is_some() {
            if let Some(text) = message_text(redacted.as_ref().unwrap_or(content)) {
                to_classify.push((index, text));
            }
        }
        if let Some(new_content) = redacted {
            edits.push(Edit::Content(ContentEdit {
                message: index as u32,
                content: new_content,
            }));
        }
    }

    // The phrases did not block: ask the classifier, one message at a time (the daemon caches
    // each answer, so a conversation's earlier turns cost nothing the next time).
    if let Some(classifier) = &config.classifier {
        for (index, text) in to_classify {
            if let Some(score) = classify(classifier, text)? {
                return Ok(Verdict::Block(format!(
                    "the classifier '{}' flagged message {index} as {} ({})",
                    classifier.model,
                    classifier.label,
                    two_decimals(score)
                )));
            }
        }
    }

    Ok(if edits.is_empty() {
        Verdict::Allow
    } else {
        Verdict::Modify(Modification {
            edits,
            reason: format!("redacted {}", notes.join(", ")),
        })
    })
}

/// Asks the classifier about one text. Returns the label's score when it reaches the threshold,
/// `None` when it does not (or the model did not give the label at all), and an error, naming
/// the model but never the text, when the model gave no answer.
fn classify(classifier: &Classifier, text: String) -> Result<Option<f32>, String> {
    let model = &classifier.model;
    // Synchronous from here: the host waits for the model without blocking other requests.
    let answer = guard_models::classify(model, &[text])
        .map_err(|e| format!("the classifier '{model}' {}", guard_error(&e)))?;
    // One list of labels per text asked about.
    let [labels] = answer.as_slice() else {
        return Err(format!(
            "the classifier '{model}' answered for {} texts instead of 1",
            answer.len()
        ));
    };
    Ok(labels
        .iter()
        .find(|l| l.label == classifier.label)
        .map(|l| l.score)
        .filter(|score| *score >= classifier.threshold))
}

/// What went wrong with a guard model, to follow its name in an error message.
fn guard_error(error: &GuardError) -> String {
    match error {
        GuardError::Denied(m) => format!("was denied: {m}"),
        GuardError::Timeout => "did not answer in time".to_string(),
        GuardError::BudgetExhausted => "is over the request's budget".to_string(),
        GuardError::RateLimited => "is rate limited".to_string(),
        GuardError::Unavailable(m) => format!("is unavailable: {m}"),
        GuardError::InvalidOutput(m) => format!("answered something unreadable: {m}"),
    }
}

/// A score with two decimals, rounded half up ("0.98"), exactly as the twins print it (each
/// language's own formatting rounds ties such as 0.125 differently).
fn two_decimals(score: f32) -> String {
    let hundredths = (f64::from(score) * 100.0 + 0.5).floor();
    format!("{:.2}", hundredths / 100.0)
}

/// The text of a message's content, as the classifier is shown it: the content string, or the
/// `text` of each text part, one per line. `None` when there is no text (or the parts are not
/// readable).
fn message_text(content: &Content) -> Option<String> {
    let text = match content {
        Content::Text(text) => text.clone(),
        Content::Parts(json) => {
            let Ok(Value::Array(parts)) = serde_json::from_str::<Value>(json) else {
                return None;
            };
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect();
            texts.join("\n")
        }
    };
    (!text.is_empty()).then_some(text)
}

/// "1 denied phrase", "2 denied phrases".
fn phrase_count(count: usize) -> String {
    if count == 1 {
        "1 denied phrase".to_string()
    } else {
        format!("{count} denied phrases")
    }
}

/// Looks for the phrases in one message's content. Returns `None` when none is found, else how
/// many different phrases were found and the content with every match redacted (only used when
/// `action` is `redact`).
fn check_content(config: &Config, content: &Content) -> Option<(usize, Content)> {
    // One flag per phrase: several matches of the same phrase count once.
    let mut found = vec![false; config.phrases.len()];
    let new_content = match content {
        Content::Text(text) => {
            let matches = find_phrases(text, &config.phrases, &mut found);
            Content::Text(redact(text, &matches))
        }
        Content::Parts(json) => {
            // Parts arrive as JSON text, e.g. [{"type": "text", "text": "..."},
            // {"type": "image_url", ...}]. Only the `text` of each part is checked; everything
            // else, including the order of the parts and their other fields, is kept as it is.
            let Ok(Value::Array(mut parts)) = serde_json::from_str::<Value>(json) else {
                return None;
            };
            for part in &mut parts {
                if let Some(Value::String(text)) = part.get_mut("text") {
                    let matches = find_phrases(text, &config.phrases, &mut found);
                    if !matches.is_empty() {
                        *text = redact(text, &matches);
                    }
                }
            }
            Content::Parts(Value::Array(parts).to_string())
        }
    };
    let count = found.iter().filter(|f| **f).count();
    (count > 0).then_some((count, new_content))
}

/// Finds the phrases in `text`, ignoring case. Returns the byte ranges (in `text`) to redact,
/// in order and never overlapping, and sets `found[k]` for every phrase `k` that was matched.
///
/// Where several phrases match, the one that starts first wins, and at the same start the
/// longest wins; the search then goes on after that match. So with the phrases "system prompt"
/// and "reveal your system prompt", the text "reveal your system prompt" is one match of the
/// longer phrase.
fn find_phrases(text: &str, phrases: &[String], found: &mut [bool]) -> Vec<(usize, usize)> {
    let (folded, origin) = fold(text);
    // Lowercasing can change a character's length in bytes (the Kelvin sign "K", 3 bytes,
    // becomes "k", 1 byte), so positions in `folded` are mapped back to positions in `text`.
    let to_text = |i: usize| origin.as_ref().map_or(i, |o| o[i]);

    // next[k]: where phrase k next occurs in `folded` after the last match; None once it no
    // longer occurs. Remembering it means a phrase is searched for again only when a match
    // overlaps its next occurrence, not once per match.
    let find_from = |k: usize, pos: usize| folded[pos..].find(&phrases[k]).map(|i| pos + i);
    let mut next: Vec<Option<usize>> = (0..phrases.len()).map(|k| find_from(k, 0)).collect();
    let mut matches = Vec::new();
    loop {
        // The phrase that occurs first; at the same position, the longest.
        let mut best: Option<(usize, usize)> = None; // (start, phrase index)
        for (k, start) in next.iter().enumerate() {
            let Some(start) = *start else { continue };
            let better = match best {
                None => true,
                Some((best_start, best_k)) => {
                    start < best_start
                        || (start == best_start && phrases[k].len() > phrases[best_k].len())
                }
            };
            if better {
                best = Some((start, k));
            }
        }
        let Some((start, k)) = best else { break };
        let end = start + phrases[k].len();
        found[k] = true;
        matches.push((to_text(start), to_text(end)));
        // Phrases whose next occurrence overlaps this match: look again after it.
        for (k, start) in next.iter_mut().enumerate() {
            if matches!(*start, Some(s) if s < end) {
                *start = find_from(k, end);
            }
        }
    }
    matches
}

/// Replaces each range of `text` (in order, not overlapping) with [`REDACTION`].
fn redact(text: &str, matches: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for &(start, end) in matches {
        out.push_str(&text[last..start]);
        out.push_str(REDACTION);
        last = end;
    }
    out.push_str(&text[last..]);
    out
}

/// Lowercases one character exactly as the JavaScript and Python twins do: the first character
/// of its Unicode lowercase mapping. Taking one character for one keeps positions simple (only
/// "İ" lowercases to two characters). Characters are lowercased one at a time, without
/// context, so "Σ" is always "σ" (never the word-final "ς").
fn fold_char(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

/// Lowercases `text` with [`fold_char`]. When that changes the length in bytes of some
/// character, also returns, for each byte position of the result (and its end), the matching
/// byte position in `text`.
fn fold(text: &str) -> (String, Option<Vec<usize>>) {
    // Fast path for the common case: ASCII text keeps every position.
    if text.is_ascii() {
        return (text.to_ascii_lowercase(), None);
    }
    let mut folded = String::with_capacity(text.len());
    let mut origin = Vec::with_capacity(text.len() + 1);
    for (i, c) in text.char_indices() {
        let f = fold_char(c);
        folded.push(f);
        origin.extend(std::iter::repeat_n(i, f.len_utf8()));
    }
    origin.push(text.len());
    (folded, Some(origin))
}
