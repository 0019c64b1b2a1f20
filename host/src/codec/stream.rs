//! The neutral vocabulary of a streamed reply. Each door's [`StreamCodec`] turns the backend's
//! events into [`Up`] events and writes [`Down`] events back in the door's own shape; between
//! the two, the relay (`crate::rails::relay`) runs the outbound rails the same way for every door.

use crate::model::ToolCall;
use serde_json::{Map, Value};

/// A text part of a reply: a chat choice, a Responses content part, an Anthropic text block.
pub type Part = u64;

/// The lane of a reply's main text, for codecs whose reply text comes in several parts that a
/// client reads as one (see [`StreamCodec::lane`]).
pub const TEXT_LANE: Part = u64::MAX - 1;

/// What the backend said, neutrally.
#[derive(Debug, Clone, PartialEq)]
pub enum Up {
    /// An event with nothing for the rails (role deltas, reasoning, pings, usage, lifecycle):
    /// the codec writes it back as it came (renumbered where the door numbers events).
    Pass(Frame),
    /// Model text for `part` of `choice`.
    Text {
        /// The choice (0 for doors with one reply).
        choice: u32,
        /// The text part.
        part: Part,
        /// The text.
        text: String,
    },
    /// A text part is complete: what is held of it can be judged for the last time.
    PartEnd {
        /// The choice.
        choice: u32,
        /// The part.
        part: Part,
    },
    /// A fragment of a tool call; the first fragment of a call carries its id, name or kind.
    Call {
        /// The choice.
        choice: u32,
        /// The call's position among the choice's calls.
        index: u64,
        /// Its id, when this fragment carries it.
        id: Option<String>,
        /// Its function name, when this fragment carries it.
        name: Option<String>,
        /// Its kind (`function`, or a hosted tool's type), when this fragment carries it.
        kind: Option<String>,
        /// More of its arguments.
        arguments: String,
        /// Wire fields of the call to keep (on its first fragment).
        extra: Map<String, Value>,
    },
    /// A call the provider runs (a server or MCP tool), whole, with the events that carried it
    /// (held by the codec until it ended): the relay has the `tool_call` rail judge it at once,
    /// then passes its events (their text judged as `Up::Judge`'s is) and judges it again with
    /// the choice's calls, so the rails see every call of the reply in order. A verdict that
    /// would remove or change it refuses the stream: the provider has run it.
    Hosted {
        /// The choice.
        choice: u32,
        /// The call.
        call: ToolCall,
        /// Its events, in order, to pass once it is judged.
        frames: Vec<Frame>,
        /// What of those events is inert.
        shape: &'static crate::codec::closed::Shape,
    },
    /// The choice is finished (with the backend's finish reason, if it gave one).
    ChoiceEnd {
        /// The choice.
        choice: u32,
        /// The backend's finish/stop reason.
        finish: Option<String>,
    },
    /// An event with text outside the reply's text parts (a field the door does not stream as
    /// text, a reply's own fields): the relay has the output rail judge its strings (those
    /// `shape` does not call inert) as one reply, then passes it on as they were left.
    Judge {
        /// The event.
        frame: Frame,
        /// What of it is inert.
        shape: &'static crate::codec::closed::Shape,
    },
    /// The backend's own error event: its text judged, passed on, the stream ends.
    Error(Frame),
    /// The backend says the reply is complete.
    Done,
}

/// How a choice ends, as the client sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Finish {
    /// The backend's own reason.
    Backend(Option<String>),
    /// A policy removed the reply's tool calls: the door's "filtered" ending.
    Filtered,
    /// A policy turned text into tool calls: the door's "tool calls" ending.
    ToolCalls,
}

/// What the client gets, neutrally.
#[derive(Debug, Clone, PartialEq)]
pub enum Down {
    /// An event passed on as it came.
    Pass(Frame),
    /// Judged text for `part`.
    Text {
        /// The choice.
        choice: u32,
        /// The part.
        part: Part,
        /// The text to send.
        text: String,
    },
    /// All of a part's text has been sent.
    PartEnd {
        /// The choice.
        choice: u32,
        /// The part.
        part: Part,
    },
    /// A choice's judged tool calls, whole.
    Calls {
        /// The choice.
        choice: u32,
        /// The calls that passed the rails.
        calls: Vec<ToolCall>,
    },
    /// A choice ends.
    ChoiceEnd {
        /// The choice.
        choice: u32,
        /// How.
        finish: Finish,
    },
    /// The reply is complete; `railyard` is the report object, when the rails did anything.
    Done {
        /// The `railyard` object.
        railyard: Option<Value>,
    },
    /// A policy blocked the reply mid-stream.
    Refused {
        /// `finish`: end normally with the refusal text and the door's refusal ending;
        /// otherwise an error event.
        finish: bool,
        /// The refusal text (for `finish`).
        text: String,
        /// The error message (for an error event).
        message: String,
        /// The `railyard` object.
        railyard: Value,
    },
    /// The backend's own error event: written as it came, and the stream ends.
    BackendError(Frame),
    /// The stream fails (backend broke, timed out, or sent garbage).
    Error {
        /// Error message.
        message: String,
        /// Error type (`backend_error`, ...).
        kind: String,
        /// Error code (`backend_timeout`, ...).
        code: String,
    },
}

/// One event's payload as JSON, with its SSE event name.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The `event:` name.
    pub event: Option<String>,
    /// The `data:` JSON.
    pub data: Value,
}

/// Gives a tool call the provider runs the id the daemon signs it with: from its own id and the
/// tool's name (see `rails::provenance::hosted_signer`).
pub type HostedSigner = Box<dyn Fn(&str, &str) -> String + Send + Sync>;

/// A door's streaming codec: one per stream, so it can keep what it needs between events
/// (item ids, block indices, sequence numbers, the judged text of parts).
pub trait StreamCodec: Send + 'static {
    /// Decode one backend event. `Err` says why it is not an event of this door.
    fn decode(&mut self, event: super::sse::SseEvent) -> Result<Vec<Up>, String>;
    /// Write `down` in the door's shape.
    fn encode(&mut self, down: Down, out: &mut Vec<u8>);
    /// The lane `part`'s text is held and judged in: parts in one lane are what a client reads
    /// as one text (a Responses message's `output_text` parts, Anthropic text blocks), so a
    /// value split across two of them is judged whole. Each part is its own lane by default.
    fn lane(&self, part: Part) -> Part {
        part
    }
    /// Write the events that open a stream the daemon answers itself, before any backend
    /// event (a request refused before the model answered): the response `id` stands for, and
    /// the `model` asked for. What follows is read by an SDK as a stream of that door.
    fn open(&mut self, id: &str, model: Option<&str>, out: &mut Vec<u8>);
    /// Sign the ids of the calls the provider runs that the door passes as they stream, before
    /// the rails see them whole (Anthropic's server tools), with `signer`. Other doors hold
    /// every call until the rails sign it.
    fn sign_hosted(&mut self, _signer: HostedSigner) {}
    /// The door's account of a call's fields beyond what the model maps (`Codec::CALL`): the
    /// leaves of a streamed call's fields it does not call inert are judged with the call, as a
    /// whole reply's are (`closed::fold`).
    fn call_shape(&self) -> &'static crate::codec::closed::Shape;
    /// The reply's id once the stream has said it (a Responses response's), which the
    /// conversation's next request names ([`super::Codec::reply_id`]).
    fn reply_id(&self) -> Option<&str> {
        None
    }
}
