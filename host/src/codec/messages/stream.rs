//! Anthropic streaming: `message_start`, then for each content block `content_block_start`,
//! `content_block_delta` (`text_delta`, `input_json_delta`, ...) and `content_block_stop`, then
//! `message_delta` (the stop reason and usage) and `message_stop`.
//!
//! Text blocks go through the relay as one lane (what a client reads as the reply's text, so a
//! value split across two blocks is judged whole), thinking blocks as text parts of their own;
//! `tool_use` blocks are held whole until the rails have judged them and then written as
//! complete blocks (the input as one `input_json_delta`). Every other event's strings are judged
//! as it passes (`Up::Judge`): citations, server tools' blocks and their results. Block indices
//! are renumbered in the order blocks are written, since some are held and some are Railyard's
//! own.

use crate::codec::closed::{Inert, Shape};
use crate::codec::error;
use crate::codec::sse::{self, SseEvent};
use crate::codec::stream::{Down, Finish, Frame, HostedSigner, Part, StreamCodec, Up, TEXT_LANE};
use crate::model::ToolCall;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

/// A thinking block's part: its index with this bit set.
const THINKING: Part = 1 << 56;

/// The strings of the events that pass (`Up::Judge`) that carry no text.
const EVENT: Shape = Shape {
    mapped: &[],
    inert: &[
        ("type", Inert::Word),
        ("content_block.type", Inert::Word),
        ("content_block.id", Inert::Id),
        ("content_block.name", Inert::Word),
        ("content_block.server_name", Inert::Word),
        ("content_block.tool_use_id", Inert::Id),
        ("content_block.signature", Inert::Data),
        // Written empty by the codec: the text streams through the relay.
        ("content_block.text", Inert::Data),
        ("content_block.thinking", Inert::Data),
        ("content_block.data", Inert::Data),
        ("content_block.content.type", Inert::Word),
        ("content_block.content.error_code", Inert::Word),
        ("content_block.content[].type", Inert::Word),
        ("content_block.content[].encrypted_content", Inert::Data),
        ("content_block.content[].page_age", Inert::Word),
        ("delta.type", Inert::Word),
        ("delta.signature", Inert::Data),
        ("delta.citation.type", Inert::Word),
        ("delta.citation.file_id", Inert::Id),
        ("delta.citation.encrypted_index", Inert::Data),
        // `message_start`'s message and `message_delta`'s delta: the reply's own fields.
        ("message.id", Inert::Id),
        ("message.type", Inert::Word),
        ("message.role", Inert::Word),
        ("message.model", Inert::Word),
        ("message.stop_reason", Inert::Word),
        ("message.container.id", Inert::Id),
        ("message.container.expires_at", Inert::Time),
        ("message.usage.service_tier", Inert::Word),
        ("message.usage.inference_geo", Inert::Word),
        ("delta.stop_reason", Inert::Word),
        ("delta.container.id", Inert::Id),
        ("delta.container.expires_at", Inert::Time),
        ("usage.service_tier", Inert::Word),
        ("usage.inference_geo", Inert::Word),
        ("context_management.applied_edits[].type", Inert::Word),
    ],
    known: &[],
};

/// The Messages stream codec.
#[derive(Default)]
pub struct MessagesStream {
    next_index: u64,
    /// Backend block index → the index the client sees.
    blocks: BTreeMap<u64, u64>,
    /// Text parts with an open block on the client's side.
    open: HashSet<Part>,
    /// Backend blocks held (tool uses): their events are not passed.
    held: HashSet<u64>,
    /// Backend text blocks: one lane.
    texts: HashSet<u64>,
    /// Backend thinking blocks: each a text part of its own.
    thinking: HashSet<u64>,
    /// Server and MCP tools' calls as they stream, and their events, held until the call is
    /// whole and judged (`Up::Hosted`).
    shown: BTreeMap<u64, (ToolCall, String, Vec<Frame>)>,
    /// The backend's `message_delta` (stop reason, usage), written when the choice ends.
    delta: Option<Map<String, Value>>,
    /// The stop reason the judged choice ended with (it overrides the backend's).
    stop: Option<String>,
    /// Whether the stop reason was written.
    ended: bool,
    /// Signs the provider's tools as they pass (`StreamCodec::sign_hosted`).
    signer: Option<HostedSigner>,
    /// Their ids as the backend sent them → as signed (their results name them).
    signed: HashMap<String, String>,
}

impl MessagesStream {
    fn index(&mut self, backend: u64) -> u64 {
        if let Some(i) = self.blocks.get(&backend) {
            return *i;
        }
        let i = self.fresh();
        self.blocks.insert(backend, i);
        i
    }

