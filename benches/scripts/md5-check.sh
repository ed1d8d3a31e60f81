#!/usr/bin/env bash
# Issue 52: the image hash with MD5 alone against `md5sum` and
# `openssl md5` on the same warm raw file, interleaved, medians of REPEAT
# (goal: caseload at least as fast as the faster of the two), with the
# kernels caseload chose (`caseload doctor`) and the CPU they ran on.
#
# Usage: benches/scripts/md5-check.sh [FILE]   (REPEAT=5; default FILE: a
#        400 MB random file made under WORK=/var/tmp/caseload-bench)
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-/var/tmp/caseload-bench}
REPEAT=${REPEAT:-5}
mkdir -p "$WORK"
BIN=${CASELOAD:-$PWD/target/release/caseload}
[ -x "$BIN" ] || cargo build --release -q
FILE=${1:-$WORK/md5-400MB.dd}
[ -f "$FILE" ] || head -c 400000000 /dev/urandom > "$FILE"
BYTES=$(stat -c %s "$FILE")
now() { date +%s.%N; }
timeit() { local t0 t1; t0=$(now); "$@" >/dev/null 2>&1; t1=$(now); echo "$t1 - $t0" | bc -l; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
run_caseload() {
  local d; d=$(mktemp -d "$WORK/run.XXXX")
  timeit "$BIN" run --evidence "$FILE" --stages image-hash --stage-option 'image-hash.algorithms=["md5"]' \
      --cache warm --database "$d" --case "$d" --temp "$d"
  rm -rf "$d"
}
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); file: $FILE ($BYTES bytes); repeats: $REPEAT"
"$BIN" doctor | sed -n '/^kernel/,/^$/p'
cat "$FILE" > /dev/null
: > "$WORK/t.md5sum"; : > "$WORK/t.openssl"; : > "$WORK/t.caseload"
for _ in $(seq "$REPEAT"); do
  timeit md5sum "$FILE" >> "$WORK/t.md5sum"
  timeit openssl md5 "$FILE" >> "$WORK/t.openssl"
  run_caseload >> "$WORK/t.caseload"
done
for f in md5sum openssl caseload; do
  m=$(median < "$WORK/t.$f")
  printf "%-10s median %6.3f s  %7.1f MB/s   runs: %s\n" "$f" "$m" "$(echo "$BYTES / $m / 1000000" | bc -l)" "$(tr '\n' ' ' < "$WORK/t.$f")"
done

m_sum=$(median < "$WORK/t.md5sum"); m_ssl=$(median < "$WORK/t.openssl"); m_cl=$(median < "$WORK/t.caseload")
faster=$(echo "if ($m_sum < $m_ssl) $m_sum else $m_ssl" | bc -l)
printf "caseload vs the faster peer (goal >= 1.0): %.2fx\n" "$(echo "$faster / $m_cl" | bc -l)"
echo "load: $(cat /proc/loadavg)"
