//! What the carve stage scans: the volumes of the evidence with what it
//! knows of their file systems, and the byte ranges (regions) of the
//! chosen scope, produced in disk order.

use super::meta::{FatGeometry, NtfsGeometry, Report, ntfs_boot, system_file_runs};
use crate::source::{EvidenceReader, EvidenceSource};
use caseload_fs::{Content, FileKind, FileSystem, Run};
use std::ops::ControlFlow;
use std::sync::Arc;

/// Which bytes to carve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Unallocated space of each parsed file system (and space outside
    /// partitions; unparsed volumes whole).
    Unallocated,
    /// Every partition whole.
    Partition,
    /// The whole image.
    Image,
}

/// What the stage knows of a volume's file system.
#[derive(Debug, Clone)]
pub enum FsGeom {
    /// Not parsed (unknown, unsupported or damaged).
    None,
    /// FAT12/16/32.
    Fat(FatGeometry),
    /// NTFS, with the runs of `$Bitmap` and `$MFT`.
    Ntfs {
        /// Geometry.
        geometry: NtfsGeometry,
        /// `$Bitmap` data runs (empty when unreadable).
        bitmap: Vec<(Option<u64>, u64)>,
        /// `$MFT` data runs (empty when unreadable).
        mft: Vec<(Option<u64>, u64)>,
    },
}

/// A partition (or the whole disk when there is no partition table).
#[derive(Debug, Clone)]
pub struct Volume {
    /// Media offset.
    pub offset: u64,
    /// Length.
    pub length: u64,
    /// Row in the `volumes` table, when the filesystem stage wrote one.
    pub volume_id: Option<i64>,
    /// File-system knowledge.
    pub fs: FsGeom,
}

/// Where a region's bytes are, for the `source` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Free clusters of a file system.
    Unallocated,
    /// Outside every partition.
    Unpartitioned,
    /// A partition, whole.
    Partition,
    /// The image, whole.
    Image,
    /// File slack.
    Slack,
    /// Directory or MFT areas (meta carving of deleted records only).
    Metadata,
}

impl Source {
    /// The value stored in `carved_items.source`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Unallocated => "unallocated",
            Source::Unpartitioned => "unpartitioned",
            Source::Partition => "partition",
            Source::Image => "image",
            Source::Slack => "slack",
            Source::Metadata => "metadata",
        }
    }
}

/// A contiguous range of the media to scan.
#[derive(Debug, Clone)]
pub struct Region {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The volume it lies in.
    pub volume: Option<Arc<Volume>>,
    /// What it is.
    pub source: Source,
    /// Whether to carve data signatures.
    pub data: bool,
    /// Whether (and how) to carve metadata records.
    pub meta: Option<Report>,
}

impl Region {
    /// What a split stage stores of the region besides its bytes and
    /// volume: its source, whether data is carved, and how metadata is.
    pub fn tag(&self) -> i64 {
        let source = match self.source {
            Source::Unallocated => 0,
            Source::Unpartitioned => 1,
            Source::Partition => 2,
            Source::Image => 3,
            Source::Slack => 4,
            Source::Metadata => 5,
        };
        let meta = match self.meta {
            None => 0,
            Some(Report::All) => 1,
            Some(Report::DeletedOnly) => 2,
        };
        source | (i64::from(self.data) << 3) | (meta << 4)
    }

    /// A stored region back, in `volumes` (`None` when the tag or volume
    /// is not one this build stores: a plan from another version).
    pub fn stored(
        start: u64,
        end: u64,
        volume_offset: Option<u64>,
        tag: i64,
        volumes: &[Arc<Volume>],
    ) -> Option<Region> {
        let source = match tag & 7 {
            0 => Source::Unallocated,
            1 => Source::Unpartitioned,
            2 => Source::Partition,
            3 => Source::Image,
            4 => Source::Slack,
            5 => Source::Metadata,
            _ => return None,
        };
        let meta = match tag >> 4 {
            0 => None,
            1 => Some(Report::All),
            2 => Some(Report::DeletedOnly),
            _ => return None,
        };
        let volume = match volume_offset {
            None => None,
            Some(o) => Some(Arc::clone(volumes.iter().find(|v| v.offset == o)?)),
        };
        (start <= end).then_some(Region {
            start,
            end,
            volume,
            source,
            data: tag & 8 != 0,
            meta,
        })
    }
}

/// Read helper over the evidence: whole reads only.
fn read_exact(src: &dyn EvidenceSource, at: u64, buf: &mut [u8]) -> bool {
    matches!(src.read_at(buf, at), Ok(n) if n == buf.len())
}

