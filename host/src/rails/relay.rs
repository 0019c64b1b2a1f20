//! A streamed reply through the outbound rails, the same for every door: the door's stream codec
//! turns backend events into neutral ones, the relay judges them and the codec writes the
//! client's events.
//!
//! - **Text** goes through the `output` rail as it arrives, held back by a [`Window`] per lane
//!   (a text part, or the parts a client reads as one text: `StreamCodec::lane`) so a value
//!   split across events, or across parts, is judged whole. While a lane holds the end of a part
//!   (its last text may yet be judged with the next part's first), whatever the client would
//!   get next waits behind it, in order.
//! - **Tool calls** are assembled from their fragments and judged by the `tool_call` rail when
//!   their choice finishes; a blocked or rejected call never reaches the client.
//! - **Block**: per `[server] on_block_stream`, an error event or the refusal text with the
//!   door's normal ending.
//!
//! The relay runs in its own task feeding the response body through a channel. When the client
//! goes away the channel closes: the relay notices at once (even while waiting on the backend),
//! stops, and drops the backend stream, which closes the backend connection. Its request scope
//! then writes the record as a disconnect.

use super::window::{Out, Window};
use super::{Refusal, RequestScope};
use crate::codec::closed;
use crate::codec::sse::SseParser;
use crate::codec::stream::{Down, Finish, Part, StreamCodec, Up};
use crate::config::OnBlockStream;
use crate::model::{Content, Message, Payload, Rail, ToolCall, Verdict, FUNCTION};
use crate::policy::record::Outcome;
use crate::util::deadline::{self, within};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::mpsc;

/// Whether the relay goes on.
enum Flow {
    Go,
    Stop,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    kind: Option<String>,
    arguments: String,
    extra: Map<String, Value>,
}

impl PartialCall {
    fn call(self) -> ToolCall {
        match self.kind {
            Some(kind) if kind == crate::model::CUSTOM => {
                let mut call = ToolCall::custom(self.id, self.name, self.arguments);
                call.extra = self.extra;
                call
            }
            // A hosted call: a type (and the name the codec gave it, if any).
            Some(kind) if kind != FUNCTION => {
                let mut call = ToolCall::hosted(self.id, kind, self.extra);
                if !self.name.is_empty() {
                    call.name = self.name;
                }
                call.arguments = self.arguments;
                call
            }
            _ => {
                let mut call = ToolCall::function(self.id, self.name, self.arguments);
                call.extra = self.extra;
                call
            }
        }
    }
}

#[derive(Default)]
struct ChoiceState {
    calls: BTreeMap<u64, PartialCall>,
    /// Calls the client saw as they streamed (`Up::Hosted`).
    shown: Vec<ToolCall>,
    /// Whether any text of the choice reached the client (or a rejection replaced it).
    spoke: bool,
    /// Whether the output rail found calls written in the text.
    found_calls: bool,
    finished: bool,
}

/// The most released text a lane keeps for the judgement of the reply as a whole at its end.
const SAID_MAX: usize = 1 << 20;

/// One streamed reply in flight.
pub struct Relay<C: StreamCodec> {
    scope: RequestScope,
    conversation: Payload,
    codec: C,
    tx: mpsc::Sender<Bytes>,
    idle: Duration,
    window: usize,
    /// The most text a lane may hold without releasing any (`[server] stream_hold_max_bytes`).
    hold_max: usize,
    /// Held text by (choice, lane).
    windows: BTreeMap<(u32, Part), Window<Down>>,
    /// The text each lane released after a judgement of the text so far: its last judgement
    /// sees it with what is still held, so a reply unsafe only as a whole is caught.
    said: BTreeMap<(u32, Part), String>,
    /// The lane whose held text the client's next events wait behind (it holds a part's end).
    gate: Option<(u32, Part)>,
    choices: BTreeMap<u32, ChoiceState>,
    /// Where the usage the stream reports is noted (a token budget settles with it).
    meter: Option<std::sync::Arc<crate::codec::usage::Meter>>,
}

