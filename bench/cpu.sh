#!/usr/bin/env bash
# CPU per request of one proxy hop: the same request straight to the backend, through nginx as a
# plain reverse proxy (the cost of a hop that judges nothing), and through Railyard with the
# bundled chains, in one run. For each target: wrk drives it for N seconds, and the CPU the
# target's processes used meanwhile (utime + stime from /proc/PID/stat, every thread) is divided
# by the requests answered. The backend's own CPU is reported for each run too.
# User and system time are shown apart too (the system part is mostly loopback TCP).
#
# Three requests: `chat`, a ~2 KB conversation with one email address (the input rail redacts it),
# `tools`, a request declaring 3 tools whose reply is one tool call (the tools, tool_call and
# output rails all run), and `stream`, the chat request streamed (the demo model sends its reply
# in 50 chunks, as a model streams a token or two at a time).
#
# Backend: Railyard's demo model (`railyard demo-backend`), in memory. Proxy: Debian's nginx-light
# (installed by this script when missing and apt-get is usable), 1 worker, keep-alive upstream.
# Load: wrk, one thread, keep-alive connections.
#
# Usage: [RAILYARD_BIN=...] [RAILYARD_BASELINE=/old/railyard] [CONC=16] [REQUESTS="chat tools stream"]
#        [ROUNDS=3] [TARGETS="railyard baseline"] [PEERS=1] [HOP=1] [FLOOR=1] [SYSCALLS=1]
#        bench/cpu.sh [seconds-per-run]   (default 10)
# PEERS=1: NeMo Guardrails and the LiteLLM proxy with their tool-call guardrails are measured too,
# on the tool request (bench/peers.sh; pip installs them once). HOP=1: `hop` too, a forwarder of
# tokio and hyper alone that judges nothing (host/examples/bare_hop.rs), the stack's own floor.
# FLOOR=1: `floor` too, this build with the same config but no plugins (nor the tenants' chains
# that name them): the daemon's own work on a request (keys, reading, records, the backend hop),
# so that a run splits Railyard's cost into the hop, the daemon and the policies.
# Each target is measured ROUNDS times, the order rotated each round, and the medians compared:
# on a shared VM one build's figure drifts by ±15 % within minutes, more than many changes.
# With RAILYARD_BASELINE, that build is measured in the same run as a fourth target (with
# RAILYARD_BASELINE_CONFIG, or the same config). RAILYARD_CONFIG: another config than the bundled one.
# WORKERS=N: nginx runs N worker processes and every Railyard target N worker threads
# (`[server] workers`), like for like; unset, nginx runs one and Railyard one per CPU.
# SYSCALLS=1: each target's system calls and context switches per request too, every thread of
# its processes counted by `perf stat` while wrk runs (they split the system time: the same calls
# cost more when the process they wake has gone idle).
# CONSOLE=1: a console's live decisions stream (`GET /v1/admin/decisions`, read by curl) is open on
# the `railyard` target for the whole run; with RAILYARD_BASELINE set to the same binary, the
# baseline is the same daemon with no console open (the stream reader's own CPU is not counted:
# it is the browser's).
# The daemons log at RAILYARD_LOG (default warn: no decision records); RAILYARD_LOG=info writes
# a record per request, as `serve` does by default (to /dev/null here).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
conc="${CONC:-16}"
rounds="${ROUNDS:-3}"
requests="${REQUESTS:-chat tools stream}"
command -v wrk >/dev/null || { echo "needs wrk: apt-get install -y wrk" >&2; exit 2; }
syscalls="${SYSCALLS:-}"
if [ -n "$syscalls" ] && ! command -v perf >/dev/null; then
    echo "SYSCALLS=1 needs perf: apt-get install -y linux-perf" >&2
    exit 2
fi
cargo build --release -q
demo=target/release/railyard
bin="${RAILYARD_BIN:-$demo}"
baseline="${RAILYARD_BASELINE:-}"
work=$(mktemp -d)
made=""
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work" $made' EXIT

$demo demo-backend --listen 127.0.0.1:19120 >/dev/null &
backend_pid=$!
. bench/nginx.sh
start_nginx "$work" 19121 19120
# Decision records (RAILYARD_LOG=info) are discarded; warnings and errors are shown.
if [ "${RAILYARD_LOG:-warn}" = warn ]; then exec 3>&2; else exec 3>/dev/null; fi
config=$(like_for_like "${RAILYARD_CONFIG:-policies/railyard.toml}")
baseline_config=$(like_for_like "${RAILYARD_BASELINE_CONFIG:-${RAILYARD_CONFIG:-policies/railyard.toml}}")
[ -n "${WORKERS:-}" ] && made="$config $baseline_config"
RAILYARD_LOG="${RAILYARD_LOG:-warn}" "$bin" serve --config "$config" --listen 127.0.0.1:19122 \
    --backend http://127.0.0.1:19120/v1 --no-watch >/dev/null 2>&3 &
