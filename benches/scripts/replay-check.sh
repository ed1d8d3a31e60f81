#!/usr/bin/env bash
# Issue 49: how faithfully `caseload replay` reproduces real tools. Each
# tool is traced under strace on one lab (TRACE_LAB), then, on each of two
# other labs, run for real and replayed from its trace, cold cache,
# REPEAT times each, interleaved; prints per tool and lab the medians, the
# replay's error against the real run, the median error, and each tool's
# strace overhead (traced against plain on the trace lab).
#
# Needs root (labs: loop devices, FUSE, cgroups) and strace; skips with a
# notice elsewhere. Tools: tsk_loaddb (The Sleuth Kit), foremost,
# ewfverify (libewf) and caseload's own ftk4-default run; those not
# installed are skipped.
#
# Usage: benches/scripts/replay-check.sh [WORKDIR]
# Environment: SIZE (corpus size, 1GiB), REPEAT (3), TRACE_LAB
#   (ftk4-five-channel), LABS ("ftk4-base ftk4-high-end"), TOOLS
#   ("tsk_loaddb foremost ewfverify caseload"), CASELOAD (binary).
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${1:-/var/tmp/caseload-replay-check}
SIZE=${SIZE:-1GiB}
REPEAT=${REPEAT:-3}
TRACE_LAB=${TRACE_LAB:-ftk4-five-channel}
LABS=${LABS:-"ftk4-base ftk4-high-end"}
TOOLS=${TOOLS:-"tsk_loaddb foremost ewfverify caseload"}
BIN=${CASELOAD:-$PWD/target/release/caseload}
[ -x "$BIN" ] || cargo build --release -q

if [ "$(id -u)" != 0 ]; then echo "replay-check: SKIPPED: needs root for the labs"; exit 0; fi
command -v strace >/dev/null || { echo "replay-check: SKIPPED: strace is not installed"; exit 0; }
mkdir -p "$WORK"
IMG=$WORK/corpus/image.dd
[ -f "$IMG" ] || "$BIN" corpus --out "$WORK/corpus" --size "$SIZE" --seed 21 >/dev/null
E01=$WORK/image.E01
[ -f "$E01" ] || "$BIN" convert "$IMG" --to e01 --out "$WORK/image" --compression fast >/dev/null

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
cold() { sync; echo 3 > /proc/sys/vm/drop_caches; }
chan() { "$BIN" lab status "$1" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['channels']['$2'])"; }

# The tool's command line, run by `sh -c` inside a lab (CASELOAD_LAB_*
# name the lab's directories there). Each first removes its last output.
tool_cmd() {
  case $1 in
    tsk_loaddb) echo 'rm -f "$CASELOAD_LAB_DATABASE/tsk.db"; tsk_loaddb -d "$CASELOAD_LAB_DATABASE/tsk.db" "$CASELOAD_LAB_EVIDENCE/image.dd"' ;;
    foremost) echo 'rm -rf "$CASELOAD_LAB_CASE/foremost"; foremost -Q -i "$CASELOAD_LAB_EVIDENCE/image.dd" -o "$CASELOAD_LAB_CASE/foremost"' ;;
    ewfverify) echo 'ewfverify -q "$CASELOAD_LAB_EVIDENCE/image.E01"' ;;
    caseload) echo "\"$BIN\" run --layout \"\$CASELOAD_LAB_LAYOUT\" --workload ftk4-default --evidence \"\$CASELOAD_LAB_EVIDENCE/image.dd\" --hashset known=\"$WORK/corpus/NSRLFile.txt\" --force --cache warm >/dev/null" ;;
  esac
}
tool_present() {
  case $1 in caseload) return 0 ;; *) command -v "$1" >/dev/null ;; esac
}
evidence_of() { case $1 in ewfverify) echo image.E01 ;; *) echo image.dd ;; esac; }

