#!/usr/bin/env python3
"""What a faulting plugin costs: time to the fail-closed answer, per fault kind.

Starts the release daemon (target/release/railyard, built by `cargo build --release`) with the
hostile test plugin (plugins/testing/hostile) fail-closed on the input rail, then sends
`/v1/check` requests over one keep-alive connection, each naming a misbehaviour, and prints the
p50/p99 time to the answer for each, next to a plugin that allows (the floor). Every answer is
checked: verdict block, with the expected fault kind.

Usage: bench/faults.py [requests-per-mode]   (default 200; slow modes are capped lower)
"""

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target/release/railyard")
PLUGIN = os.path.join(ROOT, "target/plugins/wasm32-wasip2/release/hostile.wasm")

# mode -> (fault kind, most requests: the slow ones burn their whole deadline or big verdicts)
MODES = [
    ("allow", None, None),
    ("panic", "trap", None),
    ("abort", "trap", None),
    ("unreachable", "trap", None),
    ("recursion", "trap", None),
    ("exit", "exit", None),
    ("bad-index", "invalid_verdict", None),
    ("many-edits", "verdict_too_large", None),
    ("huge-reason", "verdict_too_large", 20),
    ("huge-edit", "verdict_too_large", 20),
    ("many-rejections", "verdict_too_large", 20),
    ("log-flood", "output_flood", None),
    ("huge-log-line", "output_flood", 20),
    ("stderr-flood", "output_flood", None),
    ("sleep", "sleep", None),
    ("oom", "memory_cap", 20),
    ("loop", "deadline", 10),
]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    if not os.path.exists(BIN) or not os.path.exists(PLUGIN):
        sys.exit("build first: cargo build --release (it builds the test plugins too)")
    work = tempfile.mkdtemp()
    config = os.path.join(work, "railyard.toml")
    with open(config, "w") as f:
        f.write(
            f'[auth]\nopen = true\n\n[[plugins]]\nname = "hostile"\npath = "{PLUGIN}"\nrails = ["input"]\n'
            'on_error = "block"\ntimeout_ms = 500\nmemory_mb = 256\n'
        )
    daemon = subprocess.Popen(
        [BIN, "serve", "--config", config, "--listen", "127.0.0.1:0", "--no-watch",
         "--backend", "http://127.0.0.1:9/v1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env=dict(os.environ, RAILYARD_LOG="error"),
    )
    try:
        addr = None
        for line in daemon.stdout:
            if line.startswith("railyard listening on http://"):
                addr = line.strip().rsplit("/", 1)[1]
                break
        host, port = addr.split(":")
        conn = http.client.HTTPConnection(host, int(port))
        print(f"{os.cpu_count()} cores; {n} requests per mode (fewer where noted); "
              "time to the answer of POST /v1/check, fail closed")
        print(f"{'mode':<16} {'fault':<18} {'n':>4} {'p50_ms':>8} {'p99_ms':>8}")
        for mode, kind, cap in MODES:
            count = min(n, cap) if cap else n
            times = []
            for _ in range(count):
                body = json.dumps({"rail": "input",
                                   "messages": [{"role": "user", "content": mode}]})
                start = time.perf_counter()
                conn.request("POST", "/v1/check", body, {"Content-Type": "application/json"})
                reply = json.loads(conn.getresponse().read())
                times.append((time.perf_counter() - start) * 1000)
                got = reply["decisions"][0].get("fault")
                want_verdict = "allow" if kind is None else "block"
                if reply["verdict"] != want_verdict or got != kind:
                    sys.exit(f"{mode}: expected {want_verdict}/{kind}, got {reply}")
            times.sort()
            p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
            print(f"{mode:<16} {kind or '-':<18} {count:>4} "
                  f"{statistics.median(times):>8.3f} {p99:>8.3f}")
    finally:
        daemon.terminate()
        daemon.wait()


if __name__ == "__main__":
    main()
