//! A server's `elicitation/create` request: the server asks the client to show its user a
//! message (and a form of what to ask). That is text a person reads from the server, so the
//! output rail judges it as a reply: the message and the form's other strings as text parts of
//! one message, each part after the first naming the field it came from.

use crate::codec::closed::{self, Inert, Shape};
use crate::model::{Content, Field, Message, Payload};
use serde_json::{json, Map, Value};

/// The method.
pub const METHOD: &str = "elicitation/create";

/// The params' keys: the message is mapped; the form's words and ids are inert; the rest (its
/// titles, descriptions, choices) is judged.
const PARAMS: Shape = Shape {
    mapped: &["message"],
    inert: &[
        ("mode", Inert::Word),
        ("elicitationId", Inert::Id),
        ("url", Inert::Id),
        ("requestedSchema.type", Inert::Word),
        ("requestedSchema.required[]", Inert::Word),
        ("requestedSchema.properties.*.type", Inert::Word),
        ("requestedSchema.properties.*.format", Inert::Word),
        ("_meta.progressToken", Inert::Id),
    ],
    known: &[],
};

/// The payload the output rail judges: one message, the server's.
pub fn payload(params: &Map<String, Value>) -> Payload {
    let message = params.get("message").and_then(Value::as_str).unwrap_or("");
    let mut parts = vec![json!({"type": "text", "text": message})];
    parts.extend(
        closed::fields(params, &PARAMS)
            .into_iter()
            .map(|f| json!({"type": "text", "text": f.value, "field": f.path})),
    );
    Payload {
        messages: vec![Message::reply(
            Some(Content::Parts(Value::Array(parts))),
            Vec::new(),
        )],
        ..Payload::default()
    }
}

/// Write what the rail left back into `params`.
pub fn apply(params: &mut Map<String, Value>, judged: &Payload) -> Result<(), String> {
    let parts = match judged.messages.as_slice() {
        [m] => match &m.content {
            Some(Content::Parts(Value::Array(parts))) => parts.clone(),
            Some(Content::Text(text)) => vec![json!({"type": "text", "text": text})],
            _ => return Err("a policy left the message without content".into()),
        },
        _ => return Err("a policy removed the message".into()),
    };
    let mut parts = parts.into_iter();
    let first = parts.next().ok_or("a policy left the message empty")?;
    if params.get("message").is_some_and(Value::is_string) {
        params.insert("message".into(), first["text"].clone());
    }
    // Each part after the first is the field it was made of, in order (its `field` names the
    // place for a policy to read; a policy may have edited that label too).
    let places = closed::fields(params, &PARAMS);
    let rest: Vec<Value> = parts.collect();
    if rest.len() != places.len() {
        return Err("a policy added or removed a part of the form".into());
    }
    let mut fields = Vec::with_capacity(places.len());
    for (place, part) in places.into_iter().zip(rest) {
        let Some(text) = part.get("text").and_then(Value::as_str) else {
            return Err("a policy left a part of the form without its text".into());
        };
        fields.push(Field {
            path: place.path,
            value: text.to_string(),
        });
    }
    closed::write_fields(params, &fields);
    Ok(())
}
