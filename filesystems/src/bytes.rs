//! Bounds-checked little-endian field access. Every multi-byte field read
//! from evidence goes through these, so an offset taken from the evidence
//! can never index past the buffer: out-of-range reads give `None`.

pub(crate) fn u8_at(b: &[u8], off: usize) -> Option<u8> {
    b.get(off).copied()
}

pub(crate) fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    let s = b.get(off..off.checked_add(2)?)?;
    Some(u16::from_le_bytes([s[0], s[1]]))
}

pub(crate) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

/// `len` bytes at `off`, if all of them are inside `b`.
pub(crate) fn slice_at(b: &[u8], off: usize, len: usize) -> Option<&[u8]> {
    b.get(off..off.checked_add(len)?)
}

/// UTF-16LE code units from raw bytes (an odd trailing byte is ignored).
pub(crate) fn utf16_units(b: &[u8]) -> Vec<u16> {
    b.chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// Decodes UTF-16 code units, replacing unpaired surrogates with U+FFFD;
/// returns whether the decoding was exact.
pub(crate) fn decode_utf16(units: &[u16]) -> (String, bool) {
    let mut exact = true;
    let s = char::decode_utf16(units.iter().copied())
        .map(|r| {
            r.unwrap_or_else(|_| {
                exact = false;
                char::REPLACEMENT_CHARACTER
            })
        })
        .collect();
    (s, exact)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_fields_are_none() {
        let b = [1u8, 2, 3, 4, 5];
        assert_eq!(u16_at(&b, 3), Some(0x0504));
        assert_eq!(u16_at(&b, 4), None);
        assert_eq!(u32_at(&b, 1), Some(0x0504_0302));
        assert_eq!(u64_at(&b, 0), None);
        assert_eq!(u32_at(&b, usize::MAX), None);
        assert_eq!(slice_at(&b, 2, 3), Some(&b[2..5]));
        assert_eq!(slice_at(&b, 2, 4), None);
    }

    #[test]
    fn unpaired_surrogates_are_replaced_and_reported() {
        let (s, exact) = decode_utf16(&[0x61, 0xD800, 0x62]);
        assert_eq!(s, "a\u{FFFD}b");
        assert!(!exact);
        let (s, exact) = decode_utf16(&[0xD83D, 0xDE00]);
        assert_eq!(s, "\u{1F600}");
        assert!(exact);
    }
}
