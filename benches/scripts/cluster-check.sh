#!/usr/bin/env bash
# One case split over N workers on this machine (`caseload cluster`, issue
# 21), against a single-machine run of the same case and against
# `caseload model`:
#
# 1. single vs cluster: the single run (`run`, PostgreSQL, same threads
#    per pipeline as one worker gets) and `cluster --workers N`, per stage:
#    wall seconds, database rows, transactions and server MB read/written;
# 2. model vs cluster: `caseload model` built from the median 1-worker
#    cluster run (which carries each stage's unit count) with
#    --shared-cpus $(nproc) --shared-temp (the workers share this
#    machine's processors and temp disk), predicting each stage's time with N workers;
#    measured is each stage's span (first unit's start to last unit's end)
#    and the case's wall time (median of RUNS).
#
#   benches/scripts/cluster-check.sh [DIR]    default DIR: target/cluster-check
# Environment: SIZE (512MiB), WORKERS ("1 2 4 8"), RUNS (3), STAGES
#   (filesystem,file-hash,index,carve), BATCH_FILES (500), CASELOAD,
#   MODEL_ONLY=1 (model the runs already in DIR again; run nothing).
# The server of each run is private (in the run's database directory);
# PostgreSQL refuses root, so as root it runs as `postgres` or `nobody`.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:-$root/target/cluster-check}"
bin="${CASELOAD:-$root/target/release/caseload}"
size="${SIZE:-512MiB}"
workers="${WORKERS:-1 2 4 8}"
runs="${RUNS:-3}"
stages="${STAGES:-filesystem,file-hash,index,carve}"
batch="${BATCH_FILES:-500}"
[ -x "$bin" ] || (cd "$root" && cargo build --release --quiet)
mkdir -p "$dir"
chmod 755 "$dir"
echo "cluster-check: $size, workers $workers, $runs runs each, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ! -f "$dir/corpus/image.dd" ]; then
    "$bin" corpus --size "$size" --seed 5 --fs fat --fill 0.72 --format dd --decoys 0 \
        --out "$dir/corpus" >/dev/null
fi
fresh() { rm -rf "$1"; mkdir -p "$1/db" "$1/case" "$1/temp"; chmod -R 755 "$1"; }
tidy() { rm -rf "$1/db" "$1/temp" "$1/case/index" "$1/case/carved"; }
for r in $(seq 1 "$runs"); do
    [ "${MODEL_ONLY:-0}" = 1 ] && break
    d="$dir/single-r$r"
    fresh "$d"
    "$bin" run --db-engine postgres --cache warm --threads 1 --stages "$stages" \
        --evidence "$dir/corpus/image.dd" --database "$d/db" --case "$d/case" --temp "$d/temp" \
        >"$d.log" 2>&1 || { echo "cluster-check: single run failed; see $d.log" >&2; exit 1; }
    tidy "$d"
    for n in $workers; do
        d="$dir/n$n-r$r"
        fresh "$d"
        "$bin" cluster --workers "$n" --threads 1 --batch-files "$batch" --stages "$stages" \
            --evidence "$dir/corpus/image.dd" --database "$d/db" --case "$d/case" --temp "$d/temp" \
            >"$d.log" 2>&1 || { echo "cluster-check: cluster N=$n failed; see $d.log" >&2; exit 1; }
        tidy "$d"
    done
done
first=$(echo $workers | cut -d' ' -f1)
best=$(for r in $(seq 1 "$runs"); do
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['totals']['wall_seconds'], sys.argv[1])" \
        "$dir/n$first-r$r/case/run.json"
done | sort -g | awk -v n="$runs" 'NR == int((n + 1) / 2) {print $2}')
"$bin" model --run "$best" --workers "${workers// /,}" --shared-cpus "$(nproc)" --shared-temp --json >"$dir/model.json"
python3 - "$dir" "$runs" $workers <<'PY'
import json, statistics, sys
d, runs, ns = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3:]]
load = lambda p: json.load(open(p))
med = statistics.median
def stage(run, name):
    return next(s for s in run["stages"] if s["name"] == name)
def db(run, name):
    s = stage(run, name)
    c = s["channels"].get("database", {})
    w = s["database_work"]
    return (w["rows"], w["transactions"], c.get("bytes_read", 0) / 1e6, c.get("bytes_written", 0) / 1e6)
single = [load(f"{d}/single-r{r}/case/run.json") for r in range(1, runs + 1)]
cl = {n: [load(f"{d}/n{n}-r{r}/case/run.json") for r in range(1, runs + 1)] for n in ns}
names = [s["name"] for s in single[0]["stages"]]
print("\n== single run vs cluster (medians) ==")
print(f"{'stage':<11} {'setup':<9} {'wall s':>7} {'rows':>8} {'txns':>6} {'db R MB':>8} {'db W MB':>8}")
for name in names:
    for label, rs in [("single", single)] + [(f"{n} workers", cl[n]) for n in ns]:
        f = [db(r, name) for r in rs]
        print(f"{name:<11} {label:<9} {med(stage(r, name)['wall_seconds'] for r in rs):>7.2f} "
              f"{med(x[0] for x in f):>8.0f} {med(x[1] for x in f):>6.0f} {med(x[2] for x in f):>8.1f} {med(x[3] for x in f):>8.1f}")
print(f"{'total':<11} {'single':<9} {med(r['totals']['wall_seconds'] for r in single):>7.2f}")
for n in ns:
    print(f"{'total':<11} {str(n) + ' workers':<9} {med(r['totals']['wall_seconds'] for r in cl[n]):>7.2f}")
m = load(f"{d}/model.json")
print("\n== model vs cluster ==")
print(f"{'workers':>7} {'stage':<11} {'units':>5} {'predicted s':>11} {'measured s':>10} {'error':>7}")
for n in ns:
    i = m["workers"].index(n)
    total_p = 0.0
    for s in m["stages"]:
        p = s["predicted_s"][i]
        total_p += p
        meas = med(stage(r, s["name"])["wall_seconds"] for r in cl[n])
        print(f"{n:>7} {s['name']:<11} {s.get('parallel_units', '-'):>5} {p:>11.2f} {meas:>10.2f} {100 * (p / meas - 1):>+6.0f}%")
    meas = med(r["totals"]["wall_seconds"] for r in cl[n])
    mb = m["evidence_bytes"] / 1e6
    print(f"{n:>7} {'total':<11} {'':>5} {total_p:>11.2f} {meas:>10.2f} {100 * (total_p / meas - 1):>+6.0f}%"
          f"   throughput predicted {mb / total_p:.1f} MB/s, measured {mb / meas:.1f} MB/s")
PY
