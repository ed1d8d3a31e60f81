//! APFS corpora against independent oracles: apfsck (apfsprogs), The
//! Sleuth Kit's `pstat`, `fls` and `icat`, and libfsapfs's `fsapfsinfo`.
//! A missing tool prints `SKIPPED: <tool>` and the check passes.

mod common;
use caseload_corpus::manifest::{EntryKind, FileEntry};
use caseload_corpus::{Manifest, NoProgress, Profile, generate_apfs};
use common::{Corpus, have, hex, opts};
use md5::{Digest, Md5};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const MIB: u64 = 1 << 20;

fn corpus(size: u64, seed: u64, threads: usize, profile: &str) -> Corpus {
    let o = opts(Path::new("."), size, seed, threads, profile);
    let label = format!("{profile}-{size}-{seed}-{threads}");
    common::corpus(&o, "APFS_KEEP", &label, |o| {
        generate_apfs(o, &NoProgress, None)
    })
}

fn run(tool: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(tool).args(args).output().expect(tool);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn part(c: &Corpus) -> (u64, u64) {
    common::part(&c.manifest)
}

fn check_apfsck(c: &Corpus) {
    if !have("apfsck") {
        return;
    }
    // The container alone, as apfsck takes a device.
    let v = common::volume_file(&c.image, &c.manifest);
    let (ok, text) = run("apfsck", &[v.path().to_str().expect("path")]);
    if common::apfsck_cannot_read_forks(&text, c.manifest.summary.compressed_files) {
        return;
    }
    assert!(ok && text.trim().is_empty(), "apfsck reported:\n{text}");
}

/// The manifest's listed (allocated) files and folders.
fn live(m: &Manifest) -> Vec<&FileEntry> {
    m.files
        .iter()
        .filter(|e| e.stream.is_none() && e.allocated)
        .collect()
}

fn apfs_facts(c: &Corpus) -> &caseload_corpus::manifest::ApfsFacts {
    c.manifest.filesystem.apfs.as_ref().expect("apfs facts")
}

/// `pstat` finds the container and its one volume at the manifest's block;
/// `fls` lists exactly the manifest's live names with their inode numbers
/// (no deleted ones: APFS keeps none); `icat` gives each live file's MD5.
fn check_tsk(c: &Corpus) {
    if !have("fls") || !have("icat") || !have("pstat") {
        return;
    }
    let sector = (part(c).0 / 512).to_string();
    let image = c.image.to_str().expect("path");
    let block = apfs_facts(c).volume_block.to_string();
    let (ok, text) = run("pstat", &["-o", &sector, image]);
    assert!(ok, "pstat failed:\n{text}");
    assert!(text.contains("Type: APFS"), "pstat:\n{text}");
    assert!(
        text.contains(&format!("APSB Block Number: {block}")),
        "pstat:\n{text}"
    );
    assert!(text.contains(&apfs_facts(c).volume_name), "pstat:\n{text}");
    let (ok, text) = run(
        "fls",
        &["-r", "-p", "-P", "apfs", "-B", &block, "-o", &sector, image],
    );
    assert!(ok, "fls failed:\n{text}");
    let mut listed: BTreeSet<(String, u64)> = BTreeSet::new();
    for line in text.lines() {
        let Some((meta, path)) = line.split_once(":\t") else {
            continue;
        };
        assert!(!meta.contains('*'), "fls lists a deleted entry: {line}");
        let inode: u64 = meta
            .split_whitespace()
            .last()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("fls line {line:?}"));
        assert!(listed.insert((path.to_string(), inode)), "twice: {line}");
    }
    let want: BTreeSet<(String, u64)> = live(&c.manifest)
        .iter()
        .map(|e| (e.tsk_path.clone(), e.inode.expect("inode")))
        .collect();
    let only_fls: Vec<_> = listed.difference(&want).take(10).collect();
    let only_mf: Vec<_> = want.difference(&listed).take(10).collect();
    assert!(
        only_fls.is_empty() && only_mf.is_empty(),
        "fls and the manifest differ: only in fls {only_fls:?}, only in the manifest {only_mf:?}"
    );
    let mut checked = 0;
    for e in live(&c.manifest) {
        if e.kind != EntryKind::File {
            continue;
        }
        let inode = e.inode.expect("inode").to_string();
        let out = Command::new("icat")
            .args(["-P", "apfs", "-B", &block, "-o", &sector, image, &inode])
            .output()
            .expect("icat");
        assert_eq!(
            Some(hex(&Md5::digest(&out.stdout))),
            e.md5,
            "icat of {} ({inode})",
            e.path
        );
        checked += 1;
    }
    assert!(checked > 20, "only {checked} files checked");
    println!("fls: {} names; icat: {checked} files", listed.len());
}

