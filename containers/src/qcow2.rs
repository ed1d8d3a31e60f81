//! QCOW2 versions 2 and 3: the active L1 table, L2 tables (standard and
//! extended, with 32 subclusters), zero clusters, deflate-compressed
//! clusters. Refcounts and snapshots are not needed to read the media.

use crate::error::{ContainerError, format, unsupported};
use crate::io::{Files, be32, be64};
use crate::map::{Codec, Compressed, Layout, Mapping, Opened, Piece};

const OFFSET_MASK: u64 = 0x00ff_ffff_ffff_fe00;
const COMPRESSED: u64 = 1 << 62;
const ZERO_FLAG: u64 = 1;
/// Incompatible feature bits.
const DIRTY: u64 = 1 << 0;
const CORRUPT: u64 = 1 << 1;
const EXTERNAL_DATA: u64 = 1 << 2;
const COMPRESSION_TYPE: u64 = 1 << 3;
const EXTENDED_L2: u64 = 1 << 4;
const KNOWN: u64 = DIRTY | CORRUPT | EXTERNAL_DATA | COMPRESSION_TYPE | EXTENDED_L2;

/// Whether `head` starts with a QCOW header of a known version and a sane
/// cluster size.
pub(crate) fn is_header(head: &[u8]) -> bool {
    head.len() >= 72
        && head.starts_with(b"QFI\xfb")
        && (1..=3).contains(&be32(head, 4))
        && (be32(head, 4) == 1 || (9..=21).contains(&be32(head, 20)))
}

struct Qcow2 {
    file: usize,
    cluster_bits: u32,
    l1: u64,
    l1_entries: u64,
    extended: bool,
    v3: bool,
}

impl Layout for Qcow2 {
    fn map(&self, files: &Files, offset: u64) -> Result<Mapping, ContainerError> {
        let cluster = 1u64 << self.cluster_bits;
        let entry_size = if self.extended { 16 } else { 8 };
        let l2_entries = cluster / entry_size;
        let within = offset % cluster;
        let start = offset - within;
        let unit = (start, start.saturating_add(cluster));
        let err = |e: ContainerError| e.at_media(unit.0, unit.1);
        let cluster_index = offset >> self.cluster_bits;
        let l1_index = cluster_index / l2_entries;
        let zero_to = |end: u64| Mapping {
            len: end - within,
            piece: Piece::Zero,
            unit,
        };
        if l1_index >= self.l1_entries {
            return Ok(zero_to(cluster));
        }
        let l1e = files
            .u64_be(self.file, self.l1 + l1_index * 8, "L1 table entry")
            .map_err(err)?;
        let l2 = l1e & OFFSET_MASK;
        if l2 == 0 {
            let span = l2_entries * cluster;
            let l2_start = offset - offset % span;
            return Ok(Mapping {
                len: span - offset % span,
                piece: Piece::Zero,
                unit: (l2_start, l2_start.saturating_add(span)),
            });
        }
        let l2_at = l2 + (cluster_index % l2_entries) * entry_size;
        let path = || files.path(self.file).to_path_buf();
        if !l2.is_multiple_of(cluster) {
            return Err(ContainerError::Corrupt {
                start: unit.0,
                end: unit.1,
                path: path(),
                offset: self.l1 + l1_index * 8,
                what: format!("L1 entry points at unaligned L2 table {l2}"),
            });
        }
        let l2e = files
            .u64_be(self.file, l2_at, "L2 table entry")
            .map_err(err)?;
        if l2e & COMPRESSED != 0 {
            // Offset in the low bits, then the count of extra 512-byte
            // sectors the compressed data spans.
            let shift = 62 - (self.cluster_bits - 8);
            let host = l2e & ((1u64 << shift) - 1);
            let sectors = ((l2e >> shift) & ((1u64 << (self.cluster_bits - 8)) - 1)) + 1;
            let stored = (sectors * 512).saturating_sub(host & 511);
            return Ok(Mapping {
                len: cluster - within,
                piece: Piece::Compressed(Compressed {
                    file: self.file,
                    offset: host,
                    stored,
                    codec: Codec::RawDeflate,
                    out_len: cluster,
                    skip: within,
                }),
                unit,
            });
        }
        let host = l2e & OFFSET_MASK;
        if self.extended {
            let bitmap = files
                .u64_be(self.file, l2_at + 8, "L2 subcluster bitmap")
                .map_err(err)?;
            let sub = cluster / 32;
            let i = within / sub;
            let alloc = |j: u64| bitmap & (1 << j) != 0;
            let a = alloc(i);
            let mut j = i + 1;
            while j < 32 && alloc(j) == a {
                j += 1;
            }
            // Subclusters neither allocated nor zero have no backing file to
            // read from: zeros as well.
            if !a || host == 0 {
                return Ok(zero_to(j * sub));
            }
            return self.data(files, host, within, j * sub, unit);
        }
        if (self.v3 && l2e & ZERO_FLAG != 0) || host == 0 {
            return Ok(zero_to(cluster));
        }
        self.data(files, host, within, cluster, unit)
    }
}

