//! Debian's `forensics-samples` images (one tree of real pictures, audio,
//! video and documents copied onto each file system, then every folder
//! whose name ends in 2 deleted) through `filesystem,file-hash`, held
//! against The Sleuth Kit: `fls -r -m` line by line and `icat`'s MD5 of
//! every allocated file. Skipped, with a notice, where the packages
//! (`forensics-samples-*`) or TSK are not installed.
//!
//! Compared for every name TSK lists: the inode, the size, the four times
//! and the metadata part of the mode (type and permissions); caseload lists
//! nothing TSK does not. Where caseload differs on purpose (the crate docs
//! of `caseload-fs` say why):
//! * NTFS: TSK adds a `($FILE_NAME)` line per name with that attribute's
//!   times; caseload's bodyfile has the `$STANDARD_INFORMATION` line only.
//!   A time of 0 is absent in caseload (TSK prints 3373865674). Where
//!   `$STANDARD_INFORMATION` is the short NTFS 1.2 form (no owner id), TSK
//!   reads its UID past the attribute's end, from the next attribute's
//!   type (48); caseload gives 0. (UID and GID are compared on ext only.)
//! * FAT: orphans (deleted entries in clusters no folder reaches) are not
//!   searched, so `$OrphanFiles` is empty.
//! * exFAT: orphan entry sets (found in free clusters) keep the times their
//!   entries hold, where TSK gives 0, and their attribute bits' permissions;
//!   TSK's orphan `$EMPTY_VOLUME_LABEL` is not listed.
//! * The first character of the mode (the type a directory entry gives)
//!   is not compared: TSK prints `-` for a deleted name's.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SAMPLES: &str = "/usr/share/forensics-samples";

/// A bodyfile line's fields, keyed by (path, inode).
type Body = BTreeMap<(String, String), Vec<String>>;

/// The decompressed image `fs.<name>`, or `None` (said) where the package
/// or a tool is missing.
pub(crate) fn sample(test: &str, name: &str, dir: &Path) -> Option<PathBuf> {
    let packed = Path::new(SAMPLES).join(format!("fs.{name}.xz"));
    if !packed.is_file() {
        eprintln!(
            "{test}: SKIPPED: {} absent (install forensics-samples-{name})",
            packed.display()
        );
        return None;
    }
    for tool in ["xz", "fls", "icat", "mmls"] {
        if !common::have_tool(test, tool) {
            return None;
        }
    }
    let out = dir.join(format!("fs.{name}"));
    let data = std::process::Command::new("xz")
        .arg("-dc")
        .arg(&packed)
        .output()
        .unwrap();
    assert!(data.status.success(), "xz -dc {}", packed.display());
    std::fs::write(&out, data.stdout).unwrap();
    Some(out)
}

fn parse(text: &str, tsk: bool) -> Body {
    text.lines()
        .map(|l| {
            let mut f: Vec<String> = l.split('|').map(str::to_string).collect();
            assert_eq!(f.len(), 11, "not a bodyfile line: {l}");
            if tsk {
                // One spelling of "deleted" (TSK says when the metadata
                // was reused; caseload's name is deleted either way).
                f[1] = f[1].replace(" (deleted-realloc)", " (deleted)");
            }
            ((f[1].clone(), f[2].clone()), f)
        })
        .collect()
}

/// TSK's bodyfile of every partition `mmls` lists, with each partition's
/// sector offset per line.
fn tsk_bodyfile(image: &Path) -> Vec<(u64, Body)> {
    let mmls = std::process::Command::new("mmls")
        .arg(image)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&mmls.stdout);
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // `002:  000:000   0000002048   ...   Linux (0x83)`
        if f.len() < 5 || !f[1].contains(':') || f[1].starts_with("Meta") {
            continue;
        }
        let Ok(start) = f[2].parse::<u64>() else {
            continue;
        };
        let fls = std::process::Command::new("fls")
            .args(["-r", "-m", "/", "-o", &start.to_string()])
            .arg(image)
            .output()
            .unwrap();
        if !fls.status.success() {
            // TSK does not know this one either (btrfs): nothing to hold
            // caseload to.
            continue;
        }
        out.push((start, parse(&String::from_utf8_lossy(&fls.stdout), true)));
    }
    out
}

fn icat_md5(image: &Path, sector: u64, inode: &str) -> String {
    let out = std::process::Command::new("icat")
        .args(["-o", &sector.to_string()])
        .arg(image)
        .arg(inode)
        .output()
        .unwrap();
    assert!(out.status.success(), "icat {inode}");
    common::md5_hex(&out.stdout)
}

