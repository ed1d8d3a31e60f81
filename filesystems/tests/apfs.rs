//! APFS: containers made by `mkapfs` (apfsprogs), filled by the test
//! (`support::apfs_synth` rebuilds the volume's file-system tree with
//! files, directories, holes, links and compressed files), compared with
//! The Sleuth Kit's pool layer (`pstat`, `fls -r -p -l -P apfs -B <block>`,
//! `icat -P apfs -B <block>`), and damaged byte by byte: bad checksums, no
//! valid checkpoint, an encrypted volume, a B-tree node pointing to itself
//! or outside the container, extents past the end. Any other APFS image
//! (the corpus writer's, a real one) is compared with TSK the same way when
//! `CASELOAD_APFS_TEST_IMAGE` names it. Each part prints `SKIPPED ...` when
//! a tool it needs is absent.

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use caseload_fs::{
    ApfsFs, Content, Encoding, ErrorKind, FileKind, FileRecord, FileSystem, FsKind, ReadAt, Run,
    WalkSummary, open_filesystem,
};
use support::apfs_synth::*;
use support::*;

/// mkapfs's smallest container is 128 MiB: one test at a time holds one.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// An empty container from mkapfs, or `None` (skip printed).
fn mkapfs(test: &str) -> Option<Vec<u8>> {
    if !have_tool(test, "mkapfs") {
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join("c.img");
    std::fs::File::create(&p)
        .and_then(|f| f.set_len(128 << 20))
        .expect("image file");
    let ok = Command::new("mkapfs")
        .args(["-L", "caseload"])
        .arg(&p)
        .output()
        .expect("mkapfs")
        .status
        .success();
    assert!(ok, "mkapfs failed");
    Some(std::fs::read(&p).expect("read image"))
}

fn write_temp(img: &[u8]) -> tempfile::NamedTempFile {
    let mut t = tempfile::NamedTempFile::new().expect("temp file");
    t.write_all(img).expect("write image");
    t.flush().expect("flush");
    t
}

fn walk<R: ReadAt>(fs: &ApfsFs<R>) -> (Vec<FileRecord>, WalkSummary) {
    let mut out = Vec::new();
    let s = fs
        .walk(|r| {
            out.push(r);
            ControlFlow::Continue(())
        })
        .expect("walk");
    (out, s)
}

fn has(errors: &[caseload_fs::ProcessingError], kind: ErrorKind) -> bool {
    errors.iter().any(|e| e.kind == kind)
}

/// One line of `fls -r -p -l` (its last columns: size, GID, UID).
#[derive(Debug)]
struct Fls {
    meta: char,
    inode: u64,
    path: String,
    size: u64,
    uid: u32,
    gid: u32,
}

fn fls(image: &Path, apsb: u64) -> Vec<Fls> {
    let out = Command::new("fls")
        .args(["-r", "-p", "-l", "-P", "apfs", "-B", &apsb.to_string()])
        .arg(image)
        .output()
        .expect("fls");
    assert!(
        out.status.success(),
        "fls: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (head, rest) = l.split_once(":\t").expect("fls line");
            let f: Vec<&str> = rest.split('\t').collect();
            let mut h = head.split_whitespace();
            let types = h.next().expect("types");
            let num: String = h
                .next()
                .expect("inode")
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let n = f.len();
            Fls {
                meta: types.chars().nth(2).unwrap_or('-'),
                inode: num.parse().expect("inode number"),
                path: f[..n - 7].join("\t"),
                size: f[n - 3].parse().expect("size"),
                gid: f[n - 2].parse().expect("gid"),
                uid: f[n - 1].parse().expect("uid"),
            }
        })
        .collect()
}

fn icat_md5(image: &Path, apsb: u64, inode: u64) -> String {
    let out = Command::new("icat")
        .args(["-P", "apfs", "-B", &apsb.to_string()])
        .arg(image)
        .arg(inode.to_string())
        .output()
        .expect("icat");
    md5_bytes(&out.stdout)
}

/// Whether a record's content has a hole before its last stored run.
fn has_hole(r: &FileRecord) -> bool {
    let Content::Runs(runs) = &r.content else {
        return false;
    };
    let last_data = runs.iter().rposition(|x| matches!(x, Run::Data { .. }));
    runs.iter()
        .enumerate()
        .any(|(i, x)| matches!(x, Run::Zeros { .. }) && last_data.is_some_and(|l| i < l))
}

/// The MD5 of what TSK 4.11's `icat` gives for a sparse APFS file: the
/// stored extents one after the other, holes left out (its data runs
/// ignore the extents' logical offsets), up to the file size. This reader
/// gives the holes as zeros.
fn tsk_sparse_md5<R: ReadAt>(src: &R, r: &FileRecord) -> String {
    let mut bytes = Vec::new();
    let stored = r
        .content
        .extents()
        .into_iter()
        .chain(r.slack.iter().copied());
    for e in stored {
        let mut b = vec![0u8; e.len as usize];
        caseload_fs::read_exact_at(src, &mut b, e.offset).expect("read extent");
        bytes.extend_from_slice(&b);
    }
    bytes.truncate(r.size as usize);
    md5_bytes(&bytes)
}

