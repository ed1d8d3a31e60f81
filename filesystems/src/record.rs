//! The file record a walk yields, one per name (and per NTFS stream).

use std::fmt;
use std::sync::Arc;

use crate::error::ProcessingError;
use crate::name::escape_component;

/// A point in time as seconds and nanoseconds since 1970-01-01T00:00:00.
///
/// NTFS stores UTC. FAT stores a zone-less local wall-clock time; it is
/// converted exactly as The Sleuth Kit does with `TZ=UTC`, i.e. the wall
/// clock is read as if it were UTC (see [`TimeBase`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Whole seconds since the Unix epoch (negative before 1970).
    pub secs: i64,
    /// Nanoseconds within the second.
    pub nanos: u32,
}

/// How a file system's timestamps relate to UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeBase {
    /// Timestamps are UTC (NTFS).
    Utc,
    /// Timestamps are the local wall clock of whatever machine wrote them, in
    /// an unknown zone (FAT); [`Timestamp`] holds that wall clock read as UTC.
    LocalWallClock,
}

/// The four classic timestamps. `None` where the file system has no such
/// time (FAT has no change time) or stores an invalid one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Times {
    /// Content last modified.
    pub modified: Option<Timestamp>,
    /// Last accessed (FAT: a date only, at midnight).
    pub accessed: Option<Timestamp>,
    /// Metadata last changed (NTFS: MFT record modified).
    pub changed: Option<Timestamp>,
    /// Created.
    pub created: Option<Timestamp>,
}

/// TSK-style metadata address: FAT directory-entry number or NTFS MFT
/// record number, with the NTFS attribute type and id for streams
/// (`32-128-6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MetaAddr {
    /// Inode number (FAT: derived from the directory entry's position, as
    /// TSK numbers them; NTFS: MFT record number).
    pub inode: u64,
    /// NTFS attribute type and id (instance), when the record is a stream.
    pub attr: Option<(u32, u16)>,
}

impl fmt::Display for MetaAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.attr {
            Some((ty, id)) => write!(f, "{}-{ty}-{id}", self.inode),
            None => write!(f, "{}", self.inode),
        }
    }
}

/// What a record names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// A regular file or an NTFS stream of one.
    File,
    /// A directory.
    Directory,
    /// A FAT volume-label directory entry (it can own clusters).
    VolumeLabel,
    /// A virtual file TSK also lists (`$MBR`, `$FAT1`, `$FAT2`): file-system
    /// structures exposed as files.
    Virtual,
    /// A virtual directory (`$OrphanFiles`).
    VirtualDirectory,
}

/// One piece of a file's content, in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Run {
    /// `len` bytes stored at absolute byte `offset` on the source.
    Data {
        /// Absolute byte offset on the source (disk image), not the partition.
        offset: u64,
        /// Length in bytes.
        len: u64,
    },
    /// `len` bytes that read as zeros and are stored nowhere: an NTFS sparse
    /// hole, or the part of a stream past its valid-data (initialized) length.
    Zeros {
        /// Length in bytes.
        len: u64,
    },
}

impl Run {
    /// Length of the run in bytes.
    pub fn len(&self) -> u64 {
        match *self {
            Run::Data { len, .. } | Run::Zeros { len } => len,
        }
    }

