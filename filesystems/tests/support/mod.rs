//! Helpers for caseload-fs's integration tests: the optional real-image
//! folder, optional oracle tools, an E01 adapter, TSK bodyfile parsing and
//! hashing through the crate's content reader.

#![allow(dead_code)]

pub mod apfs_synth;
pub mod exfat_synth;
pub mod synth;

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Command;

use caseload_fs::{ContentReader, FileRecord, FileSystem, ReadAt, open_filesystem};
use md5::{Digest, Md5};

/// `../shared/real-images` beside the checkout (or `CASELOAD_REAL_IMAGES`),
/// or `None` with a printed notice.
pub fn real_images(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("CASELOAD_REAL_IMAGES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("..")
                .join("shared")
                .join("real-images")
        });
    if dir.join("README.md").is_file() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED {test}: real images not found at {} (set CASELOAD_REAL_IMAGES)",
            dir.display()
        );
        None
    }
}

/// Whether an oracle tool is on `PATH`; prints a skip notice if not.
pub fn have_tool(test: &str, tool: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|p| p.join(tool).is_file()))
        .unwrap_or(false);
    if !found {
        eprintln!("SKIPPED {test}: external tool `{tool}` is not installed");
    }
    found
}

/// An E01 image as a [`ReadAt`], through the `ewf` crate.
pub struct Ewf(pub ewf::EwfReader);

impl ReadAt for Ewf {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.0
            .read_at(buf, offset)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn len(&self) -> u64 {
        self.0.total_size()
    }
}

/// Opens a raw image (`std::fs::File`) or an E01 set (`ewf`).
pub fn open_image(path: &Path) -> Box<dyn ReadAt> {
    let is_ewf = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("e01"));
    if is_ewf {
        Box::new(Ewf(ewf::EwfReader::open(path).expect("open E01")))
    } else {
        Box::new(std::fs::File::open(path).expect("open raw image"))
    }
}

/// Deterministic filler bytes (xorshift from `seed`).
pub fn filler(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

/// Unallocated blocks as TSK's `blkls -l` lists them for the file system
/// at `sector` (sectors for FAT and exFAT, clusters for NTFS), or `None`
/// if blkls cannot run on the image.
pub fn blkls_unallocated(image: &Path, sector: u64) -> Option<std::collections::BTreeSet<u64>> {
    let out = Command::new("blkls")
        .args(["-l", "-o", &sector.to_string()])
        .arg(image)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_suffix("|f"))
            .filter_map(|a| a.parse().ok())
            .collect(),
    )
}

/// Hex MD5 of a record's content read through its runs.
pub fn md5_of<R: ReadAt + ?Sized>(src: &R, rec: &FileRecord) -> String {
    let mut r = ContentReader::new(src, &rec.content);
    let mut h = Md5::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = r.read(&mut buf).expect("read content");
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    hex(&h.finalize())
}

pub fn md5_bytes(b: &[u8]) -> String {
    hex(&Md5::digest(b))
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Every record of a walk, in walk order.
pub fn walk_all<R: ReadAt>(fs: &FileSystem<R>) -> (Vec<FileRecord>, caseload_fs::WalkSummary) {
    let mut out = Vec::new();
    let summary = fs
        .walk(|r| {
            out.push(r);
            ControlFlow::Continue(())
        })
        .expect("walk");
    (out, summary)
}

/// One line of a TSK bodyfile (`fls -m` with the MD5 column filled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyLine {
    pub md5: String,
    /// Path without the leading `/` and without ` (deleted)`.
    pub path: String,
    pub deleted: bool,
    pub file_name_attr: bool,
    pub inode: String,
    pub mode: String,
    pub size: u64,
    pub atime: i64,
    pub mtime: i64,
    pub ctime: i64,
    pub crtime: i64,
}

