//! Turns one request into a verdict. On `input` every message belongs to the application and is
//! scanned, and so are the request's other text fields (e.g. OpenAI's top-level `user`); on
//! `tool_result` only the tool results (`role: "tool"`), so that a redaction is reported on the
//! rail that owns the data; on `output` only the last message (the model's reply), since the
//! conversation before it already passed the input rail; on `tools` only the declared tools the
//! model is offered.
//!
//! Of each message in scope, everything that reaches the model is scanned: the content (text,
//! parts, or a JSON object), the tool calls' arguments (redacted in place, staying valid JSON),
//! and the participant `name`. Fields are redacted with `field` edits, tool descriptions with
//! `describe-tool` edits. The contract has no edit for a message's `name`, a tool's name or its
//! parameter schema, so a value found there blocks the request; the reason names the field and
//! the type, never the value.

use crate::config::Policy;
use crate::memo::{Kind, Memo};
use crate::redact::{self, Blocked, Counts};
use crate::restore;
use crate::types::PiiType;
use railyard_plugin_sdk::reason::quote;
use railyard_plugin_sdk::{
    ArgumentsEdit, Content, ContentEdit, DescribeEdit, Edit, FieldEdit, Modification, Rail,
    Request, ToolDef, Verdict,
};

/// Judges `request` under `policy`, scanning every text. Reasons name types and counts, never
/// values.
pub fn evaluate(request: &Request, policy: &Policy) -> Verdict {
    evaluate_with(request, policy, &mut Memo::new(0))
}

