#!/usr/bin/env python3
"""Soak (#20): the daemon at saturation for DURATION seconds with the bundled config, mixed
streaming and non-streaming chat (wrk), plus clients that disconnect in the middle of a stream.
The backend is a small asyncio server in this script: it answers at once, or streams 40 chunks
over ~200 ms, and counts the streams whose client (the daemon) went away before the end, i.e.
backend calls the daemon cancelled.

Reported every 10 s: the daemon's RSS, threads, open file descriptors and runtime tasks
(`railyard_runtime_tasks`). Passes when no request failed that was not the client's doing, the
backend saw every stream whose client disconnected cancelled, and RSS and tasks stay flat.

Usage: bench/soak.py [DURATION_S] [CONNECTIONS]   (default 600 s, 16 wrk connections; needs wrk,
installed with apt-get when missing, and target/release/railyard, built when missing)
"""
import asyncio
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from common import ROOT, ensure, serve

DURATION = int(sys.argv[1]) if len(sys.argv) > 1 else 600
CONNECTIONS = int(sys.argv[2]) if len(sys.argv) > 2 else 16
DISCONNECTORS = 4
KEY, ADMIN_KEY = "demo-key", "demo-admin-key"  # the bundled config's demo keys
CHUNKS = 40
SLOW_CHUNKS, PAUSE = 400, 0.002  # the streams clients walk away from: ~1 s long

stats = {"json": 0, "streams": 0, "streams_done": 0, "streams_cut": 0}


async def handle(reader, writer):
    streaming = False
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            body = json.loads(await reader.readexactly(length))
            if not body.get("stream"):
                stats["json"] += 1
                out = json.dumps({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "Sure, noted."},
                                               "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(out)).encode() + b"\r\n\r\n" + out)
                await writer.drain()
                continue
            stats["streams"] += 1
            streaming = True
            slow = "slow" in json.dumps(body["messages"])
            chunks, pause = (SLOW_CHUNKS, PAUSE) if slow else (CHUNKS, 0)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for i in range(chunks):
                event = json.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [
                    {"index": 0, "delta": {"content": f"part {i} of the answer, in plain words. "}, "finish_reason": None}]})
                data = f"data: {event}\n\n".encode()
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
                if writer.transport.is_closing():
                    raise ConnectionResetError
                if pause:
                    await asyncio.sleep(pause)
            end = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
            writer.write(f"{len(end):x}\r\n".encode() + end + b"\r\n0\r\n\r\n")
            await writer.drain()
            stats["streams_done"] += 1
            streaming = False
    except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError):
        if streaming:
            stats["streams_cut"] += 1
    finally:
        writer.close()


def backend(ready):
    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        ready.append(server.sockets[0].getsockname()[1])
        await server.serve_forever()
    asyncio.run(main())


def proc(pid):
    status = open(f"/proc/{pid}/status").read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
    return rss, threads, len(os.listdir(f"/proc/{pid}/fd"))


def tasks(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    text = c.getresponse().read().decode()
    statuses = {}
    for m in re.finditer(r'railyard_requests_total\{endpoint="/v1/chat/completions",tenant="[^"]*",status="(\d+)"\} (\d+)', text):
        statuses[m.group(1)] = statuses.get(m.group(1), 0) + int(m.group(2))
    return int(re.search(r"railyard_runtime_tasks (\d+)", text).group(1)), statuses


def disconnector(port, stop, counts):
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "tell me a slow story"}]})
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode()
    while not stop.is_set():
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(request)
        got = b""
        while got.count(b"data: ") < 3:
            part = s.recv(4096)
            if not part:
                break
            got += part
        s.close()  # in the middle of the stream
        counts["cut"] += 1


