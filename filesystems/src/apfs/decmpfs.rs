//! Compressed files (`com.apple.decmpfs`), as The Sleuth Kit 4.11 reads
//! them: a 16-byte header (`fpmc` magic, compression type, uncompressed
//! size) and, for the inline types, the compressed bytes after it.
//!
//! - Type 3 (zlib, inline): decoded here. A first byte whose low nibble
//!   is 0xF marks bytes stored uncompressed after it (TSK's rule).
//! - Type 7 (LZVN, inline): decoded here ([`super::lzvn`]); a first byte
//!   of 0x06 marks bytes stored uncompressed.
//! - Type 4 (zlib in the `com.apple.ResourceFork` attribute's stream):
//!   decoded here ([`decode_zlib_fork`]) as TSK reads it: the fork's
//!   big-endian data offset, a little-endian table of 64 KiB blocks after
//!   it, each block zlib or (low nibble 0xF) stored. Files decoding to more
//!   than the caller's limit are reported with the fork's stored runs.
//! - Type 8 (LZVN in the resource fork): decoded here
//!   ([`decode_lzvn_fork`]): a little-endian table of block offsets at
//!   the fork's start (its first entry is the table's size), each block
//!   LZVN or (first byte 0x06) stored.
//! - Other types (stored 9 and 10, LZFSE 11 and 12) TSK does not read
//!   either: reported, not decoded.

use std::io::Read;

use crate::bytes::{u32_at, u64_at};

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
    /// The bytes live in the resource fork (types 4 and 8).
    ResourceFork,
    /// Not decoded, and why.
    NotDecoded(String),
}

/// Decodes an inline decmpfs attribute (header included) whose header
/// says `h`.
pub fn decode_inline(attr: &[u8], h: &Header, limit: u64) -> Decoded {
    let body = attr.get(16..).unwrap_or(&[]);
    if matches!(h.kind, 4 | 8) {
        return Decoded::ResourceFork;
    }
    if let Some(why) = over(h.size, limit) {
        return Decoded::NotDecoded(why);
    }
    let want = h.size as usize;
    match h.kind {
        3 => {
            if body.first().is_some_and(|b| b & 0x0f == 0x0f) {
                return exact(body.get(1..).unwrap_or(&[]), want);
            }
            let mut out = Vec::new();
            let mut z = flate2::read::ZlibDecoder::new(body).take(h.size);
            match z.read_to_end(&mut out) {
                Ok(_) if out.len() == want => Decoded::Bytes(out),
                Ok(_) => Decoded::NotDecoded(format!(
                    "zlib data decodes to {} bytes, not the {want} the header gives",
                    out.len()
                )),
                Err(e) => Decoded::NotDecoded(format!("zlib data does not decode: {e}")),
            }
        }
        7 if body.first() == Some(&0x06) => exact(body.get(1..).unwrap_or(&[]), want),
        7 => match super::lzvn::decode(body, want) {
            Ok(out) if out.len() == want => Decoded::Bytes(out),
            Ok(out) => Decoded::NotDecoded(format!(
                "LZVN data decodes to {} bytes, not the {want} the header gives",
                out.len()
            )),
            Err(e) => Decoded::NotDecoded(format!("LZVN data does not decode: {e}")),
        },
        4 | 8 => Decoded::ResourceFork,
        k => Decoded::NotDecoded(format!(
            "compression type {k} is not read (TSK reads 3, 4, 7 and 8)"
        )),
    }
}

/// Bytes one resource-fork block decodes to at most.
const UNIT: usize = 65536;

