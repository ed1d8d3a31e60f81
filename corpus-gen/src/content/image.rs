//! The per-run pool of encoded media and SQLite templates, and the cheap
//! valid variations that turn a pool member into a unique file.

use super::sqlite::{self, Template};
use crate::CorpusError;
use crate::rng::Rng;
use crate::words;

/// Media encoded once per run with real encoders (`jpeg-encoder`, `png`,
/// `gif`) and SQLite templates built once with SQLite itself. Sizes are
/// known before planning, so the planner can size files exactly.
#[derive(Debug, Clone)]
pub struct Pool {
    jpegs: Vec<Vec<u8>>,
    pngs: Vec<Vec<u8>>,
    gifs: Vec<Vec<u8>>,
    sqlite: Vec<Template>,
}

/// Procedural RGB picture: gradients, discs and grain, so encoders see
/// photo-like structure and sizes vary with dimensions.
fn picture(rng: &mut Rng, w: usize, h: usize, grain: u32) -> Vec<u8> {
    let mut px = vec![0u8; w * h * 3];
    let base = [
        rng.below(256) as i32,
        rng.below(256) as i32,
        rng.below(256) as i32,
    ];
    let discs: Vec<(i32, i32, i32, [i32; 3])> = (0..rng.range(3, 9))
        .map(|_| {
            (
                rng.below(w as u64) as i32,
                rng.below(h as u64) as i32,
                rng.range(8, (w.min(h) / 3).max(9) as u64) as i32,
                [
                    rng.below(256) as i32,
                    rng.below(256) as i32,
                    rng.below(256) as i32,
                ],
            )
        })
        .collect();
    let mut noise = Rng::new(rng.next_u64());
    for y in 0..h {
        for x in 0..w {
            let mut c = [
                base[0] + (x * 96 / w) as i32,
                base[1] + (y * 96 / h) as i32,
                base[2] + ((x + y) * 64 / (w + h)) as i32,
            ];
            for (cx, cy, r, col) in &discs {
                let dx = x as i32 - cx;
                let dy = y as i32 - cy;
                if dx * dx + dy * dy < r * r {
                    c = *col;
                }
            }
            let n = if grain > 0 {
                noise.below(grain as u64 * 2 + 1) as i32 - grain as i32
            } else {
                0
            };
            let i = (y * w + x) * 3;
            for k in 0..3 {
                px[i + k] = (c[k] + n).clamp(0, 255) as u8;
            }
        }
    }
    px
}

fn encode_jpeg(rgb: &[u8], w: u16, h: u16, quality: u8) -> Result<Vec<u8>, CorpusError> {
    let mut out = Vec::new();
    let enc = jpeg_encoder::Encoder::new(&mut out, quality);
    enc.encode(rgb, w, h, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| CorpusError::Encode {
            what: "jpeg",
            detail: e.to_string(),
        })?;
    Ok(out)
}

fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, CorpusError> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let err = |e: png::EncodingError| CorpusError::Encode {
            what: "png",
            detail: e.to_string(),
        };
        let mut wr = enc.write_header().map_err(err)?;
        wr.write_image_data(rgb).map_err(err)?;
        wr.finish().map_err(err)?;
    }
    Ok(out)
}

fn encode_gif(rng: &mut Rng, w: u16, h: u16) -> Result<Vec<u8>, CorpusError> {
    // A 64-colour palette and blocky indexed pixels, like a web graphic.
    let mut palette = vec![0u8; 64 * 3];
    rng.fill(&mut palette);
    let mut idx = vec![0u8; w as usize * h as usize];
    let cell = rng.range(4, 16) as usize;
    let mut colours = Rng::new(rng.next_u64());
    for y in 0..h as usize {
        for x in 0..w as usize {
            let seed = ((y / cell) * 7919 + (x / cell) * 104_729) as u64;
            let c = (seed.wrapping_mul(0x9E37_79B9) >> 7) % 64;
            idx[y * w as usize + x] = if colours.below(20) == 0 {
                colours.below(64) as u8
            } else {
                c as u8
            };
        }
    }
    let mut out = Vec::new();
    {
        let err = |e: gif::EncodingError| CorpusError::Encode {
            what: "gif",
            detail: e.to_string(),
        };
        let mut enc = gif::Encoder::new(&mut out, w, h, &palette).map_err(err)?;
        let frame = gif::Frame::from_indexed_pixels(w, h, idx, None);
        enc.write_frame(&frame).map_err(err)?;
    }
    Ok(out)
}

