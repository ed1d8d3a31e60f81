//! CRC-32C (Castagnoli), as ext4's `metadata_csum` uses it: the raw
//! update, without the usual pre- and post-inversion (ext4 seeds with
//! `!0` once, from the UUID, and stores the raw register).

const POLY: u32 = 0x82F6_3B78;

const fn table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static TABLE: [u32; 256] = table();

/// Feeds `data` into the raw CRC-32C register `crc`.
pub(crate) fn update(mut crc: u32, data: &[u8]) -> u32 {
    for &b in data {
        crc = TABLE[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_check_value() {
        // CRC-32C("123456789") = 0xE3069283 with the usual inversions.
        assert_eq!(!update(!0, b"123456789"), 0xE306_9283);
    }
}