/// [`evaluate`], answering the texts of `input` and `tool_result` that `memo` has seen from it.
pub fn evaluate_with(request: &Request, policy: &Policy, memo: &mut Memo) -> Verdict {
    if request.rail == Rail::Tools {
        return tools(request, policy);
    }
    // The reply rails judge what the model has just written: nothing there was seen before.
    // There the host's vault gives a value the request did not hide (one the model wrote
    // itself, which it must not say) the type's placeholder, which restores nothing, and one it
    // hid (the client's own, given back) its own, restored below.
    let mut unkept = Memo::new(0);
    let memo = match request.rail {
        Rail::Input | Rail::ToolResult => memo,
        _ => &mut unkept,
    };
    let tenant = request.context.tenant.as_deref();
    let n = request.messages.len();
    let first = match request.rail {
        Rail::Output | Rail::ToolCall => n.saturating_sub(1),
        Rail::Input | Rail::ToolResult | Rail::Tools => 0,
    };
    let mut edits = Vec::new();
    let mut reasons = Vec::new();
    for (idx, msg) in request.messages.iter().enumerate().skip(first) {
        if request.rail == Rail::ToolResult && msg.role != "tool" {
            continue;
        }
        // On the reply rails the message is the model's reply, wherever the host placed it (a
        // plugin entry with `history = false` is given the reply alone).
        let message = Place {
            reply: matches!(request.rail, Rail::Output | Rail::ToolCall),
            index: idx,
        };
        if let Some(t) = msg
            .name
            .as_deref()
            .and_then(|s| redact::find_unallowed(s, policy))
        {
            return Verdict::Block(format!(
                "{message} name contains {} {} (a name cannot be redacted)",
                t.article(),
                t.name()
            ));
        }
        let mut counts: Counts = [0; PiiType::COUNT];
        let mut result = match &msg.content {
            Some(Content::Text(t)) => memo
                .redact(Kind::Text, tenant, t, policy, &mut counts)
                .map(|o| o.map(Content::Text)),
            Some(Content::Parts(p)) => memo
                .redact(Kind::Parts, tenant, p, policy, &mut counts)
                .map(|o| o.map(Content::Parts)),
            None => Ok(None),
        };
        // Reversible: the reply's text gets back the values the vault hid from the model.
        let mut restored = false;
        if policy.reversible && request.rail == Rail::Output {
            if let (Ok(edited), Some(original)) = (&mut result, &msg.content) {
                let back = match edited.as_ref().unwrap_or(original) {
                    Content::Text(t) => {
                        restore::text(t, &mut redact::reveal, &|_| true).map(Content::Text)
                    }
                    Content::Parts(p) => restore::parts(p, &mut redact::reveal).map(Content::Parts),
                };
                if let Some(back) = back {
                    *edited = Some(back);
                    restored = true;
                }
            }
        }
        match result {
            Err(Blocked(t)) => return blocked(message.to_string(), t),
            Ok(Some(content)) => {
                edits.push(Edit::Content(ContentEdit {
                    message: idx as u32,
                    content,
                }));
                // Without `format!`: in the plugin its machinery cost more than the scan did.
                let mut reason = String::with_capacity(48);
                done_into(&mut reason, &counts, restored);
                reason.push_str(" in ");
                message.push_to(&mut reason);
                reasons.push(reason);
            }
            Ok(None) => {}
        }
        for (c, call) in msg.tool_calls.iter().enumerate() {
            let mut counts: Counts = [0; PiiType::COUNT];
            // Arguments with policies of their own (`arguments` in the config) are scanned
            // under them, never answered from the memo (kept under the base policy).
            let call_policy = policy.for_call(&call.name);
            let mut answer = if let Some(call_policy) = &call_policy {
                let policy_of = |argument: Option<&str>| call_policy.of(argument);
                redact::arguments_with(&call.arguments, &policy_of, &mut counts)
            } else {
                memo.redact(
                    Kind::Arguments,
                    tenant,
                    &call.arguments,
                    policy,
                    &mut counts,
                )
            };
            // Reversible: an argument gets back a value the vault hid from the model where its
            // policy allows the value's type.
            let mut restored = false;
            if policy.reversible && request.rail == Rail::ToolCall {
                if let Ok(edited) = &mut answer {
                    let current = edited.as_deref().unwrap_or(&call.arguments);
                    let back = restore::arguments(
                        current,
                        call_policy.as_ref(),
                        policy,
                        &mut redact::reveal,
                    );
                    if let Some(back) = back {
                        *edited = Some(back);
                        restored = true;
                    }
                }
            }
            match answer {
                Err(Blocked(t)) if !crate::json::is_document(&call.arguments) => {
                    return Verdict::Block(format!(
                        "tool call {c} of {message} contains {} {} in arguments that are not \
                         JSON (they cannot be redacted)",
                        t.article(),
                        t.name()
                    ));
                }
                Err(Blocked(t)) => {
                    return blocked(format!("tool call {c} of {message}"), t);
                }
                Ok(Some(arguments)) => {
                    edits.push(Edit::Arguments(ArgumentsEdit {
                        message: idx as u32,
                        call: c as u32,
                        arguments,
                    }));
                    let mut done = String::with_capacity(48);
                    done_into(&mut done, &counts, restored);
                    reasons.push(format!("{done} in tool call {c} of {message}"));
                }
                Ok(None) => {}
            }
        }
    }
    if request.rail == Rail::Input {
        for field in &request.fields {
            let mut counts: Counts = [0; PiiType::COUNT];
            let place = format!("field {}", quote(&field.path));
            match memo.redact(Kind::Text, tenant, &field.value, policy, &mut counts) {
                Err(Blocked(t)) => return blocked(place, t),
                Ok(Some(value)) => {
                    edits.push(Edit::Field(FieldEdit {
                        path: field.path.clone(),
                        value,
                    }));
                    reasons.push(format!("redacted {} in {place}", describe(&counts)));
                }
                Ok(None) => {}
            }
        }
    }
    modify(edits, reasons)
}