impl BodyLine {
    /// Whether the metadata type is a regular file (`r/r`, `-/r`).
    pub fn regular(&self) -> bool {
        self.mode
            .split('/')
            .nth(1)
            .is_some_and(|m| m.starts_with('r'))
    }
}

pub fn parse_bodyfile(text: &str) -> Vec<BodyLine> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            let n = f.len();
            assert!(n >= 11, "bodyfile line {l}");
            let mut name = f[1..n - 9].join("|");
            let deleted = name.ends_with(" (deleted)");
            if deleted {
                name.truncate(name.len() - " (deleted)".len());
            }
            let file_name_attr = name.ends_with(" ($FILE_NAME)");
            if file_name_attr {
                name.truncate(name.len() - " ($FILE_NAME)".len());
            }
            let num = |s: &str| s.parse::<i64>().expect("number");
            BodyLine {
                md5: f[0].to_string(),
                path: name.trim_start_matches('/').to_string(),
                deleted,
                file_name_attr,
                inode: f[n - 9].to_string(),
                mode: f[n - 8].to_string(),
                size: f[n - 5].parse().expect("size"),
                atime: num(f[n - 4]),
                mtime: num(f[n - 3]),
                ctime: num(f[n - 2]),
                crtime: num(f[n - 1]),
            }
        })
        .collect()
}

/// Records keyed by (TSK path, meta address); several records can share a
/// key (TSK lists some files twice), so values are lists.
pub fn by_key(records: &[FileRecord]) -> BTreeMap<(String, String), Vec<&FileRecord>> {
    let mut m: BTreeMap<(String, String), Vec<&FileRecord>> = BTreeMap::new();
    for r in records {
        m.entry((r.path(), r.meta.to_string())).or_default().push(r);
    }
    m
}

/// MD5 of `icat -o <sector> <image> <addr>`, if icat runs.
pub fn icat_md5(image: &Path, sector: u64, addr: &str) -> Option<String> {
    let out = Command::new("icat")
        .env("TZ", "UTC")
        .arg("-o")
        .arg(sector.to_string())
        .arg(image)
        .arg(addr)
        .output()
        .ok()?;
    out.status.success().then(|| md5_bytes(&out.stdout))
}

/// Seconds of an optional timestamp, 0 when absent (as TSK prints it).
pub fn secs(t: Option<caseload_fs::Timestamp>) -> i64 {
    t.map_or(0, |t| t.secs)
}

const ZERO_MD5: &str = "00000000000000000000000000000000";

/// What TSK prints for an NTFS timestamp of 0 ("not set"): it subtracts the
/// 1601-to-1970 offset in unsigned arithmetic and truncates to 32 bits. This
/// crate reports such a time as absent (0 in a bodyfile).
pub const TSK_ZERO_NT_TIME: i64 = 3_373_865_674;

fn tsk_time(t: i64) -> i64 {
    if t == TSK_ZERO_NT_TIME { 0 } else { t }
}

/// Notes a record whose size or deleted state differs from its TSK line.
fn size_and_state(r: &FileRecord, l: &BodyLine, failures: &mut Vec<String>) {
    if r.size != l.size {
        failures.push(format!("{}: size {} vs TSK {}", l.path, r.size, l.size));
    }
    if r.deleted() != l.deleted {
        failures.push(format!(
            "{}: deleted {} vs TSK {}",
            l.path,
            r.deleted(),
            l.deleted
        ));
    }
}

