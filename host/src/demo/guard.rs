//! The demo backend's scripted guard models, one for each kind, each speaking its kind's wire
//! format: enough for the quick start to show a content-safety block without a model server.
//! Their rules are a few words, nothing like a real guard's judgement.

use axum::extract::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// Words the scripted safety guards call unsafe, with the category each falls in (Llama Guard
/// 3's codes; the moderation's names).
const UNSAFE: &[(&str, &str, &str)] = &[
    ("bomb", "S1", "violence"),
    ("kill", "S1", "violence"),
    ("launder", "S2", "illicit"),
    ("self-harm", "S11", "self-harm"),
];

/// Phrases the scripted classifier calls an injection.
const INJECTIONS: &[&str] = &[
    "ignore previous instructions",
    "ignore all previous instructions",
    "disregard your instructions",
];

fn flagged(text: &str) -> Vec<(&'static str, &'static str)> {
    let lower = text.to_lowercase();
    let mut out: Vec<(&str, &str)> = Vec::new();
    for (word, code, name) in UNSAFE {
        if lower.contains(word) && !out.iter().any(|(c, _)| c == code) {
            out.push((code, name));
        }
    }
    out
}

fn completion(content: String) -> Response {
    Json(json!({
        "id": super::reply_id("chatcmpl-guard-"), "object": "chat.completion", "created": super::now(),
        "model": "demo-guard",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    }))
    .into_response()
}

/// The last message's text.
fn last_text(body: &Value) -> String {
    super::text_of(&super::last_message(body)["content"])
}

/// Llama Guard on a chat endpoint: `safe`, or `unsafe` and the categories' codes.
pub(super) async fn llama_guard(Json(body): Json<Value>) -> Response {
    let found = flagged(&last_text(&body));
    completion(match found.is_empty() {
        true => "safe".into(),
        false => format!(
            "unsafe\n{}",
            found.iter().map(|(c, _)| *c).collect::<Vec<_>>().join(",")
        ),
    })
}

/// NemoGuard content safety: its JSON verdict on the conversation in the prompt.
pub(super) async fn nemoguard(Json(body): Json<Value>) -> Response {
    let prompt = last_text(&body);
    // The conversation sits between the markers; the agent's turn is after `response: agent:`.
    let conversation = prompt
        .split("<BEGIN CONVERSATION>")
        .nth(1)
        .and_then(|c| c.split("<END CONVERSATION>").next())
        .unwrap_or("");
    let (user, agent) = match conversation.rsplit_once("response: agent:") {
        Some((u, a)) => (u, Some(a)),
        None => (conversation, None),
    };
    let rating = |t: &str| {
        if flagged(t).is_empty() {
            "safe"
        } else {
            "unsafe"
        }
    };
    let mut verdict = json!({"User Safety": rating(user)});
    let mut named: Vec<&str> = flagged(user).iter().map(|(_, n)| *n).collect();
    if let Some(agent) = agent {
        verdict["Response Safety"] = json!(rating(agent));
        named.extend(flagged(agent).iter().map(|(_, n)| *n));
    }
    if !named.is_empty() {
        named.dedup();
        verdict["Safety Categories"] = json!(named.join(", "));
    }
    completion(verdict.to_string())
}

/// OpenAI's moderations.
pub(super) async fn moderation(Json(body): Json<Value>) -> Response {
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().map(super::text_of).collect(),
        _ => Vec::new(),
    };
    let results: Vec<Value> = inputs
        .iter()
        .map(|t| {
            let found = flagged(t);
            let mut categories = serde_json::Map::new();
            let mut scores = serde_json::Map::new();
            for (_, _, name) in UNSAFE {
                let on = found.iter().any(|(_, n)| n == name);
                categories.insert((*name).into(), json!(on));
                scores.insert((*name).into(), json!(if on { 0.97 } else { 0.001 }));
            }
            json!({"flagged": !found.is_empty(), "categories": categories, "category_scores": scores})
        })
        .collect();
    Json(json!({"id": super::reply_id("modr-demo-"), "model": "demo-moderation", "results": results}))
        .into_response()
}

