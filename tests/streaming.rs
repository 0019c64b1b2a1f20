//! Streaming (SSE): values split across chunks are still caught, blocked tool calls never reach
//! the client, finish and usage chunks pass through.

use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

fn bundled() -> std::path::PathBuf {
    root().join("policies/railyard.toml")
}

fn stream_request() -> Value {
    json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})
}

#[test]
fn a_value_split_across_chunks_is_redacted() {
    let mut events = vec![
        text_chunk("Sure. Write to jane.do"),
        text_chunk("e@exam"),
        text_chunk("ple.com any time. "),
    ];
    // Enough ordinary text after it that the window moves past the address mid-stream.
    for _ in 0..12 {
        events.push(text_chunk(
            "This sentence is filler text to move the window along. ",
        ));
    }
    events.push(finish_chunk("stop"));
    events.push(
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 30, "total_tokens": 33}})
        .to_string(),
    );
    events.push("[DONE]".into());
    let backend = MockBackend::start(Script::Sse(events, Duration::from_millis(2)));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let reply = post(daemon.addr, "/v1/chat/completions", &stream_request());
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let text = reply.streamed_text();
    assert!(!reply.body.contains("jane.do"), "{}", reply.body);
    assert!(
        text.starts_with("Sure. Write to [EMAIL] any time. This sentence"),
        "{text}"
    );
    assert_eq!(text.matches("filler").count(), 12, "no text lost: {text}");
    let events = reply.events();
    assert_eq!(events.last().unwrap(), "[DONE]");
    assert!(events
        .iter()
        .any(|e| e.contains("\"finish_reason\":\"stop\"")));
    assert!(
        events.iter().any(|e| e.contains("\"total_tokens\":33")),
        "usage passes through"
    );
    // Text was released before the end of the stream, not all held to the finish.
    let first_text = events
        .iter()
        .position(|e| e.contains("\"content\""))
        .unwrap();
    let finish = events
        .iter()
        .position(|e| e.contains("finish_reason\":\"stop"))
        .unwrap();
    assert!(
        finish - first_text > 2,
        "text streamed in several chunks: {events:?}"
    );
}

#[test]
fn a_blocked_streamed_tool_call_never_reaches_the_client() {
    let frag = |v: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": v, "finish_reason": null}]}).to_string()
    };
    let events = vec![
        frag(json!({"role": "assistant", "content": null})),
        frag(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "delete_", "arguments": ""}}]}),
        ),
        frag(
            json!({"tool_calls": [{"index": 0, "function": {"name": "database", "arguments": "{\"conf"}}]}),
        ),
        frag(json!({"tool_calls": [{"index": 0, "function": {"arguments": "irm\":true}"}}]})),
        finish_chunk("tool_calls"),
        "[DONE]".into(),
    ];
    let backend = MockBackend::start(Script::Sse(events, Duration::from_millis(1)));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let reply = post(daemon.addr, "/v1/chat/completions", &stream_request());
    assert!(
        !reply.body.contains("tool_calls\":[{"),
        "no tool call delta may be emitted: {}",
        reply.body
    );
    assert!(!reply.body.contains("confirm"), "{}", reply.body);
    let events = reply.events();
    let error: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
    assert_eq!(error["error"]["type"], "policy_violation");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("delete_database"));
    assert_eq!(events.last().unwrap(), "[DONE]");
}

#[test]
fn an_allowed_streamed_tool_call_is_assembled_and_normalised() {
    let frag = |v: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": v, "finish_reason": null}]}).to_string()
    };
    let events = vec![
        frag(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"ci"}}]}),
        ),
        frag(json!({"tool_calls": [{"index": 0, "function": {"arguments": "ty\":\"Paris\"}"}}]})),
        finish_chunk("tool_calls"),
        "[DONE]".into(),
    ];
    let backend = MockBackend::start(Script::Sse(events, Duration::from_millis(1)));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let reply = post(daemon.addr, "/v1/chat/completions", &stream_request());
    let calls: Vec<Value> = reply
        .events()
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter(|v| v["choices"][0]["delta"]["tool_calls"].is_array())
        .collect();
    assert_eq!(
        calls.len(),
        1,
        "one assembled tool call delta: {}",
        reply.body
    );
    let call = &calls[0]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(model_id(call["id"].as_str().unwrap()), "call_1");
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(call["function"]["arguments"], "{\"city\":\"Paris\"}");
    assert!(reply.body.contains("\"finish_reason\":\"tool_calls\""));
}

