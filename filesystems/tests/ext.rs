//! ext2/ext3/ext4: images made at test time by `mkfs.ext2/3/4 -d`
//! (nested directories, a directory of hundreds of names made hashed by
//! `e2fsck -D`, fast and slow symlinks, hard links, a FIFO, sparse and
//! fragmented files, files deleted and orphaned with `debugfs`), each
//! compared with The Sleuth Kit: `fls -r -p` (names, inode numbers,
//! deleted flags, types) set-equal to the walk, `fls -m` sizes and times,
//! `icat` MD5s against the content read through each record's runs, and
//! `istat` block lists against the runs. Then hostile images (damaged
//! superblock fields, group descriptors, extent trees, directory
//! `rec_len`s, random mutations). Each test prints `SKIPPED ...` and
//! passes when a tool it needs is missing.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use caseload_fs::ext::{inode, mode_type};
use caseload_fs::{
    Content, ErrorKind, ExtFs, FileKind, FileRecord, FileSystem, FsKind, Recovery, Run,
    WalkSummary, open_filesystem,
};
use support::*;

const WITNESS: &[u8] = b"the rest of the file system is still read";

fn tools(test: &str, extra: &[&str]) -> bool {
    ["mkfs.ext4", "debugfs", "fls", "icat", "istat"]
        .iter()
        .chain(extra)
        .all(|t| have_tool(test, t))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run tool");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn debugfs(img: &Path, cmd: &str) {
    run(Command::new("debugfs").args(["-w", "-R", cmd]).arg(img));
}

/// What the tree made for every image holds.
/// `slow`: also the two files TSK takes a minute over on block maps
/// (`icat` writes a hole's zeros a block pointer at a time and `istat`
/// walks every pointer: 20 s each for `triple.bin` with 1 KiB blocks).
fn populate(root: &Path, big_dir: usize, slow: bool) {
    use std::os::unix::fs::symlink;
    let w = |p: &str, data: &[u8]| {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, data).unwrap();
    };
    w("witness.txt", WITNESS);
    w("empty", b"");
    w("small.txt", b"hello, ext\n");
    w("docs/report one.txt", &filler(1, 5000));
    w("docs/deeper/still/deeper.bin", &filler(2, 70_000));
    w("docs/deeper/medium.bin", &filler(3, 300_000));
    w("victims/gone.txt", &filler(4, 9000));
    w("victims/also gone.bin", &filler(5, 3000));
    w("victims/stays.txt", b"stays");
    w("victims/olddir/inner.txt", &filler(6, 1500));
    for i in 0..big_dir {
        w(
            &format!("many/entry number {i:04} with a long name.txt"),
            format!("{i}").as_bytes(),
        );
    }
    symlink("small.txt", root.join("fast link")).unwrap();
    symlink("x".repeat(200), root.join("slow link")).unwrap();
    std::fs::hard_link(root.join("small.txt"), root.join("docs/hard link")).unwrap();
    // Sparse: a hole, data, a hole, data at the end.
    let f = std::fs::File::create(root.join("sparse.bin")).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(&filler(7, 3000), 200_000).unwrap();
    f.write_all_at(&filler(8, 100), 900_000).unwrap();
    drop(f);
    run(Command::new("mkfifo").arg(root.join("a fifo")));
    // Past the triple indirect block with 1 KiB blocks (64 MiB + 268 KiB).
    if slow {
        let f = std::fs::File::create(root.join("triple.bin")).unwrap();
        f.write_all_at(b"start", 0).unwrap();
        f.write_all_at(&filler(10, 2000), 69 << 20).unwrap();
        drop(f);
    }
    // Over 4 GiB (i_size_high), nearly all hole.
    if slow {
        let f = std::fs::File::create(root.join("huge.bin")).unwrap();
        f.write_all_at(&filler(11, 100), HUGE_AT).unwrap();
        drop(f);
    }
    // Becomes an orphan: its inode freed, its name overwritten.
    w("lonely/o.txt", &filler(12, 2500));
}

/// Where `huge.bin`'s data lies: its size needs `i_size_high`.
const HUGE_AT: u64 = (4 << 30) + 7;

/// Frees `lonely/o.txt`'s inode and overwrites its name with another of
/// the same length: an unallocated inode no name reaches (TSK's orphan).
const ORPHAN: &[&str] = &[
    "kill_file /lonely/o.txt",
    "unlink /lonely/o.txt",
    "ln /witness.txt /lonely/p.txt",
];

