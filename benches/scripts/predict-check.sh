#!/usr/bin/env bash
# How well `caseload predict` predicts: from a study's runs on each lab,
# predict every other lab's stage times and set them beside the times
# measured there (both directions: an upgrade and a downgrade), for every
# evidence file the study ran. Each pair's prediction is the median over
# the source lab's runs, its measurement the median over the target's
# runs. Prints per pair the predicted and measured seconds per stage and
# in total, and the error (predicted / measured - 1); then a summary: the
# worst total, each stage's worst error where the stage took a second or
# more, and the lines for docs/predict.md's table and the error bands in
# `workloads/src/predict.rs` (STAGE_ERROR, TOTAL_ERROR).
#
# Usage: benches/scripts/predict-check.sh STUDY_DIR [SOURCE_LAB...]
#   STUDY_DIR   the --out of `caseload study ftk4` (labs/LAB/runs/*.json)
#   SOURCE_LAB  predict from these labs only (default: every lab)
# Environment:
#   CASELOAD   the caseload binary (default: target/release/caseload)
#   PROBES     a directory of LAB.json probes (benches/scripts/lab-probes.sh):
#              measured device figures instead of the models' expected ones
#   MIN_STAGE  the shortest measured stage, seconds, whose error counts in
#              the summary (default 1)
set -euo pipefail

if [ $# -lt 1 ]; then
    sed -n '2,21p' "$0" >&2
    exit 2
fi
STUDY=$1
shift
CASELOAD=${CASELOAD:-$(dirname "$0")/../../target/release/caseload}
[ -d "$STUDY/labs" ] || { echo "predict-check: no labs in $STUDY" >&2; exit 1; }
SOURCES=("$@")
if [ ${#SOURCES[@]} -eq 0 ]; then
    for d in "$STUDY/labs/"*/; do SOURCES+=("$(basename "$d")"); done
fi
OUT=$STUDY/predict-check
rm -rf "$OUT"
mkdir -p "$OUT"

devices() { # LAB -> what --from/--devices take
    if [ -n "${PROBES:-}" ]; then echo "$PROBES/$1.json"; else echo "$1"; fi
}

for source in "${SOURCES[@]}"; do
    for src in "$STUDY/labs/$source/runs/"c-*.json; do
        [ -e "$src" ] || continue
        # c-EVIDENCE@LAB-rN.json
        base=$(basename "$src" .json)
        evidence=${base#c-}
        evidence=${evidence%@*}
        repeat=${base##*-r}
        for labdir in "$STUDY/labs/"*/; do
            lab=$(basename "$labdir")
            [ "$lab" = "$source" ] && continue
            ls "$labdir/runs/c-$evidence@$lab-r"*.json > /dev/null 2>&1 || continue
            "$CASELOAD" predict --run "$src" --from "$(devices "$source")" --devices "$(devices "$lab")" --json \
                > "$OUT/$evidence@$source@$lab@r$repeat.json"
        done
    done
done

python3 - "$STUDY" "$OUT" "${MIN_STAGE:-1}" <<'EOF'
import glob, json, math, os, statistics, sys
up = lambda e: math.ceil(abs(e) * 100) / 100
study, out, min_stage = sys.argv[1], sys.argv[2], float(sys.argv[3])

def measured(lab, evidence):
    times = {}
    for f in glob.glob(f"{study}/labs/{lab}/runs/c-{evidence}@{lab}-r*.json"):
        for s in json.load(open(f))["stages"]:
            if s["status"] == "completed":
                times.setdefault(s["name"], []).append(s["wall_seconds"])
    return {k: statistics.median(v) for k, v in times.items()}

pairs = {}
for f in sorted(glob.glob(f"{out}/*.json")):
    evidence, source, lab, _ = os.path.basename(f)[:-5].split("@")
    pairs.setdefault((evidence, source, lab), []).append(json.load(open(f)))

worst_total, worst_stage, rows = (0.0, ""), {}, []
for (evidence, source, lab), preds in sorted(pairs.items()):
    m = measured(lab, evidence)
    names = [s["name"] for s in preds[0]["stages"] if s["name"] in m]
    pred = {n: statistics.median(next(s["predicted_s"] for s in p["stages"] if s["name"] == n) for p in preds) for n in names}
    print(f"{evidence}: {source} -> {lab}")
    print(f"  {'stage':<11} {'predicted':>9} {'measured':>9} {'error':>7}")
    cells = []
    for n in names:
        err = pred[n] / m[n] - 1 if m[n] > 0 else 0.0
        print(f"  {n:<11} {pred[n]:>9.2f} {m[n]:>9.2f} {err:>+7.1%}")
        cells.append(f"{pred[n]:.2f}/{m[n]:.2f} ({err:+.1%})")
        if m[n] >= min_stage:
            w = worst_stage.get(n, (0.0, ""))
            if abs(err) >= abs(w[0]):
                worst_stage[n] = (err, f"{evidence} {source} -> {lab}")
    tp, tm = sum(pred.values()), sum(m[n] for n in names)
    err = tp / tm - 1 if tm > 0 else 0.0
    print(f"  {'total':<11} {tp:>9.2f} {tm:>9.2f} {err:>+7.1%}")
    if abs(err) >= abs(worst_total[0]):
        worst_total = (err, f"{evidence} {source} -> {lab}")
    rows.append(f"| {evidence} | {source} | {lab} | " + " | ".join(cells) + f" | {tp:.2f}/{tm:.2f} ({err:+.1%}) |")

print()
print(f"worst total: {worst_total[0]:+.1%} ({worst_total[1]})")
for n, (e, where) in worst_stage.items():
    print(f"worst {n} (measured >= {min_stage:g} s): {e:+.1%} ({where})")
print()
print("docs/predict.md rows (evidence | from | to | stages ... | total):")
print("\n".join(rows))
print()
print("workloads/src/predict.rs bands:")
print(f"pub const TOTAL_ERROR: f64 = {up(worst_total[0]):.2f};")
print("pub const STAGE_ERROR: &[(&str, f64)] = &[" + ", ".join(f'("{n}", {up(e):.2f})' for n, (e, _) in worst_stage.items()) + "];")
EOF
