//! A chat request body read in one pass: its top-level object as a map, except `messages`, which
//! are decoded into the model as they are read (no `Value` is built for a message) together with
//! where each one's content sits in the body, so that new contents can be spliced into the
//! caller's own bytes; and `tools`, read into declarations (`tools.rs`; a null in their place in
//! the map: a body written anew reads their value again, [`tools_value`]). Repeated keys are noted
//! everywhere, as `json::parse_noting_repeats` does, and every message is checked as
//! `Message::from_openai_owned` checks one.

use super::json::Fields;
use crate::codec::json::{checked, whole, Key, Seed};
use crate::model::{Content, Message, PayloadError, Schema};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::cell::Cell;
use std::fmt;
use std::ops::Range;

/// A visitor's visits of booleans and numbers: each gives `$v(&self)`, what a value the visitor
/// does not look into stands for.
macro_rules! numbers {
    ($v:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($v(&self))
        }

        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($v(&self))
        }

        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($v(&self))
        }

        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($v(&self))
        }
    };
}

/// [`numbers!`], and strings and nulls as well.
macro_rules! scalars {
    ($v:expr) => {
        numbers!($v);

        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($v(&self))
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($v(&self))
        }
    };
}

mod calls;
mod tools;

use calls::CallsSeed;
pub(super) use tools::{Beyond, Tools};

/// What reading a body found.
pub(super) struct Read {
    /// The top-level keys in order, `messages` holding a null.
    pub body: Map<String, Value>,
    /// The messages (`None`: the body has none), or what is wrong with them.
    pub messages: Option<Result<Vec<Message>, PayloadError>>,
    /// Where each message's content value sits in the body (`None`: it has none).
    pub contents: Vec<Option<Range<usize>>>,
    /// The tools (left out of `body`, a null in its place); `None`: the body has none.
    pub tools: Option<tools::Tools>,
    /// What the tools' declarations hold beyond what the door maps.
    pub beyond: tools::Beyond,
    /// Whether an object in the body repeats a key.
    pub repeats: bool,
}

/// Read `bytes`: `None` when they are JSON but not an object. With a `scope` (the caller's
/// tenant), the `tools` are taken from those this thread read lately for the same scope when
/// their text is the same (agents send the same tools every turn; `tools.rs`, [`tools::kept`]);
/// a body that fails to read is read again without, so that its error is the one a single pass
/// gives.
pub(super) fn read(bytes: &[u8], scope: Option<&str>) -> serde_json::Result<Option<Read>> {
    match scope {
        Some(_) => read_with(bytes, scope).or_else(|_| read_with(bytes, None)),
        None => read_with(bytes, None),
    }
}

fn read_with(bytes: &[u8], scope: Option<&str>) -> serde_json::Result<Option<Read>> {
    let repeated = Cell::new(false);
    let top = Top {
        repeated: &repeated,
        base: bytes.as_ptr() as usize,
        scope,
    };
    let read = match std::str::from_utf8(bytes) {
        // Checked once here, the text is not checked again string by string.
        Ok(text) => whole(top, serde_json::Deserializer::from_str(text))?,
        // Read as bytes, for serde_json to say where the text goes wrong.
        Err(_) => whole(top, serde_json::Deserializer::from_slice(bytes))?,
    };
    Ok(read.map(|mut r| {
        r.repeats = repeated.get();
        if scope.is_none() && r.tools.is_some() {
            // Read in place, not kept: their fields come from their value, read again.
            r.beyond = tools::beyond(&tools_value(bytes));
        }
        r
    }))
}

/// The `tools` value of a body [`read`] read (the last of repeated keys), as a value: for the
/// rare body written anew. Everything else is skipped.
pub(super) fn tools_value(bytes: &[u8]) -> Value {
    struct ToolsOnly;

    impl<'de> Visitor<'de> for ToolsOnly {
        type Value = Value;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut tools = Value::Null;
            while let Some(key) = map.next_key::<Key<'de>>()? {
                if &*key == "tools" {
                    tools = map.next_value()?;
                } else {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
            Ok(tools)
        }
    }

    serde_json::Deserializer::from_slice(bytes)
        .deserialize_map(ToolsOnly)
        .unwrap_or(Value::Null)
}

