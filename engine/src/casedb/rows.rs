//! The case database's rows as Rust types: what stages write and what they
//! read back. Columns and their meaning are documented in `docs/schema.md`.

use super::extents::{Extents, ExtentsError};
use crate::channel::ChannelSnapshot;

/// What a `hits`, `processing_errors` or KFF row points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ItemKind {
    /// A `files` row.
    File,
    /// A `carved_items` row.
    Carved,
    /// The `evidence` row.
    Evidence,
    /// A `volumes` row.
    Volume,
    /// An `extracted_items` row (a member of a compound file).
    Extracted,
}

impl ItemKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ItemKind::File => "file",
            ItemKind::Carved => "carved",
            ItemKind::Evidence => "evidence",
            ItemKind::Volume => "volume",
            ItemKind::Extracted => "extracted",
        }
    }
}

/// An `extracted_items` row: a member of a compound file (a ZIP or OOXML
/// member, a message of a mailbox, an e-mail attachment), expanded into an
/// item of its own as FTK's pre-processing does.
#[derive(Debug, Clone)]
pub struct NewExtracted {
    /// Its id, chosen by the stage so that it does not depend on the order
    /// workers finish in ([`NewExtracted::id_of`]).
    pub id: i64,
    /// The compound file on the file system.
    pub file_id: i64,
    /// The member it came out of, when nested (its `id`); `None` for a
    /// member of the file itself.
    pub parent_id: Option<i64>,
    /// Where in it: member names from the file down, `/`-joined.
    pub member: String,
    /// The member's own name.
    pub name: String,
    /// The container kind it came out of (`zip`, `ooxml`, `mbox`, `mail`).
    pub container: &'static str,
    /// Its size in bytes (decoded).
    pub size: u64,
    /// MD5, lower-case hex.
    pub md5: Option<String>,
    /// SHA-1.
    pub sha1: Option<String>,
    /// SHA-256.
    pub sha256: Option<String>,
    /// Type from its signature.
    pub signature: Option<&'static str>,
}

impl NewExtracted {
    /// Members kept per compound file at most (ids are `file << 16 | k`).
    pub const MAX_PER_FILE: usize = (1 << 16) - 1;

    /// The id of the `k`-th member (from 0) of file `file_id`: below
    /// 2^56, so a suite profile can give extracted items an id range of
    /// their own; `None` for a file id of 2^40 or more, or `k` past
    /// [`Self::MAX_PER_FILE`].
    pub fn id_of(file_id: i64, k: usize) -> Option<i64> {
        if !(0..1 << 40).contains(&file_id) || k >= Self::MAX_PER_FILE {
            return None;
        }
        Some((file_id << 16) | (k as i64 + 1))
    }
}

/// A `runs` row at the start of a run.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// ISO 8601 UTC.
    pub started_at: String,
    /// Workload name.
    pub workload: Option<String>,
    /// Stage names in order.
    pub stages: Vec<String>,
    /// Worker threads.
    pub threads: usize,
    /// `cold` or `warm`.
    pub cache_mode: String,
    /// `sqlite` or `postgres`.
    pub db_engine: String,
    /// SQLite journal mode (`wal` on PostgreSQL, whose log is always a WAL).
    pub journal_mode: String,
    /// SQLite synchronous level, or PostgreSQL's `synchronous_commit`.
    pub synchronous: String,
    /// Operations per transaction.
    pub batch_size: usize,
}

/// The `evidence` row with its files and metadata.
#[derive(Debug, Clone)]
pub struct NewEvidence {
    /// First file of the set.
    pub path: String,
    /// `raw`, `splitraw`, `ewf`...
    pub format: String,
    /// Media bytes.
    pub media_size: u64,
    /// Bytes of the container files.
    pub container_bytes: u64,
    /// EWF chunk size.
    pub chunk_size: Option<u64>,
    /// Hashes stored in the container.
    pub stored_md5: Option<String>,
    /// Hashes stored in the container.
    pub stored_sha1: Option<String>,
    /// Every segment or part: path and bytes.
    pub files: Vec<(String, u64)>,
    /// Container metadata (case number, examiner...).
    pub metadata: Vec<(String, String)>,
}

/// The image-hash stage's result for the evidence row.
#[derive(Debug, Clone)]
pub struct EvidenceHashes {
    /// The evidence row.
    pub evidence_id: i64,
    /// Computed MD5.
    pub md5: Option<String>,
    /// Computed SHA-1.
    pub sha1: Option<String>,
    /// Computed SHA-256.
    pub sha256: Option<String>,
    /// `match`, `mismatch`, `not-stored`, `incomplete`.
    pub verified: &'static str,
}

