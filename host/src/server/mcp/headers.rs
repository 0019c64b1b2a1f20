//! Which headers cross the door, each way, and the stateless protocol's routing headers.
//!
//! Since MCP 2026-07-28 a request repeats parts of its body in headers (`Mcp-Method`, `Mcp-Name`,
//! and `Mcp-Param-<token>` for arguments whose schema says `x-mcp-header`), and the upstream
//! refuses a request whose headers and body disagree. When a policy edits a call, the headers
//! are written again from the edited body.

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use base64::Engine as _;
use serde_json::Value;

/// Request headers of the transport, passed to the upstream as the caller sent them.
const REQUEST: [&str; 7] = [
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "mcp-method",
    "mcp-name",
];

/// Response headers passed back to the caller.
const RESPONSE: [&str; 6] = [
    "content-type",
    "mcp-session-id",
    "cache-control",
    "x-accel-buffering",
    "allow",
    "retry-after",
];

/// Prefix of the headers that mirror arguments.
const PARAM_PREFIX: &str = "mcp-param-";

/// The headers for the upstream: the transport's, the argument mirrors, and the caller headers
/// the server's config forwards. Nothing else of the caller's (its Railyard key, cookies,
/// `Origin`) goes on.
pub fn upstream(caller: &HeaderMap, forward: &[HeaderName]) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in caller {
        let n = name.as_str();
        if REQUEST.contains(&n) || n.starts_with(PARAM_PREFIX) || forward.contains(name) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// The upstream response headers the caller gets.
pub fn downstream(upstream: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in RESPONSE {
        if let Some(v) = upstream.get(name) {
            out.insert(HeaderName::from_static(name), v.clone());
        }
    }
    out
}

/// The headers of a message the daemon sends the upstream itself in the caller's session (its
/// own `tools/list`, an answer to a server's request it refused): the caller's upstream headers,
/// a JSON body that may be answered either way, and none of the caller's request's routing
/// headers (they describe that request, not this message).
pub fn own_message(caller: &HeaderMap) -> HeaderMap {
    let mut headers = caller.clone();
    headers.insert(
        "accept",
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    let routing: Vec<HeaderName> = headers
        .keys()
        .filter(|k| {
            let k = k.as_str();
            k == "mcp-method" || k == "mcp-name" || k.starts_with("mcp-param-")
        })
        .cloned()
        .collect();
    for k in routing {
        headers.remove(k);
    }
    headers
}

/// Whether the request uses the stateless protocol's routing headers.
pub fn routed(headers: &HeaderMap) -> bool {
    headers.contains_key("mcp-method")
}

/// Write `Mcp-Name` and the `Mcp-Param-*` headers again for a call to `name` with `arguments`,
/// whose input schema is `schema` (the upstream's declaration).
pub fn mirror(headers: &mut HeaderMap, name: &str, arguments: &Value, schema: Option<&Value>) {
    if let Ok(v) = HeaderValue::from_str(&encode(name)) {
        headers.insert(HeaderName::from_static("mcp-name"), v);
    }
    let stale: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with(PARAM_PREFIX))
        .cloned()
        .collect();
    for k in stale {
        headers.remove(k);
    }
    let mut mirrored = Vec::new();
    if let Some(schema) = schema {
        annotated(schema, &mut Vec::new(), &mut mirrored);
    }
    mirror_params(headers, arguments, &mirrored);
}

/// Write the `Mcp-Param-*` headers of `mirrored` (token, argument path) from `arguments`.
fn mirror_params(headers: &mut HeaderMap, arguments: &Value, mirrored: &[(String, Vec<String>)]) {
    for (token, path) in mirrored {
        let mut value = arguments;
        for key in path {
            match value.get(key) {
                Some(v) => value = v,
                None => {
                    value = &Value::Null;
                    break;
                }
            }
        }
        let text = match value {
            Value::String(s) => encode(s),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => i.to_string(),
                (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 => {
                    format!("{}", f as i64)
                }
                _ => n.to_string(),
            },
            _ => continue,
        };
        let name = HeaderName::try_from(format!("{PARAM_PREFIX}{}", token.to_ascii_lowercase()));
        if let (Ok(name), Ok(value)) = (name, HeaderValue::from_str(&text)) {
            headers.insert(name, value);
        }
    }
}

/// Whether the routing headers a caller sent with a call to `name` with `arguments` (whose
/// input schema is `schema`) say what its body says, as the specification asks a server to
/// check: `Mcp-Name` is there and names the tool, each argument the schema mirrors
/// (`x-mcp-header`) has its `Mcp-Param-*` header exactly when the body holds it, with the same
/// value (plain visible ASCII, or valid `=?base64?...?=`), and no other. `Err`: what is wrong.
pub fn check(
    headers: &HeaderMap,
    name: &str,
    arguments: &Value,
    schema: Option<&Value>,
) -> Result<(), String> {
    match headers.get("mcp-name").map(decoded) {
        None => return Err("the Mcp-Name header is missing".into()),
        Some(Err(e)) => return Err(format!("the Mcp-Name header {e}")),
        Some(Ok(v)) if v != name => {
            return Err("the Mcp-Name header does not name the tool the body calls".into())
        }
        Some(Ok(_)) => {}
    }
    let mut mirrored = Vec::new();
    if let Some(schema) = schema {
        annotated(schema, &mut Vec::new(), &mut mirrored);
    }
    let mut expected = HeaderMap::new();
    mirror_params(&mut expected, arguments, &mirrored);
    for (token, _) in &mirrored {
        let header = format!("{PARAM_PREFIX}{}", token.to_ascii_lowercase());
        let sent = headers.get(header.as_str());
        let wanted = expected.get(header.as_str());
        match (sent, wanted) {
            (None, None) => {}
            (None, Some(_)) => return Err(format!("the {header} header is missing")),
            (Some(_), None) => {
                return Err(format!(
                    "the {header} header names an argument the body does not hold"
                ))
            }
            (Some(sent), Some(wanted)) => {
                let sent = decoded(sent).map_err(|e| format!("the {header} header {e}"))?;
                let wanted = decoded(wanted).unwrap_or_default();
                if sent != wanted {
                    return Err(format!("the {header} header does not match the body"));
                }
            }
        }
    }
    Ok(())
}

/// A header value as the protocol reads it: plain visible ASCII, or `=?base64?...?=`.
fn decoded(value: &HeaderValue) -> Result<String, &'static str> {
    let text = value
        .to_str()
        .map_err(|_| "holds characters a header value may not (encode it as =?base64?...?=)")?;
    match text
        .strip_prefix("=?base64?")
        .and_then(|t| t.strip_suffix("?="))
    {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or("is not valid base64 of UTF-8 text"),
        None => Ok(text.to_string()),
    }
}

