#!/usr/bin/env bash
# Issue 8 benchmark: hash-set import and lookups, caseload side by side with
# The Sleuth Kit's hfind, in one run, repeated and interleaved; prints
# medians and ratios.
#
#   import:  a 10-million-entry NSRL RDS 2.x NSRLFile.txt (corpus-gen's known
#            set: 10,000,000 decoys + the planted entries), MD5s only, into
#            caseload's hash library (`caseload hashset import --hashes md5`)
#            vs `hfind -i nsrl-md5` (goal: caseload at least as fast).
#            caseload's default import (MD5 and SHA-1) is timed once too.
#   lookup:  1,000,000 MD5s, 10% of them in the set, shuffled, looked up with
#            `caseload hashset lookup` (all cores, and 1 thread) vs
#            `hfind -f` (goal: caseload at least as fast). Both answer from a
#            warm page cache (library / index read once before timing), so
#            this compares the lookup paths, not the disk; the found counts
#            of both tools are checked against the 100,000 planted.
#
# Usage: benches/scripts/kff-bench.sh [WORKDIR]   (REPEAT=3 ENTRIES=10000000
#        LOOKUPS=1000000; BIN=path/to/caseload skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${1:-/var/tmp/caseload-kff-bench}
REPEAT=${REPEAT:-3}
ENTRIES=${ENTRIES:-10000000}
LOOKUPS=${LOOKUPS:-1000000}
PRESENT=$((LOOKUPS / 10))
mkdir -p "$WORK"
if [ -z "${BIN:-}" ]; then
  cargo build --release -q --bin caseload
  BIN=$PWD/target/release/caseload
  [ -n "${CARGO_TARGET_DIR:-}" ] && BIN=$CARGO_TARGET_DIR/release/caseload
fi
command -v hfind >/dev/null || { echo "hfind (sleuthkit) is not installed"; exit 1; }
[ -x /usr/bin/time ] || { echo "GNU time (/usr/bin/time) is not installed"; exit 1; }

# The set: corpus-gen's NSRLFile.txt with ENTRIES decoys (the smallest
# corpus; only the hash-set file is used).
SET_DIR=$WORK/set-$ENTRIES
NSRL=$SET_DIR/NSRLFile.txt
if [ ! -f "$NSRL" ]; then
  rm -rf "$SET_DIR"
  "$BIN" corpus --out "$SET_DIR" --size 32MiB --seed 8 --decoys "$ENTRIES" >/dev/null
  rm -f "$SET_DIR"/RDSv3.db "$SET_DIR"/notable.* "$SET_DIR"/image.dd
fi
ROWS=$(($(wc -l < "$NSRL") - 1))

# Queries: every (ROWS / PRESENT)-th MD5 of the set, plus random MD5s, in
# a fixed shuffled order.
Q=$WORK/queries-$ENTRIES-$LOOKUPS.txt
if [ ! -f "$Q" ]; then
  awk -F'"' -v step=$((ROWS / PRESENT)) -v n=$PRESENT \
      'NR > 1 && (NR - 2) % step == 0 && c < n { print tolower($4); c++ }' "$NSRL" > "$Q.tmp"
  od -An -tx1 -v -w16 -N $(((LOOKUPS - PRESENT) * 16)) /dev/urandom | tr -d ' ' >> "$Q.tmp"
  shuf --random-source=<(yes) "$Q.tmp" > "$Q"
  rm -f "$Q.tmp"
