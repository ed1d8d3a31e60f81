//! What EWF v1 and v2 share: positioned reads of a segment file that never
//! trust a length, zlib-compressed metadata inflated to a bound, and the
//! "serialized object" text (a count, an object name, a line of tags and a
//! line of values) both versions keep their case metadata in.

use std::io;

/// One segment file, read at positions. The engine's segments count every
/// read on the evidence channel; the tests use bytes in memory.
pub(super) trait SegmentRead: Send + Sync {
    /// Read into `buf` from `offset`; fewer bytes only at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// The file's length in bytes.
    fn len(&self) -> u64;
}

/// The little-endian u32 at `at` (the caller has checked the length).
pub(super) fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The little-endian u64 at `at` (the caller has checked the length).
pub(super) fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The first `N` bytes as an array, unless they are all zero (an EWF hash
/// section's way of saying "no hash").
pub(super) fn nonzero<const N: usize>(b: &[u8]) -> Option<[u8; N]> {
    let a: [u8; N] = b.get(..N)?.try_into().ok()?;
    a.iter().any(|&x| x != 0).then_some(a)
}

/// Most bytes of metadata (a header, device or case section) read or
/// inflated: real ones are a few hundred bytes; this bounds hostile sizes.
pub(super) const MAX_METADATA_BYTES: u64 = 1 << 20;

/// Read exactly `len` bytes at `offset` of segment `number` (1-based, for
/// the message), or say where and why not.
pub(super) fn read_exact(
    seg: &dyn SegmentRead,
    number: usize,
    offset: u64,
    len: u64,
    what: &str,
) -> Result<Vec<u8>, String> {
    offset
        .checked_add(len)
        .filter(|&end| end <= seg.len())
        .ok_or_else(|| {
            format!(
                "segment {number}: {what} at byte {offset} ({len} bytes) lies past the end of the file ({} bytes): truncated segment or corrupt offset",
                seg.len()
            )
        })?;
    let n = usize::try_from(len).map_err(|_| format!("segment {number}: {what} too large"))?;
    let mut buf = vec![0u8; n];
    let mut done = 0;
    while done < n {
        let got = seg
            .read_at(&mut buf[done..], offset + done as u64)
            .map_err(|e| format!("segment {number}: reading {what} at byte {offset}: {e}"))?;
        if got == 0 {
            return Err(format!(
                "segment {number}: {what} at byte {offset}: the file ends at byte {}",
                offset + done as u64
            ));
        }
        done += got;
    }
    Ok(buf)
}

/// Inflate zlib data to at most [`MAX_METADATA_BYTES`]; `None` when it is
/// not a complete zlib stream within that bound.
pub(super) fn inflate_bounded(data: &[u8]) -> Option<Vec<u8>> {
    use flate2::{Decompress, FlushDecompress, Status};
    let cap = MAX_METADATA_BYTES as usize;
    let mut out = Vec::with_capacity((data.len() * 4).min(cap));
    let mut z = Decompress::new(true);
    loop {
        let before_in = z.total_in();
        let before_out = z.total_out();
        if out.len() == out.capacity() {
            if out.len() >= cap {
                return None;
            }
            out.reserve((out.len().max(4096)).min(cap - out.len()));
        }
        let used = usize::try_from(z.total_in()).ok()?;
        match z.decompress_vec(data.get(used..)?, &mut out, FlushDecompress::Finish) {
            Ok(Status::StreamEnd) => return Some(out),
            Ok(_) if z.total_in() == before_in && z.total_out() == before_out => {
                if out.len() < out.capacity() {
                    // No progress with room left: the stream is cut short.
                    return None;
                }
            }
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

/// Text of a header section: UTF-16 little-endian when it starts with that
/// byte-order mark (EWF v1 `header2`, every v2 string), else one byte per
/// character (v1 `header`, written in the acquiring machine's code page,
/// read here as Latin-1 so that no byte is lost).
pub(super) fn decode_text(bytes: &[u8]) -> String {
    if let Some(rest) = bytes.strip_prefix(&[0xff, 0xfe]) {
        let units = rest
            .chunks_exact(2)
            .map(|p| u16::from_le_bytes([p[0], p[1]]));
        char::decode_utf16(units)
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    } else {
        bytes.iter().map(|&b| char::from(b)).collect()
    }
}

/// The tags and values of a serialized object's first object: line 3 holds
/// the tags, line 4 the values, tab-separated (both versions). Pairs with
/// an empty value are left out.
pub(super) fn object_values(text: &str) -> Vec<(String, String)> {
    let mut lines = text.split('\n').map(|l| l.trim_end_matches('\r'));
    let (Some(_count), Some(_name), Some(tags), Some(values)) =
        (lines.next(), lines.next(), lines.next(), lines.next())
    else {
        return Vec::new();
    };
    tags.split('\t')
        .zip(values.split('\t'))
        .filter(|(_, v)| !v.is_empty())
        .map(|(t, v)| (t.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn object_values_pairs_tags_with_values() {
        let text = "1\r\nmain\r\nc\tn\ta\te\r\ncase 7\t\tdisk\tJ. Doe\r\n\r\n";
        assert_eq!(
            object_values(text),
            vec![
                ("c".to_string(), "case 7".to_string()),
                ("a".to_string(), "disk".to_string()),
                ("e".to_string(), "J. Doe".to_string()),
            ]
        );
        assert!(object_values("1\nmain\n").is_empty());
    }

    #[test]
    fn text_is_utf16_after_a_byte_order_mark_and_latin1_otherwise() {
        let mut utf16 = vec![0xff, 0xfe];
        for u in "Müller\t1".encode_utf16() {
            utf16.extend_from_slice(&u.to_le_bytes());
        }
        assert_eq!(decode_text(&utf16), "Müller\t1");
        assert_eq!(decode_text(b"M\xfcller"), "Müller");
    }

    #[test]
    fn inflate_stops_at_its_bound_and_on_a_cut_stream() {
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"case data").unwrap();
        let good = enc.finish().unwrap();
        assert_eq!(inflate_bounded(&good).as_deref(), Some(&b"case data"[..]));
        assert_eq!(inflate_bounded(&good[..good.len() - 3]), None);
        let mut bomb = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        bomb.write_all(&vec![0u8; (MAX_METADATA_BYTES as usize) * 2])
            .unwrap();
        assert_eq!(inflate_bounded(&bomb.finish().unwrap()), None);
        assert_eq!(inflate_bounded(b"not zlib"), None);
    }
}
