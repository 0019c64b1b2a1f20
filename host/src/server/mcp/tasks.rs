//! Which tool a task runs. A `tools/call` may answer with a task instead of its result (MCP's
//! tasks: `task` in the call's params, a `CreateTaskResult` back); the result arrives later, to
//! whichever session asks for it (`tasks/result`, or `tasks/get` when it carries it). The door
//! remembers each task's tool in the shared store, per tenant and server, so that its result is
//! judged as that tool's wherever it arrives (`tool_result`, its output schema, and the reading
//! session's history for `flow`), not as an anonymous method's.

use crate::state::Store;
use serde_json::Value;
use std::time::Duration;

/// How long a task's tool is remembered (tasks live minutes; a `ttl` the server gives is
/// shorter than this, mostly).
const KEEP: Duration = Duration::from_secs(24 * 60 * 60);

fn key(tenant: &str, server: &str, task: &str) -> String {
    format!(
        "mcptask:{}:{}",
        &crate::util::sha256_hex(tenant.as_bytes())[..16],
        &crate::util::sha256_hex(format!("{server}\0{task}").as_bytes())[..32]
    )
}

/// The task id a result creates (`{"task": {"taskId": ...}}`), if it is one.
pub fn created(result: &Value) -> Option<&str> {
    result.get("task")?.get("taskId")?.as_str()
}

/// The task a request asks about (`params.taskId`).
pub fn asked(message: &Value) -> Option<&str> {
    message.pointer("/params/taskId")?.as_str()
}

/// Remember that `task` (on `server`, for `tenant`) runs `tool`.
pub async fn remember(store: &Store, tenant: &str, server: &str, task: &str, tool: &str) {
    let stored = store
        .put(
            tenant,
            &key(tenant, server, task),
            bytes::Bytes::from(tool.to_string()),
            KEEP,
        )
        .await;
    if let Err(e) = stored {
        tracing::warn!(error = %e, "an MCP task's tool not remembered: its result will be judged as the method's");
    }
}

/// The tool `task` runs, if the door saw it made.
pub async fn tool(store: &Store, tenant: &str, server: &str, task: &str) -> Option<String> {
    match store.get(&key(tenant, server, task)).await {
        Ok(found) => found.and_then(|b| String::from_utf8(b.to_vec()).ok()),
        Err(e) => {
            tracing::warn!(error = %e, "an MCP task's tool not read: its result is judged as the method's");
            None
        }
    }
}

/// Whether a tool's answer is its result, complete: content or a structured value, and no
/// other kind named (`resultType` a task or a request for input). Only such a result is held
/// to the tool's output schema.
pub fn complete(result: &Value) -> bool {
    let kind = result.get("resultType").and_then(Value::as_str);
    matches!(kind, None | Some("complete"))
        && created(result).is_none()
        && (result.get("content").is_some() || result.get("structuredContent").is_some())
}
