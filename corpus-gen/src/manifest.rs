//! The manifest: ground truth of a corpus, versioned and documented in
//! `docs/manifest.md`. These types are public so other crates' tests can
//! load a manifest (`serde_json::from_reader`) and compare against it.

use crate::content::{Attachment, Kind};
use crate::fat::FatType;
use crate::geometry::TableKind;
use crate::profile::Profile;
use serde::{Deserialize, Serialize};

/// Value of [`Manifest::schema`].
pub const SCHEMA: &str = "caseload-corpus-manifest";
/// Current schema version. Bumped on any incompatible change.
pub const VERSION: u32 = 1;

/// The whole manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Schema version ([`VERSION`]).
    pub version: u32,
    /// What made the corpus.
    pub generator: Generator,
    /// The options that determine the bytes (same options, same corpus).
    pub options: OptionsRecord,
    /// Partition table.
    pub partition_table: PartitionTable,
    /// The FAT file system.
    pub filesystem: FileSystem,
    /// Where the hash-set files are and what they hold.
    pub hash_sets: HashSets,
    /// Every directory and file: live, deleted, and those inside deleted
    /// directories. Residue (no entry) is under `carvable`.
    pub files: Vec<FileEntry>,
    /// Intact content a carver can find: residue in free space and intact
    /// deleted files of carvable types; plus fragmented deleted files of
    /// carvable types marked `contiguous: false`.
    pub carvable: Vec<Carvable>,
    /// Free-space areas outside any content: zeroed or random.
    pub unallocated: Vec<Area>,
    /// The raw image.
    pub image: ImageInfo,
    /// Counts and shares.
    pub summary: Summary,
}

/// Generator identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generator {
    /// Crate name.
    pub name: String,
    /// Crate version.
    pub version: String,
}

/// The options that shaped the corpus (thread count is absent on purpose:
/// it never changes the output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptionsRecord {
    /// Seed.
    pub seed: u64,
    /// Requested disk size in bytes.
    pub requested_size: u64,
    /// Profile and its knobs as used.
    pub profile: Profile,
    /// Requested partition table (`null` = automatic).
    pub partition_table: Option<TableKind>,
    /// Requested FAT type (`null` = automatic).
    pub fat: Option<FatType>,
    /// Requested file system when not FAT (`NTFS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<FsType>,
    /// Decoy entries per hash set.
    pub decoys: u64,
}

/// Partition table facts, as `mmls` reports them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionTable {
    /// `mbr` or `gpt`.
    pub kind: TableKind,
    /// Why this kind: `requested` or `automatic` (GPT above 2 TiB).
    pub chosen: String,
    /// MBR disk signature (hex).
    pub disk_signature: String,
    /// GPT disk GUID (GPT only).
    pub disk_guid: Option<String>,
    /// The partitions (one).
    pub partitions: Vec<Partition>,
}

/// One partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// Start in 512-byte sectors (what `fls -o` takes).
    pub start_sector: u64,
    /// Length in 512-byte sectors.
    pub sectors: u64,
    /// Start in bytes.
    pub offset: u64,
    /// MBR type byte (hex, e.g. `0x0c`) or GPT type GUID.
    pub type_id: String,
    /// GPT partition GUID (GPT only).
    pub guid: Option<String>,
}

/// File-system type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsType {
    /// FAT12.
    #[serde(rename = "FAT12")]
    Fat12,
    /// FAT16.
    #[serde(rename = "FAT16")]
    Fat16,
    /// FAT32.
    #[serde(rename = "FAT32")]
    Fat32,
    /// NTFS 3.1.
    #[serde(rename = "NTFS")]
    Ntfs,
    /// exFAT 1.00.
    #[serde(rename = "exFAT")]
    Exfat,
    /// APFS (one container, one volume).
    #[serde(rename = "APFS")]
    Apfs,
    /// ext4.
    #[serde(rename = "ext4")]
    Ext4,
}

impl FsType {
    /// Name as `fsstat` and the manifest print it.
    pub fn name(self) -> &'static str {
        match self {
            FsType::Fat12 => "FAT12",
            FsType::Fat16 => "FAT16",
            FsType::Fat32 => "FAT32",
            FsType::Ntfs => "NTFS",
            FsType::Exfat => "exFAT",
            FsType::Apfs => "APFS",
            FsType::Ext4 => "ext4",
        }
    }
}

