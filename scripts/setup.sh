#!/usr/bin/env bash
# One-time setup for building and testing Railyard on a fresh machine:
# the wasm target for the policy plugins, and a Python venv with the OpenAI SDK that the
# client-compatibility tests drive the daemon with.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -r scripts/requirements.txt
echo "setup done: wasm32-wasip2 target installed, .venv ready"