/// libfsapfs's hierarchy is exactly the manifest's live paths.
fn check_fsapfsinfo(c: &Corpus) {
    if !have("fsapfsinfo") {
        return;
    }
    let offset = part(c).0.to_string();
    let (ok, text) = run(
        "fsapfsinfo",
        &["-o", &offset, "-H", c.image.to_str().expect("path")],
    );
    assert!(ok, "fsapfsinfo failed:\n{text}");
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        // "/{volume uuid}/path"
        let Some(rest) = line.strip_prefix("/{") else {
            continue;
        };
        let Some((_, path)) = rest.split_once("}/") else {
            continue;
        };
        if !path.is_empty() {
            seen.insert(path.to_string());
        }
    }
    let want: BTreeSet<String> = live(&c.manifest).iter().map(|e| e.path.clone()).collect();
    let only_lib: Vec<_> = seen.difference(&want).take(10).collect();
    let only_mf: Vec<_> = want.difference(&seen).take(10).collect();
    assert!(
        only_lib.is_empty() && only_mf.is_empty(),
        "fsapfsinfo and the manifest differ: only in fsapfsinfo {only_lib:?}, only in the manifest {only_mf:?}"
    );
    println!("fsapfsinfo: {} paths", seen.len());
}

/// What the generic path adds holds on APFS too: every live file's
/// extents hold its content (MD5 over its blocks cut to its size), every
/// planted keyword with a disk offset is there in the image, the known
/// and notable files' hashes are in the hash sets, and every contiguous
/// carvable item (deleted files and residue, in free blocks) is at its
/// offset.
fn check_generic(c: &Corpus) {
    let img = std::fs::read(&c.image).expect("image");
    let mut files = 0;
    let mut tokens = 0;
    let mut compressed = 0;
    for e in live(&c.manifest) {
        if e.kind != EntryKind::File {
            continue;
        }
        let mut bytes = Vec::new();
        for x in &e.extents {
            bytes.extend_from_slice(&img[x.offset as usize..(x.offset + x.length) as usize]);
        }
        if e.compressed {
            bytes = decode_fork(&bytes);
            compressed += 1;
        }
        bytes.truncate(e.size as usize);
        assert_eq!(
            Some(hex(&Md5::digest(&bytes))),
            e.md5,
            "extents of {}",
            e.path
        );
        files += 1;
        for k in &e.keywords {
            for o in k.raw.iter().filter_map(|o| o.disk_offset) {
                let at = o as usize;
                assert_eq!(
                    &img[at..at + k.token.len()],
                    k.token.as_bytes(),
                    "keyword {} of {}",
                    k.token,
                    e.path
                );
                tokens += 1;
            }
        }
    }
    let read = |n: &str| std::fs::read_to_string(c.dir.path().join(n)).expect(n);
    let nsrl = read("NSRLFile.txt").to_lowercase();
    let notable = read("notable.md5");
    for e in live(&c.manifest) {
        let Some(md5) = &e.md5 else { continue };
        if e.known {
            assert!(nsrl.contains(md5.as_str()), "known {} not in NSRL", e.path);
        }
        if e.notable {
            assert!(
                notable.contains(md5.as_str()),
                "notable {} not listed",
                e.path
            );
        }
    }
    let mut carved = 0;
    for item in c.manifest.carvable.iter().filter(|i| i.contiguous) {
        let at = item.offset as usize;
        let bytes = &img[at..at + item.length as usize];
        assert_eq!(hex(&Md5::digest(bytes)), item.md5, "carvable at {at}");
        carved += 1;
    }
    assert_eq!(compressed, c.manifest.summary.compressed_files);
    println!(
        "generic: {files} files' extents ({compressed} compressed), {tokens} keywords, {carved} carvable items"
    );
}