/// One message read from its JSON text (a backend reply's `choices[i].message`), checked as a
/// request's messages are: `None` when it is no valid message or an object in it repeats a key
/// (the caller then reads the reply the general way, which says what is wrong).
pub(super) fn message(text: &str) -> Option<Message> {
    let repeated = Cell::new(false);
    let (mut messages, mut contents) = (Vec::with_capacity(1), Vec::with_capacity(1));
    let one = One {
        top: Top {
            repeated: &repeated,
            base: text.as_ptr() as usize,
            scope: None,
        },
        index: 0,
        sink: Sink {
            messages: &mut messages,
            contents: &mut contents,
            keep: true,
        },
    };
    whole(one, serde_json::Deserializer::from_str(text))
        .ok()?
        .ok()?;
    messages.pop().filter(|_| !repeated.get())
}

#[derive(Clone, Copy)]
struct Top<'a> {
    repeated: &'a Cell<bool>,
    /// Address of the body's first byte (spans are offsets from it).
    base: usize,
    /// Whose kept tools the body's `tools` may be taken from (`None`: read them).
    scope: Option<&'a str>,
}

impl Top<'_> {
    fn note(&self, repeat: bool) {
        if repeat {
            self.repeated.set(true);
        }
    }
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = Option<Read>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Option<Read>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut read = Read {
            body: Map::new(),
            messages: None,
            contents: Vec::new(),
            tools: None,
            beyond: tools::Beyond::default(),
            repeats: false,
        };
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let key = key.into_string();
            if key == "tools" {
                read.tools = Some(match self.scope {
                    Some(scope) => {
                        let raw: &'de RawValue = map.next_value()?;
                        let (tools, repeats, beyond) =
                            tools::kept(scope, raw.get()).map_err(serde::de::Error::custom)?;
                        self.note(repeats);
                        read.beyond = beyond;
                        tools
                    }
                    None => map.next_value_seed(tools::List(self))?,
                });
                self.note(read.body.insert(key, Value::Null).is_some());
            } else if key == "messages" {
                let (messages, contents) = map.next_value_seed(Messages(self))?;
                read.messages = Some(messages);
                read.contents = contents;
                self.note(read.body.insert(key, Value::Null).is_some());
            } else {
                let value = map.next_value_seed(Seed(self.repeated))?;
                self.note(read.body.insert(key, value).is_some());
            }
        }
        Ok(Some(read))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Seed(self.repeated).visit_seq(seq).map(|_| None)
    }

    scalars!(none);
}

/// Nothing, whatever the value.
fn none<T, U>(_: &T) -> Option<U> {
    None
}

fn err(path: impl Into<String>, message: &str) -> PayloadError {
    PayloadError::new(path, message)
}

type Decoded = (
    Result<Vec<Message>, PayloadError>,
    Vec<Option<Range<usize>>>,
);

/// The `messages` value: an array of messages, or anything else (an error, once read).
struct Messages<'a>(Top<'a>);

impl<'de> DeserializeSeed<'de> for Messages<'_> {
    type Value = Decoded;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Decoded, D::Error> {
        deserializer.deserialize_any(self)
    }
}

fn not_an_array(_: &Messages<'_>) -> Decoded {
    (
        Err(err("messages", "must be an array of messages")),
        Vec::new(),
    )
}

