"""The oracle of issue #65: traffic generated from the SDKs' own types, with a canary in every
leaf, sent through the running daemon both ways; every canary or hidden tool that crosses
unjudged is reported, with the JSON path of its leaf.

This script is the model backend and the MCP upstream (one HTTP server on --port, serving
`/v1/...` and `/mcp/<name>`), and the client: for each generated case it scripts what the
backend answers, sends the client's side through the daemon and reads what came out the other
end.

    run.py --daemon HOST:PORT --port BACKEND_PORT [--out DIR] [--known known.json]
    run.py --railyard target/debug/railyard ...   # starts the daemon itself (bundled config)

The daemon must be configured with `--backend http://127.0.0.1:BACKEND_PORT/v1` and the MCP
servers `o25`, `o26` and `o26l` at `http://127.0.0.1:BACKEND_PORT/mcp/<name>` (`--print-config`
prints the TOML to append to the bundled config).

Doors and directions: `chat`, `responses`, `messages` (request: what the backend received;
reply: a whole reply the client received; stream: each event type inside a minimal stream),
`models` (reply), `mcp-2025-11-25` and `mcp-2026-07-28` (request: every client request,
notification and answer to a server's request, as the upstream received it; reply: every
method's result, and an error answer, as the client received it; stream: every server
notification and request, inside a POST's SSE answer and on the GET stream or a
`subscriptions/listen` stream).

A refused case is taken apart (`Oracle.isolate`): refused without canaries too, halves of its
optional properties are left out until its shape is accepted; accepted without canaries, its
canaries are bisected until each refused part is one leaf. So a refusal hides only what it
refused. Requests get the calls their tool results answer (`link`); replies are asked for by a
request declaring every kind of tool the door's request types have that the daemon accepts
(`Oracle.declared`), so a reply's hosted calls are judged, not refused as undeclared.

Budget: RAILYARD_ORACLE_BUDGET (cases; default: all), RAILYARD_ORACLE_SECONDS (a deadline),
RAILYARD_ORACLE_RANDOM (random instances per type, drawn with hypothesis, after the
deterministic ones), RAILYARD_ORACLE_SEED. Prints the coverage table; writes summary.json and
table.txt to --out; with --known, lists crossings the ledger does not hold (`new`) and ledger
entries that no longer cross (`stale`), and exits 1 if there are any."""

import argparse
import collections
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import generate  # noqa: E402
import schemas  # noqa: E402

KEY = "demo-support-key"
# Replies are asked for by the default tenant, which may call every tool its request declares
# (support may call three): a reply's hosted tool calls are then judged, not refused outright,
# while a call to a tool the request does not declare (the hidden tool) is still refused.
REPLY_KEY = "demo-key"
REFUSAL = "I can't help with that request."
TOOL_PARAMS = {"type": "object", "properties": {"order": {"type": "string"}}, "additionalProperties": True}
MCP_SERVERS = ("o25", "o26", "o26l")
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def config_tail(port: int) -> str:
    return "".join(
        f'\n[[mcp.servers]]\nname = "{name}"\nurl = "http://127.0.0.1:{port}/mcp/{name}"\ntimeout_ms = 10000\n'
        for name in MCP_SERVERS)


# ---------------------------------------------------------------------------------------------
# What the backend and the upstream answer, and what they received.


class Scripts:
    def __init__(self):
        self.lock = threading.Lock()
        self.replies = {}  # model marker -> ("json", obj) | ("sse", [frames])
        self.received = collections.defaultdict(list)  # marker -> [raw body text]
        self.models = None  # the /v1/models answer
        self.mcp = None  # the current MCP case's script: callable(server, method, message) -> answer
        self.mcp_received = []  # (server, http method, message text)
        self.sessions = 0

    def expect(self, marker, reply):
        with self.lock:
            self.replies[marker] = reply

    def take(self, marker):
        with self.lock:
            self.replies.pop(marker, None)
            return self.received.pop(marker, [])


SCRIPTS = Scripts()


def sse_frame(data, event=None) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send_json(self, status, obj, headers=()):
        data = (obj if isinstance(obj, str) else json.dumps(obj)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, frames, headers=()):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        try:
            for f in frames:
                data = f.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass

    def do_GET(self):
        if self.path.startswith("/mcp/"):
            return self.mcp("GET", b"")
        if self.path.rstrip("/").endswith("/models"):
            return self.send_json(200, SCRIPTS.models or {"object": "list", "data": []})
        self.send_json(404, {"error": {"message": "not found"}})

    def do_DELETE(self):
        if self.path.startswith("/mcp/"):
            return self.mcp("DELETE", b"")
        self.send_json(404, {})

    def do_POST(self):
        raw = self.body()
        if self.path.startswith("/mcp/"):
            return self.mcp("POST", raw)
        text = raw.decode("utf-8", "replace")
        try:
            marker = json.loads(text).get("model")
        except (ValueError, AttributeError):
            marker = None
        with SCRIPTS.lock:
            SCRIPTS.received[marker].append(text)
            reply = SCRIPTS.replies.get(marker)
        if reply is None:
            door = next((d for d, p in PATHS.items() if self.path.endswith(p[3:])), "chat")
            reply = ("json", benign_reply(door, marker or "oracle"))
        if reply[0] == "json":
            return self.send_json(200, reply[1])
        return self.send_sse(reply[1])

    def mcp(self, method, raw):
        server = self.path.split("/")[2]
        text = raw.decode("utf-8", "replace")
        try:
            message = json.loads(text) if text else None
        except ValueError:
            message = None
        own = isinstance(message, dict) and str(message.get("id", "")).startswith("railyard-")
        with SCRIPTS.lock:
            if not own:
                SCRIPTS.mcp_received.append((server, method, text))
            script = SCRIPTS.mcp
        if method == "DELETE":
            return self.send_json(200, {})
        answer = None
        if script is not None and not own:
            answer = script(server, method, message, self.headers)
        if answer is None:
            answer = mcp_benign(server, method, message)
        kind, payload, headers = answer
        if kind == "json":
            return self.send_json(200, payload, headers)
        if kind == "sse":
            return self.send_sse(payload, headers)
        if kind == "accepted":
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_json(405, {})


def serve(port: int):
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ---------------------------------------------------------------------------------------------
# Benign messages: the side of each exchange that is not under test.


