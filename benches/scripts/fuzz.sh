#!/usr/bin/env bash
# Run caseload's fuzz targets (fuzz/, cargo-fuzz + libFuzzer on the nightly
# toolchain) for a set time each, from seed corpora made here, and keep
# every crash as a regression input under tests/fuzz-regressions/<target>/,
# which the stable test suite replays (tests/integration/fuzz_replay.rs).
#
#   benches/scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET ...]
#
# Default: 600 s per target (the reliability issue's minimum), every target.
# Needs: rustup's nightly toolchain, cargo-fuzz (installed if missing),
# dosfstools, ntfs-3g, mtools and apfsprogs' mkapfs for the file-system seeds (apt-get as root
# if missing). Runs JOBS targets at once (default 1: on two cores a second
# fuzzer slows the first). Prints, per target, the executions, the
# executions per second, the corpus size and the crashes kept.
#
# A crash is kept as tests/fuzz-regressions/<target>/<libFuzzer name>; fix
# the parser, then `cargo test --release --test integration fuzz_replay`
# proves the fix and keeps it.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
secs="${1:-600}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(volume filesystem e01 extract hashset workload layout carve scalpel meta split trace container apfs)
fi
jobs="${JOBS:-1}"
work="${FUZZ_WORK:-$root/target/fuzz-work}"
real="$root/../shared/real-images"

need_tool() {
    command -v "$1" >/dev/null 2>&1 && return 0
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y --no-install-recommends "$2" >/dev/null 2>&1 ||
            { apt-get update >/dev/null && apt-get install -y --no-install-recommends "$2" >/dev/null; }
    fi
    command -v "$1" >/dev/null 2>&1 || { echo "fuzz.sh: $1 ($2) is missing; seeds that need it are skipped" >&2; return 1; }
}

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# ---- seed corpora -------------------------------------------------------
seeds="$work/seeds"
rm -rf "$seeds"
for t in "${targets[@]}"; do mkdir -p "$seeds/$t"; done
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
printf 'hello world\r\n' > "$scratch/a.txt"
printf '<html><body><p>caseload &amp; fuzz</p></body></html>' > "$scratch/b.htm"
seed_fs() { # name, file: copy into the volume and disk seed sets
    for t in filesystem volume; do
        [ -d "$seeds/$t" ] && cp "$2" "$seeds/$t/$1"
    done
    return 0
}
if need_tool mkfs.fat dosfstools && need_tool mcopy mtools; then
    # FAT32 needs 32 MiB or more: too large a seed for byte mutation.
    for spec in "fat12 256 12" "fat16 4096 16"; do
        set -- $spec
        img="$scratch/$1.img"
        rm -f "$img"
        # One sector per cluster: enough clusters for FAT16 in 4 MiB.
        mkfs.fat -C -F "$3" -s 1 -n FUZZ "$img" "$2" >/dev/null || continue
        MTOOLS_SKIP_CHECK=1 mmd -i "$img" ::/DIR
        MTOOLS_SKIP_CHECK=1 mcopy -i "$img" "$scratch/a.txt" ::/DIR/A.TXT
        MTOOLS_SKIP_CHECK=1 mcopy -i "$img" "$scratch/b.htm" "::/long file name.htm"
        MTOOLS_SKIP_CHECK=1 mcopy -i "$img" "$scratch/a.txt" ::/DEL.TXT
        MTOOLS_SKIP_CHECK=1 mdel -i "$img" ::/DEL.TXT
        seed_fs "$1.img" "$img"
    done
fi
if need_tool mkntfs ntfs-3g && need_tool ntfscp ntfs-3g; then
    img="$scratch/ntfs.img"
    truncate -s 2M "$img"
    mkntfs -F -q -Q -s 512 -c 512 -L FUZZ "$img" >/dev/null 2>&1 || true
    ntfscp -f "$img" "$scratch/a.txt" a.txt >/dev/null 2>&1 || true
    ntfscp -f "$img" "$scratch/b.htm" "long file name.htm" >/dev/null 2>&1 || true
    [ -s "$img" ] && seed_fs ntfs.img "$img"
fi
if [ -d "$seeds/apfs" ] && need_tool mkapfs apfsprogs; then
    # mkapfs's smallest container (128 MiB) as the apfs target's input
    # form: each non-zero block after its little-endian block number.
    img="$scratch/apfs.img"
    truncate -s 128M "$img"
    if mkapfs "$img" >/dev/null 2>&1; then
        python3 -c "
