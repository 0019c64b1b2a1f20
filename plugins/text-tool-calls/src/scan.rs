//! Finding tool calls written as text, as a pure function over one text: which formats, where
//! each call's markup starts and ends, and where an unfinished one begins.
//!
//! Formats:
//! - Hermes / Qwen: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`;
//! - Llama 3.1: `<|python_tag|>{"name": ..., "parameters": {...}}`, up to `<|eom_id|>` or
//!   `<|eot_id|>` (taken with the call) or the end of the JSON;
//! - Llama 3.1 JSON: a reply that is only a JSON object `{"name": ..., "parameters": {...}}`
//!   (optionally `"type": "function"`, nothing else);
//! - Llama / Mistral: `<function=NAME>{...}</function>` (the JSON object is the arguments).
//!
//! Inside markup, `arguments` may also be spelled `parameters` (and the reverse), may be a JSON
//! string holding the object, or may be absent (no arguments). JSON that does not parse (or has
//! a duplicate key), arguments that are not an object, a missing name, or other text between
//! the JSON and the closing tag make the markup plain text, not a call.
//!
//! A text judged while more is still to come (`complete = false`) may end inside a call: the
//! JSON or the closing tag not there yet, or a marker cut short (`<tool_`). That is reported as
//! the place from which the text should be held back. A complete text is lenient where a
//! stream may have been cut: a call whose JSON is whole but whose closing tag is missing (or
//! half there) at the very end still counts.

use railyard_plugin_sdk::json::parse_strict;
use serde_json::error::Category;
use serde_json::Value;

/// The ways a model writes a tool call as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Format {
    /// `<tool_call>{...}</tool_call>`.
    Hermes,
    /// `<|python_tag|>{...}`.
    PythonTag,
    /// The whole reply is `{"name": ..., "parameters": {...}}`.
    RawJson,
    /// `<function=NAME>{...}</function>`.
    Function,
}

impl Format {
    /// How reasons name the format.
    pub fn label(self) -> &'static str {
        match self {
            Format::Hermes => "Hermes/Qwen <tool_call> markup",
            Format::PythonTag => "Llama 3.1 <|python_tag|> markup",
            Format::RawJson => "a Llama 3.1 JSON reply",
            Format::Function => "<function=NAME> markup",
        }
    }
}

/// One call found in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub format: Format,
    /// Byte range of its markup in the text.
    pub start: usize,
    pub end: usize,
    pub name: String,
    /// The arguments object, serialised (key order kept).
    pub arguments: String,
}

/// What one text holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// Complete calls, in order.
    pub calls: Vec<Found>,
    /// Where an unfinished call (or a marker cut short) begins; it runs to the end of the text.
    /// Only for a text with more to come.
    pub unfinished: Option<(usize, Option<Format>)>,
}

const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "</tool_call>";
const PYTHON_TAG: &str = "<|python_tag|>";
const LLAMA_ENDS: [&str; 2] = ["<|eom_id|>", "<|eot_id|>"];
const FUNCTION_OPEN: &str = "<function=";
const FUNCTION_CLOSE: &str = "</function>";
/// What every call [`scan`] finds in a complete text starts with: a marker, or `{` for a reply
/// that is only a JSON call. A text holding none of them has no call in it, so the plugin allows
/// it: the host is told (`triggers`) and skips the plugin on such replies, the usual kind.
pub const TRIGGERS: [&str; 4] = [HERMES_OPEN, PYTHON_TAG, FUNCTION_OPEN, "{"];

/// Each starts with `<` (see [`next_marker`]).
const MARKERS: [(&str, Format); 3] = [
    (HERMES_OPEN, Format::Hermes),
    (PYTHON_TAG, Format::PythonTag),
    (FUNCTION_OPEN, Format::Function),
];

/// What follows one marker.
enum Parsed {
    Call(Found),
    /// The text ends inside the markup.
    Unfinished,
    /// Not a call: the markup stays text.
    Text,
}

