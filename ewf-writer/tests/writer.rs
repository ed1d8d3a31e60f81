//! The writer against its own contract and the `ewf` crate (the reader
//! caseload uses): structure section by section, bytes and hashes read back,
//! determinism across thread counts, and every refusal and clean-up path.
//! libewf's tools check the same images in the root `tests/ewf_*.rs`.

use caseload_ewf_writer::{
    Compression, EwfWriteError, EwfWriter, GuidChoice, MAX_SEGMENTS, Metadata, WriterOptions,
    convert, segment_path,
};
use md5::{Digest, Md5};
use sha1::Sha1;
use std::io::Write;
use std::path::{Path, PathBuf};

#[path = "support/shared.rs"]
#[allow(dead_code)]
mod shared;
use shared::mixed_media;

fn md5_of(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

fn sha1_of(data: &[u8]) -> [u8; 20] {
    Sha1::digest(data).into()
}

fn options(compression: Compression, threads: usize) -> WriterOptions {
    WriterOptions {
        compression,
        threads,
        metadata: Metadata {
            case_number: "CASE-7".into(),
            evidence_number: "EV-1".into(),
            examiner: "Examiner".into(),
            description: "test media".into(),
            notes: "written by the writer tests".into(),
        },
        acquired: 1_700_000_000,
        ..WriterOptions::default()
    }
}

/// Write `media` in pieces of awkward sizes through `io::Write`.
fn write_image(prefix: &Path, media: &[u8], opts: WriterOptions) -> caseload_ewf_writer::Summary {
    let mut w = EwfWriter::create(prefix, media.len() as u64, opts).expect("create");
    for piece in media.chunks(12_345) {
        w.write_all(piece).expect("write");
    }
    w.finish().expect("finish")
}

/// Read the whole media back through the `ewf` crate and run its verify.
fn read_back(segments: &[PathBuf]) -> (Vec<u8>, ewf::VerifyResult) {
    let reader = if segments.len() > 1 {
        ewf::EwfReader::open_segments(segments).expect("open segments")
    } else {
        ewf::EwfReader::open(&segments[0]).expect("open")
    };
    let mut out = vec![0u8; reader.total_size() as usize];
    let mut off = 0;
    while off < out.len() {
        let n = reader.read_at(&mut out[off..], off as u64).expect("read");
        assert!(n > 0, "short read at {off}");
        off += n;
    }
    let verify = reader.verify().expect("verify");
    (out, verify)
}

/// One section as found on disk.
#[derive(Debug)]
struct Section {
    kind: String,
    offset: u64,
    size: u64,
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Walk a segment's sections, checking the file header, every descriptor's
/// Adler-32 and that each section ends where the next begins.
fn sections(path: &Path, number: u16) -> (Vec<u8>, Vec<Section>) {
    let data = std::fs::read(path).unwrap();
    assert_eq!(&data[..8], b"EVF\x09\x0d\x0a\xff\x00");
    assert_eq!(data[8], 1);
    assert_eq!(u16::from_le_bytes([data[9], data[10]]), number);
    let mut out = Vec::new();
    let mut off = 13u64;
    loop {
        let d = &data[off as usize..off as usize + 76];
        assert_eq!(
            le32(d, 72),
            adler2::adler32_slice(&d[..72]),
            "descriptor checksum at {off}"
        );
        let kind =
            String::from_utf8(d[..16].iter().take_while(|&&b| b != 0).copied().collect()).unwrap();
        let next = le64(d, 16);
        let size = le64(d, 24);
        let end = matches!(kind.as_str(), "next" | "done");
        out.push(Section {
            kind,
            offset: off,
            size,
        });
        if end {
            assert_eq!(next, off, "next/done point at themselves");
            assert_eq!(size, 0);
            assert_eq!(
                off + 76,
                data.len() as u64,
                "nothing after the last section"
            );
            break;
        }
        assert_eq!(next, off + size, "sections are back to back");
        off = next;
    }
    (data, out)
}

/// Check every table of a segment against its sectors section and return
/// the number of entries per table.
fn check_tables(data: &[u8], secs: &[Section]) -> Vec<u32> {
    let mut counts = Vec::new();
    for (i, s) in secs.iter().enumerate() {
        if s.kind != "table" {
            continue;
        }
        let sectors = &secs[i - 1];
        assert_eq!(sectors.kind, "sectors");
        let table2 = &secs[i + 1];
        assert_eq!(table2.kind, "table2");
        let body = &data[(s.offset + 76) as usize..(s.offset + s.size) as usize];
        let body2 = &data[(table2.offset + 76) as usize..(table2.offset + table2.size) as usize];
        assert_eq!(body, body2, "table2 mirrors table");
        let n = le32(body, 0);
        assert!(n <= 65534);
        assert_eq!(le64(body, 8), sectors.offset, "base is the sectors section");
        assert_eq!(le32(body, 20), adler2::adler32_slice(&body[..20]));
        let entries = &body[24..24 + 4 * n as usize];
        assert_eq!(
            le32(body, 24 + 4 * n as usize),
            adler2::adler32_slice(entries)
        );
        let mut prev = 0u64;
        for k in 0..n as usize {
            let rel = u64::from(le32(entries, 4 * k) & 0x7fff_ffff);
            assert!(rel >= 76 && (k == 0 || rel > prev));
            assert!(sectors.offset + rel < sectors.offset + sectors.size);
            prev = rel;
        }
        counts.push(n);
    }
    counts
}

fn kinds(secs: &[Section]) -> Vec<&str> {
    secs.iter().map(|s| s.kind.as_str()).collect()
}

#[test]
fn single_segment_at_every_level_round_trips_with_encase6_layout() {
    let dir = tempfile::tempdir().unwrap();
    // Not a multiple of the chunk size: the last chunk is short.
    let media = mixed_media(3 * 1024 * 1024 + 5 * 512, 1);
    for level in [Compression::None, Compression::Fast, Compression::Best] {
        let prefix = dir.path().join(format!("img-{}", level.name()));
        let s = write_image(&prefix, &media, options(level, 2));
        assert_eq!(s.segments.len(), 1);
        assert_eq!(s.md5, md5_of(&media));
        assert_eq!(s.sha1, sha1_of(&media));
        assert_eq!(s.padding_bytes, 0);
        assert_eq!(s.chunks, media.len().div_ceil(32768) as u64);
        let first = prefix.with_extension("E01");
        assert_eq!(s.segments[0].path, first);
        assert_eq!(s.segments[0].size, std::fs::metadata(&first).unwrap().len());

        let (data, secs) = sections(&first, 1);
        assert_eq!(
            kinds(&secs),
            [
                "header2", "header2", "header", "volume", "sectors", "table", "table2", "data",
                "digest", "hash", "done"
            ]
        );
        assert_eq!(check_tables(&data, &secs), [s.chunks as u32]);
        let volume = &data[(secs[3].offset + 76) as usize..(secs[3].offset + 76 + 1052) as usize];
        assert_eq!(le32(volume, 4) as u64, s.chunks);
        assert_eq!(le64(volume, 16), media.len() as u64 / 512);
        assert_eq!(volume[52], [0, 1, 2][level as usize]);
        assert_eq!(&volume[64..80], &s.guid);
        let digest = &data[(secs[8].offset + 76) as usize..];
        assert_eq!(&digest[..16], &s.md5);
        assert_eq!(&digest[16..36], &s.sha1);

        let (read, verify) = read_back(std::slice::from_ref(&first));
        assert!(read == media, "bytes read back differ at {}", level.name());
        assert_eq!(verify.md5_match, Some(true));
        assert_eq!(verify.sha1_match, Some(true));
        assert_eq!(verify.computed_md5, s.md5);
        let compressed_share = s.compressed_chunks as f64 / s.chunks as f64;
        match level {
            // Only the short final chunk is a zlib stream at level none.
            Compression::None => assert_eq!(s.compressed_chunks, 1),
            _ => assert!(compressed_share > 0.3 && compressed_share < 0.95),
        }
    }
}

#[test]
fn output_is_identical_across_thread_counts_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let media = mixed_media(2 * 1024 * 1024 + 3 * 512, 2);
    let mut images = Vec::new();
    for (i, threads) in [1usize, 4, 3, 4].into_iter().enumerate() {
        let mut opts = options(Compression::Best, threads);
        opts.segment_size = 700_000;
        let prefix = dir.path().join(format!("run{i}"));
        let s = write_image(&prefix, &media, opts);
        assert!(s.segments.len() > 1);
        let bytes: Vec<Vec<u8>> = s
            .segments
            .iter()
            .map(|f| std::fs::read(&f.path).unwrap())
            .collect();
        images.push((s.guid, bytes));
    }
    for other in &images[1..] {
        assert_eq!(other.0, images[0].0, "GUID differs");
        assert!(other.1 == images[0].1, "segment bytes differ");
    }
    // A different input gives a different derived GUID.
    let s = write_image(
        &dir.path().join("other"),
        &mixed_media(media.len(), 3),
        options(Compression::Best, 2),
    );
    assert_ne!(s.guid, images[0].0);
}

#[test]
fn many_segments_stay_under_the_segment_size_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let media = mixed_media(6 * 1024 * 1024, 4);
    let mut opts = options(Compression::Fast, 2);
    opts.segment_size = 300_000;
    let prefix = dir.path().join("multi");
    let s = write_image(&prefix, &media, opts);
    assert!(s.segments.len() >= 8, "{} segments", s.segments.len());
    let paths: Vec<PathBuf> = s.segments.iter().map(|f| f.path.clone()).collect();
    for (i, f) in s.segments.iter().enumerate() {
        let n = i as u32 + 1;
        assert_eq!(f.path, segment_path(&prefix, n).unwrap());
        assert!(f.size <= 300_000, "segment {n} is {} bytes", f.size);
        let (data, secs) = sections(&f.path, n as u16);
        let k = kinds(&secs);
        if n == 1 {
            assert_eq!(
                &k[..5],
                ["header2", "header2", "header", "volume", "sectors"]
            );
        } else {
            assert_eq!(&k[..2], ["data", "sectors"]);
        }
        if n as usize == s.segments.len() {
            assert_eq!(&k[k.len() - 3..], ["digest", "hash", "done"]);
        } else {
            assert_eq!(k[k.len() - 1], "next");
            assert!(!k.contains(&"digest"));
        }
        check_tables(&data, &secs);
        // Every segment carries the same set identifier.
        let vol = secs
            .iter()
            .find(|x| x.kind == "volume" || x.kind == "data")
            .unwrap();
        let at = (vol.offset + 76 + 64) as usize;
        assert_eq!(&data[at..at + 16], &s.guid);
    }
    let (read, verify) = read_back(&paths);
    assert!(read == media);
    assert_eq!(verify.md5_match, Some(true));
    assert_eq!(verify.sha1_match, Some(true));
    // The ewf crate's own discovery finds the same set.
    let found = ewf::EwfReader::open(&paths[0]).unwrap();
    assert_eq!(found.total_size(), media.len() as u64);
}

