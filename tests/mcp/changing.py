"""An MCP server whose tools change while it runs, for the pinned tools' tests (#70): the
official SDK's low-level `Server`, served over Streamable HTTP on loopback. Usage:
changing.py PORT FILE [PORT FILE ...]: on each PORT, a server whose `tools/list` answers with
the tools FILE holds when asked (a JSON array of `tools/list` entries, as the test last wrote it:
a "rug pull" is the test rewriting the file). A call of a listed tool answers with the tool's
name and its arguments; of any other, an error."""

import json
import sys

import anyio
import uvicorn

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings


def serving(path: str) -> Server:
    def tools() -> list[types.Tool]:
        with open(path) as f:
            return [types.Tool.model_validate(entry) for entry in json.load(f)]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools())

    async def call_tool(ctx, params) -> types.CallToolResult:
        if not any(t.name == params.name for t in tools()):
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"no tool {params.name}")], is_error=True)
        text = f"{params.name}: {json.dumps(params.arguments or {}, sort_keys=True)}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("railyard-changing-tools", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    args = sys.argv[1:]
    servers = []
    for port, path in zip(args[::2], args[1::2]):
        app = serving(path).streamable_http_app(json_response=True, transport_security=security)
        config = uvicorn.Config(app, host="127.0.0.1", port=int(port), log_level="warning")
        servers.append(uvicorn.Server(config))
    async with anyio.create_task_group() as tg:
        for s in servers:
            tg.start_soon(s.serve)


anyio.run(main)
