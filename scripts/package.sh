#!/usr/bin/env bash
# Builds the Debian package: build/diskpulse_<version>_<arch>.deb (installs what is missing first).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh package
cmake --preset default -DDISKPULSE_TESTS=OFF >/dev/null
cmake --build --preset default -j"$(nproc)"
rm -f build/diskpulse_*.deb
(cd build && cpack -G DEB >/dev/null)
ls build/diskpulse_*.deb
