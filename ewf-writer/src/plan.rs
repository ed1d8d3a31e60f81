//! Everything fixed before the first byte is written: sizes, header
//! sections, the segment geometry and the up-front refusals.

use crate::chunk::{compress_header, stored_bound};
use crate::error::EwfWriteError;
use crate::format::{
    BYTES_PER_SECTOR, DESCRIPTOR_LEN, FILE_HEADER_LEN, MAX_SEGMENTS, Provenance,
    VOLUME_SECTION_LEN, header_text, header2_bytes, segment_extension,
};
use crate::layout::Geometry;
use crate::options::WriterOptions;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Largest sectors-per-chunk value accepted. libewf goes to 32768, but a
/// short final chunk is stored as a zlib stream (see `ChunkEncoder::encode`)
/// and that stream must stay shorter than a full chunk for the `ewf` crate
/// to read it; with stored deflate blocks costing 5 bytes per 64 KiB that
/// holds up to 4 MiB chunks. EnCase 7 itself offers at most 1024.
pub(crate) const MAX_CHUNK_SECTORS: u32 = 8192;

/// The fixed facts of one image being written.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Output path without extension.
    pub prefix: PathBuf,
    /// The caller's options.
    pub options: WriterOptions,
    /// Segment geometry.
    pub geometry: Geometry,
    /// Bytes the caller will supply.
    pub source_size: u64,
    /// Media size recorded: the source padded to whole sectors.
    pub media_size: u64,
    /// Bytes per chunk.
    pub chunk_size: u64,
    /// Chunks in the image.
    pub chunk_count: u64,
    /// Compressed `header2` payload.
    pub header2: Vec<u8>,
    /// Compressed `header` payload.
    pub header: Vec<u8>,
    /// Segments needed if no chunk compressed (an upper bound).
    pub worst_case_segments: u64,
}

/// The platform name recorded as "operating system used", in the spelling
/// libewf uses on Linux.
fn platform() -> String {
    match std::env::consts::OS {
        "linux" => "Linux".to_string(),
        "macos" => "Darwin".to_string(),
        "windows" => "Windows".to_string(),
        other => other.to_string(),
    }
}

impl Plan {
    /// Check the options against the media size and fix the layout.
    pub(crate) fn new(
        prefix: &Path,
        source_size: u64,
        options: &WriterOptions,
    ) -> Result<Plan, EwfWriteError> {
        let sectors = options.chunk_sectors;
        if sectors == 0 || sectors > MAX_CHUNK_SECTORS || !sectors.is_power_of_two() {
            return Err(EwfWriteError::ChunkSectors(sectors));
        }
        if source_size == 0 {
            return Err(EwfWriteError::EmptyMedia);
        }
        let sector = u64::from(BYTES_PER_SECTOR);
        let media_size = source_size.div_ceil(sector) * sector;
        let chunk_size = options.chunk_size();
        let chunk_count = media_size.div_ceil(chunk_size);
        if chunk_count > u64::from(u32::MAX) {
            return Err(EwfWriteError::TooManyChunks {
                media_size,
                chunks: chunk_count,
            });
        }

        let provenance = Provenance {
            version: env!("CARGO_PKG_VERSION").to_string(),
            platform: platform(),
            time: options.acquired,
        };
        let header2 = compress_header(&header2_bytes(&options.metadata, &provenance));
        let header = compress_header(header_text(&options.metadata, &provenance).as_bytes());
        let first_prologue = FILE_HEADER_LEN
            + 2 * (DESCRIPTOR_LEN + header2.len() as u64)
            + DESCRIPTOR_LEN
            + header.len() as u64
            + VOLUME_SECTION_LEN;
        let geometry = Geometry {
            segment_size: options.segment_size,
            first_prologue,
            later_prologue: FILE_HEADER_LEN + VOLUME_SECTION_LEN,
        };

        // Worst case: no chunk compresses; the short final chunk is a zlib
        // stream of stored blocks.
        let full_worst = chunk_size + 4;
        let last_raw = media_size - (chunk_count - 1) * chunk_size;
        let last_short = last_raw < chunk_size;
        let last_worst = if last_short {
            stored_bound(last_raw as usize, true)
        } else {
            full_worst
        };
        let minimum = geometry.minimum_segment_size(full_worst.max(last_worst));
        if options.segment_size < minimum {
            return Err(EwfWriteError::SegmentSizeTooSmall {
                segment_size: options.segment_size,
                minimum,
            });
        }
        let limit = u64::from(MAX_SEGMENTS);
        let needed = geometry
            .segments_needed(chunk_count, full_worst, last_worst, limit)
            .ok_or(EwfWriteError::SegmentSizeTooSmall {
                segment_size: options.segment_size,
                minimum,
            })?;
        if needed > limit {
            let suggested = smallest_fitting_segment_size(
                geometry,
                options.segment_size,
                chunk_count,
                full_worst,
                last_worst,
            );
            return Err(EwfWriteError::TooManySegments {
                segment_size: options.segment_size,
                needed,
                limit: MAX_SEGMENTS,
                suggested,
            });
        }

        Ok(Plan {
            prefix: prefix.to_path_buf(),
            options: options.clone(),
            geometry,
            source_size,
            media_size,
            chunk_size,
            chunk_count,
            header2,
            header,
            worst_case_segments: needed,
        })
    }

    /// Path of segment `number`: the prefix with `.E01`, `.E02`, ...
    /// appended (never replacing a dot already in the prefix).
    pub(crate) fn segment_path(&self, number: u32) -> Option<PathBuf> {
        segment_path(&self.prefix, number)
    }

    /// Raw bytes of chunk `index` (the final chunk may be short).
    pub(crate) fn chunk_len(&self, index: u64) -> u64 {
        if index + 1 == self.chunk_count {
            self.media_size - index * self.chunk_size
        } else {
            self.chunk_size
        }
    }
}

/// `prefix` with the extension of segment `number` appended.
pub fn segment_path(prefix: &Path, number: u32) -> Option<PathBuf> {
    let ext = segment_extension(number)?;
    let mut name = OsString::from(prefix.as_os_str());
    name.push(".");
    name.push(ext);
    Some(PathBuf::from(name))
}

/// Binary search for the smallest segment size whose worst case fits the
/// naming limit, for the error message. `failing` is a size that does not.
fn smallest_fitting_segment_size(
    geometry: Geometry,
    failing: u64,
    chunks: u64,
    full: u64,
    last: u64,
) -> u64 {
    let limit = u64::from(MAX_SEGMENTS);
    let fits = |size: u64| {
        let g = Geometry {
            segment_size: size,
            ..geometry
        };
        g.segments_needed(chunks, full, last, limit)
            .is_some_and(|n| n <= limit)
    };
    let (mut lo, mut hi) = (failing, failing.saturating_mul(2));
    while !fits(hi) {
        lo = hi;
        match hi.checked_mul(2) {
            Some(h) => hi = h,
            None => return u64::MAX,
        }
    }
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) { hi = mid } else { lo = mid }
    }
    hi
}
