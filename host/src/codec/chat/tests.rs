//! The chat codec: requests and replies both ways, and its stream events.

use super::*;
use crate::codec::sse;
use crate::codec::stream::{Down, StreamCodec, Up};
use crate::model::ToolCall;

fn event(data: &str) -> sse::SseEvent {
    sse::SseEvent {
        event: None,
        data: data.into(),
    }
}

#[test]
fn request_round_trips_and_edits_replace_messages() {
    let body = json!({"model": "m", "stream": true, "x": 1,
        "messages": [{"role": "user", "content": "hi", "x-msg": true}]});
    let Value::Object(map) = body.clone() else {
        unreachable!()
    };
    let (request, mut payload) = Chat::decode_request(map).unwrap();
    assert!(Chat::stream_requested(&request));
    let same: Value =
        serde_json::from_slice(&Chat::encode_request(&request, &payload, false, b"")).unwrap();
    assert_eq!(same, body);
    payload.messages[0].content = Some(crate::model::Content::Text("[EMAIL]".into()));
    let edited: Value =
        serde_json::from_slice(&Chat::encode_request(&request, &payload, true, b"")).unwrap();
    assert_eq!(edited["messages"][0]["content"], "[EMAIL]");
    assert_eq!(edited["messages"][0]["x-msg"], true);
    assert_eq!(edited["x"], 1);
}

/// How a message was spelled (content absent or `null`, an empty `tool_calls`, the legacy
/// shapes) is the codec's own state: written back as it came, through the value and the fast
/// writer alike, and a message the codec did not read gets its defaults.
#[test]
fn messages_are_written_back_as_they_were_spelled() {
    let messages = json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": []},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "ok"},
        {"role": "assistant", "content": null, "function_call": {"name": "g", "arguments": "{}"}},
        {"role": "function", "name": "g", "content": "done"}
    ]);
    let payload = crate::model::Payload::from_openai(&json!({"messages": messages})).unwrap();
    assert_eq!(payload.messages_json(), messages);
    for (m, want) in payload.messages.iter().zip(messages.as_array().unwrap()) {
        let mut out = Vec::new();
        m.write_openai(&mut out);
        assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), *want);
    }
    // A call removed by a policy takes its key with it; one read empty keeps it.
    let mut emptied = payload.messages[2].clone();
    emptied.tool_calls.clear();
    assert_eq!(
        emptied.to_openai(),
        json!({"role": "assistant", "content": null})
    );
    // Read without a content key, written without one; made elsewhere, written as `null`.
    assert_eq!(payload.messages[1].to_openai().get("content"), None);
    let made = Message::reply(
        None,
        vec![ToolCall::function("2".into(), "f".into(), "{}".into())],
    );
    assert_eq!(made.to_openai()["content"], Value::Null);
    assert!(made.wire == crate::model::Wire::default());
    assert!(payload.messages[1].wire != made.wire);
}

#[test]
fn reply_with_removed_calls_is_filtered() {
    let body = json!({"id": "c", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}],
        "usage": {"total_tokens": 3}});
    let Value::Object(map) = body else {
        unreachable!()
    };
    let (reply, mut messages) = Chat::decode_reply(map).unwrap();
    let mut m = messages.remove(0);
    m.tool_calls.clear();
    m.content = Some(crate::model::Content::Text("no".into()));
    let out = Chat::encode_reply(
        reply,
        vec![Judged {
            message: m,
            calls_removed: true,
            calls_added: false,
            edited: false,
        }],
        Some(json!({"r": 1})),
    );
    assert_eq!(out["choices"][0]["finish_reason"], "content_filter");
    assert_eq!(out["choices"][0]["message"]["content"], "no");
    assert!(out["choices"][0]["message"].get("tool_calls").is_none());
    assert_eq!(out["usage"]["total_tokens"], 3);
    assert_eq!(out["railyard"]["r"], 1);
}

#[test]
fn stream_events_decode_to_text_calls_and_finish() {
    let mut s = ChatStream::default();
    let up = s
        .decode(event(
            r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi","tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a"}}]},"finish_reason":null}]}"#,
        ))
        .unwrap();
    assert!(matches!(&up[0], Up::Pass(_)), "role passes at once");
    assert!(
        matches!(&up[1], Up::Call { index: 0, id: Some(id), name: Some(n), .. } if id == "c1" && n == "f")
    );
    assert_eq!(
        up[2],
        Up::Text {
            choice: 0,
            part: 0,
            text: "Hi".into()
        }
    );
    let up = s
        .decode(event(
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ))
        .unwrap();
    assert_eq!(
        up,
        vec![
            Up::PartEnd { choice: 0, part: 0 },
            Up::ChoiceEnd {
                choice: 0,
                finish: Some("stop".into())
            }
        ]
    );
    assert_eq!(s.decode(event("[DONE]")).unwrap(), vec![Up::Done]);
    assert!(s.decode(event("not json")).is_err());
}

#[test]
fn stream_encodes_with_the_backend_template() {
    let mut s = ChatStream::default();
    s.decode(event(r#"{"id":"x","model":"m","choices":[]}"#))
        .unwrap();
    let mut out = Vec::new();
    s.encode(
        Down::Calls {
            choice: 0,
            calls: vec![ToolCall::function("c1".into(), "f".into(), "{}".into())],
        },
        &mut out,
    );
    s.encode(Down::Done { railyard: None }, &mut out);
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(r#""id":"x""#) && text.contains(r#""model":"m""#),
        "{text}"
    );
    assert!(text.contains(r#""tool_calls":[{"id":"c1""#), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"));
}
