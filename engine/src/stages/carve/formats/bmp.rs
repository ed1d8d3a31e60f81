//! Windows bitmaps: the 14-byte file header and the DIB header give the
//! length; the header fields must agree with each other. Pixel data has
//! nothing to check against, so complete bitmaps are `unchecked`.

use super::{Cut, Delimiter, Gather, Step, Validation, Verdict, le16, le32};

/// The format's row in [`super::FORMATS`].
pub const SPEC: super::FormatSpec = super::FormatSpec {
    name: "bmp",
    extension: "bmp",
    headers: &[super::Header::exact(b"BM")],
    max_size: 256 << 20,
    ends_at_own_header: false,
    identified_as: &["bmp"],
    delimiter: || Box::new(BmpDelimiter::new()),
    verifier: None,
};

/// File header plus the longest DIB header fields read (BITMAPINFOHEADER).
const HEAD: usize = 14 + 40;

/// The BMP delimiter.
#[derive(Debug)]
pub struct BmpDelimiter {
    gather: Gather,
    /// Declared file size, once the header is checked.
    size: Option<u64>,
    fed: u64,
}

impl BmpDelimiter {
    /// A delimiter for an item starting at `BM`.
    pub fn new() -> Self {
        let mut gather = Gather::default();
        gather.start(HEAD);
        BmpDelimiter {
            gather,
            size: None,
            fed: 0,
        }
    }
}

impl Default for BmpDelimiter {
    fn default() -> Self {
        Self::new()
    }
}

/// Checks the headers; the declared file size when they are consistent.
fn check(h: &[u8]) -> Option<u64> {
    let size = u64::from(le32(h, 2));
    let reserved = le32(h, 6);
    let offset = u64::from(le32(h, 10));
    let dib = le32(h, 14);
    if reserved != 0 || size < 26 {
        return None;
    }
    let (width, height, planes, bpp, compression) = match dib {
        12 => (
            i64::from(le16(h, 18)),
            i64::from(le16(h, 20)),
            le16(h, 22),
            le16(h, 24),
            0,
        ),
        40 | 52 | 56 | 64 | 108 | 124 => (
            i64::from(le32(h, 18) as i32),
            i64::from(le32(h, 22) as i32),
            le16(h, 26),
            le16(h, 28),
            le32(h, 30),
        ),
        _ => return None,
    };
    if planes != 1 || width <= 0 || height == 0 || !matches!(bpp, 1 | 2 | 4 | 8 | 16 | 24 | 32) {
        return None;
    }
    if offset < 14 + u64::from(dib) || offset > size {
        return None;
    }
    match compression {
        // Uncompressed (and bit-field) pixel data has a known size.
        0 | 3 | 6 => {
            let stride = (width as u64 * u64::from(bpp)).div_ceil(32) * 4;
            let pixels = stride.checked_mul(height.unsigned_abs())?;
            let end = offset.checked_add(pixels)?;
            // Writers may pad a little after the pixels (alignment).
            (end <= size && size - end <= 4096).then_some(size)
        }
        1 | 2 | 4 | 5 => Some(size),
        _ => None,
    }
}

impl Delimiter for BmpDelimiter {
    fn feed(&mut self, data: &[u8]) -> Step {
        let before = self.fed;
        self.fed += data.len() as u64;
        if self.size.is_none() {
            let mut at = 0;
            let Some(h) = self.gather.fill(data, &mut at) else {
                return Step::More;
            };
            match check(h) {
                Some(s) => self.size = Some(s),
                None => return Step::Reject,
            }
        }
        match self.size {
            Some(s) if s <= self.fed => Step::End {
                len: s.max(before),
                verdict: Verdict::new(
                    Validation::Unchecked,
                    "headers consistent; pixel data has nothing to check against",
                ),
            },
            _ => Step::More,
        }
    }

    fn finish(&mut self, cut: Cut, fed: u64) -> Step {
        let why = match cut {
            Cut::RangeEnd | Cut::NextHeader => "the scanned range ends before the declared size",
            Cut::MaxSize => "declared size above the maximum",
        };
        Step::cut_short(self.accepted(), fed, why)
    }

    fn accepted(&self) -> bool {
        self.size.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::end_of;
    use super::*;

    fn bmp(w: u32, h: u32) -> Vec<u8> {
        let stride = (w * 24).div_ceil(32) * 4;
        let size = 54 + stride * h;
        let mut b = b"BM".to_vec();
        b.extend_from_slice(&size.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&54u32.to_le_bytes());
        b.extend_from_slice(&40u32.to_le_bytes());
        b.extend_from_slice(&w.to_le_bytes());
        b.extend_from_slice(&h.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&24u16.to_le_bytes());
        b.extend_from_slice(&[0; 24]);
        b.resize(size as usize, 0x80);
        b
    }

    #[test]
    fn length_comes_from_the_header() {
        let b = bmp(5, 3);
        let mut data = b.clone();
        data.extend_from_slice(b"next");
        for chunk in [1, 10, 1000] {
            let (len, v) = end_of(&mut BmpDelimiter::new(), &data, chunk);
            assert_eq!((len, v), (b.len() as u64, Validation::Unchecked));
        }
        let (len, v) = end_of(&mut BmpDelimiter::new(), &b[..60], 7);
        assert_eq!((len, v), (60, Validation::Truncated));
    }

    #[test]
    fn inconsistent_headers_are_rejected() {
        let mut b = bmp(5, 3);
        b[26] = 2; // planes
        assert_eq!(BmpDelimiter::new().feed(&b), Step::Reject);
        let mut b = bmp(5, 3);
        b[2] -= 20; // size smaller than the pixels need
        assert_eq!(BmpDelimiter::new().feed(&b), Step::Reject);
        assert_eq!(BmpDelimiter::new().feed(b"BM\0\0\0\0\0\0\0\0"), Step::More);
    }
}