impl<C: StreamCodec> Relay<C> {
    /// Note the usage the stream reports in `meter`.
    pub fn meter(&mut self, meter: std::sync::Arc<crate::codec::usage::Meter>) {
        self.meter = Some(meter);
    }

    /// A relay for `scope`'s request, whose conversation was `conversation`; `idle` is the most
    /// the backend may stay silent.
    pub fn new(
        scope: RequestScope,
        conversation: Payload,
        codec: C,
        tx: mpsc::Sender<Bytes>,
        idle: Duration,
    ) -> Relay<C> {
        let server = &scope.set().config().server;
        let (window, hold_max) = (server.stream_window_bytes, server.stream_hold_max_bytes);
        Relay {
            scope,
            conversation,
            codec,
            tx,
            idle,
            window,
            hold_max,
            windows: BTreeMap::new(),
            said: BTreeMap::new(),
            gate: None,
            choices: BTreeMap::new(),
            meter: None,
        }
    }

    /// Relay `body` (the backend's byte stream) until it ends, the client goes away or a policy
    /// blocks it.
    pub async fn run(mut self, mut body: impl Stream<Item = Result<Bytes, String>> + Unpin) {
        let mut parser = SseParser::default();
        loop {
            let next = tokio::select! {
                _ = self.tx.closed() => return, // the client went away
                next = within(deadline::after(self.idle), body.next()) => next,
            };
            let bytes = match next {
                None => {
                    let message = "model backend stopped sending within the timeout";
                    return self.fail(message, "backend_timeout", 504).await;
                }
                Some(None) => break,
                Some(Some(Err(e))) => {
                    let message = format!("model backend stream broke: {e}");
                    return self.fail(&message, "backend_unreachable", 502).await;
                }
                Some(Some(Ok(bytes))) => bytes,
            };
            if let Err(e) = parser.push(&bytes) {
                let message = format!("model backend sent an invalid stream: {e}");
                return self.fail(&message, "backend_invalid_response", 502).await;
            }
            while let Some(event) = parser.next_event() {
                if let Some(meter) = &self.meter {
                    meter.note(&event.data);
                }
                let ups = match self.codec.decode(event) {
                    Ok(ups) => ups,
                    Err(why) => {
                        let message = format!("model backend sent {why}");
                        return self.fail(&message, "backend_invalid_response", 502).await;
                    }
                };
                for up in ups {
                    if let Flow::Stop = self.on(up).await {
                        return;
                    }
                }
            }
        }
        // The backend closed without saying it was done: still finish what the rails allowed.
        self.finish_all().await;
    }