railyard_pid=$!
ports="19120 19121 19122"
if [ -n "$baseline" ]; then
    RAILYARD_LOG="${RAILYARD_LOG:-warn}" "$baseline" serve --config "$baseline_config" --listen 127.0.0.1:19123 \
        --backend http://127.0.0.1:19120/v1 --no-watch >/dev/null 2>&3 &
    baseline_pid=$!
    ports="$ports 19123"
fi
hop="${HOP:-}"
if [ -n "$hop" ]; then
    cargo build --release -q --example bare_hop
    target/release/examples/bare_hop 127.0.0.1:19126 127.0.0.1:19120 &
    hop_pid=$!
    ports="$ports 19126"
fi
floor="${FLOOR:-}"
if [ -n "$floor" ]; then
    floor_config=$(floor_config "$config")
    made="$made $floor_config"
    RAILYARD_LOG="${RAILYARD_LOG:-warn}" "$bin" serve --config "$floor_config" --listen 127.0.0.1:19127 \
        --backend http://127.0.0.1:19120/v1 --no-watch >/dev/null 2>&3 &
    floor_pid=$!
    ports="$ports 19127"
fi
peers="${PEERS:-}"
if [ -n "$peers" ]; then
    . bench/peers.sh
    start_peers "$work" 19120 19124 19125
    ports="$ports 19124 19125"
fi
. bench/ready.sh
wait_ready 100 "" $ports
if [ -n "${CONSOLE:-}" ]; then
    curl -sN -H 'Authorization: Bearer demo-admin-key' http://127.0.0.1:19122/v1/admin/decisions \
        > "$work/decisions" &
    console_pid=$!
fi

python3 bench/requests.py "$work"
. bench/wrk.sh
for r in chat tools stream; do
    wrk_script "$work/$r.lua" "$work/$r.json" demo-key
done
# The tool request must come back as a tool call through every target (else it measures nothing).
for port in $ports; do
    curl -s -H 'Content-Type: application/json' -H 'Authorization: Bearer demo-key' \
        --data-binary "@$work/tools.json" "http://127.0.0.1:$port/v1/chat/completions" \
        | grep -q '"tool_calls"' || { echo "port $port: the tool request got no tool call" >&2; exit 1; }
done

ticks=$(getconf CLK_TCK)
cpu() { # pids... -> CPU ticks "user system" of those processes, all threads
    local u=0 s=0 p pu ps
    for p in "$@"; do
        # Fields 14 and 15 after the command name (which may hold spaces).
        read -r pu ps < <(sed 's/^.*) //' "/proc/$p/stat" | awk '{ print $12, $13 }')
        u=$((u + pu)); s=$((s + ps))
    done
    echo "$u $s"
}
total() { echo $(($1 + $2)); }
nginx_pids() { echo "$nginx_pid $(pgrep -P "$nginx_pid" | tr '\n' ' ')"; }
tree_pids() { # pid -> it and its descendants
    local p
    echo "$1"
    for p in $(pgrep -P "$1"); do tree_pids "$p"; done
}

measure() { # name port pids... -> prints one row
    local name=$1 port=$2; shift 2
    local b0 t0 b1 t1 n errs
    # Warm up (connections, pools, caches), then measure.
    wrk -t1 -c"$conc" -d1s -s "$work/$req.lua" "http://127.0.0.1:$port/v1/chat/completions" >/dev/null
    b0=$(total $(cpu "$backend_pid")); t0=$(cpu "$@")
    local counted=""
    if [ -n "$syscalls" ]; then
        # Every thread of the target's processes, for as long as wrk runs.
        perf stat -x, -e raw_syscalls:sys_enter,context-switches -o "$work/perf" \
            -p "$(echo "$@" | tr ' ' ',')" -- sleep "$secs" 2>/dev/null &
        counted=$!
    fi
    wrk -t1 -c"$conc" -d"${secs}s" -s "$work/$req.lua" "http://127.0.0.1:$port/v1/chat/completions" > "$work/out"
    b1=$(total $(cpu "$backend_pid")); t1=$(cpu "$@")
    local calls=0 switches=0
    if [ -n "$counted" ]; then
        wait "$counted"
        calls=$(awk -F, '/raw_syscalls/ { print $1 }' "$work/perf")
        switches=$(awk -F, '/context-switches/ { print $1 }' "$work/perf")
    fi
    n=$(wrk_requests "$work/out" "$name")
    read -r u0 s0 <<< "$t0"; read -r u1 s1 <<< "$t1"
    awk -v name="$name" -v n="$n" -v s="$secs" -v u="$((u1 - u0))" -v y="$((s1 - s0))" \
        -v b="$((b1 - b0))" -v hz="$ticks" -v c="$calls" -v w="$switches" -v counted="$counted" 'BEGIN {
            printf "%-10s %9d %9.0f %12.1f %12.1f %8.1f %8.1f", name, n, n / s, 1e6 * (u + y) / hz / n,
                1e6 * b / hz / n, 1e6 * u / hz / n, 1e6 * y / hz / n
            if (counted != "") printf " %9.2f %9.2f", c / n, w / n
            printf "\n" }'
}