/// A `volumes` row.
#[derive(Debug, Clone)]
pub struct NewVolume {
    /// The evidence row.
    pub evidence_id: i64,
    /// Position in the partition table.
    pub slot: i64,
    /// `mbr`, `gpt`, `none`.
    pub scheme: &'static str,
    /// Bytes on the media.
    pub offset: u64,
    /// Bytes on the media.
    pub length: u64,
    /// Partition type code.
    pub type_code: String,
    /// Its name.
    pub description: String,
}

/// What the filesystem stage learned of a volume's file system.
#[derive(Debug, Clone)]
pub struct VolumeFs {
    /// The volume row.
    pub volume_id: i64,
    /// File-system type.
    pub fs_type: String,
    /// Its label.
    pub fs_label: Option<String>,
    /// Whether caseload walked it.
    pub parsed: bool,
}

/// How a file's content is stored, as `files.extents`, `encoding`,
/// `first_offset` and `resident_data` say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredContent {
    /// No content (directories without data, zero-length files).
    None,
    /// Resident bytes (NTFS), kept in the row.
    Resident(Vec<u8>),
    /// Plain runs on the media.
    Runs(Extents),
    /// NTFS LZNT1-compressed runs: enough to decode them again.
    Compressed {
        /// The stored (compressed) runs.
        runs: Extents,
        /// Compression unit bytes.
        unit: u64,
        /// Decoded size.
        size: u64,
        /// Valid-data length.
        initialized: u64,
    },
    /// An APFS file compressed into its resource fork: the fork's runs,
    /// decoded a block at a time as they are read.
    Decmpfs {
        /// The resource fork's (stored) runs.
        runs: Extents,
        /// How its blocks are compressed.
        codec: caseload_fs::ForkCodec,
        /// Decoded size.
        size: u64,
    },
    /// Runs in an encoding caseload does not decode (`ntfs-compressed`
    /// in another scheme, `ntfs-encrypted`, `apfs-compressed`).
    Encoded {
        /// The encoding's name.
        encoding: String,
        /// The stored runs.
        runs: Extents,
    },
}

/// `files.encoding` of an LZNT1-compressed stream:
/// `ntfs-lznt1:UNIT:SIZE:INITIALIZED`.
const COMPRESSED_PREFIX: &str = "ntfs-lznt1:";
/// `files.encoding` of an APFS resource-fork-compressed file:
/// `apfs-decmpfs:CODEC:SIZE` (`zlib` or `lzvn`).
const DECMPFS_PREFIX: &str = "apfs-decmpfs:";

impl StoredContent {
    /// The runs, when the content has any.
    pub fn runs(&self) -> Option<&Extents> {
        match self {
            StoredContent::Runs(r)
            | StoredContent::Compressed { runs: r, .. }
            | StoredContent::Decmpfs { runs: r, .. }
            | StoredContent::Encoded { runs: r, .. } => Some(r),
            StoredContent::None | StoredContent::Resident(_) => None,
        }
    }

    /// `(extents, encoding, first_offset, resident_data)` columns.
    pub(crate) fn columns(&self) -> (Option<String>, Option<String>, Option<u64>, Option<Vec<u8>>) {
        match self {
            StoredContent::None => (None, None, None, None),
            StoredContent::Resident(b) => (None, None, None, Some(b.clone())),
            StoredContent::Runs(r) => (Some(r.encode()), None, r.first_offset(), None),
            StoredContent::Compressed {
                runs,
                unit,
                size,
                initialized,
            } => (
                Some(runs.encode()),
                Some(format!("{COMPRESSED_PREFIX}{unit}:{size}:{initialized}")),
                runs.first_offset(),
                None,
            ),
            StoredContent::Decmpfs { runs, codec, size } => (
                Some(runs.encode()),
                Some(format!("{DECMPFS_PREFIX}{}:{size}", codec.name())),
                runs.first_offset(),
                None,
            ),
            StoredContent::Encoded { encoding, runs } => (
                Some(runs.encode()),
                Some(encoding.clone()),
                runs.first_offset(),
                None,
            ),
        }
    }

    /// The content caseload-fs decodes as it is read (NTFS LZNT1 units,
    /// APFS resource-fork blocks), if it is stored so.
    pub fn decoded(&self) -> Option<caseload_fs::Content> {
        match self {
            StoredContent::Compressed {
                runs,
                unit,
                size,
                initialized,
            } => Some(caseload_fs::Content::Compressed {
                runs: runs.0.clone(),
                unit: *unit,
                size: *size,
                initialized: *initialized,
            }),
            StoredContent::Decmpfs { runs, codec, size } => Some(caseload_fs::Content::Decmpfs {
                runs: runs.0.clone(),
                codec: *codec,
                size: *size,
            }),
            _ => None,
        }
    }

