//! Responses streaming: semantic events (`event: response.output_text.delta`, ...), each with a
//! `sequence_number`, ending with `response.completed` (no `[DONE]`).
//!
//! Text deltas and `output_text.done` go through the relay; function and hosted call items are
//! held whole until the rails have judged them and then written as complete items
//! (`output_item.added`, the arguments as one delta, `.done`s). Everything else passes, with
//! its texts rewritten where an event repeats text a policy changed (`content_part.done`,
//! `output_item.done`, the final `response.completed`, whose `output` is rebuilt from what the
//! client was actually sent). Sequence numbers and output indices are renumbered in the order
//! events are written, since some are held and some are Railyard's own.

mod decode;

use super::{message_item, response_object};
use crate::codec::error;
use crate::codec::sse::{self, SseEvent};
use crate::codec::stream::{Down, Part, StreamCodec, Up};
use crate::model::{ToolCall, FUNCTION};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};

/// A part key from an output index and a content index.
fn part_key(output: u64, content: u64) -> Part {
    (output << 16) | content
}

struct PartState {
    item_id: String,
    /// The output index the client sees (for the backend's parts: set once its item passed).
    output_index: u64,
    content_index: u64,
    /// The text sent so far (what the policies left).
    text: String,
    /// A part Railyard opened itself (for a refusal).
    synthetic: bool,
}

/// The Responses stream codec.
pub struct ResponsesStream {
    model: Value,
    seq: u64,
    next_output: u64,
    /// Backend output index → the index the client sees.
    outputs: BTreeMap<u64, u64>,
    parts: BTreeMap<Part, PartState>,
    /// Items written, by the index the client sees (for the final response's `output`).
    written: BTreeMap<u64, Value>,
    /// Held call items (not shown to the client) and events about them to drop.
    held_items: HashSet<String>,
    completed: Option<Value>,
    synthetic: u64,
}

impl ResponsesStream {
    /// A codec for a request for `model`.
    pub fn new(model: Value) -> ResponsesStream {
        ResponsesStream {
            model,
            seq: 0,
            next_output: 0,
            outputs: BTreeMap::new(),
            parts: BTreeMap::new(),
            written: BTreeMap::new(),
            held_items: HashSet::new(),
            completed: None,
            synthetic: 0,
        }
    }

    fn output_index(&mut self, backend: u64) -> u64 {
        if let Some(i) = self.outputs.get(&backend) {
            return *i;
        }
        let i = self.next_output;
        self.next_output += 1;
        self.outputs.insert(backend, i);
        i
    }

    fn new_output(&mut self) -> u64 {
        let i = self.next_output;
        self.next_output += 1;
        i
    }

    fn write(&mut self, out: &mut Vec<u8>, mut data: Value) {
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        let name = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message")
            .to_string();
        sse::write(out, Some(&name), &data.to_string());
    }

