//! One case, several workers (`plan`, `worker`, `status`, `report`,
//! `cluster`): four workers on a private PostgreSQL server leave the case a
//! single run leaves (exports, KFF verdicts, search results, evidence and
//! case bytes); a worker killed mid-unit loses the unit to another after
//! its lease, which redoes it once and duplicates nothing; bad set-ups are
//! refused clearly. Needs PostgreSQL's server binaries (SKIPPED without).

use crate::common;

use caseload_engine::casedb::postgres::cluster::{Cluster, Endpoint, server_user};
use md5::Digest;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const STAGES: &str = "image-hash,filesystem,file-hash,index,carve,kff";

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Channel flags: database, case and temp directories under `dir`.
fn channels(cmd: &mut Command, dir: &Path) {
    for (flag, sub) in [("--database", "db"), ("--case", "case"), ("--temp", "tmp")] {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        cmd.arg(flag).arg(d);
    }
}

/// The corpus's hash sets as `--hashset` flags.
fn hashsets(corpus: &Path) -> Vec<String> {
    vec![
        "--hashset".into(),
        format!("known={}", corpus.join("NSRLFile.txt").display()),
        "--hashset".into(),
        format!("notable={}", corpus.join("notable.md5").display()),
    ]
}

/// A server of the test's own (stopped when dropped, also on failure)
/// and its URL.
fn server(dir: &Path) -> (Cluster, String) {
    std::fs::create_dir_all(dir).unwrap();
    let user = server_user(None).unwrap();
    let server = Cluster::create(dir, &[], user.as_ref()).unwrap();
    let url = url_of(&server);
    (server, url)
}

fn url_of(server: &Cluster) -> String {
    match server.endpoint() {
        Endpoint::Socket(d, port) => format!(
            "postgres:///postgres?user=caseload&host={}&port={port}",
            d.display()
        ),
        Endpoint::Tcp(port) => format!("postgres://caseload@127.0.0.1:{port}/postgres"),
    }
}

/// A stage's detail `key` in a run.json.
fn detail(run: &Value, stage: &str, key: &str) -> Value {
    run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == stage)
        .unwrap()["summary"]["details"][key]
        .clone()
}

fn channel_bytes(run: &Value, channel: &str, field: &str) -> f64 {
    run["totals"]["channels"][channel][field].as_f64().unwrap()
}