impl Pool {
    /// Encode the pool for a corpus seed. Takes a fraction of a second.
    pub fn build(seed: u64) -> Result<Pool, CorpusError> {
        let mut rng = Rng::derive(seed, &[0x504F_4F4C]);
        let mut jpegs = Vec::new();
        for (w, h, grain) in [
            (160u16, 120u16, 6u32),
            (320, 240, 10),
            (640, 480, 14),
            (800, 600, 20),
            (1280, 960, 24),
            (1600, 1200, 30),
            (2048, 1536, 36),
        ] {
            let px = picture(&mut rng, w as usize, h as usize, grain);
            jpegs.push(encode_jpeg(&px, w, h, 88)?);
        }
        let mut pngs = Vec::new();
        for (w, h, grain) in [
            (48u32, 48u32, 0u32),
            (200, 150, 2),
            (400, 300, 3),
            (800, 600, 4),
        ] {
            let px = picture(&mut rng, w as usize, h as usize, grain);
            pngs.push(encode_png(&px, w, h)?);
        }
        let mut gifs = Vec::new();
        for (w, h) in [(32u16, 32u16), (120, 90), (320, 240), (640, 480)] {
            gifs.push(encode_gif(&mut rng, w, h)?);
        }
        let sqlite = sqlite::templates(&mut rng)?;
        let by_len = |v: &mut Vec<Vec<u8>>| v.sort_by_key(|b| b.len());
        by_len(&mut jpegs);
        by_len(&mut pngs);
        by_len(&mut gifs);
        Ok(Pool {
            jpegs,
            pngs,
            gifs,
            sqlite,
        })
    }

    /// Smallest JPEG in the pool.
    pub fn jpeg_min(&self) -> u64 {
        self.jpegs.first().map(|j| j.len() as u64).unwrap_or(0)
    }
    /// Smallest PNG in the pool.
    pub fn png_min(&self) -> u64 {
        self.pngs.first().map(|j| j.len() as u64).unwrap_or(0)
    }
    /// Smallest GIF in the pool.
    pub fn gif_min(&self) -> u64 {
        self.gifs.first().map(|j| j.len() as u64).unwrap_or(0)
    }
    /// Smallest SQLite template.
    pub fn sqlite_min(&self) -> u64 {
        self.sqlite
            .first()
            .map(|t| t.bytes.len() as u64)
            .unwrap_or(0)
    }

    /// Sizes of the pool members of an image kind, smallest first.
    pub fn member_sizes(&self, kind: super::Kind) -> Vec<u64> {
        let list = match kind {
            super::Kind::Jpeg => &self.jpegs,
            super::Kind::Png => &self.pngs,
            super::Kind::Gif => &self.gifs,
            _ => return Vec::new(),
        };
        list.iter().map(|b| b.len() as u64).collect()
    }

    /// Sizes of the SQLite templates (a History file is exactly one).
    pub fn sqlite_sizes(&self) -> Vec<u64> {
        self.sqlite.iter().map(|t| t.bytes.len() as u64).collect()
    }

    /// Index of the largest member of `kind`'s pool whose size leaves at
    /// least `room` bytes for the variation within `size`.
    pub fn fit(&self, kind: super::Kind, size: u64, room: u64) -> u32 {
        let list = match kind {
            super::Kind::Jpeg => &self.jpegs,
            super::Kind::Png => &self.pngs,
            super::Kind::Gif => &self.gifs,
            _ => return 0,
        };
        list.iter()
            .rposition(|b| b.len() as u64 + room <= size)
            .unwrap_or(0) as u32
    }