/// Discover volumes and their file systems. Problems are returned as
/// notes for the processing-error table; they never stop carving.
pub fn volumes(
    evidence: &Arc<dyn EvidenceSource>,
    volume_ids: &[(u64, i64)],
) -> (Vec<Arc<Volume>>, Vec<String>) {
    let reader = EvidenceReader(Arc::clone(evidence));
    let mut notes = Vec::new();
    let parts = match caseload_fs::open_volume_system(&reader) {
        Ok(vs) => vs.partitions,
        Err(e) => {
            notes.push(format!(
                "volume system could not be read ({e}): the image is carved whole"
            ));
            Vec::new()
        }
    };
    let mut out = Vec::new();
    for p in parts {
        let fs = match caseload_fs::open_filesystem(reader.clone(), p.offset, p.length) {
            Ok(FileSystem::Fat(f)) => FsGeom::Fat(FatGeometry::new(p.offset, f.boot_sector())),
            Ok(FileSystem::Ntfs(_)) => {
                ntfs_geom(evidence.as_ref(), p.offset).unwrap_or_else(|| {
                    notes.push(format!(
                        "NTFS at byte {}: $MFT or $Bitmap unreadable for meta carving",
                        p.offset
                    ));
                    FsGeom::None
                })
            }
            // Meta carving knows FAT's entries and NTFS's records; other
            // file systems' unallocated space is carved for data only.
            Ok(_) => FsGeom::None,
            Err(e) => {
                notes.push(format!(
                    "file system at byte {} could not be opened ({e}): carved whole",
                    p.offset
                ));
                FsGeom::None
            }
        };
        let volume_id = volume_ids
            .iter()
            .find(|(o, _)| *o == p.offset)
            .map(|&(_, id)| id);
        out.push(Arc::new(Volume {
            offset: p.offset,
            length: p.length,
            volume_id,
            fs,
        }));
    }
    out.sort_by_key(|v| v.offset);
    (out, notes)
}

fn ntfs_geom(src: &dyn EvidenceSource, base: u64) -> Option<FsGeom> {
    let mut boot = [0u8; 512];
    if !read_exact(src, base, &mut boot) {
        return None;
    }
    let (geometry, mft_lcn) = ntfs_boot(base, &boot)?;
    let mut read = |at: u64, buf: &mut [u8]| read_exact(src, at, buf);
    let mft = system_file_runs(&geometry, mft_lcn, 0, &mut read).unwrap_or_default();
    let bitmap = system_file_runs(&geometry, mft_lcn, 6, &mut read).unwrap_or_default();
    Some(FsGeom::Ntfs {
        geometry,
        bitmap,
        mft,
    })
}

/// The FAT32 root directory's clusters as merged media ranges (at most a
/// directory's 65,536 entries; a loop or a bad link ends the chain).
fn root_chain(src: &dyn EvidenceSource, g: &FatGeometry) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut c = u64::from(g.root_cluster);
    let max = (65_536 * 32 / g.cluster_size.max(1)).max(1);
    let mut read = |at: u64, buf: &mut [u8]| read_exact(src, at, buf);
    for _ in 0..max {
        if c < 2 || c > g.last_cluster {
            break;
        }
        let a = g.cluster_offset(c);
        match out.last_mut() {
            Some(last) if last.1 == a => last.1 = a + g.cluster_size,
            _ => out.push((a, a + g.cluster_size)),
        }
        match g.entry(c, &mut read) {
            Some(v) if !g.is_eof(v) && u64::from(v) != c => c = u64::from(v),
            _ => break,
        }
    }
    out
}

/// What to scan besides the scope itself.
#[derive(Debug, Clone, Copy)]
pub struct Extras {
    /// Meta carving at all.
    pub meta: bool,
    /// File slack (meta carving).
    pub slack: bool,
}

/// Produce the regions of `scope` in order, calling `emit` for each;
/// stops early when `emit` returns false. Problems go to `note`.
pub fn plan(
    evidence: &Arc<dyn EvidenceSource>,
    volumes: &[Arc<Volume>],
    scope: Scope,
    extras: Extras,
    emit: &mut dyn FnMut(Region) -> bool,
    note: &mut dyn FnMut(String),
) {
    let size = evidence.size();
    let meta_all = extras.meta.then_some(Report::All);
    let meta_deleted = extras.meta.then_some(Report::DeletedOnly);
    let whole = |start: u64, end: u64, volume: Option<Arc<Volume>>, source: Source| Region {
        start,
        end,
        volume,
        source,
        data: true,
        meta: if matches!(source, Source::Unpartitioned | Source::Unallocated) {
            meta_all
        } else {
            meta_deleted
        },
    };
    if volumes.is_empty() {
        let source = if scope == Scope::Image {
            Source::Image
        } else {
            Source::Unpartitioned
        };
        emit(whole(0, size, None, source));
        return;
    }
    let mut covered = 0u64;
    for v in volumes {
        let (vstart, vend) = (v.offset, v.offset.saturating_add(v.length).min(size));
        // Space before this volume, outside every partition.
        if vstart > covered && scope != Scope::Partition {
            let src = if scope == Scope::Image {
                Source::Image
            } else {
                Source::Unpartitioned
            };
            if !emit(whole(covered, vstart, None, src)) {
                return;
            }
        }
        covered = covered.max(vend);
        let parsed = !matches!(v.fs, FsGeom::None);
        match scope {
            Scope::Image | Scope::Partition => {
                let src = if scope == Scope::Image {
                    Source::Image
                } else {
                    Source::Partition
                };
                if !emit(whole(vstart, vend, Some(Arc::clone(v)), src)) {
                    return;
                }
            }
            Scope::Unallocated if !parsed => {
                if !emit(whole(vstart, vend, Some(Arc::clone(v)), Source::Partition)) {
                    return;
                }
            }
            Scope::Unallocated => {
                if !unallocated(evidence, v, extras, emit, note) {
                    return;
                }
            }
        }
    }
    if covered < size && scope != Scope::Partition {
        let src = if scope == Scope::Image {
            Source::Image
        } else {
            Source::Unpartitioned
        };
        emit(whole(covered, size, None, src));
    }
}

