//! The fuzz targets' bodies, shared by the bounded runs in `tests/fuzz.rs` (stable, CI) and the
//! coverage-guided ones in `fuzz/` (cargo-fuzz, nightly). Each takes the fuzzer's bytes and
//! returns an error for a broken invariant (a panic counts as one too).

use railyard::chain::{run, Evaluate, Mode, OnError, Turn};
use railyard::codec::sse::SseParser;
use railyard::codec::{chat::Chat, messages::Messages, responses::Responses, Codec, Judged};
use railyard::config::Config;
use railyard::engine::verdict::{Edit, RawCall, RawContent, RawMessage, Rejection, Target};
use railyard::engine::{EvalRequest, PluginFault, PluginVerdict, Prepared};
use railyard::model::{Content, Context, Message, Payload, Rail};
use serde_json::{json, Map, Value};

pub fn object(data: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice::<Value>(data) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// Decoding a request, re-encoding it and decoding that gives the same conversation; reading it
/// from its text in one pass (the proxy's way) gives what decoding its `Value` gives.
pub fn round_trip<C: Codec>(data: &[u8]) -> Result<(), String> {
    let Some(body) = object(data) else {
        return Ok(());
    };
    let by_value = C::decode_request(body.clone());
    // Read twice: the second time the chat door takes the tools it kept from the first.
    let Ok(Some(_)) = C::parse_request(data, "fuzz") else {
        return Err("a JSON object the one-pass reader refuses".into());
    };
    let Ok(Some(parsed)) = C::parse_request(data, "fuzz") else {
        return Err("a JSON object the one-pass reader refuses the second time".into());
    };
    let by_text = C::decode_parsed(parsed.body, parsed.decoded);
    let (request, payload) = match (by_value, by_text) {
        (Ok((_, a)), Ok((request, b))) => {
            if a.to_openai() != b.to_openai() {
                return Err(format!(
                    "read in one pass:\n{b:?}\ndecoded from a value:\n{a:?}"
                ));
            }
            (request, b)
        }
        (Err(a), Err(b)) if a == b => return Ok(()),
        (a, b) => {
            return Err(format!(
                "decoding from a value gave {:?}, reading in one pass {:?}",
                a.err(),
                b.err()
            ))
        }
    };
    for edited in [false, true] {
        let bytes = C::encode_request(&request, &payload, edited, data);
        let again = object(&bytes).ok_or("the re-encoded request is not a JSON object")?;
        let (_, decoded) = C::decode_request(again).map_err(|e| {
            format!("the re-encoded request does not decode (edited: {edited}): {e}")
        })?;
        // Compared as the rails' wire view (a call without `type` gets `"type": "function"`).
        if decoded.to_openai() != payload.to_openai() {
            return Err(format!(
                "the backend would get another conversation than the rails judged (edited: {edited}):\n{payload:?}\n{decoded:?}"
            ));
        }
    }
    splice::<C>(data, &request, payload)
}

/// New contents spliced into the caller's bytes decode as the payload the rails left: each
/// message with content, and then all of them at once, replaced by text with characters that
/// need escaping.
fn splice<C: Codec>(data: &[u8], request: &C::Request, payload: Payload) -> Result<(), String> {
    // The proxy splices only bodies it could forward as they came: no repeated key, no
    // `railyard` options to take out.
    match railyard::codec::json::parse_noting_repeats(data) {
        Ok((Value::Object(body), false)) if !body.contains_key("railyard") => {}
        _ => return Ok(()),
    }
    let with_content: Vec<usize> = (0..payload.messages.len())
        .filter(|&i| payload.messages[i].content.is_some())
        .collect();
    let mut sets: Vec<Vec<usize>> = with_content.iter().map(|&i| vec![i]).collect();
    sets.push(with_content.clone());
    for set in sets {
        let mut edited = payload.clone();
        for &i in &set {
            edited.messages[i].content = Some(Content::Text(format!("new \"{i}\" \u{e9}\n")));
            edited.changes.contents.push(i);
        }
        let Some(bytes) = C::splice_contents(request, data, &edited) else {
            continue;
        };
        let again = object(&bytes).ok_or("the spliced request is not a JSON object")?;
        let (_, decoded) = C::decode_request(again)
            .map_err(|e| format!("the spliced request does not decode: {e}"))?;
        if decoded.to_openai() != edited.to_openai() {
            return Err(format!(
                "the spliced request is not what the rails judged:\n{edited:?}\n{decoded:?}"
            ));
        }
    }
    Ok(())
}

/// The chat door's request decoder.
pub fn chat(data: &[u8]) -> Result<(), String> {
    round_trip::<Chat>(data)
}

/// The Responses door's request decoder.
pub fn responses(data: &[u8]) -> Result<(), String> {
    round_trip::<Responses>(data)
}

/// The Messages door's request decoder.
pub fn messages(data: &[u8]) -> Result<(), String> {
    round_trip::<Messages>(data)
}

/// The backends' reply decoders.
pub fn replies(data: &[u8]) -> Result<(), String> {
    if let Some(body) = object(data) {
        let _ = Chat::decode_reply(body.clone());
        let _ = Responses::decode_reply(body.clone());
        let _ = Messages::decode_reply(body);
    }
    chat_reply(data)
}

/// A chat reply read in one pass (the proxy's way) gives the messages the general way gives,
/// and only for a body the proxy would forward as it came; judged messages written into its
/// bytes make the reply the general way would write.
fn chat_reply(data: &[u8]) -> Result<(), String> {
    let Some(read) = Chat::read_reply(data) else {
        return Ok(());
    };
    let body = match railyard::codec::json::parse_noting_repeats(data) {
        Ok((Value::Object(body), false)) if !body.contains_key("railyard") => body,
        _ => return Err("read in one pass a body the proxy never forwards as it came".into()),
    };
    let (reply, messages) = Chat::decode_reply(body)
        .map_err(|e| format!("read in one pass, but the general way says: {e}"))?;
    let wire = |m: &[Message]| m.iter().map(Message::to_openai).collect::<Vec<_>>();
    if wire(&read.messages) != wire(&messages) {
        return Err(format!(
            "read in one pass:\n{:?}\nthe general way:\n{messages:?}",
            read.messages
        ));
    }
    let judged: Vec<Judged> = messages
        .into_iter()
        .enumerate()
        .map(|(i, mut message)| {
            message.content = Some(Content::Text(format!("judged \"{i}\" \u{e9}\n")));
            for call in &mut message.tool_calls {
                call.id.push_str(".signed");
            }
            Judged {
                message,
                calls_removed: false,
                calls_added: false,
                edited: true,
            }
        })
        .collect();
    let spliced = Chat::splice_reply(data, &read.spans, &judged)
        .ok_or("the chat door declined to write judged messages in place")?;
    let got: Value = serde_json::from_slice(&spliced)
        .map_err(|e| format!("the spliced reply is no JSON: {e}"))?;
    let want = Chat::encode_reply(reply, judged, None);
    if got != want {
        return Err(format!("spliced:\n{got}\nwritten anew:\n{want}"));
    }
    Ok(())
}

/// The SSE parser: the same bytes split anywhere give the same events.
pub fn sse(data: &[u8]) -> Result<(), String> {
    let events = |data: &[u8], cuts: &[usize]| -> Result<Vec<String>, String> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        let mut at = 0;
        for &cut in cuts.iter().chain([data.len()].iter()) {
            let cut = cut.clamp(at, data.len());
            parser.push(&data[at..cut])?;
            at = cut;
            while let Some(block) = parser.next_block() {
                out.push(block);
            }
        }
        Ok(out)
    };
    let whole = events(data, &[]);
    // The same bytes split at three places derived from the input.
    let n = data.len().max(1);
    let seed = data
        .iter()
        .fold(7usize, |h, b| h.wrapping_mul(31) ^ *b as usize);
    let mut cuts = vec![seed % n, (seed / 7) % n, (seed / 49) % n];
    cuts.sort();
    let split = events(data, &cuts);
    match (whole, split) {
        (Ok(a), Ok(b)) if a != b => Err(format!(
            "splitting the bytes changed the events: {a:?} vs {b:?}"
        )),
        (Ok(_), Err(e)) => Err(format!("splitting the bytes made them invalid: {e}")),
        _ => Ok(()),
    }
}

