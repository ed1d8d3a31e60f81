//! CRC-32C (Castagnoli), as ext4's `metadata_csum` uses it: the raw
//! update, without the usual pre- and post-inversion (ext4 seeds with
//! `!0` once, from the UUID, and stores the raw register).

/// Feeds `data` into the raw CRC-32C register `crc`. The `crc32c` crate
/// inverts before and after; undone here.
pub(crate) fn update(crc: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!crc, data)
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
