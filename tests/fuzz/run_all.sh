#!/usr/bin/env bash
# Runs every fuzz target (tests/fuzz/fuzz_*.c) with libFuzzer to a number of executions, one at a
# time under nice -n 19 in a single process, and prints one line per target: executions, time,
# executions per second, corpus, coverage and crashes. Exits 1 when a target crashed (the input
# is kept as OUT/NAME/crash-*; add it to tests/fuzz/corpus/NAME with the fix).
#
#   bash tests/fuzz/run_all.sh [-n RUNS] [-b BUILD_DIR] [-o OUT_DIR] [-t MAX_SECONDS] [-c] [TARGET...]
#
# RUNS defaults to 10000000. BUILD_DIR (default build-fuzz) is configured with clang, libFuzzer,
# ASan and UBSan when it does not exist, and the targets are (re)built. Each target fuzzes a work
# corpus OUT_DIR/NAME/corpus (default OUT_DIR: BUILD_DIR/fuzz-runs) seeded from the checked-in
# tests/fuzz/corpus/NAME, which is only read. TARGET names a target (fuzz_expo or expo); none
# means all. -t stops a target after MAX_SECONDS even if RUNS were not reached (0: no limit).
# -c only measures source coverage: the replay drivers built with clang's -fprofile-instr-generate
# in BUILD_DIR-cov run the work corpus and the checked-in one, and llvm-cov's line coverage of
# every source file they reach goes to OUT_DIR/NAME/coverage.txt (the files of the code under
# test printed).
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=10000000
build=build-fuzz
out=
max_time=0
coverage=0
while getopts "n:b:o:t:ch" opt; do
        case $opt in
        c) coverage=1 ;;
        n) runs=$OPTARG ;;
        b) build=$OPTARG ;;
        o) out=$OPTARG ;;
        t) max_time=$OPTARG ;;
        *)
                sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
                exit 2
                ;;
        esac
done
shift $((OPTIND - 1))
out=${out:-$build/fuzz-runs}

if [ $# -gt 0 ]; then
        targets=()
        for t in "$@"; do targets+=("fuzz_${t#fuzz_}"); done
else
        mapfile -t targets < <(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')
fi
for t in "${targets[@]}"; do
        [ -f "tests/fuzz/$t.c" ] || { echo "run_all: no fuzz target tests/fuzz/$t.c" >&2; exit 2; }
done

command -v clang >/dev/null || { echo "run_all: clang is needed (apt-get install clang)" >&2; exit 1; }

if [ "$coverage" = 1 ]; then
        cov=$build-cov
        if [ ! -f "$cov/CMakeCache.txt" ]; then
                CC=clang CFLAGS="-fprofile-instr-generate -fcoverage-mapping" cmake -S . -B "$cov" \
                        -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
        else
                cmake "$cov" >/dev/null
        fi
        nice -n 19 cmake --build "$cov" -j1 --target "${targets[@]}" >/dev/null
        for t in "${targets[@]}"; do
                name=${t#fuzz_}
                dir=$out/$name
                mkdir -p "$dir/corpus"
                rm -f "$dir"/cov-*.profraw
                for c in "$dir/corpus" "tests/fuzz/corpus/$name"; do
                        [ -n "$(ls -A "$c" 2>/dev/null)" ] || continue
                        LLVM_PROFILE_FILE="$dir/cov-%p.profraw" nice -n 19 "$cov/tests/$t" "$c" >/dev/null
                done
                llvm-profdata merge -sparse -o "$dir/cov.profdata" "$dir"/cov-*.profraw
                llvm-cov report "$cov/tests/$t" -instr-profile="$dir/cov.profdata" >"$dir/coverage.txt"
                echo "$t: line coverage by $(find "$dir/corpus" -type f | wc -l) + $(find \
                        "tests/fuzz/corpus/$name" -type f | wc -l) inputs (file, lines, missed, cover)"
                # The code under test: files outside tests/ with a line covered.
                # Columns: file, regions (3), functions (3), lines, missed lines, cover, branches (3).
                files=$(awk 'NR > 2 && $1 !~ /^(tests|-|TOTAL)/ && NF >= 13 && $8 != $9 { print $1 }' \
                        "$dir/coverage.txt")
                awk 'NR > 2 && $1 !~ /^(tests|-|TOTAL)/ && NF >= 13 && $8 != $9 {
                        printf "  %-32s %6s %6s %8s\n", $1, $8, $9, $10 }' "$dir/coverage.txt"
                # The functions it reaches (a line run), and how much of them it runs.
                # shellcheck disable=SC2086
                llvm-cov report "$cov/tests/$t" -instr-profile="$dir/cov.profdata" -show-functions \
                        $files >"$dir/functions.txt"
                awk 'NF == 10 && $5 ~ /^[0-9]+$/ && $1 != "TOTAL" && $6 < $5 {
                        n++; lines += $5; miss += $6 }
                     END { if (lines) printf "  reached functions: %d, their lines covered %d/%d (%.1f%%)\n",
                           n, lines - miss, lines, 100 * (lines - miss) / lines }' "$dir/functions.txt"
        done
        exit 0
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
        CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISKPULSE_FUZZ=ON \
                -DDISKPULSE_SANITIZE=ON >/dev/null
else
        cmake "$build" >/dev/null # new targets (the fuzz_*.c glob) and sources
fi
nice -n 19 cmake --build "$build" -j1 --target "${targets[@]}" >/dev/null

printf '%-18s %12s %8s %9s %7s %10s %6s %6s %s\n' target executions seconds exec/s units \
        corpus cov ft result
status=0
for t in "${targets[@]}"; do
        name=${t#fuzz_}
        dir=$out/$name
        mkdir -p "$dir/corpus"
        rm -f "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*
        extra=()
        [ "$max_time" != 0 ] && extra+=(-max_total_time="$max_time")
        start=$(date +%s.%N)
        rc=0
        nice -n 19 "$build/tests/$t" -runs="$runs" -print_final_stats=1 \
                -artifact_prefix="$dir/" "${extra[@]}" "$dir/corpus" "tests/fuzz/corpus/$name" \
                >"$dir/log" 2>&1 || rc=$?
        end=$(date +%s.%N)
        secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
        # The last status line: "#N DONE cov: C ft: F corp: U/SIZE ..." (or the last pulse).
        last=$(grep -E '^#[0-9]+' "$dir/log" | tail -1 || true)
        cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
        ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
        corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
        files=$(find "$dir/corpus" -type f | wc -l)
        crashes=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o \
                -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
        if [ "$rc" -eq 0 ] && [ "$crashes" -eq 0 ]; then
                result=ok
        else
                result="FAILED (exit $rc, $crashes inputs kept in $dir; see $dir/log)"
                status=1
        fi
        printf '%-18s %12s %8s %9s %7s %10s %6s %6s %s\n' "$t" "${execs:-?}" "$secs" \
                "${rate:-?}" "${corp%%/*}" "${corp##*/}" "${cov:-?}" "${ft:-?}" "$result"
        printf '  work corpus: %s files in %s\n' "$files" "$dir/corpus"
done
exit $status
