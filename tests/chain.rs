//! Chain semantics: ordering, edits threading through plugins, reject vs block, fault resolution,
//! rail scoping of edits.

use crate::support::*;
use railyard::chain::{Decided, OnError, Verdict};
use railyard::engine::FaultKind;
use railyard::payload::{Content, Rail};
use serde_json::json;

fn tool_call_payload() -> railyard::payload::Payload {
    payload(json!({"messages": [
        {"role": "user", "content": "do things"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "keep", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "drop_me", "arguments": "{}"}},
            {"id": "c3", "type": "function", "function": {"name": "keep", "arguments": "{\"x\":1}"}}]}]}))
}

#[test]
fn edits_thread_through_plugins_in_config_order() {
    let set = policy_set(&format!(
        "{}{}",
        scripted(
            "first",
            "[\"input\"]",
            "",
            "{ mode = \"append\", text = \" one\" }"
        ),
        scripted(
            "second",
            "[\"input\"]",
            "",
            "{ mode = \"append\", text = \" two\" }"
        ),
    ));
    let e = set.check_now(Rail::Input, user("start"), &ctx());
    assert_eq!(e.verdict, Verdict::Modify);
    // The second plugin appended to the first one's output, so it saw the edited payload.
    assert_eq!(
        e.payload.messages[0].content,
        Some(Content::Text("start one two".into()))
    );
    let order: Vec<_> = e.decisions.iter().map(|d| d.plugin.as_str()).collect();
    assert_eq!(order, ["first", "second"]);
}

#[test]
fn reject_goes_on_block_stops() {
    let set = policy_set(&format!(
        "{}{}",
        scripted(
            "rejecter",
            "[\"input\"]",
            "",
            "{ mode = \"reject-last\", text = \"[removed]\" }"
        ),
        scripted(
            "after",
            "[\"input\"]",
            "",
            "{ mode = \"append\", text = \"+\" }"
        ),
    ));
    let e = set.check_now(Rail::Input, user("secret"), &ctx());
    assert_eq!(e.verdict, Verdict::Reject, "reject is stronger than modify");
    assert_eq!(e.decisions.len(), 2, "the chain went on after reject");
    assert_eq!(
        e.payload.messages[0].content,
        Some(Content::Text("[removed]+".into()))
    );

    let set = policy_set(&format!(
        "{}{}",
        scripted(
            "blocker",
            "[\"input\"]",
            "",
            "{ mode = \"block\", text = \"stop\" }"
        ),
        scripted(
            "after",
            "[\"input\"]",
            "",
            "{ mode = \"append\", text = \"+\" }"
        ),
    ));
    let e = set.check_now(Rail::Input, user("x"), &ctx());
    assert_eq!(e.verdict, Verdict::Block);
    assert_eq!(e.decisions.len(), 1, "nothing runs after a block");
}

#[test]
fn rejected_tool_calls_are_removed_and_recorded() {
    let set = policy_set(&format!(
        "{}{}",
        scripted(
            "reject-drop",
            "[\"tool_call\"]",
            "",
            "{ mode = \"reject-tool\", tool = \"drop_me\", text = \"not allowed\" }"
        ),
        scripted(
            "args",
            "[\"tool_call\"]",
            "",
            "{ mode = \"set-arguments\", text = \"{\\\"n\\\":2}\" }"
        ),
    ));
    let e = set.check_now(Rail::ToolCall, tool_call_payload(), &ctx());
    assert_eq!(e.verdict, Verdict::Reject);
    let calls = &e.payload.messages[1].tool_calls;
    let ids: Vec<_> = calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["c1", "c3"]);
    // The next plugin saw two calls and edited both.
    assert!(calls.iter().all(|c| c.arguments == "{\"n\":2}"));
    assert_eq!(e.rejections.len(), 1);
    assert_eq!(e.rejections[0].tool_call_id.as_deref(), Some("c2"));
    assert_eq!(e.rejections[0].tool.as_deref(), Some("drop_me"));
    assert_eq!(e.rejections[0].reason, "not allowed (drop_me)");
}

