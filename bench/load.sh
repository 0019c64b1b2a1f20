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
#        [ROUNDS=1] [CONCS="1 16 64"] [FLOOR=1] [WORKERS=N] bench/load.sh [seconds-per-run]
#        (default 10)
# On the chat door and the tools request, nginx as a plain reverse proxy (bench/nginx.sh) is
# measured too: what one hop that judges nothing adds on this machine, the floor under Railyard's
# added latency. With RAILYARD_BASELINE, that build runs beside this one (same config, same backend) and is
# measured in the same run, so a change is compared before/after on one machine state (on the
# chat door and the tools request, which every build has), with RAILYARD_BASELINE_CONFIG when its config differs.
# WORKERS=N: nginx runs N worker processes and each Railyard N worker threads (`[server]
# workers`), like for like; unset, nginx runs one and Railyard one per CPU.
# FLOOR=1: `floor` too on the chat door and the tools request, this build with the same config
# but no plugins (bench/nginx.sh's floor_config): what the daemon's own work costs in latency and
# throughput, apart from the policies'.
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
# ROUNDS > 1: every target measured that many times per concurrency, the order rotated each
# round, and the medians reported (a fixed order lets the host's drift pass for a difference).
rounds="${ROUNDS:-1}"
concs="${CONCS:-1 16 64}"
# The caller's API key (bundled demo keys): demo-key is the default tenant; demo-support-key adds
# the support tenant's chains (prompt-guard, JavaScript, on the input rail).
key="${RAILYARD_KEY:-demo-key}"
work=$(mktemp -d)
made=""
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work" $made' EXIT

$demo demo-backend --listen 127.0.0.1:19100 >/dev/null &
. bench/nginx.sh
start_nginx "$work" 19103 19100
config=$(like_for_like policies/railyard.toml)
baseline_config=$(like_for_like "${RAILYARD_BASELINE_CONFIG:-policies/railyard.toml}")
[ -n "${WORKERS:-}" ] && made="$config $baseline_config"
RAILYARD_LOG=warn $bin serve --config "$config" --listen 127.0.0.1:19101 \
    --backend http://127.0.0.1:19100/v1 >/dev/null &
ports="19100 19101 19103"
if [ -n "$baseline" ]; then
    RAILYARD_LOG=warn "$baseline" serve --config "$baseline_config" --listen 127.0.0.1:19102 \
        --backend http://127.0.0.1:19100/v1 --no-watch >/dev/null &
    ports="$ports 19102"
fi
floor="${FLOOR:-}"
if [ -n "$floor" ]; then
    floor_config=$(floor_config "$config")
    made="$made $floor_config"
    RAILYARD_LOG=warn $bin serve --config "$floor_config" --listen 127.0.0.1:19104 \
        --backend http://127.0.0.1:19100/v1 --no-watch >/dev/null &
    ports="$ports 19104"
fi
. bench/ready.sh
wait_ready 100 "" $ports

# The request bodies (bench/requests.py): a ~2 KB conversation in each door's shape, and the tool
# request.
python3 bench/requests.py "$work"
path_of() { case "$1" in chat|tools) echo /v1/chat/completions;; responses) echo /v1/responses;; messages) echo /v1/messages;; esac; }
echo "request bodies: $(wc -c < "$work/chat.json") / $(wc -c < "$work/responses.json") / $(wc -c < "$work/messages.json") bytes (chat / responses / messages); $secs s per run; $(nproc) cores; $(uname -m); key $key; nginx with ${WORKERS:-1} worker(s), Railyard with ${WORKERS:-one per CPU} thread(s)"

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

port_of() { case "$1" in direct) echo 19100;; railyard) echo 19101;; baseline) echo 19102;; nginx) echo 19103;; floor) echo 19104;; esac; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Column $2 of "$work/res.$1" (one line per round: p50 p99 rps), its median.
col() { awk -v k="$2" '{ print $k }' "$work/res.$1" | median; }
# Per round, target $1 against direct: added p50, added p99, throughput % of direct; medians.
added() {
    paste "$work/res.direct" "$work/res.$1" \
        | awk '{ printf "%f %f %f\n", $4 - $1, $5 - $2, 100 * $6 / $3 }' > "$work/added"
    printf '%s %s %s\n' "$(awk '{ print $1 }' "$work/added" | median)" \
        "$(awk '{ print $2 }' "$work/added" | median)" "$(awk '{ print $3 }' "$work/added" | median)"
}

for door in $doors; do
path=$(path_of "$door")
echo
how=""
[ "$rounds" -gt 1 ] && how=", medians of $rounds rounds, the targets' order rotated each round"
echo "door: $door ($path)$how"
printf '%-5s %-9s %10s %10s %10s\n' conc target p50_ms p99_ms req/s
targets="direct railyard"
if [ "$door" = chat ] || [ "$door" = tools ]; then
    targets="$targets nginx"
    [ -n "$baseline" ] && targets="$targets baseline"
    [ -n "$floor" ] && targets="$targets floor"
fi
read -ra order <<< "$targets"
n=${#order[@]}
for c in $concs; do
    for t in $targets; do : > "$work/res.$t"; done
    for r in $(seq 0 $((rounds - 1))); do
        for i in $(seq 0 $((n - 1))); do
            t=${order[$(( (i + r) % n ))]}
            run "http://127.0.0.1:$(port_of "$t")$path" "$c" "$door" >> "$work/res.$t"
        done
    done
    for t in $targets; do
        printf '%-5s %-9s %10.3f %10.3f %10.0f\n' "$c" "$t" "$(col "$t" 1)" "$(col "$t" 2)" "$(col "$t" 3)"
    done
    read -r a50 a99 tp < <(added railyard)
    printf '      added p50 %+.3f ms, added p99 %+.3f ms, throughput %.0f%% of direct\n' "$a50" "$a99" "$tp"
    case " $targets " in *" nginx "*)
        read -r a50 a99 tp < <(added nginx)
        printf '      nginx: added p50 %+.3f ms, added p99 %+.3f ms, throughput %.0f%% of direct\n' "$a50" "$a99" "$tp";;
    esac
    case " $targets " in *" floor "*)
        read -r a50 a99 tp < <(added floor)
        printf '      floor (no plugins): added p50 %+.3f ms, added p99 %+.3f ms, throughput %.0f%% of direct\n' "$a50" "$a99" "$tp";;
    esac
    case " $targets " in *" baseline "*)
        read -r a50 a99 tp < <(added baseline)
        ratio=$(paste "$work/res.railyard" "$work/res.baseline" | awk '{ print $3 / $6 }' | median)
        printf '      baseline: added p50 %+.3f ms, added p99 %+.3f ms, throughput %.0f%% of direct; this build %.2fx the baseline (median of the rounds)\n' "$a50" "$a99" "$tp" "$ratio";;
    esac
done
done