echo "$(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); concurrency $conc; $secs s per run; nginx $("$nginx" -v 2>&1 | cut -d/ -f2) with ${WORKERS:-1} worker(s), Railyard with $(grep -m1 '^workers = ' "$config" | cut -d' ' -f3 | sed 's/^0$/one per CPU/') thread(s)"
targets="backend nginx railyard"
[ -n "$baseline" ] && targets="$targets baseline"
[ -n "$hop" ] && targets="$targets hop"
[ -n "$floor" ] && targets="$targets floor"
targets="${TARGETS:-$targets}"
measure_target() { # name
    case $1 in
        backend) measure backend 19120 "$backend_pid" ;;
        nginx) measure nginx 19121 $(nginx_pids) ;;
        railyard) measure railyard 19122 "$railyard_pid" ;;
        baseline) measure baseline 19123 "$baseline_pid" ;;
        hop) measure hop 19126 "$hop_pid" ;;
        floor) measure floor 19127 "$floor_pid" ;;
        nemo) measure nemo 19124 $(tree_pids "$nemo_pid") ;;
        litellm) measure litellm 19125 $(tree_pids "$litellm_pid") ;;
    esac
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
all_targets=$targets
for req in $requests; do
    targets=$all_targets
    # The peers judge tool calls only: they are measured on the tool request.
    [ -n "$peers" ] && [ "$req" = tools ] && targets="$targets nemo litellm"
    echo
    echo "request: $req ($(wc -c < "$work/$req.json") bytes), $rounds rounds, the targets' order rotated each round"
    printf '%-10s %9s %9s %12s %12s %8s %8s' target requests req/s 'µs CPU/req' 'backend µs' 'user' 'system'
    [ -n "$syscalls" ] && printf ' %9s %9s' 'syscalls' 'switches'
    echo
    rm -f "$work"/*.rows
    order=$targets
    for round in $(seq "$rounds"); do
        for t in $order; do measure_target "$t" | tee -a "$work/$t.rows"; done
        # Rotate, so no target is always measured first or last (this VM drifts within a run).
        order="$(echo "$order" | cut -d' ' -f2-) $(echo "$order" | cut -d' ' -f1)"
    done
    echo "medians:"
    for t in $targets; do
        printf '%-10s %9s %9.0f %12.1f %12.1f %8.1f %8.1f' "$t" - "$(awk '{ print $3 }' "$work/$t.rows" | median)" \
            "$(awk '{ print $4 }' "$work/$t.rows" | median)" "$(awk '{ print $5 }' "$work/$t.rows" | median)" \
            "$(awk '{ print $6 }' "$work/$t.rows" | median)" "$(awk '{ print $7 }' "$work/$t.rows" | median)"
        if [ -n "$syscalls" ]; then
            printf ' %9.2f %9.2f' "$(awk '{ print $8 }' "$work/$t.rows" | median)" "$(awk '{ print $9 }' "$work/$t.rows" | median)"
        fi
        echo
    done | tee "$work/medians"
    ng=$(awk '$1 == "nginx" { print $4 }' "$work/medians")
    ry=$(awk '$1 == "railyard" { print $4 }' "$work/medians")
    [ -n "$ng" ] && awk -v r="$ry" -v n="$ng" 'BEGIN { printf "railyard / nginx CPU per request (medians): %.2fx\n", r / n }'
    for t in hop floor; do
        tc=$(awk -v t="$t" '$1 == t { print $4 }' "$work/medians")
        if [ -n "$tc" ] && [ -n "$ng" ]; then
            awk -v c="$tc" -v n="$ng" -v t="$t" 'BEGIN { printf "%s / nginx CPU per request (medians): %.2fx\n", t, c / n }'
        fi
    done
    if [ -n "$baseline" ]; then
        bl=$(awk '$1 == "baseline" { print $4 }' "$work/medians")
        awk -v r="$ry" -v b="$bl" 'BEGIN { printf "railyard / baseline CPU per request (medians): %.2fx\n", r / b }'
        # Each round's pair was measured minutes apart at most: the median of their ratios is
        # steadier than the ratio of medians when the VM drifts.
        paired=$(paste "$work/railyard.rows" "$work/baseline.rows" | awk '{ print $4 / $(NF / 2 + 4) }' | median)
        awk -v p="$paired" 'BEGIN { printf "railyard / baseline, median of the rounds ratios: %.3fx\n", p }'
    fi
    for peer in nemo litellm; do
        pc=$(awk -v t="$peer" '$1 == t { print $4 }' "$work/medians")
        if [ -n "$pc" ]; then
            awk -v r="$ry" -v p="$pc" -v t="$peer" \
                'BEGIN { printf "%s / railyard CPU per request (medians): %.1fx\n", t, p / r }'
        fi
    done
done
if [ -n "${CONSOLE:-}" ]; then
    echo "console stream: $(grep -c '^data: ' "$work/decisions") records received," \
        "$(grep -c '^event: lagged' "$work/decisions") lagged notices"
fi
