#!/usr/bin/env bash
# One-time setup for building and testing Railyard on a fresh machine:
# the wasm target for the policy plugins, a Python venv with the OpenAI SDK that the
# client-compatibility tests drive the daemon with and componentize-py (builds the Python example
# plugin), Node.js + npm (build the JavaScript example plugin; scripts/build-plugins.sh runs
# `npm ci` itself), and the MCP conformance suite with a Node 22 of its own (tests/conformance).
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
# The MCP conformance suite (tests/conformance.rs, #65): @modelcontextprotocol/conformance and
# the Node 22 it needs (npm's `node` package; the machine's Node may be older), both from the
# lockfile into tests/conformance/node_modules. Again whenever the lockfile changes.
conformance=tests/conformance
if [ ! -x "$conformance/node_modules/node/bin/node" ] ||
    [ ! -f "$conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js" ] ||
    [ "$conformance/package-lock.json" -nt "$conformance/node_modules/.package-lock.json" ]; then
    (cd "$conformance" && npm ci --no-audit --no-fund --loglevel=error)
fi
# The C template's toolchain (`railyard new --lang c`): Debian's clang, lld and wasi-libc, and
# wit-bindgen's C generator (installed under RAILYARD_TOOLS_DIR, default ~/.cargo: its bin/ must
# be on PATH). Its test says SKIPPED where this cannot be installed.
if ! { command -v clang && command -v wasm-ld && [ -f /usr/lib/wasm32-wasi/libc.a ]; } >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO="sudo"
        $SUDO apt-get install -y -qq clang lld wasi-libc libclang-rt-dev-wasm32 ||
            echo "warning: the C toolchain did not install; the C template's test will be skipped" >&2
    else
        echo "warning: no apt-get: install clang, lld and wasi-libc for C plugins" >&2
    fi
fi
# apt_or_warn WHAT HINT PACKAGE...: install PACKAGEs with apt-get (updating the index once if
# the first try fails), or warn that WHAT will fail or be skipped; HINT says what to install
# by hand where there is no apt-get.
apt_or_warn() {
    local what="$1" hint="$2"
    shift 2
    if command -v apt-get >/dev/null 2>&1; then
        local sudo=""
        [ "$(id -u)" = 0 ] || sudo="sudo"
        { $sudo apt-get install -y -qq "$@" >/dev/null ||
            { $sudo apt-get update -qq && $sudo apt-get install -y -qq "$@" >/dev/null; }; } ||
            echo "warning: $* did not install; $what" >&2
    else
        echo "warning: no apt-get: install $hint" >&2
    fi
}
# The console's browser test: Debian's headless Chromium and its WebDriver (Selenium, from
# requirements.txt, drives them). Its test says SKIPPED where they cannot be installed.
if ! { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; }; then
    apt_or_warn "the console's browser test will be skipped" \
        "chromium and chromium-driver for the console's browser test" chromium chromium-driver
fi
# The state store's tests (#48) start their own Redis servers on loopback ports (Debian's
# redis-server; nothing runs as a service). Without it those tests fail, saying so.
if ! command -v redis-server >/dev/null 2>&1; then
    apt_or_warn "the state store's tests will fail" \
        "redis-server (7 or newer) or valkey-server for the state store's tests" redis-server
fi
# The replicas' tests (#48) put three daemons behind nginx round-robin (Debian's nginx-light,
# started by the tests on a loopback port as the user running them).
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    apt_or_warn "the replicas' tests will fail" "nginx for the replicas' tests" nginx-light
fi
tools="${RAILYARD_TOOLS_DIR:-$HOME/.cargo}"
if ! command -v wit-bindgen >/dev/null 2>&1 && [ ! -x "$tools/bin/wit-bindgen" ]; then
    cargo install --quiet --locked --root "$tools" wit-bindgen-cli@0.63.0 \
        --no-default-features --features c
fi
echo "setup done: wasm32-wasip2 target installed, .venv ready (componentize-py), node $(node --version) / npm $(npm --version), MCP conformance suite on node $("$conformance/node_modules/node/bin/node" --version), C: $(clang --version 2>/dev/null | head -1 || echo none), browser: $(/usr/bin/chromium --version 2>/dev/null || echo none), redis: $(redis-server --version 2>/dev/null | cut -d' ' -f3 || echo none), nginx: $( (nginx -v 2>&1 || /usr/sbin/nginx -v 2>&1) | head -1 | cut -d/ -f2 || echo none)"
