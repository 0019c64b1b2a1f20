//! What a structure does, whatever its type is called: an item or block no codec maps (a newer
//! API's, a beta's) that declares a tool, connects the provider to a tool server, makes a call
//! or asks to approve one would reach the backend or the client past the tool rails. The codecs
//! map the ones they know (`responses::call_kind`, `responses::DECLARING`, Anthropic's
//! `mcp_servers`); what is left is found here by its shape, and its request or reply refused.
//! Only the structure is looked at, never the data a tool returned.

use serde_json::{Map, Value};

/// What a structure does, as an error message says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Does {
    /// Names a tool with a schema: the model would be offered it.
    Declares,
    /// Names a tool server by its address: the provider would connect to it.
    Connects,
    /// Names a tool with arguments: a call.
    Calls,
    /// Asks a person to approve a call.
    Approves,
}

impl Does {
    /// How an error names it.
    pub fn says(self) -> &'static str {
        match self {
            Does::Declares => "declares a tool",
            Does::Connects => "connects a tool server",
            Does::Calls => "makes a tool call",
            Does::Approves => "asks to approve a tool call",
        }
    }
}

/// Types the doors know to carry none of these (or to carry them where a codec maps them):
/// their contents are a tool's data or the provider's record, not a structure of their own.
const KNOWN: [&str; 13] = [
    // Mapped by the Responses codec: their tools are declarations the tools rail judges.
    "additional_tools",
    "tool_search_output",
    "mcp_list_tools",
    "mcp_approval_response",
    "mcp_tool_result",
    "mcp_tool_listing",
    "tool_search_tool_result",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "reasoning",
];

/// Keys under which a structure holds data (what a tool returned, text, an encrypted part),
/// which is judged as text and never read as structure.
const DATA: [&str; 10] = [
    "content",
    "output",
    "outputs",
    "result",
    "results",
    "error",
    "text",
    "summary",
    "encrypted_content",
    "data",
];

/// How deep a structure is looked into (`tool_addition.tool.definition` is three deep).
const DEPTH: usize = 4;

/// What `value` (an item or block no codec maps) does, if anything: the first finding, with the
/// path inside `value` it was found at.
pub fn find(value: &Value) -> Option<(String, Does)> {
    look(value, String::new(), 0)
}

fn look(value: &Value, at: String, depth: usize) -> Option<(String, Does)> {
    if depth > DEPTH {
        return None;
    }
    match value {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| look(v, format!("{at}[{i}]"), depth + 1)),
        Value::Object(obj) => {
            let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
            if KNOWN.contains(&kind) {
                return None;
            }
            if let Some(does) = does(obj, kind) {
                return Some((at, does));
            }
            obj.iter()
                .filter(|(k, _)| !DATA.contains(&k.as_str()))
                .find_map(|(k, v)| {
                    let at = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    look(v, at, depth + 1)
                })
        }
        _ => None,
    }
}

fn does(obj: &Map<String, Value>, kind: &str) -> Option<Does> {
    let named = |k: &str| obj.get(k).is_some_and(|v| v.is_string());
    if kind.ends_with("approval_request") {
        return Some(Does::Approves);
    }
    let schema = ["input_schema", "inputSchema", "parameters"]
        .iter()
        .any(|k| obj.get(*k).is_some_and(Value::is_object));
    if (named("name") || named("function")) && schema {
        return Some(Does::Declares);
    }
    if obj.get("function").is_some_and(|f| {
        f.get("name").is_some_and(Value::is_string)
            && (f.get("parameters").is_some() || f.get("arguments").is_some())
    }) {
        return Some(
            if obj
                .get("function")
                .and_then(|f| f.get("arguments"))
                .is_some()
            {
                Does::Calls
            } else {
                Does::Declares
            },
        );
    }
    let address = named("server_url") || (named("url") && matches!(kind, "mcp" | "url"));
    if address && (named("server_label") || named("name")) {
        return Some(Does::Connects);
    }
    if named("name") && (obj.contains_key("arguments") || obj.contains_key("input")) {
        return Some(Does::Calls);
    }
    None
}

