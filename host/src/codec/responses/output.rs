//! Responses output items: the reply with judged messages in place, and Railyard's own items.

use super::call_kind;
use crate::model::{model_id, Content, Message};
use serde_json::{json, Value};

/// A completed response object with no output yet.
pub(crate) fn response_object(model: Option<&Value>, id: &str) -> Value {
    json!({
        "id": format!("resp_{id}"),
        "object": "response",
        "created_at": crate::util::unix_secs(),
        "status": "completed",
        "model": model.cloned().unwrap_or(Value::Null),
        "output": [],
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "metadata": {},
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": null,
    })
}

/// An assistant message output item with one text part.
pub(crate) fn message_item(id: &str, text: &str) -> Value {
    json!({"type": "message", "id": id, "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// The output items with the judged message in place: text parts replaced in order (or, if a
/// policy replaced the content with text, one part with that text), calls kept only if they
/// passed, with their judged arguments.
pub(super) fn rewrite_output(output: Value, judged: &Message) -> Value {
    let Value::Array(items) = output else {
        return output;
    };
    let mut parts: Vec<Value> = match &judged.content {
        Some(Content::Parts(Value::Array(p))) => p.clone(),
        Some(Content::Text(t)) => {
            vec![json!({"type": "output_text", "text": t, "annotations": []})]
        }
        _ => Vec::new(),
    };
    parts.reverse();
    let mut others = match judged.extra.get(super::ITEMS) {
        Some(Value::Array(items)) => items.clone().into_iter(),
        _ => Vec::new().into_iter(),
    };
    let mut own = match judged.extra.get(super::MESSAGES) {
        Some(Value::Array(fields)) => fields.clone().into_iter(),
        _ => Vec::new().into_iter(),
    };
    let mut out = Vec::new();
    let mut text_placed = false;
    for mut item in items {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                // Its own fields, as the rails left them.
                if let (Some(Value::Object(fields)), Some(obj)) = (own.next(), item.as_object_mut())
                {
                    obj.retain(|k, _| matches!(k.as_str(), "content" | "type"));
                    obj.extend(fields);
                }
                let n = item
                    .get("content")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let take = match &judged.content {
                    Some(Content::Text(_)) if text_placed => 0,
                    Some(Content::Text(_)) => 1,
                    _ => n,
                };
                let mut content: Vec<Value> = (0..take).filter_map(|_| parts.pop()).collect();
                if content.is_empty() {
                    continue;
                }
                // A part's log-probabilities spell out the text the backend wrote (token by
                // token, or as bytes): once a policy changed that text, they go.
                let before = item.get("content").and_then(Value::as_array);
                for (i, part) in content.iter_mut().enumerate() {
                    let was = before.and_then(|b| b.get(i)).and_then(|p| p.get("text"));
                    if part.get("text") != was {
                        if let Some(obj) = part.as_object_mut() {
                            if obj.get("logprobs").is_some_and(|l| !l.is_null()) {
                                obj.insert("logprobs".into(), json!([]));
                            }
                        }
                    }
                }
                text_placed = true;
                item["content"] = Value::Array(content);
                out.push(item);
            }
            Some("function_call") => {
                let call_id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                // The judged call's id may be the daemon's signed form of the model's.
                if let Some(call) = judged
                    .tool_calls
                    .iter()
                    .find(|c| model_id(&c.id) == call_id)
                {
                    // As the rails left it: its arguments, its other fields.
                    let mut item = super::function_item(call);
                    item.insert("call_id".into(), json!(call.id));
                    out.push(Value::Object(item));
                }
            }
            Some("custom_tool_call") => {
                let call_id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                if let Some(call) = judged
                    .tool_calls
                    .iter()
                    .find(|c| c.kind == crate::model::CUSTOM && model_id(&c.id) == call_id)
                {
                    out.push(super::custom_item(call));
                }
            }
            Some(t)
                if call_kind(t, item.as_object().unwrap_or(&serde_json::Map::new())).is_some() =>
            {
                let id = item.get("id").and_then(Value::as_str).unwrap_or("");
                // A hosted call's fields are the item's: written as the rails left them.
                if let Some(call) = judged
                    .tool_calls
                    .iter()
                    .find(|c| c.is_hosted() && model_id(&c.id) == id)
                {
                    // Under the id the daemon signed it with, its arguments as judged.
                    out.push(Value::Object(super::hosted_item(call)));
                }
            }
            // Every other item (reasoning, MCP listings and approvals) rode in the message as
            // the rails judged it: written as they left it, in order.
            _ => out.push(others.next().unwrap_or(item)),
        }
    }
    if !text_placed {
        if let Some(Content::Text(t)) = &judged.content {
            out.push(message_item("msg_railyard", t));
        }
    }
    // Calls a policy added (found written in the text) come after what the model wrote.
    for call in &judged.tool_calls {
        let known = out.iter().any(|i| {
            i.get("call_id").and_then(Value::as_str) == Some(call.id.as_str())
                || i.get("call_id").and_then(Value::as_str) == Some(model_id(&call.id))
                || (call.is_hosted()
                    && i.get("id").and_then(Value::as_str) == Some(call.id.as_str()))
        });
        if !known && call.kind == crate::model::FUNCTION {
            out.push(
                json!({"type": "function_call", "id": format!("fc_{}", model_id(&call.id)),
                "call_id": call.id, "name": call.name, "arguments": call.arguments,
                "status": "completed"}),
            );
        }
    }
    Value::Array(out)
}
