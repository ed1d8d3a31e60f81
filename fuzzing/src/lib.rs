//! caseload's fuzz targets, one function per parser of untrusted input.
//!
//! Each target takes arbitrary bytes and drives a parser the way caseload
//! drives it on evidence: it must return, whatever the bytes, without a
//! panic, a hang or unbounded memory. Errors are the expected outcome for
//! most inputs and are ignored here; a panic is the bug.
//!
//! The same functions serve two callers: the cargo-fuzz binaries in `fuzz/`
//! (nightly, libFuzzer; `benches/scripts/fuzz.sh` runs them), and the
//! regression replay in the normal test suite (`tests/integration/
//! fuzz_replay.rs`), which feeds every file kept under
//! `tests/fuzz-regressions/<target>/` to its target on stable, so CI keeps
//! every crash that was found and fixed from coming back.
//!
//! Adding a target touches this file (one function and one row of
//! [`TARGETS`]) and adds one binary in `fuzz/`.

use std::io::Write as _;
use std::ops::ControlFlow;
use std::path::Path;

/// A fuzz target: takes any bytes, must return.
pub type Target = fn(&[u8]);

/// Every target by name, for the replay and the fuzz script.
pub const TARGETS: &[(&str, Target)] = &[
    ("volume", volume),
    ("filesystem", filesystem),
    ("e01", e01),
    ("extract", extract),
    ("hashset", hashset),
    ("workload", workload),
    ("layout", layout),
    ("carve", carve),
    ("scalpel", scalpel),
    ("meta", meta),
    ("split", split),
    ("trace", trace),
    ("container", container),
    ("apfs", apfs),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Content bytes read per file at most: enough to reach every run kind
/// (resident, sparse, compressed units) without making each input slow.
const CONTENT_CAP: u64 = 1 << 20;
/// Records walked per file system at most (a hostile MFT can claim
/// millions; the walk itself must stay bounded, which the cap does not
/// hide: it only stops the target early).
const RECORD_CAP: usize = 4096;

/// Walk a file system in `src` at `offset`/`len` and read each record's
/// content (capped), as the filesystem and file-hash stages do.
fn walk_filesystem<R: caseload_fs::ReadAt>(src: &R, offset: u64, len: u64) {
    let Ok(fs) = caseload_fs::open_filesystem(src, offset, len) else {
        return;
    };
    let mut seen = 0usize;
    let mut buf = vec![0u8; 64 << 10];
    let _ = fs.walk(|rec| {
        seen += 1;
        let reader = caseload_fs::ContentReader::new(src, &rec.content);
        let mut at = 0u64;
        while at < reader.len().min(CONTENT_CAP) {
            match reader.read_at(&mut buf, at) {
                Ok(0) | Err(_) => break,
                Ok(n) => at += n as u64,
            }
        }
        if seen >= RECORD_CAP {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    let _ = fs.unallocated_runs(|_| {});
}

/// A disk: the volume system (MBR with extended partitions, GPT), then
/// every partition's file system walked and read.
pub fn volume(data: &[u8]) {
    let Ok(vs) = caseload_fs::open_volume_system(data) else {
        return;
    };
    let _ = vs.unallocated();
    for p in vs.partitions.iter().take(16) {
        walk_filesystem(&data, p.offset, p.length);
    }
}

/// A volume on its own (FAT12/16/32 or NTFS boot sector at byte 0): its
/// tables, directories, MFT records with fixups, attribute lists,
/// runlists, indexes and compressed (LZNT1) content.
pub fn filesystem(data: &[u8]) {
    walk_filesystem(&data, 0, data.len() as u64);
}

/// An APFS container given as its non-zero blocks (mkapfs's smallest
/// container is 128 MiB, too large to mutate; its metadata is a few dozen
/// blocks): the input is records of a little-endian u64 block number and
/// 4,096 bytes, every other block reads as zeros, and the container is as
/// long as block 0's `nx_block_count` says (at most 1 GiB). Then the
/// checkpoint search, object maps, B-trees, the file-system tree walk,
/// decmpfs and the space manager's bitmaps, as [`filesystem`] drives them.
pub fn apfs(data: &[u8]) {
    let src = SparseBlocks::new(data);
    walk_filesystem(&src, 0, caseload_fs::ReadAt::len(&src));
}

/// Blocks of 4 KiB placed by number, zeros elsewhere.
struct SparseBlocks<'a> {
    blocks: std::collections::BTreeMap<u64, &'a [u8]>,
    len: u64,
}

impl<'a> SparseBlocks<'a> {
    const BLOCK: usize = 4096;
    const MAX_LEN: u64 = 1 << 30;

    fn new(data: &'a [u8]) -> Self {
        let mut blocks = std::collections::BTreeMap::new();
        for rec in data.chunks_exact(8 + Self::BLOCK) {
            let mut n = [0u8; 8];
            n.copy_from_slice(&rec[..8]);
            let n = u64::from_le_bytes(n);
            if n < Self::MAX_LEN / Self::BLOCK as u64 {
                blocks.insert(n, &rec[8..]);
            }
        }
        let claimed = blocks
            .get(&0)
            .and_then(|b| b.get(40..48))
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                u64::from_le_bytes(a)
            })
            .unwrap_or(0);
        let last = blocks.keys().next_back().map_or(0, |b| b + 1);
        let len = claimed
            .max(last)
            .saturating_mul(Self::BLOCK as u64)
            .min(Self::MAX_LEN);
        Self { blocks, len }
    }
}

impl caseload_fs::ReadAt for SparseBlocks<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let n = buf
            .len()
            .min(usize::try_from(self.len.saturating_sub(offset)).unwrap_or(usize::MAX));
        let bs = Self::BLOCK as u64;
        let mut done = 0;
        while done < n {
            let pos = offset + done as u64;
            let within = (pos % bs) as usize;
            let take = (Self::BLOCK - within).min(n - done);
            match self.blocks.get(&(pos / bs)) {
                Some(b) => buf[done..done + take].copy_from_slice(&b[within..within + take]),
                None => buf[done..done + take].fill(0),
            }
            done += take;
        }
        Ok(n)
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// Scratch files for the targets whose parser opens a path.
fn scratch(name: &str, data: &[u8]) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join(name);
    let mut f = std::fs::File::create(&path).ok()?;
    f.write_all(data).ok()?;
    Some((dir, path))
}

