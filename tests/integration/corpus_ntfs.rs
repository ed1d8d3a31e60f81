//! NTFS corpora against their oracles: The Sleuth Kit (`fsstat`, `fls -r
//! -p`, `icat`, `istat`) lists exactly the manifest's allocated and deleted
//! files and returns the manifest's MD5 for every intact one; ntfs-3g's
//! tools (`ntfsinfo`, `ntfsls`, `ntfscat`, `ntfsfix -n`) read the volume;
//! where FUSE and root are at hand the volume mounts read-only with
//! ntfs-3g and every allocated file reads back with its MD5. caseload's own
//! filesystem and file-hash stages agree with the manifest too, and the
//! image does not depend on the thread count.
//!
//! NTFS's own files (`$MFT`, `$Extend/...`) are not in the manifest, which
//! lists the user's files; they are left out of the comparison by name.

use crate::corpus_support;

use caseload_corpus::manifest::{EntryKind, FileEntry};
use corpus_support::{Corpus, fls, have_tools, icat, make, md5_hex};
use std::collections::{BTreeMap, HashMap};
use std::process::Command;

/// Whether a listed path is one of NTFS's own files.
fn is_system(path: &str) -> bool {
    path.starts_with('$')
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn check_fsstat(c: &Corpus) {
    let out = Command::new("fsstat")
        .args(["-o", &c.start_sector().to_string()])
        .arg(c.image())
        .output()
        .expect("run fsstat");
    let t = text(&out);
    assert!(out.status.success(), "fsstat failed:\n{t}");
    assert!(t.contains("File System Type: NTFS"), "{t}");
    let ntfs = c.manifest.filesystem.ntfs.as_ref().expect("NTFS facts");
    assert!(
        t.contains(&format!(
            "Cluster Size: {}",
            c.manifest.filesystem.cluster_size
        )),
        "{t}"
    );
    assert!(
        t.contains(&format!("First Cluster of MFT: {}", ntfs.mft_cluster)),
        "{t}"
    );
    assert!(
        t.contains("Version: Windows XP") || t.contains("Version:"),
        "{t}"
    );
}

/// fls lists exactly the manifest's entries; icat returns the manifest's
/// bytes for every intact file. Returns the listing.
fn check_fls_icat(c: &Corpus) -> HashMap<(String, bool), corpus_support::FlsEntry> {
    let mut listed = fls(c);
    listed.retain(|(p, _), _| !is_system(p));
    let expected: HashMap<(String, bool), &FileEntry> = c
        .manifest
        .files
        .iter()
        .map(|f| ((f.tsk_path.clone(), f.deleted), f))
        .collect();
    let mut missing: Vec<_> = expected
        .keys()
        .filter(|k| !listed.contains_key(*k))
        .collect();
    let mut extra: Vec<_> = listed
        .keys()
        .filter(|k| !expected.contains_key(*k))
        .collect();
    missing.sort();
    extra.sort();
    assert!(missing.is_empty(), "in manifest, not in fls: {missing:?}");
    assert!(extra.is_empty(), "in fls, not in manifest: {extra:?}");
    let (mut checked, mut deleted_checked, mut resident_checked) = (0, 0, 0);
    for (key, f) in &expected {
        let e = &listed[key];
        // A deleted file's name comes from its MFT record, not from an
        // index entry, so TSK knows no name type for it (`-`).
        let want = match (f.kind, f.deleted) {
            (EntryKind::Directory, false) => "d/d",
            (EntryKind::Directory, true) => "-/d",
            (EntryKind::File, false) => "r/r",
            (EntryKind::File, true) => "-/r",
            (EntryKind::Symlink, false) => "l/l",
            (EntryKind::Symlink, true) => "-/l",
        };
        assert_eq!(e.kind, want, "{}", f.path);
        let record = f.mft_record.expect("NTFS entries carry their record");
        assert!(
            e.inode.starts_with(&format!("{record}-")),
            "{}: fls says {}, manifest record {record}",
            f.path,
            e.inode
        );
        if f.kind != EntryKind::File || !f.intact {
            continue;
        }
        let data = icat(c, &e.inode);
        assert_eq!(
            Some(md5_hex(&data)),
            f.md5,
            "icat MD5 of {} ({} bytes, deleted={}, resident={})",
            f.path,
            f.size,
            f.deleted,
            f.resident
        );
        checked += 1;
        deleted_checked += f.deleted as u32;
        resident_checked += f.resident as u32;
    }
    assert!(checked > 20, "only {checked} files checked");
    assert!(deleted_checked > 0, "no intact deleted file checked");
    assert!(resident_checked > 0, "no resident file checked");
    listed
}

/// istat shows a fragmented file's runs and a resident file as resident.
fn check_istat(c: &Corpus) {
    let istat = |record: u64| {
        let out = Command::new("istat")
            .args(["-o", &c.start_sector().to_string()])
            .arg(c.image())
            .arg(record.to_string())
            .output()
            .expect("run istat");
        assert!(out.status.success(), "istat {record}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    if let Some(f) = c.live_files().find(|f| f.resident) {
        let t = istat(f.mft_record.unwrap());
        assert!(
            t.contains("$DATA (128-") && t.contains("Resident"),
            "{}:\n{t}",
            f.path
        );
    }
    let f = c
        .live_files()
        .find(|f| f.fragmented)
        .expect("a fragmented live file");
    let t = istat(f.mft_record.unwrap());
    assert!(t.contains("Non-Resident"), "{}:\n{t}", f.path);
    assert!(t.contains(&f.name), "{}:\n{t}", f.path);
}

/// ntfs-3g's tools on the partition: ntfsfix -n finds nothing to fix,
/// ntfsinfo reads the volume, ntfsls lists the user's folders, ntfscat
/// returns live files' bytes.
fn check_ntfs3g(c: &Corpus) {
    let part = c.partition_file();
    let out = Command::new("ntfsfix")
        .arg("-n")
        .arg(&part)
        .output()
        .expect("run ntfsfix");
    let t = text(&out);
    assert!(out.status.success(), "ntfsfix -n:\n{t}");
    for bad in ["Corrupt", "corrupt", "mismatch", "error", "Error"] {
        assert!(!t.contains(bad), "ntfsfix -n reports {bad:?}:\n{t}");
    }
    let out = Command::new("ntfsinfo")
        .args(["-m", "-f"])
        .arg(&part)
        .output()
        .expect("run ntfsinfo");
    let t = text(&out);
    assert!(out.status.success(), "ntfsinfo -m:\n{t}");
    let out = Command::new("ntfsls")
        .args(["-a", "-p", "/Users"])
        .arg(&part)
        .output()
        .expect("run ntfsls");
    let t = text(&out);
    assert!(out.status.success(), "ntfsls:\n{t}");
    let user_dir = c
        .manifest
        .files
        .iter()
        .find(|f| f.path.starts_with("Users/") && f.path.matches('/').count() == 1)
        .expect("the user's folder");
    assert!(
        t.contains(&user_dir.name),
        "ntfsls /Users lacks {}:\n{t}",
        user_dir.name
    );
    let mut read = 0;
    for f in c
        .live_files()
        .filter(|f| f.size > 0 && f.stream.is_none())
        .step_by(5)
        .take(40)
    {
        let out = Command::new("ntfscat")
            .arg(&part)
            .arg(format!("/{}", f.path))
            .output()
            .expect("run ntfscat");
        assert!(out.status.success(), "ntfscat {}: {}", f.path, text(&out));
        assert_eq!(Some(md5_hex(&out.stdout)), f.md5, "ntfscat {}", f.path);
        read += 1;
    }
    assert!(read > 5);
    // A downloaded file's Zone.Identifier stream by name.
    if let Some(f) = c.live_files().find(|f| f.stream.is_some()) {
        let (file, stream) = f.path.rsplit_once(':').expect("stream path");
        let out = Command::new("ntfscat")
            .args(["-a", "0x80", "-n", stream])
            .arg(&part)
            .arg(format!("/{file}"))
            .output()
            .expect("run ntfscat");
        assert!(out.status.success(), "ntfscat {}: {}", f.path, text(&out));
        assert_eq!(Some(md5_hex(&out.stdout)), f.md5, "ntfscat {}", f.path);
    }
    // Every compressed file through ntfs-3g's LZNT1 decoder, every sparse
    // one with its holes.
    for f in c.live_files().filter(|f| f.compressed || f.sparse) {
        let out = Command::new("ntfscat")
            .arg(&part)
            .arg(format!("/{}", f.path))
            .output()
            .expect("run ntfscat");
        assert!(out.status.success(), "ntfscat {}: {}", f.path, text(&out));
        assert_eq!(
            Some(md5_hex(&out.stdout)),
            f.md5,
            "ntfscat {} (compressed)",
            f.path
        );
    }
    let _ = std::fs::remove_file(part);
}

/// `istat` of `f`'s record mentions `what`.
fn assert_istat_says(c: &Corpus, f: &caseload_corpus::manifest::FileEntry, what: &str) {
    let out = Command::new("istat")
        .args(["-o", &c.start_sector().to_string()])
        .arg(c.image())
        .arg(f.mft_record.expect("record").to_string())
        .output()
        .expect("run istat");
    assert!(
        text(&out).contains(what),
        "istat {}: {}",
        f.path,
        text(&out)
    );
}

/// Mount read-only with ntfs-3g (FUSE) and read every allocated file.
fn check_mount(test: &str, c: &Corpus) {
    let root = unsafe { libc::geteuid() } == 0;
    if !root
        || !std::path::Path::new("/dev/fuse").exists()
        || !crate::common::have_tool(test, "ntfs-3g")
    {
        eprintln!("SKIPPED {test} (mount part): needs root, /dev/fuse and ntfs-3g");
        return;
    }
    let part = c.partition_file();
    let mnt = tempfile::tempdir().expect("mount point");
    let out = Command::new("ntfs-3g")
        .args(["-o", "ro"])
        .arg(&part)
        .arg(mnt.path())
        .output()
        .expect("run ntfs-3g");
    if !out.status.success() {
        let t = text(&out);
        // A container without FUSE access: say so, the rest still ran.
        // ntfs-3g's own complaints about a volume name NTFS; anything about
        // FUSE or permissions is the machine, not the corpus.
        let machine = ["fuse", "FUSE", "Permission denied", "not permitted"]
            .iter()
            .any(|m| t.contains(m));
        if machine && !t.contains("NTFS") {
            eprintln!("SKIPPED {test} (mount part): {t}");
            return;
        }
        panic!("ntfs-3g mount failed:\n{t}");
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(mnt.path().to_path_buf());
    let mut read = 0;
    for f in c.live_files().filter(|f| f.stream.is_none()) {
        let data = std::fs::read(mnt.path().join(&f.path))
            .unwrap_or_else(|e| panic!("reading {} through ntfs-3g: {e}", f.path));
        assert_eq!(Some(md5_hex(&data)), f.md5, "{} through ntfs-3g", f.path);
        read += 1;
    }
    assert!(read > 20);
}

/// caseload's filesystem and file-hash stages list the manifest's files
/// with their sizes and hashes.
fn check_caseload_walk(c: &Corpus) {
    let case = tempfile::tempdir().unwrap();
    crate::common::run_ok(&mut crate::common::stage_run(
        "filesystem,file-hash",
        &c.image(),
        case.path(),
        &[],
    ));
    let conn = rusqlite::Connection::open(case.path().join("case.sqlite")).unwrap();
    let mut stmt = conn
        .prepare("SELECT path, allocated, size, md5, kind FROM files WHERE kind IN ('file', 'directory')")
        .unwrap();
    let mut rows: BTreeMap<(String, bool), (i64, Option<String>, String)> = BTreeMap::new();
    let mut iter = stmt.query([]).unwrap();
    while let Some(r) = iter.next().unwrap() {
        let path: String = r.get(0).unwrap();
        let allocated: bool = r.get(1).unwrap();
        if is_system(&path) {
            continue;
        }
        rows.insert(
            (path, !allocated),
            (r.get(2).unwrap(), r.get(3).unwrap(), r.get(4).unwrap()),
        );
    }
    for f in &c.manifest.files {
        let (size, md5, kind) = rows
            .get(&(f.tsk_path.clone(), f.deleted))
            .unwrap_or_else(|| panic!("{} (deleted={}) not walked", f.tsk_path, f.deleted));
        match f.kind {
            EntryKind::Directory => assert_eq!(kind, "directory", "{}", f.path),
            // A symbolic link is a file whose content is its target.
            EntryKind::File | EntryKind::Symlink => {
                assert_eq!(*size as u64, f.size, "{}", f.path);
                if f.intact {
                    assert_eq!(md5, &f.md5, "{}", f.path);
                }
            }
        }
    }
    assert_eq!(rows.len(), c.manifest.files.len(), "files walked");
    let errors: i64 = conn
        .query_row("SELECT count(*) FROM processing_errors", [], |r| r.get(0))
        .unwrap();
    assert_eq!(errors, 0, "processing errors on a clean NTFS corpus");
}

fn run_all(test: &str, args: &[&str]) -> Option<Corpus> {
    if !have_tools(
        test,
        &[
            "fsstat", "fls", "icat", "istat", "ntfsfix", "ntfsinfo", "ntfsls", "ntfscat",
        ],
    ) {
        return None;
    }
    let mut a = vec!["--fs", "ntfs", "--decoys", "100"];
    a.extend_from_slice(args);
    let c = make(&a);
    assert_eq!(c.manifest.filesystem.fs_type.name(), "NTFS");
    check_fsstat(&c);
    check_fls_icat(&c);
    check_istat(&c);
    check_ntfs3g(&c);
    check_caseload_walk(&c);
    Some(c)
}

#[test]
fn ntfs_workstation_matches_oracles() {
    let test = "ntfs_workstation_matches_oracles";
    if let Some(c) = run_all(test, &["--size", "96MiB", "--seed", "7"]) {
        let s = &c.manifest.summary;
        assert!(s.deleted_files > 0 && s.fragmented_files > 0, "{s:?}");
        // Compressed files: TSK sees the attribute as compressed (icat
        // already returned their MD5s through its decoder).
        assert!(s.compressed_files > 0, "{s:?}");
        let f = c
            .live_files()
            .find(|f| f.compressed)
            .expect("a compressed file");
        assert_istat_says(&c, f, "Non-Resident, Compressed");
        check_mount(test, &c);
    }
}

#[test]
fn ntfs_suspect_gpt_with_deleted_folders_matches_oracles() {
    let test = "ntfs_suspect_gpt_with_deleted_folders_matches_oracles";
    if let Some(c) = run_all(
        test,
        &[
            "--size",
            "160MiB",
            "--seed",
            "12",
            "--profile",
            "suspect",
            "--partition-table",
            "gpt",
        ],
    ) {
        let s = &c.manifest.summary;
        assert!(s.deleted_directories > 0, "{s:?}");
        // A sparse container: TSK sees the attribute as sparse (icat and
        // ntfscat returned its MD5, holes read as zeros).
        assert!(s.sparse_files > 0, "{s:?}");
        let f = c.live_files().find(|f| f.sparse).expect("a sparse file");
        assert_istat_says(&c, f, "Non-Resident, Sparse");
        assert!(c.manifest.files.iter().any(|f| f.in_deleted_dir));
        let ntfs = c.manifest.filesystem.ntfs.as_ref().unwrap();
        assert!(ntfs.mft_fragments >= 2, "$MFT in one piece: {ntfs:?}");
    }
}

#[test]
fn ntfs_output_does_not_depend_on_threads() {
    let runs: Vec<_> = ["1", "2"]
        .iter()
        .map(|threads| {
            let dir = tempfile::tempdir().unwrap();
            let args = [
                "--fs",
                "ntfs",
                "--size",
                "80MiB",
                "--seed",
                "3",
                "--threads",
                threads,
            ];
            let (_, m) = crate::common::corpus(dir.path(), &args);
            m
        })
        .collect();
    assert_eq!(runs[0].image.md5, runs[1].image.md5);
    assert_eq!(runs[0].files, runs[1].files);
}

#[test]
fn ntfs_refuses_bad_options() {
    for (args, want) in [
        (vec!["--size", "40MiB", "--seed", "1"], "minimum"),
        (
            vec!["--size", "1GiB", "--seed", "1", "--fat", "fat32"],
            "FAT type",
        ),
        (
            vec![
                "--size",
                "96MiB",
                "--seed",
                "1",
                "--fill",
                "0.5",
                "--target-e01-ratio",
                "4",
            ],
            "cannot be used with",
        ),
        (
            vec![
                "--size",
                "96MiB",
                "--seed",
                "1",
                "--target-e01-ratio",
                "0.5",
            ],
            "at least 1",
        ),
        (
            vec!["--size", "96MiB", "--seed", "1", "--digests", "md5,crc32"],
            "unknown digest",
        ),
        // Random free space caps the ratio: refused with the range.
        (
            vec![
                "--size",
                "96MiB",
                "--seed",
                "1",
                "--target-e01-ratio",
                "500",
            ],
            "cannot be reached",
        ),
        // No size scale gives a million files per GiB (pool members and
        // the system files' floor): refused with the range.
        (
            vec![
                "--size",
                "96MiB",
                "--seed",
                "1",
                "--files-per-gib-used",
                "1000000",
            ],
            "cannot be reached",
        ),
        (
            vec![
                "--size",
                "96MiB",
                "--seed",
                "1",
                "--files-per-gib-used",
                "3000",
                "--size-scale",
                "2",
            ],
            "cannot be used with",
        ),
        (
            vec!["--size", "96MiB", "--seed", "1", "--size-scale", "0"],
            "--size-scale",
        ),
        (
            vec!["--size", "96MiB", "--seed", "1", "--mail-share", "0.95"],
            "--mail-share",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = crate::common::caseload()
            .args(["corpus", "--fs", "ntfs", "--out"])
            .arg(dir.path())
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        let t = text(&out);
        assert!(t.contains(want), "{args:?}: {t}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
}

/// caseload's stages on an NTFS corpus: planted keywords found exactly in
/// the manifest's files (index), every intact contiguous carvable item
/// carved whole at its offset (carve), exactly the planted known and
/// notable files flagged (kff; the system folders' files are all known).
#[test]
fn ntfs_stages_agree_with_the_manifest() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("c");
    let (image, manifest) =
        crate::common::corpus(&dir, &["--fs", "ntfs", "--size", "96MiB", "--seed", "21"]);
    let known = format!("known={}", dir.join("NSRLFile.txt").display());
    let notable = format!("notable={}", dir.join("notable.md5").display());
    let case = crate::index_support::run(
        &image,
        "filesystem,file-hash,index,carve,kff",
        "2",
        &["--hashset", &known, "--hashset", &notable],
    );
    crate::index_corpus::check_keywords(&manifest, case.path(), "NTFS 96MiB");
    // LZNT1-compressed files are decoded and indexed, not left out.
    let words = crate::index_support::search(case.path(), "[a-z]{4,}", true);
    let db = rusqlite::Connection::open(case.path().join("case.sqlite")).unwrap();
    let mut compressed = 0;
    for f in manifest
        .files
        .iter()
        .filter(|f| f.compressed && f.allocated)
    {
        let id: i64 = db
            .query_row(
                "SELECT id FROM files WHERE path = ?1 AND allocated",
                [&f.tsk_path],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            words.iter().any(|h| h.kind == "file" && h.id == id),
            "compressed {} not indexed",
            f.path
        );
        compressed += 1;
    }
    assert!(compressed > 0, "no compressed file in the corpus");

    let conn = rusqlite::Connection::open(case.path().join("case.sqlite")).unwrap();
    let mut stmt = conn
        .prepare("SELECT path, allocated, kff FROM files WHERE kind = 'file'")
        .unwrap();
    let kff: BTreeMap<(String, bool), Option<String>> = stmt
        .query_map([], |r| {
            Ok((
                (r.get::<_, String>(0)?, !r.get::<_, bool>(1)?),
                r.get::<_, Option<String>>(2)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let (mut known_n, mut notable_n) = (0, 0);
    for f in manifest
        .files
        .iter()
        .filter(|f| f.kind == EntryKind::File && f.intact && f.size > 0)
    {
        let got = kff
            .get(&(f.tsk_path.clone(), f.deleted))
            .unwrap_or_else(|| panic!("{} not in the files table", f.tsk_path));
        let want = if f.notable {
            Some("notable")
        } else if f.known {
            Some("known")
        } else {
            None
        };
        assert_eq!(got.as_deref(), want, "kff verdict of {}", f.path);
        known_n += usize::from(want == Some("known"));
        notable_n += usize::from(want == Some("notable"));
    }
    assert!(
        known_n > 20 && notable_n > 0,
        "known {known_n}, notable {notable_n}"
    );

    let mut stmt = conn
        .prepare("SELECT offset, md5 FROM carved_items")
        .unwrap();
    let carved: std::collections::BTreeSet<(i64, Option<String>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let contiguous: Vec<_> = manifest.carvable.iter().filter(|c| c.contiguous).collect();
    assert!(contiguous.len() >= 5, "{} carvable items", contiguous.len());
    for item in contiguous {
        assert!(
            carved.contains(&(item.offset as i64, Some(item.md5.clone()))),
            "{:?} item at {} ({} bytes) not carved whole",
            item.content_type,
            item.offset,
            item.length
        );
    }
}

/// The workstation default: an NTFS disk whose E01 is about 4:1 smaller,
/// as the FTK study's Windows 7 disk (240 GB raw, about 60 GB as E01); the
/// ratio is measured on the E01 written, and a stated target moves it.
#[test]
fn the_default_workstation_is_ntfs_at_a_4_to_1_e01() {
    for (target, args) in [(4.0, vec![]), (2.5, vec!["--target-e01-ratio", "2.5"])] {
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("c");
        let mut all = vec!["--size", "256MiB", "--seed", "8", "--format", "dd,e01"];
        all.extend(&args);
        crate::common::run_ok(
            crate::common::caseload()
                .arg("corpus")
                .args(&all)
                .args(["--decoys", "10", "--out"])
                .arg(&dir),
        );
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(m["filesystem"]["type"], "NTFS", "{args:?}");
        let fill = m["options"]["profile"]["fill"].as_f64().unwrap();
        assert_eq!(m["options"]["profile"]["target_e01_ratio"], target);
        let raw = std::fs::metadata(dir.join("image.dd")).unwrap().len() as f64;
        let e01 = std::fs::metadata(dir.join("image.E01")).unwrap().len() as f64;
        let ratio = raw / e01;
        eprintln!("target {target}: fill {fill}, E01 ratio {ratio:.2}");
        assert!(
            (ratio / target - 1.0).abs() < 0.2,
            "target {target}:1, the E01 is {ratio:.2}:1 (fill {fill})"
        );
        // Files per GiB of used space stay in the range of Windows system
        // volumes (2,000-5,000).
        let used_gib = m["summary"]["content_bytes"].as_f64().unwrap() / (1u64 << 30) as f64;
        let per_gib = m["summary"]["files"].as_f64().unwrap() / used_gib;
        assert!(
            (1500.0..6000.0).contains(&per_gib),
            "{per_gib} files per GiB used"
        );
    }
}

/// `--digests` chooses the image's digests besides MD5: what is asked for
/// is the image's real digest, what is not is absent from the manifest.
#[test]
fn image_digests_are_the_ones_asked_for() {
    use sha2::Digest;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("c");
    let (image, m) = crate::common::corpus(
        &dir,
        &[
            "--size",
            "96MiB",
            "--seed",
            "3",
            "--fs",
            "ntfs",
            "--digests",
            "md5,sha256",
        ],
    );
    let bytes = std::fs::read(&image).unwrap();
    assert_eq!(m.image.md5, md5_hex(&bytes));
    let want: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(m.image.sha256.as_deref(), Some(want.as_str()));
    assert_eq!(m.image.sha1, None);
}

/// Live files and allocated GiB of a corpus, as `fsstat` counts used
/// clusters.
fn density(m: &serde_json::Value) -> (f64, f64) {
    let fs = &m["filesystem"];
    let used = (fs["clusters"].as_f64().unwrap() - fs["free_clusters"].as_f64().unwrap())
        * fs["cluster_size"].as_f64().unwrap()
        / (1u64 << 30) as f64;
    let live = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "file" && f["deleted"] == false && f.get("stream").is_none())
        .count() as f64;
    (live, used)
}

/// `--files-per-gib-used` gives that many live files per GiB of allocated
/// space (measured from the manifest's file list and the file system's
/// free clusters, not from the planner's prediction), and `--mail-share`
/// brings more mail stores and attachments; the profile recorded in the
/// manifest says what was chosen.
#[test]
fn file_density_and_mail_share_are_what_was_asked() {
    let make = |extra: &[&str]| {
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("c");
        crate::common::run_ok(
            crate::common::caseload()
                .arg("corpus")
                .args(["--size", "256MiB", "--seed", "8", "--fs", "ntfs"])
                .args(["--fill", "0.3", "--decoys", "0", "--format", "dd"])
                .args(extra)
                .arg("--out")
                .arg(&dir),
        );
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        m
    };
    let mut scales = Vec::new();
    for target in [2500.0, 6000.0] {
        let m = make(&["--files-per-gib-used", &target.to_string()]);
        let (live, used) = density(&m);
        let got = live / used;
        eprintln!("target {target}: {live} live files in {used:.3} GiB used: {got:.0} per GiB");
        assert!(
            (got / target - 1.0).abs() < 0.15,
            "asked {target} files per GiB used, got {got:.0}"
        );
        assert_eq!(m["options"]["profile"]["files_per_gib_used"], target);
        scales.push(m["options"]["profile"]["size_scale"].as_f64().unwrap());
    }
    assert!(scales[0] > 1.0 && scales[1] < 1.0, "{scales:?}");

    let mail_stores = |m: &serde_json::Value| {
        m["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["kind"] == "file" && (f["type"] == "mbox" || f["type"] == "eml"))
            .count()
    };
    let plain = make(&[]);
    let mail = make(&["--mail-share", "0.3"]);
    assert_eq!(mail["options"]["profile"]["mail_share"], 0.3);
    let (a0, a1) = (
        plain["summary"]["attachments"].as_u64().unwrap(),
        mail["summary"]["attachments"].as_u64().unwrap(),
    );
    let listed: u64 = mail["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["attachments"].as_array().map_or(0, |a| a.len() as u64))
        .sum();
    assert_eq!(a1, listed, "summary.attachments counts the listed ones");
    eprintln!(
        "mail stores {} -> {}, attachments {a0} -> {a1}",
        mail_stores(&plain),
        mail_stores(&mail)
    );
    assert!(mail_stores(&mail) > mail_stores(&plain) * 3 / 2);
    assert!(a1 > a0 * 3 / 2);
    // Messages: at least one per mail store, more with more mail.
    let messages = |m: &serde_json::Value| m["summary"]["messages"].as_u64().unwrap();
    assert!(messages(&mail) >= mail_stores(&mail) as u64);
    assert!(
        messages(&mail) > messages(&plain) * 3 / 2,
        "{} {}",
        messages(&plain),
        messages(&mail)
    );
}