import struct, sys
d = open(sys.argv[1], 'rb').read()
out = open(sys.argv[2], 'wb')
for i in range(len(d) // 4096):
    b = d[i * 4096:(i + 1) * 4096]
    if any(b):
        out.write(struct.pack('<Q', i) + b)
" "$img" "$seeds/apfs/mkapfs.blocks"
    fi
    rm -f "$img"
    # A Mac corpus of the writer's (16 MiB, seed 6: three files compressed
    # into their resource forks, of one to three 64 KiB blocks) with every
    # other file's content blocks zeroed: the metadata and the forks stay.
    mac="$scratch/mac"
    if (cd "$root" && cargo build --release --bin caseload >/dev/null 2>&1) &&
        "$root/target/release/caseload" corpus --size 16MiB --seed 6 --profile mac-laptop \
            --out "$mac" >/dev/null 2>&1; then
        python3 -c "
import json, struct, sys
m = json.load(open(sys.argv[2]))
part = m['partition_table']['partitions'][0]
start = part['offset']
plain = set()
for f in m['files']:
    if f.get('compressed'):
        continue
    for x in f.get('extents', []):
        for b in range((x['offset'] - start) // 4096, (x['offset'] + x['length'] - start + 4095) // 4096):
            plain.add(b)
img = open(sys.argv[1], 'rb')
img.seek(start)
d = img.read(part['sectors'] * 512)
out = open(sys.argv[3], 'wb')
for i in range(len(d) // 4096):
    b = d[i * 4096:(i + 1) * 4096]
    if any(b) and i not in plain:
        out.write(struct.pack('<Q', i) + b)
" "$mac/image.dd" "$mac/manifest.json" "$seeds/apfs/mac-compressed.blocks"
    fi
    rm -rf "$mac"
fi
if [ -d "$real" ]; then
    [ -d "$seeds/e01" ] && for f in "$real/ewf/image.E01" "$real/dftt-e01/6-fat-undel.E01"; do
        [ -f "$f" ] && cp "$f" "$seeds/e01/"
    done
    [ -d "$seeds/filesystem" ] && [ -f "$real/fat/fat12.img" ] && cp "$real/fat/fat12.img" "$seeds/filesystem/"
else
    echo "fuzz.sh: ../shared/real-images is absent: no real-image seeds" >&2
fi
if [ -d "$seeds/extract" ]; then
    cp "$scratch/a.txt" "$scratch/b.htm" "$seeds/extract/"
    printf 'From: a@b\r\nSubject: s\r\nContent-Type: multipart/mixed; boundary="x"\r\n\r\n--x\r\nContent-Type: text/plain\r\n\r\nbody\r\n--x\r\nContent-Type: application/octet-stream; name="f.txt"\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\n--x--\r\n' > "$seeds/extract/mail.eml"
    printf '%%PDF-1.4\n1 0 obj << /Length 44 >> stream\nBT /F1 12 Tf 72 712 Td (caseload) Tj ET\nendstream endobj\n%%%%EOF\n' > "$seeds/extract/doc.pdf"
    (cd "$scratch" && python3 -c "
import zipfile,gzip
with zipfile.ZipFile('z.zip','w',zipfile.ZIP_DEFLATED) as z:
    z.writestr('word/document.xml','<w:document><w:body><w:p><w:r><w:t>caseload</w:t></w:r></w:p></w:body></w:document>')
    z.writestr('inner.txt','inner text')
open('g.gz','wb').write(gzip.compress(b'gzip text'))
open('u16.txt','wb').write('utf-16 text'.encode('utf-16'))
" && cp z.zip g.gz u16.txt "$seeds/extract/")
fi
if [ -d "$seeds/hashset" ]; then
    printf '"SHA-1","MD5","CRC32","FileName","FileSize","ProductCode","OpSystemCode","SpecialCode"\r\n"0000000F8527DCCAB6642252BBCFA1B8072D33EE","68CE322D8A896B6E4E7E3F18339EC85C","E39149E4","Blended_Coolers_Vanilla_NL.png","30439","31155","358",""\r\n' > "$seeds/hashset/NSRLFile.txt"
    printf 'd41d8cd98f00b204e9800998ecf8427e  empty\n68ce322d8a896b6e4e7e3f18339ec85c *bin\n' > "$seeds/hashset/list.md5"
    printf '%%%%%%%% HASHDEEP-1.0\n%%%%%%%% size,md5,sha256,filename\n## Invoked from: /\n0,d41d8cd98f00b204e9800998ecf8427e,e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855,/empty\n' > "$seeds/hashset/hashdeep.txt"
fi
if [ -d "$seeds/carve" ]; then
    # Byte 0 picks the format (in the carve stage's table order), byte 1
    # the block size; the format's header is put in front of the rest.
    i=0
    for f in "$scratch/b.htm" "$seeds/extract/doc.pdf" "$scratch/z.zip" "$seeds/extract/mail.eml"; do
        [ -f "$f" ] || continue
        for pick in 0 1 2 3 4 5 6 7 8 9; do
            { printf "\\x$(printf %02x $pick)\\x07"; cat "$f"; } > "$seeds/carve/seed-$i-$pick"
        done
        i=$((i + 1))
    done
    python3 -c "
import struct,zlib,sys
png=b'\\x89PNG\\r\\n\\x1a\\n'
def chunk(t,d): return struct.pack('>I',len(d))+t+d+struct.pack('>I',zlib.crc32(t+d))
open(sys.argv[1],'wb').write(png+chunk(b'IHDR',struct.pack('>IIBBBBB',1,1,8,0,0,0,0))+chunk(b'IDAT',zlib.compress(b'\\0\\0'))+chunk(b'IEND',b''))
" "$scratch/p.png"
    cp "$scratch/p.png" "$seeds/carve/png"
fi
if [ -d "$seeds/container" ] && need_tool qemu-img qemu-utils; then
    # A small disk with data and holes, in every container format qemu
    # writes (a descriptor VMDK's extents are not there: its opening fails
    # early, which is worth fuzzing too).
    head -c 196608 /dev/urandom > "$scratch/disk.raw"
    truncate -s 524288 "$scratch/disk.raw"
    for spec in "sparse.vmdk vmdk subformat=monolithicSparse" "stream.vmdk vmdk subformat=streamOptimized" \
        "disk.vhd vpc subformat=dynamic,force_size=on" "disk.vhdx vhdx subformat=dynamic" \
        "disk.qcow2 qcow2 cluster_size=4096" "c.qcow2 qcow2 cluster_size=4096,compression_type=zlib"; do
        set -- $spec
        extra=(); [ "$1" = c.qcow2 ] && extra=(-c)
        qemu-img convert "${extra[@]}" -O "$2" -o "$3" "$scratch/disk.raw" "$seeds/container/$1" 2>/dev/null || true
    done
fi
if [ -d "$seeds/scalpel" ]; then
    printf 'jpg\ty\t200000\t\\xff\\xd8\\xff\\xe0\\x00\\x10\t\\xff\\xd9\nhtm\tn\t50000\t<html\t</html>\tREVERSE\nNONE\ty\t1000\tab??cd\t\tNEXT\n\0<html>x</html>y</html>' > "$seeds/scalpel/conf"
fi
if [ -d "$seeds/meta" ]; then
    for img in "$scratch"/fat12.img "$scratch"/ntfs.img; do
        [ -f "$img" ] && head -c 262144 "$img" > "$seeds/meta/$(basename "$img")"
    done
fi
if [ -d "$seeds/split" ]; then
    printf 'image.001\nimage.002\nimage.003' > "$seeds/split/three"
    printf 'disk.0001\ndisk.0002\ndisk.0004' > "$seeds/split/gap"
    printf 'image.dd' > "$seeds/split/single"
fi
[ -d "$seeds/workload" ] && cp "$root"/workloads/*.toml "$seeds/workload/"
[ -d "$seeds/layout" ] && cp "$root"/workloads/layouts/*.toml "$seeds/layout/"

# ---- fuzzing ------------------------------------------------------------
cd "$root/fuzz"
cargo +nightly fuzz build --release
run_one() {
    local t="$1" corpus="$work/corpus/$t" log="$work/$t.log" art="$work/artifacts/$t/"
    mkdir -p "$corpus" "$art"
    # -rss_limit_mb: memory must stay bounded; -timeout: no hangs.
    cargo +nightly fuzz run --release "$t" "$corpus" "$seeds/$t" -- \
        -max_total_time="$secs" -max_len=4194304 -rss_limit_mb=2048 -timeout=20 \
        -artifact_prefix="$art" -print_final_stats=1 >"$log" 2>&1 || true
    local execs rate kept=0 slow=0 slowest
    execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)"
    rate="$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)"
    slowest="$(grep -o 'stat::slowest_unit_time_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)"
    for crash in "$art"*; do
        [ -f "$crash" ] || continue
        # libFuzzer writes inputs over 10 s as slow-unit-*: not hangs
        # (-timeout is 20 s), often a fuzzer starved by other work; left
        # under $art for a look, not kept as regressions.
        case "$(basename "$crash")" in
        slow-unit-*)
            slow=$((slow + 1))
            continue
            ;;
        esac
        mkdir -p "$root/tests/fuzz-regressions/$t"
        cp "$crash" "$root/tests/fuzz-regressions/$t/"
        kept=$((kept + 1))
    done
    printf '%-12s %10s execs %8s/s  corpus %5s  crashes kept %s  slow units %s (slowest %s s)\n' \
        "$t" "${execs:-?}" "${rate:-?}" "$(find "$corpus" -type f | wc -l)" "$kept" "$slow" "${slowest:-?}"
}
echo "fuzz.sh: ${secs}s per target, $jobs at a time; load: $(cut -d' ' -f1-3 /proc/loadavg)"
running=0
for t in "${targets[@]}"; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait
