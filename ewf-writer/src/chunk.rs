//! The chunk kernel: turn one chunk of media into the bytes stored for it.
//!
//! A chunk is stored either as a zlib stream (table entry flag set) or as the
//! raw bytes followed by their Adler-32, little-endian. It is stored
//! compressed only when the zlib stream is smaller than the raw chunk, as
//! libewf and EnCase do, with one exception explained at
//! [`ChunkEncoder::encode`].
//!
//! # Why libdeflate
//!
//! Measured on 256 MiB of real mixed content (system libraries, binaries,
//! man pages and documents) in 32 KiB chunks, one core of this 2-core Xeon,
//! against libewf 20140813's own output on the same input (`fast` 98.8 MB,
//! `best` 91.0 MB):
//!
//! | backend, level            | MB/s  | stored size |
//! |---------------------------|-------|-------------|
//! | flate2 + zlib-rs, 1       | 118   | 119.8 MB (+21 % vs libewf fast) |
//! | flate2 + zlib-rs, 2       | 42    | 99.3 MB     |
//! | libdeflate, 1             | 114-145 | 98.1 MB (-0.7 %) |
//! | flate2 + zlib-rs, 9       | 20    | 91.0 MB     |
//! | libdeflate, 9             | 26    | 90.0 MB (-1.1 %) |
//!
//! zlib-rs level 1 uses a much weaker match finder than zlib's level 1, so
//! it misses the size goal (within 3 % of libewf) by far, and the zlib-rs
//! level that meets it is 3 times slower than libdeflate level 1. libdeflate
//! meets the size goal at both levels and is the fastest, so chunks (and the
//! small header sections) go through it. (`best` then settles on libdeflate
//! level 6, which is smaller still than zlib 9; see `Compression`.) Its zlib output is plain RFC 1950,
//! which every EWF reader inflates, and it is deterministic: the same input
//! and level always give the same bytes.

use crate::format::adler32;
use crate::options::Compression;
use libdeflater::{CompressionLvl, Compressor};

/// Compresses chunks for one thread; keeps its compressor state between
/// chunks so nothing is allocated per chunk.
pub struct ChunkEncoder {
    compression: Compression,
    deflate: Option<Compressor>,
    stored: Option<Compressor>,
    constant: Option<ConstantChunk>,
}

/// The stored form of the last constant chunk (one byte value repeated)
/// this encoder compressed.
///
/// Zero-filled chunks (free space, slack, sparse files) are a large share
/// of real disks, and deflate spends as long on them as on text (libdeflate
/// level 1: about 240 MiB/s on zeros) while the result only depends on the
/// byte and the length. Comparing a chunk with itself shifted by one byte
/// finds them at memory speed; the cached stream is byte-identical to what
/// compressing would produce, since libdeflate keeps no state between calls.
struct ConstantChunk {
    byte: u8,
    len: usize,
    stored: Vec<u8>,
}

/// Whether every byte of `raw` is the same.
fn is_constant(raw: &[u8]) -> bool {
    !raw.is_empty() && raw[1..] == raw[..raw.len() - 1]
}

impl std::fmt::Debug for ChunkEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkEncoder")
            .field("compression", &self.compression)
            .finish_non_exhaustive()
    }
}

fn compressor(level: i32) -> Compressor {
    // Levels 0, 1, 6 and 9 are all inside libdeflate's 0..=12.
    let lvl = CompressionLvl::new(level).unwrap_or_default();
    Compressor::new(lvl)
}

/// Compress `data` as a zlib stream into `out` (resized to fit).
fn zlib_into(c: &mut Compressor, data: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    let bound = c.zlib_compress_bound(data.len());
    out.clear();
    out.resize(bound, 0);
    // With a buffer of the documented bound the call cannot run out of room.
    c.zlib_compress(data, out).ok()
}

impl ChunkEncoder {
    /// An encoder for the given compression.
    pub fn new(compression: Compression) -> Self {
        let deflate = match compression {
            Compression::None => None,
            other => Some(compressor(other.deflate_level())),
        };
        ChunkEncoder {
            compression,
            deflate,
            stored: None,
            constant: None,
        }
    }

