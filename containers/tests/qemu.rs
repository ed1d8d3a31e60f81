//! Every container variant qemu-img writes, read back and compared with the
//! raw disk it was made from and with qemu-img's own raw conversion of it
//! (the oracle); media sizes and bytes cross-checked with libvmdk's
//! `vmdkinfo`, libvhdi's `vhdiinfo` and The Sleuth Kit's `img_stat` and
//! `img_cat` where they read the format.

mod common;

use caseload_containers::{Container, ContainerError, ContainerKind, FileBacking, detect};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;

struct Case {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    raw: Vec<u8>,
    image: PathBuf,
}

/// Writes the raw disk and converts it; `None` (after the skip line) when
/// qemu-img is missing.
fn convert(name: &str, format: &str, options: &[&str], compress: bool) -> Option<Case> {
    if !have_tool("qemu-img") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let raw = raw_disk();
    let raw_path = dir.path().join("disk.raw");
    std::fs::write(&raw_path, &raw).unwrap();
    let image = dir.path().join(name);
    qemu_convert(&raw_path, &image, format, options, compress);
    Some(Case {
        dir: dir.path().to_path_buf(),
        _dir: dir,
        raw,
        image,
    })
}

/// Opens the case's image, checks it against the raw disk and the oracle;
/// returns the container.
fn check(case: &Case, kind: ContainerKind, variant: &str) -> Container {
    let main = FileBacking::open(&case.image).unwrap();
    assert_eq!(detect(&main).unwrap(), Some(kind), "detect");
    let (c, asked, bytes) = open_counted(&case.image);
    let c = c.unwrap_or_else(|e| panic!("open {}: {e}", case.image.display()));
    assert_eq!(c.kind(), kind);
    assert_eq!(c.variant(), variant);
    // Every file was opened through the caller's opener, and listed.
    assert_eq!(c.files(), asked, "files() lists what the opener opened");
    let mut oracle = qemu_raw(&case.image, &case.dir);
    if kind == ContainerKind::Vhd && variant == "fixed" {
        // qemu shows a fixed VHD's footer as one more media sector;
        // libvhdi and The Sleuth Kit (tsk_agrees) end the media before it.
        assert_eq!(oracle.len() as u64, c.media_size() + 512);
        oracle.truncate(oracle.len() - 512);
    }
    check_media(&c, &oracle);
    let n = case.raw.len().min(oracle.len());
    assert_eq!(
        &oracle[..n],
        &case.raw[..n],
        "qemu-img's raw conversion keeps the disk"
    );
    assert!(oracle[n..].iter().all(|&b| b == 0));
    assert!(
        bytes.load(Ordering::Relaxed) > 0,
        "reads went through the opener's backings"
    );
    c
}

/// libvmdk / libvhdi agree on the media size.
fn libyal_size(tool: &str, image: &Path, size: u64) {
    if !have_tool(tool) {
        return;
    }
    let out = run(Command::new(tool).arg(image));
    assert!(
        out.contains(&format!("({size} bytes)")),
        "{tool} media size differs from {size}:\n{out}"
    );
}

/// The Sleuth Kit reads the same bytes (img_stat's size, img_cat's MD5).
fn tsk_agrees(image: &Path, c: &Container) {
    if !have_tool("img_stat") || !have_tool("img_cat") {
        return;
    }
    let out = run(Command::new("img_stat").arg(image));
    assert!(
        out.contains(&format!("Size of data in bytes:\t{}", c.media_size())),
        "img_stat:\n{out}"
    );
    let bytes = Command::new("img_cat").arg(image).output().unwrap().stdout;
    assert_eq!(md5_hex(&bytes), md5_hex(&read_all(c)), "img_cat's bytes");
}

#[test]
fn vmdk_monolithic_sparse() {
    let Some(case) = convert("disk.vmdk", "vmdk", &["subformat=monolithicSparse"], false) else {
        return;
    };
    let c = check(&case, ContainerKind::Vmdk, "monolithicSparse");
    check_media(&c, &case.raw);
    assert_eq!(c.files(), vec![case.image.clone()]);
    assert_eq!(c.damage_unit(), 64 << 10);
    assert!(c.notes().is_empty(), "{:?}", c.notes());
    // Zero runs of the raw disk were left unallocated.
    assert!(!c.region(1 << 20).unwrap().unwrap().stored);
    assert!(c.region(0).unwrap().unwrap().stored);
    libyal_size("vmdkinfo", &case.image, c.media_size());
    tsk_agrees(&case.image, &c);
}