#[test]
fn more_than_65534_chunks_split_into_groups() {
    let dir = tempfile::tempdir().unwrap();
    let chunks = 70_000usize;
    let media = mixed_media(chunks * 512, 5);
    let mut opts = options(Compression::Fast, 2);
    opts.chunk_sectors = 1;
    let prefix = dir.path().join("groups");
    let s = write_image(&prefix, &media, opts);
    assert_eq!(s.chunks, chunks as u64);
    assert_eq!(s.segments.len(), 1);
    let (data, secs) = sections(&s.segments[0].path, 1);
    assert_eq!(check_tables(&data, &secs), [65534, 70_000 - 65534]);
    let first = s.segments[0].path.clone();
    let (read, verify) = read_back(std::slice::from_ref(&first));
    assert!(read == media);
    assert_eq!(verify.md5_match, Some(true));
}

#[test]
fn a_size_that_is_not_whole_sectors_is_padded_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let media = mixed_media(70_000, 6);
    let prefix = dir.path().join("odd");
    let s = write_image(&prefix, &media, options(Compression::Fast, 2));
    assert_eq!(s.source_size, 70_000);
    assert_eq!(s.media_size, 70_144);
    assert_eq!(s.padding_bytes, 144);
    assert!(s.padded());
    let mut padded = media.clone();
    padded.resize(70_144, 0);
    assert_eq!(s.md5, md5_of(&padded));
    let (read, verify) = read_back(std::slice::from_ref(&s.segments[0].path));
    assert!(read == padded);
    assert_eq!(verify.md5_match, Some(true));
}

