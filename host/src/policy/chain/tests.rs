//! The chain's semantics, natively, with fake plugins.

use super::*;
use crate::engine::verdict::{Edit, RawContent, Rejection, Target};
use crate::model::{Content, Message};
use std::sync::atomic::{AtomicUsize, Ordering};

/// [`super::run`], whose fakes never wait, so it finishes at its first poll.
fn run<'a, E: Evaluate + 'a>(
    rail: Rail,
    steps: impl Iterator<Item = Turn<'a, E>> + Send,
    payload: Payload,
    ctx: &Context,
    partial: bool,
) -> Evaluation {
    run_explained(rail, steps, payload, ctx, partial, false)
}

/// [`super::run_explained`], likewise.
fn run_explained<'a, E: Evaluate + 'a>(
    rail: Rail,
    steps: impl Iterator<Item = Turn<'a, E>> + Send,
    payload: Payload,
    ctx: &Context,
    partial: bool,
    explain: bool,
) -> Evaluation {
    futures_util::FutureExt::now_or_never(super::run_explained(
        rail,
        steps,
        payload,
        ctx,
        &crate::caps::NONE,
        partial,
        explain,
    ))
    .expect("a chain of plugins that never wait finishes at once")
}

/// A plugin that answers a fixed verdict (or fault), counting its calls.
struct Fake {
    id: &'static str,
    answer: Result<PluginVerdict, PluginFault>,
    calls: AtomicUsize,
}

impl Fake {
    fn new(id: &'static str, answer: Result<PluginVerdict, PluginFault>) -> Fake {
        Fake {
            id,
            answer,
            calls: AtomicUsize::new(0),
        }
    }
}

impl Evaluate for Fake {
    fn id(&self) -> &str {
        self.id
    }
    fn evaluate(
        &self,
        request: &EvalRequest<'_>,
        _prepared: &mut Prepared,
    ) -> Result<PluginVerdict, PluginFault> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        // Every plugin sees the edits of the plugins before it.
        if let Some(Content::Text(t)) = &request.messages[0].content {
            if t.contains("seen") {
                return Ok(PluginVerdict::Block(format!("{} saw {t}", self.id)));
            }
        }
        self.answer.clone()
    }
}

/// A turn without a memo.
fn turn<E>(plugin: &E, on_error: OnError, mode: Mode, history: bool) -> Turn<'_, E> {
    Turn {
        plugin,
        on_error,
        mode,
        history,
        declared_tools: true,
        memo: None,
    }
}

fn user(text: &str) -> Payload {
    Payload {
        messages: vec![Message::new("user", Some(Content::Text(text.into())))],
        ..Payload::default()
    }
}

fn edit(text: &str) -> PluginVerdict {
    PluginVerdict::Modify {
        edits: vec![Edit::Content {
            message: 0,
            content: RawContent::Text(text.into()),
        }],
        reason: "edited".into(),
    }
}

fn fault() -> Result<PluginVerdict, PluginFault> {
    Err(PluginFault {
        kind: FaultKind::Trap,
        message: "boom".into(),
    })
}

/// Run enforced `steps` over one user message.
fn go(steps: &[(&Fake, OnError)], text: &str) -> Evaluation {
    let enforced: Vec<_> = steps
        .iter()
        .map(|&(p, on_error)| (p, on_error, Mode::Enforce))
        .collect();
    go_modes(&enforced, text)
}

#[test]
fn edits_thread_through_and_the_strongest_verdict_wins() {
    let a = Fake::new("a", Ok(edit("seen")));
    let b = Fake::new("b", Ok(PluginVerdict::Allow));
    let e = go(&[(&a, OnError::Block), (&b, OnError::Block)], "x");
    assert_eq!(e.verdict, Verdict::Block, "b saw a's edit");
    assert_eq!(e.blocked.unwrap().reason, "b saw seen");
}