/// A config file's text.
pub fn config(data: &[u8]) -> Result<(), String> {
    let _ = Config::parse(
        std::path::Path::new("/nonexistent/railyard.toml"),
        &String::from_utf8_lossy(data),
    );
    Ok(())
}

/// A plugin that answers whatever verdict the fuzzer built.
pub struct Scripted(PluginVerdict);

impl Evaluate for Scripted {
    fn id(&self) -> &str {
        "fuzzed"
    }
    fn evaluate(
        &self,
        _: &EvalRequest<'_>,
        _: &mut Prepared,
    ) -> Result<PluginVerdict, PluginFault> {
        Ok(self.0.clone())
    }
}

/// Bytes read as choices: what a plugin could answer.
pub struct Choices<'a>(&'a [u8], usize);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.0.get(self.1).copied().unwrap_or(0);
        self.1 += 1;
        b
    }
    fn index(&mut self) -> u32 {
        match self.byte() {
            250..=255 => u32::MAX - self.byte() as u32,
            b => (b % 8) as u32,
        }
    }
    fn text(&mut self) -> String {
        const WORDS: &[&str] = &[
            "",
            "x",
            "{}",
            "{\"a\":1}",
            "[{\"type\":\"text\",\"text\":\"hi\"}]",
            "[1]",
            "{\"n\":",
            "user",
            "assistant",
            "tool",
            "system",
            "c1",
            "get_time",
            "\u{0}",
            "é\u{1F600}",
            "tools.0.function",
            "temperature",
            "0.5",
            "null",
        ];
        let n = self.byte() as usize;
        if n >= 240 {
            let len = self.byte() as usize * 64;
            return "a".repeat(len);
        }
        WORDS[n % WORDS.len()].to_string()
    }
    fn content(&mut self) -> RawContent {
        if self.byte().is_multiple_of(2) {
            RawContent::Text(self.text())
        } else {
            RawContent::Parts(self.text())
        }
    }
    fn call(&mut self) -> RawCall {
        RawCall {
            id: self.text(),
            kind: if self.byte().is_multiple_of(4) {
                self.text()
            } else {
                "function".into()
            },
            name: self.text(),
            arguments: self.text(),
        }
    }
    fn message(&mut self) -> RawMessage {
        RawMessage {
            role: self.text(),
            content: (!self.byte().is_multiple_of(3)).then(|| self.content()),
            name: (self.byte().is_multiple_of(4)).then(|| self.text()),
            tool_call_id: (self.byte().is_multiple_of(3)).then(|| self.text()),
            tool_calls: (0..self.byte() % 3).map(|_| self.call()).collect(),
        }
    }
    fn edit(&mut self) -> Edit {
        match self.byte() % 10 {
            0 => Edit::Content {
                message: self.index(),
                content: self.content(),
            },
            1 => Edit::Arguments {
                message: self.index(),
                call: self.index(),
                arguments: self.text(),
            },
            2 => Edit::RemoveCall {
                message: self.index(),
                call: self.index(),
            },
            3 => Edit::Replace {
                start: self.index(),
                count: self.index(),
                message: self.message(),
            },
            4 => Edit::Insert {
                before: self.index(),
                message: self.message(),
            },
            5 => Edit::AddCall {
                message: self.index(),
                call: self.call(),
            },
            6 => Edit::HideTool(self.index()),
            7 => Edit::DescribeTool {
                tool: self.index(),
                description: self.text(),
            },
            _ => Edit::Field {
                path: self.text(),
                value: self.text(),
            },
        }
    }
    fn verdict(&mut self) -> PluginVerdict {
        match self.byte() % 4 {
            0 => PluginVerdict::Allow,
            1 => PluginVerdict::Modify {
                edits: (0..self.byte() % 5).map(|_| self.edit()).collect(),
                reason: self.text(),
            },
            2 => PluginVerdict::Reject(
                (0..self.byte() % 4)
                    .map(|_| Rejection {
                        target: if self.byte().is_multiple_of(2) {
                            Target::Message(self.index())
                        } else {
                            Target::Call {
                                message: self.index(),
                                call: self.index(),
                            }
                        },
                        message: self.text(),
                    })
                    .collect(),
            ),
            _ => PluginVerdict::Block(self.text()),
        }
    }
}

