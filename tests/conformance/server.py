"""The reference server for the MCP conformance suite (tests/conformance.rs): every fixture the
suite's server scenarios call for, written with the MCP Python SDK (`MCPServer`) and served over
Streamable HTTP on loopback, answering the session era (2025-11-25 and before) and the stateless
2026-07-28 protocol on one URL, `/mcp`. Usage: server.py PORT.

The fixtures are what each scenario's own description asks of a server: tools named `test_*`
(text, image, audio, embedded resources, logging, progress, errors, sampling and elicitation as
server requests in the session era and as `InputRequiredResult`s in the stateless one), the
`test://` resources and a template, prompts, completions, a tool with `x-mcp-header` parameters,
and DNS-rebinding protection (loopback `Host`/`Origin` only)."""

import base64
import json
import sys
import warnings
import zlib
from typing import Any

import anyio
import uvicorn
from mcp import types
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.streamable_http import EventMessage, EventStore
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.types import (
    AudioContent,
    CallToolResult,
    Completion,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)
from mcp_types import InputRequiredResult


# A 1x1 red PNG and a short silent WAV, built here rather than shipped.
def _png() -> str:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then one red pixel
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


PNG = _png()


def _wav() -> str:
    rate, samples = 8000, 80
    data = b"\x00\x00" * samples
    header = (
        b"RIFF" + (36 + len(data)).to_bytes(4, "little") + b"WAVEfmt "
        + (16).to_bytes(4, "little") + (1).to_bytes(2, "little") + (1).to_bytes(2, "little")
        + rate.to_bytes(4, "little") + (rate * 2).to_bytes(4, "little")
        + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
        + b"data" + len(data).to_bytes(4, "little")
    )
    return base64.b64encode(header + data).decode()


WAV = _wav()

# One tool list for every caller, so it may be cached by anyone for a minute (SEP-2549): a gateway
# that filters it per caller must say "private" instead.
server = MCPServer(
    "railyard-conformance-reference",
    version="1.0.0",
    cache_hints={"tools/list": CacheHint(ttl_ms=60_000, scope="public")},
)


def text(t: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=t)])


# ---- tools: content ----------------------------------------------------------------------------


@server.tool(description="Returns a simple text response")
def test_simple_text() -> CallToolResult:
    return text("This is a simple text response for testing.")


@server.tool(description="Returns an image")
def test_image_content() -> CallToolResult:
    return CallToolResult(content=[ImageContent(type="image", data=PNG, mime_type="image/png")])


@server.tool(description="Returns audio")
def test_audio_content() -> CallToolResult:
    return CallToolResult(content=[AudioContent(type="audio", data=WAV, mime_type="audio/wav")])


@server.tool(description="Returns an embedded resource")
def test_embedded_resource() -> CallToolResult:
    resource = TextResourceContents(
        uri="test://embedded-resource",
        mime_type="text/plain",
        text="This is an embedded resource content.",
    )
    return CallToolResult(content=[EmbeddedResource(type="resource", resource=resource)])


@server.tool(description="Returns text, an image and a resource")
def test_multiple_content_types() -> CallToolResult:
    resource = TextResourceContents(
        uri="test://mixed-content-resource",
        mime_type="application/json",
        text=json.dumps({"test": "data", "value": 123}),
    )
    return CallToolResult(
        content=[
            TextContent(type="text", text="Multiple content types test:"),
            ImageContent(type="image", data=PNG, mime_type="image/png"),
            EmbeddedResource(type="resource", resource=resource),
        ]
    )


@server.tool(description="Always fails")
def test_error_handling() -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text="This tool intentionally returns an error for testing")],
        is_error=True,
    )


# ---- tools: notifications during a call ----------------------------------------------------------


@server.tool(description="Logs three messages while it runs")
async def test_tool_with_logging(ctx: Context) -> CallToolResult:
    await ctx.info("Tool execution started")
    await anyio.sleep(0.05)
    await ctx.info("Tool processing data")
    await anyio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return text("Tool with logging executed successfully")


