#!/usr/bin/env bash
# caseload on 64-bit ARM Linux (a Graviton server, Apple silicon under
# Linux), checked on an x86-64 machine: cross-build for
# aarch64-unknown-linux-gnu and run, under qemu-user,
#   - the unit tests of the crates whose code differs by architecture or
#     parses bytes (digests and lanes: every kernel the CPU has against
#     the reference on the edge lengths; filesystems, corpus-gen, engine),
#   - `caseload doctor` (what each kernel falls back to there),
#   - `caseload quickstart` end to end (corpus, every stage, SQLite).
# Not in `.ci/run`: the cross-build alone takes about 6 minutes on 2 cores
# and emulation is slow; run it when touching kernels or byte parsing.
#
# Usage: benches/scripts/aarch64.sh
# Needs: rustup target add aarch64-unknown-linux-gnu;
#   apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
# Environment: CRATES (the test crates, default below), QUICKSTART (0 to
#   skip the end-to-end run).
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=aarch64-unknown-linux-gnu
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIPPED aarch64: \`$tool\` is not installed (gcc-aarch64-linux-gnu, qemu-user)" >&2
        exit 0
    fi
done
if ! rustup target list --installed | grep -qx "$TARGET"; then
    echo "SKIPPED aarch64: rustup target add $TARGET" >&2
    exit 0
fi
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
CRATES=${CRATES:-caseload-digests caseload-lanes caseload-fs caseload-corpus caseload-engine}
args=()
for c in $CRATES; do args+=(-p "$c"); done
echo "aarch64: tests of $CRATES under qemu-user; load $(cut -d' ' -f1-3 /proc/loadavg)"
# Unit tests, and the kernels' reference tests (digests, lanes).
cargo test --release --target "$TARGET" "${args[@]}" --lib
cargo test --release --target "$TARGET" -p caseload-digests -p caseload-lanes --tests
cargo build --release --target "$TARGET" --bin caseload
BIN=$(realpath "${CARGO_TARGET_DIR:-target}/$TARGET/release/caseload")
file "$BIN"
$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER "$BIN" doctor
if [ "${QUICKSTART:-1}" = 1 ]; then
    work=$(mktemp -d)
    (cd "$work" && $CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER "$BIN" quickstart)
    rm -rf "$work"
fi
echo "aarch64: done"