def benign_reply(door, model):
    if door == "chat":
        return {"id": "chatcmpl-oracle", "object": "chat.completion", "created": 1, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    if door == "responses":
        return {"id": "resp_oracle", "object": "response", "created_at": 1, "status": "completed", "model": model,
                "output": [{"type": "message", "id": "msg_oracle", "status": "completed", "role": "assistant",
                            "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}
    return {"id": "msg_oracle", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}}


def client_request(door, model, stream, tools=None):
    if door == "chat":
        body = {"model": model, "messages": [{"role": "user", "content": "hello"}],
                "tools": [{"type": "function", "function": {"name": generate.ALLOWED_TOOL,
                                                            "description": "Look up an order",
                                                            "parameters": TOOL_PARAMS}}]}
    elif door == "responses":
        body = {"model": model, "input": "hello",
                "tools": [{"type": "function", "name": generate.ALLOWED_TOOL, "description": "Look up an order",
                           "parameters": TOOL_PARAMS, "strict": False}]}
    else:
        body = {"model": model, "max_tokens": 256, "messages": [{"role": "user", "content": "hello"}],
                "tools": [{"name": generate.ALLOWED_TOOL, "description": "Look up an order",
                           "input_schema": TOOL_PARAMS}]}
    if tools:
        body["tools"] = tools
    if stream:
        body["stream"] = True
    return body


def stream_frames(door, event, model):
    """A minimal valid stream of `door` around the generated `event`."""
    if door == "chat":
        finish = {"id": "chatcmpl-oracle", "object": "chat.completion.chunk", "created": 1, "model": model,
                  "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        return [sse_frame(event), sse_frame(finish), sse_frame("[DONE]")]
    if door == "responses":
        base = benign_reply("responses", model)
        started = {**base, "status": "in_progress", "output": []}
        created = {"type": "response.created", "sequence_number": 0, "response": started}
        done = {"type": "response.completed", "sequence_number": 99, "response": base}
        t = event.get("type") if isinstance(event, dict) else None
        frames = []
        if t not in ("response.created", "response.in_progress", "response.queued"):
            frames.append(sse_frame(created, "response.created"))
        for e in announced(event):
            frames.append(sse_frame(e, e["type"]))
        frames.append(sse_frame(event, t if isinstance(t, str) else None))
        if t not in ("response.completed", "response.failed", "response.incomplete", "error"):
            frames.append(sse_frame(done, "response.completed"))
        return frames
    start = {"type": "message_start", "message": {**benign_reply("messages", model), "content": [],
                                                  "stop_reason": None}}
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
             "usage": {"output_tokens": 1}}
    stop = {"type": "message_stop"}
    t = event.get("type") if isinstance(event, dict) else None
    block = {"type": "text", "text": ""}
    if t == "content_block_delta":
        dt = (event.get("delta") or {}).get("type")
        if dt == "input_json_delta":
            block = {"type": "tool_use", "id": "toolu_oracle", "name": generate.ALLOWED_TOOL, "input": {}}
        elif dt in ("thinking_delta", "signature_delta"):
            block = {"type": "thinking", "thinking": "", "signature": ""}
    index = event.get("index", 0) if isinstance(event, dict) else 0
    open_block = {"type": "content_block_start", "index": index, "content_block": block}
    close_block = {"type": "content_block_stop", "index": index}
    seq = {
        "message_start": [event, delta, stop],
        "content_block_start": [start, event, close_block, delta, stop],
        "content_block_delta": [start, open_block, event, close_block, delta, stop],
        "content_block_stop": [start, open_block, event, delta, stop],
        "message_delta": [start, event, stop],
        "message_stop": [start, delta, event],
    }.get(t, [start, event, delta, stop])
    return [sse_frame(e, e.get("type") if isinstance(e, dict) and isinstance(e.get("type"), str) else None)
            for e in seq]


ITEM_OF_EVENT = [
    (("response.output_text.", "response.refusal.", "response.content_part.", "response.audio."), "message"),
    (("response.function_call_arguments.",), "function_call"),
    (("response.reasoning_summary_", "response.reasoning_text."), "reasoning"),
    (("response.mcp_call_arguments.", "response.mcp_call."), "mcp_call"),
    (("response.custom_tool_call_input.",), "custom_tool_call"),
]


def announced(event):
    """The events a Responses stream sends before an item-level event: the item it belongs to
    (`output_item.added`, with the event's item id and output index) and, for a message's
    text, its content part."""
    if not isinstance(event, dict) or not isinstance(event.get("item_id"), str):
        return []
    t = event.get("type")
    if not isinstance(t, str) or t.startswith("response.output_item."):
        return []
    kind = next((k for prefixes, k in ITEM_OF_EVENT if t.startswith(prefixes)), None)
    if kind is None:
        m = re.match(r"response\.([a-z_]+_call|mcp_list_tools)[._]", t)
        kind = m.group(1) if m else None
    if kind is None:
        return []
    iid, out = event["item_id"], event.get("output_index", 0)
    item = {"type": kind, "id": iid, "status": "in_progress"}
    if kind == "message":
        item.update({"role": "assistant", "content": []})
    elif kind in ("function_call", "custom_tool_call"):
        item.update({"call_id": "call_oracle", "name": generate.ALLOWED_TOOL,
                     **({"arguments": ""} if kind == "function_call" else {"input": ""})})
    elif kind == "mcp_call":
        item.update({"server_label": "oracle", "name": generate.ALLOWED_TOOL, "arguments": ""})
    elif kind == "reasoning":
        item.update({"summary": []})
        item.pop("status")
    elif kind == "mcp_list_tools":
        item.update({"server_label": "oracle", "tools": []})
    frames = [{"type": "response.output_item.added", "sequence_number": 1, "output_index": out, "item": item}]
    if kind == "message" and "content_index" in event and not t.startswith("response.content_part."):
        frames.append({"type": "response.content_part.added", "sequence_number": 2, "item_id": iid,
                       "output_index": out, "content_index": event["content_index"],
                       "part": {"type": "output_text", "text": "", "annotations": []}})
    return frames


def link(door, body):
    """Each tool result in a request's history preceded by the call it answers (same id), so
    tool-linkage has no reason to refuse the request and its leaves are judged. The calls are
    to the allowed tool, or to the provider's own tool a result names."""
    if not isinstance(body, dict):
        return body
    allowed = generate.ALLOWED_TOOL
    body = dict(body)
    added = False
    if door == "chat" and isinstance(body.get("messages"), list):
        out = []
        for m in body["messages"]:
            if isinstance(m, dict) and m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
                out.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": m["tool_call_id"], "type": "function", "function": {"name": allowed, "arguments": "{}"}}]})
                added = True
            elif isinstance(m, dict) and m.get("role") == "function" and isinstance(m.get("name"), str):
                out.append({"role": "assistant", "content": None,
                            "function_call": {"name": m["name"], "arguments": "{}"}})
                added = True
            out.append(m)
        body["messages"] = out
        if added and "tools" not in body and "functions" not in body:
            body["tools"] = [{"type": "function", "function": {"name": allowed, "parameters": TOOL_PARAMS}}]
    elif door == "responses" and isinstance(body.get("input"), list):
        out = []
        for item in body["input"]:
            t = item.get("type") if isinstance(item, dict) else None
            cid = item.get("call_id") if isinstance(item, dict) else None
            call = None
            if t == "function_call_output" and isinstance(cid, str):
                call = {"type": "function_call", "call_id": cid, "name": allowed, "arguments": "{}"}
            elif t == "custom_tool_call_output" and isinstance(cid, str):
                call = {"type": "custom_tool_call", "call_id": cid, "name": allowed, "input": ""}
            elif t == "computer_call_output" and isinstance(cid, str):
                call = {"type": "computer_call", "id": "cu_oracle", "call_id": cid, "action": {"type": "screenshot"},
                        "pending_safety_checks": [], "status": "completed"}
            elif t == "shell_call_output" and isinstance(cid, str):
                call = {"type": "shell_call", "call_id": cid, "action": {"commands": ["ls"]}, "status": "completed"}
            elif t == "apply_patch_call_output" and isinstance(cid, str):
                call = {"type": "apply_patch_call", "call_id": cid, "status": "completed",
                        "operation": {"type": "delete_file", "path": "oracle.txt"}}
            elif t == "local_shell_call_output" and isinstance(item.get("id"), str):
                call = {"type": "local_shell_call", "id": "lsh_oracle", "call_id": item["id"], "status": "completed",
                        "action": {"type": "exec", "command": ["ls"], "env": {}}}
            elif t == "mcp_approval_response" and isinstance(item.get("approval_request_id"), str):
                call = {"type": "mcp_approval_request", "id": item["approval_request_id"], "server_label": allowed,
                        "name": allowed, "arguments": "{}"}
            if call is not None:
                out.append(call)
                added = True
            out.append(item)
        body["input"] = out
        if added and "tools" not in body:
            body["tools"] = [{"type": "function", "name": allowed, "parameters": TOOL_PARAMS, "strict": False}]
    elif door == "messages" and isinstance(body.get("messages"), list):
        out = []
        for m in body["messages"]:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list):
                if m.get("role") == "user":
                    ids = [b["tool_use_id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
                           and isinstance(b.get("tool_use_id"), str)]
                    if ids:
                        out.append({"role": "assistant", "content": [
                            {"type": "tool_use", "id": i, "name": allowed, "input": {}} for i in ids]})
                        added = True
                blocks = []
                for b in content:
                    t = b.get("type") if isinstance(b, dict) else None
                    i = b.get("tool_use_id") if isinstance(b, dict) else None
                    if isinstance(t, str) and t.endswith("_tool_result") and isinstance(i, str) \
                            and m.get("role") == "assistant":
                        name = t[: -len("_tool_result")]
                        if name == "mcp":
                            blocks.append({"type": "mcp_tool_use", "id": i, "name": allowed, "server_name": allowed,
                                           "input": {}})
                        else:
                            blocks.append({"type": "server_tool_use", "id": i, "name": name, "input": {}})
                        added = True
                    blocks.append(b)
                m = {**m, "content": blocks}
            out.append(m)
        body["messages"] = out
        if added and "tools" not in body:
            body["tools"] = [{"name": allowed, "input_schema": TOOL_PARAMS}]
    return body


def benign_tools():
    return [{"name": generate.ALLOWED_TOOL, "description": "Look up an order", "inputSchema": TOOL_PARAMS},
            {"name": "delete_database", "description": "Drop everything", "inputSchema": TOOL_PARAMS}]


def mcp_result(method):
    if method == "initialize":
        return {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
                "serverInfo": {"name": "oracle", "version": "1"}}
    if method == "tools/list":
        return {"tools": benign_tools()}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "ok"}], "isError": False}
    return {}


