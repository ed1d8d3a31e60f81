#!/usr/bin/env bash
# Side-by-side benchmark of caseload-fs's file-system walk against The Sleuth
# Kit's `fls -r -p` on the same FAT32 partition of a `caseload corpus` disk:
# both list every name (allocated and deleted, recursively) and print one
# line per record. caseload-fs runs as the crate's `fswalk` example, which
# also reads the partition table and prints each record's meta address,
# kind, size, escaped path and recovery state. Timed in one hyperfine run
# with a warm page cache (both read the same metadata; this measures parsing,
# not the disk). Prints the median of each tool, the ratio, and records/s.
#
# Usage: benches/scripts/fs-walk-bench.sh [WORKDIR]
#   WORKDIR   scratch directory (default: a new one under ${TMPDIR:-/tmp})
# Environment:
#   SIZE      corpus disk size (default 2GiB)
#   RUNS      timed runs per tool (default 10)
#   IMAGE     walk this raw image instead (its first partition, or the whole
#             image when it has no partition table)
set -euo pipefail

cd "$(dirname "$0")/../.."
SIZE=${SIZE:-2GiB}
RUNS=${RUNS:-10}

for tool in hyperfine fls mmls jq; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIPPED fs-walk-bench: \`$tool\` is not installed" >&2
        exit 0
    fi
done

WORK=${1:-$(mktemp -d "${TMPDIR:-/tmp}/fs-walk-bench.XXXXXX")}
mkdir -p "$WORK"
cargo build --release --quiet --bin caseload -p caseload
cargo build --release --quiet -p caseload-fs --example fswalk
TARGET=${CARGO_TARGET_DIR:-target}
FSWALK="$TARGET/release/examples/fswalk"

if [ -z "${IMAGE:-}" ]; then
    IMAGE="$WORK/corpus/image.dd"
    if [ ! -f "$IMAGE" ]; then
        "$TARGET/release/caseload" corpus --out "$WORK/corpus" --size "$SIZE" --seed 1 --decoys 0 >/dev/null
    fi
fi
# First partition's start sector (0 when there is no partition table).
SECTOR=$( (mmls "$IMAGE" 2>/dev/null || true) | awk '$2 ~ /^[0-9][0-9][0-9]:[0-9][0-9][0-9]$/ {print $3 + 0; exit}')
SECTOR=${SECTOR:-0}

RECORDS=$("$FSWALK" "$IMAGE" | grep -c '^  [0-9]')
echo "image $IMAGE, partition at sector $SECTOR, $RECORDS records"

hyperfine --warmup 2 --runs "$RUNS" --export-json "$WORK/walk.json" \
    -n caseload-fs "$FSWALK $IMAGE > /dev/null" \
    -n fls "fls -r -p -o $SECTOR $IMAGE > /dev/null" >/dev/null

ours=$(jq '.results[] | select(.command=="caseload-fs") | .median' "$WORK/walk.json")
tsk=$(jq '.results[] | select(.command=="fls") | .median' "$WORK/walk.json")
awk -v o="$ours" -v t="$tsk" -v n="$RECORDS" 'BEGIN {
    printf "caseload-fs walk: median %.1f ms (%.0f records/s)\n", o * 1000, n / o
    printf "fls -r -p:        median %.1f ms (%.0f records/s)\n", t * 1000, n / t
    printf "ratio fls/caseload-fs: %.1fx\n", t / o
}'
