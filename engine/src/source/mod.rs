//! Evidence sources: positioned, read-only access to the media bytes of a
//! raw image (single or split), an EWF set or a virtual-disk container
//! (VMDK, VHD, VHDX, QCOW2), from any thread.
//!
//! Every byte a source reads from the evidence files is counted on the
//! evidence channel it was opened with.

mod container;
mod ewf;
mod raw;
mod runs;
mod stream;

pub use self::ewf::EwfSource;
pub use container::ContainerSource;
pub use raw::RawSource;
pub use runs::{DEFAULT_RUN_BYTES, MAX_RUN_BYTES, MIN_RUN_BYTES, ReadOptions};
pub(crate) use stream::read_block;
pub use stream::{Block, BlockStream, StreamOptions};

use crate::channel::{Channel, ChannelError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Bytes per sector assumed throughout (EWF stores it; raw images are 512).
pub const SECTOR_SIZE: u64 = 512;

/// Errors reading evidence.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The evidence path does not exist or cannot be opened.
    #[error("cannot open evidence `{}`: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A read failed.
    #[error("reading evidence `{}` at byte {offset}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Offset in that file.
        offset: u64,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The set of files is inconsistent (missing segment, uneven split parts).
    #[error("evidence set `{}` is incomplete or inconsistent: {reason}", path.display())]
    Inconsistent {
        /// The first file of the set.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The container could not be parsed.
    #[error("cannot parse evidence container `{}`: {reason}", path.display())]
    Format {
        /// The first segment.
        path: PathBuf,
        /// The parser's complaint.
        reason: String,
    },
    /// Media data in a sector range is corrupt or missing.
    #[error("corrupt evidence data in sectors {first_sector}-{last_sector}: {reason}")]
    Corrupt {
        /// First sector of the damaged range.
        first_sector: u64,
        /// Last sector of the damaged range (inclusive).
        last_sector: u64,
        /// What was found.
        reason: String,
    },
    /// A channel refused the operation.
    #[error(transparent)]
    Channel(#[from] ChannelError),
}

impl SourceError {
    /// The damaged sector range, when the error names one.
    pub fn sector_range(&self) -> Option<(u64, u64)> {
        match self {
            SourceError::Corrupt {
                first_sector,
                last_sector,
                ..
            } => Some((*first_sector, *last_sector)),
            _ => None,
        }
    }
}

/// The container format of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceFormat {
    /// A raw image, one file.
    Raw,
    /// A raw image split into numbered parts.
    SplitRaw,
    /// Expert Witness Format version 1 (E01).
    Ewf,
    /// Expert Witness Format version 2 (Ex01).
    Ewf2,
    /// A VMware virtual disk (sparse, stream-optimized or flat).
    Vmdk,
    /// A Virtual PC / Hyper-V VHD (fixed or dynamic).
    Vhd,
    /// A Hyper-V VHDX.
    Vhdx,
    /// A QEMU QCOW2.
    Qcow2,
}

/// Hashes an acquisition tool stored in the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredHashes {
    /// MD5, lower-case hex.
    pub md5: Option<String>,
    /// SHA-1, lower-case hex.
    pub sha1: Option<String>,
}

/// What a source is, for the run record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SourceInfo {
    /// Container format.
    pub format: SourceFormat,
    /// The files that make up the evidence, in order.
    pub files: Vec<PathBuf>,
    /// Total size of those files on disk.
    pub container_bytes: u64,
    /// Media size in bytes.
    pub media_size: u64,
    /// EWF chunk size, when there is one.
    pub chunk_size: Option<u64>,
    /// Hashes stored in the container.
    pub stored_hashes: StoredHashes,
    /// Case metadata stored in the container (EWF header sections).
    pub metadata: Vec<(String, String)>,
    /// Problems noticed when opening (reads of the affected ranges fail
    /// with errors naming their sectors).
    pub notes: Vec<String>,
    /// Largest read the source issues for requests smaller than it
    /// ([`ReadOptions::run_bytes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_run_bytes: Option<u64>,
}

