//! Backend events → neutral ones.

use super::{part_key, text_lists, PartState, ResponsesStream, TextKind, EVENT};
use crate::codec::responses::{call_kind, custom_call, hosted_call, namespaced};
use crate::codec::sse::SseEvent;
use crate::codec::stream::{Frame, Up};
use crate::model::{CUSTOM, FUNCTION};
use serde_json::{Map, Value};

/// A lifecycle event's response object, to be judged as a reply's own fields are, its output
/// left out (the codec writes it); the event's kind rides as the frame's event name.
fn lifecycle(kind: String, mut data: Map<String, Value>) -> Up {
    let mut response = data
        .remove("response")
        .unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(output) = response.get_mut("output") {
        *output = Value::Array(Vec::new());
    }
    Up::Judge {
        frame: Frame {
            event: Some(kind),
            data: response,
        },
        shape: &crate::codec::responses::REPLY,
    }
}

/// The text events: their kind, and whether the event ends the part.
fn text_event(kind: &str) -> Option<(TextKind, bool)> {
    Some(match kind {
        "response.output_text.delta" => (TextKind::Output, false),
        "response.output_text.done" => (TextKind::Output, true),
        "response.refusal.delta" => (TextKind::Refusal, false),
        "response.refusal.done" => (TextKind::Refusal, true),
        "response.reasoning_summary_text.delta" => (TextKind::Summary, false),
        "response.reasoning_summary_text.done" => (TextKind::Summary, true),
        "response.reasoning_text.delta" => (TextKind::Reasoning, false),
        "response.reasoning_text.done" => (TextKind::Reasoning, true),
        "response.audio.transcript.delta" => (TextKind::Transcript, false),
        "response.audio.transcript.done" => (TextKind::Transcript, true),
        _ => return None,
    })
}

impl ResponsesStream {
    /// The state of the part of `kind` at (`output`, `index`) of item `id`, made if new.
    fn part(&mut self, kind: TextKind, output: u64, index: u64, id: &str) -> &mut PartState {
        self.parts
            .entry(part_key(kind, output, index))
            .or_insert_with(|| PartState {
                kind,
                item_id: id.to_string(),
                output_index: 0,
                content_index: index,
                text: String::new(),
                streamed: false,
                synthetic: false,
                closed: false,
            })
    }