/// Decodes a type-4 resource fork (`fork`, the whole stream) to the
/// `size` bytes its decmpfs header gives.
pub fn decode_zlib_fork(fork: &[u8], size: u64, limit: u64) -> Decoded {
    if let Some(why) = over(size, limit) {
        return Decoded::NotDecoded(why);
    }
    let be32 = |o: usize| {
        fork.get(o..o.checked_add(4)?)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let Some(data) = be32(0).map(|d| d as usize + 4) else {
        return Decoded::NotDecoded("resource fork shorter than its header".into());
    };
    let Some(count) = u32_at(fork, data) else {
        return Decoded::NotDecoded(format!("block table at {data} past the fork's end"));
    };
    let want = size as usize;
    if (count as usize).saturating_mul(UNIT) < want {
        return Decoded::NotDecoded(format!(
            "{count} blocks cannot hold the {want} bytes the header gives"
        ));
    }
    let mut out = Vec::with_capacity(want);
    for i in 0..count as usize {
        if out.len() >= want {
            break;
        }
        let e = data + 4 + 8 * i;
        let (Some(off), Some(len)) = (u32_at(fork, e), u32_at(fork, e + 4)) else {
            return Decoded::NotDecoded(format!("block table entry {i} past the fork's end"));
        };
        let start = data.saturating_add(off as usize);
        let Some(block) = fork.get(start..start.saturating_add(len as usize)) else {
            return Decoded::NotDecoded(format!(
                "block {i} ({len} bytes at {start}) past the fork's end"
            ));
        };
        let room = (want - out.len()).min(UNIT);
        match block.first() {
            None => {}
            Some(b) if b & 0x0f == 0x0f => {
                let raw = &block[1..];
                out.extend_from_slice(&raw[..raw.len().min(room)]);
            }
            Some(_) => {
                let before = out.len();
                let mut z = flate2::read::ZlibDecoder::new(block).take(room as u64);
                if let Err(e) = z.read_to_end(&mut out) {
                    return Decoded::NotDecoded(format!("block {i} does not decode: {e}"));
                }
                if out.len() == before {
                    return Decoded::NotDecoded(format!("block {i} decodes to nothing"));
                }
            }
        }
    }
    if out.len() != want {
        return Decoded::NotDecoded(format!(
            "resource fork decodes to {} bytes, not the {want} the header gives",
            out.len()
        ));
    }
    Decoded::Bytes(out)
}

/// Decodes a type-8 resource fork (`fork`, the whole stream) to the
/// `size` bytes its decmpfs header gives.
pub fn decode_lzvn_fork(fork: &[u8], size: u64, limit: u64) -> Decoded {
    if let Some(why) = over(size, limit) {
        return Decoded::NotDecoded(why);
    }
    let want = size as usize;
    let Some(table) = u32_at(fork, 0).map(|t| t as usize) else {
        return Decoded::NotDecoded("resource fork shorter than its block table".into());
    };
    let blocks = (table / 4).saturating_sub(1);
    if blocks.saturating_mul(UNIT) < want {
        return Decoded::NotDecoded(format!(
            "{blocks} blocks cannot hold the {want} bytes the header gives"
        ));
    }
    let mut out = Vec::with_capacity(want);
    for i in 0..blocks {
        if out.len() >= want {
            break;
        }
        let (Some(a), Some(b)) = (u32_at(fork, 4 * i), u32_at(fork, 4 * i + 4)) else {
            return Decoded::NotDecoded(format!("block table entry {i} past the fork's end"));
        };
        let Some(block) = fork.get(a as usize..b as usize) else {
            return Decoded::NotDecoded(format!("block {i} ({a}..{b}) outside the fork"));
        };
        let room = (want - out.len()).min(UNIT);
        match block.first() {
            None => {}
            Some(0x06) => {
                let raw = &block[1..];
                out.extend_from_slice(&raw[..raw.len().min(room)]);
            }
            Some(_) => match super::lzvn::decode(block, room) {
                Ok(b) => out.extend_from_slice(&b),
                Err(e) => return Decoded::NotDecoded(format!("block {i}: {e}")),
            },
        }
    }
    if out.len() != want {
        return Decoded::NotDecoded(format!(
            "resource fork decodes to {} bytes, not the {want} the header gives",
            out.len()
        ));
    }
    Decoded::Bytes(out)
}

/// Why `size` decoded bytes are not held, if they are over `limit`.
fn over(size: u64, limit: u64) -> Option<String> {
    let limit = limit.min(MAX_OUTPUT);
    (size > limit).then(|| {
        format!("{size} bytes decoded would be over the {limit}-byte limit for decoded content held in a record")
    })
}

fn exact(b: &[u8], want: usize) -> Decoded {
    match b.get(..want) {
        Some(s) => Decoded::Bytes(s.to_vec()),
        None => Decoded::NotDecoded(format!(
            "{} stored bytes, fewer than the {want} the header gives",
            b.len()
        )),
    }
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
            Decoded::ResourceFork
        );
        let a = attr(3, u64::MAX, &[]);
        assert!(matches!(
            decode_inline(&a, &header(&a).unwrap(), MAX_OUTPUT),
            Decoded::NotDecoded(_)
        ));
        assert!(header(b"fpm").is_none());
    }

    #[test]
    fn zlib_resource_forks_decode_and_damage_is_refused() {
        // One stored block (the zlib path is compared with TSK in
        // tests/apfs.rs).
        let data = b"stored in the resource fork".to_vec();
        let mut fork = vec![0u8; 0x104];
        fork[..4].copy_from_slice(&0x100u32.to_be_bytes());
        fork.extend_from_slice(&1u32.to_le_bytes());
        fork.extend_from_slice(&12u32.to_le_bytes());
        fork.extend_from_slice(&(data.len() as u32 + 1).to_le_bytes());
        fork.push(0xff);
        fork.extend_from_slice(&data);
        assert_eq!(
            decode_zlib_fork(&fork, data.len() as u64, MAX_OUTPUT),
            Decoded::Bytes(data.clone())
        );
        assert!(matches!(
            decode_zlib_fork(&fork, data.len() as u64 + 1, MAX_OUTPUT),
            Decoded::NotDecoded(_)
        ));
        for cut in [0, 3, 0x104, 0x110, fork.len() - 1] {
            assert!(matches!(
                decode_zlib_fork(&fork[..cut], data.len() as u64, MAX_OUTPUT),
                Decoded::NotDecoded(_)
            ));
        }
        let mut bad = fork.clone();
        bad[0x104 + 8] = 0xff;
        assert!(matches!(
            decode_zlib_fork(&bad, data.len() as u64, MAX_OUTPUT),
            Decoded::NotDecoded(_)
        ));
    }
}