@server.tool(description="Logs a message while it runs (only when the request asked for logs)")
async def test_logging_tool(ctx: Context) -> CallToolResult:
    await ctx.info("Logging tool ran")
    return text("Logging tool executed")


@server.tool(description="Reports progress while it runs")
async def test_tool_with_progress(ctx: Context) -> CallToolResult:
    for done in (0, 50, 100):
        await ctx.report_progress(done, 100)
        if done < 100:
            await anyio.sleep(0.05)
    return text("Tool with progress executed successfully")


# ---- tools: asking the client --------------------------------------------------------------------


@server.tool(description="Asks the client's model (sampling)")
async def test_sampling(prompt: str, ctx: Context) -> CallToolResult:
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    reply = getattr(result.content, "text", str(result.content))
    return text(f"LLM response: {reply}")


@server.tool(description="Asks the user (elicitation)")
async def test_elicitation(message: str, ctx: Context) -> CallToolResult:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return text(f"User response: action={result.action}, content={json.dumps(result.content)}")


@server.tool(description="Elicitation with defaults for every primitive type (SEP-1034)")
async def test_elicitation_sep1034_defaults(ctx: Context) -> CallToolResult:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    result = await ctx.session.elicit_form("Please review the defaults", schema, related_request_id=ctx.request_id)
    return text(f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}")


@server.tool(description="Elicitation with every enum form (SEP-1330)")
async def test_elicitation_sep1330_enums(ctx: Context) -> CallToolResult:
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
    }
    result = await ctx.session.elicit_form("Pick options", schema, related_request_id=ctx.request_id)
    return text(f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}")


@server.tool(description="Closes the response stream mid-call; the client resumes it (SEP-1699)")
async def test_reconnection(ctx: Context) -> CallToolResult:
    await anyio.sleep(0.05)
    await ctx.close_sse_stream()
    await anyio.sleep(0.3)
    return text("Reconnection test completed")


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12_tool() -> CallToolResult:
    return text("ok")


# Declared with the schema as written (the SDK would derive one from the signature).
server._tool_manager.get_tool("json_schema_2020_12_tool").parameters = JSON_SCHEMA_2020_12


# ---- tools: the stateless protocol's input-required results (SEP-2322) -----------------------------


def _ask(message: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {"type": "object", "properties": properties, "required": required},
        },
    }


NAME_QUESTION = _ask("What is your name?", {"name": {"type": "string"}}, ["name"])


def _answer(ctx: Context, key: str) -> Any:
    responses = ctx.input_responses or {}
    value = responses.get(key)
    if value is None:
        return None
    return value.model_dump(by_alias=True, exclude_none=True) if hasattr(value, "model_dump") else value


def _caps(ctx: Context) -> dict[str, Any]:
    caps = ctx.client_capabilities
    return caps.model_dump(by_alias=True, exclude_none=True) if caps is not None else {}


def _has(answer: Any, key: str) -> bool:
    return isinstance(answer, dict) and key in answer


@server.tool(description="Asks the user's name with an input-required result")
async def test_input_required_result_elicitation(ctx: Context) -> CallToolResult | InputRequiredResult:
    answer = _answer(ctx, "user_name")
    if not _has(answer, "content") or not isinstance(answer["content"], dict):
        return InputRequiredResult(input_requests={"user_name": NAME_QUESTION})
    return text(f"Hello, {answer['content'].get('name', '')}!")


CAPITAL_QUESTION = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
        "maxTokens": 100,
    },
}


@server.tool(description="Asks the client's model with an input-required result")
async def test_input_required_result_sampling(ctx: Context) -> CallToolResult | InputRequiredResult:
    answer = _answer(ctx, "capital_question")
    if not _has(answer, "content"):
        return InputRequiredResult(input_requests={"capital_question": CAPITAL_QUESTION})
    return text(f"The model said: {answer['content'].get('text', '')}")


ROOTS_QUESTION = {"method": "roots/list", "params": {}}


