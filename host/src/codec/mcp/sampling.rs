//! A server's `sampling/createMessage` request: the server asks the client to run its model on
//! a conversation the server wrote. That is text a model reads, so the input rail judges it as a
//! request to a model: the system prompt and the messages as the conversation (each message's
//! content as its parts), every other string of the params as the request's fields.

use crate::codec::closed::{self, Inert, Shape};
use crate::model::{Content, Message, Payload};
use serde_json::{json, Map, Value};

/// The method.
pub const METHOD: &str = "sampling/createMessage";

/// The params' keys: the conversation is mapped; words and numbers are inert; the rest (stop
/// sequences, metadata, tools' descriptions) is judged as fields.
const PARAMS: Shape = Shape {
    mapped: &["messages", "systemPrompt"],
    inert: &[
        ("includeContext", Inert::Word),
        ("modelPreferences.hints[].name", Inert::Word),
        ("toolChoice.mode", Inert::Word),
        ("tools[].name", Inert::Word),
        ("_meta.progressToken", Inert::Id),
    ],
    known: &[],
};

/// The payload the input rail judges.
pub fn payload(params: &Map<String, Value>) -> Payload {
    let mut messages = Vec::new();
    if let Some(Value::String(system)) = params.get("systemPrompt") {
        messages.push(Message::new("system", Some(Content::Text(system.clone()))));
    }
    if let Some(Value::Array(asked)) = params.get("messages") {
        for m in asked {
            let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
            let parts = match m.get("content") {
                Some(Value::Array(blocks)) => Value::Array(blocks.clone()),
                Some(block) => json!([block]),
                None => json!([]),
            };
            messages.push(Message::new(role, Some(Content::Parts(parts))));
        }
    }
    let mut fields = closed::fields(params, &PARAMS);
    // A message's own fields but its role and content (its `_meta`, what a newer revision
    // adds) are the request's fields too, under the message's place.
    if let Some(Value::Array(asked)) = params.get("messages") {
        for (i, m) in asked.iter().enumerate() {
            let Some(obj) = m.as_object() else { continue };
            let rest: Map<String, Value> = obj
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "role" | "content"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for mut f in closed::fields(&rest, &MESSAGE) {
                let sep = if f.path.starts_with('[') { "" } else { "." };
                f.path = format!("messages[{i}]{sep}{}", f.path);
                fields.push(f);
            }
        }
    }
    Payload {
        messages,
        fields,
        ..Payload::default()
    }
}

/// A sampled message's fields beside its role and content: all judged.
const MESSAGE: Shape = Shape {
    mapped: &[],
    inert: &[],
    known: &[],
};

/// Write what the rail left back into `params`: the same conversation, message for message.
pub fn apply(params: &mut Map<String, Value>, judged: &Payload) -> Result<(), String> {
    let mut left = judged.messages.iter();
    let mut next = || {
        left.next()
            .ok_or("a policy removed part of the conversation")
    };
    if let Some(Value::String(system)) = params.get_mut("systemPrompt") {
        *system = text_of(next()?);
    }
    if let Some(Value::Array(asked)) = params.get_mut("messages") {
        for m in asked.iter_mut() {
            let judged = next()?;
            let single = !m.get("content").is_some_and(Value::is_array);
            let blocks = match &judged.content {
                Some(Content::Parts(Value::Array(blocks))) => blocks.clone(),
                Some(Content::Text(text)) => vec![json!({"type": "text", "text": text})],
                _ => return Err("a policy left a message without content".into()),
            };
            m["content"] = match blocks.as_slice() {
                [one] if single => one.clone(),
                _ => Value::Array(blocks),
            };
        }
    }
    if next().is_ok() {
        return Err("a policy added to the conversation".into());
    }
    closed::write_fields(params, &judged.fields);
    Ok(())
}

/// A message's text, its parts' texts joined.
fn text_of(m: &Message) -> String {
    match &m.content {
        Some(Content::Text(t)) => t.clone(),
        Some(Content::Parts(Value::Array(parts))) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
