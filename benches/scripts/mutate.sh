#!/usr/bin/env bash
# Whole-pipeline mutation: flip, zero or truncate random regions of real
# and generated images (raw and E01), run the full workload on each, and
# count panics, hangs and changed evidence.
#
#   benches/scripts/mutate.sh [COUNT] [SEED]
#
# COUNT mutated images (default 500), spread over the base images: a
# generated 32 MiB corpus (DD and E01) and, when ../shared/real-images is
# there, its small DD and E01 images. Each mutant is one of: bytes flipped
# in 1-8 random regions, regions zeroed, or the file truncated; regions are
# weighted towards the first MiB, where the boot sectors, FAT tables, MFT
# and E01 section headers are. Each run gets TIMEOUT seconds (default
# 120). Required: 0 panics (exit 101 or "panicked" on stderr), 0 hangs,
# the mutant's MD5 the same after the run as before (evidence is opened
# read-only). Other failures (a clear error, a stage failed on bad
# structures) are what bad evidence should give and are counted as
# "refused" (their messages are summarised). The table at the end:
# mutants, completed, completed with recorded processing errors (or a
# failed stage), refused, panics, hangs, evidence changed.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
count="${1:-500}"
seed="${2:-1}"
timeout_s="${TIMEOUT:-120}"
bin="${CASELOAD:-$root/target/release/caseload}"
work="${MUTATE_WORK:-$root/target/mutate-work}"
real="$root/../shared/real-images"
[ -x "$bin" ] || (cd "$root" && cargo build --release --quiet)

rm -rf "$work"
mkdir -p "$work/base" "$work/keep"
"$bin" corpus --size 32MiB --seed "$seed" --format dd,e01 --decoys 100 --out "$work/base/gen" >/dev/null
bases=("$work/base/gen/image.dd" "$work/base/gen/image.E01")
if [ -d "$real" ]; then
    for f in "$real/dftt/6-undel-fat/6-fat-undel.dd" "$real/dftt/5-fat-daylight/daylight.dd" \
        "$real/ewf/image.E01" "$real/dftt-e01/7-ntfs-undel.E01" "$real/fat/fat12.img"; do
        [ -f "$f" ] && bases+=("$f")
    done
    for f in "$real"/dftt/7-undel-ntfs/*.dd "$real"/ntfs/*.img "$real"/ntfs/*.dd; do
        [ -f "$f" ] && bases+=("$f")
    done
else
    echo "mutate.sh: ../shared/real-images is absent: generated images only" >&2
fi

# mutate SRC DST N: write mutant N of SRC to DST (deterministic from seed).
mutate() {
    python3 - "$1" "$2" "$3" "$seed" <<'EOF'
import os, random, shutil, sys
src, dst, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
r = random.Random(seed * 1_000_003 + n)
shutil.copyfile(src, dst)
size = os.path.getsize(dst)
kind = r.choice(["flip", "flip", "zero", "truncate"])
with open(dst, "r+b") as f:
    if kind == "truncate":
        f.truncate(r.randrange(0, max(1, size)))
    else:
        for _ in range(r.randint(1, 8)):
            hot = min(size, 1 << 20)
            at = r.randrange(0, hot) if r.random() < 0.7 else r.randrange(0, size)
            length = min(size - at, r.choice([1, 2, 4, 16, 512, 4096]))
            f.seek(at)
            if kind == "zero":
                f.write(bytes(length))
            else:
                data = bytearray(f.read(length))
                for i in range(len(data)):
                    data[i] ^= r.randrange(1, 256)
                f.seek(at)
                f.write(data)
print(kind)
EOF
}

declare -i done=0 ok=0 errors=0 refused=0 panics=0 hangs=0 changed=0
echo "mutate.sh: $count mutants of ${#bases[@]} images, ${timeout_s}s each; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((n = 0; n < count; n++)); do
    base="${bases[$((n % ${#bases[@]}))]}"
    ext="${base##*.}"
    [ "$ext" = "img" ] && ext="dd"
    m="$work/m.$ext"
    kind="$(mutate "$base" "$m" "$n")"
    before="$(md5sum "$m" | cut -d' ' -f1)"
    case="$work/case"
    rm -rf "$case"
    mkdir -p "$case"
    set +e
    timeout -k 10 "$timeout_s" "$bin" run --workload full --evidence "$m" \
        --database "$case" --case "$case" --temp "$case" --cache warm --threads 2 \
        --kff-library "$work/kff.sqlite" --hashset "known=$work/base/gen/NSRLFile.txt" \
        --hashset "notable=$work/base/gen/notable.md5" \
        >"$work/out.txt" 2>"$work/err.txt"
    rc=$?
    set -e
    after="$(md5sum "$m" | cut -d' ' -f1)"
    done+=1
    status="refused"
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        hangs+=1
        status="hang"
    elif [ "$rc" = 101 ] || grep -q "panicked" "$work/err.txt"; then
        panics+=1
        status="panic"
    elif [ "$rc" = 0 ]; then
        if python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r['status'] != 'completed' or r['totals']['recorded']['errors'] > 0 else 1)" "$case/run.json" 2>/dev/null; then
            errors+=1
            status="recorded-errors"
        else
            ok+=1
            status="completed"
        fi
    else
        refused+=1
        # What the refusal said (its first error line), for the summary.
        grep -m1 -i "error" "$work/err.txt" | cut -c1-100 >>"$work/refusals.txt" || true
    fi
    if [ "$before" != "$after" ]; then
        changed+=1
        status="$status+evidence-changed"
    fi
    case "$status" in
    panic* | hang* | *evidence-changed)
        keep="$work/keep/$n-$status-$(basename "$base").$ext"
        cp "$m" "$keep"
        cp "$work/err.txt" "$keep.stderr"
        echo "mutant $n ($kind of $(basename "$base")): $status, kept as $keep"
        ;;
    esac
done
if [ -s "$work/refusals.txt" ]; then
    echo "most frequent refusals:"
    sed -E 's/[0-9]+/N/g' "$work/refusals.txt" | sort | uniq -c | sort -rn | head -8
fi
printf '\n| mutants | completed | completed, errors recorded | refused | panics | hangs | evidence changed |\n|---|---|---|---|---|---|---|\n'
printf '| %d | %d | %d | %d | %d | %d | %d |\n' "$done" "$ok" "$errors" "$refused" "$panics" "$hangs" "$changed"
[ "$panics" = 0 ] && [ "$hangs" = 0 ] && [ "$changed" = 0 ]