#[test]
fn streamed_output_block_ends_with_an_error_event() {
    let cfg = write_config(&scripted(
        "no-output",
        "[\"output\"]",
        "",
        "{ mode = \"block\", text = \"stop right there\" }",
    ));
    let backend = MockBackend::start(Script::Sse(
        vec![text_chunk("hello"), finish_chunk("stop"), "[DONE]".into()],
        Duration::from_millis(1),
    ));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let reply = post(daemon.addr, "/v1/chat/completions", &stream_request());
    assert!(!reply.body.contains("hello"), "{}", reply.body);
    let events = reply.events();
    assert!(events[events.len() - 2].contains("stop right there"));
    assert_eq!(events.last().unwrap(), "[DONE]");
}

/// A worker arms its timers no further ahead than the header timeout (here 100 ms, so the
/// shortest step, 250 ms) and re-arms them (`util::deadline`); what a wait may last is still the
/// backend's timeout (900 ms).
#[test]
fn the_backend_timeout_holds_when_waits_are_armed_in_steps() {
    let cfg =
        write_config("[server]\nheader_read_timeout_ms = 100\n\n[backend]\ntimeout_ms = 900\n");
    // Silences longer than a step and shorter than the timeout: the whole stream arrives.
    let events = vec![
        text_chunk("one "),
        text_chunk("two"),
        finish_chunk("stop"),
        "[DONE]".into(),
    ];
    let backend = MockBackend::start(Script::Sse(events, Duration::from_millis(600)));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let reply = post(daemon.addr, "/v1/chat/completions", &stream_request());
    assert_eq!(reply.streamed_text(), "one two", "{}", reply.body);
    assert_eq!(reply.events().last().unwrap(), "[DONE]");

    // A silence past the timeout ends the stream with the timeout's error.
    let stalled = vec![text_chunk("one "), text_chunk("two")];
    let backend = MockBackend::start(Script::Sse(stalled, Duration::from_millis(2000)));
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let reply = post(daemon.addr, "/v1/chat/completions", &stream_request());
    assert_eq!(reply.streamed_text(), "one ", "{}", reply.body);
    assert!(reply.body.contains("backend_timeout"), "{}", reply.body);

    // A backend that never answers: a 504, not before the timeout.
    let hang = MockBackend::start(Script::Hang);
    let daemon = Daemon::start(&cfg.path, &hang.url());
    let mut req = stream_request();
    req["stream"] = json!(false);
    let started = std::time::Instant::now();
    let r = post(daemon.addr, "/v1/chat/completions", &req);
    assert_eq!(r.status, 504);
    assert_eq!(r.json()["error"]["code"], "backend_timeout");
    assert!(started.elapsed() >= Duration::from_millis(900));
}

/// A stream request refused before the backend is asked is answered as a stream (#46: SDK
/// stream iterators read nothing from a JSON body), ending as a block mid-stream would.
#[test]
fn inbound_block_on_a_stream_request_is_a_refused_stream() {
    let backend = MockBackend::start(Script::Sse(vec!["[DONE]".into()], Duration::from_millis(1)));
    let daemon = Daemon::start(&bundled(), &backend.url());
    let mut req = stream_request();
    req["messages"] = json!([{"role": "tool", "tool_call_id": "nope", "content": "x"}]);
    let reply = post(daemon.addr, "/v1/chat/completions", &req);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = reply.events();
    assert_eq!(
        events.last().map(String::as_str),
        Some("[DONE]"),
        "{events:?}"
    );
    let error: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
    assert_eq!(
        error["railyard"]["blocked"]["rail"], "tool_result",
        "{error}"
    );
    assert_eq!(error["error"]["type"], "policy_violation", "{error}");
    assert!(backend.seen().is_empty());
}