    /// Encode `raw` into `out` (cleared first); returns whether the stored
    /// form is compressed.
    ///
    /// `force_compressed` is set for the image's final chunk when it is
    /// shorter than a full chunk. The `ewf` crate (0.4), which caseload reads
    /// E01 with, reads an uncompressed chunk as a full chunk's worth of bytes
    /// and fails when the file ends sooner, which is exactly the case for a
    /// short final chunk followed only by the closing sections. A zlib
    /// stream is read tolerantly, so that one chunk is always stored
    /// compressed (at level 0, i.e. stored deflate blocks, when compression
    /// is `none`); it costs at most a few bytes over the raw form.
    ///
    /// Chunks whose content is near-random (see `looks_incompressible`)
    /// are stored without trying deflate.
    pub fn encode(&mut self, raw: &[u8], force_compressed: bool, out: &mut Vec<u8>) -> bool {
        let constant = self.deflate.is_some() && is_constant(raw);
        if constant
            && let Some(c) = &self.constant
            && c.byte == raw[0]
            && c.len == raw.len()
        {
            out.clear();
            out.extend_from_slice(&c.stored);
            return true;
        }
        let try_deflate = force_compressed || constant || !looks_incompressible(raw);
        if try_deflate
            && let Some(c) = self.deflate.as_mut()
            && let Some(n) = zlib_into(c, raw, out)
            && (n < raw.len() || force_compressed)
        {
            out.truncate(n);
            if constant && n < raw.len() {
                self.constant = Some(ConstantChunk {
                    byte: raw[0],
                    len: raw.len(),
                    stored: out.clone(),
                });
            }
            return true;
        }
        if force_compressed {
            let c = self.stored.get_or_insert_with(|| compressor(0));
            if let Some(n) = zlib_into(c, raw, out) {
                out.truncate(n);
                return true;
            }
        }
        out.clear();
        out.extend_from_slice(raw);
        out.extend_from_slice(&adler32(raw).to_le_bytes());
        false
    }
}

/// Block size over which byte entropy is judged: a file-system cluster, so
/// one chunk's mix of files (text next to a JPEG next to free space) is seen
/// block by block.
const ENTROPY_BLOCK: usize = 4096;

/// Bits per byte from which a block counts as near-random.
///
/// Deflate spends as long failing on random data as it does compressing
/// text (libdeflate level 1: about 85 MiB/s on noise, 250 MiB/s on text), and
/// on real evidence much of the media is already compressed (JPEG, ZIP,
/// video, encrypted containers). Measured on a `caseload corpus` disk, the
/// chunks whose every 4 KiB block has order-0 entropy of at least 7.8 bits
/// per byte shrank by 0.06 % to 0.8 % under zlib level 1 (what libewf
/// stores for them), against 67 % for the rest. Storing those chunks raw
/// without trying costs under 1 % of their size and removes most of the
/// compression time. Random 4 KiB blocks measure about 7.95 bits (the
/// estimate is biased low by 255 / (2 n ln 2)), text 4 to 5.5, machine code
/// about 6, zero runs 0.
const NEAR_RANDOM_BITS: f64 = 7.8;

/// `c * log2(c)` for every count a block can hold.
fn c_log2_c() -> &'static [f64] {
    static TABLE: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=ENTROPY_BLOCK)
            .map(|c| {
                if c == 0 {
                    0.0
                } else {
                    c as f64 * (c as f64).log2()
                }
            })
            .collect()
    })
}

/// Order-0 entropy of a block of exactly `ENTROPY_BLOCK` bytes, bits/byte.
fn block_entropy(block: &[u8]) -> f64 {
    // Four interleaved histograms so consecutive equal bytes do not wait on
    // each other's increments.
    let mut h = [[0u16; 256]; 4];
    let mut quads = block.chunks_exact(4);
    for q in &mut quads {
        h[0][usize::from(q[0])] += 1;
        h[1][usize::from(q[1])] += 1;
        h[2][usize::from(q[2])] += 1;
        h[3][usize::from(q[3])] += 1;
    }
    for &b in quads.remainder() {
        h[0][usize::from(b)] += 1;
    }
    let table = c_log2_c();
    let n = block.len() as f64;
    let [h0, h1, h2, h3] = &h;
    let mut sum = 0.0;
    for (((a, b), c), d) in h0.iter().zip(h1).zip(h2).zip(h3) {
        let count = usize::from(*a) + usize::from(*b) + usize::from(*c) + usize::from(*d);
        sum += table[count.min(ENTROPY_BLOCK)];
    }
    n.log2() - sum / n
}

/// Whether every 4 KiB block of `raw` is near-random, so deflate would gain
/// almost nothing. Chunks under 4 KiB are always tried.
pub(crate) fn looks_incompressible(raw: &[u8]) -> bool {
    raw.len() >= ENTROPY_BLOCK
        && raw.len().is_multiple_of(ENTROPY_BLOCK)
        && raw
            .chunks_exact(ENTROPY_BLOCK)
            .all(|b| block_entropy(b) >= NEAR_RANDOM_BITS)
}

/// The most bytes a chunk of `raw_len` bytes can take when stored.
pub(crate) fn stored_bound(raw_len: usize, force_compressed: bool) -> u64 {
    let raw = raw_len as u64 + 4;
    if force_compressed {
        let mut c = compressor(0);
        let bound = c.zlib_compress_bound(raw_len) as u64;
        raw.max(bound)
    } else {
        raw
    }
}

