#!/usr/bin/env bash
# Makes the files of the `railyard-keys` Secret (deploy/base/secrets/, never committed), once:
#   keys.toml             API keys (hashes only). One key is made for PRINCIPAL (default "app")
#                         and printed once: give it to the caller. Add more with
#                         `railyard keys new --principal NAME [--tenant T]`.
#   provenance-keys.toml  the keyring every replica signs and verifies tool-call ids with.
# Existing files are kept. Usage: deploy/secrets.sh [PRINCIPAL] [DIR]
set -euo pipefail
principal="${1:-app}"
dir="${2:-$(cd "$(dirname "$0")" && pwd)/base/secrets}"
mkdir -p "$dir"
umask 077
hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }

if [ ! -e "$dir/keys.toml" ]; then
    key="ry_$(hex 24)"
    digest="$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)"
    cat >"$dir/keys.toml" <<TOML
# Railyard API keys (SHA-256 hashes only). Add: railyard keys new --principal NAME [--tenant T]
[[keys]]
sha256 = "$digest"
principal = "$principal"
TOML
    echo "API key for principal '$principal' (shown once, not stored): $key"
else
    echo "kept $dir/keys.toml"
fi

if [ ! -e "$dir/provenance-keys.toml" ]; then
    cat >"$dir/provenance-keys.toml" <<TOML
# Signs the tool-call ids the daemon relays; shared by every replica. Rotate: add a new key
# first (it signs), drop the old one once its ids are older than [provenance] max_age_s.
[[keys]]
id = "k$(date +%Y%m%d)"
secret = "$(hex 32)"
TOML
    echo "made $dir/provenance-keys.toml"
else
    echo "kept $dir/provenance-keys.toml"
fi
