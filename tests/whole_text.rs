//! Text a reader takes as one is judged as one (#46), through the running daemon with the
//! bundled policies: a value split across a reply's two `output_text` parts or two text blocks
//! (streamed, read by the OpenAI and Anthropic SDKs, and not), across a message's text parts on
//! the way in, and a secret longer than the stream window streamed a byte at a time; a run that
//! never ends is refused, not released. The texts a stream carries beside the reply's (reasoning
//! summaries, refusals, thinking, citations, annotations) are judged too.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

const PII: &str = "jane.doe@example.com";

fn daemon(script: Script) -> (Daemon, MockBackend, TempConfig) {
    let backend = MockBackend::start(script);
    let cfg = bundled_with(&[]);
    let daemon = Daemon::start(&cfg.path, &backend.url());
    (daemon, backend, cfg)
}

/// A streamed reply read by a real SDK (`read_stream.py`).
fn sdk(d: &Daemon, door: &str, request: Value) -> Value {
    let base = match door {
        "responses" => format!("http://{}/v1", d.addr),
        _ => format!("http://{}", d.addr),
    };
    crate::doors::run("read_stream.py", &[&base, door, &request.to_string()])
}

/// `text` in pieces of `n` bytes (on char boundaries: these texts are ASCII).
fn pieces(text: &str, n: usize) -> Vec<&str> {
    (0..text.len())
        .step_by(n)
        .map(|i| &text[i..(i + n).min(text.len())])
        .collect()
}

/// Nothing of the address but what a redaction leaves: no 7 bytes of it.
fn no_piece_of(body: &str, value: &str) {
    for i in 0..=value.len() - 7 {
        assert!(
            !body.contains(&value[i..i + 7]),
            "{:?} of {value:?} reached the client: {body}",
            &value[i..i + 7]
        );
    }
}

fn responses_events() -> Vec<String> {
    let summary = format!("thinking about {PII} now");
    let refusal = format!("I will not mail {PII}");
    let mut e = vec![
        json!({"type": "response.created", "response": {"id": "resp_1", "object": "response",
            "status": "in_progress", "model": "m", "output": []}}),
        json!({"type": "response.output_item.added", "output_index": 0,
            "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        json!({"type": "response.reasoning_summary_part.added", "item_id": "rs_1",
            "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
    ];
    for p in pieces(&summary, 3) {
        e.push(
            json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1",
            "output_index": 0, "summary_index": 0, "delta": p}),
        );
    }
    e.extend([
        json!({"type": "response.reasoning_summary_text.done", "item_id": "rs_1",
            "output_index": 0, "summary_index": 0, "text": summary}),
        json!({"type": "response.reasoning_summary_part.done", "item_id": "rs_1",
            "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": summary}}),
        json!({"type": "response.output_item.done", "output_index": 0,
            "item": {"type": "reasoning", "id": "rs_1",
                "summary": [{"type": "summary_text", "text": summary}]}}),
        json!({"type": "response.output_item.added", "output_index": 1,
            "item": {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress",
                "content": []}}),
    ]);
    let annotation = json!({"type": "url_citation", "url": "https://news.test/",
        "title": format!("mail {PII}"), "start_index": 0, "end_index": 1});
    // The address split across the message's two output_text parts.
    let texts = ["Write to jane.do", "e@example.com today."];
    for (ci, text) in texts.iter().enumerate() {
        e.push(
            json!({"type": "response.content_part.added", "item_id": "msg_1",
            "output_index": 1, "content_index": ci,
            "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
        e.push(
            json!({"type": "response.output_text.delta", "item_id": "msg_1",
            "output_index": 1, "content_index": ci, "delta": text}),
        );
        if ci == 1 {
            e.push(
                json!({"type": "response.output_text.annotation.added", "item_id": "msg_1",
                "output_index": 1, "content_index": 1, "annotation_index": 0,
                "annotation": annotation}),
            );
        }
        e.push(
            json!({"type": "response.output_text.done", "item_id": "msg_1",
            "output_index": 1, "content_index": ci, "text": text}),
        );
        e.push(
            json!({"type": "response.content_part.done", "item_id": "msg_1",
            "output_index": 1, "content_index": ci,
            "part": {"type": "output_text", "text": text, "annotations": []}}),
        );
    }
    let message = json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": texts[0], "annotations": []},
            {"type": "output_text", "text": texts[1], "annotations": [annotation]}]});
    let refused = json!({"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
        "content": [{"type": "refusal", "refusal": refusal}]});
    e.extend([
        json!({"type": "response.output_item.done", "output_index": 1, "item": message}),
        json!({"type": "response.output_item.added", "output_index": 2,
            "item": {"type": "message", "id": "msg_2", "role": "assistant", "content": []}}),
        json!({"type": "response.content_part.added", "item_id": "msg_2", "output_index": 2,
            "content_index": 0, "part": {"type": "refusal", "refusal": ""}}),
    ]);
    for p in pieces(&refusal, 4) {
        e.push(
            json!({"type": "response.refusal.delta", "item_id": "msg_2", "output_index": 2,
            "content_index": 0, "delta": p}),
        );
    }
    e.extend([
        json!({"type": "response.refusal.done", "item_id": "msg_2", "output_index": 2,
            "content_index": 0, "refusal": refusal}),
        json!({"type": "response.content_part.done", "item_id": "msg_2", "output_index": 2,
            "content_index": 0, "part": {"type": "refusal", "refusal": refusal}}),
        json!({"type": "response.output_item.done", "output_index": 2, "item": refused}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "object": "response",
            "status": "completed", "model": "m", "output": [message, refused],
            "usage": {"input_tokens": 1, "output_tokens": 9, "total_tokens": 10}}}),
    ]);
    e.into_iter().map(|v| v.to_string()).collect()
}

