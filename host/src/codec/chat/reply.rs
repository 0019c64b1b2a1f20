//! A backend's whole chat completion read in one pass for the common shape: each choice's
//! `message` decoded into the model straight from its text, with where it sits in the body, and
//! nothing else built (the other values are only checked for repeated keys). The proxy then
//! writes the judged messages into the backend's own bytes instead of building the reply as a
//! `Value` and writing it anew. Anything out of the common shape (no `choices` array, a choice
//! that is no object, a message that does not decode, a repeated key anywhere, a `railyard`
//! key) is declined, and the reply is read the general way, which also says what is wrong.

use super::read;
use crate::codec::closed;
use crate::codec::json::{whole, Key, SeenKeys};
use crate::codec::ReadReply;
use crate::model::Message;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;
use std::ops::Range;

/// Read `bytes`: `None` when the reply is not of the common shape.
pub(super) fn read(bytes: &[u8]) -> Option<ReadReply> {
    // Not UTF-8: declined, for the general way to say so.
    let text = std::str::from_utf8(bytes).ok()?;
    let top = Top {
        base: bytes.as_ptr() as usize,
    };
    whole(top, serde_json::Deserializer::from_str(text)).ok()
}

/// Stops the read: the reply is not of the common shape.
fn decline<E: serde::de::Error>() -> E {
    E::custom("declined")
}

/// The offset of borrowed text in the body that starts at `base`.
fn span(base: usize, text: &str) -> Range<usize> {
    let start = text.as_ptr() as usize - base;
    start..start + text.len()
}

/// Notes `key` among those seen in one object, declining a repeat. Objects here have a handful
/// of keys, so a list does.
fn seen<'de, E: serde::de::Error>(keys: &mut Vec<Key<'de>>, key: Key<'de>) -> Result<(), E> {
    if keys.contains(&key) {
        return Err(decline());
    }
    keys.push(key);
    Ok(())
}

/// The top-level object.
struct Top {
    base: usize,
}

impl<'de> DeserializeSeed<'de> for Top {
    type Value = ReadReply;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<ReadReply, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Top {
    type Value = ReadReply;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a chat completion")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ReadReply, A::Error> {
        let mut keys = Vec::with_capacity(8);
        let mut read = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match &*key {
                "choices" => read = Some(map.next_value_seed(Choices { base: self.base })?),
                // The fields a client reads no text in, and the words and ids that look the
                // part; anything else (the proxy's own key among them) the general way, which
                // has the rails judge its text.
                "created" => map.next_value_seed(Inert(closed::Inert::Time))?,
                "usage" => map.next_value_seed(Textless)?,
                "id" | "system_fingerprint" => map.next_value_seed(Inert(closed::Inert::Id))?,
                "object" | "model" | "service_tier" => {
                    map.next_value_seed(Inert(closed::Inert::Word))?
                }
                _ => return Err(decline()),
            }
            seen(&mut keys, key)?;
        }
        read.ok_or_else(decline)
    }
}

/// The `choices` array.
struct Choices {
    base: usize,
}

impl<'de> DeserializeSeed<'de> for Choices {
    type Value = ReadReply;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<ReadReply, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Choices {
    type Value = ReadReply;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of choices")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ReadReply, A::Error> {
        let mut read = ReadReply {
            messages: Vec::with_capacity(1),
            spans: Vec::with_capacity(1),
        };
        while let Some(choice) = seq.next_element_seed(Choice { base: self.base })? {
            if let Some((message, span)) = choice {
                read.messages.push(message);
                read.spans.push(span);
            }
        }
        Ok(read)
    }
}

/// One choice: its message and where the message sits, if it has one.
struct Choice {
    base: usize,
}

impl<'de> DeserializeSeed<'de> for Choice {
    type Value = Option<(Message, Range<usize>)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Choice {
    type Value = Option<(Message, Range<usize>)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a choice")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut keys = Vec::with_capacity(4);
        let mut found = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match &*key {
                "message" => {
                    let raw: &'de RawValue = map.next_value()?;
                    let message = read::message(raw.get()).ok_or_else(decline)?;
                    found = Some((message, span(self.base, raw.get())));
                }
                // Log-probabilities are dropped when a policy changes the text: the general way.
                "index" | "logprobs" => map.next_value_seed(Textless)?,
                "finish_reason" | "stop_reason" => {
                    map.next_value_seed(Inert(closed::Inert::Word))?
                }
                _ => return Err(decline()),
            }
            seen(&mut keys, key)?;
        }
        Ok(found)
    }
}

