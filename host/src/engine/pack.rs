//! The question for a plugin built with the Rust SDK: contract 0.2.0's request packed into one
//! string and a list of numbers (`wit/packed/policy-packed.wit` gives the layout), which the
//! component model copies into the plugin in two allocations instead of one per string.

use super::verdict::EvalRequest;
use crate::contract::packed;
use crate::model::{Content, Provenance, ToolDef};

/// An absent optional string.
const ABSENT: [u32; 2] = [u32::MAX, 0];

/// The packed request for `src`: measured first, so that the text and the layout are each
/// allocated once, then written.
pub fn request(src: &EvalRequest<'_>) -> packed::Request {
    let mut size = Packer {
        measure: true,
        ..Packer::default()
    };
    fill(&mut size, src);
    let mut p = Packer {
        text: String::with_capacity(size.text_len),
        layout: Vec::with_capacity(size.layout_len),
        ..Packer::default()
    };
    fill(&mut p, src);
    // Parts are not measured; everything else is, exactly.
    debug_assert_eq!(p.layout.len(), size.layout_len);
    debug_assert!(p.text.len() >= size.text_len);
    packed::Request {
        rail: src.rail.into(),
        partial: src.partial,
        text: p.text,
        layout: p.layout,
    }
}

/// Write (or measure) `src` in the layout's order, the tools' texts first in the text: a request
/// with the same tools as the last then packs them into the same bytes at the same offsets,
/// whatever the conversation, and the SDK keeps the tools it unpacked (`unpack::Over`).
fn fill(p: &mut Packer, src: &EvalRequest<'_>) {
    let ctx = src.ctx;
    for t in src.tools {
        for s in tool_texts(t).into_iter().flatten() {
            p.text_first(s);
        }
    }
    let mut tools_at = 0;
    p.num(src.messages.len());
    p.num(src.tools.len());
    p.num(src.fields.len());
    p.num(ctx.metadata.len());
    p.span(&ctx.request_id);
    p.opt(ctx.principal.as_deref());
    p.opt(ctx.tenant.as_deref());
    p.opt(ctx.model.as_deref());
    p.span(&ctx.door);
    for m in src.messages {
        p.span(&m.role);
        match &m.content {
            None => {
                p.num(0);
                p.opt(None);
            }
            Some(Content::Text(t)) => {
                p.num(1);
                p.span(t);
            }
            Some(Content::Parts(v)) => {
                p.num(2);
                p.json(v);
            }
        }
        p.opt(m.name.as_deref());
        p.opt(m.tool_call_id.as_deref());
        p.num(m.tool_calls.len());
        for c in &m.tool_calls {
            p.span(&c.id);
            p.span(&c.kind);
            p.span(&c.name);
            p.span(&c.arguments);
            p.num(c.provenance.map_or(0, provenance));
        }
    }
    for t in src.tools {
        for s in tool_texts(t) {
            p.span_written(&mut tools_at, s);
        }
    }
    for f in src.fields {
        p.span(&f.path);
        p.span(&f.value);
    }
    for (key, value) in &ctx.metadata {
        p.span(key);
        p.span(value);
    }
}

/// A tool's texts in the layout's order: kind, name, description, parameters, result schema,
/// hidden by (the kind is never absent).
fn tool_texts(t: &ToolDef) -> [Option<&str>; 6] {
    [
        Some(&*t.kind),
        t.name.as_deref(),
        t.description.as_deref(),
        t.parameters.as_ref().map(|s| s.text()),
        t.result_schema.as_ref().map(|s| s.text()),
        t.hidden_by.as_deref(),
    ]
}

/// 1 + the index of `p` in the contract's `provenance` enum.
fn provenance(p: Provenance) -> usize {
    match p {
        Provenance::Valid => 1,
        Provenance::Unsigned => 2,
        Provenance::Forged => 3,
        Provenance::Altered => 4,
        Provenance::OtherTenant => 5,
        Provenance::Expired => 6,
    }
}

/// Writes the text and the layout, or with `measure` only counts their lengths.
#[derive(Default)]
struct Packer {
    measure: bool,
    text_len: usize,
    layout_len: usize,
    text: String,
    layout: Vec<u32>,
}