/// Positioned, read-only access to evidence media, usable from any thread.
pub trait EvidenceSource: Send + Sync {
    /// Media size in bytes.
    fn size(&self) -> u64;

    /// Read into `buf` from media offset `offset`; returns the bytes read,
    /// short only at the end of the media.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize, SourceError>;

    /// What the source is.
    fn info(&self) -> &SourceInfo;

    /// The unit in which data can be damaged independently (an EWF chunk, a
    /// sector for raw): reads are retried at this size to isolate damage.
    fn damage_unit(&self) -> u64;

    /// The evidence files, for page-cache control and for refusing writes.
    fn files(&self) -> &[PathBuf] {
        &self.info().files
    }

    /// Media bytes `offset..offset + len` will be read soon, in any order
    /// and by any thread: the source may read them in larger runs (see
    /// `source::runs`). Only a hint: reads are correct without it.
    fn hint(&self, _offset: u64, _len: u64) {}

    /// The read size the source prefers for bulk reads: a request at
    /// least this large is read as asked, with no copy through its runs.
    fn read_size(&self) -> u64 {
        1 << 20
    }

    /// Pass media bytes `offset..offset + len` to `visit`, in order and in
    /// pieces; returns how many there were (short only at the end of the
    /// media). Sources that hold runs hand out their bytes without
    /// copying them into a caller's buffer.
    fn visit(
        &self,
        offset: u64,
        len: u64,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<u64, SourceError> {
        let mut buf = vec![0u8; usize::try_from(len.min(1 << 20)).unwrap_or(1 << 20)];
        let mut done = 0u64;
        while done < len {
            let n = usize::try_from((len - done).min(buf.len() as u64)).unwrap_or(buf.len());
            let got = self.read_at(&mut buf[..n], offset + done)?;
            if got == 0 {
                break;
            }
            visit(&buf[..got]);
            done += got as u64;
        }
        Ok(done)
    }
}

/// The evidence as the file-system parsers' positioned-read trait. Damaged
/// data surfaces as an I/O error whose message names the sectors, which the
/// parsers record against the structure they were reading.
#[derive(Clone)]
pub struct EvidenceReader(pub std::sync::Arc<dyn EvidenceSource>);

impl caseload_fs::ReadAt for EvidenceReader {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.0.read_at(buf, offset).map_err(std::io::Error::other)
    }

    fn len(&self) -> u64 {
        self.0.size()
    }
}

/// Open evidence by path, choosing the format from the file's content
/// (EWF signature, a container's magic number) and name (`.001` split
/// parts, `.vhd`). Reads count on `channel`.
pub fn open_evidence(
    path: &Path,
    channel: &Channel,
    read: ReadOptions,
) -> Result<Box<dyn EvidenceSource>, SourceError> {
    let mut signature = [0u8; 8];
    let file = channel.open_path_read_only(path).map_err(|e| match e {
        ChannelError::Io { source, .. } => SourceError::Open {
            path: path.to_path_buf(),
            source,
        },
        other => SourceError::Channel(other),
    })?;
    let n = file
        .read_at(&mut signature, 0)
        .map_err(|source| SourceError::Read {
            path: path.to_path_buf(),
            offset: 0,
            source,
        })?;
    drop(file);
    if is_ewf_signature(&signature[..n]) {
        return Ok(Box::new(EwfSource::open(path, channel, read)?));
    }
    if container::may_be_container(&signature[..n], path)
        && let Some(c) = ContainerSource::open(path, channel)?
    {
        return Ok(Box::new(c));
    }
    Ok(Box::new(RawSource::open(path, channel, read)?))
}

/// Whether a file's first bytes are an EWF signature: version 1 (E01)
/// or version 2 (Ex01).
pub fn is_ewf_signature(head: &[u8]) -> bool {
    head == b"EVF\x09\x0d\x0a\xff\x00" || head == b"EVF2\r\n\x81\x00"
}

/// Lower-case hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}
