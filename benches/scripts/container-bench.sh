#!/usr/bin/env bash
# What reading evidence inside a virtual-disk container costs against
# reading the raw image: `caseload run --stages image-hash` (every media
# byte read and hashed) over a corpus image and over the same image
# converted by qemu-img to sparse VMDK, stream-optimized VMDK, QCOW2
# (plain and compressed), dynamic VHD and VHDX, warm page cache, timed
# side by side with hyperfine. Prints each format's median, its ratio to
# the raw image's and its CPU seconds; the goal (issue 50) is at most 1.1x
# for VMDK and QCOW2. Every run's MD5 is checked against the raw image's
# first.
#
# The reading is hashed with MD5 alone by default: the stage's default
# (MD5 and SHA-1) adds 0.66 CPU-s per GiB of SHA-1, which on two cores
# leaves no room for a compressed format's inflating (3.0 CPU-s against
# the raw image's 2.4 on the Xeon here), so the ratio would measure the
# cores, not the reading. HASHES='"md5","sha1"' measures that too.
#
# Usage: benches/scripts/container-bench.sh [WORKDIR]
# Environment:
#   SIZE    corpus size (default 1GiB)
#   RUNS    timed runs per format (default 5)
#   HASHES  image-hash's algorithms, TOML strings (default "md5")
set -euo pipefail

cd "$(dirname "$0")/../.."
SIZE=${SIZE:-1GiB}
RUNS=${RUNS:-5}
HASHES=${HASHES:-'"md5"'}
for tool in hyperfine qemu-img jq; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIPPED container-bench: \`$tool\` is not installed" >&2
        exit 0
    fi
done
WORK=${1:-$(mktemp -d "${TMPDIR:-/tmp}/container-bench.XXXXXX")}
mkdir -p "$WORK"
cargo build --release --quiet --bin caseload -p caseload
BIN=${CARGO_TARGET_DIR:-target}/release/caseload
IMAGE="$WORK/corpus/image.dd"
[ -f "$IMAGE" ] || "$BIN" corpus --out "$WORK/corpus" --size "$SIZE" --seed 1 --decoys 0 >/dev/null

declare -A MAKE=(
    [sparse.vmdk]="-O vmdk -o subformat=monolithicSparse"
    [stream.vmdk]="-O vmdk -o subformat=streamOptimized"
    [plain.qcow2]="-O qcow2"
    [compressed.qcow2]="-c -O qcow2"
    [dynamic.vhd]="-O vpc -o subformat=dynamic,force_size=on"
    [disk.vhdx]="-O vhdx"
)
ORDER="sparse.vmdk stream.vmdk plain.qcow2 compressed.qcow2 dynamic.vhd disk.vhdx"
for f in $ORDER; do
    # shellcheck disable=SC2086
    [ -f "$WORK/$f" ] || qemu-img convert ${MAKE[$f]} "$IMAGE" "$WORK/$f"
done

hash_of() {
    local dir="$WORK/case-$(basename "$1")"
    rm -rf "$dir" && mkdir -p "$dir"
    "$BIN" run --stages image-hash --cache warm --json --evidence "$1" \
        --database "$dir" --case "$dir" --temp "$dir" |
        jq -r '.stages[0].summary.details.md5'
}
want=$(hash_of "$IMAGE")
for f in $ORDER; do
    got=$(hash_of "$WORK/$f")
    [ "$got" = "$want" ] || { echo "$f: MD5 $got, raw image $want" >&2; exit 1; }
done
echo "all formats hash to $want; image-hash algorithms [$HASHES]; $(uptime)"

cmd() {
    local dir="$WORK/timed-$(basename "$1")"
    echo "rm -rf $dir && mkdir -p $dir && $BIN run --stages image-hash --stage-option 'image-hash.algorithms=[$HASHES]' --cache warm --evidence $1 --database $dir --case $dir --temp $dir > /dev/null"
}
args=(-n raw "$(cmd "$IMAGE")")
for f in $ORDER; do args+=(-n "$f" "$(cmd "$WORK/$f")"); done
hyperfine --warmup 1 --runs "$RUNS" --export-json "$WORK/containers.json" "${args[@]}" >/dev/null
jq -r '.results as $r | ($r[] | select(.command == "raw") | .median) as $raw
    | $r[] | "\(.command)\tmedian \(.median * 1000 | floor) ms\t\(.median / $raw * 100 | floor / 100)x raw\tCPU \((.user + .system) * 100 | floor / 100) s"' \
    "$WORK/containers.json" | column -t -s $'\t'