impl Packer {
    /// A count. (A request of 4 GiB never gets here: bodies are capped far below that, and no
    /// plugin's memory could take it.)
    fn num(&mut self, n: usize) {
        if self.measure {
            self.layout_len += 1;
        } else {
            self.layout.push(n as u32);
        }
    }

    /// `s` appended to the text, its span to the layout.
    fn span(&mut self, s: &str) {
        if self.measure {
            self.text_len += s.len();
            self.layout_len += 2;
        } else {
            self.layout.extend([self.text.len() as u32, s.len() as u32]);
            self.text.push_str(s);
        }
    }

    /// `s` appended to the text ahead of the layout (which [`Packer::span_written`] writes).
    fn text_first(&mut self, s: &str) {
        if self.measure {
            self.text_len += s.len();
        } else {
            self.text.push_str(s);
        }
    }

    /// The span of `s`, written to the text at `at` already (by [`Packer::text_first`]), or
    /// absent; `at` moves past it.
    fn span_written(&mut self, at: &mut usize, s: Option<&str>) {
        match s {
            Some(s) if !self.measure => {
                self.layout.extend([*at as u32, s.len() as u32]);
                *at += s.len();
            }
            None if !self.measure => self.layout.extend(ABSENT),
            _ => self.layout_len += 2,
        }
    }

