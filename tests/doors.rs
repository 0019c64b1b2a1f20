//! Every door agents use (#15), with the clients agents use: the OpenAI Python SDK on the
//! Responses API (streamed and not, a whole tool loop), the OpenAI Agents SDK with its default
//! model and a function tool, the Anthropic Python SDK on the Messages API, and
//! `client.models.list()`. The same bundled policies judge every door: PII redacted both ways
//! (a value split across stream events included), an undeclared tool, schema-violating
//! arguments and an unlinked tool result blocked, streamed refusals in both `on_block_stream`
//! modes.

use crate::http::Daemon;
use crate::support::*;
use serde_json::{json, Value};
use std::process::Command;

const REFUSAL: &str = "I can't help with that request.";

/// The bundled policies on the demo backend, allowing per-request rail overrides (so a client can
/// switch the input rail off and let the output rail catch PII).
fn daemon(on_block_stream: &str) -> (Daemon, TempConfig) {
    let cfg = bundled_with(&[
        (
            "allow_rail_overrides = false",
            "allow_rail_overrides = true",
        ),
        (
            "on_block = \"refuse\"",
            &format!("on_block = \"refuse\"\non_block_stream = \"{on_block_stream}\""),
        ),
    ]);
    let daemon = Daemon::start_with(&cfg.path, &["--demo-backend"]);
    (daemon, cfg)
}

/// Run a client script from `tests/clients` and read the JSON it prints.
pub(crate) fn run(script: &str, args: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(root().join("tests/clients").join(script))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{script} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn blocked_by(v: &Value) -> &str {
    v["blocked"]["policy"].as_str().unwrap_or("-")
}

#[test]
fn openai_sdk_on_the_responses_api() {
    let (d, _cfg) = daemon("error");
    let seen = run("responses_client.py", &[&format!("http://{}/v1", d.addr)]);
    // Shown a placeholder, the model's echo comes back with the client's own values (the
    // bundled pii is reversible), streamed or not.
    assert_eq!(seen["plain"], "You said: mail me at jane.doe@example.com");
    assert_eq!(seen["plain_railyard"]["rails"]["input"], "modify");
    assert_eq!(seen["plain_railyard"]["rails"]["output"], "modify");
    assert_eq!(seen["plain_railyard"]["door"], "responses");
    // A card the model writes itself (the input rail is off for this request: the model was
    // given it) is redacted, however the deltas cut it.
    let stream = &seen["stream"];
    let deltas = stream["deltas"].as_str().unwrap();
    assert!(
        deltas.starts_with("You said: my card is [CREDIT_CARD], thanks"),
        "{deltas}"
    );
    assert!(!seen.to_string().contains("4111 1111"), "{seen}");
    assert_eq!(stream["done"], stream["deltas"], "output_text.done agrees");
    assert_eq!(
        stream["completed"], stream["deltas"],
        "response.completed agrees"
    );
    assert_eq!(
        seen["tool_call"],
        json!({"name": "get_weather", "arguments": {"city": "Paris"}})
    );
    assert_eq!(
        seen["tool_loop"],
        "The tool returned: sunny, write to ops@example.com"
    );
    assert_eq!(
        seen["stream_tool_call"],
        json!({"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"})
    );
    for (case, policy) in [
        ("undeclared", "allowlist"),
        ("bad_arguments", "schema-validator"),
        ("unlinked_result", "tool-linkage"),
    ] {
        assert_eq!(seen[case]["text"], REFUSAL, "{case}: {seen}");
        assert_eq!(blocked_by(&seen[case]), policy, "{case}");
    }
    let err = seen["blocked_stream"]["error"]
        .as_str()
        .expect("the SDK raised");
    assert!(err.contains("delete_database"), "{err}");
    assert!(seen["models"].as_array().unwrap().contains(&json!("demo")));

    let (d, _cfg) = daemon("finish");
    let seen = run(
        "responses_client.py",
        &[&format!("http://{}/v1", d.addr), "finish"],
    );
    assert_eq!(
        seen["blocked_stream"],
        json!({"text": REFUSAL, "status": "completed"}),
        "a normal reply, not an exception"
    );
}

#[test]
fn openai_agents_sdk_with_its_default_model_and_a_function_tool() {
    let (d, _cfg) = daemon("error");
    let seen = run("agents_client.py", &[&format!("http://{}/v1", d.addr)]);
    assert_eq!(seen["tool_ran_with"], json!(["Paris"]));
    // The result's address was hidden from the model and written back in the reply.
    assert_eq!(
        seen["final"], "The tool returned: sunny in Paris, ask ops@example.com",
        "the tool's result went through the tool_result rail"
    );
}

#[test]
fn anthropic_sdk_on_the_messages_api() {
    let (d, _cfg) = daemon("error");
    let seen = run("anthropic_client.py", &[&format!("http://{}", d.addr)]);
    assert_eq!(seen["plain"], "You said: mail me at jane.doe@example.com");
    assert_eq!(seen["plain_railyard"]["door"], "messages");
    assert_eq!(seen["plain_railyard"]["rails"]["input"], "modify");
    let deltas = seen["stream"]["deltas"].as_str().unwrap();
    assert!(
        deltas.starts_with("You said: my card is [CREDIT_CARD], thanks"),
        "{deltas}"
    );
    assert_eq!(seen["stream"]["final"], seen["stream"]["deltas"]);
    assert!(!seen.to_string().contains("4111 1111"), "{seen}");
    assert_eq!(
        seen["tool_call"],
        json!({"name": "get_weather", "input": {"city": "Paris"}, "stop_reason": "tool_use"})
    );
    assert_eq!(
        seen["tool_loop"],
        "The tool returned: sunny, write to ops@example.com"
    );
    assert_eq!(
        seen["stream_tool_call"],
        json!({"name": "get_weather", "input": {"city": "Oslo"}})
    );
    for (case, policy) in [
        ("undeclared", "allowlist"),
        ("bad_arguments", "schema-validator"),
        ("unlinked_result", "tool-linkage"),
    ] {
        assert_eq!(seen[case]["text"], REFUSAL, "{case}: {seen}");
        assert_eq!(seen[case]["stop_reason"], "refusal", "{case}");
        assert_eq!(blocked_by(&seen[case]), policy, "{case}");
    }
    let err = seen["blocked_stream"]["error"]
        .as_str()
        .expect("the SDK raised");
    assert!(err.contains("delete_database"), "{err}");
    assert_eq!(
        seen["wrong_key"],
        json!({"status": 401, "type": "authentication_error"})
    );

    let (d, _cfg) = daemon("finish");
    let seen = run("anthropic_client.py", &[&format!("http://{}", d.addr)]);
    assert_eq!(
        seen["blocked_stream"],
        json!({"text": REFUSAL, "stop_reason": "refusal"})
    );
}

#[test]
fn a_streamed_chat_refusal_in_finish_mode_and_what_responses_cannot_see() {
    let (d, _cfg) = daemon("finish");
    let weather = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let r = crate::http::post(
        d.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "stream": true, "tools": weather,
            "messages": [{"role": "user", "content": "call delete_database {}"}]}),
    );
    assert_eq!(r.streamed_text(), REFUSAL);
    assert!(!r.body.contains("\"error\""), "no error event: {}", r.body);
    let finishes: Vec<Value> = r
        .events()
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|e| e["choices"][0]["finish_reason"].as_str().map(|f| json!(f)))
        .collect();
    assert_eq!(finishes, [json!("content_filter")]);
    assert_eq!(r.events().last().map(String::as_str), Some("[DONE]"));

    // The backend keeps the earlier turns: the answer says the rails saw only this request.
    let r = crate::http::post(
        d.addr,
        "/v1/responses",
        &json!({"model": "m", "previous_response_id": "resp_earlier", "input": "hello"}),
    );
    let notes = r.json()["railyard"]["notes"].to_string();
    assert!(notes.contains("previous_response_id"), "{}", r.body);
}