struct Img {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

/// Makes an image of `mb` MiB with `mkfs` and `opts` from the usual tree,
/// hashes big directories with `e2fsck -D`, deletes some files and makes
/// a fragmented one with debugfs, then runs `extra` debugfs commands.
fn build(mkfs: &str, opts: &[&str], mb: u64, big_dir: usize, extra: &[&str], slow: bool) -> Img {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    populate(&tree, big_dir, slow);
    // Small files to free later, so the fragmented file fills the gaps.
    std::fs::create_dir_all(tree.join("pad")).unwrap();
    for i in 0..40 {
        std::fs::write(tree.join(format!("pad/{i:02}")), filler(100 + i, 4096)).unwrap();
    }
    let path = dir.path().join("fs.img");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(mb << 20).unwrap();
    drop(f);
    run(Command::new(mkfs)
        .args(["-q", "-F", "-E", "root_owner=0:0"])
        .args(opts)
        .arg("-d")
        .arg(&tree)
        .arg(&path));
    // Hash the big directory (dir_index volumes).
    let _ = Command::new("e2fsck").args(["-fyD"]).arg(&path).output();
    for i in (0..40).step_by(2) {
        debugfs(&path, &format!("rm /pad/{i:02}"));
    }
    let frag = dir.path().join("frag.src");
    std::fs::write(&frag, filler(9, 100_000)).unwrap();
    debugfs(&path, &format!("write {} /fragmented.bin", frag.display()));
    debugfs(&path, "rm /victims/gone.txt");
    debugfs(&path, "rm \"/victims/also gone.bin\"");
    debugfs(&path, "rm /victims/olddir/inner.txt");
    debugfs(&path, "rmdir /victims/olddir");
    for cmd in ORPHAN.iter().chain(extra) {
        debugfs(&path, cmd);
    }
    Img { _dir: dir, path }
}

/// One line of `fls -r -p`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct FlsLine {
    path: String,
    inode: u64,
    deleted: bool,
    meta_type: char,
}

fn fls(img: &Path) -> Vec<FlsLine> {
    let text = run(Command::new("fls").args(["-r", "-p"]).arg(img));
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (head, path) = l.split_once(":\t").expect("fls line");
            let mut parts = head.split_whitespace();
            let types = parts.next().unwrap();
            let mut rest: Vec<&str> = parts.collect();
            let deleted = rest.first() == Some(&"*");
            if deleted {
                rest.remove(0);
            }
            let num: String = rest[0].chars().take_while(char::is_ascii_digit).collect();
            FlsLine {
                path: path.to_string(),
                inode: num.parse().unwrap(),
                deleted,
                meta_type: types.chars().nth(2).unwrap(),
            }
        })
        .collect()
}

fn meta_char(r: &FileRecord) -> char {
    if r.kind == FileKind::VirtualDirectory {
        return 'V';
    }
    if r.attributes == 0 {
        return '-';
    }
    match mode_type(r.attributes) {
        inode::S_IFREG => 'r',
        inode::S_IFDIR => 'd',
        inode::S_IFLNK => 'l',
        inode::S_IFIFO => 'p',
        inode::S_IFCHR => 'c',
        inode::S_IFBLK => 'b',
        inode::S_IFSOCK => 'h',
        _ => '-',
    }
}

fn icat(img: &Path, inode: u64) -> Vec<u8> {
    Command::new("icat")
        .arg(img)
        .arg(inode.to_string())
        .output()
        .expect("icat")
        .stdout
}

/// `istat`'s block list of an inode (0 for holes).
fn istat_blocks(img: &Path, inode: u64) -> Vec<u64> {
    let text = run(Command::new("istat").arg(img).arg(inode.to_string()));
    let mut out = Vec::new();
    let mut on = false;
    for l in text.lines() {
        if l.starts_with("Direct Blocks:") {
            on = true;
            continue;
        }
        if on {
            if l.trim().is_empty() || l.ends_with(':') {
                break;
            }
            out.extend(l.split_whitespace().filter_map(|x| x.parse::<u64>().ok()));
        }
    }
    out
}

/// Our block list of a record (0 for holes), as istat prints it.
fn our_blocks(r: &FileRecord, bs: u64) -> Vec<u64> {
    let mut out = Vec::new();
    if let Content::Runs(runs) = &r.content {
        for run in runs {
            match *run {
                Run::Data { offset, len } => {
                    out.extend((0..len.div_ceil(bs)).map(|k| offset / bs + k));
                }
                Run::Zeros { len } => out.extend(std::iter::repeat_n(0, len.div_ceil(bs) as usize)),
            }
        }
    }
    out
}

fn walk_ext(img: &Path) -> (Vec<FileRecord>, WalkSummary, std::fs::File) {
    let file = std::fs::File::open(img).unwrap();
    let len = file.metadata().unwrap().len();
    let fs = open_filesystem(&file, 0, len).expect("open");
    assert!(matches!(fs, FileSystem::Ext(_)), "not parsed as ext");
    let (records, summary) = walk_all(&fs);
    drop(fs);
    (records, summary, file)
}