    fn opt(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.span(s),
            None if self.measure => self.layout_len += 2,
            None => self.layout.extend(ABSENT),
        }
    }

    /// Content parts, as JSON text (rare: not measured, the text grows for them).
    fn json(&mut self, v: &serde_json::Value) {
        if self.measure {
            self.layout_len += 2;
        } else {
            self.span(&serde_json::to_string(v).unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    //! Packed by the host, unpacked by the SDK the plugins use: the same request as 0.2.0's
    //! records, string for string.
    use super::*;
    use crate::contract::wit;
    use crate::model::{Context, Field, Message, Rail, Schema, ToolCall};
    use railyard_plugin_sdk as sdk;
    use serde_json::json;

    fn call(id: &str, provenance: Option<Provenance>) -> ToolCall {
        ToolCall {
            id: id.into(),
            kind: "function".into(),
            name: "get_weather".into(),
            arguments: r#"{"city": "Zürich"}"#.into(),
            extra: Default::default(),
            function_extra: Default::default(),
            provenance,
        }
    }

    fn message(role: &str, content: Option<Content>, calls: Vec<ToolCall>) -> Message {
        let mut m = Message::new(role, content);
        m.tool_calls = calls;
        m
    }

    /// Every shape a request's parts take: absent and empty strings, multi-byte text, parts
    /// content, calls with and without provenance, tools with every option set and none.
    fn payload() -> (Vec<Message>, Vec<ToolDef>, Vec<Field>, Context) {
        let mut tool = message("tool", Some(Content::Text("18 °C, ☀".into())), Vec::new());
        tool.name = Some("get_weather".into());
        tool.tool_call_id = Some("call_1".into());
        let messages = vec![
            message("system", Some(Content::Text(String::new())), Vec::new()),
            message(
                "user",
                Some(Content::Parts(
                    json!([{"type": "text", "text": "héllo 👋"}]),
                )),
                Vec::new(),
            ),
            message(
                "assistant",
                None,
                vec![
                    call("call_1", Some(Provenance::Valid)),
                    call("call_2", None),
                    call("call_3", Some(Provenance::Expired)),
                ],
            ),
            tool,
            message("assistant", Some(Content::Text("done".into())), Vec::new()),
        ];
        let tools = vec![
            ToolDef {
                kind: "function".into(),
                name: Some("get_weather".into()),
                description: Some("Weather for a city ☂".into()),
                parameters: Some(Schema::of(&json!({"type": "object"}))),
                result_schema: Some(Schema::of(&json!({"type": "string"}))),
                hidden_by: Some("allowlist".into()),
            },
            ToolDef {
                kind: "web_search".into(),
                name: None,
                description: None,
                parameters: None,
                result_schema: None,
                hidden_by: None,
            },
        ];
        let fields = vec![Field {
            path: "user".into(),
            value: "ü-42".into(),
        }];
        let ctx = Context {
            request_id: "ry-1".into(),
            principal: Some("alice".into()),
            tenant: None,
            metadata: vec![("team".into(), "blue".into()), (String::new(), "x".into())],
            model: Some("m".into()),
            door: "chat".into(),
        };
        (messages, tools, fields, ctx)
    }

    /// The SDK's request in the host's 0.2.0 records, to compare the two.
    fn to_host(r: sdk::Request) -> wit::Request {
        let content = |c: sdk::Content| match c {
            sdk::Content::Text(t) => wit::Content::Text(t),
            sdk::Content::Parts(p) => wit::Content::Parts(p),
        };
        wit::Request {
            rail: match r.rail {
                sdk::Rail::Input => wit::Rail::Input,
                sdk::Rail::Output => wit::Rail::Output,
                sdk::Rail::ToolCall => wit::Rail::ToolCall,
                sdk::Rail::ToolResult => wit::Rail::ToolResult,
                sdk::Rail::Tools => wit::Rail::Tools,
            },
            messages: r
                .messages
                .into_iter()
                .map(|m| wit::Message {
                    role: m.role,
                    content: m.content.map(content),
                    name: m.name,
                    tool_call_id: m.tool_call_id,
                    tool_calls: m
                        .tool_calls
                        .into_iter()
                        .map(|c| wit::ToolCall {
                            id: c.id,
                            kind: c.kind,
                            name: c.name,
                            arguments: c.arguments,
                            provenance: c.provenance.map(|p| match p {
                                sdk::Provenance::Valid => wit::Provenance::Valid,
                                sdk::Provenance::Unsigned => wit::Provenance::Unsigned,
                                sdk::Provenance::Forged => wit::Provenance::Forged,
                                sdk::Provenance::Altered => wit::Provenance::Altered,
                                sdk::Provenance::OtherTenant => wit::Provenance::OtherTenant,
                                sdk::Provenance::Expired => wit::Provenance::Expired,
                            }),
                        })
                        .collect(),
                })
                .collect(),
            tools: r
                .tools
                .into_iter()
                .map(|t| wit::ToolDef {
                    kind: t.kind,
                    name: t.name,
                    description: t.description,
                    parameters: t.parameters,
                    result_schema: t.result_schema,
                    hidden_by: t.hidden_by,
                })
                .collect(),
            fields: r
                .fields
                .into_iter()
                .map(|f| wit::Field {
                    path: f.path,
                    value: f.value,
                })
                .collect(),
            context: wit::Context {
                request_id: r.context.request_id,
                principal: r.context.principal,
                tenant: r.context.tenant,
                metadata: r.context.metadata,
                model: r.context.model,
                door: r.context.door,
            },
            partial: r.partial,
        }
    }

    fn to_sdk(packed: packed::Request) -> sdk::unpack::Request {
        sdk::unpack::Request {
            rail: match packed.rail {
                wit::Rail::Input => sdk::Rail::Input,
                wit::Rail::Output => sdk::Rail::Output,
                wit::Rail::ToolCall => sdk::Rail::ToolCall,
                wit::Rail::ToolResult => sdk::Rail::ToolResult,
                wit::Rail::Tools => sdk::Rail::Tools,
            },
            partial: packed.partial,
            text: packed.text,
            layout: packed.layout,
        }
    }

    fn round_trip(src: &EvalRequest<'_>) {
        let packed = request(src);
        let unpacked = sdk::unpack::unpack(to_sdk(packed));
        assert_eq!(
            format!("{:?}", to_host(unpacked)),
            format!("{:?}", crate::engine::convert::request02(src))
        );
    }

    /// The same parts shuffled: contents change kind or go, calls move between messages, tool
    /// options flip, the context's options too.
    fn shuffled() -> (Vec<Message>, Vec<ToolDef>, Vec<Field>, Context) {
        let (mut messages, mut tools, _, mut ctx) = payload();
        messages.reverse();
        messages[0].content = Some(Content::Parts(json!(["x"])));
        messages[1].content = None;
        messages[1].tool_calls = vec![call("call_9", Some(Provenance::Forged))];
        for t in &mut tools {
            t.description = t.description.take().xor(Some("d".into()));
            t.hidden_by = t.hidden_by.take().xor(Some("h".into()));
        }
        tools.reverse();
        ctx.principal = None;
        ctx.tenant = Some("support".into());
        ctx.metadata.truncate(1);
        (messages, tools, Vec::new(), ctx)
    }

    /// The bound on a plugin's answer counts the same texts in every form of the question: the
    /// packed text is the 0.2 question's texts and the context's; the 0.1 question lacks the
    /// calls' kinds, the fields, the result schemas and the tools hidden from it.
    #[test]
    fn every_form_of_a_question_counts_the_same_texts() {
        use crate::engine::convert::{bytes01, bytes02, request01, request02};
        for (messages, tools, fields, ctx) in [payload(), shuffled()] {
            let src = EvalRequest {
                rail: Rail::Input,
                messages: &messages,
                tools: &tools,
                fields: &fields,
                ctx: &ctx,
                caps: &crate::caps::NONE,
                partial: false,
            };
            let parts: usize = messages
                .iter()
                .filter_map(|m| match &m.content {
                    Some(Content::Parts(p)) => Some(p.to_string().len()),
                    _ => None,
                })
                .sum();
            assert!(parts > 0, "a message with parts, counted as its JSON text");
            let context = ctx.request_id.len()
                + ctx.principal.as_ref().map_or(0, String::len)
                + ctx.tenant.as_ref().map_or(0, String::len)
                + ctx.model.as_ref().map_or(0, String::len)
                + ctx.door.len()
                + ctx
                    .metadata
                    .iter()
                    .map(|(k, v)| k.len() + v.len())
                    .sum::<usize>();
            let v02 = bytes02(&request02(&src));
            assert_eq!(request(&src).text.len(), v02 + context);
            let kinds: usize = messages
                .iter()
                .flat_map(|m| &m.tool_calls)
                .map(|c| c.kind.len())
                .sum();
            let unseen: usize = fields
                .iter()
                .map(|f| f.path.len() + f.value.len())
                .sum::<usize>()
                + tools
                    .iter()
                    .map(|t| match &t.hidden_by {
                        Some(by) => {
                            t.kind.len()
                                + t.name.as_deref().map_or(0, str::len)
                                + t.description.as_deref().map_or(0, str::len)
                                + t.parameters.as_ref().map_or(0, |s| s.text().len())
                                + t.result_schema.as_ref().map_or(0, |s| s.text().len())
                                + by.len()
                        }
                        None => t.result_schema.as_ref().map_or(0, |s| s.text().len()),
                    })
                    .sum::<usize>();
            assert_eq!(bytes01(&request01(&src)), v02 - kinds - unseen);
        }
    }

    /// A pooled plugin's SDK unpacks each request over the last one: whatever came before,
    /// nothing of it shows through, and a large string is not kept for a small one. The same
    /// through `Over`, which leaves tools as they are when they are the same: among these, the
    /// same tools after another conversation, tools of the same lengths with other bytes, a tool
    /// option gone, the tools reordered, and none.
    #[test]
    fn unpacking_over_the_last_request_leaves_nothing_of_it() {
        let full = payload();
        let other = shuffled();
        let mut large = payload();
        large.0[0].content = Some(Content::Text("é".repeat(20_000)));
        let none = (Vec::new(), Vec::new(), Vec::new(), Context::default());
        // The same conversation as `full`, with the same tools but for one byte of a name.
        let mut renamed = payload();
        renamed.1[0].name = Some("get_weathes".into());
        // And with the first tool's description gone.
        let mut fewer = payload();
        fewer.1[0].description = None;
        // `full`'s tools after `other`'s conversation.
        let same_tools = (
            other.0.clone(),
            full.1.clone(),
            other.2.clone(),
            other.3.clone(),
        );
        let order = [
            &full,
            &other,
            &none,
            &full,
            &large,
            &other,
            &full,
            &same_tools,
            &full,
            &renamed,
            &full,
            &fewer,
            &full,
            &other,
        ];
        let mut last: Option<sdk::Request> = None;
        let mut over: Option<sdk::unpack::Over> = None;
        for (i, (messages, tools, fields, ctx)) in order.into_iter().enumerate() {
            let src = EvalRequest {
                rail: if i % 2 == 0 {
                    Rail::ToolCall
                } else {
                    Rail::Input
                },
                messages,
                tools,
                fields,
                ctx,
                caps: &crate::caps::NONE,
                partial: i % 3 == 0,
            };
            let expected = format!("{:?}", crate::engine::convert::request02(&src));
            let packed = to_sdk(request(&src));
            let unpacked = match last.as_mut() {
                Some(into) => {
                    sdk::unpack::unpack_into(packed, into);
                    into
                }
                None => last.insert(sdk::unpack::unpack(packed)),
            };
            assert_eq!(
                format!("{:?}", to_host(unpacked.clone())),
                expected,
                "request {i}"
            );
            let packed = to_sdk(request(&src));
            let unpacked = match over.as_mut() {
                Some(over) => over.unpack(packed),
                // The first request unpacked twice: the second time with its tools kept.
                None => over
                    .insert(sdk::unpack::Over::new(packed))
                    .unpack(to_sdk(request(&src))),
            };
            assert_eq!(
                format!("{:?}", to_host(unpacked.clone())),
                expected,
                "request {i} through Over"
            );
        }
        // `other` after `large`: the 40 KB string the first message held was not kept.
        let mut after = sdk::unpack::unpack(to_sdk(request(&EvalRequest {
            rail: Rail::Input,
            messages: &large.0,
            tools: &[],
            fields: &[],
            ctx: &large.3,
            caps: &crate::caps::NONE,
            partial: false,
        })));
        sdk::unpack::unpack_into(
            to_sdk(request(&EvalRequest {
                rail: Rail::Input,
                messages: &full.0,
                tools: &[],
                fields: &[],
                ctx: &full.3,
                caps: &crate::caps::NONE,
                partial: false,
            })),
            &mut after,
        );
        match &after.messages[0].content {
            Some(sdk::Content::Text(t)) => assert!(t.is_empty() && t.capacity() < 1024),
            other => panic!("{other:?}"),
        }
    }

    /// The tools' texts come first, so the same tools pack into the same spans over the same
    /// bytes whatever the conversation and context: what lets the SDK keep them.
    #[test]
    fn the_same_tools_pack_the_same_whatever_the_conversation() {
        let (messages, tools, fields, ctx) = payload();
        let (others, _, _, other_ctx) = shuffled();
        let packed = |messages: &[Message], ctx: &Context| {
            request(&EvalRequest {
                rail: Rail::ToolCall,
                messages,
                tools: &tools,
                fields: &fields,
                ctx,
                caps: &crate::caps::NONE,
                partial: false,
            })
        };
        let (a, b) = (packed(&messages, &ctx), packed(&others, &other_ctx));
        // The tools' numbers: the twelve per tool before the fields' and the metadata's two
        // spans each at the end.
        let tail = |p: &packed::Request| {
            let end = p.layout.len() - 4 * (fields.len() + p.layout[3] as usize);
            p.layout[end - 12 * tools.len()..end].to_vec()
        };
        assert_eq!(tail(&a), tail(&b));
        let covered: usize = tools
            .iter()
            .flat_map(|t| tool_texts(t).into_iter().flatten())
            .map(str::len)
            .sum();
        assert_eq!(a.text[..covered], b.text[..covered]);
        assert_ne!(a.text[covered..], b.text[covered..]);
    }

    #[test]
    fn the_sdk_unpacks_what_the_host_packs() {
        let (messages, tools, fields, ctx) = payload();
        for rail in [Rail::Input, Rail::Output, Rail::ToolCall, Rail::Tools] {
            for partial in [false, true] {
                round_trip(&EvalRequest {
                    rail,
                    messages: &messages,
                    tools: &tools,
                    fields: &fields,
                    ctx: &ctx,
                    caps: &crate::caps::NONE,
                    partial,
                });
            }
        }
        // And the smallest request: nothing but the context.
        round_trip(&EvalRequest {
            rail: Rail::Input,
            messages: &[],
            tools: &[],
            fields: &[],
            ctx: &Context::default(),
            caps: &crate::caps::NONE,
            partial: false,
        });
    }
}