#[test]
fn four_workers_leave_the_case_a_single_run_leaves() {
    let test = "four_workers_leave_the_case_a_single_run_leaves";
    if !common::have_postgres(test) {
        return;
    }
    let _serial = common::lab_lock();
    let work = common::pg_tempdir();
    let (image, manifest) = common::corpus(
        &work.path().join("ev"),
        &["--size", "48MiB", "--seed", "11"],
    );
    let corpus = image.parent().unwrap().to_path_buf();
    let single = work.path().join("single");
    let mut cmd = common::caseload();
    cmd.args([
        "run",
        "--cache",
        "warm",
        "--threads",
        "1",
        "--db-engine",
        "postgres",
    ])
    .args(["--stages", STAGES])
    .arg("--evidence")
    .arg(&image)
    .args(hashsets(&corpus));
    channels(&mut cmd, &single);
    common::run_ok(&mut cmd);

    let many = work.path().join("cluster");
    let mut cmd = common::caseload();
    cmd.args([
        "cluster",
        "--workers",
        "4",
        "--threads",
        "1",
        "--batch-files",
        "7",
        "--batch-bytes",
        "2MiB",
    ])
    .args(["--stages", STAGES])
    .arg("--evidence")
    .arg(&image)
    .args(hashsets(&corpus));
    channels(&mut cmd, &many);
    common::run_ok(&mut cmd);
    common::assert_no_server_left(work.path());

    let (one, four) = (single.join("case"), many.join("case"));
    for format in ["bodyfile", "dfxml", "csv"] {
        let (a, b) = (
            common::export(&one, format, &[]),
            common::export(&four, format, &[]),
        );
        assert!(!a.is_empty());
        assert!(
            a == b,
            "{format} export differs between the single run and the cluster"
        );
    }
    let queries: Vec<String> = manifest
        .files
        .iter()
        .flat_map(|f| f.keywords.iter().map(|k| k.token.clone()))
        .take(8)
        .collect();
    assert!(!queries.is_empty());
    for q in &queries {
        let (a, b) = (
            common::search_json(&one, q, &[]),
            common::search_json(&four, q, &[]),
        );
        assert_eq!(a, b, "search {q}");
    }
    let (a, b) = (common::run_json(&one), common::run_json(&four));
    assert_eq!(b["status"], "completed");
    crate::run_json::check(&b, "cluster run.json");
    // KFF's verdicts and hits, and every stage's result counts.
    for (stage, key) in [
        ("kff", "hits"),
        ("kff", "known_files"),
        ("kff", "notable_files"),
        ("kff", "known_carved"),
        ("file-hash", "files_hashed"),
        ("file-hash", "duplicate_groups"),
        ("carve", "carved_items"),
        ("carve", "data_valid"),
        ("carve", "meta_valid"),
        ("carve", "meta_invalid"),
        ("carve", "followed"),
        ("image-hash", "md5"),
    ] {
        assert_eq!(
            detail(&a, stage, key),
            detail(&b, stage, key),
            "{stage} {key}"
        );
    }
    // Carving was split by regions, and its finish gave every item the id,
    // and every file the path and bytes, a single run gives them.
    let parts = detail(&b, "carve", "batches").as_u64().unwrap();
    assert!(parts >= 4, "carve parts of 2 MiB: {parts}");
    let (x, y) = (carved_files(&one), carved_files(&four));
    assert!(x.len() > 10, "{} carved files", x.len());
    assert!(
        x == y,
        "carved files differ: single run {} files, cluster {}; first difference {:?}",
        x.len(),
        y.len(),
        x.iter().zip(&y).find(|(p, q)| p != q)
    );
    // Every unit done exactly once, by the four workers together.
    let d = &b["distributed"];
    let units = d["units"].as_u64().unwrap();
    assert_eq!(d["units_done"].as_u64().unwrap(), units);
    assert_eq!(d["units_redone"].as_u64().unwrap(), 0);
    let workers = d["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 4);
    let by_workers: u64 = workers.iter().map(|w| w["units"].as_u64().unwrap()).sum();
    assert_eq!(by_workers, units);
    assert!(
        units >= 10,
        "file-hash was split into batches of 7 files: {units} units"
    );
    assert!(workers.iter().all(|w| w["state"] == "finished"));
    assert!(d["coordination"]["claims"].as_u64().unwrap() >= units);
    assert!(!d["throughput"].as_array().unwrap().is_empty());
    let page = std::fs::read_to_string(four.join("report.html")).unwrap();
    assert!(page.contains("<svg") && page.contains("evidence read MB/s"));
    for w in workers {
        assert!(page.contains(&format!("<td>{}</td>", w["name"].as_str().unwrap())));
    }
    // The model of this case gives a stage no more workers than units it
    // can run at once: the whole stages' times stay, the batched ones
    // spread.
    let out = common::run_ok(
        common::caseload()
            .args(["model", "--json", "--workers", "1,4", "--run"])
            .arg(four.join("run.json")),
    );
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut spread = 0;
    for s in m["stages"].as_array().unwrap() {
        let t = s["predicted_s"].as_array().unwrap();
        let (one, four) = (t[0].as_f64().unwrap(), t[1].as_f64().unwrap());
        if ["file-hash", "index", "kff", "carve"].contains(&s["name"].as_str().unwrap()) {
            assert!(s["parallel_units"].as_u64().unwrap() >= 4, "{s}");
            // A stage whose time is all the shared database's gains
            // nothing from more workers (kff on this small case can be).
            assert!(four <= one + 1e-12, "{s}");
            if four < one {
                spread += 1;
            }
        } else {
            assert_eq!(s["parallel_units"], 1, "{s}");
            assert!((four - one).abs() < 1e-12, "{s}");
        }
    }
    assert!(
        spread >= 2,
        "batched stages faster with four workers: {spread}"
    );
    // The same evidence and case bytes, within a stated tolerance. Case
    // bytes within 5%: the case directory also holds the index batches'
    // shards until the finish merges them (written once more there:
    // `shard_bytes`). Evidence bytes within 8%: batches and carve parts
    // read what the whole stage reads, but each worker keeps its own
    // read-ahead runs, so a run read by two workers is read twice, and
    // how often depends on which worker took which unit (measured on
    // this case: +2.2% to +5.6% over a single run's 152 MB, mostly
    // index batches).
    let shards = detail(&b, "index", "shard_bytes").as_f64().unwrap();
    assert!(shards > 0.0);
    for (channel, field, extra, tolerance) in [
        ("evidence", "bytes_read", 0.0, 0.08),
        ("case", "bytes_written", shards, 0.05),
    ] {
        let (x, y) = (
            channel_bytes(&a, channel, field) + extra,
            channel_bytes(&b, channel, field),
        );
        assert!(
            (y - x).abs() <= tolerance * x,
            "{channel} {field}: single run (+ shards) {x}, four workers {y}"
        );
    }
}

#[test]
fn carving_split_into_parts_numbers_and_names_items_as_a_single_run_does() {
    let test = "carving_split_into_parts_numbers_and_names_items_as_a_single_run_does";
    if !common::have_postgres(test) {
        return;
    }
    let _serial = common::lab_lock();
    let work = common::pg_tempdir();
    // A suspect FAT disk (deleted entries whose clusters overlap: the
    // finish's FAT conflict check), and an NTFS disk with deleted
    // fragmented files (carved again along their runs: followed items,
    // numbered after the scan's).
    for (name, args) in [
        (
            "fat",
            &[
                "--size",
                "48MiB",
                "--seed",
                "5",
                "--profile",
                "suspect",
                "--fs",
                "fat",
            ][..],
        ),
        (
            "ntfs",
            &[
                "--size",
                "80MiB",
                "--seed",
                "5",
                "--fs",
                "ntfs",
                "--fragmented-share",
                "0.5",
                "--deleted-share",
                "0.4",
            ][..],
        ),
    ] {
        let (image, _) = common::corpus(&work.path().join(name), args);
        let (one, three) = single_and_cluster(
            &work.path().join(name),
            &image,
            "filesystem,carve",
            &["--batch-bytes", "1MiB"],
        );
        let (a, b) = (common::run_json(&one), common::run_json(&three));
        assert!(
            detail(&b, "carve", "batches").as_u64().unwrap() >= 8,
            "{name}"
        );
        let wanted = if name == "fat" {
            "meta_invalid"
        } else {
            "followed"
        };
        assert!(
            detail(&a, "carve", wanted).as_u64().unwrap() > 0,
            "{name} {wanted}"
        );
        // Every count of the single run, summed over the parts and the
        // finish.
        let single_details = a["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "carve")
            .unwrap()["summary"]["details"]
            .as_object()
            .unwrap()
            .clone();
        for (key, value) in single_details {
            assert_eq!(detail(&b, "carve", &key), value, "{name}: carve {key}");
        }
        let (x, y) = (carved_files(&one), carved_files(&three));
        assert!(!x.is_empty(), "{name}");
        assert!(x == y, "{name}: carved files differ");
        // No provisional name is left.
        assert!(!y.iter().any(|(p, _)| p.contains("provisional")), "{name}");
    }
}

#[test]
fn workers_in_network_namespaces_reach_the_server_over_shaped_links_of_their_own() {
    let test = "workers_in_network_namespaces_reach_the_server_over_shaped_links_of_their_own";
    if !common::have_postgres(test) {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip").args(["netns", "list"]).output();
    let tc = Command::new("tc").arg("-V").output();
    let Ok(before) = ip else {
        eprintln!("SKIPPED {test}: no `ip` (iproute2)");
        return;
    };
    if !root || !before.status.success() || !tc.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED {test}: needs root, `ip netns` and `tc`");
        return;
    }
    // Namespaces and veth pairs may be refused (a container without the
    // capability, a kernel without veth): try one, and remove it.
    let probe = format!("caseload-probe-{}", std::process::id());
    let ip = |args: &[&str]| {
        Command::new("ip")
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let works = ip(&["netns", "add", &probe])
        && ip(&[
            "link", "add", "clprobe0", "type", "veth", "peer", "name", "clprobe1", "netns", &probe,
        ]);
    ip(&["link", "del", "clprobe0"]);
    ip(&["netns", "del", &probe]);
    if !works {
        eprintln!("SKIPPED {test}: this machine refuses network namespaces or veth pairs");
        return;
    }
    let _serial = common::lab_lock();
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "8"]);
    let stages = "filesystem,file-hash";
    let single = work.path().join("single");
    let mut cmd = common::caseload();
    cmd.args(["run", "--cache", "warm", "--threads", "1"])
        .args(["--db-engine", "postgres", "--stages", stages])
        .arg("--evidence")
        .arg(&image);
    channels(&mut cmd, &single);
    common::run_ok(&mut cmd);
    // 0.02 MB/s each way: the database traffic of two workers (about 100
    // kB each) takes seconds, where the whole case takes under two on
    // loopback.
    let rate = 0.02;
    let linked = work.path().join("netns");
    let mut cmd = common::caseload();
    cmd.args(["cluster", "--workers", "2", "--threads", "1", "--netns"])
        .args(["--link-mb-s", &rate.to_string(), "--batch-files", "20"])
        .args(["--stages", stages])
        .arg("--evidence")
        .arg(&image);
    channels(&mut cmd, &linked);
    let clock = Instant::now();
    common::run_ok(&mut cmd);
    let took = clock.elapsed().as_secs_f64();
    common::assert_no_server_left(work.path());
    let (one, two) = (single.join("case"), linked.join("case"));
    assert!(
        common::export(&one, "bodyfile", &[]) == common::export(&two, "bodyfile", &[]),
        "the case differs"
    );
    let b = common::run_json(&two);
    crate::run_json::check(&b, "netns cluster run.json");
    let mut most = 0u64;
    for w in b["distributed"]["workers"].as_array().unwrap() {
        let link = &w["link"];
        assert_eq!(link["rate_mb_s"], rate, "{w}");
        let (up, down) = (
            link["to_server_bytes"].as_u64().unwrap(),
            link["from_server_bytes"].as_u64().unwrap(),
        );
        // Its claims, rows and commits went over its own link.
        assert!(up > 10_000 && down > 5_000, "{w}");
        most = most.max(up).max(down);
    }
    // No faster than the links allow (tbf lets a 16 KiB burst through).
    let floor = (most as f64 - 16_384.0) / (rate * 1e6);
    assert!(floor > 2.0, "{most} bytes: too little to see the link");
    assert!(took >= floor, "{took} s for {most} bytes at {rate} MB/s");
    // Every namespace and link it made is gone.
    let after = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&after.stdout)
            .lines()
            .filter(|l| l.starts_with("caseload-"))
            .count(),
        String::from_utf8_lossy(&before.stdout)
            .lines()
            .filter(|l| l.starts_with("caseload-"))
            .count()
    );
    // Refused: a link rate without namespaces; namespaces with a server of
    // the user's own.
    let out = common::caseload()
        .args([
            "cluster",
            "--workers",
            "1",
            "--link-mb-s",
            "1",
            "--evidence",
        ])
        .arg(&image)
        .output()
        .unwrap();
    assert!(
        !out.status.success() && stderr(&out).contains("--netns"),
        "{}",
        stderr(&out)
    );
    let out = common::caseload()
        .args(["cluster", "--workers", "1", "--netns", "--db-url"])
        .arg("postgres://caseload@127.0.0.1:1/x")
        .arg("--evidence")
        .arg(&image)
        .output()
        .unwrap();
    assert!(
        !out.status.success() && stderr(&out).contains("without --db-url"),
        "{}",
        stderr(&out)
    );
}