fn meta_char(r: &FileRecord) -> char {
    match r.owner.mode & 0o170000 {
        0o040000 => 'd',
        0o100000 => 'r',
        0o120000 => 'l',
        0o010000 => 'p',
        0o020000 => 'c',
        0o060000 => 'b',
        0o140000 => 'h',
        _ => '-',
    }
}

/// Compares every volume's records with `fls` and `icat` at its APSB
/// block: the same paths in the same order, inode numbers, types, sizes,
/// owners, and every file's content MD5 (resource-fork compressed files,
/// which TSK decodes and this reader reports encoded, are counted apart).
/// Returns the number of files whose content was compared.
fn compare_with_tsk(test: &str, image: &Path) -> Option<usize> {
    if !(have_tool(test, "fls") && have_tool(test, "icat")) {
        return None;
    }
    let src = std::fs::File::open(image).expect("open image");
    let mut fs = ApfsFs::open(&src, 0, src.len()).expect("open APFS");
    fs.set_decode_limit(u64::MAX);
    let (records, _) = walk(&fs);
    let several = fs.volumes().len() > 1;
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut encoded = 0;
    let mut sparse = 0;
    for vol in fs.volumes() {
        let Some(apsb) = vol.apsb_block else { continue };
        if vol.encrypted() {
            continue;
        }
        let prefix = format!("$Volume{}/", vol.index);
        let ours: Vec<&FileRecord> = records
            .iter()
            .filter(|r| r.kind != FileKind::VirtualDirectory)
            .filter(|r| !several || r.path().starts_with(&prefix))
            .collect();
        let theirs = fls(image, apsb);
        let strip = |r: &FileRecord| {
            let p = r.path();
            if several {
                p[prefix.len()..].to_string()
            } else {
                p
            }
        };
        if ours.len() != theirs.len() {
            failures.push(format!(
                "volume {}: {} records, fls lists {}",
                vol.index,
                ours.len(),
                theirs.len()
            ));
        }
        for (r, l) in ours.iter().zip(&theirs) {
            let p = strip(r);
            if p != l.path || r.meta.inode != l.inode || meta_char(r) != l.meta {
                failures.push(format!(
                    "{p} {} {}: fls has {} {} {}",
                    r.meta.inode,
                    meta_char(r),
                    l.path,
                    l.inode,
                    l.meta
                ));
                continue;
            }
            if (r.owner.uid, r.owner.gid) != (l.uid, l.gid) {
                failures.push(format!("{p}: owner {:?}, fls {} {}", r.owner, l.uid, l.gid));
            }
            if matches!(
                r.content,
                Content::Encoded {
                    encoding: Encoding::ApfsCompressed,
                    ..
                }
            ) {
                encoded += 1;
                continue;
            }
            if r.kind == FileKind::File && l.meta == 'r' {
                // TSK's size of a compressed file is its data stream's (none).
                let compressed =
                    matches!(r.content, Content::Resident(_) | Content::Decmpfs { .. });
                if !compressed && r.size != l.size {
                    failures.push(format!("{p}: size {}, fls {}", r.size, l.size));
                }
                let want = icat_md5(image, apsb, l.inode);
                let got = if has_hole(r) {
                    sparse += 1;
                    tsk_sparse_md5(&src, r)
                } else {
                    md5_of(&src, r)
                };
                if want != got {
                    failures.push(format!("{p}: content MD5 {got}, icat {want}"));
                }
                compared += 1;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{test}: {} differences with TSK:\n{}",
        failures.len(),
        failures.join("\n")
    );
    if sparse > 0 {
        eprintln!("{test}: {sparse} sparse files compared by TSK's rule (holes left out)");
    }
    if encoded > 0 {
        eprintln!(
            "{test}: {encoded} resource-fork compressed files not compared (reported encoded)"
        );
    }
    Some(compared)
}

/// `pstat`'s APSB blocks and unallocated ranges (first, last block).
fn pstat(image: &Path) -> (Vec<u64>, Vec<(u64, u64)>) {
    let out = Command::new("pstat").arg(image).output().expect("pstat");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut apsb = Vec::new();
    let mut free = Vec::new();
    for l in text.lines() {
        let l = l.trim_start_matches(['|', ' ']);
        if let Some(b) = l.strip_prefix("APSB Block Number: ") {
            apsb.push(b.trim().parse().expect("block"));
        }
        if let Some((a, b)) = l.strip_prefix("0x").and_then(|r| r.split_once("-0x")) {
            free.push((
                u64::from_str_radix(a, 16).expect("hex"),
                u64::from_str_radix(b.trim(), 16).expect("hex"),
            ));
        }
    }
    (apsb, free)
}

#[test]
fn mkapfs_container_matches_pstat() {
    let test = "mkapfs_container_matches_pstat";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(img) = mkapfs(test) else { return };
    let fs = open_filesystem(&img[..], 0, img.len() as u64).expect("open");
    assert_eq!(fs.kind(), FsKind::Apfs);
    assert_eq!(fs.cluster_size(), Some(4096));
    assert!(fs.open_errors().is_empty(), "{:?}", fs.open_errors());
    let FileSystem::Apfs(a) = &fs else {
        panic!("not APFS")
    };
    assert_eq!(a.volumes().len(), 1);
    assert_eq!(a.volumes()[0].name(), "caseload");
    assert!(!a.volumes()[0].encrypted());
    let (records, summary) = walk(a);
    assert!(
        records.is_empty(),
        "an empty volume lists nothing (private-dir is not reached from the root)"
    );
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    let mut ours = Vec::new();
    fs.unallocated_runs(|e| ours.push((e.offset / 4096, (e.offset + e.len) / 4096 - 1)))
        .expect("free runs");
    assert!(!ours.is_empty());
    if have_tool(test, "pstat") {
        let file = write_temp(&img);
        let (apsb, free) = pstat(file.path());
        assert_eq!(apsb, vec![a.volumes()[0].apsb_block.expect("apsb")]);
        assert_eq!(ours, free, "free blocks differ from pstat's");
        compare_with_tsk(test, file.path());
    }
}

/// What the filled sample holds: path -> (inode, content).
type Expected = BTreeMap<String, (u64, Vec<u8>)>;

fn sample(test: &str) -> Option<(Vec<u8>, Expected)> {
    let img = mkapfs(test)?;
    let mut a = Apfs::new(img, 0x2000);
    let mut exp = BTreeMap::new();
    let mut file = |a: &mut Apfs, parent: u64, dir: &str, name: &str, data: Vec<u8>| {
        let oid = a.file(parent, name, &data);
        exp.insert(format!("{dir}{name}"), (oid, data));
        oid
    };
    file(&mut a, 2, "", "small.txt", b"hello, apfs\n".to_vec());
    file(&mut a, 2, "", "empty", Vec::new());
    file(&mut a, 2, "", "two blocks.bin", filler(1, 2 * BS + 100));
    file(&mut a, 2, "", "exactly one block", filler(2, BS));
    file(&mut a, 2, "", "é日本.txt", filler(3, 777));
    let docs = a.dir(2, "Documents");
    let deep = a.dir(docs, "deep");
    file(&mut a, docs, "Documents/", "letter.doc", filler(4, 5000));
    let shared = file(
        &mut a,
        deep,
        "Documents/deep/",
        "shared.dat",
        filler(5, 300),
    );
    a.hard_link(2, "hard link to shared", shared);
    a.symlink(docs, "link", "../small.txt");
    let (x, y) = (filler(6, 2 * BS), filler(7, 1000));
    a.fragmented(2, "holey", &x, 3, &y);
    let mut holey = x.clone();
    holey.resize(5 * BS, 0);
    holey.extend_from_slice(&y);
    let text = b"compressed text compressed text compressed text\n".repeat(20);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&text).expect("deflate");
    let zc = a.compressed(
        2,
        "zlib inline.txt",
        3,
        text.len() as u64,
        &z.finish().expect("deflate"),
    );
    let mut raw = vec![0xff];
    raw.extend_from_slice(b"stored as is");
    let rc = a.compressed(2, "raw inline.txt", 3, 12, &raw);
    let forked: Vec<u8> = (0..150_000u32).map(|i| (i / 7 % 253) as u8).collect();
    let fc = a.compressed_fork(2, "zlib fork.bin", &forked, &[false, true, false]);
    let img = a.finish();
    exp.insert("zlib fork.bin".into(), (fc, forked));
    exp.insert("hard link to shared".into(), (shared, filler(5, 300)));
    exp.insert("holey".into(), (0, holey));
    exp.insert("zlib inline.txt".into(), (zc, text));
    exp.insert("raw inline.txt".into(), (rc, b"stored as is".to_vec()));
    Some((img, exp))
}

#[test]
fn filled_container_matches_fls_and_icat() {
    let test = "filled_container_matches_fls_and_icat";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some((img, exp)) = sample(test) else {
        return;
    };
    // With the default limit, a file compressed into its resource fork
    // is decoded a block at a time as it is read, whatever its size.
    let fs = ApfsFs::open(&img[..], 0, img.len() as u64).expect("open");
    let (records, _) = walk(&fs);
    let big = records
        .iter()
        .find(|r| r.path() == "zlib fork.bin")
        .expect("listed");
    assert!(matches!(
        big.content,
        Content::Decmpfs {
            codec: caseload_fs::ForkCodec::Zlib,
            size: 150_000,
            ..
        }
    ));
    assert!(!big.content.extents().is_empty());
    assert!(big.errors.is_empty(), "{:?}", big.errors);
    assert_eq!(big.size, 150_000);
    assert_eq!(md5_of(&img[..], big), md5_bytes(&exp["zlib fork.bin"].1));
    let small = records
        .iter()
        .find(|r| r.path() == "zlib inline.txt")
        .expect("listed");
    assert!(matches!(small.content, Content::Resident(_)));
    let fs = open(&img);
    let (records, summary) = walk(&fs);
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    for (path, (inode, data)) in &exp {
        let r = records
            .iter()
            .find(|r| &r.path() == path)
            .unwrap_or_else(|| panic!("{path} not listed"));
        assert!(r.errors.is_empty(), "{path}: {:?}", r.errors);
        if *inode != 0 {
            assert_eq!(r.meta.inode, *inode, "{path}");
        }
        assert_eq!(r.size, data.len() as u64, "{path}");
        assert_eq!(md5_of(&img[..], r), md5_bytes(data), "{path}");
        assert_eq!((r.owner.uid, r.owner.gid), (501, 20));
        assert_eq!(
            r.times.modified.map(|t| t.nanos),
            // The synthetic modification time: 1 s and 1 ns after creation.
            Some(123_456_790),
            "{path}"
        );
    }
    let holey = records.iter().find(|r| r.path() == "holey").expect("holey");
    let Content::Runs(runs) = &holey.content else {
        panic!("runs")
    };
    assert_eq!(runs.len(), 3, "data, hole, data: {runs:?}");
    assert_eq!(
        holey.slack.iter().map(|e| e.len).sum::<u64>(),
        (BS - 1000) as u64
    );
    let link = records
        .iter()
        .find(|r| r.path() == "Documents/link")
        .expect("link");
    assert_eq!((link.size, link.owner.mode & 0o170000), (0, 0o120000));
    let dirs: Vec<String> = records
        .iter()
        .filter(|r| r.kind == FileKind::Directory)
        .map(|r| r.path())
        .collect();
    assert_eq!(dirs, ["Documents", "Documents/deep"]);
    if let Some(keep) = std::env::var_os("CASELOAD_APFS_KEEP") {
        std::fs::write(keep, &img).expect("keep the image");
    }
    let file = write_temp(&img);
    if let Some(n) = compare_with_tsk(test, file.path()) {
        assert!(n >= 10, "only {n} files compared");
    }
}

/// An image named by `CASELOAD_APFS_TEST_IMAGE` (the corpus writer's
/// output, a real container) against TSK, and walked without a panic.
#[test]
fn named_image_matches_tsk() {
    let test = "named_image_matches_tsk";
    let Some(path) = std::env::var_os("CASELOAD_APFS_TEST_IMAGE") else {
        eprintln!("SKIPPED {test}: CASELOAD_APFS_TEST_IMAGE is not set");
        return;
    };
    let path = Path::new(&path);
    if let Some(n) = compare_with_tsk(test, path) {
        eprintln!(
            "{test}: {} matches TSK ({n} files' content compared)",
            path.display()
        );
    }
    if have_tool(test, "pstat") {
        let src = std::fs::File::open(path).expect("open");
        let fs = ApfsFs::open(&src, 0, src.len()).expect("open APFS");
        let (_, free) = pstat(path);
        let mut ours = Vec::new();
        fs.unallocated_runs(|e| ours.push((e.offset / 4096, (e.offset + e.len) / 4096 - 1)))
            .expect("free runs");
        let blocks = |v: &[(u64, u64)]| v.iter().map(|(a, b)| b + 1 - a).sum::<u64>();
        assert_eq!(
            blocks(&ours),
            blocks(&free),
            "free block count differs from pstat's"
        );
    }
}

// ---------------------------------------------------------------- hostile

/// The filled sample, or `None` (skip printed).
fn filled(test: &str) -> Option<Vec<u8>> {
    sample(test).map(|(img, _)| img)
}

/// The container, compressed files decoded up to 16 MiB (the tests
/// compare them with TSK).
fn open(img: &[u8]) -> ApfsFs<&[u8]> {
    let mut fs = ApfsFs::open(img, 0, img.len() as u64).expect("open");
    fs.set_decode_limit(u64::MAX);
    fs
}

#[test]
fn bad_checksum_is_reported_with_object_and_offset() {
    let test = "bad_checksum_is_reported_with_object_and_offset";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut img) = filled(test) else { return };
    let root = layout(&img).fs_root;
    // A byte of the node's free space: the node still parses.
    block(&mut img, root)[3000] ^= 0x5a;
    let fs = open(&img);
    let (records, summary) = walk(&fs);
    assert!(records.iter().any(|r| r.path() == "small.txt"));
    let e = summary
        .errors
        .errors
        .iter()
        .find(|e| e.kind == ErrorKind::ChecksumMismatch)
        .expect("checksum mismatch reported");
    assert_eq!(e.offset, Some(root * BS as u64));
    assert!(e.detail.contains(&format!("block {root}")), "{}", e.detail);
    // A second walk reports it again.
    let (_, again) = walk(&fs);
    assert!(has(&again.errors.errors, ErrorKind::ChecksumMismatch));
}