    /// The texts an item carries that never streamed (a backend that sends an item whole):
    /// streamed from it, so they are judged and sent like the rest, before the item.
    fn unstreamed(&mut self, item: &Value, output: u64, up: &mut Vec<Up>) {
        let id = item.get("id").and_then(Value::as_str).unwrap_or("");
        for &(key, kind) in text_lists(item.get("type").and_then(Value::as_str)) {
            let Some(Value::Array(list)) = item.get(key) else {
                continue;
            };
            for (i, entry) in list.iter().enumerate() {
                let kind = match entry.get("type").and_then(Value::as_str) {
                    Some("refusal") => TextKind::Refusal,
                    _ => kind,
                };
                let Some(text) = entry.get(kind.text_key()).and_then(Value::as_str) else {
                    continue;
                };
                let state = self.part(kind, output, i as u64, id);
                if state.streamed || text.is_empty() {
                    continue;
                }
                state.streamed = true;
                let part = part_key(kind, output, i as u64);
                up.push(Up::Text {
                    choice: 0,
                    part,
                    text: text.to_string(),
                });
                up.push(Up::PartEnd { choice: 0, part });
            }
        }
    }

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
        let judge = |data: Map<String, Value>| Up::Judge {
            frame: Frame {
                event: None,
                data: Value::Object(data),
            },
            shape: &EVENT,
        };
        // What the codec writes again from its own state (an item's id, the indices of a text)
        // must be what it claims: an id, a count. Else the stream ends.
        if let Some(id) = data.get("item_id").filter(|v| !v.is_null()) {
            let id = id.as_str().unwrap_or("\u{0}");
            if !id.is_empty() && !crate::codec::closed::Inert::Id.holds(id) {
                return Err("an event's item_id is not an id".into());
            }
        }
        for key in [
            "output_index",
            "content_index",
            "summary_index",
            "sequence_number",
        ] {
            if let Some(Value::Number(n)) = data.get(key) {
                if crate::codec::closed::number_carries(n) {
                    return Err(format!("an event's {key} is not an index"));
                }
            }
        }
        if let Some((text_kind, end)) = text_event(&kind) {
            let index = data
                .get(text_kind.index_key())
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let (output, index) = match text_kind {
                TextKind::Transcript => (0, 0),
                _ => (output, index),
            };
            let id = data.get("item_id").and_then(Value::as_str).unwrap_or("");
            let part = part_key(text_kind, output, index);
            let state = self.part(text_kind, output, index, id);
            if end {
                // The end's own copy of the text is not passed: the codec writes it from what
                // the client was sent. Text that never streamed is streamed from it first.
                let mut up = Vec::new();
                let whole = data.get(text_kind.text_key()).and_then(Value::as_str);
                if let Some(text) = whole.filter(|t| !state.streamed && !t.is_empty()) {
                    state.streamed = true;
                    up.push(Up::Text {
                        choice: 0,
                        part,
                        text: text.to_string(),
                    });
                }
                up.push(Up::PartEnd { choice: 0, part });
                return Ok(up);
            }
            state.streamed = true;
            let text = data
                .get("delta")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            return Ok(vec![Up::Text {
                choice: 0,
                part,
                text,
            }]);
        }
        Ok(match kind.as_str() {
            "response.output_item.added" | "response.output_item.done" => {
                let item = data.get("item").cloned().unwrap_or_default();
                let t = item.get("type").and_then(Value::as_str).unwrap_or("");
                let empty = Map::new();
                let called = call_kind(t, item.as_object().unwrap_or(&empty));
                // Ids link a call to its result, an item to its events, and are written again
                // (signed) as they are, never judged as text (`codec::structure::bad_id`): one
                // that is no id ends the stream.
                for key in ["id", "call_id"] {
                    if let Some(v) = item.get(key).filter(|v| !v.is_null()) {
                        let id = v.as_str().unwrap_or("\u{0}");
                        if !id.is_empty() && !crate::codec::closed::Inert::Id.holds(id) {
                            return Err(format!("an item's {key} is not an id"));
                        }
                    }
                }
                if t == "function_call" || t == "custom_tool_call" || called.is_some() {
                    // Whether its `added` came (an item the backend sends whole has no other).
                    let seen = match item.get("id").and_then(Value::as_str) {
                        Some(id) => !self.held_items.insert(id.to_string()),
                        None => false,
                    };
                    let done = kind.ends_with(".done");
                    let obj = item.as_object().cloned().unwrap_or_default();
                    if t == "custom_tool_call" {
                        // Whole only when done (its input streams as deltas of its own).
                        if !done {
                            return Ok(Vec::new());
                        }
                        let call = custom_call(&obj);
                        return Ok(vec![Up::Call {
                            choice: 0,
                            index: output,
                            id: Some(call.id),
                            name: Some(call.name),
                            kind: Some(CUSTOM.into()),
                            arguments: call.arguments,
                            extra: call.extra,
                        }]);
                    }
                    if t != "function_call" {
                        // A hosted item comes whole, when added and again when done: each
                        // time its name, its arguments and its fields (which replace those it
                        // was added with: `Up::Call`), so it is judged as it last came even
                        // when no `done` follows.
                        let kind = called.unwrap_or(t).to_string();
                        let call = hosted_call(&kind, &obj);
                        let mut extra = obj;
                        extra.remove("status");
                        return Ok(vec![Up::Call {
                            choice: 0,
                            index: output,
                            id: (!seen).then_some(call.id),
                            name: Some(call.name),
                            kind: Some(kind),
                            arguments: call.arguments,
                            extra,
                        }]);
                    }
                    if seen && done {
                        // Its arguments came as deltas.
                        return Ok(Vec::new());
                    }
                    let mut extra = obj;
                    let mut take =
                        |k: &str| extra.remove(k).and_then(|v| v.as_str().map(str::to_string));
                    let (id, name, arguments) = (take("call_id"), take("name"), take("arguments"));
                    extra.remove("status");
                    let name = name.map(|n| namespaced(n, &extra));
                    vec![Up::Call {
                        choice: 0,
                        index: output,
                        id,
                        name,
                        kind: Some(FUNCTION.to_string()),
                        arguments: arguments.unwrap_or_default(),
                        extra,
                    }]
                } else {
                    let mut up = Vec::new();
                    if kind.ends_with(".done") {
                        self.unstreamed(&item, output, &mut up);
                    }
                    up.push(judge(data));
                    up
                }
            }
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
            "response.completed" | "response.incomplete" => vec![
                Up::ChoiceEnd {
                    choice: 0,
                    finish: None,
                },
                // What it echoes of the request, judged; the codec writes the event itself at
                // the end, its output rebuilt from what the client was sent.
                lifecycle(kind, data),
                Up::Done,
            ],
            "response.failed" | "error" => vec![Up::Error(Frame {
                event: Some(kind),
                data: Value::Object(data),
            })],
            // Lifecycle: what they carry is the request as the backend took it (judged), and
            // an output the codec empties.
            "response.created" | "response.in_progress" | "response.queued" => {
                vec![lifecycle(kind, data)]
            }
            // Audio itself carries no text (its transcript streams as a text part): its data
            // passes when it is opaque; anything else in the event is judged.
            "response.audio.delta" | "response.audio.done" => vec![judge(data)],
            _ => {
                let held = data
                    .get("item_id")
                    .and_then(Value::as_str)
                    .is_some_and(|id| self.held_items.contains(id));
                if held {
                    // Progress of a call the client sees only once the rails have judged it.
                    return Ok(Vec::new());
                }
                // Parts' lifecycles (their texts written by the codec), annotations, and
                // whatever else: its strings judged as it passes.
                vec![judge(data)]
            }
        })
    }
}