impl Qcow2 {
    fn data(
        &self,
        files: &Files,
        host: u64,
        within: u64,
        end: u64,
        unit: (u64, u64),
    ) -> Result<Mapping, ContainerError> {
        let cluster = 1u64 << self.cluster_bits;
        if !host.is_multiple_of(cluster) {
            return Err(ContainerError::Corrupt {
                start: unit.0,
                end: unit.1,
                path: files.path(self.file).to_path_buf(),
                offset: host,
                what: format!("L2 entry points at unaligned cluster {host}"),
            });
        }
        Ok(Mapping {
            len: end - within,
            piece: Piece::Data {
                file: self.file,
                offset: host + within,
            },
            unit,
        })
    }
}

pub(crate) fn open(
    files: &Files,
    main: usize,
    notes: &mut Vec<String>,
) -> Result<Opened, ContainerError> {
    let path = files.path(main).to_path_buf();
    let mut h = [0u8; 112];
    let n = files.read_some(main, 0, &mut h)?;
    let version = be32(&h, 4);
    if version == 1 {
        return Err(unsupported(&path, "QCOW version 1"));
    }
    if n < 72 || (version == 3 && n < 104) {
        return Err(format(&path, 0, "QCOW2 header truncated"));
    }
    let backing = be64(&h, 8);
    if backing != 0 {
        let len = usize::try_from(be32(&h, 16).min(1023)).unwrap_or(0);
        let mut name = vec![0u8; len];
        let got = files.read_some(main, backing, &mut name)?;
        name.truncate(got);
        return Err(unsupported(
            &path,
            format!(
                "differencing disk: parent not supported (QCOW2 backing file `{}`)",
                String::from_utf8_lossy(&name)
            ),
        ));
    }
    let cluster_bits = be32(&h, 20);
    if !(9..=21).contains(&cluster_bits) {
        return Err(format(
            &path,
            20,
            format!("QCOW2 cluster bits {cluster_bits} outside 9-21"),
        ));
    }
    let size = be64(&h, 24);
    let crypt = be32(&h, 32);
    if crypt != 0 {
        let how = match crypt {
            1 => "AES",
            2 => "LUKS",
            _ => "unknown",
        };
        return Err(unsupported(
            &path,
            format!("encrypted QCOW2 ({how}, method {crypt})"),
        ));
    }
    let l1_entries = u64::from(be32(&h, 36));
    let l1 = be64(&h, 40);
    let snapshots = be32(&h, 60);
    let mut extended = false;
    if version == 3 {
        let incompatible = be64(&h, 72);
        let header_len = be32(&h, 100);
        if incompatible & !KNOWN != 0 {
            return Err(unsupported(
                &path,
                format!("QCOW2 incompatible features {:#x}", incompatible & !KNOWN),
            ));
        }
        if incompatible & EXTERNAL_DATA != 0 {
            return Err(unsupported(&path, "QCOW2 external data file"));
        }
        if incompatible & COMPRESSION_TYPE != 0 {
            let kind = if header_len > 104 { h[104] } else { 0 };
            if kind != 0 {
                let name = if kind == 1 { "zstd" } else { "unknown" };
                return Err(unsupported(
                    &path,
                    format!("QCOW2 compression type {kind} ({name}); only deflate is read"),
                ));
            }
        }
        if incompatible & DIRTY != 0 {
            notes.push("QCOW2 image is marked dirty (not closed cleanly): its refcounts may be stale, which reading ignores".into());
        }
        if incompatible & CORRUPT != 0 {
            notes.push(
                "QCOW2 image is marked corrupt by qemu: its tables may be inconsistent".into(),
            );
        }
        extended = incompatible & EXTENDED_L2 != 0;
        if extended && cluster_bits < 14 {
            return Err(format(
                &path,
                20,
                "extended L2 entries need clusters of at least 16 KiB",
            ));
        }
    }
    let cluster = 1u64 << cluster_bits;
    let l2_entries = cluster / if extended { 16 } else { 8 };
    let needed = size.div_ceil(cluster).div_ceil(l2_entries);
    if l1_entries < needed {
        notes.push(format!(
            "QCOW2 L1 table has {l1_entries} entries, {needed} are needed: the media past them reads as zeros"
        ));
    }
    if !l1.is_multiple_of(512) || l1.saturating_add(l1_entries.min(needed) * 8) > files.len(main) {
        return Err(format(
            &path,
            40,
            format!("QCOW2 L1 table at byte {l1} ({l1_entries} entries) lies outside the file"),
        ));
    }
    if snapshots > 0 {
        notes.push(format!(
            "QCOW2 image has {snapshots} internal snapshots; the active state is read"
        ));
    }
    Ok(Opened {
        variant: if version == 3 {
            "v3".into()
        } else {
            "v2".into()
        },
        size,
        unit: cluster,
        layout: Box::new(Qcow2 {
            file: main,
            cluster_bits,
            l1,
            l1_entries,
            extended,
            v3: version == 3,
        }),
    })
}
