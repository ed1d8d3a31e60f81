//! Compressed files (`com.apple.decmpfs`), as The Sleuth Kit 4.11 reads
//! them: a 16-byte header (`fpmc` magic, compression type, uncompressed
//! size) and, for the inline types, the compressed bytes after it.
//!
//! - Type 3 (zlib, inline): decoded here. A first byte whose low nibble
//!   is 0xF marks bytes stored uncompressed after it (TSK's rule).
//! - Type 7 (LZVN, inline): decoded here ([`super::lzvn`]); a first byte
//!   of 0x06 marks bytes stored uncompressed.
//! - Types 4 (zlib) and 8 (LZVN) keep the data in the
//!   `com.apple.ResourceFork` attribute's stream, as a table of blocks
//!   each decoding to 64 KiB ([`block_location`] reads the table as TSK
//!   does, [`decode_block`] one block). The record's content is
//!   [`crate::Content::Decmpfs`], decoded a block at a time as it is read
//!   ([`crate::ContentReader`]), so a file of any size is read in bounded
//!   memory. Stricter than TSK: every block but the last must decode to
//!   exactly 64 KiB (TSK appends whatever each gives; Apple's writers
//!   never write a short one), so a read at any offset finds its block.
//! - Other types (stored 9 and 10, LZFSE 11 and 12) TSK does not read
//!   either: reported, not decoded.

use std::io::{self, Read};

use crate::bytes::{u32_at, u64_at};
use crate::record::ForkCodec;

/// `fpmc` in little-endian.
const MAGIC: u32 = 0x636d_7066;
/// Most bytes a compressed file is ever decoded to (the caller's limit is
/// capped here).
pub const MAX_OUTPUT: u64 = 16 << 20;

/// What a decmpfs header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Compression type.
    pub kind: u32,
    /// Uncompressed size.
    pub size: u64,
}

/// The header of a decmpfs attribute value, if it is one.
pub fn header(attr: &[u8]) -> Option<Header> {
    (u32_at(attr, 0)? == MAGIC).then_some(())?;
    Some(Header {
        kind: u32_at(attr, 4)?,
        size: u64_at(attr, 8)?,
    })
}

/// What a decmpfs attribute gives as content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// The file's bytes.
    Bytes(Vec<u8>),
    /// The bytes live in the resource fork (types 4 and 8), compressed
    /// so.
    ResourceFork(ForkCodec),
    /// Not decoded, and why.
    NotDecoded(String),
}

/// Decodes an inline decmpfs attribute (header included) whose header
/// says `h`.
pub fn decode_inline(attr: &[u8], h: &Header, limit: u64) -> Decoded {
    let body = attr.get(16..).unwrap_or(&[]);
    if let Some(codec) = ForkCodec::of_type(h.kind) {
        return Decoded::ResourceFork(codec);
    }
    if let Some(why) = over(h.size, limit) {
        return Decoded::NotDecoded(why);
    }
    let want = h.size as usize;
    // The inline types are one block of the fork types' codecs.
    let codec = match h.kind {
        3 => ForkCodec::Zlib,
        7 => ForkCodec::Lzvn,
        k => {
            return Decoded::NotDecoded(format!(
                "compression type {k} is not read (TSK reads 3, 4, 7 and 8)"
            ));
        }
    };
    let mut out = Vec::new();
    match decode_block(codec, "inline data", body, want, &mut out) {
        Ok(()) => Decoded::Bytes(out),
        Err(e) => Decoded::NotDecoded(e.to_string()),
    }
}

/// Bytes one resource-fork block decodes to (the last: what is left).
pub const BLOCK: u64 = 65536;
/// Most stored bytes one block may take: a stored block is 64 KiB and its
/// marker byte, and neither zlib nor LZVN grows 64 KiB by half as much.
pub const MAX_STORED_BLOCK: u64 = 2 * BLOCK;

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Where block `i` of a resource fork of `fork_len` bytes lies in it
/// (offset, length), its header and table read through `read` (fork
/// offset, bytes to fill), as TSK reads them:
/// - zlib (type 4): the fork's big-endian data offset at 0, and 4 bytes
///   past it a little-endian block count and a table of (offset, length)
///   pairs, offsets counted from the count;
/// - LZVN (type 8): a little-endian table of block offsets at the fork's
///   start, its first entry the table's size, block `i` from entry `i` to
///   entry `i + 1`.
pub fn block_location(
    codec: ForkCodec,
    i: u64,
    fork_len: u64,
    read: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
) -> io::Result<(u64, u64)> {
    let mut le32 = |at: u64, what: &str| -> io::Result<u64> {
        if at.checked_add(4).is_none_or(|end| end > fork_len) {
            return Err(bad(format!(
                "{what} at fork byte {at} is past the fork's end ({fork_len} bytes)"
            )));
        }
        let mut b = [0u8; 4];
        read(at, &mut b)?;
        Ok(u64::from(u32::from_le_bytes(b)))
    };
    let (offset, len) = match codec {
        ForkCodec::Zlib => {
            // The data offset is big-endian (a classic resource fork).
            let data = u64::from((le32(0, "the fork header")? as u32).swap_bytes()) + 4;
            let count = le32(data, "the block count")?;
            if i >= count {
                return Err(bad(format!("block {i} is past the table's {count} blocks")));
            }
            let entry = data + 4 + 8 * i;
            let off = le32(entry, "a block table entry")?;
            let len = le32(entry + 4, "a block table entry")?;
            (data + off, len)
        }
        ForkCodec::Lzvn => {
            let table = le32(0, "the block table")?;
            let blocks = (table / 4).saturating_sub(1);
            if i >= blocks {
                return Err(bad(format!(
                    "block {i} is past the table's {blocks} blocks"
                )));
            }
            let a = le32(4 * i, "a block table entry")?;
            let b = le32(4 * i + 4, "a block table entry")?;
            if b < a {
                return Err(bad(format!("block {i} ends ({b}) before it starts ({a})")));
            }
            (a, b - a)
        }
    };
    if offset.saturating_add(len) > fork_len {
        return Err(bad(format!(
            "block {i} ({len} bytes at fork byte {offset}) is past the fork's end ({fork_len} bytes)"
        )));
    }
    if len > MAX_STORED_BLOCK {
        return Err(bad(format!(
            "block {i} claims {len} stored bytes, more than a block ever takes ({MAX_STORED_BLOCK})"
        )));
    }
    Ok((offset, len))
}