#[test]
fn on_error_allow_skips_a_faulting_plugin() {
    let set = policy_set(&format!(
        "{}{}",
        scripted(
            "flaky",
            "[\"input\"]",
            "on_error = \"allow\"\ntimeout_ms = 30",
            "{ mode = \"by-message\" }"
        ),
        scripted(
            "after",
            "[\"input\"]",
            "",
            "{ mode = \"append\", text = \"+\" }"
        ),
    ));
    let e = set.check_now(Rail::Input, user("loop"), &ctx());
    assert_eq!(e.verdict, Verdict::Modify);
    assert_eq!(e.decisions[0].verdict, Decided::Fault);
    assert_eq!(e.decisions[0].fault, Some(FaultKind::Deadline));
    assert_eq!(e.decisions[0].on_error, Some(OnError::Allow));
    assert_eq!(e.decisions[1].verdict, Decided::Modify);
    assert_eq!(
        e.payload.messages[0].content,
        Some(Content::Text("loop+".into()))
    );
}

#[test]
fn fault_blocks_by_default_and_says_which_policy() {
    let set = policy_set(&scripted(
        "strict",
        "[\"input\"]",
        "",
        "{ mode = \"trap\" }",
    ));
    let e = set.check_now(Rail::Input, user("x"), &ctx());
    let b = e.blocked.unwrap();
    assert!(b.fault);
    assert_eq!(b.reason, "policy 'strict' failed (trap)");
}

