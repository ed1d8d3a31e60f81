//! The case database on PostgreSQL, checked against the same runs on
//! SQLite: identical exports, search results and KFF hits on a corpus and
//! on the real images; server I/O that adds up with the data directory's
//! growth; a server killed mid-run, a full database channel and bad set-ups
//! failing clearly; no server process left behind by any test.
//!
//! Every test needs PostgreSQL's server binaries (Debian: `postgresql`) and
//! says SKIPPED without them.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// `caseload run` of `stages` over `evidence` with every channel in
/// `dir`, warm cache, plus `extra` flags.
fn run_cmd(evidence: &Path, dir: &Path, stages: &str, extra: &[&str]) -> Command {
    run_cmd_db(evidence, dir, dir, stages, extra)
}

/// [`run_cmd`] with the database channel in `db`.
fn run_cmd_db(evidence: &Path, db: &Path, dir: &Path, stages: &str, extra: &[&str]) -> Command {
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = common::caseload();
    cmd.args(["run", "--cache", "warm", "--stages", stages])
        .arg("--evidence")
        .arg(evidence)
        .arg("--database")
        .arg(db);
    for flag in ["--case", "--temp"] {
        cmd.arg(flag).arg(dir);
    }
    cmd.args(extra);
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Stage details that must not depend on the engine (timings and the
/// library path aside).
fn details(run: &Value) -> Vec<(String, Value)> {
    run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut d = s["summary"]["details"].clone();
            if let Some(o) = d.as_object_mut() {
                // The library's path, and what varies run to run on one
                // engine too (timings, tantivy's segment bytes).
                o.retain(|k, _| {
                    !(k == "library"
                        || k.ends_with("_seconds")
                        || k.ends_with("_mb_per_s")
                        || k.starts_with("index_"))
                });
            }
            (s["name"].as_str().unwrap().to_string(), d)
        })
        .collect()
}

/// The same case on both engines reads the same: every export format byte
/// for byte, stage results, and (with an index) search results.
fn assert_same_case(lite: &Path, pg: &Path, queries: &[&str]) {
    for format in ["bodyfile", "dfxml", "csv"] {
        let (a, b) = (
            common::export(lite, format, &[]),
            common::export(pg, format, &[]),
        );
        assert!(!a.is_empty());
        assert!(
            a == b,
            "{format} differs between SQLite ({}) and PostgreSQL ({})",
            lite.display(),
            pg.display()
        );
    }
    let (a, b) = (common::run_json(lite), common::run_json(pg));
    assert_eq!(a["database"]["backend"], "sqlite");
    assert_eq!(b["database"]["backend"], "postgres");
    assert_eq!(details(&a), details(&b));
    for q in queries {
        assert_eq!(
            common::search_json(lite, q, &[]),
            common::search_json(pg, q, &[]),
            "search `{q}`"
        );
    }
}

#[test]
fn sqlite_and_postgres_cases_of_a_corpus_read_the_same() {
    let test = "sqlite_and_postgres_cases_of_a_corpus_read_the_same";
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    let (image, manifest) =
        common::corpus(&work.path().join("ev"), &["--size", "48MiB", "--seed", "5"]);
    let ev = work.path().join("ev");
    let hashsets = [
        "--hashset".to_string(),
        format!("known={}", ev.join("NSRLFile.txt").display()),
        "--hashset".to_string(),
        format!("notable={}", ev.join("notable.md5").display()),
    ];
    let hs: Vec<&str> = hashsets.iter().map(String::as_str).collect();
    let stages = "image-hash,filesystem,file-hash,index,carve,kff";
    let lite = work.path().join("lite");
    let pg = work.path().join("pg");
    common::run_ok(&mut run_cmd(&image, &lite, stages, &hs));
    let mut pg_args = hs.clone();
    pg_args.extend(["--db-engine", "postgres"]);
    common::run_ok(&mut run_cmd(&image, &pg, stages, &pg_args));
    common::assert_no_server_left(work.path());
    let word = manifest
        .files
        .iter()
        .flat_map(|f| &f.keywords)
        .map(|k| k.token.clone())
        .next()
        .unwrap_or_else(|| "the".into());
    assert_same_case(
        &lite,
        &pg,
        &[&word, "fragment*", "\"known file\" OR notable"],
    );
    // KFF found something to agree on.
    let kff = &common::run_json(&pg)["stages"][5]["summary"]["details"];
    assert!(kff["hits"].as_u64().unwrap() > 0, "{kff}");
    // Reading a finished case started its server again and stopped it.
    common::assert_no_server_left(work.path());
}

