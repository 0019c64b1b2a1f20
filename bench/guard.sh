#!/usr/bin/env bash
# What consulting a guard model costs, and what it does not cost others (#47). One daemon in
# front of the demo backend, with pii on every request and content-safety (contract 0.3, granted
# a guard model) on requests for chosen models only; the guard is bench/slow_guard.py, a
# scripted Llama Guard answering after a fixed delay. Load from Debian's `hey`.
#
# Reports, at concurrency 1 and 16: p50/p99 of requests no guard judges ("plain"), of requests
# judged by a guard answering in DELAY_MS (default 200; the added cost is p50 - plain p50 -
# DELAY_MS), of requests whose guard answer is cached; and the p99 of plain requests at
# concurrency 4 alone and while WAITING (default 1000) requests wait on a guard answering in
# 5 s. Then, in front of a backend answering in 100 and in 300 ms (bench/slow_guard.py again:
# its `safe` is as good a reply as any), the same guard run before the backend call and beside
# it (`parallel = true`): the added latency of each over no guard at all.
#
# Usage: [RAILYARD_BIN=...] [DELAY_MS=200] [WAITING=1000] bench/guard.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v hey >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get install -y -q hey >/dev/null
    else
        echo "needs hey: apt-get install -y hey" >&2
        exit 2
    fi
fi
delay="${DELAY_MS:-200}"
waiting="${WAITING:-1000}"
cargo build --release -q
bin="${RAILYARD_BIN:-target/release/railyard}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
ulimit -n 65536 2>/dev/null || true

target/release/railyard demo-backend --listen 127.0.0.1:19130 >/dev/null &
DELAY_MS="$delay" python3 bench/slow_guard.py 19131 &
DELAY_MS=5000 python3 bench/slow_guard.py 19132 &
plugins="$PWD/target/plugins/wasm32-wasip2/release"
cat >"$work/railyard.toml" <<TOML
[server]
max_connections = 8192
[auth]
open = true

[[guard_models]]
name = "guard"
kind = "llama-guard"
url = "http://127.0.0.1:19131/v1"
model = "guard"
timeout_ms = 10000
cache_entries = 0

[[guard_models]]
name = "guard-cached"
kind = "llama-guard"
url = "http://127.0.0.1:19131/v1"
model = "guard"
timeout_ms = 10000
cache_entries = 10000

[[guard_models]]
name = "guard-slow"
kind = "llama-guard"
url = "http://127.0.0.1:19132/v1"
model = "guard"
timeout_ms = 20000
max_concurrent = 4096
cache_entries = 0

[[plugins]]
name = "pii"
path = "$plugins/pii_filter.wasm"
rails = ["input", "output"]
history = false
config = {}

[[plugins]]
name = "content-safety"
path = "$plugins/content_safety.wasm"
rails = ["input"]
models = ["guarded"]
guard_models = ["guard"]
config = { model = "guard" }

[[plugins]]
name = "content-safety-beside"
path = "$plugins/content_safety.wasm"
rails = ["input"]
models = ["beside"]
guard_models = ["guard"]
parallel = true
config = { model = "guard" }

[[plugins]]
name = "content-safety-cached"
path = "$plugins/content_safety.wasm"
rails = ["input"]
models = ["cached"]
guard_models = ["guard-cached"]
config = { model = "guard-cached" }

[[plugins]]
name = "content-safety-slow"
path = "$plugins/content_safety.wasm"
rails = ["input"]
models = ["slow"]
guard_models = ["guard-slow"]
config = { model = "guard-slow" }
TOML
RAILYARD_LOG=warn "$bin" serve --config "$work/railyard.toml" --listen 127.0.0.1:19133 \
    --backend http://127.0.0.1:19130/v1 --no-watch >/dev/null &
daemon=$!
for _ in $(seq 1 300); do
    curl -sf -o /dev/null http://127.0.0.1:19133/readyz && break
    sleep 0.1
done

body() {
    printf '{"model": "%s", "messages": [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is the weather like in Paris in spring, and what should I pack for a week there?"}]}' "$1"
}
# hey's p50 and p99 in ms.
run() {
    local model="$1"
    shift
    hey "$@" -m POST -T application/json -d "$(body "$model")" "http://127.0.0.1:${port:-19133}/v1/chat/completions" >"$work/out"
    local p50 p99 errors
    p50=$(awk '/ 50% in/ {print $3 * 1000}' "$work/out")
    p99=$(awk '/ 99% in/ {print $3 * 1000}' "$work/out")
    errors=$(awk '/Status code distribution/ {on=1; next} on && /\[/ && !/\[200\]/ {n+=$2} END {print n+0}' "$work/out")
    printf '%s %s %s\n' "$p50" "$p99" "$errors"
}
report() {
    printf '%-44s p50 %8.2f ms   p99 %8.2f ms   non-200: %s\n' "$1" $2 $3 $4
}

