//! Turns one request into a verdict. On `input` every message belongs to the application and is
//! scanned; on `tool_result` only the tool results (`role: "tool"`), so that a redaction is
//! reported on the rail that owns the data; on `output` only the last message (the model's
//! reply), since the conversation before it already passed the input rail.
//!
//! Of each message in scope, everything that reaches the model is scanned: the content (text,
//! parts, or a JSON object), the tool calls' arguments (redacted in place, staying valid JSON),
//! and the participant `name`. On `input` the declared tools' descriptions are scanned too. The
//! contract lets a plugin edit only content and arguments, so a value found in a `name` or a
//! tool description blocks the request; the reason names the field and the type, never the
//! value.

use crate::config::Policy;
use crate::redact::{self, Blocked, Counts};
use crate::types::PiiType;
use railyard_plugin_sdk::{
    ArgumentsEdit, Content, ContentEdit, Edit, Modification, Rail, Request, ToolDef, Verdict,
};

/// Judges `request` under `policy`. Reasons name types and counts, never values.
pub fn evaluate(request: &Request, policy: &Policy) -> Verdict {
    let n = request.messages.len();
    let first = match request.rail {
        Rail::Output | Rail::ToolCall => n.saturating_sub(1),
        Rail::Input | Rail::ToolResult => 0,
    };
    if request.rail == Rail::Input {
        for (k, tool) in request.tools.iter().enumerate() {
            if let Some(reason) = tool_finding(k, tool, policy) {
                return Verdict::Block(reason);
            }
        }
    }
    let mut edits = Vec::new();
    let mut reasons = Vec::new();
    for (idx, msg) in request.messages.iter().enumerate().skip(first) {
        if request.rail == Rail::ToolResult && msg.role != "tool" {
            continue;
        }
        if let Some(t) = msg
            .name
            .as_deref()
            .and_then(|s| redact::find_unallowed(s, policy))
        {
            return Verdict::Block(format!(
                "message {idx} name contains {} {} (a name cannot be redacted)",
                t.article(),
                t.name()
            ));
        }
        let mut counts: Counts = [0; PiiType::COUNT];
        let result = match &msg.content {
            Some(Content::Text(t)) => {
                redact::text(t, policy, &mut counts).map(|o| o.map(Content::Text))
            }
            Some(Content::Parts(p)) => {
                redact::parts(p, policy, &mut counts).map(|o| o.map(Content::Parts))
            }
            None => Ok(None),
        };
        match result {
            Err(Blocked(t)) => return blocked(format!("message {idx}"), t),
            Ok(Some(content)) => {
                edits.push(Edit::Content(ContentEdit {
                    message: idx as u32,
                    content,
                }));
                reasons.push(format!("redacted {} in message {idx}", describe(&counts)));
            }
            Ok(None) => {}
        }
        for (c, call) in msg.tool_calls.iter().enumerate() {
            let mut counts: Counts = [0; PiiType::COUNT];
            match redact::arguments(&call.arguments, policy, &mut counts) {
                Err(Blocked(t)) if !crate::json::is_document(&call.arguments) => {
                    return Verdict::Block(format!(
                        "tool call {c} of message {idx} contains {} {} in arguments that are not \
                         JSON (they cannot be redacted)",
                        t.article(),
                        t.name()
                    ));
                }
                Err(Blocked(t)) => {
                    return blocked(format!("tool call {c} of message {idx}"), t);
                }
                Ok(Some(arguments)) => {
                    edits.push(Edit::Arguments(ArgumentsEdit {
                        message: idx as u32,
                        call: c as u32,
                        arguments,
                    }));
                    reasons.push(format!(
                        "redacted {} in tool call {c} of message {idx}",
                        describe(&counts)
                    ));
                }
                Ok(None) => {}
            }
        }
    }
    if edits.is_empty() {
        Verdict::Allow
    } else {
        Verdict::Modify(Modification {
            edits,
            reason: reasons.join("; "),
        })
    }
}

fn blocked(place: String, t: PiiType) -> Verdict {
    Verdict::Block(format!(
        "{place} contains {} {} (blocked by policy)",
        t.article(),
        t.name()
    ))
}

/// A value in a declared tool's description or in the text of its parameter schema
/// (descriptions, titles, examples, defaults, enums): the reason to block, if any.
fn tool_finding(k: usize, tool: &ToolDef, policy: &Policy) -> Option<String> {
    // The tool's name identifies it in the reason, unless the name itself holds a value.
    let label = match tool.name.as_deref() {
        Some(name) if redact::find_unallowed(name, policy).is_none() => {
            format!("tool {k} ({name})")
        }
        _ => format!("tool {k}"),
    };
    let say = |field: &str, t: PiiType| {
        format!(
            "{label} {field} contains {} {} (a tool definition cannot be redacted)",
            t.article(),
            t.name()
        )
    };
    if let Some(t) = tool
        .name
        .as_deref()
        .and_then(|s| redact::find_unallowed(s, policy))
    {
        return Some(say("name", t));
    }
    if let Some(t) = tool
        .description
        .as_deref()
        .and_then(|s| redact::find_unallowed(s, policy))
    {
        return Some(say("description", t));
    }
    let schema = tool.parameters.as_deref()?;
    let mut found = None;
    if crate::json::is_document(schema) {
        let _ = crate::json::rewrite::<()>(schema, |v, site| {
            let structural = matches!(
                site.key,
                Some("type" | "pattern" | "format" | "$schema" | "$ref" | "$id" | "required")
            );
            if found.is_none() && !site.is_key && !site.number && !structural {
                found = redact::find_unallowed(v, policy);
            }
            Ok(None)
        });
    }
    found.map(|t| say("parameters", t))
}

