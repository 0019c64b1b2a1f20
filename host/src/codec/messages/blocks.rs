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
        if super::server_result(m) {
            // A server tool's result, in its own block type.
            let mut b = m.extra.clone();
            let kind = b.remove(super::BLOCK).unwrap_or(json!("tool_result"));
            let mut block = Map::new();
            block.insert("type".into(), kind);
            block.insert("tool_use_id".into(), json!(m.tool_call_id));
            block.extend(b);
            blocks.push(Value::Object(block));
            continue;
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
            blocks.push(Value::Object(super::call_block(call)));
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
    // The judged call answering a model's call id (its id may be the daemon's signed form).
    let judged_call = |id: &str| {
        judged
            .tool_calls
            .iter()
            .find(|c| crate::model::model_id(&c.id) == id)
    };
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
            Some("tool_use" | "server_tool_use" | "mcp_tool_use") => {
                let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                if let Some(call) = judged_call(id) {
                    if let Ok(input) = serde_json::from_str::<Value>(&call.arguments) {
                        block["input"] = input;
                    }
                    block["id"] = json!(call.id);
                    // Its other fields (its caller, an MCP tool's server), as the rails left them.
                    if let Some(obj) = block.as_object_mut() {
                        obj.retain(|k, _| matches!(k.as_str(), "type" | "id" | "name" | "input"));
                        obj.extend(call.extra.clone());
                    }
                    out.push(block);
                }
            }
            _ => {
                let mut block = others.next().unwrap_or(block);
                // A server tool's result goes with its call: under its signed id, or not at all
                // when a policy removed the call.
                let answers = block
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if let Some(id) = answers {
                    match judged_call(&id) {
                        Some(call) => block["tool_use_id"] = json!(call.id),
                        None => continue,
                    }
                }
                out.push(block);
            }
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