    async fn on(&mut self, up: Up) -> Flow {
        match up {
            Up::Pass(frame) => self.send(Down::Pass(frame)).await,
            Up::Text { choice, part, text } => {
                if let Some(meter) = &self.meter {
                    meter.wrote(text.len());
                }
                let (window, lane) = (self.window, self.codec.lane(part));
                self.windows
                    .entry((choice, lane))
                    .or_insert_with(|| Window::new(window))
                    .push(part, &text);
                self.release(choice, lane, false).await
            }
            Up::PartEnd { choice, part } => {
                let lane = self.codec.lane(part);
                let end = Down::PartEnd { choice, part };
                let key = (choice, lane);
                if lane != part && self.gate.is_none_or(|g| g == key) {
                    // The part's held text may yet be judged with the next part's: its end,
                    // and what comes after it, wait behind it.
                    if let Some(window) = self.windows.get_mut(&key) {
                        return match window.mark(end) {
                            None => {
                                self.gate = Some(key);
                                Flow::Go
                            }
                            Some(end) => self.send(end).await,
                        };
                    }
                    return self.send(end).await;
                }
                if let Flow::Stop = self.release(choice, lane, true).await {
                    return Flow::Stop;
                }
                self.windows.remove(&key);
                self.send(end).await
            }
            Up::Call {
                choice,
                index,
                id,
                name,
                kind,
                arguments,
                extra,
            } => {
                if let Some(meter) = &self.meter {
                    meter.wrote(name.as_ref().map_or(0, String::len) + arguments.len());
                }
                let call = self
                    .choices
                    .entry(choice)
                    .or_default()
                    .calls
                    .entry(index)
                    .or_default();
                if let Some(id) = id {
                    call.id.push_str(&id);
                }
                if kind.is_some() {
                    call.kind = kind;
                }
                // A call the provider runs comes whole each time (added, then done): what came
                // last replaces what came before. A function's or custom tool's streams in
                // fragments, each adding to the last.
                let whole = call
                    .kind
                    .as_deref()
                    .is_some_and(|k| k != crate::model::FUNCTION && k != crate::model::CUSTOM);
                match (name, whole) {
                    (Some(name), true) => call.name = name,
                    (Some(name), false) => call.name.push_str(&name),
                    (None, _) => {}
                }
                match whole {
                    true => call.arguments = arguments,
                    false => call.arguments.push_str(&arguments),
                }
                call.extra.extend(extra);
                Flow::Go
            }
            Up::Hosted {
                choice,
                call,
                frames,
                shape,
            } => self.hosted(choice, call, frames, shape).await,
            Up::ChoiceEnd { choice, finish } => self.finish_choice(choice, finish).await,
            Up::Judge { mut frame, shape } => {
                match self.judge_frame(&mut frame.data, shape).await {
                    Ok(()) => self.send(Down::Pass(frame)).await,
                    Err(refusal) => self.blocked(refusal).await,
                }
            }
            Up::Error(mut frame) => {
                // An error's message may echo what the model or the conversation said.
                if let Err(refusal) = self
                    .judge_frame(&mut frame.data, &closed::ERROR_EVENT)
                    .await
                {
                    return self.blocked(refusal).await;
                }
                let _ = self.emit(Down::BackendError(frame)).await;
                self.end(502, Outcome::BackendError);
                Flow::Stop
            }
            Up::Done => {
                self.finish_all().await;
                Flow::Stop
            }
        }
    }

    /// A provider's call, whole (`Up::Hosted`): judged on the `tool_call` rail before any of
    /// its events reaches the client, which then sees it as the provider ran it, or the stream
    /// is refused.
    async fn hosted(
        &mut self,
        choice: u32,
        call: ToolCall,
        frames: Vec<crate::codec::stream::Frame>,
        shape: &'static closed::Shape,
    ) -> Flow {
        if self.scope.runs(Rail::ToolCall) {
            let reply = Message::reply(None, vec![call.clone()]);
            let (eval, judged) = self
                .scope
                .judge(Rail::ToolCall, &mut self.conversation, reply, false)
                .await;
            if let Some(refusal) = Refusal::from_eval(&eval) {
                return self.blocked(refusal).await;
            }
            let same = judged.tool_calls.len() == 1
                && judged.tool_calls[0].name == call.name
                && judged.tool_calls[0].arguments == call.arguments;
            if !same {
                let reason = format!(
                    "a policy removed or changed call {}, which the provider runs as it streams",
                    crate::policy::record::quoted(&call.id)
                );
                return self.refused(Rail::ToolCall, "stream", reason).await;
            }
        }
        for mut frame in frames {
            if let Err(refusal) = self.judge_frame(&mut frame.data, shape).await {
                return self.blocked(refusal).await;
            }
            if let Flow::Stop = self.send(Down::Pass(frame)).await {
                return Flow::Stop;
            }
        }
        self.choices.entry(choice).or_default().shown.push(call);
        Flow::Go
    }

    /// Judge the strings of an event's `data` (what `shape` does not call inert) as one reply
    /// on the output rail, and leave them as it left them; the refusal, if it blocked.
    async fn judge_frame(
        &mut self,
        data: &mut Value,
        shape: &closed::Shape,
    ) -> Result<(), Refusal> {
        if !self.scope.runs(Rail::Output) {
            return Ok(());
        }
        let Value::Object(fields) = std::mem::take(data) else {
            return Ok(());
        };
        let mut message = Message::reply(None, Vec::new());
        message.extra = fields;
        closed::fold(&mut message, shape, shape);
        if message.folded.is_none() {
            *data = Value::Object(message.extra);
            return Ok(());
        }
        let (eval, mut judged) = self
            .scope
            .judge(Rail::Output, &mut self.conversation, message, false)
            .await;
        if let Some(refusal) = Refusal::from_eval(&eval) {
            return Err(refusal);
        }
        closed::unfold(&mut judged);
        *data = Value::Object(judged.extra);
        Ok(())
    }

