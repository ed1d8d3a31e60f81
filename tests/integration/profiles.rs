//! `--profile autopsy` against The Sleuth Kit (the oracle): on DFTT 7,
//! `tsk_loaddb` and caseload's filesystem stage build case databases of
//! about the same size, files and rows per file (and, with strace, write
//! calls per file); caseload's own results do not change with the profile.

use crate::common;
use std::collections::BTreeMap;
use std::path::Path;

fn count(db: &Path, sql: &str) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Files and rows per file of a TSK-shaped database.
fn tsk_shape(db: &Path) -> (f64, f64) {
    let files = count(db, "SELECT count(*) FROM tsk_files") as f64;
    let rows = count(db, "SELECT count(*) FROM tsk_objects") as f64
        + files
        + count(db, "SELECT count(*) FROM tsk_file_layout") as f64;
    (files, rows / files)
}

/// Write calls `strace -c` counted, if strace is there.
fn strace_writes(summary: &str) -> u64 {
    summary
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = *f.last()?;
            if !["write", "pwrite64", "writev", "pwritev"].contains(&name) {
                return None;
            }
            f.get(3)?.parse::<u64>().ok()
        })
        .sum()
}

#[test]
fn autopsy_profile_lands_near_tsk_loaddb_on_dftt7() {
    let test = "autopsy_profile_lands_near_tsk_loaddb_on_dftt7";
    let Some(real) = common::real_images(test) else {
        return;
    };
    if !common::have_tool(test, "tsk_loaddb") {
        return;
    }
    let image = real.join("dftt/7-undel-ntfs/7-ntfs-undel.dd");
    let work = tempfile::tempdir().unwrap();
    let tsk_db = work.path().join("tsk.db");
    let strace = common::have_tool(test, "strace");
    let summary = work.path().join("strace.txt");
    let mut cmd = if strace {
        let mut c = std::process::Command::new("strace");
        c.args([
            "-f",
            "-c",
            "-e",
            "trace=write,pwrite64,writev,pwritev",
            "-o",
        ])
        .arg(&summary)
        .arg("tsk_loaddb");
        c
    } else {
        std::process::Command::new("tsk_loaddb")
    };
    let out = cmd.arg("-d").arg(&tsk_db).arg(&image).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let case = work.path().join("autopsy");
    std::fs::create_dir_all(&case).unwrap();
    let run = common::run_ok(common::stage_run("filesystem", &image, &case, &[]).args([
        "--profile",
        "autopsy",
        "--json",
    ]));
    let run: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(run["database"]["options"]["profile"], "autopsy");
    assert_eq!(run["database"]["options"]["journal_mode"], "delete");
    let walk = &run["stages"][0]["database_work"];
    // The walk in one transaction (and one for the volume it adds).
    assert!(walk["transactions"].as_u64().unwrap() <= 2, "{walk}");
    assert!(walk["writes"].as_u64().unwrap() >= 30, "{walk}");
    let ours = case.join("case.sqlite");

    let within = |what: &str, mine: f64, theirs: f64| {
        let r = mine / theirs;
        eprintln!("{test}: {what}: caseload {mine:.2}, tsk_loaddb {theirs:.2} ({r:.2}x)");
        assert!((0.7..=1.3).contains(&r), "{what}: {mine} against {theirs}");
    };
    let size = |p: &Path| std::fs::metadata(p).unwrap().len() as f64;
    within("database bytes", size(&ours), size(&tsk_db));
    let (tsk_files, tsk_rpf) = tsk_shape(&tsk_db);
    let (our_files, our_rpf) = tsk_shape(&ours);
    within("files", our_files, tsk_files);
    within("rows per file", our_rpf, tsk_rpf);
    if strace {
        let theirs = strace_writes(&std::fs::read_to_string(&summary).unwrap()) as f64;
        let mine = run["totals"]["channels"]["database"]["write_ops"]
            .as_f64()
            .unwrap();
        within("write calls per file", mine / our_files, theirs / tsk_files);
    }

    // The profile adds TSK's rows; caseload's own are the native run's.
    let native = work.path().join("native");
    std::fs::create_dir_all(&native).unwrap();
    common::run_ok(&mut common::stage_run("filesystem", &image, &native, &[]));
    let listing = |db: &Path| -> Vec<(String, i64, i64)> {
        let c = rusqlite::Connection::open(db).unwrap();
        let mut s = c
            .prepare("SELECT path, size, allocated FROM files ORDER BY path, meta_addr")
            .unwrap();
        s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(listing(&ours), listing(&native.join("case.sqlite")));
    // The profile's rows show in the stage's database figures.
    let native_run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(native.join("run.json")).unwrap()).unwrap();
    let rows = |r: &serde_json::Value| r["stages"][0]["database_work"]["rows"].as_u64().unwrap();
    assert!(
        rows(&run) > 3 * rows(&native_run),
        "autopsy {} rows, native {}",
        rows(&run),
        rows(&native_run)
    );
    // Every file row has its object, its parent's object exists.
    assert_eq!(
        count(
            &ours,
            "SELECT count(*) FROM tsk_files f LEFT JOIN tsk_objects o ON o.obj_id = f.obj_id WHERE o.obj_id IS NULL"
        ),
        0
    );
    assert_eq!(
        count(
            &ours,
            "SELECT count(*) FROM tsk_objects o LEFT JOIN tsk_objects p ON p.obj_id = o.par_obj_id WHERE o.par_obj_id IS NOT NULL AND p.obj_id IS NULL"
        ),
        0
    );
}