impl<'de> Visitor<'de> for Messages<'_> {
    type Value = Decoded;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Decoded, A::Error> {
        let mut messages = Vec::with_capacity(seq.size_hint().unwrap_or(8));
        let mut contents = Vec::with_capacity(messages.capacity());
        let mut first_error = None;
        let mut index = 0;
        loop {
            // After the first bad message the rest is only read (the first error is the one
            // reported, as when decoding a `Value`).
            let sink = Sink {
                messages: &mut messages,
                contents: &mut contents,
                keep: first_error.is_none(),
            };
            match seq.next_element_seed(One {
                top: self.0,
                index,
                sink,
            })? {
                None => break,
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    first_error.get_or_insert(e);
                }
            }
            index += 1;
        }
        Ok(match first_error {
            Some(e) => (Err(e), Vec::new()),
            None => (Ok(messages), contents),
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Decoded, A::Error> {
        Seed(self.0.repeated).visit_map(map)?;
        Ok(not_an_array(&self))
    }

    scalars!(not_an_array);
}

/// A message read, pushed by [`One`] (`Err`: what is wrong with it).
type OneMessage = Result<(), PayloadError>;

/// Where [`One`] puts the message it reads and its content's place: pushed where it is built,
/// not returned through each layer of the visit (a message is a few hundred bytes, and every
/// layer copied it). With `keep` false (after a bad message) it is only read.
struct Sink<'v> {
    messages: &'v mut Vec<Message>,
    contents: &'v mut Vec<Option<Range<usize>>>,
    keep: bool,
}

/// One element of `messages`.
struct One<'a, 'v> {
    top: Top<'a>,
    index: usize,
    sink: Sink<'v>,
}

impl One<'_, '_> {
    fn path(&self) -> String {
        format!("messages[{}]", self.index)
    }

    fn not_an_object(&self) -> OneMessage {
        Err(err(self.path(), "must be an object"))
    }
}