def mcp_benign(server, method, message):
    if method == "GET":
        return ("sse", [": nothing\n\n"], ())
    if not isinstance(message, dict):
        return ("json", {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "bad"}}, ())
    if "id" not in message or "method" not in message:
        return ("accepted", None, ())
    m = message["method"]
    headers = ()
    if m == "initialize":
        with SCRIPTS.lock:
            SCRIPTS.sessions += 1
            headers = (("Mcp-Session-Id", f"oracle-session-{SCRIPTS.sessions}"),)
    return ("json", {"jsonrpc": "2.0", "id": message["id"], "result": mcp_result(m)}, headers)


# ---------------------------------------------------------------------------------------------
# The client's side.


class Daemon:
    def __init__(self, addr: str, key: str):
        host, port = addr.rsplit(":", 1)
        self.host, self.port, self.key = host, int(port), key

    def request(self, method, path, body=None, headers=None, timeout=30):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        h = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        h.update(headers or {})
        data = None if body is None else (body if isinstance(body, (bytes, str)) else json.dumps(body))
        try:
            conn.request(method, path, body=data, headers=h)
            r = conn.getresponse()
            text = r.read().decode("utf-8", "replace")
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), text
        except (OSError, http.client.HTTPException) as e:
            return 0, {}, f"(no answer: {e})"
        finally:
            conn.close()

    def door(self, door, body, key=None):
        key = key or self.key
        headers = {"Authorization": f"Bearer {key}"}
        if door == "messages":
            headers.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
        return self.request("POST", PATHS[door], body, headers)


# ---------------------------------------------------------------------------------------------
# Finding canaries in what crossed.

EMAIL_RE = re.compile(r"canary-(\d+)@example\.com")
TOOL_RE = re.compile(r"delete_database_(\d+)")


def normalised(text: str) -> str:
    """`text` and its JSON documents (whole, or an SSE stream's data lines) written without
    escapes, so a value spelled with `\\u` escapes is still found."""
    out = [text]
    docs = []
    try:
        docs.append(json.loads(text))
    except ValueError:
        for line in text.splitlines():
            if line.startswith("data:"):
                try:
                    docs.append(json.loads(line[5:].strip()))
                except ValueError:
                    pass
    for d in docs:
        out.append(json.dumps(d, ensure_ascii=False))
    return "\n".join(out)


def digits_re(value: str):
    return re.compile(r"(?<!\d)" + r"[ \-.]?".join(re.escape(c) for c in value) + r"(?!\d)")


def crossed(registry, canaries, texts):
    """The canaries of `canaries` found in `texts`: number -> the text around the first
    place it was found."""
    text = "\n".join(normalised(t) for t in texts)
    emails = {}
    for m in EMAIL_RE.finditer(text):
        emails.setdefault(int(m.group(1)), m.start())
    tools = {}
    for m in TOOL_RE.finditer(text):
        tools.setdefault(int(m.group(1)), m.start())
    out = {}
    for n in canaries:
        leaf = registry.leaves[n - 1]
        kind = leaf["kind"]
        at = None
        if kind == "tool":
            at = tools.get(n)
        elif kind in ("card_text", "ssn_text", "card_number"):
            m = digits_re(leaf["value"]).search(text)
            at = m.start() if m else None
        else:
            at = emails.get(n)
        if at is not None:
            out[n] = text[max(0, at - 160):at + 60]
    return out


