#!/usr/bin/env bash
# DD against E01 on a modelled evidence drive: the evidence files on a loop
# device (ext4 on a backing file in /dev/shm, direct I/O so the backing is
# not cached twice) throttled by the block-I/O controller to a 7200 rpm
# drive's figures (default 150 MB/s and 200 requests/s: cgroup v1
# blkio.throttle.*, or v2 io.max), the other channels on the local disk.
# The workload (default ftk4-default) runs on DD and E01 of the same
# corpus, cold cache, interleaved, RUNS times each; prints per-stage
# medians, the E01/DD ratio, and the mean evidence read size per stage.
# With FILL set, a second, more compressible corpus is measured too: one
# whose volume holds that share of content (`caseload corpus --fill`),
# the rest zeroed free space (FILL=0.25 gives about 3.3:1).
#
# Needs root (losetup, mount, cgroups). Creates only its own loop device,
# mount, cgroup and files, and removes them on exit.
#
# Usage: benches/scripts/evidence-read-bench.sh [WORKDIR]
# Environment:
#   SIZE        corpus size (default 1GiB)
#   RUNS        runs per configuration (default 3)
#   RBPS        read bytes/s of the modelled drive (default 150000000)
#   RIOPS       read requests/s (default 200)
#   WORKLOAD    workload (default ftk4-default)
#   PROFILE     suite profile (default native, SQLite in the run's directory)
#   FILL        also a corpus with this share of content (e.g. 0.25)
#   CASELOAD    use this caseload binary instead of building one
#   EXTRA       extra `caseload run` flags (e.g. "--read-run 32KiB")
set -euo pipefail

cd "$(dirname "$0")/../.."
SIZE=${SIZE:-1GiB}
RUNS=${RUNS:-3}
RBPS=${RBPS:-150000000}
RIOPS=${RIOPS:-200}
WORKLOAD=${WORKLOAD:-ftk4-default}
PROFILE=${PROFILE:-native}
EXTRA=${EXTRA:-}

if [ "$(id -u)" != 0 ]; then
    echo "SKIPPED evidence-read-bench: needs root (loop device, cgroup throttle)" >&2
    exit 0
fi
for tool in losetup mkfs.ext4 python3; do
    command -v "$tool" >/dev/null || { echo "SKIPPED evidence-read-bench: no $tool" >&2; exit 0; }
done

WORK=${1:-$(mktemp -d "${TMPDIR:-/tmp}/evidence-read-bench.XXXXXX")}
mkdir -p "$WORK"
if [ -z "${CASELOAD:-}" ]; then
    cargo build --release --quiet --bin caseload -p caseload
    CASELOAD=$(realpath "${CARGO_TARGET_DIR:-target}/release/caseload")
fi

corpora=(default)
[ -n "${FILL:-}" ] && corpora+=("fill$FILL")
for c in "${corpora[@]}"; do
    if [ ! -f "$WORK/$c/image.E01" ]; then
        fill=()
        [ "$c" != default ] && fill=(--fill "$FILL")
        "$CASELOAD" corpus --out "$WORK/$c" --size "$SIZE" --seed 42 --format dd,e01 "${fill[@]}" >/dev/null
    fi
done

BACKING=/dev/shm/caseload-evidence-bench-$$.img
MNT="$WORK/mnt"
CG=""
LOOP=""
cleanup() {
    set +e
    mountpoint -q "$MNT" && umount "$MNT"
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    rm -f "$BACKING"
    [ -n "$CG" ] && [ -d "$CG" ] && rmdir "$CG"
}
trap cleanup EXIT

need=0
for c in "${corpora[@]}"; do
    need=$((need + $(stat -c %s "$WORK/$c/image.dd") + $(du -cb "$WORK/$c"/image.E* | tail -1 | cut -f1)))
done
truncate -s $((need + need / 8 + (256 << 20))) "$BACKING"
mkfs.ext4 -q -F -O ^has_journal "$BACKING"
LOOP=$(losetup --find --show --direct-io=on "$BACKING")
mkdir -p "$MNT"
mount "$LOOP" "$MNT"
for c in "${corpora[@]}"; do
    mkdir -p "$MNT/$c"
    cp "$WORK/$c"/image.dd "$WORK/$c"/image.E* "$WORK/$c/NSRLFile.txt" "$WORK/$c/notable.md5" "$MNT/$c/"