#[test]
fn no_valid_checkpoint_is_a_clear_error() {
    let test = "no_valid_checkpoint_is_a_clear_error";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(img) = mkapfs(test) else { return };
    for (blk, what) in [(2u64, "superblock"), (1, "checkpoint map")] {
        let mut bad = img.clone();
        block(&mut bad, blk)[200] ^= 1;
        let err = match ApfsFs::open(&bad[..], 0, bad.len() as u64) {
            Ok(_) => panic!("opened with a bad {what}"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("no valid checkpoint"), "{what}: {err}");
        // The container is still detected, and opening it is an error, not
        // a panic.
        assert!(open_filesystem(&bad[..], 0, bad.len() as u64).is_err());
    }
}

#[test]
fn newest_checkpoint_is_used_and_a_broken_one_falls_back() {
    let test = "newest_checkpoint_is_used_and_a_broken_one_falls_back";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut img) = mkapfs(test) else { return };
    // A second checkpoint (transaction 2) in descriptor blocks 3 and 4.
    for (from, to) in [(1u64, 3u64), (2, 4)] {
        let b = block(&mut img, from).to_vec();
        block(&mut img, to).copy_from_slice(&b);
        put64(block(&mut img, to), 16, 2);
    }
    put32(block(&mut img, 4), 136, 2);
    reseal(&mut img, 3);
    reseal(&mut img, 4);
    let fs = open(&img);
    assert_eq!((fs.checkpoint_block(), fs.superblock().xid), (4, 2));
    assert!(fs.open_errors().is_empty(), "{:?}", fs.open_errors());
    block(&mut img, 3)[300] ^= 1;
    let fs = open(&img);
    assert_eq!((fs.checkpoint_block(), fs.superblock().xid), (2, 1));
    assert!(
        fs.open_errors()
            .iter()
            .any(|e| e.detail.contains("transaction 2") && e.offset == Some(4 * BS as u64)),
        "{:?}",
        fs.open_errors()
    );
    assert_eq!(walk(&fs).0.len(), 0);
}