    /// The comment text that makes a varied member unique: an id from the
    /// content key, the planted keywords, then word-model filler.
    fn comment_text(rng: &mut Rng, key: u64, keywords: &[String], len: usize) -> Vec<u8> {
        let mut t = format!("corpus-gen {key:016x}").into_bytes();
        for k in keywords {
            t.push(b' ');
            t.extend_from_slice(k.as_bytes());
        }
        t.push(b' ');
        if t.len() < len {
            let mut fill = Vec::new();
            words::fill_text(rng, &mut fill, len - t.len());
            t.extend_from_slice(&fill);
        }
        t.truncate(len);
        t
    }

    /// A JPEG of exactly `size` bytes: pool member `variant` with COM
    /// segments after SOI (the first carries the id and keywords as text,
    /// the rest random bytes like an embedded thumbnail).
    pub fn jpeg(
        &self,
        rng: &mut Rng,
        variant: u32,
        size: usize,
        keywords: &[String],
        key: u64,
    ) -> Result<Vec<u8>, CorpusError> {
        let base = self
            .jpegs
            .get(variant as usize)
            .ok_or_else(|| bad("jpeg"))?;
        if size < base.len() + 4 || base.len() < 2 {
            return Err(bad("jpeg"));
        }
        Ok(jpeg_with_padding(rng, base, size, keywords, key))
    }

    /// A JPEG from the pool sized exactly, for embedding in other formats.
    pub fn jpeg_any(&self, rng: &mut Rng, size: usize, key: u64) -> Option<Vec<u8>> {
        let base = self.jpegs.iter().rev().find(|b| b.len() + 64 <= size)?;
        Some(jpeg_with_padding(rng, base, size, &[], key))
    }

    /// A PNG of exactly `size` bytes: pool member with a `tEXt` chunk.
    pub fn png(
        &self,
        rng: &mut Rng,
        variant: u32,
        size: usize,
        keywords: &[String],
        key: u64,
    ) -> Result<Vec<u8>, CorpusError> {
        let base = self.pngs.get(variant as usize).ok_or_else(|| bad("png"))?;
        // Signature (8) + IHDR chunk (25) precede the inserted chunk.
        if size < base.len() + 20 || base.len() < 33 {
            return Err(bad("png"));
        }
        let text = Pool::comment_text(rng, key, keywords, size - base.len() - 20);
        let mut data = b"Comment\0".to_vec();
        data.extend_from_slice(&text);
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&base[..33]);
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut h = crc32fast::Hasher::new();
        h.update(b"tEXt");
        h.update(&data);
        out.extend_from_slice(b"tEXt");
        out.extend_from_slice(&data);
        out.extend_from_slice(&h.finalize().to_be_bytes());
        out.extend_from_slice(&base[33..]);
        Ok(out)
    }

    /// A GIF of exactly `size` bytes: pool member with comment extensions
    /// after the global colour table.
    pub fn gif(
        &self,
        rng: &mut Rng,
        variant: u32,
        size: usize,
        keywords: &[String],
        key: u64,
    ) -> Result<Vec<u8>, CorpusError> {
        let base = self.gifs.get(variant as usize).ok_or_else(|| bad("gif"))?;
        if base.len() < 13 {
            return Err(bad("gif"));
        }
        let packed = base[10];
        let gct = if packed & 0x80 != 0 {
            3usize << ((packed & 7) + 1)
        } else {
            0
        };
        let head = 13 + gct;
        if base.len() < head || size < base.len() + 8 {
            return Err(bad("gif"));
        }
        let mut extra = size - base.len();
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&base[..head]);
        // An extension of payload L takes 3 + L + ceil(L/255) bytes; sizes
        // 256m + 4 are unreachable in one, so split off a 5-byte one first.
        if (extra - 3) % 256 == 1 {
            out.extend_from_slice(&[0x21, 0xFE, 1, b' ', 0]);
            extra -= 5;
        }
        let target = extra - 3;
        let l = target - target.div_ceil(256);
        let text = Pool::comment_text(rng, key, keywords, l);
        out.extend_from_slice(&[0x21, 0xFE]);
        for chunk in text.chunks(255) {
            out.push(chunk.len() as u8);
            out.extend_from_slice(chunk);
        }
        out.push(0);
        out.extend_from_slice(&base[head..]);
        Ok(out)
    }

    /// A browser-history SQLite file of exactly `size` bytes (a template
    /// size) with its id and keyword cells filled in.
    pub fn sqlite(
        &self,
        variant: u32,
        size: usize,
        keywords: &[String],
        key: u64,
    ) -> Result<Vec<u8>, CorpusError> {
        let t = self
            .sqlite
            .get(variant as usize)
            .ok_or_else(|| bad("sqlite"))?;
        if t.bytes.len() != size {
            return Err(bad("sqlite"));
        }
        Ok(t.instantiate(key, keywords))
    }
}