#[test]
fn sqlite_and_postgres_cases_of_the_real_images_read_the_same() {
    let test = "sqlite_and_postgres_cases_of_the_real_images_read_the_same";
    let Some(real) = common::real_images(test) else {
        return;
    };
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    for (i, image) in [
        "dftt/6-undel-fat/6-fat-undel.dd",
        "dftt/7-undel-ntfs/7-ntfs-undel.dd",
        "dftt/8-jpeg-search/8-jpeg-search.dd",
        "ewf/nps-2010-emails.E01",
        "ewf/imageformat_mmls_1.E01",
    ]
    .iter()
    .enumerate()
    {
        let image = real.join(image);
        let stages = "filesystem,file-hash,index,carve";
        let lite = work.path().join(format!("lite{i}"));
        let pg = work.path().join(format!("pg{i}"));
        common::run_ok(&mut run_cmd(&image, &lite, stages, &[]));
        common::run_ok(&mut run_cmd(
            &image,
            &pg,
            stages,
            &["--db-engine", "postgres"],
        ));
        assert_same_case(&lite, &pg, &["jpg OR jpeg", "mail*"]);
    }
    common::assert_no_server_left(work.path());
}

#[test]
fn a_private_cluster_is_charged_with_its_own_io() {
    let test = "a_private_cluster_is_charged_with_its_own_io";
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "9"]);
    let dir = work.path().join("pg");
    // One operation per transaction: enough commits, WAL syncs and page
    // writes that the figures mean something.
    common::run_ok(&mut run_cmd(
        &image,
        &dir,
        "filesystem,file-hash,carve",
        &["--db-engine", "postgres", "--batch-size", "1"],
    ));
    common::assert_no_server_left(work.path());
    let run = common::run_json(&dir);
    let db = &run["database"];
    assert_eq!(db["backend"], "postgres");
    assert!(db["engine"].as_str().unwrap().starts_with("PostgreSQL "));
    assert_eq!(db["settings"]["fsync"], "on");
    assert_eq!(db["settings"]["track_io_timing"], "on");
    assert!(db["accounting"].as_str().unwrap().contains("/proc/PID/io"));
    assert!(db.get("note").is_none(), "{db}");
    let start = db["bytes_at_start"].as_u64().unwrap();
    let end = db["bytes_at_end"].as_u64().unwrap();
    let growth = end.saturating_sub(start);
    let total = &run["totals"]["channels"]["database"];
    let written = total["bytes_written"].as_u64().unwrap();
    // Every byte the data directory grew by was written by a server
    // process we counted, but for the statistics file PostgreSQL writes at
    // shutdown, after the last sample (tolerance 256 KiB); and nothing near
    // ten times the growth was counted.
    assert!(
        written + (256 << 10) >= growth,
        "counted {written} B written, the data directory grew {growth} B"
    );
    assert!(
        written <= 10 * growth + (32 << 20),
        "counted {written} B written for {growth} B of growth"
    );
    assert!(
        growth > 100 << 10,
        "the stages grew the database: {growth} B"
    );
    assert!(total["write_ops"].as_u64().unwrap() > 0);
    assert!(total["fsyncs"].as_u64().unwrap() > 0, "{total}");
    // Per stage: the commit-per-row stages wrote and synced on the channel.
    for s in run["stages"].as_array().unwrap() {
        let d = &s["channels"]["database"];
        if s["name"] == "filesystem" || s["name"] == "file-hash" {
            assert!(d["bytes_written"].as_u64().unwrap() > 0, "{s}");
            assert!(d["fsyncs"].as_u64().unwrap() > 0, "{s}");
        }
    }
}

