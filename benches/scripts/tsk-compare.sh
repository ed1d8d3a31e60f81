#!/usr/bin/env bash
# caseload's autopsy profile against The Sleuth Kit: for each image,
# `tsk_loaddb` (Debian's sleuthkit) builds an Autopsy-style case database
# and caseload's filesystem stage with `--profile autopsy` builds its own;
# prints for both the database size, the rows per file (tsk_objects +
# tsk_files + tsk_file_layout, over tsk_files) and the write calls per file
# (tsk_loaddb: `strace -f -c`; caseload: run.json's database channel), and
# caseload / TSK.
#
# Usage: benches/scripts/tsk-compare.sh IMAGE...
# Environment:
#   CASELOAD   the caseload binary (default: target/release/caseload)
set -euo pipefail
if [ $# -lt 1 ]; then
    sed -n '2,12p' "$0" >&2
    exit 2
fi
CASELOAD=${CASELOAD:-$(dirname "$0")/../../target/release/caseload}
for tool in tsk_loaddb strace sqlite3 python3; do
    command -v "$tool" > /dev/null || { echo "tsk-compare: needs $tool" >&2; exit 1; }
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tsk-compare.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
printf '%-28s %6s | %10s %10s %5s | %8s %8s %5s | %8s %8s %5s\n' image files "TSK bytes" "cl bytes" x "TSK r/f" "cl r/f" x "TSK w/f" "cl w/f" x
for img in "$@"; do
    name=$(basename "$img")
    d="$WORK/$name"
    mkdir -p "$d/tsk" "$d/cl"
    strace -f -c -o "$d/strace.txt" -e trace=write,pwrite64,writev,pwritev tsk_loaddb -d "$d/tsk/case.db" "$img" > /dev/null 2>&1
    "$CASELOAD" run --evidence "$img" --stages filesystem --profile autopsy --cache warm --json \
        --database "$d/cl" --case "$d/cl" --temp "$d/cl" > "$d/run.json" 2> "$d/run.err" || true
    python3 - "$d" "$name" <<'EOF'
import json, os, re, sqlite3, sys
d, name = sys.argv[1:3]
def rows(db):
    c = sqlite3.connect(db)
    n = lambda t: c.execute(f"select count(*) from {t}").fetchone()[0]
    files = n("tsk_files")
    return files, (n("tsk_objects") + files + n("tsk_file_layout")) / max(files, 1)
tsk_files, tsk_rpf = rows(f"{d}/tsk/case.db")
cl_files, cl_rpf = rows(f"{d}/cl/case.sqlite")
tsk_bytes = os.path.getsize(f"{d}/tsk/case.db")
cl_bytes = os.path.getsize(f"{d}/cl/case.sqlite")
calls = 0
for line in open(f"{d}/strace.txt"):
    m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(write|pwrite64|writev|pwritev)\s*$", line)
    if m:
        calls += int(m.group(1))
run = json.load(open(f"{d}/run.json"))
cl_calls = run["totals"]["channels"]["database"]["write_ops"]
tsk_wpf, cl_wpf = calls / max(tsk_files, 1), cl_calls / max(cl_files, 1)
print(f"{name:<28} {tsk_files:>6} | {tsk_bytes:>10} {cl_bytes:>10} {cl_bytes/tsk_bytes:>5.2f} | "
      f"{tsk_rpf:>8.2f} {cl_rpf:>8.2f} {cl_rpf/tsk_rpf:>5.2f} | {tsk_wpf:>8.2f} {cl_wpf:>8.2f} {cl_wpf/max(tsk_wpf,1e-9):>5.2f}"
      + ("" if cl_files == tsk_files else f"   (caseload lists {cl_files} files)"))
EOF
done
