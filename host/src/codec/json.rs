//! JSON text into `serde_json::Value`, noting whether any object repeats a key. Parsers differ
//! on which of two equal keys wins (serde_json and most take the last, some the first), so text
//! with a repeated key is never forwarded as it came: what goes on is what the rails judged.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use std::cell::Cell;
use std::fmt;
use std::ops::Range;

/// The value of `bytes` (one JSON text) and whether an object in it repeats a key.
pub fn parse_noting_repeats(bytes: &[u8]) -> serde_json::Result<(Value, bool)> {
    let repeated = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Seed(&repeated).deserialize(&mut de)?;
    de.end()?;
    Ok((value, repeated.get()))
}

/// Builds a `Value` like serde_json's own, setting the flag on a repeated key (the last wins).
#[derive(Clone, Copy)]
struct Seed<'a>(&'a Cell<bool>);

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self)?;
            if object.insert(key, value).is_some() {
                self.0.set(true);
            }
        }
        Ok(Value::Object(object))
    }
}

/// Where, in `bytes` (one JSON object), the `key` value of each element of the top-level array
/// `array` at the places `wanted` (ascending) sits: a byte range per wanted element, `None` for
/// one without that key. `None` when the text is not such an object or has fewer elements;
/// `count`, when given, must be the array's length; `None` too when the array or a wanted
/// element's key appears twice (which one another parser takes is anyone's guess). Reads the
/// text once and keeps nothing of it.
pub fn element_value_spans(
    bytes: &[u8],
    array: &str,
    key: &str,
    wanted: &[usize],
    count: Option<usize>,
) -> Option<Vec<Option<Range<usize>>>> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let repeated = Cell::new(false);
    let found = Top {
        array,
        key,
        wanted,
        base: bytes.as_ptr() as usize,
        repeated: &repeated,
    }
    .deserialize(&mut de)
    .ok()?;
    de.end().ok()?;
    if repeated.get() {
        return None;
    }
    let (spans, len) = found?;
    (spans.len() == wanted.len() && count.is_none_or(|c| c == len)).then_some(spans)
}

/// The top-level object: its `array`, the rest skipped.
struct Top<'a> {
    array: &'a str,
    key: &'a str,
    wanted: &'a [usize],
    base: usize,
    repeated: &'a Cell<bool>,
}

type Found = Option<(Vec<Option<Range<usize>>>, usize)>;

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = Found;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Found, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Found;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        let mut found = None;
        while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if k == self.array {
                self.repeated.set(self.repeated.get() || found.is_some());
                found = Some(map.next_value_seed(Elements { top: &self })?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The array: the wanted elements looked into, the rest skipped.
struct Elements<'a, 'b> {
    top: &'b Top<'a>,
}

impl<'de> DeserializeSeed<'de> for Elements<'_, '_> {
    type Value = (Vec<Option<Range<usize>>>, usize);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Elements<'_, '_> {
    type Value = (Vec<Option<Range<usize>>>, usize);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut spans = Vec::with_capacity(self.top.wanted.len());
        let mut next = self.top.wanted.iter().peekable();
        let mut i = 0;
        loop {
            let more = if next.peek() == Some(&&i) {
                next.next();
                match seq.next_element_seed(Element { top: self.top })? {
                    Some(span) => {
                        spans.push(span);
                        true
                    }
                    None => false,
                }
            } else {
                seq.next_element::<IgnoredAny>()?.is_some()
            };
            if !more {
                return Ok((spans, i));
            }
            i += 1;
        }
    }
}

/// One wanted element: the span of its `key` value.
struct Element<'a, 'b> {
    top: &'b Top<'a>,
}

impl<'de> DeserializeSeed<'de> for Element<'_, '_> {
    type Value = Option<Range<usize>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Element<'_, '_> {
    type Value = Option<Range<usize>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut span = None;
        while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if k == self.top.key {
                self.top
                    .repeated
                    .set(self.top.repeated.get() || span.is_some());
                let raw: &'de RawValue = map.next_value()?;
                let start = raw.get().as_ptr() as usize - self.top.base;
                span = Some(start..start + raw.get().len());
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_serde_json_and_repeats_are_noted() {
        let text = br#"{"a": [1, -2, 3.5, 1e3, true, null, "x\u00e9"], "b": {"c": {}}, "n": 18446744073709551615}"#;
        let (value, repeated) = parse_noting_repeats(text).unwrap();
        assert_eq!(value, serde_json::from_slice::<Value>(text).unwrap());
        assert!(!repeated);
        let (value, repeated) =
            parse_noting_repeats(br#"{"a": 1, "b": [{"k": 1, "k": 2}]}"#).unwrap();
        assert!(repeated);
        assert_eq!(value["b"][0]["k"], 2, "the last wins, as in serde_json");
        assert!(parse_noting_repeats(b"{} x").is_err());
        assert!(parse_noting_repeats(b"{\"a\": }").is_err());
    }

    #[test]
    fn element_value_spans_point_at_the_values_as_written() {
        let text = br#"{"model": "m", "messages" : [ {"role":"user","content" : "a\"b"},
            {"content": null, "role": "assistant"}, {"role": "tool"},
            {"content": [{"type": "text", "text": "x"}]} ], "z": {"messages": 1}}"#;
        let spans =
            element_value_spans(text, "messages", "content", &[0, 1, 2, 3], Some(4)).unwrap();
        let shown: Vec<Option<&str>> = spans
            .iter()
            .map(|s| s.clone().map(|r| std::str::from_utf8(&text[r]).unwrap()))
            .collect();
        assert_eq!(
            shown,
            [
                Some(r#""a\"b""#),
                Some("null"),
                None,
                Some(r#"[{"type": "text", "text": "x"}]"#)
            ]
        );
        let only = element_value_spans(text, "messages", "content", &[3], None).unwrap();
        assert_eq!(only, [spans[3].clone()]);
        // Fewer elements than wanted, a wrong count, not an object, trailing text: no spans.
        assert!(element_value_spans(text, "messages", "content", &[4], None).is_none());
        assert!(element_value_spans(text, "messages", "content", &[0], Some(3)).is_none());
        assert!(element_value_spans(b"[1]", "messages", "content", &[0], None).is_none());
        assert!(element_value_spans(b"{} x", "messages", "content", &[], None).is_none());
        assert!(
            element_value_spans(br#"{"messages": [1]}"#, "messages", "content", &[0], None)
                .is_none()
        );
        // A repeated key where it looks: no spans.
        let twice = br#"{"messages": [{"content": "a", "content": "b"}]}"#;
        assert!(element_value_spans(twice, "messages", "content", &[0], None).is_none());
        let twice = br#"{"messages": [], "messages": [{"content": "a"}]}"#;
        assert!(element_value_spans(twice, "messages", "content", &[0], None).is_none());
    }
}