@server.tool(description="Asks for the client's roots with an input-required result")
async def test_input_required_result_list_roots(ctx: Context) -> CallToolResult | InputRequiredResult:
    answer = _answer(ctx, "client_roots")
    if not _has(answer, "roots"):
        return InputRequiredResult(input_requests={"client_roots": ROOTS_QUESTION})
    return text("Roots: " + ", ".join(r.get("uri", "") for r in answer["roots"]))


CONFIRM_QUESTION = _ask("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])


@server.tool(description="An input-required result with request state")
async def test_input_required_result_request_state(ctx: Context) -> CallToolResult | InputRequiredResult:
    answer = _answer(ctx, "confirm")
    if ctx.request_state != "awaiting-confirm" or not _has(answer, "action"):
        return InputRequiredResult(input_requests={"confirm": CONFIRM_QUESTION}, request_state="awaiting-confirm")
    return text("Confirmed: state-ok")


@server.tool(description="An input-required result whose state is integrity-protected")
async def test_input_required_result_tampered_state(ctx: Context) -> CallToolResult | InputRequiredResult:
    # The SDK seals requestState; a tampered one is refused before this runs.
    answer = _answer(ctx, "confirm")
    if ctx.request_state != "sealed-state" or not _has(answer, "action"):
        return InputRequiredResult(input_requests={"confirm": CONFIRM_QUESTION}, request_state="sealed-state")
    return text("Confirmed: state-ok")


GREETING_QUESTION = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}],
        "maxTokens": 50,
    },
}


@server.tool(description="Three input requests of different kinds at once")
async def test_input_required_result_multiple_inputs(ctx: Context) -> CallToolResult | InputRequiredResult:
    keys = ("user_name", "greeting", "client_roots")
    if ctx.request_state != "multiple" or not all(_answer(ctx, k) is not None for k in keys):
        return InputRequiredResult(
            input_requests={"user_name": NAME_QUESTION, "greeting": GREETING_QUESTION, "client_roots": ROOTS_QUESTION},
            request_state="multiple",
        )
    return text("All inputs received")


