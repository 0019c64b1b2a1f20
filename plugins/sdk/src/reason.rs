//! Helpers for writing reasons: they must tell a developer exactly what was wrong, and must
//! never echo values a policy is protecting (or let a model-chosen name garble the log).

use crate::ToolCall;

/// Longest model-supplied name quoted in a reason, in characters.
pub const MAX_QUOTED: usize = 80;

/// Quotes a model-supplied name for a reason: single quotes, control characters and quotes
/// escaped, cut to a readable length.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_QUOTED) + 2);
    out.push('\'');
    for (i, c) in text.chars().enumerate() {
        if i == MAX_QUOTED {
            out.push('…');
            break;
        }
        if c.is_control() || c == '\'' || c == '\\' {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// `call 'id'`, or `call #index` when the model gave no id.
pub fn call_label(call: &ToolCall, index: usize) -> String {
    if call.id.is_empty() {
        format!("call #{index}")
    } else {
        format!("call {}", quote(&call.id))
    }
}

/// Appends `/segment` to a JSON pointer: `~` and `/` escaped as the pointer syntax wants, and
/// control characters escaped too, since the pointer goes into a reason (and so into the log).
pub fn push_segment(path: &mut String, segment: &str) {
    path.push('/');
    for c in segment.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c if c.is_control() => path.extend(c.escape_debug()),
            c => path.push(c),
        }
    }
}