def refused_reply(status, text):
    if status == 0 or status >= 400:
        return True
    if REFUSAL in text or "policy_violation" in text or "-32015" in text:
        return True
    return False


# ---------------------------------------------------------------------------------------------
# Cases.


class Case:
    def __init__(self, door, direction, family, inst, run, framing=""):
        self.door, self.direction, self.family = door, direction, family
        self.inst = inst
        self.run = run  # callable(case) -> (outcome, crossed set, note)
        self.framing = framing
        self.outcome = None
        self.crossed = {}
        self.note = ""
        self.superseded = False
        self.structural = False  # refused for its shape, with no canary in it
        self.root = inst["case"]  # the generated case this one was taken apart from


class Oracle:
    def __init__(self, daemon: Daemon, budget=None, seconds=None, workers=3, random_n=0, seed=0,
                 doors=None, only=None):
        self.daemon = daemon
        self.registry = generate.Registry()
        self.budget = budget
        self.deadline = time.time() + seconds if seconds else None
        self.workers = workers
        self.random_n = random_n
        self.seed = seed
        self.doors = doors
        self.cases = []
        self.generators = {}
        self.counter = 0
        self.counter_lock = threading.Lock()
        self.only = only
        self.agent = "oracle-agent"
        self.gen_lock = threading.Lock()
        self.dropped = collections.defaultdict(list)
        self.decls = {}
        self.decl_lock = threading.Lock()

    def marker(self):
        with self.counter_lock:
            self.counter += 1
            return f"oracle-{self.counter}"

    # -- generation -----------------------------------------------------------------------------

    def generate(self, specs):
        seen = collections.defaultdict(set)
        groups = collections.defaultdict(list)
        for spec in specs:
            door, direction = spec["door"], spec["direction"]
            if self.doors and door not in self.doors:
                continue
            for framing in self.framings(spec):
                prefix = self.prefixer(spec, framing)
                fixed = self.fixed(spec)
                dropped = []
                gen, insts = generate.instances(spec, self.registry, fixed=fixed, seen=seen[(door, direction)],
                                                case_prefix=f"{spec['family']}{' ' + framing if framing else ''}: ",
                                                prefix=prefix, dropped=dropped)
                for ti, variant, paths in dropped:
                    self.dropped[(door, direction)].append((spec, framing, ti, variant, paths))
                self.generators[(door, direction, spec["family"], framing)] = (gen, fixed, prefix)
                for inst in insts:
                    groups[(door, direction)].append(Case(door, direction, spec["family"], inst,
                                                          self.runner(spec, framing), framing))
        self.specs = specs
        return groups

    def framings(self, spec):
        if spec["door"].startswith("mcp") and spec["direction"] == "stream":
            return ["post", "get" if spec["version"] == "2025-11-25" else "listen"]
        return [""]

    def fixed(self, spec):
        door = spec["door"]
        if door in PATHS and spec["direction"] == "request":
            return {"model": None, "stream": False}  # the model is set per case
        if door.startswith("mcp") and spec.get("error"):
            return {"jsonrpc": "2.0", "id": 7}
        if door.startswith("mcp") and spec["direction"] in ("request", "stream") and not spec.get("answer"):
            return {"jsonrpc": "2.0", **({} if spec.get("notification") else {"id": 7})}
        return None

    def prefixer(self, spec, framing):
        door, direction = spec["door"], spec["direction"]
        if door.startswith("mcp"):
            m = spec["method"]
            if direction == "reply":
                return lambda tag: f"[{m}]" + ("" if spec.get("error") else "result")
            if spec.get("answer"):
                return lambda tag: f"[answer to {m}]result"
            return lambda tag: (f"({framing})" if framing else "") + f"[{m}]"
        if direction == "stream":
            return lambda tag: f"[{tag}]" if tag else ""
        return None

    def sample(self, groups):
        """All cases, or with a budget a deterministic spread over every door and direction."""
        order = sorted(groups)
        if self.budget is None or self.budget >= sum(len(g) for g in groups.values()):
            return [c for k in order for c in groups[k]]
        # Each door and direction an equal share; what a small one leaves goes to the others.
        quota = {k: 0 for k in order}
        left = self.budget
        open_ = [k for k in order if groups[k]]
        while left > 0 and open_:
            share = max(1, left // len(open_))
            for k in list(open_):
                take = min(share, len(groups[k]) - quota[k], left)
                quota[k] += take
                left -= take
                if quota[k] >= len(groups[k]):
                    open_.remove(k)
                if left <= 0:
                    break
        out = []
        for k in order:
            g, q = groups[k], quota[k]
            if q >= len(g):
                out.extend(g)
            elif q > 0:
                step = len(g) / q
                out.extend(g[int(i * step)] for i in range(q))
        return out

    # -- running --------------------------------------------------------------------------------

    def runner(self, spec, framing):
        door, direction = spec["door"], spec["direction"]
        if door in PATHS:
            return {"request": self.run_request, "reply": self.run_reply, "stream": self.run_stream}[direction]
        if door == "models":
            return self.run_models
        return {"request": self.run_mcp_request, "reply": self.run_mcp_reply,
                "stream": self.run_mcp_stream}[direction]

    def declared(self, door):
        """Every kind of tool declaration the door's request types have (built from them, no
        canary, the allowed tool's name) that the daemon accepts, tried one at a time once per
        run: what reply cases declare, so the hosted and custom calls a reply makes are judged
        against a declaration."""
        with self.decl_lock:
            if door in self.decls:
                return self.decls[door]
            base = client_request(door, "x", False)["tools"]
            candidates = []
            for (d, direction, family, framing), (gen, fixed, prefix) in sorted(self.generators.items(),
                                                                                   key=lambda kv: kv[0]):
                if d != door or direction != "request":
                    continue
                for ti, (label, route) in enumerate(gen.targets):
                    if not (label.startswith(".tools[]<") and label.count("<") == 1):
                        continue
                    c = gen.case(ti, "all", generate.Registry(), fixed, active=set())
                    tools = c["value"].get("tools") if c else None
                    if not tools:
                        continue
                    decl = tools[0]
                    for holder in (decl, decl.get("function") if isinstance(decl.get("function"), dict) else None):
                        if holder is not None:
                            for k in ("parameters", "input_schema"):
                                if k in holder:
                                    holder[k] = TOOL_PARAMS
                    if decl not in candidates and decl not in base:
                        candidates.append(decl)
            kept = list(base)
            for decl in candidates:
                m = self.marker()
                SCRIPTS.expect(m, ("json", benign_reply(door, m)))
                status, _, _ = self.daemon.door(door, client_request(door, m, False, kept + [decl]), REPLY_KEY)
                if SCRIPTS.take(m) and status == 200:
                    kept.append(decl)
            self.decls[door] = kept
            return kept

    def run_request(self, case):
        m = self.marker()
        body = link(case.door, {**case.inst["value"], "model": m})
        SCRIPTS.expect(m, ("json", benign_reply(case.door, m)))
        status, _, text = self.daemon.door(case.door, body)
        got = SCRIPTS.take(m)
        if not got:
            return "refused", {}, f"{status} {text[:200]}"
        return "judged", crossed(self.registry, case.inst["canaries"], got), f"backend got: {got}"

    def run_reply(self, case):
        m = self.marker()
        SCRIPTS.expect(m, ("json", case.inst["value"]))
        status, _, text = self.daemon.door(case.door, client_request(case.door, m, False, self.declared(case.door)),
                                           REPLY_KEY)
        SCRIPTS.take(m)
        found = crossed(self.registry, case.inst["canaries"], [text])
        return ("refused" if refused_reply(status, text) else "judged"), found, f"{status} {text[:200]}"

    def run_stream(self, case):
        m = self.marker()
        SCRIPTS.expect(m, ("sse", stream_frames(case.door, case.inst["value"], m)))
        status, _, text = self.daemon.door(case.door, client_request(case.door, m, True, self.declared(case.door)),
                                           REPLY_KEY)
        SCRIPTS.take(m)
        found = crossed(self.registry, case.inst["canaries"], [text])
        return ("refused" if refused_reply(status, text) else "judged"), found, f"{status} {text[:200]}"

    def run_models(self, case):
        with SCRIPTS.lock:
            SCRIPTS.models = case.inst["value"]
        status, _, text = self.daemon.request("GET", "/v1/models")
        found = crossed(self.registry, case.inst["canaries"], [text])
        return ("refused" if refused_reply(status, text) else "judged"), found, f"{status} {text[:200]}"

    # MCP: one case at a time (the upstream's script is global).

    def mcp_headers(self, version, message, session=None):
        h = {"Accept": "application/json, text/event-stream"}
        if version == "2026-07-28":
            h["Mcp-Protocol-Version"] = "2026-07-28"
            if isinstance(message, dict) and isinstance(message.get("method"), str):
                h["Mcp-Method"] = message["method"]
                params = message.get("params") or {}
                name = params.get("name") if isinstance(params, dict) else None
                if name is None and isinstance(params, dict):
                    name = params.get("uri")
                if isinstance(name, str) and name.isascii() and "\n" not in name:
                    h["Mcp-Name"] = name
        else:
            h["Mcp-Protocol-Version"] = "2025-11-25"
        if session:
            h["Mcp-Session-Id"] = session
        # Each case its own agent conversation: what flow remembers of one case's reads never
        # judges another's calls, so a sampled run and a whole one agree.
        h["Railyard-Session"] = self.agent
        return h

    def mcp_session(self, server):
        """A new session-era session (initialize, initialized): its id."""
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "oracle", "version": "1"}}}
        status, headers, _ = self.daemon.request("POST", f"/mcp/{server}", init,
                                                 self.mcp_headers("2025-11-25", init))
        session = headers.get("mcp-session-id")
        self.daemon.request("POST", f"/mcp/{server}", {"jsonrpc": "2.0", "method": "notifications/initialized"},
                            self.mcp_headers("2025-11-25", None, session))
        return session

    def mcp_send(self, version, server, message, session=None):
        return self.daemon.request("POST", f"/mcp/{server}", message, self.mcp_headers(version, message, session))

    def benign_request(self, spec, method, rid=7):
        schema = spec.get("request")
        if schema is None:
            return {"jsonrpc": "2.0", "id": rid, "method": method}
        b = generate.Builder(generate.Schema(schema), generate.Registry(), "benign", "all", (),
                             fixed={"jsonrpc": "2.0", "id": rid})
        return b.benign()

    def run_mcp_request(self, case):
        spec = self.spec_of(case)
        version = spec["version"]
        server = "o25" if version == "2025-11-25" else "o26"
        value = case.inst["value"]
        if spec.get("answer"):
            message = {"jsonrpc": "2.0", "id": "oracle-server-1", "result": value}
        else:
            message = value
        with SCRIPTS.lock:
            SCRIPTS.mcp_received = []
            SCRIPTS.mcp = None
        session = None
        if version == "2025-11-25" and spec.get("method") != "initialize":
            session = self.mcp_session(server)
            with SCRIPTS.lock:
                SCRIPTS.mcp_received = []
        status, _, text = self.mcp_send(version, server, message, session)
        with SCRIPTS.lock:
            got = [t for (_, _, t) in SCRIPTS.mcp_received]
        if not got:
            return "refused", {}, f"{status} {text[:200]}"
        return "judged", crossed(self.registry, case.inst["canaries"], got), f"{status} {text[:200]} | upstream got: {got}"

    def run_mcp_reply(self, case):
        spec = self.spec_of(case)
        version, method = spec["version"], spec["method"]
        server = "o25" if version == "2025-11-25" else ("o26l" if method == "tools/list" else "o26")
        value = case.inst["value"]

        def script(srv, http_method, message, headers):
            if http_method != "POST" or not isinstance(message, dict) or message.get("method") != method:
                return None
            if spec.get("error"):
                answer = {**value, "jsonrpc": "2.0", "id": message.get("id")}
            else:
                answer = {"jsonrpc": "2.0", "id": message.get("id"), "result": value}
            extra = (("Mcp-Session-Id", "oracle-session-init"),) if method == "initialize" else ()
            return ("json", answer, extra)

        session = None
        if version == "2025-11-25" and method != "initialize":
            with SCRIPTS.lock:
                SCRIPTS.mcp = None
            session = self.mcp_session(server)
        with SCRIPTS.lock:
            SCRIPTS.mcp = script
        try:
            status, _, text = self.mcp_send(version, server, self.benign_request(spec, method), session)
        finally:
            with SCRIPTS.lock:
                SCRIPTS.mcp = None
        found = crossed(self.registry, case.inst["canaries"], [text])
        return ("refused" if refused_reply(status, text) or '"error"' in text[:400] and not spec.get("error")
                else "judged"), found, f"{status} {text[:200]}"

    def run_mcp_stream(self, case):
        spec = self.spec_of(case)
        version = spec["version"]
        server = "o25" if version == "2025-11-25" else "o26"
        value = dict(case.inst["value"])
        if spec.get("server_request"):
            value["id"] = "oracle-server-1"
        frames = [sse_frame(value, "message")]

        def script(srv, http_method, message, headers):
            if case.framing == "get" and http_method == "GET":
                return ("sse", frames, ())
            if http_method != "POST" or not isinstance(message, dict) or "id" not in message:
                return None
            m = message.get("method")
            if case.framing == "post" and m == "tools/call":
                done = {"jsonrpc": "2.0", "id": message["id"], "result": mcp_result("tools/call")}
                return ("sse", frames + [sse_frame(done, "message")], ())
            if case.framing == "listen" and m == "subscriptions/listen":
                return ("sse", frames, ())
            return None

        session = None
        if version == "2025-11-25":
            with SCRIPTS.lock:
                SCRIPTS.mcp = None
            session = self.mcp_session(server)
        with SCRIPTS.lock:
            SCRIPTS.mcp = script
        try:
            if case.framing == "get":
                status, _, text = self.daemon.request("GET", f"/mcp/{server}", None,
                                                      {**self.mcp_headers(version, None, session),
                                                       "Accept": "text/event-stream"}, timeout=15)
            elif case.framing == "listen":
                listen = self.benign_request(self.request_spec(version, "subscriptions/listen"),
                                             "subscriptions/listen")
                status, _, text = self.mcp_send(version, server, listen)
            else:
                call = self.benign_request(self.request_spec(version, "tools/call"), "tools/call")
                status, _, text = self.mcp_send(version, server, call, session)
        finally:
            with SCRIPTS.lock:
                SCRIPTS.mcp = None
        found = crossed(self.registry, case.inst["canaries"], [text])
        return ("refused" if refused_reply(status, text) else "judged"), found, f"{status} {text[:200]}"

    def spec_of(self, case):
        return self.spec_by_family[(case.door, case.direction, case.family)]

    def request_spec(self, version, method):
        for s in self.specs:
            if s["door"] == f"mcp-{version}" and s["direction"] == "reply" and s["method"] == method:
                return s
        return {"request": None}

    def execute(self, case):
        if self.deadline and time.time() > self.deadline:
            case.outcome = "skipped"
            return
        if case.door.startswith("mcp"):
            self.agent = f"oracle-agent-{self.marker()}"
        try:
            case.outcome, case.crossed, case.note = case.run(case)
        except Exception as e:  # a broken case is reported, not fatal
            case.outcome, case.crossed, case.note = "error", {}, f"{type(e).__name__}: {e}"

    def variant_case(self, case, active, absent):
        """`case` again with canaries in the places `active` only (None: all of them) and the
        optional properties `absent` left out."""
        gen, fixed, prefix = self.generators[(case.door, case.direction, case.family, case.framing)]
        with self.gen_lock:  # the registry numbers leaves in the order they are planted
            c = gen.case(case.inst["target"], case.inst["variant"], self.registry, fixed,
                         case_prefix=case.inst["case"].rsplit("#", 1)[0] + " ", prefix=prefix,
                         active=active, absent=set(absent))
        out = Case(case.door, case.direction, case.family, c, case.run, case.framing)
        out.root = case.root
        return out

    def isolate(self, case):
        """A refused case, taken apart so a refusal hides as little as it can. Refused without
        any canary too, the refusal is for its shape: optional properties that exclude each
        other (`function_call` beside `tool_calls`), so halves of them are left out until the
        shape is accepted. Accepted without canaries, a canary is what it refused: its canaries
        are bisected until each refused part is one leaf. Returns the cases that replace it
        (none: the refusal stands for all of its leaves)."""
        if case.inst["target"] < 0 or case.inst["variant"] == "unknown":
            return []
        out = []
        absent = set(case.inst.get("absent") or ())

        def accepted(ab):
            probe = self.variant_case(case, set(), ab)
            self.execute(probe)
            return probe.outcome == "judged", probe.note

        def canaries(ab, c=None):
            """Run with every canary (unless `c` did), then bisect what is refused."""
            if c is None:
                c = self.variant_case(case, None, ab)
                self.execute(c)
            if not (c.outcome == "refused" and not c.crossed):
                out.append(c)
                return

            def bisect(part):
                half = len(part) // 2
                for sub in (part[:half], part[half:]):
                    if not sub:
                        continue
                    d = self.variant_case(case, set(sub), ab)
                    if not d.inst["canaries"]:
                        continue
                    self.execute(d)
                    if d.outcome == "refused" and not d.crossed and len(sub) > 1:
                        bisect(sub)
                    else:
                        out.append(d)

            bisect(list(range(c.inst["places"])))

        ok, note = accepted(absent)
        if ok:
            canaries(absent, case)
        else:
            options = [p for p in case.inst.get("optional", []) if p not in absent]

            def cover(keep):
                ab = absent | (set(options) - set(keep))
                good, _ = accepted(ab)
                if good:
                    canaries(ab)
                elif len(keep) > 1:
                    half = len(keep) // 2
                    cover(keep[:half])
                    cover(keep[half:])

            if len(options) > 1:
                half = len(options) // 2
                cover(options[:half])
                cover(options[half:])
            elif options:
                cover([])
        if not out:
            case.note += f" (refused without canaries too: {note[:200]})"
            case.structural = True
            return []
        case.superseded = True
        return out

    def run(self, specs):
        groups = self.generate(specs)
        self.spec_by_family = {(s["door"], s["direction"], s["family"]): s for s in specs}
        chosen = self.sample(groups)
        if self.only:
            chosen = [c for c in chosen if self.only in f"{c.door} {c.direction} {c.inst['case']}"]
        model_cases = [c for c in chosen if not c.door.startswith("mcp")]
        mcp_cases = [c for c in chosen if c.door.startswith("mcp")]

        def model_worker(c):
            self.execute(c)
            if c.outcome == "refused" and not c.crossed:
                return self.isolate(c)
            return []

        def mcp_all():
            extra = []
            for c in mcp_cases:
                extra.extend(model_worker(c))
            return extra

        with ThreadPoolExecutor(max_workers=self.workers + 1) as pool:
            mcp_future = pool.submit(mcp_all)
            extras = list(pool.map(model_worker, model_cases))
            mcp_extra = mcp_future.result()
        self.cases = [c for c in chosen] + [p for ps in extras for p in ps] + mcp_extra
        self.fallback(model_worker)
        if self.random_n:
            self.run_random(specs)
        return self.cases

    def fallback(self, worker):
        """Paths planted only in cases refused for their shape (a maximal instance whose
        optional fields exclude each other): the cases the novelty filter left out that hold
        them, until each such path is judged somewhere or no case is left."""
        for rounds in range(6):
            judged = collections.defaultdict(set)
            only_structural = collections.defaultdict(set)
            for c in self.cases:
                if c.superseded or c.outcome in (None, "skipped"):
                    continue
                for n in c.inst["canaries"]:
                    p = self.registry.leaves[n - 1]["path"]
                    (only_structural if c.structural else judged)[(c.door, c.direction)].add(p)
            todo = []
            for key, paths in only_structural.items():
                missing = paths - judged[key]
                if not missing:
                    continue
                keep = []
                for entry in self.dropped[key]:
                    spec, framing, ti, variant, ps = entry
                    if ps & missing:
                        todo.append((spec, framing, ti, variant))
                        missing -= ps
                    else:
                        keep.append(entry)
                self.dropped[key] = keep
            if not todo:
                return
            new = []
            for spec, framing, ti, variant in todo:
                gen, fixed, prefix = self.generators[(spec["door"], spec["direction"], spec["family"], framing)]
                with self.gen_lock:
                    inst = gen.case(ti, variant, self.registry, fixed,
                                    case_prefix=f"{spec['family']}{' ' + framing if framing else ''}: ", prefix=prefix)
                if inst is not None:
                    new.append(Case(spec["door"], spec["direction"], spec["family"], inst,
                                    self.runner(spec, framing), framing))
            mcp = [c for c in new if c.door.startswith("mcp")]
            other = [c for c in new if not c.door.startswith("mcp")]
            with ThreadPoolExecutor(max_workers=self.workers) as pool:
                extras = list(pool.map(worker, other))
            for c in mcp:
                extras.append(worker(c))
            self.cases += new + [p for ps in extras for p in ps]

    def run_random(self, specs):
        """RAILYARD_ORACLE_RANDOM instances per type, random branches and optional properties,
        drawn by hypothesis (its `randoms()` strategy, so a run can be replayed by seed)."""
        from hypothesis import HealthCheck, Phase, given, seed, settings
        from hypothesis import strategies as st

        for spec in specs:
            if self.doors and spec["door"] not in self.doors:
                continue
            for framing in self.framings(spec):
                gen, fixed, prefix = self.generators[(spec["door"], spec["direction"], spec["family"], framing)]
                runner = self.runner(spec, framing)

                @seed(self.seed)
                @settings(max_examples=self.random_n, deadline=None, database=None, phases=[Phase.generate],
                          suppress_health_check=list(HealthCheck))
                @given(st.randoms(use_true_random=False), st.sampled_from(["all", "strings", "numbers"]))
                def one(rng, variant):
                    if self.deadline and time.time() > self.deadline:
                        return
                    inst = generate.random_instance(spec, self.registry, rng, variant, fixed=fixed,
                                                    case=f"{spec['family']} (random) #{variant}", prefix=prefix)
                    if not inst["canaries"]:
                        return
                    c = Case(spec["door"], spec["direction"], spec["family"], inst, runner, framing)
                    self.execute(c)
                    self.cases.append(c)

                one()

    # -- the report -----------------------------------------------------------------------------

    def summary(self):
        stats = {}
        crossings = {}
        planted_paths = collections.defaultdict(set)
        roots = set()
        for c in self.cases:
            if c.outcome not in (None, "skipped"):
                roots.add(f"{c.door} {c.direction} {c.root}")
            if c.superseded or c.outcome in (None, "skipped"):
                continue
            key = f"{c.door} {c.direction}"
            s = stats.setdefault(key, {"door": c.door, "direction": c.direction, "types": set(), "cases": 0,
                                       "planted": 0, "redacted": 0, "refused": 0, "crossed": 0, "errors": 0,
                                       "per_type": collections.Counter(), "kinds": collections.Counter(),
                                       "refusals": []})
            s["cases"] += 1
            if c.outcome in ("refused", "error") and len(s["refusals"]) < 40:
                s["refusals"].append(f"{c.inst['case']}: {c.note[:300]}")
            s["types"].add(f"{c.family}: {c.inst['label']}")
            if c.outcome == "error":
                s["errors"] += 1
            for n in c.inst["canaries"]:
                leaf = self.registry.leaves[n - 1]
                s["planted"] += 1
                s["per_type"][f"{c.family}: {c.inst['label']}"] += 1
                planted_paths[(c.door, c.direction)].add(leaf["path"])
                if n in c.crossed:
                    s["crossed"] += 1
                    s["kinds"][leaf["kind"]] += 1
                    k = (c.door, c.direction, leaf["path"])
                    e = crossings.setdefault(k, {"door": c.door, "direction": c.direction, "path": leaf["path"],
                                                 "kinds": set(), "examples": []})
                    e["kinds"].add(leaf["kind"])
                    if len(e["examples"]) < 2:
                        e["examples"].append({"case": c.inst["case"], "root": c.root, "value": leaf["value"],
                                              "n": n, "context": c.crossed[n]})
                elif c.outcome == "refused" or c.outcome == "error":
                    s["refused"] += 1
                else:
                    s["redacted"] += 1
        rows = []
        for key in sorted(stats):
            s = stats[key]
            types = len(s["types"])
            rows.append({"door": s["door"], "direction": s["direction"], "types": types, "cases": s["cases"],
                         "leaves_per_type": round(s["planted"] / types, 1) if types else 0,
                         "planted": s["planted"], "redacted": s["redacted"], "refused": s["refused"],
                         "crossed": s["crossed"], "errors": s["errors"],
                         "crossed_by_kind": dict(s["kinds"]), "refusals": s["refusals"],
                         "per_type": dict(sorted(s["per_type"].items()))})
        cross = sorted(({**e, "kinds": sorted(e["kinds"])} for e in crossings.values()),
                       key=lambda e: (e["door"], e["direction"], e["path"]))
        return {"rows": rows, "crossings": cross, "cases_run": sorted(roots),
                "planted_paths": {f"{d} {r}": sorted(p) for (d, r), p in planted_paths.items()}}


