#!/usr/bin/env bash
# The MCP door's added latency: the same `tools/call` straight to an MCP server vs through
# Railyard's /mcp/<name> with the bundled policies, at concurrency 1 and 16, in one run.
#
# Upstream: the demo backend's MCP server (`railyard demo-backend`, in-memory, JSON answers, no
# sessions), so the figures are Railyard's cost, not a tool's. Two calls: `get_weather` (every
# rail allows; structured output) and `lookup_customer` (the tool_result rail redacts an email
# address and a card number). The tool list is fetched once and cached, as in steady state.
# Load generator: wrk (Debian package `wrk`), one thread, keep-alive connections.
#
# With redis-server on the PATH, a second daemon keeps its state in a Redis on loopback (#48):
# every call then reads the session's tool list and the agent's reads from the store and adds
# this one, the cost a replica pays for sharing them.
#
# Usage: [RAILYARD_BIN=/path/to/railyard] bench/mcp.sh [seconds-per-run]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
command -v wrk >/dev/null || { echo "needs wrk: apt-get install -y wrk" >&2; exit 2; }
cargo build --release -q
bin="${RAILYARD_BIN:-target/release/railyard}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

# The bundled config with absolute paths, and the demo MCP server behind /mcp/bench.
sed -e "s|path = \"../target/|path = \"$PWD/target/|" \
    -e "s|keys_file = \"keys.toml\"|keys_file = \"$PWD/policies/keys.toml\"|" \
    policies/railyard.toml > "$work/railyard.toml"
printf '\n[[mcp.servers]]\nname = "bench"\nurl = "http://127.0.0.1:19110/mcp"\n' >> "$work/railyard.toml"

target/release/railyard demo-backend --listen 127.0.0.1:19110 >/dev/null &
RAILYARD_LOG=warn "$bin" serve --config "$work/railyard.toml" --listen 127.0.0.1:19111 --no-watch >/dev/null &
targets="direct:19110:/mcp railyard:19111:/mcp/bench"
ports="19110 19111"
if command -v redis-server >/dev/null; then
    redis-server --port 19113 --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
    { cat "$work/railyard.toml"; printf '
[state]
backend = "redis"
url = "redis://127.0.0.1:19113/0"
'; } > "$work/redis.toml"
    RAILYARD_LOG=warn "$bin" serve --config "$work/redis.toml" --listen 127.0.0.1:19112 --no-watch >/dev/null &
    targets="$targets +redis:19112:/mcp/bench"
    ports="$ports 19112"
fi
. bench/ready.sh
# shellcheck disable=SC2086
wait_ready 100 "" $ports

for tool in get_weather lookup_customer; do
    case $tool in
        get_weather) args='{"city": "Oslo"}' ;;
        lookup_customer) args='{"customer_id": "c-17"}' ;;
    esac
    cat > "$work/$tool.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
wrk.headers["Authorization"] = "Bearer demo-key"
wrk.body = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "$tool", "arguments": $args}}'
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.4f %.4f %.1f %d %d\\n", latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, summary.requests / (summary.duration / 1e6),
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout, summary.requests))
end
LUA
done

# Check the answers first: through Railyard the customer's email is redacted.
curl -s http://127.0.0.1:19111/mcp/bench -H 'Authorization: Bearer demo-key' \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup_customer","arguments":{"customer_id":"c-17"}}}' \
    | grep -q '\[EMAIL\]' || { echo "Railyard did not redact the result" >&2; exit 1; }

run() { # url concurrency tool -> "p50_ms p99_ms rps"
    wrk -t1 -c"$2" -d"${secs}s" -s "$work/$3.lua" "$1" > "$work/out"
    local p50 p99 rps errs
    read -r _ p50 p99 rps errs _ < <(grep '^RESULT' "$work/out")
    [ "$errs" = 0 ] || { echo "errors or non-2xx answers:" >&2; cat "$work/out" >&2; exit 1; }
    echo "$p50 $p99 $rps"
}

echo "tools/call through /mcp/<name> vs direct; $secs s per run; $(nproc) cores; $(uname -m)"
for tool in get_weather lookup_customer; do
    echo
    echo "tool: $tool"
    printf '%-5s %-9s %10s %10s %10s\n' conc target p50_ms p99_ms req/s
    for c in 1 16; do
        for t in $targets; do
            IFS=: read -r name port path <<<"$t"
            read -r p50 p99 rps < <(run "http://127.0.0.1:$port$path" "$c" "$tool")
            printf '%-5s %-9s %10.3f %10.3f %10.0f\n' "$c" "$name" "$p50" "$p99" "$rps"
            if [ "$name" = direct ]; then
                dp50=$p50 dp99=$p99 drps=$rps
            else
                awk -v a="$dp50" -v b="$p50" -v c="$dp99" -v d="$p99" -v e="$drps" -v f="$rps" \
                    'BEGIN { printf "      added p50 %+.3f ms, added p99 %+.3f ms, throughput %.0f%% of direct\n", b-a, d-c, 100*f/e }'
            fi
        done
    done
done