@server.tool(description="Two rounds of input requests, the state changing between them")
async def test_input_required_result_multi_round(ctx: Context) -> CallToolResult | InputRequiredResult:
    state = ctx.request_state
    if state == "round-2" and _answer(ctx, "step2") is not None:
        return text("Both steps answered")
    if state == "round-1" and _answer(ctx, "step1") is not None:
        color = _ask("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])
        return InputRequiredResult(input_requests={"step2": color}, request_state="round-2")
    name = _ask("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])
    return InputRequiredResult(input_requests={"step1": name}, request_state="round-1")


@server.tool(description="Asks only for what the client declared it can answer")
async def test_input_required_result_capabilities(ctx: Context) -> CallToolResult | InputRequiredResult:
    caps = _caps(ctx)
    asks: dict[str, Any] = {}
    if "elicitation" in caps:
        asks["user_name"] = NAME_QUESTION
    if "sampling" in caps:
        asks["capital_question"] = CAPITAL_QUESTION
    if "roots" in caps:
        asks["client_roots"] = ROOTS_QUESTION
    if ctx.input_responses or not asks:
        return text("Done")
    return InputRequiredResult(input_requests=asks)


@server.tool(description="Answers with an input-required result on a streamed response")
async def test_streaming_elicitation(ctx: Context) -> CallToolResult | InputRequiredResult:
    await ctx.report_progress(0, 1)
    answer = _answer(ctx, "user_name")
    if not _has(answer, "content"):
        return InputRequiredResult(input_requests={"user_name": NAME_QUESTION})
    return text("Streamed elicitation answered")


@server.tool(description="Needs the client's sampling capability")
async def test_missing_capability(ctx: Context) -> CallToolResult:
    if "sampling" not in _caps(ctx):
        raise MCPError(
            code=-32021,
            message="This tool needs the client's sampling capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return text("The client can sample")


def _extra_tool() -> CallToolResult:
    return text("A tool added at run time")


def _extra_prompt() -> str:
    return "A prompt added at run time"


@server.tool(description="Adds or removes a tool (the tool list changes)")
async def test_trigger_tool_change(ctx: Context) -> CallToolResult:
    if server._tool_manager.get_tool("test_added_tool") is None:
        server.add_tool(_extra_tool, name="test_added_tool", description="Added at run time")
    else:
        server.remove_tool("test_added_tool")
    await ctx.notify_tools_changed()
    return text("The tool list changed")


@server.tool(description="Adds or removes a prompt (the prompt list changes)")
async def test_trigger_prompt_change(ctx: Context) -> CallToolResult:
    if server._prompt_manager.get_prompt("test_added_prompt") is None:
        server.add_prompt(Prompt.from_function(_extra_prompt, name="test_added_prompt", description="Added"))
    else:
        server.remove_prompt("test_added_prompt")
    await ctx.notify_prompts_changed()
    return text("The prompt list changed")


@server.tool(description="Looks up a region's weather: its region is mirrored in a header (SEP-2243)")
def test_header_param(region: str) -> CallToolResult:
    return text(f"Weather in {region}: sunny")


# The region argument is mirrored as `Mcp-Param-Region`.
server._tool_manager.get_tool("test_header_param").parameters = {
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    "required": ["region"],
}


# ---- resources -----------------------------------------------------------------------------------


@server.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource(
    "test://static-binary", name="static-binary", description="A static binary resource", mime_type="image/png"
)
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@server.resource(
    "test://template/{id}/data", name="template", description="A resource template", mime_type="application/json"
)
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource", name="watched-resource", description="A resource to subscribe to")
def watched() -> str:
    return "Watched resource content."


# ---- prompts -------------------------------------------------------------------------------------


@server.prompt(description="A simple prompt")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@server.prompt(description="A prompt with arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt(description="A prompt with an embedded resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": {
                "type": "resource",
                "resource": {
                    "uri": resourceUri,
                    "mimeType": "text/plain",
                    "text": "Embedded resource content for testing.",
                },
            },
        },
        {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
    ]


@server.prompt(description="A prompt with an image")
def test_prompt_with_image() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
        {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
    ]


@server.prompt(description="A prompt that asks the user for context first")
def test_input_required_result_prompt(ctx: Context) -> Any:
    answer = _answer(ctx, "user_context")
    if not _has(answer, "content"):
        question = _ask("What context should the prompt use?", {"context": {"type": "string"}}, ["context"])
        return InputRequiredResult(input_requests={"user_context": question})
    context = answer["content"].get("context", "") if isinstance(answer["content"], dict) else ""
    return f"Use this context: {context}"


@server.completion()
async def complete(ref, argument, context):
    values = [v for v in ("paris", "park", "party") if v.startswith(argument.value or "")]
    return Completion(values=values, total=len(values), has_more=False)


# ---- the session era's logging level and subscriptions -----------------------------------------

subscribed: set[str] = set()


async def set_level(ctx, params) -> EmptyResult:
    return EmptyResult()


async def subscribe(ctx, params) -> EmptyResult:
    subscribed.add(str(params.uri))
    return EmptyResult()


async def unsubscribe(ctx, params) -> EmptyResult:
    subscribed.discard(str(params.uri))
    return EmptyResult()


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    low = server._lowlevel_server
    low.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)


# ---- serving -------------------------------------------------------------------------------------


class Events(EventStore):
    """Every event kept in memory, so a client can resume a stream (SEP-1699)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    async def store_event(self, stream_id, message):
        event_id = str(len(self.events) + 1)
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback):
        stream = next((s for e, s, _ in self.events if e == last_event_id), None)
        if stream is None:
            return None
        after = False
        for event_id, stream_id, message in self.events:
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream


def main() -> None:
    port = int(sys.argv[1])
    loopback = ["127.0.0.1", "localhost", "[::1]"]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h for name in loopback for h in (name, f"{name}:*")],
        allowed_origins=[f"http://{name}{p}" for name in loopback for p in ("", ":*")],
    )
    app = server.streamable_http_app(transport_security=security, event_store=Events(), retry_interval=100)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
