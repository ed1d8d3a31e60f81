#!/usr/bin/env bash
# How well `caseload predict` predicts: from a study's runs on one lab
# (default ftk4-base), predict every other lab's stage times and set them
# beside the times measured there; prints per evidence file and lab the
# predicted and measured seconds per stage and in total, and the error
# (predicted / measured - 1).
#
# Usage: benches/scripts/predict-check.sh STUDY_DIR [SOURCE_LAB]
#   STUDY_DIR  the --out of `caseload study ftk4` (labs/LAB/runs/*.json)
# Environment:
#   CASELOAD   the caseload binary (default: target/release/caseload)
#   PROBES     a directory of LAB.json probes (benches/scripts/lab-probes.sh):
#              measured device figures instead of the models' expected ones
set -euo pipefail

if [ $# -lt 1 ]; then
    sed -n '2,13p' "$0" >&2
    exit 2
fi
STUDY=$1
SOURCE=${2:-ftk4-base}
CASELOAD=${CASELOAD:-$(dirname "$0")/../../target/release/caseload}
[ -d "$STUDY/labs/$SOURCE/runs" ] || { echo "predict-check: no runs of $SOURCE in $STUDY" >&2; exit 1; }

for src in "$STUDY/labs/$SOURCE/runs/"*.json; do
    case $src in *.partial) continue ;; esac
    # c-EVIDENCE@LAB-rN.json
    base=$(basename "$src")
    evidence=${base#c-}
    evidence=${evidence%@*}
    for labdir in "$STUDY/labs/"*/; do
        lab=$(basename "$labdir")
        [ "$lab" = "$SOURCE" ] && continue
        measured=$(ls "$labdir/runs/c-$evidence@$lab-r"*.json 2>/dev/null | head -1 || true)
        [ -n "$measured" ] || continue
        from=$SOURCE
        to=$lab
        if [ -n "${PROBES:-}" ]; then
            from=$PROBES/$SOURCE.json
            to=$PROBES/$lab.json
        fi
        "$CASELOAD" predict --run "$src" --from "$from" --devices "$to" --json > "$STUDY/predict-$evidence-$lab.json"
        python3 - "$STUDY/predict-$evidence-$lab.json" "$measured" "$evidence" "$SOURCE" "$lab" <<'EOF'
import json, sys
pred = json.load(open(sys.argv[1]))
meas = json.load(open(sys.argv[2]))
ev, src, lab = sys.argv[3:6]
m = {s["name"]: s["wall_seconds"] for s in meas["stages"] if s["status"] == "completed"}
print(f"{ev}: {src} -> {lab}")
print(f"  {'stage':<11} {'predicted':>9} {'measured':>9} {'error':>7}")
for s in pred["stages"]:
    got = m.get(s["name"])
    if got is None:
        continue
    err = s["predicted_s"] / got - 1 if got > 0 else 0.0
    print(f"  {s['name']:<11} {s['predicted_s']:>9.2f} {got:>9.2f} {err:>+7.1%}")
total = sum(m.get(s["name"], 0) for s in pred["stages"])
err = pred["predicted_total_s"] / total - 1 if total > 0 else 0.0
print(f"  {'total':<11} {pred['predicted_total_s']:>9.2f} {total:>9.2f} {err:>+7.1%}")
EOF
    done
done