/// The first structure in `messages` no codec mapped: in a content part, or in a message's
/// fields beyond what the model maps (the items and blocks riding in it), the reply's echo of
/// the request aside. Described for an error: where, and what it does.
pub fn unmapped(messages: &[crate::model::Message]) -> Option<String> {
    use crate::model::Content;
    for (i, m) in messages.iter().enumerate() {
        if let Some(Content::Parts(Value::Array(parts))) = &m.content {
            for (j, part) in parts.iter().enumerate() {
                if let Some((at, does)) = find(part) {
                    return Some(describe(i, &format!("content part {j}"), &at, does));
                }
            }
        }
        for (key, value) in &m.extra {
            if ECHOES.contains(&key.as_str()) {
                continue;
            }
            if let Some((at, does)) = find(value) {
                return Some(describe(i, key, &at, does));
            }
        }
    }
    None
}

/// The first id in `messages` that is not shaped like one (`closed::Inert::Id`): a call's id, or
/// the id a tool result answers. Ids link results to calls and are signed as they are, so they
/// are not judged as text: one that could carry text (an address, a sentence) is refused.
pub fn bad_id(messages: &[crate::model::Message]) -> Option<String> {
    use crate::codec::closed::Inert;
    let id = |s: &str| s.is_empty() || Inert::Id.holds(s);
    for (i, m) in messages.iter().enumerate() {
        if m.tool_call_id.as_deref().is_some_and(|s| !id(s)) {
            return Some(format!(
                "message {i}: the id of the call it answers is not an id (at most 256 ASCII letters, digits and _-.:=+/)"
            ));
        }
        if let Some(c) = m.tool_calls.iter().position(|c| !id(&c.id)) {
            return Some(format!(
                "message {i}, call {c}: its id is not an id (at most 256 ASCII letters, digits and _-.:=+/)"
            ));
        }
        // A turn the backend keeps (a continuation's) is known by its results' ids alone.
        if let Some(c) = m
            .tool_calls
            .iter()
            .position(|c| !m.unseen && !named(&c.name))
        {
            return Some(format!(
                "message {i}, call {c}: the tool it names is not a name (1 to 256 ASCII letters, digits and _-.:/)"
            ));
        }
    }
    None
}

/// Whether `name` is shaped like a tool's name, as every provider writes one (a namespace's
/// and an MCP server's joined to it): it is matched as a name, never judged as text.
fn named(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:/".contains(&b))
}

/// Where codecs keep what a reply repeats of its request (a Responses reply's `tools`): what
/// the backend was sent, not a structure of the reply.
const ECHOES: [&str; 2] = ["railyard.reply", "railyard.choice"];

fn describe(message: usize, place: &str, at: &str, does: Does) -> String {
    let place = place
        .strip_prefix("railyard.")
        .map_or(place.to_string(), |p| {
            format!("an item or block riding in it ({p})")
        });
    let at = if at.is_empty() {
        String::new()
    } else {
        format!(" at {at}")
    };
    format!(
        "message {message}, {place}{at}: {} that no rail can judge there, so it is not passed on",
        does.says()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn structures_are_found_by_what_they_do_whatever_they_are_called() {
        let cases = [
            (
                json!({"type": "tool_addition", "tool": {"type": "tool_definition",
                    "definition": {"name": "delete_database", "input_schema": {"type": "object"}}}}),
                Some(("tool.definition", Does::Declares)),
            ),
            (
                json!({"type": "brand_new_call", "name": "transfer", "arguments": "{}"}),
                Some(("", Does::Calls)),
            ),
            (
                json!({"type": "future_approval_request", "name": "x"}),
                Some(("", Does::Approves)),
            ),
            (
                json!({"type": "hosted_server", "server_url": "https://evil.example/mcp",
                    "server_label": "evil"}),
                Some(("", Does::Connects)),
            ),
            (
                json!({"type": "extra", "items": [{"type": "function",
                    "function": {"name": "f", "parameters": {}}}]}),
                Some(("items[0]", Does::Declares)),
            ),
            // Data is not structure: a tool's output that looks like a call, an image's url.
            (
                json!({"type": "thing", "output": {"name": "transfer", "arguments": "{}"}}),
                None,
            ),
            (
                json!({"type": "image", "source": {"type": "url", "url": "https://x"}}),
                None,
            ),
            (
                json!({"type": "mcp_list_tools", "tools": [{"name": "a", "input_schema": {}}]}),
                None,
            ),
            (
                json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "t"}]}),
                None,
            ),
        ];
        for (value, want) in cases {
            let got = find(&value);
            assert_eq!(
                got.as_ref().map(|(at, d)| (at.as_str(), *d)),
                want,
                "{value}"
            );
        }
    }
}