/// What TSK lists that caseload leaves out on purpose (module docs).
fn left_out_on_purpose(fs: &str, path: &str) -> bool {
    match fs {
        "ntfs" => path.contains(" ($FILE_NAME)"),
        "vfat" => path.starts_with("/$OrphanFiles/"),
        "exfat" => path.starts_with("/$OrphanFiles/$EMPTY_VOLUME_LABEL"),
        // The multiple-partition sample's exFAT says it is 202,752 sectors
        // long in a partition of 81,920 (it was made on a larger device):
        // TSK walks it to the length it says, into the next partition, and
        // numbers its virtual files after that; caseload keeps to the
        // partition.
        "exfat-overlong" => {
            path.starts_with("/$OrphanFiles") || ["/$MBR", "/$FAT1", "/$FAT2"].contains(&path)
        }
        _ => false,
    }
}

/// Check one image: every partition TSK reads, against caseload's walk of
/// the whole disk.
fn check(test: &str, name: &str, fs_of: impl Fn(u64) -> &'static str) {
    let dir = tempfile::tempdir().unwrap();
    let Some(image) = sample(test, name, dir.path()) else {
        return;
    };
    let case = dir.path().join("case");
    std::fs::create_dir_all(&case).unwrap();
    common::run_ok(&mut common::stage_run(
        "filesystem,file-hash",
        &image,
        &case,
        &[],
    ));
    let ours = parse(
        &String::from_utf8(common::export(&case, "bodyfile", &[])).unwrap(),
        false,
    );
    let tsk = tsk_bodyfile(&image);
    assert!(!tsk.is_empty(), "{name}: TSK read no partition");
    let mut hashed = 0;
    let mut listed = 0;
    let mut theirs_all = std::collections::BTreeSet::new();
    for (sector, theirs) in &tsk {
        let fs = fs_of(*sector);
        for (key, t) in theirs {
            let (path, inode) = key;
            theirs_all.insert(key.clone());
            if left_out_on_purpose(fs, path) {
                continue;
            }
            let o = ours
                .get(key)
                .unwrap_or_else(|| panic!("{name}@{sector}: `{path}` (inode {inode}) not listed"));
            listed += 1;
            let orphan = path.starts_with("/$OrphanFiles/");
            assert_eq!(o[6], t[6], "{name}@{sector}: size of {path}");
            if fs.starts_with("ext") {
                assert_eq!(o[4..6], t[4..6], "{name}@{sector}: UID and GID of {path}");
            }
            if !orphan {
                assert_eq!(&o[3][1..], &t[3][1..], "{name}@{sector}: mode of {path}");
                for (i, what) in [(7, "atime"), (8, "mtime"), (9, "ctime"), (10, "crtime")] {
                    // An NTFS time of 0 is absent in caseload.
                    if fs == "ntfs" && t[i] == "3373865674" && o[i] == "0" {
                        continue;
                    }
                    assert_eq!(o[i], t[i], "{name}@{sector}: {what} of {path}");
                }
            }
            let regular = t[3].starts_with("r/r") || t[3].starts_with("-/r");
            if regular && !path.ends_with(" (deleted)") && !path.contains(':') && !orphan {
                assert_eq!(
                    o[0],
                    icat_md5(&image, *sector, inode),
                    "{name}@{sector}: MD5 of {path} against icat"
                );
                hashed += 1;
            }
        }
    }
    for key in ours.keys() {
        if tsk
            .iter()
            .any(|(sector, _)| left_out_on_purpose(fs_of(*sector), &key.0))
        {
            continue;
        }
        assert!(
            theirs_all.contains(key),
            "{name}: caseload lists {key:?}, TSK does not"
        );
    }
    assert!(hashed > 10, "{name}: only {hashed} files hashed");
    eprintln!("{test}: {name}: {listed} names as TSK lists them, {hashed} MD5s as icat's");
}

#[test]
fn forensics_samples_exfat_walks_as_tsk_walks_it() {
    check(
        "forensics_samples_exfat_walks_as_tsk_walks_it",
        "exfat",
        |_| "exfat",
    );
}

#[test]
fn forensics_samples_vfat_walks_as_tsk_walks_it() {
    check(
        "forensics_samples_vfat_walks_as_tsk_walks_it",
        "vfat",
        |_| "vfat",
    );
}

#[test]
fn forensics_samples_ext2_walks_as_tsk_walks_it() {
    check(
        "forensics_samples_ext2_walks_as_tsk_walks_it",
        "ext2",
        |_| "ext2",
    );
}

#[test]
fn forensics_samples_ext4_walks_as_tsk_walks_it() {
    check(
        "forensics_samples_ext4_walks_as_tsk_walks_it",
        "ext4",
        |_| "ext4",
    );
}

/// Four partitions: btrfs (which neither caseload nor TSK parses), ext4,
/// exFAT and NTFS.
#[test]
fn forensics_samples_multiple_walks_as_tsk_walks_it() {
    check(
        "forensics_samples_multiple_walks_as_tsk_walks_it",
        "multiple",
        |sector| match sector {
            227_328 => "ext4",
            309_248 => "exfat-overlong",
            _ => "ntfs",
        },
    );
}

