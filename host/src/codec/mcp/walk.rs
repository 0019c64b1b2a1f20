//! Every MCP message the door does not map, walked leaf by leaf (`codec::closed`): nothing a
//! client or a server sends is relayed unread, whatever its method, known to this door or not.
//!
//! - What a server sends (the answer to any request, a notification, a request of the client)
//!   reaches an agent, so its leaves pass the `tool_result` rail as the result of a call named
//!   after its method ([`call`], [`answer`]).
//! - What a client sends (a request's params, a notification's, its answers to the server's
//!   requests) leaves for the server, so its leaves are the request's fields on the `input`
//!   rail (`closed::fields` under [`CLIENT`]), as a model request's other text is.
//!
//! Only the protocol's own words, ids, times and opaque data are inert, when they look the part;
//! every other string, number that could hold a value and key that is no name is judged.

use crate::codec::closed::{Inert, Shape};
use crate::model::{Content, Message, ToolCall};

/// What of a server's message (a result, an error, a notification's or a request's params) is
/// inert: the 2025-11-25 and 2026-07-28 schemas' words, ids and times (`mcp_types`), wherever
/// they sit. The rest (instructions, titles, a task's status message and result, a skill's text,
/// a log line, anything a newer revision adds) is judged.
pub const SERVER: Shape = Shape {
    mapped: &[],
    inert: &[
        ("protocolVersion", Inert::Word),
        ("serverInfo.name", Inert::Word),
        ("serverInfo.version", Inert::Word),
        ("serverInfo.icons[].mimeType", Inert::Word),
        ("serverInfo.icons[].src", Inert::Data),
        ("serverInfo.icons[].theme", Inert::Word),
        ("nextCursor", Inert::Id),
        ("resultType", Inert::Word),
        ("cacheScope", Inert::Word),
        ("task.taskId", Inert::Id),
        ("task.status", Inert::Word),
        ("task.createdAt", Inert::Time),
        ("task.lastUpdatedAt", Inert::Time),
        ("tasks[].taskId", Inert::Id),
        ("tasks[].status", Inert::Word),
        ("tasks[].createdAt", Inert::Time),
        ("tasks[].lastUpdatedAt", Inert::Time),
        ("taskId", Inert::Id),
        ("status", Inert::Word),
        ("createdAt", Inert::Time),
        ("lastUpdatedAt", Inert::Time),
        ("progressToken", Inert::Id),
        ("requestId", Inert::Id),
        ("level", Inert::Word),
        ("logger", Inert::Word),
        ("_meta.progressToken", Inert::Id),
        ("_meta.*.taskId", Inert::Id),
        ("skills[].name", Inert::Word),
        ("skill.name", Inert::Word),
        ("subscriptionId", Inert::Id),
        ("mode", Inert::Word),
        ("action", Inert::Word),
        ("code", Inert::Word),
        ("type", Inert::Word),
        ("mimeType", Inert::Word),
        ("blob", Inert::Data),
    ],
    known: &[],
};

/// What of a client's message is inert: its protocol words and ids. The rest (a resource's
/// uri, a prompt's arguments, a completion's text, a form the user filled, a sampled reply) is
/// judged.
pub const CLIENT: Shape = Shape {
    mapped: &[],
    inert: &[
        ("protocolVersion", Inert::Word),
        ("clientInfo.name", Inert::Word),
        ("clientInfo.version", Inert::Word),
        ("cursor", Inert::Id),
        ("level", Inert::Word),
        ("taskId", Inert::Id),
        ("requestId", Inert::Id),
        ("progressToken", Inert::Id),
        ("_meta.progressToken", Inert::Id),
        ("_meta.*.taskId", Inert::Id),
        ("action", Inert::Word),
        ("model", Inert::Word),
        ("role", Inert::Word),
        ("stopReason", Inert::Word),
        ("content.type", Inert::Word),
        ("content[].type", Inert::Word),
        ("ref.type", Inert::Word),
        ("name", Inert::Word),
        ("mode", Inert::Word),
        ("task.ttl", Inert::Word),
        ("reason", Inert::Word),
    ],
    known: &[],
};

/// The call whose result a server's message to the caller's request `id` (or to none) stands
/// for: named after its method, which a policy matches as it would a tool.
pub fn call(id: &str, method: &str) -> ToolCall {
    ToolCall::function(id.to_string(), method.to_string(), "{}".to_string())
}

/// The tool message a server's message is judged as, answering `call` (its leaves ride in it).
pub fn answer(call: &ToolCall) -> Message {
    let mut m = Message::new("tool", Some(Content::Parts(serde_json::json!([]))));
    m.tool_call_id = Some(call.id.clone());
    m.name = Some(call.name.clone());
    m
}
