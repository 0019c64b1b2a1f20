//! The Messages codec: requests and replies both ways, and its stream events.

use super::*;
use crate::codec::sse::SseEvent;
use crate::codec::stream::{Down, StreamCodec, Up};

fn map(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[test]
fn tool_results_are_tool_messages_and_regroup_on_the_way_out() {
    let body = json!({"model": "claude", "max_tokens": 10, "system": "be nice",
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search"}],
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "checking"},
                {"type": "tool_use", "id": "tu1", "name": "get_weather", "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu1", "content": "sunny at a@b.co"},
                {"type": "text", "text": "thanks"}]}]});
    let (request, payload) = Messages::decode_request(map(body.clone())).unwrap();
    let roles: Vec<&str> = payload.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
    assert_eq!(
        payload.messages[2].tool_calls[0].arguments,
        r#"{"city":"Oslo"}"#
    );
    assert_eq!(payload.messages[3].tool_call_id.as_deref(), Some("tu1"));
    assert_eq!(
        payload.tools[0].parameters,
        Some(crate::model::Schema::of(&json!({"type": "object"})))
    );
    assert_eq!(&*payload.tools[1].kind, "web_search_20250305");
    let mut edited = payload.clone();
    edited.messages[3].content = Some(Content::Text("sunny at [EMAIL]".into()));
    let out: Value =
        serde_json::from_slice(&Messages::encode_request(&request, &edited, true, b"")).unwrap();
    let mut want = body;
    want["messages"][2]["content"][0]["content"] = json!("sunny at [EMAIL]");
    assert_eq!(out["messages"], want["messages"]);
    assert_eq!(out["system"], "be nice");
}

#[test]
fn replies_keep_what_passed() {
    let body = json!({"id": "msg", "type": "message", "role": "assistant", "stop_reason": "tool_use",
        "content": [{"type": "text", "text": "a@b.co"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]});
    let (reply, messages) = Messages::decode_reply(map(body)).unwrap();
    let mut m = messages.into_iter().next().unwrap();
    m.tool_calls.clear();
    m.content = Some(Content::Parts(json!([{"type": "text", "text": "[EMAIL]"}])));
    let out = Messages::encode_reply(
        reply,
        vec![Judged {
            message: m,
            calls_removed: true,
            calls_added: false,
            edited: false,
        }],
        None,
    );
    assert_eq!(out["content"], json!([{"type": "text", "text": "[EMAIL]"}]));
    assert_eq!(out["stop_reason"], "end_turn");
}

fn event(v: Value) -> SseEvent {
    SseEvent {
        event: v["type"].as_str().map(str::to_string),
        data: v.to_string(),
    }
}

#[test]
fn stream_holds_tool_use_and_renumbers_blocks() {
    let mut s = MessagesStream::default();
    let mut out = Vec::new();
    let feed = |s: &mut MessagesStream, v: Value, out: &mut Vec<u8>| -> Vec<Up> {
        let ups = s.decode(event(v)).unwrap();
        for up in &ups {
            if let Up::Pass(f) = up {
                s.encode(Down::Pass(f.clone()), out);
            }
        }
        ups
    };
    feed(
        &mut s,
        json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}}}),
        &mut out,
    );
    let ups = feed(
        &mut s,
        json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": "{\"a\":1}"}}),
        &mut out,
    );
    assert!(matches!(&ups[0], Up::Call { arguments, .. } if arguments == "{\"a\":1}"));
    assert!(feed(
        &mut s,
        json!({"type": "content_block_stop", "index": 0}),
        &mut out
    )
    .is_empty());
    feed(
        &mut s,
        json!({"type": "content_block_start", "index": 1,
        "content_block": {"type": "text", "text": ""}}),
        &mut out,
    );
    let ups = feed(
        &mut s,
        json!({"type": "content_block_delta", "index": 1,
        "delta": {"type": "text_delta", "text": "ok"}}),
        &mut out,
    );
    assert_eq!(
        ups,
        vec![Up::Text {
            choice: 0,
            part: 1,
            text: "ok".into()
        }]
    );
    s.encode(
        Down::Text {
            choice: 0,
            part: 1,
            text: "ok".into(),
        },
        &mut out,
    );
    s.encode(Down::PartEnd { choice: 0, part: 1 }, &mut out);
    s.encode(
        Down::ChoiceEnd {
            choice: 0,
            finish: crate::codec::stream::Finish::Filtered,
        },
        &mut out,
    );
    s.encode(Down::Done { railyard: None }, &mut out);
    let text = String::from_utf8(out).unwrap();
    assert!(
        !text.contains("tool_use"),
        "the held call never shows: {text}"
    );
    assert!(
        text.contains(r#""index":0"#) && !text.contains(r#""index":1"#),
        "{text}"
    );
    assert!(text.contains(r#""stop_reason":"end_turn""#), "{text}");
    assert!(text.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
}

/// Found by fuzzing: a user message without content was dropped from what the rails saw, while
/// the request forwarded as sent still carried it.
#[test]
fn a_message_without_content_is_refused_and_an_empty_one_kept() {
    let body = |content: Option<Value>| {
        let mut m = json!({"role": "user", "contnet": "smuggled?"});
        if let Some(c) = content {
            m["content"] = c;
        }
        map(
            json!({"model": "claude", "max_tokens": 10, "messages": [m, {"role": "user", "content": "hi"}]}),
        )
    };
    let Err(err) = Messages::decode_request(body(None)) else {
        panic!("decoded")
    };
    assert_eq!(err.path, "messages[0].content");
    let (request, payload) = Messages::decode_request(body(Some(json!([])))).unwrap();
    assert_eq!(
        payload.messages.len(),
        2,
        "the empty message is still judged"
    );
    let out: Value =
        serde_json::from_slice(&Messages::encode_request(&request, &payload, true, b"")).unwrap();
    assert_eq!(out["messages"].as_array().unwrap().len(), 2, "{out}");
}

/// Found by fuzzing: a `tool_use` whose input is not an object was judged as that JSON but went
/// to the backend as `{}`.
#[test]
fn a_tool_use_input_must_be_an_object() {
    let body = map(json!({"model": "claude", "max_tokens": 10, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "rm -rf /"}]}]}));
    let Err(err) = Messages::decode_request(body) else {
        panic!("decoded")
    };
    assert_eq!(err.path, "messages[1].content[0].input");
}
