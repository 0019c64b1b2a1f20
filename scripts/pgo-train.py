"""The training run of scripts/pgo-build.sh: traffic of every kind the data plane serves, sent to
an instrumented daemon (the bundled config, the demo model as its backend) so that the compiler
learns which code is hot. Usage: pgo-train.py RAILYARD_BINARY PROFILE_DIR [ROUNDS]

The daemon writes its profile into PROFILE_DIR when it exits (SIGTERM, as in production); the
demo model, a second process of the same binary, writes its own elsewhere, so that only the
daemon's code is trained.

The mix is generated here with a fixed seed, not taken from the benchmarks: conversations of
varied length and content (prose, emails, phone numbers, card numbers, keys, non-ASCII text), tool
requests, tool results, streamed and whole replies on every model door, the check API, the
tenants' keys (so the JavaScript and Python plugins run too) and some malformed bodies. Every
answer is read; an answer that is not the expected kind stops the run, so a broken build is not
trained on error paths alone."""
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading

BIN, PROFILES = sys.argv[1], os.path.abspath(sys.argv[2])
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 400
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = ["demo-key"] * 6 + ["demo-support-key", "demo-payments-key"]

WORDS = ("the report figures review please before friday quarterly numbers team meeting "
         "schedule invoice customer order shipped delayed weather forecast city update "
         "Müller café naïve 東京 データ").split()
VALUES = ["jane.doe@example.com", "+1 415 555 0132", "4111 1111 1111 1111", "536-22-1234",
          "AKIAIOSFODNN7EXAMPLE", "192.168.10.23", "DE89 3704 0044 0532 0130 00",
          "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"]


def prose(rng, n):
    words = [rng.choice(WORDS) for _ in range(n)]
    if rng.random() < 0.4:
        words.insert(rng.randrange(len(words) + 1), rng.choice(VALUES))
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def conversation(rng):
    messages = [{"role": "system", "content": "You are a helpful assistant."}]
    for i in range(rng.choice([1, 1, 3, 5, 9])):
        messages.append({"role": "user" if i % 2 == 0 else "assistant",
                         "content": prose(rng, rng.randint(5, 60))})
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": prose(rng, 10)})
    return messages


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 14}},
                    "required": ["city"]}}},
    {"type": "function", "function": {"name": "search_docs", "description": "Search the docs",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                    "required": ["query"]}}},
    {"type": "function", "function": {"name": "refund", "description": "Refund an order",
     "parameters": {"type": "object", "properties": {"order": {"type": "string"},
                    "amount": {"type": "number"}}}}},
]


def tool_request(rng):
    name, args = rng.choice([("get_weather", {"city": "Oslo", "days": rng.randint(1, 20)}),
                             ("get_weather", {"city": "Paris", "days": "3"}),
                             ("search_docs", {"query": prose(rng, 4)}),
                             ("refund", {"order": "A1", "amount": rng.choice([20, 900])}),
                             ("delete_database", {})])
    messages = conversation(rng)
    messages[-1] = {"role": "user", "content": f"call {name} {json.dumps(args)}"}
    return {"model": "demo", "messages": messages, "tools": rng.sample(TOOLS, rng.randint(1, 3))}


def tool_result(rng):
    messages = conversation(rng)
    messages.append({"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]})
    messages.append({"role": "tool", "tool_call_id": "call_1", "content": prose(rng, 20)})
    return {"model": "demo", "messages": messages, "tools": TOOLS[:1]}


def request(rng):
    """(path, body bytes, whether a 2xx answer is required)"""
    kind = rng.choices(["chat", "tools", "result", "responses", "messages", "check", "bad"],
                       [40, 20, 8, 10, 10, 8, 4])[0]
    stream = rng.random() < 0.25
    if kind == "chat":
        body = {"model": "demo", "messages": conversation(rng), "stream": stream}
    elif kind == "tools":
        body = dict(tool_request(rng), stream=stream)
    elif kind == "result":
        body = tool_result(rng)
    elif kind == "responses":
        turns = conversation(rng)[1:]
        body = {"model": "demo", "instructions": "Be brief.", "stream": stream,
                "input": turns if rng.random() < 0.7 else turns[-1]["content"]}
        return "/v1/responses", json.dumps(body).encode(), True
    elif kind == "messages":
        body = {"model": "demo", "max_tokens": 256, "system": "Be brief.", "stream": stream,
                "messages": conversation(rng)[1:]}
        return "/v1/messages", json.dumps(body).encode(), True
    elif kind == "check":
        body = {"rail": rng.choice(["input", "output"]), "messages": conversation(rng)}
        return "/v1/check", json.dumps(body).encode(), True
    else:
        return "/v1/chat/completions", rng.choice(
            [b"{", b"[]", b'{"model": "demo", "messages": 3}', b"\xff\xfe"]), False
    return "/v1/chat/completions", json.dumps(body).encode(), True


def worker(seed, failures):
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    for _ in range(ROUNDS):
        path, body, must_succeed = request(rng)
        key = rng.choice(KEYS)
        conn.request("POST", path, body, {"Authorization": f"Bearer {key}",
                                          "Content-Type": "application/json",
                                          "anthropic-version": "2023-06-01"})
        answer = conn.getresponse()
        answer.read()
        ok = answer.status < 300 if must_succeed else 400 <= answer.status < 500
        # Tenants' limits may answer 429 under this load; anything else is a broken build.
        if not ok and answer.status != 429:
            failures.append(f"{path} with {key}: HTTP {answer.status}")
            return


def start(args, profile, announces, log):
    """A process of BIN writing its profile to `profile`, logging at `log` (None: its default); it
    and the port it announces."""
    env = dict(os.environ, LLVM_PROFILE_FILE=profile)
    env.pop("RAILYARD_LOG", None)
    if log:
        env["RAILYARD_LOG"] = log
    p = subprocess.Popen([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    while True:
        line = p.stdout.readline().decode()
        if not line:
            sys.exit(f"{BIN} {args[0]} did not start")
        if line.startswith(announces):
            return p, int(line.strip().removesuffix("/v1").rsplit(":", 1)[1])


scratch = tempfile.mkdtemp()
backend, backend_port = start(["demo-backend", "--listen", "127.0.0.1:0"],
                              os.path.join(scratch, "backend-%p.profraw"), "demo backend listening",
                              "warn")
# The daemon logs as `serve` does by default: a decision record per request, written as it is off
# a terminal (stderr discarded), a path every request takes.
daemon, PORT = start(["serve", "--config", os.path.join(ROOT, "policies/railyard.toml"),
                      "--listen", "127.0.0.1:0", "--no-watch",
                      "--backend", f"http://127.0.0.1:{backend_port}/v1"],
                     os.path.join(PROFILES, "railyard-%p-%m.profraw"), "railyard listening on",
                     None)
failures = []
threads = [threading.Thread(target=worker, args=(seed, failures)) for seed in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
daemon.send_signal(signal.SIGTERM)
backend.kill()
if daemon.wait(timeout=60) != 0:
    failures.append(f"the daemon exited with {daemon.returncode}")
if failures:
    sys.exit("training run failed: " + "; ".join(failures[:5]))
print(f"trained on {8 * ROUNDS} requests")
