//! A parameters schema compiled for the repair walk, and the walk.
//!
//! A pooled instance sees the same few schemas on every call. Walking a schema as JSON looks up
//! `type`, `properties`, `items`, `$ref`, `anyOf`... in a hashed map at every node of every call,
//! and follows `$ref` pointers each time. The [`Plan`] does that once per schema: each node the
//! walk can reach, with its `$ref`s and "X or null" unions followed, becomes its declared types
//! as a set and its properties and item schemas as node numbers. A call's walk then hashes
//! nothing, and writes a JSON pointer only for a value it repairs.

use railyard_plugin_sdk::reason::push_segment;
use serde_json::{Map, Number, Value};
use std::collections::HashMap;

/// Longest chain of `$ref` / nullable-union hops followed from one schema node.
pub const MAX_REF_HOPS: usize = 16;
/// Deepest nesting of arguments walked (serde_json itself refuses deeper than 128).
const MAX_DEPTH: usize = 128;

/// JSON Schema's types, as bits of a set.
const NULL: u8 = 1;
const BOOLEAN: u8 = 1 << 1;
const NUMBER: u8 = 1 << 2;
const INTEGER: u8 = 1 << 3;
const STRING: u8 = 1 << 4;
const ARRAY: u8 = 1 << 5;
const OBJECT: u8 = 1 << 6;

/// What the repairs may do (the plugin's toggles).
#[derive(Clone, Copy)]
pub struct Repairs {
    pub booleans: bool,
    pub numbers: bool,
    pub arrays: bool,
}

/// One repair: where (a JSON pointer into the arguments), and which kind (e.g.
/// `string→integer`, `copied from /file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub kind: String,
}

/// A schema compiled: node 0 is the root.
pub struct Plan {
    nodes: Vec<Node>,
}

/// A schema node as the walk reads it.
struct Node {
    /// The types its `type` declares (names the walk does not know left out); none: no repair.
    types: u8,
    /// `properties`, sorted by name.
    properties: Vec<(String, u32)>,
    /// Item schemas by position (`prefixItems`, or array-form `items` of older drafts).
    positional: Vec<u32>,
    /// The schema of the other items.
    rest: Option<u32>,
}

impl Plan {
    /// `schema` compiled (any JSON value: what is not a schema object describes nothing).
    pub fn new(schema: &Value) -> Plan {
        let mut compiler = Compiler {
            root: schema,
            numbers: HashMap::new(),
            pending: Vec::new(),
            nodes: Vec::new(),
        };
        compiler.number(schema);
        while let Some((at, node)) = compiler.pending.pop() {
            let compiled = compiler.compile(node);
            compiler.nodes[at as usize] = compiled;
        }
        Plan {
            nodes: compiler.nodes,
        }
    }

    /// Repairs `value` in place (the root value itself is never converted, only what it
    /// contains), and says what changed.
    pub fn repair(&self, repairs: Repairs, value: &mut Value) -> Vec<Change> {
        let mut walker = Walker {
            plan: self,
            repairs,
            changes: Vec::new(),
        };
        walker.walk(0, value, None, 0);
        walker.changes
    }

    fn property(&self, node: u32, key: &str) -> Option<u32> {
        let properties = &self.nodes[node as usize].properties;
        properties
            .binary_search_by(|(name, _)| name.as_str().cmp(key))
            .ok()
            .map(|i| properties[i].1)
    }
}

struct Compiler<'s> {
    root: &'s Value,
    /// Each resolved schema node's number, by its address in the parsed schema (so that a
    /// recursive `$ref` meets the node it names rather than a copy of it).
    numbers: HashMap<*const Value, u32>,
    /// Nodes numbered but not compiled yet.
    pending: Vec<(u32, &'s Value)>,
    nodes: Vec<Node>,
}