/// An E01 (EWF v1) or Ex01 segment: sections, tables, chunk decoding, the
/// stored hashes; the whole media read through (capped).
pub fn e01(data: &[u8]) {
    let Some((dir, path)) = scratch("image.E01", data) else {
        return;
    };
    // A damaged chunk: the next one may be readable.
    read_through(dir.path(), &path, 16 << 20, 64 << 10, true);
}

/// Text extraction as the index stage and compound-file expansion run it:
/// the format sniffed from the bytes (HTML, MIME mail and mbox, PDF
/// streams, OOXML, ZIP, gzip, SQLite, UTF-16 text, media, binary strings).
pub fn extract(data: &[u8]) {
    let limits = caseload_engine::extract::Limits::default();
    let mut text = String::new();
    let mut ex = caseload_engine::extract::Extraction::new(&limits, &mut text);
    let _ = ex.extract(data, 0);
}

/// A hash-set file in whatever format detection makes of it (NSRL RDS
/// 2.x, RDS v3 SQLite, hashdeep, md5sum/sha1sum/sha256sum), imported into
/// a scratch library.
pub fn hashset(data: &[u8]) {
    use caseload_engine::channel::{Channel, ChannelKind};
    use caseload_engine::hashset::{Category, ImportRequest, Library, NoImportProgress};
    let Some((dir, path)) = scratch("set.txt", data) else {
        return;
    };
    let Ok(library) = Library::open_or_create(&dir.path().join("kff.sqlite"), None) else {
        return;
    };
    let temp = Channel::new(ChannelKind::Temp, dir.path(), Vec::new());
    let req = ImportRequest {
        name: "fuzz".into(),
        category: Category::Known,
        sources: vec![path],
        format: None,
        strict: false,
        replace: false,
        kinds: Vec::new(),
        memory: 1 << 20,
    };
    let _ = library.import(
        &req,
        &temp,
        &NoImportProgress,
        &std::sync::atomic::AtomicBool::new(false),
    );
}

/// A workload file (TOML).
pub fn workload(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = caseload_workloads::workload::Workload::parse(text, "fuzz", "fuzz");
    }
}

/// A layout file (TOML).
pub fn layout(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = caseload_engine::layout::Layout::parse(text, Path::new("fuzz.toml"));
    }
}

/// Every built-in carve format's delimiter (where an item ends) and
/// verifier (whether it is whole), fed in blocks as the scan feeds them;
/// the first two bytes pick the format and the block size.
pub fn carve(data: &[u8]) {
    caseload_engine::stages::carve::exercise::builtin_item(data);
}

/// A scalpel/foremost signature file (bytes before the first NUL), and
/// its signatures' delimiters over the bytes after it.
pub fn scalpel(data: &[u8]) {
    caseload_engine::stages::carve::exercise::signature_file(data);
}

/// Meta carving: FAT directory entries and NTFS `FILE` records found in
/// sectors of unallocated space.
pub fn meta(data: &[u8]) {
    caseload_engine::stages::carve::exercise::meta_records(data);
}