/// `stages` on `image` by a single run on PostgreSQL and by `cluster
/// --workers 3` with `cluster_args` (one thread each), in directories
/// under `dir`; their case directories.
fn single_and_cluster(
    dir: &Path,
    image: &Path,
    stages: &str,
    cluster_args: &[&str],
) -> (PathBuf, PathBuf) {
    let single = dir.join("single");
    let mut cmd = common::caseload();
    cmd.args(["run", "--cache", "warm", "--threads", "1"])
        .args(["--db-engine", "postgres", "--stages", stages])
        .arg("--evidence")
        .arg(image);
    channels(&mut cmd, &single);
    common::run_ok(&mut cmd);
    let many = dir.join("cluster");
    let mut cmd = common::caseload();
    cmd.args(["cluster", "--workers", "3", "--threads", "1"])
        .args(cluster_args)
        .args(["--stages", stages])
        .arg("--evidence")
        .arg(image);
    channels(&mut cmd, &many);
    common::run_ok(&mut cmd);
    common::assert_no_server_left(dir);
    (single.join("case"), many.join("case"))
}

/// A disk of two volumes: the partitions of two generated disks (a FAT
/// and an NTFS one), copied behind a new MBR that lists both.
fn two_volume_disk(dir: &Path) -> PathBuf {
    let (fat, _) = common::corpus(&dir.join("a"), &["--size", "40MiB", "--seed", "21"]);
    let (ntfs, _) = common::corpus(
        &dir.join("b"),
        &["--size", "72MiB", "--seed", "22", "--fs", "ntfs"],
    );
    let mut disk = vec![0u8; 512];
    let mut at = 2048u64 * 512;
    for (slot, image) in [fat, ntfs].iter().enumerate() {
        let bytes = std::fs::read(image).unwrap();
        let entry = &bytes[0x1be..0x1ce];
        let lba = u64::from(u32::from_le_bytes(entry[8..12].try_into().unwrap()));
        let sectors = u64::from(u32::from_le_bytes(entry[12..16].try_into().unwrap()));
        let part = &bytes[(lba * 512) as usize..((lba + sectors) * 512) as usize];
        disk.resize(at as usize, 0);
        disk.extend_from_slice(part);
        let mut e = entry.to_vec();
        e[8..12].copy_from_slice(&u32::try_from(at / 512).unwrap().to_le_bytes());
        disk[0x1be + 16 * slot..0x1ce + 16 * slot].copy_from_slice(&e);
        at = (at + part.len() as u64).div_ceil(1 << 20) << 20;
    }
    disk.resize(at as usize + (1 << 20), 0);
    disk[510] = 0x55;
    disk[511] = 0xaa;
    let path = dir.join("two-volumes.dd");
    std::fs::write(&path, disk).unwrap();
    path
}

