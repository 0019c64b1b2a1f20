//! The Responses codec: requests and replies both ways, and its stream events.

use super::*;
use crate::codec::sse::SseEvent;
use crate::codec::stream::{Down, StreamCodec, Up};

fn map(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[test]
fn items_become_turns_and_come_back_in_place() {
    let body = json!({"model": "m", "instructions": "be nice", "tools": [
            {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
            {"type": "web_search_preview"}],
        "input": [
            {"role": "user", "content": "weather?"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {"type": "function_call_output", "call_id": "c2", "output": "rain"}]});
    let (request, payload) = Responses::decode_request(map(body.clone())).unwrap();
    let roles: Vec<&str> = payload.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
    assert_eq!(
        payload.messages[2].tool_calls.len(),
        2,
        "one turn, two calls"
    );
    assert_eq!(
        &*payload.tools[1].kind, "web_search",
        "preview suffix dropped"
    );
    assert_eq!(
        payload.tools[0].parameters,
        Some(crate::model::Schema::of(&json!({"type": "object"})))
    );
    // Unedited: the same bytes' worth of JSON.
    let same: Value =
        serde_json::from_slice(&Responses::encode_request(&request, &payload, false, b"")).unwrap();
    assert_eq!(same, body);
    // Edited: rebuilt from the model, items the model does not know kept in place.
    let mut edited = payload.clone();
    edited.messages[3].content = Some(Content::Text("[REDACTED]".into()));
    let out: Value =
        serde_json::from_slice(&Responses::encode_request(&request, &edited, true, b"")).unwrap();
    let mut want = body.clone();
    want["input"][4]["output"] = json!("[REDACTED]");
    assert_eq!(out["input"], want["input"]);
    assert_eq!(out["instructions"], "be nice");
}

#[test]
fn a_string_input_stays_a_string() {
    let body = json!({"model": "m", "input": "mail a@b.co"});
    let (request, mut payload) = Responses::decode_request(map(body)).unwrap();
    payload.messages[0].content = Some(Content::Text("mail [EMAIL]".into()));
    let out: Value =
        serde_json::from_slice(&Responses::encode_request(&request, &payload, true, b"")).unwrap();
    assert_eq!(out["input"], "mail [EMAIL]");
}

#[test]
fn replies_keep_what_passed() {
    let body = json!({"id": "r", "object": "response", "output": [
        {"type": "reasoning", "id": "rs"},
        {"type": "message", "id": "m", "role": "assistant", "content": [
            {"type": "output_text", "text": "hi a@b.co", "annotations": []}]},
        {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "web_search_call", "id": "ws1", "status": "completed"}]});
    let (reply, messages) = Responses::decode_reply(map(body)).unwrap();
    let mut m = messages.into_iter().next().unwrap();
    assert_eq!(m.tool_calls.len(), 2);
    assert!(m.tool_calls[1].is_hosted() && m.tool_calls[1].name == "web_search");
    m.content = Some(Content::Parts(
        json!([{"type": "output_text", "text": "hi [EMAIL]", "annotations": []}]),
    ));
    m.tool_calls.remove(0);
    let out = Responses::encode_reply(
        reply,
        vec![Judged {
            message: m,
            calls_removed: false,
            calls_added: false,
            edited: false,
        }],
        None,
    );
    let types: Vec<&str> = out["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["reasoning", "message", "web_search_call"]);
    assert_eq!(out["output"][1]["content"][0]["text"], "hi [EMAIL]");
}

fn event(v: Value) -> SseEvent {
    SseEvent {
        event: v["type"].as_str().map(str::to_string),
        data: v.to_string(),
    }
}

#[test]
fn stream_holds_calls_and_rewrites_the_completed_response() {
    let mut s = ResponsesStream::new(json!("m"));
    let mut out = Vec::new();
    let msg = json!({"type": "message", "id": "m1", "role": "assistant", "content": []});
    for up in s
        .decode(event(
            json!({"type": "response.output_item.added", "output_index": 0, "item": msg}),
        ))
        .unwrap()
    {
        // Its strings (none but ids and words here) are judged as it passes.
        assert!(matches!(up, Up::Judge { .. }));
        if let Up::Judge { frame, .. } = up {
            s.encode(Down::Pass(frame), &mut out);
        }
    }
    let up = s
        .decode(event(
            json!({"type": "response.output_text.delta", "item_id": "m1",
            "output_index": 0, "content_index": 0, "delta": "hi a@b.co"}),
        ))
        .unwrap();
    assert!(matches!(&up[0], Up::Text { text, .. } if text == "hi a@b.co"));
    s.encode(
        Down::Text {
            choice: 0,
            part: 0,
            text: "hi [EMAIL]".into(),
        },
        &mut out,
    );
    let call = json!({"type": "function_call", "id": "fc1", "call_id": "c1", "name": "f", "arguments": ""});
    let up = s
        .decode(event(
            json!({"type": "response.output_item.added", "output_index": 1, "item": call}),
        ))
        .unwrap();
    assert!(
        matches!(&up[0], Up::Call { id: Some(id), .. } if id == "c1"),
        "held: {up:?}"
    );
    let up = s
        .decode(event(
            json!({"type": "response.completed", "response": {"id": "r", "output": []}}),
        ))
        .unwrap();
    assert!(matches!(up.last(), Some(Up::Done)));
    s.encode(Down::PartEnd { choice: 0, part: 0 }, &mut out);
    s.encode(Down::Done { railyard: None }, &mut out);
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("a@b.co"), "{text}");
    assert!(
        !text.contains("\"c1\""),
        "a call that did not pass never shows: {text}"
    );
    let completed = text
        .split("\n\n")
        .find(|e| e.contains("response.completed"))
        .unwrap();
    assert!(completed.contains("hi [EMAIL]"), "{completed}");
    let seqs: Vec<u64> = text
        .split("\n\n")
        .filter_map(|e| e.split("data: ").nth(1))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .map(|v| v["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
}