#[test]
fn encrypted_volume_is_reported_and_not_walked() {
    let test = "encrypted_volume_is_reported_and_not_walked";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut img) = filled(test) else { return };
    let apsb = layout(&img).apsb;
    let flags = u64le(block(&mut img, apsb), 264);
    put64(block(&mut img, apsb), 264, flags & !1);
    reseal(&mut img, apsb);
    let fs = open(&img);
    assert!(fs.volumes()[0].encrypted());
    let (records, summary) = walk(&fs);
    assert!(records.is_empty(), "an encrypted volume is not walked");
    let e = summary
        .errors
        .errors
        .iter()
        .find(|e| e.kind == ErrorKind::EncryptedVolume)
        .expect("encrypted volume reported");
    assert!(e.detail.contains("\"caseload\""), "{}", e.detail);
    assert_eq!(e.offset, Some(apsb * BS as u64));
}

#[test]
fn btree_node_pointing_to_itself_or_outside_is_reported() {
    let test = "btree_node_pointing_to_itself_or_outside_is_reported";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(img) = filled(test) else { return };
    let lay = layout(&img);
    // The root leaf made an index node whose first child is itself.
    let mut looped = img.clone();
    {
        let b = block(&mut looped, lay.fs_root);
        let flags = u16le(b, 32) & !2;
        b[32..34].copy_from_slice(&flags.to_le_bytes());
        b[34..36].copy_from_slice(&1u16.to_le_bytes());
        let toc_off = u16le(b, 40) as usize;
        let v = u16le(b, 56 + toc_off + 4) as usize;
        put64(b, BS - 40 - v, lay.fs_root_oid);
    }
    reseal(&mut looped, lay.fs_root);
    let fs = open(&looped);
    let (records, summary) = walk(&fs);
    assert!(records.is_empty());
    assert!(
        has(&summary.errors.errors, ErrorKind::DirectoryLoop)
            || has(&summary.errors.errors, ErrorKind::CorruptFileSystem),
        "{:?}",
        summary.errors
    );
    // The volume's object map sends the tree's root past the container.
    let mut outside = img.clone();
    omap_set(
        &mut outside,
        lay.vol_omap,
        lay.fs_root_oid,
        (img.len() / BS) as u64 + 10,
    );
    let fs = open(&outside);
    let (records, summary) = walk(&fs);
    assert!(records.is_empty());
    assert!(
        summary
            .errors
            .errors
            .iter()
            .any(|e| e.detail.contains("outside the container")),
        "{:?}",
        summary.errors
    );
}

