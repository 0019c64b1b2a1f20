//! The packed request (`wit/packed/`) back into contract 0.2.0's [`Request`](crate::Request):
//! the host passes one string and a list of numbers, the plugin sees records.

pub use crate::exports::railyard::policy_packed::plugin::{Guest as Packed, Request};

use crate::{Content, Context, Field, Message, Provenance, ToolCall, ToolDef};

/// The request a plugin judges. A layout that does not fit its text is the host's bug: it
/// panics (the host sees a fault) rather than hand the plugin wrong strings.
pub fn unpack(request: Request) -> crate::Request {
    let Request {
        rail,
        partial,
        text,
        layout,
    } = request;
    let mut r = Reader {
        text: &text,
        layout: layout.iter(),
    };
    let [messages, tools, fields, metadata] = [r.n(), r.n(), r.n(), r.n()];
    let request_id = r.string();
    let principal = r.opt();
    let tenant = r.opt();
    let model = r.opt();
    let door = r.string();
    let messages = (0..messages)
        .map(|_| {
            let role = r.string();
            let content = match (r.n(), r.opt()) {
                (1, Some(t)) => Some(Content::Text(t)),
                (2, Some(p)) => Some(Content::Parts(p)),
                (0, None) => None,
                _ => panic!("packed request: bad content"),
            };
            let name = r.opt();
            let tool_call_id = r.opt();
            let tool_calls = (0..r.n())
                .map(|_| ToolCall {
                    id: r.string(),
                    kind: r.string(),
                    name: r.string(),
                    arguments: r.string(),
                    provenance: r.provenance(),
                })
                .collect();
            Message {
                role,
                content,
                name,
                tool_call_id,
                tool_calls,
            }
        })
        .collect();
    let tools = (0..tools)
        .map(|_| ToolDef {
            kind: r.string(),
            name: r.opt(),
            description: r.opt(),
            parameters: r.opt(),
            result_schema: r.opt(),
            hidden_by: r.opt(),
        })
        .collect();
    let fields = (0..fields)
        .map(|_| Field {
            path: r.string(),
            value: r.string(),
        })
        .collect();
    let metadata = (0..metadata).map(|_| (r.string(), r.string())).collect();
    crate::Request {
        rail,
        messages,
        tools,
        fields,
        context: Context {
            request_id,
            principal,
            tenant,
            metadata,
            model,
            door,
        },
        partial,
    }
}

struct Reader<'a> {
    text: &'a str,
    layout: std::slice::Iter<'a, u32>,
}

impl Reader<'_> {
    fn n(&mut self) -> u32 {
        *self
            .layout
            .next()
            .expect("packed request: layout too short")
    }

    fn opt(&mut self) -> Option<String> {
        let (start, len) = (self.n(), self.n());
        if start == u32::MAX {
            return None;
        }
        let start = start as usize;
        Some(self.text[start..start + len as usize].to_string())
    }

    fn string(&mut self) -> String {
        self.opt()
            .expect("packed request: a required string is absent")
    }

    fn provenance(&mut self) -> Option<Provenance> {
        Some(match self.n() {
            0 => return None,
            1 => Provenance::Valid,
            2 => Provenance::Unsigned,
            3 => Provenance::Forged,
            4 => Provenance::Altered,
            5 => Provenance::OtherTenant,
            6 => Provenance::Expired,
            n => panic!("packed request: provenance {n}"),
        })
    }
}
