//! Compressed files (`com.apple.decmpfs`), as The Sleuth Kit 4.11 reads
//! them: a 16-byte header (`fpmc` magic, compression type, uncompressed
//! size) and, for the inline types, the compressed bytes after it.
//!
//! - Type 3 (zlib, inline): decoded here. A first byte whose low nibble
//!   is 0xF marks bytes stored uncompressed after it (TSK's rule).
//! - Type 7 (LZVN, inline): a first byte of 0x06 marks bytes stored
//!   uncompressed (decoded here); LZVN itself is not decoded.
//! - Types 4 (zlib) and 8 (LZVN) keep the compressed bytes in the
//!   `com.apple.ResourceFork` attribute's stream: reported with those
//!   stored runs, not decoded.
//! - Other types TSK does not read either.

use std::io::Read;

use crate::bytes::{u32_at, u64_at};

/// `fpmc` in little-endian.
const MAGIC: u32 = 0x636d_7066;
/// Most bytes an inline attribute is decoded to (an inline attribute holds
/// at most 3,804 compressed bytes; more output than this is refused).
pub const MAX_INLINE_OUTPUT: u64 = 16 << 20;

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
pub fn decode_inline(attr: &[u8], h: &Header) -> Decoded {
    let body = attr.get(16..).unwrap_or(&[]);
    if h.size > MAX_INLINE_OUTPUT {
        return Decoded::NotDecoded(format!(
            "inline compressed data of {} bytes is over the {MAX_INLINE_OUTPUT}-byte limit",
            h.size
        ));
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
        7 => Decoded::NotDecoded("LZVN-compressed (type 7) content is not decoded".into()),
        4 | 8 => Decoded::ResourceFork,
        k => Decoded::NotDecoded(format!(
            "compression type {k} is not read (TSK reads 3, 4, 7 and 8)"
        )),
    }
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
        assert_eq!(decode_inline(&a, &h), Decoded::Bytes(text.to_vec()));
        let mut raw = vec![0xff];
        raw.extend_from_slice(text);
        let a = attr(3, text.len() as u64, &raw);
        assert_eq!(
            decode_inline(&a, &header(&a).unwrap()),
            Decoded::Bytes(text.to_vec())
        );
        let a = attr(3, 100, &[0x78, 0x9c, 1, 2, 3]);
        assert!(matches!(
            decode_inline(&a, &header(&a).unwrap()),
            Decoded::NotDecoded(_)
        ));
        let a = attr(4, 100, &[]);
        assert_eq!(
            decode_inline(&a, &header(&a).unwrap()),
            Decoded::ResourceFork
        );
        let a = attr(3, u64::MAX, &[]);
        assert!(matches!(
            decode_inline(&a, &header(&a).unwrap()),
            Decoded::NotDecoded(_)
        ));
        assert!(header(b"fpm").is_none());
    }
}