    fn fresh(&mut self) -> u64 {
        let i = self.next_index;
        self.next_index += 1;
        i
    }

    fn write(out: &mut Vec<u8>, data: Value) {
        let name = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message")
            .to_string();
        sse::write(out, Some(&name), &data.to_string());
    }

    /// Open a text block for text that has none (Railyard's own text).
    fn open_text(&mut self, part: Part, out: &mut Vec<u8>) -> u64 {
        let index = self.fresh();
        self.blocks.insert(part, index);
        self.open.insert(part);
        Self::write(
            out,
            json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "text", "text": ""}}),
        );
        index
    }

    fn stop_reason(&mut self, reason: &str, railyard: Option<Value>, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        self.ended = true;
        let mut delta = self.delta.take().unwrap_or_default();
        delta.insert("type".into(), json!("message_delta"));
        let mut d = delta
            .get("delta")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        d.insert("stop_reason".into(), json!(reason));
        d.entry("stop_sequence").or_insert(Value::Null);
        delta.insert("delta".into(), Value::Object(d));
        delta.entry("usage").or_insert(json!({"output_tokens": 0}));
        if let Some(railyard) = railyard {
            delta.insert("railyard".into(), railyard);
        }
        Self::write(out, Value::Object(delta));
    }
}

impl StreamCodec for MessagesStream {
    fn call_shape(&self) -> &'static crate::codec::closed::Shape {
        &super::CALL
    }

    fn open(&mut self, id: &str, model: Option<&str>, out: &mut Vec<u8>) {
        Self::write(
            out,
            json!({"type": "message_start", "message": {"id": format!("msg_{id}"), "type": "message",
                "role": "assistant", "model": model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 0, "output_tokens": 0}}}),
        );
    }

    fn decode(&mut self, event: SseEvent) -> Result<Vec<Up>, String> {
        let Ok(Value::Object(data)) = serde_json::from_str::<Value>(&event.data) else {
            return Err("an event that is not a JSON object".into());
        };
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("")
            .to_string();
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let pass = |data: Map<String, Value>| {
            Up::Pass(Frame {
                event: None,
                data: Value::Object(data),
            })
        };
        let judge = |data: Map<String, Value>| Up::Judge {
            frame: Frame {
                event: None,
                data: Value::Object(data),
            },
            shape: &EVENT,
        };
        Ok(match kind.as_str() {
            "content_block_start" => {
                let mut data = data;
                // A server tool's result answers its call under the id the client was given.
                let answers = data
                    .get("content_block")
                    .and_then(|b| b.get("tool_use_id"))
                    .and_then(Value::as_str)
                    .and_then(|id| self.signed.get(id));
                if let Some(signed) = answers {
                    data["content_block"]["tool_use_id"] = json!(signed);
                }
                let block = data.get("content_block").cloned().unwrap_or_default();
                // Ids link a call to its result and are signed as they are, never judged as
                // text (`codec::structure::bad_id`): one that is no id ends the stream.
                for key in ["id", "tool_use_id"] {
                    if let Some(v) = block.get(key).filter(|v| !v.is_null()) {
                        let id = v.as_str().unwrap_or("\u{0}");
                        if !id.is_empty() && !Inert::Id.holds(id) {
                            return Err(format!("a block's {key} is not an id"));
                        }
                    }
                }
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        self.held.insert(index);
                        let field =
                            |k: &str| block.get(k).and_then(Value::as_str).map(str::to_string);
                        // The input arrives as input_json_delta; a non-empty start input counts.
                        let input = block
                            .get("input")
                            .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                            .map(Value::to_string)
                            .unwrap_or_default();
                        vec![Up::Call {
                            choice: 0,
                            index,
                            id: field("id"),
                            name: field("name"),
                            kind: Some(crate::model::FUNCTION.into()),
                            arguments: input,
                            extra: Map::new(),
                        }]
                    }
                    Some("server_tool_use" | "mcp_tool_use") => {
                        // A tool the provider runs: its events are held until it is whole, then
                        // judged before the client sees any of it (`Up::Hosted`); its result,
                        // after it, passes as it comes.
                        match super::call_of(&block) {
                            Some(Ok(mut call)) => {
                                // Signed now: its result names it by the id the client gets.
                                if let Some(sign) = &self.signer {
                                    let signed = sign(&call.id, &call.name);
                                    data["content_block"]["id"] = json!(signed);
                                    self.signed.insert(call.id.clone(), signed.clone());
                                    call.id = signed;
                                }
                                let start = Frame {
                                    event: None,
                                    data: Value::Object(data),
                                };
                                self.shown.insert(index, (call, String::new(), vec![start]));
                                Vec::new()
                            }
                            _ => return Err("a tool use block whose input is not an object".into()),
                        }
                    }
                    Some(kind @ ("text" | "thinking")) => {
                        let (part, key) = if kind == "text" {
                            self.texts.insert(index);
                            (index, "text")
                        } else {
                            self.thinking.insert(index);
                            (THINKING | index, "thinking")
                        };
                        // The block starts empty (the codec writes it so): its text, and any
                        // other string of it, through the relay.
                        let text = block.get(key).and_then(Value::as_str).unwrap_or("");
                        let mut up = vec![judge(data.clone())];
                        if !text.is_empty() {
                            up.push(Up::Text {
                                choice: 0,
                                part,
                                text: text.to_string(),
                            });
                        }
                        up
                    }
                    _ => vec![judge(data)],
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta").cloned().unwrap_or_default();
                match delta.get("type").and_then(Value::as_str) {
                    Some(kind @ ("text_delta" | "thinking_delta")) => {
                        let (part, key) = if kind == "text_delta" {
                            (index, "text")
                        } else {
                            (THINKING | index, "thinking")
                        };
                        vec![Up::Text {
                            choice: 0,
                            part,
                            text: delta
                                .get(key)
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        }]
                    }
                    // A thinking block's signature: opaque, when it is (else judged).
                    Some("signature_delta")
                        if data.len() <= 3
                            && delta.as_object().is_some_and(|d| d.len() == 2)
                            && delta
                                .get("signature")
                                .and_then(Value::as_str)
                                .is_some_and(|s| Inert::Data.holds(s)) =>
                    {
                        vec![pass(data)]
                    }
                    Some("input_json_delta") if self.shown.contains_key(&index) => {
                        if let Some((_, input, frames)) = self.shown.get_mut(&index) {
                            if let Some(more) = delta.get("partial_json").and_then(Value::as_str) {
                                input.push_str(more);
                            }
                            frames.push(Frame {
                                event: None,
                                data: Value::Object(data),
                            });
                        }
                        Vec::new()
                    }
                    Some("input_json_delta") if self.held.contains(&index) => vec![Up::Call {
                        choice: 0,
                        index,
                        id: None,
                        name: None,
                        kind: None,
                        arguments: delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        extra: Map::new(),
                    }],
                    // Citations, server tools' input, anything else: judged as it passes.
                    _ => vec![judge(data)],
                }
            }
            "content_block_stop" if self.held.contains(&index) => Vec::new(),
            "content_block_stop" if self.thinking.contains(&index) => vec![Up::PartEnd {
                choice: 0,
                part: THINKING | index,
            }],
            "content_block_stop" if self.shown.contains_key(&index) => {
                let (mut call, input, frames) = self.shown.remove(&index).expect("checked");
                if !input.is_empty() {
                    call.arguments = input;
                }
                vec![
                    Up::Hosted {
                        choice: 0,
                        call,
                        frames,
                        shape: &EVENT,
                    },
                    Up::PartEnd {
                        choice: 0,
                        part: index,
                    },
                ]
            }
            "content_block_stop"
                if self.blocks.contains_key(&index) || !self.held.contains(&index) =>
            {
                // A text block ends through the relay (its held text judged first); the codec
                // writes the stop. Other blocks' stops pass.
                vec![Up::PartEnd {
                    choice: 0,
                    part: index,
                }]
            }
            "message_delta" => {
                // The codec writes the stop reason again: only a word it can be.
                let finish = data
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                    .filter(|r| Inert::Word.holds(r))
                    .map(str::to_string);
                // Judged as it comes (its stop sequence, what a newer API adds); kept, as the
                // rails left it, to be written when the choice ends (`encode`).
                self.delta = Some(data.clone());
                vec![judge(data), Up::ChoiceEnd { choice: 0, finish }]
            }
            "message_stop" => vec![Up::Done],
            "error" => vec![Up::Error(Frame {
                event: Some(kind),
                data: Value::Object(data),
            })],
            "ping" => vec![pass(data)],
            // The message's content is written by the stream itself, never as the backend said;
            // its other fields are judged.
            "message_start" => vec![judge(data)],
            _ => vec![judge(data)],
        })
    }

    fn sign_hosted(&mut self, signer: HostedSigner) {
        self.signer = Some(signer);
    }

    /// Text blocks are what a client reads as the reply's text.
    fn lane(&self, part: Part) -> Part {
        if self.texts.contains(&part) {
            TEXT_LANE
        } else {
            part
        }
    }

    fn encode(&mut self, down: Down, out: &mut Vec<u8>) {
        match down {
            Down::Pass(frame) => {
                let mut data = frame.data;
                if data.get("type").and_then(Value::as_str) == Some("message_delta") {
                    // Written when the choice ends, with the stop reason it ends with.
                    self.delta = Some(match data {
                        Value::Object(d) => d,
                        _ => Map::new(),
                    });
                    return;
                }
                if let Some(i) = data.get("index").and_then(Value::as_u64) {
                    let kind = data.get("type").and_then(Value::as_str).unwrap_or("");
                    if kind == "content_block_start" {
                        match data["content_block"]["type"].as_str() {
                            Some("text") => {
                                self.open.insert(i);
                                // The block starts empty: its text comes through the relay.
                                data["content_block"]["text"] = json!("");
                            }
                            Some("thinking") => data["content_block"]["thinking"] = json!(""),
                            _ => {}
                        }
                    }
                    data["index"] = json!(self.index(i));
                }
                if data.get("type").and_then(Value::as_str) == Some("message_start") {
                    if let Some(content) =
                        data.get_mut("message").and_then(|m| m.get_mut("content"))
                    {
                        *content = json!([]);
                    }
                }
                Self::write(out, data);
            }
            Down::Text { part, text, .. } if part & THINKING != 0 && part != u64::MAX => {
                let index = self.index(part & !THINKING);
                Self::write(
                    out,
                    json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "thinking_delta", "thinking": text}}),
                );
            }
            Down::PartEnd { part, .. } if part & THINKING != 0 && part != u64::MAX => {
                let index = self.index(part & !THINKING);
                Self::write(out, json!({"type": "content_block_stop", "index": index}));
            }
            Down::Text { part, text, .. } => {
                let index = if self.open.contains(&part) {
                    self.index(part)
                } else {
                    self.open_text(part, out)
                };
                Self::write(
                    out,
                    json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": text}}),
                );
            }
            Down::PartEnd { part, .. } => {
                if self.open.remove(&part) {
                    let index = self.index(part);
                    Self::write(out, json!({"type": "content_block_stop", "index": index}));
                } else if self.blocks.contains_key(&part) || !self.held.contains(&part) {
                    // Not a text block: its stop passes as it was.
                    let index = self.index(part);
                    Self::write(out, json!({"type": "content_block_stop", "index": index}));
                }
            }
            Down::Calls { calls, .. } => {
                for call in calls {
                    let index = self.fresh();
                    Self::write(
                        out,
                        json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "tool_use", "id": call.id, "name": call.name,
                            "input": {}}}),
                    );
                    Self::write(
                        out,
                        json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": call.arguments}}),
                    );
                    Self::write(out, json!({"type": "content_block_stop", "index": index}));
                }
            }
            Down::ChoiceEnd { finish, .. } => {
                let open: Vec<Part> = self.open.iter().copied().collect();
                for part in open {
                    self.encode(Down::PartEnd { choice: 0, part }, out);
                }
                let reason = match finish {
                    Finish::Filtered => "end_turn".to_string(),
                    Finish::ToolCalls => "tool_use".to_string(),
                    Finish::Backend(Some(r)) => r,
                    Finish::Backend(None) => "end_turn".to_string(),
                };
                // Written when the message ends, so the `railyard` object can ride on it.
                self.stop = Some(reason);
            }
            Down::Done { railyard } => {
                let reason = self.stop.take().unwrap_or_else(|| {
                    self.delta
                        .as_ref()
                        .and_then(|d| d.get("delta"))
                        .and_then(|d| d.get("stop_reason"))
                        .and_then(Value::as_str)
                        .unwrap_or("end_turn")
                        .to_string()
                });
                self.stop_reason(&reason, railyard, out);
                Self::write(out, json!({"type": "message_stop"}));
            }
            Down::Refused {
                finish: true,
                text,
                railyard,
                ..
            } => {
                let part = u64::MAX;
                let index = self.open_text(part, out);
                Self::write(
                    out,
                    json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": text}}),
                );
                Self::write(out, json!({"type": "content_block_stop", "index": index}));
                self.open.remove(&part);
                self.stop_reason("refusal", Some(railyard), out);
                Self::write(out, json!({"type": "message_stop"}));
            }
            Down::Refused {
                message, railyard, ..
            } => {
                let mut event = error::anthropic(error::POLICY_VIOLATION.0, &message);
                event["railyard"] = railyard;
                Self::write(out, event)
            }
            Down::BackendError(frame) => Self::write(out, frame.data),
            Down::Error { message, .. } => {
                Self::write(out, error::anthropic(error::anthropic_kind(502), &message))
            }
        }
    }
}
