//! Helpers for writing reasons: they must tell a developer exactly what was wrong, and must
//! never echo values a policy is protecting (or let a model-chosen name garble the log).

use crate::ToolCall;

/// Longest model-supplied name quoted in a reason, in bytes.
pub const MAX_QUOTED: usize = 64;

/// Quotes a model-supplied name for a reason, in single quotes, when it is shaped like a name
/// (at most [`MAX_QUOTED`] ASCII letters, digits and `_-.:/[]#`: tool names, ids, roles, JSON
/// paths); anything else is described by its length. A reason reaches the decision record and
/// the log, which must never carry free text a caller or a model chose (a sentence, an
/// address, a control character forging a log line).
pub fn quote(text: &str) -> String {
    let plain = |c: char| {
        c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/' | '[' | ']' | '#')
    };
    if text.len() <= MAX_QUOTED && text.chars().all(plain) {
        let mut out = String::with_capacity(text.len() + 2);
        out.push('\'');
        out.push_str(text);
        out.push('\'');
        out
    } else {
        format!("<{} bytes, not a name: not shown>", text.len())
    }
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
