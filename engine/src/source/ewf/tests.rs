//! Ex01 sets built here by the published layout (libewf's EWF2 document),
//! read by this reader and by the `ewf` crate as an independent one; and
//! hostile v1 and v2 structures, each an error or a note, never a panic.

use super::*;
use crate::channel::ChannelKind;
use std::io::Write;

fn adler(b: &[u8]) -> u32 {
    adler2::adler32_slice(b)
}

fn zlib(b: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(b).unwrap();
    z.finish().unwrap()
}

fn utf16_object(text: &str) -> Vec<u8> {
    let mut out = vec![0xff, 0xfe];
    for u in text.encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
    zlib(&out)
}

/// An Ex01 segment being written: sections appended, each data (padded to
/// 16 bytes) then its descriptor pointing back to the previous one.
struct Ex01 {
    bytes: Vec<u8>,
    previous: u64,
}

impl Ex01 {
    fn new(segment: u32) -> Self {
        let mut bytes = b"EVF2\r\n\x81\x00".to_vec();
        bytes.extend_from_slice(&[2, 1]);
        bytes.extend_from_slice(&1u16.to_le_bytes());
        bytes.extend_from_slice(&segment.to_le_bytes());
        bytes.extend_from_slice(&[0x5a; 16]);
        Ex01 { bytes, previous: 0 }
    }

    fn section(&mut self, kind: u32, data: &[u8]) -> u64 {
        let start = self.bytes.len() as u64;
        self.bytes.extend_from_slice(data);
        let padding = (16 - data.len() % 16) % 16;
        self.bytes.extend(std::iter::repeat_n(0u8, padding));
        let at = self.bytes.len() as u64;
        let mut d = Vec::with_capacity(64);
        d.extend_from_slice(&kind.to_le_bytes());
        d.extend_from_slice(&0u32.to_le_bytes());
        d.extend_from_slice(&self.previous.to_le_bytes());
        d.extend_from_slice(&(at - start).to_le_bytes());
        d.extend_from_slice(&64u32.to_le_bytes());
        d.extend_from_slice(&(padding as u32).to_le_bytes());
        d.extend_from_slice(&[0u8; 28]);
        let sum = adler(&d);
        d.extend_from_slice(&sum.to_le_bytes());
        self.bytes.extend_from_slice(&d);
        self.previous = at;
        start
    }
}

const CHUNK: usize = 32 * 1024;

/// The media: chunk 0 compressible text, chunk 1 random-ish, chunk 2 a
/// repeated 8-byte pattern, the last half a chunk.
fn media(chunks: usize) -> Vec<u8> {
    let mut m = Vec::new();
    let mut x = 0x9e37_79b9_u32;
    for c in 0..chunks {
        for i in 0..CHUNK {
            m.push(match c % 3 {
                0 => b"caseload reads Ex01 "[i % 20],
                1 => {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                }
                _ => 0xA5u8.wrapping_add((i % 8) as u8),
            });
        }
    }
    m.extend(std::iter::repeat_n(0x42u8, CHUNK / 2));
    m
}

