//! Issue #65 through the running daemon with the bundled policies and the real SDKs: a
//! structure that declares a tool, connects a tool server or makes a call is a declaration or a
//! call the rails see wherever it sits, or it is refused; and every leaf counts, keys and
//! numbers too. The `support` tenant (`demo-support-key`) is offered `get_time`,
//! `lookup_order` and `web_search` only; what the backend received is read off the scripted
//! backend, what a client reads off the SDK.

use crate::doors::run;
use crate::http::*;
use crate::support::*;
use serde_json::{json, Value};

const SUPPORT: &str = "demo-support-key";

fn daemon(reply: Value) -> (Daemon, MockBackend, TempConfig) {
    let backend = MockBackend::start(Script::Json(200, reply));
    let cfg = bundled_with(&[]);
    let daemon = Daemon::start(&cfg.path, &backend.url());
    (daemon, backend, cfg)
}

fn function(name: &str) -> Value {
    json!({"type": "function", "name": name, "description": format!("the {name} tool"),
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}})
}

fn responses_reply(output: Value) -> Value {
    json!({"id": "resp_1", "object": "response", "status": "completed", "model": "m",
        "output": output})
}

fn text_item(text: &str) -> Value {
    json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn names(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Tools a Responses conversation adds as it goes (`additional_tools`, a tool search's
/// findings) are declarations the tools rail judges: a tool hidden from the caller is not
/// offered to the model there either, and a listing of an MCP server's tools sent back loses
/// the ones hidden.
#[test]
fn tools_added_mid_conversation_are_declarations() {
    let (d, backend, _cfg) = daemon(responses_reply(json!([text_item("ok")])));
    let request = json!({"model": "m", "tools": [function("lookup_order")], "input": [
        {"role": "user", "content": "go"},
        {"type": "additional_tools", "role": "developer",
         "tools": [function("transfer"), function("get_time")]},
        {"type": "tool_search_output", "id": "ts_1", "status": "completed", "execution": "server",
         "tools": [function("refund"), function("lookup_order")]},
    ]});
    let url = format!("http://{}/v1", d.addr);
    let seen = run("one_response.py", &[&url, SUPPORT, &request.to_string()]);
    assert!(seen.get("raised").is_none(), "{seen}");
    let sent = &backend.seen()[0].body;
    let items = sent["input"].as_array().unwrap();
    let of = |kind: &str| names(&items.iter().find(|i| i["type"] == kind).unwrap()["tools"]);
    assert_eq!(of("additional_tools"), ["get_time"], "{sent}");
    assert_eq!(of("tool_search_output"), ["lookup_order"], "{sent}");
    // For the default tenant every one is offered, and the body goes on as it came.
    let seen = run("one_response.py", &[&url, "demo-key", &request.to_string()]);
    assert!(seen.get("raised").is_none(), "{seen}");
    let sent = &backend.seen()[1].body;
    let items = sent["input"].as_array().unwrap();
    assert_eq!(
        names(&items[1]["tools"]),
        ["transfer", "get_time"],
        "{sent}"
    );
}

/// A Responses reply's MCP approval request asks to make a call: it is that call to the tool
/// rails. One for a tool the caller is not offered never reaches the client; and an item of a
/// type no door knows that names a tool and carries arguments is a call too.
#[test]
fn an_approval_request_and_an_unknown_call_item_are_calls() {
    let approval = json!({"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "crm",
        "name": "delete_records", "arguments": "{\"all\": true}"});
    let (d, backend, _cfg) = daemon(responses_reply(json!([approval, text_item("asking")])));
    let url = format!("http://{}/v1", d.addr);
    let request = json!({"model": "m", "input": "clean up",
        "tools": [{"type": "mcp", "server_label": "crm", "server_url": "https://crm.example/mcp",
                   "require_approval": "always"}]});
    let seen = run("one_response.py", &[&url, SUPPORT, &request.to_string()]);
    let text = seen.to_string();
    assert!(!text.contains("mcp_approval_request"), "{seen}");
    assert_eq!(seen["railyard"]["outcome"], "refused", "{seen}");
    // The upstream was not told of the server the caller is not offered.
    let sent = &backend.seen()[0].body;
    assert!(sent.get("tools").is_none_or(|t| t == &json!([])), "{sent}");

    // A call of a kind the door does not know, to a tool nobody declared: refused as a call.
    backend.set(Script::Json(
        200,
        responses_reply(json!([{"type": "future_tool_call_v9", "id": "ftc_1",
            "name": "transfer", "arguments": "{\"amount\": 5000}"}])),
    ));
    let seen = run(
        "one_response.py",
        &[
            &url,
            "demo-key",
            &json!({"model": "m", "input": "pay"}).to_string(),
        ],
    );
    assert!(!seen.to_string().contains("future_tool_call_v9"), "{seen}");
    let blocked = &seen["railyard"]["blocked"];
    assert_eq!(blocked["policy"], "allowlist", "{seen}");
}

/// Anthropic: a request's `mcp_servers` connect the provider to tool servers, each the toolset
/// of its tools: one a policy hides is not connected. A block that defines a tool inline where
/// no rail reads declarations is refused, naming where it was.
#[test]
fn an_anthropic_tool_server_is_a_declaration_and_an_inline_definition_refused() {
    let reply = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1}});
    let (d, backend, _cfg) = daemon(reply);
    let base = format!("http://{}", d.addr);
    let request = json!({"model": "m", "max_tokens": 20,
        "mcp_servers": [{"type": "url", "url": "https://crm.example/mcp", "name": "crm"}],
        "tools": [{"type": "mcp_toolset", "mcp_server_name": "crm"},
                  {"name": "lookup_order", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hi"}]});
    let seen = run("one_message.py", &[&base, &request.to_string(), SUPPORT]);
    assert!(seen.get("raised").is_none(), "{seen}");
    let sent = &backend.seen()[0].body;
    assert_eq!(sent["mcp_servers"], json!([]), "{sent}");
    assert_eq!(names(&sent["tools"]), ["lookup_order"], "{sent}");
    // The default tenant's request goes on with its server.
    let seen = run("one_message.py", &[&base, &request.to_string()]);
    assert!(seen.get("raised").is_none(), "{seen}");
    assert_eq!(backend.seen()[1].body["mcp_servers"][0]["name"], "crm");

    let inline = json!({"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi"},
        {"type": "tool_addition", "tool": {"type": "tool_definition",
            "definition": {"name": "delete_database", "input_schema": {"type": "object"}}}}]}]});
    let seen = run("one_message.py", &[&base, &inline.to_string()]);
    assert_eq!(seen["raised"], "BadRequestError", "{seen}");
    let message = seen["message"].as_str().unwrap();
    assert!(
        message.contains("declares a tool") && message.contains("tool.definition"),
        "{message}"
    );
    assert_eq!(
        backend.seen().len(),
        2,
        "the refused request never reached the backend"
    );
}

