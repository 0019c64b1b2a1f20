//! JSON text into `serde_json::Value`, noting whether any object repeats a key. Parsers differ
//! on which of two equal keys wins (serde_json and most take the last, some the first), so text
//! with a repeated key is never forwarded as it came: what goes on is what the rails judged.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::cell::Cell;
use std::fmt;

/// The value of `bytes` (one JSON text) and whether an object in it repeats a key.
pub fn parse_noting_repeats(bytes: &[u8]) -> serde_json::Result<(Value, bool)> {
    let repeated = Cell::new(false);
    let value = whole(Seed(&repeated), serde_json::Deserializer::from_slice(bytes))?;
    Ok((value, repeated.get()))
}

/// An object key, borrowed from the text unless it has escapes. (serde's own `Cow<str>` always
/// allocates: a key read that way cost an allocation and a free.)
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Key<'de>(pub std::borrow::Cow<'de, str>);

impl std::ops::Deref for Key<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Key<'_> {
    pub(crate) fn into_string(self) -> String {
        self.0.into_owned()
    }
}

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;

        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }

            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }

            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v)))
            }
        }

        deserializer.deserialize_str(KeyVisitor)
    }
}

/// `seed`'s value of the one JSON text `de` reads (nothing but whitespace after it).
pub(crate) fn whole<'de, R, S>(
    seed: S,
    mut de: serde_json::Deserializer<R>,
) -> serde_json::Result<S::Value>
where
    R: serde_json::de::Read<'de>,
    S: DeserializeSeed<'de>,
{
    let value = seed.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Builds a `Value` like serde_json's own, setting the flag on a repeated key (the last wins).
#[derive(Clone, Copy)]
pub(crate) struct Seed<'a>(pub &'a Cell<bool>);

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

/// Whether an object in `text` repeats a key, or why `text` would not parse as a `Value` (a
/// number out of range, say, which skipping over it as raw text lets pass); builds nothing.
pub(crate) fn checked(text: &str) -> serde_json::Result<bool> {
    let repeated = Cell::new(false);
    whole(Check(&repeated), serde_json::Deserializer::from_str(text))?;
    Ok(repeated.get())
}

/// Walks a value, setting the flag when an object repeats a key (and failing where reading a
/// `Value` fails); builds nothing.
#[derive(Clone, Copy)]
pub(crate) struct Check<'a>(pub(crate) &'a Cell<bool>);

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = SeenKeys::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if keys.see(key) {
                self.0.set(true);
            }
            map.next_value_seed(self)?;
        }
        if keys.repeated() {
            self.0.set(true);
        }
        Ok(())
    }
}

/// The keys of one object read so far, to tell a repeated one without building a map. Objects
/// here are small (schemas, usage): their keys are compared in place; past a few, they are
/// kept and sorted at the end, so a large object costs n log n, not n².
#[derive(Default)]
pub(crate) struct SeenKeys<'de> {
    few: [Option<Key<'de>>; 8],
    many: Vec<Key<'de>>,
    n: usize,
}

impl<'de> SeenKeys<'de> {
    /// Note `key`: whether it repeats one of the first few (a repeat among more is told by
    /// [`SeenKeys::repeated`]).
    pub(crate) fn see(&mut self, key: Key<'de>) -> bool {
        let few = self.few.len();
        let mut repeat = false;
        if self.n < few {
            repeat = self.few[..self.n].iter().flatten().any(|k| *k == key);
            self.few[self.n] = Some(key);
        } else {
            if self.n == few {
                self.many
                    .extend(self.few.iter_mut().filter_map(Option::take));
            }
            self.many.push(key);
        }
        self.n += 1;
        repeat
    }

    /// Once the object is read: whether a key repeats among those past the first few.
    pub(crate) fn repeated(mut self) -> bool {
        self.many.sort_unstable();
        self.many.windows(2).any(|w| w[0] == w[1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key without escapes is borrowed from the text; one with escapes is decoded.
    #[test]
    fn keys_are_borrowed_unless_escaped() {
        let text = r#"{"plain": 1, "esc\u0061ped": 2, "tab\t": 3}"#;
        let mut de = serde_json::Deserializer::from_str(text);
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = Vec<(String, bool)>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    let borrowed = matches!(key.0, std::borrow::Cow::Borrowed(_));
                    out.push((key.into_string(), borrowed));
                }
                Ok(out)
            }
        }
        let keys = (&mut de).deserialize_map(Keys).unwrap();
        assert_eq!(
            keys,
            [
                ("plain".to_string(), true),
                ("escaped".to_string(), false),
                ("tab\t".to_string(), false)
            ]
        );
    }

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
    fn repeats_are_found_without_building_values() {
        assert!(!checked(r#"{"a": {"b": 1, "c": [{"b": 2}]}, "b": 3}"#).unwrap());
        assert!(checked(r#"{"a": 1, "b": 2, "a": 3}"#).unwrap());
        assert!(checked(r#"[1, {"x": {"k": 1, "\u006b": 2}}]"#).unwrap());
        assert!(!checked("true").unwrap());
        // What a `Value` refuses, raw text lets pass.
        assert!(serde_json::from_str::<&serde_json::value::RawValue>("1e9999").is_ok());
        assert!(checked("[1e9999]").is_err());
        // Past the few compared in place.
        let keys: Vec<String> = (0..20).map(|i| format!("\"k{i}\": {i}")).collect();
        assert!(!checked(&format!("{{{}}}", keys.join(", "))).unwrap());
        assert!(checked(&format!("{{{}, \"k3\": 0}}", keys.join(", "))).unwrap());
        assert!(checked(&format!("{{\"k19\": 0, {}}}", keys.join(", "))).unwrap());
    }
}