/// An Ex01 of `m` in one segment; `pattern` stores pattern chunks as fills.
fn ex01(m: &[u8], pattern: bool) -> Vec<u8> {
    let sectors = m.len() / 512;
    let chunks = m.len().div_ceil(CHUNK);
    let mut f = Ex01::new(1);
    f.section(
        0x01,
        &utf16_object(&format!(
            "1\nmain\nsn\tts\tbp\tdt\nS123\t{sectors}\t512\tf\n\n"
        )),
    );
    f.section(
        0x02,
        &utf16_object(&format!(
            "1\nmain\ncn\ten\tex\tnm\tsb\ttb\tcp\n42\tE-7\tJ. Doe\tlaptop disk\t64\t{chunks}\t1\n\n"
        )),
    );
    // Sector data: chunks stored one after another, 16-byte aligned.
    let mut data = Vec::new();
    let mut entries = Vec::new();
    let data_start = f.bytes.len() as u64;
    for (i, c) in m.chunks(CHUNK).enumerate() {
        let is_pattern = pattern && i % 3 == 2 && c.len() == CHUNK;
        if is_pattern {
            let p = u64::from_le_bytes(c[..8].try_into().unwrap());
            entries.push((p, 0u32, 1u32 | 4));
            continue;
        }
        let offset = data_start + data.len() as u64;
        let (stored, flags) = if i % 3 == 1 {
            let mut s = c.to_vec();
            s.extend_from_slice(&adler(c).to_le_bytes());
            (s, 2u32)
        } else {
            (zlib(c), 1u32)
        };
        entries.push((offset, stored.len() as u32, flags));
        data.extend_from_slice(&stored);
        data.extend(std::iter::repeat_n(0u8, (16 - data.len() % 16) % 16));
    }
    f.section(0x03, &data);
    let mut table = Vec::new();
    table.extend_from_slice(&0u64.to_le_bytes());
    table.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    table.extend_from_slice(&0u32.to_le_bytes());
    let sum = adler(&table);
    table.extend_from_slice(&sum.to_le_bytes());
    table.extend_from_slice(&[0u8; 12]);
    let mut raw = Vec::new();
    for (o, s, fl) in &entries {
        raw.extend_from_slice(&o.to_le_bytes());
        raw.extend_from_slice(&s.to_le_bytes());
        raw.extend_from_slice(&fl.to_le_bytes());
    }
    table.extend_from_slice(&raw);
    table.extend_from_slice(&adler(&raw).to_le_bytes());
    f.section(0x04, &table);
    let digest: [u8; 16] = <md5::Md5 as md5::Digest>::digest(m).into();
    let mut h = digest.to_vec();
    h.extend_from_slice(&adler(&digest).to_le_bytes());
    f.section(0x08, &h);
    f.section(0x0f, &[]);
    f.bytes
}

fn open_file(bytes: &[u8], name: &str) -> (tempfile::TempDir, Result<EwfSource, SourceError>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let ch = Channel::new(ChannelKind::Evidence, dir.path(), Vec::new());
    // Written through the channel: no engine module, tests included,
    // touches files behind the channels' back.
    let mut f = ch.create(name).unwrap();
    f.write_all(bytes).unwrap();
    drop(f);
    let src = EwfSource::open(&path, &ch, ReadOptions::default());
    (dir, src)
}

fn read_all(src: &EwfSource) -> Result<Vec<u8>, SourceError> {
    let mut out = vec![0u8; src.size() as usize];
    let mut done = 0;
    while done < out.len() {
        let n = src.read_at(&mut out[done..], done as u64)?;
        assert!(n > 0);
        done += n;
    }
    Ok(out)
}

#[test]
fn an_ex01_reads_as_the_ewf_crate_reads_it() {
    let m = media(4);
    let image = ex01(&m, false);
    let (dir, src) = open_file(&image, "disk.Ex01");
    let src = src.unwrap();
    assert_eq!(src.info().format, SourceFormat::Ewf2);
    assert_eq!(src.size(), m.len() as u64);
    assert_eq!(src.info().chunk_size, Some(CHUNK as u64));
    let ours = read_all(&src).unwrap();
    assert!(ours == m, "our read differs from the media written");
    let theirs = ewf::EwfReader::open(dir.path().join("disk.Ex01")).unwrap();
    assert_eq!(theirs.total_size(), m.len() as u64);
    let mut buf = vec![0u8; m.len()];
    let mut done = 0;
    while done < buf.len() {
        let n = theirs.read_at(&mut buf[done..], done as u64).unwrap();
        assert!(n > 0);
        done += n;
    }
    assert!(buf == ours, "the ewf crate reads other bytes");
    let digest: [u8; 16] = <md5::Md5 as md5::Digest>::digest(&m).into();
    assert_eq!(
        src.info().stored_hashes.md5.as_deref(),
        Some(hex(&digest).as_str())
    );
    let meta: std::collections::HashMap<_, _> = src.info().metadata.iter().cloned().collect();
    assert_eq!(meta.get("case_number").map(String::as_str), Some("42"));
    assert_eq!(meta.get("examiner").map(String::as_str), Some("J. Doe"));
    assert_eq!(
        meta.get("description").map(String::as_str),
        Some("laptop disk")
    );
    assert!(src.info().notes.is_empty(), "{:?}", src.info().notes);
}

