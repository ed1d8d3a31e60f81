//! ext4 corpora against independent oracles: `e2fsck -fn` (e2fsprogs),
//! The Sleuth Kit's `fls` and `icat`, `debugfs`'s listing and `rdump`,
//! and caseload-fs's ext4 walk. A missing tool prints `SKIPPED: <tool>`
//! and the check passes.

mod common;

use caseload_corpus::content::Kind;
use caseload_corpus::manifest::EntryKind;
use caseload_corpus::{NoProgress, generate_ext4};
use common::{entries, have, hex, opts};
use md5::{Digest, Md5};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

const MIB: u64 = 1 << 20;

use common::Corpus;

fn corpus_with(size: u64, seed: u64, threads: usize, profile: &str) -> Corpus {
    let o = opts(Path::new("."), size, seed, threads, profile);
    let label = format!("{profile}-{size}-{seed}-{threads}");
    common::corpus(&o, "EXT4_KEEP", &label, |o| {
        generate_ext4(o, &NoProgress, None)
    })
}

fn part(c: &Corpus) -> (u64, u64) {
    common::part(&c.manifest)
}

fn check_fsck(v: &Path) {
    if !have("e2fsck") {
        return;
    }
    let out = Command::new("e2fsck")
        .args(["-fn"])
        .arg(v)
        .output()
        .expect("e2fsck");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            !l.starts_with("e2fsck ")
                && !l.starts_with("Pass ")
                && !l.contains(" files (")
                && !l.trim().is_empty()
        })
        .collect();
    assert!(
        out.status.success() && lines.is_empty(),
        "e2fsck -fn (exit {:?}):\n{text}",
        out.status.code()
    );
}

/// `fls -r -p` against the manifest: names, deleted state and inode
/// numbers; then `icat` of every allocated file against its MD5 (a
/// deleted file's extents are cleared: icat gives nothing).
fn check_tsk(c: &Corpus) {
    if !have("fls") || !have("icat") {
        return;
    }
    let skip = |p: &str| p == "lost+found" || p == "$OrphanFiles";
    let (checked, _) = common::check_tsk(&c.image, &c.manifest, skip, false);
    println!("icat: {checked} files");
}

/// `debugfs`: `rdump` of the root gives every live file with its MD5 and
/// every live folder.
fn check_debugfs(c: &Corpus, v: &Path) {
    if !have("debugfs") {
        return;
    }
    let out = tempfile::tempdir().expect("tempdir");
    let r = Command::new("debugfs")
        .arg("-R")
        .arg(format!("rdump / {}", out.path().display()))
        .arg(v)
        .output()
        .expect("debugfs");
    assert!(r.status.success(), "debugfs rdump failed");
    let mut got = common::tree_md5(out.path());
    got.retain(|k, _| k != "lost+found");
    let want: BTreeMap<String, Option<String>> = entries(&c.manifest)
        .into_iter()
        .filter(|e| !e.deleted)
        .map(|e| {
            (
                e.path.clone(),
                (e.kind != EntryKind::Directory).then(|| e.md5.clone().unwrap_or_default()),
            )
        })
        .collect();
    let a: BTreeSet<_> = got.keys().collect();
    let b: BTreeSet<_> = want.keys().collect();
    assert_eq!(
        a.difference(&b).take(10).collect::<Vec<_>>(),
        Vec::<&&String>::new(),
        "only in rdump"
    );
    assert_eq!(
        b.difference(&a).take(10).collect::<Vec<_>>(),
        Vec::<&&String>::new(),
        "only in the manifest"
    );
    for (k, v) in &want {
        assert_eq!(got.get(k), Some(v), "rdump content of {k}");
    }
}

