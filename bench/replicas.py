#!/usr/bin/env python3
"""Statelessness on loopback (#20): three daemons behind nginx (the load balancer), sharing one
config directory laid out as Kubernetes mounts a ConfigMap (`railyard.toml -> ..data/...`,
`..data -> ..<timestamp>`). While clients keep sending through nginx, a new config is swapped in
the way the kubelet does it (a new timestamped directory, then `..data` renamed over). Measured:
when each replica starts deciding with the new config (the spread between the first and the last),
and every answer during the swaps. Then provenance: a tool-call id signed by one replica is
verified by the others (`[provenance] require = true`, one shared keyring).

Usage: bench/replicas.py [SWAPS] [CLIENTS]   (default 5 swaps, 8 clients; needs nginx, which it
installs with apt-get when missing, and target/release/railyard, which it builds when missing)
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from common import BIN, ROOT, ensure, serve

PLUGINS = os.path.join(ROOT, "target/plugins/wasm32-wasip2/release")
SWAPS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
CLIENTS = int(sys.argv[2]) if len(sys.argv) > 2 else 8
REPLICAS = 3
TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}]


def config(version):
    """The shared config; `version` only changes the refusal text (a new revision hash)."""
    plugin = lambda name, rails: (
        f'[[plugins]]\nname = "{name}"\npath = "{PLUGINS}/{name.replace("-", "_")}.wasm"\n'
        f"rails = {json.dumps(rails)}\n\n")
    return (f'[server]\nrefusal = "Refused (config v{version})."\n\n'
            '[auth]\nopen = true\n\n'
            '[provenance]\nkeys_file = "provenance-keys.toml"\nrequire = true\n\n'
            + plugin("normalise", ["tool_call"]) + plugin("allowlist", ["tools", "tool_call"])
            + plugin("schema-validator", ["tool_call", "tool_result"])
            + '[[plugins]]\nname = "pii"\npath = "' + PLUGINS + '/pii_filter.wasm"\n'
            'rails = ["input", "tool_result", "output"]\n')


def publish(conf, version, keyring):
    """Write a new timestamped directory and swap `..data` to it, as the kubelet does."""
    stamp = f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.monotonic_ns()}"
    os.mkdir(os.path.join(conf, stamp))
    with open(os.path.join(conf, stamp, "railyard.toml"), "w") as f:
        f.write(config(version))
    with open(os.path.join(conf, stamp, "provenance-keys.toml"), "w") as f:
        f.write(keyring)
    data = os.path.join(conf, "..data")
    old = os.readlink(data) if os.path.islink(data) else None
    os.symlink(stamp, os.path.join(conf, "..data_tmp"))
    os.rename(os.path.join(conf, "..data_tmp"), data)
    for name in ["railyard.toml", "provenance-keys.toml"]:
        link = os.path.join(conf, name)
        if not os.path.islink(link):
            os.symlink(os.path.join("..data", name), link)
    if old:
        shutil.rmtree(os.path.join(conf, old))


def post(conn, path, body, headers=None):
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **(headers or {})})
    r = conn.getresponse()
    return r.status, r.read()


def revision(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        _, body = post(c, "/v1/check", {"rail": "input", "messages": [{"role": "user", "content": "x"}]})
        return json.loads(body)["revision"]["hash"]
    finally:
        c.close()


def main():
    ensure("nginx", "nginx-light")
    procs = []
    with tempfile.TemporaryDirectory() as d:
        try:
            conf = os.path.join(d, "conf")
            os.mkdir(conf)
            keyring = f'[[keys]]\nid = "k1"\nsecret = "{os.urandom(32).hex()}"\n'
            publish(conf, 0, keyring)
            backend = subprocess.Popen([BIN, "demo-backend", "--listen", "127.0.0.1:0"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            procs.append(backend)
            backend_url = "http://" + backend.stdout.readline().decode().split("http://")[1].strip()
            ports = []
            for _ in range(REPLICAS):
                p, port = serve(os.path.join(conf, "railyard.toml"), "--backend", backend_url,
                                env={"RAILYARD_CACHE_DIR": os.path.join(d, "cache")})
                procs.append(p)
                ports.append(port)
            servers = "".join(f"    server 127.0.0.1:{p};\n" for p in ports)
            with open(os.path.join(d, "nginx.conf"), "w") as f:
                f.write(f"""worker_processes 1;
