#!/usr/bin/env bash
# Instructions and heap allocations per request of the daemon, counted by valgrind's callgrind:
# the measure that resolves a change of a few percent. CPU time per request (bench/cpu.sh) moves by ±5 % between
# two runs of the very same binary on a shared VM (BENCHMARKS.md §28); instruction counts repeat
# within ~1 %. They are not time: copies (`rep movsb`) count per byte, cache misses not at all,
# and SHA-256 runs without the CPU's SHA extensions under valgrind. Compare builds with them,
# and place the result against nginx with bench/cpu.sh.
#
# The daemon runs the bundled config with one worker (so one thread serves every request),
# decision records as `serve` writes them by default (RAILYARD_LOG=info; `warn` for none), in
# front of the demo backend. For each request (bench/requests.py's bodies): WARM requests, then
# counting on for N requests on one keep-alive connection, then the total divided by N.
#
# Usage: [RAILYARD_BIN=...] [RAILYARD_CONFIG=...] [REQUESTS="chat tools stream"] [N=300] [WARM=50]
#        [RAILYARD_LOG=info] [VARY=1] [CONSOLE=1] [OUT=dir] bench/instructions.sh
# RAILYARD_CONFIG (default the bundled one): for an older build, its own checkout's config, so
# that it loads the plugins built with it.
# VARY=1 numbers every message's text anew on every request (no text is ever seen twice, not
# even within a request, where bench/requests.py's conversation repeats one message), where
# by default each request sends the same conversation again, as a client does turn after turn.
# CONSOLE=1 keeps a console's live decisions stream (`GET /v1/admin/decisions`, read by curl)
# open while the requests are counted: the daemon's cost of streaming each record.
# OUT keeps the callgrind files (callgrind_annotate --inclusive=yes OUT/<request>.out), and with
# them the perf map of the plugins' compiled code (OUT/<request>.map, address size name) for
# naming the addresses callgrind shows as `???`.
set -euo pipefail
cd "$(dirname "$0")/.."
requests="${REQUESTS:-chat tools}"
n="${N:-300}"
warm="${WARM:-50}"
if ! command -v valgrind >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get install -y -q valgrind >/dev/null
    else
        echo "needs valgrind: apt-get install -y valgrind" >&2
        exit 2
    fi
fi
cargo build --release -q
demo=target/release/railyard
bin="${RAILYARD_BIN:-$demo}"
work=$(mktemp -d)
out="${OUT:-$work}"
mkdir -p "$out"
# The config's plugin paths are relative to its directory: the one-worker copy sits beside it.
source_config="${RAILYARD_CONFIG:-policies/railyard.toml}"
config="$(dirname "$source_config")/.instructions-$$.toml"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work" "$config"' EXIT
sed 's/^workers = .*/workers = 1/' "$source_config" >"$config"
grep -q '^workers = 1' "$config" || { echo "the bundled config sets no workers" >&2; exit 1; }

$demo demo-backend --listen 127.0.0.1:19130 >/dev/null &
python3 bench/requests.py "$work"

# Heap blocks the daemon asked for over the counted requests: calls into mimalloc's allocating
# entry points (alloc.rs calls them; a realloc counts, it may move), from callgrind's call
# counts. The plugins' allocations are in their own linear memory and not among them.
allocations() { # callgrind file -> calls
    callgrind_annotate --tree=caller "$1" 2>/dev/null | python3 -c '
import re, sys
entry = re.compile(r"\*  \S*?:mi_(malloc|zalloc|realloc)(_aligned)? \[")
calls = 0
for block in sys.stdin.read().split("\n\n"):
    if entry.search(block):
        calls += sum(int(c.replace(",", "")) for c in re.findall(r"< .* \(([0-9,]+)x\)", block))
print(calls)'
}

printf '%-8s %12s %12s %10s\n' request instructions allocations requests
for r in $requests; do
    RAILYARD_PERFMAP=1 RAILYARD_LOG="${RAILYARD_LOG:-info}" valgrind --tool=callgrind \
        --instr-atstart=no --callgrind-out-file="$work/cg.%p" \
        "$bin" serve --config "$config" --listen 127.0.0.1:19131 \
        --backend http://127.0.0.1:19130/v1 --no-watch >/dev/null 2>"$work/$r.log" &
    pid=$!
    for _ in $(seq 600); do
        curl -sf -o /dev/null http://127.0.0.1:19131/healthz && break
        kill -0 "$pid" 2>/dev/null || { cat "$work/$r.log" >&2; exit 1; }
        sleep 0.5
    done
    if [ -n "${CONSOLE:-}" ]; then
        curl -sN -H 'Authorization: Bearer demo-admin-key' \
            http://127.0.0.1:19131/v1/admin/decisions >"$work/$r.decisions" &
        sleep 1
    fi
    VARY="${VARY:-}" python3 - "$work/$r.json" "$warm" "$n" "$pid" <<'PY'
import http.client, json, os, subprocess, sys
body, warm, n, pid = open(sys.argv[1], "rb").read(), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
conn = http.client.HTTPConnection("127.0.0.1", 19131)
sent = 0
def varied():
    doc = json.loads(body)
    for i, m in enumerate(doc["messages"]):
        if isinstance(m.get("content"), str):
            m["content"] = f"{sent}.{i} {m['content']}"
    return json.dumps(doc).encode()
def one():
    global sent
    sent += 1
    conn.request("POST", "/v1/chat/completions", varied() if os.environ["VARY"] else body,
                 {"Content-Type": "application/json", "Authorization": "Bearer demo-key"})
    reply = conn.getresponse()
    data = reply.read()
    assert reply.status == 200, (reply.status, data[:200])
def control(*args):
    subprocess.run(["callgrind_control", *args, pid], check=True, capture_output=True)
for _ in range(warm):
    one()
control("-z")
control("-i", "on")
for _ in range(n):
    one()
control("-i", "off")
control("-d")
PY
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    # The dump asked for above is the file's part 1 (the final one at exit is not counted).
    file="$work/cg.$pid.1"
    total=$(callgrind_annotate "$file" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    allocs=$(allocations "$file")
    printf '%-8s %12d %12d %10d' "$r" "$((total / n))" "$((allocs / n))" "$n"
    if [ -n "${CONSOLE:-}" ]; then
        printf '   (console stream: %d records)' "$(grep -c '^data: ' "$work/$r.decisions")"
    fi
    echo
    if [ -n "${OUT:-}" ]; then
        cp "$file" "$out/$r.out"
        cp "/tmp/perf-$pid.map" "$out/$r.map" 2>/dev/null || true
    fi
    rm -f "/tmp/perf-$pid.map"
done