#[test]
fn client_disconnect_cancels_the_backend_stream() {
    let events: Vec<String> = (0..400).map(|i| text_chunk(&format!("word{i} "))).collect();
    let backend = MockBackend::start(Script::Sse(events, Duration::from_millis(25)));
    let daemon = Daemon::start(&bundled(), &backend.url());
    {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(daemon.addr).unwrap();
        let body = stream_request().to_string();
        write!(s, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", crate::http::DEMO_KEY, body.len()).unwrap();
        let mut buf = [0u8; 512];
        let _ = s.read(&mut buf).unwrap();
    } // the client hangs up after the first bytes
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    while !*backend.hung_up.lock().unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "the backend stream was not cancelled"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

mod window_property {
    //! The streaming window, as a property (#20): a reply made of filler and PII values, cut into
    //! chunks at random boundaries and streamed through the daemon, never releases a value the
    //! output rail redacts when it judges the whole text at once.

    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};

    fn luhn(digits: &[u32]) -> u32 {
        let sum: u32 = digits
            .iter()
            .rev()
            .enumerate()
            .map(|(i, &d)| {
                if i % 2 == 0 {
                    let x = d * 2;
                    if x > 9 {
                        x - 9
                    } else {
                        x
                    }
                } else {
                    d
                }
            })
            .sum();
        (10 - sum % 10) % 10
    }

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            (
                "[a-z]{1,10}(\\.[a-z]{1,8})?",
                "[a-z]{2,10}",
                prop::sample::select(vec!["com", "org", "de", "io"])
            )
                .prop_map(|(local, domain, tld)| format!("{local}@{domain}.{tld}")),
            (1u32..=665, 1u32..=99, 1u32..=9999)
                .prop_map(|(a, g, s)| format!("{a:03}-{g:02}-{s:04}")),
            prop::collection::vec(0u32..10, 15).prop_map(|mut d| {
                d[0] = 4;
                d.push(luhn(&d));
                let s: String = d
                    .iter()
                    .map(|x| char::from_digit(*x, 10).unwrap())
                    .collect();
                format!("{} {} {} {}", &s[0..4], &s[4..8], &s[8..12], &s[12..16])
            }),
            (1u8..=223, any::<u8>(), any::<u8>(), 1u8..=254)
                .prop_map(|(a, b, c, d)| format!("{a}.{b}.{c}.{d}")),
        ]
    }

    fn filler() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec![
                "the",
                "order",
                "ships",
                "today,",
                "call",
                "me",
                "at",
                "or",
                "write",
                "to",
                "thanks.",
                "see",
                "ticket",
                "#4411",
                "on",
                "2024-05-01",
                "and",
                "version",
                "1.2.3.",
                "(done)",
            ]),
            1..12,
        )
        .prop_map(|w| w.join(" "))
    }

    /// Segments (filler or a value), and chunk sizes to cut the joined text with.
    fn reply() -> impl Strategy<Value = (Vec<(bool, String)>, Vec<usize>)> {
        (
            prop::collection::vec(
                prop_oneof![3 => filler().prop_map(|f| (false, f)), 1 => value().prop_map(|v| (true, v))],
                2..24,
            ),
            prop::collection::vec(1usize..48, 1..16),
        )
    }

    fn run(window: usize, cases: u32) {
        let backend = MockBackend::start(Script::Sse(Vec::new(), Duration::ZERO));
        let cfg = write_config(&format!(
            "[server]\nstream_window_bytes = {window}\n\n[[plugins]]\nname = \"pii\"\npath = \"{}\"\nrails = [\"output\"]\n",
            plugin("pii_filter").display()
        ));
        let daemon = Daemon::start(&cfg.path, &backend.url());
        let seen = std::cell::Cell::new(0usize);
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&reply(), |(segments, sizes)| {
                let text = segments
                    .iter()
                    .map(|(_, s)| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                // What the output rail redacts when it sees the whole reply.
                let whole = post(
                    daemon.addr,
                    "/v1/check",
                    &json!({"rail": "output", "messages": [
                        {"role": "user", "content": "hi"}, {"role": "assistant", "content": text}]}),
                )
                .json();
                let judged = whole["payload"]["messages"][1]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let redacted: Vec<&String> = segments
                    .iter()
                    .filter(|(is_value, v)| *is_value && !judged.contains(v.as_str()))
                    .map(|(_, v)| v)
                    .collect();
                prop_assert!(!judged.is_empty(), "{}", whole);
                seen.set(seen.get() + redacted.len());
                // The same reply, streamed in chunks of the given sizes.
                let mut events = Vec::new();
                let mut at = 0;
                for size in sizes.iter().cycle() {
                    if at >= text.len() {
                        break;
                    }
                    let end = (at + size).min(text.len());
                    events.push(text_chunk(&text[at..end]));
                    at = end;
                }
                events.push(finish_chunk("stop"));
                events.push("[DONE]".into());
                backend.set(Script::Sse(events, Duration::ZERO));
                let reply = post(
                    daemon.addr,
                    "/v1/chat/completions",
                    &json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
                );
                prop_assert_eq!(reply.status, 200);
                let streamed = reply.streamed_text();
                let words = |t: &str| t.split_whitespace().filter(|w| *w == "thanks.").count();
                prop_assert_eq!(words(&streamed), words(&judged), "no text lost: {}", streamed);
                // Not the value, nor any 8 bytes of it the whole-text judgement did not keep
                // (a value released in part before the rest arrived).
                for value in redacted {
                    let n = value.len().min(8);
                    for piece in (0..=value.len() - n).map(|i| &value[i..i + n]) {
                        if streamed.contains(piece) && !judged.contains(piece) {
                            return Err(TestCaseError::fail(format!(
                                "window {window}: {piece:?} of {value:?} was released; streamed: {streamed:?}"
                            )));
                        }
                    }
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            seen.get() > cases as usize / 2,
            "the replies held values the rail redacts"
        );
    }

    #[test]
    fn nothing_the_output_rail_redacts_is_released_whatever_the_chunk_boundaries() {
        run(256, 48);
    }

    #[test]
    fn the_same_holds_with_a_small_window() {
        // The smallest window that still holds a whole value of these kinds (an email may be
        // ~35 bytes): a smaller one is the operator's trade of safety for latency.
        run(64, 48);
    }
}

/// A reply unsafe only as a whole (here: it holds both words, far apart) passes every window of
/// it; its last judgement sees the whole reply, so it is refused at its end. The client saw the
/// text released before, never the end.
#[test]
fn a_reply_unsafe_only_as_a_whole_is_refused_at_its_end() {
    let config = |words: &str| {
        write_config(&format!(
            "[server]\nstream_window_bytes = 16\n\n{}",
            scripted(
                "whole",
                "[\"output\"]",
                "",
                &format!("{{ mode = \"block-if-all\", text = \"{words}\" }}"),
            )
        ))
    };
    let mut events = vec![text_chunk("alpha ")];
    for _ in 0..20 {
        events.push(text_chunk("some filler words "));
    }
    events.extend([text_chunk("omega."), finish_chunk("stop"), "[DONE]".into()]);
    let backend = MockBackend::start(Script::Sse(events, Duration::from_millis(1)));
    let cfg = config("alpha,omega");
    let daemon = Daemon::start_logged(&cfg.path, &["--backend", &backend.url()]);
    let body = stream_request().to_string();
    let reply = crate::records::send(&daemon, "whole", None, body.as_bytes());
    let text = reply.streamed_text();
    // Text went out before the end, as it streamed; the end never did.
    assert!(text.starts_with("alpha some filler"), "{}", reply.body);
    assert!(!text.contains("omega"), "{}", reply.body);
    assert!(!reply.body.contains("omega."), "{}", reply.body);
    let events = reply.events();
    assert!(
        events[events.len() - 2].contains("holds all of alpha,omega"),
        "{events:?}"
    );
    let r = crate::records::record(&daemon, "whole");
    assert_eq!(r["outcome"], "refused", "{r}");
    assert_eq!(r["blocked"]["rail"], "output", "{r}");
    assert_eq!(r["blocked"]["policy"], "whole", "{r}");

    // A reply that is safe as a whole streams whole.
    let cfg = config("alpha,zeta");
    let daemon = Daemon::start(&cfg.path, &backend.url());
    let reply = post(daemon.addr, "/v1/chat/completions", &stream_request());
    let text = reply.streamed_text();
    assert!(text.ends_with("filler words omega."), "{}", reply.body);
    assert_eq!(text.matches("filler").count(), 20, "{text}");
}
