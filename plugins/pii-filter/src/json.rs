//! Rewrites the strings of a JSON document in place. Tool results and content parts must stay
//! valid JSON after redaction, and re-serialising a parsed tree would reorder keys and reformat
//! numbers; splicing only the changed string literals keeps everything else byte for byte.

use std::borrow::Cow;

/// Where a string or number sits in the document.
#[derive(Clone, Copy, Debug)]
pub struct Site<'k> {
    /// An object key rather than a value.
    pub is_key: bool,
    /// For values: the key they sit under (for array items, the array's key).
    pub key: Option<&'k str>,
    /// Containers enclosing it (1 for a top-level object's members).
    pub depth: usize,
    /// A number literal rather than a string.
    pub number: bool,
    /// The member of the top-level object it sits in (for a top-level key, that key), if the
    /// document is an object: a tool call's argument.
    pub member: Option<&'k str>,
}

struct Frame<'a> {
    object: bool,
    expect_key: bool,
    /// The key of the member being read (objects).
    key: Option<Cow<'a, str>>,
    /// The key this container sits under.
    outer: Option<Cow<'a, str>>,
}

/// The top-level object's member being read, if the document is an object.
fn member<'s>(stack: &'s [Frame]) -> Option<&'s str> {
    stack
        .first()
        .filter(|t| t.object)
        .and_then(|t| t.key.as_deref())
}

/// Whether `text` is a JSON object or array (what a structured tool result looks like).
pub fn is_document(text: &str) -> bool {
    let t = text.trim_start();
    (t.starts_with('{') || t.starts_with('['))
        && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// Calls `f` on every string (decoded) and number (as written) in `src`, which must be valid
/// JSON. Where `f` returns new text, that literal is replaced by the new text as a JSON string.
/// Returns the rewritten document, `None` when nothing changed, or the first error.
pub fn rewrite<E>(
    src: &str,
    mut f: impl FnMut(&str, Site) -> Result<Option<String>, E>,
) -> Result<Option<String>, E> {
    let b = src.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            c @ (b'{' | b'[') => {
                let outer = stack.last().and_then(|t| {
                    if t.object {
                        t.key.clone()
                    } else {
                        t.outer.clone()
                    }
                });
                stack.push(Frame {
                    object: c == b'{',
                    expect_key: c == b'{',
                    key: None,
                    outer,
                });
                i += 1;
            }
            b'}' | b']' => {
                stack.pop();
                i += 1;
            }
            b',' => {
                if let Some(t) = stack.last_mut() {
                    t.expect_key = t.object;
                }
                i += 1;
            }
            b':' => {
                if let Some(t) = stack.last_mut() {
                    t.expect_key = false;
                }
                i += 1;
            }
            b'"' => {
                let mut j = i + 1;
                let mut escaped = false;
                while b[j] != b'"' {
                    if b[j] == b'\\' {
                        escaped = true;
                        j += 1;
                    }
                    j += 1;
                }
                let decoded: Cow<str> = if escaped {
                    Cow::Owned(serde_json::from_str(&src[i..=j]).unwrap_or_default())
                } else {
                    Cow::Borrowed(&src[i + 1..j])
                };
                let top = stack.last();
                let is_key = top.is_some_and(|t| t.object && t.expect_key);
                let key = match top {
                    Some(t) if !is_key && t.object => t.key.as_deref(),
                    Some(t) if !is_key => t.outer.as_deref(),
                    _ => None,
                };
                let member = match is_key && stack.len() == 1 {
                    true => Some(&*decoded),
                    false => member(&stack),
                };
                let site = Site {
                    is_key,
                    key,
                    depth: stack.len(),
                    number: false,
                    member,
                };
                if let Some(new) = f(&decoded, site)? {
                    splice(&mut out, src, &mut copied, i, j + 1, &new);
                }
                if is_key {
                    if let Some(t) = stack.last_mut() {
                        t.key = Some(decoded);
                    }
                }
                i = j + 1;
            }
            b'-' | b'0'..=b'9' => {
                let mut j = i;
                while j < b.len() && matches!(b[j], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    j += 1;
                }
                let top = stack.last();
                let key = match top {
                    Some(t) if t.object => t.key.as_deref(),
                    Some(t) => t.outer.as_deref(),
                    None => None,
                };
                let site = Site {
                    is_key: false,
                    key,
                    depth: stack.len(),
                    number: true,
                    member: member(&stack),
                };
                if let Some(new) = f(&src[i..j], site)? {
                    splice(&mut out, src, &mut copied, i, j, &new);
                }
                i = j;
            }
            _ => i += 1,
        }
    }
    if let Some(o) = out.as_mut() {
        o.push_str(&src[copied..]);
    }
    Ok(out)
}

fn splice(
    out: &mut Option<String>,
    src: &str,
    copied: &mut usize,
    from: usize,
    to: usize,
    s: &str,
) {
    let o = out.get_or_insert_with(|| String::with_capacity(src.len()));
    o.push_str(&src[*copied..from]);
    o.push_str(&serde_json::to_string(s).expect("strings serialize"));
    *copied = to;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_values_and_keys_keeping_layout() {
        let src = r#"{ "b": "x", "a": [1, "y\"z", {"c": "x"}], "n": 42 }"#;
        let got = rewrite::<()>(src, |s, site| {
            Ok(match (s, site.key) {
                ("x", Some("b")) => Some("X".into()),
                ("y\"z", Some("a")) => Some("Q".into()),
                ("42", _) => Some("N".into()),
                ("c", None) if site.is_key => Some("k".into()),
                _ => None,
            })
        })
        .unwrap()
        .unwrap();
        assert_eq!(got, r#"{ "b": "X", "a": [1, "Q", {"k": "x"}], "n": "N" }"#);
        assert!(rewrite::<()>(src, |_, _| Ok(None)).unwrap().is_none());
    }

    #[test]
    fn documents() {
        assert!(is_document(" {\"a\":1}"));
        assert!(is_document("[]"));
        assert!(!is_document("{not json"));
        assert!(!is_document("\"str\""));
    }
}
