#!/usr/bin/env bash
# One-time setup for building and testing Railyard on a fresh machine:
# the wasm target for the policy plugins, a Python venv with the OpenAI SDK that the
# client-compatibility tests drive the daemon with and componentize-py (builds the Python example
# plugin), and Node.js + npm (build the JavaScript example plugin; scripts/build-plugins.sh runs
# `npm ci` itself).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -r scripts/requirements.txt
if ! command -v npm >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        echo "npm is missing: installing nodejs and npm with apt-get"
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq
        $SUDO apt-get install -y -qq nodejs npm
    else
        echo "npm is missing: install Node.js (18 or newer) and npm, then run this again" >&2
        exit 1
    fi
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 18 ]; then
    echo "warning: Node.js $(node --version) is old; plugins/prompt-guard is built and tested with Node.js 20" >&2
fi
echo "setup done: wasm32-wasip2 target installed, .venv ready (componentize-py), node $(node --version) / npm $(npm --version)"
