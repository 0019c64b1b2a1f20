//! The packed request (`wit/packed/`) back into contract 0.2.0's [`Request`](crate::Request):
//! the host passes one string and a list of numbers, the plugin sees records.
//!
//! A pooled instance judges one request after another, mostly alike; [`unpack_into`] refills the
//! previous request's strings and lists in place, so a call allocates only where this request
//! is longer than the last (`export_policy!` keeps the last request for that).

pub use crate::exports::railyard::policy_packed::plugin::{Guest as Packed, Request};

use crate::{Content, Context, Field, Message, Provenance, ToolCall, ToolDef};

/// A string whose capacity is past this is not refilled with a shorter text: it is replaced, so
/// one large request does not leave its memory held by every later one.
const MAX_KEPT: usize = 16 << 10;

/// The request a plugin judges.
pub fn unpack(request: Request) -> crate::Request {
    let mut into = crate::Request {
        rail: request.rail,
        messages: Vec::new(),
        tools: Vec::new(),
        fields: Vec::new(),
        context: Context {
            request_id: String::new(),
            principal: None,
            tenant: None,
            metadata: Vec::new(),
            model: None,
            door: String::new(),
        },
        partial: false,
    };
    unpack_into(request, &mut into);
    into
}

/// [`unpack`], written over `into` (the previous request), reusing what it holds. A layout that
/// does not fit its text is the host's bug: it panics (the host sees a fault) rather than hand
/// the plugin wrong strings.
pub fn unpack_into(request: Request, into: &mut crate::Request) {
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
    into.rail = rail;
    into.partial = partial;
    let [messages, tools, fields, metadata] = [r.n(), r.n(), r.n(), r.n()];
    let ctx = &mut into.context;
    r.string(&mut ctx.request_id);
    r.opt(&mut ctx.principal);
    r.opt(&mut ctx.tenant);
    r.opt(&mut ctx.model);
    r.string(&mut ctx.door);
    resize(&mut into.messages, messages, || Message {
        role: String::new(),
        content: None,
        name: None,
        tool_call_id: None,
        tool_calls: Vec::new(),
    });
    for m in &mut into.messages {
        r.string(&mut m.role);
        r.content(&mut m.content);
        r.opt(&mut m.name);
        r.opt(&mut m.tool_call_id);
        let calls = r.n();
        resize(&mut m.tool_calls, calls, || ToolCall {
            id: String::new(),
            kind: String::new(),
            name: String::new(),
            arguments: String::new(),
            provenance: None,
        });
        for c in &mut m.tool_calls {
            r.string(&mut c.id);
            r.string(&mut c.kind);
            r.string(&mut c.name);
            r.string(&mut c.arguments);
            c.provenance = r.provenance();
        }
    }
    resize(&mut into.tools, tools, || ToolDef {
        kind: String::new(),
        name: None,
        description: None,
        parameters: None,
        result_schema: None,
        hidden_by: None,
    });
    for t in &mut into.tools {
        r.string(&mut t.kind);
        r.opt(&mut t.name);
        r.opt(&mut t.description);
        r.opt(&mut t.parameters);
        r.opt(&mut t.result_schema);
        r.opt(&mut t.hidden_by);
    }
    resize(&mut into.fields, fields, || Field {
        path: String::new(),
        value: String::new(),
    });
    for f in &mut into.fields {
        r.string(&mut f.path);
        r.string(&mut f.value);
    }
    resize(&mut into.context.metadata, metadata, Default::default);
    for (key, value) in &mut into.context.metadata {
        r.string(key);
        r.string(value);
    }
}

/// `request` unpacked over the last request this instance unpacked on the same rail (kept for
/// the purpose), and handed to `judge`. One is kept per rail: a plugin on several rails (pii on
/// `input` and `output`) is called on them in turn, and refilling the whole conversation's
/// strings over the reply's one message, and back, would free and allocate them every call.
pub fn over_last<R>(request: Request, judge: impl FnOnce(&crate::Request) -> R) -> R {
    thread_local! {
        static LAST: std::cell::RefCell<[Option<crate::Request>; RAILS]> =
            const { std::cell::RefCell::new([const { None }; RAILS]) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        let slot = &mut last[request.rail as usize];
        let request = match slot.as_mut() {
            Some(into) => {
                unpack_into(request, into);
                into
            }
            None => slot.insert(unpack(request)),
        };
        judge(request)
    })
}

/// How many rails the contract has (`Rail`'s variants; the index of a rail is its discriminant).
const RAILS: usize = 5;
const _: () = assert!(crate::Rail::Tools as usize + 1 == RAILS);

