//! The whole `ftk4-default` workload on evidence that is neither NTFS nor
//! FAT: Debian's forensics-samples ext4 and exFAT images, with the case
//! database in PostgreSQL (the workload's ftk4 profile) and in SQLite
//! (`--profile native`: the ftk4 profile is PostgreSQL's). Every stage does per-file work:
//! files hashed, documents indexed, the files a hash set names found known.
//! Skipped, with a notice, without the samples, TSK (which picks the known
//! files) or PostgreSQL (that half only).

use crate::common;
use crate::forensics_samples::sample;

use serde_json::Value;
use std::path::Path;

/// The `icat` MD5 of the file at `path` in the partition at `sector`.
fn icat_md5_of(image: &Path, sector: u64, path: &str) -> String {
    let fls = std::process::Command::new("fls")
        .args(["-r", "-p", "-o", &sector.to_string()])
        .arg(image)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&fls.stdout);
    // `r/r 23:\tpic1/debian.png`
    let inode = listing
        .lines()
        .find_map(|l| {
            let (head, name) = l.split_once('\t')?;
            (name == path && !head.contains('*')).then(|| {
                head.rsplit(' ')
                    .next()
                    .unwrap_or("")
                    .trim_end_matches(':')
                    .to_string()
            })
        })
        .unwrap_or_else(|| panic!("{path} not in fls's listing"));
    let out = std::process::Command::new("icat")
        .args(["-o", &sector.to_string()])
        .arg(image)
        .arg(&inode)
        .output()
        .unwrap();
    assert!(
        out.status.success() && !out.stdout.is_empty(),
        "icat {inode}"
    );
    common::md5_hex(&out.stdout)
}

fn stage<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} stage: {}", run["stages"]))
}

#[test]
fn ftk4_default_does_per_file_work_on_ext4_and_exfat_in_sqlite_and_postgres() {
    let test = "ftk4_default_does_per_file_work_on_ext4_and_exfat_in_sqlite_and_postgres";
    let work = common::pg_tempdir();
    for name in ["ext4", "exfat"] {
        let Some(image) = sample(test, name, work.path()) else {
            return;
        };
        let known = work.path().join(format!("{name}-known.md5"));
        let picked = ["pic1/debian.png", "text1/a-text.docx"];
        let lines: Vec<String> = picked
            .iter()
            .map(|p| icat_md5_of(&image, 2048, p))
            .collect();
        std::fs::write(&known, lines.join("\n") + "\n").unwrap();
        let mut engines = vec!["sqlite"];
        if common::have_postgres(test) {
            engines.push("postgres");
        }
        for engine in engines {
            let dir = work.path().join(format!("{name}-{engine}"));
            for d in ["db", "case", "temp"] {
                std::fs::create_dir_all(dir.join(d)).unwrap();
            }
            let out = common::run_ok(
                common::caseload()
                    .args(["run", "--workload", "ftk4-default", "--cache", "warm"])
                    .args(["--db-engine", engine, "--json", "--evidence"])
                    .arg(&image)
                    // FTK 4's own database shape is PostgreSQL's; on SQLite
                    // the same stages run with caseload's own rows.
                    .args(if engine == "sqlite" {
                        &["--profile", "native"][..]
                    } else {
                        &[][..]
                    })
                    .arg("--database")
                    .arg(dir.join("db"))
                    .arg("--case")
                    .arg(dir.join("case"))
                    .arg("--temp")
                    .arg(dir.join("temp"))
                    .arg("--hashset")
                    .arg(format!("known={}", known.display())),
            );
            common::assert_no_server_left(work.path());
            let run: Value = serde_json::from_slice(&out.stdout).unwrap();
            let what = format!("{name} on {engine}");
            assert_eq!(run["status"], "completed", "{what}: {}", run["stages"]);
            assert_eq!(run["database"]["backend"], engine, "{what}");
            let hashed = stage(&run, "file-hash")["summary"]["details"]["files_hashed"]
                .as_u64()
                .unwrap_or(0);
            assert!(hashed >= 20, "{what}: {hashed} files hashed");
            let documents = stage(&run, "index")["summary"]["details"]["documents"]
                .as_u64()
                .unwrap_or(0);
            assert!(documents >= 5, "{what}: {documents} documents indexed");
            let kff = &stage(&run, "kff")["summary"]["details"];
            assert!(
                kff["known_files"].as_u64().unwrap_or(0) >= 2,
                "{what}: the two named files not found known: {kff}"
            );
        }
    }
}