/// The conversation verdicts are applied to: every kind of message, calls, tools, a field.
pub fn verdict_base() -> Payload {
    Payload::from_openai(&json!({
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "time?"}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"UTC\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
            {"role": "assistant", "content": "It is noon.", "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}],
        "tools": [
            {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "lookup", "description": "d"}}],
        "temperature": 0.2
    }))
    .expect("a valid payload")
}

/// Plugin verdicts built from the bytes, through the chain on any rail: applied or a fault,
/// never a panic, never a payload the wire formats cannot carry, never half-applied.
pub fn verdict(base: &Payload, data: &[u8]) -> Result<(), String> {
    let ctx = Context::default();
    let mut choices = Choices(data, 0);
    let rail = Rail::ALL[choices.byte() as usize % Rail::ALL.len()];
    let plugins: Vec<Scripted> = (0..1 + choices.byte() % 3)
        .map(|_| Scripted(choices.verdict()))
        .collect();
    // Some plugins see the reply alone (on the reply rails), their indices shifted; some are
    // given no declared tools off the tools rail.
    let views: Vec<u8> = plugins.iter().map(|_| choices.byte()).collect();
    let eval = crate::support::now(run(
        rail,
        plugins.iter().zip(views).map(|(plugin, view)| Turn {
            plugin,
            on_error: OnError::Allow,
            mode: Mode::Enforce,
            history: view & 1 == 0,
            declared_tools: view & 2 == 0,
            memo: None,
        }),
        base.clone(),
        &ctx,
        false,
    ));
    let wire = eval.payload.to_openai();
    Payload::from_openai(&wire)
        .map_err(|e| format!("the edited payload is not valid any more: {e}\n{wire}"))?;
    // With one plugin, a fault leaves the payload as it was.
    if plugins.len() == 1 && eval.decisions[0].fault.is_some() && eval.payload != *base {
        return Err("a faulted verdict was partly applied".into());
    }
    Ok(())
}
