"""The JSON Schemas of every message the oracle generates, taken from the SDKs' own type
definitions (the OpenAI, Anthropic and MCP Python SDKs in the venv) with pydantic's
`TypeAdapter(T).json_schema()`.

`load()` returns a list of specs, each a dict: door, direction, family (the SDK type it comes
from), schema (a JSON Schema with its `$defs`), and for MCP the method it answers (`method`).
Importing the SDKs' types takes seconds, so the schemas are kept in a cache file keyed by the
SDKs' versions (`$RAILYARD_ORACLE_CACHE`, by default in the system's temporary directory)."""

import hashlib
import json
import os
import tempfile
from importlib import metadata

PACKAGES = ("openai", "anthropic", "mcp", "mcp-types", "pydantic")
# Bump when what `_collect` produces changes.
FORMAT = 3


def _versions() -> str:
    out = []
    for p in PACKAGES:
        try:
            out.append(f"{p}=={metadata.version(p)}")
        except metadata.PackageNotFoundError:
            out.append(f"{p}==absent")
    return ",".join(out) + f";format={FORMAT}"


def _cache_path() -> str:
    key = hashlib.sha256(_versions().encode()).hexdigest()[:16]
    base = os.environ.get("RAILYARD_ORACLE_CACHE") or tempfile.gettempdir()
    return os.path.join(base, f"railyard-oracle-schemas-{key}.json")


def load() -> list:
    path = _cache_path()
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        pass
    specs = _collect()
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(specs, f)
    os.replace(tmp, path)
    return specs


def _schema(t) -> dict:
    from pydantic import TypeAdapter

    return TypeAdapter(t).json_schema()


def _drop_header_params(schema: dict) -> dict:
    """Request params the SDKs send as headers, not in the body (`betas`: `openai-beta`,
    `anthropic-beta`)."""
    props = schema.get("properties", {})
    for k in ("betas",):
        props.pop(k, None)
    if "required" in schema:
        schema["required"] = [r for r in schema["required"] if r in props]
    return schema


def _collect() -> list:
    from typing import List

    from typing_extensions import Literal, TypedDict

    from openai.types import Model
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.chat import completion_create_params as chat_params
    from openai.types.responses import Response, ResponseStreamEvent
    from openai.types.responses import response_create_params as responses_params
    from openai.types.beta import response_create_params as beta_responses_params
    from openai.types.beta.beta_response import BetaResponse
    from openai.types.beta.beta_response_stream_event import BetaResponseStreamEvent
    from anthropic.types import Message, RawMessageStreamEvent
    from anthropic.types import message_create_params as messages_params
    from anthropic.types.beta import BetaMessage, BetaRawMessageStreamEvent
    from anthropic.types.beta import message_create_params as beta_messages_params

    class ModelList(TypedDict):
        object: Literal["list"]
        data: List[Model]

    specs = []

    def add(door, direction, family, t, **extra):
        schema = _schema(t)
        if direction == "request":
            schema = _drop_header_params(schema)
        specs.append({"door": door, "direction": direction, "family": family, "schema": schema, **extra})

    add("chat", "request", "openai.chat.CompletionCreateParams", chat_params.CompletionCreateParamsNonStreaming)
    add("chat", "reply", "openai.chat.ChatCompletion", ChatCompletion)
    add("chat", "stream", "openai.chat.ChatCompletionChunk", ChatCompletionChunk)
    add("responses", "request", "openai.responses.ResponseCreateParams", responses_params.ResponseCreateParamsNonStreaming)
    add("responses", "request", "openai.beta.ResponseCreateParams", beta_responses_params.ResponseCreateParamsNonStreaming)
    add("responses", "reply", "openai.responses.Response", Response)
    add("responses", "reply", "openai.beta.BetaResponse", BetaResponse)
    add("responses", "stream", "openai.responses.ResponseStreamEvent", ResponseStreamEvent)
    add("responses", "stream", "openai.beta.BetaResponseStreamEvent", BetaResponseStreamEvent)
    add("messages", "request", "anthropic.MessageCreateParams", messages_params.MessageCreateParamsNonStreaming)
    add("messages", "request", "anthropic.beta.MessageCreateParams", beta_messages_params.MessageCreateParamsNonStreaming)
    add("messages", "reply", "anthropic.Message", Message)
    add("messages", "reply", "anthropic.beta.BetaMessage", BetaMessage)
    add("messages", "stream", "anthropic.RawMessageStreamEvent", RawMessageStreamEvent)
    add("messages", "stream", "anthropic.beta.BetaRawMessageStreamEvent", BetaRawMessageStreamEvent)
    add("models", "reply", "openai.Model (list)", ModelList)
    specs.extend(_mcp())
    return specs