def table(summary) -> str:
    head = ["door", "direction", "types", "cases", "leaves/type", "planted", "redacted", "refused", "crossed"]
    rows = [[r["door"], r["direction"], r["types"], r["cases"], r["leaves_per_type"], r["planted"], r["redacted"],
             r["refused"], r["crossed"]] for r in summary["rows"]]
    tot = ["total", "", sum(r[2] for r in rows), sum(r[3] for r in rows), "",
           sum(r[5] for r in rows), sum(r[6] for r in rows), sum(r[7] for r in rows), sum(r[8] for r in rows)]
    rows.append(tot)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda r: "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |"
    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# The ledger of known crossings.


def pattern(p: str):
    return re.compile("^" + re.escape(p).replace(r"\*", ".*") + "$")


def compare(summary, known):
    entries = known.get("crossings", [])
    compiled = [(e, pattern(e["path"])) for e in entries]
    new = []
    matched = set()
    for c in summary["crossings"]:
        hit = False
        for i, (e, rx) in enumerate(compiled):
            if e["door"] == c["door"] and e["direction"] == c["direction"] and rx.match(c["path"]):
                matched.add(i)
                hit = True
        if not hit:
            new.append({k: c[k] for k in ("door", "direction", "path", "kinds", "examples")})
    # An entry is stale when the case it crossed in ran and nothing crossed at its path: a
    # bounded run judges only the entries of the cases it ran. An entry without a case (a
    # pattern written by hand) is stale when its path was planted and never crossed.
    ran = set(summary.get("cases_run", []))
    stale = []
    for i, (e, rx) in enumerate(compiled):
        if i in matched:
            continue
        if "case" in e:
            if f"{e['door']} {e['direction']} {e['case']}" in ran:
                stale.append(e)
            continue
        planted = summary["planted_paths"].get(f"{e['door']} {e['direction']}", [])
        if any(rx.match(p) for p in planted):
            stale.append(e)
    return new, stale