done
sync
MAJMIN=$(lsblk -no MAJ:MIN "$LOOP" | head -1 | tr -d ' ')

if [ -d /sys/fs/cgroup/blkio ]; then
    CG=/sys/fs/cgroup/blkio/caseload-evidence-bench-$$
    mkdir "$CG"
    echo "$MAJMIN $RBPS" > "$CG/blkio.throttle.read_bps_device"
    echo "$MAJMIN $RIOPS" > "$CG/blkio.throttle.read_iops_device"
elif grep -qw io /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    CG=/sys/fs/cgroup/caseload-evidence-bench-$$
    mkdir "$CG"
    echo "$MAJMIN rbps=$RBPS riops=$RIOPS" > "$CG/io.max"
else
    echo "SKIPPED evidence-read-bench: no block-I/O controller" >&2
    exit 0
fi
echo "evidence-read-bench: $SIZE corpora ${corpora[*]} on $LOOP ($MAJMIN) throttled to $RBPS B/s, $RIOPS req/s; workload $WORKLOAD; $RUNS runs; load $(uptime | sed 's/.*load average: //')"

mkdir -p "$WORK/runs"
for r in $(seq 1 "$RUNS"); do
    for c in "${corpora[@]}"; do
        for fmt in dd E01; do
            out="$WORK/out-$c-$fmt"
            rm -rf "$out"
            mkdir -p "$out"
            # The run moves itself into the throttled cgroup, then runs.
            # shellcheck disable=SC2086
            ( echo $BASHPID > "$CG/cgroup.procs"
              exec "$CASELOAD" run --evidence "$MNT/$c/image.$fmt" --workload "$WORKLOAD" --profile "$PROFILE" \
                --hashset "known=$MNT/$c/NSRLFile.txt" --hashset "notable=$MNT/$c/notable.md5" \
                --database "$out" --case "$out" --temp "$out" --cache cold --json $EXTRA \
            ) > "$WORK/runs/$c-$fmt-$r.json" 2> "$WORK/runs/$c-$fmt-$r.err" || {
                echo "evidence-read-bench: $c $fmt run $r failed:" >&2
                tail -3 "$WORK/runs/$c-$fmt-$r.err" >&2
                exit 1
            }
            echo "evidence-read-bench: round $r $c $fmt done" >&2
        done
    done
done

python3 - "$WORK/runs" "$RUNS" "${corpora[@]}" <<'EOF'
import json, statistics, sys
runs_dir, runs, corpora = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for c in corpora:
    rep = {f: [json.load(open(f"{runs_dir}/{c}-{f}-{r}.json")) for r in range(1, runs + 1)] for f in ("dd", "E01")}
    ratio = rep["E01"][0]["evidence"]["media_size"] / rep["E01"][0]["evidence"]["container_bytes"]
    print(f"\ncorpus {c}: E01 compression {ratio:.2f}:1")
    print(f"{'stage':<11}{'DD s':>9}{'E01 s':>9}{'E01/DD':>8}   evidence MB / ops / KiB per op (DD | E01, median run)")
    total = {"dd": [0.0] * runs, "E01": [0.0] * runs}
    for i, s in enumerate(rep["dd"][0]["stages"]):
        name = s["name"]
        med = {}
        line_io = []
        for f in ("dd", "E01"):
            walls = [r["stages"][i]["wall_seconds"] for r in rep[f]]
            for k, w in enumerate(walls):
                total[f][k] += w
            med[f] = statistics.median(walls)
            mid = sorted(rep[f], key=lambda r: r["stages"][i]["wall_seconds"])[runs // 2]
            e = mid["stages"][i]["channels"]["evidence"]
            kib = e["bytes_read"] / max(e["read_ops"], 1) / 1024
            line_io.append(f"{e['bytes_read']/1e6:.0f}/{e['read_ops']}/{kib:.0f}")
        r = med["E01"] / med["dd"] if med["dd"] > 0 else float("nan")
        print(f"{name:<11}{med['dd']:>9.2f}{med['E01']:>9.2f}{r:>8.2f}   {' | '.join(line_io)}")
    td, te = statistics.median(total["dd"]), statistics.median(total["E01"])
    print(f"{'total':<11}{td:>9.2f}{te:>9.2f}{te/td:>8.2f}   (DD {td/te:.2f}x the E01 time)")
    for f in ("dd", "E01"):
        print(f"  {f} totals: {', '.join(f'{t:.2f}' for t in total[f])}")
EOF
