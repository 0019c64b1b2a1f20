//! A message's `tool_calls` read from their JSON text into [`Calls`]: an array's objects as
//! their entries in order (a `function` object's too), with no map built or key hashed; anything
//! else as the `Value` it is. What is read is what a `Value` of it holds (the same keys in the
//! same order, the last of repeated keys counting), and repeats are noted as reading a `Value`
//! notes them, so that checking it gives what checking the `Value` gives.

use crate::codec::chat::json::{CallRead, Calls, Entries, Item};
use crate::codec::json::{Key, Seed};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
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

/// Reads an object's entries, each value by `value` (given the key).
fn entries<'de, A: MapAccess<'de>, T>(
    mut map: A,
    repeated: &Cell<bool>,
    capacity: usize,
    mut value: impl FnMut(&mut A, &str) -> Result<T, A::Error>,
) -> Result<Entries<T>, A::Error> {
    let mut entries = Vec::with_capacity(capacity);
    while let Some(k) = map.next_key::<Key<'de>>()? {
        let k = key(k);
        let v = value(&mut map, &k)?;
        put(&mut entries, repeated, k, v);
    }
    Ok(entries)
}

/// The visits of a scalar, which no seed here reads into entries: the `Value` [`Seed`] makes of
/// it, wrapped by `$wrap`.
macro_rules! scalars_as_values {
    ($wrap:expr) => {
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Seed(self.0).visit_bool(v).map($wrap)
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Seed(self.0).visit_i64(v).map($wrap)
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Seed(self.0).visit_u64(v).map($wrap)
        }

        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Seed(self.0).visit_f64(v).map($wrap)
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Seed(self.0).visit_str(v).map($wrap)
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Seed(self.0).visit_unit().map($wrap)
        }
    };
}

/// [`scalars_as_values!`], and arrays as well.
macro_rules! as_values {
    ($wrap:expr) => {
        scalars_as_values!($wrap);

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            Seed(self.0).visit_seq(seq).map($wrap)
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

    scalars_as_values!(Calls::Value);

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

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<CallRead, A::Error> {
        let r = self.0;
        entries(map, r, 3, |map, k| match k {
            "function" => map.next_value_seed(FunctionSeed(r)),
            _ => map.next_value_seed(Seed(r)).map(Item::Value),
        })
        .map(CallRead::Object)
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

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Item, A::Error> {
        let r = self.0;
        entries(map, r, 2, |map, _| map.next_value_seed(Seed(r))).map(Item::Function)
    }
}
