#!/usr/bin/env bash
# Side-by-side benchmark of `caseload convert` against libewf's
# `ewfacquirestream`: the same raw input converted to E01 at `fast` and at
# `best`, same chunk size (64 sectors), same segment size (1500 MiB), both
# computing MD5 and SHA-1, timed in the same run, the two tools alternating
# run by run so both see the same background load on a shared machine.
# Prints the median wall time and CPU time of each tool, the time ratio
# (goal: caseload at least 4x faster on a 2-core machine), the CPU ratio
# (the same for CPU seconds, which background load does not inflate) and the
# size ratio of the E01 sets (goal: within 3 % of libewf's at the same
# level).
#
# Usage: benches/scripts/convert-bench.sh [WORKDIR]
#   WORKDIR   scratch directory (default: a new one under ${TMPDIR:-/tmp});
#             needs about 10 GiB free at the default size.
# Environment:
#   SIZE      input size (default 4GiB)
#   RUNS      timed runs per tool and level (default 3)
#   LEVELS    levels to compare (default "fast best")
#   CASELOAD  caseload binary (default: built with cargo build --release)
#   INPUT     use this raw image instead of making one
#
# The input is `caseload corpus --size SIZE --seed 1` (a partitioned FAT
# disk of realistic, partly incompressible files). If that command fails,
# the script falls back to a mixed raw input made here (system files,
# random data and zero runs) and says so.
set -euo pipefail

cd "$(dirname "$0")/../.."
SIZE=${SIZE:-4GiB}
RUNS=${RUNS:-3}
LEVELS=${LEVELS:-fast best}
SEGMENT_BYTES=$((1500 * 1024 * 1024))

for tool in ewfacquirestream /usr/bin/time; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIPPED convert-bench: \`$tool\` is not installed" >&2
        exit 0
    fi
done

if [ -z "${CASELOAD:-}" ]; then
    cargo build --release --quiet
    CASELOAD="${CARGO_TARGET_DIR:-target}/release/caseload"
fi

WORK=${1:-$(mktemp -d "${TMPDIR:-/tmp}/convert-bench.XXXXXX")}
mkdir -p "$WORK/out"
echo "work directory: $WORK"

if [ -n "${INPUT:-}" ]; then
    echo "input: $INPUT (given)"
elif [ -f "$WORK/corpus/image.dd" ] || "$CASELOAD" corpus --out "$WORK/corpus" --size "$SIZE" --seed 1 >/dev/null; then
    INPUT="$WORK/corpus/image.dd"
    echo "input: caseload corpus --size $SIZE --seed 1 ($INPUT)"
else
    # Fallback: a third each of real system files (libraries, binaries,
    # documentation), pseudo-random bytes and zeros, interleaved in 64 MiB
    # pieces.
    INPUT="$WORK/mixed.raw"
    bytes=$(numfmt --from=iec-i "${SIZE%B}")
    tar cf - /usr/lib /usr/share /usr/bin 2>/dev/null | head -c $((bytes / 3)) > "$WORK/system.part" || true
    : > "$INPUT"
    i=0
    while [ "$(stat -c %s "$INPUT")" -lt "$bytes" ]; do
        case $((i % 3)) in
            0) dd if="$WORK/system.part" bs=1M skip=$((i / 3 * 64)) count=64 status=none >> "$INPUT" ;;
            1) head -c $((64 << 20)) /dev/urandom >> "$INPUT" ;;
            2) head -c $((64 << 20)) /dev/zero >> "$INPUT" ;;
        esac
        i=$((i + 1))
    done
    truncate -s "$bytes" "$INPUT"
    rm -f "$WORK/system.part"
    echo "input: caseload corpus failed; made a mixed raw input instead ($INPUT: system files, random, zeros)"
fi
input_bytes=$(stat -c %s "$INPUT")
echo "input size: $input_bytes bytes; $(nproc) cores; $RUNS runs per tool and level; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo

set_size() { cat "$@" 2>/dev/null | wc -c; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Run "$@" once after clearing its outputs and flushing dirty pages; append
# "wall cpu" (seconds) to the file named by $TIMES.
timed() {
    rm -f "$WORK/out/$OUTNAME".E*
    sync
    /usr/bin/time -o "$WORK/time.tmp" -f "%e %U %S" "$@" > /dev/null
    awk '{ print $1, $2 + $3 }' "$WORK/time.tmp" >> "$TIMES"
}

summary=()
for level in $LEVELS; do
    : > "$WORK/$level.caseload"
    : > "$WORK/$level.libewf"
    for run in $(seq "$RUNS"); do
        TIMES="$WORK/$level.caseload" OUTNAME=cl timed \
            "$CASELOAD" convert "$INPUT" --to e01 --out "$WORK/out/cl" --compression "$level" \
            --chunk-sectors 64 --segment-size "$SEGMENT_BYTES" --force
        TIMES="$WORK/$level.libewf" OUTNAME=lib timed \
            sh -c "exec ewfacquirestream -q -c $level -b 64 -f encase6 -d sha1 -S $SEGMENT_BYTES -t '$WORK/out/lib' < '$INPUT'"
        echo "$level run $run: caseload $(tail -1 "$WORK/$level.caseload")  libewf $(tail -1 "$WORK/$level.libewf")  (wall s, CPU s; load $(cut -d' ' -f1 /proc/loadavg))"
    done
    t_cl=$(cut -d' ' -f1 "$WORK/$level.caseload" | median)
    t_lib=$(cut -d' ' -f1 "$WORK/$level.libewf" | median)
    c_cl=$(cut -d' ' -f2 "$WORK/$level.caseload" | median)
    c_lib=$(cut -d' ' -f2 "$WORK/$level.libewf" | median)
    s_cl=$(set_size "$WORK"/out/cl.E*)
    s_lib=$(set_size "$WORK"/out/lib.E*)
    line=$(awk -v l="$level" -v tc="$t_cl" -v tl="$t_lib" -v sc="$s_cl" -v sl="$s_lib" -v n="$input_bytes" \
        -v cc="$c_cl" -v cl="$c_lib" 'BEGIN {
        printf "%-5s caseload %7.2f s (%6.1f MB/s, %.1f CPU s, %.0f bytes)  libewf %7.2f s (%6.1f MB/s, %.1f CPU s, %.0f bytes)  time ratio %.2fx  CPU ratio %.2fx  size ratio %.4f",
            l, tc, n / tc / 1e6, cc, sc, tl, n / tl / 1e6, cl, sl, tl / tc, cl / cc, sc / sl }')
    summary+=("$line")
    rm -f "$WORK"/out/*.E*
done
echo
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "medians of $RUNS runs (time ratio = libewf / caseload wall time; CPU ratio = the same for CPU seconds; size ratio = caseload / libewf):"
printf '%s\n' "${summary[@]}"