def main():
    ensure("wrk")
    ready = []
    threading.Thread(target=backend, args=(ready,), daemon=True).start()
    while not ready:
        time.sleep(0.05)
    d = tempfile.mkdtemp()
    daemon, port = serve(os.path.join(ROOT, "policies/railyard.toml"),
                         "--backend", f"http://127.0.0.1:{ready[0]}/v1")
    script = os.path.join(d, "mix.lua")
    plain = json.dumps({"model": "m", "messages": [{"role": "system", "content": "be brief"},
                        {"role": "user", "content": "my email is jane@example.com, note it please " * 8}]})
    streamed = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "count to forty"}]})
    with open(script, "w") as f:
        f.write(f"""
local n = 0
local headers = {{["Content-Type"] = "application/json", ["Authorization"] = "Bearer {KEY}"}}
local plain = {json.dumps(plain)}
local streamed = {json.dumps(streamed)}
request = function()
  n = n + 1
  if n % 4 == 0 then return wrk.format("POST", "/v1/chat/completions", headers, streamed) end
  return wrk.format("POST", "/v1/chat/completions", headers, plain)
end
""")
    idle = proc(daemon.pid), tasks(port)[0]
    print(f"idle: RSS {idle[0][0]:.1f} MB, threads {idle[0][1]}, fds {idle[0][2]}, tasks {idle[1]}", flush=True)
    wrk = subprocess.Popen(["wrk", "-t", "2", "-c", str(CONNECTIONS), "-d", f"{DURATION}s", "--timeout", "10s",
                            "-s", script, f"http://127.0.0.1:{port}/v1/chat/completions"],
                           stdout=subprocess.PIPE, text=True)
    stop, counts = threading.Event(), {"cut": 0}
    cutters = [threading.Thread(target=disconnector, args=(port, stop, counts)) for _ in range(DISCONNECTORS)]
    for t in cutters:
        t.start()
    samples = []
    started = time.time()
    print(f"{'t (s)':>6} {'RSS MB':>7} {'threads':>7} {'fds':>5} {'tasks':>6}", flush=True)
    while wrk.poll() is None:
        time.sleep(10)
        if wrk.poll() is not None:
            break
        rss, threads, fds = proc(daemon.pid)
        t, _ = tasks(port)
        samples.append((time.time() - started, rss, threads, fds, t))
        print(f"{samples[-1][0]:6.0f} {rss:7.1f} {threads:7d} {fds:5d} {t:6d}", flush=True)
    stop.set()
    for t in cutters:
        t.join()
    out = wrk.stdout.read()
    time.sleep(2)  # the last cut streams wind down
    after = proc(daemon.pid), tasks(port)
    daemon.terminate()
    daemon.wait()
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out)) else 0
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    sock_errors = sum(int(x) for x in sock.groups()) if sock else 0
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)
    statuses = after[1][1]
    print(f"\nwrk: {reqs} requests ({rps}/s, 1 in 4 streamed), non-2xx {non2xx}, socket errors {sock_errors}")
    print(f"clients that disconnected mid-stream: {counts['cut']}; daemon statuses on the chat door: {statuses}")
    print(f"backend: {stats['json']} answers, {stats['streams']} streams, {stats['streams_done']} finished, "
          f"{stats['streams_cut']} cut off by the daemon (backend call cancelled)")
    warm = [s for s in samples if s[0] >= 60] or samples
    rss = [s[1] for s in warm]
    tk = [s[4] for s in warm]
    print(f"RSS after warm-up: min {min(rss):.1f}, median {statistics.median(rss):.1f}, max {max(rss):.1f} MB; "
          f"runtime tasks: min {min(tk)}, median {statistics.median(tk):.0f}, max {max(tk)}; "
          f"after the load: RSS {after[0][0]:.1f} MB, tasks {after[1][0]} (idle {idle[1]}), fds {after[0][2]} (idle {idle[0][2]})")
    # Flat: the last third of the run holds no more than the first third (10%, and a few tasks:
    # in-flight requests come and go), and tasks stay within a few per connection.
    third = max(1, len(warm) // 3)
    first, last = warm[:third], warm[-third:]
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    flat = (med(last, 1) <= 1.10 * med(first, 1) and med(last, 4) <= 1.10 * med(first, 4) + 5
            and max(tk) <= 4 * (CONNECTIONS + DISCONNECTORS))
    cancelled = stats["streams_cut"] >= 0.95 * counts["cut"]
    # Idle pooled connections to the backend keep a task each until the pool drops them.
    settled = after[1][0] <= idle[1] + CONNECTIONS + DISCONNECTORS
    ok = non2xx == 0 and sock_errors == 0 and flat and cancelled and settled
    print("OK" if ok else f"FAILED (flat RSS {flat}, cancelled {cancelled}, tasks back to idle {settled})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
