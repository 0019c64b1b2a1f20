//! A request's `tools` read from their JSON text straight into declarations, as
//! `ToolDef::list_from_openai` reads them from a `Value` (the same errors, the first one
//! reported), without building a `Value` of them: a function tool's name, description and
//! `parameters` (kept as text) are all the rails use. Repeated keys are noted and numbers checked
//! as reading a `Value` would.

use super::{none, Parameters, Top};
use crate::codec::json::{whole, Check, Key, Seed};
use crate::model::{Field, PayloadError, Schema, ToolDef, CUSTOM};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::fmt;

/// The declarations, or what is wrong with the first tool that is not one.
pub(in crate::codec::chat) type Tools = Result<Vec<ToolDef>, PayloadError>;

fn err(path: impl Into<String>, message: &str) -> PayloadError {
    PayloadError::new(path, message)
}

/// Tools texts each thread keeps read, and the largest text kept: a handful of tool sets (an
/// agent's, a few tenants'), each read again only when it leaves.
const KEPT: usize = 8;
const KEPT_TEXT: usize = 32 << 10;

/// A `tools` text read, for a scope (a tenant: no tenant's request is answered from another's,
/// nor can it time whether another sent the same tools).
pub(super) struct Kept {
    scope: Box<str>,
    text: Box<str>,
    tools: Tools,
    repeats: bool,
    beyond: Beyond,
}

/// What the declarations hold beyond what the door maps.
#[derive(Debug, Clone, Default)]
pub(in crate::codec::chat) struct Beyond {
    /// Their strings, as the request's fields.
    pub fields: Vec<Field>,
    /// The first key the door does not know, by its path (`unknown_fields = "refuse"`).
    pub unknown: Option<String>,
}

/// What the declarations `tools` (a body's `tools` value) hold beyond what the door maps.
pub(super) fn beyond(tools: &Value) -> Beyond {
    use crate::codec::{chat::shape::TOOL, closed};
    Beyond {
        fields: closed::tool_fields_of(tools, "tools", &TOOL),
        unknown: closed::unknown_in_tools(tools, "tools", &TOOL),
    }
}

thread_local! {
    /// Set while reading when a declaration holds a key the door does not map (see [`fields`]).
    static OTHER_KEYS: Cell<bool> = const { Cell::new(false) };
    /// This thread's kept tools, and where the next one goes when all places are taken.
    pub(super) static KEPT_TOOLS: RefCell<(Vec<Kept>, usize)> = const { RefCell::new((Vec::new(), 0)) };
}

/// The declarations `text` (a body's `tools` value) holds, whether an object in it repeats a
/// key, and what they hold beyond what the door maps ([`beyond`]): as [`List`] reads them in
/// place, taken from this thread's kept ones when `scope` read
/// the same text lately. A text is read nested one level, as in a body, so that the depth
/// limit falls where it does for the body; an error here is not the body's (its position is
/// the text's), and the caller reads the body again for it.
pub(super) fn kept(scope: &str, text: &str) -> serde_json::Result<(Tools, bool, Beyond)> {
    let hit = KEPT_TOOLS.with(|kept| {
        let kept = kept.borrow();
        kept.0
            .iter()
            .find(|k| *k.text == *text && *k.scope == *scope)
            .map(|k| (k.tools.clone(), k.repeats, k.beyond.clone()))
    });
    if let Some(hit) = hit {
        return Ok(hit);
    }
    let repeated = Cell::new(false);
    OTHER_KEYS.with(|o| o.set(false));
    let wrapped = format!("[{text}]");
    let top = Top {
        repeated: &repeated,
        base: wrapped.as_ptr() as usize,
        scope: None,
    };
    let tools = whole(
        Nested(List(top)),
        serde_json::Deserializer::from_str(&wrapped),
    )?;
    let repeats = repeated.get();
    // A declaration's strings beyond what is read above are rare: only a text holding a key the
    // door does not map is read again as a value.
    let found = if tools.is_ok() && OTHER_KEYS.with(|o| o.replace(false)) {
        serde_json::from_str(text)
            .map(|v| beyond(&v))
            .unwrap_or_default()
    } else {
        Beyond::default()
    };
    if text.len() <= KEPT_TEXT {
        KEPT_TOOLS.with(|kept| {
            let (kept, next) = &mut *kept.borrow_mut();
            let entry = Kept {
                scope: scope.into(),
                text: text.into(),
                tools: tools.clone(),
                repeats,
                beyond: found.clone(),
            };
            if kept.len() < KEPT {
                kept.push(entry);
            } else {
                kept[*next] = entry;
                *next = (*next + 1) % KEPT;
            }
        });
    }
    Ok((tools, repeats, found))
}