    /// Judge a lane's held text if it is due (`last`: its choice is over), and send what is
    /// safe.
    async fn release(&mut self, choice: u32, lane: Part, last: bool) -> Flow {
        let runs = self.scope.runs(Rail::Output);
        let Some(window) = self.windows.get_mut(&(choice, lane)) else {
            return Flow::Go;
        };
        if !runs || (last && !window.due(last)) {
            // Unjudged, or only marks are left.
            let outs = window.take_all();
            return self.deliver(choice, lane, outs).await;
        }
        if !window.due(last) {
            return Flow::Go;
        }
        // The last judgement of a lane that released text sees the whole reply: what the client
        // has, then what is held. Its verdict can only refuse what was sent or edit what is held.
        let said = match last {
            true => self.said.remove(&(choice, lane)).unwrap_or_default(),
            false => String::new(),
        };
        let mut whole = String::with_capacity(said.len() + window.pending().len());
        whole.push_str(&said);
        whole.push_str(window.pending());
        let held = Message::reply(Some(Content::Text(whole)), Vec::new());
        let (mut eval, mut judged) = self
            .scope
            .judge(Rail::Output, &mut self.conversation, held, !last)
            .await;
        if let Some(refusal) = Refusal::from_eval(&eval) {
            return self.blocked(refusal).await;
        }
        if !said.is_empty() {
            let kept = match &mut judged.content {
                Some(Content::Text(t)) if t.starts_with(&said) => {
                    t.drain(..said.len());
                    true
                }
                _ => false,
            };
            if !kept {
                // The whole reply passes, but with an edit to text the client already has: what
                // was sent cannot be taken back, so the held text is judged alone, as before.
                let window = self.windows.get(&(choice, lane)).expect("window exists");
                let held = Message::reply(
                    Some(Content::Text(window.pending().to_string())),
                    Vec::new(),
                );
                let (again, alone) = self
                    .scope
                    .judge(Rail::Output, &mut self.conversation, held, false)
                    .await;
                if let Some(refusal) = Refusal::from_eval(&again) {
                    return self.blocked(refusal).await;
                }
                judged = alone;
                eval = again;
            }
        }
        // Calls a policy found written in the text join the choice's calls: they are judged by
        // the tool_call rail with the others and sent as calls, never as text. Only the final
        // judgement's count: a partial one may see the same text again (the contract says so).
        let found = std::mem::take(&mut judged.tool_calls);
        if last && !found.is_empty() {
            let state = self.choices.entry(choice).or_default();
            state.found_calls = true;
            let next = 1_000_000 + state.calls.len() as u64;
            for (i, call) in found.into_iter().enumerate() {
                state.calls.insert(
                    next + i as u64,
                    PartialCall {
                        id: call.id,
                        name: call.name,
                        kind: Some(call.kind),
                        arguments: call.arguments,
                        extra: call.extra,
                    },
                );
            }
        }
        let judged = match judged.content {
            Some(Content::Text(t)) => t,
            Some(Content::Parts(p)) => p.to_string(),
            None => String::new(),
        };
        let window = self
            .windows
            .get_mut(&(choice, lane))
            .expect("window exists");
        let outs = window.judged(judged, eval.verdict == Verdict::Reject, last);
        if window.silenced() {
            self.choices.entry(choice).or_default().spoke = true;
        }
        if !last {
            let said = self.said.entry((choice, lane)).or_default();
            for out in &outs {
                if let Out::Text(_, text) = out {
                    said.push_str(text);
                }
            }
            if said.len() > SAID_MAX {
                // A reply longer than this is judged at its end on its last SAID_MAX bytes.
                let mut cut = said.len() - SAID_MAX;
                while !said.is_char_boundary(cut) {
                    cut += 1;
                }
                said.drain(..cut);
            }
        }
        if outs.is_empty() && window.pending().len() > self.hold_max {
            // Held so long without a place to cut (a run with no break, or text a policy keeps
            // holding back) that it would grow without bound: refused, never released unjudged.
            let reason = format!(
                "the streamed reply held more than {} bytes it could not release \
                 ([server] stream_hold_max_bytes)",
                self.hold_max
            );
            return self.refused(Rail::Output, "stream_hold", reason).await;
        }
        self.deliver(choice, lane, outs).await
    }

