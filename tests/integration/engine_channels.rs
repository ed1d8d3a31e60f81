//! Channel accounting adds up: with database, case and temp on three
//! different directories, the bytes each channel says it wrote match what
//! appeared in its directory, nothing is written to the evidence, and the
//! evidence's bytes and modification time are unchanged.

use crate::common;

use std::path::Path;

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            dir_bytes(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

fn md5_of(path: &Path) -> Vec<u8> {
    use md5::Digest;
    md5::Md5::digest(std::fs::read(path).unwrap()).to_vec()
}

#[test]
fn bytes_written_per_channel_match_the_directories_and_evidence_is_untouched() {
    let work = tempfile::tempdir().unwrap();
    let evidence_dir = work.path().join("evidence");
    let (image, _) = common::corpus(&evidence_dir, &["--size", "48MiB", "--seed", "3"]);
    let before_md5 = md5_of(&image);
    let before_mtime = std::fs::metadata(&image).unwrap().modified().unwrap();
    let before_evidence_dir = dir_bytes(&evidence_dir);

    let [db, case, temp] = ["db", "case", "temp"].map(|d| {
        let p = work.path().join(d);
        std::fs::create_dir(&p).unwrap();
        p
    });
    let out = common::caseload()
        // Every stage that writes to the case except `carve`: it streams
        // each carved item into its file and then cuts or removes the items
        // that fail validation, so its directory holds less than it wrote
        // and could not be checked against the directory's growth.
        .args(["run", "--cache", "warm", "--json", "--journal-mode", "wal"])
        .args(["--stages", "image-hash,filesystem,file-hash,index"])
        .arg("--evidence")
        .arg(&image)
        .arg("--database")
        .arg(&db)
        .arg("--case")
        .arg(&case)
        .arg("--temp")
        .arg(&temp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The whole run's figures: stages plus the I/O outside them.
    let total = |channel: &str, field: &str| -> u64 {
        run["totals"]["channels"][channel][field].as_u64().unwrap()
    };
    let staged = |channel: &str, field: &str| -> u64 {
        run["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["channels"][channel][field].as_u64().unwrap())
            .sum()
    };
    let outside = |channel: &str, field: &str| -> u64 {
        run["totals"]["outside_stages"][channel][field]
            .as_u64()
            .unwrap()
    };
    for ch in ["evidence", "database", "case", "temp"] {
        for field in [
            "bytes_read",
            "bytes_written",
            "read_ops",
            "write_ops",
            "fsyncs",
        ] {
            assert_eq!(
                total(ch, field),
                staged(ch, field) + outside(ch, field),
                "{ch}.{field}"
            );
        }
    }

    // Evidence: read, never written; bytes and mtime unchanged.
    assert!(total("evidence", "bytes_read") >= std::fs::metadata(&image).unwrap().len());
    assert_eq!(total("evidence", "bytes_written"), 0);
    assert_eq!(total("evidence", "write_ops"), 0);
    assert_eq!(md5_of(&image), before_md5);
    assert_eq!(
        std::fs::metadata(&image).unwrap().modified().unwrap(),
        before_mtime
    );
    assert_eq!(dir_bytes(&evidence_dir), before_evidence_dir);

    // Database: everything in the directory went through the counting VFS.
    // WAL mode writes each page to the log and again at the checkpoint, so
    // the stated tolerance is: final size <= written <= 3 x final + 1 MiB.
    let db_size = dir_bytes(&db);
    let db_written = total("database", "bytes_written");
    assert!(db_size > 0);
    assert!(
        db_written >= db_size,
        "database wrote {db_written} but holds {db_size}"
    );
    assert!(
        db_written <= 3 * db_size + (1 << 20),
        "database wrote {db_written} for {db_size}"
    );
    assert!(total("database", "write_ops") > 0);

    // Case: the stages' writes plus run.json (written after the last stage,
    // so in no stage's figures) equal the directory, within 64 KiB.
    let case_written = total("case", "bytes_written");
    let run_json = std::fs::metadata(case.join("run.json")).unwrap().len();
    let case_size = dir_bytes(&case);
    assert!(
        case_size.abs_diff(case_written + run_json) <= 64 * 1024,
        "case wrote {case_written}+{run_json}, holds {case_size}"
    );

    // Temp: a run's private temp directory is removed when it ends, and
    // nothing else is left behind.
    assert_eq!(dir_bytes(&temp), 0);
    assert_eq!(std::fs::read_dir(&temp).unwrap().count(), 0);

    // No channel wrote outside its directory: the work dir holds only ours.
    let mut names: Vec<String> = std::fs::read_dir(work.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["case", "db", "evidence", "temp"]);
}
