#!/usr/bin/env bash
# Formats the C sources with .clang-format; with --check only reports files that differ.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h' 2>/dev/null || find lib collectors exporters privsep daemon tests -name '*.[ch]')
[ ${#files[@]} -eq 0 ] && exit 0
if [ "${1:-}" = --check ]; then
        clang-format --dry-run --Werror "${files[@]}"
        echo "format: ${#files[@]} files checked"
else
        clang-format -i "${files[@]}"
fi
