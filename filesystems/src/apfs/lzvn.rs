//! LZVN, the LZ77 coding of APFS/HFS+ compressed files (decmpfs types 7
//! and 8), decoded here: the opcode classes and fields of Apple's
//! `lzvn_decode_base.c` (lzfse, which TSK 4.11 carries as `lzvn.c`). The
//! `lzfse_rust` crate decodes LZVN too, inside a streaming LZFSE engine
//! with its own buffers; a decmpfs block needs only a bounded slice-to-Vec
//! decoder that refuses every out-of-range distance and truncated opcode.

/// Why a stream does not decode.
pub type Error = String;

/// Decodes `src` (one stream, up to its end-of-stream opcode or its last
/// byte) into at most `max` bytes.
pub fn decode(src: &[u8], max: usize) -> Result<Vec<u8>, Error> {
    let mut out: Vec<u8> = Vec::with_capacity(max.min(1 << 16));
    let mut i = 0usize;
    let mut prev_d = 0usize;
    let byte = |at: usize| {
        src.get(at)
            .copied()
            .ok_or_else(|| format!("opcode cut short at {at}"))
    };
    while i < src.len() {
        let opc = src[i];
        let (len, l, m, d): (usize, usize, usize, Option<usize>) = match opc {
            0x06 => return Ok(out),
            0x0e | 0x16 => (1, 0, 0, None),
            0x70..=0x7f | 0xd0..=0xdf => return Err(format!("undefined opcode {opc:#04x} at {i}")),
            0x1e | 0x26 | 0x2e | 0x36 | 0x3e => {
                return Err(format!("undefined opcode {opc:#04x} at {i}"));
            }
            0xa0..=0xbf => {
                let b1 = usize::from(byte(i + 1)?);
                let b2 = usize::from(byte(i + 2)?);
                let w = b1 | b2 << 8;
                let l = usize::from(opc >> 3 & 3);
                let m = ((usize::from(opc & 7) << 2) | (w & 3)) + 3;
                (3, l, m, Some(w >> 2))
            }
            0xe0 => (2, usize::from(byte(i + 1)?) + 16, 0, None),
            0xe1..=0xef => (1, usize::from(opc & 0xf), 0, None),
            0xf0 => (2, 0, usize::from(byte(i + 1)?) + 16, Some(prev_d)),
            0xf1..=0xff => (1, 0, usize::from(opc & 0xf), Some(prev_d)),
            _ => {
                let l = usize::from(opc >> 6);
                let m = usize::from(opc >> 3 & 7) + 3;
                match opc & 7 {
                    6 => (1, l, m, Some(prev_d)),
                    7 => {
                        let d = usize::from(byte(i + 1)?) | usize::from(byte(i + 2)?) << 8;
                        (3, l, m, Some(d))
                    }
                    low => (
                        2,
                        l,
                        m,
                        Some(usize::from(low) << 8 | usize::from(byte(i + 1)?)),
                    ),
                }
            }
        };
        i += len;
        let lit = src
            .get(i..i + l)
            .ok_or_else(|| format!("literal of {l} bytes at {i} past the end"))?;
        if out.len() + l + m > max {
            return Err(format!("decodes to more than {max} bytes"));
        }
        out.extend_from_slice(lit);
        i += l;
        if let Some(d) = d {
            if d == 0 || d > out.len() {
                return Err(format!(
                    "match distance {d} with {} bytes decoded",
                    out.len()
                ));
            }
            let from = out.len() - d;
            for k in 0..m {
                let b = out[from + k];
                out.push(b);
            }
            prev_d = d;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libfsapfs's test vector (tests/fsapfs_test_compression.c).
    #[test]
    fn decodes_the_libfsapfs_vector_and_refuses_damage() {
        let mut src = vec![0xe0, 0x00];
        src.extend(0u8..16);
        src.push(0x06);
        assert_eq!(
            decode(&src, 1 << 16).unwrap(),
            (0u8..16).collect::<Vec<u8>>()
        );
        // Literals, a match at distance 3 (sml_d), the previous distance
        // again (sml_m), end of stream.
        let s = [
            0xe3,
            b'a',
            b'b',
            b'c',
            3 << 3,
            3,
            0xf2,
            0x06,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        assert_eq!(decode(&s, 100).unwrap(), b"abcabcabcab");
        assert!(decode(&s, 5).is_err());
        assert!(
            decode(&[0x00, 0x05], 100).is_err(),
            "distance before the start"
        );
        assert!(decode(&[0x70], 100).is_err());
        assert!(decode(&[0xe5, b'a'], 100).is_err(), "literal past the end");
        assert!(decode(&[0xa0, 1], 100).is_err(), "opcode cut short");
    }
}