/// Finds the calls in `text`; `complete`: no more text will follow.
pub fn scan(text: &str, complete: bool) -> Scan {
    match raw_json(text, complete) {
        Raw::Call(found) => {
            return Scan {
                calls: vec![found],
                unfinished: None,
            }
        }
        Raw::Hold(at) => {
            return Scan {
                calls: vec![],
                unfinished: Some((at, Some(Format::RawJson))),
            }
        }
        Raw::No => {}
    }
    let mut out = Scan::default();
    let mut pos = 0;
    while let Some((at, marker, format)) = next_marker(text, pos) {
        match parse_at(text, at, marker, format, complete) {
            Parsed::Call(found) => {
                pos = found.end;
                out.calls.push(found);
            }
            Parsed::Unfinished => {
                out.unfinished = Some((at, Some(format)));
                return out;
            }
            Parsed::Text => pos = at + marker.len(),
        }
    }
    if !complete {
        out.unfinished = cut_marker(text, pos).map(|at| (at, None));
    }
    out
}

/// The first marker at or after `pos`. Every marker starts with `<`, so one pass stops at each
/// `<` and compares there (replies rarely hold one), instead of a substring search per marker;
/// `memchr` looks for it a word at a time (a byte loop was most of this plugin's time).
fn next_marker(text: &str, pos: usize) -> Option<(usize, &'static str, Format)> {
    let b = text.as_bytes();
    let mut from = pos;
    while let Some(k) = memchr::memchr(b'<', &b[from..]) {
        let at = from + k;
        if let Some(&(m, f)) = MARKERS
            .iter()
            .find(|(m, _)| b[at..].starts_with(m.as_bytes()))
        {
            return Some((at, m, f));
        }
        from = at + 1;
    }
    None
}

/// Where a marker cut short by the end of the text begins (`<`, `<tool_`, `<|python`,
/// `<function`), at or after `pos`.
fn cut_marker(text: &str, pos: usize) -> Option<usize> {
    let longest = MARKERS.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    (1..longest).rev().find_map(|k| {
        let at = text.len().checked_sub(k)?;
        if at < pos || !text.is_char_boundary(at) {
            return None;
        }
        let tail = &text[at..];
        MARKERS
            .iter()
            .any(|(m, _)| m.len() > k && m.starts_with(tail))
            .then_some(at)
    })
}

fn skip_ws(text: &str, mut p: usize) -> usize {
    while p < text.len() && text.as_bytes()[p].is_ascii_whitespace() {
        p += 1;
    }
    p
}

/// A JSON value starting at `p`.
enum Json {
    Value(Value, usize),
    /// The text ends inside it.
    Cut,
    Bad,
}

fn json_at(text: &str, p: usize) -> Json {
    let mut stream = serde_json::Deserializer::from_str(&text[p..]).into_iter::<Value>();
    match stream.next() {
        Some(Ok(_)) => {
            let end = p + stream.byte_offset();
            // Again, refusing duplicate keys: which one the application would read is unknown.
            match parse_strict(&text[p..end]) {
                Ok(value) => Json::Value(value, end),
                Err(_) => Json::Bad,
            }
        }
        Some(Err(e)) if e.classify() == Category::Eof => Json::Cut,
        None => Json::Cut,
        Some(Err(_)) => Json::Bad,
    }
}

/// `Unfinished` for a text with more to come, else `Text`.
fn cut(complete: bool) -> Parsed {
    if complete {
        Parsed::Text
    } else {
        Parsed::Unfinished
    }
}

fn parse_at(text: &str, at: usize, marker: &str, format: Format, complete: bool) -> Parsed {
    let mut p = at + marker.len();
    let mut function_name = None;
    if format == Format::Function {
        let rest = &text[p..];
        let len = rest
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            .count();
        if p + len == text.len() {
            return cut(complete);
        }
        if len == 0 || rest.as_bytes()[len] != b'>' {
            return Parsed::Text;
        }
        function_name = Some(rest[..len].to_string());
        p += len + 1;
    }
    p = skip_ws(text, p);
    if p == text.len() {
        return cut(complete);
    }
    // `<function=NAME></function>`: a call without arguments.
    if format == Format::Function && text[p..].starts_with(FUNCTION_CLOSE) {
        return Parsed::Call(Found {
            format,
            start: at,
            end: p + FUNCTION_CLOSE.len(),
            name: function_name.unwrap_or_default(),
            arguments: "{}".into(),
        });
    }
    if text.as_bytes()[p] != b'{' {
        return Parsed::Text;
    }
    let (value, json_end) = match json_at(text, p) {
        Json::Value(v, end) => (v, end),
        Json::Cut => return cut(complete),
        Json::Bad => return Parsed::Text,
    };
    let (name, arguments) = match function_name {
        Some(name) => (name, value),
        None => match markup_call(value) {
            Some(call) => call,
            None => return Parsed::Text,
        },
    };
    let Ok(arguments) = serde_json::to_string(&arguments) else {
        return Parsed::Text;
    };
    let found = |end| {
        Parsed::Call(Found {
            format,
            start: at,
            end,
            name: name.clone(),
            arguments: arguments.clone(),
        })
    };
    let q = skip_ws(text, json_end);
    let rest = &text[q..];
    let closers: &[&str] = match format {
        Format::Hermes => &[HERMES_CLOSE],
        Format::Function => &[FUNCTION_CLOSE],
        _ => &LLAMA_ENDS,
    };
    if let Some(close) = closers.iter().find(|c| rest.starts_with(**c)) {
        return found(q + close.len());
    }
    let closing = rest.is_empty() || closers.iter().any(|c| c.starts_with(rest));
    match (closing, complete, format) {
        // The end of the text, or a closing tag cut short by it.
        (true, false, _) => Parsed::Unfinished,
        (true, true, _) => found(text.len()),
        // After <|python_tag|>'s JSON the call is over whatever follows.
        (false, _, Format::PythonTag) => found(json_end),
        (false, _, _) => Parsed::Text,
    }
}

