//! Content blocks: the model's messages written back as Anthropic blocks, and a reply's blocks
//! with the judged message in place.

use crate::model::{Content, Message};
use serde_json::{json, Map, Value};

/// One wire message's content blocks from the model messages that came from it.
pub(super) fn encode_blocks(messages: &[&Message]) -> Value {
    let mut blocks = Vec::new();
    for m in messages {
        if let Some(Value::Array(before)) = m.extra.get(super::BEFORE) {
            blocks.extend(before.iter().cloned());
        }
        if m.role == "tool" {
            let mut b = Map::new();
            b.insert("type".into(), json!("tool_result"));
            b.insert("tool_use_id".into(), json!(m.tool_call_id));
            match &m.content {
                Some(Content::Text(t)) => {
                    b.insert("content".into(), json!(t));
                }
                Some(Content::Parts(p)) => {
                    b.insert("content".into(), p.clone());
                }
                None => {}
            }
            b.extend(m.extra.clone());
            blocks.push(Value::Object(b));
            continue;
        }
        match &m.content {
            Some(Content::Text(t)) => blocks.push(json!({"type": "text", "text": t})),
            Some(Content::Parts(Value::Array(p))) => blocks.extend(p.iter().cloned()),
            Some(Content::Parts(other)) => blocks.push(other.clone()),
            None => {}
        }
        for call in &m.tool_calls {
            let mut b = Map::new();
            b.insert("type".into(), json!("tool_use"));
            b.insert("id".into(), json!(call.id));
            b.insert("name".into(), json!(call.name));
            let input = serde_json::from_str::<Value>(&call.arguments)
                .ok()
                .filter(Value::is_object)
                .unwrap_or(json!({}));
            b.insert("input".into(), input);
            b.extend(call.extra.clone());
            blocks.push(Value::Object(b));
        }
    }
    Value::Array(blocks)
}

/// The reply's blocks with the judged message in place: text blocks replaced in order (or, if a
/// policy replaced the content with text, one block), tool uses kept only if they passed.
pub(super) fn rewrite_content(content: Value, judged: &Message) -> Value {
    let Value::Array(blocks) = content else {
        return content;
    };
    let mut texts: Vec<Value> = match &judged.content {
        Some(Content::Parts(Value::Array(p))) => p.clone(),
        Some(Content::Text(t)) => vec![json!({"type": "text", "text": t})],
        _ => Vec::new(),
    };
    texts.reverse();
    let mut others = match judged.extra.get(super::BEFORE) {
        Some(Value::Array(blocks)) => blocks.clone().into_iter(),
        _ => Vec::new().into_iter(),
    };
    let one_text = matches!(judged.content, Some(Content::Text(_)));
    let mut out = Vec::new();
    let mut placed = false;
    for mut block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if one_text && placed {
                    continue;
                }
                if let Some(t) = texts.pop() {
                    placed = true;
                    out.push(t);
                }
            }
            Some("tool_use") => {
                let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                // The judged call's id may be the daemon's signed form of the model's.
                if let Some(call) = judged
                    .tool_calls
                    .iter()
                    .find(|c| crate::model::model_id(&c.id) == id)
                {
                    if let Ok(input) = serde_json::from_str::<Value>(&call.arguments) {
                        block["input"] = input;
                    }
                    block["id"] = json!(call.id);
                    out.push(block);
                }
            }
            _ => out.push(others.next().unwrap_or(block)),
        }
    }
    if !placed {
        if let Some(t) = texts.pop() {
            out.insert(0, t);
        }
    }
    // Calls a policy added (found written in the text) come after what the model wrote.
    for call in &judged.tool_calls {
        let known = out
            .iter()
            .any(|b| b.get("id").and_then(Value::as_str) == Some(call.id.as_str()));
        if !known {
            let input = serde_json::from_str::<Value>(&call.arguments)
                .ok()
                .filter(Value::is_object)
                .unwrap_or(json!({}));
            out.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
        }
    }
    Value::Array(out)
}