    /// Send what a lane released, in order: its own marks go now (they were held in order), and
    /// a lane's text waits behind the gate like any other event.
    async fn deliver(&mut self, choice: u32, lane: Part, outs: Vec<Out<Down>>) -> Flow {
        let gate = self.gate == Some((choice, lane));
        for out in outs {
            let down = match out {
                Out::Text(_, text) if text.is_empty() => continue,
                Out::Text(part, text) => {
                    self.choices.entry(choice).or_default().spoke = true;
                    Down::Text { choice, part, text }
                }
                Out::Mark(down) => down,
            };
            let flow = if gate {
                self.emit(down).await
            } else {
                self.send(down).await
            };
            if let Flow::Stop = flow {
                return Flow::Stop;
            }
        }
        if gate
            && !self
                .windows
                .get(&(choice, lane))
                .is_some_and(Window::holds_marks)
        {
            self.gate = None;
        }
        Flow::Go
    }

    /// Flush a choice's text, judge its tool calls, then end it.
    async fn finish_choice(&mut self, choice: u32, finish: Option<String>) -> Flow {
        if self.choices.get(&choice).is_some_and(|c| c.finished) {
            return Flow::Go;
        }
        let lanes: Vec<Part> = self
            .windows
            .keys()
            .filter(|(c, _)| *c == choice)
            .map(|(_, l)| *l)
            .collect();
        for lane in lanes {
            if let Flow::Stop = self.release(choice, lane, true).await {
                return Flow::Stop;
            }
            self.windows.remove(&(choice, lane));
            if self.gate == Some((choice, lane)) {
                self.gate = None;
            }
        }
        let state = self.choices.entry(choice).or_default();
        state.finished = true;
        let spoke = state.spoke;
        let found_calls = state.found_calls;
        let shown = std::mem::take(&mut state.shown);
        let shown_ids: Vec<String> = shown.iter().map(|c| c.id.clone()).collect();
        // Those the client saw come first: they streamed before the held ones were sent.
        let calls: Vec<ToolCall> = shown
            .into_iter()
            .chain(
                std::mem::take(&mut state.calls)
                    .into_values()
                    .map(PartialCall::call),
            )
            .collect();
        let mut ending = Finish::Backend(finish);
        if !calls.is_empty() {
            let mut reply = Message::reply(None, calls);
            // The calls' own fields (what a hosted call returned, what a newer API adds) are
            // judged with them, as in a whole reply.
            let shape = self.codec.call_shape();
            closed::fold(&mut reply, shape, shape);
            let mut judged = match self.scope.reply(&mut self.conversation, reply).await {
                Ok(m) => m,
                Err(refusal) => return self.blocked(refusal).await,
            };
            closed::unfold(&mut judged);
            // A call the client already has cannot be taken back: a verdict removing one
            // refuses the reply.
            // Ids as the model made them: a shown call's was signed as it passed, the others'
            // by the rails.
            let same = |a: &str, b: &str| crate::model::model_id(a) == crate::model::model_id(b);
            let kept = |id: &str| judged.tool_calls.iter().any(|c| same(&c.id, id));
            if let Some(gone) = shown_ids.iter().find(|id| !kept(id)) {
                let reason = format!(
                    "a policy removed call {} after the client had seen it stream",
                    crate::policy::record::quoted(gone)
                );
                return self.refused(Rail::ToolCall, "stream", reason).await;
            }
            judged
                .tool_calls
                .retain(|c| !shown_ids.iter().any(|id| same(id, &c.id)));
            if judged.tool_calls.is_empty() && !shown_ids.is_empty() {
                // Only calls the client has seen: nothing more to send.
                return self
                    .send(Down::ChoiceEnd {
                        choice,
                        finish: ending,
                    })
                    .await;
            }
            if judged.tool_calls.is_empty() {
                if !spoke {
                    let text = self.scope.set().config().server.refusal.clone();
                    if let Flow::Stop = self
                        .send(Down::Text {
                            choice,
                            part: choice as Part,
                            text,
                        })
                        .await
                    {
                        return Flow::Stop;
                    }
                }
                ending = Finish::Filtered;
            } else {
                let calls = judged.tool_calls;
                if let Flow::Stop = self.send(Down::Calls { choice, calls }).await {
                    return Flow::Stop;
                }
                if found_calls {
                    ending = Finish::ToolCalls;
                }
            }
        }
        self.send(Down::ChoiceEnd {
            choice,
            finish: ending,
        })
        .await
    }

