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
# Pinned tools (#70), PARTS=list: `tools/list` of 50 tools through two daemons in one run, the
# bundled config (MCP tools pinned at first sight) and the same with `[pins] mcp = "off"`, and
# the CPU each daemon spent per list (utime + stime from /proc/PID/stat, every thread, divided
# by the lists answered), ROUNDS times in turn, medians compared. The upstream is nginx
# answering every POST with one fixed list (no upstream cost to speak of): 50 tools shaped as
# MCP servers write them (a sentence or two of description, an object schema of 2-5 typed
# properties), made up here: a cost figure, not a quality one. Nothing changes between lists,
# the steady state: every list is read against its pins, none is held.
#
# Usage: [RAILYARD_BIN=/path/to/railyard] [PARTS="calls list"] [ROUNDS=3]
#        bench/mcp.sh [seconds-per-run]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
parts="${PARTS:-calls list}"
rounds="${ROUNDS:-3}"
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

calls() {
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
}

# ---- tools/list of 50 tools, pins on and off ----

list() {
    command -v nginx >/dev/null || { echo "needs nginx: apt-get install -y nginx-light" >&2; exit 2; }
    # nginx's workers drop root: they must read the list.
    chmod 755 "$work"
    # The list, as nginx serves it to every POST.
    python3 - > "$work/list.json" <<'PY'
import json
kinds = ["string", "integer", "boolean", "number"]
tools = []
for i in range(50):
    props = {f"field_{j}": {"type": kinds[(i + j) % 4], "description": f"The record's field {j}, as the service names it."}
             for j in range(2 + i % 4)}
    tools.append({
        "name": f"service_action_{i:02d}",
        "title": f"Service action {i}",
        "description": f"Performs action {i} on the service: looks the record up by its key, applies the change "
                       f"and answers with the record as it is afterwards. Use it when the user asks for action {i}.",
        "inputSchema": {"type": "object", "properties": props, "required": sorted(props)[:1]},
        "annotations": {"readOnlyHint": i % 2 == 0},
    })
print(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}))
PY
    cat > "$work/nginx.conf" <<NGINX
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $work/nginx-body;
    server {
        listen 127.0.0.1:19120;
        # POST is no method for static files: the 405 is turned into the file (a GET).
        location /mcp {
            error_page 405 =200 /list.json;
            return 405;
        }
        location = /list.json {
            internal;
            root $work;
            types { }
            default_type application/json;
        }
    }
}
NGINX
    nginx -c "$work/nginx.conf" -p "$work" -g 'daemon off;' &
    sed -e "s|path = \"../target/|path = \"$PWD/target/|" \
        -e "s|keys_file = \"keys.toml\"|keys_file = \"$PWD/policies/keys.toml\"|" \
        policies/railyard.toml > "$work/pinned.toml"
    grep -q '^mcp = "trust_on_first_use"' "$work/pinned.toml" ||
        { echo "the bundled config does not pin MCP tools" >&2; exit 1; }
    printf '\n[[mcp.servers]]\nname = "fifty"\nurl = "http://127.0.0.1:19120/mcp"\n' >> "$work/pinned.toml"
    sed -e 's|^mcp = "trust_on_first_use"|mcp = "off"|' "$work/pinned.toml" > "$work/unpinned.toml"
    RAILYARD_LOG=warn "$bin" serve --config "$work/pinned.toml" --listen 127.0.0.1:19121 --no-watch >/dev/null &
    local on=$!
    RAILYARD_LOG=warn "$bin" serve --config "$work/unpinned.toml" --listen 127.0.0.1:19122 --no-watch >/dev/null &
    local off=$!
    wait_ready 100 "" 19120 19121 19122
    cat > "$work/list.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
wrk.headers["Authorization"] = "Bearer demo-key"
wrk.body = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.4f %.4f %.1f %d %d\n", latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, summary.requests / (summary.duration / 1e6),
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout, summary.requests))
end
LUA
    # Both offer all 50 (pinned at first sight by the one); the pinned one's list names its step.
    local list='{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
    for port in 19121 19122; do
        n=$(curl -s "http://127.0.0.1:$port/mcp/fifty" -H 'Authorization: Bearer demo-key' \
            -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
            -d "$list" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["result"]["tools"]))')
        [ "$n" = 50 ] || { echo "port $port offered $n tools, not 50" >&2; exit 1; }
    done
    curl -s http://127.0.0.1:19121/v1/admin/pins -H 'Authorization: Bearer demo-admin-key' |
        python3 -c 'import json,sys; s=json.load(sys.stdin)["sources"]; assert len(s[0]["tools"]) == 50, s' ||
        { echo "the pinned daemon pinned no 50 tools" >&2; exit 1; }
    ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
    hz=$(getconf CLK_TCK)
    echo
    echo "tools/list of 50 tools through /mcp/<name>, pins on vs off; $secs s per run, $rounds rounds, concurrency 1; $(nproc) cores; $(uname -m)"
    printf '%-6s %-9s %10s %10s %10s %12s\n' round target p50_ms p99_ms req/s cpu_us/list
    : > "$work/cpu"
    for r in $(seq "$rounds"); do
        order="on off"
        [ $((r % 2)) = 0 ] && order="off on"
        for t in $order; do
            local pid=$on port=19121
            [ "$t" = off ] && pid=$off port=19122
            before=$(ticks "$pid")
            wrk -t1 -c1 -d"${secs}s" -s "$work/list.lua" "http://127.0.0.1:$port/mcp/fifty" > "$work/out"
            after=$(ticks "$pid")
            read -r _ p50 p99 rps errs n _ < <(grep '^RESULT' "$work/out")
            [ "$errs" = 0 ] || { echo "errors or non-2xx answers:" >&2; cat "$work/out" >&2; exit 1; }
            cpu=$(awk -v a="$before" -v b="$after" -v hz="$hz" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / hz * 1e6 / n }')
            echo "$t $cpu $p50" >> "$work/cpu"
            printf '%-6s %-9s %10.3f %10.3f %10.0f %12s\n' "$r" "$t" "$p50" "$p99" "$rps" "$cpu"
        done
    done
    awk '{ cpu[$1] = cpu[$1] " " $2; lat[$1] = lat[$1] " " $3 }
        function median(list,   a, n) { n = split(list, a, " "); asort(a); return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        END { on = median(cpu["on"]); off = median(cpu["off"]); lon = median(lat["on"]); loff = median(lat["off"])
              printf "median CPU per list: pins on %.1f us, off %.1f us: pins add %+.1f us (%.2fx); p50 latency %+.1f us\n",
                  on, off, on - off, on / off, (lon - loff) * 1000 }' "$work/cpu"
}

. bench/ready.sh
for part in $parts; do
    case $part in
        calls) calls ;;
        list) list ;;
        *) echo "unknown part $part (calls, list)" >&2; exit 2 ;;
    esac
done