#[test]
fn vmdk_stream_optimized() {
    let Some(case) = convert("disk.vmdk", "vmdk", &["subformat=streamOptimized"], false) else {
        return;
    };
    let c = check(&case, ContainerKind::Vmdk, "streamOptimized");
    check_media(&c, &case.raw);
    libyal_size("vmdkinfo", &case.image, c.media_size());
    tsk_agrees(&case.image, &c);
    // As VMware streams it: the header's grain directory offset is
    // GD_AT_END and the footer (marker, header copy, end-of-stream) says
    // where it is. qemu writes the directory's place in the header, so
    // move it to a footer.
    let mut img = std::fs::read(&case.image).unwrap();
    let header = img[..512].to_vec();
    img.truncate(img.len() - 512); // the end-of-stream marker
    let mut marker = vec![0u8; 512];
    marker[12..16].copy_from_slice(&3u32.to_le_bytes()); // footer marker
    img.extend_from_slice(&marker);
    img.extend_from_slice(&header);
    img.extend_from_slice(&[0u8; 512]);
    img[56..64].copy_from_slice(&u64::MAX.to_le_bytes());
    let streamed = case.dir.join("streamed.vmdk");
    std::fs::write(&streamed, &img).unwrap();
    let c = Container::open_path(&streamed, &FileBacking::opener).unwrap();
    check_media(&c, &case.raw);
    libyal_size("vmdkinfo", &streamed, c.media_size());
    assert!(
        qemu_raw(&streamed, &case.dir) == case.raw,
        "qemu-img reads the footer too"
    );
    // Without the footer, a clear error.
    img.truncate(img.len() - 1024);
    img.extend_from_slice(&[0u8; 1024]);
    std::fs::write(&streamed, &img).unwrap();
    let e = Container::open_path(&streamed, &FileBacking::opener).unwrap_err();
    assert!(e.to_string().contains("footer"), "{e}");
}

#[test]
fn vmdk_monolithic_flat() {
    let Some(case) = convert("disk.vmdk", "vmdk", &["subformat=monolithicFlat"], false) else {
        return;
    };
    let c = check(&case, ContainerKind::Vmdk, "monolithicFlat");
    check_media(&c, &case.raw);
    assert_eq!(
        c.files(),
        vec![case.image.clone(), case.dir.join("disk-flat.vmdk")]
    );
    assert_eq!(c.damage_unit(), 512);
    libyal_size("vmdkinfo", &case.image, c.media_size());
}

#[test]
fn vmdk_two_gb_sparse() {
    let Some(case) = convert(
        "disk.vmdk",
        "vmdk",
        &["subformat=twoGbMaxExtentSparse"],
        false,
    ) else {
        return;
    };
    let c = check(&case, ContainerKind::Vmdk, "twoGbMaxExtentSparse");
    check_media(&c, &case.raw);
    assert_eq!(
        c.files(),
        vec![case.image.clone(), case.dir.join("disk-s001.vmdk")]
    );
    libyal_size("vmdkinfo", &case.image, c.media_size());
    // The extent alone is a sparse extent without a descriptor: readable,
    // and said so.
    let part =
        Container::open_path(&case.dir.join("disk-s001.vmdk"), &FileBacking::opener).unwrap();
    check_media(&part, &case.raw);
    assert!(
        part.notes()
            .iter()
            .any(|n| n.contains("without an embedded descriptor"))
    );
}

#[test]
fn vmdk_two_gb_flat() {
    let Some(case) = convert(
        "disk.vmdk",
        "vmdk",
        &["subformat=twoGbMaxExtentFlat"],
        false,
    ) else {
        return;
    };
    let c = check(&case, ContainerKind::Vmdk, "twoGbMaxExtentFlat");
    check_media(&c, &case.raw);
    assert_eq!(
        c.files(),
        vec![case.image.clone(), case.dir.join("disk-f001.vmdk")]
    );
}