    async fn finish_all(&mut self) {
        let open: Vec<u32> = self
            .windows
            .keys()
            .map(|(c, _)| *c)
            .chain(
                self.choices
                    .iter()
                    .filter(|(_, s)| !s.finished)
                    .map(|(c, _)| *c),
            )
            .collect();
        for choice in open {
            if let Flow::Stop = self.finish_choice(choice, None).await {
                return;
            }
        }
        // Kept before the client is told the reply is done: its next request may name it.
        let reply = self.codec.reply_id().map(str::to_string);
        self.scope.keep_vault(reply.as_deref()).await;
        let railyard = self.scope.acted().then(|| self.scope.railyard());
        if let Flow::Stop = self.send(Down::Done { railyard }).await {
            return;
        }
        self.end(200, Outcome::Served);
    }

    async fn blocked(&mut self, refusal: Refusal) -> Flow {
        let server = &self.scope.set().config().server;
        let down = Down::Refused {
            finish: server.on_block_stream == OnBlockStream::Finish,
            text: server.refusal.clone(),
            message: refusal.message(),
            railyard: self.scope.railyard(),
        };
        let _ = self.emit(down).await;
        self.end(200, Outcome::Refused);
        Flow::Stop
    }

    /// The relay refuses the reply itself (`policy` names why, as the record shows it).
    async fn refused(&mut self, rail: Rail, policy: &str, reason: String) -> Flow {
        let refusal = Refusal {
            rail,
            policy: policy.into(),
            reason,
            fault: false,
        };
        self.scope.refuse(&refusal);
        self.blocked(refusal).await
    }

    /// The stream fails: an error event in the door's shape; the record keeps the status the
    /// request would have had if the failure had come before the headers.
    async fn fail(mut self, message: &str, code: &str, status: u16) {
        let _ = self
            .emit(Down::Error {
                message: message.to_string(),
                kind: "backend_error".into(),
                code: code.into(),
            })
            .await;
        self.end(status, Outcome::BackendError);
    }

    fn end(&mut self, status: u16, outcome: Outcome) {
        self.scope.finish(status, outcome);
    }

    /// Send `down` after whatever the gate holds.
    async fn send(&mut self, down: Down) -> Flow {
        if let Some(gate) = self.gate {
            let down = match self.windows.get_mut(&gate) {
                Some(window) => match window.mark(down) {
                    None => return Flow::Go,
                    Some(down) => down,
                },
                None => down,
            };
            self.gate = None;
            return self.emit(down).await;
        }
        self.emit(down).await
    }

    /// Write `down` to the client now.
    async fn emit(&mut self, down: Down) -> Flow {
        let mut out = Vec::new();
        self.codec.encode(down, &mut out);
        if out.is_empty() {
            return Flow::Go;
        }
        match self.tx.send(Bytes::from(out)).await {
            Ok(()) => Flow::Go,
            Err(_) => Flow::Stop, // the client went away
        }
    }
}
