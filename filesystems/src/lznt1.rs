//! LZNT1, the compression of NTFS compressed streams, decoded here because
//! the `ntfs` crate does not decode compressed attributes.
//!
//! A compression unit holds chunks of at most 4096 decoded bytes, each with
//! a 2-byte header: bits 0-11 are the stored size minus 3 (header included),
//! bit 15 says whether the chunk is compressed. A compressed chunk is a
//! sequence of flag bytes, each followed by eight tokens: a literal byte
//! (flag bit 0) or a 2-byte back-reference (flag bit 1) whose split between
//! offset and length bits depends on how far into the chunk it is.

/// Largest decoded chunk.
const CHUNK: usize = 4096;

/// Decodes one compression unit, appending at most `limit` bytes to `out`.
/// Stops at a zero chunk header or the end of `input`. Damaged data (a
/// chunk running past the input, a back-reference before the chunk start or
/// past its 4096 bytes) is an error; `out` then holds what decoded cleanly.
pub fn decompress(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), String> {
    let end = out.len().saturating_add(limit);
    let mut pos = 0usize;
    while pos + 2 <= input.len() && out.len() < end {
        let header = u16::from_le_bytes([input[pos], input[pos + 1]]);
        if header == 0 {
            break;
        }
        let stored = usize::from(header & 0x0FFF) + 1;
        let Some(chunk) = input.get(pos + 2..pos + 2 + stored) else {
            return Err(format!(
                "LZNT1 chunk at {pos} claims {stored} bytes, past the unit"
            ));
        };
        if header & 0x8000 == 0 {
            let n = chunk.len().min(end - out.len());
            out.extend_from_slice(&chunk[..n]);
        } else {
            decompress_chunk(chunk, out, end).map_err(|e| format!("LZNT1 chunk at {pos}: {e}"))?;
        }
        pos += 2 + stored;
    }
    Ok(())
}

fn decompress_chunk(chunk: &[u8], out: &mut Vec<u8>, end: usize) -> Result<(), String> {
    let start = out.len();
    let mut i = 0usize;
    while i < chunk.len() {
        let flags = chunk[i];
        i += 1;
        for bit in 0..8 {
            if i >= chunk.len() || out.len() >= end {
                return Ok(());
            }
            if flags & (1 << bit) == 0 {
                out.push(chunk[i]);
                i += 1;
                continue;
            }
            let Some(t) = chunk.get(i..i + 2) else {
                return Err("back-reference truncated".into());
            };
            let token = usize::from(u16::from_le_bytes([t[0], t[1]]));
            i += 2;
            let p = out.len() - start;
            if p == 0 {
                return Err("back-reference at the start of a chunk".into());
            }
            // Offset bits grow (and length bits shrink) as the position in
            // the chunk passes each power of two from 16.
            let mut shift = 12;
            let mut x = p - 1;
            while x >= 0x10 {
                shift -= 1;
                x >>= 1;
            }
            let offset = (token >> shift) + 1;
            let length = (token & ((1 << shift) - 1)) + 3;
            if offset > p {
                return Err(format!("back-reference {offset} bytes back at {p}"));
            }
            if p + length > CHUNK {
                return Err(format!(
                    "back-reference of {length} at {p} overruns the chunk"
                ));
            }
            for _ in 0..length.min(end - out.len()) {
                let b = out[out.len() - offset];
                out.push(b);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_and_overlapping_back_references() {
        // "abc" then a back-reference of offset 3, length 6 -> "abcabcabc".
        // At position 3 the split is 4 offset bits / 12 length bits:
        // token = ((3 - 1) << 12) | (6 - 3).
        let token: u16 = (2 << 12) | 3;
        let body = [
            0b0000_1000,
            b'a',
            b'b',
            b'c',
            token as u8,
            (token >> 8) as u8,
        ];
        let header: u16 = 0xB000 | (body.len() as u16 + 2 - 3);
        let mut input = header.to_le_bytes().to_vec();
        input.extend_from_slice(&body);
        let mut out = Vec::new();
        decompress(&input, &mut out, 4096).unwrap();
        assert_eq!(out, b"abcabcabc");
        // The limit cuts the output.
        let mut short = Vec::new();
        decompress(&input, &mut short, 5).unwrap();
        assert_eq!(short, b"abcab");
    }

    #[test]
    fn damaged_units_are_errors_not_panics() {
        // Back-reference pointing before the chunk start.
        let token: u16 = 15 << 12;
        let body = [0b0000_0010, b'a', token as u8, (token >> 8) as u8];
        let header: u16 = 0xB000 | (body.len() as u16 - 1);
        let mut input = header.to_le_bytes().to_vec();
        input.extend_from_slice(&body);
        assert!(decompress(&input, &mut Vec::new(), 4096).is_err());
        // A chunk claiming more bytes than there are.
        assert!(decompress(&[0xFF, 0xBF, 1, 2], &mut Vec::new(), 4096).is_err());
        // Uncompressed chunk.
        let mut raw = (0x3000u16 | 2).to_le_bytes().to_vec();
        raw.extend_from_slice(b"xyz");
        let mut out = Vec::new();
        decompress(&raw, &mut out, 4096).unwrap();
        assert_eq!(out, b"xyz");
    }
}