/// "2 EMAIL, 1 PHONE".
fn describe(counts: &Counts) -> String {
    PiiType::ALL
        .iter()
        .filter(|t| counts[t.index()] > 0)
        .map(|t| format!("{} {}", counts[t.index()], t.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_plugin_sdk::{Context, Message};

    fn msg(role: &str, text: &str) -> Message {
        Message {
            role: role.into(),
            content: Some(Content::Text(text.into())),
            name: None,
            tool_call_id: None,
            tool_calls: vec![],
        }
    }

    fn request(rail: Rail, messages: Vec<Message>) -> Request {
        Request {
            rail,
            messages,
            tools: vec![],
            context: Context {
                request_id: "r".into(),
                principal: None,
                tenant: None,
                metadata: vec![],
            },
        }
    }

    #[test]
    fn input_redacts_every_message() {
        let r = request(
            Rail::Input,
            vec![
                msg("system", "be nice"),
                msg("user", "I am a@b.com, c@d.org"),
                msg("user", "call +1 555 234 5678"),
            ],
        );
        let Verdict::Modify(m) = evaluate(&r, &Policy::default()) else {
            panic!("expected modify")
        };
        assert_eq!(m.edits.len(), 2);
        assert_eq!(
            m.reason,
            "redacted 2 EMAIL in message 1; redacted 1 PHONE in message 2"
        );
        assert!(!m.reason.contains("a@b.com"));
    }

    #[test]
    fn output_judges_only_last() {
        let r = request(
            Rail::Output,
            vec![msg("user", "I am a@b.com"), msg("assistant", "noted")],
        );
        assert!(matches!(evaluate(&r, &Policy::default()), Verdict::Allow));
    }

    #[test]
    fn tool_call_arguments_are_redacted_and_stay_json() {
        let mut m = msg("assistant", "");
        m.content = None;
        m.tool_calls = vec![railyard_plugin_sdk::ToolCall {
            id: "c1".into(),
            name: "send".into(),
            arguments: r#"{"to": "a@b.com", "body": "call +44 20 7946 0958"}"#.into(),
        }];
        let r = request(Rail::Input, vec![msg("user", "hi"), m]);
        let Verdict::Modify(m) = evaluate(&r, &Policy::default()) else {
            panic!("expected modify")
        };
        let Edit::Arguments(e) = &m.edits[0] else {
            panic!("expected an arguments edit")
        };
        assert_eq!((e.message, e.call), (1, 0));
        assert_eq!(e.arguments, r#"{"to": "[EMAIL]", "body": "call [PHONE]"}"#);
        assert_eq!(
            m.reason,
            "redacted 1 EMAIL, 1 PHONE in tool call 0 of message 1"
        );
    }

    #[test]
    fn name_and_tool_description_block_without_the_value() {
        let mut m = msg("user", "hi");
        m.name = Some("jane.doe@example.com".into());
        let r = request(Rail::Input, vec![m]);
        let Verdict::Block(reason) = evaluate(&r, &Policy::default()) else {
            panic!("expected block")
        };
        assert_eq!(
            reason,
            "message 0 name contains an EMAIL (a name cannot be redacted)"
        );
        let mut r = request(Rail::Input, vec![msg("user", "hi")]);
        r.tools = vec![ToolDef {
            kind: "function".into(),
            name: Some("lookup".into()),
            description: Some("Escalate to ops@example.com".into()),
            parameters: Some(r#"{"type":"object"}"#.into()),
        }];
        let Verdict::Block(reason) = evaluate(&r, &Policy::default()) else {
            panic!("expected block")
        };
        assert_eq!(
            reason,
            "tool 0 (lookup) description contains an EMAIL (a tool definition cannot be redacted)"
        );
        assert!(!reason.contains("ops@"));
        let p = Policy::from_json(r#"{"types":{"EMAIL":"allow"}}"#).unwrap();
        assert!(matches!(evaluate(&r, &p), Verdict::Allow));
    }

    #[test]
    fn block_reason_has_no_value() {
        let p = Policy::from_json(r#"{"types":{"CREDIT_CARD":"block"}}"#).unwrap();
        let r = request(
            Rail::Input,
            vec![
                msg("user", "x"),
                msg("user", "pay with 4111 1111 1111 1111"),
            ],
        );
        let Verdict::Block(reason) = evaluate(&r, &p) else {
            panic!("expected block")
        };
        assert_eq!(
            reason,
            "message 1 contains a CREDIT_CARD (blocked by policy)"
        );
    }
}