#[test]
fn a_disk_of_two_volumes_is_walked_one_volume_per_worker_and_stored_as_a_run_stores_it() {
    let test =
        "a_disk_of_two_volumes_is_walked_one_volume_per_worker_and_stored_as_a_run_stores_it";
    if !common::have_postgres(test) {
        return;
    }
    let _serial = common::lab_lock();
    let work = common::pg_tempdir();
    let image = two_volume_disk(work.path());
    let (one, three) = single_and_cluster(
        work.path(),
        &image,
        "filesystem,file-hash",
        &["--batch-files", "40"],
    );
    let (a, b) = (common::run_json(&one), common::run_json(&three));
    assert_eq!(detail(&a, "filesystem", "volumes"), 2);
    assert_eq!(detail(&a, "filesystem", "parsed_file_systems"), 2);
    for key in [
        "volumes",
        "parsed_file_systems",
        "records",
        "deleted_records",
    ] {
        assert_eq!(
            detail(&a, "filesystem", key),
            detail(&b, "filesystem", key),
            "filesystem {key}"
        );
    }
    // One part per volume, each walked by a unit of its own.
    assert_eq!(detail(&b, "filesystem", "batches"), 2);
    assert_eq!(detail(&b, "filesystem", "work_units"), 4);
    // The same rows with the same ids: every export, byte for byte.
    for format in ["bodyfile", "dfxml", "csv"] {
        let (x, y) = (
            common::export(&one, format, &[]),
            common::export(&three, format, &[]),
        );
        assert!(!x.is_empty());
        assert!(x == y, "{format} export differs");
    }
    assert_eq!(
        detail(&a, "file-hash", "files_hashed"),
        detail(&b, "file-hash", "files_hashed")
    );
    // The spools went once the finish had stored them.
    assert!(!three.join("walk-spools").exists());
}