/// A `tool_choice` must name a tool the model is offered: one hidden from the caller is
/// refused with a clear error, before the backend is asked.
#[test]
fn a_tool_choice_naming_a_hidden_tool_is_refused() {
    let (d, backend, _cfg) = daemon(completion(
        json!({"role": "assistant", "content": "ok"}),
        "stop",
    ));
    let url = format!("http://{}/v1", d.addr);
    let tools = json!([
        {"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]);
    let forced = |name: &str| {
        json!({"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": name}}})
        .to_string()
    };
    let seen = run("one_chat.py", &[&url, &forced("refund"), SUPPORT]);
    assert_eq!(seen["raised"], "BadRequestError", "{seen}");
    assert!(backend.seen().is_empty());
    let seen = run("one_chat.py", &[&url, &forced("lookup_order"), SUPPORT]);
    assert!(seen.get("raised").is_none(), "{seen}");
    let seen_body = backend.seen()[0].body.clone();
    let offered: Vec<&Value> = seen_body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["function"]["name"])
        .collect();
    assert_eq!(offered, [&json!("lookup_order")]);
}

/// Keys and numbers are leaves: a request's metadata keyed by an email address with a card as
/// a JSON number reaches the backend redacted (the number as the string the policy left, the
/// key renamed in place), and a reply's own fields likewise reach the client.
#[test]
fn keys_and_numbers_are_judged_both_ways() {
    let reply = json!({"id": "c1", "object": "chat.completion", "created": 1733088000,
        "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "ok"}}],
        "vendor": {"ada.lovelace@example.com": 5555555555554444u64}});
    let (d, backend, _cfg) = daemon(reply);
    let url = format!("http://{}/v1", d.addr);
    let request = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"jane.doe@example.com": "vip"}, "vendor_order": {"card": 4111111111111111u64}});
    let seen = run("one_chat.py", &[&url, &request.to_string()]);
    assert!(seen.get("raised").is_none(), "{seen}");
    let sent = String::from_utf8_lossy(&backend.seen()[0].raw).into_owned();
    assert!(!sent.contains("jane.doe@example.com"), "{sent}");
    assert!(!sent.contains("4111111111111111"), "{sent}");
    let sent = &backend.seen()[0].body;
    assert_eq!(sent["metadata"]["[EMAIL]"], "vip", "{sent}");
    assert!(sent["vendor_order"]["card"].is_string(), "{sent}");
    // The reply's own field, read by the client through the SDK's extra fields.
    let r = post(d.addr, "/v1/chat/completions", &request);
    assert!(!r.body.contains("ada.lovelace@example.com"), "{}", r.body);
    assert!(!r.body.contains("5555555555554444"), "{}", r.body);
    assert_eq!(
        r.json()["created"],
        1733088000,
        "a time is inert: {}",
        r.body
    );
}
