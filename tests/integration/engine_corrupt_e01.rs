//! Damaged E01 sets: each gives a clear error or a recorded processing error
//! naming the damaged sectors, never a panic, and the run still finishes.
//! Built from copies of the real images (skipped when they are absent).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

fn copy_set(root: &Path, names: &[&str], into: &Path) -> Vec<PathBuf> {
    names
        .iter()
        .map(|n| {
            let from = root.join(n);
            let to = into.join(from.file_name().unwrap());
            std::fs::write(&to, std::fs::read(&from).unwrap()).unwrap();
            to
        })
        .collect()
}

fn multiseg(root: &Path, into: &Path) -> Vec<PathBuf> {
    let names: Vec<String> = (1..=8)
        .map(|i| format!("ewf/multiseg_v1.E{i:02}"))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    copy_set(root, &refs, into)
}

fn flip(path: &Path, offset: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset] ^= 0x5a;
    std::fs::write(path, bytes).unwrap();
}

fn run(evidence: &Path, work: &Path) -> Output {
    let out = work.join("out");
    std::fs::create_dir_all(&out).unwrap();
    common::caseload()
        .args([
            "run",
            "--stages",
            "image-hash",
            "--cache",
            "warm",
            "--force",
        ])
        .arg("--evidence")
        .arg(evidence)
        .args(
            ["--database", "--case", "--temp"]
                .iter()
                .flat_map(|f| [f.to_string(), out.display().to_string()]),
        )
        .output()
        .unwrap()
}

/// Rows of processing_errors: (severity, first_sector, last_sector, message).
fn recorded(work: &Path) -> Vec<(String, Option<i64>, Option<i64>, String)> {
    let db = work.join("out").join("case.sqlite");
    let out = std::process::Command::new("sqlite3")
        .arg("-separator")
        .arg("\t")
        .arg(&db)
        .arg("SELECT severity, first_sector, last_sector, message FROM processing_errors ORDER BY id")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(4, '\t').collect();
            (
                f[0].to_string(),
                f[1].parse().ok(),
                f[2].parse().ok(),
                f[3].to_string(),
            )
        })
        .collect()
}

fn no_panic(out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_flipped_byte_in_a_stored_chunk_is_recorded_with_its_sectors() {
    let Some(root) =
        common::real_images("a_flipped_byte_in_a_stored_chunk_is_recorded_with_its_sectors")
    else {
        return;
    };
    if !common::have_tool(
        "a_flipped_byte_in_a_stored_chunk_is_recorded_with_its_sectors",
        "sqlite3",
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let set = multiseg(&root, work.path());
    // Segment 3 holds chunks 92..137 uncompressed; byte 500000 is in chunk 105.
    flip(&set[2], 500_000);
    let out = run(&set[0], work.path());
    no_panic(&out);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = recorded(work.path());
    assert!(
        rows.iter().any(|r| r.0 == "error"
            && r.1 == Some(6720)
            && r.2 == Some(6783)
            && r.3.contains("Adler-32")),
        "{rows:?}"
    );
    assert!(
        rows.iter()
            .any(|r| r.0 == "finding" && r.3.contains("does not match")),
        "{rows:?}"
    );
}

#[test]
fn a_flipped_byte_in_a_compressed_chunk_is_recorded_with_its_sectors() {
    let name = "a_flipped_byte_in_a_compressed_chunk_is_recorded_with_its_sectors";
    let Some(root) = common::real_images(name) else {
        return;
    };
    if !common::have_tool(name, "sqlite3") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let set = copy_set(&root, &["dftt-e01/6-fat-undel.E01"], work.path());
    // The first chunk (boot sector, FATs) is deflated; its data starts just
    // after the `sectors` section descriptor (76 bytes).
    let bytes = std::fs::read(&set[0]).unwrap();
    let sectors = bytes.windows(8).position(|w| w == b"sectors\0").unwrap();
    flip(&set[0], sectors + 76 + 40);
    let out = run(&set[0], work.path());
    no_panic(&out);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = recorded(work.path());
    assert!(
        rows.iter().any(|r| r.0 == "error"
            && r.1 == Some(0)
            && r.2 == Some(63)
            && r.3.contains("chunk 0")),
        "{rows:?}"
    );
}

#[test]
fn a_truncated_last_segment_records_the_unreadable_sectors() {
    let name = "a_truncated_last_segment_records_the_unreadable_sectors";
    let Some(root) = common::real_images(name) else {
        return;
    };
    if !common::have_tool(name, "sqlite3") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let set = multiseg(&root, work.path());
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&set[7])
        .unwrap();
    f.set_len(100_000).unwrap();
    drop(f);
    let out = run(&set[0], work.path());
    no_panic(&out);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = recorded(work.path());
    assert!(
        rows.iter()
            .any(|r| r.3.contains("sectors 20160-20479 are unreadable")),
        "{rows:?}"
    );
    for chunk in 315..320i64 {
        assert!(
            rows.iter()
                .any(|r| r.0 == "error" && r.1 == Some(chunk * 64) && r.2 == Some(chunk * 64 + 63)),
            "chunk {chunk}: {rows:?}"
        );
    }
}

#[test]
fn a_missing_middle_segment_is_a_clear_error() {
    let Some(root) = common::real_images("a_missing_middle_segment_is_a_clear_error") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let set = multiseg(&root, work.path());
    std::fs::remove_file(&set[3]).unwrap();
    let out = run(&set[0], work.path());
    no_panic(&out);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("multiseg_v1.E04") && err.contains("missing"),
        "{err}"
    );
    assert!(!work.path().join("out/run.json").exists());
}