/// Decodes `block` (stored bytes: a fork's block, or inline data) into
/// `out`, which must come to exactly `want` bytes (a fork's block: 64 KiB,
/// or what is left for the last); errors name it as `what`.
pub fn decode_block(
    codec: ForkCodec,
    what: &str,
    block: &[u8],
    want: usize,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    out.clear();
    let stored = match codec {
        ForkCodec::Zlib => block.first().is_some_and(|b| b & 0x0f == 0x0f),
        ForkCodec::Lzvn => block.first() == Some(&0x06),
    };
    if stored {
        let raw = &block[1..];
        out.extend_from_slice(&raw[..raw.len().min(want)]);
    } else if !block.is_empty() {
        match codec {
            ForkCodec::Zlib => {
                let mut z = flate2::read::ZlibDecoder::new(block).take(want as u64);
                z.read_to_end(out)
                    .map_err(|e| bad(format!("{what} does not decode: {e}")))?;
            }
            ForkCodec::Lzvn => {
                *out = super::lzvn::decode(block, want)
                    .map_err(|e| bad(format!("{what} does not decode: {e}")))?;
            }
        }
    }
    if out.len() != want {
        return Err(bad(format!(
            "{what} decodes to {} bytes, not the {want} its place in the file needs",
            out.len()
        )));
    }
    Ok(())
}

