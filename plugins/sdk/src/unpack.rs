//! The packed request (`wit/packed/`) back into contract 0.2.0's [`Request`](crate::Request):
//! the host passes one string and a list of numbers, the plugin sees records.
//!
//! A pooled instance judges one request after another, mostly alike; [`unpack_into`] refills the
//! previous request's strings and lists in place, so a call allocates only where this request
//! is longer than the last (`export_policy!` keeps the last request for that). An agent declares
//! the same tools on every turn: [`Over`] also keeps what the last request's tools were unpacked
//! from, and when this request's tools are the same spans over the same bytes it leaves them as
//! they are instead of copying each of their texts again (the host packs the tools' texts first,
//! so that their spans do not move with the conversation).

pub use crate::exports::railyard::policy_packed::plugin::{Guest as Packed, Request};
pub use crate::exports::railyard::policy_packed::prefilter::Guest as Prefilter;

use crate::{Content, Context, Field, Message, Provenance, ToolCall, ToolDef};

/// A string whose capacity is past this is not refilled with a shorter text: it is replaced, so
/// one large request does not leave its memory held by every later one.
const MAX_KEPT: usize = 16 << 10;

/// The request a plugin judges.
pub fn unpack(request: Request) -> crate::Request {
    let mut into = empty(request.rail);
    unpack_into(request, &mut into);
    into
}

/// A request with nothing in it, to unpack over.
fn empty(rail: crate::Rail) -> crate::Request {
    crate::Request {
        rail,
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
    }
}

/// [`unpack`], written over `into` (the previous request), reusing what it holds. A layout that
/// does not fit its text is the host's bug: it panics (the host sees a fault) rather than hand
/// the plugin wrong strings.
pub fn unpack_into(request: Request, into: &mut crate::Request) {
    unpack_with(request, into, None);
}

/// Requests unpacked one over the other (on one rail), with what the last one's tools were
/// unpacked from: when the next request's tools are the same, they are left as they are.
pub struct Over {
    request: crate::Request,
    tools: KeptTools,
}

impl Over {
    /// The first request.
    pub fn new(request: Request) -> Over {
        let mut over = Over {
            request: empty(request.rail),
            tools: KeptTools::default(),
        };
        over.unpack(request);
        over
    }

    /// `request` unpacked over the last one.
    pub fn unpack(&mut self, request: Request) -> &crate::Request {
        unpack_with(request, &mut self.request, Some(&mut self.tools));
        &self.request
    }
}

/// The layout numbers of the tools last unpacked (their count first) and the text their spans
/// covered; `layout` is empty when nothing is kept (at first, and after tools too large to keep).
#[derive(Default)]
struct KeptTools {
    layout: Vec<u32>,
    text: Vec<u8>,
}

/// The most text kept to compare the next request's tools with (the extent of their spans).
const MAX_KEPT_TOOLS: usize = 64 << 10;

/// Layout numbers per tool: six spans (kind, name, description, parameters, result schema,
/// hidden by) of two numbers each.
const TOOL_NUMBERS: usize = 12;

impl KeptTools {
    /// Whether `count` tools laid out as `layout` span the same bytes of `text` as those kept.
    fn same(&self, count: u32, layout: &[u32], text: &str) -> bool {
        self.layout.split_first().is_some_and(|(&kept, spans)| {
            kept == count
                && crate::by_text::same(bytes(spans), bytes(layout))
                && extent(layout)
                    .and_then(|(lo, hi)| text.as_bytes().get(lo..hi))
                    .is_some_and(|covered| crate::by_text::same(&self.text, covered))
        })
    }

    /// Keep what `count` tools laid out as `layout` span of `text` (just unpacked from it).
    fn keep(&mut self, count: u32, layout: &[u32], text: &str) {
        self.layout.clear();
        self.text.clear();
        match extent(layout) {
            Some((lo, hi)) if hi - lo <= MAX_KEPT_TOOLS => {
                self.layout.push(count);
                self.layout.extend_from_slice(layout);
                self.text.extend_from_slice(&text.as_bytes()[lo..hi]);
            }
            _ => {}
        }
    }
}

/// The bytes a run of spans covers, from the first byte of any to the last (`(0, 0)` for none).
fn extent(layout: &[u32]) -> Option<(usize, usize)> {
    let (mut lo, mut hi) = (usize::MAX, 0);
    for span in layout.chunks_exact(2) {
        if span[0] != u32::MAX {
            let start = span[0] as usize;
            lo = lo.min(start);
            hi = hi.max(start.checked_add(span[1] as usize)?);
        }
    }
    Some(if lo == usize::MAX { (0, 0) } else { (lo, hi) })
}

/// Numbers as their bytes, to be compared sixteen bytes at a time.
fn bytes(numbers: &[u32]) -> &[u8] {
    #[allow(unsafe_code)]
    // SAFETY: initialised `u32`s are as many initialised bytes, and a `u8` needs no alignment.
    unsafe {
        std::slice::from_raw_parts(
            numbers.as_ptr().cast::<u8>(),
            std::mem::size_of_val(numbers),
        )
    }
}

