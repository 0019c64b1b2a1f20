//! Clients nobody here wrote: the real OpenAI Python SDK against the daemon (on its demo backend),
//! streaming and not. `scripts/setup.sh` (run by `.ci/run`) installs it into `.venv`.

use crate::http::Daemon;
use crate::support::{python, root};
use serde_json::{json, Value};
use std::process::Command;

#[test]
fn openai_python_sdk_streaming_and_not() {
    let daemon = Daemon::start_with(&root().join("policies/railyard.toml"), &["--demo-backend"]);
    let out = Command::new(python())
        .arg(root().join("tests/clients/openai_client.py"))
        .arg(format!("http://{}/v1", daemon.addr))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();

    // The model was shown a placeholder (the input rail modified the request); the reply the
    // client gets has its own address back (the bundled pii is reversible), streamed or not.
    assert_eq!(seen["plain"], "You said: mail me at jane.doe@example.com");
    assert_eq!(seen["plain_railyard"]["rails"]["input"], "modify");
    assert_eq!(seen["plain_railyard"]["rails"]["output"], "modify");
    let stream = seen["stream"].as_str().unwrap();
    assert!(
        stream.starts_with("You said: my card is 4111 1111 1111 1111, thanks"),
        "{stream}"
    );
    assert_eq!(stream.matches("and more words").count(), 30, "{stream}");
    assert_eq!(
        seen["tool_call"],
        json!({"name": "get_weather", "arguments": {"city": "Paris"}, "finish_reason": "tool_calls"})
    );
    assert_eq!(
        seen["stream_tool_call"],
        json!({"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"})
    );
    assert_eq!(seen["blocked"]["finish_reason"], "content_filter");
    assert_eq!(
        seen["blocked"]["railyard"]["blocked"]["policy"],
        "allowlist"
    );
    let err = seen["blocked_stream"]
        .as_str()
        .expect("the SDK raises on the stream's error event");
    assert!(err.contains("delete_database"), "{err}");
}
