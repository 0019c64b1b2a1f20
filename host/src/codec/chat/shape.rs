//! What the chat door knows of its fields (`codec::closed`): the request's top-level fields,
//! a message's fields beyond role, content, name, tool_call_id and calls, and a call's beyond
//! its id, type and function. From OpenAI's API reference (openapi.json 2.3.0) and the fields
//! OpenAI-compatible servers add (vLLM, DeepSeek, OpenRouter).

use crate::codec::closed::{Inert, Shape, ToolShape};

/// A request's top-level fields.
pub const REQUEST: Shape = Shape {
    mapped: &["messages", "tools", "functions"],
    inert: &[
        ("model", Inert::Word),
        ("tool_choice", Inert::Word),
        ("tool_choice.type", Inert::Word),
        ("tool_choice.function.name", Inert::Word),
        ("tool_choice.custom.name", Inert::Word),
        ("tool_choice.allowed_tools.mode", Inert::Word),
        ("tool_choice.allowed_tools.tools[].type", Inert::Word),
        (
            "tool_choice.allowed_tools.tools[].function.name",
            Inert::Word,
        ),
        ("tool_choice.allowed_tools.tools[].custom.name", Inert::Word),
        ("function_call", Inert::Word),
        ("function_call.name", Inert::Word),
        ("response_format.type", Inert::Word),
        ("response_format.json_schema.name", Inert::Word),
        ("reasoning_effort", Inert::Word),
        ("service_tier", Inert::Word),
        ("verbosity", Inert::Word),
        ("modalities[]", Inert::Word),
        ("audio.voice", Inert::Word),
        ("audio.voice.id", Inert::Id),
        ("audio.format", Inert::Word),
        ("prompt_cache_retention", Inert::Word),
        ("prompt_cache_options.ttl", Inert::Word),
        ("prompt_cache_options.mode", Inert::Word),
        ("prediction.type", Inert::Word),
        ("prediction.content[].type", Inert::Word),
        ("web_search_options.search_context_size", Inert::Word),
        ("web_search_options.user_location.type", Inert::Word),
        ("moderation.model", Inert::Word),
        ("moderation.policy.input.mode", Inert::Word),
        ("moderation.policy.output.mode", Inert::Word),
        ("thinking.type", Inert::Word),
    ],
    known: &[
        // OpenAI's.
        "audio",
        "frequency_penalty",
        "function_call",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "moderation",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_options",
        "response_format",
        "safety_identifier",
        "seed",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "top_logprobs",
        "top_p",
        "user",
        "web_search_options",
        // OpenAI-compatible servers' (vLLM, llama.cpp, DeepSeek).
        "add_generation_prompt",
        "chat_template",
        "chat_template_kwargs",
        "continue_final_message",
        "documents",
        "echo",
        "ignore_eos",
        "include_stop_str_in_output",
        "min_p",
        "min_tokens",
        "repetition_penalty",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "stop_token_ids",
        "thinking",
        "top_k",
    ],
};

/// A message's fields beyond those the model maps.
pub const MESSAGE: Shape = Shape {
    mapped: &[],
    inert: &[
        ("audio.id", Inert::Id),
        ("audio.data", Inert::Data),
        ("annotations[].type", Inert::Word),
    ],
    known: &[
        "annotations",
        "audio",
        "function_call",
        "prefix",
        "reasoning",
        "reasoning_content",
        "reasoning_details",
        "refusal",
    ],
};

/// A tool call's fields beyond its id, type and function.
pub const CALL: Shape = Shape {
    mapped: &[],
    inert: &[("type", Inert::Word)],
    known: &["type", "index"],
};

/// A reply's top-level fields: what is not mapped nor inert rides in its first message, under
/// [`REPLY_KEY`], for the output rail to judge.
pub const REPLY: Shape = Shape {
    mapped: &["choices"],
    inert: &[
        ("id", Inert::Id),
        ("object", Inert::Word),
        ("model", Inert::Word),
        ("system_fingerprint", Inert::Id),
        ("service_tier", Inert::Word),
        ("created", Inert::Time),
    ],
    known: &["created", "usage"],
};

/// A choice's fields beside its message: what is not mapped nor inert rides in its message,
/// under [`CHOICE_KEY`]. Its log-probabilities spell out the message's text: judged with it
/// (and dropped when a policy changes it), they are not judged token by token.
pub const CHOICE: Shape = Shape {
    mapped: &["message", "logprobs"],
    inert: &[("finish_reason", Inert::Word), ("stop_reason", Inert::Word)],
    known: &["index"],
};

/// Where a reply's own fields ride in its first message while the rails judge it.
pub const REPLY_KEY: &str = "railyard.reply";
/// Where a choice's fields ride in its message.
pub const CHOICE_KEY: &str = "railyard.choice";

/// A streamed chunk's fields that carry no text a client reads (what else a chunk carries, the
/// relay has the output rail judge before it passes).
pub const CHUNK: Shape = Shape {
    mapped: &[],
    inert: &[
        ("id", Inert::Id),
        ("object", Inert::Word),
        ("model", Inert::Word),
        ("system_fingerprint", Inert::Id),
        ("service_tier", Inert::Word),
        ("created", Inert::Time),
        ("choices[].finish_reason", Inert::Word),
        ("choices[].delta.role", Inert::Word),
        ("choices[].delta.audio.id", Inert::Id),
        ("choices[].delta.audio.data", Inert::Data),
        ("choices[].delta.tool_calls[].type", Inert::Word),
        ("choices[].delta.tool_calls[].id", Inert::Id),
    ],
    known: &[],
};

/// A `tools` declaration: a function's name, description and parameters and a custom tool's
/// name, description and format are mapped; its other strings are the request's fields.
pub const TOOL: ToolShape = ToolShape {
    tool: Shape {
        mapped: &["function", "custom"],
        inert: &[("type", Inert::Word), ("name", Inert::Word)],
        known: &[],
    },
    inner: &[
        (
            "function",
            Shape {
                mapped: &["name", "description", "parameters"],
                inert: &[],
                known: &["strict"],
            },
        ),
        (
            "custom",
            Shape {
                // `format` is the tool's parameters (a grammar the tools rail sees).
                mapped: &["name", "description", "format"],
                inert: &[],
                known: &[],
            },
        ),
    ],
    nested: None,
};

/// A legacy `functions` declaration.
pub const FUNCTION: ToolShape = ToolShape {
    tool: Shape {
        mapped: &["name", "description", "parameters"],
        inert: &[],
        known: &[],
    },
    inner: &[],
    nested: None,
};
