#!/usr/bin/env bash
# Builds the container image (Dockerfile) and smoke-tests it with podman: the runtime stage with
# the daemon and plugins this checkout built (`--build-arg ARTIFACTS=prebuilt`; building from
# source inside the image takes ~15 minutes on 2 cores), a run as the non-root user with the keys
# mounted, /readyz, an authenticated chat through the demo backend, plugins loaded from the baked
# cache (no compile at start), SIGTERM and exit 0.
#
# Where the machine cannot run containers (no podman and no apt-get, no registry for the base
# image and no debootstrap, a runtime that fails) it says exactly why and exits 0: CI reports it,
# it never skips silently. A smoke test that runs and fails exits 1.
#
# Usage: scripts/container-smoke.sh [RAILYARD_BINARY]   (default target/debug/railyard)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/target/debug/railyard}"
PLUGINS="$ROOT/target/plugins"
WORK="$(mktemp -d)"
IMAGE=localhost/railyard:smoke
NAME="railyard-smoke-$$"
unavailable() {
    echo "CONTAINER SMOKE TEST NOT RUN: containers unavailable on this machine: $*"
    exit 0
}
cleanup() {
    podman rm -f "$NAME" >/dev/null 2>&1 || true
    podman rmi -f "$IMAGE" >/dev/null 2>&1 || true
    podman image prune -f >/dev/null 2>&1 || true
    [ -n "${BACKEND_PID:-}" ] && kill "$BACKEND_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
say() { printf 'container-smoke: %s\n' "$*"; }

[ -x "$BIN" ] || { echo "container-smoke: $BIN is missing (build first)" >&2; exit 1; }
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
need=()
command -v podman >/dev/null 2>&1 || need+=(podman)
# Debian 12's default runtime (crun 1.8) cannot create containers on cgroup v1/hybrid hosts.
command -v runc >/dev/null 2>&1 || need+=(runc)
if [ ${#need[@]} -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || unavailable "${need[*]} not installed and no apt-get"
    say "installing ${need[*]}"
    $SUDO apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 \
        || { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq "${need[@]}" >/dev/null 2>&1; } \
        || unavailable "apt-get install ${need[*]} failed"
fi

# runc, and rlimits no higher than this shell's hard limits (a host without CAP_SYS_RESOURCE
# refuses to raise them for the container).
nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=1048576
nproc=$(ulimit -Hu); { [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; } && nproc=32768
cat >"$WORK/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$WORK/containers.conf"
err=$(timeout 60 podman info 2>&1 >/dev/null) || unavailable "podman info failed: $(echo "$err" | tail -1)"

# The runtime base image: pulled, or made with debootstrap where no registry is reachable.
BASE=docker.io/library/debian:bookworm-slim
if ! podman image exists "$BASE"; then
    if ! timeout 120 podman pull -q "$BASE" >/dev/null 2>"$WORK/pull.err"; then
        say "cannot pull $BASE ($(tail -1 "$WORK/pull.err")); making it with debootstrap"
        if ! command -v debootstrap >/dev/null 2>&1; then
            $SUDO apt-get install -y -qq debootstrap >/dev/null 2>&1 || unavailable "no registry access and debootstrap not installable"
        fi
        timeout 600 $SUDO debootstrap --variant=minbase bookworm "$WORK/rootfs" http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 \
            || unavailable "no registry access and debootstrap failed: $(tail -1 "$WORK/debootstrap.log")"
        tar -C "$WORK/rootfs" -c . | podman import -q - "$BASE" >/dev/null
        $SUDO rm -rf "$WORK/rootfs"
    fi
fi

# The context of a prebuilt image: the daemon, the bundled plugins, deploy/.
ctx="$WORK/ctx"
mkdir -p "$ctx/plugins" "$ctx/deploy/base"
# Without its line tables (a debug build keeps them for backtraces).
strip -o "$ctx/railyard" "$BIN" 2>/dev/null || cp "$BIN" "$ctx/railyard"
for p in allowlist flow llama31_compat normalise pii_filter schema_validator text_tool_calls tool_linkage; do
    cp "$PLUGINS/wasm32-wasip2/release/$p.wasm" "$ctx/plugins/"
done
cp "$PLUGINS/components/prompt-guard.wasm" "$PLUGINS/components/tool-limits.wasm" "$ctx/plugins/"
cp "$ROOT/deploy/base/railyard.toml" "$ctx/deploy/base/"
cp "$ROOT/deploy/secrets.sh" "$ctx/deploy/"
cp "$ROOT/Dockerfile" "$ctx/"
say "building $IMAGE (runtime stage, prebuilt artifacts)"
started=$(date +%s)
timeout 900 podman build -q --build-arg ARTIFACTS=prebuilt -t "$IMAGE" "$ctx" >"$WORK/build.log" 2>&1 \
    || { cat "$WORK/build.log"; echo "container-smoke: FAILED: podman build" >&2; exit 1; }
say "built in $(( $(date +%s) - started )) s, $(podman image inspect "$IMAGE" --format '{{.Size}}' | awk '{printf "%.0f MB", $1/1e6}')"

# Keys for the run; a demo backend on the host.
"$ROOT/deploy/secrets.sh" smoke "$WORK/keys" >"$WORK/keys.out"
KEY=$(sed -n 's/.*(shown once, not stored): //p' "$WORK/keys.out")
"$BIN" demo-backend --listen 127.0.0.1:0 >"$WORK/backend.out" 2>/dev/null &
BACKEND_PID=$!
for _ in $(seq 50); do grep -q listening "$WORK/backend.out" && break; sleep 0.1; done
BACKEND=$(sed -n 's/.*listening on //p' "$WORK/backend.out")
port=$(( 20000 + RANDOM % 20000 ))
podman run -d --name "$NAME" --network host -v "$WORK/keys:/etc/railyard/keys:ro,U" "$IMAGE" \
    serve --config /etc/railyard/config/railyard.toml --listen "127.0.0.1:$port" --backend "$BACKEND" >/dev/null
fail() {
    echo "container-smoke: FAILED: $*" >&2
    podman logs "$NAME" 2>&1 | tail -20 >&2
    exit 1
}
for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:8090/readyz" >/dev/null 2>&1 && break
    sleep 0.2
done
curl -fsS "http://127.0.0.1:8090/readyz" >/dev/null || fail "/readyz did not answer on the admin port"
reply=$(curl -sS "http://127.0.0.1:$port/v1/chat/completions" -H "Authorization: Bearer $KEY" \
    -H 'Content-Type: application/json' -d '{"model":"m","messages":[{"role":"user","content":"hello, my SSN is 536-22-1234"}]}')
echo "$reply" | grep -q '"You said: hello' || fail "unexpected chat reply: $reply"
# pii (reversible, as the image's config runs it) hid the SSN from the model and gave the
# client's own value back in the reply: the input rail modified the request.
echo "$reply" | grep -q '"input":"modify"' || fail "the pii policy did not run: $reply"
echo "$reply" | grep -q '536-22-1234' || fail "the reply did not get the caller's own value back: $reply"
status=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
    -H 'Content-Type: application/json' -d '{"model":"m","messages":[{"role":"user","content":"hi"}]}')
[ "$status" = 401 ] || fail "a call without a key got $status, not 401"
user=$(podman exec "$NAME" /usr/bin/id -u)
[ "$user" = 10001 ] || fail "the daemon runs as uid $user, not 10001"
logs=$(podman logs "$NAME" 2>&1)
grep -q 'policy set loaded' <<<"$logs" || fail "no 'policy set loaded' line"
grep -q 'compiling plugin' <<<"$logs" && fail "plugins were compiled at start: the baked cache was not used"
grep -q 'no system CA certificates' <<<"$logs" && fail "no CA certificates in the image: https backends would fail"
podman stop -t 30 "$NAME" >/dev/null
code=$(podman inspect "$NAME" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] || fail "exit code $code after SIGTERM"
say "passed: built, served /readyz and an authenticated chat with the pii policy as uid 10001 from the baked cache, refused a call without a key, exited 0 on SIGTERM"