#[test]
fn a_block_stops_the_chain() {
    let a = Fake::new("a", Ok(PluginVerdict::Block("no".into())));
    let b = Fake::new("b", Ok(PluginVerdict::Allow));
    let e = go(&[(&a, OnError::Block), (&b, OnError::Block)], "x");
    assert_eq!(e.verdict, Verdict::Block);
    assert_eq!(b.calls.load(Ordering::Relaxed), 0);
    assert_eq!(e.decisions.len(), 1);
}

#[test]
fn faults_fail_closed_or_open_and_are_never_blocks_of_their_own() {
    let bad = Fake::new("bad", fault());
    let after = Fake::new("after", Ok(edit("later")));
    let closed = go(&[(&bad, OnError::Block), (&after, OnError::Block)], "x");
    assert_eq!(closed.verdict, Verdict::Block);
    assert!(closed.blocked.as_ref().unwrap().fault);
    assert_eq!(closed.decisions[0].verdict, Decided::Fault);
    let open = go(&[(&bad, OnError::Allow), (&after, OnError::Block)], "x");
    assert_eq!(open.verdict, Verdict::Modify, "the fault was skipped");
    assert_eq!(open.decisions[0].on_error, Some(OnError::Allow));
    assert_eq!(
        open.payload.messages[0].content,
        Some(Content::Text("later".into()))
    );
}

/// A plugin whose edit names a message that does not exist.
fn out_of_range() -> Fake {
    Fake::new(
        "p",
        Ok(PluginVerdict::Modify {
            edits: vec![Edit::Content {
                message: 7,
                content: RawContent::Text("x".into()),
            }],
            reason: "r".into(),
        }),
    )
}

#[test]
fn an_invalid_edit_is_a_fault_and_changes_nothing() {
    let out_of_range = out_of_range();
    let e = go(&[(&out_of_range, OnError::Block)], "keep");
    assert_eq!(e.decisions[0].fault, Some(FaultKind::InvalidVerdict));
    assert_eq!(
        e.payload.messages[0].content,
        Some(Content::Text("keep".into()))
    );
}

#[test]
fn reject_replaces_and_goes_on() {
    let r = Fake::new(
        "r",
        Ok(PluginVerdict::Reject(vec![Rejection {
            target: Target::Message(0),
            message: "[withheld]".into(),
        }])),
    );
    let b = Fake::new("b", Ok(PluginVerdict::Allow));
    let e = go(&[(&r, OnError::Block), (&b, OnError::Block)], "x");
    assert_eq!(e.verdict, Verdict::Reject);
    assert_eq!(b.calls.load(Ordering::Relaxed), 1);
    assert_eq!(e.rejections[0].reason, "[withheld]");
}

fn go_modes(steps: &[(&Fake, OnError, Mode)], text: &str) -> Evaluation {
    run(
        Rail::Input,
        steps.iter().map(|&(f, e, m)| turn(f, e, m, true)),
        user(text),
        &Context::default(),
        false,
    )
}

#[test]
fn a_shadow_plugin_is_recorded_but_changes_nothing() {
    let shadow_edit = Fake::new("se", Ok(edit("later")));
    let shadow_reject = Fake::new(
        "sr",
        Ok(PluginVerdict::Reject(vec![Rejection {
            target: Target::Message(0),
            message: "[withheld]".into(),
        }])),
    );
    let shadow_block = Fake::new("sb", Ok(PluginVerdict::Block("no".into())));
    let shadow_fault = Fake::new("sf", fault());
    let after = Fake::new("after", Ok(PluginVerdict::Allow));
    let e = go_modes(
        &[
            (&shadow_edit, OnError::Block, Mode::Shadow),
            (&shadow_reject, OnError::Block, Mode::Shadow),
            (&shadow_block, OnError::Block, Mode::Shadow),
            (&shadow_fault, OnError::Block, Mode::Shadow),
            (&after, OnError::Block, Mode::Enforce),
        ],
        "x",
    );
    assert_eq!(e.verdict, Verdict::Allow);
    assert!(e.blocked.is_none() && e.rejections.is_empty());
    assert_eq!(
        e.payload.messages[0].content,
        Some(Content::Text("x".into()))
    );
    assert_eq!(after.calls.load(Ordering::Relaxed), 1, "the chain went on");
    let verdicts: Vec<_> = e.decisions.iter().map(|d| (d.verdict, d.shadow)).collect();
    assert_eq!(
        verdicts,
        [
            (Decided::Modify, true),
            (Decided::Reject, true),
            (Decided::Block, true),
            (Decided::Fault, true),
            (Decided::Allow, false)
        ]
    );
    let would = e.would_block.unwrap();
    assert_eq!((would.plugin.as_str(), would.fault), ("sb", false));
}

