#!/usr/bin/env bash
# A profile-guided release build of the daemon (PGO): an instrumented build is run on a training
# mix of traffic (scripts/pgo-train.py: every door, streamed and not, the tenants' plugins, the
# check API, malformed bodies), then the release build is compiled with that profile, so that
# LLVM lays hot code out together and inlines and splits by what runs. The data plane is bound by
# fetching code, not by computing: see BENCHMARKS.md §26 for what this saves.
#
# Usage: scripts/pgo-build.sh [OUT]   (default target/pgo/railyard)
# Needs rustup's llvm-tools component (llvm-profdata), added here when missing. Takes about twice a
# release build: the instrumented build (without LTO), a few seconds of training, the PGO build.
# The plugins are built as usual (host/build.rs); the training reuses the compiled-plugin cache.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/pgo/railyard}"
work=target/pgo
host=$(rustc -vV | sed -n 's/^host: //p')
sysroot=$(rustc --print sysroot)
profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
    rustup component add llvm-tools
fi
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python

rm -rf "$work/profiles" "$work/merged.profdata"
mkdir -p "$work/profiles"
profiles="$PWD/$work/profiles"
# --target: the flags then apply to the daemon only, not to build scripts and proc macros.
# No LTO for the instrumented build: it only has to run, and LTO doubles its build time.
echo "==> instrumented build"
RUSTFLAGS="-Cprofile-generate=$profiles" cargo build --release --locked -p railyard \
    --target "$host" --target-dir "$work/gen" --config 'profile.release.lto=false' \
    --config 'profile.release.codegen-units=16'
echo "==> training"
$python scripts/pgo-train.py "$work/gen/$host/release/railyard" "$profiles"
"$profdata" merge -o "$work/merged.profdata" "$profiles"
echo "==> optimised build"
RUSTFLAGS="-Cprofile-use=$PWD/$work/merged.profdata" cargo build --release --locked -p railyard \
    --target "$host" --target-dir "$work/use"
mkdir -p "$(dirname "$out")"
cp "$work/use/$host/release/railyard" "$out"
echo "PGO build: $out"