/// A value with no string in it (numbers that hold no value, booleans, nulls and objects and
/// arrays of them: `closed::number_carries`), or the read is declined. Repeated keys and keys
/// that are no names decline it too.
#[derive(Clone, Copy)]
struct Textless;

impl<'de> DeserializeSeed<'de> for Textless {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Textless {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value without text")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        number(v.into(), closed::Inert::Word)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        number(v.into(), closed::Inert::Word)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        float(v, closed::Inert::Word)
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        Err(decline())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = SeenKeys::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if !closed::key_inert(&key) {
                return Err(decline());
            }
            map.next_value_seed(self)?;
            if keys.see(key) {
                return Err(decline());
            }
        }
        match keys.repeated() {
            true => Err(decline()),
            false => Ok(()),
        }
    }
}

/// A string that looks like the inert value it stands for, a number or a null; else declined.
#[derive(Clone, Copy)]
struct Inert(closed::Inert);

impl<'de> DeserializeSeed<'de> for Inert {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Inert {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a word, an id or a number")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        match self.0.holds(v) {
            true => Ok(()),
            false => Err(decline()),
        }
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        number(v.into(), self.0)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        number(v.into(), self.0)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        float(v, self.0)
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A number that looks the part of `inert` (`closed::Inert::holds_number`), or declined.
fn number<E: serde::de::Error>(n: serde_json::Number, inert: closed::Inert) -> Result<(), E> {
    match inert.holds_number(&n) {
        true => Ok(()),
        false => Err(decline()),
    }
}

fn float<E: serde::de::Error>(v: f64, inert: closed::Inert) -> Result<(), E> {
    match serde_json::Number::from_f64(v) {
        Some(n) => number(n, inert),
        None => Err(decline()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::chat::Chat;
    use crate::codec::Codec;

    /// What the general way gives: the messages, and whether it would forward the body as it came.
    fn general(body: &str) -> Option<Vec<Message>> {
        let (value, repeats) = crate::codec::json::parse_noting_repeats(body.as_bytes()).ok()?;
        let serde_json::Value::Object(map) = value else {
            return None;
        };
        if repeats || map.contains_key("railyard") {
            return None;
        }
        Chat::decode_reply(map).ok().map(|(_, messages)| messages)
    }

    #[test]
    fn reads_what_the_general_way_reads_and_finds_each_message() {
        let body = r#"{"id": "c1", "object": "chat.completion", "created": 1.5e3,
            "choices": [
              {"index": 0, "message": {"role": "assistant", "content": "hi \u00e9"}, "finish_reason": "stop"},
              {"index": 1, "finish_reason": "length"},
              {"index": 2, "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
               "logprobs": {"content": []}}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4}}"#;
        let read = read(body.as_bytes()).expect("the common shape");
        let want = general(body).unwrap();
        assert_eq!(
            serde_json::to_value(
                read.messages
                    .iter()
                    .map(Message::to_openai)
                    .collect::<Vec<_>>()
            )
            .unwrap(),
            serde_json::to_value(want.iter().map(Message::to_openai).collect::<Vec<_>>()).unwrap()
        );
        assert_eq!(read.spans.len(), 2);
        assert!(body[read.spans[0].clone()].starts_with(r#"{"role": "assistant", "content": "hi"#));
        assert!(body[read.spans[1].clone()].ends_with("]}"));
    }

    #[test]
    fn declines_what_is_not_the_common_shape() {
        for body in [
            // Repeated keys, anywhere.
            r#"{"choices": [], "choices": []}"#,
            r#"{"choices": [{"message": {"role": "assistant", "content": "a", "content": "b"}}]}"#,
            r#"{"choices": [{"index": 0, "index": 1}]}"#,
            r#"{"choices": [], "usage": {"a": 1, "\u0061": 2}}"#,
            // The proxy's own key, no choices, odd choices, messages that do not decode.
            r#"{"choices": [], "railyard": {}}"#,
            r#"{"id": "x"}"#,
            r#"{"choices": {}}"#,
            r#"{"choices": [1]}"#,
            r#"{"choices": [{"message": null}]}"#,
            r#"{"choices": [{"message": {"content": "no role"}}]}"#,
            r#"[]"#,
            r#"{"choices": []} x"#,
            // What a `Value` refuses, raw text lets pass.
            r#"{"choices": [], "usage": {"total_tokens": 1e9992}}"#,
            r#"{"choices": [{"index": 1e9992}]}"#,
        ] {
            assert!(read(body.as_bytes()).is_none(), "{body}");
        }
    }
}
