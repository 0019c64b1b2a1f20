#!/usr/bin/env bash
# Memory of the daemon: RSS at idle (before any request, so no plugin instance exists yet), then
# over N requests (default 1,000,000) of the bundled chains at concurrency 16, sampled every
# chunk: whether memory stays flat under steady traffic. Requests alternate between a ~2 KB chat
# request (input and output rails) and a 3-tool request answered with a tool call (tools,
# tool_call and output rails), in 10-second chunks. Before the first request and after the last,
# the daemon at rest: its threads' wake-ups (context switches) and CPU over 10 s. It runs as
# `serve` does by default, watching its files; an idle sidecar should neither wake nor spend
# (BENCHMARKS.md §40: the watcher once woke ten times a second).
#
# Usage: [RAILYARD_BIN=...] [RAILYARD_CONFIG=...] [KEY=demo-key] bench/rss.sh [requests]
set -euo pipefail
cd "$(dirname "$0")/.."
total="${1:-1000000}"
key="${KEY:-demo-key}"
command -v wrk >/dev/null || { echo "needs wrk: apt-get install -y wrk" >&2; exit 2; }
cargo build --release -q
demo=target/release/railyard
bin="${RAILYARD_BIN:-$demo}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

$demo demo-backend --listen 127.0.0.1:19150 >/dev/null &
RAILYARD_LOG=warn "$bin" serve --config "${RAILYARD_CONFIG:-policies/railyard.toml}" \
    --listen 127.0.0.1:19151 --backend http://127.0.0.1:19150/v1 >/dev/null &
pid=$!
. bench/ready.sh
wait_ready 100 healthz 19150 19151
rss() { awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status"; }
threads() { awk '/^Threads/ { print $2 }' "/proc/$pid/status"; }
switches() { cat /proc/"$pid"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { s += $2 } END { print s }'; }
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$pid/stat"; }
at_rest() {
    local s0 c0
    s0=$(switches)
    c0=$(cpu_ms)
    sleep 10
    echo "at rest $1: $(($(switches) - s0)) wake-ups and $(($(cpu_ms) - c0)) ms of CPU in 10 s (all threads)"
}

python3 - "$work" <<'PY'
import json, sys
s = "The quarterly report is attached; please review the figures before Friday. "
turns = [{"role": "user" if i % 2 == 0 else "assistant",
          "content": s * 3 + ("Reach me at jane.doe@example.com if unclear." if i == 6 else "")}
         for i in range(7)]
json.dump({"model": "bench", "messages": [{"role": "system", "content": "Be helpful."}] + turns},
          open(f"{sys.argv[1]}/chat.json", "w"))
tool = lambda n, p: {"type": "function", "function": {"name": n, "parameters": {
    "type": "object", "properties": {k: {"type": "string"} for k in p}, "required": p[:1]}}}
json.dump({"model": "bench", "messages": [
    {"role": "user", "content": 'call get_weather {"city": "Oslo"}'}],
    "tools": [tool("get_weather", ["city"]), tool("search_docs", ["query"]),
              tool("lookup_customer", ["customer_id"])]}, open(f"{sys.argv[1]}/tools.json", "w"))
PY
. bench/wrk.sh
for r in chat tools; do
    wrk_script "$work/$r.lua" "$work/$r.json" "$key"
done

echo "$(nproc) cores, $(uname -m); $total requests at concurrency 16"
at_rest "before any request"
printf '%12s %10s %8s\n' requests 'RSS MiB' threads
printf '%12s %10s %8s\n' "0 (idle)" "$(rss)" "$(threads)"
done_n=0
chunk=0
while [ "$done_n" -lt "$total" ]; do
    r=$([ $((chunk % 2)) = 0 ] && echo chat || echo tools)
    wrk -t1 -c16 -d10s -s "$work/$r.lua" http://127.0.0.1:19151/v1/chat/completions > "$work/out"
    n=$(wrk_requests "$work/out" "$r")
    done_n=$((done_n + n))
    chunk=$((chunk + 1))
    printf '%12s %10s %8s\n' "$done_n" "$(rss)" "$(threads)"
done
# The epoch ticker parks a second after the last plugin call.
sleep 2
at_rest "after the last request"
