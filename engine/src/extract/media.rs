//! Text carried by images: JPEG comment (COM) segments, PNG text chunks
//! (tEXt, zTXt, iTXt) and GIF comment extensions. Pixel data is never
//! read as text. A comment that is not text (an embedded thumbnail or
//! padding stored as a comment) is skipped.

use super::Extraction;
use super::text::push_latin1;
use std::io::Read;

/// Whether the bytes start like a JPEG, PNG or GIF.
pub fn is_image(head: &[u8]) -> bool {
    head.starts_with(&[0xFF, 0xD8, 0xFF])
        || head.starts_with(b"\x89PNG\r\n\x1a\n")
        || head.starts_with(b"GIF87a")
        || head.starts_with(b"GIF89a")
}

/// Whether a comment's bytes are text (mostly printable).
fn texty(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return false;
    }
    let printable = bytes
        .iter()
        .filter(|&&b| (0x20..0x7F).contains(&b) || matches!(b, b'\t' | b'\n' | b'\r') || b >= 0xA0)
        .count();
    printable * 10 >= bytes.len() * 9
}

fn push_comment(x: &mut Extraction<'_>, bytes: &[u8]) {
    if texty(bytes) {
        let mut s = String::with_capacity(bytes.len());
        match std::str::from_utf8(bytes) {
            Ok(t) => s.push_str(t),
            Err(_) => push_latin1(bytes, &mut s),
        }
        x.emit(&s);
        x.separate();
    }
}

/// Extract an image's comments.
pub fn extract(x: &mut Extraction<'_>, data: &[u8], _depth: u32) {
    if data.starts_with(&[0xFF, 0xD8]) {
        jpeg(x, data);
    } else if data.starts_with(b"\x89PNG") {
        png(x, data);
    } else {
        gif(x, data);
    }
}

fn jpeg(x: &mut Extraction<'_>, data: &[u8]) {
    let mut i = 2;
    while i + 4 <= data.len() {
        if data[i] != 0xFF {
            x.problem(format!(
                "JPEG: no marker at byte {i}; comments after it not read"
            ));
            return;
        }
        let marker = data[i + 1];
        if marker == 0xFF {
            i += 1; // fill byte
            continue;
        }
        if marker == 0xD9 || marker == 0xDA {
            return; // end of image, or scan data follows
        }
        if (0xD0..=0xD7).contains(&marker) || marker == 0x01 {
            i += 2;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([data[i + 2], data[i + 3]]));
        if len < 2 || i + 2 + len > data.len() {
            x.problem(format!("JPEG: segment at byte {i} runs past the end"));
            return;
        }
        if marker == 0xFE {
            push_comment(x, &data[i + 4..i + 2 + len]);
        }
        i += 2 + len;
    }
}

fn png(x: &mut Extraction<'_>, data: &[u8]) {
    let mut i = 8;
    while i + 12 <= data.len() {
        let len = u32::from_be_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]) as usize;
        let kind = &data[i + 4..i + 8];
        let Some(end) = (i + 8).checked_add(len).filter(|&e| e + 4 <= data.len()) else {
            x.problem(format!("PNG: chunk at byte {i} runs past the end"));
            return;
        };
        let body = &data[i + 8..end];
        match kind {
            b"tEXt" => {
                if let Some(z) = memchr::memchr(0, body) {
                    push_comment(x, &body[z + 1..]);
                }
            }
            b"zTXt" => {
                if let Some(z) = memchr::memchr(0, body) {
                    let compressed = body.get(z + 2..).unwrap_or_default();
                    inflate_comment(x, compressed);
                }
            }
            b"iTXt" => itxt(x, body),
            b"IEND" => return,
            _ => {}
        }
        i = end + 4;
    }
}

fn itxt(x: &mut Extraction<'_>, body: &[u8]) {
    let Some(z) = memchr::memchr(0, body) else {
        return;
    };
    let (Some(&flag), Some(_method)) = (body.get(z + 1), body.get(z + 2)) else {
        return;
    };
    let rest = body.get(z + 3..).unwrap_or_default();
    // Language tag and translated keyword, each NUL-terminated.
    let Some(a) = memchr::memchr(0, rest) else {
        return;
    };
    let rest = &rest[a + 1..];
    let Some(b) = memchr::memchr(0, rest) else {
        return;
    };
    let text = &rest[b + 1..];
    if flag == 1 {
        inflate_comment(x, text);
    } else {
        push_comment(x, text);
    }
}