    /// Rebuild from the columns.
    pub(crate) fn from_columns(
        extents: Option<String>,
        encoding: Option<String>,
        resident: Option<Vec<u8>>,
    ) -> Result<StoredContent, ExtentsError> {
        let runs = extents.as_deref().map(Extents::decode).transpose()?;
        Ok(match (resident, runs, encoding) {
            (Some(b), _, _) => StoredContent::Resident(b),
            (None, None, _) => StoredContent::None,
            (None, Some(runs), None) => StoredContent::Runs(runs),
            (None, Some(runs), Some(enc)) => {
                if let Some((unit, size, initialized)) = parse_compressed(&enc) {
                    StoredContent::Compressed {
                        runs,
                        unit,
                        size,
                        initialized,
                    }
                } else if let Some((codec, size)) = parse_decmpfs(&enc) {
                    StoredContent::Decmpfs { runs, codec, size }
                } else {
                    StoredContent::Encoded {
                        encoding: enc,
                        runs,
                    }
                }
            }
        })
    }
}

fn parse_compressed(encoding: &str) -> Option<(u64, u64, u64)> {
    let mut f = encoding
        .strip_prefix(COMPRESSED_PREFIX)?
        .split(':')
        .map(str::parse::<u64>);
    let v = (f.next()?.ok()?, f.next()?.ok()?, f.next()?.ok()?);
    f.next().is_none().then_some(v)
}

fn parse_decmpfs(encoding: &str) -> Option<(caseload_fs::ForkCodec, u64)> {
    let (codec, size) = encoding.strip_prefix(DECMPFS_PREFIX)?.split_once(':')?;
    Some((
        caseload_fs::ForkCodec::from_name(codec)?,
        size.parse().ok()?,
    ))
}

/// A file-system entry for the `files` table.
#[derive(Debug, Clone)]
pub struct NewFile {
    /// The volume row.
    pub volume_id: i64,
    /// TSK-style metadata address.
    pub meta_addr: String,
    /// Full path.
    pub path: String,
    /// Name as TSK shows it.
    pub name: String,
    /// The name's bytes as stored on disk.
    pub raw_name: Vec<u8>,
    /// 8.3 name.
    pub short_name: Option<String>,
    /// `file`, `directory`, `volume-label`, `virtual`, `virtual-directory`.
    pub kind: &'static str,
    /// Its file system, which suite profiles follow: TSK's attribute
    /// types and flags differ by file system.
    pub fs_type: caseload_fs::FsKind,
    /// Logical size.
    pub size: u64,
    /// Allocated (not deleted).
    pub allocated: bool,
    /// `allocated`, `unallocated`, `skipped-allocated`, `overwritten`, `unrecoverable`.
    pub recovery: &'static str,
    /// Whether its content can be read.
    pub recoverable: bool,
    /// File-system attribute bits.
    pub attributes: i64,
    /// Permission bits, user id and group id, as TSK reports them (`fls
    /// -m`'s mode, UID and GID).
    pub owner: [i64; 3],
    /// Modified, accessed, changed, created (Unix seconds).
    pub times: [Option<i64>; 4],
    /// NTFS $FILE_NAME times.
    pub fn_times: [Option<i64>; 4],
    /// Where its content is.
    pub content: StoredContent,
    /// Slack runs.
    pub slack: Option<Extents>,
    /// Problems parsing this record: `(media offset, message)`, stored as
    /// processing errors pointing at the new row.
    pub errors: Vec<(Option<u64>, String)>,
}

/// What file-hash computed for one file.
#[derive(Debug, Clone, Default)]
pub struct FileDigests {
    /// The file row.
    pub file_id: i64,
    /// MD5 hex.
    pub md5: Option<String>,
    /// SHA-1 hex.
    pub sha1: Option<String>,
    /// SHA-256 hex.
    pub sha256: Option<String>,
    /// Type from the signature.
    pub signature: Option<&'static str>,
    /// Extension contradicts the signature.
    pub extension_mismatch: Option<bool>,
    /// Shannon entropy, bits per byte.
    pub entropy: Option<f64>,
}

/// Which hash column groups duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashColumn {
    /// `md5`.
    Md5,
    /// `sha1`.
    Sha1,
    /// `sha256`.
    Sha256,
}