#[test]
fn the_autopsy_profile_is_sqlite_only() {
    let work = tempfile::tempdir().unwrap();
    let image = work.path().join("x.dd");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let out = common::stage_run("filesystem", &image, work.path(), &[])
        .args(["--profile", "autopsy", "--db-engine", "postgres"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("autopsy profile") && err.contains("sqlite"),
        "{err}"
    );
}

#[test]
fn a_workload_s_profile_applies_unless_the_command_line_says_otherwise() {
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "6"],
    );
    let workload = work.path().join("w.toml");
    std::fs::write(
        &workload,
        "name = \"w\"\nprofile = \"autopsy\"\n[[stage]]\nname = \"filesystem\"\n",
    )
    .unwrap();
    let profile_of = |extra: &[&str]| -> String {
        let case = work.path().join(format!("case{}", extra.len()));
        std::fs::create_dir_all(&case).unwrap();
        let mut cmd = common::caseload();
        cmd.args(["run", "--cache", "warm", "--json", "--workload"])
            .arg(&workload)
            .arg("--evidence")
            .arg(&image);
        for flag in ["--database", "--case", "--temp"] {
            cmd.arg(flag).arg(&case);
        }
        let out = common::run_ok(cmd.args(extra));
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let tsk = count(
            &case.join("case.sqlite"),
            "SELECT count(*) FROM sqlite_master WHERE name = 'tsk_files'",
        );
        let p = run["database"]["options"]["profile"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(tsk == 1, p == "autopsy", "{p}: TSK tables {tsk}");
        p
    };
    assert_eq!(profile_of(&[]), "autopsy");
    assert_eq!(profile_of(&["--profile", "native"]), "native");
}

/// The bytes of a manifest file, read from the raw image along its extents.
fn file_bytes(image: &Path, f: &caseload_corpus::manifest::FileEntry) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let disk = std::fs::File::open(image).unwrap();
    let mut out = Vec::new();
    for e in &f.extents {
        let mut buf = vec![0u8; e.length as usize];
        disk.read_exact_at(&mut buf, e.offset).unwrap();
        out.extend_from_slice(&buf);
    }
    out.truncate(f.size as usize);
    out
}