echo "$(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); guard delay $delay ms"
run plain -n 500 -c 4 >/dev/null   # warm
run cached -n 5 -c 1 >/dev/null    # the cached guard's answer
for c in 1 16; do
    n=$((c == 1 ? 2000 : 8000))
    read -r p50 p99 e < <(run plain -n "$n" -c "$c")
    report "plain, c=$c" "$p50" "$p99" "$e"
    plain50=$p50
    g=$((c == 1 ? 50 : 320))
    # The guard alone, asked directly by the same load generator: what it takes.
    hey -n "$g" -c "$c" -m POST -T application/json -d '{"messages": [{"role": "user", "content": "hi"}]}' \
        http://127.0.0.1:19131/v1/chat/completions >"$work/direct"
    direct=$(awk '/ 50% in/ {print $3 * 1000}' "$work/direct")
    read -r p50 p99 e < <(run guarded -n "$g" -c "$c")
    report "guard answering in $delay ms, c=$c" "$p50" "$p99" "$e"
    echo "    the guard asked directly: p50 $direct ms; added beyond it: $(echo "$p50 - $plain50 - $direct" | bc -l | xargs printf '%.2f') ms at p50"
    read -r p50 p99 e < <(run cached -n "$n" -c "$c")
    report "guard answer cached, c=$c" "$p50" "$p99" "$e"
    echo "    added by a cache hit: $(echo "$p50 - $plain50" | bc -l | xargs printf '%.3f') ms at p50"
done
read -r p50 alone e < <(run plain -z 8s -c 4)
report "plain, c=4, alone" "$p50" "$alone" "$e"
rss() { awk '/VmRSS/ {printf "%.0f MiB", $2 / 1024}' "/proc/$daemon/status"; }
echo "    daemon RSS before: $(rss)"
hey -z 16s -c "$waiting" -t 30 -m POST -T application/json -d "$(body slow)" \
    http://127.0.0.1:19133/v1/chat/completions >"$work/slow" &
slow=$!
sleep 4
read -r p50 busy e < <(run plain -z 8s -c 4)
report "plain, c=4, $waiting waiting on a 5 s guard" "$p50" "$busy" "$e"
echo "    daemon RSS while they wait: $(rss)"
wait "$slow" || true
echo "    the waiting requests: $(awk '/Requests\/sec/ {print $2}' "$work/slow") req/s, $(awk '/\[200\]/ {print $2}' "$work/slow") answered 200"

# Before the backend call, or beside it: the same config, in front of a slow backend.
RAILYARD_LOG=warn "$bin" serve --config "$work/railyard.toml" --listen 127.0.0.1:19136 \
    --backend http://127.0.0.1:19134/v1 --no-watch >/dev/null &
for _ in $(seq 1 300); do
    curl -sf -o /dev/null http://127.0.0.1:19136/readyz && break
    sleep 0.1
done
port=19136
for backend in 100 300; do
    DELAY_MS="$backend" python3 bench/slow_guard.py 19134 &
    slow_backend=$!
    sleep 1
    bound=$(( delay > backend ? delay - backend : 0 ))
    echo "backend answering in $backend ms, guard in $delay ms (parallel should add <= $bound + 1 ms)"
    for c in 1 16; do
        n=$((c == 1 ? 50 : 320))
        run plain -n 20 -c "$c" >/dev/null # warm
        read -r p50 p99 e < <(run plain -n "$n" -c "$c")
        report "  no guard, c=$c" "$p50" "$p99" "$e"
        plain50=$p50
        for model in guarded beside; do
            read -r p50 p99 e < <(run "$model" -n "$n" -c "$c")
            label=$([ "$model" = beside ] && echo "guard beside the call" || echo "guard before the call")
            report "  $label, c=$c" "$p50" "$p99" "$e"
            echo "      added: $(echo "$p50 - $plain50" | bc -l | xargs printf '%.2f') ms at p50"
        done
    done
    kill "$slow_backend"
    wait "$slow_backend" 2>/dev/null || true
done