#[test]
fn a_shadow_fault_would_block_only_when_on_error_says_so() {
    let bad = Fake::new("bad", fault());
    let open = go_modes(&[(&bad, OnError::Allow, Mode::Shadow)], "x");
    assert!(open.would_block.is_none());
    let closed = go_modes(&[(&bad, OnError::Block, Mode::Shadow)], "x");
    assert!(closed.would_block.unwrap().fault);
    assert_eq!(closed.verdict, Verdict::Allow);
}

#[test]
fn a_shadow_plugins_invalid_edit_is_recorded_as_the_fault_it_would_be() {
    let out_of_range = out_of_range();
    let e = go_modes(&[(&out_of_range, OnError::Block, Mode::Shadow)], "keep");
    assert_eq!(e.decisions[0].fault, Some(FaultKind::InvalidVerdict));
    assert_eq!(e.verdict, Verdict::Allow);
    assert!(e.would_block.is_some());
}

/// The `as_str` spellings (logs, metrics, gRPC) are the serialized ones (JSON APIs).
#[test]
fn spellings_match_serde() {
    let same = |json: serde_json::Value, s: &str| assert_eq!(json, serde_json::json!(s));
    for v in [
        Verdict::Allow,
        Verdict::Modify,
        Verdict::Reject,
        Verdict::Block,
    ] {
        same(serde_json::to_value(v).unwrap(), v.as_str());
    }
    for d in [
        Decided::Allow,
        Decided::Modify,
        Decided::Reject,
        Decided::Block,
        Decided::Fault,
    ] {
        same(serde_json::to_value(d).unwrap(), d.as_str());
    }
    for o in [OnError::Block, OnError::Allow] {
        same(serde_json::to_value(o).unwrap(), o.as_str());
    }
    for f in FaultKind::ALL {
        same(serde_json::to_value(f).unwrap(), f.as_str());
    }
}

/// A plugin that records how many messages it was given, then answers `answer`.
struct Counting {
    seen: AtomicUsize,
    answer: PluginVerdict,
}

impl Evaluate for Counting {
    fn id(&self) -> &str {
        "counting"
    }
    fn evaluate(
        &self,
        request: &EvalRequest<'_>,
        _prepared: &mut Prepared,
    ) -> Result<PluginVerdict, PluginFault> {
        self.seen.store(request.messages.len(), Ordering::Relaxed);
        Ok(self.answer.clone())
    }
}

