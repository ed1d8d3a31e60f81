//! What the caller chooses: compression, chunk and segment sizes, threads,
//! case metadata, the set identifier and the recorded acquisition time.

/// Bytes per sector: EWF allows others, but raw disk images here are 512.
pub const BYTES_PER_SECTOR: u32 = 512;

/// Chunk compression, as the libewf/EnCase levels `none`, `fast`, `best`.
///
/// libewf maps these to zlib levels: `none` stores every chunk as is (with
/// its Adler-32 trailer), `fast` is zlib level 1 and `best` level 9
/// (observed in the zlib headers of chunks libewf writes: `78 01` and
/// `78 da`). This writer compresses with libdeflate at levels 1 and 6,
/// which give output at most as large as libewf's at the same setting; see
/// `crate::chunk` for the backend choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Store chunks uncompressed.
    None,
    /// Fast compression (deflate level 1).
    #[default]
    Fast,
    /// Best compression (libdeflate level 6, smaller than zlib level 9).
    Best,
}

impl Compression {
    /// The value of the volume section's compression-level byte.
    pub(crate) fn volume_level(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Fast => 1,
            Compression::Best => 2,
        }
    }

    /// The libdeflate level used for chunks.
    ///
    /// `fast` is level 1, like libewf's zlib level 1. `best` is level 6, not
    /// 9: libdeflate's level 6 already compresses better than zlib's level 9
    /// (libewf's best), and its levels 7 to 9 cost far more for little.
    /// Measured with this writer on one core (stored bytes, CPU seconds):
    ///
    /// | input (256 MiB)      | libewf best | libdeflate 6 | 7       | 8       | 9        |
    /// |----------------------|-------------|--------------|---------|---------|----------|
    /// | `caseload corpus`    | 162.27 MB   | 162.06, 1.8  | 162.01, 2.1 | 161.95, 2.4 | 161.95, 2.7 |
    /// | system files (tar)   | 91.03 MB    | 90.57, 3.8   | 90.31, 5.1  | 90.11, 7.1  | 90.07, 10.0 |
    pub(crate) fn deflate_level(self) -> i32 {
        match self {
            Compression::None => 0,
            Compression::Fast => 1,
            Compression::Best => 6,
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Fast => "fast",
            Compression::Best => "best",
        }
    }
}

/// Case metadata recorded in the `header` and `header2` sections.
///
/// Tabs and line breaks inside a value become spaces (they separate fields
/// in the header text). The `header` section is ASCII, so characters outside
/// ASCII appear there as `?`; `header2` (UTF-16) keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// Case number (`c`).
    pub case_number: String,
    /// Evidence number (`n`).
    pub evidence_number: String,
    /// Examiner name (`e`).
    pub examiner: String,
    /// Description (`a`).
    pub description: String,
    /// Notes (`t`).
    pub notes: String,
}

/// How the segment set identifier (the GUID in the volume and data
/// sections) is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GuidChoice {
    /// Derived from the media (its MD5 and SHA-1) and the options, as a
    /// name-based (version 5 style) UUID, so the same input and options give
    /// the same bytes on every run and thread count.
    #[default]
    Derived,
    /// A random (version 4) GUID, as EnCase writes. Output is then no longer
    /// byte-identical across runs.
    Random,
    /// This exact value.
    Fixed([u8; 16]),
}

/// Options of an [`EwfWriter`](crate::EwfWriter).
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Chunk compression.
    pub compression: Compression,
    /// Sectors (of 512 bytes) per chunk: a power of two from 1 to 8192.
    /// EnCase's default and the usual choice is 64 (32 KiB chunks).
    pub chunk_sectors: u32,
    /// Largest size of one segment file in bytes. No segment file exceeds
    /// it. Defaults to 1500 MiB, below the 2 GiB that pre-EnCase-6 readers
    /// can address.
    pub segment_size: u64,
    /// Compression worker threads; 0 means one per available core.
    pub threads: usize,
    /// Case metadata.
    pub metadata: Metadata,
    /// Acquisition and system time recorded in the headers, POSIX seconds.
    /// Fixed by the caller rather than read from the clock, so output is
    /// byte-identical across runs; `caseload convert` uses the source's
    /// modification time.
    pub acquired: u32,
    /// The segment set identifier.
    pub guid: GuidChoice,
    /// Replace existing segment files of the same name (and remove later
    /// segments of an older set with the same prefix) instead of refusing.
    pub overwrite: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            compression: Compression::Fast,
            chunk_sectors: 64,
            segment_size: 1500 << 20,
            threads: 0,
            metadata: Metadata::default(),
            acquired: 0,
            guid: GuidChoice::Derived,
            overwrite: false,
        }
    }
}

impl WriterOptions {
    /// Bytes per chunk.
    pub fn chunk_size(&self) -> u64 {
        u64::from(self.chunk_sectors) * u64::from(BYTES_PER_SECTOR)
    }

    /// Worker threads actually used.
    pub(crate) fn worker_threads(&self) -> usize {
        if self.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            self.threads
        }
    }
}