#[test]
fn a_value_split_across_a_streamed_replys_parts_is_judged_whole_on_the_responses_door() {
    let (d, _b, _cfg) = daemon(Script::Sse(responses_events(), Duration::ZERO));
    let request = json!({"model": "m", "stream": true, "input": "hi"});
    let raw = post(d.addr, "/v1/responses", &request);
    assert_eq!(raw.status, 200, "{}", raw.body);
    no_piece_of(&raw.body, PII);
    let read = sdk(&d, "responses", request);
    assert!(read["raised"].is_null(), "{read}");
    assert_eq!(read["output_text"], "Write to [EMAIL] today.", "{read}");
    let events = &read["events"];
    assert_eq!(
        events["response.output_text.delta"], "Write to [EMAIL] today.",
        "{read}"
    );
    assert_eq!(
        events["response.reasoning_summary_text.delta"], "thinking about [EMAIL] now",
        "{read}"
    );
    assert_eq!(
        events["response.refusal.delta"], "I will not mail [EMAIL]",
        "{read}"
    );
    // What the SDK assembled from the items agrees with the deltas.
    let output = read["output"].as_array().unwrap();
    assert_eq!(
        output[0]["summary"][0]["text"], "thinking about [EMAIL] now",
        "{read}"
    );
    assert_eq!(
        output[2]["content"][0]["refusal"],
        "I will not mail [EMAIL]"
    );
    assert_eq!(
        output[1]["content"][1]["annotations"][0]["title"], "mail [EMAIL]",
        "{read}"
    );
}

fn anthropic_events() -> Vec<String> {
    let thinking = format!("the user is {PII} it seems");
    let mut e = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "m", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 0}}}),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
    ];
    for p in pieces(&thinking, 3) {
        e.push(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": p}}));
    }
    e.extend([
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "signature_delta", "signature": "EqQBCgIYAh"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "text_delta", "text": "Write to jane.do"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2,
            "content_block": {"type": "text", "text": "", "citations": []}}),
        json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "text_delta", "text": "e@example.com today."}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "citations_delta",
            "citation": {"type": "web_search_result_location", "url": "https://news.test/",
                "title": format!("mail {PII}"), "cited_text": format!("mail {PII}"),
                "encrypted_index": "Eo8"}}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ]);
    e.into_iter().map(|v| v.to_string()).collect()
}