/// `unzip` (the oracle) on an archive's bytes: each file member's name and
/// MD5 (extracted whole: unzip reads names given to it as patterns).
fn unzip_members(dir: &Path, data: &[u8]) -> Vec<(String, String)> {
    let archive = dir.join("archive.zip");
    let out = dir.join("members");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::write(&archive, data).unwrap();
    let list = common::run_ok(std::process::Command::new("unzip").arg("-Z1").arg(&archive));
    common::run_ok(
        std::process::Command::new("unzip")
            .args(["-qq", "-o"])
            .arg(&archive)
            .arg("-d")
            .arg(&out),
    );
    String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|n| !n.ends_with('/'))
        .map(|name| {
            let bytes = std::fs::read(out.join(name)).unwrap();
            (name.to_string(), common::md5_hex(&bytes))
        })
        .collect()
}

/// `--profile ftk4` on PostgreSQL: compound files are expanded into items
/// whose names and hashes are the corpus manifest's attachments and
/// `unzip`'s members; every file, member and carved item is an FTK item
/// with properties; the walk commits every few writes; members pass
/// through the temp channel; one thread gives what two give.
#[test]
fn ftk4_profile_expands_compound_files_into_items_on_postgres() {
    let test = "ftk4_profile_expands_compound_files_into_items_on_postgres";
    if !common::have_postgres(test) || !common::have_tool(test, "unzip") {
        return;
    }
    let work = common::pg_tempdir();
    let (image, manifest) =
        common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "3"]);
    let ftk4_run = |name: &str, threads: &str| {
        let case = work.path().join(name);
        std::fs::create_dir_all(&case).unwrap();
        let out = common::run_ok(
            common::stage_run("filesystem,file-hash,carve", &image, &case, &[]).args([
                "--profile",
                "ftk4",
                "--threads",
                threads,
                "--json",
            ]),
        );
        common::assert_no_server_left(work.path());
        (case, out)
    };
    let (case, out) = ftk4_run("ftk4", "2");
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["database"]["options"]["profile"], "ftk4");
    assert_eq!(
        run["database"]["backend"], "postgres",
        "{}",
        run["database"]
    );
    let hashing = &run["stages"][1];
    let details = &hashing["summary"]["details"];

    let report = caseload_engine::run::load_run_json(&case).unwrap();
    let mut opened = caseload_engine::casedb::open_case(&report.database, None).unwrap();
    let reader = opened.reader();
    let members = reader.extracted_items().unwrap();
    assert_eq!(
        details["extracted_items"].as_u64(),
        Some(members.len() as u64)
    );

    // Ground truth: the manifest's attachments, unzip's members, for every
    // intact live file.
    let scratch = tempfile::tempdir().unwrap();
    let (mut attachments, mut zip_members) = (0, 0);
    for f in manifest.files.iter().filter(|f| f.allocated && f.intact) {
        // caseload's paths are relative to the volume's root.
        let path = f.path.trim_start_matches('/');
        let of_file: Vec<_> = members.iter().filter(|m| m.file_path == path).collect();
        for a in &f.attachments {
            attachments += 1;
            assert!(
                of_file.iter().any(|m| m.name == a.name
                    && m.container == "mail"
                    && m.md5.as_deref() == Some(&a.md5)
                    && m.sha1.as_deref() == Some(&a.sha1)),
                "{path}: attachment {} (md5 {}) not among {of_file:#?}",
                a.name,
                a.md5
            );
        }
        let name = f.name.to_ascii_lowercase();
        if [".zip", ".docx", ".xlsx"].iter().any(|e| name.ends_with(e)) {
            for (member, md5) in unzip_members(scratch.path(), &file_bytes(&image, f)) {
                zip_members += 1;
                assert!(
                    of_file
                        .iter()
                        .any(|m| m.member == member && m.md5.as_deref() == Some(&md5)),
                    "{path}: member {member} (md5 {md5}) not among {of_file:#?}"
                );
            }
        }
    }
    eprintln!(
        "{test}: {} members found; {attachments} manifest attachments and {zip_members} unzip members among them",
        members.len()
    );
    assert!(
        attachments > 0 && zip_members > 0,
        "the corpus has compound files"
    );

    // Every file, member and carved item is an FTK item with properties.
    let files = reader.row_count("files").unwrap();
    let carved = reader.row_count("carved_items").unwrap();
    let items = reader.row_count("ftk_items").unwrap();
    // The evidence and its volumes are items too.
    assert!(
        items >= files + members.len() as u64 + carved + 2,
        "{items} items for {files} files, {} members, {carved} carved",
        members.len()
    );
    let properties = reader.row_count("ftk_item_properties").unwrap();
    assert!(
        properties >= 3 * items,
        "{properties} properties, {items} items"
    );
    drop(opened);
    common::assert_no_server_left(work.path());

    // One thread gives the same members, in the same order, and the same
    // FTK rows.
    let (single, _) = ftk4_run("ftk4-single", "1");
    let report = caseload_engine::run::load_run_json(&single).unwrap();
    let mut again = caseload_engine::casedb::open_case(&report.database, None).unwrap();
    let reader = again.reader();
    assert_eq!(reader.extracted_items().unwrap(), members);
    assert_eq!(reader.row_count("ftk_items").unwrap(), items);
    assert_eq!(reader.row_count("ftk_item_properties").unwrap(), properties);
    drop(again);
    common::assert_no_server_left(work.path());

    // Small transactions: the walk commits every few writes.
    let walk = &run["stages"][0]["database_work"];
    let (writes, txns) = (
        walk["writes"].as_u64().unwrap(),
        walk["transactions"].as_u64().unwrap(),
    );
    assert!(
        txns * 10 >= writes,
        "{writes} writes in {txns} transactions"
    );
    // The members went through the temp channel (ADTemp).
    let temp = &hashing["channels"]["temp"];
    let extracted = details["extracted_bytes"].as_u64().unwrap();
    for figure in ["bytes_written", "bytes_read"] {
        assert_eq!(temp[figure].as_u64(), Some(extracted), "{temp}");
    }
}

