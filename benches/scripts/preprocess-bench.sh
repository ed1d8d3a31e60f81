#!/usr/bin/env bash
# Issue 5 benchmark: caseload pre-processing (filesystem + file-hash, MD5 and
# SHA-1) of a 2 GiB corpus image, raw and E01, side by side with The Sleuth
# Kit doing the same work in the same run: `fls -r` to list, then
# `icat | md5sum` and `icat | sha1sum` per file. Reports files/s, MB/s and
# the ratio (goal: caseload >= 5x faster than TSK). Medians of REPEAT runs,
# page cache warm for everyone (this measures the tools, not the disk).
#
# Usage: benches/scripts/preprocess-bench.sh [WORKDIR]   (REPEAT=3 SIZE=2GiB)
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${1:-/var/tmp/caseload-bench}
REPEAT=${REPEAT:-3}
SIZE=${SIZE:-2GiB}
mkdir -p "$WORK"
cargo build --release -q
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/caseload
for t in fls icat mmls md5sum sha1sum bc; do command -v $t >/dev/null || { echo "needs $t"; exit 2; }; done

IMG=$WORK/corpus-$SIZE/image.dd
[ -f "$IMG" ] || "$BIN" corpus --out "$WORK/corpus-$SIZE" --size "$SIZE" --seed 11 --decoys 1000 >/dev/null
E01=$WORK/corpus-$SIZE-fast.E01
[ -f "$E01" ] || "$BIN" convert "$IMG" --to e01 --out "${E01%.E01}" --compression fast >/dev/null
OFFSET=$(mmls "$IMG" | awk '/FAT/ {print $3+0; exit}')

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

tsk() {
  # List every file, then hash each allocated and deleted regular file's
  # content with MD5 and SHA-1, as the pre-processing pass does.
  local img=$1 list inode
  list=$(mktemp "$WORK/fls.XXXX")
  fls -r -p -o "$OFFSET" "$img" > "$list"
  grep -E '^r/r' "$list" | sed -E 's/^r\/r \*? ?([0-9]+):.*/\1/' | while read -r inode; do
    icat -o "$OFFSET" "$img" "$inode" | tee >(md5sum > /dev/null) | sha1sum > /dev/null
  done
  wc -l < "$list" > "$WORK/tsk.count"
  rm -f "$list"
}

caseload_run() {
  local d
  d=$(mktemp -d "$WORK/run.XXXX")
  "$BIN" run --evidence "$1" --stages filesystem,file-hash --cache warm \
      --database "$d" --case "$d" --temp "$d" --json > "$WORK/run.json"
  rm -rf "$d"
}

cat "$IMG" "${E01%.E01}".E* > /dev/null
: > "$WORK/t.tsk"; : > "$WORK/t.raw"; : > "$WORK/t.e01"; : > "$WORK/t.tsk_e01"
for i in $(seq "$REPEAT"); do
  t0=$(now); tsk "$IMG"; t1=$(now); echo "$t1 - $t0" | bc -l >> "$WORK/t.tsk"
  t0=$(now); caseload_run "$IMG"; t1=$(now); echo "$t1 - $t0" | bc -l >> "$WORK/t.raw"
  t0=$(now); tsk "$E01"; t1=$(now); echo "$t1 - $t0" | bc -l >> "$WORK/t.tsk_e01"
  t0=$(now); caseload_run "$E01"; t1=$(now); echo "$t1 - $t0" | bc -l >> "$WORK/t.e01"
done
FILES=$(python3 -c "import json;r=json.load(open('$WORK/run.json'));print(r['stages'][1]['summary']['items'])")
BYTES=$(python3 -c "import json;r=json.load(open('$WORK/run.json'));print(r['stages'][1]['summary']['bytes'])")
report() {
  local name=$1 t=$2
  printf "%-32s %8.2f s  %9.0f files/s  %8.1f MB/s\n" "$name" "$t" "$(echo "$FILES / $t" | bc -l)" "$(echo "$BYTES / $t / 1000000" | bc -l)"
}
m_tsk=$(median < "$WORK/t.tsk"); m_raw=$(median < "$WORK/t.raw")
m_tske=$(median < "$WORK/t.tsk_e01"); m_e01=$(median < "$WORK/t.e01")
echo "image $IMG: $FILES files hashed, $BYTES content bytes; fls lines $(cat "$WORK/tsk.count"); repeats $REPEAT"
report "TSK fls + icat|md5+sha1 (raw)" "$m_tsk"
report "caseload (raw)" "$m_raw"
printf "speed-up raw (goal >= 5): %.1f\n" "$(echo "$m_tsk / $m_raw" | bc -l)"
report "TSK fls + icat|md5+sha1 (E01)" "$m_tske"
report "caseload (E01)" "$m_e01"
printf "speed-up E01 (goal >= 5): %.1f\n" "$(echo "$m_tske / $m_e01" | bc -l)"
for f in tsk raw tsk_e01 e01; do echo "$f runs: $(tr '\n' ' ' < "$WORK/t.$f")"; done