#[test]
fn pattern_fill_chunks_are_the_pattern_repeated() {
    let m = media(6);
    let (_dir, src) = open_file(&ex01(&m, true), "fill.Ex01");
    let src = src.unwrap();
    assert!(read_all(&src).unwrap() == m);
}

#[test]
fn a_damaged_ex01_chunk_is_that_chunks_error() {
    let m = media(4);
    let mut image = ex01(&m, false);
    // Chunk 1 is stored plain with its Adler-32: change a byte of it.
    let (_dir, clean) = open_file(&image, "a.Ex01");
    let (seg, offset, _, _) = clean.unwrap().locate(1, CHUNK as u64).unwrap();
    assert_eq!(seg, 0);
    image[offset as usize + 100] ^= 0xff;
    let (_dir, src) = open_file(&image, "b.Ex01");
    let src = src.unwrap();
    let mut buf = vec![0u8; CHUNK];
    let err = src.read_at(&mut buf, CHUNK as u64).unwrap_err();
    assert_eq!(err.sector_range(), Some((64, 127)), "{err}");
    assert!(err.to_string().contains("Adler-32"), "{err}");
    assert_eq!(src.read_at(&mut buf, 0).unwrap(), CHUNK);
    assert!(buf[..] == m[..CHUNK]);
}

#[test]
fn hostile_ex01_structures_are_errors_not_panics() {
    let m = media(4);
    let image = ex01(&m, false);
    let last = image.len() - 64;
    // The last descriptor's checksum.
    let mut bad = image.clone();
    bad[last + 5] ^= 1;
    let (_d, src) = open_file(&bad, "c.Ex01");
    let err = src.unwrap_err().to_string();
    assert!(err.contains("fails its Adler-32"), "{err}");
    // Encrypted: the flag set and the checksum made right again.
    let mut enc = image.clone();
    enc[last + 4] |= 2;
    let sum = adler(&enc[last..last + 60]);
    enc[last + 60..last + 64].copy_from_slice(&sum.to_le_bytes());
    let (_d, src) = open_file(&enc, "d.Ex01");
    let err = src.unwrap_err().to_string();
    assert!(err.contains("encrypted"), "{err}");
    // A previous-section offset pointing at itself.
    let mut lp = image.clone();
    lp[last + 8..last + 16].copy_from_slice(&(last as u64).to_le_bytes());
    let sum = adler(&lp[last..last + 60]);
    lp[last + 60..last + 64].copy_from_slice(&sum.to_le_bytes());
    let (_d, src) = open_file(&lp, "e.Ex01");
    assert!(src.is_err());
    // Every cut of the file: an error or a readable source, never a panic.
    for cut in (0..image.len()).step_by(997) {
        let (_d, src) = open_file(&image[..cut], "f.Ex01");
        if let Ok(src) = src {
            let _ = read_all(&src);
        }
    }
}

/// A v1 segment: file header, sections chained forward.
fn e01_sections(sections: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut f = b"EVF\x09\x0d\x0a\xff\x00\x01\x01\x00\x00\x00".to_vec();
    for (i, (kind, body)) in sections.iter().enumerate() {
        let at = f.len() as u64;
        let size = 76 + body.len() as u64;
        let next = if i + 1 == sections.len() {
            at
        } else {
            at + size
        };
        let mut d = [0u8; 76];
        d[..kind.len()].copy_from_slice(kind.as_bytes());
        d[16..24].copy_from_slice(&next.to_le_bytes());
        d[24..32].copy_from_slice(&size.to_le_bytes());
        let sum = adler(&d[..72]);
        d[72..76].copy_from_slice(&sum.to_le_bytes());
        f.extend_from_slice(&d);
        f.extend_from_slice(body);
    }
    f
}