/// caseload-fs's ext4 walk: every listed name, its deleted state and
/// inode, and each allocated file's MD5.
fn check_walk(c: &Corpus) {
    use caseload_fs::record::{Content, FileKind, Run};
    let (off, len) = part(c);
    let file = std::fs::File::open(&c.image).expect("image");
    let fs = caseload_fs::ExtFs::open(&file, off, len).expect("open ext4");
    assert!(fs.open_errors().is_empty(), "{:?}", fs.open_errors());
    let img = std::fs::read(&c.image).expect("image");
    let mut got: BTreeMap<(String, bool), (u64, Option<String>)> = BTreeMap::new();
    fs.walk(|r| {
        let mut path: Vec<String> = r.parent.iter().cloned().collect();
        path.push(r.name.clone());
        let path = path.join("/");
        if path == "lost+found"
            || path == "$OrphanFiles"
            || !matches!(r.kind, FileKind::File | FileKind::Directory)
        {
            return std::ops::ControlFlow::Continue(());
        }
        let md5 = match (&r.content, r.kind, r.allocated) {
            // A fast symlink's target, kept in its inode.
            (Content::Resident(b), FileKind::File, true) => Some(hex(&Md5::digest(b))),
            (Content::Runs(runs), FileKind::File, true) => {
                let mut h = Md5::new();
                for run in runs {
                    match *run {
                        Run::Data { offset, len } => {
                            h.update(&img[offset as usize..(offset + len) as usize])
                        }
                        Run::Zeros { len } => h.update(vec![0u8; len as usize]),
                    }
                }
                Some(hex(&h.finalize()))
            }
            (_, FileKind::File, true) => Some(hex(&Md5::digest(b""))),
            _ => None,
        };
        got.insert((path, !r.allocated), (r.meta.inode, md5));
        std::ops::ControlFlow::Continue(())
    })
    .expect("walk");
    let mut want = BTreeMap::new();
    for e in entries(&c.manifest) {
        want.insert(
            (e.tsk_path.clone(), e.deleted),
            (
                e.inode.expect("inode"),
                (e.kind != EntryKind::Directory && !e.deleted)
                    .then(|| e.md5.clone())
                    .flatten(),
            ),
        );
    }
    let only_walk: Vec<_> = got.keys().filter(|k| !want.contains_key(k)).collect();
    let only_mf: Vec<_> = want.keys().filter(|k| !got.contains_key(k)).collect();
    assert!(
        only_walk.is_empty() && only_mf.is_empty(),
        "walk and manifest differ: only walked {:?}, only in the manifest {:?}",
        &only_walk[..only_walk.len().min(10)],
        &only_mf[..only_mf.len().min(10)]
    );
    for (k, v) in &want {
        assert_eq!(got.get(k), Some(v), "{k:?}");
    }
}

fn check_corpus(c: &Corpus) {
    assert_eq!(c.manifest.filesystem.fs_type.name(), "ext4");
    assert!(c.manifest.filesystem.ext4.is_some());
    common::check_offsets(&c.image, &c.manifest);
    let v = common::volume_file(&c.image, &c.manifest);
    check_fsck(v.path());
    check_tsk(c);
    check_debugfs(c, v.path());
    check_walk(c);
}

#[test]
fn corpus_64_mib_seed_1_passes_every_oracle() {
    check_corpus(&corpus_with(64 * MIB, 1, 2, "workstation"));
}

#[test]
fn corpus_300_mib_seed_2_passes_every_oracle() {
    let c = corpus_with(300 * MIB, 2, 2, "suspect");
    check_corpus(&c);
    // Sparse files (their data units extents of their own: trees of
    // depth 1 past four) and deleted folders are there to be checked.
    assert!(c.manifest.summary.sparse_files > 0, "no sparse files");
    assert!(
        c.manifest.summary.deleted_directories > 0,
        "no deleted folders"
    );
}

#[test]
fn smallest_corpus_passes_every_oracle() {
    check_corpus(&corpus_with(
        caseload_corpus::ext4::MIN_DISK,
        3,
        1,
        "workstation",
    ));
}

#[test]
fn image_and_manifest_do_not_depend_on_threads() {
    let a = corpus_with(64 * MIB, 5, 1, "workstation");
    let b = corpus_with(64 * MIB, 5, 2, "workstation");
    assert_eq!(
        std::fs::read(&a.image).expect("a"),
        std::fs::read(&b.image).expect("b"),
        "images differ"
    );
    let ma = std::fs::read(a.dir.path().join(caseload_corpus::MANIFEST)).expect("a");
    let mb = std::fs::read(b.dir.path().join(caseload_corpus::MANIFEST)).expect("b");
    assert_eq!(ma, mb, "manifests differ");
}

#[test]
fn too_small_a_disk_is_refused_naming_the_minimum() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = opts(dir.path(), 16 * MIB, 1, 1, "workstation");
    let e = generate_ext4(&o, &NoProgress, None).expect_err("refused");
    assert!(e.to_string().contains("32 MiB"), "{e}");
}

#[test]
fn linux_server_corpus_passes_every_oracle() {
    let c = corpus_with(256 * MIB, 7, 2, "linux-server");
    check_corpus(&c);
    let paths: BTreeSet<&str> = c.manifest.files.iter().map(|e| e.path.as_str()).collect();
    for want in ["etc", "var/log", "var/www/html", "var/cache/apt/archives"] {
        assert!(paths.contains(want), "no {want}");
    }
    assert!(
        c.manifest
            .files
            .iter()
            .any(|e| is_maildir_message(&e.path) && e.kind == EntryKind::File),
        "no mail in Maildir"
    );
    check_server_vocabulary(&c);
    check_links(&c);
    check_hashed_folders(&c);
}

