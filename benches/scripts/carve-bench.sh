#!/usr/bin/env bash
# Side-by-side benchmark of data carving: caseload's `carve` stage against
# foremost and scalpel on the same `caseload corpus` image, in one run, with
# an equivalent signature set (JPEG, PNG, GIF, BMP, PDF, ZIP incl. OOXML,
# SQLite, HTML, e-mail: caseload's built-ins; the same types as one
# scalpel/foremost signature file, written below, for the two peers). All
# three scan the whole image (caseload `scope = "image"`, meta carving off)
# and write their items to an output directory on the same file system;
# timed with hyperfine, warm page cache (this measures the carvers, not
# the disk).
#
# Each timed run writes into a new directory with a new name under a
# parent marked as a top of directory hierarchies (`chattr +T`), so that
# ext4's Orlov allocator places it in a block group of its own choosing
# (it hashes the new directory's name) rather than beside the run deleted
# just before. Why: without a journal, ext4 skips free inodes deleted in
# the last minutes, one buffer-cache look-up each, on every file it
# creates; reusing one output directory made each run create its files
# among the previous run's freed inodes, at 250-1000 us a file instead of
# ~25 us, growing run after run (a cost of deleting between runs, which a
# carver writing a new case never meets).
#
# Recall is measured against the corpus manifest's contiguous carvable
# items: an item counts when a carved file has its MD5 (for caseload also
# its offset and type, from the case database). Prints the median time of
# each tool, MB/s, recall, and the ratios against caseload.
#
# Usage: benches/scripts/carve-bench.sh [WORKDIR]
#   WORKDIR   scratch directory (default: a new one under ${TMPDIR:-/tmp});
#             the corpus is kept there and reused by later runs
# Environment:
#   SIZE      corpus disk size (default 2GiB)
#   RUNS      timed runs per tool (default 5)
#   ALIGNED   1: headers at sector starts only (foremost -q, scalpel -q 512,
#             caseload aligned = true); default 0 (every byte offset)
#   THREADS   caseload threads (default: every core)
#   CASELOAD  use this caseload binary instead of building one
set -euo pipefail

cd "$(dirname "$0")/../.."
SIZE=${SIZE:-2GiB}
RUNS=${RUNS:-5}
ALIGNED=${ALIGNED:-0}
THREADS=${THREADS:-$(nproc)}