/// Issue #46: a stream a policy refuses before the model answered is still a stream, on every
/// door, which the SDKs read as an error (`on_block_stream = "error"`: they raise) or as the
/// refusal (`"finish"`: its text, ending as the door ends a refusal). A plain JSON body would
/// have them read nothing at all.
#[test]
fn a_stream_refused_before_the_model_answers_is_read_as_one() {
    for mode in ["error", "finish"] {
        let cfg = write_config(&format!(
            "[server]\non_block_stream = \"{mode}\"\n\n{}",
            scripted("gate", "[\"input\"]", "", "{ mode = \"block\" }")
        ));
        let d = Daemon::start_with(&cfg.path, &["--demo-backend"]);
        let seen = run("refused_stream.py", &[&format!("http://{}", d.addr)]);
        for door in ["chat", "responses", "messages"] {
            let got = &seen[door];
            if mode == "error" {
                assert!(got["raised"].is_string(), "{door}: {got}");
                assert!(
                    got["message"].as_str().unwrap().contains("gate"),
                    "{door}: {got}"
                );
            } else {
                assert_eq!(got["text"], REFUSAL, "{door}: {got}");
                let finish = match door {
                    "chat" => "content_filter",
                    "responses" => "completed",
                    _ => "refusal",
                };
                assert_eq!(got["finish"], finish, "{door}: {got}");
            }
        }
    }
}
