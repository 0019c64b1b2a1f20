//! Turns one request into a verdict. On `input` every message belongs to the application and is
//! scanned; on `tool_result` only the tool results (`role: "tool"`), so that a redaction is
//! reported on the rail that owns the data; on `output` only the last message (the model's
//! reply), since the conversation before it already passed the input rail.

use crate::config::Policy;
use crate::redact::{self, Blocked, Counts};
use crate::types::PiiType;
use railyard_plugin_sdk::{Content, ContentEdit, Edit, Modification, Rail, Request, Verdict};

/// Judges `request` under `policy`. Reasons name types and counts, never values.
pub fn evaluate(request: &Request, policy: &Policy) -> Verdict {
    let n = request.messages.len();
    let first = match request.rail {
        Rail::Output | Rail::ToolCall => n.saturating_sub(1),
        Rail::Input | Rail::ToolResult => 0,
    };
    let mut edits = Vec::new();
    let mut reasons = Vec::new();
    for (idx, msg) in request.messages.iter().enumerate().skip(first) {
        if request.rail == Rail::ToolResult && msg.role != "tool" {
            continue;
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
            Err(Blocked(t)) => {
                return Verdict::Block(format!(
                    "message {idx} contains {} {} (blocked by policy)",
                    t.article(),
                    t.name()
                ))
            }
            Ok(Some(content)) => {
                edits.push(Edit::Content(ContentEdit {
                    message: idx as u32,
                    content,
                }));
                reasons.push(format!("redacted {} in message {idx}", describe(&counts)));
            }
            Ok(None) => {}
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