error_log stderr error;
pid {d}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  upstream railyard {{
{servers}    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:18090;
    location / {{
      proxy_pass http://railyard;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
""")
            nginx = subprocess.Popen(["nginx", "-p", d, "-c", os.path.join(d, "nginx.conf"),
                                      "-g", "daemon off;"])
            procs.append(nginx)
            time.sleep(0.5)

            # Clients through nginx, all the time.
            statuses, stop = {}, threading.Event()
            lock = threading.Lock()

            def client(i):
                conn = http.client.HTTPConnection("127.0.0.1", 18090, timeout=10)
                body = {"model": "m", "messages": [{"role": "user", "content": f"hello {i}, my email is a{i}@example.com"}]}
                while not stop.is_set():
                    try:
                        status, _ = post(conn, "/v1/chat/completions", body)
                    except Exception as e:  # a failed request is counted, never hidden
                        status = type(e).__name__
                        conn.close()
                        conn = http.client.HTTPConnection("127.0.0.1", 18090, timeout=10)
                    with lock:
                        statuses[status] = statuses.get(status, 0) + 1

            threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
            for t in threads:
                t.start()
            time.sleep(2)
            spreads, lasts = [], []
            for version in range(1, SWAPS + 1):
                before = [revision(p) for p in ports]
                assert len(set(before)) == 1, f"replicas disagree before swap {version}: {before}"
                t0 = time.perf_counter()
                publish(conf, version, keyring)
                seen = [None] * REPLICAS
                while None in seen:
                    for i, p in enumerate(ports):
                        if seen[i] is None and revision(p) != before[0]:
                            seen[i] = (time.perf_counter() - t0) * 1000
                    if time.perf_counter() - t0 > 30:
                        raise SystemExit(f"swap {version}: not every replica reloaded: {seen}")
                spreads.append(max(seen) - min(seen))
                lasts.append(max(seen))
                print(f"swap {version}: replicas reloaded after " +
                      ", ".join(f"{s:.0f}" for s in sorted(seen)) + " ms", flush=True)
                time.sleep(1)
            stop.set()
            for t in threads:
                t.join()
            total = sum(statuses.values())
            failed = total - statuses.get(200, 0)
            print(f"{SWAPS} swaps: spread (last replica - first) median {sorted(spreads)[len(spreads)//2]:.0f} ms, "
                  f"max {max(spreads):.0f} ms; swap to last replica max {max(lasts):.0f} ms")
            print(f"requests through nginx during the run: {total}, not 200: {failed} {statuses}")

            # Provenance: replica 1 signs a call; every replica verifies it; a forged id is refused.
            first = http.client.HTTPConnection("127.0.0.1", ports[0], timeout=10)
            _, body = post(first, "/v1/chat/completions", {
                "model": "m", "tools": TOOLS,
                "messages": [{"role": "user", "content": 'call get_time {"tz": "UTC"}'}]})
            call = json.loads(body)["choices"][0]["message"]["tool_calls"][0]
            history = lambda call_id: {"model": "m", "tools": TOOLS, "messages": [
                {"role": "user", "content": 'call get_time {"tz": "UTC"}'},
                {"role": "assistant", "content": None, "tool_calls": [dict(call, id=call_id)]},
                {"role": "tool", "tool_call_id": call_id, "content": "12:00"}]}
            verified = []
            for p in ports:
                c = http.client.HTTPConnection("127.0.0.1", p, timeout=10)
                status, body = post(c, "/v1/chat/completions", history(call["id"]))
                reply = json.loads(body)
                verified.append(status == 200 and "blocked" not in reply.get("railyard", {}))
                forged = call["id"][:-4] + ("AAAA" if not call["id"].endswith("AAAA") else "BBBB")
                status, body = post(c, "/v1/chat/completions", history(forged))
                refused = "blocked" in json.loads(body).get("railyard", {}) or status >= 400
                verified[-1] = verified[-1] and refused
            print(f"provenance: the id replica 1 signed verified, and a forged one refused, on "
                  f"{sum(verified)} of {REPLICAS} replicas")
            ok = failed == 0 and all(verified)
            print("OK" if ok else "FAILED")
            sys.exit(0 if ok else 1)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait()


if __name__ == "__main__":
    main()