def ledger(summary, old=None) -> dict:
    """The ledger of this run's crossings; each keeps the `why` its entry had in `old` (what
    the crossing is, and why it is left: written by hand)."""
    why = {}
    for e in (old or {}).get("crossings", []):
        if "why" in e:
            why[(e["door"], e["direction"], e["path"])] = e["why"]
    crossings = []
    for c in summary["crossings"]:
        entry = {"door": c["door"], "direction": c["direction"], "path": c["path"],
                 "case": c["examples"][0]["root"]}
        reason = why.get((c["door"], c["direction"], c["path"]))
        if reason:
            entry["why"] = reason
        crossings.append(entry)
    return {"about": "Crossings the oracle (tests/oracle/run.py, issue #65) knows of: door, direction and the "
                     "JSON path of the leaf ('*' matches anything), a generated case it crossed in, and, "
                     "where it is left on purpose, why. tests/oracle.rs fails on a crossing not listed "
                     "here, and on an entry whose case ran and whose path no longer crosses: remove an "
                     "entry when its leak is fixed. Regenerate with run.py --write-known (a whole run; "
                     "each entry's why is kept).",
            "crossings": crossings}


# ---------------------------------------------------------------------------------------------


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_daemon(binary, port):
    """The daemon with the bundled config (its paths made absolute) and the oracle's servers."""
    policies = os.path.join(ROOT, "policies")
    text = open(os.path.join(policies, "railyard.toml")).read()
    text = text.replace('path = "../target/', f'path = "{ROOT}/target/')
    text = text.replace('keys_file = "keys.toml"', f'keys_file = "{os.path.join(policies, "keys.toml")}"')
    d = tempfile.mkdtemp(prefix="railyard-oracle-")
    path = os.path.join(d, "railyard.toml")
    with open(path, "w") as f:
        f.write(text + config_tail(port))
    proc = subprocess.Popen([binary, "serve", "--config", path, "--listen", "127.0.0.1:0",
                             "--backend", f"http://127.0.0.1:{port}/v1"],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "RAILYARD_LOG": "warn"})
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the daemon exited before listening")
        if line.startswith("railyard listening on http://"):
            return proc, line.strip().rsplit("/", 1)[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", help="HOST:PORT of a running daemon")
    ap.add_argument("--railyard", help="start this railyard binary with the bundled config")
    ap.add_argument("--port", type=int, help="the backend/upstream port (the daemon's --backend)")
    ap.add_argument("--key", default=KEY)
    ap.add_argument("--out", help="directory for summary.json and table.txt")
    ap.add_argument("--known", help="the ledger of known crossings (known.json)")
    ap.add_argument("--write-known", action="store_true", help="write the ledger from this run")
    ap.add_argument("--doors", help="comma-separated doors (chat,responses,messages,models,mcp-2025-11-25,...)")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--print-config", action="store_true")
    ap.add_argument("--list", action="store_true", help="list the generated cases and exit")
    ap.add_argument("--only", help="run only the cases whose name contains this, and print what crossed")
    args = ap.parse_args()

    env = os.environ
    budget = env.get("RAILYARD_ORACLE_BUDGET")
    budget = None if budget in (None, "", "all") else int(budget)
    seconds = float(env["RAILYARD_ORACLE_SECONDS"]) if env.get("RAILYARD_ORACLE_SECONDS") else None
    random_n = int(env.get("RAILYARD_ORACLE_RANDOM") or 0)
    seed_ = int(env.get("RAILYARD_ORACLE_SEED") or 0)

    port = args.port or free_port()
    if args.print_config:
        print(config_tail(port))
        return 0
    specs = schemas.load()
    doors = set(args.doors.split(",")) if args.doors else None
    if args.list:
        o = Oracle(None, doors=doors)
        groups = o.generate(specs)
        for k in sorted(groups):
            for c in groups[k]:
                print(k[0], k[1], c.inst["case"], len(c.inst["canaries"]))
        return 0

    serve(port)
    proc = None
    if args.daemon:
        addr = args.daemon
    elif args.railyard:
        proc, addr = start_daemon(args.railyard, port)
    else:
        ap.error("--daemon or --railyard")
    started = time.time()
    try:
        oracle = Oracle(Daemon(addr, args.key), budget=budget, seconds=seconds, workers=args.workers,
                        random_n=random_n, seed=seed_, doors=doors, only=args.only)
        oracle.run(specs)
        if args.only:
            for c in oracle.cases:
                print(f"== {c.door} {c.direction} {c.inst['case']}: {c.outcome}")
                print("   sent:", json.dumps(c.inst["value"])[:1500])
                print("   note:", c.note[:1500])
                for n, ctx in c.crossed.items():
                    print("   crossed:", oracle.registry.leaves[n - 1]["path"], "...", ctx)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
    summary = oracle.summary()
    summary["seconds"] = round(time.time() - started, 1)
    summary["budget"] = budget
    summary["table"] = table(summary)
    status = 0
    if args.known and not args.write_known:
        with open(args.known) as f:
            known = json.load(f)
        new, stale = compare(summary, known)
        summary["new"], summary["stale"] = new, stale
        status = 1 if new or stale else 0
    if args.write_known:
        path = args.known or os.path.join(HERE, "known.json")
        old = None
        if os.path.exists(path):
            with open(path) as f:
                old = json.load(f)
        with open(path, "w") as f:
            json.dump(ledger(summary, old), f, indent=1)
            f.write("\n")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        with open(os.path.join(args.out, "table.txt"), "w") as f:
            f.write(summary["table"] + "\n")
    print(summary["table"])
    print(f"{len(summary['crossings'])} crossed paths; {summary['seconds']} s")
    if "new" in summary:
        for e in summary["new"][:50]:
            print("NEW crossing:", e["door"], e["direction"], e["path"], e["examples"][0]["value"])
        for e in summary["stale"][:50]:
            print("STALE ledger entry (no longer crosses):", e["door"], e["direction"], e["path"])
    return status


if __name__ == "__main__":
    sys.exit(main())