/// The `tools` rail: the declared tools the model is offered (a tool another policy hid never
/// reaches the model and is skipped). Descriptions are redacted; a value in a tool's name or in
/// its parameters schema blocks.
fn tools(request: &Request, policy: &Policy) -> Verdict {
    let mut edits = Vec::new();
    let mut reasons = Vec::new();
    for (k, tool) in request.tools.iter().enumerate() {
        if tool.hidden_by.is_some() {
            continue;
        }
        let label = tool_label(k, tool, policy);
        if let Some(reason) = unredactable_finding(&label, tool, policy) {
            return Verdict::Block(reason);
        }
        let Some(description) = tool.description.as_deref() else {
            continue;
        };
        let mut counts: Counts = [0; PiiType::COUNT];
        match redact::text(description, policy, &mut counts) {
            Err(Blocked(t)) => return blocked(format!("{label} description"), t),
            Ok(Some(description)) => {
                edits.push(Edit::DescribeTool(DescribeEdit {
                    tool: k as u32,
                    description,
                }));
                reasons.push(format!(
                    "redacted {} in {label} description",
                    describe(&counts)
                ));
            }
            Ok(None) => {}
        }
    }
    modify(edits, reasons)
}

/// A message as reasons name it: on the reply rails "the reply", elsewhere by its index.
struct Place {
    reply: bool,
    index: usize,
}

impl Place {
    fn push_to(&self, out: &mut String) {
        if self.reply {
            out.push_str("the reply");
        } else {
            out.push_str("message ");
            push_decimal(out, self.index as u64);
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut text = String::new();
        self.push_to(&mut text);
        f.write_str(&text)
    }
}

fn modify(edits: Vec<Edit>, reasons: Vec<String>) -> Verdict {
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

/// How a tool is named in a reason: by position, with its name unless the name holds a value.
fn tool_label(k: usize, tool: &ToolDef, policy: &Policy) -> String {
    match tool.name.as_deref() {
        Some(name) if redact::find_unallowed(name, policy).is_none() => {
            format!("tool {k} ({})", quote(name))
        }
        _ => format!("tool {k}"),
    }
}

/// A value in a tool's name or in the text of its parameter schema (descriptions, titles,
/// examples, defaults, enums), which no edit can change: the reason to block, if any.
fn unredactable_finding(label: &str, tool: &ToolDef, policy: &Policy) -> Option<String> {
    let say = |field: &str, t: PiiType| {
        format!(
            "{label} {field} contains {} {} (a tool's {field} cannot be redacted)",
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
    let schema = tool.parameters.as_deref()?;
    let mut found = None;
    if crate::json::is_document(schema) {
        let _ = crate::json::rewrite::<()>(schema, |v, site| {
            // A schema's words (its keywords, types, formats, the names of its properties) are
            // its structure; anything else in it (a property named by an address, a number
            // that is a card, a description) is text the model reads.
            let structural = matches!(
                site.key,
                Some("type" | "pattern" | "format" | "$schema" | "$ref" | "$id" | "required")
            ) && plain_name(v);
            let word = (site.is_key || site.number) && plain_name(v) && !long_number(v);
            if found.is_none() && !structural && !word {
                found = redact::find_unallowed(v, policy);
            }
            Ok(None)
        });
    }
    found.map(|t| say("parameters", t))
}

/// A name a schema gives a property or a keyword: ASCII letters, digits, `_`, `-`, `$`, `#`,
/// `/` and `.`, at most four digits (an SSN or a card has more).
fn plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'$' | b'#' | b'/' | b'.')
        })
        && s.bytes().filter(u8::is_ascii_digit).count() <= 4
        && !s.contains("..")
}

/// A number literal with nine digits or more (what a card, an SSN or a phone number has).
fn long_number(s: &str) -> bool {
    s.bytes().filter(u8::is_ascii_digit).count() >= 9
}

/// "2 EMAIL, 1 PHONE".
fn describe(counts: &Counts) -> String {
    let mut out = String::new();
    describe_into(&mut out, counts);
    out
}

/// [`describe`], appended to `out`.
/// What an edit did, written into `out`: `redacted 2 EMAIL`, with ` and restored values` when
/// the vault gave values back too, or `restored values` alone.
fn done_into(out: &mut String, counts: &Counts, restored: bool) {
    if counts.iter().all(|&c| c == 0) {
        out.push_str("restored values");
        return;
    }
    out.push_str("redacted ");
    describe_into(out, counts);
    if restored {
        out.push_str(" and restored values");
    }
}

