#!/usr/bin/env python3
"""Black-box fuzzing of the running daemon (#20): mutated request bodies (byte edits, JSON values
swapped for other types, keys dropped, arrays repeated, deep nesting, odd Unicode, truncation) to
every model door and the check API, streaming and not, with the bundled config and the built-in
demo backend. Passes when the daemon never crashes and never answers 500 (its own fault); 502/504
would be the backend's (the demo backend does not fail), 4xx is the caller's.

Usage: bench/fuzz_http.py [REQUESTS] [CLIENTS]   (default 100000 requests, 4 clients; needs
target/release/railyard, built when missing)
"""
import copy
import http.client
import json
import os
import random
import sys
import threading
import time

from common import ROOT, ensure, serve

TOTAL = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
CLIENTS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
KEY = "demo-key"  # the bundled config's demo key

TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}]
SEEDS = [
    ("/v1/chat/completions", {"model": "m", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "my email is jane@example.com, call get_time"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_time", "arguments": "{\"tz\": \"UTC\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"}], "tools": TOOLS}),
    ("/v1/chat/completions", {"model": "m", "stream": True, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "call get_time {\"tz\": \"UTC\"}"}]}],
        "tools": TOOLS}),
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hello"}]}),
    ("/v1/responses", {"model": "m", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "SSN 536-22-1234"}]},
        {"type": "function_call", "call_id": "c1", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "12:00"}],
        "tools": [{"type": "function", "name": "get_time", "parameters": {"type": "object"}}]}),
    ("/v1/responses", {"model": "m", "stream": True, "input": "hi there"}),
    ("/v1/messages", {"model": "claude", "max_tokens": 50, "system": "be brief", "messages": [
        {"role": "user", "content": "time?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_time",
                                           "input": {"tz": "UTC"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "12:00"}]}],
        "tools": [{"name": "get_time", "input_schema": {"type": "object"}}]}),
    ("/v1/messages", {"model": "claude", "max_tokens": 50, "stream": True,
                      "messages": [{"role": "user", "content": "hello"}]}),
    ("/v1/check", {"rail": "tool_call", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
            "function": {"name": "rm_rf", "arguments": "{}"}}]}]}),
    ("/v1/check", {"rail": "input", "messages": [{"role": "user", "content": "4111 1111 1111 1111"}]}),
]
ODD = [None, True, False, 0, -1, 1e308, 2**64, "", "x" * 5000, "\u0000", "\ud83d\ude00", "é",
       [], {}, [None], {"": None}, "[DONE]", "data: x\n\n", {"type": "text"}]


def mutate_json(rng, value, depth=0):
    """Swap, drop or repeat something somewhere in `value`."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        op = rng.random()
        if op < 0.25:
            del value[key]
        elif op < 0.5:
            value[key] = copy.deepcopy(rng.choice(ODD))
        elif op < 0.6:
            value[rng.choice(["type", "role", "content", "id", "name", "arguments", "input",
                              "tool_calls", "stream", "railyard", "tools"])] = copy.deepcopy(rng.choice(ODD + [value[key]]))
        else:
            value[key] = mutate_json(rng, value[key], depth + 1)
        return value
    if isinstance(value, list) and value and rng.random() < 0.8:
        i = rng.randrange(len(value))
        op = rng.random()
        if op < 0.2:
            value.insert(i, copy.deepcopy(value[i]))
        elif op < 0.35:
            del value[i]
        elif op < 0.45:
            value[i] = copy.deepcopy(rng.choice(ODD))
        else:
            value[i] = mutate_json(rng, value[i], depth + 1)
        return value
    return copy.deepcopy(rng.choice(ODD))


def mutate_bytes(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if not data:
            break
        i = rng.randrange(len(data))
        if op < 0.3:
            data[i] ^= 1 << rng.randrange(8)
        elif op < 0.5:
            del data[i:i + rng.randint(1, 16)]
        elif op < 0.7:
            data[i:i] = rng.choice([b"{", b"}", b"[", b"]", b"\"", b",", b":", b"\\", b"\xff",
                                    b"\xc3", b"\\u0000", b"null", b"1e999"])
        elif op < 0.85:
            data = data[:i]
        else:
            data[i:i] = data[i:i + rng.randint(1, 64)]
    return bytes(data)


def body(rng):
    path, seed = rng.choice(SEEDS)
    value = copy.deepcopy(seed)
    for _ in range(rng.randint(1, 3)):
        value = mutate_json(rng, value)
    data = json.dumps(value).encode()
    if rng.random() < 0.03 and data.startswith(b"{"):
        # Deep nesting, written as text (too deep for Python's encoder).
        n = rng.choice([64, 128, 1000, 100000])
        data = b'{"deep": ' + b"[" * n + b"]" * n + b", " + data[1:]
    if rng.random() < 0.3:
        data = mutate_bytes(rng, data)
    return path, data


def main():
    ensure()
    daemon, port = serve(os.path.join(ROOT, "policies/railyard.toml"), "--demo-backend",
                         env={"RAILYARD_LOG": "error"})
    statuses, faults, lock = {}, [], threading.Lock()
    per_client = TOTAL // CLIENTS
    started = time.time()

    died = []

    def client(n):
        try:
            run_client(n)
        except Exception as e:  # the fuzzer's own bug: the run does not count
            died.append(repr(e))

    def run_client(n):
        rng = random.Random(n)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(per_client):
            path, data = body(rng)
            try:
                conn.request("POST", path, data, {"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {KEY}"})
                r = conn.getresponse()
                text = r.read()
                status = r.status
                if r.getheader("connection", "").lower() == "close":
                    conn.close()
            except Exception as e:  # a broken connection is a finding, not noise
                status = f"error:{type(e).__name__}"
                text = b""
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                if status == 500 or isinstance(status, str):
                    faults.append((path, data[:300], status, text[:300]))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - started
    alive = daemon.poll() is None
    if alive:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/healthz")
        alive = c.getresponse().status == 200
    daemon.terminate()
    daemon.wait()
    total = sum(statuses.values())
    print(f"{total} mutated requests in {elapsed:.0f} s ({total / elapsed:.0f}/s), {CLIENTS} clients")
    print("statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items(), key=str)))
    print(f"daemon alive and healthy afterwards: {alive}")
    for f in faults[:10]:
        print("FAULT", f)
    for d in died:
        print("CLIENT DIED", d)
    ok = alive and not faults and not died and total == per_client * CLIENTS
    print("OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