/// Checks records against TSK bodyfile lines: every regular-file line must
/// be a record with the same path, meta address, deleted state, size,
/// timestamps and MD5 (named streams and lines TSK could not hash are
/// checked against `icat` of their own address when `can_icat`), and every
/// regular-file record must be listed. Returns the differences.
pub fn compare_with_bodyfile<R: ReadAt + ?Sized>(
    src: &R,
    image: &Path,
    sector: u64,
    records: &[FileRecord],
    lines: &[BodyLine],
    can_icat: bool,
) -> Vec<String> {
    let index = by_key(records);
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut oracle_keys = std::collections::BTreeSet::new();
    for l in lines.iter().filter(|l| l.regular() && !l.file_name_attr) {
        oracle_keys.insert((l.path.clone(), l.inode.clone()));
        let Some(recs) = index.get(&(l.path.clone(), l.inode.clone())) else {
            failures.push(format!("missing: {} [{}]", l.path, l.inode));
            continue;
        };
        let r = recs[0];
        checked += 1;
        size_and_state(r, l, &mut failures);
        let t = &r.times;
        let got = (
            secs(t.accessed),
            secs(t.modified),
            secs(t.changed),
            secs(t.created),
        );
        let want = (
            tsk_time(l.atime),
            tsk_time(l.mtime),
            tsk_time(l.ctime),
            tsk_time(l.crtime),
        );
        if got != want {
            failures.push(format!(
                "{}: times a/m/c/cr {got:?} vs TSK {want:?}",
                l.path
            ));
        }
        // TSK's bodyfile MD5 column is `icat <inode>`: the default stream.
        // Named streams are checked against icat of their own address.
        let expected = if r.stream.is_some() || l.md5 == ZERO_MD5 {
            if !can_icat {
                continue;
            }
            match icat_md5(image, sector, &l.inode) {
                Some(m) => m,
                None => continue,
            }
        } else {
            l.md5.clone()
        };
        let md5 = md5_of(src, r);
        if md5 != expected {
            failures.push(format!("{} [{}]: md5 {md5} vs {expected}", l.path, l.inode));
        }
    }
    // NTFS `($FILE_NAME)` lines carry the times of the name's $FILE_NAME.
    for l in lines.iter().filter(|l| l.file_name_attr) {
        let inode = l.inode.split('-').next().unwrap_or("");
        let prefix = format!("{}:", l.path);
        let Some(r) = records.iter().find(|r| {
            r.meta.inode.to_string() == inode
                && (r.path() == l.path || r.path().starts_with(&prefix))
        }) else {
            failures.push(format!("missing name: {} [{}]", l.path, l.inode));
            continue;
        };
        let t = r.name_times.unwrap_or_default();
        let got = (
            secs(t.accessed),
            secs(t.modified),
            secs(t.changed),
            secs(t.created),
        );
        let want = (
            tsk_time(l.atime),
            tsk_time(l.mtime),
            tsk_time(l.ctime),
            tsk_time(l.crtime),
        );
        if got != want {
            failures.push(format!(
                "{} ($FILE_NAME): times {got:?} vs TSK {want:?}",
                l.path
            ));
        }
    }
    for r in records {
        let regular = matches!(
            r.kind,
            caseload_fs::FileKind::File | caseload_fs::FileKind::VolumeLabel
        );
        if regular && !oracle_keys.contains(&(r.path(), r.meta.to_string())) {
            failures.push(format!(
                "extra record not in TSK's listing: {} [{}]",
                r.path(),
                r.meta
            ));
        }
    }
    if checked == 0 {
        failures.push("no regular-file line checked".to_string());
    }
    failures
}

/// 2038-01-01T00:00:00Z. TSK converts FAT and exFAT dates with `mktime`
/// after capping the year at 2037, so a later date shows as 0; this crate
/// keeps it (a deliberate difference).
pub const TSK_FAT_YEAR_LIMIT: i64 = 2_145_916_800;

/// Whether a time of ours equals TSK's, allowing for its year limit.
pub fn same_fat_time(ours: i64, tsk: i64) -> bool {
    ours == tsk || (tsk == 0 && ours >= TSK_FAT_YEAR_LIMIT)
}

