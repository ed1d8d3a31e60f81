//! corpus-gen against file-system oracles: `fsck.fat -n` finds no errors,
//! `mmls` puts the partition where the manifest says, `fls -r -p` lists
//! exactly the manifest's allocated and deleted entries, and `icat` returns
//! the manifest's MD5 for every allocated file and every deleted file the
//! manifest calls intact. Three small disks cover FAT32/MBR, FAT16 (the
//! 32 MiB minimum) and a forced FAT12 on GPT with the deleted-heavy profile.

use crate::corpus_support;

use caseload_corpus::manifest::EntryKind;
use corpus_support::{Corpus, fls, have_tools, icat, make, md5_hex};
use std::process::Command;

fn check_fsck(c: &Corpus) {
    let part = c.partition_file();
    let out = Command::new("fsck.fat")
        .arg("-n")
        .arg(&part)
        .output()
        .expect("run fsck.fat");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "fsck.fat -n reported problems:\n{text}"
    );
    // fsck.fat prints its findings before the summary line; a clean volume
    // prints only the banner and "N files, used/total clusters".
    let findings: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("fsck.fat ") && !l.contains(" files, ") && !l.trim().is_empty())
        .collect();
    assert!(findings.is_empty(), "fsck.fat -n findings: {findings:?}");
    let _ = std::fs::remove_file(part);
}

fn check_mmls(c: &Corpus) {
    let out = Command::new("mmls")
        .arg(c.image())
        .output()
        .expect("run mmls");
    let text = String::from_utf8_lossy(&out.stdout);
    let start = format!("{:010}", c.start_sector());
    let fat = c.manifest.filesystem.fs_type.name();
    let line = text
        .lines()
        .find(|l| l.contains(&start) && !l.contains("Unallocated") && !l.contains("Meta"))
        .unwrap_or_else(|| panic!("mmls shows no partition at sector {start}:\n{text}"));
    if c.manifest.partition_table.kind == caseload_corpus::TableKind::Mbr {
        assert!(line.contains(fat), "mmls type {line} is not {fat}");
    } else {
        assert!(text.contains("GUID Partition Table"), "not GPT:\n{text}");
    }
}

/// fls lists exactly the manifest's entries, with the right type and
/// deleted flag; icat returns the manifest's bytes for intact files.
fn check_fls_icat(c: &Corpus) {
    let listed = fls(c);
    let mut expected = std::collections::HashMap::new();
    for f in &c.manifest.files {
        expected.insert((f.tsk_path.clone(), f.deleted), f);
    }
    let missing: Vec<_> = expected
        .keys()
        .filter(|k| !listed.contains_key(*k))
        .collect();
    let extra: Vec<_> = listed
        .keys()
        .filter(|k| !expected.contains_key(*k))
        .collect();
    assert!(missing.is_empty(), "in manifest, not in fls: {missing:?}");
    assert!(extra.is_empty(), "in fls, not in manifest: {extra:?}");
    let (mut checked, mut deleted_checked) = (0, 0);
    for (key, f) in &expected {
        let e = &listed[key];
        let want = if f.kind == EntryKind::Directory {
            "d/d"
        } else {
            "r/r"
        };
        assert_eq!(e.kind, want, "{}", f.path);
        if f.kind != EntryKind::File || !f.intact {
            continue;
        }
        let data = icat(c, &e.inode);
        assert_eq!(
            md5_hex(&data),
            f.md5.clone().unwrap_or_default(),
            "icat MD5 of {} ({} bytes, deleted={})",
            f.path,
            f.size,
            f.deleted
        );
        checked += 1;
        if f.deleted {
            deleted_checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} files checked");
    assert!(deleted_checked > 0, "no intact deleted file checked");
}

/// The manifest's extents agree with its hashes for every intact file
/// (what an examiner would carve by hand).
fn check_extents(c: &Corpus) {
    for f in c
        .manifest
        .files
        .iter()
        .filter(|f| f.kind == EntryKind::File && f.intact)
    {
        assert_eq!(Some(md5_hex(&c.content(f))), f.md5, "{}", f.path);
    }
    for item in &c.manifest.carvable {
        if item.contiguous {
            assert_eq!(
                md5_hex(&c.read(item.offset, item.length)),
                item.md5,
                "carvable at {}",
                item.offset
            );
        }
    }
}

fn run_all(test: &str, args: &[&str], fat: &str) {
    if !have_tools(test, &["fsck.fat", "mmls", "fls", "icat"]) {
        return;
    }
    let c = make(args);
    assert_eq!(c.manifest.filesystem.fs_type.name(), fat);
    check_mmls(&c);
    check_fsck(&c);
    check_fls_icat(&c);
    check_extents(&c);
}

#[test]
fn fat32_mbr_workstation_matches_oracles() {
    run_all(
        "fat32_mbr_workstation_matches_oracles",
        &["--size", "64MiB", "--seed", "7", "--decoys", "100"],
        "FAT32",
    );
}

#[test]
fn fat16_minimum_size_suspect_matches_oracles() {
    run_all(
        "fat16_minimum_size_suspect_matches_oracles",
        &[
            "--size",
            "32MiB",
            "--seed",
            "3",
            "--profile",
            "suspect",
            "--decoys",
            "100",
        ],
        "FAT16",
    );
}

#[test]
fn fat12_gpt_suspect_matches_oracles() {
    let c = "fat12_gpt_suspect_matches_oracles";
    run_all(
        c,
        &[
            "--size",
            "40MiB",
            "--seed",
            "5",
            "--fat",
            "fat12",
            "--partition-table",
            "gpt",
            "--profile",
            "suspect",
            "--decoys",
            "100",
        ],
        "FAT12",
    );
}

#[test]
fn deleted_directories_and_fragments_are_listed() {
    if !have_tools(
        "deleted_directories_and_fragments_are_listed",
        &["fls", "icat"],
    ) {
        return;
    }
    // A deleted-heavy disk: deleted folders (recursed into by fls), files
    // inside them, fragmented live files, overwritten deleted files.
    let c = make(&[
        "--size",
        "96MiB",
        "--seed",
        "11",
        "--profile",
        "suspect",
        "--decoys",
        "100",
    ]);
    let s = &c.manifest.summary;
    assert!(s.deleted_directories > 0, "{s:?}");
    assert!(s.fragmented_files > 0, "{s:?}");
    assert!(
        c.manifest.files.iter().any(|f| f.in_deleted_dir),
        "no file inside a deleted folder"
    );
    assert!(
        c.manifest.files.iter().any(|f| f.overwritten),
        "no overwritten deleted file"
    );
    check_fls_icat(&c);
    // A fragmented live file reads back whole through the FAT chain.
    let listed = fls(&c);
    let frag = c
        .live_files()
        .find(|f| f.fragmented)
        .expect("a fragmented live file");
    let e = &listed[&(frag.tsk_path.clone(), false)];
    assert_eq!(Some(md5_hex(&icat(&c, &e.inode))), frag.md5);
    // An overwritten deleted file does not read back as itself.
    if let Some(ow) = c
        .manifest
        .files
        .iter()
        .find(|f| f.overwritten && f.size > 0)
    {
        assert!(!ow.intact);
        let e = &listed[&(ow.tsk_path.clone(), true)];
        assert_ne!(Some(md5_hex(&icat(&c, &e.inode))), ow.md5, "{}", ow.path);
    }
}