impl From<FatType> for FsType {
    fn from(f: FatType) -> Self {
        match f {
            FatType::Fat12 => FsType::Fat12,
            FatType::Fat16 => FsType::Fat16,
            FatType::Fat32 => FsType::Fat32,
        }
    }
}

/// NTFS facts (NTFS volumes only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NtfsFacts {
    /// First cluster of `$MFT`.
    pub mft_cluster: u64,
    /// First cluster of `$MFTMirr`.
    pub mft_mirror_cluster: u64,
    /// Bytes per MFT record.
    pub record_size: u64,
    /// Bytes per index block.
    pub index_block_size: u64,
    /// Record slots in `$MFT` (in use or free).
    pub mft_records: u64,
    /// Runs (fragments) of `$MFT`'s data.
    pub mft_fragments: u64,
    /// Clusters in the volume (`$Boot` at cluster 0).
    pub total_clusters: u64,
    /// Volume serial number (hex, 64-bit).
    pub serial: String,
}

/// File-system geometry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSystem {
    /// FAT12, FAT16, FAT32 or NTFS.
    #[serde(rename = "type")]
    pub fs_type: FsType,
    /// Byte offset of the boot sector on the disk.
    pub offset: u64,
    /// Logical bytes per sector.
    pub bytes_per_sector: u32,
    /// Sectors per cluster.
    pub sectors_per_cluster: u32,
    /// Cluster size in bytes.
    pub cluster_size: u64,
    /// Reserved sectors.
    pub reserved_sectors: u32,
    /// Sectors per FAT.
    pub fat_sectors: u32,
    /// Number of FATs.
    pub fats: u32,
    /// Root entries (FAT12/16).
    pub root_entries: u32,
    /// Total logical sectors.
    pub total_sectors: u64,
    /// Data clusters.
    pub clusters: u32,
    /// Byte offset of cluster 2 on the disk.
    pub data_offset: u64,
    /// Clusters free in the FAT.
    pub free_clusters: u64,
    /// Volume serial number (hex).
    pub volume_id: String,
    /// Allocation group size in clusters (generator internals, useful for
    /// locating content).
    pub group_clusters: u32,
    /// Number of allocation groups.
    pub groups: u32,
    /// NTFS layout (NTFS only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntfs: Option<NtfsFacts>,
    /// exFAT layout (exFAT only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exfat: Option<ExfatFacts>,
    /// APFS only: the container and volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apfs: Option<ApfsFacts>,
    /// ext4 layout (ext4 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ext4: Option<Ext4Facts>,
}

/// Where an APFS container keeps its objects, and what its volume holds.
/// Block numbers count 4 KiB blocks from the container's start (the
/// partition's); every file's and folder's `inode` is its APFS object id
/// (the file-system tree's inode number, which TSK and libfsapfs show).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApfsFacts {
    /// Blocks in the container.
    pub container_blocks: u64,
    /// Block of the volume superblock (`fls -B` takes it).
    pub volume_block: u64,
    /// The volume's name.
    pub volume_name: String,
    /// Block of the planner's cluster 2 (`first_cluster` values count
    /// clusters from here, as on the other file systems).
    pub data_block: u64,
    /// Free blocks in the container (the space manager's count).
    pub free_blocks: u64,
    /// Case-sensitive (the volume hashes names without case folding).
    pub case_sensitive: bool,
    /// Deleted files and folders: APFS removes their records, so none is
    /// listed by name (`deleted` entries here say what was there, for
    /// carving); their blocks are free and hold their content.
    pub deleted_listed: bool,
}

/// What an ext4 volume adds (blocks from the volume's start; the
/// manifest's `first_cluster` values are ext4 block numbers and its
/// `inode` values ext4 inode numbers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ext4Facts {
    /// Blocks in the file system.
    pub blocks: u64,
    /// Block groups.
    pub groups: u32,
    /// Inodes per group.
    pub inodes_per_group: u32,
    /// Inodes in the file system.
    pub inodes: u64,
    /// Blocks of the head (metadata, lost+found, journal) before the
    /// first file's.
    pub head_blocks: u64,
    /// First block of the journal.
    pub journal_block: u64,
    /// Blocks of the journal.
    pub journal_blocks: u32,
    /// Reserved GDT blocks.
    pub reserved_gdt_blocks: u32,
    /// The file system's UUID.
    pub uuid: String,
}

