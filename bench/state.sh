#!/usr/bin/env bash
# What the shared state store costs a request (#48): one daemon in front of the demo backend,
# the bundled plugins' pii on every request, two tenants: `limited` (requests_per_minute high
# enough never to refuse, so every request takes from its bucket in the store) and `free` (no
# limit: the store is never touched). Load from Debian's `hey`, the same run, p50 and p99 at
# concurrency 1 and 16, with the store in memory and then in a Redis on loopback.
#
# Usage: [RAILYARD_BIN=...] bench/state.sh
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in hey redis-server; do
    command -v "$tool" >/dev/null || { echo "needs $tool: apt-get install -y ${tool/-server/-server}" >&2; exit 2; }
done
cargo build --release -q
bin="${RAILYARD_BIN:-target/release/railyard}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

target/release/railyard demo-backend --listen 127.0.0.1:19150 >/dev/null &
redis-server --port 19151 --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
plugins="$PWD/target/plugins/wasm32-wasip2/release"
config() {
    cat <<TOML
[auth]
[[auth.keys]]
sha256 = "$(sha limited-key)"
principal = "l"
tenant = "limited"
[[auth.keys]]
sha256 = "$(sha free-key)"
principal = "f"
tenant = "free"

[tenants.limited]
requests_per_minute = 100000000

[tenants.free]

[state]
$1

[[plugins]]
name = "pii"
path = "$plugins/pii_filter.wasm"
rails = ["input", "output"]
history = false
config = {}
TOML
}
run() { # key concurrency n -> "p50 p99 non-200"
    hey -n "$3" -c "$2" -m POST -T application/json -H "Authorization: Bearer $1" \
        -d '{"model": "bench", "messages": [{"role": "user", "content": "What is the weather like in Paris in spring?"}]}' \
        "http://127.0.0.1:$port/v1/chat/completions" >"$work/out"
    awk '/ 50% in/ {p50=$3*1000} / 99% in/ {p99=$3*1000} /Status code distribution/ {on=1; next} on && /\[/ && !/\[200\]/ {n+=$2} END {printf "%.2f %.2f %d\n", p50, p99, n}' "$work/out"
}
echo "$(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); redis $(redis-server --version | cut -d' ' -f3)"
port=19152
for backend in memory redis; do
    case $backend in
        memory) config 'backend = "memory"' >"$work/$backend.toml" ;;
        redis) config $'backend = "redis"\nurl = "redis://127.0.0.1:19151/0"' >"$work/$backend.toml" ;;
    esac
    RAILYARD_LOG=warn "$bin" serve --config "$work/$backend.toml" --listen "127.0.0.1:$port" \
        --backend http://127.0.0.1:19150/v1 --no-watch >/dev/null &
    daemon=$!
    for _ in $(seq 1 300); do curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && break; sleep 0.1; done
    run free-key 4 500 >/dev/null
    run limited-key 4 500 >/dev/null
    for c in 1 16; do
        n=$((c == 1 ? 3000 : 12000))
        # Alternated, twice each, so drift on a shared VM falls on both.
        for round in 1 2; do
            read -r f50 f99 fe < <(run free-key "$c" "$n")
            read -r l50 l99 le < <(run limited-key "$c" "$n")
            printf '%-6s c=%-2s round %s: no limit p50 %6.2f p99 %6.2f ms | limited p50 %6.2f p99 %6.2f ms | added p50 %5.2f ms | non-200 %s/%s\n' \
                "$backend" "$c" "$round" "$f50" "$f99" "$l50" "$l99" "$(echo "$l50 - $f50" | bc -l)" "$fe" "$le"
        done
    done
    kill "$daemon"; wait "$daemon" 2>/dev/null || true
    port=$((port + 1))
done