/// The metadata part of a meta-carved item.
#[derive(Debug, Clone)]
pub struct CarvedMeta {
    /// `fat-dentry` or `mft-record`.
    pub record: &'static str,
    /// Recovered name.
    pub name: String,
    /// `file` or `directory`.
    pub kind: &'static str,
    /// Recorded size.
    pub size: u64,
    /// Marked deleted.
    pub deleted: bool,
    /// TSK-style address.
    pub meta_addr: Option<String>,
    /// FAT first cluster.
    pub first_cluster: Option<u64>,
    /// Modified, accessed, changed, created.
    pub times: [Option<i64>; 4],
}

/// A `carved_items` row.
#[derive(Debug, Clone)]
pub struct CarvedItem {
    /// Item id (assigned by the carve stage, in media order).
    pub id: i64,
    /// The evidence row.
    pub evidence_id: i64,
    /// The volume it lies in.
    pub volume_id: Option<i64>,
    /// `data` or `meta`.
    pub method: &'static str,
    /// Media offset of the header or record.
    pub offset: u64,
    /// Bytes carved (data) or of the record (meta).
    pub length: u64,
    /// Item type.
    pub type_name: String,
    /// `valid`, `invalid`, `truncated`, `unchecked`.
    pub validation: &'static str,
    /// File in the case channel.
    pub case_path: Option<String>,
    /// MD5 hex.
    pub md5: Option<String>,
    /// SHA-1 hex.
    pub sha1: Option<String>,
    /// SHA-256 hex.
    pub sha256: Option<String>,
    /// Entropy.
    pub entropy: Option<f64>,
    /// Notes.
    pub detail: Option<String>,
    /// `builtin` or a signature file.
    pub source: &'static str,
    /// Signature name.
    pub signature: Option<String>,
    /// Meta items' record fields.
    pub meta: Option<CarvedMeta>,
    /// Bytes of recovered content.
    pub content_length: Option<u64>,
    /// Where the content is on the media.
    pub extents: Option<Extents>,
}

/// One KFF match of an item in a hash set.
#[derive(Debug, Clone)]
pub struct KffHit {
    /// Set name.
    pub set: String,
    /// `known` or `notable`.
    pub category: &'static str,
    /// Matching digests, `kind:hex,...`.
    pub detail: String,
}

/// A `processing_errors` row.
#[derive(Debug, Clone)]
pub struct ProcessingError {
    /// The run.
    pub run_id: i64,
    /// The stage that recorded it.
    pub stage: String,
    /// `error`, `warning`, `finding`.
    pub severity: &'static str,
    /// What it points at.
    pub item: Option<(ItemKind, Option<i64>)>,
    /// Path or name to show.
    pub path: Option<String>,
    /// Damaged sector range.
    pub sectors: Option<(u64, u64)>,
    /// What happened.
    pub message: String,
}

/// A `stage_runs` row with its `channel_figures`.
#[derive(Debug, Clone)]
pub struct StageRunRow {
    /// Position in the run.
    pub seq: usize,
    /// Stage name.
    pub stage: String,
    /// `completed`, `failed`, `interrupted`.
    pub status: String,
    /// ISO 8601 UTC.
    pub started_at: String,
    /// Wall time.
    pub wall_ns: u64,
    /// CPU user time.
    pub cpu_user_ns: u64,
    /// CPU system time.
    pub cpu_system_ns: u64,
    /// Peak RSS.
    pub peak_rss_bytes: Option<u64>,
    /// Items processed.
    pub items: u64,
    /// Bytes processed.
    pub bytes: u64,
    /// Stage details as JSON.
    pub summary: String,
    /// Per-channel figures: channel name and counters.
    pub channels: Vec<(String, ChannelSnapshot)>,
}

/// Order of items by where they start on the media: `(first offset or
/// -1, id)`, the order stages read files in so reads sweep the disk.
pub type DiskKey = (i64, i64);

/// The first key, before every item.
pub const DISK_START: DiskKey = (i64::MIN, i64::MIN);

/// A file whose content a stage reads.
#[derive(Debug, Clone)]
pub struct FileContent {
    /// Its place in disk order.
    pub key: DiskKey,
    /// The file row.
    pub id: i64,
    /// Full path.
    pub path: String,
    /// Name.
    pub name: String,
    /// Logical size.
    pub size: u64,
    /// `files.kind`.
    pub kind: String,
    /// Where its content is; an error when the stored extents are malformed.
    pub content: Result<StoredContent, ExtentsError>,
}