/// Name and arguments of a call object inside markup: `name` (a non-empty string) and
/// `arguments` or `parameters` (an object, a string holding one, or absent).
fn markup_call(value: Value) -> Option<(String, Value)> {
    let Value::Object(mut map) = value else {
        return None;
    };
    let name = match map.remove("name")? {
        Value::String(s) if !s.is_empty() => s,
        _ => return None,
    };
    let arguments = match map.remove("arguments").or_else(|| map.remove("parameters")) {
        None => Value::Object(Default::default()),
        Some(v @ Value::Object(_)) => v,
        Some(Value::String(s)) => match parse_strict(&s).ok()? {
            v @ Value::Object(_) => v,
            _ => return None,
        },
        Some(_) => return None,
    };
    Some((name, arguments))
}

enum Raw {
    Call(Found),
    /// Might become a call: hold from here.
    Hold(usize),
    No,
}

/// Keys a Llama 3.1 JSON call may have.
const RAW_KEYS: [&str; 3] = ["name", "parameters", "type"];

/// A reply that is only a JSON call object.
fn raw_json(text: &str, complete: bool) -> Raw {
    let start = text.len() - text.trim_start().len();
    if !text[start..].starts_with('{') {
        return Raw::No;
    }
    match json_at(text, start) {
        Json::Value(value, end) if text[end..].trim().is_empty() => match raw_call(value) {
            Some((name, arguments)) if complete => Raw::Call(Found {
                format: Format::RawJson,
                start,
                end: text.len(),
                name,
                arguments,
            }),
            // More may follow, making it more than a JSON object.
            Some(_) => Raw::Hold(start),
            None => Raw::No,
        },
        Json::Cut if !complete && may_be_call(&text[start + 1..]) => Raw::Hold(start),
        _ => Raw::No,
    }
}

/// Whether an object's text so far (after `{`) may still become a call: no key yet, or a
/// first key that a call has.
fn may_be_call(after_brace: &str) -> bool {
    let rest = after_brace.trim_start();
    if rest.is_empty() {
        return true;
    }
    let Some(key) = rest.strip_prefix('"') else {
        return false;
    };
    match key.find('"') {
        None => RAW_KEYS.iter().any(|k| k.starts_with(key)),
        Some(end) => RAW_KEYS.contains(&&key[..end]),
    }
}

