//! Errors of the EWF writer.

use std::io;
use std::path::PathBuf;

/// Everything that can stop an image from being written.
///
/// Whenever one of these ends a write that had begun, the segment files the
/// writer created are removed, so a failed run never leaves a set that looks
/// usable.
#[derive(Debug, thiserror::Error)]
pub enum EwfWriteError {
    /// A media size of zero: EWF has nothing to describe.
    #[error("the source is empty: there is no media to write")]
    EmptyMedia,
    /// Unsupported sectors-per-chunk value.
    #[error(
        "{0} sectors per chunk is not supported: use a power of two from 1 to 8192 (64 is usual)"
    )]
    ChunkSectors(u32),
    /// The chunk count does not fit the volume section's 32-bit field.
    #[error(
        "{media_size} bytes need {chunks} chunks, more than the 4294967295 an EWF v1 volume can count; use more sectors per chunk"
    )]
    TooManyChunks {
        /// Media size in bytes.
        media_size: u64,
        /// Chunks it would need.
        chunks: u64,
    },
    /// The segment size cannot hold even one chunk with its sections.
    #[error(
        "segment size {segment_size} bytes is too small: one chunk with the sections around it needs at least {minimum} bytes"
    )]
    SegmentSizeTooSmall {
        /// The requested segment size.
        segment_size: u64,
        /// The smallest size that works with these options.
        minimum: u64,
    },
    /// More segments could be needed than `.E01`..`.ZZZ` names.
    #[error(
        "at {segment_size}-byte segments this image could need up to {needed} segment files, more than the {limit} that EWF naming (.E01 to .ZZZ) allows; use a segment size of at least {suggested} bytes"
    )]
    TooManySegments {
        /// The requested segment size.
        segment_size: u64,
        /// Segments needed if no chunk compressed.
        needed: u64,
        /// The naming limit.
        limit: u32,
        /// A segment size that fits the limit.
        suggested: u64,
    },
    /// A segment file of the same name exists and overwriting was not asked.
    #[error("`{}` already exists; refusing to overwrite it (pass --force, or set `overwrite`, to replace it)", path.display())]
    SegmentExists {
        /// The existing file.
        path: PathBuf,
    },
    /// A segment file could not be created.
    #[error("cannot create segment `{}`", path.display())]
    Create {
        /// The segment file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Writing a segment file failed (out of space, file size limit, I/O).
    #[error("writing `{}` failed", path.display())]
    Write {
        /// The segment file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// More bytes were written than the media size given up front.
    #[error("more media data than the {expected} bytes declared")]
    TooMuchData {
        /// The declared media size.
        expected: u64,
    },
    /// `finish` came before the declared media size was written.
    #[error("the media ended after {got} of the {expected} bytes declared")]
    ShortMedia {
        /// The declared media size.
        expected: u64,
        /// Bytes actually written.
        got: u64,
    },
    /// The source could not be opened or measured.
    #[error("cannot open source `{}`", path.display())]
    SourceOpen {
        /// The source file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Reading the source failed.
    #[error("reading the source at byte {offset} failed")]
    SourceRead {
        /// Media offset of the failed read.
        offset: u64,
        /// The operating system's error.
        source: io::Error,
    },
    /// The writer already failed or was aborted; the first error said why.
    #[error("the EWF writer already stopped after an earlier error")]
    Stopped,
    /// A compression or output thread ended without reporting (a bug).
    #[error("an EWF writer thread stopped unexpectedly")]
    ThreadFailed,
}