#[test]
fn extent_past_the_end_is_cut_and_reported() {
    let test = "extent_past_the_end_is_cut_and_reported";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(img) = mkapfs(test) else { return };
    let blocks = (img.len() / BS) as u64;
    let mut a = Apfs::new(img, 0x2000);
    let oid = a.bare_file(2, "too long", 20 * BS as u64);
    a.raw_extent(oid, 0, 20 * BS as u64, blocks - 4);
    a.file(2, "witness", b"still read");
    let img = a.finish();
    let fs = open(&img);
    let (records, _) = walk(&fs);
    let r = records
        .iter()
        .find(|r| r.path() == "too long")
        .expect("listed");
    assert!(
        has(&r.errors, ErrorKind::CorruptFileSystem),
        "{:?}",
        r.errors
    );
    assert_eq!(
        r.content.extents().iter().map(|e| e.len).sum::<u64>(),
        4 * BS as u64
    );
    assert_eq!(r.content.len(), 20 * BS as u64);
    let w = records
        .iter()
        .find(|r| r.path() == "witness")
        .expect("witness");
    assert_eq!(md5_of(&img[..], w), md5_bytes(b"still read"));
}

/// Bytes flipped all over the metadata (with and without the checksum
/// made right again), and the image cut short: every open, walk, free-space
/// listing and content read returns.
#[test]
fn mutated_metadata_never_panics() {
    let test = "mutated_metadata_never_panics";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut img) = filled(test) else { return };
    let lay = layout(&img);
    let nx = &img[..BS];
    let c_omap = u64le(nx, 160);
    let c_tree = u64le(&img[c_omap as usize * BS..], 48);
    let v_tree = u64le(&img[lay.vol_omap as usize * BS..], 48);
    let maps =
        caseload_fs::apfs::container::parse_checkpoint_map(&img[BS..2 * BS], 1).expect("map");
    let mut targets = vec![
        0,
        1,
        2,
        c_omap,
        c_tree,
        lay.apsb,
        lay.vol_omap,
        v_tree,
        lay.fs_root,
    ];
    targets.extend(maps.iter().map(|m| m.paddr));
    let exercise = |img: &[u8]| {
        let Ok(fs) = ApfsFs::open(img, 0, img.len() as u64) else {
            return;
        };
        let _ = fs.walk(|r| {
            let _ = md5_of(img, &r);
            ControlFlow::Continue(())
        });
        let _ = fs.unallocated_runs(|_| {});
    };
    let mut x = 0x9e37_79b9u32;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    for &t in &targets {
        for round in 0..24 {
            let at = 8 + (next() as usize % (BS - 8));
            let old = block(&mut img, t).to_vec();
            block(&mut img, t)[at] ^= 1 << (next() % 8);
            if round % 2 == 0 {
                reseal(&mut img, t);
            }
            exercise(&img);
            block(&mut img, t).copy_from_slice(&old);
        }
    }
    let cut = (lay.fs_root as usize) * BS + 100;
    exercise(&img[..cut]);
    exercise(&img[..BS]);
    exercise(&img[..100]);
}