/// The postmaster's pid from its pid file, once the server is up.
fn postmaster(data_dir: &Path, limit: Duration) -> Option<i32> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Ok(text) = std::fs::read_to_string(data_dir.join("postmaster.pid"))
            && text.lines().count() >= 8
        {
            return text.lines().next().and_then(|l| l.trim().parse().ok());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Files whose hashes are committed, read with psql over the cluster's socket.
fn hashed_files(data_dir: &Path) -> Option<u64> {
    let out = Command::new("psql")
        .args(["-X", "-A", "-t", "-U", "caseload", "-d", "postgres", "-h"])
        .arg(data_dir)
        .args(["-c", "SELECT count(*) FROM files WHERE md5 IS NOT NULL"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn wait_exit(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    None
}

#[test]
fn killing_the_server_mid_run_fails_the_stage_and_loses_nothing_committed() {
    let test = "killing_the_server_mid_run_fails_the_stage_and_loses_nothing_committed";
    if !common::have_postgres(test) || !common::have_tool(test, "psql") {
        return;
    }
    let work = common::pg_tempdir();
    let (image, manifest) = common::corpus(
        &work.path().join("ev"),
        &["--size", "128MiB", "--seed", "21"],
    );
    let dir = work.path().join("pg");
    let mut child = run_cmd(
        &image,
        &dir,
        "filesystem,file-hash,index,carve",
        &[
            "--db-engine",
            "postgres",
            "--batch-size",
            "1",
            "--threads",
            "1",
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let data = dir.join("pgdata");
    let pm = postmaster(&data, Duration::from_secs(60)).expect("the server started");
    // Kill it once file-hash has committed some results: the filesystem
    // stage is complete by then, and index and carve have yet to run.
    let started = Instant::now();
    while hashed_files(&data).unwrap_or(0) == 0 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill has no memory preconditions; `pm` is the test's own
    // cluster's postmaster.
    assert_eq!(unsafe { libc::kill(pm, libc::SIGKILL) }, 0);
    let status = wait_exit(&mut child, Duration::from_secs(120)).expect("caseload did not hang");
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success(), "a run whose server died cannot succeed");
    common::assert_no_server_left(work.path());
    let run = common::run_json(&dir);
    // The database channel failed: the run stopped at that stage.
    assert_eq!(run["status"], "failed", "{err}");
    assert_eq!(run["channel_fault"]["channel"], "database", "{run}");
    assert!(err.contains("the database channel failed"), "{err}");
    let stages = run["stages"].as_array().unwrap();
    assert_eq!(stages.last().unwrap()["status"], "failed", "{run}");
    assert_eq!(stages[0]["name"], "filesystem");
    assert_eq!(stages[0]["status"], "completed");
    let failed: Vec<&Value> = stages.iter().filter(|s| s["status"] == "failed").collect();
    assert!(!failed.is_empty(), "{run}");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("no longer running"),
        "{}",
        failed[0]["error"]
    );
    // The server recovers the committed work: every record the completed
    // filesystem stage wrote is in the export.
    let body = common::export(&dir, "bodyfile", &[]);
    let lines = body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    assert!(
        lines >= manifest.files.len(),
        "{lines} records exported, {} files in the manifest",
        manifest.files.len()
    );
    common::assert_no_server_left(work.path());
}

#[test]
fn bad_postgres_set_ups_fail_clearly_and_leave_nothing() {
    let test = "bad_postgres_set_ups_fail_clearly_and_leave_nothing";
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "3"]);
    // What, flags, environment, and what the error must say.
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "no binaries",
            vec!["--db-engine", "postgres"],
            vec![("CASELOAD_PG_BINDIR", "/nonexistent")],
            "PostgreSQL server binaries",
        ),
        (
            "bad setting",
            vec![
                "--db-engine",
                "postgres",
                "--pg-setting",
                "shared_buffers=bogus",
            ],
            vec![],
            "invalid value for parameter \"shared_buffers\"",
        ),
        (
            "unreachable server",
            vec!["--db-url", "postgres://caseload@127.0.0.1:9/case"],
            vec![],
            "cannot reach the PostgreSQL server",
        ),
        (
            "not a url",
            vec!["--db-url", "host=/nonexistent port=x"],
            vec![],
            "not a PostgreSQL URL",
        ),
        (
            "fixed setting",
            vec!["--db-engine", "postgres", "--pg-setting", "port=5433"],
            vec![],
            "caseload sets `port` itself",
        ),
        (
            "sqlite with a url",
            vec!["--db-engine", "sqlite", "--db-url", "postgres://x/y"],
            vec![],
            "cannot go with --db-engine sqlite",
        ),
    ];
    for (i, (what, args, env, expected)) in cases.into_iter().enumerate() {
        let dir = work.path().join(format!("case{i}"));
        let mut cmd = run_cmd(&image, &dir, "filesystem", &args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success(), "{what}");
        assert!(stderr(&out).contains(expected), "{what}: {}", stderr(&out));
        for leftover in ["pgdata", "postgresql.log", "case.sqlite", "run.json"] {
            assert!(!dir.join(leftover).exists(), "{what} left {leftover}");
        }
    }
    // Root: the account the server runs as must reach the database directory.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let closed = work.path().join("closed");
        std::fs::create_dir_all(closed.join("db")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let out = run_cmd_db(
            &image,
            &closed.join("db"),
            &work.path().join("c"),
            "filesystem",
            &["--db-engine", "postgres"],
        )
        .output()
        .unwrap();
        assert!(!out.status.success());
        assert!(stderr(&out).contains("cannot reach"), "{}", stderr(&out));
    }
    common::assert_no_server_left(work.path());
}