#[test]
fn convert_streams_a_reader_and_reports_progress() {
    let dir = tempfile::tempdir().unwrap();
    let media = mixed_media(3 * 1024 * 1024 + 100, 7);
    let mut seen = Vec::new();
    let s = convert(
        &media[..],
        media.len() as u64,
        &dir.path().join("conv"),
        &options(Compression::Fast, 0),
        &mut |done| seen.push(done),
    )
    .unwrap();
    assert_eq!(seen.last(), Some(&(media.len() as u64)));
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(s.source_size, media.len() as u64);

    // Read straight into the writer's batches (several of them, the last
    // chunk short and padded to whole sectors) by a source that returns
    // odd, short reads: the same files as bytes written through
    // `io::Write`, and the media reads back.
    struct Dribble<'a>(&'a [u8]);
    impl std::io::Read for Dribble<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.0.len()).min(77_777);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let read = convert(
        Dribble(&media),
        media.len() as u64,
        &dir.path().join("read"),
        &options(Compression::Fast, 3),
        &mut |_| {},
    )
    .unwrap();
    let written = write_image(
        &dir.path().join("written"),
        &media,
        options(Compression::Fast, 1),
    );
    let bytes = |s: &caseload_ewf_writer::Summary| std::fs::read(&s.segments[0].path).unwrap();
    assert!(
        bytes(&read) == bytes(&written),
        "read and written images differ"
    );
    let mut padded = media.clone();
    padded.resize(read.media_size as usize, 0);
    let (back, verify) = read_back(std::slice::from_ref(&read.segments[0].path));
    assert!(back == padded);
    assert_eq!(verify.md5_match, Some(true));

    // A source that ends early is a short media, and leaves no files.
    let short = convert(
        Dribble(&media[..1_500_000]),
        media.len() as u64,
        &dir.path().join("short"),
        &options(Compression::Fast, 2),
        &mut |_| {},
    );
    assert!(matches!(
        short,
        Err(EwfWriteError::ShortMedia { got: 1_500_000, .. })
    ));
    assert!(
        !files_in(dir.path())
            .iter()
            .any(|p| p.to_string_lossy().contains("short"))
    );
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn refusals_happen_before_any_file_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x");
    let err = |size: u64, opts: WriterOptions| EwfWriter::create(&p, size, opts).unwrap_err();

    assert!(matches!(
        err(0, options(Compression::Fast, 1)),
        EwfWriteError::EmptyMedia
    ));
    let mut o = options(Compression::Fast, 1);
    o.chunk_sectors = 48;
    assert!(matches!(
        err(1 << 20, o.clone()),
        EwfWriteError::ChunkSectors(48)
    ));
    o.chunk_sectors = 16384;
    assert!(matches!(
        err(1 << 20, o),
        EwfWriteError::ChunkSectors(16384)
    ));

    let mut o = options(Compression::Fast, 1);
    o.segment_size = 20_000;
    match err(1 << 20, o) {
        EwfWriteError::SegmentSizeTooSmall {
            segment_size,
            minimum,
        } => {
            assert_eq!(segment_size, 20_000);
            assert!(minimum > 32768 && minimum < 40_000, "{minimum}");
        }
        e => panic!("unexpected {e}"),
    }

    let mut o = options(Compression::Fast, 1);
    o.chunk_sectors = 1;
    let chunks_over_32_bits = (u64::from(u32::MAX) + 1) * 512;
    assert!(matches!(
        err(chunks_over_32_bits, o),
        EwfWriteError::TooManyChunks { .. }
    ));

    // 1 GiB in ~40 KiB segments needs far more than 14971 names if nothing
    // compresses; this is known from the sizes alone.
    let mut o = options(Compression::Fast, 1);
    o.segment_size = 40_000;
    match err(1 << 30, o) {
        EwfWriteError::TooManySegments {
            needed,
            limit,
            suggested,
            ..
        } => {
            assert_eq!(limit, MAX_SEGMENTS);
            assert!(needed > u64::from(MAX_SEGMENTS));
            // The suggestion really is enough and not wildly more.
            assert!(suggested > (1u64 << 30) / u64::from(MAX_SEGMENTS));
            assert!(suggested < 2 * ((1u64 << 30) / u64::from(MAX_SEGMENTS) + 40_000));
            let mut ok = options(Compression::Fast, 1);
            ok.segment_size = suggested;
            let mut tight = ok.clone();
            tight.segment_size = suggested - 1;
            let w = EwfWriter::create(dir.path().join("fits"), 1 << 30, ok).unwrap();
            w.abort();
            assert!(matches!(
                err(1 << 30, tight),
                EwfWriteError::TooManySegments { .. }
            ));
        }
        e => panic!("unexpected {e}"),
    }
    assert!(
        files_in(dir.path()).is_empty(),
        "{:?}",
        files_in(dir.path())
    );
}