/// `[tools]`: the one element read by [`List`].
#[derive(Clone, Copy)]
struct Nested<'a>(List<'a>);

impl<'de> DeserializeSeed<'de> for Nested<'_> {
    type Value = Tools;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tools, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Nested<'_> {
    type Value = Tools;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("one value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tools, A::Error> {
        let tools = seq
            .next_element_seed(self.0)?
            .ok_or_else(|| serde::de::Error::invalid_length(0, &self))?;
        match seq.next_element::<serde::de::IgnoredAny>()? {
            None => Ok(tools),
            Some(_) => Err(serde::de::Error::invalid_length(2, &self)),
        }
    }
}

/// Notes a key repeated in one object (they have a handful of keys: a list does).
#[derive(Default)]
struct Keys<'de>(Vec<Key<'de>>);

impl<'de> Keys<'de> {
    fn see(&mut self, top: Top<'_>, key: Key<'de>) {
        top.note(self.0.contains(&key));
        self.0.push(key);
    }
}

/// The `tools` value: an array of tools, or null (none).
#[derive(Clone, Copy)]
pub(super) struct List<'a>(pub(super) Top<'a>);

fn not_a_list(_: &List<'_>) -> Tools {
    Err(err("tools", "must be an array of tools"))
}

impl<'de> DeserializeSeed<'de> for List<'_> {
    type Value = Tools;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tools, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for List<'_> {
    type Value = Tools;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tools, A::Error> {
        let mut tools = Vec::with_capacity(seq.size_hint().unwrap_or(4));
        let mut first_error = None;
        let mut index = 0;
        while let Some(tool) = seq.next_element_seed(Tool { top: self.0, index })? {
            match tool {
                // After the first bad tool the rest is only read (its error is the one reported).
                Ok(_) if first_error.is_some() => {}
                Ok(tool) => tools.push(tool),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
            index += 1;
        }
        Ok(first_error.map_or(Ok(tools), Err))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Tools, A::Error> {
        Check(self.0.repeated).visit_map(map)?;
        Ok(not_a_list(&self))
    }

    fn visit_str<E>(self, _: &str) -> Result<Tools, E> {
        Ok(not_a_list(&self))
    }

    numbers!(not_a_list);

    /// `null`: no tools.
    fn visit_unit<E>(self) -> Result<Tools, E> {
        Ok(Ok(Vec::new()))
    }
}

/// A declaration holds a key the door does not map.
fn other_key() {
    OTHER_KEYS.with(|o| o.set(true));
}

/// One element of `tools`.
struct Tool<'a> {
    top: Top<'a>,
    index: usize,
}

fn not_a_tool(tool: &Tool<'_>) -> Result<ToolDef, PayloadError> {
    Err(err(format!("tools[{}]", tool.index), "must be an object"))
}