// ---------------------------------------------------------------- volumes

#[test]
fn two_volumes_are_pathed_apart_and_match_tsk_each() {
    let test = "two_volumes_are_pathed_apart_and_match_tsk_each";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut img) = filled(test) else { return };
    add_volume(&mut img, "second", 0x1800, 1100);
    let fs = open(&img);
    assert!(fs.open_errors().is_empty(), "{:?}", fs.open_errors());
    let names: Vec<(&str, Option<u64>)> = fs
        .volumes()
        .iter()
        .map(|v| (v.name(), v.apsb_block))
        .collect();
    assert_eq!(
        names,
        [
            ("caseload", Some(layout(&img).apsb)),
            ("second", Some(0x1800))
        ]
    );
    let (records, summary) = walk(&fs);
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    let tops: Vec<(String, u64, FileKind)> = records
        .iter()
        .filter(|r| r.parent.is_empty())
        .map(|r| (r.path(), r.meta.inode, r.kind))
        .collect();
    assert_eq!(
        tops,
        [
            (
                "$Volume0".to_string(),
                layout(&img).apsb,
                FileKind::VirtualDirectory
            ),
            ("$Volume1".to_string(), 0x1800, FileKind::VirtualDirectory)
        ]
    );
    let in0 = records
        .iter()
        .filter(|r| r.path().starts_with("$Volume0/"))
        .count();
    let in1 = records
        .iter()
        .filter(|r| r.path().starts_with("$Volume1/"))
        .count();
    assert!(in0 > 10 && in0 == in1, "{in0} and {in1} records");
    assert!(
        records
            .iter()
            .any(|r| r.path() == "$Volume1/Documents/deep/shared.dat")
    );
    let file = write_temp(&img);
    if have_tool(test, "pstat") {
        assert_eq!(pstat(file.path()).0, [layout(&img).apsb, 0x1800]);
    }
    compare_with_tsk(test, file.path());
}