/// Why `size` decoded bytes are not held, if they are over `limit`.
fn over(size: u64, limit: u64) -> Option<String> {
    let limit = limit.min(MAX_OUTPUT);
    (size > limit).then(|| {
        format!("{size} bytes decoded would be over the {limit}-byte limit for decoded content held in a record")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn attr(kind: u32, size: u64, body: &[u8]) -> Vec<u8> {
        let mut v = b"fpmc".to_vec();
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(&size.to_le_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn inline_types_decode_as_tsk_reads_them() {
        let text = b"hello hello hello hello";
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(text).unwrap();
        let a = attr(3, text.len() as u64, &z.finish().unwrap());
        let h = header(&a).unwrap();
        assert_eq!(
            decode_inline(&a, &h, MAX_OUTPUT),
            Decoded::Bytes(text.to_vec())
        );
        let mut raw = vec![0xff];
        raw.extend_from_slice(text);
        let a = attr(3, text.len() as u64, &raw);
        assert_eq!(
            decode_inline(&a, &header(&a).unwrap(), MAX_OUTPUT),
            Decoded::Bytes(text.to_vec())
        );
        let a = attr(3, 100, &[0x78, 0x9c, 1, 2, 3]);
        assert!(matches!(
            decode_inline(&a, &header(&a).unwrap(), MAX_OUTPUT),
            Decoded::NotDecoded(_)
        ));
        let a = attr(4, 100, &[]);
        assert_eq!(
            decode_inline(&a, &header(&a).unwrap(), MAX_OUTPUT),
            Decoded::ResourceFork(ForkCodec::Zlib)
        );
        let a = attr(3, u64::MAX, &[]);
        assert!(matches!(
            decode_inline(&a, &header(&a).unwrap(), MAX_OUTPUT),
            Decoded::NotDecoded(_)
        ));
        assert!(header(b"fpm").is_none());
    }

    /// The file a fork decodes to, read through [`crate::ContentReader`]
    /// as the pipeline reads it (the fork at the source's start), in reads
    /// of `step` bytes.
    fn read_fork(codec: ForkCodec, fork: &[u8], size: u64, step: usize) -> io::Result<Vec<u8>> {
        let content = crate::Content::Decmpfs {
            runs: vec![crate::Run::Data {
                offset: 0,
                len: fork.len() as u64,
            }],
            codec,
            size,
        };
        let mut r = crate::ContentReader::new(&fork, &content);
        let mut out = Vec::new();
        let mut buf = vec![0u8; step];
        loop {
            let n = r.read(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    /// A type-4 fork of `blocks` (stored bytes each).
    fn zlib_fork(blocks: &[Vec<u8>]) -> Vec<u8> {
        let mut fork = vec![0u8; 0x104];
        fork[..4].copy_from_slice(&0x100u32.to_be_bytes());
        fork.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
        let mut off = 4 + 8 * blocks.len();
        for b in blocks {
            fork.extend_from_slice(&(off as u32).to_le_bytes());
            fork.extend_from_slice(&(b.len() as u32).to_le_bytes());
            off += b.len();
        }
        for b in blocks {
            fork.extend_from_slice(b);
        }
        fork
    }

    #[test]
    fn zlib_resource_forks_decode_block_by_block_and_damage_is_refused() {
        // A stored block, then a zlib one (the zlib path is compared with
        // TSK in tests/apfs.rs).
        let first: Vec<u8> = (0..BLOCK as usize).map(|i| (i * 7 % 251) as u8).collect();
        let second = b"stored in the resource fork, compressed ".repeat(100);
        let mut stored = vec![0xff];
        stored.extend_from_slice(&first);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&second).unwrap();
        let fork = zlib_fork(&[stored, z.finish().unwrap()]);
        let mut want = first.clone();
        want.extend_from_slice(&second);
        let size = want.len() as u64;
        for step in [1000, 4096, 65536, 1 << 20] {
            assert_eq!(read_fork(ForkCodec::Zlib, &fork, size, step).unwrap(), want);
        }
        // Reads at any offset, backwards included, find their block.
        let content = crate::Content::Decmpfs {
            runs: vec![crate::Run::Data {
                offset: 0,
                len: fork.len() as u64,
            }],
            codec: ForkCodec::Zlib,
            size,
        };
        let r = crate::ContentReader::new(&fork[..], &content);
        for at in [size - 10, 65530, 3, 69_000] {
            let mut b = [0u8; 10];
            assert_eq!(r.read_at(&mut b, at).unwrap(), 10);
            assert_eq!(&b[..], &want[at as usize..at as usize + 10], "at {at}");
        }
        // More than the blocks hold, a cut fork, a damaged block.
        assert!(read_fork(ForkCodec::Zlib, &fork, size + 1, 4096).is_err());
        for cut in [0, 3, 0x104, 0x110, fork.len() - 1] {
            assert!(
                read_fork(ForkCodec::Zlib, &fork[..cut], size, 4096).is_err(),
                "cut at {cut}"
            );
        }
        let mut bad = fork.clone();
        let last = bad.len() - 20;
        bad[last] ^= 0x55;
        assert!(read_fork(ForkCodec::Zlib, &bad, size, 4096).is_err());
        // A first block short of 64 KiB would move every later byte.
        let short = zlib_fork(&[vec![0xff, 1, 2, 3], vec![0xff, 4]]);
        let e = read_fork(ForkCodec::Zlib, &short, 65537, 4096).unwrap_err();
        assert!(e.to_string().contains("block 0 decodes to 3 bytes"), "{e}");
        // A table claiming a block of 4 GiB.
        let mut huge = zlib_fork(&[vec![0xff, 1]]);
        huge[0x104 + 8..0x104 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_fork(ForkCodec::Zlib, &huge, 1, 4096).is_err());
    }

    #[test]
    fn lzvn_forks_refuse_tables_that_run_backwards_or_out() {
        let mut fork = Vec::new();
        for v in [12u32, 15, 13] {
            fork.extend_from_slice(&v.to_le_bytes());
        }
        fork.extend_from_slice(&[0x06, b'a', b'b']);
        assert_eq!(read_fork(ForkCodec::Lzvn, &fork, 2, 4096).unwrap(), b"ab");
        let e = read_fork(ForkCodec::Lzvn, &fork, 3, 4096).unwrap_err();
        assert!(e.to_string().contains("block 0 decodes to 2 bytes"), "{e}");
        assert_eq!(
            read_fork(ForkCodec::Lzvn, &fork[..12], 0, 4096).unwrap(),
            b""
        );
        // Block 1 runs from 15 back to 13.
        let content = crate::Content::Decmpfs {
            runs: vec![crate::Run::Data {
                offset: 0,
                len: fork.len() as u64,
            }],
            codec: ForkCodec::Lzvn,
            size: BLOCK + 1,
        };
        let r = crate::ContentReader::new(&fork[..], &content);
        let e = r.read_at(&mut [0u8; 1], BLOCK).unwrap_err();
        assert!(
            e.to_string().contains("ends (13) before it starts (15)"),
            "{e}"
        );
        fork[4..8].copy_from_slice(&100u32.to_le_bytes());
        let e = read_fork(ForkCodec::Lzvn, &fork, 2, 4096).unwrap_err();
        assert!(e.to_string().contains("past the fork's end"), "{e}");
    }
}
