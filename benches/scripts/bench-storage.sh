#!/usr/bin/env bash
# caseload bench-storage beside the tools it stands in for, on the same
# directory: sequential write and read (and rewrite and seeks where the
# peer has them) from caseload's bonnie++-like run, fio, bonnie++ and
# iozone (each where installed), with the ratio of each peer to caseload.
#
#   benches/scripts/bench-storage.sh DIR
#   benches/scripts/bench-storage.sh --lab NAME [CHANNEL]   (a lab that is up; default case)
#
# On a lab, use a modelled device (its model works in the device server,
# for every process); a throttled device limits only processes in the
# lab's cgroups, which the peers are not.
#
# Environment:
#   CASELOAD   the caseload binary (default: target/release/caseload)
#   SIZE       file size (default 512MiB); RUNS runs, medians (default 3)
# Goal (issue: encrypted and networked storage): sequential read and write
# within 15% of each installed peer. bonnie++ reads its file back without
# dropping it from the page cache unless the file is twice the RAM, so
# its input figure is the cache's on a file smaller than that (said).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
CASELOAD=${CASELOAD:-$here/../../target/release/caseload}
SIZE=${SIZE:-512MiB}
RUNS=${RUNS:-3}
if [ "${1:-}" = "--lab" ]; then
    lab=$2
    channel=${3:-case}
    DIR=$("$CASELOAD" lab status "$lab" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['channels']['$channel'])")
    where=(--lab "$lab" --channel "$channel")
else
    DIR=${1:?usage: bench-storage.sh DIR | --lab NAME [CHANNEL]}
    where=(--dir "$DIR")
fi
mib=$(python3 -c "import re,sys; s='$SIZE'; m=re.match(r'(\d+)([KMG]i?B)?',s); n=int(m.group(1)); u=(m.group(2) or 'MiB')[0]; print(n*{'K':1/1024,'M':1,'G':1024}[u])" | cut -d. -f1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "bench-storage.sh: $DIR, $SIZE, $RUNS runs; $(uptime)"
for run in $(seq 1 "$RUNS"); do
    "$CASELOAD" bench-storage "${where[@]}" --tests bonnie --size "$SIZE" \
        --bonnie-seeks 2000 --bonnie-files 1024 --seed "$run" --json > "$work/caseload-$run.json"
    if command -v fio > /dev/null; then
        for rw in write read; do
            fio --name=seq --directory="$DIR" --rw=$rw --bs=8k --size="${mib}m" --ioengine=psync \
                --end_fsync=1 --invalidate=1 --output-format=json > "$work/fio-$rw-$run.json"
        done
        rm -f "$DIR"/seq.0.0
    fi
    if command -v bonnie++ > /dev/null; then
        # -r: a RAM of half the file, so bonnie++ accepts a file smaller than 2x RAM.
        bonnie++ -d "$DIR" -s "$mib" -r $((mib / 2)) -n 0 -f -q -u root 2> /dev/null \
            | grep -v '^$' | tail -1 > "$work/bonnie-$run.csv" || true
    fi
    if command -v iozone > /dev/null; then
        iozone -i 0 -i 1 -s "${mib}m" -r 8k -e -f "$DIR/iozone.tmp" -R 2> /dev/null > "$work/iozone-$run.txt" || true
        rm -f "$DIR/iozone.tmp"
    fi
done
python3 - "$work" "$RUNS" <<'PY'
import glob, json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
ours = [json.load(open(f"{work}/caseload-{r}.json"))["bonnie"] for r in range(1, runs + 1)]
rows = {k: {"caseload": med([o[k] for o in ours])} for k in ("seq_write_mb_s", "seq_read_mb_s", "rewrite_mb_s", "seeks_per_s")}
if glob.glob(f"{work}/fio-*"):
    for k, rw in (("seq_write_mb_s", "write"), ("seq_read_mb_s", "read")):
        rows[k]["fio"] = med([json.load(open(f"{work}/fio-{rw}-{r}.json"))["jobs"][0][rw]["bw_bytes"] / 1e6 for r in range(1, runs + 1)])
for path in sorted(glob.glob(f"{work}/bonnie-*.csv")):
    pass
b = []
for r in range(1, runs + 1):
    try:
        f = open(f"{work}/bonnie-{r}.csv").read().strip().split(",")
        # bonnie++ CSV: put_block at 11, rewrite at 13, get_block at 17, seeks at 19 (K/s, K = 1024).
        num = lambda i: float(f[i]) * 1.024 / 1000 if f[i] not in ("", "+++++") else None
        b.append({"seq_write_mb_s": num(11), "rewrite_mb_s": num(13), "seq_read_mb_s": num(17),
                  "seeks_per_s": float(f[19]) if f[19] not in ("", "+++++") else None})
    except (OSError, IndexError, ValueError):
        pass
if b:
    for k in rows:
        rows[k]["bonnie++"] = med([x[k] for x in b])
peers = sorted({p for v in rows.values() for p in v if p != "caseload"})
print(f"{'test':<16} {'caseload':>10} " + " ".join(f"{p:>10} {'ratio':>6}" for p in peers))
for k, v in rows.items():
    line = f"{k:<16} {v['caseload']:>10.1f} "
    for p in peers:
        x = v.get(p)
        line += f"{x:>10.1f} {x / v['caseload']:>6.2f} " if x else f"{'-':>10} {'-':>6} "
    print(line)
if b:
    print("bonnie++'s input figure reads a file smaller than twice the RAM: the page cache's, not the device's")
PY
