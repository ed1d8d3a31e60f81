#!/usr/bin/env bash
# Scaling with cores: run the pipeline on one image with 1, 2, 4, 8, 16
# CPUs (as many as the machine has), each run pinned with `taskset` to
# the first N CPUs and given N threads, and print each stage's time, its
# speed-up against the fewest CPUs, the serial fraction of an Amdahl fit
# (T(N) = T(N0) * (f + (1 - f) * N0 / N), least squares over N) and the
# peak RSS per stage; run.json's system.cpus_allowed is checked against
# the CPUs given (the affinity the run really had).
#
#   benches/scripts/cores.sh [IMAGE]
#
# Environment:
#   CASELOAD   the caseload binary (default: target/release/caseload)
#   CORES      the CPU counts (default "1 2 4 8 16", capped at the machine's)
#   RUNS       runs per count, medians taken (default 3)
#   SIZE       corpus size when no IMAGE is given (default 4GiB; seed 42)
#   CACHE      warm (default) or cold
#   STAGES     stages (default filesystem,file-hash,index,carve)
#   WORK       scratch directory (default target/cores-work)
# Goals (issue: many cores): the pipeline at least 5x faster at 16 CPUs
# than at 2, the index stage at least 4x, peak RSS at most 1 GiB at 16.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
CASELOAD=${CASELOAD:-$here/../../target/release/caseload}
WORK=${WORK:-$here/../../target/cores-work}
RUNS=${RUNS:-3}
CACHE=${CACHE:-warm}
STAGES=${STAGES:-filesystem,file-hash,index,carve}
machine=$(nproc --all)
counts=()
for n in ${CORES:-1 2 4 8 16}; do
    [ "$n" -le "$machine" ] && counts+=("$n")
done
[ ${#counts[@]} -ge 2 ] || { echo "cores.sh: need at least two CPU counts within this machine's $machine" >&2; exit 2; }
mkdir -p "$WORK"
image=${1:-}
if [ -z "$image" ]; then
    image=$WORK/corpus/image.dd
    if [ ! -f "$image" ]; then
        "$CASELOAD" corpus --size "${SIZE:-4GiB}" --seed 42 --out "$WORK/corpus" > /dev/null
    fi
fi
echo "cores.sh: $image, stages $STAGES, cache $CACHE, $RUNS run(s) per count, CPUs ${counts[*]} of $machine; load $(cut -d" " -f1-3 /proc/loadavg)"
reports=()
for n in "${counts[@]}"; do
    cpus="0-$((n - 1))"
    for r in $(seq 1 "$RUNS"); do
        dir=$WORK/run-$n-$r
        rm -rf "$dir"
        mkdir -p "$dir/db" "$dir/case" "$dir/temp"
        # The last run's dirty pages are written back now, not during this
        # run (on a 2-core VM they moved the index stage by up to 40%).
        sync
        taskset -c "$cpus" "$CASELOAD" run --evidence "$image" --stages "$STAGES" \
            --threads "$n" --cache "$CACHE" \
            --database "$dir/db" --case "$dir/case" --temp "$dir/temp" --json > "$dir/run.out.json"
        reports+=("$n:$dir/case/run.json")
        rm -rf "$dir/db" "$dir/temp"
        echo "cores.sh: $n CPU(s), run $r done"
    done
done
python3 - "${reports[@]}" <<'EOF'
import json, statistics, sys
runs = {}
for arg in sys.argv[1:]:
    n, path = arg.split(":", 1)
    n = int(n)
    r = json.load(open(path))
    allowed = r["system"].get("cpus_allowed") or []
    if len(allowed) != n:
        sys.exit(f"cores.sh: the run with {n} CPUs had {len(allowed)} ({allowed}): taskset did not hold")
    runs.setdefault(n, []).append(r)
counts = sorted(runs)
names = [s["name"] for s in runs[counts[0]][0]["stages"]]
def med(n, f):
    return statistics.median(f(r) for r in runs[n])
def stage(r, name):
    return next(s for s in r["stages"] if s["name"] == name)
rows = [(name, lambda r, name=name: stage(r, name)["wall_seconds"]) for name in names]
rows.append(("pipeline", lambda r: sum(s["wall_seconds"] for s in r["stages"])))
n0 = counts[0]
head = f"{'stage':<11}" + "".join(f"{str(n) + ' CPU s':>10}" for n in counts)
head += "".join(f"{'x' + str(n):>8}" for n in counts[1:]) + f"{'serial f':>10}{'peak RSS MiB':>14}"
print(head)
for name, f in rows:
    t = {n: med(n, f) for n in counts}
    line = f"{name:<11}" + "".join(f"{t[n]:>10.2f}" for n in counts)
    line += "".join(f"{(t[n0] / t[n] if t[n] > 0 else 0):>8.2f}" for n in counts[1:])
    # Amdahl: t[n]/t[n0] = f + (1-f)*n0/n, least squares for f.
    xs = [1 - n0 / n for n in counts[1:]]
    ys = [(t[n] / t[n0] if t[n0] > 0 else 1) - n0 / n for n in counts[1:]]
    den = sum(x * x for x in xs)
    serial = sum(x * y for x, y in zip(xs, ys)) / den if den > 0 else 0.0
    line += f"{serial:>10.2f}"
    if name != "pipeline":
        rss = max(stage(r, name).get("peak_rss_bytes", 0) for n in counts for r in runs[n])
        at_max = max(stage(r, name).get("peak_rss_bytes", 0) for r in runs[counts[-1]])
        line += f"{(at_max >> 20):>8} ({rss >> 20})"
    print(line)
print(f"xN: speed-up against {n0} CPU(s); serial f: Amdahl's serial fraction fitted over the counts;")
print(f"peak RSS at {counts[-1]} CPUs (the largest over every count in brackets)")
EOF