impl<'s> Compiler<'s> {
    /// The number of the node `schema` resolves to, numbering it if it is new.
    fn number(&mut self, schema: &'s Value) -> u32 {
        let schema = self.resolve(schema);
        if let Some(&n) = self.numbers.get(&std::ptr::from_ref(schema)) {
            return n;
        }
        let n = self.nodes.len() as u32;
        self.numbers.insert(std::ptr::from_ref(schema), n);
        self.nodes.push(Node {
            types: 0,
            properties: Vec::new(),
            positional: Vec::new(),
            rest: None,
        });
        self.pending.push((n, schema));
        n
    }

    fn compile(&mut self, schema: &'s Value) -> Node {
        let mut properties: Vec<(String, u32)> = match schema.get("properties") {
            Some(Value::Object(map)) => map
                .iter()
                .map(|(name, sub)| (name.clone(), self.number(sub)))
                .collect(),
            _ => Vec::new(),
        };
        properties.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let (positional, rest) = item_schemas(schema);
        Node {
            types: declared_types(schema),
            properties,
            positional: positional.iter().map(|s| self.number(s)).collect(),
            rest: rest.map(|s| self.number(s)),
        }
    }

    /// Follows local `$ref`s and picks X out of "X or null" unions, for nodes without a `type`.
    fn resolve(&self, mut schema: &'s Value) -> &'s Value {
        for _ in 0..MAX_REF_HOPS {
            let Some(node) = schema.as_object() else {
                return schema;
            };
            if node.contains_key("type") {
                return schema;
            }
            if let Some(target) = node
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| self.local_ref(r))
            {
                schema = target;
                continue;
            }
            match nullable_branch(node) {
                Some(branch) => schema = branch,
                None => return schema,
            }
        }
        schema
    }

    fn local_ref(&self, reference: &str) -> Option<&'s Value> {
        let pointer = reference.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(self.root);
        }
        if !pointer.starts_with('/') {
            return None; // named anchors are not followed
        }
        self.root.pointer(pointer)
    }
}

/// The schemas for array items: by position (`prefixItems`, or array-form `items` of older
/// drafts), then for the rest.
fn item_schemas(schema: &Value) -> (&[Value], Option<&Value>) {
    match (schema.get("prefixItems"), schema.get("items")) {
        (Some(Value::Array(prefix)), items) => (prefix, object_schema(items)),
        (None, Some(Value::Array(prefix))) => {
            (prefix, object_schema(schema.get("additionalItems")))
        }
        (None, items) => (&[], object_schema(items)),
        (Some(_), items) => (&[], object_schema(items)),
    }
}

/// A subschema given as an object (boolean schemas describe no shape to repair towards).
fn object_schema(schema: Option<&Value>) -> Option<&Value> {
    schema.filter(|s| s.is_object())
}

/// The single non-null branch of an `anyOf`/`oneOf` whose other branches are `{"type":"null"}`.
fn nullable_branch(node: &Map<String, Value>) -> Option<&Value> {
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = node.get(key) {
            let mut non_null = branches.iter().filter(|b| !is_null_schema(b));
            if let (Some(only), None) = (non_null.next(), non_null.next()) {
                return Some(only);
            }
        }
    }
    None
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// The types a node's `type` declares, as a set.
fn declared_types(schema: &Value) -> u8 {
    match schema.get("type") {
        Some(Value::String(t)) => type_named(t),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .fold(0, |set, t| set | type_named(t)),
        _ => 0,
    }
}

fn type_named(name: &str) -> u8 {
    match name {
        "null" => NULL,
        "boolean" => BOOLEAN,
        "number" => NUMBER,
        "integer" => INTEGER,
        "string" => STRING,
        "array" => ARRAY,
        "object" => OBJECT,
        _ => 0,
    }
}

/// The JSON Schema types `value` is of (a whole number is a number and an integer).
fn types_of(value: &Value) -> u8 {
    match value {
        Value::Null => NULL,
        Value::Bool(_) => BOOLEAN,
        Value::Number(n) => {
            let whole = n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0);
            if whole {
                NUMBER | INTEGER
            } else {
                NUMBER
            }
        }
        Value::String(_) => STRING,
        Value::Array(_) => ARRAY,
        Value::Object(_) => OBJECT,
    }
}