fn describe_into(out: &mut String, counts: &Counts) {
    let found = PiiType::ALL.iter().filter(|t| counts[t.index()] > 0);
    for (i, t) in found.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_decimal(out, u64::from(counts[t.index()]));
        out.push(' ');
        out.push_str(t.name());
    }
}

/// `n` in decimal, appended to `out`.
fn push_decimal(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_plugin_sdk::testing::{
        self, call, expect_block, expect_modify, field, function, request, text as msg,
    };
    use railyard_plugin_sdk::Message;

    #[test]
    fn counts_and_places_are_written_as_format_would() {
        for n in [0u64, 7, 10, 105, 4_294_967_295, u64::MAX] {
            let mut out = String::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string());
        }
        let mut counts: Counts = [0; PiiType::COUNT];
        counts[PiiType::Email.index()] = 12;
        counts[PiiType::Phone.index()] = 1;
        assert_eq!(describe(&counts), "12 EMAIL, 1 PHONE");
        let place = |reply, index| Place { reply, index }.to_string();
        assert_eq!(place(false, 305), "message 305");
        assert_eq!(place(true, 3), "the reply");
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

    /// A vault as the host keeps one for a request: a placeholder per value, numbered; on the
    /// reply rails (`replying`) a value it does not hold gets the type's placeholder.
    #[derive(Clone, Default)]
    struct TestVault(std::rc::Rc<std::cell::RefCell<Vec<(String, String)>>>, bool);

    impl TestVault {
        fn replying(&self) -> TestVault {
            TestVault(self.0.clone(), true)
        }
    }

    impl redact::Vault for TestVault {
        fn conceal(&mut self, kind: PiiType, value: &str) -> Result<String, String> {
            let mut kept = self.0.borrow_mut();
            if let Some((p, _)) = kept.iter().find(|(_, v)| v == value) {
                return Ok(p.clone());
            }
            if self.1 {
                return Ok(kind.placeholder().to_string());
            }
            let p = format!("[{}_ABCDEFG{}]", kind.name(), kept.len() + 2);
            kept.push((p.clone(), value.to_string()));
            Ok(p)
        }
        fn reveal(&mut self, placeholder: &str) -> Result<Option<String>, String> {
            Ok(self
                .0
                .borrow()
                .iter()
                .find(|(p, _)| p == placeholder)
                .map(|(_, v)| v.clone()))
        }
    }

    #[test]
    fn reversible_redaction_hides_each_value_and_writes_it_back_where_allowed() {
        let policy = Policy::from_json(
            r#"{"reversible": true, "arguments": {"send_email.to": {"EMAIL": "allow"}}}"#,
        )
        .unwrap();
        let vault = TestVault::default();
        let input = request(
            Rail::Input,
            vec![msg("user", "Mail a@b.com and c@d.org the notes.")],
        );
        let Verdict::Modify(m) =
            redact::with_vault(vault.clone(), || evaluate(&input, &policy)).unwrap()
        else {
            panic!("expected modify")
        };
        let Edit::Content(c) = &m.edits[0] else {
            panic!()
        };
        assert!(
            matches!(&c.content, Content::Text(t) if t == "Mail [EMAIL_ABCDEFG2] and [EMAIL_ABCDEFG3] the notes."),
            "{:?}",
            c.content
        );
        // The reply's text gets both back; a made-up placeholder stays.
        let mut reply = msg(
            "assistant",
            "Sent to [EMAIL_ABCDEFG2], not [EMAIL_ABCDEFG9] or eve@evil.example.",
        );
        reply.role = "assistant".into();
        let output = request(Rail::Output, vec![msg("user", "hi"), reply]);
        let Verdict::Modify(m) =
            redact::with_vault(vault.replying(), || evaluate(&output, &policy)).unwrap()
        else {
            panic!("expected modify")
        };
        let Edit::Content(c) = &m.edits[0] else {
            panic!()
        };
        assert!(
            // One the model wrote itself is redacted, never restored.
            matches!(&c.content, Content::Text(t) if t == "Sent to a@b.com, not [EMAIL_ABCDEFG9] or [EMAIL]."),
            "{:?}",
            c.content
        );
        assert_eq!(
            m.reason,
            "redacted 1 EMAIL and restored values in the reply"
        );
        // Judged again (a streamed reply's held text after a restore): the client's own value
        // stays as it is, the model's is still redacted.
        let again = request(
            Rail::Output,
            vec![
                msg("user", "hi"),
                msg("assistant", "Sent to a@b.com, not eve@evil.example."),
            ],
        );
        let Verdict::Modify(m) =
            redact::with_vault(vault.replying(), || evaluate(&again, &policy)).unwrap()
        else {
            panic!("expected modify")
        };
        let Edit::Content(c) = &m.edits[0] else {
            panic!()
        };
        assert!(
            matches!(&c.content, Content::Text(t) if t == "Sent to a@b.com, not [EMAIL]."),
            "{:?}",
            c.content
        );
        // A call's argument gets its value back where its policy allows the type, not elsewhere.
        let calls = reply_calling(&[(
            "send_email",
            r#"{"to": "[EMAIL_ABCDEFG3]", "body": "cc [EMAIL_ABCDEFG2]"}"#,
        )]);
        let args = redact::with_vault(vault.replying(), || arguments_of(evaluate(&calls, &policy)))
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&args[0].1).unwrap();
        assert_eq!(v["to"], "c@d.org");
        assert_eq!(v["body"], "cc [EMAIL_ABCDEFG2]");
        // Without the vault (another request), nothing comes back.
        let none = evaluate(&calls, &policy);
        assert!(matches!(none, Verdict::Allow), "{none:?}");
    }

    #[test]
    fn a_memo_answer_hides_its_values_in_each_requests_vault() {
        let policy = Policy::from_json(r#"{"reversible": true}"#).unwrap();
        assert!(policy.memo_bytes() > 0);
        let mut memo = Memo::new(policy.memo_bytes());
        let input = request(
            Rail::Input,
            vec![msg(
                "user",
                "Please mail the minutes to a@b.com and c@d.org.",
            )],
        );
        let reply = request(
            Rail::Output,
            vec![
                msg("user", "hi"),
                msg("assistant", "Mailed [EMAIL_ABCDEFG3]."),
            ],
        );
        let mut answers = Vec::new();
        // Two requests, each with a vault of its own: the second is answered from the memo, and
        // its vault still holds the values, so its reply is restored.
        for _ in 0..2 {
            let vault = TestVault::default();
            let got = (
                redact::with_vault(vault.clone(), || {
                    format!("{:?}", evaluate_with(&input, &policy, &mut memo))
                })
                .unwrap(),
                redact::with_vault(vault.replying(), || {
                    format!("{:?}", evaluate(&reply, &policy))
                })
                .unwrap(),
            );
            assert_eq!(vault.0.borrow().len(), 2);
            assert!(got.1.contains("Mailed c@d.org."), "{}", got.1);
            answers.push(got.0);
        }
        assert_eq!(answers[0], answers[1]);
        // A vault that gives other placeholders (a new key) gets a new scan, not the old answer.
        struct Rekeyed;
        impl redact::Vault for Rekeyed {
            fn conceal(&mut self, kind: PiiType, _: &str) -> Result<String, String> {
                Ok(format!("[{}_ZZZZZZZZ]", kind.name()))
            }
            fn reveal(&mut self, _: &str) -> Result<Option<String>, String> {
                Ok(None)
            }
        }
        let got = redact::with_vault(Rekeyed, || {
            format!("{:?}", evaluate_with(&input, &policy, &mut memo))
        })
        .unwrap();
        assert!(
            got.contains("[EMAIL_ZZZZZZZZ] and [EMAIL_ZZZZZZZZ]"),
            "{got}"
        );
    }

    #[test]
    fn a_memo_changes_no_verdict() {
        let prose = "The quarterly report is attached; please review the figures before Friday. ";
        let block_cards = Policy::from_json(r#"{"types": {"CREDIT_CARD": "block"}}"#).unwrap();
        let turns: Vec<Message> = vec![
            msg("system", &prose.repeat(2)),
            msg(
                "user",
                &format!("{prose}Reach me at jane.doe@example.com, please."),
            ),
            msg("assistant", &prose.repeat(3)),
            Message {
                tool_calls: vec![call(
                    "c1",
                    "send_email",
                    &format!(r#"{{"to": "jane.doe@example.com", "body": "{prose}"}}"#),
                )],
                ..msg("assistant", "")
            },
            testing::tool_result(
                "c1",
                &format!(r#"{{"sent": true, "note": "{prose}+44 20 7946 0958"}}"#),
            ),
            msg("user", &format!("{prose}My card is 4111 1111 1111 1111.")),
            msg("user", &format!("{prose}Nothing personal, only prose.")),
        ];
        let mut memo = Memo::new(256 << 10);
        let mut asked = 0;
        for round in 0..3 {
            for policy in [Policy::default(), block_cards.clone()] {
                // Every prefix of the conversation, as turn after turn sends it.
                for n in 1..=turns.len() {
                    for rail in [Rail::Input, Rail::ToolResult, Rail::Output] {
                        for tenant in [None, Some("a")] {
                            let mut r = request(rail, turns[..n].to_vec());
                            r.context.tenant = tenant.map(Into::into);
                            if rail == Rail::Input {
                                r.fields = vec![field("user", &format!("{prose}id jane@x.org"))];
                            }
                            // One memo per policy, as an instance has one policy.
                            let got = if policy == Policy::default() {
                                evaluate_with(&r, &policy, &mut memo)
                            } else {
                                evaluate_with(&r, &policy, &mut Memo::new(256 << 10))
                            };
                            let want = evaluate(&r, &policy);
                            assert_eq!(
                                format!("{got:?}"),
                                format!("{want:?}"),
                                "round {round}, {n} messages, {rail:?}, {tenant:?}"
                            );
                            asked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(asked, 3 * 2 * 7 * 3 * 2);
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
        m.tool_calls = vec![call(
            "c1",
            "send",
            r#"{"to": "a@b.com", "body": "call +44 20 7946 0958"}"#,
        )];
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

    /// The model's reply on the tool_call rail, calling `calls` (tool, arguments).
    fn reply_calling(calls: &[(&str, &str)]) -> Request {
        let mut m = msg("assistant", "");
        m.content = None;
        m.tool_calls = calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| call(&format!("c{i}"), name, args))
            .collect();
        request(Rail::ToolCall, vec![msg("user", "hi"), m])
    }

    fn arguments_of(v: Verdict) -> Vec<(u32, String)> {
        let Verdict::Modify(m) = v else {
            panic!("expected modify, got {v:?}")
        };
        m.edits
            .into_iter()
            .map(|e| match e {
                Edit::Arguments(a) => (a.call, a.arguments),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_calls_arguments_may_have_policies_of_their_own() {
        let policy = Policy::from_json(
            r#"{"arguments": {"send_email.to": {"EMAIL": "allow"}, "lookup_*": {"EMAIL": "allow"},
                "send_email.body": {"CREDIT_CARD": "block"}}}"#,
        )
        .unwrap();
        // The recipient's address stays in `to`, and only there; another tool's is redacted.
        let r = reply_calling(&[
            (
                "send_email",
                r#"{"to": "ana@partner.example", "cc": ["ana@partner.example"], "body": "mail bo@x.example"}"#,
            ),
            ("post", r#"{"to": "ana@partner.example"}"#),
            (
                "lookup_customer",
                r#"{"email": "ana@partner.example", "note": {"to": "+44 20 7946 0958"}}"#,
            ),
        ]);
        assert_eq!(
            arguments_of(evaluate(&r, &policy)),
            [
                (
                    0,
                    r#"{"to": "ana@partner.example", "cc": ["[EMAIL]"], "body": "mail [EMAIL]"}"#
                        .to_string()
                ),
                (1, r#"{"to": "[EMAIL]"}"#.to_string()),
                (
                    2,
                    r#"{"email": "ana@partner.example", "note": {"to": "[PHONE]"}}"#.to_string()
                ),
            ]
        );
        // An argument's block holds there only.
        let r = reply_calling(&[("send_email", r#"{"body": "card 4111 1111 1111 1111"}"#)]);
        assert!(matches!(evaluate(&r, &policy), Verdict::Block(_)));
        let r = reply_calling(&[("send_email", r#"{"subject": "card 4111 1111 1111 1111"}"#)]);
        assert_eq!(
            arguments_of(evaluate(&r, &policy)),
            [(0, r#"{"subject": "card [CREDIT_CARD]"}"#.to_string())]
        );
        // Without a policy of their own, the call's arguments are judged as before.
        let plain = reply_calling(&[("send_email", r#"{"to": "ana@partner.example"}"#)]);
        assert_eq!(
            arguments_of(evaluate(&plain, &Policy::default())),
            [(0, r#"{"to": "[EMAIL]"}"#.to_string())]
        );
        // A tool named with dots (MCP's `email.send`): its argument is after the last dot, and
        // `tool.*` is the whole tool.
        let dotted = Policy::from_json(
            r#"{"arguments": {"email.send.to": {"EMAIL": "allow"}, "crm.lookup.*": {"EMAIL": "allow"}}}"#,
        )
        .unwrap();
        let r = reply_calling(&[
            (
                "email.send",
                r#"{"to": "ana@partner.example", "body": "ana@partner.example"}"#,
            ),
            ("crm.lookup", r#"{"q": {"email": "ana@partner.example"}}"#),
            ("email", r#"{"send": "ana@partner.example"}"#),
        ]);
        assert_eq!(
            arguments_of(evaluate(&r, &dotted)),
            [
                (
                    0,
                    r#"{"to": "ana@partner.example", "body": "[EMAIL]"}"#.to_string()
                ),
                (2, r#"{"send": "[EMAIL]"}"#.to_string()),
            ]
        );
        for bad in [
            r#"{"arguments": {"send.": {}}}"#,
            r#"{"arguments": {".*": {}}}"#,
            r#"{"arguments": {"x": {"NAME": "allow"}}}"#,
        ] {
            assert!(Policy::from_json(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn message_name_blocks_without_the_value() {
        let mut m = msg("user", "hi");
        m.name = Some("jane.doe@example.com".into());
        let r = request(Rail::Input, vec![m]);
        assert_eq!(
            expect_block(evaluate(&r, &Policy::default())),
            "message 0 name contains an EMAIL (a name cannot be redacted)"
        );
    }

    fn escalate(description: &str) -> ToolDef {
        ToolDef {
            description: Some(description.into()),
            ..function("escalate", Some(r#"{"type":"object"}"#))
        }
    }

    fn offered(tools: Vec<ToolDef>) -> Request {
        request(Rail::Tools, vec![msg("user", "hi")]).with_tools(tools)
    }

    #[test]
    fn tools_rail_redacts_descriptions() {
        let r = offered(vec![
            function("plain", None),
            escalate("Escalate to ops@example.com or +1 (415) 555-2671."),
        ]);
        let m = expect_modify(evaluate(&r, &Policy::default()));
        let [Edit::DescribeTool(d)] = m.edits.as_slice() else {
            panic!("expected one describe-tool edit: {:?}", m.edits)
        };
        assert_eq!(d.tool, 1);
        assert_eq!(d.description, "Escalate to [EMAIL] or [PHONE].");
        assert_eq!(
            m.reason,
            "redacted 1 EMAIL, 1 PHONE in tool 1 ('escalate') description"
        );
        assert!(!m.reason.contains("ops@") && !m.reason.contains("555"));
        // Allowed types are left; a blocked type blocks.
        let p = Policy::from_json(r#"{"types":{"EMAIL":"allow","PHONE":"allow"}}"#).unwrap();
        assert!(matches!(evaluate(&r, &p), Verdict::Allow));
        let p = Policy::from_json(r#"{"types":{"PHONE":"block"}}"#).unwrap();
        assert_eq!(
            expect_block(evaluate(&r, &p)),
            "tool 1 ('escalate') description contains a PHONE (blocked by policy)"
        );
    }

    #[test]
    fn tools_rail_blocks_what_cannot_be_edited() {
        let mut named = function("mail_ops@example.com", None);
        named.description = Some("fine".into());
        assert_eq!(
            expect_block(evaluate(&offered(vec![named]), &Policy::default())),
            "tool 0 name contains an EMAIL (a tool's name cannot be redacted)"
        );
        let schema = function(
            "notify",
            Some(
                r#"{"type":"object","properties":{"to":{"type":"string","default":"ops@example.com"}}}"#,
            ),
        );
        let reason = expect_block(evaluate(&offered(vec![schema]), &Policy::default()));
        assert_eq!(
            reason,
            "tool 0 ('notify') parameters contains an EMAIL (a tool's parameters cannot be redacted)"
        );
    }

    #[test]
    fn tools_rail_skips_hidden_tools_and_messages() {
        let mut hidden = escalate("call +1 (415) 555-2671");
        hidden.hidden_by = Some("allowlist".into());
        let mut r = offered(vec![hidden]);
        r.messages = vec![msg("user", "mail a@b.com")];
        assert!(matches!(evaluate(&r, &Policy::default()), Verdict::Allow));
    }

    #[test]
    fn input_leaves_tools_to_the_tools_rail() {
        let r = request(Rail::Input, vec![msg("user", "hi")])
            .with_tools(vec![escalate("ops@example.com")]);
        assert!(matches!(evaluate(&r, &Policy::default()), Verdict::Allow));
    }

    #[test]
    fn input_redacts_request_fields() {
        let r = request(Rail::Input, vec![msg("user", "hi")]).with_fields(vec![
            field("user", "jane.doe@example.com"),
            field("metadata.user_id", "user-1234"),
        ]);
        let m = expect_modify(evaluate(&r, &Policy::default()));
        let [Edit::Field(f)] = m.edits.as_slice() else {
            panic!("expected one field edit: {:?}", m.edits)
        };
        assert_eq!((f.path.as_str(), f.value.as_str()), ("user", "[EMAIL]"));
        assert_eq!(m.reason, "redacted 1 EMAIL in field 'user'");
        // Beside message edits; a blocked type blocks, naming the field and not the value.
        let r = request(Rail::Input, vec![msg("user", "mail a@b.com")])
            .with_fields(vec![field("metadata.user_id", "a@b.com")]);
        let m = expect_modify(evaluate(&r, &Policy::default()));
        assert_eq!(
            m.reason,
            "redacted 1 EMAIL in message 0; redacted 1 EMAIL in field 'metadata.user_id'"
        );
        let p = Policy::from_json(r#"{"types":{"EMAIL":"block"}}"#).unwrap();
        let r = request(Rail::Input, vec![msg("user", "hi")])
            .with_fields(vec![field("user", "a@b.com")]);
        assert_eq!(
            expect_block(evaluate(&r, &p)),
            "field 'user' contains an EMAIL (blocked by policy)"
        );
    }

    #[test]
    fn fields_are_judged_on_the_input_rail_only() {
        for rail in [Rail::ToolResult, Rail::Output] {
            let r = request(rail, vec![testing::assistant("ok")])
                .with_fields(vec![field("user", "a@b.com")]);
            assert!(matches!(evaluate(&r, &Policy::default()), Verdict::Allow));
        }
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