fn volume(chunks: u32, sectors: u64) -> Vec<u8> {
    let mut v = vec![0u8; 1052];
    v[4..8].copy_from_slice(&chunks.to_le_bytes());
    v[8..12].copy_from_slice(&64u32.to_le_bytes());
    v[12..16].copy_from_slice(&512u32.to_le_bytes());
    v[16..24].copy_from_slice(&sectors.to_le_bytes());
    v
}

#[test]
fn a_v1_table_longer_than_its_section_is_cut_and_said() {
    // The `ewf` crate indexed past such a table (fuzz crash 5a50b4a1...).
    let chunk = vec![7u8; CHUNK];
    let mut sectors = chunk.clone();
    sectors.extend_from_slice(&adler(&chunk).to_le_bytes());
    let sectors_at = 13 + 76 + 1052 + 76;
    let mut table = vec![0u8; 24];
    table[..4].copy_from_slice(&5u32.to_le_bytes()); // says 5, holds 2
    let sum = adler(&table[..20]);
    table[20..24].copy_from_slice(&sum.to_le_bytes());
    table.extend_from_slice(&(sectors_at as u32).to_le_bytes());
    table.extend_from_slice(&(sectors_at as u32).to_le_bytes());
    let image = e01_sections(&[
        ("volume", volume(2, 128)),
        ("sectors", sectors),
        ("table", table),
        ("done", Vec::new()),
    ]);
    let (_d, src) = open_file(&image, "g.E01");
    let src = src.unwrap();
    assert!(
        src.info()
            .notes
            .iter()
            .any(|n| n.contains("declares 5 entries")),
        "{:?}",
        src.info().notes
    );
    let mut buf = vec![0u8; CHUNK];
    assert_eq!(src.read_at(&mut buf, 0).unwrap(), CHUNK);
    assert!(buf == chunk);
    // Chunk 1 points at the same bytes; reading past the tables is an error.
    let mut past = vec![0u8; 512];
    assert!(src.read_at(&mut past, 2 * CHUNK as u64 + 1).unwrap() == 0);
    for cut in (0..image.len()).step_by(331) {
        let (_d, src) = open_file(&image[..cut], "h.E01");
        if let Ok(src) = src {
            let _ = read_all(&src);
        }
    }
}

#[test]
fn a_v1_descriptor_loop_or_bad_checksum_ends_the_walk_with_a_note() {
    let image = e01_sections(&[("volume", volume(0, 0)), ("next", Vec::new())]);
    let mut bad = image.clone();
    bad[13 + 76 + 1052 + 20] ^= 1; // the `next` descriptor's offset field
    let (_d, src) = open_file(&bad, "i.E01");
    let src = src.unwrap();
    assert!(
        src.info()
            .notes
            .iter()
            .any(|n| n.contains("fails its Adler-32")),
        "{:?}",
        src.info().notes
    );
    let mut none = image.clone();
    none[13..19].copy_from_slice(b"xolume");
    let sum = adler(&none[13..13 + 72]);
    none[13 + 72..13 + 76].copy_from_slice(&sum.to_le_bytes());
    let (_d, src) = open_file(&none, "j.E01");
    assert!(src.unwrap_err().to_string().contains("no volume section"));
}

#[test]
fn segment_names_follow_the_ewf_sequence() {
    assert_eq!(segment_extension("E01", 1).as_deref(), Some("E01"));
    assert_eq!(segment_extension("E01", 99).as_deref(), Some("E99"));
    assert_eq!(segment_extension("E01", 100).as_deref(), Some("EAA"));
    assert_eq!(segment_extension("E01", 101).as_deref(), Some("EAB"));
    assert_eq!(segment_extension("E01", 126).as_deref(), Some("EBA"));
    assert_eq!(segment_extension("e01", 100).as_deref(), Some("eaa"));
    assert_eq!(
        segment_extension("E01", 100 + 26 * 26).as_deref(),
        Some("FAA")
    );
    assert_eq!(
        segment_extension("E01", 100 + 22 * 26 * 26 - 1).as_deref(),
        Some("ZZZ")
    );
    assert_eq!(segment_extension("E01", 100 + 22 * 26 * 26), None);
    assert_eq!(segment_extension("Ex01", 2).as_deref(), Some("Ex02"));
}