/// Checks records against every line of a TSK bodyfile whatever its type
/// (files, directories, labels, virtual files, orphans): a record with the
/// same path and meta address, deleted state, size, the four times and the
/// MD5 (TSK's bodyfile MD5 is `icat` of the address; lines whose MD5 TSK
/// could not compute are not hash-checked). `expected_md5` gives the MD5 to
/// expect for a line, so a test can state a deliberate difference. Every
/// record must be listed too. Returns the differences.
pub fn compare_every_line<R: ReadAt + ?Sized>(
    src: &R,
    records: &[FileRecord],
    lines: &[BodyLine],
    expected_md5: &dyn Fn(&FileRecord, &BodyLine) -> String,
) -> Vec<String> {
    let index = by_key(records);
    let mut failures = Vec::new();
    let mut listed = std::collections::BTreeSet::new();
    for l in lines {
        listed.insert((l.path.clone(), l.inode.clone()));
        let Some(recs) = index.get(&(l.path.clone(), l.inode.clone())) else {
            failures.push(format!("missing: {} [{}] ({})", l.path, l.inode, l.mode));
            continue;
        };
        let r = recs[0];
        size_and_state(r, l, &mut failures);
        let t = &r.times;
        let got = [
            secs(t.accessed),
            secs(t.modified),
            secs(t.changed),
            secs(t.created),
        ];
        let want = [l.atime, l.mtime, l.ctime, l.crtime];
        if got.iter().zip(&want).any(|(&g, &w)| !same_fat_time(g, w)) {
            failures.push(format!(
                "{}: times a/m/c/cr {got:?} vs TSK {want:?}",
                l.path
            ));
        }
        if l.md5 != ZERO_MD5 {
            let want = expected_md5(r, l);
            let md5 = md5_of(src, r);
            if md5 != want {
                failures.push(format!(
                    "{} [{}]: md5 {md5} vs {want} ({:?}, content {:?})",
                    l.path, l.inode, r.recovery, r.content
                ));
            }
        }
    }
    for r in records {
        if !listed.contains(&(r.path(), r.meta.to_string())) {
            failures.push(format!(
                "extra record not in TSK's listing: {} [{}]",
                r.path(),
                r.meta
            ));
        }
    }
    if lines.is_empty() {
        failures.push("TSK listed nothing".to_string());
    }
    failures
}

/// TSK's bodyfile for the file system at `sector` of `image`, with the MD5
/// column filled from `icat` (as the real-image oracles were made), or
/// `None` if fls/icat cannot run.
pub fn live_bodyfile(image: &Path, sector: u64) -> Option<Vec<BodyLine>> {
    // TSK reads FAT (and exFAT) wall-clock times through mktime: UTC
    // makes them the numbers this crate reports.
    let out = Command::new("fls")
        .env("TZ", "UTC")
        .args(["-r", "-m", "/", "-o", &sector.to_string()])
        .arg(image)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = parse_bodyfile(&text);
    for l in &mut lines {
        let inode = l.inode.split('-').next().unwrap_or("0").to_string();
        l.md5 = icat_md5(image, sector, &inode).unwrap_or_else(|| ZERO_MD5.to_string());
    }
    Some(lines)
}

/// Rows of `mmls` output: (slot, start, length, description).
pub fn parse_mmls(text: &str) -> Vec<(String, u64, u64, String)> {
    text.lines()
        .filter_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            if t.len() < 6 || !t[0].ends_with(':') {
                return None;
            }
            let start = t[2].parse().ok()?;
            let len = t[4].parse().ok()?;
            Some((t[1].to_string(), start, len, t[5..].join(" ")))
        })
        .collect()
}

/// Reduces a description to what both tools share: the type code when there
/// is one (`... (0x07)`), else the text.
pub fn type_key(desc: &str) -> String {
    match desc.rfind("(0x") {
        Some(i) => desc[i..].to_lowercase(),
        None => desc.to_string(),
    }
}

