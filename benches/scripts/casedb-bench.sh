#!/usr/bin/env bash
# Side-by-side benchmark of the case database's two engines: the
# ftk4-default workload over one `caseload corpus` image with the case in
# SQLite and in a private PostgreSQL cluster, every channel in one
# directory (the same device for both), cold cache, runs interleaved.
# Optionally a third column: an older caseload binary (OLD_CASELOAD) on
# SQLite, for an A/B of this build's SQLite path against it.
#
# Prints, per stage, the median wall time of each configuration and the
# database channel's bytes read/written, operations and fsyncs (from the
# median run), and the ratio PostgreSQL / SQLite (and this build / old).
#
# Usage: benches/scripts/casedb-bench.sh [WORKDIR]
#   WORKDIR   scratch directory (default: a new one under ${TMPDIR:-/tmp});
#             the corpus is kept there and reused by later runs
# Environment:
#   SIZE          corpus disk size (default 2GiB)
#   RUNS          runs per configuration (default 3)
#   THREADS       caseload threads (default: every core)
#   CASELOAD      use this caseload binary instead of building one
#   OLD_CASELOAD  also run this (older) binary on SQLite
#   WORKLOAD      workload (default ftk4-default)
#   PROFILE       suite profile (default native: the engines compared on
#                 caseload's own writes; ftk4 runs on PostgreSQL only)
set -euo pipefail

cd "$(dirname "$0")/../.."
SIZE=${SIZE:-2GiB}
RUNS=${RUNS:-3}
THREADS=${THREADS:-$(nproc)}
WORKLOAD=${WORKLOAD:-ftk4-default}
PROFILE=${PROFILE:-native}

for tool in python3; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIPPED casedb-bench: \`$tool\` is not installed" >&2
        exit 0
    fi
done

WORK=${1:-$(mktemp -d "${TMPDIR:-/tmp}/casedb-bench.XXXXXX")}
mkdir -p "$WORK"
chmod 755 "$WORK"
if [ -z "${CASELOAD:-}" ]; then
    cargo build --release --quiet --bin caseload -p caseload
    CASELOAD=$(realpath "${CARGO_TARGET_DIR:-target}/release/caseload")
fi

EV="$WORK/corpus"
if [ ! -f "$EV/image.dd" ]; then
    "$CASELOAD" corpus --out "$EV" --size "$SIZE" --seed 11 >/dev/null
fi
echo "casedb-bench: $SIZE corpus in $EV; workload $WORKLOAD; $RUNS runs each; load: $(uptime | sed 's/.*load average: //')"

configs=(sqlite postgres)
[ -n "${OLD_CASELOAD:-}" ] && configs+=(old)

run_one() { # config round
    local c=$1 r=$2 dir="$WORK/runs/$1-$2" bin=$CASELOAD extra=()
    rm -rf "$dir"
    mkdir -p "$dir"
    chmod 755 "$dir"
    case $c in
        postgres) extra=(--db-engine postgres) ;;
        old) bin=$OLD_CASELOAD ;;
    esac
    "$bin" run --evidence "$EV/image.dd" --workload "$WORKLOAD" --profile "$PROFILE" \
        --hashset "known=$EV/NSRLFile.txt" --hashset "notable=$EV/notable.md5" \
        --database "$dir" --case "$dir" --temp "$dir" --threads "$THREADS" \
        --cache cold --force --json "${extra[@]}" >"$WORK/runs/$c-$r.json" 2>"$WORK/runs/$c-$r.err" || {
        echo "casedb-bench: $c run $r failed:" >&2
        tail -3 "$WORK/runs/$c-$r.err" >&2
        exit 1
    }
    # Keep the report, not the case (2 GiB corpora make big ones).
    rm -rf "$dir"
}

mkdir -p "$WORK/runs"
for r in $(seq 1 "$RUNS"); do
    for c in "${configs[@]}"; do
        echo "casedb-bench: round $r: $c" >&2
        run_one "$c" "$r"
    done
done

python3 - "$WORK/runs" "$RUNS" "${configs[@]}" <<'EOF'
import json, statistics, sys
runs_dir, runs, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
reports = {c: [json.load(open(f"{runs_dir}/{c}-{r}.json")) for r in range(1, runs + 1)] for c in configs}
stages = [s["name"] for s in reports[configs[0]][0]["stages"]]

def wall(rep, name):
    return next(s["wall_seconds"] for s in rep["stages"] if s["name"] == name)

def median_run(c, name):
    reps = sorted(reports[c], key=lambda rep: wall(rep, name))
    return reps[len(reps) // 2]

print()
head = f"{'stage':<11}" + "".join(f"{c + ' s':>12}" for c in configs)
head += f"{'pg/sqlite':>11}" + (f"{'new/old':>9}" if "old" in configs else "")
head += "   database R MB / W MB / R ops / W ops / fsyncs (median run)"
print(head)
totals = {c: [0.0] * runs for c in configs}
for name in stages:
    med = {}
    for c in configs:
        walls = [wall(rep, name) for rep in reports[c]]
        for i, w in enumerate(walls):
            totals[c][i] += w
        med[c] = statistics.median(walls)
    line = f"{name:<11}" + "".join(f"{med[c]:>12.2f}" for c in configs)
    line += f"{med['postgres'] / med['sqlite']:>11.2f}" if med["sqlite"] > 0 else f"{'-':>11}"
    if "old" in configs:
        line += f"{med['sqlite'] / med['old']:>9.3f}" if med["old"] > 0 else f"{'-':>9}"
    for c in configs:
        s = next(s for s in median_run(c, name)["stages"] if s["name"] == name)
        d = s["channels"]["database"]
        line += f"   {c}: {d['bytes_read'] / 1e6:.1f}/{d['bytes_written'] / 1e6:.1f}/{d['read_ops']}/{d['write_ops']}/{d['fsyncs']}"
    print(line)
med_total = {c: statistics.median(totals[c]) for c in configs}
line = f"{'total':<11}" + "".join(f"{med_total[c]:>12.2f}" for c in configs)
line += f"{med_total['postgres'] / med_total['sqlite']:>11.2f}"
if "old" in configs:
    line += f"{med_total['sqlite'] / med_total['old']:>9.3f}"
print(line)
for c in configs:
    print(f"{c}: runs (total s) {', '.join(f'{t:.2f}' for t in totals[c])}; database {reports[c][0]['database']['engine']}")
EOF