fn bad(what: &'static str) -> CorpusError {
    CorpusError::Encode {
        what,
        detail: "requested size or variant does not fit the pool".into(),
    }
}

fn jpeg_with_padding(
    rng: &mut Rng,
    base: &[u8],
    size: usize,
    keywords: &[String],
    key: u64,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&base[..2]);
    let mut rem = size.saturating_sub(base.len());
    let mut first = true;
    while rem >= 4 {
        let mut seg = rem.min(65_535);
        if (1..4).contains(&(rem - seg)) {
            seg -= 4;
        }
        out.extend_from_slice(&[0xFF, 0xFE]);
        out.extend_from_slice(&((seg - 2) as u16).to_be_bytes());
        if first {
            out.extend_from_slice(&Pool::comment_text(rng, key, keywords, seg - 4));
            first = false;
        } else {
            let start = out.len();
            out.resize(start + seg - 4, 0);
            rng.fill(&mut out[start..]);
        }
        rem -= seg;
    }
    out.extend_from_slice(&base[2..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varied_members_are_exact_and_decode() {
        let pool = Pool::build(1).unwrap();
        let mut r = Rng::new(2);
        let kw = vec!["qzbcdfghjk".to_string()];
        for (v, extra) in [(0u32, 64usize), (1, 70_000), (2, 200_003)] {
            let size = pool.jpegs[v as usize].len() + extra;
            let j = pool.jpeg(&mut r, v, size, &kw, 9).unwrap();
            assert_eq!(j.len(), size);
            let mut d = jpeg_decoder::Decoder::new(&j[..]);
            d.decode().unwrap();
        }
        for v in 0..4u32 {
            for extra in [20usize, 21, 1000, 4099] {
                let size = pool.pngs[v as usize].len() + extra;
                let p = pool.png(&mut r, v, size, &kw, 9).unwrap();
                assert_eq!(p.len(), size);
                let dec = png::Decoder::new(std::io::Cursor::new(&p));
                let mut rd = dec.read_info().unwrap();
                let mut buf = vec![0; rd.output_buffer_size().unwrap()];
                rd.next_frame(&mut buf).unwrap();
            }
            for extra in [8usize, 259, 260, 261, 515, 516, 5000] {
                let size = pool.gifs[v as usize].len() + extra;
                let g = pool.gif(&mut r, v, size, &kw, 9).unwrap();
                assert_eq!(g.len(), size, "gif extra {extra}");
                let mut opts = gif::DecodeOptions::new();
                opts.set_color_output(gif::ColorOutput::Indexed);
                let mut dec = opts.read_info(&g[..]).unwrap();
                assert!(dec.read_next_frame().unwrap().is_some());
            }
        }
    }
}
