#!/usr/bin/env bash
# The many-cores figures in one call, for a lent machine with no Rust
# toolchain (the `device` tool: build here, strip, carry the binary):
#
#   1. corpus generation against its floor: `caseload corpus` (SIZE, seed
#      42) beside the image's own MD5+SHA-1 (`run --stages image-hash
#      --cache warm`) and `dd bs=1M conv=fsync` of the image, RUNS each,
#      interleaved; medians and the ratio to the digest floor (goal 1.3);
#   2. `cores.sh` on that image at 2, 4, 8, 16 CPUs (those the machine
#      has): each stage's time, speed-up against 2, Amdahl serial fraction,
#      peak RSS (goals at 16 against 2: pipeline 5x, index 4x);
#   3. a BIG corpus indexed at all CPUs: the index stage's peak RSS (goal
#      at most 1 GiB at 16 threads on 16 GiB).
#
# Everything printed is also written under OUT (many-cores.txt, the
# cores.sh table, the run.json of step 3).
#
#   CASELOAD=path/to/caseload OUT=dir benches/scripts/many-cores.sh
#
# Environment: CASELOAD (default target/release/caseload), OUT (default
# target/many-cores), WORK (scratch, default /tmp/many-cores), SIZE
# (default 4GiB), BIG (default 16GiB; "none" skips step 3), RUNS (default
# 3), CORES (default "2 4 8 16").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
CASELOAD=$(realpath -m "${CASELOAD:-$here/../../target/release/caseload}")
[ -x "$CASELOAD" ] || { echo "many-cores.sh: no caseload binary at $CASELOAD (set CASELOAD)" >&2; exit 2; }
OUT=$(mkdir -p "${OUT:-$here/../../target/many-cores}" && cd "${OUT:-$here/../../target/many-cores}" && pwd)
WORK=${WORK:-/tmp/many-cores}
SIZE=${SIZE:-4GiB}
BIG=${BIG:-16GiB}
RUNS=${RUNS:-3}
CORES=${CORES:-2 4 8 16}
log=$OUT/many-cores.txt
: > "$log"
say() { echo "$*" | tee -a "$log"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Wall seconds of a command, its output discarded; a failure ends the
# script, saying so (a command substitution would not stop on it).
seconds() {
    local t0 t1
    t0=$(date +%s.%N)
    if ! "$@" > /dev/null 2>> "$OUT/stderr.txt"; then
        echo "many-cores.sh: failed: $* (see $OUT/stderr.txt)" | tee -a "$log" >&2
        kill -TERM $$
        exit 1
    fi
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}

rm -rf "$WORK"
mkdir -p "$WORK"
say "many-cores: $("$CASELOAD" --version 2>/dev/null || echo caseload) on $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. Generation against the digest floor.
: > "$WORK/gen" ; : > "$WORK/hash" ; : > "$WORK/dd"
for r in $(seq 1 "$RUNS"); do
    rm -rf "$WORK/corpus"
    sync
    seconds "$CASELOAD" corpus --size "$SIZE" --seed 42 --out "$WORK/corpus" >> "$WORK/gen"
    rm -rf "$WORK/h" && mkdir -p "$WORK/h"
    seconds "$CASELOAD" run --evidence "$WORK/corpus/image.dd" --stages image-hash --cache warm \
        --database "$WORK/h" --case "$WORK/h" --temp "$WORK/h" >> "$WORK/hash"
    seconds dd if="$WORK/corpus/image.dd" of="$WORK/dd.out" bs=1M conv=fsync status=none >> "$WORK/dd"
    rm -f "$WORK/dd.out"
    say "run $r: corpus $(tail -1 "$WORK/gen") s, image digests $(tail -1 "$WORK/hash") s, dd $(tail -1 "$WORK/dd") s"
done
gen=$(median < "$WORK/gen"); hash=$(median < "$WORK/hash"); ddm=$(median < "$WORK/dd")
say "$(awk -v g="$gen" -v h="$hash" -v d="$ddm" -v s="$SIZE" 'BEGIN {
    printf "corpus %s, medians: generation %.2f s, image digests %.2f s, dd %.2f s; generation / digests %.2f (goal 1.3), generation / dd %.2f", s, g, h, d, g / h, g / d }')"

# 2. Stages by CPU count.
say ""
CORES="$CORES" RUNS=$RUNS WORK="$WORK/cores" CASELOAD="$CASELOAD" \
    bash "$here/cores.sh" "$WORK/corpus/image.dd" 2>&1 | tee -a "$log"

# 3. Peak RSS of the index stage on a large corpus at every CPU.
if [ "$BIG" != "none" ]; then
    rm -rf "$WORK/corpus" "$WORK/cores"
    say ""
    big=$(seconds "$CASELOAD" corpus --size "$BIG" --seed 42 --out "$WORK/big")
    rm -rf "$WORK/b" && mkdir -p "$WORK/b"
    "$CASELOAD" run --evidence "$WORK/big/image.dd" --stages filesystem,file-hash,index \
        --threads "$(nproc)" --cache warm --database "$WORK/b" --case "$WORK/b" --temp "$WORK/b" \
        > /dev/null 2>> "$OUT/stderr.txt"
    cp "$WORK/b/run.json" "$OUT/big-run.json"
    python3 - "$WORK/b/run.json" "$BIG" "$big" <<'EOF' | tee -a "$log"
import json, sys
run = json.load(open(sys.argv[1]))
for s in run["stages"]:
    d = s.get("summary", {}).get("details", {})
    print(f"{sys.argv[2]} corpus (made in {float(sys.argv[3]):.1f} s), {s['name']}: "
          f"{s['wall_seconds']:.2f} s, peak RSS {s['peak_rss_bytes'] / 2**20:.0f} MiB"
          + (f", phases {d['phase_seconds']}" if "phase_seconds" in d else ""))
print("CPUs the run had:", run.get("system", {}).get("cpus_allowed"))
EOF
fi
rm -rf "$WORK"