impl<'de> DeserializeSeed<'de> for Tool<'_> {
    type Value = Result<ToolDef, PayloadError>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tool<'_> {
    type Value = Result<ToolDef, PayloadError>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let top = self.top;
        let mut keys = Keys::default();
        // `None`: absent; `Some(None)`: not a string. The last of repeated keys counts.
        let mut kind: Option<Option<String>> = None;
        let mut name = None;
        let mut function = None;
        let mut custom = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            keys.see(top, key.clone());
            match &*key {
                "type" => kind = Some(map.next_value_seed(Text(top))?),
                "name" => name = map.next_value_seed(Text(top))?,
                "function" => function = Some(map.next_value_seed(FunctionSeed(top))?),
                "custom" => custom = Some(map.next_value_seed(Seed(top.repeated))?),
                _ => {
                    other_key();
                    map.next_value_seed(Check(top.repeated))?
                }
            }
        }
        let path = || format!("tools[{}]", self.index);
        let kind = match kind {
            Some(Some(kind)) => kind,
            Some(None) => return Ok(Err(err(format!("{}.type", path()), "must be a string"))),
            None => return Ok(Err(err(format!("{}.type", path()), "is required"))),
        };
        if kind == CUSTOM {
            let mut obj = serde_json::Map::new();
            let beyond = |(k, _): (&String, &Value)| {
                !matches!(k.as_str(), "name" | "description" | "format")
            };
            if custom
                .as_ref()
                .and_then(Value::as_object)
                .is_some_and(|c| c.iter().any(beyond))
            {
                other_key();
            }
            if let Some(custom) = custom {
                obj.insert("custom".into(), custom);
            }
            return Ok(super::super::json::custom_tool(&obj, &path()));
        }
        if kind != "function" {
            return Ok(Ok(ToolDef::declared(&kind, name.as_deref(), None, None)));
        }
        let Some(Some(function)) = function else {
            return Ok(Err(err(
                format!("{}.function", path()),
                "is required for function tools and must be an object",
            )));
        };
        let Some(name) = function.name else {
            return Ok(Err(err(
                format!("{}.function.name", path()),
                "is required and must be a string",
            )));
        };
        let parameters = match function.parameters {
            Parameter::Schema(schema) => Some(schema),
            Parameter::None => None,
            Parameter::Other => {
                return Ok(Err(err(
                    format!("{}.function.parameters", path()),
                    "must be a JSON Schema object",
                )))
            }
        };
        Ok(Ok(ToolDef::declared(
            &kind,
            Some(&name),
            function.description.as_deref(),
            parameters,
        )))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Check(self.top.repeated).visit_seq(seq)?;
        Ok(not_a_tool(&self))
    }

    scalars!(not_a_tool);
}

/// A string's value, `None` for anything else.
#[derive(Clone, Copy)]
struct Text<'a>(Top<'a>);

impl<'de> DeserializeSeed<'de> for Text<'_> {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Text<'_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Check(self.0.repeated).visit_map(map)?;
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Check(self.0.repeated).visit_seq(seq)?;
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    numbers!(none);
}

/// What a function tool's `function` object says of it.
struct Function {
    name: Option<String>,
    description: Option<String>,
    parameters: Parameter,
}

/// A function's `parameters`.
enum Parameter {
    /// A schema (an object or a boolean), as its text.
    Schema(Schema),
    /// Absent, or null.
    None,
    /// Anything else: not a schema.
    Other,
}

/// A tool's `function`: `None` when it is no object.
struct FunctionSeed<'a>(Top<'a>);

impl<'de> DeserializeSeed<'de> for FunctionSeed<'_> {
    type Value = Option<Function>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FunctionSeed<'_> {
    type Value = Option<Function>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let top = self.0;
        let mut keys = Keys::default();
        let mut function = Function {
            name: None,
            description: None,
            parameters: Parameter::None,
        };
        while let Some(key) = map.next_key::<Key<'de>>()? {
            keys.see(top, key.clone());
            match &*key {
                "name" => function.name = map.next_value_seed(Text(top))?,
                "description" => function.description = map.next_value_seed(Text(top))?,
                "parameters" => {
                    function.parameters = match map.next_value_seed(Parameters(top))? {
                        (_, Some(schema)) => Parameter::Schema(schema),
                        (Value::Null, None) => Parameter::None,
                        (_, None) => Parameter::Other,
                    }
                }
                "strict" => map.next_value_seed(Check(top.repeated))?,
                _ => {
                    other_key();
                    map.next_value_seed(Check(top.repeated))?
                }
            }
        }
        Ok(Some(function))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Check(self.0.repeated).visit_seq(seq)?;
        Ok(None)
    }

    scalars!(none);
}