#[test]
fn a_plugin_without_history_sees_the_reply_alone_and_edits_it_by_its_own_index() {
    let conversation = || Payload {
        messages: vec![
            Message::new("user", Some(Content::Text("q".into()))),
            Message::new("assistant", Some(Content::Text("a".into()))),
            Message::new("user", Some(Content::Text("q2".into()))),
            Message::new("assistant", Some(Content::Text("reply".into()))),
        ],
        ..Payload::default()
    };
    let without = Counting {
        seen: AtomicUsize::new(0),
        answer: edit("edited reply"),
    };
    let with = Counting {
        seen: AtomicUsize::new(0),
        answer: PluginVerdict::Allow,
    };
    let steps = [
        (&without, OnError::Block, Mode::Enforce, false),
        (&with, OnError::Block, Mode::Enforce, true),
    ];
    let e = run(
        Rail::Output,
        steps.iter().map(|&(p, e, m, h)| turn(p, e, m, h)),
        conversation(),
        &Context::default(),
        false,
    );
    assert_eq!(without.seen.load(Ordering::Relaxed), 1);
    assert_eq!(with.seen.load(Ordering::Relaxed), 4);
    assert_eq!(e.verdict, Verdict::Modify);
    assert_eq!(
        e.payload.messages[3].content,
        Some(Content::Text("edited reply".into()))
    );
    assert_eq!(
        e.payload.messages[0].content,
        Some(Content::Text("q".into()))
    );
    assert_eq!(e.payload.changes.contents, [3]);

    // Off the reply rails the whole conversation is given, whatever the entry says.
    let e = run(
        Rail::Input,
        [turn(&with, OnError::Block, Mode::Enforce, false)].into_iter(),
        conversation(),
        &Context::default(),
        false,
    );
    assert_eq!(with.seen.load(Ordering::Relaxed), 4);
    assert_eq!(e.verdict, Verdict::Allow);

    // An index past the reply is the plugin's mistake, named as it saw the request.
    let wrong = Counting {
        seen: AtomicUsize::new(0),
        answer: PluginVerdict::Reject(vec![Rejection {
            target: Target::Message(2),
            message: "no".into(),
        }]),
    };
    let e = run(
        Rail::Output,
        [turn(&wrong, OnError::Block, Mode::Enforce, false)].into_iter(),
        conversation(),
        &Context::default(),
        false,
    );
    assert_eq!(e.verdict, Verdict::Block);
    assert_eq!(e.decisions[0].fault, Some(FaultKind::InvalidVerdict));
    assert!(
        e.decisions[0]
            .reason
            .as_deref()
            .is_some_and(|r| r
                .contains("message index 2 is out of range (the plugin was given the reply alone")),
        "{:?}",
        e.decisions[0].reason
    );
    assert_eq!(e.payload, conversation());
}

/// A user's message `said`, with one tool offered (`refund`, described as `description`).
fn payload(description: &str, said: &str) -> Payload {
    Payload {
        tools: vec![crate::model::ToolDef {
            kind: "function".into(),
            name: Some("refund".into()),
            description: Some(description.into()),
            parameters: None,
            result_schema: None,
            hidden_by: None,
        }],
        ..user(said)
    }
}

#[test]
fn a_memo_reuses_a_verdict_on_the_tools_rail_for_the_same_question_only() {
    let ctx = |request_id: &str, principal: &str| Context {
        request_id: request_id.into(),
        principal: Some(principal.into()),
        ..Context::default()
    };
    let hide = Fake::new(
        "hide",
        Ok(PluginVerdict::Modify {
            edits: vec![Edit::HideTool(0)],
            reason: "not for you".into(),
        }),
    );
    let memo = Memo::default();
    let go = |rail, payload, ctx: &Context| {
        let turn = Turn {
            plugin: &hide,
            on_error: OnError::Block,
            mode: Mode::Enforce,
            history: true,
            declared_tools: true,
            memo: Some(&memo),
        };
        run(rail, [turn].into_iter(), payload, ctx, false)
    };
    let calls = || hide.calls.load(Ordering::Relaxed);

    let first = go(Rail::Tools, payload("Refund", "hi"), &ctx("1", "p"));
    assert_eq!((calls(), first.decisions[0].memo), (1, false));
    assert_eq!(first.payload.tools[0].hidden_by.as_deref(), Some("hide"));

    // The same tools and caller in another turn: the kept verdict, applied like a fresh one.
    let again = go(Rail::Tools, payload("Refund", "and now?"), &ctx("2", "p"));
    assert_eq!((calls(), again.decisions[0].memo), (1, true));
    assert_eq!(again.verdict, Verdict::Modify);
    assert_eq!(again.payload.tools, first.payload.tools);
    assert_eq!(again.decisions[0].reason.as_deref(), Some("not for you"));

    // Other tools, another caller, another rail: the plugin is asked.
    go(Rail::Tools, payload("Refund money", "hi"), &ctx("3", "p"));
    assert_eq!(calls(), 2);
    go(Rail::Tools, payload("Refund", "hi"), &ctx("4", "q"));
    assert_eq!(calls(), 3);
    go(Rail::Input, payload("Refund", "hi"), &ctx("5", "p"));
    assert_eq!(calls(), 4);
    assert_eq!(memo.len(), 3);

    // A fault is never kept: the plugin is asked again.
    let faulty = Fake::new(
        "faulty",
        Err(PluginFault {
            kind: FaultKind::Trap,
            message: "unreachable".into(),
        }),
    );
    let kept = Memo::default();
    for _ in 0..2 {
        let turn = Turn {
            plugin: &faulty,
            on_error: OnError::Block,
            mode: Mode::Enforce,
            history: true,
            declared_tools: true,
            memo: Some(&kept),
        };
        let e = run(
            Rail::Tools,
            [turn].into_iter(),
            payload("Refund", "hi"),
            &ctx("6", "p"),
            false,
        );
        assert_eq!(e.verdict, Verdict::Block);
    }
    assert_eq!(faulty.calls.load(Ordering::Relaxed), 2);
    assert!(kept.is_empty());
}