/// Compares a volume system with `mmls` rows: partitions, tables and
/// containers, and unallocated areas.
pub fn assert_mmls_agrees(
    vs: &caseload_fs::VolumeSystem,
    rows: &[(String, u64, u64, String)],
    what: &str,
) {
    use std::collections::BTreeSet;
    let mut want_parts = BTreeSet::new();
    let mut want_meta = BTreeSet::new();
    let mut want_free = BTreeSet::new();
    for (slot, start, len, desc) in rows {
        match slot.as_str() {
            "Meta" => want_meta.insert((*start, *len, type_key(desc))),
            "-------" => want_free.insert((*start, *len)),
            _ => want_parts.insert((slot.clone(), *start, *len, type_key(desc))),
        };
    }
    let parts: BTreeSet<_> = vs
        .partitions
        .iter()
        .map(|p| {
            (
                p.mmls_slot(),
                p.start_sector,
                p.sector_count,
                type_key(&p.description),
            )
        })
        .collect();
    let meta: BTreeSet<_> = vs
        .tables
        .iter()
        .map(|t| (t.start_sector, t.sector_count, type_key(&t.description)))
        .collect();
    let free: BTreeSet<_> = vs.unallocated().into_iter().collect();
    assert_eq!(parts, want_parts, "{what}: partitions");
    assert_eq!(meta, want_meta, "{what}: tables");
    assert_eq!(free, want_free, "{what}: unallocated");
}

// ---------------------------------------------------------------- fuzz

/// xorshift64*: deterministic mutations.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Mutates bytes of the metadata regions of an image (the first region, the
/// boot sector, rarely) and walks it, many times: opening may fail, the walk
/// must end without panicking and every record it yields must be readable
/// through its runs or fail cleanly.
pub fn fuzz(base: &[u8], regions: &[(usize, usize)], seed: u64, rounds: usize) {
    // CASELOAD_FS_FUZZ_ROUNDS runs longer campaigns by hand.
    let rounds = std::env::var("CASELOAD_FS_FUZZ_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(rounds);
    let mut rng = Rng(seed);
    // One working copy, mutated and restored each round.
    let mut img = base.to_vec();
    let (mut opened, mut records) = (0u64, 0u64);
    for _ in 0..rounds {
        let mut undo = Vec::new();
        for _ in 0..1 + rng.below(24) {
            // The first region (the boot sector) is hit rarely: a broken
            // boot sector only tests that opening fails.
            let pick = if regions.len() > 1 && rng.below(12) != 0 {
                1 + rng.below(regions.len() - 1)
            } else {
                0
            };
            let (start, len) = regions[pick];
            let at = start + rng.below(len);
            undo.push((at, img[at]));
            img[at] = match rng.below(4) {
                0 => 0,
                1 => 0xFF,
                2 => img[at] ^ (1 << rng.below(8)),
                _ => rng.next() as u8,
            };
        }
        let end = if rng.below(8) == 0 {
            rng.below(img.len())
        } else {
            img.len()
        };
        let cut = &img[..end];
        if let Ok(fs) = open_filesystem(cut, 0, cut.len() as u64) {
            let mut n = 0u64;
            let _ = fs.walk(|r| {
                n += 1;
                let mut reader = caseload_fs::ContentReader::new(cut, &r.content);
                let mut sink = Vec::new();
                let _ = std::io::Read::read_to_end(
                    &mut std::io::Read::take(&mut reader, 1 << 20),
                    &mut sink,
                );
                let _ = r.display_path();
                std::ops::ControlFlow::Continue(())
            });
            assert!(n < 1_000_000);
            opened += 1;
            records += n;
        }
        for (at, old) in undo.into_iter().rev() {
            img[at] = old;
        }
    }
    eprintln!("fuzz: {rounds} rounds, {opened} opened, {records} records walked");
    assert!(
        opened > 0,
        "no mutated image opened: the campaign tests nothing"
    );
}

/// Writes an MBR partition entry (`slot` of the table in `sector`) and the
/// boot signature.
pub fn mbr_entry(disk: &mut [u8], sector: usize, slot: usize, ty: u8, start: u32, count: u32) {
    let o = sector * 512 + 446 + 16 * slot;
    disk[o + 4] = ty;
    disk[o + 8..o + 12].copy_from_slice(&start.to_le_bytes());
    disk[o + 12..o + 16].copy_from_slice(&count.to_le_bytes());
    disk[sector * 512 + 510] = 0x55;
    disk[sector * 512 + 511] = 0xAA;
}

/// A GUID's on-disk bytes (mixed-endian) from its text form.
pub fn guid_bytes(s: &str) -> [u8; 16] {
    let h: Vec<u8> = s
        .replace('-', "")
        .as_bytes()
        .chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).expect("hex"), 16).expect("hex"))
        .collect();
    let mut g = [0u8; 16];
    g[0..4].copy_from_slice(&[h[3], h[2], h[1], h[0]]);
    g[4..6].copy_from_slice(&[h[5], h[4]]);
    g[6..8].copy_from_slice(&[h[7], h[6]]);
    g[8..16].copy_from_slice(&h[8..16]);
    g
}