/// [`unpack_into`]; with `kept`, tools that are the same as the kept ones are left as they are.
fn unpack_with(request: Request, into: &mut crate::Request, kept: Option<&mut KeptTools>) {
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
    let layout = r
        .layout
        .as_slice()
        .get(..tools as usize * TOOL_NUMBERS)
        .expect("packed request: layout too short");
    match kept {
        Some(kept) if kept.same(tools, layout, &text) => {
            r.layout = r.layout.as_slice()[layout.len()..].iter();
        }
        kept => {
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
            if let Some(kept) = kept {
                kept.keep(tools, layout, &text);
            }
        }
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
        static LAST: std::cell::RefCell<[Option<Over>; RAILS]> =
            const { std::cell::RefCell::new([const { None }; RAILS]) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        let slot = &mut last[request.rail as usize];
        let request = match slot.as_mut() {
            Some(over) => over.unpack(request),
            None => &slot.insert(Over::new(request)).request,
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
#[inline(always)]
fn set(s: &mut String, text: &str) {
    if s.capacity() > MAX_KEPT && text.len() <= MAX_KEPT {
        *s = text.to_string();
    } else if text.len() <= SHORT {
        short::set(s, text);
    } else {
        s.clear();
        s.push_str(text);
    }
}

/// Texts up to this long are copied by [`short::set`].
const SHORT: usize = 128;

/// A short text copied in the plugin's own code. A copy of unknown length compiles to
/// WebAssembly's `memory.copy`, which wasmtime runs as a call out to the host: some fifty
/// instructions before the first byte is moved, more than the whole copy of a name or a
/// description, and a request's unpacking copies a hundred such strings.
mod short {
    /// `s` holding `text` (at most [`super::SHORT`] bytes): sixteen bytes at a time, the last
    /// chunk overlapping the one before; shorter texts in two overlapping words.
    pub fn set(s: &mut String, text: &str) {
        let n = text.len();
        s.clear();
        s.reserve(n);
        let src = text.as_ptr();
        #[allow(unsafe_code)]
        // SAFETY: `s` has room for `n` bytes; every read below is within `text`'s `n` bytes and
        // every write within the first `n` of `s`'s buffer, which ends up holding `text`'s bytes,
        // so valid UTF-8, before the length is set to `n`.
        unsafe {
            let v = s.as_mut_vec();
            let dst = v.as_mut_ptr();
            if n >= 16 {
                let mut i = 0;
                while i + 16 < n {
                    copy16(dst.add(i), src.add(i));
                    i += 16;
                }
                copy16(dst.add(n - 16), src.add(n - 16));
            } else if n >= 8 {
                copy_word::<u64>(dst, src);
                copy_word::<u64>(dst.add(n - 8), src.add(n - 8));
            } else if n >= 4 {
                copy_word::<u32>(dst, src);
                copy_word::<u32>(dst.add(n - 4), src.add(n - 4));
            } else if n > 0 {
                *dst = *src;
                *dst.add(n / 2) = *src.add(n / 2);
                *dst.add(n - 1) = *src.add(n - 1);
            }
            v.set_len(n);
        }
    }

    /// One `T`'s bytes from `src` to `dst`, neither aligned.
    #[allow(unsafe_code)]
    unsafe fn copy_word<T: Copy>(dst: *mut u8, src: *const u8) {
        // SAFETY: the caller gives `size_of::<T>()` readable bytes at `src`, writable at `dst`.
        unsafe {
            dst.cast::<T>()
                .write_unaligned(src.cast::<T>().read_unaligned())
        }
    }

    /// Sixteen bytes from `src` to `dst`: one v128 load and store in a plugin.
    #[cfg(target_arch = "wasm32")]
    #[allow(unsafe_code)]
    #[target_feature(enable = "simd128")]
    unsafe fn copy16(dst: *mut u8, src: *const u8) {
        use core::arch::wasm32::{v128, v128_load, v128_store};
        // SAFETY: the caller gives sixteen readable bytes at `src`, writable at `dst`; v128
        // loads and stores need no alignment.
        unsafe { v128_store(dst.cast::<v128>(), v128_load(src.cast::<v128>())) }
    }

    #[cfg(not(target_arch = "wasm32"))]
    #[allow(unsafe_code)]
    unsafe fn copy16(dst: *mut u8, src: *const u8) {
        // SAFETY: as above.
        unsafe { copy_word::<[u8; 16]>(dst, src) }
    }
}

struct Reader<'a> {
    text: &'a str,
    layout: std::slice::Iter<'a, u32>,
}

impl<'a> Reader<'a> {
    #[inline(always)]
    fn n(&mut self) -> u32 {
        *self
            .layout
            .next()
            .expect("packed request: layout too short")
    }

    /// The next span's text; `None` for an absent string.
    #[inline(always)]
    fn span(&mut self) -> Option<&'a str> {
        let (start, len) = (self.n(), self.n());
        if start == u32::MAX {
            return None;
        }
        let start = start as usize;
        Some(&self.text[start..start + len as usize])
    }

    #[inline(always)]
    fn string(&mut self, into: &mut String) {
        let text = self
            .span()
            .expect("packed request: a required string is absent");
        set(into, text);
    }

    #[inline(always)]
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

    /// Every length a short copy handles, and past it, over a string that held something
    /// longer, shorter and none: the text, no more, no less.
    #[test]
    fn a_short_copy_is_the_text() {
        let source: String = (0..=SHORT + 20)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        for before in ["", "xyz", &"#".repeat(40), &"#".repeat(300)] {
            for n in 0..=SHORT + 20 {
                let mut s = before.to_string();
                set(&mut s, &source[..n]);
                assert_eq!(s, source[..n], "{n} bytes over {} bytes", before.len());
            }
        }
        let mut s = String::new();
        set(&mut s, "ünïcødé ✓");
        assert_eq!(s, "ünïcødé ✓");
    }
}