/// `{"name": "...", "parameters": {...}}`, optionally with `"type": "function"`, and nothing
/// else.
fn raw_call(value: Value) -> Option<(String, String)> {
    let Value::Object(map) = value else {
        return None;
    };
    if map.keys().any(|k| !RAW_KEYS.contains(&k.as_str())) {
        return None;
    }
    if map.get("type").is_some_and(|t| t != "function") {
        return None;
    }
    let name = map.get("name")?.as_str().filter(|n| !n.is_empty())?;
    let parameters = map.get("parameters").filter(|p| p.is_object())?;
    Some((name.to_string(), serde_json::to_string(parameters).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(text: &str) -> Vec<(Format, String, String)> {
        scan(text, true)
            .calls
            .into_iter()
            .map(|f| (f.format, f.name, f.arguments))
            .collect()
    }

    fn one(format: Format, name: &str, arguments: &str) -> Vec<(Format, String, String)> {
        vec![(format, name.into(), arguments.into())]
    }

    #[test]
    fn hermes() {
        let text = r#"Let me look.
<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
</tool_call>"#;
        let s = scan(text, true);
        assert_eq!(s.calls.len(), 1);
        let f = &s.calls[0];
        assert_eq!((f.start, f.end), (13, text.len()));
        assert_eq!(f.name, "get_weather");
        assert_eq!(f.arguments, r#"{"city":"Paris","days":3}"#);
        // Arguments as a JSON string, spelled parameters, or absent.
        assert_eq!(
            calls(r#"<tool_call>{"name":"f","arguments":"{\"a\":1}"}</tool_call>"#),
            one(Format::Hermes, "f", r#"{"a":1}"#)
        );
        assert_eq!(
            calls(r#"<tool_call>{"name":"f","parameters":{"a":1}}</tool_call>"#),
            one(Format::Hermes, "f", r#"{"a":1}"#)
        );
        assert_eq!(
            calls(r#"<tool_call>{"name":"now"}</tool_call>"#),
            one(Format::Hermes, "now", "{}")
        );
    }

    #[test]
    fn python_tag() {
        assert_eq!(
            calls(r#"<|python_tag|>{"name": "get_time", "parameters": {"tz": "UTC"}}<|eom_id|>"#),
            one(Format::PythonTag, "get_time", r#"{"tz":"UTC"}"#)
        );
        let text = r#"<|python_tag|>{"name": "f", "parameters": {}} and then some text"#;
        let s = scan(text, true);
        assert_eq!(s.calls[0].end, text.find(" and").unwrap());
        let text = "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}\n<|eot_id|>";
        assert_eq!(scan(text, true).calls[0].end, text.len());
        // Built-in tool syntax is not JSON: not a call.
        assert!(calls(r#"<|python_tag|>brave_search.call(query="x")"#).is_empty());
    }

    #[test]
    fn raw_json_reply() {
        assert_eq!(
            calls(" {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}\n"),
            one(Format::RawJson, "get_weather", r#"{"city":"Oslo"}"#)
        );
        assert_eq!(
            calls(r#"{"type": "function", "name": "f", "parameters": {}}"#),
            one(Format::RawJson, "f", "{}")
        );
        // Only a reply that is nothing but the object, with exactly those keys.
        for text in [
            r#"Here: {"name": "f", "parameters": {}}"#,
            r#"{"name": "f", "parameters": {}} done"#,
            r#"{"name": "f", "parameters": {}, "extra": 1}"#,
            r#"{"name": "f", "arguments": {}}"#,
            r#"{"name": "f"}"#,
            r#"{"type": "object", "name": "f", "parameters": {}}"#,
            r#"{"name": "f", "parameters": "x"}"#,
            r#"{"name": "Ada", "age": 36}"#,
        ] {
            assert!(calls(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn function_markup() {
        assert_eq!(
            calls(r#"<function=get_weather>{"city": "Rome"}</function>"#),
            one(Format::Function, "get_weather", r#"{"city":"Rome"}"#)
        );
        assert_eq!(
            calls("<function=now></function>"),
            one(Format::Function, "now", "{}")
        );
        for text in [
            r#"<function=>{"a":1}</function>"#,
            r#"<function=f x>{"a":1}</function>"#,
            r#"<function=f>[1]</function>"#,
            r#"<function=f>{"a":1} trailing</function>"#,
        ] {
            assert!(calls(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn several_calls_in_order_with_text_around() {
        let text = r#"First <tool_call>{"name":"a","arguments":{}}</tool_call> then
<function=b>{"x":1}</function> and <tool_call>{"name":"c","arguments":{"y":[2]}}</tool_call>."#;
        assert_eq!(
            calls(text),
            vec![
                (Format::Hermes, "a".into(), "{}".into()),
                (Format::Function, "b".into(), r#"{"x":1}"#.into()),
                (Format::Hermes, "c".into(), r#"{"y":[2]}"#.into()),
            ]
        );
    }

    #[test]
    fn markers_are_found_among_other_angle_brackets() {
        assert!(MARKERS.iter().all(|(m, _)| m.starts_with('<')));
        let text =
            r#"a < b, <b>bold</b> <tool <function <|python <<tool_call>{"name":"f"}</tool_call>"#;
        assert_eq!(calls(text), one(Format::Hermes, "f", "{}"));
        assert!(calls("x < y and <i>z</i> <").is_empty());
    }

    #[test]
    fn malformed_markup_is_text() {
        for text in [
            r#"<tool_call>{"name": "f", "arguments": {"a": 1,}}</tool_call>"#,
            r#"<tool_call>{"name": "f", "arguments": {"a": 1, "a": 2}}</tool_call>"#,
            r#"<tool_call>{"arguments": {}}</tool_call>"#,
            r#"<tool_call>{"name": "", "arguments": {}}</tool_call>"#,
            r#"<tool_call>{"name": "f", "arguments": [1]}</tool_call>"#,
            r#"<tool_call>{"name": "f", "arguments": "not json"}</tool_call>"#,
            r#"<tool_call>{"name": "f"} extra </tool_call>"#,
            r#"<tool_call>call f please</tool_call>"#,
            "Use <tool_call> tags to call tools.",
            r#"<tool_call>{"name": "f", "arguments": {"a": 1"#,
        ] {
            assert!(calls(text).is_empty(), "{text}");
        }
        // A malformed one does not hide a good one after it.
        assert_eq!(
            calls(r#"<tool_call>oops</tool_call> <tool_call>{"name":"g"}</tool_call>"#),
            one(Format::Hermes, "g", "{}")
        );
    }

    #[test]
    fn a_complete_text_forgives_a_missing_closing_tag() {
        for text in [
            r#"<tool_call>{"name":"f","arguments":{}}"#,
            "<tool_call>{\"name\":\"f\",\"arguments\":{}}\n</tool_",
            r#"<function=f>{}"#,
            r#"<|python_tag|>{"name":"f","parameters":{}}<|eo"#,
        ] {
            let s = scan(text, true);
            assert_eq!(s.calls.len(), 1, "{text}");
            assert_eq!(s.calls[0].end, text.len(), "{text}");
        }
    }

    #[test]
    fn unfinished_calls_while_streaming() {
        let held = |text: &str| scan(text, false).unfinished.map(|(at, _)| at);
        for (text, at) in [
            (r#"Sure. <tool_call>{"name": "x", "argu"#, 6),
            ("Sure. <tool_call>", 6),
            ("Sure. <tool_call>\n  ", 6),
            (r#"Sure. <tool_call>{"name":"x","arguments":{}}"#, 6),
            (r#"Sure. <tool_call>{"name":"x","arguments":{}}</tool_c"#, 6),
            (r#"Sure. <|python_tag|>{"name": "x", "parameters": {"#, 6),
            (r#"Sure. <|python_tag|>{"name": "x", "parameters": {}}"#, 6),
            (
                r#"Sure. <|python_tag|>{"name": "x", "parameters": {}}<|eo"#,
                6,
            ),
            ("Sure. <function=get_wea", 6),
            ("Sure. <function=f>", 6),
            (r#"Sure. <function=f>{"a": "#, 6),
            ("Sure. <tool_", 6),
            ("Sure. <|python", 6),
            ("Sure. <function", 6),
            ("Sure. <", 6),
            ("Sure. <|", 6),
        ] {
            assert_eq!(held(text), Some(at), "{text}");
        }
        for text in [
            "Sure. <b>bold</b>",
            "a < b",
            "Sure.",
            "<tool_call>nope</tool_call>",
            "x <functional>",
        ] {
            assert_eq!(held(text), None, "{text}");
        }
        // Complete calls before an unfinished one are reported too.
        let s = scan(
            r#"<tool_call>{"name":"a"}</tool_call> <tool_call>{"name":"b"#,
            false,
        );
        assert_eq!(s.calls.len(), 1);
        assert_eq!(s.unfinished.map(|u| u.0), Some(36));
    }

    #[test]
    fn a_raw_json_reply_is_held_while_it_may_be_a_call() {
        let held = |text: &str| scan(text, false).unfinished.map(|(at, _)| at);
        assert_eq!(held("{"), Some(0));
        assert_eq!(held(" {\"na"), Some(1));
        assert_eq!(held(r#"{"name": "get_weather", "param"#), Some(0));
        assert_eq!(held(r#"{"name": "f", "parameters": {}}"#), Some(0));
        assert_eq!(held(r#"{"type": "function", "#), Some(0));
        // JSON that cannot be a call is not held.
        assert_eq!(held(r#"{"answer": 42, "#), None);
        assert_eq!(held(r#"{"name": "Ada", "age": 36}"#), None);
        assert_eq!(held(r#"{"name": "f", "parameters": {}} and more"#), None);
    }
}
