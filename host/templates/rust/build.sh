#!/bin/sh
# Builds the plugin and leaves the component at ./{{name}}.wasm, where railyard.toml looks for it.
# Every Railyard plugin template has a build.sh that does this, whatever its language.
set -eu
cd "$(dirname "$0")"

# rustup installs the target from rust-toolchain.toml; without rustup, install it by hand.
if ! rustc --print target-list | grep -qx wasm32-wasip2; then
    echo "build.sh: this Rust has no wasm32-wasip2 target (Rust 1.82 or newer is needed)" >&2
    exit 1
fi

cargo build --release --target wasm32-wasip2

# Cargo writes to target/ unless CARGO_TARGET_DIR says otherwise.
target_dir="${CARGO_TARGET_DIR:-target}"
cp "$target_dir/wasm32-wasip2/release/{{snake}}.wasm" {{name}}.wasm
echo "built $(pwd)/{{name}}.wasm"