/// A text classifier (TEI `/predict`): `INJECTION` or `SAFE` for each input.
pub(super) async fn classifier(Json(body): Json<Value>) -> Response {
    let inputs: Vec<String> = match &body["inputs"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().map(super::text_of).collect(),
        _ => Vec::new(),
    };
    let out: Vec<Value> = inputs
        .iter()
        .map(|t| {
            let lower = t.to_lowercase();
            let injection = INJECTIONS.iter().any(|p| lower.contains(p));
            let p = if injection { 0.99 } else { 0.01 };
            json!([{"label": "INJECTION", "score": p}, {"label": "SAFE", "score": 1.0 - p}])
        })
        .collect();
    Json(Value::Array(out)).into_response()
}

/// A named-entity service (Presidio's `/analyze`): the two words after "my name is" as a
/// `PERSON`, in characters as Presidio counts them.
pub(super) async fn entities(Json(body): Json<Value>) -> Response {
    let text = body["text"].as_str().unwrap_or("");
    let lower = text.to_lowercase();
    let mut out = Vec::new();
    let marker = "my name is ";
    let mut from = 0;
    while let Some(at) = lower[from..].find(marker) {
        let start = from + at + marker.len();
        let words: Vec<(usize, &str)> = text[start..]
            .split_whitespace()
            .take(2)
            .map(|w| (w.as_ptr() as usize - text.as_ptr() as usize, w))
            .collect();
        if let (Some(first), Some(last)) = (words.first(), words.last()) {
            let end = last.0
                + last
                    .1
                    .trim_end_matches(|c: char| !c.is_alphanumeric())
                    .len();
            let chars = |b: usize| text[..b].chars().count();
            out.push(json!({"entity_type": "PERSON", "start": chars(first.0), "end": chars(end), "score": 0.85}));
        }
        from = start;
    }
    Json(Value::Array(out)).into_response()
}

/// A judge on a chat endpoint: the smallest JSON value its `response_format` schema allows, its
/// booleans `true` when the input holds one of the scripted guards' unsafe words or injection
/// phrases (a judge asked "is this unsafe?" answers yes), else `false`.
pub(super) async fn judge(Json(body): Json<Value>) -> Response {
    let input = last_text(&body).to_lowercase();
    let yes = !flagged(&input).is_empty() || INJECTIONS.iter().any(|p| input.contains(p));
    let schema = &body["response_format"]["json_schema"]["schema"];
    completion(instance(schema, yes, 0).to_string())
}

/// A value `schema` allows: its `const`, its first `enum` value, or the least value of its type
/// (`yes` for booleans), an object with its required properties.
fn instance(schema: &Value, yes: bool, depth: u8) -> Value {
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    let ty = match &schema["type"] {
        Value::String(t) => t.as_str(),
        Value::Array(ts) => ts.first().and_then(Value::as_str).unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "null",
    };
    match ty {
        "boolean" => Value::Bool(yes),
        "integer" | "number" => schema.get("minimum").cloned().unwrap_or(json!(0)),
        "string" => json!("x".repeat(schema["minLength"].as_u64().unwrap_or(0) as usize)),
        "array" if depth < 8 => {
            let n = schema["minItems"].as_u64().unwrap_or(0).min(8) as usize;
            Value::Array(vec![instance(&schema["items"], yes, depth + 1); n])
        }
        "object" if depth < 8 => {
            let mut out = serde_json::Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                if let Some(name) = name.as_str() {
                    out.insert(
                        name.to_string(),
                        instance(&schema["properties"][name], yes, depth + 1),
                    );
                }
            }
            Value::Object(out)
        }
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_answers_what_the_schema_allows() {
        let schema = json!({
            "type": "object",
            "required": ["unsafe", "category", "score", "reasons"],
            "properties": {
                "unsafe": {"type": "boolean"},
                "category": {"enum": ["none", "violence"]},
                "score": {"type": "number", "minimum": 0, "maximum": 1},
                "reasons": {"type": "array", "items": {"type": "string", "minLength": 2}, "minItems": 1},
                "note": {"type": "string"}
            },
            "additionalProperties": false
        });
        let validator = jsonschema::validator_for(&schema).unwrap();
        for yes in [true, false] {
            let v = instance(&schema, yes, 0);
            assert!(validator.is_valid(&v), "{v}");
            assert_eq!(v["unsafe"], yes);
        }
    }
}