#[test]
fn a_value_split_across_a_streamed_replys_blocks_is_judged_whole_on_the_messages_door() {
    let (d, _b, _cfg) = daemon(Script::Sse(anthropic_events(), Duration::ZERO));
    let request = json!({"model": "m", "max_tokens": 50, "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    let raw = post_anthropic(d.addr, &request);
    assert_eq!(raw.status, 200, "{}", raw.body);
    no_piece_of(&raw.body, PII);
    let read = sdk(&d, "messages", request);
    assert!(read["raised"].is_null(), "{read}");
    assert_eq!(read["text"], "Write to [EMAIL] today.", "{read}");
    assert_eq!(
        read["events"]["thinking_delta"], "the user is [EMAIL] it seems",
        "{read}"
    );
    let content = read["content"].as_array().unwrap();
    assert_eq!(
        content[0]["signature"], "EqQBCgIYAh",
        "the signature passes"
    );
    let citation = &content[2]["citations"][0];
    assert_eq!(citation["cited_text"], "mail [EMAIL]", "{read}");
    assert_eq!(citation["encrypted_index"], "Eo8", "{read}");
}

/// A POST with the Anthropic SDK's headers.

#[test]
fn a_value_split_across_a_whole_replys_parts_or_blocks_is_judged_whole() {
    let response = json!({"id": "resp_1", "object": "response", "status": "completed", "model": "m",
        "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Write to jane.do", "annotations": []},
                {"type": "output_text", "text": "e@example.com today.", "annotations": []}]}]});
    let (d, backend, _cfg) = daemon(Script::Json(200, response));
    let r = post(
        d.addr,
        "/v1/responses",
        &json!({"model": "m", "input": "hi"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    no_piece_of(&r.body, PII);
    let content = &r.json()["output"][0]["content"];
    assert_eq!(content[0]["text"], "Write to [EMAIL]", "{}", r.body);
    assert_eq!(content[1]["text"], " today.", "{}", r.body);

    backend.set(Script::Json(
        200,
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "Write to jane.do"},
                {"type": "text", "text": "e@example.com today."}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}),
    ));
    let r = post_anthropic(
        d.addr,
        &json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    no_piece_of(&r.body, PII);
    let text: String = r.json()["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert_eq!(text, "Write to [EMAIL] today.", "{}", r.body);
}

#[test]
fn a_value_split_across_a_messages_text_parts_is_judged_whole_on_the_way_in() {
    let (d, backend, _cfg) = daemon(Script::Json(
        200,
        completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    ));
    let r = post(
        d.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "my address is jane.do"},
            {"type": "text", "text": "e@example.com, thanks"}]}]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let sent = &backend.seen()[0];
    no_piece_of(&String::from_utf8_lossy(&sent.raw), PII);
    let parts = &sent.body["messages"][0]["content"];
    assert_eq!(parts[0]["text"], "my address is [EMAIL]", "{parts}");
    assert_eq!(parts[1]["text"], ", thanks", "{parts}");
}

/// A JSON Web Token of 700 bytes (the window holds 256), streamed one byte per event.
#[test]
fn a_secret_longer_than_the_window_is_judged_whole_however_it_streams() {
    let jwt = format!(
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{}.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "c3ViIjoiMTIzNDU2Nzg5MCIsIm5hbWUiOiJKb2huIERvZSJ9".repeat(12)
    );
    assert!(jwt.len() > 600);
    let text = format!(
        "Your token: {jwt} keep it safe. {}",
        "Filler words here. ".repeat(20)
    );
    let mut events: Vec<String> = pieces(&text, 1).into_iter().map(text_chunk).collect();
    events.push(finish_chunk("stop"));
    events.push("[DONE]".into());
    let (d, _b, _cfg) = daemon(Script::Sse(events, Duration::ZERO));
    let r = post(
        d.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let streamed = r.streamed_text();
    for i in (0..jwt.len() - 12).step_by(5) {
        assert!(
            !streamed.contains(&jwt[i..i + 12]),
            "{:?} of the token was released: {streamed}",
            &jwt[i..i + 12]
        );
    }
    assert!(
        streamed.starts_with("Your token: [JWT] keep it safe. Filler"),
        "{streamed}"
    );
    assert_eq!(streamed.matches("Filler").count(), 20, "no text lost");
}

/// A run with no place to cut, longer than `[server] stream_hold_max_bytes`, is refused: never
/// released unjudged, never held without bound.
#[test]
fn a_run_past_the_hold_bound_is_refused() {
    let cfg = bundled_with(&[("[server]", "[server]\nstream_hold_max_bytes = 2048")]);
    let run = "A".repeat(6000);
    let mut events: Vec<String> = pieces(&run, 100).into_iter().map(text_chunk).collect();
    events.push(finish_chunk("stop"));
    events.push("[DONE]".into());
    let backend = MockBackend::start(Script::Sse(events, Duration::ZERO));
    let d = Daemon::start(&cfg.path, &backend.url());
    let r = post(
        d.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.contains("AAAAAAAA"), "{}", r.body);
    let events = r.events();
    let error: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
    assert_eq!(error["error"]["type"], "policy_violation", "{}", r.body);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stream_hold_max_bytes"),
        "{error}"
    );
}