#[test]
fn snapshots_are_listed_and_noted() {
    let test = "snapshots_are_listed_and_noted";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut img) = filled(test) else { return };
    add_snapshot(&mut img, "before", 1);
    let fs = open(&img);
    let snaps = &fs.volumes()[0].snapshots;
    assert_eq!(snaps.len(), 1);
    assert_eq!((snaps[0].name.as_str(), snaps[0].xid), ("before", 1));
    let (records, summary) = walk(&fs);
    assert!(records.iter().any(|r| r.path() == "small.txt"));
    let note = summary
        .errors
        .errors
        .iter()
        .find(|e| e.kind == ErrorKind::Snapshot)
        .expect("snapshot noted");
    assert!(
        note.detail.contains("\"before\" (transaction 1)"),
        "{}",
        note.detail
    );
}

/// A container at an offset (as in a GPT partition) is detected and read
/// with every offset absolute.
#[test]
fn container_at_an_offset_is_detected_and_read() {
    let test = "container_at_an_offset_is_detected_and_read";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(img) = filled(test) else { return };
    let off = 1u64 << 20;
    let mut disk = vec![0u8; off as usize];
    disk.extend_from_slice(&img);
    let fs = open_filesystem(&disk[..], off, img.len() as u64).expect("open");
    assert_eq!(fs.kind(), FsKind::Apfs);
    let (records, _) = walk_all(&fs);
    let r = records
        .iter()
        .find(|r| r.path() == "small.txt")
        .expect("listed");
    assert_eq!(md5_of(&disk[..], r), md5_bytes(b"hello, apfs\n"));
    let mut first = None;
    fs.unallocated_runs(|e| {
        first.get_or_insert(e.offset);
    })
    .expect("free runs");
    assert!(first.is_some_and(|o| o >= off));
}

/// A file-system tree of a root index node over many leaves, one
/// directory's names and one file's extents straddling leaves: the same
/// walk, and the same as TSK's.
#[test]
fn tree_of_many_leaves_matches_fls_and_icat() {
    let test = "tree_of_many_leaves_matches_fls_and_icat";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(img) = mkapfs(test) else { return };
    let mut a = Apfs::new(img, 0x2000);
    let big = a.dir(2, "many");
    let mut exp = BTreeMap::new();
    for i in 0..60 {
        let data = filler(100 + i, 50 + 97 * i as usize);
        let name = format!("file {i:03}.txt");
        a.file(big, &name, &data);
        exp.insert(format!("many/{name}"), data);
    }
    let (x, y) = (filler(9, 3 * BS), filler(10, 10));
    a.fragmented(2, "split", &x, 2, &y);
    let img = a.finish_split(7);
    let fs = open(&img);
    let (records, summary) = walk(&fs);
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    assert_eq!(records.len(), 62);
    for (path, data) in &exp {
        let r = records
            .iter()
            .find(|r| &r.path() == path)
            .unwrap_or_else(|| panic!("{path}"));
        assert_eq!(md5_of(&img[..], r), md5_bytes(data), "{path}");
    }
    let file = write_temp(&img);
    if let Some(n) = compare_with_tsk(test, file.path()) {
        assert_eq!(n, 61);
    }
}

/// LZVN-compressed files, inline (decmpfs type 7) and in the resource fork
/// (type 8, a stored 64 KiB block then an LZVN one), made by the test
/// encoder with every opcode form: decoded to the script's bytes, and to
/// what TSK's `icat` (Apple's decoder) gives.
#[test]
fn lzvn_compressed_files_match_tsk() {
    let test = "lzvn_compressed_files_match_tsk";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(img) = mkapfs(test) else { return };
    let small: Vec<(Vec<u8>, usize, usize)> = vec![
        (b"Hello, LZVN world! ".to_vec(), 0, 0),
        (b"ab".to_vec(), 7, 5),
        (Vec::new(), 7, 12),
        (b"x".to_vec(), 3, 9),
        (b"yz".to_vec(), 3, 4),
        (b"!".to_vec(), 1, 20),
    ];
    let mut big = vec![(filler(30, 12_000), 0, 0)];
    big.extend(small.iter().cloned());
    big.extend([
        (filler(31, 300), 0, 0),
        (Vec::new(), 250, 200),
        (b"q".to_vec(), 2000, 30),
        (Vec::new(), 10_000, 8),
        (b"end".to_vec(), 500, 10),
        (Vec::new(), 11_000, 40),
    ]);
    let (inline, inline_out) = lzvn_encode(&small);
    let (block, block_out) = lzvn_encode(&big);
    let stored = filler(32, 65536);
    let mut stored_block = vec![0x06];
    stored_block.extend_from_slice(&stored);
    let mut fork_out = stored.clone();
    fork_out.extend_from_slice(&block_out);
    let mut a = Apfs::new(img, 0x2000);
    a.compressed(2, "lzvn inline.txt", 7, inline_out.len() as u64, &inline);
    a.compressed_lzvn_fork(
        2,
        "lzvn fork.bin",
        &[stored_block, block],
        fork_out.len() as u64,
    );
    let img = a.finish();
    let fs = open(&img);
    let (records, summary) = walk(&fs);
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    for (path, want) in [
        ("lzvn inline.txt", &inline_out),
        ("lzvn fork.bin", &fork_out),
    ] {
        let r = records.iter().find(|r| r.path() == path).expect("listed");
        assert!(r.errors.is_empty(), "{path}: {:?}", r.errors);
        assert!(
            matches!(r.content, Content::Resident(_) | Content::Decmpfs { .. }),
            "{path}"
        );
        assert_eq!(r.size, want.len() as u64);
        assert_eq!(md5_of(&img[..], r), md5_bytes(want), "{path}");
    }
    let file = write_temp(&img);
    if let Some(n) = compare_with_tsk(test, file.path()) {
        assert_eq!(n, 2);
    }
}