/// Compares the walk of `img` with fls, fls -m, icat and istat; returns
/// the records.
fn compare_with_tsk(img: &Path) -> Vec<FileRecord> {
    let (records, summary, file) = walk_ext(img);
    let mut failures = Vec::new();
    // Names, inodes, deleted flags.
    let tsk = fls(img);
    let mut want: Vec<(String, u64, bool)> = tsk
        .iter()
        .map(|l| (l.path.clone(), l.inode, l.deleted))
        .collect();
    let mut got: Vec<(String, u64, bool)> = records
        .iter()
        .map(|r| (r.path(), r.meta.inode, r.deleted()))
        .collect();
    want.sort();
    got.sort();
    // TSK parses htree index blocks as slack and lists garbage from them
    // (deliberately skipped here): deleted names of the hashed directory
    // that hold a control character (fls prints `^`).
    want.retain(|(p, _, deleted)| {
        let garbage = *deleted && p.starts_with("many/") && p.contains('^');
        !garbage || got.iter().any(|(g, _, _)| g == p)
    });
    if want != got {
        let only_tsk: Vec<_> = want.iter().filter(|x| !got.contains(x)).collect();
        let only_ours: Vec<_> = got.iter().filter(|x| !want.contains(x)).collect();
        failures.push(format!(
            "fls differs: TSK only {only_tsk:?}\nours only {only_ours:?}"
        ));
    }
    let mut index: BTreeMap<(String, u64), &FileRecord> = BTreeMap::new();
    for r in &records {
        index.entry((r.path(), r.meta.inode)).or_insert(r);
    }
    let bs = {
        let fs = ExtFs::open(&file, 0, file.metadata().unwrap().len()).unwrap();
        fs.block_size()
    };
    let mut hashed = 0;
    for l in &tsk {
        let Some(r) = index.get(&(l.path.clone(), l.inode)) else {
            continue;
        };
        if meta_char(r) != l.meta_type {
            failures.push(format!(
                "{}: type {} vs TSK {}",
                l.path,
                meta_char(r),
                l.meta_type
            ));
        }
        // Content: every file and directory TSK can read, deleted ones
        // included (fast symlinks differ deliberately).
        if l.inode == 0 || l.meta_type == 'V' || r.size > 80 << 20 {
            continue;
        }
        let fast_link = l.meta_type == 'l' && matches!(r.content, Content::Resident(_));
        if matches!(l.meta_type, 'r' | 'd' | 'l') && !fast_link {
            let out = Command::new("icat")
                .arg(img)
                .arg(l.inode.to_string())
                .output()
                .unwrap();
            if !out.status.success() || !out.stderr.is_empty() {
                // TSK 4.11.1 fails on an extent-mapped file whose hole is
                // longer than the volume (its filler run fails the block
                // address check): the file's own bytes are the oracle.
                assert_eq!(
                    l.path,
                    "triple.bin",
                    "icat failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let mut want = vec![0u8; (69 << 20) + 2000];
                want[..5].copy_from_slice(b"start");
                want[69 << 20..].copy_from_slice(&filler(10, 2000));
                if md5_of(&file, r) != md5_bytes(&want) {
                    failures.push(format!("{}: content differs from what was written", l.path));
                }
                hashed += 1;
                continue;
            }
            let want = md5_bytes(&out.stdout);
            let got = md5_of(&file, r);
            hashed += 1;
            if want != got {
                failures.push(format!(
                    "{} [{}]: md5 {got} vs icat {want}",
                    l.path, l.inode
                ));
            }
        }
        if fast_link {
            let Content::Resident(t) = &r.content else {
                unreachable!()
            };
            if icat(img, l.inode) != vec![0u8; t.len()] || t.len() as u64 != r.size {
                failures.push(format!("{}: fast link", l.path));
            }
        }
        if l.meta_type == 'r' && !l.deleted && r.size > 0 {
            let tsk_blocks = istat_blocks(img, l.inode);
            let ours = our_blocks(r, bs);
            if tsk_blocks != ours {
                failures.push(format!(
                    "{}: blocks {:?}.. vs istat {:?}..",
                    l.path,
                    &ours[..ours.len().min(8)],
                    &tsk_blocks[..tsk_blocks.len().min(8)]
                ));
            }
        }
    }
    // Sizes and times from fls -m.
    let text = run(Command::new("fls")
        .env("TZ", "UTC")
        .args(["-r", "-m", "/"])
        .arg(img));
    for mut l in parse_bodyfile(&text) {
        if let Some(p) = l.path.strip_suffix(" (deleted-realloc)") {
            l.path = p.to_string();
            l.deleted = true;
        }
        if let Some((p, _)) = l.path.split_once(" -> ") {
            l.path = p.to_string();
        }
        let inode: u64 = l.inode.parse().unwrap_or(0);
        let Some(r) = index.get(&(l.path.clone(), inode)) else {
            if l.deleted && l.path.starts_with("many/") && l.path.contains('^') {
                continue;
            }
            failures.push(format!("bodyfile line not walked: {}", l.path));
            continue;
        };
        let t = &r.times;
        let got = [
            secs(t.accessed),
            secs(t.modified),
            secs(t.changed),
            secs(t.created),
        ];
        let want = [l.atime, l.mtime, l.ctime, l.crtime];
        if r.size != l.size || got != want {
            failures.push(format!(
                "{}: size {} times {got:?} vs TSK {} {want:?}",
                l.path, r.size, l.size
            ));
        }
    }
    assert!(hashed > 10, "only {hashed} files hashed");
    assert!(
        failures.is_empty(),
        "{}: {} differences with TSK:\n{}\nwalk errors: {:#?}",
        img.display(),
        failures.len(),
        failures.join("\n"),
        summary.errors
    );
    records
}

fn record<'a>(records: &'a [FileRecord], path: &str) -> &'a FileRecord {
    records
        .iter()
        .find(|r| r.path() == path)
        .unwrap_or_else(|| panic!("{path} not listed"))
}

