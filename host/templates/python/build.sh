#!/bin/sh
# Builds the plugin and leaves the component at ./{{name}}.wasm, where railyard.toml looks for it.
# Every Railyard plugin template has a build.sh that does this, whatever its language.
set -eu
cd "$(dirname "$0")"

# Use componentize-py from PATH (e.g. an activated virtualenv); otherwise make a virtualenv in
# .venv and install the pinned version from requirements.txt into it, once.
if command -v componentize-py >/dev/null 2>&1; then
    componentize_py=componentize-py
else
    if [ ! -x .venv/bin/componentize-py ]; then
        python3 -m venv .venv
        .venv/bin/pip install --quiet -r requirements.txt
    fi
    componentize_py=.venv/bin/componentize-py
fi

# -d wit -w policy: generate the bindings from the Railyard contract (the `policy` world).
# --stub-wasi: the component imports nothing but the Railyard host interface (no files, no
# sockets, no clocks); print() and the like become no-ops.
# app: the module (app.py) that defines the `Plugin` class.
"$componentize_py" -d wit -w policy componentize --stub-wasi app -o {{name}}.wasm
echo "built $(pwd)/{{name}}.wasm"