/// What an exFAT volume adds: its regions as the boot sector states them
/// (sectors from the volume's start; clusters in exFAT's numbering, where
/// the manifest's `first_cluster` values are too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExfatFacts {
    /// First sector of the FAT.
    pub fat_offset: u32,
    /// Sectors of the FAT.
    pub fat_length: u32,
    /// First sector of the cluster heap (cluster 2).
    pub cluster_heap_offset: u32,
    /// Clusters in the heap.
    pub cluster_count: u32,
    /// First cluster of the allocation bitmap.
    pub bitmap_cluster: u32,
    /// First cluster of the up-case table.
    pub upcase_cluster: u32,
    /// First cluster of the root directory.
    pub root_cluster: u32,
    /// The volume label.
    pub label: String,
}

/// Hash-set files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HashSets {
    /// Known set, NSRL RDS 2.x `NSRLFile.txt` form (file name in the
    /// output directory).
    pub nsrl_rds2: String,
    /// Known set as an RDS v3-compatible SQLite database.
    pub rds3_sqlite: String,
    /// Notable set, md5sum style.
    pub notable_md5: String,
    /// Notable set, sha1sum style.
    pub notable_sha1: String,
    /// Decoy entries in each set.
    pub decoys: u64,
    /// Planted known entries (distinct hashes of known files).
    pub known_planted: u64,
    /// Planted notable entries (distinct hashes of notable files).
    pub notable_planted: u64,
}

/// Directory or file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (ext4): `link_target` is what it points at; its
    /// size and hashes are the target text's (what a reader of its
    /// content gets, and caseload hashes).
    Symlink,
}

/// A byte range on the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    /// Byte offset from the start of the disk image.
    pub offset: u64,
    /// Length in bytes (whole clusters).
    pub length: u64,
}

/// One occurrence of a planted keyword in a file's raw bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occurrence {
    /// Offset within the file.
    pub file_offset: u64,
    /// Offset on the disk when the token lies in one run (`null` when it is
    /// split across fragments).
    pub disk_offset: Option<u64>,
    /// The token crosses a cluster boundary of the file.
    pub crosses_cluster_boundary: bool,
    /// The token is split between two fragments (not contiguous on disk).
    pub crosses_fragment_boundary: bool,
    /// Part of the token's bytes were overwritten by another file.
    pub overwritten: bool,
}

/// A planted keyword in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Keyword {
    /// The token (never produced by the text model).
    pub token: String,
    /// Occurrences in the raw bytes; empty when the token is only inside
    /// compressed or encoded data (DOCX/XLSX/ZIP parts), where text
    /// extraction finds it but a raw search does not.
    pub raw: Vec<Occurrence>,
}