/// The regions of one parsed volume: free runs, then (for meta carving)
/// its directory and MFT areas and file slack. Returns false to stop.
fn unallocated(
    evidence: &Arc<dyn EvidenceSource>,
    v: &Arc<Volume>,
    extras: Extras,
    emit: &mut dyn FnMut(Region) -> bool,
    note: &mut dyn FnMut(String),
) -> bool {
    let reader = EvidenceReader(Arc::clone(evidence));
    let fs = match caseload_fs::open_filesystem(reader, v.offset, v.length) {
        Ok(fs) => fs,
        Err(e) => {
            note(format!(
                "file system at byte {} could not be reopened: {e}",
                v.offset
            ));
            return true;
        }
    };
    let mut go = true;
    let meta_all = extras.meta.then_some(Report::All);
    let r = fs.unallocated_runs(|e| {
        if go && e.len > 0 {
            go = emit(Region {
                start: e.offset,
                end: e.offset + e.len,
                volume: Some(Arc::clone(v)),
                source: Source::Unallocated,
                data: true,
                meta: meta_all,
            });
        }
    });
    if let Err(e) = r {
        note(format!(
            "free space of the file system at byte {} could not be listed ({e}): not carved",
            v.offset
        ));
    }
    if !go || !extras.meta {
        return go;
    }
    let meta_region = |start: u64, end: u64, source: Source, report: Report| Region {
        start,
        end,
        volume: Some(Arc::clone(v)),
        source,
        data: false,
        meta: Some(report),
    };
    // Directory areas: deleted entries of live directories.
    match &v.fs {
        FsGeom::Fat(g) => {
            if let Some((a, b)) = g.fixed_root()
                && !emit(meta_region(a, b, Source::Metadata, Report::DeletedOnly))
            {
                return false;
            }
            if g.bits == 32 {
                // The FAT32 root is a cluster chain that no entry names.
                for (a, b) in root_chain(evidence.as_ref(), g) {
                    if !emit(meta_region(a, b, Source::Metadata, Report::DeletedOnly)) {
                        return false;
                    }
                }
            }
        }
        FsGeom::Ntfs { geometry, mft, .. } => {
            let cs = geometry.cluster_size;
            for &(lcn, count) in mft {
                if let Some(l) = lcn {
                    let start = geometry.base + l * cs;
                    if !emit(meta_region(
                        start,
                        start + count * cs,
                        Source::Metadata,
                        Report::DeletedOnly,
                    )) {
                        return false;
                    }
                }
            }
        }
        FsGeom::None => {}
    }
    // Live directories' clusters (FAT; NTFS keeps records in the MFT) and
    // file slack, from a walk of the tree.
    let fat = matches!(v.fs, FsGeom::Fat(_));
    if !(fat || extras.slack) {
        return true;
    }
    let walk = fs.walk(|rec| {
        if !go {
            return ControlFlow::Break(());
        }
        if fat
            && rec.allocated
            && rec.kind == FileKind::Directory
            && let Content::Runs(runs) = &rec.content
        {
            for r in runs {
                if let Run::Data { offset, len } = *r
                    && go
                {
                    go = emit(meta_region(
                        offset,
                        offset + len,
                        Source::Metadata,
                        Report::DeletedOnly,
                    ));
                }
            }
        }
        if extras.slack && rec.allocated {
            for e in &rec.slack {
                if go && e.len >= 512 {
                    go = emit(meta_region(
                        e.offset,
                        e.offset + e.len,
                        Source::Slack,
                        Report::All,
                    ));
                }
            }
        }
        if go {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    });
    if let Err(e) = walk {
        note(format!(
            "walking the file system at byte {} for directories and slack failed: {e}",
            v.offset
        ));
    }
    go
}