#[test]
fn reply_rails_only_edit_the_reply() {
    // On the output rail the plugin may only change the last message; `append` targets the
    // last message, so it is fine...
    let set = policy_set(&scripted(
        "p",
        "[\"output\"]",
        "",
        "{ mode = \"append\", text = \"!\" }",
    ));
    let body = json!({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]});
    let e = set.check_now(Rail::Output, payload(body), &ctx());
    assert_eq!(
        e.payload.messages[1].content,
        Some(Content::Text("a!".into()))
    );
    assert_eq!(
        e.payload.messages[0].content,
        Some(Content::Text("q".into()))
    );

    // ...while an edit of an earlier message on the tool_call rail is an invalid verdict.
    let set = policy_set(&scripted(
        "p",
        "[\"tool_call\"]",
        "",
        "{ mode = \"set-arguments\", text = \"{}\" }",
    ));
    let body = json!({"messages": [
        {"role": "assistant", "content": null, "tool_calls": [{"id": "old", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "old", "content": "done"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "new", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]});
    let e = set.check_now(Rail::ToolCall, payload(body), &ctx());
    assert_eq!(e.decisions[0].fault, Some(FaultKind::InvalidVerdict));
    assert!(e.decisions[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("only the model's reply (message 2)"));
}

#[test]
fn rails_without_plugins_allow_untouched() {
    let set = policy_set(&scripted("p", "[\"input\"]", "", "{ mode = \"block\" }"));
    let e = set.check_now(Rail::Output, user("x"), &ctx());
    assert_eq!(e.verdict, Verdict::Allow);
    assert!(e.decisions.is_empty());
}

#[test]
fn unknown_fields_survive_a_chain() {
    let set = policy_set(&scripted(
        "p",
        "[\"input\"]",
        "",
        "{ mode = \"append\", text = \"!\" }",
    ));
    let body = json!({"messages": [{"role": "user", "content": "hi", "x-trace": {"a": [1, 2]}}]});
    let e = set.check_now(Rail::Input, payload(body), &ctx());
    assert_eq!(
        e.payload.messages_json(),
        json!([{"role": "user", "content": "hi!", "x-trace": {"a": [1, 2]}}])
    );
}

#[test]
fn config_tools_are_merged_for_plugins_but_not_returned() {
    let toml = format!(
        "[[tools]]\ntype = \"function\"\nfunction = {{ name = \"from_config\" }}\n\n{}",
        scripted("p", "[\"tool_call\"]", "", "{ mode = \"allow\" }")
    );
    let set = policy_set(&toml);
    let body = json!({"messages": [{"role": "assistant", "content": "x"}], "tools": [{"type": "web_search"}]});
    let e = set.check_now(Rail::ToolCall, payload(body), &ctx());
    assert_eq!(
        e.payload.tools.len(),
        1,
        "the request's own tools come back unchanged"
    );
}

/// A plugin that gave triggers (its `prefilter`) is left out of finished requests holding none
/// of them: its decision says so and nothing it would have done happens. A request with one,
/// anywhere in its strings, and every streamed window, are judged as before.
#[test]
fn a_plugin_is_called_only_on_requests_with_its_triggers() {
    let set = policy_set(&scripted(
        "p",
        "[\"input\", \"output\"]",
        "",
        "{ mode = \"append\", text = \" [seen]\", triggers = [\"ALERT\", \"<x>\"] }",
    ));
    let e = set.check_now(Rail::Input, user("hello there"), &ctx());
    assert_eq!(e.verdict, Verdict::Allow);
    assert_eq!(
        e.payload.messages[0].content,
        Some(Content::Text("hello there".into()))
    );
    assert_eq!(e.decisions.len(), 1);
    assert!(e.decisions[0].skipped);
    assert_eq!(e.decisions[0].verdict, Decided::Allow);
    assert_eq!(e.to_json()["decisions"][0]["skipped"], true);

    for text in ["an ALERT here", "<x>", "ALERT"] {
        let e = set.check_now(Rail::Input, user(text), &ctx());
        assert_eq!(e.verdict, Verdict::Modify, "{text}");
        assert_eq!(
            e.payload.messages[0].content,
            Some(Content::Text(format!("{text} [seen]")))
        );
        assert!(!e.decisions[0].skipped);
        assert!(e.to_json()["decisions"][0].get("skipped").is_none());
    }
    // In an earlier message, or a tool call's arguments: any string of the request.
    let history = payload(json!({"messages": [
        {"role": "user", "content": "ALERT"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "go on"}]}));
    assert_eq!(
        set.check_now(Rail::Input, history, &ctx()).verdict,
        Verdict::Modify
    );
    let call = payload(json!({"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "f", "arguments": "{\"a\": \"<x>\"}"}}]}]}));
    assert_eq!(
        set.check_now(Rail::Output, call, &ctx()).verdict,
        Verdict::Modify
    );
    // Case as given.
    let e = set.check_now(Rail::Input, user("alert"), &ctx());
    assert!(e.decisions[0].skipped);
    // A streamed window may end in a trigger's first bytes: always judged.
    let reply = payload(json!({"messages": [{"role": "assistant", "content": "all calm"}]}));
    let e = set.check_with_now(Rail::Output, reply, &ctx(), true);
    assert_eq!(e.verdict, Verdict::Modify);
    assert!(!e.decisions[0].skipped);
}

/// Triggers that would leave a plugin never called, or called on everything by a text that
/// matches anywhere, are the plugin's mistake, and so is a hostile or failing answer: the config
/// does not load, and says why.
#[test]
fn a_plugins_unusable_triggers_are_refused_at_load() {
    let many: Vec<String> = (0..33).map(|i| format!("\"t{i}\"")).collect();
    for (triggers, says) in [
        ("[]".to_string(), "gave 0 triggers"),
        (format!("[{}]", many.join(", ")), "gave 33 triggers"),
        ("[\"a\", \"\"]".to_string(), "a trigger of 0 bytes"),
        (
            format!("[\"{}\"]", "x".repeat(257)),
            "a trigger of 257 bytes",
        ),
        // A hostile answer is read up to a bound, and a trap is a fault: neither loads.
        (
            format!(
                "[{}]",
                vec![format!("\"{}\"", "y".repeat(200)); 2000].join(", ")
            ),
            "its prefilter answered with more than",
        ),
        ("\"trap\"".to_string(), "asked to trap in triggers"),
    ] {
        let err = policy_error(&scripted(
            "p",
            "[\"input\"]",
            "",
            &format!("{{ mode = \"allow\", triggers = {triggers} }}"),
        ));
        assert!(err.contains(says), "{triggers}: {err}");
    }
}