/// What every built image must hold besides agreeing with TSK.
fn common_checks(records: &[FileRecord]) {
    for r in records.iter().filter(|r| r.allocated) {
        assert!(r.errors.is_empty(), "{}: {:?}", r.path(), r.errors);
    }
    let gone = record(records, "victims/gone.txt");
    assert!(gone.deleted());
    let hard = record(records, "docs/hard link");
    assert_eq!(hard.meta.inode, record(records, "small.txt").meta.inode);
    let frag = record(records, "fragmented.bin");
    assert!(frag.content.extents().len() > 1, "{:?}", frag.content);
    let sparse = record(records, "sparse.bin");
    assert!(
        matches!(&sparse.content, Content::Runs(r) if r.iter().any(|x| matches!(x, Run::Zeros { .. })))
    );
    record(records, "$OrphanFiles");
    let orphans: Vec<&FileRecord> = records
        .iter()
        .filter(|r| r.parent.first().is_some_and(|p| p == "$OrphanFiles"))
        .collect();
    // `lonely/o.txt`; with inline directories also `victims/olddir`'s
    // file, whose name went with the directory's inline bytes.
    assert!(
        orphans
            .iter()
            .all(|o| o.name == format!("OrphanFile-{}", o.meta.inode))
    );
    assert!(orphans.iter().any(|o| o.size == 2500), "{orphans:?}");
    assert!(orphans.len() <= 2, "{orphans:?}");
    if let Some(huge) = records.iter().find(|r| r.path() == "huge.bin") {
        assert_eq!(huge.size, HUGE_AT + 100);
    }
}

fn full_case(test: &str, mkfs: &str, opts: &[&str], kind: FsKind) -> Vec<FileRecord> {
    if !tools(test, &[mkfs, "e2fsck", "mkfifo"]) {
        return Vec::new();
    }
    // The files past the triple indirect block and past 4 GiB on extents,
    // and on block maps once (ext2's: ext3 and ext4 without extents read
    // block maps with the same code).
    let block_maps = mkfs == "mkfs.ext3" || opts.iter().any(|o| o.contains("^extent"));
    let img = build(mkfs, opts, 24, 400, &[], !block_maps);
    let records = compare_with_tsk(&img.path);
    let file = std::fs::File::open(&img.path).unwrap();
    let fs = open_filesystem(&file, 0, file.metadata().unwrap().len()).unwrap();
    assert_eq!(fs.kind(), kind);
    assert!(fs.open_errors().is_empty(), "{:?}", fs.open_errors());
    common_checks(&records);
    if mkfs != "mkfs.ext2" {
        let stat = run(Command::new("debugfs")
            .args(["-R", "stat /many"])
            .arg(&img.path));
        let flags = stat
            .split("Flags: 0x")
            .nth(1)
            .and_then(|x| u32::from_str_radix(x.split_whitespace().next()?, 16).ok())
            .unwrap_or(0);
        assert!(flags & 0x1000 != 0, "`many` is not hashed: {stat}");
        check_htree_checksums(&img.path);
    }
    records
}

