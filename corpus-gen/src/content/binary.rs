//! Compressed media, encrypted containers and executables: the
//! incompressible share of the corpus.

use crate::rng::Rng;

/// Random bytes, as an encrypted container looks.
pub fn container(rng: &mut Rng, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    rng.fill(&mut v);
    v
}

/// MPEG-1 Layer III audio: an ID3v2.3 tag (title, artist, padding that
/// makes the size exact) then 128 kbit/s 44.1 kHz frames with random
/// payload (compressed audio is as incompressible as random data).
pub fn mp3(rng: &mut Rng, size: usize) -> Vec<u8> {
    let mut frames_part = Vec::new();
    let mut title = Vec::new();
    crate::words::push_sentence(rng, &mut title);
    title.truncate(40);
    let (f, l) = crate::words::person(rng);
    let artist = format!("{f} {l}");
    let mut tag = Vec::new();
    for (id, text) in [(b"TIT2", &title[..]), (b"TPE1", artist.as_bytes())] {
        tag.extend_from_slice(id);
        tag.extend_from_slice(&((text.len() + 1) as u32).to_be_bytes());
        tag.extend_from_slice(&[0, 0, 0]);
        tag.extend_from_slice(text);
    }
    let min_tag = 10 + tag.len();
    let avail = size.saturating_sub(min_tag);
    let frame = 417usize;
    let n = avail / frame;
    for _ in 0..n {
        let start = frames_part.len();
        frames_part.extend_from_slice(&[0xFF, 0xFB, 0x90, 0x44]);
        frames_part.resize(start + frame, 0);
        rng.fill(&mut frames_part[start + 4..]);
    }
    let pad = size.saturating_sub(min_tag + frames_part.len());
    let tag_size = tag.len() + pad;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(b"ID3\x03\x00\x00");
    // Syncsafe size: 7 bits per byte.
    for shift in [21, 14, 7, 0] {
        out.push(((tag_size >> shift) & 0x7F) as u8);
    }
    out.extend_from_slice(&tag);
    out.resize(out.len() + pad, 0);
    out.extend_from_slice(&frames_part);
    out.truncate(size);
    out
}

/// A Windows PE32+ executable: MZ header and DOS stub, PE/COFF header,
/// optional header and section table, then code-like section bytes.
pub fn exe(rng: &mut Rng, size: usize, when: u64) -> Vec<u8> {
    let mut out = vec![0u8; size.max(1024)];
    out[0] = b'M';
    out[1] = b'Z';
    out[2..4].copy_from_slice(&0x90u16.to_le_bytes());
    out[0x3C..0x40].copy_from_slice(&0x80u32.to_le_bytes());
    let stub = b"This program cannot be run in DOS mode.\r\r\n$";
    out[0x4E..0x4E + stub.len()].copy_from_slice(stub);
    let pe = 0x80;
    out[pe..pe + 4].copy_from_slice(b"PE\0\0");
    out[pe + 4..pe + 6].copy_from_slice(&0x8664u16.to_le_bytes());
    out[pe + 6..pe + 8].copy_from_slice(&2u16.to_le_bytes());
    let unix = when + 315_532_800;
    out[pe + 8..pe + 12].copy_from_slice(&(unix as u32).to_le_bytes());
    out[pe + 20..pe + 22].copy_from_slice(&240u16.to_le_bytes());
    out[pe + 22..pe + 24].copy_from_slice(&0x0022u16.to_le_bytes());
    let opt = pe + 24;
    out[opt..opt + 2].copy_from_slice(&0x20Bu16.to_le_bytes());
    out[opt + 16..opt + 20].copy_from_slice(&0x1000u32.to_le_bytes());
    out[opt + 24..opt + 32].copy_from_slice(&0x1_4000_0000u64.to_le_bytes());
    out[opt + 32..opt + 36].copy_from_slice(&0x1000u32.to_le_bytes());
    out[opt + 36..opt + 40].copy_from_slice(&0x200u32.to_le_bytes());
    out[opt + 40..opt + 42].copy_from_slice(&6u16.to_le_bytes());
    out[opt + 48..opt + 50].copy_from_slice(&6u16.to_le_bytes());
    let image = (size as u32).div_ceil(0x1000) * 0x1000 + 0x1000;
    out[opt + 56..opt + 60].copy_from_slice(&image.to_le_bytes());
    out[opt + 60..opt + 64].copy_from_slice(&0x400u32.to_le_bytes());
    out[opt + 68..opt + 70].copy_from_slice(&3u16.to_le_bytes()); // console subsystem
    out[opt + 108..opt + 112].copy_from_slice(&16u32.to_le_bytes());
    let sect = opt + 240;
    let body = (size.saturating_sub(0x400)) as u32;
    let text_len = body / 2 / 0x200 * 0x200;
    for (i, (name, va, len, off, flags)) in [
        (
            b".text\0\0\0",
            0x1000u32,
            text_len,
            0x400u32,
            0x6000_0020u32,
        ),
        (
            b".rdata\0\0",
            0x1000 + text_len.div_ceil(0x1000) * 0x1000,
            body - text_len,
            0x400 + text_len,
            0x4000_0040,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let s = sect + i * 40;
        out[s..s + 8].copy_from_slice(name);
        out[s + 8..s + 12].copy_from_slice(&len.to_le_bytes());
        out[s + 12..s + 16].copy_from_slice(&va.to_le_bytes());
        out[s + 16..s + 20].copy_from_slice(&len.to_le_bytes());
        out[s + 20..s + 24].copy_from_slice(&off.to_le_bytes());
        out[s + 36..s + 40].copy_from_slice(&flags.to_le_bytes());
    }
    // Section bytes: random runs between zero runs, like machine code and
    // tables (compresses roughly 2:1).
    let mut i = 0x400;
    while i < out.len() {
        let run = rng.range(16, 512) as usize;
        let end = (i + run).min(out.len());
        if rng.below(3) != 0 {
            rng.fill(&mut out[i..end]);
        }
        i = end;
    }
    out.truncate(size);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_sizes() {
        let mut r = Rng::new(1);
        for s in [0usize, 10, 4096, 100_003] {
            assert_eq!(container(&mut r, s).len(), s);
        }
        for s in [4096usize, 4097, 99_999] {
            let m = mp3(&mut r, s);
            assert_eq!(m.len(), s);
            assert!(m.starts_with(b"ID3"));
            let e = exe(&mut r, s, 1 << 29);
            assert_eq!(e.len(), s);
            assert!(e.starts_with(b"MZ"));
        }
    }
}