/// Raw split-set discovery: the input's lines name files in one
/// directory (the first is the one opened; each file holds 512 bytes per
/// line before it), then the set is opened as evidence and read through.
pub fn split(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let mut first = None;
    for (i, line) in data.split(|&b| b == b'\n').take(16).enumerate() {
        // Names a file system can hold, inside the scratch directory.
        let name: String = String::from_utf8_lossy(line)
            .chars()
            .filter(|c| *c != '/' && *c != '\0')
            .take(120)
            .collect();
        if name.is_empty() || name == "." || name == ".." {
            continue;
        }
        let path = dir.path().join(&name);
        if std::fs::write(&path, vec![i as u8; 512 * (i + 1)]).is_err() {
            continue;
        }
        first.get_or_insert(path);
    }
    let Some(first) = first else {
        return;
    };
    read_through(dir.path(), &first, 1 << 20, 4096, false);
}

/// Open `path` as evidence (in `dir`) and read its media through in
/// `step`-byte reads, up to `cap` bytes; past an unreadable read when
/// `skip_errors`, else stop there.
fn read_through(dir: &Path, path: &Path, cap: u64, step: usize, skip_errors: bool) {
    use caseload_engine::channel::{Channel, ChannelKind};
    use caseload_engine::source::ReadOptions;
    let channel = Channel::new(ChannelKind::Evidence, dir, Vec::new());
    let Ok(source) = caseload_engine::source::open_evidence(path, &channel, ReadOptions::default())
    else {
        return;
    };
    let mut buf = vec![0u8; step];
    let mut at = 0u64;
    while at < source.size().min(cap) {
        match source.read_at(&mut buf, at) {
            Ok(0) => break,
            Ok(n) => at += n as u64,
            Err(_) if skip_errors => at += step as u64,
            Err(_) => break,
        }
    }
    let _ = source.info();
}

/// An I/O trace as `trace import` and `trace compare` read it: the same
/// bytes as a Process Monitor PML log, a Process Monitor CSV export,
/// strace output and a caseload trace, each through the importer (every
/// event mapped to a channel, so its whole path is taken), and the
/// caseload reading through `trace compare`'s figures.
pub fn trace(data: &[u8]) {
    use caseload_traces::import::{self, ImportOptions, Importer, PathMap};
    let mut opts = ImportOptions::default();
    for m in ["C:\\=case", "/=evidence", "\\\\=temp"] {
        if let Ok(m) = PathMap::parse(m) {
            opts.maps.push(m);
        }
    }
    // Each reader through its own importer.
    for reader in 0..3 {
        let mut out = Vec::new();
        let Ok(mut importer) = Importer::new(&opts, &mut out) else {
            return;
        };
        let mut sink = |e| importer.push(e);
        let _ = match reader {
            0 => import::pml::read(std::io::Cursor::new(data), &mut sink).map(|_| ()),
            1 => import::procmon_csv::read(data, &mut sink).map(|_| ()),
            _ => import::strace::read(data, &mut sink).map(|_| ()),
        };
        let _ = importer.finish();
    }
    let _ = caseload_traces::analysis::analyse(data, &[1 << 20, 64 << 20], 1.0);
}

/// A virtual-disk container (VMDK sparse or stream-optimized, a VMDK
/// descriptor, VHD, VHDX, QCOW2) as its only file (a descriptor's extents
/// are not there): detection, headers and tables, then the media read
/// through in 64 KiB pieces (capped), each piece's region asked, and the
/// file system of what it presents walked.
pub fn container(data: &[u8]) {
    use caseload_containers::{Backing, Container};
    let _ = caseload_containers::detect_bytes(
        &data[..data.len().min(512)],
        &data[data.len().saturating_sub(512)..],
    );
    let none = |p: &Path| -> std::io::Result<Box<dyn Backing>> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{}: only the main file is here", p.display()),
        ))
    };
    let main: Box<dyn Backing> = Box::new(data.to_vec());
    let Ok(c) = Container::open(Path::new("disk"), main, &none) else {
        return;
    };
    let _ = (c.kind(), c.variant(), c.notes(), c.files(), c.damage_unit());
    let mut buf = vec![0u8; 64 << 10];
    let mut at = 0u64;
    while at < c.media_size().min(16 << 20) {
        let _ = c.region(at);
        match c.read_at(&mut buf, at) {
            Ok(0) => break,
            // A damaged unit: the next piece may be readable.
            Ok(_) | Err(_) => at += buf.len() as u64,
        }
    }
    let media = MediaOf(&c);
    walk_filesystem(&media, 0, c.media_size().min(64 << 20));
}

/// A container's media as the file-system parsers' positioned reads.
struct MediaOf<'a>(&'a caseload_containers::Container);

impl caseload_fs::ReadAt for MediaOf<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.0
            .read_at(buf, offset)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn len(&self) -> u64 {
        self.0.media_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_takes_empty_and_junk_input() {
        for (name, f) in TARGETS {
            f(&[]);
            f(&[0xff; 4096]);
            f(&[0u8; 4104]);
            assert!(target(name).is_some());
        }
        assert!(target("nope").is_none());
    }
}