/// Where the walk is: the key or index, under the place above it. A pointer is written from
/// these only for a value that is repaired.
struct At<'a> {
    up: Option<&'a At<'a>>,
    step: Step<'a>,
}

enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The JSON pointer of `at`.
fn pointer(at: Option<&At<'_>>) -> String {
    let mut steps = Vec::new();
    let mut at = at;
    while let Some(here) = at {
        steps.push(&here.step);
        at = here.up;
    }
    let mut path = String::new();
    for step in steps.into_iter().rev() {
        match step {
            Step::Key(key) => push_segment(&mut path, key),
            Step::Index(i) => {
                path.push('/');
                path.push_str(&i.to_string());
            }
        }
    }
    path
}

struct Walker<'p> {
    plan: &'p Plan,
    repairs: Repairs,
    changes: Vec<Change>,
}

impl Walker<'_> {
    fn walk(&mut self, node: u32, value: &mut Value, at: Option<&At<'_>>, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if depth > 0 {
            self.repair_here(node, value, at);
        }
        let plan = self.plan;
        let here = &plan.nodes[node as usize];
        match value {
            Value::Object(map) => {
                if here.properties.is_empty() {
                    return;
                }
                for (key, item) in map.iter_mut() {
                    if let Some(sub) = plan.property(node, key) {
                        let at = At {
                            up: at,
                            step: Step::Key(key.as_str()),
                        };
                        self.walk(sub, item, Some(&at), depth + 1);
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    if let Some(&sub) = here.positional.get(i).or(here.rest.as_ref()) {
                        let at = At {
                            up: at,
                            step: Step::Index(i),
                        };
                        self.walk(sub, item, Some(&at), depth + 1);
                    }
                }
            }
            _ => {}
        }
    }

    /// Applies at most one scalar repair, or the array wrap, to this value.
    fn repair_here(&mut self, node: u32, value: &mut Value, at: Option<&At<'_>>) {
        let types = self.plan.nodes[node as usize].types;
        if types == 0 || types & types_of(value) != 0 {
            return;
        }
        let allows = |t: u8| types & t != 0;
        let repairs = self.repairs;
        if let Value::String(text) = value {
            if repairs.booleans && allows(BOOLEAN) {
                if let Some(b) = parse_bool(text) {
                    *value = Value::Bool(b);
                    self.record(at, "string→boolean");
                    return;
                }
            }
            if repairs.numbers && allows(NUMBER) {
                if let Some(n) = parse_number(text) {
                    *value = Value::Number(n);
                    self.record(at, "string→number");
                    return;
                }
            } else if repairs.numbers && allows(INTEGER) {
                if let Some(n) = parse_integer(text) {
                    *value = Value::Number(n);
                    self.record(at, "string→integer");
                    return;
                }
            }
        }
        if repairs.arrays && allows(ARRAY) && !value.is_null() && !value.is_array() {
            let single = value.take();
            *value = Value::Array(vec![single]);
            self.record(at, "value→array");
        }
    }

    fn record(&mut self, at: Option<&At<'_>>, kind: &str) {
        self.changes.push(Change {
            path: pointer(at),
            kind: kind.to_string(),
        });
    }
}

fn parse_bool(text: &str) -> Option<bool> {
    if text.eq_ignore_ascii_case("true") {
        Some(true)
    } else if text.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// A number spelled exactly by JSON's grammar (no surrounding space, no `+`, no hex, finite).
fn parse_number(text: &str) -> Option<Number> {
    if text.is_empty() || text.trim() != text {
        return None;
    }
    serde_json::from_str::<Number>(text).ok()
}

/// An integer spelled `-?(0|[1-9][0-9]*)` that fits in 64 bits.
fn parse_integer(text: &str) -> Option<Number> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let well_formed = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !well_formed {
        return None;
    }
    if let Ok(n) = text.parse::<u64>() {
        return Some(n.into());
    }
    text.parse::<i64>().ok().map(Into::into)
}
