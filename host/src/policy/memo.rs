//! A plugin's verdicts on the `tools` rail, kept for reuse (`memo = true` on its entry).
//!
//! Agents send the same tools on every turn, so a plugin whose verdict there depends on the tools
//! and the caller alone (not on the conversation, the time or chance: an allowlist, a scan of the
//! descriptions) is asked the same question turn after turn. A memo keeps its answers by that
//! question, which is everything the plugin is shown on the rail but the messages and the request
//! id: the tools exactly as it would see them (after the edits of the plugins before it), the
//! request's fields and the rest of the context (principal, tenant, labels, model, door). A kept
//! answer goes through the chain like a fresh one (its edits checked and applied again); faults
//! are never kept. The memo belongs to one loaded plugin, so a reload starts afresh; it is bounded
//! and starts afresh when full. Each worker keeps its own answers (`PerWorker`), so a lookup
//! touches only that worker's memory; the bound is shared out among them.

use crate::engine::PluginVerdict;
use crate::model::{Context, Field, ToolDef};
use crate::shard::PerWorker;

/// Bytes of questions one memo holds, over all its workers' parts, before they start afresh.
const MAX_BYTES: usize = 2 << 20;
/// A larger question (a very long tool list) is not kept: the plugin is asked every time.
const MAX_QUESTION: usize = 256 << 10;

/// One plugin's kept answers.
pub struct Memo {
    held: PerWorker<Held>,
    /// Bytes of questions one worker's part holds.
    part_bytes: usize,
}

#[derive(Default)]
struct Held {
    /// By the question's bytes, hashed with a per-process random seed (a caller chooses them).
    answers: hashbrown::HashMap<Box<[u8]>, PluginVerdict>,
    bytes: usize,
}

impl Default for Memo {
    fn default() -> Self {
        let held = PerWorker::<Held>::default();
        let part_bytes = (MAX_BYTES / held.len()).max(MAX_QUESTION);
        Memo { held, part_bytes }
    }
}

/// What a plugin on the tools rail is asked, but the messages and the request id, as bytes: every
/// value length-prefixed, so two different questions never read the same.
pub struct Question(Vec<u8>);

impl Question {
    /// The question for `tools`, `fields` and `ctx`; `None` when it is too long to keep.
    pub fn of(tools: &[ToolDef], fields: &[Field], ctx: &Context) -> Option<Question> {
        let mut q = Bytes(Vec::with_capacity(256));
        q.count(tools.len());
        for t in tools {
            q.text(&t.kind);
            q.opt(t.name.as_deref());
            q.opt(t.description.as_deref());
            q.opt(t.parameters.as_ref().map(|s| s.text()));
            q.opt(t.result_schema.as_ref().map(|s| s.text()));
            q.opt(t.hidden_by.as_deref());
            if q.0.len() > MAX_QUESTION {
                return None;
            }
        }
        q.count(fields.len());
        for f in fields {
            q.text(&f.path);
            q.text(&f.value);
        }
        q.opt(ctx.principal.as_deref());
        q.opt(ctx.tenant.as_deref());
        q.count(ctx.metadata.len());
        for (k, v) in &ctx.metadata {
            q.text(k);
            q.text(v);
        }
        q.opt(ctx.model.as_deref());
        q.text(&ctx.door);
        (q.0.len() <= MAX_QUESTION).then_some(Question(q.0))
    }
}

struct Bytes(Vec<u8>);