/// The files under a case's `carved/` directory, as (path, MD5).
fn carved_files(case: &Path) -> Vec<(String, String)> {
    let root = case.join("carved");
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&root).unwrap().display().to_string();
                let digest: String = md5::Md5::digest(std::fs::read(&p).unwrap())
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                out.push((rel, digest));
            }
        }
    }
    out.sort();
    out
}

/// Poll `status --json` until `pred` holds on it.
fn wait_status(url: &str, limit: Duration, pred: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let out = common::caseload()
            .args(["status", "--json", "--db-url", url])
            .output()
            .unwrap();
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            if pred(&v) {
                return v;
            }
        }
        assert!(start.elapsed() < limit, "status never got there");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Poll `status --json` until at least `n` units are done; the status.
fn wait_done(url: &str, n: usize) -> Value {
    wait_status(url, Duration::from_secs(60), |v| {
        v["units"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u["state"] == "done")
            .count()
            >= n
    })
}

fn worker_cmd(url: &str, dir: &Path, id: &str) -> Command {
    let mut cmd = common::caseload();
    cmd.args([
        "worker",
        "--json",
        "--threads",
        "1",
        "--db-url",
        url,
        "--id",
        id,
    ]);
    channels(&mut cmd, dir);
    cmd
}

#[test]
fn a_worker_killed_mid_unit_loses_it_after_its_lease_and_it_is_redone_once() {
    let test = "a_worker_killed_mid_unit_loses_it_after_its_lease_and_it_is_redone_once";
    if !common::have_postgres(test) {
        return;
    }
    let _serial = common::lab_lock();
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "5"]);
    let (_server, url) = server(&work.path().join("server"));
    let stages = "filesystem,file-hash";
    let shared = work.path().join("shared");
    let mut plan = common::caseload();
    plan.args(["plan", "--db-url", &url, "--stages", stages])
        .args(["--batch-files", "10", "--lease-seconds", "2"])
        .arg("--evidence")
        .arg(&image);
    channels(&mut plan, &shared);
    common::run_ok(&mut plan);

    // Two plans for one case: refused; with --force the second replaces
    // the first, queue included (planned twice here, so the test goes on
    // with a fresh plan).
    let mut again = common::caseload();
    again
        .args(["plan", "--db-url", &url, "--stages", stages])
        .arg("--evidence")
        .arg(&image);
    channels(&mut again, &work.path().join("again"));
    let out = again.output().unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("already holds a case"),
        "{}",
        stderr(&out)
    );
    let mut replan = common::caseload();
    replan
        .args(["plan", "--force", "--db-url", &url, "--stages", stages])
        .args(["--batch-files", "10", "--lease-seconds", "2"])
        .arg("--evidence")
        .arg(&image);
    channels(&mut replan, &shared);
    common::run_ok(&mut replan);

    // Worker a finishes its units but holds each one a minute before
    // committing: killed there, mid-unit.
    let mut a = worker_cmd(&url, &shared, "a")
        .args(["--hold-before-commit-ms", "60000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let held = wait_status(&url, Duration::from_secs(60), |v| {
        v["units"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["state"] == "running" && u["worker"] == "a")
    });
    let held_id = held["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["state"] == "running")
        .unwrap()["id"]
        .clone();
    // Worker b starts meanwhile. For longer than the 2 s lease, a keeps
    // its unit by renewing it: b cannot take it (and nothing else is
    // ready before it).
    let b = worker_cmd(&url, &shared, "b")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let still = wait_status(&url, Duration::from_secs(5), |_| true);
    let unit = still["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["id"] == held_id)
        .unwrap()
        .clone();
    assert_eq!(unit["worker"], "a", "renewed, not taken: {unit}");
    assert_eq!(unit["attempts"], 1, "{unit}");
    assert_eq!(unit["state"], "running", "{unit}");
    // SAFETY: our own child.
    unsafe {
        libc::kill(a.id() as libc::pid_t, libc::SIGKILL);
    }
    let _ = a.wait();

    let out = b.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(b["units_redone"], 1, "{b}");
    assert!(b["finished"].as_bool().unwrap());

    let status = wait_status(&url, Duration::from_secs(5), |_| true);
    let units = status["units"].as_array().unwrap();
    assert!(units.iter().all(|u| u["state"] == "done"), "{status}");
    let redone = units.iter().find(|u| u["id"] == held_id).unwrap();
    assert_eq!(redone["attempts"], 2, "{redone}");
    assert_eq!(redone["worker"], "b");
    assert_eq!(
        units.iter().filter(|u| u["attempts"] != 1).count(),
        1,
        "only the killed unit was claimed twice: {status}"
    );

    // The report makes the shared case directory a case `export` reads:
    // the same listing as a single run, no row twice.
    let case = shared.join("case");
    common::run_ok(
        common::caseload()
            .args(["report", "--db-url", &url, "--out"])
            .arg(&case),
    );
    let run = common::run_json(&case);
    assert_eq!(run["distributed"]["units_redone"], 1);
    assert_eq!(run["status"], "completed");
    let single = work.path().join("single");
    let mut cmd = common::caseload();
    cmd.args(["run", "--cache", "warm", "--stages", stages])
        .arg("--evidence")
        .arg(&image);
    channels(&mut cmd, &single);
    common::run_ok(&mut cmd);
    let (one, shared) = (single.join("case"), &case);
    assert!(
        common::export(&one, "bodyfile", &[])
            == common::export(shared, "bodyfile", &["--db-url", &url]),
        "the bodyfile differs after the redone unit"
    );
    // Row ids come from sequences, which PostgreSQL never rolls back: the
    // redone walk's rows have new ids. Everything else is the same, row
    // for row.
    let without_ids = |csv: Vec<u8>| -> Vec<String> {
        String::from_utf8(csv)
            .unwrap()
            .lines()
            .map(|l| {
                l.split(',')
                    .enumerate()
                    .filter(|(i, _)| !matches!(i, 0 | 1 | 20))
                    .map(|(_, f)| f)
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect()
    };
    let (a, b) = (
        without_ids(common::export(&one, "csv", &[])),
        without_ids(common::export(shared, "csv", &["--db-url", &url])),
    );
    assert_eq!(a.len(), b.len(), "no row twice, none lost");
    assert_eq!(a, b);
}

#[test]
fn workers_that_cannot_work_are_refused_or_give_their_units_back() {
    let test = "workers_that_cannot_work_are_refused_or_give_their_units_back";
    if !common::have_postgres(test) {
        return;
    }
    let _serial = common::lab_lock();
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "2"]);
    let (_server, url) = server(&work.path().join("server"));
    let shared = work.path().join("shared");

    // No plan yet.
    let out = worker_cmd(&url, &shared, "early").output().unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("holds no plan"), "{}", stderr(&out));

    let mut plan = common::caseload();
    plan.args(["plan", "--db-url", &url, "--stages", "filesystem,file-hash"])
        .arg("--evidence")
        .arg(&image);
    channels(&mut plan, &shared);
    common::run_ok(&mut plan);

    // Another workload than the plan's.
    let out = worker_cmd(&url, &shared, "other")
        .args(["--stages", "filesystem,carve"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not the plan's"),
        "{}",
        stderr(&out)
    );

    // The evidence missing on this worker's mount: its first unit goes
    // back with the error, for others.
    let out = worker_cmd(&url, &shared, "blind")
        .arg("--evidence")
        .arg(work.path().join("not-mounted/image.dd"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("evidence cannot be opened here"),
        "{}",
        stderr(&out)
    );
    let status = wait_status(&url, Duration::from_secs(5), |_| true);
    let units = status["units"].as_array().unwrap();
    let given_back = units.iter().find(|u| u["failures"] == 1).unwrap();
    assert_eq!(given_back["state"], "ready");
    assert!(
        given_back["last_error"]
            .as_str()
            .unwrap()
            .contains("worker blind")
    );
    let good = worker_cmd(&url, &shared, "good").output().unwrap();
    assert!(good.status.success(), "{}", stderr(&good));
    let status = wait_status(&url, Duration::from_secs(5), |_| true);
    assert!(
        status["units"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["state"] == "done")
    );
    let workers = status["workers"].as_array().unwrap();
    let blind = workers.iter().find(|w| w["name"] == "blind").unwrap();
    assert_eq!(blind["state"], "failed");

    // A plan made by another caseload version: refused.
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .execute("UPDATE work_plan SET caseload_version = '0.0.0-other'", &[])
        .unwrap();
    drop(client);
    let out = worker_cmd(&url, &shared, "late").output().unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("planned by caseload 0.0.0-other"),
        "{}",
        stderr(&out)
    );

    // A server that is not there: retried, then a clear message.
    let out = common::caseload()
        .args(["worker", "--retry-seconds", "1", "--db-url"])
        .arg("postgres://caseload@127.0.0.1:9/case")
        .args(["--database", "/tmp", "--case", "/tmp", "--temp", "/tmp"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("gave up after") && e.contains("cannot reach"),
        "{e}"
    );

    // plan without a server, cluster on SQLite: refused.
    let mut cmd = common::caseload();
    cmd.args(["plan", "--stages", "filesystem"])
        .arg("--evidence")
        .arg(&image);
    channels(&mut cmd, &work.path().join("noserver"));
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("plan needs --db-url"),
        "{}",
        stderr(&out)
    );
    let mut cmd = common::caseload();
    cmd.args(["cluster", "--workers", "2", "--db-engine", "sqlite"])
        .args(["--stages", "filesystem"])
        .arg("--evidence")
        .arg(&image);
    channels(&mut cmd, &work.path().join("lite"));
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("lives on PostgreSQL"),
        "{}",
        stderr(&out)
    );
    common::assert_no_server_left(&work.path().join("lite"));
}