/// A directory or file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Path from the root with the real (long) names, `/`-separated.
    pub path: String,
    /// The path as `fls -r -p` prints it (deleted 8.3-only names show `_`
    /// for their first character).
    pub tsk_path: String,
    /// Directory or file.
    pub kind: EntryKind,
    /// Long name (or the 8.3 name when there is no long name).
    pub name: String,
    /// Stored 8.3 name, e.g. `QUARTE~1.DOC`.
    pub short_name: String,
    /// Whether a long-name (LFN) record exists.
    pub has_long_name: bool,
    /// Size in bytes (0 for directories).
    pub size: u64,
    /// Allocated (not deleted).
    pub allocated: bool,
    /// Entry marked deleted.
    pub deleted: bool,
    /// Inside a deleted directory.
    pub in_deleted_dir: bool,
    /// Creation time (local, ISO 8601, hundredths when non-zero).
    pub created: String,
    /// Last modification (local, 2 s resolution).
    pub modified: String,
    /// Last access date.
    pub accessed: String,
    /// First cluster as the entry records it (0 for empty files).
    pub first_cluster: u32,
    /// Byte extents on the disk, in file order (whole clusters; for a
    /// deleted file, where its clusters were).
    pub extents: Vec<Extent>,
    /// Content type (files only).
    #[serde(rename = "type")]
    pub content_type: Option<Kind>,
    /// MIME type (files only).
    pub mime: Option<String>,
    /// MD5 of the content (files only).
    pub md5: Option<String>,
    /// SHA-1 of the content.
    pub sha1: Option<String>,
    /// SHA-256 of the content.
    pub sha256: Option<String>,
    /// Planted keywords.
    pub keywords: Vec<Keyword>,
    /// Hash is in the known set.
    pub known: bool,
    /// Hash is in the notable set.
    pub notable: bool,
    /// Planted duplicate group (files sharing it have identical content).
    pub duplicate_group: Option<u64>,
    /// Stored in more than one run.
    pub fragmented: bool,
    /// Some clusters were reused by another file (deleted files only).
    pub overwritten: bool,
    /// Content is recoverable exactly from the disk: always for allocated
    /// files; for deleted ones when contiguous and not overwritten, so that
    /// TSK-style recovery of consecutive clusters returns it.
    pub intact: bool,
    /// Bytes of non-zero slack after the end of the file in its last
    /// cluster.
    pub slack_bytes: u64,
    /// Decoded attachments of e-mail content.
    pub attachments: Vec<Attachment>,
    /// Members a suite lists when it expands this ZIP-form file (an
    /// archive's entries, a document's parts; attachments' members are
    /// with their attachment).
    #[serde(default, skip_serializing_if = "crate::content::is_zero")]
    pub members: u64,
    /// Allocation group.
    pub group: u32,
    /// MFT record number (NTFS only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mft_record: Option<u64>,
    /// Inode number as The Sleuth Kit gives it (exFAT only: the position
    /// of the File entry, in 32-byte entries from the cluster heap's start,
    /// plus 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inode: Option<u64>,
    /// MFT record sequence number (NTFS only; deleting bumps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u16>,
    /// Content stored inside the MFT record (NTFS small files).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resident: bool,
    /// Compressed: NTFS LZNT1 (`extents` hold the compressed stream, whole
    /// clusters per 64 KiB unit, the rest of each unit sparse) or APFS
    /// decmpfs (`extents` hold the resource fork); `size`, the hashes and
    /// keyword file offsets are of the decompressed bytes, and keywords
    /// have no disk offset.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compressed: bool,
    /// NTFS sparse: `extents` hold the data units only (holes have no
    /// clusters and read as zeros), hashes are of the content with its
    /// holes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sparse: bool,
    /// NTFS alternate data stream: this entry is the named stream of the
    /// file at `path` without the `:NAME` suffix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// A symbolic link's target, as stored (ext4: relative, a sibling's
    /// name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
    /// A hard link (ext4): this entry is another name of the file at this
    /// path (same inode, content, extents and hashes; the inode's link
    /// count is the number of its names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_link_of: Option<String>,
}

/// Where a carvable item comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CarveSource {
    /// An older file's content left in free space, with no entry.
    Residue,
    /// A deleted file's content.
    Deleted,
}

/// Content a carver should (or, when `contiguous` is false, cannot) find
/// whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Carvable {
    /// Byte offset on the disk of the first byte.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
    /// Content type.
    #[serde(rename = "type")]
    pub content_type: Kind,
    /// MIME type.
    pub mime: String,
    /// MD5.
    pub md5: String,
    /// SHA-1.
    pub sha1: String,
    /// SHA-256.
    pub sha256: String,
    /// Planted keywords, with their occurrences (`file_offset` counts from
    /// the item's first byte).
    pub keywords: Vec<Keyword>,
    /// Residue or deleted file.
    pub source: CarveSource,
    /// Path of the deleted file (`null` for residue).
    pub path: Option<String>,
    /// Whole and contiguous at `offset` (false: fragmented, so carving
    /// from the header does not return the file).
    pub contiguous: bool,
    /// Further runs in file order when not contiguous.
    pub extents: Vec<Extent>,
}

/// A free-space area not holding any content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Area {
    /// Byte offset on the disk.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
    /// `zero` or `random`.
    pub fill: String,
}

