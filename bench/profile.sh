#!/usr/bin/env bash
# Where a request's CPU goes, natively: the daemon sampled (`perf record -e cpu-clock`) while wrk
# sends one request kind, each sample placed in the kernel, a crate of the daemon, or a plugin's
# compiled code (by plugin and function, through the perf map RAILYARD_PERFMAP=1 writes), and
# every share given as µs of CPU per request. bench/instructions.sh counts instructions, which
# repeat run to run; this shows time, where a cold cache line costs what a hundred instructions
# do (BENCHMARKS.md §36: the plugins' code runs at about half the daemon's instructions per
# cycle).
#
# Usage: [REQUEST=tools|chat|stream] [SECS=5] [CONC=16] [RAILYARD_BIN=...] [RAILYARD_CONFIG=...]
#        [TOP=25] bench/profile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
req="${REQUEST:-tools}"
secs="${SECS:-5}"
conc="${CONC:-16}"
for tool in wrk perf; do
    command -v "$tool" >/dev/null || { echo "needs $tool: apt-get install -y wrk linux-perf" >&2; exit 2; }
done
cargo build --release -q
demo=target/release/railyard
bin="${RAILYARD_BIN:-$demo}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

$demo demo-backend --listen 127.0.0.1:19160 >/dev/null &
RAILYARD_PERFMAP=1 RAILYARD_LOG=warn "$bin" serve --config "${RAILYARD_CONFIG:-policies/railyard.toml}" \
    --listen 127.0.0.1:19161 --backend http://127.0.0.1:19160/v1 --no-watch >/dev/null &
pid=$!
# The first start compiles the plugins (the JavaScript and Python ones take tens of seconds).
. bench/ready.sh
wait_ready 600 healthz 19160 19161
python3 bench/requests.py "$work"
. bench/wrk.sh
wrk_script "$work/req.lua" "$work/$req.json" demo-key
url=http://127.0.0.1:19161/v1/chat/completions
wrk -t1 -c"$conc" -d2s -s "$work/req.lua" "$url" >"$work/out"
wrk_requests "$work/out" warm-up >/dev/null
cp "/proc/$pid/maps" "$work/maps"
freq=4999
perf record -q -e cpu-clock -F "$freq" -p "$pid" -o "$work/perf.data" -- sleep "$((secs + 1))" 2>/dev/null &
perf_pid=$!
sleep 0.5
wrk -t1 -c"$conc" -d"${secs}s" -s "$work/req.lua" "$url" >"$work/out"
n=$(wrk_requests "$work/out" "$req")
wait "$perf_pid"
perf script -i "$work/perf.data" -F ip,sym,dso 2>/dev/null >"$work/samples"
echo "$req request, concurrency $conc, $n requests in $secs s; $(nproc) cores, $(uname -m); µs of CPU per request by where it was spent:"
python3 - "$work/samples" "$work/maps" "/tmp/perf-$pid.map" "$n" "$freq" "${TOP:-25}" <<'PY'
import bisect, collections, re, sys

samples, maps, perfmap, n, freq, top = sys.argv[1:7]
per = 1e6 / int(freq) / int(n)  # µs of CPU per request that one sample stands for

# Each plugin's compiled code is one mapping of a `.live-*.cwasm` copy; its name comes from the
# crate in its export glue's symbol (`<normalise::_::Glue as ...>`).
code = []
for line in open(maps):
    f = line.split()
    if len(f) >= 6 and "cwasm" in f[5] and "x" in f[1]:
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        code.append((lo, hi))
funcs = []
for line in open(perfmap):
    a, s, name = line.rstrip("\n").split(" ", 2)
    if not name.startswith("wasm["):
        funcs.append((int(a, 16), int(s, 16), name))
funcs.sort()
starts = [f[0] for f in funcs]
plugin_of = {}
for lo, hi in code:
    i = bisect.bisect_left(starts, lo)
    while i < len(funcs) and funcs[i][0] < hi:
        m = re.search(r"LT\$(\w+)\.\._\.\.Glue", funcs[i][2])
        if m:
            plugin_of[lo] = m.group(1)
            break
        i += 1
code.sort()
code_starts = [c[0] for c in code]

def demangle(name):
    name = re.sub(r"17h[0-9a-f]{16}E$", "", name)
    out, rest = [], name[3:] if name.startswith("_ZN") else ""
    while rest and rest[0].isdigit():
        k = re.match(r"\d+", rest).group(0)
        out.append(rest[len(k):len(k) + int(k)])
        rest = rest[len(k) + int(k):]
    if not out:
        return name
    text = "::".join(out).replace("..", "::").lstrip("_")
    for code, char in [("$LT$", "<"), ("$GT$", ">"), ("$RF$", "&"), ("$u20$", " "), ("$C$", ",")]:
        text = text.replace(code, char)
    return text

where = collections.Counter()
plugin_funcs = collections.Counter()
total = 0
for line in open(samples):
    f = line.split(None, 1)
    if not f:
        continue
    ip, rest = int(f[0], 16), (f[1] if len(f) > 1 else "")
    total += 1
    # `symbol (dso)`, the dso of a plugin's code `(/path/.live-….cwasm (deleted))`.
    sym, _, dso = rest.strip().partition(" (")
    if "kernel" in dso:
        where["kernel"] += 1
    elif "cwasm" in dso:
        c = bisect.bisect_right(code_starts, ip) - 1
        plugin = plugin_of.get(code[c][0], "?") if c >= 0 else "?"
        where["plugin " + plugin] += 1
        i = bisect.bisect_right(starts, ip) - 1
        fn = demangle(funcs[i][2]) if i >= 0 and ip < funcs[i][0] + funcs[i][1] else "?"
        plugin_funcs[(plugin, fn[:90])] += 1
    elif "railyard" in dso:
        crate = re.match(r"[<&]*(?:mut )?(?:dyn )?([A-Za-z_][\w]*)", sym)
        crate = crate.group(1) if crate else "?"
        if crate in ("_mi", "mi") or sym.startswith(("mi_", "_mi_")):
            crate = "mimalloc"
        if crate == "railyard":
            m = re.match(r"<?railyard::(\w+)", sym)
            crate = "railyard::" + (m.group(1) if m else "?")
        where["daemon " + crate] += 1
    else:
        where[re.sub(r"\.so.*", "", dso.split("/")[-1]) or "?"] += 1

print("%8.1f  all" % (total * per))
for k, v in where.most_common(int(top)):
    print("%8.1f  %s" % (v * per, k))
plugins = sum(v for k, v in where.items() if k.startswith("plugin "))
print("\nthe plugins' code: %.1f µs per request; its functions:" % (plugins * per))
for (plugin, fn), v in plugin_funcs.most_common(int(top)):
    print("%8.2f  %-18s %s" % (v * per, plugin, fn))
PY