/// Per file (path, whether live): its kff verdict.
type FileVerdicts = BTreeMap<(String, bool), Option<String>>;

/// The files' kff verdicts and the extracted members', from a finished
/// case.
fn kff_verdicts(case: &Path) -> (FileVerdicts, Vec<Option<String>>) {
    let report = caseload_engine::run::load_run_json(case).unwrap();
    let mut opened = caseload_engine::casedb::open_case(&report.database, None).unwrap();
    let reader = opened.reader();
    let mut files = BTreeMap::new();
    reader
        .list_files::<caseload_engine::casedb::DbError>(&mut |f| {
            if f.kind == "file" {
                files.insert((f.path, f.allocated), f.kff);
            }
            Ok(())
        })
        .unwrap();
    let members = reader
        .extracted_items()
        .unwrap()
        .into_iter()
        .map(|m| m.kff)
        .collect();
    (files, members)
}

/// ftk4 keeps the KFF library in the case database: the kff stage's
/// preparation copies the chosen sets into PostgreSQL tables (outside the
/// stage's time) and every lookup is a query there; the verdicts are the
/// ones the library file gives (the native profile, checked against the
/// manifest by kff_corpus). The server's temporary files (dbTemp) go to the
/// temp channel: with little sort memory the library's key build spills,
/// the spill is charged to the temp channel, and the tablespace is gone
/// when the case closes.
#[test]
fn ftk4_profile_keeps_the_kff_library_in_the_case_database_and_db_temp_on_the_temp_channel() {
    let test =
        "ftk4_profile_keeps_the_kff_library_in_the_case_database_and_db_temp_on_the_temp_channel";
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    let ev = work.path().join("ev");
    common::run_ok(
        common::caseload()
            .args([
                "corpus",
                "--size",
                "32MiB",
                "--seed",
                "5",
                "--profile",
                "suspect",
                "--decoys",
                "60000",
                "--out",
            ])
            .arg(&ev),
    );
    let manifest: caseload_corpus::manifest::Manifest =
        serde_json::from_slice(&std::fs::read(ev.join("manifest.json")).unwrap()).unwrap();
    let sets: Vec<String> = [
        "known=NSRLFile.txt",
        "notable=notable.md5",
        "notable=notable.sha1",
    ]
    .iter()
    .map(|s| {
        let (c, f) = s.split_once('=').unwrap();
        format!("{c}={}", ev.join(f).display())
    })
    .collect();
    let kff_run = |name: &str, profile: &str, extra: &[&str]| {
        let case = work.path().join(name);
        std::fs::create_dir_all(&case).unwrap();
        let mut cmd =
            common::stage_run("filesystem,file-hash,kff", &ev.join("image.dd"), &case, &[]);
        cmd.args(["--profile", profile, "--json", "--kff-library"])
            .arg(work.path().join("kff.sqlite"))
            .args(extra);
        for s in &sets {
            cmd.args(["--hashset", s]);
        }
        let out = common::run_ok(&mut cmd);
        common::assert_no_server_left(work.path());
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (case, run)
    };
    let (native_case, native) = kff_run("native", "native", &[]);
    let (case, run) = kff_run(
        "ftk4",
        "ftk4",
        &[
            "--pg-setting",
            "maintenance_work_mem=1MB",
            "--pg-setting",
            "work_mem=64kB",
        ],
    );

    // The preparation loaded every hash of the chosen sets.
    let prep = &run["preparation"][0];
    assert_eq!(prep["stage"], "kff", "{}", run["preparation"]);
    let listed: u64 = native["stages"][2]["summary"]["details"]["sets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["hashes"].as_u64().unwrap())
        .sum();
    let loaded: u64 = ["md5_rows", "sha1_rows", "sha256_rows"]
        .iter()
        .map(|k| prep["details"][k].as_u64().unwrap())
        .sum();
    assert_eq!(loaded, listed, "{prep}");
    assert!(loaded > 120_000, "{loaded} hashes: decoys and planted");
    assert!(native.get("preparation").is_none(), "native loads nothing");

    // Looked up on the server; the same verdicts as the library file's.
    let kff = &run["stages"][2]["summary"]["details"];
    assert!(kff["looked_up_in"].is_string(), "{kff}");
    for k in ["files_looked_up", "known_files", "notable_files"] {
        assert_eq!(kff[k], native["stages"][2]["summary"]["details"][k], "{k}");
    }
    let hs = &manifest.hash_sets;
    assert!(
        kff["known_files"].as_u64().unwrap() > 0 && kff["notable_files"].as_u64().unwrap() > 0,
        "{kff} ({hs:?})"
    );
    let (files, members) = kff_verdicts(&case);
    let (native_files, _) = kff_verdicts(&native_case);
    assert_eq!(files, native_files);
    // Members of compound files are looked up too.
    assert_eq!(
        kff["extracted_looked_up"].as_u64(),
        Some(members.len() as u64)
    );
    assert_eq!(
        kff["known_extracted"].as_u64().unwrap() + kff["notable_extracted"].as_u64().unwrap(),
        members.iter().filter(|k| k.is_some()).count() as u64
    );
    // The lookups read the database channel (the server's processes).
    assert!(
        run["stages"][2]["channels"]["database"]["read_ops"]
            .as_u64()
            .unwrap()
            > 0
    );

    // dbTemp: the key build spilled into the temp channel's tablespace.
    let temp = &run["database"]["server_temp"];
    let spilled = temp["bytes"].as_u64().unwrap_or(0);
    assert!(spilled > 0, "{}", run["database"]);
    let dir = std::path::PathBuf::from(temp["dir"].as_str().unwrap());
    assert!(dir.ends_with("dbTemp"), "{}", dir.display());
    assert!(!dir.exists(), "dbTemp is removed when the case closes");
    let temp_written = run["totals"]["channels"]["temp"]["bytes_written"]
        .as_u64()
        .unwrap();
    assert!(temp_written >= spilled, "{temp_written} < {spilled}");
    assert!(
        native["database"].get("server_temp").is_none(),
        "{}",
        native["database"]
    );
}