#[test]
fn existing_segments_are_kept_unless_overwrite_and_stale_ones_go() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("set");
    let media = mixed_media(2 * 1024 * 1024, 8);
    let mut opts = options(Compression::None, 2);
    opts.segment_size = 400_000;
    let big = write_image(&prefix, &media, opts.clone());
    assert!(big.segments.len() >= 5);

    match EwfWriter::create(&prefix, 1000, options(Compression::Fast, 1)).unwrap_err() {
        EwfWriteError::SegmentExists { path } => assert_eq!(path, prefix.with_extension("E01")),
        e => panic!("unexpected {e}"),
    }
    // A later segment of an older set also blocks a new image.
    std::fs::remove_file(prefix.with_extension("E01")).unwrap();
    assert!(matches!(
        EwfWriter::create(&prefix, media.len() as u64, opts.clone()).unwrap_err(),
        EwfWriteError::SegmentExists { .. }
    ));

    let mut small = options(Compression::Fast, 2);
    small.overwrite = true;
    let s = write_image(&prefix, &media[..100_000], small);
    assert_eq!(s.segments.len(), 1);
    assert_eq!(files_in(dir.path()), [prefix.with_extension("E01")]);
    let (read, _) = read_back(std::slice::from_ref(&s.segments[0].path));
    assert_eq!(read.len(), 100_352, "padded to whole sectors");
    assert!(read[..100_000] == media[..100_000]);
    assert!(read[100_000..].iter().all(|&b| b == 0));
}

