#!/usr/bin/env bash
# apfsck with upstream's fix for compressed files, built from Debian's own
# source, installed as /usr/local/bin/apfsck (ahead of /usr/sbin/apfsck on
# PATH). An oracle for the tests only.
#
# Why: bookworm's apfsprogs (0+git20230206) cannot check a file
# compressed into its resource fork, which the corpus writer's APFS
# compressed files are. apfsprogs fixed both faults the next day:
# - it reports "Object map record: oid used twice in latest checkpoint."
#   and stops: reading the fork goes through the file-system tree again
#   (a query), and that version marks the nodes a query revisits as seen
#   twice (commit 9428092, "Fix double check of objects during dstream
#   read": no marks while a query runs);
# - its be32_to_cpu() does not swap bytes, so the fork's big-endian header
#   reads as "block metadata is too big" (commit 363557e, "Fix
#   be32_to_cpu()").
# Nothing else changes.
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
src=/etc/apt/sources.list.d/caseload-apfsprogs-src.sources
printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
    $SUDO tee "$src" >/dev/null
$SUDO apt-get update -o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts=/etc/apt/sources.list.d >/dev/null
$SUDO apt-get install -y --no-install-recommends dpkg-dev gcc make libc6-dev >/dev/null
cd "$work"
apt-get source --download-only apfsprogs
dpkg-source -x apfsprogs_*.dsc src >/dev/null
c=src/apfsck/object.c
# The fix: neither check nor set a node's "seen" marks while a query runs.
sed -i \
    -e 's/if (omap_rec->seen_for_snap)$/if (!ongoing_query \&\& omap_rec->seen_for_snap)/' \
    -e 's/if (omap_rec->seen_for_latest)$/if (!ongoing_query \&\& omap_rec->seen_for_latest)/' \
    -e 's/^\(\t*\)omap_rec->seen_for_snap = true;/\1if (!ongoing_query)\n\1\tomap_rec->seen_for_snap = true;/' \
    -e 's/^\(\t*\)omap_rec->seen_for_latest = true;/\1if (!ongoing_query)\n\1\tomap_rec->seen_for_latest = true;/' \
    "$c"
if [ "$(grep -c 'ongoing_query' "$c")" -ne 5 ]; then
    echo "fixed-apfsck.sh: the fix did not apply to $c" >&2
    exit 1
fi
# The other: big-endian fields swapped on this (little-endian) host.
t=src/include/apfs/types.h
sed -i 's/^#define be32_to_cpu(x)\t((__force u32)(__be32)(x))$/#define be32_to_cpu(x)\t__builtin_bswap32((__force u32)(__be32)(x))/' "$t"
if ! grep -q '__builtin_bswap32' "$t"; then
    echo "fixed-apfsck.sh: the be32_to_cpu fix did not apply to $t" >&2
    exit 1
fi
make -C src/apfsck >/dev/null
$SUDO install -m 0755 src/apfsck/apfsck /usr/local/bin/apfsck
$SUDO rm -f "$src"
echo "fixed-apfsck.sh: $(command -v apfsck) (Debian's apfsprogs source with apfsprogs commits 363557e's and 9428092's fixes)"
