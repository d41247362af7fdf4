#!/usr/bin/env bash
# Builds diskpulse and runs every test: format check, the whole suite with warnings as errors,
# then the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test
bash scripts/format.sh --check
jobs=$(nproc)
status=0
for preset in ci asan; do
        echo "== $preset: configure and build"
        # The guest kernel matrix (tests/vm, label matrix) downloads Debian kernels, the arm64
        # cross build (tests/package, label arm64) needs the packages of `deps.sh arm64`, and the
        # Debian 11 package (tests/package, label bullseye) downloads Debian 11 and builds in it,
        # and the upgrade round trip (label upgrade) takes 8 minutes: all off here even in a build
        # directory where they were once turned on, since options stay in the cache.
        cmake --preset "$preset" -DDISKPULSE_MATRIX=OFF -DDISKPULSE_ARM64=OFF -DDISKPULSE_BULLSEYE=OFF \
                -DDISKPULSE_UPGRADE=OFF >/dev/null
        cmake --build --preset "$preset" -j"$jobs"
        echo "== $preset: tests"
        ctest --preset "$preset" -j"$jobs" || status=1
        python3 scripts/skips.py "build-$preset"
done
exit $status