impl<'de> DeserializeSeed<'de> for One<'_, '_> {
    type Value = OneMessage;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<OneMessage, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for One<'_, '_> {
    type Value = OneMessage;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OneMessage, A::Error> {
        let repeated = self.top.repeated;
        let mut fields = Fields {
            role: None,
            content: None,
            content_absent: true,
            name: None,
            tool_call_id: None,
            tool_calls: None,
            extra: Map::new(),
        };
        let mut span = None;
        let mut seen_content = false;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let known = match &*key {
                "role" => Some(&mut fields.role),
                "name" => Some(&mut fields.name),
                "tool_call_id" => Some(&mut fields.tool_call_id),
                _ => None,
            };
            if &*key == "tool_calls" {
                let calls = map.next_value_seed(CallsSeed(repeated))?;
                self.top.note(fields.tool_calls.replace(calls).is_some());
            } else if let Some(slot) = known {
                let value = map.next_value_seed(Seed(repeated))?;
                self.top.note(slot.replace(value).is_some());
            } else if &*key == "content" {
                let raw: &'de RawValue = map.next_value()?;
                self.top.note(seen_content);
                seen_content = true;
                let text = raw.get();
                let start = text.as_ptr() as usize - self.top.base;
                span = Some(start..start + text.len());
                fields.content = content(text, repeated).map_err(serde::de::Error::custom)?;
                fields.content_absent = false;
            } else {
                let value = map.next_value_seed(Seed(repeated))?;
                self.top
                    .note(fields.extra.insert(key.into_string(), value).is_some());
            }
        }
        if !self.sink.keep {
            return Ok(Ok(()));
        }
        Ok(match fields.into_message(|| self.path()) {
            Ok(message) => {
                self.sink.messages.push(message);
                self.sink.contents.push(span);
                Ok(())
            }
            Err(e) => Err(e),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<OneMessage, A::Error> {
        Seed(self.top.repeated).visit_seq(seq)?;
        Ok(self.not_an_object())
    }

    scalars!(One::not_an_object);
}

/// A function's `parameters`: kept as text when they are a schema (a null in their place).
#[derive(Clone, Copy)]
struct Parameters<'a>(Top<'a>);

impl<'de> DeserializeSeed<'de> for Parameters<'_> {
    type Value = (Value, Option<Schema>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let raw: &'de RawValue = serde::Deserialize::deserialize(deserializer)?;
        let text = raw.get();
        match text.as_bytes().first() {
            Some(b'{' | b't' | b'f') => {
                // Checked as a `Value` would be read (a number out of range fails).
                let repeats = checked(text).map_err(serde::de::Error::custom)?;
                self.0.note(text.starts_with('{') && repeats);
                Ok((Value::Null, Some(Schema::from_json_text(text))))
            }
            // Not a schema: kept as a value, for the decoder to say so.
            _ => {
                let mut de = serde_json::Deserializer::from_str(text);
                let value = Seed(self.0.repeated)
                    .deserialize(&mut de)
                    .map_err(serde::de::Error::custom)?;
                Ok((value, None))
            }
        }
    }
}

/// A content value from its JSON text (already known to be valid JSON): a string, null, or
/// anything else as parts.
fn content(text: &str, repeated: &Cell<bool>) -> serde_json::Result<Option<Content>> {
    match text.as_bytes().first() {
        // Without escapes the text between the quotes is the string (`text` is valid JSON).
        Some(b'"') if !text.as_bytes().contains(&b'\\') => {
            Ok(Some(Content::Text(text[1..text.len() - 1].to_owned())))
        }
        Some(b'"') => Ok(Some(Content::Text(serde_json::from_str(text)?))),
        Some(b'n') => Ok(None),
        _ => {
            let mut de = serde_json::Deserializer::from_str(text);
            let value = Seed(repeated).deserialize(&mut de)?;
            Ok(Some(Content::Parts(value)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolDef;

    /// `bytes` read in one pass, after checking that reading them with kept tools gives the
    /// same, the first time (the tools read and kept) and the second (taken from those kept),
    /// errors included: every test below holds for both.
    fn read(bytes: &[u8]) -> serde_json::Result<Option<Read>> {
        let plain = super::read(bytes, None);
        for round in ["read", "kept"] {
            let kept = super::read(bytes, Some("tenant"));
            match (&plain, &kept) {
                (Ok(Some(a)), Ok(Some(b))) => {
                    let what = format!("{round}: {}", String::from_utf8_lossy(bytes));
                    assert_eq!(a.body, b.body, "{what}");
                    assert_eq!(a.messages, b.messages, "{what}");
                    assert_eq!(a.contents, b.contents, "{what}");
                    assert_eq!(a.tools, b.tools, "{what}");
                    assert_eq!(a.repeats, b.repeats, "{what}");
                }
                (Ok(None), Ok(None)) => {}
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                _ => panic!("{round}: one read failed, the other did not"),
            }
        }
        plain
    }

    /// The tools a thread keeps: one per scope and text, none across tenants, a bounded number.
    #[test]
    fn tools_are_kept_per_tenant_and_text() {
        let body = |tools: &str| format!(r#"{{"tools": {tools}, "messages": []}}"#);
        let one = r#"[{"type": "function", "function": {"name": "f"}}]"#;
        let kept_count = || tools::KEPT_TOOLS.with(|k| k.borrow().0.len());
        let start = kept_count();
        let names = |text: &str, scope| {
            let r = super::read(text.as_bytes(), Some(scope)).unwrap().unwrap();
            r.tools
                .unwrap()
                .unwrap()
                .into_iter()
                .map(|t| t.name.as_deref().map(str::to_string))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&body(one), "a"), [Some("f".to_string())]);
        assert_eq!(names(&body(one), "a"), [Some("f".to_string())]);
        assert_eq!(
            kept_count(),
            start + 1,
            "the same text for the same tenant: kept once"
        );
        assert_eq!(names(&body(one), "b"), [Some("f".to_string())]);
        assert_eq!(kept_count(), start + 2, "another tenant reads its own");
        // Another text is another entry, and the whole text counts, not its start.
        let two = r#"[{"type": "function", "function": {"name": "g"}}]"#;
        assert_eq!(names(&body(two), "a"), [Some("g".to_string())]);
        assert_eq!(names(&body(one), "a"), [Some("f".to_string())]);
        for i in 0..20 {
            let many = format!(r#"[{{"type": "function", "function": {{"name": "f{i}"}}}}]"#);
            assert_eq!(names(&body(&many), "a"), [Some(format!("f{i}"))]);
        }
        assert_eq!(kept_count(), 8, "bounded");
        // Too deep for a body is too deep whichever way its tools are read: the deepest tools a
        // body may hold read alike, and one level more fails alike.
        let nested = |n: usize| body(&format!("{}{}", "[".repeat(n), "]".repeat(n)));
        let deepest = (1..200)
            .take_while(|&n| super::read(nested(n).as_bytes(), None).is_ok())
            .last()
            .expect("some depth reads");
        for scope in [Some("deep"), Some("deep")] {
            assert!(super::read(nested(deepest).as_bytes(), scope).is_ok());
            let e = super::read(nested(deepest + 1).as_bytes(), scope)
                .err()
                .expect("one level more is too deep");
            assert!(e.to_string().starts_with("recursion limit exceeded"), "{e}");
        }
    }

    #[test]
    fn messages_are_decoded_with_where_their_contents_sit() {
        let text = r#"{"model": "m", "messages": [{"role": "user", "content": "a\nb", "x": 1},
            {"content": null, "role": "assistant", "tool_calls": [{"id": "c", "type": "function",
             "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "ok"}]},
            {"role": "system"}, {"role": "user", "content": "plain é"},
            {"role": "user", "content": "\u00e9"}], "n": 1.50}"#
            .as_bytes();
        let read = read(text).unwrap().unwrap();
        assert!(!read.repeats);
        assert_eq!(
            read.body.keys().collect::<Vec<_>>(),
            ["model", "messages", "n"]
        );
        assert_eq!(read.body["messages"], Value::Null);
        let messages = read.messages.unwrap().unwrap();
        let value: Value = serde_json::from_slice(text).unwrap();
        for (i, m) in messages.iter().enumerate() {
            let expected = Message::from_openai(&value["messages"][i], "m").unwrap();
            assert_eq!(*m, expected, "message {i}");
        }
        let shown: Vec<Option<&str>> = read
            .contents
            .iter()
            .map(|s| s.clone().map(|r| std::str::from_utf8(&text[r]).unwrap()))
            .collect();
        assert_eq!(
            shown,
            [
                Some(r#""a\nb""#),
                Some("null"),
                Some(r#"[{"type": "text", "text": "ok"}]"#),
                None,
                Some(r#""plain é""#),
                Some(r#""\u00e9""#),
            ]
        );
    }

    #[test]
    fn tools_are_read_into_declarations_with_their_parameters_as_text() {
        let tools = r#"[{"type": "function", "function": {"name": "f", "description": "d",
            "parameters": {"type": "object",  "properties": {"a": {"type": "string"}}}, "strict": true}},
            {"type": "web_search", "name": "w", "x": [1, {"y": null}]},
            {"function": {"name": "g", "parameters": true}, "type": "function"},
            {"type": "function", "function": {"name": "h", "parameters": null}}]"#;
        let text = format!(r#"{{"model": "m", "tools": {tools}, "messages": []}}"#);
        let read = read(text.as_bytes()).unwrap().unwrap();
        assert!(!read.repeats);
        assert_eq!(
            read.body.keys().collect::<Vec<_>>(),
            ["model", "tools", "messages"]
        );
        assert_eq!(
            read.body["tools"],
            Value::Null,
            "read into declarations, not as a value"
        );
        let declared = read.tools.unwrap();
        // Read again from the bytes for a body written anew, the last of repeated keys counting.
        let value: Value = serde_json::from_str(tools).unwrap();
        assert_eq!(tools_value(text.as_bytes()), value);
        let twice = format!(r#"{{"tools": [], "model": "m", "tools": {tools}, "messages": []}}"#);
        assert_eq!(tools_value(twice.as_bytes()), value);
        assert_eq!(tools_value(br#"{"messages": []}"#), Value::Null);
        let shown: Vec<_> = declared
            .unwrap()
            .into_iter()
            .map(|t| {
                let schema = t.parameters.as_ref().map(|s| s.text().to_string());
                let text = |s: Option<std::sync::Arc<str>>| s.as_deref().map(str::to_string);
                (
                    t.kind.to_string(),
                    text(t.name),
                    text(t.description),
                    schema,
                )
            })
            .collect();
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            shown,
            [
                (
                    "function".into(),
                    s("f"),
                    s("d"),
                    s(r#"{"type": "object",  "properties": {"a": {"type": "string"}}}"#)
                ),
                ("web_search".into(), s("w"), None, None),
                ("function".into(), s("g"), None, s("true")),
                ("function".into(), s("h"), None, None),
            ]
        );
        for repeated in [
            r#"[{"type": "function", "function": {"name": "f",
                "parameters": {"type": "object", "properties": {"a": {}, "a": {}}}}}]"#,
            r#"[{"type": "function", "type": "function", "function": {"name": "f"}}]"#,
            r#"[{"type": "function", "function": {"name": "f", "name": "g"}}]"#,
            r#"[{"type": "x", "x": 1, "x": 2}]"#,
            r#"[{"type": "x", "y": {"k": 1, "k": 2}}]"#,
            r#"{"k": 1, "k": 2}"#,
        ] {
            let text = format!(r#"{{"tools": {repeated}, "messages": []}}"#);
            assert!(read_repeats(text.as_bytes()), "{repeated}");
        }
    }

    #[test]
    fn tools_fail_as_decoding_their_value_fails() {
        for tools in [
            "3",
            r#""t""#,
            r#"{"type": "function"}"#,
            "[1]",
            "[{}]",
            r#"[{"type": 1}]"#,
            r#"[{"type": "function"}]"#,
            r#"[{"type": "function", "function": []}]"#,
            r#"[{"type": "function", "function": {"name": 1}}]"#,
            r#"[{"type": "function", "function": {"name": "f", "parameters": "no"}}]"#,
            r#"[{"type": "function", "function": {"name": "f", "parameters": [1]}}]"#,
            r#"[{"type": "x"}, {"type": "function", "function": {}}, 7]"#,
        ] {
            let text = format!(r#"{{"tools": {tools}, "messages": []}}"#);
            let declared = read(text.as_bytes()).unwrap().unwrap().tools.unwrap();
            let value: Value = serde_json::from_str(tools).unwrap();
            let expected = ToolDef::list_from_openai(&value, "tools").unwrap_err();
            assert_eq!(declared.unwrap_err(), expected, "{tools}");
        }
        let text = br#"{"tools": [{"type": "x", "n": 1e999}], "messages": []}"#;
        let e = read(text)
            .err()
            .expect("a number out of range fails as in a value");
        assert!(
            e.to_string()
                .starts_with("number out of range at line 1 column 35"),
            "{e}"
        );
        let text = br#"{"tools": null, "messages": []}"#;
        let declared = read(text).unwrap().unwrap().tools.unwrap();
        assert!(declared.unwrap().is_empty());
    }

    /// A message's tool calls read directly are what reading their `Value` gives: the same
    /// calls (their other fields in the same order), the same error, the same repeats noted.
    #[test]
    fn tool_calls_are_what_their_value_gives() {
        let calls = [
            r#"[{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]"#,
            r#"[{"function": {"arguments": null, "name": "f"}, "id": null}]"#,
            r#"[{"function": {"name": "f"}}, {"id": "d", "function": {"name": "g", "arguments": ""}}]"#,
            // Other fields, in the order a map left after removing `id` and `function` keeps.
            r#"[{"index": 0, "id": "c", "x": [1, {"y": 2}], "type": "function", "z": null,
                "function": {"p": 1, "name": "f", "q": "2", "arguments": "{}", "r": true}}]"#,
            r#"[{"id": "c", "function": {"name": "f", "arguments": "{}"}, "a": 1, "b": 2, "c": 3}]"#,
            // Repeated keys: the last value counts, where the first came.
            r#"[{"id": "a", "function": {"name": "f"}, "id": "b"}]"#,
            r#"[{"function": {"name": "f", "name": "g", "arguments": "1", "arguments": "2"}}]"#,
            r#"[{"function": "x", "id": "c", "function": {"name": "f"}}]"#,
            r#"[{"function": {"name": "f"}, "function": 1}]"#,
            r#"[{"function": {"name": "f", "x": {"k": 1, "k": 2}}}]"#,
            // Not the common shape: arguments as an object, hosted calls, errors.
            r#"[{"id": "c", "function": {"name": "f", "arguments": {"b": 1, "a": [2]}}}]"#,
            r#"[{"id": "c", "type": "web_search", "action": {"query": "q"}}]"#,
            r#"[{"id": "c", "type": "function"}]"#,
            r#"[{"id": 1, "function": {"name": "f"}}]"#,
            r#"[{"function": {"name": 2}}]"#,
            r#"[{"function": {"arguments": "{}"}}]"#,
            r#"[{"function": []}]"#,
            r#"[{"function": {"name": "f"}}, 3]"#,
            r#"[[{"a": 1, "a": 2}]]"#,
            r#"[]"#,
            r#"null"#,
            r#"{"id": "c"}"#,
            r#"{"a": 1, "a": 2}"#,
            r#""calls""#,
            r#"1.5"#,
        ];
        for calls in calls {
            for message in [
                format!(r#"{{"role": "assistant", "tool_calls": {calls}}}"#),
                format!(r#"{{"tool_calls": {calls}, "role": 7}}"#),
                format!(r#"{{"tool_calls": [], "role": "assistant", "tool_calls": {calls}}}"#),
            ] {
                let text = format!(r#"{{"messages": [{message}]}}"#);
                let read = read(text.as_bytes()).unwrap().unwrap();
                let (value, repeats) =
                    crate::codec::json::parse_noting_repeats(text.as_bytes()).unwrap();
                assert_eq!(read.repeats, repeats, "{text}");
                let expected = Message::from_openai(&value["messages"][0], "messages[0]");
                let got = read.messages.unwrap().map(|mut m| m.remove(0));
                assert_eq!(got, expected, "{text}");
                if let (Ok(got), Ok(expected)) = (got, expected) {
                    assert_eq!(
                        serde_json::to_string(&got.to_openai()).unwrap(),
                        serde_json::to_string(&expected.to_openai()).unwrap(),
                        "{text}"
                    );
                }
            }
        }
    }

    fn read_repeats(text: &[u8]) -> bool {
        read(text).unwrap().unwrap().repeats
    }

    #[test]
    fn errors_and_repeats_are_those_of_the_value_path() {
        let bad = |text: &[u8]| read(text).unwrap().unwrap().messages.unwrap().unwrap_err();
        assert_eq!(bad(br#"{"messages": 3}"#).path, "messages");
        assert_eq!(bad(br#"{"messages": {"a": 1}}"#).path, "messages");
        assert_eq!(
            bad(br#"{"messages": [{"role": "user"}, 2]}"#).path,
            "messages[1]"
        );
        let e = bad(br#"{"messages": [{"role": "user"}, {"role": 1}, {"x": 1}]}"#);
        assert_eq!(
            (e.path.as_str(), e.message.as_str()),
            ("messages[1].role", "must be a string")
        );
        let e = bad(
            br#"{"messages": [{"role": "user", "tool_calls": [{"id": "x", "function": {}}]}]}"#,
        );
        assert_eq!(e.path, "messages[0].tool_calls[0].function.name");
        assert!(read(br#"{"messages": []}"#)
            .unwrap()
            .unwrap()
            .messages
            .unwrap()
            .unwrap()
            .is_empty());
        assert!(read(br#"{"model": "m"}"#)
            .unwrap()
            .unwrap()
            .messages
            .is_none());
        assert!(read(b"[1]").unwrap().is_none());
        assert!(read(b"\"x\"").unwrap().is_none());
        assert!(read(b"{} x").is_err());
        assert!(read(br#"{"messages": [}"#).is_err());
        for repeated in [
            &br#"{"messages": [], "messages": []}"#[..],
            br#"{"messages": [{"role": "user", "role": "system"}]}"#,
            br#"{"messages": [{"role": "user", "content": "a", "content": "b"}]}"#,
            br#"{"messages": [{"role": "user", "content": [{"t": 1, "t": 2}]}]}"#,
            br#"{"messages": [{"role": "user", "x": {"k": 1, "k": 2}}]}"#,
            br#"{"tools": [{"k": 1, "k": 2}], "messages": []}"#,
        ] {
            assert!(
                read(repeated).unwrap().unwrap().repeats,
                "{}",
                String::from_utf8_lossy(repeated)
            );
        }
        // The last of two wins, as in serde_json.
        let r = read(br#"{"messages": [{"role": "user", "content": "a", "content": "b"}]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            r.messages.unwrap().unwrap()[0].content,
            Some(Content::Text("b".into()))
        );
    }
}