/// A plugin that notes how many declared tools it was given.
struct Counter(std::sync::Mutex<Vec<usize>>);

impl Evaluate for Counter {
    fn id(&self) -> &str {
        "counter"
    }
    fn evaluate(
        &self,
        request: &EvalRequest<'_>,
        _prepared: &mut Prepared,
    ) -> Result<PluginVerdict, PluginFault> {
        self.0.lock().unwrap().push(request.tools.len());
        Ok(PluginVerdict::Allow)
    }
}

#[test]
fn without_declared_tools_a_plugin_sees_them_on_the_tools_rail_alone() {
    let counter = Counter(Default::default());
    for rail in [Rail::Tools, Rail::Input, Rail::Output] {
        for declared_tools in [false, true] {
            let turn = Turn {
                declared_tools,
                ..turn(&counter, OnError::Block, Mode::Enforce, true)
            };
            run(
                rail,
                [turn].into_iter(),
                payload("Refund", "hi"),
                &Context::default(),
                false,
            );
        }
    }
    assert_eq!(*counter.0.lock().unwrap(), [1, 1, 0, 1, 0, 1]);
}

#[test]
fn explained_runs_keep_the_payload_after_each_edit() {
    let text = |p: &Payload| match &p.messages[0].content {
        Some(Content::Text(t)) => t.clone(),
        other => panic!("{other:?}"),
    };
    let first = Fake::new("first", Ok(edit("one")));
    let quiet = Fake::new("quiet", Ok(PluginVerdict::Allow));
    let shadow = Fake::new("shadow", Ok(edit("would be")));
    let second = Fake::new("second", Ok(edit("two")));
    let steps = [
        (&first, OnError::Block, Mode::Enforce),
        (&quiet, OnError::Block, Mode::Enforce),
        (&shadow, OnError::Block, Mode::Shadow),
        (&second, OnError::Block, Mode::Enforce),
    ];
    let e = run_explained(
        Rail::Input,
        steps.iter().map(|&(f, e, m)| turn(f, e, m, true)),
        user("x"),
        &Context::default(),
        false,
        true,
    );
    let shown: Vec<(usize, String)> = e.explained.iter().map(|(i, p)| (*i, text(p))).collect();
    // The shadow plugin's is what it would have made of the payload it was given; the next
    // plugin still saw the enforced edit.
    assert_eq!(
        shown,
        [(0, "one".into()), (2, "would be".into()), (3, "two".into())]
    );
    assert_eq!(text(&e.payload), "two");
    // Not asked: nothing kept.
    assert!(go_modes(&steps, "x").explained.is_empty());
}