#[test]
fn unfinished_or_failed_images_leave_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let media = mixed_media(1024 * 1024, 9);
    let mut opts = options(Compression::Fast, 2);
    opts.segment_size = 200_000;

    // Too few bytes: finish refuses and the segments go.
    let mut w =
        EwfWriter::create(dir.path().join("short"), media.len() as u64, opts.clone()).unwrap();
    w.write_all(&media[..600_000]).unwrap();
    match w.finish().unwrap_err() {
        EwfWriteError::ShortMedia { expected, got } => {
            assert_eq!((expected, got), (media.len() as u64, 600_000));
        }
        e => panic!("unexpected {e}"),
    }
    assert!(files_in(dir.path()).is_empty());

    // Too many bytes: refused, nothing consumed; dropping cleans up.
    let mut w = EwfWriter::create(dir.path().join("long"), 1000, opts.clone()).unwrap();
    assert!(matches!(
        w.write_media(&media[..1001]).unwrap_err(),
        EwfWriteError::TooMuchData { expected: 1000 }
    ));
    assert_eq!(w.bytes_written(), 0);
    drop(w);
    assert!(files_in(dir.path()).is_empty());

    // Dropped half way through: removed.
    let mut w =
        EwfWriter::create(dir.path().join("dropped"), media.len() as u64, opts.clone()).unwrap();
    w.write_all(&media[..700_000]).unwrap();
    drop(w);
    assert!(files_in(dir.path()).is_empty());

    // A source that fails mid-way: convert reports the offset and cleans up.
    struct Failing(usize);
    impl std::io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::Error::other("bad sector"));
            }
            let n = buf.len().min(self.0);
            buf[..n].fill(7);
            self.0 -= n;
            Ok(n)
        }
    }
    match convert(
        Failing(500_000),
        1 << 20,
        &dir.path().join("failing"),
        &opts,
        &mut |_| {},
    )
    .unwrap_err()
    {
        EwfWriteError::SourceRead { offset, source } => {
            assert_eq!(offset, 500_000);
            assert_eq!(source.to_string(), "bad sector");
        }
        e => panic!("unexpected {e}"),
    }
    assert!(files_in(dir.path()).is_empty());
}

#[test]
fn fixed_and_random_guids() {
    let dir = tempfile::tempdir().unwrap();
    let media = mixed_media(100_000, 10);
    let mut opts = options(Compression::Fast, 1);
    opts.guid = GuidChoice::Fixed([0x11; 16]);
    let s = write_image(&dir.path().join("fixed"), &media, opts.clone());
    assert_eq!(s.guid, [0x11; 16]);
    opts.guid = GuidChoice::Random;
    let a = write_image(&dir.path().join("r1"), &media, opts.clone());
    let b = write_image(&dir.path().join("r2"), &media, opts);
    assert_ne!(a.guid, b.guid);
    assert_eq!(a.guid[7] >> 4, 4, "version 4");
    let d = write_image(&dir.path().join("d"), &media, options(Compression::Fast, 1));
    assert_eq!(d.guid[7] >> 4, 5, "version 5");
    assert_eq!(&d.guid_string()[14..15], "5");
}