    /// Open a message item and a text part for text that has none (Railyard's own text).
    fn open_part(&mut self, part: Part, out: &mut Vec<u8>) {
        self.synthetic += 1;
        let id = format!("msg_railyard_{}", self.synthetic);
        let index = self.new_output();
        let mut item = message_item(&id, "");
        item["status"] = json!("in_progress");
        item["content"] = json!([]);
        self.written.insert(index, message_item(&id, ""));
        self.write(
            out,
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        );
        self.write(
            out,
            json!({"type": "response.content_part.added", "item_id": id, "output_index": index,
                "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
        self.parts.insert(
            part,
            PartState {
                item_id: id,
                output_index: index,
                content_index: 0,
                text: String::new(),
                synthetic: true,
            },
        );
    }

    fn close_part(&mut self, part: Part, out: &mut Vec<u8>) {
        let Some(p) = self.parts.get(&part) else {
            return;
        };
        let synthetic_item = p.synthetic;
        let (id, index, ci, text) = (
            p.item_id.clone(),
            p.output_index,
            p.content_index,
            p.text.clone(),
        );
        self.write(
            out,
            json!({"type": "response.output_text.done", "item_id": id, "output_index": index,
                "content_index": ci, "text": text, "logprobs": []}),
        );
        if synthetic_item {
            self.write(
                out,
                json!({"type": "response.content_part.done", "item_id": id,
                "output_index": index, "content_index": ci,
                "part": {"type": "output_text", "text": text, "annotations": []}}),
            );
            let item = message_item(&id, &text);
            self.written.insert(index, item.clone());
            self.write(
                out,
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            );
        }
    }

    /// An event passed on: indices renumbered, texts policies changed put back in.
    fn pass(&mut self, mut data: Value, out: &mut Vec<u8>) {
        if let Some(i) = data.get("output_index").and_then(Value::as_u64) {
            let mapped = self.output_index(i);
            data["output_index"] = json!(mapped);
            let ci = data
                .get("content_index")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let text = self.parts.get(&part_key(i, ci)).map(|p| p.text.clone());
            match data.get("type").and_then(Value::as_str) {
                Some("response.content_part.done") => {
                    if let Some(text) = text {
                        data["part"]["text"] = json!(text);
                    }
                }
                Some("response.output_item.done") | Some("response.output_item.added") => {
                    if let Some(Value::Array(content)) = data["item"].get_mut("content") {
                        for (ci, part) in content.iter_mut().enumerate() {
                            if let Some(p) = self.parts.get(&part_key(i, ci as u64)) {
                                part["text"] = json!(p.text);
                            }
                        }
                    }
                    self.written.insert(mapped, data["item"].clone());
                }
                _ => {}
            }
        }
        self.write(out, data);
    }

    fn call_item(&mut self, call: &ToolCall) -> Value {
        let mut item = call.extra.clone();
        if call.kind == FUNCTION {
            item.insert("type".into(), json!("function_call"));
            item.insert("call_id".into(), json!(call.id));
            item.insert("name".into(), json!(call.name));
            item.insert("arguments".into(), json!(call.arguments));
            item.entry("id")
                .or_insert_with(|| json!(format!("fc_{}", crate::model::model_id(&call.id))));
        }
        item.insert("status".into(), json!("completed"));
        Value::Object(item)
    }

    fn completed(&mut self, railyard: Option<Value>, status: &str, out: &mut Vec<u8>) {
        let mut response = self
            .completed
            .take()
            .unwrap_or_else(|| response_object(Some(&self.model), "railyard"));
        response["status"] = json!(status);
        let mut output: Vec<Value> = self.written.values().cloned().collect();
        for item in &mut output {
            if item.get("type").and_then(Value::as_str) != Some("message") {
                continue;
            }
            let id = item
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let mut texts: Vec<(u64, &str)> = self
                .parts
                .values()
                .filter(|p| p.item_id == id)
                .map(|p| (p.content_index, p.text.as_str()))
                .collect();
            if texts.is_empty() {
                continue;
            }
            texts.sort();
            let old = item
                .get("content")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let content: Vec<Value> = texts
                .into_iter()
                .map(|(ci, text)| {
                    let mut part = old
                        .get(ci as usize)
                        .cloned()
                        .unwrap_or_else(|| json!({"type": "output_text", "annotations": []}));
                    part["text"] = json!(text);
                    part
                })
                .collect();
            item["content"] = Value::Array(content);
            item["status"] = json!("completed");
        }
        response["output"] = Value::Array(output);
        if let Some(railyard) = railyard {
            response["railyard"] = railyard;
        }
        self.write(
            out,
            json!({"type": "response.completed", "response": response}),
        );
    }
}

impl StreamCodec for ResponsesStream {
    fn open(&mut self, id: &str, _model: Option<&str>, out: &mut Vec<u8>) {
        let mut response = response_object(Some(&self.model), id);
        response["status"] = json!("in_progress");
        self.completed = Some(response.clone());
        self.write(
            out,
            json!({"type": "response.created", "response": response.clone()}),
        );
        self.write(
            out,
            json!({"type": "response.in_progress", "response": response}),
        );
    }

    fn decode(&mut self, event: SseEvent) -> Result<Vec<Up>, String> {
        self.decode_event(event)
    }

    fn encode(&mut self, down: Down, out: &mut Vec<u8>) {
        match down {
            Down::Pass(frame) => self.pass(frame.data, out),
            Down::Text { part, text, .. } => {
                if !self.parts.contains_key(&part) {
                    self.open_part(part, out);
                }
                let mapped = self.outputs.get(&(part >> 16)).copied();
                let p = self.parts.get_mut(&part).expect("opened");
                if !p.synthetic {
                    p.output_index = mapped.unwrap_or(p.output_index);
                }
                p.text.push_str(&text);
                let (id, index, ci) = (p.item_id.clone(), p.output_index, p.content_index);
                self.write(
                    out,
                    json!({"type": "response.output_text.delta", "item_id": id,
                    "output_index": index, "content_index": ci, "delta": text, "logprobs": []}),
                );
            }
            Down::PartEnd { part, .. } => {
                let mapped = self.outputs.get(&(part >> 16)).copied();
                if let Some(p) = self.parts.get_mut(&part) {
                    if !p.synthetic {
                        p.output_index = mapped.unwrap_or(p.output_index);
                    }
                }
                self.close_part(part, out);
            }
            Down::Calls { calls, .. } => {
                for call in calls {
                    let item = self.call_item(&call);
                    let index = self.new_output();
                    let id = item.get("id").cloned().unwrap_or_default();
                    let mut added = item.clone();
                    if call.kind == FUNCTION {
                        added["arguments"] = json!("");
                        added["status"] = json!("in_progress");
                    }
                    self.write(
                        out,
                        json!({"type": "response.output_item.added",
                        "output_index": index, "item": added}),
                    );
                    if call.kind == FUNCTION {
                        self.write(
                            out,
                            json!({"type": "response.function_call_arguments.delta",
                            "item_id": id, "output_index": index, "delta": call.arguments}),
                        );
                        self.write(
                            out,
                            json!({"type": "response.function_call_arguments.done",
                            "item_id": id, "output_index": index, "arguments": call.arguments}),
                        );
                    }
                    self.write(
                        out,
                        json!({"type": "response.output_item.done",
                        "output_index": index, "item": item}),
                    );
                    self.written.insert(index, item);
                }
            }
            Down::ChoiceEnd { .. } => {
                // Close what Railyard opened itself (a refusal in place of removed calls).
                let own: Vec<Part> = self
                    .parts
                    .iter()
                    .filter(|(_, p)| p.synthetic)
                    .map(|(k, _)| *k)
                    .collect();
                for part in own {
                    self.close_part(part, out);
                    self.parts.remove(&part);
                }
            }
            Down::Done { railyard } => self.completed(railyard, "completed", out),
            Down::Refused {
                finish: true,
                text,
                railyard,
                ..
            } => {
                let part = u64::MAX;
                self.open_part(part, out);
                self.encode(
                    Down::Text {
                        choice: 0,
                        part,
                        text,
                    },
                    out,
                );
                self.close_part(part, out);
                self.parts.remove(&part);
                self.completed(Some(railyard), "completed", out);
            }
            Down::Refused {
                message, railyard, ..
            } => {
                let (kind, code) = error::POLICY_VIOLATION;
                let mut event = error::responses_event(&message, kind, code);
                event["railyard"] = railyard;
                self.write(out, event)
            }
            Down::BackendError(frame) => self.write(out, frame.data),
            Down::Error {
                message,
                code,
                kind,
            } => self.write(out, error::responses_event(&message, &kind, &code)),
        }
    }
}