/// The raw image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageInfo {
    /// File name in the output directory (`null` when the bytes were
    /// discarded with the hidden benchmarking option).
    pub file: Option<String>,
    /// Size in bytes.
    pub size: u64,
    /// Sector size of the partition table.
    pub sector_size: u64,
    /// MD5 of the image.
    pub md5: String,
    /// SHA-1 of the image (absent when not asked for with `--digests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    /// SHA-256 of the image (absent unless asked for with `--digests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Counts and shares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Live directories (skeleton included, root excluded).
    pub directories: u64,
    /// Deleted directories.
    pub deleted_directories: u64,
    /// Live files.
    pub files: u64,
    /// Deleted files (including those in deleted directories).
    pub deleted_files: u64,
    /// Deleted files that are intact.
    pub deleted_intact: u64,
    /// Fragmented files (live or deleted).
    pub fragmented_files: u64,
    /// Residue items in free space.
    pub residue_items: u64,
    /// Entries in `carvable`.
    pub carvable_items: u64,
    /// Distinct planted keyword tokens.
    pub keywords: u64,
    /// Files in the known set.
    pub known_files: u64,
    /// Files in the notable set.
    pub notable_files: u64,
    /// Planted duplicate groups.
    pub duplicate_groups: u64,
    /// Bytes of content written (files, deleted files and residue).
    pub content_bytes: u64,
    /// Share of content bytes of incompressible kinds.
    pub incompressible_share: f64,
    /// Bytes of random free space.
    pub random_free_bytes: u64,
    /// NTFS alternate data streams (entries with `stream`).
    #[serde(default)]
    pub alternate_streams: u64,
    /// Files stored compressed (NTFS LZNT1, APFS decmpfs).
    #[serde(default)]
    pub compressed_files: u64,
    /// NTFS sparse files.
    #[serde(default)]
    pub sparse_files: u64,
    /// Files of the logical plan that did not fit their group's clusters
    /// and were left out (a high `fill` on a file system whose clusters
    /// are larger than the plan's 4 KiB units, or a tiny group); present
    /// when not 0.
    #[serde(default, skip_serializing_if = "crate::content::is_zero")]
    pub dropped_files: u64,
    /// Symbolic links (not counted in `files`); present when not 0.
    #[serde(default, skip_serializing_if = "crate::content::is_zero")]
    pub symlinks: u64,
    /// Second names of files (hard links; not counted in `files`);
    /// present when not 0.
    #[serde(default, skip_serializing_if = "crate::content::is_zero")]
    pub hard_links: u64,
    /// E-mail attachments of all files, live and deleted (with the
    /// messages, the compound items a suite expands).
    #[serde(default)]
    pub attachments: u64,
    /// E-mail messages of all files, live and deleted: one per `.eml`,
    /// those a mailbox holds.
    #[serde(default)]
    pub messages: u64,
    /// Members of ZIP-form files and attachments, live and deleted (an
    /// archive's entries, a document's parts).
    #[serde(default)]
    pub members: u64,
    /// What the batches hold per GiB of the space they use: the same at
    /// any disk size (the skeleton's folders and own files, a fixed part
    /// of every disk, are left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_gib_used: Option<PerGib>,
}

/// Counts per GiB (2^30 bytes) of used space, over the batches' content.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PerGib {
    /// The space they are per: clusters of the groups in use (live files
    /// and folders, `$MFT` fragments and index blocks on NTFS), less those
    /// of the skeleton's own files, in bytes.
    pub used_bytes: u64,
    /// Live files (alternate streams not counted).
    pub files: f64,
    /// Live folders.
    pub folders: f64,
    /// Deleted files.
    pub deleted_files: f64,
    /// Residue items in free space.
    pub residue_items: f64,
    /// E-mail messages (live and deleted files and residue).
    pub messages: f64,
    /// E-mail attachments (live and deleted files and residue).
    pub attachments: f64,
    /// Members of ZIP-form files and attachments (live and deleted files and residue).
    #[serde(default)]
    pub members: f64,
    /// Bytes of the text kinds (text, log, HTML, e-mail, mailboxes), live
    /// and deleted.
    pub text_bytes: f64,
}
