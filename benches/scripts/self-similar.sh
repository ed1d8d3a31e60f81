#!/usr/bin/env bash
# Self-similar corpora (issue 38): what a GiB of used space holds at each
# disk size. Generates the default workstation corpus (NTFS, 4:1 E01) at
# each SIZE for each seed with the image bytes discarded (the figures need
# only the plan and the content's sizes), reads the manifest's
# summary.per_gib_used and prints, per size, the mean over the seeds of
# files, folders, deleted files, residue, messages, attachments, members and text
# bytes per GiB used, and each one's ratio to the first size's (goal:
# within 10%).
#
# Usage: benches/scripts/self-similar.sh [DIR]
# Environment: SIZES ("1GiB 4GiB 16GiB"), SEEDS ("1 2 3"), PROFILE
#   (workstation; e.g. linux-server, usb-stick, mac-laptop on their own
#   file systems), CASELOAD (binary; default: build the release one).
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZES=${SIZES:-1GiB 4GiB 16GiB}
SEEDS=${SEEDS:-1 2 3}
PROFILE=${PROFILE:-workstation}
DIR=${1:-$PWD/target/self-similar}
if [ -z "${CASELOAD:-}" ]; then
    cargo build --release --quiet
    CASELOAD=${CARGO_TARGET_DIR:-$PWD/target}/release/caseload
fi
mkdir -p "$DIR"
echo "self-similar: $PROFILE, sizes $SIZES, seeds $SEEDS, load $(cut -d' ' -f1-3 /proc/loadavg)"
for size in $SIZES; do
    for seed in $SEEDS; do
        rm -rf "$DIR/$size-$seed"
        start=$(date +%s)
        "$CASELOAD" corpus --out "$DIR/$size-$seed" --size "$size" --seed "$seed" \
            --profile "$PROFILE" --decoys 1000 --discard-image >/dev/null
        echo "  $size seed $seed: $(( $(date +%s) - start )) s"
    done
done
python3 - "$DIR" "$SIZES" "$SEEDS" <<'PY'
import json, sys
d, sizes, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
keys = ["files", "folders", "deleted_files", "residue_items", "messages", "attachments", "members", "text_bytes"]
rows = []
for size in sizes:
    per = [json.load(open(f"{d}/{size}-{s}/manifest.json"))["summary"]["per_gib_used"] for s in seeds]
    rows.append((size, {k: sum(p[k] for p in per) / len(per) for k in keys},
                 sum(p["used_bytes"] for p in per) / len(per) / 2**30))
print("| size | used GiB | " + " | ".join(keys) + " |")
print("|---|---|" + "---|" * len(keys))
base = rows[0][1]
for size, m, used in rows:
    cells = [f"{m[k]:.0f} ({m[k] / base[k]:.2f})" if base[k] else f"{m[k]:.0f}" for k in keys]
    print(f"| {size} | {used:.2f} | " + " | ".join(cells) + " |")
worst = max(abs(m[k] / base[k] - 1) for _, m, _ in rows for k in keys
            if base[k] and k not in ("deleted_files", "residue_items"))
print(f"largest deviation from {rows[0][0]} (files, folders, messages, attachments, members, text): {worst:.1%} (goal <= 10%)")
PY