#[test]
fn forensics_samples_ntfs_walks_as_tsk_walks_it() {
    check(
        "forensics_samples_ntfs_walks_as_tsk_walks_it",
        "ntfs",
        |_| "ntfs",
    );
}

/// `sqlite3 DB SQL`'s output lines.
pub(crate) fn sql(db: &Path, query: &str) -> Vec<String> {
    let out = std::process::Command::new("sqlite3")
        .arg(db)
        .arg(query)
        .output()
        .unwrap();
    assert!(out.status.success(), "sqlite3 {query}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The autopsy profile's `tsk_fs_info.fs_type` and each allocated
/// regular file's mode, UID and GID in `tsk_files` against `tsk_loaddb`'s.
fn check_autopsy(test: &str, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let Some(image) = sample(test, name, dir.path()) else {
        return;
    };
    if !common::have_tool(test, "tsk_loaddb") || !common::have_tool(test, "sqlite3") {
        return;
    }
    let theirs = dir.path().join("tsk.db");
    let out = std::process::Command::new("tsk_loaddb")
        .arg("-d")
        .arg(&theirs)
        .arg(&image)
        .output()
        .unwrap();
    assert!(out.status.success(), "tsk_loaddb on {name}");
    let case = dir.path().join("case");
    std::fs::create_dir_all(&case).unwrap();
    common::run_ok(
        common::stage_run("filesystem", &image, &case, &[]).args(["--profile", "autopsy"]),
    );
    let ours = case.join("case.sqlite");
    let fs_type = "SELECT fs_type FROM tsk_fs_info WHERE fs_type <> 0 ORDER BY img_offset";
    assert_eq!(
        sql(&ours, fs_type),
        sql(&theirs, fs_type),
        "{name}: fs_type"
    );
    // NTFS: TSK reads the owner id past the end of a short (NTFS 1.2)
    // `$STANDARD_INFORMATION`, from the next attribute's type (48 for
    // `$FILE_NAME`); caseload stops at the attribute's end and gives 0.
    let owner = if name == "ntfs" { "0, 0" } else { "uid, gid" };
    let modes = format!(
        "SELECT parent_path || name, mode, {owner} FROM tsk_files
         WHERE meta_type = 1 AND dir_flags = 1 AND type = 0 AND name NOT LIKE '$%'
         ORDER BY 1"
    );
    let modes = modes.as_str();
    let (o, t) = (sql(&ours, modes), sql(&theirs, modes));
    assert!(t.len() > 10, "{name}: tsk_loaddb stored {} files", t.len());
    assert_eq!(o, t, "{name}: mode, uid, gid of allocated regular files");
    assert_eq!(
        sql(&ours, ALLOCATED_FLAGS),
        sql(&theirs, ALLOCATED_FLAGS),
        "{name}: names, attribute types, meta flags and has_layout of allocated files"
    );
}

/// Allocated regular files (and their slack) as `tsk_files` holds them:
/// name, attribute type, meta flags and `has_layout`, as tsk_loaddb
/// stores them per file system (system files and unallocated space left
/// out).
pub(crate) const ALLOCATED_FLAGS: &str =
    "SELECT parent_path || name, type, attr_type, meta_flags, ifnull(has_layout, 'none')
     FROM tsk_files WHERE meta_type = 1 AND dir_flags = 1 AND type IN (0, 7)
     AND name NOT LIKE '$%' AND parent_path NOT LIKE '%/$%' ORDER BY 1, 2";

#[test]
fn autopsy_profile_stores_tsk_s_types_and_modes_on_forensics_samples() {
    let test = "autopsy_profile_stores_tsk_s_types_and_modes_on_forensics_samples";
    for name in ["exfat", "vfat", "ntfs", "ext2", "ext4"] {
        check_autopsy(test, name);
    }
}

#[test]
fn a_file_system_caseload_does_not_parse_is_reported_as_such() {
    // The btrfs partition of the multiple-partition sample.
    let test = "a_file_system_caseload_does_not_parse_is_reported_as_such";
    let dir = tempfile::tempdir().unwrap();
    let Some(image) = sample(test, "multiple", dir.path()) else {
        return;
    };
    if !common::have_tool(test, "sqlite3") {
        return;
    }
    let case = dir.path().join("case");
    std::fs::create_dir_all(&case).unwrap();
    common::run_ok(&mut common::stage_run("filesystem", &image, &case, &[]));
    let db = case.join("case.sqlite");
    assert_eq!(
        sql(&db, "SELECT fs_type, parsed FROM volumes ORDER BY slot"),
        ["Btrfs|0", "Ext4|1", "exFAT|1", "NTFS|1"]
    );
    let warned = sql(
        &db,
        "SELECT message FROM processing_errors WHERE severity = 'warning' AND message LIKE '%not parsed%'",
    );
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].starts_with("Btrfs at byte 1048576"), "{warned:?}");
}