fi
[ "$(wc -l < "$Q")" -eq "$LOOKUPS" ] || { echo "query file is short"; exit 1; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# timeit OUT CMD...: "wall_seconds cpu_seconds" (user + system) to stdout,
# the command's stdout to OUT. CPU time is printed too because this machine
# is shared: wall time carries other jobs' load, CPU time much less so.
timeit() {
  local out=$1; shift
  /usr/bin/time -f "%e %U %S" -o "$WORK/last.time" "$@" > "$out" 2>"$WORK/last.err" \
    || { cat "$WORK/last.err" >&2; exit 1; }
  awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$WORK/last.time"
}

HF=$WORK/hfind
LIB=$WORK/library
: > "$WORK/t.cl-import"; : > "$WORK/t.hf-import"
for i in $(seq "$REPEAT"); do
  # Interleaved, so drift in machine load hits both tools alike; each
  # starts from nothing (hfind's index beside a fresh copy of the file).
  rm -rf "$HF" "$LIB"; mkdir -p "$HF" "$LIB"
  cp "$NSRL" "$HF/NSRLFile.txt"; sync
  timeit /dev/null hfind -i nsrl-md5 "$HF/NSRLFile.txt" >> "$WORK/t.hf-import"
  timeit /dev/null "$BIN" hashset import --library "$LIB/kff.sqlite" --name nsrl \
      --category known --hashes md5 --temp "$LIB" "$NSRL" >> "$WORK/t.cl-import"
done
# Default import (MD5 and SHA-1), once, into its own library.
rm -rf "$WORK/library-both"; mkdir -p "$WORK/library-both"
t_both=$(timeit /dev/null "$BIN" hashset import --library "$WORK/library-both/kff.sqlite" \
    --name nsrl --category known "$NSRL" | cut -d' ' -f1)
lib_mb=$(du -m "$LIB/kff.sqlite" | cut -f1)
idx_mb=$(du -mc "$HF"/NSRLFile.txt-md5.idx* | tail -1 | cut -f1)
rm -rf "$WORK/library-both"

# Lookups, from a warm page cache.
cat "$LIB"/kff.sqlite* "$HF"/NSRLFile.txt-md5.idx* > /dev/null
: > "$WORK/t.cl-lookup"; : > "$WORK/t.cl-lookup1"; : > "$WORK/t.hf-lookup"
for i in $(seq "$REPEAT"); do
  timeit "$WORK/hf.out" hfind -f "$Q" "$HF/NSRLFile.txt" >> "$WORK/t.hf-lookup"
  timeit "$WORK/cl.out" "$BIN" hashset lookup --library "$LIB/kff.sqlite" "$Q" >> "$WORK/t.cl-lookup"
  timeit "$WORK/cl1.out" "$BIN" hashset lookup --threads 1 --library "$LIB/kff.sqlite" "$Q" >> "$WORK/t.cl-lookup1"
done
hf_found=$(grep -vc 'Hash Not Found' "$WORK/hf.out" || true)
cl_found=$(grep -vc $'\t-$' "$WORK/cl.out" || true)
cl1_found=$(grep -vc $'\t-$' "$WORK/cl1.out" || true)

m() { cut -d' ' -f1 < "$WORK/t.$1" | median; }
c() { cut -d' ' -f2 < "$WORK/t.$1" | median; }
mi_cl=$(m cl-import); mi_hf=$(m hf-import); ci_cl=$(c cl-import); ci_hf=$(c hf-import)
ml_cl=$(m cl-lookup); ml_cl1=$(m cl-lookup1); ml_hf=$(m hf-lookup)
cl_cl=$(c cl-lookup); cl_cl1=$(c cl-lookup1); cl_hf=$(c hf-lookup)
rate() { echo "$LOOKUPS / $1" | bc -l; }
ratio() { echo "$1 / $2" | bc -l; }
echo "set: $NSRL ($ROWS entries); queries: $LOOKUPS ($PRESENT present); repeats: $REPEAT; cpus: $(nproc)"
echo "medians; wall seconds (cpu seconds = user + system)"
printf "%-44s %8.2f s (cpu %7.2f s)  %9.0f entries/s\n" "hfind -i nsrl-md5 (import)" "$mi_hf" "$ci_hf" "$(echo "$ROWS / $mi_hf" | bc -l)"
printf "%-44s %8.2f s (cpu %7.2f s)  %9.0f entries/s\n" "caseload hashset import --hashes md5" "$mi_cl" "$ci_cl" "$(echo "$ROWS / $mi_cl" | bc -l)"
printf "%-44s %8.2f s (one run)\n" "caseload hashset import (md5 + sha1)" "$t_both"
printf "import speed-up caseload vs hfind -i (goal >= 1.0): wall %.2f, cpu %.2f\n" "$(ratio "$mi_hf" "$mi_cl")" "$(ratio "$ci_hf" "$ci_cl")"
printf "on disk: caseload library %s MB, hfind index %s MB\n" "$lib_mb" "$idx_mb"
printf "%-44s %8.2f s (cpu %7.2f s)  %9.0f lookups/s  found %s\n" "hfind -f" "$ml_hf" "$cl_hf" "$(rate "$ml_hf")" "$hf_found"
printf "%-44s %8.2f s (cpu %7.2f s)  %9.0f lookups/s  found %s\n" "caseload hashset lookup ($(nproc) threads)" "$ml_cl" "$cl_cl" "$(rate "$ml_cl")" "$cl_found"
printf "%-44s %8.2f s (cpu %7.2f s)  %9.0f lookups/s  found %s\n" "caseload hashset lookup (1 thread)" "$ml_cl1" "$cl_cl1" "$(rate "$ml_cl1")" "$cl1_found"
printf "lookup speed-up caseload vs hfind -f (goal >= 1.0): wall %.2f (1 thread: %.2f), cpu (1 thread) %.2f\n" \
  "$(ratio "$ml_hf" "$ml_cl")" "$(ratio "$ml_hf" "$ml_cl1")" "$(ratio "$cl_hf" "$cl_cl1")"
for f in hf-import cl-import hf-lookup cl-lookup cl-lookup1; do echo "$f runs (wall cpu): $(tr '\n' ';' < "$WORK/t.$f")"; done
if [ "$hf_found" != "$PRESENT" ] || [ "$cl_found" != "$PRESENT" ] || [ "$cl1_found" != "$PRESENT" ]; then
  echo "MISMATCH: expected $PRESENT found by each tool"; exit 1
fi
