//! Responses streaming: semantic events (`event: response.output_text.delta`, ...), each with a
//! `sequence_number`, ending with `response.completed` (no `[DONE]`).
//!
//! Every text a client reads streams through the relay as a text part: a message's
//! `output_text` parts (one lane: a value split across two parts is judged whole) and its
//! refusals, reasoning summaries and reasoning text, the audio transcript. Function and hosted
//! call items are held whole until the rails have judged them and then written as complete
//! items (`output_item.added`, the arguments as one delta, `.done`s). Events that repeat text
//! (`content_part.done`, `output_item.done`, the final `response.completed`, whose `output` is
//! rebuilt from what the client was actually sent) are written with the judged text; every other
//! string an event carries is judged as it passes (`Up::Judge`). Sequence numbers and output
//! indices are renumbered in the order events are written, since some are held and some are
//! Railyard's own.

mod decode;

use super::{message_item, response_object};
use crate::codec::closed::{Inert, Shape};
use crate::codec::error;
use crate::codec::sse;
use crate::codec::stream::{Down, Part, StreamCodec, TEXT_LANE};
use crate::model::{ToolCall, FUNCTION};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};

/// The kinds of text a Responses stream carries, each with its own events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextKind {
    /// A message's `output_text` part.
    Output,
    /// A message's `refusal` part.
    Refusal,
    /// A reasoning item's summary part.
    Summary,
    /// A reasoning item's reasoning text.
    Reasoning,
    /// The audio's transcript.
    Transcript,
}

impl TextKind {
    fn of(part: Part) -> TextKind {
        match part >> 56 {
            1 => TextKind::Refusal,
            2 => TextKind::Summary,
            3 => TextKind::Reasoning,
            4 => TextKind::Transcript,
            _ => TextKind::Output,
        }
    }

    fn bits(self) -> u64 {
        (match self {
            TextKind::Output => 0,
            TextKind::Refusal => 1,
            TextKind::Summary => 2,
            TextKind::Reasoning => 3,
            TextKind::Transcript => 4,
        }) << 56
    }

    /// The event names of its deltas and its end.
    fn events(self) -> (&'static str, &'static str) {
        match self {
            TextKind::Output => ("response.output_text.delta", "response.output_text.done"),
            TextKind::Refusal => ("response.refusal.delta", "response.refusal.done"),
            TextKind::Summary => (
                "response.reasoning_summary_text.delta",
                "response.reasoning_summary_text.done",
            ),
            TextKind::Reasoning => (
                "response.reasoning_text.delta",
                "response.reasoning_text.done",
            ),
            TextKind::Transcript => (
                "response.audio.transcript.delta",
                "response.audio.transcript.done",
            ),
        }
    }

    /// The key of its index in events (`content_index`, `summary_index`).
    fn index_key(self) -> &'static str {
        match self {
            TextKind::Summary => "summary_index",
            _ => "content_index",
        }
    }

    /// The key of its whole text in its end event and its part (`text`, `refusal`).
    fn text_key(self) -> &'static str {
        match self {
            TextKind::Refusal => "refusal",
            _ => "text",
        }
    }
}

/// A part key: its kind, the backend's output index and the part's index in its list.
fn part_key(kind: TextKind, output: u64, index: u64) -> Part {
    kind.bits() | (output << 16) | index
}

struct PartState {
    kind: TextKind,
    item_id: String,
    /// The output index the client sees (for the backend's parts: set once its item passed).
    output_index: u64,
    content_index: u64,
    /// The text sent so far (what the policies left).
    text: String,
    /// Whether the backend streamed any of its text (text an item carries that never streamed
    /// is streamed from the item, so it is judged like the rest).
    streamed: bool,
    /// A part Railyard opened itself (for a refusal).
    synthetic: bool,
    /// Whether its end was written.
    closed: bool,
}

