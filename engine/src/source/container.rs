//! Virtual-disk containers as evidence: the media a VMDK, VHD, VHDX or
//! QCOW2 file presents, read with `caseload-containers`. Every file the
//! container is made of (the main file, a VMDK's extents) is opened on the
//! evidence channel, so the container's own metadata reads (grain tables,
//! BATs, L2 tables) count there beside the media's, as they would for a
//! suite reading the same file.

use super::{EvidenceSource, SECTOR_SIZE, SourceError, SourceFormat, SourceInfo, StoredHashes};
use crate::channel::{Channel, ChannelError, ChannelFile};
use caseload_containers::{Backing, Container, ContainerError, ContainerKind};
use std::io;
use std::path::{Path, PathBuf};

/// The first bytes of a file that may be a container: the magic numbers
/// of a sparse VMDK, a QCOW2, a VHDX, a dynamic VHD (its footer's copy at
/// the start) and a VMDK descriptor. A fixed VHD has its footer only at
/// the end: it is tried when the name ends in `.vhd`. Anything else is
/// not read further, so a raw image costs no extra read.
pub(crate) fn may_be_container(head: &[u8], path: &Path) -> bool {
    const MAGIC: [&[u8]; 5] = [b"KDMV", b"QFI\xfb", b"vhdxfile", b"conectix", b"# Disk D"];
    MAGIC.iter().any(|m| head.starts_with(m))
        || path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("vhd") || e.eq_ignore_ascii_case("vmdk"))
}

/// A container file opened on the evidence channel.
struct ChannelBacking {
    file: ChannelFile,
    len: u64,
}

impl Backing for ChannelBacking {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// A virtual-disk container's media.
pub struct ContainerSource {
    container: Container,
    info: SourceInfo,
}

impl std::fmt::Debug for ContainerSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerSource")
            .field("info", &self.info)
            .finish()
    }
}

impl ContainerSource {
    /// Open the container whose main file is `path`; `Ok(None)` when it is
    /// not one after all (the caller reads it as raw).
    pub fn open(path: &Path, channel: &Channel) -> Result<Option<Self>, SourceError> {
        let opener = |p: &Path| -> io::Result<Box<dyn Backing>> {
            let file = channel.open_path_read_only(p).map_err(|e| match e {
                ChannelError::Io { source, .. } => source,
                other => io::Error::other(other),
            })?;
            let len = file.len()?;
            Ok(Box::new(ChannelBacking { file, len }))
        };
        let container = match Container::open_path(path, &opener) {
            Ok(c) => c,
            Err(ContainerError::NotContainer { .. }) => return Ok(None),
            Err(ContainerError::Open { path, source }) => {
                return Err(SourceError::Open { path, source });
            }
            Err(e) => {
                return Err(SourceError::Format {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                });
            }
        };
        let files = container.files();
        // Sizes from the file system, not read through the channel: only
        // the container's own reads are evidence reads.
        let container_bytes = files
            .iter()
            .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
            .sum();
        let format = match container.kind() {
            ContainerKind::Vmdk => SourceFormat::Vmdk,
            ContainerKind::Vhd => SourceFormat::Vhd,
            ContainerKind::Vhdx => SourceFormat::Vhdx,
            ContainerKind::Qcow2 => SourceFormat::Qcow2,
        };
        let info = SourceInfo {
            format,
            files,
            container_bytes,
            media_size: container.media_size(),
            chunk_size: Some(container.damage_unit()),
            stored_hashes: StoredHashes::default(),
            metadata: vec![
                ("container".into(), container.kind().name().into()),
                ("variant".into(), container.variant().to_string()),
            ],
            notes: container.notes().to_vec(),
            read_run_bytes: None,
        };
        Ok(Some(ContainerSource { container, info }))
    }

    fn first_file(&self) -> PathBuf {
        self.info.files.first().cloned().unwrap_or_default()
    }
}

impl EvidenceSource for ContainerSource {
    fn size(&self) -> u64 {
        self.container.media_size()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize, SourceError> {
        self.container.read_at(buf, offset).map_err(|e| match e {
            ContainerError::Corrupt { start, end, .. } => SourceError::Corrupt {
                first_sector: start / SECTOR_SIZE,
                last_sector: end.saturating_sub(1) / SECTOR_SIZE,
                reason: e.to_string(),
            },
            ContainerError::Io {
                path,
                offset,
                source,
            } => SourceError::Read {
                path,
                offset,
                source,
            },
            other => SourceError::Read {
                path: self.first_file(),
                offset,
                source: io::Error::other(other.to_string()),
            },
        })
    }

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn damage_unit(&self) -> u64 {
        self.container.damage_unit()
    }
}
