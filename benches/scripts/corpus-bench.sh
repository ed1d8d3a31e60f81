#!/usr/bin/env bash
# corpus-gen throughput and memory, side by side with dd.
#
# In one run, on the same file system: generate a SIZE corpus with
# `caseload corpus` and write SIZE of zeros with `dd bs=1M conv=fsync`
# (caseload also fsyncs its image), RUNS times alternately. Prints each
# throughput, the medians, the ratio caseload/dd (goal >= 0.5) and
# caseload's peak RSS. Then checks memory at a much larger size with the
# hidden --discard-image option (all bytes generated and hashed, none
# written), since free disk rarely holds TiB: peak RSS must stay flat.
#
# Usage: benches/scripts/corpus-bench.sh [DIR]
#   DIR   scratch directory on the file system to measure (default:
#         target/corpus-bench under the checkout)
# Environment: SIZE (4GiB), RUNS (3), LARGE (64GiB; e.g. 3TiB to cross
#   the GPT switch, takes hours), THREADS (all cores), CASELOAD (binary).
# Needs GNU time (/usr/bin/time, Debian package `time`).
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE=${SIZE:-4GiB}
RUNS=${RUNS:-3}
LARGE=${LARGE:-64GiB}
DIR=${1:-$PWD/target/corpus-bench}
THREADS=${THREADS:-$(nproc)}
if [ -z "${CASELOAD:-}" ]; then
    cargo build --release --quiet
    CASELOAD=${CARGO_TARGET_DIR:-$PWD/target}/release/caseload
fi
if [ ! -x /usr/bin/time ]; then
    echo "needs GNU time: apt-get install time" >&2
    exit 1
fi
mkdir -p "$DIR"
bytes=$(python3 -c "
import re,sys
m=re.fullmatch(r'(\d+)(KiB|MiB|GiB|TiB)?','$SIZE')
print(int(m.group(1))*{None:1,'KiB':1<<10,'MiB':1<<20,'GiB':1<<30,'TiB':1<<40}[m.group(2)])")
mib=$((bytes / 1048576))

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
secs() { awk -F: '/Elapsed \(wall clock\)/ {n=split($0,p,": "); t=p[n]; k=split(t,q,":"); s=0; for(i=1;i<=k;i++) s=s*60+q[i]; print s}' "$1"; }
rss() { awk '/Maximum resident set size/ {print $NF}' "$1"; }

echo "corpus-bench: $SIZE in $DIR, $RUNS runs, $THREADS threads, $(nproc) cores"
: > "$DIR/caseload.tp"; : > "$DIR/dd.tp"; : > "$DIR/rss"
for i in $(seq 1 "$RUNS"); do
    rm -rf "$DIR/corpus" "$DIR/zero.bin"
    sync
    /usr/bin/time -v -o "$DIR/time.txt" "$CASELOAD" corpus --out "$DIR/corpus" \
        --size "$SIZE" --seed "$i" --threads "$THREADS" >/dev/null
    t=$(secs "$DIR/time.txt")
    tp=$(awk -v b="$bytes" -v t="$t" 'BEGIN {printf "%.1f", b / t / 1e6}')
    echo "$tp" >> "$DIR/caseload.tp"
    rss "$DIR/time.txt" >> "$DIR/rss"
    rm -rf "$DIR/corpus"
    sync
    start=$(date +%s.%N)
    dd if=/dev/zero of="$DIR/zero.bin" bs=1M count="$mib" conv=fsync status=none
    end=$(date +%s.%N)
    dtp=$(awk -v b="$bytes" -v s="$start" -v e="$end" 'BEGIN {printf "%.1f", b / (e - s) / 1e6}')
    echo "$dtp" >> "$DIR/dd.tp"
    rm -f "$DIR/zero.bin"
    echo "run $i: caseload corpus $tp MB/s (${t}s, peak RSS $(tail -1 "$DIR/rss") KiB), dd $dtp MB/s"
done
c=$(median < "$DIR/caseload.tp")
d=$(median < "$DIR/dd.tp")
r=$(median < "$DIR/rss")
echo "median: caseload corpus $c MB/s, dd $d MB/s, ratio $(awk -v c="$c" -v d="$d" 'BEGIN {printf "%.2f", c / d}') (goal >= 0.5), peak RSS $r KiB"

echo "memory at $LARGE (image bytes discarded, everything else computed):"
/usr/bin/time -v -o "$DIR/time-large.txt" "$CASELOAD" corpus --out "$DIR/large" \
    --size "$LARGE" --seed 1 --threads "$THREADS" --decoys 0 --discard-image >/dev/null
echo "  $LARGE: peak RSS $(rss "$DIR/time-large.txt") KiB in $(secs "$DIR/time-large.txt")s (vs $r KiB at $SIZE)"
rm -rf "$DIR/large"
