#!/usr/bin/env bash
# Builds diskpulse and runs it in the foreground on :9477 (extra arguments are passed on).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh build
# Tests are built by scripts/test.sh; building only the daemon needs fewer packages.
cmake --preset default -DDISKPULSE_TESTS=OFF >/dev/null
cmake --build --preset default -j"$(nproc)"
args=()
# Without root the default state directory (/var/lib/diskpulse) is not writable: keep it here.
[ "$(id -u)" -ne 0 ] && args+=("--state.directory=$PWD/build/state")
exec ./build/diskpulse "${args[@]}" "$@"
