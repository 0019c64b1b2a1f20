#!/usr/bin/env python3
"""Plugin time of `flow` (values mode) on long agent conversations (#49): a conversation of N
untrusted tool results (web pages of ~1 KB with links, addresses and numbers), then a privileged
call, judged through the running daemon's check API on the `tool_call` rail with `flow` alone.
Reports the plugin's own duration (the daemon's `duration_us` for it) over many requests: p50,
p90, p99, for a call that passes (every value compared, no early exit) and one refused, with
the same conversation each time (as an agent loop resends it) and with a new one each time.

Usage: [RAILYARD_BIN=...] [FLOW_WASM=...] [APPROVALS=1] [ASKS=1] [PII=1] bench/flow_cost.py
       [results=20] [requests=400]
FLOW_WASM, PII_WASM: another build of either plugin (a baseline); ASKS=1: `asks` sorts send_message as `send`.
Each entry as `policies/railyard.toml` has it (`declared_tools = false`; pii's
`history = false`: on `tool_call` it is given the call alone).
PII=1: `pii` too, reversible (granted the vault), as the bundled config runs it (#67): it
judges every tool result on the `tool_result` rail (a resent result answered from its memo,
its values hidden in the request's vault again), then the call after flow on `tool_call`; the
figure is the sum of both plugins' durations over both rails. PII_MEMO=0: pii's memo off
(`memo_kib = 0`, every result scanned each turn, as reversible redaction did before it kept a
memo): the baseline for the memo, in the same run.
With APPROVALS=1 the entry is granted approvals and the value rule asks for one (`actions = {
value = "approve" }`): flow then runs on the engine that waits, and a refused call asks the
state store (in memory) about its approval.
"""
import json
import os
import random
import statistics
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

WORDS = ("the release notes cover fixes to the parser and a faster build while the team "
         "reviewed security reports from users and partners across regions during the quarter "
         "with more details in the changelog").split()


def page(rng, i):
    words = [rng.choice(WORDS) for _ in range(150)]
    for at, token in [(20, f"https://site{i}.example/docs/{rng.randrange(10**6)}"),
                      (60, f"contact{i}@vendor{i}.example"),
                      (100, f"+1 (555) {rng.randrange(100, 999)}-{rng.randrange(1000, 9999)}"),
                      (130, f"invoice INV-{rng.randrange(10**7)}")]:
        words.insert(at, token)
    return " ".join(words)


def conversation(rng, results, target):
    messages = [{"role": "system", "content": "You are a research assistant."},
                {"role": "user", "content": "Read the pages and post a summary to "
                                            "https://notes.example.com/inbox"}]
    for i in range(results):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "web_fetch", "arguments": json.dumps({"url": f"https://site{i}.example/"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": page(rng, i)})
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": "r", "type": "function", "function": {"name": "send_message", "arguments": json.dumps(
            {"url": target, "text": "A summary of the release notes and the security reports."})}}]})
    return messages


HEAD = '[auth]\nopen = true\n[backend]\nurl = "http://127.0.0.1:9/v1"\n'


def flow_entry(wasm, mode="values", asks=False, approvals=False):
    """flow's entry: `web_fetch` untrusted, `send_message` privileged. `asks`: the kinds of
    action too (#67), as the bundled config sorts its tools; `approvals`: granted them, the
    value rule asking for one."""
    grant = "approvals = true\n" if approvals else ""
    actions = ', actions = { value = "approve" }' if approvals else ""
    kinds = ', asks = { send = { tools = ["send_message"] } }' if asks else ""
    return f"""[[plugins]]
name = "flow"
path = "{wasm}"
rails = ["tool_call"]
declared_tools = false
{grant}config = {{ mode = "{mode}", untrusted = ["web_fetch"], privileged = ["send_message"]{actions}{kinds} }}
"""


def pii_entry(wasm, memo=True):
    """pii's entry as the bundled config has it, reversible; `memo=False`: `memo_kib = 0`."""
    kib = "" if memo else "memo_kib = 0, "
    return f"""[[plugins]]
name = "pii"
path = "{wasm}"
rails = ["tool_result", "tool_call"]
history = false
declared_tools = false
vault = true
config = {{ reversible = true, {kib}arguments = {{ "send_email.to" = {{ EMAIL = "allow" }} }} }}
"""


def main():
    results = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    requests = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    common.BIN = os.environ.get("RAILYARD_BIN", common.BIN)
    common.ensure()
    wasm = os.environ.get("FLOW_WASM") or os.path.join(
        common.ROOT, "target/plugins/wasm32-wasip2/release/flow.wasm")
    approvals = os.environ.get("APPROVALS") == "1"
    pii = os.environ.get("PII") == "1"
    config = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    config.write(HEAD + flow_entry(wasm, os.environ.get("MODE", "values"),
                                   os.environ.get("ASKS") == "1", approvals))
    if pii:
        config.write(pii_entry(os.environ.get("PII_WASM") or os.path.join(
            common.ROOT, "target/plugins/wasm32-wasip2/release/pii_filter.wasm"),
            os.environ.get("PII_MEMO") != "0"))
    config.close()
    proc, port = common.serve(config.name)
    try:
        def check(rail, messages):
            body = json.dumps({"rail": rail, "messages": messages}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/check", data=body,
                                         headers={"content-type": "application/json"})
            return json.load(urllib.request.urlopen(req))["decisions"]

        def judge(messages, parts):
            steps = [("tool_call", s) for s in check("tool_call", messages)]
            verdict = next(s["verdict"] for _, s in steps if s["plugin"] == "flow")
            if pii:
                steps += [("tool_result", s) for s in check("tool_result", messages[:-1])]
            for rail, s in steps:
                parts.setdefault(f"{s['plugin']} on {rail}", []).append(s["duration_us"])
            return verdict, sum(s["duration_us"] for _, s in steps)

        rng = random.Random(7)
        no_memo = os.environ.get("PII_MEMO") == "0"
        print(f"flow, values mode{', approvals' if approvals else ''}{(', pii' + (' (no memo)' if no_memo else '')) if pii else ''}: {results} untrusted "
              f"results of ~1 KB, then one privileged call; {requests} requests each")
        print(f"{'case':44} {'verdict':8} {'p50 µs':>8} {'p90 µs':>8} {'p99 µs':>8}")
        for name, target, fresh in [
            ("the user's URL, same conversation", "https://notes.example.com/inbox", False),
            ("the user's URL, a new conversation", "https://notes.example.com/inbox", True),
            ("a page's URL, same conversation", "https://site7.example/docs/1", False),
        ]:
            fixed = conversation(rng, results, target)
            for _ in range(20):
                judge(fixed, {})  # warm the instances
            times, verdicts, parts = [], set(), {}
            for _ in range(requests):
                verdict, us = judge(conversation(rng, results, target) if fresh else fixed, parts)
                times.append(us)
                verdicts.add(verdict)
            q = statistics.quantiles(times, n=100)
            # Each plugin's p50 on each rail: where the sum goes.
            each = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in parts.items())
            print(f"{name:44} {'/'.join(sorted(verdicts)):8} {statistics.median(times):8.0f} "
                  f"{q[89]:8.0f} {q[98]:8.0f}   ({each})")
    finally:
        proc.terminate()
        os.unlink(config.name)


if __name__ == "__main__":
    main()
