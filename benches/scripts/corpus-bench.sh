#!/usr/bin/env bash
# corpus-gen throughput and memory, side by side with dd.
#
# In one run, on the same file system: generate a SIZE corpus with
# `caseload corpus` and write SIZE of zeros with `dd bs=1M conv=fsync`
# (caseload also fsyncs its image), RUNS times alternately. Prints each
# throughput, the medians, the ratio caseload/dd (goal >= 0.5) and
# caseload's peak RSS. Then checks memory at a much larger size with the
# hidden --discard-image option (all bytes generated and hashed, none
# written), since free disk rarely holds TiB: peak RSS must stay flat.
#
# Usage: benches/scripts/corpus-bench.sh [DIR]
#   DIR   scratch directory on the file system to measure (default:
#         target/corpus-bench under the checkout)
# Environment: SIZE (4GiB), RUNS (3), LARGE (64GiB; e.g. 3TiB to cross
#   the GPT switch, takes hours), THREADS (all cores), CASELOAD (binary),
#   FS (fat, ntfs, exfat, apfs or ext4; default: the command's own, NTFS
#   for the workstation profile at a 4:1 E01; ext4's used space is its
#   blocks less its free blocks, metadata and journal included), PROFILE
#   (workstation; mac-laptop for a Mac's tree, linux-server for a Linux
#   server's).
# Last, the corpus's shape at SIZE (seed 1, also written as E01): files
# per GiB of the disk and of its used space, items per GiB (files, deleted
# files, streams, e-mail messages and attachments: what a suite lists as
# items) and
# the E01 compression ratio (image bytes over E01 bytes).
# Needs GNU time (/usr/bin/time, Debian package `time`).
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE=${SIZE:-4GiB}
RUNS=${RUNS:-3}
LARGE=${LARGE:-64GiB}
DIR=${1:-$PWD/target/corpus-bench}
THREADS=${THREADS:-$(nproc)}
FS=${FS:-}
PROFILE=${PROFILE:-workstation}
# Only a chosen file system is passed on; otherwise the command's default.
fs_args=(--profile "$PROFILE")
[ -n "$FS" ] && fs_args+=(--fs "$FS")
if [ -z "${CASELOAD:-}" ]; then
    cargo build --release --quiet
    CASELOAD=${CARGO_TARGET_DIR:-$PWD/target}/release/caseload
fi
if [ ! -x /usr/bin/time ]; then
    echo "needs GNU time: apt-get install time" >&2
    exit 1
fi
mkdir -p "$DIR"
bytes=$(python3 -c "
import re,sys
m=re.fullmatch(r'(\d+)(KiB|MiB|GiB|TiB)?','$SIZE')
print(int(m.group(1))*{None:1,'KiB':1<<10,'MiB':1<<20,'GiB':1<<30,'TiB':1<<40}[m.group(2)])")
mib=$((bytes / 1048576))

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
secs() { awk -F: '/Elapsed \(wall clock\)/ {n=split($0,p,": "); t=p[n]; k=split(t,q,":"); s=0; for(i=1;i<=k;i++) s=s*60+q[i]; print s}' "$1"; }
rss() { awk '/Maximum resident set size/ {print $NF}' "$1"; }

echo "corpus-bench: $SIZE ${FS:-default fs} in $DIR, $RUNS runs, $THREADS threads, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$DIR/caseload.tp"; : > "$DIR/dd.tp"; : > "$DIR/rss"
for i in $(seq 1 "$RUNS"); do
    rm -rf "$DIR/corpus" "$DIR/zero.bin"
    sync
    /usr/bin/time -v -o "$DIR/time.txt" "$CASELOAD" corpus --out "$DIR/corpus" \
        --size "$SIZE" --seed "$i" --threads "$THREADS" "${fs_args[@]}" >/dev/null
    t=$(secs "$DIR/time.txt")
    tp=$(awk -v b="$bytes" -v t="$t" 'BEGIN {printf "%.1f", b / t / 1e6}')
    echo "$tp" >> "$DIR/caseload.tp"
    rss "$DIR/time.txt" >> "$DIR/rss"
    rm -rf "$DIR/corpus"
    sync
    start=$(date +%s.%N)
    dd if=/dev/zero of="$DIR/zero.bin" bs=1M count="$mib" conv=fsync status=none
    end=$(date +%s.%N)
    dtp=$(awk -v b="$bytes" -v s="$start" -v e="$end" 'BEGIN {printf "%.1f", b / (e - s) / 1e6}')
    echo "$dtp" >> "$DIR/dd.tp"
    rm -f "$DIR/zero.bin"
    echo "run $i: caseload corpus $tp MB/s (${t}s, peak RSS $(tail -1 "$DIR/rss") KiB), dd $dtp MB/s"
done
c=$(median < "$DIR/caseload.tp")
d=$(median < "$DIR/dd.tp")
r=$(median < "$DIR/rss")
echo "median: caseload corpus $c MB/s, dd $d MB/s, ratio $(awk -v c="$c" -v d="$d" 'BEGIN {printf "%.2f", c / d}') (goal >= 0.5), peak RSS $r KiB"

echo "memory at $LARGE (image bytes discarded, everything else computed):"
/usr/bin/time -v -o "$DIR/time-large.txt" "$CASELOAD" corpus --out "$DIR/large" \
    --size "$LARGE" --seed 1 --threads "$THREADS" --decoys 0 --discard-image "${fs_args[@]}" >/dev/null
echo "  $LARGE: peak RSS $(rss "$DIR/time-large.txt") KiB in $(secs "$DIR/time-large.txt")s (vs $r KiB at $SIZE)"
rm -rf "$DIR/large"

echo "shape at $SIZE (${FS:-default fs}, seed 1):"
"$CASELOAD" corpus --out "$DIR/shape" --size "$SIZE" --seed 1 --threads "$THREADS" \
    "${fs_args[@]}" --format dd,e01 --decoys 0 >/dev/null
python3 - "$DIR/shape" <<'PY'
import json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
fs = m["filesystem"]
gib = m["image"]["size"] / (1 << 30)
# APFS counts free blocks over the whole container (its own objects
# included), the others over the clusters.
if fs.get("apfs"):
    used = (fs["apfs"]["container_blocks"] - fs["apfs"]["free_blocks"]) * 4096 / (1 << 30)
else:
    used = (fs["clusters"] - fs["free_clusters"]) * fs["cluster_size"] / (1 << 30)
files = [f for f in m["files"] if f["kind"] == "file"]
live = [f for f in files if f["allocated"] and not f.get("stream")]
deleted = [f for f in files if f["deleted"] and not f.get("stream")]
streams = [f for f in files if f.get("stream")]
attachments = sum(len(f["attachments"]) for f in files)
messages = m["summary"].get("messages", 0)
items = len(live) + len(deleted) + len(streams) + attachments + messages
e01 = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d) if n.startswith("image.E"))
print(f"  {len(live)} live files ({len(live) / gib:.0f} per GiB of disk, {len(live) / used:.0f} per GiB used),"
      f" {len(deleted)} deleted, {len(streams)} streams, {attachments} attachments, {messages} messages")
print(f"  items {items} ({items / gib:.0f} per GiB of disk, {items / used:.0f} per GiB used);"
      f" used {used:.2f} of {gib:.2f} GiB; {m['summary'].get('compressed_files', 0)} compressed;"
      f" E01 ratio {m['image']['size'] / e01:.2f}:1")
PY
rm -rf "$DIR/shape"
