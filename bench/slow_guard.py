#!/usr/bin/env python3
"""A scripted Llama Guard that answers after a fixed delay, for bench/guard.sh.

An OpenAI-compatible chat endpoint (any POST path) answering `safe`, or `unsafe\\nS1` when the
request holds "bomb", after DELAY_MS (default 200), with keep-alive: asyncio, so a thousand
requests can wait on it at once. Usage: DELAY_MS=200 bench/slow_guard.py PORT
"""
import asyncio
import json
import os
import sys

DELAY = int(os.environ.get("DELAY_MS", "200")) / 1000


async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length) if length else b""
            await asyncio.sleep(DELAY)
            verdict = "unsafe\nS1" if b"bomb" in body else "safe"
            out = json.dumps({"id": "g", "object": "chat.completion", "created": 0, "model": "guard",
                              "choices": [{"index": 0, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": verdict}}]}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(len(out)).encode() + b"\r\n\r\n" + out)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]), backlog=4096)
    async with server:
        await server.serve_forever()


asyncio.run(main())
