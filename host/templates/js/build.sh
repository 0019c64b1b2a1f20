#!/bin/sh
# Builds the plugin and leaves the component at ./{{name}}.wasm, where railyard.toml looks for it.
# Every Railyard plugin template has a build.sh that does this, whatever its language.
set -eu
cd "$(dirname "$0")"

# Install the build tool on the first run. `npm install` (not `npm ci`): it follows
# package-lock.json when there is one and writes one when there is not. Commit that lock file.
if [ ! -x node_modules/.bin/componentize-js ]; then
    npm install --no-audit --no-fund
fi

# See package.json: componentize-js with every optional WASI feature turned off (-d ...), so the
# component imports nothing but the Railyard host interface.
npm run --silent build
echo "built $(pwd)/{{name}}.wasm"
