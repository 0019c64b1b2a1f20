#!/usr/bin/env python3
"""Hot-reload latency: time from a file write (rename over the plugin) to the first request
decided by the new policy set, warm (component already compiled and cached) and cold (a
component this daemon's cache has never seen, so it is compiled with Cranelift).

Usage: bench/reload.py [RAILYARD_BINARY]   (default target/release/railyard; build it first)
"""
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/railyard")
PLUGINS = os.path.join(ROOT, "target/plugins/wasm32-wasip2/release")
BODY = json.dumps({"rail": "input", "messages": [{"role": "user", "content": "hi"}]})


def check(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", "/v1/check", BODY, {"Content-Type": "application/json"})
    r = json.loads(c.getresponse().read())
    c.close()
    return r["verdict"], r["revision"]["number"]


def start(workdir, cache, plugin):
    shutil.copy(os.path.join(PLUGINS, plugin), os.path.join(workdir, "gate.wasm"))
    with open(os.path.join(workdir, "railyard.toml"), "w") as f:
        # no `rails`: each plugin runs on the rails it declares
        f.write('[auth]\nopen = true\n\n[[plugins]]\nname = "gate"\npath = "gate.wasm"\n')
    env = dict(os.environ, RAILYARD_CACHE_DIR=cache, RAILYARD_LOG="warn")
    p = subprocess.Popen([BIN, "serve", "--config", os.path.join(workdir, "railyard.toml"),
                          "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:9/v1"],
                         stdout=subprocess.PIPE, env=env)
    port = int(p.stdout.readline().decode().rsplit(":", 1)[1])
    return p, port


def swap(workdir, port, plugin):
    """Rename a new plugin over gate.wasm; return ms until the new set decides."""
    before = check(port)[1]
    tmp = os.path.join(workdir, "gate.wasm.tmp")
    shutil.copy(os.path.join(PLUGINS, plugin), tmp)
    t0 = time.perf_counter()
    os.rename(tmp, os.path.join(workdir, "gate.wasm"))
    while check(port)[1] == before:
        pass
    return (time.perf_counter() - t0) * 1000


def main():
    warm, cold = [], {}
    with tempfile.TemporaryDirectory() as d:
        cache = os.path.join(d, "cache")
        p, port = start(d, cache, "allow_all.wasm")
        try:
            swap(d, port, "block_all.wasm")  # compile both once
            for i in range(10):
                warm.append(swap(d, port, "allow_all.wasm" if i % 2 == 0 else "block_all.wasm"))
        finally:
            p.terminate()
            p.wait()
    for plugin in ["pii_filter.wasm", "schema_validator.wasm"]:
        cold[plugin] = []
        for _ in range(3):
            with tempfile.TemporaryDirectory() as d:
                p, port = start(d, os.path.join(d, "fresh-cache"), "allow_all.wasm")
                try:
                    # both accept the empty config, like allow_all
                    cold[plugin].append(swap(d, port, plugin))
                finally:
                    p.terminate()
                    p.wait()
    print(f"warm (cached component), {len(warm)} swaps: median {statistics.median(warm):.0f} ms, "
          f"max {max(warm):.0f} ms (includes the {100} ms debounce)")
    for plugin, xs in cold.items():
        print(f"cold {plugin} ({os.path.getsize(os.path.join(PLUGINS, plugin)) // 1024} KiB), "
              f"{len(xs)} swaps: median {statistics.median(xs):.0f} ms, max {max(xs):.0f} ms")


if __name__ == "__main__":
    main()
