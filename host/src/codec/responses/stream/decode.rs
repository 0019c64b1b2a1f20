//! Backend events → neutral ones.

use super::{part_key, PartState, ResponsesStream};
use crate::codec::responses::hosted_kind;
use crate::codec::sse::SseEvent;
use crate::codec::stream::{Frame, Up};
use crate::model::FUNCTION;
use serde_json::{Map, Value};

impl ResponsesStream {
    /// Decode one backend event (see the module docs for what is held and what passes).
    pub(super) fn decode_event(&mut self, event: SseEvent) -> Result<Vec<Up>, String> {
        let Ok(Value::Object(data)) = serde_json::from_str::<Value>(&event.data) else {
            return Err("an event that is not a JSON object".into());
        };
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("")
            .to_string();
        let output = data
            .get("output_index")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let content = data
            .get("content_index")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let pass = |data: Map<String, Value>| {
            Up::Pass(Frame {
                event: None,
                data: Value::Object(data),
            })
        };
        Ok(match kind.as_str() {
            "response.output_item.added" | "response.output_item.done" => {
                let item = data.get("item").cloned().unwrap_or_default();
                let t = item.get("type").and_then(Value::as_str).unwrap_or("");
                if t == "function_call" || hosted_kind(t).is_some() {
                    if let Some(id) = item.get("id").and_then(Value::as_str) {
                        self.held_items.insert(id.to_string());
                    }
                    if kind.ends_with(".done") {
                        return Ok(Vec::new());
                    }
                    let mut extra = item.as_object().cloned().unwrap_or_default();
                    let function = t == "function_call";
                    let mut take = |k: &str| {
                        if function {
                            extra.remove(k).and_then(|v| v.as_str().map(str::to_string))
                        } else {
                            None
                        }
                    };
                    let (id, name, arguments) = (take("call_id"), take("name"), take("arguments"));
                    extra.remove("status");
                    let id = if function {
                        id
                    } else {
                        item.get("id").and_then(Value::as_str).map(str::to_string)
                    };
                    let kind = if function {
                        FUNCTION.to_string()
                    } else {
                        hosted_kind(t).unwrap_or(t).to_string()
                    };
                    vec![Up::Call {
                        choice: 0,
                        index: output,
                        id,
                        name,
                        kind: Some(kind),
                        arguments: arguments.unwrap_or_default(),
                        extra,
                    }]
                } else {
                    if t == "message" {
                        let id = item.get("id").and_then(Value::as_str).unwrap_or("");
                        let parts = item
                            .get("content")
                            .and_then(Value::as_array)
                            .map_or(0, Vec::len);
                        for ci in 0..parts.max(1) as u64 {
                            self.parts.entry(part_key(output, ci)).or_insert(PartState {
                                item_id: id.to_string(),
                                output_index: 0,
                                content_index: ci,
                                text: String::new(),
                                synthetic: false,
                            });
                        }
                    }
                    vec![pass(data)]
                }
            }
            "response.content_part.added" => {
                let id = data.get("item_id").and_then(Value::as_str).unwrap_or("");
                self.parts
                    .entry(part_key(output, content))
                    .or_insert(PartState {
                        item_id: id.to_string(),
                        output_index: 0,
                        content_index: content,
                        text: String::new(),
                        synthetic: false,
                    });
                vec![pass(data)]
            }
            "response.output_text.delta" => vec![Up::Text {
                choice: 0,
                part: part_key(output, content),
                text: data
                    .get("delta")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            }],
            "response.output_text.done" => vec![Up::PartEnd {
                choice: 0,
                part: part_key(output, content),
            }],
            "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
                if kind.ends_with(".done") {
                    return Ok(Vec::new());
                }
                vec![Up::Call {
                    choice: 0,
                    index: output,
                    id: None,
                    name: None,
                    kind: None,
                    arguments: data
                        .get("delta")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    extra: Map::new(),
                }]
            }
            "response.completed" | "response.incomplete" => {
                self.completed = data.get("response").cloned();
                vec![
                    Up::ChoiceEnd {
                        choice: 0,
                        finish: None,
                    },
                    Up::Done,
                ]
            }
            "response.failed" | "error" => vec![Up::Error(Frame {
                event: Some(kind),
                data: Value::Object(data),
            })],
            _ => {
                let held = data
                    .get("item_id")
                    .and_then(Value::as_str)
                    .is_some_and(|id| self.held_items.contains(id));
                if held {
                    // Progress of a call the client sees only once the rails have judged it.
                    return Ok(Vec::new());
                }
                vec![pass(data)]
            }
        })
    }
}