for tool in hyperfine foremost scalpel jq sqlite3 md5sum; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIPPED carve-bench: \`$tool\` is not installed" >&2
        exit 0
    fi
done

WORK=${1:-$(mktemp -d "${TMPDIR:-/tmp}/carve-bench.XXXXXX")}
mkdir -p "$WORK"
if [ -z "${CASELOAD:-}" ]; then
    cargo build --release --quiet --bin caseload -p caseload
    CASELOAD=$(realpath "${CARGO_TARGET_DIR:-target}/release/caseload")
fi

IMAGE="$WORK/corpus/image.dd"
MANIFEST="$WORK/corpus/manifest.json"
if [ ! -f "$IMAGE" ]; then
    "$CASELOAD" corpus --out "$WORK/corpus" --size "$SIZE" --seed 11 --decoys 1000 >/dev/null
fi
BYTES=$(stat -c %s "$IMAGE")

# One signature file for both peers: the same types as caseload's
# built-ins, with the headers and footers of scalpel's own example
# configuration where it has them. Sizes are the built-ins' maxima.
CONF="$WORK/carve.conf"
cat > "$CONF" <<'EOF'
jpg   y   20000000    \xff\xd8\xff              \xff\xd9
png   y   20000000    \x89PNG\x0d\x0a\x1a\x0a   IEND\xae\x42\x60\x82
gif   y   5000000     GIF87a                    \x00\x3b
gif   y   5000000     GIF89a                    \x00\x3b
bmp   y   100000      BM??\x00\x00\x00\x00
pdf   y   50000000    %PDF-                     %%EOF\x0a    REVERSE
zip   y   50000000    PK\x03\x04                \x50\x4b\x05\x06
sqlite y  50000000    SQLite\x20format\x203\x00
htm   n   1000000     <html                     </html>
eml   n   1000000     From:                     \x0d\x0a\x0d\x0a\x0d\x0a
EOF

if [ "$ALIGNED" = 1 ]; then
    FOREMOST_Q="-q"
    SCALPEL_Q="-q 512"
    CL_ALIGNED=true
else
    FOREMOST_Q=""
    SCALPEL_Q=""
    CL_ALIGNED=false
fi
OUT="$WORK/out"
mkdir -p "$OUT"
if ! chattr +T "$OUT" 2>/dev/null; then
    echo "note: chattr +T failed on $OUT (not ext2/3/4?): runs may create files among the last run's freed inodes" >&2
fi
# The tools write through $OUT/<tool>, a link to a fresh directory.
fresh_outputs="rm -rf $OUT/run-* $OUT/caseload $OUT/foremost $OUT/scalpel; for t in caseload foremost scalpel; do d=$OUT/run-\$t-\$(date +%s%N); mkdir \$d; ln -s \$d $OUT/\$t; done"
CL_CMD="$CASELOAD run --evidence $IMAGE --database $OUT/caseload --case $OUT/caseload --temp $OUT/caseload --stages carve --cache warm --threads $THREADS --force --stage-option carve.scope=image --stage-option carve.meta=false --stage-option carve.aligned=$CL_ALIGNED"
FM_CMD="foremost $FOREMOST_Q -Q -c $CONF -o $OUT/foremost -i $IMAGE"
SC_CMD="scalpel $SCALPEL_Q -c $CONF -o $OUT/scalpel $IMAGE"

echo "image $IMAGE ($BYTES bytes), aligned=$ALIGNED, caseload threads=$THREADS, $RUNS runs each"
hyperfine --warmup 1 --runs "$RUNS" --export-json "$WORK/carve.json" \
    --prepare "$fresh_outputs" \
    -n caseload "$CL_CMD > /dev/null 2>&1" \
    -n foremost "$FM_CMD > /dev/null 2>&1" \
    -n scalpel "$SC_CMD > /dev/null 2>&1" >/dev/null

# The last timed run of each tool left its output: run them once more so
# all three outputs exist side by side (hyperfine's prepare cleared them).
eval "$fresh_outputs"
eval "$CL_CMD" >/dev/null 2>&1
eval "$FM_CMD" >/dev/null 2>&1
eval "$SC_CMD" >/dev/null 2>&1

# Recall against the manifest.
jq -r '.carvable[] | select(.contiguous) | .md5' "$MANIFEST" | sort -u > "$WORK/truth.md5"
TRUTH=$(wc -l < "$WORK/truth.md5")
recall_dir() {
    find -H "$1" -type f ! -name audit.txt -print0 | xargs -0 -r md5sum | awk '{print $1}' | sort -u |
        comm -12 - "$WORK/truth.md5" | wc -l
}
jq -r '.carvable[] | select(.contiguous) | "\(.offset) \(.type) \(.md5)"' "$MANIFEST" | sort > "$WORK/truth.items"
sqlite3 "$OUT/caseload/case.sqlite" \
    "SELECT offset || ' ' || type || ' ' || md5 FROM carved_items WHERE method = 'data'" | sort > "$WORK/caseload.items"
CL_RECALL=$(comm -12 "$WORK/truth.items" "$WORK/caseload.items" | wc -l)
CL_ITEMS=$(wc -l < "$WORK/caseload.items")
FM_RECALL=$(recall_dir "$OUT/foremost")
SC_RECALL=$(recall_dir "$OUT/scalpel")
FM_ITEMS=$(find -H "$OUT/foremost" -type f ! -name audit.txt | wc -l)
SC_ITEMS=$(find -H "$OUT/scalpel" -type f ! -name audit.txt | wc -l)

median() { jq ".results[] | select(.command==\"$1\") | .median" "$WORK/carve.json"; }
CL=$(median caseload)
FM=$(median foremost)
SC=$(median scalpel)
awk -v cl="$CL" -v fm="$FM" -v sc="$SC" -v b="$BYTES" -v t="$TRUTH" \
    -v clr="$CL_RECALL" -v fmr="$FM_RECALL" -v scr="$SC_RECALL" \
    -v cli="$CL_ITEMS" -v fmi="$FM_ITEMS" -v sci="$SC_ITEMS" 'BEGIN {
    printf "%-9s %9s %9s %15s %8s\n", "tool", "median s", "MB/s", "recall", "items"
    printf "%-9s %9.2f %9.0f %8d/%d %5.1f%% %8d\n", "caseload", cl, b / cl / 1e6, clr, t, 100 * clr / t, cli
    printf "%-9s %9.2f %9.0f %8d/%d %5.1f%% %8d\n", "foremost", fm, b / fm / 1e6, fmr, t, 100 * fmr / t, fmi
    printf "%-9s %9.2f %9.0f %8d/%d %5.1f%% %8d\n", "scalpel", sc, b / sc / 1e6, scr, t, 100 * scr / t, sci
    best = fm < sc ? fm : sc
    printf "ratios: foremost/caseload %.1fx, scalpel/caseload %.1fx, faster peer/caseload %.1fx\n", fm / cl, sc / cl, best / cl
}'