/// A tmpfs of `bytes` mounted at `at` (root only), unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, bytes: u64) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={}k,mode=755", bytes.div_ceil(4096) * 4))
            .arg("caseload-test")
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_database_channel_fails_the_stage_with_its_cause() {
    let test = "a_full_database_channel_fails_the_stage_with_its_cause";
    if !common::have_postgres(test) {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED {test}: mounting a small tmpfs needs root");
        return;
    }
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(
        &work.path().join("ev"),
        &["--size", "32MiB", "--seed", "13"],
    );
    let stages = "filesystem,file-hash,carve";
    let flags = ["--db-engine", "postgres", "--batch-size", "1"];
    // Runs on ample space say how big the cluster is with the case schema
    // alone (a run whose stage writes next to nothing) and after the stages.
    let end_size = |stages: &str, name: &str| -> u64 {
        let probe = work.path().join(name);
        common::run_ok(&mut run_cmd(&image, &probe, stages, &flags));
        common::run_json(&probe)["database"]["bytes_at_end"]
            .as_u64()
            .unwrap()
    };
    let (schema, full) = (end_size("image-hash", "probe0"), end_size(stages, "probe1"));
    assert!(full > schema + (64 << 10), "{schema} {full}");
    // Now a database channel with room for the schema and half the stages'
    // growth.
    let Some(fs) = Tmpfs::mount(&work.path().join("small"), schema + (full - schema) / 2) else {
        eprintln!("SKIPPED {test}: could not mount a tmpfs");
        return;
    };
    let dir = work.path().join("case");
    // Past the up-front room check (preflight.rs tests it), to see the
    // server meet the full disk.
    let out = run_cmd_db(&image, &fs.0, &dir, stages, &flags)
        .arg("--no-room-check")
        .output()
        .unwrap();
    common::assert_no_server_left(work.path());
    let full = |s: &str| s.contains("No space left on device") || s.contains("could not extend");
    if out.status.success() {
        panic!("a full database channel went unnoticed: {}", stderr(&out));
    }
    match std::fs::read(dir.join("run.json")) {
        // The run started: a stage failed with the cause, and the report of
        // what ran is there.
        Ok(bytes) => {
            let run: Value = serde_json::from_slice(&bytes).unwrap();
            let errors: Vec<String> = run["stages"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|s| s["error"].as_str().map(str::to_string))
                .collect();
            assert!(errors.iter().any(|e| full(e)), "{errors:#?}");
            eprintln!("{test}: the run failed mid-way: {}", errors[0]);
        }
        // The cluster itself did not fit: the run refused with the cause.
        Err(_) => {
            assert!(full(&stderr(&out)), "{}", stderr(&out));
            eprintln!("{test}: the run refused: {}", stderr(&out));
        }
    }
    drop(fs);
}

#[test]
fn a_case_of_the_other_engine_is_replaced_only_with_force() {
    let test = "a_case_of_the_other_engine_is_replaced_only_with_force";
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "4"]);
    let dir = work.path().join("case");
    common::run_ok(&mut run_cmd(&image, &dir, "filesystem", &[]));
    let pg = ["--db-engine", "postgres"];
    let out = run_cmd(&image, &dir, "filesystem", &pg).output().unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("already holds a case"),
        "{}",
        stderr(&out)
    );
    assert!(
        dir.join("case.sqlite").is_file(),
        "the SQLite case is untouched"
    );
    common::run_ok(&mut run_cmd(
        &image,
        &dir,
        "filesystem",
        &["--db-engine", "postgres", "--force"],
    ));
    assert!(!dir.join("case.sqlite").exists());
    assert_eq!(common::run_json(&dir)["database"]["backend"], "postgres");
    // And back: a PostgreSQL case in the directory is refused, then replaced.
    let out = run_cmd(&image, &dir, "filesystem", &[]).output().unwrap();
    assert!(!out.status.success());
    common::run_ok(&mut run_cmd(&image, &dir, "filesystem", &["--force"]));
    assert!(!dir.join("pgdata").exists());
    assert_eq!(common::run_json(&dir)["database"]["backend"], "sqlite");
    common::assert_no_server_left(work.path());
}

