"""An MCP client for the MCP door's tests: the official SDK's `Client` over its Streamable HTTP
transport, through Railyard. Usage: client.py URL KEY MODE [STEP...]

MODE is the SDK's: `legacy` (the initialize handshake and a session), `2026-07-28` (stateless)
or `auto`. Each STEP is a tool call `name:{json arguments}`, `list` (the tools' names, descriptions, input schemas and the list's `_meta`), `read:<uri>` (a resource)
`prompt:<name>:{json arguments}`, `resources` / `prompts` (the lists' descriptions), or
`complete` (the completions for draft_reply's argument), or `sleep:<seconds>`. With
RAILYARD_SESSION set, every request names that agent session (the `Railyard-Session` header). Its sampling callback answers with what its "model" was shown, its elicitation callback with
the message its "user" was shown. Prints one JSON object:
what each step returned, as the SDK's own objects say it, the session id the upstream issued,
the content types of the answers, and whether a request in the ended session still works."""

import json
import os
import sys

import anyio
import httpx2

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def plain(value):
    """`value` with the numbers JSON has no spelling for (NaN, infinities) as strings."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def outcome(result) -> dict:
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    return {
        "is_error": result.is_error,
        "text": "\n".join(texts),
        "structured": plain(result.structured_content),
        "meta": plain(result.meta),
    }


def first(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


async def main() -> None:
    url, key, mode, *steps = sys.argv[1:]
    seen = {"content_types": [], "session": None, "steps": []}

    async def on_response(response: httpx2.Response) -> None:
        # Answers to POSTs only: the SDK's GET listener for server notifications is an SSE
        # stream whatever the server's answer mode.
        if response.request.method == "POST":
            seen["content_types"].append(response.headers.get("content-type", ""))
        if sid := response.headers.get("mcp-session-id"):
            seen["session"] = sid

    headers = {"Authorization": f"Bearer {key}"}
    if os.environ.get("RAILYARD_SESSION"):
        headers["Railyard-Session"] = os.environ["RAILYARD_SESSION"]
    http = httpx2.AsyncClient(
        headers=headers,
        event_hooks={"response": [on_response]},
        timeout=30,
    )
    async def sampling(context, params):
        # The client's "model" answers with what it was shown: the system prompt and the texts.
        from mcp.types import CreateMessageResult, TextContent
        shown = [params.system_prompt or ""] + [getattr(m.content, "text", "") for m in params.messages]
        return CreateMessageResult(role="assistant", model="echo",
                                   content=TextContent(type="text", text=" | ".join(shown)))

    async def elicitation(context, params):
        # The "user" accepts, answering with the message it was shown.
        from mcp.types import ElicitResult
        return ElicitResult(action="accept", content={"reference": params.message})

    try:
        async with Client(streamable_http_client(url, http_client=http), mode=mode,
                          sampling_callback=sampling,
                          elicitation_callback=elicitation) as client:
            seen["protocol"] = client.protocol_version
            for step in steps:
                if step == "list":
                    listed = await client.list_tools()
                    tools = listed.tools
                    seen["steps"].append(
                        {"tools": sorted(t.name for t in tools),
                         "output_schemas": sorted(t.name for t in tools if t.output_schema),
                         "descriptions": {t.name: t.description for t in tools},
                         "schemas": {t.name: plain(t.input_schema) for t in tools},
                         "meta": plain(listed.meta)})
                    continue
                if step == "complete":
                    from mcp.types import PromptReference
                    try:
                        done = await client.complete(PromptReference(type="ref/prompt", name="draft_reply"),
                                                     {"name": "customer_id", "value": "c"})
                        seen["steps"].append({"text": "\n".join(done.completion.values)})
                    except MCPError as e:
                        seen["steps"].append({"error": {"code": e.error.code, "message": e.error.message, "data": e.error.data}})
                    continue
                if step in ("resources", "prompts"):
                    try:
                        listed = (await client.list_resources()).resources if step == "resources" \
                            else (await client.list_prompts()).prompts
                        seen["steps"].append({"text": "\n".join(i.description or "" for i in listed)})
                    except MCPError as e:
                        seen["steps"].append({"error": {"code": e.error.code, "message": e.error.message, "data": e.error.data}})
                    continue
                kind, _, rest = step.partition(":")
                if kind == "sleep":
                    await anyio.sleep(float(rest))
                    continue
                if kind in ("read", "prompt"):
                    try:
                        if kind == "read":
                            r = await client.read_resource(rest)
                            texts = [getattr(c, "text", "") for c in r.contents]
                        else:
                            name, _, args = rest.partition(":")
                            r = await client.get_prompt(name, json.loads(args or "{}"))
                            texts = [getattr(m.content, "text", "") for m in r.messages]
                        seen["steps"].append({"text": "\n".join(texts), "meta": plain(r.meta)})
                    except MCPError as e:
                        seen["steps"].append({"error": {"code": e.error.code, "message": e.error.message, "data": e.error.data}})
                    continue
                name, _, args = step.partition(":")
                try:
                    result = await client.call_tool(name, json.loads(args or "{}"))
                    seen["steps"].append(outcome(result))
                except MCPError as e:
                    seen["steps"].append({"error": {"code": e.error.code, "message": e.error.message, "data": e.error.data}})
                except RuntimeError as e:
                    seen["steps"].append({"client_error": str(e)})
    except* MCPError as group:
        e = first(group)
        seen["connect_error"] = {"code": e.error.code, "message": e.error.message}
    # After the client closed its session (it sends DELETE), the session is gone upstream.
    if seen["session"]:
        ended = await http.post(
            url,
            headers={"mcp-session-id": seen["session"], "mcp-protocol-version": seen.get("protocol", ""),
                     "accept": "application/json, text/event-stream", "content-type": "application/json"},
            json={"jsonrpc": "2.0", "id": 99, "method": "tools/list", "params": {}},
        )
        seen["after_close"] = ended.status_code
    await http.aclose()
    print(json.dumps(seen))


anyio.run(main)
