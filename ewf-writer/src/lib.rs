//! A streaming writer for Expert Witness Format images (EWF v1, `.E01`), in
//! the layout libewf writes for EnCase 6, with parallel deterministic chunk
//! compression.
//!
//! No maintained crate writes EWF with this project's toolchain: `ewf`
//! (which caseload reads E01 with) only reads, and `ewf-image`, which also
//! writes, needs Rust 1.96 in every published version. This one is written
//! from the public libyal "Expert Witness Compression Format" specification
//! and checked against libewf's tools (`ewfverify`, `ewfinfo`, `ewfexport`)
//! and the `ewf` crate.
//!
//! # Use
//!
//! [`EwfWriter`] takes the media size up front and the media bytes in
//! order (it implements [`std::io::Write`]); [`EwfWriter::finish`] returns a
//! [`Summary`] (segment paths, MD5, SHA-1, counts, padding). [`convert`]
//! wraps it for a reader, and [`RawImage`] opens single or split raw images.
//!
//! # On-disk layout
//!
//! All integers are little-endian. Every segment file starts with a 13-byte
//! file header: `EVF 09 0D 0A FF 00`, `01`, the segment number (u16),
//! `00 00`. Sections follow back to back, each starting with a 76-byte
//! descriptor: type name (16 bytes, NUL padded), absolute offset of the next
//! section (u64), section size including the descriptor (u64), 40 zero
//! bytes, Adler-32 of the preceding 72 bytes.
//!
//! ```text
//! first segment (.E01)             later segments (.E02 ...)
//! ---------------------            -------------------------
//! file header                      file header
//! header2   (zlib, UTF-16LE text)  data     (copy of the volume body)
//! header2   (identical copy)       sectors  | one or more groups
//! header    (zlib, ASCII text)     table    |
//! volume    (media geometry)       table2   |
//! sectors   | one or more groups   ...
//! table     |                      next     (or, in the last segment:
//! table2    |                               digest, hash, done)
//! ...
//! next      (or, if the image has a single segment:
//!            data, digest, hash, done)
//! ```
//!
//! - `header2`/`header`: zlib (level 6) compressed case metadata, see
//!   [`Metadata`]; `header2` is UTF-16LE with BOM and three categories
//!   (`main`, `srce`, `sub`), `header` ASCII with CR LF line ends.
//! - `volume`/`data` body (1052 bytes): media type, chunk count (u32),
//!   sectors per chunk, bytes per sector (512), sector count (u64), media
//!   flags, compression level (0/1/2), error granularity, the set GUID at
//!   offset 64, Adler-32 at 1048.
//! - A group is a `sectors` section holding the chunks back to back, then
//!   `table` and `table2` (identical): entry count (u32), 4 zero bytes, the
//!   base offset (u64, the absolute offset of the group's `sectors`
//!   section), 4 zero bytes, Adler-32 of those 20 bytes; one u32 per chunk
//!   (offset relative to the base, top bit set when the chunk is a zlib
//!   stream); Adler-32 of the entries. A group holds at most 65534 chunks and
//!   no chunk ends 2^31 or more bytes past its base.
//! - A chunk is stored as a zlib stream when that is smaller than the chunk
//!   (and always when it is the image's short final chunk, see
//!   [`ChunkEncoder::encode`]), otherwise as the raw bytes followed by their
//!   Adler-32. Chunks whose every 4 KiB block is near-random by byte entropy
//!   are stored raw without trying deflate (it would save under 1 %).
//! - `digest` (80 bytes: MD5, SHA-1, 40 zeros, Adler-32) and `hash` (36
//!   bytes: MD5, 16 zeros, Adler-32) hold the media hashes.
//! - `next` and `done` are bare descriptors of size 0 whose next-offset
//!   points at themselves.
//! - Segments are named `.E01`..`.E99`, `.EAA`..`.EZZ`, `.FAA`..`.ZZZ` (at
//!   most 14971) and none exceeds the segment size.
//!
//! # Determinism
//!
//! Output is byte-identical for the same input and options whatever the
//! thread count: chunks compress independently and are written in order,
//! the set GUID is derived from the media hashes and options (unless
//! [`GuidChoice::Random`] is asked for), and the header times come from
//! [`WriterOptions::acquired`] rather than the clock, written in UTC.
//!
//! # Sizes that are not whole sectors
//!
//! EWF records media as whole 512-byte sectors. A source whose size is not a
//! multiple of 512 is padded with zero bytes to the next sector and the
//! padding is reported in [`Summary::padding_bytes`]; the stored MD5/SHA-1
//! then cover the padded media (libewf 20140813 instead truncates such a
//! source and records a hash its own `ewfverify` rejects).

mod chunk;
mod convert;
mod error;
mod format;
mod layout;
mod options;
mod plan;
mod sink;
mod writer;

pub use chunk::ChunkEncoder;
pub use convert::{RawImage, convert};
pub use error::EwfWriteError;
pub use format::{BYTES_PER_SECTOR, MAX_SEGMENTS, segment_extension};
pub use options::{Compression, GuidChoice, Metadata, WriterOptions};
pub use plan::segment_path;
pub use writer::{EwfWriter, SegmentFile, Summary};