/// e2fsck's index root of `many` passes the walk's htree checksum check
/// (where the volume has `metadata_csum`); a changed index entry fails
/// it, reported on the folder's record as a checksum mismatch while
/// every name is still listed.
fn check_htree_checksums(img: &Path) {
    let (records, summary, _) = walk_ext(img);
    assert!(
        !has(&summary.errors.errors, ErrorKind::ChecksumMismatch),
        "{:#?}",
        summary.errors
    );
    assert!(
        !has(
            &record(&records, "many").errors,
            ErrorKind::ChecksumMismatch
        ),
        "{:?}",
        record(&records, "many").errors
    );
    let features = run(Command::new("dumpe2fs").arg("-h").arg(img));
    if !features.contains("metadata_csum") {
        return;
    }
    let names = records
        .iter()
        .filter(|r| r.parent.len() == 1 && r.parent[0] == "many")
        .count();
    let bmap = run(Command::new("debugfs")
        .args(["-R", "bmap /many 0"])
        .arg(img));
    let block: u64 = bmap.trim().parse().expect("bmap");
    let bs = {
        let file = std::fs::File::open(img).unwrap();
        ExtFs::open(&file, 0, file.metadata().unwrap().len())
            .unwrap()
            .block_size()
    };
    let mut bad = std::fs::read(img).unwrap();
    // The second index entry's hash (after `.`, `..`, the root info and
    // the count/limit pair with the first entry's block).
    bad[(block * bs) as usize + 0x28] ^= 0x40;
    let (records, _) = walk(&bad);
    // Reported on the directory's own record.
    let many = record(&records, "many");
    assert!(
        has(&many.errors, ErrorKind::ChecksumMismatch),
        "{:?}",
        many.errors
    );
    assert_eq!(
        records
            .iter()
            .filter(|r| r.parent.len() == 1 && r.parent[0] == "many")
            .count(),
        names
    );
}

#[test]
fn ext4_default_matches_tsk() {
    let r = full_case("ext4_default_matches_tsk", "mkfs.ext4", &[], FsKind::Ext4);
    if !r.is_empty() {
        let gone = record(&r, "victims/gone.txt");
        // debugfs leaves the extent tree: the content is still there.
        assert_eq!(gone.recovery, Recovery::Unallocated);
    }
}

#[test]
fn ext4_1k_blocks_matches_tsk() {
    full_case(
        "ext4_1k_blocks_matches_tsk",
        "mkfs.ext4",
        &["-b", "1024"],
        FsKind::Ext4,
    );
}

#[test]
fn ext4_block_maps_matches_tsk() {
    full_case(
        "ext4_block_maps_matches_tsk",
        "mkfs.ext4",
        &["-O", "^extent,^64bit"],
        FsKind::Ext4,
    );
}

#[test]
fn ext4_inline_data_matches_tsk() {
    let r = full_case(
        "ext4_inline_data_matches_tsk",
        "mkfs.ext4",
        &["-O", "inline_data"],
        FsKind::Ext4,
    );
    if !r.is_empty() {
        assert!(matches!(
            record(&r, "small.txt").content,
            Content::Resident(_)
        ));
    }
}

#[test]
fn ext4_without_metadata_csum_or_64bit_matches_tsk() {
    full_case(
        "ext4_without_metadata_csum_or_64bit_matches_tsk",
        "mkfs.ext4",
        &["-O", "^metadata_csum,^64bit"],
        FsKind::Ext4,
    );
}

#[test]
fn ext4_64bit_flex_bg_matches_tsk() {
    full_case(
        "ext4_64bit_flex_bg_matches_tsk",
        "mkfs.ext4",
        &["-O", "64bit,flex_bg", "-G", "4", "-N", "2048"],
        FsKind::Ext4,
    );
}

#[test]
fn ext3_matches_tsk() {
    full_case("ext3_matches_tsk", "mkfs.ext3", &[], FsKind::Ext3);
}

#[test]
fn ext2_matches_tsk() {
    let r = full_case(
        "ext2_matches_tsk",
        "mkfs.ext2",
        &["-b", "1024"],
        FsKind::Ext2,
    );
    if !r.is_empty() {
        // 300 000 bytes in 1 KiB blocks need the double indirect block.
        assert!(record(&r, "docs/deeper/medium.bin").content.extents().len() > 1);
    }
}

// ---------------------------------------------------------------- real image

