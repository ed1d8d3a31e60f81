#!/usr/bin/env bash
# Issue 4 benchmark: caseload's image-hash stage side by side with the peer
# tools, in one run, repeated; prints medians and ratios.
#
#   raw:  image-hash MD5+SHA1 on a 2 GiB raw corpus image from the page cache
#         vs `md5sum` alone (goal: >= 1.0x md5sum's throughput)
#   E01:  image-hash MD5+SHA1 on the same image as E01 (fast) vs libewf's
#         `ewfverify` (goal: >= 2x faster)
#
# Usage: benches/scripts/image-hash-bench.sh [WORKDIR]   (REPEAT=5 SIZE=2GiB)
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${1:-/var/tmp/caseload-bench}
REPEAT=${REPEAT:-5}
SIZE=${SIZE:-2GiB}
mkdir -p "$WORK"
cargo build --release -q
BIN=$PWD/target/release/caseload
[ -n "${CARGO_TARGET_DIR:-}" ] && BIN=$CARGO_TARGET_DIR/release/caseload

IMG=$WORK/corpus-$SIZE/image.dd
if [ ! -f "$IMG" ]; then
  "$BIN" corpus --out "$WORK/corpus-$SIZE" --size "$SIZE" --seed 11 --decoys 1000 >/dev/null
fi
E01=$WORK/corpus-$SIZE-fast.E01
if [ ! -f "$E01" ]; then
  "$BIN" convert "$IMG" --to e01 --out "$WORK/corpus-$SIZE-fast" --compression fast >/dev/null
fi
BYTES=$(stat -c %s "$IMG")

now() { date +%s.%N; }
timeit() { local t0 t1; t0=$(now); "$@" >/dev/null 2>&1; t1=$(now); echo "$t1 - $t0" | bc -l; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
run_caseload() {
  local ev=$1 d
  d=$(mktemp -d "$WORK/run.XXXX")
  timeit "$BIN" run --evidence "$ev" --stages image-hash --cache warm --threads "$(nproc)" \
      --database "$d" --case "$d" --temp "$d"
  rm -rf "$d"
}

echo "image: $IMG ($BYTES bytes); E01 (fast): $E01; repeats: $REPEAT; cpus: $(nproc)"
# Warm the page cache so the raw comparison measures hashing, not the disk.
cat "$IMG" > /dev/null; cat "${E01%.E01}".E* > /dev/null
: > "$WORK/t.md5sum"; : > "$WORK/t.raw"; : > "$WORK/t.ewfverify"; : > "$WORK/t.e01"
for i in $(seq "$REPEAT"); do
  # Interleaved, so drift in machine load hits every tool alike.
  timeit md5sum "$IMG" >> "$WORK/t.md5sum"
  run_caseload "$IMG" >> "$WORK/t.raw"
  if command -v ewfverify >/dev/null; then timeit ewfverify -q "$E01" >> "$WORK/t.ewfverify"; fi
  run_caseload "$E01" >> "$WORK/t.e01"
done
mb() { echo "$BYTES / $1 / 1000000" | bc -l; }
m_md5=$(median < "$WORK/t.md5sum"); m_raw=$(median < "$WORK/t.raw"); m_e01=$(median < "$WORK/t.e01")
printf "%-40s %8.2f s  %8.1f MB/s\n" "md5sum (raw)" "$m_md5" "$(mb "$m_md5")"
printf "%-40s %8.2f s  %8.1f MB/s\n" "caseload image-hash md5+sha1 (raw)" "$m_raw" "$(mb "$m_raw")"
printf "ratio caseload/md5sum throughput (goal >= 1.0): %.2f\n" "$(echo "$m_md5 / $m_raw" | bc -l)"
if [ -s "$WORK/t.ewfverify" ]; then
  m_ev=$(median < "$WORK/t.ewfverify")
  printf "%-40s %8.2f s  %8.1f MB/s\n" "ewfverify (E01 fast)" "$m_ev" "$(mb "$m_ev")"
  printf "%-40s %8.2f s  %8.1f MB/s\n" "caseload image-hash md5+sha1 (E01 fast)" "$m_e01" "$(mb "$m_e01")"
  printf "speed-up caseload vs ewfverify (goal >= 2.0): %.2f\n" "$(echo "$m_ev / $m_e01" | bc -l)"
else
  echo "ewfverify not installed: E01 comparison skipped"
fi
for f in md5sum raw ewfverify e01; do echo "$f runs: $(tr '\n' ' ' < "$WORK/t.$f")"; done
