#!/usr/bin/env bash
# The `index` stage on a `caseload corpus` disk (default 4 GiB): runs
# `caseload run --stages filesystem,index` RUNS times with a warm page cache
# (a fresh case each run) and reports, from run.json and the stage summary:
# the stage's peak RSS (bounded memory whatever the evidence size), MB/s of
# text indexed (extracted text bytes / stage wall time; also evidence bytes
# read per second), and the index's size as a share of the text. Medians
# over the runs, with min and max. Issue 52's memory goal compares two
# runs of it: `THREADS=16` at most 1.3x the peak RSS of `THREADS=2` (the
# thread count sets it, not the cores, so a 2-core machine measures it).
#
# Then the full-text engine choice: `cargo bench --bench index_extract --
# engine` indexes the same 16 MiB of corpus text with tantivy (one
# indexing thread) and with SQLite FTS5 (unicode61) in one criterion run,
# and prints both throughputs and their ratio.
#
# Usage: benches/scripts/index-bench.sh [WORKDIR]
#   WORKDIR   scratch directory (default: a new one under ${TMPDIR:-/tmp})
# Environment:
#   SIZE      corpus disk size (default 4GiB)
#   RUNS      timed runs (default 3)
#   THREADS   --threads for the run (default: all cores)
#   ENGINES   0 to skip the tantivy/FTS5 criterion comparison
set -euo pipefail

cd "$(dirname "$0")/../.."
SIZE=${SIZE:-4GiB}
RUNS=${RUNS:-3}
THREADS=${THREADS:-$(nproc)}
ENGINES=${ENGINES:-1}

if ! command -v jq >/dev/null; then
    echo "SKIPPED index-bench: \`jq\` is not installed" >&2
    exit 0
fi

WORK=${1:-$(mktemp -d "${TMPDIR:-/tmp}/index-bench.XXXXXX")}
mkdir -p "$WORK"
cargo build --release --quiet --bin caseload -p caseload
TARGET=${CARGO_TARGET_DIR:-target}
CASELOAD="$TARGET/release/caseload"

IMAGE="$WORK/corpus/image.dd"
if [ ! -f "$IMAGE" ]; then
    "$CASELOAD" corpus --out "$WORK/corpus" --size "$SIZE" --seed 1 --decoys 0 >/dev/null
fi
echo "image $IMAGE ($(du -h --apparent-size "$IMAGE" | cut -f1)), $THREADS threads, $RUNS runs"

: >"$WORK/runs.tsv"
for i in $(seq 1 "$RUNS"); do
    CASE="$WORK/case"
    rm -rf "$CASE"
    mkdir -p "$CASE"
    "$CASELOAD" run --evidence "$IMAGE" --stages filesystem,index --cache warm \
        --threads "$THREADS" --database "$CASE" --case "$CASE" --temp "$CASE" >/dev/null
    jq -r '.stages[] | select(.name == "index") |
        [.wall_seconds, .peak_rss_bytes, .peak_rss_scope, .summary.bytes,
         .summary.details.text_bytes, .summary.details.index_bytes,
         .summary.details.items_indexed, .summary.details.documents] | @tsv' \
        "$CASE/run.json" | tee -a "$WORK/runs.tsv" |
        awk -F'\t' -v i="$i" '{printf "run %d: %.1f s, peak RSS %.0f MiB (%s), text %.0f MB, index %.0f MB\n",
            i, $1, $2 / 1048576, $3, $5 / 1e6, $6 / 1e6}'
done

sort -t$'\t' -k1,1g "$WORK/runs.tsv" | awk -F'\t' -v n="$RUNS" '
    { wall[NR] = $1; rss = ($2 > rss ? $2 : rss); scope = $3; ev = $4; text = $5; idx = $6; items = $7; docs = $8 }
    END {
        med = wall[int((n + 1) / 2)]
        printf "index stage, median of %d: %.1f s (min %.1f, max %.1f)\n", n, med, wall[1], wall[n]
        printf "  items %d, documents %d, evidence bytes read %.0f MB\n", items, docs, ev / 1e6
        printf "  text indexed: %.0f MB -> %.1f MB/s of text (%.1f MB/s of evidence)\n", text / 1e6, text / 1e6 / med, ev / 1e6 / med
        printf "  index size: %.0f MB = %.2f of the text\n", idx / 1e6, idx / text
        printf "  peak RSS (max over runs, %s scope): %.0f MiB\n", scope, rss / 1048576
    }'

if [ "$ENGINES" = 1 ]; then
    echo "full-text engines, same 16 MiB of corpus text (criterion, benches/index_extract.rs):"
    cargo bench --quiet --bench index_extract -- engine 2>/dev/null | tee "$WORK/engines.txt" |
        grep -E '^engine/|thrpt' || true
    awk '/^engine\/tantivy/ {e = "t"} /^engine\/sqlite/ {e = "s"}
         /thrpt:/ { v = $(NF-3); u = $(NF-2); if (u == "GiB/s") v *= 1024; if (u == "KiB/s") v /= 1024;
                    if (e == "t") t = v; if (e == "s") s = v }
         END { if (t && s) printf "  tantivy %.1f MiB/s vs FTS5 %.1f MiB/s per thread: %.1fx\n", t, s, t / s }' \
        "$WORK/engines.txt"
fi
