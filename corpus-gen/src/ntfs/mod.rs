//! NTFS volumes, written natively and streamed like the FAT ones.
//!
//! The planner's allocation groups are kept; only the file system's own
//! structures differ. The volume is laid out as Windows leaves a used
//! system disk:
//!
//! - `$Boot` at cluster 0, then the *head*: the first fragment of `$MFT`
//!   (NTFS's own records and the skeleton folders), `$MFTMirr`, `$LogFile`
//!   (clean: never written, all `0xFF` as `mkntfs` leaves it), `$AttrDef`,
//!   `$Bitmap`, `$UpCase`, `$Secure:$SDS` and `$MFT:$BITMAP`;
//! - the skeleton region: the `$I30` index blocks of the Windows folders;
//! - the groups, each opening with its own `$MFT` fragment (so the MFT is
//!   fragmented as on a disk that grew) followed by directory index blocks
//!   and file content where the planner put them;
//! - the backup boot sector in the partition's last sector.
//!
//! Record numbers follow from the group alone: group `k`'s records start at
//! `4 x` (the clusters of every earlier `$MFT` fragment), its group folders
//! first, then its other directories, then its files, so the skeleton can
//! list the group folders of every group without planning them.

pub mod index;
pub mod layout;
pub mod lznt1;
pub mod record;
pub mod system;
pub mod write;

/// Bytes per sector.
pub const SECTOR: usize = 512;
/// Bytes per cluster (Windows' default for volumes up to 16 TiB).
pub const CLUSTER: usize = 4096;
/// Bytes per MFT record.
pub const RECORD_BYTES: usize = 1024;
/// Bytes per index block.
pub const INDEX_BLOCK: usize = 4096;
/// MFT records per cluster.
pub const RECORDS_PER_CLUSTER: u64 = (CLUSTER / RECORD_BYTES) as u64;
/// Records of the head fragment: NTFS's own (0-26) and the skeleton
/// folders, with room to spare.
pub const HEAD_RECORDS: u64 = 64;
/// Record of the first skeleton folder below the root.
pub const FIRST_SKELETON_RECORD: u64 = 27;
/// Largest file stored resident (inside its MFT record): what always fits
/// next to a record's other attributes with the longest names the planner
/// makes.
pub const RESIDENT_MAX: u64 = 512;
/// Most allocation groups (each adds a run to `$MFT`'s run list, which
/// must fit in record 0).
pub const MAX_GROUPS: u64 = 64;
/// Smallest volume: room for the head and a useful data area.
pub const MIN_VOLUME: u64 = 64 << 20;
/// Smallest disk holding an NTFS corpus: the volume plus the partition
/// table's 1 MiB alignment and the tail.
pub const MIN_DISK: u64 = MIN_VOLUME + (4 << 20);

/// Well-known record numbers.
pub mod rec {
    /// `$MFT`.
    pub const MFT: u64 = 0;
    /// `$MFTMirr`.
    pub const MFT_MIRR: u64 = 1;
    /// `$LogFile`.
    pub const LOGFILE: u64 = 2;
    /// `$Volume`.
    pub const VOLUME: u64 = 3;
    /// `$AttrDef`.
    pub const ATTRDEF: u64 = 4;
    /// The root directory.
    pub const ROOT: u64 = 5;
    /// `$Bitmap`.
    pub const BITMAP: u64 = 6;
    /// `$Boot`.
    pub const BOOT: u64 = 7;
    /// `$BadClus`.
    pub const BADCLUS: u64 = 8;
    /// `$Secure`.
    pub const SECURE: u64 = 9;
    /// `$UpCase`.
    pub const UPCASE: u64 = 10;
    /// `$Extend`.
    pub const EXTEND: u64 = 11;
    /// `$Extend\$Quota`.
    pub const QUOTA: u64 = 24;
    /// `$Extend\$ObjId`.
    pub const OBJID: u64 = 25;
    /// `$Extend\$Reparse`.
    pub const REPARSE: u64 = 26;
}

/// Where NTFS's own files sit: cluster numbers (LCNs) of the head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Clusters in the volume.
    pub total_clusters: u64,
    /// `$MFT`'s first fragment.
    pub mft: u64,
    /// `$MFTMirr` (one cluster: records 0-3).
    pub mirror: u64,
    /// `$LogFile`.
    pub logfile: u64,
    /// `$LogFile` clusters.
    pub logfile_clusters: u64,
    /// `$AttrDef` (one cluster).
    pub attrdef: u64,
    /// `$Bitmap`.
    pub bitmap: u64,
    /// `$Bitmap` clusters.
    pub bitmap_clusters: u64,
    /// `$UpCase`.
    pub upcase: u64,
    /// `$Secure:$SDS`.
    pub sds: u64,
    /// `$MFT:$BITMAP`.
    pub mft_bitmap: u64,
    /// `$MFT:$BITMAP` clusters (room for one bit per record the volume
    /// could ever hold: four per cluster).
    pub mft_bitmap_clusters: u64,
    /// First cluster after the head: the planner's cluster 2.
    pub data: u64,
}