/// A zeroed disk of `sectors` 512-byte sectors with a protective MBR and
/// primary and backup GPT headers and entry arrays listing `parts`
/// (first and last sector, name, type GUID; partition i's unique GUID is
/// i + 1 repeated).
pub fn gpt_disk_with(sectors: usize, parts: &[(u64, u64, &str, &str)]) -> Vec<u8> {
    let mut d = vec![0u8; sectors * 512];
    let last = sectors as u64 - 1;
    mbr_entry(&mut d, 0, 0, 0xEE, 1, (sectors - 1) as u32);
    let mut entries = vec![0u8; 128 * 128];
    for (i, (first, lastl, name, ty)) in parts.iter().enumerate() {
        let e = &mut entries[i * 128..(i + 1) * 128];
        e[0..16].copy_from_slice(&guid_bytes(ty));
        e[16..32].copy_from_slice(&[i as u8 + 1; 16]);
        e[32..40].copy_from_slice(&first.to_le_bytes());
        e[40..48].copy_from_slice(&lastl.to_le_bytes());
        for (j, u) in name.encode_utf16().enumerate() {
            e[56 + 2 * j..58 + 2 * j].copy_from_slice(&u.to_le_bytes());
        }
    }
    let ecrc = crc32fast::hash(&entries);
    let header = |my: u64, alt: u64, entries_lba: u64| {
        let mut h = vec![0u8; 92];
        h[0..8].copy_from_slice(b"EFI PART");
        h[8..12].copy_from_slice(&0x0001_0000u32.to_le_bytes());
        h[12..16].copy_from_slice(&92u32.to_le_bytes());
        h[24..32].copy_from_slice(&my.to_le_bytes());
        h[32..40].copy_from_slice(&alt.to_le_bytes());
        h[40..48].copy_from_slice(&34u64.to_le_bytes());
        h[48..56].copy_from_slice(&(last - 33).to_le_bytes());
        h[56..72].copy_from_slice(&[0x42; 16]);
        h[72..80].copy_from_slice(&entries_lba.to_le_bytes());
        h[80..84].copy_from_slice(&128u32.to_le_bytes());
        h[84..88].copy_from_slice(&128u32.to_le_bytes());
        h[88..92].copy_from_slice(&ecrc.to_le_bytes());
        let crc = crc32fast::hash(&h);
        h[16..20].copy_from_slice(&crc.to_le_bytes());
        h
    };
    let p = header(1, last, 2);
    d[512..512 + 92].copy_from_slice(&p);
    d[1024..1024 + entries.len()].copy_from_slice(&entries);
    let b = header(last, 1, last - 32);
    let at = (last as usize) * 512;
    d[at..at + 92].copy_from_slice(&b);
    let eat = (last as usize - 32) * 512;
    d[eat..eat + entries.len()].copy_from_slice(&entries);
    d
}
