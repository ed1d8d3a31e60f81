#!/usr/bin/env bash
# A/B of caseload binaries, stage by stage: the same `caseload run`
# arguments with each binary, runs interleaved (a b c a b c ...), every
# channel in a fresh scratch directory per run; prints each stage's median
# wall time per binary, its ratio to the first binary, and the evidence
# channel's read operations (median run).
#
# Usage: benches/scripts/ab-stages.sh EVIDENCE BIN_A BIN_B [BIN_C ...] [-- RUN ARGS...]
#   RUN ARGS default to: --workload ftk4-default --profile native --cache cold
#   (binaries older than 04df65f have no --profile: give RUN ARGS without it)
# Environment:
#   RUNS     runs per binary (default 5)
#   WORK     scratch directory (default: a new one under ${TMPDIR:-/tmp})
set -euo pipefail

if [ $# -lt 3 ]; then
    sed -n '2,12p' "$0" >&2
    exit 2
fi
EVIDENCE=$(realpath "$1")
shift
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    bins+=("$(realpath "$1")")
    shift
done
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--workload ftk4-default --profile native --cache cold)
RUNS=${RUNS:-5}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/ab-stages.XXXXXX")}
mkdir -p "$WORK/runs"
echo "ab-stages: ${#bins[@]} binaries x $RUNS runs on $EVIDENCE; args: ${args[*]}; load: $(uptime | sed 's/.*load average: //')"
for r in $(seq 1 "$RUNS"); do
    for i in "${!bins[@]}"; do
        out="$WORK/case"
        rm -rf "$out"
        mkdir -p "$out"
        "${bins[$i]}" run --evidence "$EVIDENCE" --database "$out" --case "$out" --temp "$out" \
            --json "${args[@]}" > "$WORK/runs/$i-$r.json" 2> "$WORK/runs/$i-$r.err" || {
            echo "ab-stages: binary $i run $r failed:" >&2
            tail -3 "$WORK/runs/$i-$r.err" >&2
            exit 1
        }
    done
    echo "ab-stages: round $r done" >&2
done
rm -rf "$WORK/case"
python3 - "$WORK/runs" "$RUNS" "${bins[@]}" <<'EOF'
import json, statistics, sys
runs_dir, runs, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rep = [[json.load(open(f"{runs_dir}/{i}-{r}.json")) for r in range(1, runs + 1)] for i in range(len(bins))]
for i, b in enumerate(bins):
    print(f"  [{i}] {b}")
names = [s["name"] for s in rep[0][0]["stages"]]
head = "".join(f"{'[%d] s' % i:>10}" for i in range(len(bins)))
ratios = "".join(f"{'[%d]/[0]' % i:>9}" for i in range(1, len(bins)))
print(f"{'stage':<12}{head}{ratios}   evidence read ops (median run)")
totals = [[0.0] * runs for _ in bins]
for k, name in enumerate(names):
    med = []
    ops = []
    for i in range(len(bins)):
        walls = [r["stages"][k]["wall_seconds"] for r in rep[i]]
        for j, w in enumerate(walls):
            totals[i][j] += w
        med.append(statistics.median(walls))
        mid = sorted(rep[i], key=lambda r: r["stages"][k]["wall_seconds"])[runs // 2]
        ops.append(str(mid["stages"][k]["channels"]["evidence"]["read_ops"]))
    cells = "".join(f"{m:>10.3f}" for m in med)
    rs = "".join(f"{(m / med[0] if med[0] else float('nan')):>9.3f}" for m in med[1:])
    print(f"{name:<12}{cells}{rs}   {' / '.join(ops)}")
tm = [statistics.median(t) for t in totals]
print(f"{'total':<12}{''.join(f'{m:>10.3f}' for m in tm)}{''.join(f'{m / tm[0]:>9.3f}' for m in tm[1:])}")
EOF
