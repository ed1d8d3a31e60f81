#!/usr/bin/env bash
# Probe every channel of each lab (root): `lab up`, `probe --lab --json`,
# `lab down`; one DIR/LAB.json per lab, for `caseload predict --from/--devices`
# (measured figures instead of the models' expected ones).
#
# Usage: benches/scripts/lab-probes.sh DIR [LAB...]   (default: the FTK 4 study's labs)
# Environment:
#   CASELOAD   the caseload binary (default: target/release/caseload)
#   SIZE       probe scratch size (default 256MiB); SECONDS random-read seconds (default 3)
set -euo pipefail
if [ $# -lt 1 ]; then
    sed -n '2,9p' "$0" >&2
    exit 2
fi
OUT=$1
shift
LABS=("$@")
[ ${#LABS[@]} -eq 0 ] && LABS=(ftk4-base ftk4-ssd-db ftk4-pcie-db ftk4-raid5-data ftk4-ssd-system ftk4-high-end ftk4-five-channel)
CASELOAD=${CASELOAD:-$(dirname "$0")/../../target/release/caseload}
mkdir -p "$OUT"
# The evidence channel is probed by reading a file on it: 256 MiB of
# incompressible data, loaded into each lab like evidence.
EVIDENCE=$(mktemp -d)/probe-evidence.bin
head -c 268435456 /dev/urandom > "$EVIDENCE"
for lab in "${LABS[@]}"; do
    "$CASELOAD" lab up "$lab" --evidence "$EVIDENCE" > /dev/null
    trap '"$CASELOAD" lab down "$lab" > /dev/null' EXIT
    "$CASELOAD" probe --lab "$lab" --evidence "$EVIDENCE" --size "${SIZE:-256MiB}" --seconds "${SECONDS_RANDOM:-3}" --json > "$OUT/$lab.json"
    "$CASELOAD" lab down "$lab" > /dev/null
    trap - EXIT
    echo "lab-probes: $lab -> $OUT/$lab.json"
done
rm -rf "$(dirname "$EVIDENCE")"