/// A decmpfs type-4 resource fork decoded as TSK reads one: the
/// big-endian data offset, 4 bytes on the block count and its (offset,
/// length) table, each block zlib or stored after 0xFF.
fn decode_fork(fork: &[u8]) -> Vec<u8> {
    let be = |o: usize| u32::from_be_bytes(fork[o..o + 4].try_into().unwrap()) as usize;
    let le = |o: usize| u32::from_le_bytes(fork[o..o + 4].try_into().unwrap()) as usize;
    let data = be(0) + 4;
    let mut out = Vec::new();
    for i in 0..le(data) {
        let (off, len) = (le(data + 4 + 8 * i), le(data + 8 + 8 * i));
        let block = &fork[data + off..data + off + len];
        let before = out.len();
        if block[0] == 0xFF {
            out.extend_from_slice(&block[1..]);
        } else {
            std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(block), &mut out)
                .expect("a zlib block");
        }
        assert!(
            out.len() - before <= 65536,
            "block {i} decodes to over 64 KiB"
        );
    }
    out
}

fn check_all(c: &Corpus) {
    check_apfsck(c);
    check_tsk(c);
    check_fsapfsinfo(c);
    check_generic(c);
}

fn size_seed(default: (u64, u64)) -> (u64, u64) {
    let size = std::env::var("APFS_SIZE_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(|m: u64| m * MIB)
        .unwrap_or(default.0);
    let seed = std::env::var("APFS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default.1);
    (size, seed)
}

/// By hand: `APFS_SIZE_MIB`, `APFS_SEED` and `APFS_PROFILE` choose
/// another corpus for the same oracles.
#[test]
fn workstation_corpus_passes_every_oracle() {
    let (size, seed) = size_seed((64 * MIB, 1));
    let profile = std::env::var("APFS_PROFILE").unwrap_or_else(|_| "workstation".into());
    let c = corpus(size, seed, 2, &profile);
    check_all(&c);
}

#[test]
fn suspect_corpus_with_deleted_folders_passes_every_oracle() {
    let c = corpus(96 * MIB, 2, 2, "suspect");
    assert!(c.manifest.summary.deleted_files > 0);
    check_all(&c);
}

#[test]
fn image_and_manifest_do_not_depend_on_threads() {
    let a = corpus(48 * MIB, 3, 1, "workstation");
    let b = corpus(48 * MIB, 3, 2, "workstation");
    let read = |c: &Corpus, n: &str| std::fs::read(c.dir.path().join(n)).expect("read");
    assert!(
        read(&a, caseload_corpus::IMAGE) == read(&b, caseload_corpus::IMAGE),
        "images differ between 1 and 2 threads"
    );
    assert_eq!(
        read(&a, caseload_corpus::MANIFEST),
        read(&b, caseload_corpus::MANIFEST),
        "manifests differ between 1 and 2 threads"
    );
}

#[test]
fn mac_laptop_corpus_passes_every_oracle() {
    let c = corpus(128 * MIB, 4, 2, "mac-laptop");
    let paths: Vec<&str> = live(&c.manifest).iter().map(|e| e.path.as_str()).collect();
    let user = paths
        .iter()
        .find_map(|p| p.strip_prefix("Users/").filter(|r| !r.contains('/')))
        .expect("a home folder");
    for want in [
        "Desktop",
        "Documents",
        "Downloads",
        "Pictures",
        "Library/Mail",
        "Library/Safari",
        "Library/Safari/History.db",
    ] {
        let p = format!("Users/{user}/{want}");
        assert!(paths.contains(&p.as_str()), "no {p}");
    }
    assert!(
        paths
            .iter()
            .any(|p| p.contains("/Library/Mail/") && p.ends_with(".emlx")),
        "no .emlx message"
    );
    assert!(!paths.iter().any(|p| p.starts_with("Windows")));
    // Compressed files of several 64 KiB blocks: TSK's icat, the
    // fork's own decoding and (fixed) apfsck read them.
    assert!(
        live(&c.manifest)
            .iter()
            .any(|e| e.compressed && e.size > 2 * 65536),
        "no compressed file of several blocks on a mac-laptop"
    );
    check_all(&c);
}

/// The smallest disk accepted here (8 MiB) passes apfsck and fsapfsinfo
/// with every profile; one sector less is refused, naming APFS.
#[test]
fn smallest_corpus_passes_and_smaller_is_refused() {
    for profile in Profile::NAMES {
        let c = corpus(caseload_corpus::apfs::MIN_DISK, 6, 2, profile);
        check_apfsck(&c);
        check_fsapfsinfo(&c);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let o = opts(
        dir.path(),
        caseload_corpus::apfs::MIN_DISK - 512,
        6,
        1,
        "workstation",
    );
    let e = generate_apfs(&o, &NoProgress, None).expect_err("too small");
    assert!(e.to_string().contains("APFS"), "{e}");
}

/// The container objects mkapfs makes the same way are byte for byte
/// mkapfs's (checksums included): the checkpoint map (the same four
/// ephemeral objects at the same blocks), the reaper and both free
/// queues' roots; the superblock's fixed fields agree; our Fletcher-64
/// verifies every mkapfs object.
#[test]
fn fixed_objects_equal_mkapfs() {
    if !have("mkapfs") {
        return;
    }
    use caseload_corpus::apfs::{self, container};
    let dir = tempfile::tempdir().expect("tempdir");
    let dev = dir.path().join("mkapfs.img");
    std::fs::File::create(&dev)
        .and_then(|f| f.set_len(128 * MIB))
        .expect("device");
    let (ok, text) = run("mkapfs", &[dev.to_str().expect("path")]);
    assert!(ok, "mkapfs: {text}");
    let img = std::fs::read(&dev).expect("read");
    let block = |b: u64| &img[b as usize * apfs::BLOCK..(b as usize + 1) * apfs::BLOCK];
    assert!(block(apfs::CPM_BLOCK) == container::checkpoint_map().as_slice());
    assert!(block(apfs::REAPER_BLOCK) == container::reaper().as_slice());
    assert!(block(apfs::IP_FQ_BLOCK) == container::free_queue(apfs::oid::IP_FQ).as_slice());
    assert!(block(apfs::MAIN_FQ_BLOCK) == container::free_queue(apfs::oid::MAIN_FQ).as_slice());
    // Superblock: magic, block size and count, features, checkpoint area
    // bases and lengths, object ids, ephemeral info.
    let p = apfs::ApfsParams::for_container(128 * MIB).expect("params");
    let ours = container::nx_superblock(
        &p,
        &container::NxFacts {
            uuid: [0; 16],
            next_oid: 0,
        },
    );
    let theirs = block(0);
    // (Not the data area's length, 959 blocks here and 5904 there, nor
    // the object map's block, 1024 here and 20000 there.)
    for (at, len) in [
        (0x18, 4),
        (0x20, 16),
        (0x30, 24),
        (0x60, 8),
        (0x68, 4),
        (0x70, 0x28),
        (0x98, 8),
        (0xA8, 8),
        (0xB4, 12),
        (0x520, 8),
    ] {
        assert_eq!(
            &ours[at..at + len],
            &theirs[at..at + len],
            "superblock bytes at {at:#x}"
        );
    }
    // Our own checksum arithmetic agrees with every mkapfs object's.
    for b in [0u64, 1, 2, 65, 66, 67, 68] {
        let blk = block(b);
        assert_eq!(
            u64::from_le_bytes(blk[..8].try_into().expect("8 bytes")),
            apfs::fletcher64(&blk[8..]),
            "checksum of block {b}"
        );
    }
}
