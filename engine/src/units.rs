//! Byte sizes as people write them (`4GiB`, `1500MiB`, `2TB`): on the
//! command line, in layout, workload and lab files.

/// Parse a byte size such as `4GiB`, `1500MiB`, `32M`, `2TB`, `512` (bytes).
///
/// Binary suffixes (`KiB`, `MiB`, `GiB`, `TiB`, and the bare `K`, `M`, `G`,
/// `T` that forensic tools use) are powers of 1024; decimal ones (`kB`,
/// `MB`, `GB`, `TB`) are powers of 1000, as on a drive's label.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if number.is_empty() {
        return Err(format!(
            "`{text}` is not a size (expected e.g. 4GiB, 1500MiB)"
        ));
    }
    let multiplier: u64 = match unit.trim() {
        "" | "B" | "b" => 1,
        "K" | "k" | "KiB" | "kiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => return Err(format!("unknown size unit `{other}` in `{text}`")),
    };
    let value = if number.contains('.') {
        let f: f64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a size"))?;
        let bytes = f * multiplier as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(format!("`{text}` is out of range"));
        }
        bytes.round() as u64
    } else {
        let n: u64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a size"))?;
        n.checked_mul(multiplier)
            .ok_or_else(|| format!("`{text}` is out of range"))?
    };
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("32MiB"), Ok(32 << 20));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("1500M"), Ok(1500 << 20));
        assert_eq!(parse_size("2TB"), Ok(2_000_000_000_000));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert!(parse_size("GiB").is_err());
        assert!(parse_size("4XB").is_err());
        assert!(parse_size("99999999999999TiB").is_err());
    }
}