/// The ext2 image from TSK's own test data, with TSK 4.11.1's bodyfile:
/// every line (directories, deleted names without inodes, the symlink,
/// `$OrphanFiles`) is a record with the same path, inode, deleted state,
/// size, times and MD5, except the fast symlink's content (its target
/// here, zeros in TSK), and nothing else is listed.
#[test]
fn real_ext2_image_matches_tsk_bodyfile() {
    let test = "real_ext2_image_matches_tsk_bodyfile";
    let Some(root) = real_images(test) else {
        return;
    };
    let oracle = root.join("oracles/image.dd/bodyfile_md5_o0.txt");
    let image = root.join("ewf/image.dd");
    if !oracle.is_file() || !image.is_file() {
        eprintln!(
            "SKIPPED {test}: {} or {} is absent",
            oracle.display(),
            image.display()
        );
        return;
    }
    for path in [image.clone(), root.join("ewf/image.E01")] {
        if !path.is_file() {
            eprintln!("SKIPPED {test} ({}): absent", path.display());
            continue;
        }
        let src = open_image(&path);
        let fs = open_filesystem(&*src, 0, src.len()).expect("open");
        assert_eq!(fs.kind(), FsKind::Ext2);
        assert!(fs.open_errors().is_empty(), "{:?}", fs.open_errors());
        let (records, summary) = walk_all(&fs);
        let mut lines = parse_bodyfile(&std::fs::read_to_string(&oracle).unwrap());
        for l in &mut lines {
            if let Some((p, _)) = l.path.split_once(" -> ") {
                l.path = p.to_string();
            }
        }
        let failures = compare_every_line(&*src, &records, &lines, &|r, l| {
            match &r.content {
                // TSK gives a fast symlink's size in zeros; the target here.
                Content::Resident(t) if r.name == "a_link" => {
                    assert_eq!(l.md5, md5_bytes(&vec![0u8; t.len()]));
                    assert_eq!(t, b"a_directory/another_file");
                    md5_bytes(t)
                }
                _ => l.md5.clone(),
            }
        });
        assert!(
            failures.is_empty(),
            "{}: {} differences:\n{}\nwalk errors: {:#?}",
            path.display(),
            failures.len(),
            failures.join("\n"),
            summary.errors
        );
        assert_eq!(records.iter().filter(|r| r.deleted()).count(), 2);
        // Its fls -r -p listing too.
        let fls_text = std::fs::read_to_string(root.join("oracles/image.dd/fls_o0.txt")).unwrap();
        let mut want: Vec<(String, u64, bool)> = fls_text
            .lines()
            .filter_map(|l| {
                let (head, p) = l.split_once(":\t")?;
                let del = head.contains(" * ");
                let num: String = head
                    .rsplit(' ')
                    .next()?
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                Some((p.to_string(), num.parse().ok()?, del))
            })
            .collect();
        let mut got: Vec<(String, u64, bool)> = records
            .iter()
            .map(|r| (r.path(), r.meta.inode, r.deleted()))
            .collect();
        want.sort();
        got.sort();
        assert_eq!(got, want);
        let mut ours = std::collections::BTreeSet::new();
        fs.unallocated_runs(|e| ours.extend(e.offset / 1024..(e.offset + e.len) / 1024))
            .unwrap();
        assert_eq!(ours.len(), 74, "fsstat's free block count");
        if path == image && have_tool(test, "blkls") {
            let tsk = blkls_unallocated(&image, 0).expect("blkls");
            let only_tsk: Vec<_> = tsk.difference(&ours).collect();
            let only_ours: Vec<_> = ours.difference(&tsk).collect();
            assert!(
                only_tsk.is_empty() && only_ours.is_empty(),
                "free blocks: TSK only {only_tsk:?}, ours only {only_ours:?}"
            );
        }
    }
}

// ---------------------------------------------------------------- hostile

/// A small ext4 (1 KiB blocks, checksums on): the witness file, a
/// directory and a file fragmented into enough extents to need an index
/// block. Returns the bytes and the fragmented file's inode.
fn hostile_base(test: &str) -> Option<(Vec<u8>, u32)> {
    if !tools(test, &[]) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("docs")).unwrap();
    std::fs::create_dir_all(tree.join("pad")).unwrap();
    std::fs::write(tree.join("witness.txt"), WITNESS).unwrap();
    std::fs::write(tree.join("docs/report.txt"), filler(1, 3000)).unwrap();
    for i in 0..40 {
        std::fs::write(tree.join(format!("pad/{i:02}")), filler(i, 1024)).unwrap();
    }
    let path = dir.path().join("fs.img");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(4 << 20)
        .unwrap();
    run(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-b", "1024", "-d"])
        .arg(&tree)
        .arg(&path));
    for i in (0..40).step_by(2) {
        debugfs(&path, &format!("rm /pad/{i:02}"));
    }
    let src = dir.path().join("frag");
    std::fs::write(&src, filler(9, 20 * 1024)).unwrap();
    debugfs(&path, &format!("write {} /frag.bin", src.display()));
    let img = std::fs::read(&path).unwrap();
    let (records, _) = walk(&img);
    let ino = record(&records, "frag.bin").meta.inode as u32;
    Some((img, ino))
}