#[test]
fn an_existing_server_holds_the_case_with_db_url() {
    use caseload_engine::casedb::postgres::cluster::{Cluster, server_user};
    let test = "an_existing_server_holds_the_case_with_db_url";
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "6"]);
    // The lab's server: a cluster of the test's own, reached by its URL.
    let server_dir = work.path().join("server");
    std::fs::create_dir_all(&server_dir).unwrap();
    let user = server_user(None).unwrap();
    let mut server = Cluster::create(&server_dir, &[], user.as_ref()).unwrap();
    let url = match server.endpoint() {
        caseload_engine::casedb::postgres::cluster::Endpoint::Socket(dir, port) => format!(
            "postgres:///postgres?user=caseload&host={}&port={port}",
            dir.display()
        ),
        caseload_engine::casedb::postgres::cluster::Endpoint::Tcp(port) => {
            format!("postgres://caseload@127.0.0.1:{port}/postgres")
        }
    };
    let stages = "filesystem,file-hash,carve";
    let lite = work.path().join("lite");
    let remote = work.path().join("remote");
    common::run_ok(&mut run_cmd(&image, &lite, stages, &[]));
    common::run_ok(&mut run_cmd(&image, &remote, stages, &["--db-url", &url]));
    let run = common::run_json(&remote);
    assert_eq!(run["database"]["backend"], "postgres");
    assert!(
        run["database"]["accounting"]
            .as_str()
            .unwrap()
            .contains("external")
    );
    assert!(
        !remote.join("pgdata").exists(),
        "no private cluster was made"
    );
    // A second case into the same database is refused without --force.
    let again = work.path().join("again");
    let out = run_cmd(&image, &again, stages, &["--db-url", &url])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("already holds a case"),
        "{}",
        stderr(&out)
    );
    for format in ["bodyfile", "dfxml", "csv"] {
        assert!(
            common::export(&lite, format, &[])
                == common::export(&remote, format, &["--db-url", &url])
        );
    }
    // --force replaces it, whichever profile's tables either case has.
    for (name, profile) in [("forced-ftk4", "ftk4"), ("forced-native", "native")] {
        let dir = work.path().join(name);
        common::run_ok(&mut run_cmd(
            &image,
            &dir,
            stages,
            &["--db-url", &url, "--force", "--profile", profile],
        ));
        assert_eq!(
            common::run_json(&dir)["database"]["options"]["profile"],
            profile
        );
    }
    server.stop().unwrap();
    common::assert_no_server_left(work.path());
}

#[test]
fn instances_and_comparisons_run_on_private_clusters() {
    let test = "instances_and_comparisons_run_on_private_clusters";
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "8"]);
    let dir = work.path().join("inst");
    let out = common::run_ok(&mut run_cmd(
        &image,
        &dir,
        "filesystem,file-hash",
        &["--db-engine", "postgres", "--instances", "2", "--json"],
    ));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        assert_eq!(r["status"], "completed");
        assert_eq!(r["database"]["backend"], "postgres");
    }
    let layout = work.path().join("layout.toml");
    let l = work.path().join("l");
    for d in ["db", "case", "temp"] {
        std::fs::create_dir_all(l.join(d)).unwrap();
    }
    std::fs::write(
        &layout,
        format!(
            "[channels]\ndatabase = \"{0}/db\"\ncase = \"{0}/case\"\ntemp = \"{0}/temp\"\n",
            l.display()
        ),
    )
    .unwrap();
    let out = common::caseload()
        .args([
            "compare",
            "--stages",
            "filesystem,file-hash",
            "--repeat",
            "1",
        ])
        .args(["--db-engine", "postgres", "--evidence"])
        .arg(&image)
        .arg("--layout")
        .arg(&layout)
        .arg("--out")
        .arg(work.path().join("cmp"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let cmp: Value =
        serde_json::from_slice(&std::fs::read(work.path().join("cmp/compare.json")).unwrap())
            .unwrap();
    assert_eq!(cmp["runs"][0]["status"], "completed", "{cmp}");
    common::assert_no_server_left(work.path());
}

#[test]
fn ctrl_c_stops_the_run_and_its_server() {
    let test = "ctrl_c_stops_the_run_and_its_server";
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "96MiB", "--seed", "2"]);
    let dir = work.path().join("pg");
    let mut child = run_cmd(
        &image,
        &dir,
        "filesystem,file-hash,index,carve",
        &[
            "--db-engine",
            "postgres",
            "--batch-size",
            "1",
            "--threads",
            "1",
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    postmaster(&dir.join("pgdata"), Duration::from_secs(60)).expect("the server started");
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill has no memory preconditions; the child is ours.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_exit(&mut child, Duration::from_secs(120)).expect("no hang");
    common::assert_no_server_left(work.path());
    let run = common::run_json(&dir);
    // Interrupted, or (on a fast machine) already done.
    assert!(
        run["status"] == "interrupted" || (status.success() && run["status"] == "completed"),
        "{}",
        run["status"]
    );
}
