//! protobuf ⇄ the model: every conversion of the gRPC door in one place.

use super::proto;
use crate::model::{Content, Decided, Message, Rail, ToolCall, ToolDef, Verdict};
use crate::policy::chain::Evaluation;
use crate::policy::Revision;
use tonic::Status;

pub(super) fn invalid(message: String) -> Status {
    Status::invalid_argument(message)
}

pub(super) fn rail_of(value: i32) -> Result<Rail, Status> {
    match proto::Rail::try_from(value) {
        Ok(proto::Rail::Input) => Ok(Rail::Input),
        Ok(proto::Rail::ToolResult) => Ok(Rail::ToolResult),
        Ok(proto::Rail::ToolCall) => Ok(Rail::ToolCall),
        Ok(proto::Rail::Output) => Ok(Rail::Output),
        Ok(proto::Rail::Tools) => Ok(Rail::Tools),
        _ => Err(invalid(
            "rail is required: RAIL_INPUT, RAIL_TOOL_RESULT, RAIL_TOOL_CALL, RAIL_OUTPUT or RAIL_TOOLS"
                .into(),
        )),
    }
}

pub(super) fn message_in(i: usize, m: proto::Message) -> Result<Message, Status> {
    if m.role.is_empty() {
        return Err(invalid(format!("messages[{i}].role is required")));
    }
    let content = match (m.content, m.content_json) {
        (Some(_), Some(_)) => {
            return Err(invalid(format!(
                "messages[{i}]: give content or content_json, not both"
            )))
        }
        (Some(text), None) => Some(Content::Text(text)),
        (None, Some(json)) => Some(Content::Parts(serde_json::from_str(&json).map_err(
            |e| invalid(format!("messages[{i}].content_json is not valid JSON: {e}")),
        )?)),
        (None, None) => None,
    };
    let mut message = Message::new(&m.role, content);
    message.name = m.name;
    message.tool_call_id = m.tool_call_id;
    message.tool_calls = m
        .tool_calls
        .into_iter()
        .map(|c| ToolCall::function(c.id, c.name, c.arguments))
        .collect();
    Ok(message)
}

pub(super) fn tool_in(i: usize, t: proto::Tool) -> Result<ToolDef, Status> {
    if t.r#type.is_empty() {
        return Err(invalid(format!("tools[{i}].type is required")));
    }
    if t.r#type == "function" && t.name.as_deref().unwrap_or("").is_empty() {
        return Err(invalid(format!(
            "tools[{i}].name is required for function tools"
        )));
    }
    let parameters = match t.parameters_json {
        None => None,
        Some(json) => match serde_json::from_str::<serde::de::IgnoredAny>(&json) {
            Ok(_) => Some(crate::model::Schema::from_json_text(json.trim())),
            Err(e) => {
                return Err(invalid(format!(
                    "tools[{i}].parameters_json is not valid JSON: {e}"
                )))
            }
        },
    };
    Ok(ToolDef::declared(
        &t.r#type,
        t.name.as_deref(),
        t.description.as_deref(),
        parameters,
    ))
}

fn message_out(m: &Message) -> proto::Message {
    let (content, content_json) = match &m.content {
        None => (None, None),
        Some(Content::Text(t)) => (Some(t.clone()), None),
        Some(Content::Parts(p)) => (None, Some(p.to_string())),
    };
    proto::Message {
        role: m.role.clone(),
        content,
        content_json,
        name: m.name.clone(),
        tool_call_id: m.tool_call_id.clone(),
        tool_calls: m
            .tool_calls
            .iter()
            .map(|c| proto::ToolCall {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect(),
    }
}

fn verdict_out(v: Verdict) -> proto::Verdict {
    match v {
        Verdict::Allow => proto::Verdict::Allow,
        Verdict::Modify => proto::Verdict::Modify,
        Verdict::Reject => proto::Verdict::Reject,
        Verdict::Block => proto::Verdict::Block,
    }
}

fn blocked_out(b: &crate::policy::chain::Blocked) -> proto::Blocked {
    proto::Blocked {
        plugin: b.plugin.clone(),
        reason: b.reason.clone(),
        fault: b.fault,
    }
}

pub(super) fn response_out(
    eval: &Evaluation,
    revision: &Revision,
    request_id: String,
) -> proto::CheckResponse {
    proto::CheckResponse {
        verdict: verdict_out(eval.verdict) as i32,
        messages: eval.payload.messages.iter().map(message_out).collect(),
        decisions: eval
            .decisions
            .iter()
            .map(|d| proto::Decision {
                plugin: d.plugin.clone(),
                verdict: d.verdict.as_str().into(),
                reason: d.reason.clone().unwrap_or_default(),
                fault: d.fault.map(|f| f.as_str().into()).unwrap_or_default(),
                on_error: if d.verdict == Decided::Fault {
                    d.on_error.map(|o| o.as_str().into()).unwrap_or_default()
                } else {
                    String::new()
                },
                duration_us: d.duration_us.as_micros() as u64,
                shadow: d.shadow,
            })
            .collect(),
        rejections: eval
            .rejections
            .iter()
            .map(|r| proto::Rejection {
                plugin: r.plugin.clone(),
                message: r.message as u32,
                tool_call_id: r.tool_call_id.clone().unwrap_or_default(),
                tool: r.tool.clone().unwrap_or_default(),
                reason: r.reason.clone(),
            })
            .collect(),
        blocked: eval.blocked.as_ref().map(blocked_out),
        would_block: eval.would_block.as_ref().map(blocked_out),
        revision: Some(revision_out(revision)),
        request_id,
        tools: if eval.rail == Rail::Tools {
            eval.payload.tools.iter().map(tool_out).collect()
        } else {
            Vec::new()
        },
    }
}

fn tool_out(t: &ToolDef) -> proto::Tool {
    proto::Tool {
        r#type: t.kind.to_string(),
        name: t.name.as_deref().map(str::to_string),
        description: t.description.as_deref().map(str::to_string),
        parameters_json: t.parameters_text(),
        hidden_by: t.hidden_by.as_deref().map(str::to_string),
    }
}

pub(super) fn revision_out(r: &Revision) -> proto::Revision {
    proto::Revision {
        number: r.number,
        hash: r.hash.clone(),
    }
}