#[test]
fn a_worker_that_loses_the_server_stops_clearly_and_nothing_committed_is_lost() {
    let test = "a_worker_that_loses_the_server_stops_clearly_and_nothing_committed_is_lost";
    if !common::have_postgres(test) {
        return;
    }
    let _serial = common::lab_lock();
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "8"]);
    let server_dir = work.path().join("server");
    let (mut server, url) = server(&server_dir);
    let shared = work.path().join("shared");
    let mut plan = common::caseload();
    plan.args(["plan", "--db-url", &url, "--stages", "filesystem,file-hash"])
        .args(["--batch-files", "10"])
        .arg("--evidence")
        .arg(&image);
    channels(&mut plan, &shared);
    common::run_ok(&mut plan);

    // Each unit held a second before its commit: the server goes while
    // the worker is between commits, some units done.
    let a = worker_cmd(&url, &shared, "a")
        .args(["--hold-before-commit-ms", "1000", "--retry-seconds", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let before = wait_done(&url, 2);
    server.stop_now().unwrap();
    let out = a.wait_with_output().unwrap();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("worker a") && (e.contains("server") || e.contains("connection")),
        "{e}"
    );

    // Back up (recovering from its WAL): what was committed is there, and
    // another worker finishes the rest.
    drop(server);
    let user = server_user(None).unwrap();
    let server = Cluster::start_existing(&server_dir, &[], user.as_ref()).unwrap();
    let url = url_of(&server);
    let done_before: Vec<Value> = before["units"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["state"] == "done")
        .map(|u| u["id"].clone())
        .collect();
    let status = wait_status(&url, Duration::from_secs(10), |_| true);
    for id in &done_before {
        let u = status["units"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| &u["id"] == id)
            .unwrap();
        assert_eq!(u["state"], "done", "committed unit {id} survived: {u}");
        assert_eq!(u["worker"], "a");
    }
    let out = worker_cmd(&url, &shared, "b").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let status = wait_status(&url, Duration::from_secs(10), |_| true);
    assert!(
        status["units"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["state"] == "done"),
        "{status}"
    );
    let case = shared.join("case");
    common::run_ok(
        common::caseload()
            .args(["report", "--db-url", &url, "--out"])
            .arg(&case),
    );
    let single = work.path().join("single");
    let mut cmd = common::caseload();
    cmd.args(["run", "--cache", "warm", "--stages", "filesystem,file-hash"])
        .arg("--evidence")
        .arg(&image);
    channels(&mut cmd, &single);
    common::run_ok(&mut cmd);
    assert!(
        common::export(&single.join("case"), "bodyfile", &[])
            == common::export(&case, "bodyfile", &["--db-url", &url]),
        "the case differs after the server was lost"
    );
}