/// A directory record naming an ancestor (a loop) and one naming no inode:
/// each listed with its problem, the walk ends, the rest is read.
#[test]
fn directory_loop_and_missing_inode_are_reported() {
    let test = "directory_loop_and_missing_inode_are_reported";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(img) = mkapfs(test) else { return };
    let mut a = Apfs::new(img, 0x2000);
    let top = a.dir(2, "top");
    let inner = a.dir(top, "inner");
    a.name(inner, "back to top", top, 4);
    a.name(inner, "nobody", 999, 8);
    a.file(inner, "witness", b"still read");
    let img = a.finish();
    let fs = open(&img);
    let (records, summary) = walk(&fs);
    let paths: Vec<String> = records.iter().map(|r| r.path()).collect();
    assert!(
        paths.contains(&"top/inner/back to top".to_string()),
        "{paths:?}"
    );
    assert!(
        !paths
            .iter()
            .any(|p| p.starts_with("top/inner/back to top/")),
        "{paths:?}"
    );
    assert!(
        has(&summary.errors.errors, ErrorKind::DirectoryLoop),
        "{:?}",
        summary.errors
    );
    let nobody = records
        .iter()
        .find(|r| r.path() == "top/inner/nobody")
        .expect("listed");
    assert!(
        has(&nobody.errors, ErrorKind::CorruptFileSystem),
        "{:?}",
        nobody.errors
    );
    let w = records
        .iter()
        .find(|r| r.path() == "top/inner/witness")
        .expect("witness");
    assert_eq!(md5_of(&img[..], w), md5_bytes(b"still read"));
}

/// A GPT disk whose partition (of Apple's APFS type) holds the filled
/// container: the volume system finds it, detection reads it as APFS, and
/// the walk and free space are in absolute disk offsets; TSK's `fls -o`
/// reaches the same names.
#[test]
fn container_in_a_gpt_partition_is_found_and_walked() {
    let test = "container_in_a_gpt_partition_is_found_and_walked";
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(img) = filled(test) else { return };
    let first = 2048u64;
    let count = (img.len() / 512) as u64;
    let sectors = (first + count + 2048) as usize;
    let apfs_type = "7C3457EF-0000-11AA-AA11-00306543ECAC";
    let mut disk = gpt_disk_with(
        sectors,
        &[(first, first + count - 1, "Macintosh HD", apfs_type)],
    );
    let at = first as usize * 512;
    disk[at..at + img.len()].copy_from_slice(&img);
    let vs = caseload_fs::open_volume_system(&disk[..]).expect("volume system");
    let part = vs
        .partitions
        .iter()
        .find(|p| p.start_sector == first)
        .expect("the APFS partition");
    let fs = open_filesystem(&disk[..], part.offset, part.length).expect("open");
    assert_eq!(fs.kind(), FsKind::Apfs);
    let (records, summary) = walk_all(&fs);
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    let r = records
        .iter()
        .find(|r| r.path() == "small.txt")
        .expect("listed");
    assert_eq!(md5_of(&disk[..], r), md5_bytes(b"hello, apfs\n"));
    let mut free = 0u64;
    fs.unallocated_runs(|e| {
        assert!(e.offset >= part.offset && e.offset + e.len <= part.offset + part.length);
        free += e.len;
    })
    .expect("free runs");
    assert!(free > 0);
    if have_tool(test, "fls") {
        let file = write_temp(&disk);
        let apsb = layout(&img).apsb;
        let out = Command::new("fls")
            .args([
                "-r",
                "-p",
                "-o",
                &first.to_string(),
                "-P",
                "apfs",
                "-B",
                &apsb.to_string(),
            ])
            .arg(file.path())
            .output()
            .expect("fls");
        let text = String::from_utf8_lossy(&out.stdout);
        let theirs: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once(":\t").map(|p| p.1))
            .collect();
        let ours: Vec<String> = records.iter().map(|r| r.path()).collect();
        assert_eq!(
            ours,
            theirs,
            "fls -o {first}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
