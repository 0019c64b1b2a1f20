#!/usr/bin/env bash
# Builds the example policy plugins written in other languages than Rust, from source, against
# wit/policy.wit (world `policy`):
#
#   plugins/prompt-guard  (JavaScript, componentize-js)  ->  OUT_DIR/prompt-guard.wasm
#   plugins/tool-limits   (Python, componentize-py)      ->  OUT_DIR/tool-limits.wasm
#
# Usage: scripts/build-plugins.sh [OUT_DIR]
#   OUT_DIR defaults to target/plugins/components under the repository root; a relative OUT_DIR
#   given on the command line is taken from the current directory.
#
# Incremental: a plugin is rebuilt only when one of its inputs (its sources, wit/, its lock or
# requirements file, the toolchain) is newer than its output, and `npm ci` runs only when
# plugins/prompt-guard/node_modules does not match package-lock.json. A run with nothing to do
# takes a few milliseconds. Outputs are written to a temporary file and renamed into place, so a
# reader (or a concurrent run) never sees half a component. Works offline once node_modules is
# installed (or the npm cache holds the packages): no --aot, nothing is downloaded at build time.
#
# Needs: node + npm (for prompt-guard) and .venv/bin/componentize-py (for tool-limits); both come
# from scripts/setup.sh. Set RAILYARD_PLUGINS_JOBS=1 to build the two one after the other.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${1:-$ROOT/target/plugins/components}"
case "$OUT_DIR" in
    /*) ;;
    *) OUT_DIR="$PWD/$OUT_DIR" ;;
esac
WIT="$ROOT/wit/policy.wit"
PG="$ROOT/plugins/prompt-guard"
TL="$ROOT/plugins/tool-limits"
COMPONENTIZE_PY="$ROOT/.venv/bin/componentize-py"
SELF="$ROOT/scripts/build-plugins.sh"

say() { printf 'build-plugins: %s\n' "$*" >&2; }
die() {
    say "error: $*"
    exit 1
}

mkdir -p "$OUT_DIR"
# One build at a time per output folder (cargo may run host/build.rs while a developer runs this).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$OUT_DIR/.build-plugins.lock"
    flock 9
fi

# Whether $1 is missing or older than any file under the other arguments (files or folders;
# node_modules and __pycache__ are not looked into, and folders' own times do not count: running
# the unit tests creates __pycache__ and touches src/).
stale() {
    local out="$1"
    shift
    [ -f "$out" ] || return 0
    [ -n "$(find "$@" \( -name node_modules -o -name __pycache__ \) -prune -o -type f -newer "$out" -print -quit 2>/dev/null)" ]
}

# --- prompt-guard (JavaScript) -----------------------------------------------------------------

# node_modules matches the lock when this stamp holds the lock's hash (and the platform's).
NPM_STAMP="$PG/node_modules/.railyard-npm-ci"

npm_wanted() {
    {
        sha256sum "$PG/package.json" "$PG/package-lock.json" | cut -d' ' -f1
        uname -sm
    } | sha256sum | cut -d' ' -f1
}

ensure_node_modules() {
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
        die "node and npm are needed to build plugins/prompt-guard; run scripts/setup.sh (it installs them on Debian/Ubuntu)"
    local wanted
    wanted="$(npm_wanted)"
    if [ -f "$NPM_STAMP" ] && [ "$(cat "$NPM_STAMP")" = "$wanted" ] &&
        [ -f "$PG/node_modules/@bytecodealliance/componentize-js/src/cli.js" ]; then
        return 0
    fi
    say "npm ci in plugins/prompt-guard (pinned by package-lock.json)"
    (cd "$PG" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >&2) ||
        die "npm ci failed in plugins/prompt-guard (offline? the npm cache must hold the locked packages)"
    printf '%s\n' "$wanted" >"$NPM_STAMP"
}

build_prompt_guard() {
    local out="$OUT_DIR/prompt-guard.wasm"
    # The stamp is an input: a fresh npm ci (new componentize-js) rebuilds the component. A
    # changed lock is newer than the output, so it gets here and ensure_node_modules sees it.
    local inputs=("$PG/src" "$PG/package.json" "$PG/package-lock.json" "$WIT" "$NPM_STAMP" "$SELF")
    if [ -f "$NPM_STAMP" ] && ! stale "$out" "${inputs[@]}"; then
        return 0
    fi
    ensure_node_modules
    if ! stale "$out" "${inputs[@]}"; then
        return 0
    fi
    say "building prompt-guard (JavaScript, componentize-js) -> $out"
    local tmp="$OUT_DIR/.prompt-guard.wasm.$$.tmp"
    # No WASI features at all (the component imports only railyard:policy/host), no --aot (it
    # would download weval at build time).
    if ! node "$PG/node_modules/@bytecodealliance/componentize-js/src/cli.js" "$PG/src/index.js" \
        --wit "$WIT" --world-name policy \
        -d stdio random clocks http fetch-event \
        -o "$tmp" >&2; then
        rm -f "$tmp"
        die "componentize-js failed for plugins/prompt-guard"
    fi
    mv -f "$tmp" "$out"
}

# --- tool-limits (Python) ----------------------------------------------------------------------

build_tool_limits() {
    local out="$OUT_DIR/tool-limits.wasm"
    if ! stale "$out" "$TL/src" "$WIT" "$ROOT/scripts/requirements.txt" "$COMPONENTIZE_PY" "$SELF"; then
        return 0
    fi
    [ -x "$COMPONENTIZE_PY" ] ||
        die "$COMPONENTIZE_PY is missing (componentize-py builds plugins/tool-limits); run scripts/setup.sh"
    say "building tool-limits (Python, componentize-py) -> $out"
    local tmp="$OUT_DIR/.tool-limits.wasm.$$.tmp"
    # componentize-py writes __pycache__ next to the sources it imports: build from a copy, so the
    # source tree stays clean (and may be read-only).
    local src
    src="$(mktemp -d "${TMPDIR:-/tmp}/tool-limits-src.XXXXXX")"
    cp -R "$TL/src/." "$src/"
    rm -rf "$src/__pycache__"
    # --stub-wasi: no WASI imports at all (no filesystem, sockets, clocks or random).
    if ! "$COMPONENTIZE_PY" -d "$WIT" -w policy \
        componentize --stub-wasi -p "$src" app -o "$tmp" >&2; then
        rm -rf "$tmp" "$src"
        die "componentize-py failed for plugins/tool-limits"
    fi
    rm -rf "$src"
    mv -f "$tmp" "$out"
}

# --- both, in parallel when there are two to build ---------------------------------------------

if [ "${RAILYARD_PLUGINS_JOBS:-2}" = 1 ]; then
    build_prompt_guard
    build_tool_limits
else
    build_prompt_guard &
    pg=$!
    build_tool_limits &
    tl=$!
    status=0
    wait "$pg" || status=1
    wait "$tl" || status=1
    [ "$status" = 0 ] || die "a plugin failed to build (see above)"
fi