#[test]
fn an_interrupted_cluster_stops_its_workers_and_server_and_says_the_case_is_incomplete() {
    let test =
        "an_interrupted_cluster_stops_its_workers_and_server_and_says_the_case_is_incomplete";
    if !common::have_postgres(test) {
        return;
    }
    let _serial = common::lab_lock();
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "4"]);
    let dir = work.path().join("cluster");
    let mut cmd = common::caseload();
    cmd.args([
        "cluster",
        "--workers",
        "2",
        "--threads",
        "1",
        "--batch-files",
        "5",
    ])
    .args([
        "--worker-hold-ms",
        "300",
        "--stages",
        "filesystem,file-hash",
    ])
    .arg("--evidence")
    .arg(&image)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    channels(&mut cmd, &dir);
    let mut child = cmd.spawn().unwrap();
    // The server's address, from the line `cluster` prints for `status`.
    let stderr_pipe = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr_pipe)
            .lines()
            .map_while(Result::ok)
        {
            if let Some((_, url)) = line.split_once("--db-url \"") {
                let _ = tx.send(url.trim_end_matches('"').to_string());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let url = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    // Some units in, some not.
    wait_done(&url, 2);
    // SAFETY: our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let start = Instant::now();
    let status = child.wait().unwrap();
    let errors = reader.join().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "the cluster took {:?} to stop",
        start.elapsed()
    );
    assert!(!status.success(), "{errors}");
    common::assert_no_server_left(work.path());
    let run = common::run_json(&dir.join("case"));
    assert_eq!(run["status"], "incomplete", "{}", run["distributed"]);
    let d = &run["distributed"];
    let (units, done) = (
        d["units"].as_u64().unwrap(),
        d["units_done"].as_u64().unwrap(),
    );
    assert!(done >= 2 && done < units, "{d}");
    for w in d["workers"].as_array().unwrap() {
        assert_eq!(w["state"], "stopped", "{w}");
    }
}