/// What `debugfs -R "CMD <INODE>"` prints about entry `e` of volume `v`.
fn debugfs_of(v: &Path, cmd: &str, e: &caseload_corpus::manifest::FileEntry) -> String {
    let out = Command::new("debugfs")
        .arg("-R")
        .arg(format!("{cmd} <{}>", e.inode.expect("inode")))
        .arg(v)
        .output()
        .expect("debugfs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A server's PHP session folders pass one block, so they are hashed
/// (htree): `debugfs` dumps each one's index root, e2fsck (run by
/// `check_corpus`) checks its hashes, and fls and the walk list every
/// name (also `check_corpus`).
fn check_hashed_folders(c: &Corpus) {
    let folders: Vec<_> = entries(&c.manifest)
        .into_iter()
        .filter(|e| e.kind == EntryKind::Directory && e.name == "sessions" && !e.deleted)
        .collect();
    assert!(!folders.is_empty(), "no session folder");
    for d in &folders {
        let names = c
            .manifest
            .files
            .iter()
            .filter(|e| e.path.rsplit_once('/').map(|x| x.0) == Some(d.path.as_str()))
            .filter(|e| e.name.starts_with("sess_") && e.name.len() == 31)
            .count();
        assert!(names >= 150, "{}: {names} sessions", d.path);
        if !have("debugfs") {
            continue;
        }
        let v = common::volume_file(&c.image, &c.manifest);
        let text = debugfs_of(v.path(), "htree", d);
        assert!(
            text.contains("Root node dump") && text.contains("Number of entries (count):"),
            "{} is not hashed: {text}",
            d.path
        );
    }
}

/// A server's links: symbolic links that `fls` types `l/l` and `debugfs`
/// reads back with their targets; hard links whose inode `fls` lists
/// under both names and whose link count `debugfs` gives as 2 (e2fsck,
/// run by `check_corpus`, checks every link count).
fn check_links(c: &Corpus) {
    let symlinks: Vec<_> = entries(&c.manifest)
        .into_iter()
        .filter(|e| e.kind == EntryKind::Symlink)
        .collect();
    let hard: Vec<_> = entries(&c.manifest)
        .into_iter()
        .filter(|e| e.hard_link_of.is_some())
        .collect();
    assert!(!symlinks.is_empty(), "no symbolic links");
    assert!(!hard.is_empty(), "no hard links");
    assert_eq!(c.manifest.summary.symlinks, symlinks.len() as u64);
    assert_eq!(c.manifest.summary.hard_links, hard.len() as u64);
    // Each hard link with its first name.
    let pairs: Vec<_> = hard
        .iter()
        .map(|e| {
            let first = c
                .manifest
                .files
                .iter()
                .find(|f| Some(&f.path) == e.hard_link_of.as_ref())
                .expect("a hard link's first name is in the manifest");
            (e, first)
        })
        .collect();
    for (e, first) in &pairs {
        assert_eq!((first.inode, &first.md5), (e.inode, &e.md5), "{}", e.path);
        assert_eq!(first.extents, e.extents, "{}", e.path);
    }
    let folder = |p: &str| p.rsplit_once('/').map(|x| x.0.to_string());
    let away: Vec<_> = hard
        .iter()
        .filter(|e| e.hard_link_of.as_deref().and_then(folder) != folder(&e.path))
        .collect();
    assert!(!away.is_empty(), "no hard link in another folder");
    for e in &symlinks {
        let target = e.link_target.as_deref().expect("target");
        assert_eq!(e.size, target.len() as u64);
        assert_eq!(e.md5, Some(hex(&Md5::digest(target.as_bytes()))));
        let dir = e.path.rsplit_once('/').map(|x| x.0).unwrap_or("");
        // A relative target is a sibling's name, an absolute one a path.
        let want = match target.strip_prefix('/') {
            Some(abs) => abs.to_string(),
            None => format!("{dir}/{target}"),
        };
        // In the inode (fast) up to 59 bytes, else in a block (slow).
        assert_eq!(e.extents.is_empty(), target.len() < 60, "{}", e.path);
        assert!(
            c.manifest
                .files
                .iter()
                .any(|f| f.path == want && f.kind == EntryKind::File),
            "{} points at no file",
            e.path
        );
    }
    let v = common::volume_file(&c.image, &c.manifest);
    if have("fls") {
        let sector = (common::part(&c.manifest).0 / 512).to_string();
        let out = Command::new("fls")
            .args(["-r", "-p", "-o", &sector])
            .arg(&c.image)
            .output()
            .expect("fls");
        let text = String::from_utf8_lossy(&out.stdout);
        // Both names of a hard link, in different folders or not, are
        // listed with the one inode.
        let listed = |tsk_path: &str| {
            text.lines().find_map(|l| {
                let (head, path) = l.split_once(":\t")?;
                (path == tsk_path).then(|| head.rsplit(' ').next().map(str::to_string))?
            })
        };
        for (e, first) in &pairs {
            let want = e.inode.map(|i| i.to_string());
            assert_eq!(listed(&e.tsk_path), want, "fls: {}", e.tsk_path);
            assert_eq!(listed(&first.tsk_path), want, "fls: {}", first.tsk_path);
        }
        for e in &symlinks {
            assert!(
                text.lines().any(|l| l.starts_with("l/l ")
                    && l.split_once(":\t").map(|x| x.1) == Some(e.tsk_path.as_str())),
                "fls does not type {} as a symbolic link",
                e.tsk_path
            );
        }
    }
    if have("debugfs") {
        let stat = |e: &caseload_corpus::manifest::FileEntry| debugfs_of(v.path(), "stat", e);
        for e in hard.iter().take(5) {
            let text = stat(e);
            assert!(text.contains("Links: 2"), "{}: {text}", e.path);
        }
        for e in symlinks.iter().take(8) {
            let text = stat(e);
            let target = e.link_target.as_deref().unwrap_or_default();
            let fast = text.contains(&format!("Fast link dest: \"{target}\""));
            assert!(
                text.contains("Type: symlink") && fast == e.extents.is_empty(),
                "{}: {text}",
                e.path
            );
        }
    }
    // A slow symlink's block holds its target: `icat` gives it (of a
    // fast one, TSK gives zeros).
    let slow: Vec<_> = symlinks.iter().filter(|e| !e.extents.is_empty()).collect();
    assert!(!slow.is_empty(), "no slow symbolic link");
    if have("icat") {
        let sector = (common::part(&c.manifest).0 / 512).to_string();
        for e in slow {
            let out = Command::new("icat")
                .args(["-o", &sector])
                .arg(&c.image)
                .arg(e.inode.expect("inode").to_string())
                .output()
                .expect("icat");
            assert_eq!(Some(hex(&Md5::digest(&out.stdout))), e.md5, "{}", e.path);
        }
    }
}

/// A message in a Maildir++ folder (`Maildir/.NAME/cur/`).
fn is_maildir_message(path: &str) -> bool {
    path.split_once("/Maildir/.")
        .is_some_and(|(_, rest)| rest.split('/').nth(1) == Some("cur"))
}

/// A file's bytes, from its extents in the image.
fn file_bytes(img: &[u8], e: &caseload_corpus::manifest::FileEntry) -> Vec<u8> {
    let mut out = Vec::with_capacity(e.size as usize);
    for x in &e.extents {
        let take = x.length.min(e.size - out.len() as u64) as usize;
        out.extend_from_slice(&img[x.offset as usize..x.offset as usize + take]);
    }
    out
}

/// A server's files look like one's: /etc holds settings, /var/log
/// rsyslog lines with rotated logs gzipped (`gzip -t` the oracle), the
/// databases are under /var/lib, Maildir names are Maildir's.
fn check_server_vocabulary(c: &Corpus) {
    let img = std::fs::read(&c.image).expect("image");
    let live = |e: &&caseload_corpus::manifest::FileEntry| {
        e.kind == EntryKind::File && e.allocated && !e.sparse
    };
    let files: Vec<_> = c.manifest.files.iter().filter(live).collect();
    let etc: Vec<_> = files
        .iter()
        .filter(|e| e.path.starts_with("etc/"))
        .collect();
    assert!(etc.len() >= 6, "{} files in /etc", etc.len());
    for e in &etc {
        let text = String::from_utf8(file_bytes(&img, e)).expect("utf-8 in /etc");
        assert!(
            text.lines()
                .all(|l| l.starts_with("# ") || l.split_whitespace().count() >= 2 || l.len() < 40),
            "{} is not settings: {text:?}",
            e.path
        );
    }
    // Logs by type: a planted duplicate of another file may sit among them.
    let logs: Vec<_> = files
        .iter()
        .filter(|e| e.path.starts_with("var/log/"))
        .filter(|e| matches!(e.content_type, Some(Kind::Log | Kind::Gzip)))
        .collect();
    let gz: Vec<_> = logs.iter().filter(|e| e.path.ends_with(".gz")).collect();
    assert!(
        !gz.is_empty() && gz.len() < logs.len(),
        "{} of {} logs gzipped",
        gz.len(),
        logs.len()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    for e in &logs {
        let bytes = file_bytes(&img, e);
        let text = if e.path.ends_with(".gz") {
            assert_eq!(e.mime.as_deref(), Some("application/gzip"), "{}", e.path);
            if !have("gzip") {
                continue;
            }
            let f = dir.path().join("log.gz");
            std::fs::write(&f, &bytes).expect("write");
            let out = Command::new("gzip")
                .arg("-dc")
                .arg(&f)
                .output()
                .expect("gzip");
            assert!(
                out.status.success(),
                "gzip -dc {}: {}",
                e.path,
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        } else {
            bytes
        };
        let text = String::from_utf8(text).expect("utf-8 log");
        let first = text.lines().next().unwrap_or_default();
        // `Mmm dd hh:mm:ss host program[pid]: ...`
        let month = first.get(..3).unwrap_or_default();
        assert!(
            [
                "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"
            ]
            .contains(&month)
                && first.get(9..10) == Some(":")
                && first.contains(": "),
            "{}: {first:?}",
            e.path
        );
        assert!(!text.contains('\r'), "{}: CR in a server's log", e.path);
    }
    assert!(
        files.iter().any(|e| e.path.starts_with("var/lib/")
            && e.mime.as_deref() == Some("application/vnd.sqlite3")),
        "no database under /var/lib"
    );
    let mut hosts = BTreeSet::new();
    for e in files.iter().filter(|e| is_maildir_message(&e.path)) {
        assert!(
            e.name.contains(":2,") && e.name.contains(".M"),
            "Maildir name {}",
            e.name
        );
        hosts.insert(e.name.split('.').nth(2).and_then(|h| h.split(':').next()));
    }
    assert_eq!(hosts.len(), 1, "one server, one host name: {hosts:?}");
    assert!(
        !files
            .iter()
            .any(|e| e.name.ends_with(".exe") || e.name.ends_with(".dll")),
        "Windows programs on a server"
    );
    // The package cache: packages dpkg-deb reads, named for their control.
    let debs: Vec<_> = files
        .iter()
        .filter(|e| e.path.starts_with("var/cache/apt/archives/"))
        .collect();
    assert!(!debs.is_empty(), "an empty package cache");
    for e in debs {
        assert!(e.name.ends_with("_amd64.deb") && e.known, "{}", e.path);
        if !have("dpkg-deb") {
            continue;
        }
        let f = dir.path().join("p.deb");
        std::fs::write(&f, file_bytes(&img, e)).expect("write");
        let info = Command::new("dpkg-deb")
            .arg("-f")
            .arg(&f)
            .args(["Package", "Version"])
            .output()
            .expect("dpkg-deb");
        assert!(
            info.status.success(),
            "dpkg-deb -f {}: {}",
            e.path,
            String::from_utf8_lossy(&info.stderr)
        );
        let fields = String::from_utf8_lossy(&info.stdout).to_string();
        let mut it = e.name.split('_');
        for (field, want) in ["Package", "Version"].iter().zip([it.next(), it.next()]) {
            assert!(
                fields.contains(&format!("{field}: {}", want.unwrap_or_default())),
                "{}: {fields}",
                e.path
            );
        }
        let list = Command::new("dpkg-deb")
            .arg("-c")
            .arg(&f)
            .output()
            .expect("dpkg-deb");
        let list = String::from_utf8_lossy(&list.stdout).to_string();
        assert!(list.contains("./usr/bin/"), "{}: {list}", e.path);
    }
}

/// By hand, at any size and seed: `EXT4_BIG_MIB` (default 1024),
/// `EXT4_BIG_SEED` (1), `EXT4_BIG_PROFILE` (workstation).
#[test]
#[ignore]
fn big_corpus_passes_every_oracle() {
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let mib: u64 = env("EXT4_BIG_MIB", "1024").parse().expect("EXT4_BIG_MIB");
    let seed: u64 = env("EXT4_BIG_SEED", "1").parse().expect("EXT4_BIG_SEED");
    let profile = env("EXT4_BIG_PROFILE", "workstation");
    let c = corpus_with(mib * MIB, seed, 2, &profile);
    check_corpus(&c);
    if profile == "linux-server" {
        check_links(&c);
    }
}
