#!/usr/bin/env bash
# `caseload model` against measured runs of several workers on this one
# machine (issue 21), the workers being `caseload run --instances N` (for
# one case split over N workers, see cluster-check.sh): N pipelines at
# once, each processing the
# whole case, sharing the evidence, the channel devices and the
# processors. The model is built from the single run (N = 1) with
# --shared-cpus $(nproc); N jobs that start together finish after about
# N / X(N), so each stage's prediction is N times its predicted time with
# N workers, compared with the slowest instance's stage time and the
# whole run's wall time (instances.json).
#
#   benches/scripts/model-check.sh [DIR]     default DIR: target/model-check
# Environment: SIZE (1GiB), WORKERS ("2 4"), RUNS (3; medians), STAGES
#   (filesystem,file-hash,index,carve), CASELOAD (binary).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:-$root/target/model-check}"
bin="${CASELOAD:-$root/target/release/caseload}"
size="${SIZE:-1GiB}"
workers="${WORKERS:-2 4}"
runs="${RUNS:-3}"
stages="${STAGES:-filesystem,file-hash,index,carve}"
[ -x "$bin" ] || (cd "$root" && cargo build --release --quiet)
mkdir -p "$dir"
echo "model-check: $size, workers 1 $workers, $runs runs each, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ! -f "$dir/corpus/image.dd" ]; then
    # A dense FAT corpus: enough work per stage to time.
    "$bin" corpus --size "$size" --seed 5 --fs fat --fill 0.72 --format dd --decoys 0 \
        --out "$dir/corpus" >/dev/null
fi
for n in 1 $workers; do
    for r in $(seq 1 "$runs"); do
        d="$dir/n$n-r$r"
        rm -rf "$d"
        mkdir -p "$d/db" "$d/case" "$d/temp"
        "$bin" run --stages "$stages" --evidence "$dir/corpus/image.dd" --database "$d/db" \
            --case "$d/case" --temp "$d/temp" --cache warm --instances "$n" >"$d.log" 2>&1 ||
            { echo "model-check: run N=$n failed; see $d.log" >&2; exit 1; }
        rm -rf "$d/db" "$d/temp" "$d/case"/*/index "$d/case"/index "$d/case"/carved "$d/case"/*/carved
    done
done
# The model from the median single run (by wall time).
best=$(for r in $(seq 1 "$runs"); do
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['totals']['wall_seconds'], sys.argv[1])" \
        "$dir/n1-r$r/case/run.json"
done | sort -g | awk -v n="$runs" 'NR == int((n + 1) / 2) {print $2}')
"$bin" model --run "$best" --workers "1,${workers// /,}" --shared-cpus "$(nproc)" --json >"$dir/model.json"
python3 - "$dir" "$runs" $workers <<'PY'
import json, statistics, sys
d, runs, ns = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3:]]
m = json.load(open(f"{d}/model.json"))
print(f"{'workers':>7} {'stage':<11} {'predicted s':>11} {'measured s':>10} {'error':>7}")
for n in ns:
    i = m["workers"].index(n)
    insts = [json.load(open(f"{d}/n{n}-r{r}/case/instances.json")) for r in range(1, runs + 1)]
    total_p = 0.0
    for s in m["stages"]:
        p = n * s["predicted_s"][i]
        total_p += p
        meas = statistics.median(
            next(a for a in j["aggregate"] if a["name"] == s["name"])["wall_seconds_max"] for j in insts)
        print(f"{n:>7} {s['name']:<11} {p:>11.2f} {meas:>10.2f} {100 * (p / meas - 1):>+6.0f}%")
    meas = statistics.median(j["wall_seconds"] for j in insts)
    print(f"{n:>7} {'total':<11} {total_p:>11.2f} {meas:>10.2f} {100 * (total_p / meas - 1):>+6.0f}%")
PY