#[test]
fn an_ftk4_case_over_three_workers_reads_like_an_ftk4_run() {
    let test = "an_ftk4_case_over_three_workers_reads_like_an_ftk4_run";
    if !common::have_postgres(test) {
        return;
    }
    let _serial = common::lab_lock();
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(
        &work.path().join("ev"),
        &["--size", "32MiB", "--seed", "13"],
    );
    let corpus = image.parent().unwrap().to_path_buf();
    let mut cases = Vec::new();
    for (name, how) in [
        ("single", vec!["run", "--cache", "warm"]),
        (
            "cluster",
            vec!["cluster", "--workers", "3", "--batch-files", "10"],
        ),
    ] {
        let dir = work.path().join(name);
        let mut cmd = common::caseload();
        cmd.args(&how)
            .args(["--threads", "1", "--workload", "ftk4-default"])
            .arg("--evidence")
            .arg(&image)
            .args(hashsets(&corpus));
        channels(&mut cmd, &dir);
        common::run_ok(&mut cmd);
        cases.push(dir.join("case"));
    }
    common::assert_no_server_left(work.path());
    for format in ["bodyfile", "dfxml", "csv"] {
        assert!(
            common::export(&cases[0], format, &[]) == common::export(&cases[1], format, &[]),
            "{format} differs between the ftk4 run and the ftk4 cluster"
        );
    }
    let (a, b) = (common::run_json(&cases[0]), common::run_json(&cases[1]));
    // Compound files expanded by the batches, looked up by kff's finish.
    for (stage, key) in [
        ("file-hash", "extracted_items"),
        ("kff", "extracted_looked_up"),
        ("kff", "hits"),
        ("index", "items_indexed"),
    ] {
        assert_eq!(
            detail(&a, stage, key),
            detail(&b, stage, key),
            "{stage} {key}"
        );
    }
    assert_eq!(b["database"]["options"]["profile"], "ftk4");
}
