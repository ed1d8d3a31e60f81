//! The modelled workstation (`--ram`, `--scale-from`, `--cpus`,
//! `--cpu-scale`): its memory is put into effect as a page-cache budget
//! over every channel, the database server's settings follow it, its
//! processors are the run's affinity and CPU quota, and a workstation that
//! cannot be is refused before anything is written.

use crate::common::{self, caseload, run_json};
use std::path::Path;

const GIB: u64 = 1 << 30;

/// A disk-backed directory for channels (the page cache of a tmpfs
/// cannot be dropped, so a model there is not enforced).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn run_in(image: &Path, root: &Path, extra: &[&str]) -> std::process::Output {
    let mut cmd = caseload();
    cmd.arg("run").arg("--evidence").arg(image);
    for (flag, sub) in [("--database", "db"), ("--case", "case"), ("--temp", "temp")] {
        let d = root.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        cmd.arg(flag).arg(d);
    }
    cmd.args(extra).output().unwrap()
}

#[test]
fn a_modelled_workstation_holds_every_channel_to_its_memory_and_changes_no_result() {
    let dir = disk_dir();
    let (image, _) = common::corpus(
        &dir.path().join("corpus"),
        &["--size", "96MiB", "--seed", "5"],
    );
    let modelled = dir.path().join("modelled");
    let out = run_in(
        &image,
        &modelled,
        &["--threads", "2", "--ram", "8GB", "--scale-from", "20GB"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("workstation: RAM 8 GiB"), "{stdout}");
    let run = run_json(&modelled.join("case"));
    crate::run_json::check(&run, "a run with --ram");
    let w = &run["workstation"];
    let m = &w["memory"];
    assert_eq!(m["ram_bytes"], 8 * GIB);
    assert_eq!(m["suite"], "caseload");
    // 8 GiB less 2 GiB for the system and 128 MiB + 2 x 64 MiB for
    // caseload's two threads, scaled by 96 MiB over 20 GB.
    let cache = 8 * GIB - 2 * GIB - (256 << 20);
    assert_eq!(m["cache_bytes"], cache);
    let factor = (96u64 << 20) as f64 / 20e9;
    let budget = (cache as f64 * factor) as u64;
    assert_eq!(m["cache_budget_bytes"], budget);
    let p = &w["page_cache"];
    assert_eq!(p["enforced"], true, "{p}");
    assert!(p["budget_bytes"].as_u64().unwrap() <= budget);
    assert!(p["evicted_bytes"].as_u64().unwrap() > 0, "{p}");
    assert!(p["hit_bytes"].as_u64().unwrap() > 0, "{p}");
    // Every read of the evidence and the case goes through the model:
    // hits and misses add up to the bytes read, stage by stage.
    for s in run["stages"].as_array().unwrap() {
        for channel in ["evidence", "case"] {
            let c = &s["channels"][channel];
            let read = c["bytes_read"].as_u64().unwrap();
            let seen = c["cache_hit_bytes"].as_u64().unwrap_or(0)
                + c["cache_miss_bytes"].as_u64().unwrap_or(0);
            assert_eq!(read, seen, "stage {} channel {channel}", s["name"]);
        }
    }
    // The cache is dropped once, before the first stage.
    assert_eq!(run["cache"]["mode"], "cold");
    // The model changes what the devices do, never what is found.
    let plain = dir.path().join("plain");
    let out = run_in(&image, &plain, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(run_json(&plain.join("case")).get("workstation").is_none());
    assert_eq!(
        common::export(&modelled.join("case"), "bodyfile", &[]),
        common::export(&plain.join("case"), "bodyfile", &[])
    );
}

#[test]
fn a_workstation_that_cannot_be_is_refused_before_anything_is_written() {
    let dir = disk_dir();
    let (image, _) = common::corpus(
        &dir.path().join("corpus"),
        &["--size", "40MiB", "--seed", "2"],
    );
    for (args, says) in [
        (vec!["--ram", "2GB"], "give at least 3.3 GiB"),
        (
            vec!["--ram", "8GB", "--scale-from", "1MB"],
            "smaller than the evidence",
        ),
        (vec!["--scale-from", "240GB"], "give --ram"),
        (vec!["--cpus", "999"], "--cpus 999"),
        (vec!["--cpu-scale", "1.5"], "at most 1"),
        (vec!["--cpu-scale", "0"], "above 0"),
        (vec!["--ram", "8GB", "--cache", "warm"], "from a cold start"),
    ] {
        let root = dir.path().join(format!("bad-{}", args.join("_")));
        let out = run_in(&image, &root, &args);
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        let case = root.join("case");
        assert!(
            !case.join("run.json").exists() && !case.join("run.json.partial").exists(),
            "{args:?} left a case"
        );
    }
    // compare refuses once, before its first run.
    let out = dir.path().join("compare");
    let o = caseload()
        .args([
            "compare",
            "--layout",
            "single-disk",
            "--repeat",
            "2",
            "--ram",
            "2GB",
        ])
        .arg("--evidence")
        .arg(&image)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("give at least"), "{err}");
    assert!(!err.contains("run 1/"), "a run started: {err}");
    assert!(!out.join("compare.json").exists());
}

#[test]
fn the_database_server_follows_the_workstation_and_a_pg_setting_wins() {
    if !common::have_postgres("the_database_server_follows_the_workstation_and_a_pg_setting_wins") {
        return;
    }
    let dir = common::pg_tempdir();
    let (image, _) = common::corpus(
        &dir.path().join("corpus"),
        &["--size", "40MiB", "--seed", "4"],
    );
    let root = dir.path().join("run");
    for sub in ["db", "temp"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.join(sub), std::fs::Permissions::from_mode(0o1777)).unwrap();
    }
    let out = run_in(
        &image,
        &root,
        &[
            "--profile",
            "ftk4",
            "--stages",
            "filesystem,file-hash",
            "--ram",
            "16GB",
            "--scale-from",
            "240GB",
            "--pg-setting",
            "work_mem=8MB",
        ],
    );
    common::assert_no_server_left(dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = run_json(&root.join("case"));
    crate::run_json::check(&run, "an ftk4 run with --ram");
    let m = &run["workstation"]["memory"];
    assert_eq!(m["suite"], "ftk");
    // The server runs with the plan's buffers and the user's work_mem.
    let planned = m["database_settings"]["shared_buffers"].as_str().unwrap();
    let kb = pg_kb(planned);
    let running = run["database"]["settings"]["shared_buffers"]
        .as_str()
        .unwrap();
    let running_kb = pg_kb(running);
    // PostgreSQL rounds to whole 8 kB buffers.
    assert!(
        running_kb.abs_diff(kb) < 8,
        "{planned} planned, {running} running"
    );
    assert_eq!(run["database"]["settings"]["work_mem"], "8MB");
    let notes = m["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("work_mem: --pg-setting 8MB wins")),
        "{notes:?}"
    );
    assert!(
        m.get("database_settings")
            .unwrap()
            .get("work_mem")
            .is_none()
    );
}

/// A PostgreSQL memory setting as it shows it (`7624kB`, `46MB`), in kB.
fn pg_kb(v: &str) -> u64 {
    for (unit, kb) in [("kB", 1), ("MB", 1 << 10), ("GB", 1 << 20)] {
        if let Some(n) = v.strip_suffix(unit) {
            return n.parse::<u64>().unwrap() * kb;
        }
    }
    panic!("not a memory setting: {v}")
}

#[test]
fn the_processors_are_the_runs_affinity_and_cpu_quota() {
    let dir = disk_dir();
    let (image, _) = common::corpus(
        &dir.path().join("corpus"),
        &["--size", "40MiB", "--seed", "6"],
    );
    let one = dir.path().join("one");
    let out = run_in(&image, &one, &["--cpus", "1", "--stages", "image-hash"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = run_json(&one.join("case"));
    assert_eq!(run["system"]["cpus_allowed"].as_array().unwrap().len(), 1);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIPPED the_processors_are_the_runs_affinity_and_cpu_quota (cpu quota): needs root"
        );
        return;
    }
    let scaled = dir.path().join("scaled");
    let out = run_in(
        &image,
        &scaled,
        &[
            "--cpus",
            "1",
            "--cpu-scale",
            "0.5",
            "--stages",
            "image-hash",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("`cpu` controller") {
        eprintln!("SKIPPED the_processors_are_the_runs_affinity_and_cpu_quota (cpu quota): {err}");
        return;
    }
    assert!(out.status.success(), "{err}");
    let run = run_json(&scaled.join("case"));
    let quota = run["system"]["cpu_quota"].as_f64().unwrap();
    assert!((quota - 0.5).abs() < 0.01, "{quota}");
    // The cgroup made for the run is gone with it.
    let pid_dirs: Vec<String> = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup"]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("caseload-cpu-"))
        .collect();
    assert!(pid_dirs.is_empty(), "left behind: {pid_dirs:?}");
}