    /// Whether the run is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A byte range on the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Extent {
    /// Absolute byte offset on the source.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Where a record's content is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Content {
    /// No content (empty file, directory without data, virtual directory).
    #[default]
    None,
    /// Content stored inside the metadata itself (NTFS resident data): the
    /// bytes themselves.
    Resident(Vec<u8>),
    /// Content stored in runs, in file order, clipped to the file size.
    Runs(Vec<Run>),
    /// NTFS-compressed content: `runs` (in file order, sparse parts as
    /// zero runs) hold compression units of `unit` bytes, each stored raw,
    /// LZNT1-compressed (stored clusters followed by sparse ones) or sparse.
    /// [`crate::ContentReader`] decodes them; the extents are the stored
    /// (compressed) bytes.
    Compressed {
        /// The stored runs up to the allocated size.
        runs: Vec<Run>,
        /// Bytes per compression unit.
        unit: u64,
        /// Decoded size of the stream.
        size: u64,
        /// Valid-data length: decoded bytes past it read as zeros.
        initialized: u64,
    },
    /// APFS compression with the data in the resource fork (decmpfs types
    /// 4 and 8): `runs` (in fork order, clipped to the fork's length) hold
    /// the fork's stored bytes, a table of blocks each decoding to 64 KiB
    /// (the last to what is left). [`crate::ContentReader`] decodes the
    /// blocks a read covers, one at a time; the extents are the stored
    /// (compressed) bytes.
    Decmpfs {
        /// The resource fork's runs.
        runs: Vec<Run>,
        /// How its blocks are compressed.
        codec: ForkCodec,
        /// Decoded size (the decmpfs header's).
        size: u64,
    },
    /// Runs holding content in a form this crate does not decode (NTFS
    /// EFS-encrypted streams). Reading them gives the stored bytes, not the
    /// file's bytes.
    Encoded {
        /// Why the bytes are not the file's content.
        encoding: Encoding,
        /// The stored runs, in file order, up to the allocated size.
        runs: Vec<Run>,
    },
}

/// Storage forms whose bytes are not the file's plain content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// NTFS compression with a unit size Windows does not write (units of
    /// other than 2^1..=2^8 clusters, or clusters over 4 KiB); ordinary
    /// compressed streams are [`Content::Compressed`].
    NtfsCompressed,
    /// NTFS EFS encryption.
    NtfsEncrypted,
    /// APFS compression (`com.apple.decmpfs`) not decoded: a type TSK
    /// does not read, inline data that does not decode or decodes to more
    /// than the volume's decode limit, or a resource fork that is missing.
    /// No runs (inline data is in the attribute).
    ApfsCompressed,
}

/// How the blocks of an APFS resource fork are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForkCodec {
    /// zlib (decmpfs type 4); a block whose first byte's low nibble is
    /// 0xF is stored after that byte.
    Zlib,
    /// LZVN (decmpfs type 8); a block whose first byte is 0x06 is stored
    /// after that byte.
    Lzvn,
}

impl ForkCodec {
    /// The codec of decmpfs compression type `kind`, if it keeps its data
    /// in the resource fork.
    pub fn of_type(kind: u32) -> Option<ForkCodec> {
        match kind {
            4 => Some(ForkCodec::Zlib),
            8 => Some(ForkCodec::Lzvn),
            _ => None,
        }
    }

    /// Its name (`zlib`, `lzvn`), as stored in a case.
    pub fn name(self) -> &'static str {
        match self {
            ForkCodec::Zlib => "zlib",
            ForkCodec::Lzvn => "lzvn",
        }
    }

    /// The codec [`ForkCodec::name`] names.
    pub fn from_name(name: &str) -> Option<ForkCodec> {
        [ForkCodec::Zlib, ForkCodec::Lzvn]
            .into_iter()
            .find(|c| c.name() == name)
    }
}

impl Content {
    /// Total length of the content this describes (runs summed; resident
    /// length).
    pub fn len(&self) -> u64 {
        match self {
            Content::None => 0,
            Content::Resident(b) => b.len() as u64,
            Content::Runs(r) | Content::Encoded { runs: r, .. } => {
                r.iter().fold(0u64, |t, run| t.saturating_add(run.len()))
            }
            Content::Compressed { size, .. } | Content::Decmpfs { size, .. } => *size,
        }
    }

