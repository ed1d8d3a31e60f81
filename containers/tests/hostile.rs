//! Damaged and hostile containers: parents refused, truncated files,
//! tables pointing past the end or at themselves, bad checksums, corrupt
//! compressed grains, random byte flips. Never a panic; damage is an error
//! naming its media range while the rest stays readable.

mod common;

use caseload_containers::{Backing, Container, ContainerError, FileBacking};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn no_opener(p: &Path) -> std::io::Result<Box<dyn Backing>> {
    Err(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{} not offered", p.display()),
    ))
}

fn open_bytes(bytes: Vec<u8>) -> Result<Container, ContainerError> {
    Container::open(Path::new("image"), Box::new(bytes), &no_opener)
}

/// A container image made from the raw disk, as bytes (`None` without
/// qemu-img).
fn image(format: &str, options: &[&str], compress: bool) -> Option<(Vec<u8>, Vec<u8>)> {
    if !have_tool("qemu-img") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let raw = raw_disk();
    let rp = dir.path().join("disk.raw");
    std::fs::write(&rp, &raw).unwrap();
    let out = dir.path().join("disk.img");
    qemu_convert(&rp, &out, format, options, compress);
    Some((std::fs::read(&out).unwrap(), raw))
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// Reads the whole media a unit at a time: no panic, and every failure is
/// a `Corrupt` error inside the unit read. Returns the units that failed.
fn read_every_unit(c: &Container) -> Vec<(u64, u64)> {
    let unit = c.damage_unit().min(1 << 20);
    let mut buf = vec![0u8; usize::try_from(unit).unwrap()];
    let mut bad = Vec::new();
    let mut at = 0;
    // Cap the walk: a hostile header can claim an enormous disk.
    let end = c.media_size().min(64 << 20);
    while at < end {
        match c.read_at(&mut buf, at) {
            Ok(n) => assert!(n > 0),
            Err(e) => {
                let (s, en) = e
                    .media_range()
                    .unwrap_or_else(|| panic!("error without a media range: {e}"));
                assert!(s <= at && at < en, "{e} does not cover {at}");
                if bad.last() != Some(&(s, en)) {
                    bad.push((s, en));
                }
            }
        }
        at += unit;
    }
    bad
}

fn refused_as_differencing(e: &ContainerError) {
    assert!(matches!(e, ContainerError::Unsupported { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("differencing disk: parent not supported"),
        "{e}"
    );
}

#[test]
fn qcow2_with_backing_file_refused() {
    if !have_tool("qemu-img") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.qcow2");
    let child = dir.path().join("child.qcow2");
    run(Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2"])
        .arg(&base)
        .arg("4M"));
    run(Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2", "-b"])
        .arg(&base)
        .args(["-F", "qcow2"])
        .arg(&child));
    let e = Container::open_path(&child, &FileBacking::opener).unwrap_err();
    refused_as_differencing(&e);
    assert!(e.to_string().contains("base.qcow2"), "{e}");
}

#[test]
fn vmdk_delta_refused() {
    if !have_tool("qemu-img") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.vmdk");
    let child = dir.path().join("child.vmdk");
    run(Command::new("qemu-img")
        .args(["create", "-q", "-f", "vmdk"])
        .arg(&base)
        .arg("4M"));
    run(Command::new("qemu-img")
        .args(["create", "-q", "-f", "vmdk", "-b"])
        .arg(&base)
        .args(["-F", "vmdk"])
        .arg(&child));
    let e = Container::open_path(&child, &FileBacking::opener).unwrap_err();
    refused_as_differencing(&e);
    // The base itself opens.
    Container::open_path(&base, &FileBacking::opener).unwrap();
}

/// VHD footer checksum: one's complement of the byte sum.
fn vhd_fix_checksum(f: &mut [u8]) {
    f[64..68].fill(0);
    let sum = f.iter().fold(0u32, |s, &b| s.wrapping_add(u32::from(b)));
    f[64..68].copy_from_slice(&(!sum).to_be_bytes());
}

#[test]
fn vhd_differencing_refused() {
    let Some((mut img, _)) = image("vpc", &["subformat=dynamic", "force_size=on"], false) else {
        return;
    };
    let n = img.len();
    for at in [0, n - 512] {
        img[at + 60..at + 64].copy_from_slice(&4u32.to_be_bytes());
        vhd_fix_checksum(&mut img[at..at + 512]);
    }
    refused_as_differencing(&open_bytes(img).unwrap_err());
}

/// VHDX: the metadata item's offset of the file parameters, and headers.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn vhdx_metadata(img: &[u8]) -> usize {
    let t = 192 << 10;
    let count = le32(img, t + 8) as usize;
    let meta_guid = [0x06, 0xA2, 0x7C, 0x8B, 0x90, 0x47, 0x9A, 0x4B];
    (0..count)
        .map(|i| t + 16 + i * 32)
        .find(|&e| img[e..e + 8] == meta_guid)
        .map(|e| u64::from_le_bytes(img[e + 16..e + 24].try_into().unwrap()) as usize)
        .unwrap()
}

fn vhdx_file_parameters(img: &[u8]) -> usize {
    let m = vhdx_metadata(img);
    let count = u16::from_le_bytes([img[m + 10], img[m + 11]]) as usize;
    let id = [0x37, 0x67, 0xA1, 0xCA, 0x36, 0xFA, 0x43, 0x4D];
    (0..count)
        .map(|i| m + 32 + i * 32)
        .find(|&e| img[e..e + 8] == id)
        .map(|e| m + le32(img, e + 16) as usize)
        .unwrap()
}

fn vhdx_header_seq(img: &[u8], h: usize) -> u64 {
    u64::from_le_bytes(img[h + 8..h + 16].try_into().unwrap())
}

fn vhdx_fix(img: &mut [u8], at: usize, len: usize) {
    img[at + 4..at + 8].fill(0);
    let c = crc32c(&img[at..at + len]);
    img[at + 4..at + 8].copy_from_slice(&c.to_le_bytes());
}

#[test]
fn vhdx_differencing_refused() {
    let Some((mut img, _)) = image("vhdx", &["subformat=dynamic", "block_size=1M"], false) else {
        return;
    };
    let fp = vhdx_file_parameters(&img);
    img[fp + 4] |= 2;
    refused_as_differencing(&open_bytes(img).unwrap_err());
}

#[test]
fn vhdx_header_checksums_fall_back_then_fail() {
    let Some((img, raw)) = image("vhdx", &["subformat=dynamic", "block_size=1M"], false) else {
        return;
    };
    let (h1, h2) = (64 << 10, 128 << 10);
    let current = if vhdx_header_seq(&img, h1) > vhdx_header_seq(&img, h2) {
        h1
    } else {
        h2
    };
    let other = h1 + h2 - current;
    // The current header damaged: the other is used, and said so.
    let mut one = img.clone();
    one[current + 100] ^= 0xff;
    let c = open_bytes(one.clone()).unwrap();
    assert!(
        c.notes().iter().any(|n| n.contains("damaged")),
        "{:?}",
        c.notes()
    );
    assert_eq!(md5_hex(&read_all(&c)), md5_hex(&raw));
    // Both damaged: a clear error.
    one[other + 100] ^= 0xff;
    let e = open_bytes(one).unwrap_err();
    assert!(matches!(e, ContainerError::Format { .. }), "{e}");
    assert!(e.to_string().contains("neither VHDX header"), "{e}");
    // Region table 1 damaged: table 2 is used.
    let mut r = img.clone();
    r[(192 << 10) + 40] ^= 0xff;
    let c = open_bytes(r.clone()).unwrap();
    assert!(
        c.notes().iter().any(|n| n.contains("region table 2")),
        "{:?}",
        c.notes()
    );
    assert_eq!(md5_hex(&read_all(&c)), md5_hex(&raw));
    r[(256 << 10) + 40] ^= 0xff;
    assert!(open_bytes(r).is_err());
}

#[test]
fn vhdx_unreplayed_log_noted() {
    let Some((mut img, raw)) = image("vhdx", &["subformat=dynamic"], false) else {
        return;
    };
    for h in [64 << 10, 128 << 10] {
        img[h + 48] = 0x42;
        vhdx_fix(&mut img, h, 4096);
    }
    let c = open_bytes(img).unwrap();
    assert!(
        c.notes().iter().any(|n| n.contains("not yet replayed")),
        "{:?}",
        c.notes()
    );
    assert_eq!(md5_hex(&read_all(&c)), md5_hex(&raw));
}

#[test]
fn vhdx_bat_entry_past_end_names_its_block() {
    let Some((mut img, raw)) = image("vhdx", &["subformat=dynamic", "block_size=1M"], false) else {
        return;
    };
    let t = 192 << 10;
    let bat_guid = [0x66, 0x77, 0xC2, 0x2D];
    let bat = (0..le32(&img, t + 8) as usize)
        .map(|i| t + 16 + i * 32)
        .find(|&e| img[e..e + 4] == bat_guid)
        .map(|e| u64::from_le_bytes(img[e + 16..e + 24].try_into().unwrap()) as usize)
        .unwrap();
    // Block 0 fully present at 1 TiB; block 5 in an invalid state 4.
    img[bat..bat + 8].copy_from_slice(&((1u64 << 40) | 6).to_le_bytes());
    img[bat + 40..bat + 48].copy_from_slice(&4u64.to_le_bytes());
    let c = open_bytes(img).unwrap();
    let bad = read_every_unit(&c);
    assert_eq!(bad, vec![(0, 1 << 20), (5 << 20, 6 << 20)]);
    let mut b = vec![0u8; 1 << 20];
    c.read_at(&mut b, 2 << 20).unwrap();
    assert_eq!(&b[..], &raw[2 << 20..3 << 20]);
}

/// Truncated at many points: opening fails cleanly or the part still
/// there reads, and every read past it fails naming its range.
#[test]
fn truncated_files_never_panic() {
    let cases: [(&str, &[&str], bool); 6] = [
        ("vmdk", &["subformat=monolithicSparse"], false),
        ("vmdk", &["subformat=streamOptimized"], false),
        ("vpc", &["subformat=dynamic", "force_size=on"], false),
        ("vpc", &["subformat=fixed", "force_size=on"], false),
        ("vhdx", &["subformat=dynamic", "block_size=1M"], false),
        ("qcow2", &[], true),
    ];
    for (format, options, compress) in cases {
        let Some((img, raw)) = image(format, options, compress) else {
            return;
        };
        for cut in [
            0,
            100,
            511,
            512,
            4096,
            70_000,
            img.len() / 3,
            img.len() / 2,
            img.len() - 600,
            img.len() - 1,
        ] {
            let Ok(c) = open_bytes(img[..cut].to_vec()) else {
                continue;
            };
            let bad = read_every_unit(&c);
            // What reads, reads right.
            let mut buf = vec![0u8; 4096];
            let mut at = 0u64;
            while at < c.media_size().min(raw.len() as u64) {
                if let Ok(n) = c.read_at(&mut buf, at) {
                    assert_eq!(
                        &buf[..n],
                        &raw[at as usize..at as usize + n],
                        "{format} cut {cut} at {at}"
                    );
                }
                at += 4096 * 7;
            }
            let _ = bad;
        }
        // A cut in the data area of a sparse image leaves its first unit
        // readable and fails later ones.
        if format != "vpc" || options[0] != "subformat=fixed" {
            let c = open_bytes(img[..img.len() * 3 / 4].to_vec());
            if let Ok(c) = c {
                let bad = read_every_unit(&c);
                assert!(
                    !bad.is_empty() || format == "vmdk",
                    "{format}: no damage seen"
                );
            }
        }
    }
}

#[test]
fn vmdk_grain_table_past_end_names_its_grain() {
    let Some((mut img, raw)) = image("vmdk", &["subformat=monolithicSparse"], false) else {
        return;
    };
    let gd = (u64::from_le_bytes(img[56..64].try_into().unwrap()) * 512) as usize;
    let gt = le32(&img, gd) as usize * 512;
    // Grain 0 far past the end; grain 3 at the grain table itself (a
    // loop: reads the table's bytes, no harm).
    img[gt..gt + 4].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    let c = open_bytes(img.clone()).unwrap();
    let mut b = vec![0u8; 200_000];
    let e = c.read_at(&mut b, 1000).unwrap_err();
    assert_eq!(e.media_range(), Some((0, 65536)), "{e}");
    assert!(e.to_string().contains("media bytes 0-65535"), "{e}");
    c.read_at(&mut b, 65536).unwrap();
    assert_eq!(&b[..], &raw[65536..65536 + 200_000]);
    // The grain directory pointing past the end: every grain of its table.
    img[gd..gd + 4].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    let c = open_bytes(img).unwrap();
    let bad = read_every_unit(&c);
    // One grain table spans 32 MiB, the whole disk: one damaged range.
    assert_eq!(bad, vec![(0, c.media_size())]);
}

#[test]
fn corrupt_compressed_grain_names_its_grain() {
    let Some((mut img, raw)) = image("vmdk", &["subformat=streamOptimized"], false) else {
        return;
    };
    // The footer holds the grain directory; qemu also writes it in the header.
    let mut gd = u64::from_le_bytes(img[56..64].try_into().unwrap());
    if gd == u64::MAX {
        let f = img.len() - 1024;
        gd = u64::from_le_bytes(img[f + 56..f + 64].try_into().unwrap());
    }
    let gd = gd as usize * 512;
    let gt = le32(&img, gd) as usize * 512;
    let grain = le32(&img, gt + 4) as usize * 512; // grain 1
    img[grain + 12..grain + 60].fill(0xff);
    let c = open_bytes(img).unwrap();
    let mut b = vec![0u8; 4096];
    let e = c.read_at(&mut b, 65536 + 7).unwrap_err();
    assert_eq!(e.media_range(), Some((65536, 131072)), "{e}");
    assert!(e.to_string().contains("inflate"), "{e}");
    c.read_at(&mut b, 0).unwrap();
    assert_eq!(&b[..], &raw[..4096]);
    c.read_at(&mut b, 131072).unwrap();
    assert_eq!(&b[..], &raw[131072..131072 + 4096]);
}

#[test]
fn corrupt_compressed_cluster_names_its_cluster() {
    let Some((mut img, raw)) = image("qcow2", &[], true) else {
        return;
    };
    let l1 = be64(&img, 40) as usize;
    let l2 = (be64(&img, l1) & 0x00ff_ffff_ffff_fe00) as usize;
    // Cluster 32 (at 2 MiB) holds the pattern: stored compressed (random
    // clusters are stored as they are).
    let e32 = be64(&img, l2 + 32 * 8);
    assert!(e32 & (1 << 62) != 0, "cluster 32 is compressed");
    let host = (e32 & ((1 << 54) - 1)) as usize;
    img[host..host + 64].fill(0xff);
    let c = open_bytes(img).unwrap();
    let mut b = vec![0u8; 70_000];
    let e = c.read_at(&mut b, (2 << 20) + 10).unwrap_err();
    assert_eq!(e.media_range(), Some((2 << 20, (2 << 20) + 65536)), "{e}");
    assert_eq!(read_every_unit(&c), vec![(2 << 20, (2 << 20) + 65536)]);
    c.read_at(&mut b, (2 << 20) + 65536).unwrap();
    assert_eq!(&b[..], &raw[(2 << 20) + 65536..(2 << 20) + 65536 + 70_000]);
}

#[test]
fn qcow2_huge_tables_are_not_allocated() {
    let Some((img, raw)) = image("qcow2", &[], false) else {
        return;
    };
    // An L1 table claimed at 2^32-1 entries for a 2^60-byte disk: refused
    // as lying outside the file, nothing allocated.
    let mut h = img.clone();
    h[36..40].copy_from_slice(&u32::MAX.to_be_bytes());
    h[24..32].copy_from_slice(&(1u64 << 60).to_be_bytes());
    let e = open_bytes(h).unwrap_err();
    assert!(e.to_string().contains("L1 table"), "{e}");
    // An L2 entry pointing at the L1 table (a loop): data, no harm; an L1
    // entry pointing far past the end: its whole L2 span fails.
    let mut l = img.clone();
    let l1 = be64(&l, 40) as usize;
    l[l1..l1 + 8].copy_from_slice(&(1u64 << 50).to_be_bytes());
    let c = open_bytes(l).unwrap();
    let bad = read_every_unit(&c);
    assert!(!bad.is_empty());
    let mut b = vec![0u8; 100];
    assert!(c.read_at(&mut b, 0).is_err());
    let _ = raw;
}

#[test]
fn vhd_bat_huge_count_and_loops() {
    let Some((mut img, raw)) = image("vpc", &["subformat=dynamic", "force_size=on"], false) else {
        return;
    };
    let dyn_at = be64(&img, img.len() - 512 + 16) as usize;
    let bat = be64(&img, dyn_at + 16) as usize;
    // 2^32-1 BAT entries claimed: nothing allocated, media unchanged.
    img[dyn_at + 28..dyn_at + 32].copy_from_slice(&u32::MAX.to_be_bytes());
    let c = open_bytes(img.clone()).unwrap();
    assert_eq!(md5_hex(&read_all(&c)), md5_hex(&raw));
    // Block 1 pointing at the BAT (a loop), block 2 past the end.
    let b0 = u32::from_be_bytes(img[bat..bat + 4].try_into().unwrap());
    assert_ne!(b0, u32::MAX);
    img[bat + 4..bat + 8].copy_from_slice(&((bat / 512) as u32).to_be_bytes());
    img[bat + 8..bat + 12].copy_from_slice(&0x7fff_0000u32.to_be_bytes());
    let c = open_bytes(img).unwrap();
    let bad = read_every_unit(&c);
    assert_eq!(bad, vec![(4 << 20, 6 << 20)]);
    let mut b = vec![0u8; 4096];
    c.read_at(&mut b, 0).unwrap();
    assert_eq!(&b[..], &raw[..4096]);
}

/// Random bytes flipped in each format's metadata: never a panic, and the
/// walk stays within its bounds.
#[test]
fn random_flips_never_panic() {
    let cases: [(&str, &[&str], bool); 5] = [
        ("vmdk", &["subformat=streamOptimized"], false),
        ("vmdk", &["subformat=monolithicSparse"], false),
        ("vpc", &["subformat=dynamic", "force_size=on"], false),
        ("vhdx", &["subformat=dynamic", "block_size=1M"], false),
        ("qcow2", &[], true),
    ];
    let mut r = Rng(4242);
    for (format, options, compress) in cases {
        let Some((img, _)) = image(format, options, compress) else {
            return;
        };
        for _ in 0..60 {
            let mut m = img.clone();
            for _ in 0..1 + r.below(8) {
                // Mostly the first 320 KiB (headers, tables), sometimes the end.
                let at = if r.below(4) == 0 {
                    m.len() - 1 - r.below(2048.min(m.len() as u64)) as usize
                } else {
                    r.below((320 << 10).min(m.len() as u64)) as usize
                };
                m[at] = r.next() as u8;
            }
            if let Ok(c) = open_bytes(m) {
                let _ = read_every_unit(&c);
                let _ = c.region(0);
            }
        }
    }
}

/// A descriptor naming an extent the opener cannot open, an unsupported
/// extent type, or a path outside its folder.
#[test]
fn vmdk_descriptor_problems() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d.vmdk");
    let write = |extents: &str| {
        std::fs::write(
            &d,
            format!("# Disk DescriptorFile\nversion=1\nparentCID=ffffffff\ncreateType=\"monolithicFlat\"\n{extents}\n"),
        )
        .unwrap();
    };
    write("RW 8 FLAT \"missing.bin\" 0");
    let e = Container::open_path(&d, &FileBacking::opener).unwrap_err();
    assert!(matches!(e, ContainerError::Open { .. }), "{e}");
    write("RW 8 VMFSRDM \"x.bin\"");
    let e = Container::open_path(&d, &FileBacking::opener).unwrap_err();
    assert!(e.to_string().contains("VMFSRDM"), "{e}");
    std::fs::write(dir.path().join("x.bin"), vec![7u8; 4096]).unwrap();
    write("RW 16 FLAT \"../../x.bin\" 0");
    let c = Container::open_path(&d, &FileBacking::opener).unwrap();
    assert_eq!(c.files()[1], dir.path().join("x.bin"));
    assert!(!c.notes().is_empty());
    // The flat file holds 8 of the 16 sectors claimed: the rest fails.
    let mut b = vec![0u8; 8192];
    let e = c.read_at(&mut b, 0).unwrap_err();
    assert!(e.media_range().is_some(), "{e}");
    assert_eq!(c.read_at(&mut b[..4096], 0).unwrap(), 4096);
    write("RW 99999999999999999999 FLAT \"x.bin\" 0");
    assert!(Container::open_path(&d, &FileBacking::opener).is_err());
    let _: Vec<PathBuf> = c.files();
}