impl Bytes {
    fn count(&mut self, n: usize) {
        self.0.extend_from_slice(&(n as u64).to_le_bytes());
    }
    fn text(&mut self, s: &str) {
        self.count(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
    fn opt(&mut self, s: Option<&str>) {
        match s {
            None => self.0.push(0),
            Some(s) => {
                self.0.push(1);
                self.text(s);
            }
        }
    }
}

impl Memo {
    /// The answer kept for `question`, if any.
    pub fn answer(&self, question: &Question) -> Option<PluginVerdict> {
        self.held.mine().answers.get(&question.0[..]).cloned()
    }

    /// Keep `answer` for `question`.
    pub fn keep(&self, question: &Question, answer: &PluginVerdict) {
        let mut held = self.held.mine();
        if held.bytes + question.0.len() > self.part_bytes {
            held.answers.clear();
            held.bytes = 0;
        }
        held.bytes += question.0.len();
        held.answers
            .insert(question.0.as_slice().into(), answer.clone());
    }

    /// How many answers are kept, by every worker (for tests).
    pub fn len(&self) -> usize {
        self.held.all().map(|h| h.answers.len()).sum()
    }

    /// Whether no answer is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> ToolDef {
        ToolDef {
            kind: "function".into(),
            name: Some(name.into()),
            description: Some(description.into()),
            parameters: None,
            result_schema: None,
            hidden_by: None,
        }
    }

    fn ask(tools: &[ToolDef], ctx: &Context) -> Vec<u8> {
        Question::of(tools, &[], ctx).unwrap().0
    }

    #[test]
    fn a_question_is_everything_but_the_request_id() {
        let ctx = Context {
            request_id: "a".into(),
            principal: Some("p".into()),
            door: "chat".into(),
            ..Context::default()
        };
        let tools = [tool("f", "d")];
        let other_id = Context {
            request_id: "b".into(),
            ..ctx.clone()
        };
        assert_eq!(ask(&tools, &ctx), ask(&tools, &other_id));
        let differ = [
            Context {
                principal: Some("q".into()),
                ..ctx.clone()
            },
            Context {
                tenant: Some("p".into()),
                ..ctx.clone()
            },
            Context {
                metadata: vec![("k".into(), "v".into())],
                ..ctx.clone()
            },
            Context {
                model: Some("m".into()),
                ..ctx.clone()
            },
            Context {
                door: "mcp".into(),
                ..ctx.clone()
            },
        ];
        for other in &differ {
            assert_ne!(ask(&tools, &ctx), ask(&tools, other));
        }
        // Values never run into each other: a name's end is not the description's start.
        assert_ne!(ask(&[tool("fd", "")], &ctx), ask(&[tool("f", "d")], &ctx));
        let hidden = ToolDef {
            hidden_by: Some("allowlist".into()),
            ..tool("f", "d")
        };
        assert_ne!(ask(&tools, &ctx), ask(&[hidden], &ctx));
        let field = [Field {
            path: "user".into(),
            value: "x".into(),
        }];
        assert_ne!(
            ask(&tools, &ctx),
            Question::of(&tools, &field, &ctx).unwrap().0
        );
    }

    #[test]
    fn a_memo_is_bounded() {
        let memo = Memo::default();
        let ctx = Context::default();
        let long = "x".repeat(MAX_QUESTION);
        assert!(Question::of(&[tool("f", &long)], &[], &ctx).is_none());
        let desc = "y".repeat(100 << 10);
        // Every worker fills its part at once: the whole stays within the bound, and each finds
        // what it has just kept.
        std::thread::scope(|s| {
            for worker in 0..memo.held.len() {
                let (memo, desc, ctx) = (&memo, &desc, &ctx);
                s.spawn(move || {
                    crate::shard::mark(worker);
                    for i in 0..(MAX_BYTES / (100 << 10)) + 2 {
                        let name = format!("{worker}.{i}");
                        let q = Question::of(&[tool(&name, desc)], &[], ctx).unwrap();
                        memo.keep(&q, &PluginVerdict::Allow);
                        assert!(memo
                            .answer(&Question::of(&[tool(&name, desc)], &[], ctx).unwrap())
                            .is_some());
                    }
                });
            }
        });
        let bound = MAX_BYTES.max(MAX_QUESTION * memo.held.len());
        assert!(memo.len() * (100 << 10) <= bound, "{} kept", memo.len());
        assert!(!memo.is_empty());
        let bytes: usize = memo.held.all().map(|h| h.bytes).sum();
        assert!(bytes <= bound, "{bytes}");
    }
}