/// A descriptor of our own joining a FLAT extent at an offset into its
/// file (whose name has a space), a ZERO extent and a SPARSE extent, each
/// ending off a grain boundary. qemu-img skips ZERO extents, so it is the
/// oracle for the descriptor without one; for the one with it, libvmdk's
/// `vmdkinfo` gives the size (its `img_cat` through The Sleuth Kit treats a
/// descriptor as a raw file) and the bytes are the raw disk's pieces.
#[test]
fn vmdk_mixed_extents() {
    if !have_tool("qemu-img") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let raw = raw_disk();
    // Extent 1: raw[0..2 MiB+512] stored 3 sectors into a flat file.
    let a = (2 << 20) + 512;
    let mut flat = vec![0xAAu8; 3 * 512];
    flat.extend_from_slice(&raw[..a]);
    flat.extend_from_slice(&[0xBB; 4096]);
    std::fs::write(dir.path().join("part a.bin"), &flat).unwrap();
    // Extent 2: 100 sectors of zeros. Extent 3: the rest, sparse.
    let z = 100 * 512;
    let rest = &raw[a..];
    let rest_path = dir.path().join("rest.raw");
    std::fs::write(&rest_path, rest).unwrap();
    qemu_convert(
        &rest_path,
        &dir.path().join("c.vmdk"),
        "vmdk",
        &["subformat=monolithicSparse"],
        false,
    );
    for with_zero in [false, true] {
        let zero = if with_zero {
            format!("RW {} ZERO\n", z / 512)
        } else {
            String::new()
        };
        let desc = format!(
            "# Disk DescriptorFile\nversion=1\nCID=12345678\nparentCID=ffffffff\ncreateType=\"twoGbMaxExtentSparse\"\n\n# Extent description\nRW {} FLAT \"part a.bin\" 3\n{zero}RW {} SPARSE \"c.vmdk\"\n\n# The Disk Data Base\n#DDB\n\nddb.virtualHWVersion = \"4\"\n",
            a / 512,
            rest.len() / 512
        );
        let d = dir.path().join(format!("mixed{with_zero}.vmdk"));
        std::fs::write(&d, desc).unwrap();
        let mut want = raw[..a].to_vec();
        if with_zero {
            want.extend(std::iter::repeat_n(0u8, z));
        }
        want.extend_from_slice(rest);
        let c = Container::open_path(&d, &FileBacking::opener).unwrap();
        assert_eq!(c.variant(), "twoGbMaxExtentSparse");
        check_media(&c, &want);
        assert_eq!(c.files().len(), 3);
        if with_zero {
            libyal_size("vmdkinfo", &d, want.len() as u64);
        } else {
            assert!(
                qemu_raw(&d, dir.path()) == want,
                "qemu-img reads the descriptor alike"
            );
        }
    }
}

#[test]
fn vhd_fixed() {
    let Some(case) = convert(
        "disk.vhd",
        "vpc",
        &["subformat=fixed", "force_size=on"],
        false,
    ) else {
        return;
    };
    let c = check(&case, ContainerKind::Vhd, "fixed");
    check_media(&c, &case.raw);
    libyal_size("vhdiinfo", &case.image, c.media_size());
    tsk_agrees(&case.image, &c);
}

#[test]
fn vhd_dynamic() {
    let Some(case) = convert(
        "disk.vhd",
        "vpc",
        &["subformat=dynamic", "force_size=on"],
        false,
    ) else {
        return;
    };
    let c = check(&case, ContainerKind::Vhd, "dynamic");
    check_media(&c, &case.raw);
    assert_eq!(c.damage_unit(), 2 << 20);
    libyal_size("vhdiinfo", &case.image, c.media_size());
    tsk_agrees(&case.image, &c);
}

/// Without force_size qemu rounds the disk up to a CHS geometry: the media
/// is larger than the raw disk, and qemu, libvhdi and we agree on it.
#[test]
fn vhd_dynamic_chs_rounded() {
    let Some(case) = convert("disk.vhd", "vpc", &["subformat=dynamic"], false) else {
        return;
    };
    let c = check(&case, ContainerKind::Vhd, "dynamic");
    assert!(c.media_size() > case.raw.len() as u64);
    libyal_size("vhdiinfo", &case.image, c.media_size());
}

#[test]
fn vhdx_dynamic() {
    let Some(case) = convert("disk.vhdx", "vhdx", &["subformat=dynamic"], false) else {
        return;
    };
    let c = check(&case, ContainerKind::Vhdx, "dynamic");
    check_media(&c, &case.raw);
    assert!(c.notes().is_empty(), "{:?}", c.notes());
}

