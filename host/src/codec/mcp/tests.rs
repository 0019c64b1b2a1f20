use super::*;

#[test]
fn messages_are_classified() {
    assert_eq!(
        kind(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"})),
        Kind::Request {
            id: json!(1),
            method: "tools/call".into()
        }
    );
    assert_eq!(
        kind(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        Kind::Notification {
            method: "notifications/initialized".into()
        }
    );
    assert_eq!(
        kind(&json!({"jsonrpc": "2.0", "id": "a", "result": {}})),
        Kind::Response { id: json!("a") }
    );
    assert_eq!(kind(&json!([{"jsonrpc": "2.0"}])), Kind::Other);
    // A null id is neither a request nor a notification: the gateway cannot tell.
    assert_eq!(kind(&json!({"id": null, "method": "x"})), Kind::Other);
}

#[test]
fn a_tool_list_becomes_declared_tools_and_is_rewritten_per_caller() {
    let mut result = json!({"tools": [
        {"name": "add", "description": "Adds", "inputSchema": {"type": "object"}, "title": "Add"},
        {"name": "weather", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "required": ["t"]}},
        {"name": "secret", "inputSchema": {"type": "object"}}
    ], "nextCursor": null});
    let mut tools = tools_of(&result).unwrap();
    assert_eq!(tools.len(), 3);
    assert_eq!(
        tools[1].result_schema,
        Some(crate::model::Schema::of(
            &json!({"type": "object", "required": ["t"]})
        ))
    );
    assert_eq!(
        tools[0].parameters,
        Some(crate::model::Schema::of(&json!({"type": "object"})))
    );
    tools[2].hidden_by = Some("allowlist".into());
    tools[0].description = Some("Adds two numbers".into());
    rewrite_tools(&mut result, &tools);
    let names: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add", "weather"]);
    assert_eq!(result["tools"][0]["description"], "Adds two numbers");
    assert_eq!(result["tools"][0]["title"], "Add", "other fields stay");
}

#[test]
fn a_call_and_its_result_round_trip_through_a_tool_message() {
    let call = call_of(
        &json!(7),
        Some(&json!({"name": "lookup", "arguments": {"id": 1}})),
    )
    .unwrap();
    assert_eq!((call.id.as_str(), call.name.as_str()), ("7", "lookup"));
    assert_eq!(call.arguments, r#"{"id":1}"#);
    assert!(call_of(&json!(1), Some(&json!({"name": "x", "arguments": [1]}))).is_err());
    assert_eq!(
        call_of(&json!("a"), Some(&json!({"name": "x"})))
            .unwrap()
            .arguments,
        "{}"
    );

    let mut result = json!({
        "content": [{"type": "text", "text": "mail bob@example.com"}],
        "structuredContent": {"email": "bob@example.com"},
        "isError": false
    });
    let mut m = result_message(&call, &result);
    assert_eq!(m.tool_call_id.as_deref(), Some("7"));
    let Some(Content::Parts(Value::Array(parts))) = &mut m.content else {
        panic!("parts expected")
    };
    assert_eq!(
        parts[1],
        json!({"type": "structured", "structured": {"email": "bob@example.com"}})
    );
    parts[0]["text"] = json!("mail [EMAIL]");
    parts[1]["structured"]["email"] = json!("[EMAIL]");
    apply_result_edit(&mut result, &m).unwrap();
    assert_eq!(
        result,
        json!({"content": [{"type": "text", "text": "mail [EMAIL]"}],
               "structuredContent": {"email": "[EMAIL]"}, "isError": false})
    );
    m.content = Some(Content::Parts(json!({"not": "a list"})));
    assert!(apply_result_edit(&mut result, &m).is_err());
}

#[test]
fn edited_arguments_replace_the_requests() {
    let mut req = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "x", "arguments": {"a": 1}, "_meta": {"k": "v"}}});
    set_arguments(&mut req, r#"{"a": 2}"#).unwrap();
    assert_eq!(req["params"]["arguments"], json!({"a": 2}));
    assert_eq!(req["params"]["_meta"], json!({"k": "v"}));
    assert!(set_arguments(&mut req, "[1]").is_err());
}

#[test]
fn every_field_a_client_reads_is_a_part_and_goes_back_where_it_was() {
    let call = call_of(&json!(1), Some(&json!({"name": "x"}))).unwrap();
    let mut result = json!({
        "content": [{"type": "text", "text": "a"}],
        "isError": false, "resultType": "complete",
        "_meta": {"note": "mail bob@example.com"}, "toolResult": "legacy text", "vendor": 7
    });
    let mut m = result_message(&call, &result);
    let Some(Content::Parts(Value::Array(parts))) = &mut m.content else {
        panic!("parts expected")
    };
    assert_eq!(
        parts[1],
        json!({"type": "fields", "fields": {"_meta": {"note": "mail bob@example.com"},
            "toolResult": "legacy text", "vendor": 7}}),
        "inert fields stay out, the rest is judged"
    );
    parts[1]["fields"]["_meta"]["note"] = json!("mail [EMAIL]");
    parts[1]["fields"]
        .as_object_mut()
        .unwrap()
        .remove("toolResult");
    apply_result_edit(&mut result, &m).unwrap();
    assert_eq!(
        result,
        json!({"content": [{"type": "text", "text": "a"}], "isError": false,
            "resultType": "complete", "_meta": {"note": "mail [EMAIL]"}, "vendor": 7})
    );
    // An inert field that holds something else is judged too.
    let odd = result_message(
        &call,
        &json!({"content": [], "isError": "yes, bob@example.com"}),
    );
    let Some(Content::Parts(parts)) = &odd.content else {
        panic!()
    };
    assert_eq!(parts[0]["fields"]["isError"], "yes, bob@example.com");
    // Not an object at all: one fields part.
    let bare = result_message(&call, &json!("bob@example.com"));
    assert_eq!(
        bare.content,
        Some(Content::Parts(
            json!([{"type": "fields", "fields": {"result": "bob@example.com"}}])
        ))
    );
}

#[test]
fn an_error_is_judged_as_the_calls_text() {
    let call = call_of(&json!(1), Some(&json!({"name": "x"}))).unwrap();
    let mut error = json!({"code": -32000, "message": "no bob@example.com", "data": {"who": "bob@example.com"}});
    let mut m = error_message(&call, &error);
    let Some(Content::Parts(Value::Array(parts))) = &mut m.content else {
        panic!("parts expected")
    };
    assert_eq!(
        parts[0],
        json!({"type": "text", "text": "no bob@example.com"})
    );
    assert_eq!(parts[1]["fields"]["data"]["who"], "bob@example.com");
    parts[0]["text"] = json!("no [EMAIL]");
    parts[1]["fields"]["data"]["who"] = json!("[EMAIL]");
    apply_error_edit(&mut error, &m).unwrap();
    assert_eq!(
        error,
        json!({"code": -32000, "message": "no [EMAIL]", "data": {"who": "[EMAIL]"}})
    );
}
