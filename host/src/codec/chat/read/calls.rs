//! A message's `tool_calls` read from their JSON text into [`Calls`]: an array's objects as
//! their entries in order (a `function` object's too), with no map built or key hashed; anything
//! else as the `Value` it is. What is read is what a `Value` of it holds (the same keys in the
//! same order, the last of repeated keys counting), and repeats are noted as reading a `Value`
//! notes them, so that checking it gives what checking the `Value` gives.

use crate::codec::chat::json::{CallRead, Calls, Entries, Item};
use crate::codec::json::{Key, Seed};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};
use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

/// Keys a tool call is read by, kept without allocating.
const KNOWN: [&str; 5] = ["id", "type", "function", "name", "arguments"];

fn key(key: Key<'_>) -> Cow<'static, str> {
    match KNOWN.iter().find(|k| **k == &*key) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(key.into_string()),
    }
}

/// Adds `value` under `key`, or replaces the value of a key already there (noting the repeat).
fn put<T>(entries: &mut Entries<T>, repeated: &Cell<bool>, key: Cow<'static, str>, value: T) {
    match entries.iter_mut().find(|(k, _)| *k == key) {
        Some((_, old)) => {
            *old = value;
            repeated.set(true);
        }
        None => entries.push((key, value)),
    }
}

/// The visits of a value that is not what a seed reads into entries: the `Value` it is, made as
/// [`Seed`] makes it, wrapped by `$wrap`.
macro_rules! as_values {
    ($wrap:expr) => {
        fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
            Ok($wrap(Value::Bool(v)))
        }

        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok($wrap(Value::Number(v.into())))
        }

        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok($wrap(Value::Number(v.into())))
        }

        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            Ok($wrap(
                Number::from_f64(v).map_or(Value::Null, Value::Number),
            ))
        }

        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(v.to_owned())))
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($wrap(Value::Null))
        }
    };
}

/// A message's `tool_calls`.
#[derive(Clone, Copy)]
pub(super) struct CallsSeed<'a>(pub &'a Cell<bool>);

impl<'de> DeserializeSeed<'de> for CallsSeed<'_> {
    type Value = Calls;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Calls, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CallsSeed<'_> {
    type Value = Calls;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    as_values!(Calls::Value);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Calls, A::Error> {
        let mut calls = Vec::with_capacity(seq.size_hint().unwrap_or(1));
        while let Some(call) = seq.next_element_seed(CallSeed(self.0))? {
            calls.push(call);
        }
        Ok(Calls::Read(calls))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Calls, A::Error> {
        Seed(self.0).visit_map(map).map(Calls::Value)
    }
}

/// One element of the array.
#[derive(Clone, Copy)]
struct CallSeed<'a>(&'a Cell<bool>);

impl<'de> DeserializeSeed<'de> for CallSeed<'_> {
    type Value = CallRead;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<CallRead, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CallSeed<'_> {
    type Value = CallRead;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    as_values!(CallRead::Other);

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<CallRead, A::Error> {
        Seed(self.0).visit_seq(seq).map(CallRead::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CallRead, A::Error> {
        let mut entries = Vec::with_capacity(3);
        while let Some(k) = map.next_key::<Key<'de>>()? {
            let k = key(k);
            let value = if k == "function" {
                map.next_value_seed(FunctionSeed(self.0))?
            } else {
                Item::Value(map.next_value_seed(Seed(self.0))?)
            };
            put(&mut entries, self.0, k, value);
        }
        Ok(CallRead::Object(entries))
    }
}

/// A call's `function`: an object as its entries.
#[derive(Clone, Copy)]
struct FunctionSeed<'a>(&'a Cell<bool>);

impl<'de> DeserializeSeed<'de> for FunctionSeed<'_> {
    type Value = Item;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Item, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FunctionSeed<'_> {
    type Value = Item;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    as_values!(Item::Value);

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Item, A::Error> {
        Seed(self.0).visit_seq(seq).map(Item::Value)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Item, A::Error> {
        let mut entries = Vec::with_capacity(2);
        while let Some(k) = map.next_key::<Key<'de>>()? {
            let value = map.next_value_seed(Seed(self.0))?;
            put(&mut entries, self.0, key(k), value);
        }
        Ok(Item::Function(entries))
    }
}
