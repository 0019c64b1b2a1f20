#!/usr/bin/env bash
# Load test: the same request straight to a backend vs through Railyard with the bundled policy
# chain, at concurrency 1, 16 and 64, in one run, for each door (chat completions, responses,
# Anthropic messages) and for `tools`, a chat request declaring 3 tools whose reply is a tool call
# (the tools, tool_call and output rails all run; the same request as bench/cpu.sh's). Prints p50/p99 latency and throughput, and the ratios against the direct
# baseline.
#
# Backend: Railyard's built-in demo model (`railyard demo-backend`), an in-memory scripted
# OpenAI-compatible server on loopback, so the figures measure Railyard's overhead, not a model.
# Load generator: wrk (Debian package `wrk`), one thread, keep-alive connections.
#
# Usage: [RAILYARD_KEY=demo-support-key] [RAILYARD_BIN=/path/to/railyard] \
#        [RAILYARD_BASELINE=/path/to/old/railyard] [DOORS="chat tools responses messages"] \
#        bench/load.sh [seconds-per-run]   (default 10)
# On the chat door and the tools request, nginx as a plain reverse proxy (bench/nginx.sh) is
# measured too: what one hop that judges nothing adds on this machine, the floor under Railyard's
# added latency. With RAILYARD_BASELINE, that build runs beside this one (same config, same backend) and is
# measured in the same run, so a change is compared before/after on one machine state (on the
# chat door and the tools request, which every build has), with RAILYARD_BASELINE_CONFIG when its config differs.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
command -v wrk >/dev/null || { echo "needs wrk: apt-get install -y wrk" >&2; exit 2; }
cargo build --release -q
# The demo backend is always this tree's (it speaks every door); the daemon under test may be
# another build.
demo=target/release/railyard
bin="${RAILYARD_BIN:-$demo}"
baseline="${RAILYARD_BASELINE:-}"
doors="${DOORS:-chat tools responses messages}"
# The caller's API key (bundled demo keys): demo-key is the default tenant; demo-support-key adds
# the support tenant's chains (prompt-guard, JavaScript, on the input rail).
key="${RAILYARD_KEY:-demo-key}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

$demo demo-backend --listen 127.0.0.1:19100 >/dev/null &
. bench/nginx.sh
start_nginx "$work" 19103 19100
RAILYARD_LOG=warn $bin serve --config policies/railyard.toml --listen 127.0.0.1:19101 \
    --backend http://127.0.0.1:19100/v1 >/dev/null &
ports="19100 19101 19103"
if [ -n "$baseline" ]; then
    RAILYARD_LOG=warn "$baseline" serve --config "${RAILYARD_BASELINE_CONFIG:-policies/railyard.toml}" --listen 127.0.0.1:19102 \
        --backend http://127.0.0.1:19100/v1 --no-watch >/dev/null &
    ports="$ports 19102"
fi
for port in $ports; do
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && break
        sleep 0.1
    done
done

# The request bodies (bench/requests.py): a ~2 KB conversation in each door's shape, and the tool
# request.
python3 bench/requests.py "$work"
path_of() { case "$1" in chat|tools) echo /v1/chat/completions;; responses) echo /v1/responses;; messages) echo /v1/messages;; esac; }
echo "request bodies: $(wc -c < "$work/chat.json") / $(wc -c < "$work/responses.json") / $(wc -c < "$work/messages.json") bytes (chat / responses / messages); $secs s per run; $(nproc) cores; $(uname -m); key $key"

for door in chat tools responses messages; do
cat > "$work/$door.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $key"
wrk.headers["anthropic-version"] = "2023-06-01"
local f = io.open("$work/$door.json", "r"); wrk.body = f:read("*a"); f:close()
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.4f %.4f %.1f %d %d\\n", latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, summary.requests / (summary.duration / 1e6),
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout, summary.requests))
end
LUA
done

run() { # url concurrency door -> "p50_ms p99_ms rps"
    wrk -t1 -c"$2" -d"${secs}s" -s "$work/$3.lua" "$1" > "$work/out"
    local p50 p99 rps errs
    read -r _ p50 p99 rps errs _ < <(grep '^RESULT' "$work/out")
    [ "$errs" = 0 ] || { echo "errors or non-2xx answers:" >&2; cat "$work/out" >&2; exit 1; }
    echo "$p50 $p99 $rps"
}

for door in $doors; do
path=$(path_of "$door")
echo
echo "door: $door ($path)"
printf '%-5s %-9s %10s %10s %10s\n' conc target p50_ms p99_ms req/s
for c in 1 16 64; do
    read -r dp50 dp99 drps < <(run "http://127.0.0.1:19100$path" "$c" "$door")
    read -r rp50 rp99 rrps < <(run "http://127.0.0.1:19101$path" "$c" "$door")
    printf '%-5s %-9s %10.3f %10.3f %10.0f\n' "$c" direct "$dp50" "$dp99" "$drps"
    printf '%-5s %-9s %10.3f %10.3f %10.0f\n' "$c" railyard "$rp50" "$rp99" "$rrps"
    awk -v a="$dp50" -v b="$rp50" -v c="$dp99" -v d="$rp99" -v e="$drps" -v f="$rrps" \
        'BEGIN { printf "      added p50 %+.3f ms, added p99 %+.3f ms, throughput %.0f%% of direct\n", b-a, d-c, 100*f/e }'
    if [ "$door" = chat ] || [ "$door" = tools ]; then
        read -r np50 np99 nrps < <(run "http://127.0.0.1:19103$path" "$c" "$door")
        printf '%-5s %-9s %10.3f %10.3f %10.0f\n' "$c" nginx "$np50" "$np99" "$nrps"
        awk -v a="$dp50" -v b="$np50" -v c="$dp99" -v d="$np99" -v e="$drps" -v f="$nrps" \
            'BEGIN { printf "      nginx: added p50 %+.3f ms, added p99 %+.3f ms, throughput %.0f%% of direct\n", b-a, d-c, 100*f/e }'
    fi
    if [ -n "$baseline" ] && { [ "$door" = chat ] || [ "$door" = tools ]; }; then
        read -r bp50 bp99 brps < <(run "http://127.0.0.1:19102$path" "$c" "$door")
        printf '%-5s %-9s %10.3f %10.3f %10.0f\n' "$c" baseline "$bp50" "$bp99" "$brps"
        awk -v a="$dp50" -v b="$bp50" -v c="$dp99" -v d="$bp99" -v e="$drps" -v f="$brps" -v g="$rrps" \
            'BEGIN { printf "      baseline: added p50 %+.3f ms, added p99 %+.3f ms, throughput %.0f%% of direct; this build %.2fx the baseline\n", b-a, d-c, 100*f/e, g/f }'
    fi
done
done