labs_up=()
cleanup() { for l in "${labs_up[@]}"; do "$BIN" lab down "$l" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT
for lab in $TRACE_LAB $LABS; do
  "$BIN" lab up "$lab" --evidence "$IMG" --evidence "$E01" >/dev/null
  labs_up+=("$lab")
done
# `run --layout` inside `lab exec` needs the layout file's path.
layout_of() { "$BIN" lab status "$1" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['layout'])"; }

declare -A LAYOUT
for lab in $TRACE_LAB $LABS; do LAYOUT[$lab]=$(layout_of "$lab"); done
in_lab() { # LAB CMD...: run in the lab with CASELOAD_LAB_LAYOUT set
  local lab=$1; shift
  CASELOAD_LAB_LAYOUT=${LAYOUT[$lab]} "$BIN" lab exec "$lab" "$@"
}
# A tool's own time inside the lab (not `lab exec`'s start), as a trace's
# span and a replay's wall time count it: LAB CMD [TRACER...].
timed_in_lab() {
  local lab=$1 cmd=$2; shift 2
  in_lab "$lab" "$@" sh -c "t0=\$(date +%s%N); $cmd; t1=\$(date +%s%N); echo \$((t1 - t0)) > '$WORK/t.ns'" >/dev/null 2>&1
  echo "$(cat "$WORK/t.ns") / 1000000000" | bc -l
}

echo "replay-check: corpus $SIZE ($IMG), trace lab $TRACE_LAB, labs $LABS, $REPEAT runs each; cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); load $(cat /proc/loadavg)"
printf "%-11s %-18s %9s %9s %8s\n" tool lab "real s" "replay s" error
errors=()
for tool in $TOOLS; do
  tool_present "$tool" || { echo "$tool: not installed, skipped"; continue; }
  cmd=$(tool_cmd "$tool")
  # Traced on the trace lab, and its plain time there for the overhead.
  cold; plain=$(timed_in_lab "$TRACE_LAB" "$cmd")
  cold; traced=$(timed_in_lab "$TRACE_LAB" "$cmd" strace -f -qq -ttt -T -yy -e trace=desc,file,process,network,futex -o "$WORK/$tool.strace")
  maps=()
  for c in evidence database case temp; do maps+=(--map "$(chan "$TRACE_LAB" $c)=$c"); done
  # The tracer's cost per stop from the plain run: the best figure there is.
  "$BIN" trace import "$WORK/$tool.strace" "${maps[@]}" --out "$WORK/$tool.trace" --plain-seconds "$plain" \
      --exclude 'run.json*' --exclude 'run.progress*' --exclude '.caseload-probe-*' > "$WORK/$tool.import.txt"
  echo "$tool: plain $plain s, under strace $traced s on $TRACE_LAB ($(grep -o "strace's cost per stop from the plain run: [0-9]* ns ([^)]*)" "$WORK/$tool.import.txt" || echo 'no overhead measured'))"
  for lab in $LABS; do
    : > "$WORK/t.real"; : > "$WORK/t.replay"
    ev=$(chan "$lab" evidence)/$(evidence_of "$tool")
    for _ in $(seq "$REPEAT"); do
      cold; timed_in_lab "$lab" "$cmd" >> "$WORK/t.real"
      # Exit 2: replayed, with operations that failed (counted in run.json).
      "$BIN" replay "$WORK/$tool.trace" --lab "$lab" --evidence "$ev" --force --json > "$WORK/replay.json" || [ $? = 2 ]
      python3 -c "import json; print(json.load(open('$WORK/replay.json'))['totals']['wall_seconds'])" >> "$WORK/t.replay"
    done
    r=$(median < "$WORK/t.real"); p=$(median < "$WORK/t.replay")
    e=$(echo "$p / $r - 1" | bc -l)
    errors+=("$(echo "$e" | awk '{print ($1 < 0) ? -$1 : $1}')")
    failed=$(python3 -c "import json; print(json.load(open('$WORK/replay.json'))['totals']['recorded']['errors'])")
    printf "%-11s %-18s %9.2f %9.2f %+7.1f%%   real: %s replay: %s (operations failed in the last replay: %s)\n" "$tool" "$lab" "$r" "$p" "$(echo "$e * 100" | bc -l)" \
      "$(tr '\n' ' ' < "$WORK/t.real")" "$(tr '\n' ' ' < "$WORK/t.replay")" "$failed"
  done
done
if [ ${#errors[@]} -gt 0 ]; then
  printf "median |error|: %.1f%% (goal <= 5%%); largest: %.1f%% (goal <= 10%%)\n" \
    "$(printf '%s\n' "${errors[@]}" | median | awk '{print $1*100}')" \
    "$(printf '%s\n' "${errors[@]}" | sort -g | tail -1 | awk '{print $1*100}')"
fi
echo "load: $(cat /proc/loadavg)"