/// A carved item whose content the index stage reads.
#[derive(Debug, Clone)]
pub struct CarvedContent {
    /// `(offset, id)`.
    pub key: DiskKey,
    /// Item id.
    pub id: i64,
    /// Media offset.
    pub offset: i64,
    /// Item type.
    pub type_name: String,
    /// `data` or `meta`.
    pub method: String,
    /// Runs on the media; an error when malformed.
    pub extents: Option<Result<Extents, ExtentsError>>,
    /// File in the case channel.
    pub case_path: Option<String>,
    /// Meta items' name.
    pub name: Option<String>,
}

/// A file's slack runs.
#[derive(Debug, Clone)]
pub struct FileSlack {
    /// The file row.
    pub id: i64,
    /// Full path.
    pub path: String,
    /// The runs; an error when malformed.
    pub slack: Result<Extents, ExtentsError>,
}

/// A volume row as stages read it.
#[derive(Debug, Clone)]
pub struct Volume {
    /// Row id.
    pub id: i64,
    /// Bytes on the media.
    pub offset: u64,
    /// Bytes on the media.
    pub length: u64,
    /// Whether caseload walked its file system.
    pub parsed: bool,
}

/// An item with the hashes KFF looks up.
#[derive(Debug, Clone)]
pub struct HashedItem {
    /// Row id.
    pub id: i64,
    /// What to show as its path.
    pub label: String,
    /// MD5, SHA-1, SHA-256 hex.
    pub hashes: [Option<String>; 3],
}

/// A file row with its volume, as exports list it.
#[derive(Debug, Clone)]
pub struct ListedFile {
    /// Row id.
    pub id: i64,
    /// Volume slot.
    pub volume_slot: i64,
    /// Volume offset.
    pub volume_offset: i64,
    /// File-system type.
    pub fs_type: Option<String>,
    /// Metadata address.
    pub meta_addr: Option<String>,
    /// Full path.
    pub path: String,
    /// Name.
    pub name: String,
    /// 8.3 name.
    pub short_name: Option<String>,
    /// `files.kind`.
    pub kind: String,
    /// Logical size.
    pub size: i64,
    /// Allocated.
    pub allocated: bool,
    /// `files.recovery`.
    pub recovery: String,
    /// Attribute bits.
    pub attributes: Option<i64>,
    /// Permission bits, user id and group id (cases of schema version 4
    /// on).
    pub owner: Option<[i64; 3]>,
    /// Accessed, modified, changed, created.
    pub times: [Option<i64>; 4],
    /// Stored extents text.
    pub extents: Option<String>,
    /// MD5 hex.
    pub md5: Option<String>,
    /// SHA-1 hex.
    pub sha1: Option<String>,
    /// SHA-256 hex.
    pub sha256: Option<String>,
    /// Signature type.
    pub signature: Option<String>,
    /// Extension mismatch.
    pub extension_mismatch: Option<bool>,
    /// Entropy.
    pub entropy: Option<f64>,
    /// Duplicate group.
    pub duplicate_group: Option<i64>,
    /// KFF verdict.
    pub kff: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use caseload_fs::Run;

    #[test]
    fn stored_content_round_trips_through_its_columns() {
        let runs = Extents(vec![Run::Data {
            offset: 1024,
            len: 4096,
        }]);
        for c in [
            StoredContent::None,
            StoredContent::Resident(b"abc".to_vec()),
            StoredContent::Runs(runs.clone()),
            StoredContent::Compressed {
                runs: runs.clone(),
                unit: 65536,
                size: 100_000,
                initialized: 99_000,
            },
            StoredContent::Decmpfs {
                runs: runs.clone(),
                codec: caseload_fs::ForkCodec::Lzvn,
                size: 1 << 40,
            },
            StoredContent::Encoded {
                encoding: "ntfs-encrypted".into(),
                runs: runs.clone(),
            },
        ] {
            let (e, enc, first, res) = c.columns();
            assert_eq!(first, c.runs().and_then(Extents::first_offset));
            assert_eq!(StoredContent::from_columns(e, enc, res).unwrap(), c);
        }
        assert!(StoredContent::from_columns(Some("[[1,".into()), None, None).is_err());
        // A malformed compression note is kept as an encoding, not decoded.
        assert!(matches!(
            StoredContent::from_columns(Some("[[1,2]]".into()), Some("ntfs-lznt1:x".into()), None),
            Ok(StoredContent::Encoded { .. })
        ));
        for odd in [
            "apfs-decmpfs:lzfse:10",
            "apfs-decmpfs:zlib:",
            "apfs-decmpfs:zlib",
        ] {
            assert!(matches!(
                StoredContent::from_columns(Some("[[1,2]]".into()), Some(odd.into()), None),
                Ok(StoredContent::Encoded { .. })
            ));
        }
    }
}