#[test]
fn vhdx_dynamic_small_blocks() {
    let Some(case) = convert(
        "disk.vhdx",
        "vhdx",
        &["subformat=dynamic", "block_size=1M"],
        false,
    ) else {
        return;
    };
    let c = check(&case, ContainerKind::Vhdx, "dynamic");
    assert_eq!(c.damage_unit(), 1 << 20);
    check_media(&c, &case.raw);
    assert!(!c.region(1 << 20).unwrap().unwrap().stored);
}

#[test]
fn vhdx_fixed() {
    let Some(case) = convert("disk.vhdx", "vhdx", &["subformat=fixed"], false) else {
        return;
    };
    let c = check(&case, ContainerKind::Vhdx, "fixed");
    check_media(&c, &case.raw);
}

#[test]
fn qcow2_v3() {
    let Some(case) = convert("disk.qcow2", "qcow2", &[], false) else {
        return;
    };
    let c = check(&case, ContainerKind::Qcow2, "v3");
    check_media(&c, &case.raw);
    assert!(!c.region(1 << 20).unwrap().unwrap().stored);
}

#[test]
fn qcow2_v2() {
    let Some(case) = convert("disk.qcow2", "qcow2", &["compat=0.10"], false) else {
        return;
    };
    let c = check(&case, ContainerKind::Qcow2, "v2");
    check_media(&c, &case.raw);
}

#[test]
fn qcow2_compressed() {
    let Some(case) = convert("disk.qcow2", "qcow2", &[], true) else {
        return;
    };
    let c = check(&case, ContainerKind::Qcow2, "v3");
    check_media(&c, &case.raw);
}

#[test]
fn qcow2_compressed_small_clusters_v2() {
    let Some(case) = convert(
        "disk.qcow2",
        "qcow2",
        &["compat=0.10", "cluster_size=4096"],
        true,
    ) else {
        return;
    };
    let c = check(&case, ContainerKind::Qcow2, "v2");
    assert_eq!(c.damage_unit(), 4096);
    check_media(&c, &case.raw);
}

#[test]
fn qcow2_extended_l2() {
    let Some(case) = convert(
        "disk.qcow2",
        "qcow2",
        &["extended_l2=on", "cluster_size=128k"],
        false,
    ) else {
        return;
    };
    let c = check(&case, ContainerKind::Qcow2, "v3");
    check_media(&c, &case.raw);
}

/// Zero clusters (v3's flag), written by qemu-io's `write -z` over data.
#[test]
fn qcow2_zero_clusters() {
    let Some(case) = convert("disk.qcow2", "qcow2", &[], false) else {
        return;
    };
    if !have_tool("qemu-io") {
        return;
    }
    run(Command::new("qemu-io")
        .args([
            "-f",
            "qcow2",
            "-c",
            "write -z 0 128k",
            "-c",
            "write -z 5M 64k",
        ])
        .arg(&case.image));
    let mut want = case.raw.clone();
    want[..128 << 10].fill(0);
    want[5 << 20..(5 << 20) + (64 << 10)].fill(0);
    let c = Container::open_path(&case.image, &FileBacking::opener).unwrap();
    check_media(&c, &want);
    assert!(!c.region(0).unwrap().unwrap().stored);
    assert!(qemu_raw(&case.image, &case.dir) == want, "qemu-img agrees");
}

/// zstd compression is refused, clearly.
#[test]
fn qcow2_zstd_refused() {
    let Some(case) = convert("disk.qcow2", "qcow2", &["compression_type=zstd"], true) else {
        return;
    };
    let e = Container::open_path(&case.image, &FileBacking::opener).unwrap_err();
    assert!(matches!(e, ContainerError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("zstd"), "{e}");
}

/// A raw disk is none of the formats (and not opened as one).
#[test]
fn raw_is_not_a_container() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("disk.raw");
    std::fs::write(&p, raw_disk()).unwrap();
    assert_eq!(detect(&FileBacking::open(&p).unwrap()).unwrap(), None);
    let e = Container::open_path(&p, &FileBacking::opener).unwrap_err();
    assert!(matches!(e, ContainerError::NotContainer { .. }), "{e}");
}
