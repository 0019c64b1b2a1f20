#!/usr/bin/env python3
"""One plugin's builds compared in the same run (#67): a daemon per build, each with the plugin
alone as `bench/flow_cost.py` configures it, asked in turn, round after round, so that the
machine's drift between runs falls on every build alike. Reports each build's median of its
rounds' p50 `duration_us`, and its ratio to the first build's.

Usage: [RAILYARD_BIN=...] [KIND=flow|pii] [TARGET=url] bench/plugin_ab.py ROUNDS NAME=WASM...
KIND=flow: flow on `tool_call` after 20 untrusted results of ~1 KB (flow_cost.py's conversation);
KIND=pii: reversible pii on `tool_result` over the same results (its memo answering each;
MEMO=0: none, every result scanned, as in a new conversation).
TARGET: the privileged call's URL (a page's, `https://site7.example/docs/1`, is refused).
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
import flow_cost  # noqa: E402

PER_ROUND = 200


def main():
    rounds = int(sys.argv[1])
    builds = [a.split("=", 1) for a in sys.argv[2:]]
    common.BIN = os.environ.get("RAILYARD_BIN", common.BIN)
    common.ensure()
    flow = os.environ.get("KIND", "flow") == "flow"
    messages = flow_cost.conversation(random.Random(7), 20,
                                      os.environ.get("TARGET", "https://notes.example.com/inbox"))
    body = json.dumps({"rail": "tool_call" if flow else "tool_result",
                       "messages": messages if flow else messages[:-1]}).encode()
    served, configs = {}, []
    try:
        for name, wasm in builds:
            cfg = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
            cfg.write(flow_cost.HEAD + (flow_cost.flow_entry(wasm, asks=True) if flow else
                                        flow_cost.pii_entry(wasm, os.environ.get("MEMO") != "0")))
            cfg.close()
            configs.append(cfg.name)
            served[name] = common.serve(cfg.name)

        def one(port):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/check", data=body,
                                         headers={"content-type": "application/json"})
            return json.load(urllib.request.urlopen(req))["decisions"][0]["duration_us"]

        for _, port in served.values():
            for _ in range(PER_ROUND):
                one(port)  # warm the instances
        p50s = {name: [] for name, _ in builds}
        for _ in range(rounds):
            for name, (_, port) in served.items():
                p50s[name].append(statistics.median(one(port) for _ in range(PER_ROUND)))
        first = statistics.median(p50s[builds[0][0]])
        for name, v in p50s.items():
            m = statistics.median(v)
            print(f"{name:10} median of p50s {m:6.1f} µs  ratio {m / first:5.2f}  rounds {sorted(v)}")
    finally:
        for proc, _ in served.values():
            proc.terminate()
        for c in configs:
            os.unlink(c)


if __name__ == "__main__":
    main()