def _members(t) -> tuple:
    """The members of a union type (or the one type)."""
    import typing

    if t is None:
        return ()
    return typing.get_args(t) or (t,)


def _mcp() -> list:
    """Both revisions: what a client sends (requests, notifications, its answers to a server's
    requests) and what a server sends (each method's result, notifications, its requests)."""
    from typing import Union

    from mcp_types import methods
    from mcp_types import _v2025_11_25 as v2025
    from mcp_types import _v2026_07_28 as v2026

    specs = []
    for version, module in (("2025-11-25", v2025), ("2026-07-28", v2026)):
        door = f"mcp-{version}"

        def add(direction, family, t, **extra):
            specs.append({"door": door, "direction": direction, "family": family,
                          "schema": _schema(t), "version": version, **extra})

        requests = {}
        for member in _members(module.ClientRequest):
            method = member.model_fields["method"].annotation.__args__[0]
            requests[method] = member
        results = {m: t for (m, v), t in methods.SERVER_RESULTS.items() if v == version}
        if version == "2025-11-25":
            # The SDK's surface maps leave tasks out; the revision's own unions have them.
            results.update({
                "tasks/get": v2025.GetTaskResult,
                "tasks/result": v2025.GetTaskPayloadResult,
                "tasks/cancel": v2025.CancelTaskResult,
                "tasks/list": v2025.ListTasksResult,
            })
        for method, t in sorted(requests.items()):
            add("request", f"{t.__name__}", t, method=method)
        for member in _members(getattr(module, "ClientNotification", None)):
            method = member.model_fields["method"].annotation.__args__[0]
            add("request", f"{member.__name__}", member, method=method, notification=True)
        if hasattr(module, "ServerRequest"):
            server_requests = {}
            for member in _members(module.ServerRequest):
                method = member.model_fields["method"].annotation.__args__[0]
                server_requests[method] = member
            client_results = {m: t for (m, v), t in methods.CLIENT_RESULTS.items() if v == version}
            client_results.update({"tasks/get": v2025.GetTaskResult, "tasks/result": v2025.GetTaskPayloadResult,
                                   "tasks/list": v2025.ListTasksResult, "tasks/cancel": v2025.CancelTaskResult})
            for method, t in sorted(client_results.items()):
                if method in server_requests:
                    add("request", f"{getattr(t, '__name__', method)} (answer to {method})", t,
                        method=method, answer=True)
            for method, t in sorted(server_requests.items()):
                add("stream", f"{t.__name__}", t, method=method, server_request=True)
        for method, t in sorted(results.items()):
            if method in requests:
                name = " | ".join(a.__name__ for a in _members(t))
                add("reply", name, t, method=method, request=_schema(requests[method]))
        # An error answer to a call: clients hand its message and data to the model.
        if hasattr(module, "JSONRPCErrorResponse"):
            err = module.JSONRPCErrorResponse
            add("reply", "JSONRPCErrorResponse (to tools/call)", err, method="tools/call",
                request=_schema(requests["tools/call"]), error=True)
        for member in _members(module.ServerNotification):
            method = member.model_fields["method"].annotation.__args__[0]
            add("stream", f"{member.__name__}", member, method=method, notification=True)
    return specs


if __name__ == "__main__":
    for s in load():
        print(s["door"], s["direction"], s["family"], len(json.dumps(s["schema"])))