/// The strings of the events that pass (`Up::Judge`) that carry no text: ids, words, and the
/// texts the codec writes itself from the judged parts (never passed as they came).
const EVENT: Shape = Shape {
    mapped: &[],
    inert: &[
        ("type", Inert::Word),
        ("item_id", Inert::Id),
        ("obfuscation", Inert::Data),
        // Audio's base64 (any other delta that is text is judged).
        ("delta", Inert::Data),
        ("partial_image_b64", Inert::Data),
        ("output_format", Inert::Word),
        ("part.type", Inert::Word),
        ("part.text", Inert::Data),
        ("part.refusal", Inert::Data),
        ("part.annotations[].type", Inert::Word),
        ("part.annotations[].file_id", Inert::Id),
        ("part.annotations[].container_id", Inert::Id),
        ("annotation.type", Inert::Word),
        ("annotation.file_id", Inert::Id),
        ("annotation.container_id", Inert::Id),
        ("item.type", Inert::Word),
        ("item.id", Inert::Id),
        ("item.status", Inert::Word),
        ("item.role", Inert::Word),
        ("item.call_id", Inert::Id),
        ("item.name", Inert::Word),
        ("item.server_label", Inert::Word),
        ("item.approval_request_id", Inert::Id),
        ("item.encrypted_content", Inert::Data),
        ("item.content[].type", Inert::Word),
        ("item.content[].text", Inert::Data),
        ("item.content[].refusal", Inert::Data),
        ("item.content[].annotations[].type", Inert::Word),
        ("item.content[].annotations[].file_id", Inert::Id),
        ("item.summary[].type", Inert::Word),
        ("item.summary[].text", Inert::Data),
        ("item.tools[].name", Inert::Word),
    ],
    known: &[],
};

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
    /// The response's id, from the first lifecycle event that gives it.
    response_id: Option<String>,
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
            response_id: None,
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
                kind: TextKind::Output,
                item_id: id,
                output_index: index,
                content_index: 0,
                text: String::new(),
                streamed: true,
                synthetic: true,
                closed: false,
            },
        );
    }

    /// The event about `part` of type `kind` with its ids, as the client sees them.
    fn part_event(&self, p: &PartState, event: &str) -> Value {
        let mut data = json!({"type": event});
        if p.kind != TextKind::Transcript {
            data["item_id"] = json!(p.item_id);
            data["output_index"] = json!(p.output_index);
            data[p.kind.index_key()] = json!(p.content_index);
        }
        data
    }

    fn close_part(&mut self, part: Part, out: &mut Vec<u8>) {
        let Some(p) = self.parts.get_mut(&part).filter(|p| !p.closed) else {
            return;
        };
        p.closed = true;
        let p = &self.parts[&part];
        let mut done = self.part_event(p, p.kind.events().1);
        if p.kind != TextKind::Transcript {
            done[p.kind.text_key()] = json!(p.text);
        }
        if p.kind == TextKind::Output {
            done["logprobs"] = json!([]);
        }
        let (synthetic, id, index, ci, text) = (
            p.synthetic,
            p.item_id.clone(),
            p.output_index,
            p.content_index,
            p.text.clone(),
        );
        self.write(out, done);
        if synthetic {
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

    /// The judged text of the part of `kind` at `index` of the item `id` (none if it never
    /// streamed).
    fn text_of(&self, id: &str, kind: TextKind, index: usize) -> &str {
        self.parts
            .values()
            .find(|p| p.kind == kind && p.item_id == id && p.content_index == index as u64)
            .map_or("", |p| p.text.as_str())
    }

    /// An item's texts as the client was sent them: a message's parts (the parts of its text
    /// that streamed, in order), a reasoning item's summary and text. A text that never
    /// streamed is not the client's to read.
    fn fill(&self, item: &mut Value) {
        let id = item
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some(obj) = item.as_object_mut() else {
            return;
        };
        let lists = text_lists(obj.get("type").and_then(Value::as_str));
        for &(key, kind) in lists {
            let mut list = match obj.remove(key) {
                Some(Value::Array(list)) => list,
                Some(_) | None => Vec::new(),
            };
            // Parts that streamed but the item does not list (an item written before its text).
            let belongs = |p: &PartState| {
                p.item_id == id
                    && (p.kind == kind || (kind == TextKind::Output && p.kind == TextKind::Refusal))
            };
            for p in self.parts.values().filter(|p| belongs(p)) {
                while list.len() <= p.content_index as usize {
                    list.push(json!({"type": part_type(p.kind)}));
                }
            }
            for (i, entry) in list.iter_mut().enumerate() {
                let refusal = entry.get("type").and_then(Value::as_str) == Some("refusal");
                let kind = if refusal { TextKind::Refusal } else { kind };
                if !entry.is_object() {
                    *entry = json!({"type": part_type(kind)});
                }
                entry[kind.text_key()] = json!(self.text_of(&id, kind, i));
            }
            obj.insert(key.into(), Value::Array(list));
        }
    }

    /// An event passed on: indices renumbered, texts put back as the client was sent them.
    fn pass(&mut self, mut data: Value, out: &mut Vec<u8>) {
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Some(i) = data.get("output_index").and_then(Value::as_u64) {
            data["output_index"] = json!(self.output_index(i));
        }
        match kind.as_str() {
            "response.content_part.added"
            | "response.content_part.done"
            | "response.reasoning_summary_part.added"
            | "response.reasoning_summary_part.done" => {
                let id = data.get("item_id").and_then(Value::as_str).unwrap_or("");
                let summary = kind.starts_with("response.reasoning_summary_part");
                let index_key = if summary {
                    "summary_index"
                } else {
                    "content_index"
                };
                let index = data.get(index_key).and_then(Value::as_u64).unwrap_or(0);
                let text_kind = match data["part"].get("type").and_then(Value::as_str) {
                    _ if summary => TextKind::Summary,
                    Some("refusal") => TextKind::Refusal,
                    Some("reasoning_text") => TextKind::Reasoning,
                    _ => TextKind::Output,
                };
                let text = self.text_of(id, text_kind, index as usize).to_string();
                if data["part"].is_object() {
                    data["part"][text_kind.text_key()] = json!(text);
                }
            }
            "response.output_item.added" | "response.output_item.done" => {
                let mut item = data["item"].take();
                self.fill(&mut item);
                if let Some(i) = data.get("output_index").and_then(Value::as_u64) {
                    self.written.insert(i, item.clone());
                }
                data["item"] = item;
            }
            _ => {}
        }
        self.write(out, data);
    }

    fn call_item(&mut self, call: &ToolCall) -> Value {
        if call.kind == crate::model::CUSTOM {
            let mut item = super::custom_item(call);
            item.as_object_mut()
                .expect("an object")
                .entry("id")
                .or_insert_with(|| json!(format!("ctc_{}", crate::model::model_id(&call.id))));
            item["status"] = json!("completed");
            return item;
        }
        let mut item = if call.kind == FUNCTION {
            let mut item = super::function_item(call);
            item.entry("id")
                .or_insert_with(|| json!(format!("fc_{}", crate::model::model_id(&call.id))));
            item
        } else {
            match call.is_hosted() {
                // Under the id the daemon signed it with, its arguments as judged.
                true => super::hosted_item(call),
                false => call.extra.clone(),
            }
        };
        item.insert("status".into(), json!("completed"));
        Value::Object(item)
    }

    /// A lifecycle event, its response judged (see `decode::lifecycle`): written with an empty
    /// output, or, for the last one, kept for the end.
    fn lifecycle(&mut self, kind: String, response: Value, out: &mut Vec<u8>) {
        if self.response_id.is_none() {
            self.response_id = response["id"].as_str().map(str::to_string);
        }
        if kind == "response.completed" || kind == "response.incomplete" {
            self.completed = Some(response);
            return;
        }
        self.write(out, json!({"type": kind, "response": response}));
    }

    fn completed(&mut self, railyard: Option<Value>, status: &str, out: &mut Vec<u8>) {
        let mut response = self
            .completed
            .take()
            .unwrap_or_else(|| response_object(Some(&self.model), "railyard"));
        response["status"] = json!(status);
        let mut output: Vec<Value> = self.written.values().cloned().collect();
        for item in &mut output {
            self.fill(item);
            if item.get("type").and_then(Value::as_str) == Some("message") {
                item["status"] = json!("completed");
            }
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

/// An output item's lists of text parts, by its type, and the kind of text each holds (a
/// message's refusal parts say so themselves).
fn text_lists(item_type: Option<&str>) -> &'static [(&'static str, TextKind)] {
    match item_type {
        Some("message") => &[("content", TextKind::Output)],
        Some("reasoning") => &[
            ("summary", TextKind::Summary),
            ("content", TextKind::Reasoning),
        ],
        _ => &[],
    }
}

/// The `type` of a part that holds text of `kind`.
fn part_type(kind: TextKind) -> &'static str {
    match kind {
        TextKind::Refusal => "refusal",
        TextKind::Summary => "summary_text",
        TextKind::Reasoning => "reasoning_text",
        TextKind::Output | TextKind::Transcript => "output_text",
    }
}

impl StreamCodec for ResponsesStream {
    fn call_shape(&self) -> &'static crate::codec::closed::Shape {
        &super::ITEM
    }

    fn reply_id(&self) -> Option<&str> {
        self.response_id.as_deref()
    }

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

    fn decode(&mut self, event: sse::SseEvent) -> Result<Vec<crate::codec::stream::Up>, String> {
        self.decode_event(event)
    }

    /// A message's `output_text` parts are what a client reads as the reply's text.
    fn lane(&self, part: Part) -> Part {
        match TextKind::of(part) {
            TextKind::Output if part != u64::MAX => TEXT_LANE,
            _ => part,
        }
    }

    fn encode(&mut self, down: Down, out: &mut Vec<u8>) {
        match down {
            Down::Pass(frame) => match frame.event {
                Some(kind) => self.lifecycle(kind, frame.data, out),
                None => self.pass(frame.data, out),
            },
            Down::Text { part, text, .. } => {
                if !self.parts.contains_key(&part) {
                    self.open_part(part, out);
                }
                let mapped = self.outputs.get(&((part >> 16) & 0xff_ffff_ffff)).copied();
                let p = self.parts.get_mut(&part).expect("opened");
                if !p.synthetic {
                    p.output_index = mapped.unwrap_or(p.output_index);
                }
                p.text.push_str(&text);
                let p = &self.parts[&part];
                let mut delta = self.part_event(p, p.kind.events().0);
                delta["delta"] = json!(text);
                if p.kind == TextKind::Output {
                    delta["logprobs"] = json!([]);
                }
                self.write(out, delta);
            }
            Down::PartEnd { part, .. } => {
                let mapped = self.outputs.get(&((part >> 16) & 0xff_ffff_ffff)).copied();
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