/// Clusters `bytes` take.
pub fn clusters_for(bytes: u64) -> u64 {
    bytes.div_ceil(CLUSTER as u64)
}

/// `$LogFile` size as Windows picks it: about 1/256 of the volume, at
/// least 2 MiB, at most 64 MiB.
fn logfile_bytes(volume: u64) -> u64 {
    (volume / 256).clamp(2 << 20, 64 << 20) / CLUSTER as u64 * CLUSTER as u64
}

impl Head {
    /// The head of a volume of `total_clusters`.
    pub fn new(total_clusters: u64) -> Head {
        let boot = clusters_for(8192);
        let mft = boot;
        let mirror = mft + HEAD_RECORDS / RECORDS_PER_CLUSTER;
        let logfile = mirror + 1;
        let logfile_clusters = clusters_for(logfile_bytes(total_clusters * CLUSTER as u64));
        let attrdef = logfile + logfile_clusters;
        let bitmap = attrdef + 1;
        let bitmap_clusters = clusters_for(total_clusters.div_ceil(64) * 8);
        let upcase = bitmap + bitmap_clusters;
        let sds = upcase + clusters_for(system::UPCASE_BYTES as u64);
        let mft_bitmap = sds + clusters_for(2 * system::SDS_BLOCK);
        let mft_bitmap_clusters =
            clusters_for((total_clusters * RECORDS_PER_CLUSTER).div_ceil(64) * 8);
        let data = mft_bitmap + mft_bitmap_clusters;
        Head {
            total_clusters,
            mft,
            mirror,
            logfile,
            logfile_clusters,
            attrdef,
            bitmap,
            bitmap_clusters,
            upcase,
            sds,
            mft_bitmap,
            mft_bitmap_clusters,
            data,
        }
    }
}

/// NTFS time (100 ns since 1601, UTC) of a planner stamp (seconds since
/// 1980 and hundredths; NTFS keeps UTC and the manifest gives it as such).
pub fn filetime(s: crate::names::Stamp) -> u64 {
    /// Seconds from 1601-01-01 to 1980-01-01.
    const TO_1980: u64 = 11_960_035_200;
    (s.secs + TO_1980) * 10_000_000 + s.centis as u64 * 100_000
}

/// NTFS times of planner times: created, modified, MFT changed (as
/// modified), accessed.
pub fn nt_times(t: &crate::names::Times) -> record::NtTimes {
    record::NtTimes {
        created: filetime(t.created),
        modified: filetime(t.modified),
        changed: filetime(t.modified),
        accessed: filetime(t.accessed),
    }
}

/// Bytes a directory record has for its `$I30` attributes, given the
/// lengths of its `$FILE_NAME` values.
#[derive(Debug, Clone, Copy)]
pub struct DirRooms {
    /// Room for a small index living wholly in the root.
    pub small: usize,
    /// Room left after the standard information and the names.
    room: usize,
}

impl DirRooms {
    /// Rooms of a directory record whose names have values of these lengths.
    pub fn new(name_value_lens: &[usize]) -> DirRooms {
        use record::RecordBuf;
        let mut room = RECORD_BYTES - 0x38 - 8 - RecordBuf::resident_len("", 72);
        for l in name_value_lens {
            room = room.saturating_sub(RecordBuf::resident_len("", *l));
        }
        DirRooms {
            small: room.saturating_sub(Self::root_attr()),
            room,
        }
    }

    fn root_attr() -> usize {
        record::RecordBuf::resident_len("$I30", 0) + index::ROOT_FIXED
    }

    /// Room for a large index's root entries when it has `blocks` blocks:
    /// the allocation is one contiguous run (at most 18 bytes of mapping
    /// pairs with the terminator) and the bitmap grows with the blocks.
    pub fn large(&self, blocks: usize) -> usize {
        use record::RecordBuf;
        self.room.saturating_sub(
            Self::root_attr()
                + RecordBuf::non_resident_len("$I30", 24)
                + RecordBuf::resident_len("$I30", index::bitmap_len(blocks)),
        )
    }
}