    /// Whether the content is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stored extents (zero runs omitted), in file order.
    pub fn extents(&self) -> Vec<Extent> {
        match self {
            Content::Runs(r)
            | Content::Encoded { runs: r, .. }
            | Content::Compressed { runs: r, .. }
            | Content::Decmpfs { runs: r, .. } => r
                .iter()
                .filter_map(|run| match *run {
                    Run::Data { offset, len } => Some(Extent { offset, len }),
                    Run::Zeros { .. } => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Appends a run, merging it with the previous one when contiguous.
pub(crate) fn push_run(runs: &mut Vec<Run>, r: Run) {
    if r.is_empty() {
        return;
    }
    match (runs.last_mut(), r) {
        (Some(Run::Data { offset, len }), Run::Data { offset: o, len: l })
            if offset.checked_add(*len) == Some(o) =>
        {
            *len = len.saturating_add(l);
        }
        (Some(Run::Zeros { len }), Run::Zeros { len: l }) => *len = len.saturating_add(l),
        _ => runs.push(r),
    }
}

/// The part `[from, to)` (file offsets) of a run list.
pub(crate) fn clip_runs(runs: &[Run], from: u64, to: u64) -> Vec<Run> {
    let mut out = Vec::new();
    let mut pos = 0u64;
    for r in runs {
        let len = r.len();
        let end = pos.saturating_add(len);
        let (s, e) = (pos.max(from), end.min(to));
        if s < e {
            let skip = s - pos;
            push_run(
                &mut out,
                match *r {
                    Run::Data { offset, .. } => Run::Data {
                        offset: offset.saturating_add(skip),
                        len: e - s,
                    },
                    Run::Zeros { .. } => Run::Zeros { len: e - s },
                },
            );
        }
        pos = end;
        if pos >= to {
            break;
        }
    }
    out
}

/// How a record's content was located, and how far it can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Recovery {
    /// A live file: the content comes from the file system's own map.
    Allocated,
    /// A deleted file whose content was located and every cluster of which is
    /// currently unallocated. For FAT this is TSK's recovery of consecutive
    /// clusters from the first one, which is right for contiguous files and
    /// silently wrong for fragmented ones (DFTT #6).
    Unallocated,
    /// A deleted FAT file recovered by TSK's rule after skipping clusters now
    /// allocated to other files. The skipped clusters were most likely the
    /// file's own, reused since: the content is probably not the file's, so
    /// this does not count as recoverable.
    SkippedAllocated,
    /// A deleted file some of whose clusters now belong to other files: the
    /// content is at least partly overwritten.
    Overwritten,
    /// A deleted file whose content cannot be located at all.
    Unrecoverable,
}

impl Recovery {
    /// Whether the content described is (as far as the metadata tells) the
    /// file's own: live files, and deleted ones whose clusters are all still
    /// unallocated. A fragmented deleted FAT file passes this test yet is
    /// recovered wrongly; nothing in FAT metadata can tell.
    pub fn is_recoverable(self) -> bool {
        matches!(self, Recovery::Allocated | Recovery::Unallocated)
    }
}

/// Permissions and owner of a record, as The Sleuth Kit reports them. Unix
/// file systems store them; for the others TSK derives them from the
/// attribute bits, and so does this crate, rule for rule (FAT and exFAT:
/// `r-x` for everyone when read-only, else `rwx`; NTFS: `x` always, `r`
/// unless read-only, `w` unless hidden, the owner id of
/// `$STANDARD_INFORMATION` as UID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Owner {
    /// POSIX mode: permission bits (`0o7777`, set-user-ID, set-group-ID
    /// and sticky included) and, where the file system stores one (ext),
    /// the file type (`0o170000`: symbolic link, FIFO, device, socket);
    /// 0 there elsewhere.
    pub mode: u16,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

impl Owner {
    /// Read, write and execute for everyone, or read and execute where
    /// `read_only`: TSK's rule for FAT and exFAT.
    pub fn fat(read_only: bool) -> Owner {
        Owner {
            mode: if read_only { 0o555 } else { 0o777 },
            ..Owner::default()
        }
    }

    /// TSK's rule for NTFS's DOS attribute bits: execute always, read
    /// unless read-only (bit 0), write unless hidden (bit 1).
    pub fn ntfs(attributes: u32, owner_id: u32) -> Owner {
        let mut mode = 0o111;
        if attributes & 1 == 0 {
            mode |= 0o444;
        }
        if attributes & 2 == 0 {
            mode |= 0o222;
        }
        Owner {
            mode,
            uid: owner_id,
            gid: 0,
        }
    }
}

/// One name in a file system, as a walk yields it.
///
/// Names are kept verbatim (they may contain `/`, NUL, control characters or
/// be `..`); use [`FileRecord::display_path`] or
/// [`crate::name::escape_component`] before showing one or building anything
/// from it. This crate never uses a name as a path.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRecord {
    /// Names of the directories above this record, from the root down.
    pub parent: Arc<[String]>,
    /// The name: the long name where there is one, else the short one; for a
    /// FAT volume label the raw 11 label characters.
    pub name: String,
    /// The name's bytes as stored (UTF-16LE for NTFS names and FAT long
    /// names; the OEM bytes of a FAT short name or label).
    pub raw_name: Vec<u8>,
    /// The FAT 8.3 name (or NTFS DOS name) when the record also has a long
    /// one.
    pub short_name: Option<String>,
    /// NTFS alternate data stream (or named index) the record stands for.
    pub stream: Option<String>,
    /// TSK-style metadata address.
    pub meta: MetaAddr,
    /// What the record names.
    pub kind: FileKind,
    /// Size in bytes as TSK reports it (FAT directories: their clusters;
    /// NTFS directories: the `$I30` index root).
    pub size: u64,
    /// Timestamps (NTFS: from `$STANDARD_INFORMATION`).
    pub times: Times,
    /// NTFS `$FILE_NAME` timestamps of the name this record is for.
    pub name_times: Option<Times>,
    /// How the timestamps relate to UTC.
    pub time_base: TimeBase,
    /// Whether the name is allocated (not deleted).
    pub allocated: bool,
    /// File-system attribute bits (FAT attribute byte; NTFS file attributes).
    pub attributes: u32,
    /// Permissions and owner as TSK reports them (`fls -m`'s mode, UID and
    /// GID columns).
    pub owner: Owner,
    /// Where the content is.
    pub content: Content,
    /// File slack: stored bytes after the end of the content up to the end
    /// of its last allocation unit, as absolute extents.
    pub slack: Vec<Extent>,
    /// How the content was located.
    pub recovery: Recovery,
    /// Problems met while building this record.
    pub errors: Vec<ProcessingError>,
}

impl FileRecord {
    /// A live record of `kind` named `name` under `parent` for inode
    /// `inode`, with no content, times, owner or errors yet: the readers
    /// fill in what their file system has.
    pub(crate) fn named(
        parent: Arc<[String]>,
        name: String,
        raw_name: Vec<u8>,
        inode: u64,
        kind: FileKind,
    ) -> Self {
        FileRecord {
            parent,
            name,
            raw_name,
            short_name: None,
            stream: None,
            meta: MetaAddr { inode, attr: None },
            kind,
            size: 0,
            times: Times::default(),
            name_times: None,
            time_base: TimeBase::Utc,
            allocated: true,
            attributes: 0,
            owner: Owner::default(),
            content: Content::None,
            slack: Vec::new(),
            recovery: Recovery::Allocated,
            errors: Vec::new(),
        }
    }

    /// Whether the name is deleted.
    pub fn deleted(&self) -> bool {
        !self.allocated
    }

    /// Whether the content described is (as far as the metadata tells) the
    /// file's own.
    pub fn recoverable(&self) -> bool {
        self.recovery.is_recoverable()
    }

    /// The name as TSK's `fls` prints it: streams as `name:stream`, FAT
    /// labels with ` (Volume Label Entry)` appended. Not escaped.
    pub fn tsk_name(&self) -> String {
        let mut s = self.name.clone();
        if let Some(stream) = &self.stream {
            s.push(':');
            s.push_str(stream);
        }
        if self.kind == FileKind::VolumeLabel {
            s.push_str(" (Volume Label Entry)");
        }
        s
    }

    /// The full path as `fls -r -p` prints it (`dir/sub/name`, no leading
    /// slash). Not escaped: a name holding `/` makes it ambiguous; use
    /// [`FileRecord::display_path`] for anything shown or stored as a path.
    pub fn path(&self) -> String {
        let mut s = String::new();
        for p in self.parent.iter() {
            s.push_str(p);
            s.push('/');
        }
        s.push_str(&self.tsk_name());
        s
    }

    /// The full path with every component escaped (see
    /// [`crate::name::escape_component`]): unambiguous and safe to show.
    pub fn display_path(&self) -> String {
        let mut s = String::new();
        for p in self.parent.iter() {
            s.push_str(&escape_component(p));
            s.push('/');
        }
        s.push_str(&escape_component(&self.tsk_name()));
        s
    }
}
