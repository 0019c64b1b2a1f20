#!/bin/sh
# Builds the plugin and leaves the component at ./{{name}}.wasm, where railyard.toml looks for it.
# Every Railyard plugin template has a build.sh that does this, whatever its language.
#
# The C toolchain is Debian's (clang, lld, wasi-libc), the bindings come from the contract in
# wit/ through wit-bindgen's C generator, and the component is linked by wasm-component-ld, which
# ships with Rust's wasm32-wasip2 target: it adapts wasi-libc's preview-1 calls to the component
# model (Debian's clang has no wasip2 target of its own).
set -eu
cd "$(dirname "$0")"

missing() {
    echo "build.sh: $1 is missing; $2" >&2
    exit 1
}
command -v clang >/dev/null 2>&1 ||
    missing clang "install it with: apt-get install clang lld wasi-libc libclang-rt-dev-wasm32"
command -v wasm-ld >/dev/null 2>&1 || missing wasm-ld "install it with: apt-get install lld"
[ -f /usr/lib/wasm32-wasi/libc.a ] || [ -n "${WASI_SYSROOT:-}" ] ||
    missing wasi-libc "install it with: apt-get install wasi-libc (or set WASI_SYSROOT)"
command -v wit-bindgen >/dev/null 2>&1 ||
    missing wit-bindgen "install it with: cargo install --locked wit-bindgen-cli@0.63.0 --no-default-features --features c"
command -v rustc >/dev/null 2>&1 || missing rustc "wasm-component-ld comes with Rust (rustup.rs)"
host="$(rustc -vV | sed -n 's/^host: //p')"
component_ld="$(rustc --print sysroot)/lib/rustlib/$host/bin/wasm-component-ld"
[ -x "$component_ld" ] ||
    missing wasm-component-ld "install Rust's wasm32-wasip2 target: rustup target add wasm32-wasip2"

sysroot=""
[ -n "${WASI_SYSROOT:-}" ] && sysroot="--sysroot=$WASI_SYSROOT"

rm -rf gen
wit-bindgen c wit --world policy --out-dir gen >/dev/null
# -Wall -Werror: a C plugin judges hostile input; warnings are bugs here.
cflags="--target=wasm32-wasi $sysroot -O2 -Wall -Wextra -Werror -Wno-unused-parameter"
clang --target=wasm32-wasi $sysroot -O2 -c gen/policy.c -o gen/policy.o
clang $cflags -c plugin.c -o gen/plugin.o
# A reactor (no main): the host calls the exports. Function names stay in the component, so a
# trap's record can say where it happened.
clang --target=wasm32-wasi $sysroot -O2 -mexec-model=reactor \
    -fuse-ld="$component_ld" -Wl,--wasm-ld-path="$(command -v wasm-ld)" \
    gen/policy.o gen/plugin.o gen/policy_component_type.o -o {{name}}.wasm
echo "built $(pwd)/{{name}}.wasm"