#[test]
fn a_corrupted_table_entry_is_recorded_with_its_sectors() {
    let name = "a_corrupted_table_entry_is_recorded_with_its_sectors";
    let Some(root) = common::real_images(name) else {
        return;
    };
    if !common::have_tool(name, "sqlite3") {
        return;
    }
    // Segment 2's table: descriptor (76) + header (24), then u32 entries.
    // Point its third entry (chunk 47) far beyond the segment's end: in
    // `table` alone, the `table2` mirror (whose entries still pass their
    // Adler-32) serves, as libewf does; in both, the chunk is an error.
    for both in [false, true] {
        let work = tempfile::tempdir().unwrap();
        let set = multiseg(&root, work.path());
        let mut bytes = std::fs::read(&set[1]).unwrap();
        let table = bytes.windows(6).position(|w| w == b"table\0").unwrap();
        let mirror = bytes.windows(7).position(|w| w == b"table2\0").unwrap();
        let copies: &[usize] = if both { &[table, mirror] } else { &[table] };
        for &copy in copies {
            let entry = copy + 76 + 24 + 8;
            bytes[entry..entry + 4].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
        }
        std::fs::write(&set[1], bytes).unwrap();
        let out = run(&set[0], work.path());
        no_panic(&out);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows = recorded(work.path());
        let damaged = rows.iter().any(|r| {
            r.0 == "error"
                && r.1 == Some(3008)
                && r.2 == Some(3071)
                && r.3.contains("beyond the end")
        });
        assert_eq!(damaged, both, "both copies damaged: {both}; {rows:?}");
    }
}

#[test]
fn missing_evidence_and_bad_layouts_are_clear_errors() {
    let work = tempfile::tempdir().unwrap();
    let evidence = work.path().join("disk.dd");
    std::fs::write(&evidence, vec![0u8; 64 * 1024]).unwrap();
    let ok = work.path().join("ok");
    std::fs::create_dir(&ok).unwrap();
    let try_run = |evidence: &Path, db: &Path| {
        common::caseload()
            .args(["run", "--stages", "image-hash", "--cache", "warm"])
            .arg("--evidence")
            .arg(evidence)
            .arg("--database")
            .arg(db)
            .arg("--case")
            .arg(&ok)
            .arg("--temp")
            .arg(&ok)
            .output()
            .unwrap()
    };
    let out = try_run(&work.path().join("absent.dd"), &ok);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open evidence"));
    let out = try_run(&evidence, &work.path().join("no-such-dir"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("database channel"));
    let out = try_run(&evidence, &evidence);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("evidence file itself"));
    assert_eq!(std::fs::read(&evidence).unwrap(), vec![0u8; 64 * 1024]);
    // A second run into the same case needs --force.
    let first = try_run(&evidence, &ok);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let again = try_run(&evidence, &ok);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
}

/// A damaged chunk under the partition table (the MBR's chunk fails its
/// Adler-32): the filesystem stage cannot find a volume, records the
/// damage with its sectors and completes; the run goes on to carve the
/// readable rest. Built from a generated corpus (uncompressed E01, so the
/// MBR's bytes can be found in the segment and one flipped).
#[test]
fn a_damaged_chunk_under_the_partition_table_is_recorded_and_the_run_goes_on() {
    let work = tempfile::tempdir().unwrap();
    let ev = work.path().join("ev");
    common::run_ok(
        common::caseload()
            .args([
                "corpus",
                "--size",
                "32MiB",
                "--seed",
                "8",
                "--format",
                "dd,e01",
                "--e01-compression",
                "none",
                "--decoys",
                "10",
                "--out",
            ])
            .arg(&ev),
    );
    let raw = std::fs::read(ev.join("image.dd")).unwrap();
    let e01 = ev.join("image.E01");
    let bytes = std::fs::read(&e01).unwrap();
    let mbr = &raw[..512];
    let at = bytes
        .windows(512)
        .position(|w| w == mbr)
        .expect("the MBR's bytes stored uncompressed in the E01");
    // The partition table's first entry.
    flip(&e01, at + 446 + 8);
    let out_dir = work.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = common::caseload()
        .args(["run", "--stages", "filesystem,carve", "--cache", "warm"])
        .arg("--evidence")
        .arg(&e01)
        .args(
            ["--database", "--case", "--temp"]
                .iter()
                .flat_map(|f| [f.to_string(), out_dir.display().to_string()]),
        )
        .output()
        .unwrap();
    no_panic(&out);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        run["stages"][0]["status"], "completed",
        "{}",
        run["stages"][0]
    );
    assert_eq!(
        run["stages"][1]["status"], "completed",
        "{}",
        run["stages"][1]
    );
    let db = rusqlite::Connection::open(out_dir.join("case.sqlite")).unwrap();
    let (first, message): (i64, String) = db
        .query_row(
            "SELECT first_sector, message FROM processing_errors WHERE stage = 'filesystem' AND severity = 'error' ORDER BY id LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(first, 0, "{message}");
    assert!(message.contains("volume system"), "{message}");
    let carved: i64 = db
        .query_row("SELECT count(*) FROM carved_items", [], |r| r.get(0))
        .unwrap();
    assert!(carved > 0, "the readable rest is still carved");
}
