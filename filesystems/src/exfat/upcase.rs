//! The up-case table: how the volume folds names to compare them (exFAT
//! names are stored as given and compared case-insensitively through this
//! table), used here to check each entry set's name hash.

use crate::bytes::utf16_units;

/// The largest table read: one mapping per UTF-16 unit, uncompressed
/// (128 KiB); anything longer is damage.
pub(crate) const MAX_TABLE_BYTES: u64 = 2 * 65_536;

/// A decoded up-case table: `map[u]` is the up-case of unit `u`; units
/// past its end map to themselves.
#[derive(Debug, Clone)]
pub struct Upcase {
    map: Vec<u16>,
}

impl Upcase {
    /// Decodes a stored table. Compressed tables hold 0xFFFF followed by a
    /// count of units that map to themselves.
    pub fn decode(bytes: &[u8]) -> Upcase {
        let mut map: Vec<u16> = Vec::with_capacity(65_536);
        let units = utf16_units(bytes);
        let mut it = units.iter().copied();
        while let Some(u) = it.next() {
            if map.len() >= 65_536 {
                break;
            }
            if u == 0xFFFF {
                let Some(n) = it.next() else { break };
                let start = map.len();
                let end = (start + usize::from(n)).min(65_536);
                map.extend((start..end).map(|v| v as u16));
            } else {
                map.push(u);
            }
        }
        Upcase { map }
    }

    /// A table for volumes whose own cannot be read: ASCII folding plus
    /// Unicode's simple one-unit upper-case mappings (what the
    /// specification's recommended table holds).
    pub fn fallback() -> Upcase {
        let map = (0..=0xFFFFu32)
            .map(|u| {
                let Some(c) = char::from_u32(u) else {
                    return u as u16;
                };
                let mut up = c.to_uppercase();
                match (up.next(), up.next()) {
                    (Some(x), None) if u32::from(x) <= 0xFFFF => u32::from(x) as u16,
                    _ => u as u16,
                }
            })
            .collect();
        Upcase { map }
    }

    /// The up-case of one unit.
    pub fn up(&self, u: u16) -> u16 {
        self.map.get(usize::from(u)).copied().unwrap_or(u)
    }

    /// The up-cased form of a name.
    pub fn up_name(&self, units: &[u16]) -> Vec<u16> {
        units.iter().map(|&u| self.up(u)).collect()
    }

    /// Whether two names are the same name to exFAT.
    pub fn same_name(&self, a: &[u16], b: &[u16]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(&x, &y)| self.up(x) == self.up(y))
    }
}

/// The table checksum the up-case entry stores: a rotating 32-bit sum of
/// every byte of the table as stored.
pub fn table_checksum(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0u32, |sum, &b| {
        sum.rotate_right(1).wrapping_add(u32::from(b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_runs_expand_and_names_fold() {
        // 0..0x61 identity, then 'A'..='Z' for 'a'..='z', then identity.
        let mut units = vec![0xFFFFu16, 0x61];
        units.extend(0x41..=0x5A);
        units.extend([0xFFFF, 0xFF00]);
        let bytes: Vec<u8> = units.iter().flat_map(|u| u.to_le_bytes()).collect();
        let t = Upcase::decode(&bytes);
        assert_eq!(t.up(u16::from(b'a')), u16::from(b'A'));
        assert_eq!(t.up(u16::from(b'0')), u16::from(b'0'));
        assert_eq!(t.up(0xE9), 0xE9);
        let a: Vec<u16> = "Report.TXT".encode_utf16().collect();
        let b: Vec<u16> = "REPORT.txt".encode_utf16().collect();
        assert!(t.same_name(&a, &b));
        let f = Upcase::fallback();
        assert_eq!(f.up(0xE9), 0xC9);
        assert_eq!(f.up(u16::from(b'z')), u16::from(b'Z'));
        // A truncated compressed run ends the table without a panic.
        let t = Upcase::decode(&[0xFF, 0xFF]);
        assert_eq!(t.up(5), 5);
    }
}