fn inflate_comment(x: &mut Extraction<'_>, compressed: &[u8]) {
    let cap = x.expansion_left().min(x.member_cap(1) as u64);
    let mut out = Vec::new();
    let mut z = flate2::read::ZlibDecoder::new(compressed).take(cap.saturating_add(1));
    if let Err(e) = z.read_to_end(&mut out) {
        x.problem(format!("PNG: compressed text chunk: {e}"));
    }
    if x.expand(out.len() as u64) {
        push_comment(x, &out);
    }
}

fn gif(x: &mut Extraction<'_>, data: &[u8]) {
    if data.len() < 13 {
        return;
    }
    let packed = data[10];
    let mut i = 13;
    if packed & 0x80 != 0 {
        i += 3usize << ((packed & 7) + 1);
    }
    // Sub-blocks: length byte, data, ... up to a zero length.
    let sub_blocks = |mut j: usize, keep: &mut Option<Vec<u8>>| -> Option<usize> {
        loop {
            let n = usize::from(*data.get(j)?);
            j += 1;
            if n == 0 {
                return Some(j);
            }
            let block = data.get(j..j + n)?;
            if let Some(k) = keep {
                k.extend_from_slice(block);
            }
            j += n;
        }
    };
    while let Some(&b) = data.get(i) {
        match b {
            0x21 => {
                let label = data.get(i + 1).copied();
                let mut keep = (label == Some(0xFE)).then(Vec::new);
                match sub_blocks(i + 2, &mut keep) {
                    Some(next) => i = next,
                    None => {
                        x.problem("GIF: extension runs past the end");
                        return;
                    }
                }
                if let Some(text) = keep {
                    push_comment(x, &text);
                }
            }
            0x2C => {
                let Some(&flags) = data.get(i + 9) else {
                    return;
                };
                let mut j = i + 10;
                if flags & 0x80 != 0 {
                    j += 3usize << ((flags & 7) + 1);
                }
                // LZW minimum code size, then the image's sub-blocks.
                match sub_blocks(j + 1, &mut None) {
                    Some(next) => i = next,
                    None => {
                        x.problem("GIF: image data runs past the end");
                        return;
                    }
                }
            }
            0x3B => return,
            _ => {
                x.problem(format!("GIF: unknown block 0x{b:02x} at byte {i}"));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Extraction, Limits};
    use super::*;

    fn run(data: &[u8]) -> String {
        let limits = Limits::default();
        let mut out = String::new();
        let mut x = Extraction::new(&limits, &mut out);
        extract(&mut x, data, 0);
        out
    }

    #[test]
    fn jpeg_png_gif_comments() {
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xFE, 0x00, 0x0D];
        jpeg.extend_from_slice(b"jpeg note x");
        jpeg.extend_from_slice(&[0xFF, 0xFE, 0x00, 0x06, 0x00, 0x01, 0x02, 0x03]);
        jpeg.extend_from_slice(&[0xFF, 0xDA, 0x00, 0x02, 0xFF, 0xD9]);
        assert_eq!(run(&jpeg).trim(), "jpeg note x");

        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        let body = b"Comment\0png words";
        png.extend_from_slice(&(body.len() as u32).to_be_bytes());
        png.extend_from_slice(b"tEXt");
        png.extend_from_slice(body);
        png.extend_from_slice(&[0; 4]);
        png.extend_from_slice(&[0, 0, 0, 0]);
        png.extend_from_slice(b"IEND");
        png.extend_from_slice(&[0; 4]);
        assert_eq!(run(&png).trim(), "png words");

        // A comment split over two sub-blocks joins back up.
        let mut gif = b"GIF89a".to_vec();
        gif.extend_from_slice(&[1, 0, 1, 0, 0, 0, 0]);
        gif.extend_from_slice(&[0x21, 0xFE, 4]);
        gif.extend_from_slice(b"spli");
        gif.push(5);
        gif.extend_from_slice(b"t gif");
        gif.push(0);
        gif.push(0x3B);
        assert_eq!(run(&gif).trim(), "split gif");
    }
}