/// The `x-mcp-header` tokens of `schema` and the argument paths they mirror: properties reached
/// from the root through `properties` only.
fn annotated(schema: &Value, path: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, sub) in properties {
        path.push(key.clone());
        if let Some(token) = sub.get("x-mcp-header").and_then(Value::as_str) {
            out.push((token.to_string(), path.clone()));
        }
        annotated(sub, path, out);
        path.pop();
    }
}

/// A header value as the protocol writes it: as it is when it is plain visible ASCII without
/// surrounding spaces, else `=?base64?...?=`.
pub fn encode(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_transport_and_configured_headers_go_upstream() {
        let mut caller = HeaderMap::new();
        caller.insert(
            "authorization",
            HeaderValue::from_static("Bearer ry-secret"),
        );
        caller.insert("cookie", HeaderValue::from_static("a=b"));
        caller.insert("origin", HeaderValue::from_static("http://evil.example"));
        caller.insert("mcp-session-id", HeaderValue::from_static("abc"));
        caller.insert("mcp-param-region", HeaderValue::from_static("eu"));
        caller.insert("x-user-token", HeaderValue::from_static("t"));
        let out = upstream(&caller, &[HeaderName::from_static("x-user-token")]);
        let mut names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        names.sort();
        assert_eq!(
            names,
            ["mcp-param-region", "mcp-session-id", "x-user-token"]
        );
    }

    #[test]
    fn edited_arguments_are_mirrored_again() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "where": {"type": "object", "properties": {"city": {"type": "string", "x-mcp-header": "City"}}},
            "note": {"type": "string"}}});
        let mut h = HeaderMap::new();
        h.insert("mcp-param-region", HeaderValue::from_static("us"));
        h.insert("mcp-param-stale", HeaderValue::from_static("x"));
        let args = json!({"region": "eu-west", "count": 3.0, "where": {"city": "Zürich"}});
        mirror(&mut h, "get weather", &args, Some(&schema));
        assert_eq!(h["mcp-name"], "get weather");
        assert_eq!(h["mcp-param-region"], "eu-west");
        assert_eq!(h["mcp-param-count"], "3");
        assert_eq!(h["mcp-param-city"], "=?base64?WsO8cmljaA==?=");
        assert!(!h.contains_key("mcp-param-stale"));
    }

    #[test]
    fn values_that_need_it_are_base64() {
        assert_eq!(encode("plain value"), "plain value");
        assert_eq!(encode(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert_eq!(encode("=?base64?x?="), "=?base64?PT9iYXNlNjQ/eD89?=");
    }
}