/// zlib-compress a header section's text at zlib's default level 6, the
/// level libewf uses for `header` and `header2` whatever the chunk level.
pub(crate) fn compress_header(data: &[u8]) -> Vec<u8> {
    let mut c = compressor(6);
    let mut out = Vec::new();
    match zlib_into(&mut c, data, &mut out) {
        Some(n) => out.truncate(n),
        None => out.clear(),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inflate(data: &[u8], size: usize) -> Vec<u8> {
        let mut d = libdeflater::Decompressor::new();
        let mut out = vec![0u8; size];
        let n = d.zlib_decompress(data, &mut out).expect("valid zlib");
        out.truncate(n);
        out
    }

    fn text(len: usize) -> Vec<u8> {
        b"the evidence disk holds sectors and clusters "
            .iter()
            .cycle()
            .take(len)
            .copied()
            .collect()
    }

    fn noise(len: usize) -> Vec<u8> {
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn compressible_chunks_are_stored_compressed() {
        for level in [Compression::Fast, Compression::Best] {
            let mut e = ChunkEncoder::new(level);
            let raw = text(32768);
            let mut out = Vec::new();
            assert!(e.encode(&raw, false, &mut out));
            assert!(out.len() < raw.len());
            assert_eq!(inflate(&out, raw.len()), raw);
        }
    }

    #[test]
    fn zlib_header_shows_the_level() {
        // zlib's FLEVEL bits: level 1 writes 78 01 (as libewf's fast
        // chunks), level 6 writes 78 9c (libewf's best chunks say 78 da).
        let raw = text(32768);
        let mut out = Vec::new();
        ChunkEncoder::new(Compression::Fast).encode(&raw, false, &mut out);
        assert_eq!(&out[..2], &[0x78, 0x01]);
        ChunkEncoder::new(Compression::Best).encode(&raw, false, &mut out);
        assert_eq!(&out[..2], &[0x78, 0x9c]);
    }

    #[test]
    fn incompressible_chunks_are_stored_raw_with_adler32() {
        let raw = noise(32768);
        let mut out = Vec::new();
        assert!(!ChunkEncoder::new(Compression::Best).encode(&raw, false, &mut out));
        assert_eq!(&out[..raw.len()], &raw[..]);
        let sum = u32::from_le_bytes(out[raw.len()..].try_into().unwrap());
        assert_eq!(sum, adler32(&raw));
    }

    #[test]
    fn none_stores_raw_even_when_compressible() {
        let raw = text(4096);
        let mut out = Vec::new();
        assert!(!ChunkEncoder::new(Compression::None).encode(&raw, false, &mut out));
        assert_eq!(out.len(), raw.len() + 4);
    }

    #[test]
    fn forced_chunks_are_zlib_at_every_level() {
        for level in [Compression::None, Compression::Fast, Compression::Best] {
            let raw = noise(3 * 512);
            let mut out = Vec::new();
            assert!(ChunkEncoder::new(level).encode(&raw, true, &mut out));
            assert!(out.len() as u64 <= stored_bound(raw.len(), true));
            assert_eq!(inflate(&out, raw.len()), raw);
        }
    }

    #[test]
    fn entropy_separates_random_from_structured_blocks() {
        assert!(block_entropy(&noise(4096)) > 7.9);
        assert_eq!(block_entropy(&[0u8; 4096]), 0.0);
        assert!(block_entropy(&text(4096)) < 5.0);
        // Exactly uniform: every byte value 16 times.
        let uniform: Vec<u8> = (0..4096).map(|i| i as u8).collect();
        assert!((block_entropy(&uniform) - 8.0).abs() < 1e-9);
        assert!(looks_incompressible(&noise(32768)));
        // One structured cluster in the chunk is enough to try deflate.
        let mut mixed = noise(32768);
        mixed[8192..12288].copy_from_slice(&text(4096));
        assert!(!looks_incompressible(&mixed));
        assert!(!looks_incompressible(&noise(2048)));
    }

    #[test]
    fn near_random_chunks_skip_deflate_but_forced_ones_do_not() {
        let raw = noise(32768);
        let mut out = Vec::new();
        assert!(!ChunkEncoder::new(Compression::Fast).encode(&raw, false, &mut out));
        assert_eq!(out.len(), raw.len() + 4);
        assert!(ChunkEncoder::new(Compression::Fast).encode(&raw, true, &mut out));
        assert_eq!(inflate(&out, raw.len()), raw);
    }

    #[test]
    fn constant_chunks_reuse_an_identical_stream() {
        for level in [Compression::Fast, Compression::Best] {
            let mut cached = ChunkEncoder::new(level);
            let mut out = Vec::new();
            for (byte, len) in [
                (0u8, 32768),
                (0, 32768),
                (0xff, 32768),
                (0, 4096),
                (0, 32768),
            ] {
                let raw = vec![byte; len];
                assert!(cached.encode(&raw, false, &mut out));
                // A fresh encoder compresses for real: same bytes.
                let mut fresh = Vec::new();
                assert!(ChunkEncoder::new(level).encode(&raw, false, &mut fresh));
                assert_eq!(out, fresh);
                assert_eq!(inflate(&out, len), raw);
            }
        }
        assert!(is_constant(&[7; 10]) && is_constant(&[7]));
        assert!(!is_constant(&[7, 7, 8]) && !is_constant(&[]));
    }

    #[test]
    fn header_compression_round_trips() {
        let raw = text(1000);
        let z = compress_header(&raw);
        assert_eq!(&z[..2], &[0x78, 0x9c]);
        assert_eq!(inflate(&z, raw.len()), raw);
    }
}