fn walk(img: &[u8]) -> (Vec<FileRecord>, WalkSummary) {
    let fs = open_filesystem(img, 0, img.len() as u64).expect("open");
    assert!(matches!(fs, FileSystem::Ext(_)));
    walk_all(&fs)
}

fn has(errors: &[caseload_fs::ProcessingError], kind: ErrorKind) -> bool {
    errors.iter().any(|e| e.kind == kind)
}

fn witness_ok(img: &[u8], records: &[FileRecord]) {
    let w = record(records, "witness.txt");
    assert_eq!(md5_of(img, w), md5_bytes(WITNESS));
}

/// Absolute offset of inode `ino` in `img`.
fn inode_at(img: &[u8], ino: u32) -> usize {
    let fs = ExtFs::open(img, 0, img.len() as u64).unwrap();
    let sb = fs.superblock();
    let g = u64::from((ino - 1) / sb.inodes_per_group);
    let gd = fs.group_desc(g).unwrap();
    (gd.inode_table * sb.block_size
        + u64::from((ino - 1) % sb.inodes_per_group) * u64::from(sb.inode_size)) as usize
}

fn put32(img: &mut [u8], at: usize, v: u32) {
    img[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put16(img: &mut [u8], at: usize, v: u16) {
    img[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn corrupt_superblock_fields_are_errors_not_panics() {
    let Some((img, _)) = hostile_base("corrupt_superblock_fields_are_errors_not_panics") else {
        return;
    };
    let sb = 1024;
    for (field, at, value) in [
        ("s_log_block_size", sb + 0x18, 7u32),
        ("s_log_block_size huge", sb + 0x18, 0xFFFF_FFFF),
        ("s_blocks_per_group", sb + 0x20, 0),
        ("s_blocks_per_group huge", sb + 0x20, 0x8000_0000),
        ("s_inodes_per_group", sb + 0x28, 0),
        ("s_inodes_count", sb, 0xFFFF_FFFF),
        ("s_inodes_count small", sb, 3),
        ("s_first_data_block", sb + 0x14, 9),
        ("s_blocks_count", sb + 0x04, 0),
        ("s_first_ino", sb + 0x54, 0),
    ] {
        let mut bad = img.clone();
        put32(&mut bad, at, value);
        assert!(
            ExtFs::open(&bad[..], 0, bad.len() as u64).is_err(),
            "{field} = {value:#x} accepted"
        );
        // Through the common door: an error, never a panic.
        let _ = open_filesystem(&bad[..], 0, bad.len() as u64);
    }
    let mut bad = img.clone();
    put16(&mut bad, sb + 0x58, 100); // s_inode_size
    assert!(ExtFs::open(&bad[..], 0, bad.len() as u64).is_err());
    // More blocks than the image holds: opened, reported, walked.
    let mut bad = img.clone();
    put32(&mut bad, sb + 0x04, 1 << 30);
    let fs = open_filesystem(&bad[..], 0, bad.len() as u64).expect("open");
    assert!(has(fs.open_errors(), ErrorKind::CorruptFileSystem));
    assert!(has(fs.open_errors(), ErrorKind::ChecksumMismatch));
    let _ = walk_all(&fs);
}

#[test]
fn group_descriptor_past_the_volume_is_reported() {
    let Some((mut img, _)) = hostile_base("group_descriptor_past_the_volume_is_reported") else {
        return;
    };
    // Group 0's descriptor is in block 2 (1 KiB blocks); its inode table.
    put32(&mut img, 2048 + 8, 0xFFFF_FFF0);
    let (records, summary) = walk(&img);
    assert!(
        has(&summary.errors.errors, ErrorKind::CorruptFileSystem),
        "{summary:?}"
    );
    assert!(records.iter().all(|r| r.name == "$OrphanFiles"));
}

#[test]
fn extent_tree_loops_and_bad_depths_are_cut() {
    let Some((img, ino)) = hostile_base("extent_tree_loops_and_bad_depths_are_cut") else {
        return;
    };
    let at = inode_at(&img, ino) + 0x28;
    assert!(
        u16::from_le_bytes([img[at + 6], img[at + 7]]) >= 1,
        "frag.bin has no index"
    );
    let child = u32::from_le_bytes(img[at + 16..at + 20].try_into().unwrap()) as usize;
    // Root says depth 2; the child says depth 1 and points at itself.
    let mut looped = img.clone();
    put16(&mut looped, at + 6, 2);
    let c = child * 1024;
    put16(&mut looped, c + 2, 1);
    put16(&mut looped, c + 6, 1);
    put32(&mut looped, c + 12, 0);
    put32(&mut looped, c + 16, child as u32);
    put16(&mut looped, c + 20, 0);
    let (records, _) = walk(&looped);
    let r = record(&records, "frag.bin");
    assert!(has(&r.errors, ErrorKind::ChainLoop), "{:?}", r.errors);
    witness_ok(&looped, &records);
    // A child whose depth does not descend.
    let mut deep = img.clone();
    put16(&mut deep, child * 1024 + 6, 3);
    let (records, _) = walk(&deep);
    let r = record(&records, "frag.bin");
    assert!(
        has(&r.errors, ErrorKind::CorruptAttribute),
        "{:?}",
        r.errors
    );
    // An index pointing past the volume, and a leaf extent past it.
    let mut past = img.clone();
    put32(&mut past, at + 16, 0xFFFF_FF00);
    let (records, _) = walk(&past);
    assert!(has(
        &record(&records, "frag.bin").errors,
        ErrorKind::ChainOutOfRange
    ));
    witness_ok(&past, &records);
    // Too many entries for the node.
    let mut many = img.clone();
    put16(&mut many, at + 2, 0xFFFF);
    let (records, _) = walk(&many);
    assert!(has(
        &record(&records, "frag.bin").errors,
        ErrorKind::CorruptAttribute
    ));
}

#[test]
fn directory_rec_len_zero_and_overflow_do_not_hang() {
    let Some((img, _)) = hostile_base("directory_rec_len_zero_and_overflow_do_not_hang") else {
        return;
    };
    // The root directory's first block: its first extent's start.
    let root = inode_at(&img, 2) + 0x28;
    let block = u32::from_le_bytes(img[root + 20..root + 24].try_into().unwrap()) as usize;
    let d = block * 1024;
    let mut bad = img.clone();
    put16(&mut bad, d + 4, 0); // `.`
    put16(&mut bad, d + 16, 0xFFFC); // `..`
    let (records, summary) = walk(&bad);
    witness_ok(&bad, &records);
    // The block checksum no longer holds: reported on the walk (the root
    // has no record).
    assert!(
        has(&summary.errors.errors, ErrorKind::ChecksumMismatch),
        "{summary:?}"
    );
    // Every entry of the block with rec_len 0.
    let mut zero = img.clone();
    for k in (0..1024).step_by(4) {
        zero[d + k..d + k + 4].copy_from_slice(&[1, 0, 0, 0]);
    }
    let (records, _) = walk(&zero);
    assert!(
        records
            .iter()
            .all(|r| r.parent.is_empty() || r.parent[0] == "$OrphanFiles")
    );
}

#[test]
fn checksum_mismatches_are_recorded_and_the_walk_goes_on() {
    let Some((mut img, _)) = hostile_base("checksum_mismatches_are_recorded_and_the_walk_goes_on")
    else {
        return;
    };
    let (records, _) = walk(&img);
    let w = record(&records, "witness.txt").meta.inode as u32;
    let docs = record(&records, "docs").clone();
    // The witness inode's mtime changed behind its checksum.
    let wat = inode_at(&img, w);
    img[wat + 0x10] ^= 1;
    // A byte of `report.txt`'s name in the docs block.
    let ext = docs.content.extents()[0];
    let dblock = &mut img[ext.offset as usize..(ext.offset + 1024) as usize];
    let p = dblock.windows(6).position(|x| x == b"report").unwrap();
    dblock[p] = b'R';
    let (records, summary) = walk(&img);
    let wr = record(&records, "witness.txt");
    assert!(
        has(&wr.errors, ErrorKind::ChecksumMismatch),
        "{:?}",
        wr.errors
    );
    assert_eq!(md5_of(&img, wr), md5_bytes(WITNESS));
    let d = record(&records, "docs");
    assert!(
        has(&d.errors, ErrorKind::ChecksumMismatch),
        "{:?}",
        d.errors
    );
    record(&records, "docs/Report.txt");
    assert!(summary.record_errors >= 2);
}

#[test]
fn fuzzed_ext4_images_never_panic() {
    let Some((img, ino)) = hostile_base("fuzzed_ext4_images_never_panic") else {
        return;
    };
    let root = inode_at(&img, 2);
    let block = u32::from_le_bytes(img[root + 0x28 + 20..root + 0x28 + 24].try_into().unwrap());
    let fino = inode_at(&img, ino);
    fuzz(
        &img,
        &[
            (1024, 1024),
            (2048, 1024),
            (root - 256, 2048),
            (block as usize * 1024, 1024),
            (fino, 256),
        ],
        0xE47,
        300,
    );
}