/// `v` with `n` entries: the first ones kept (to be refilled), new ones from `new`.
fn resize<T>(v: &mut Vec<T>, n: u32, new: impl FnMut() -> T) {
    v.truncate(n as usize);
    let more = (n as usize).saturating_sub(v.len());
    v.extend(std::iter::repeat_with(new).take(more));
}

/// `s` holding `text`, in its own allocation when that is large enough and not too large.
fn set(s: &mut String, text: &str) {
    if s.capacity() > MAX_KEPT && text.len() <= MAX_KEPT {
        *s = text.to_string();
    } else {
        s.clear();
        s.push_str(text);
    }
}

struct Reader<'a> {
    text: &'a str,
    layout: std::slice::Iter<'a, u32>,
}

impl<'a> Reader<'a> {
    fn n(&mut self) -> u32 {
        *self
            .layout
            .next()
            .expect("packed request: layout too short")
    }

    /// The next span's text; `None` for an absent string.
    fn span(&mut self) -> Option<&'a str> {
        let (start, len) = (self.n(), self.n());
        if start == u32::MAX {
            return None;
        }
        let start = start as usize;
        Some(&self.text[start..start + len as usize])
    }

    fn string(&mut self, into: &mut String) {
        let text = self
            .span()
            .expect("packed request: a required string is absent");
        set(into, text);
    }

    fn opt(&mut self, into: &mut Option<String>) {
        match (self.span(), into) {
            (None, slot) => *slot = None,
            (Some(text), Some(s)) => set(s, text),
            (Some(text), slot) => *slot = Some(text.to_string()),
        }
    }

    fn content(&mut self, into: &mut Option<Content>) {
        let kind = self.n();
        match (kind, self.span(), into) {
            (0, None, slot) => *slot = None,
            (1, Some(text), Some(Content::Text(s))) | (2, Some(text), Some(Content::Parts(s))) => {
                set(s, text)
            }
            (1, Some(text), slot) => *slot = Some(Content::Text(text.to_string())),
            (2, Some(text), slot) => *slot = Some(Content::Parts(text.to_string())),
            _ => panic!("packed request: bad content"),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assistant, user};
    use crate::Rail;

    /// `messages` (text contents, no calls) packed as the host packs them (`wit/packed`).
    fn packed(rail: Rail, messages: &[Message]) -> Request {
        let (mut text, mut layout) = (String::new(), vec![messages.len() as u32, 0, 0, 0]);
        let mut span = |s: &str, layout: &mut Vec<u32>| {
            layout.extend([text.len() as u32, s.len() as u32]);
            text.push_str(s);
        };
        for s in ["req-1", "check"] {
            span(s, &mut layout);
            if s == "req-1" {
                layout.extend([u32::MAX, 0, u32::MAX, 0, u32::MAX, 0]);
            }
        }
        for m in messages {
            span(&m.role, &mut layout);
            let Some(Content::Text(t)) = &m.content else {
                unreachable!("text contents only")
            };
            layout.push(1);
            span(t, &mut layout);
            layout.extend([u32::MAX, 0, u32::MAX, 0, 0]);
        }
        Request {
            rail,
            partial: false,
            text,
            layout,
        }
    }

    /// The conversation on `input`, the reply alone on `output`, in turn: each call sees what a
    /// fresh unpack gives, and the conversation's strings are refilled where they are, not
    /// freed by the reply's call and allocated again.
    #[test]
    fn each_rail_refills_its_own_last_request() {
        let conversation: Vec<Message> = (0..6)
            .map(|i| match i % 2 {
                0 => user(&format!("question {i} about the quarterly figures")),
                _ => assistant(&format!("answer {i}")),
            })
            .collect();
        let reply = [assistant("the reply")];
        let mut kept = None;
        for round in 0..3 {
            for (rail, messages) in [(Rail::Input, &conversation[..]), (Rail::Output, &reply)] {
                let fresh = format!("{:?}", unpack(packed(rail, messages)));
                over_last(packed(rail, messages), |request| {
                    assert_eq!(format!("{request:?}"), fresh, "round {round}, {rail:?}");
                    if rail == Rail::Input {
                        let Some(Content::Text(t)) = &request.messages[5].content else {
                            unreachable!()
                        };
                        let at = t.as_ptr();
                        assert_eq!(*kept.get_or_insert(at), at, "round {round}: reallocated");
                    }
                });
            }
        }
    }
}
