//! `run --trace`, per-channel latency percentiles, and the fio iolog
//! export replayed by fio itself (the oracle): fio's bytes per channel job
//! must equal the run's bytes per channel.

use crate::common;
use serde_json::Value;
use std::path::Path;

const CHANNELS: [&str; 4] = ["evidence", "database", "case", "temp"];

/// `run --stages STAGES --trace` with the database in `work/db`, the case
/// in `case` and temp in `work/tmp` (created), warm cache.
fn traced_cmd(image: &Path, work: &Path, case: &Path, stages: &str) -> std::process::Command {
    for d in [work.join("db"), case.to_path_buf(), work.join("tmp")] {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut cmd = common::caseload();
    cmd.args(["run", "--stages", stages, "--cache", "warm", "--trace"])
        .arg("--evidence")
        .arg(image)
        .arg("--database")
        .arg(work.join("db"))
        .arg("--case")
        .arg(case)
        .arg("--temp")
        .arg(work.join("tmp"));
    cmd
}

fn traced_run(image: &Path, work: &Path, stages: &str) -> Value {
    let out = common::run_ok(traced_cmd(image, work, &work.join("case"), stages).arg("--json"));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_traced_run_replays_in_fio_with_the_run_s_bytes_per_channel() {
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "9"],
    );
    let before = common::md5_hex(&std::fs::read(&image).unwrap());
    let run = traced_run(
        &image,
        work.path(),
        "image-hash,filesystem,file-hash,index,carve",
    );
    assert_eq!(run["status"], "completed");
    let trace = &run["trace"];
    assert_eq!(trace["file"], "trace.csv");
    assert_eq!(trace["dropped"], 0);
    assert!(trace["records"].as_u64().unwrap() > 1000, "{trace}");
    let trace_file = work.path().join("case/trace.csv");
    assert_eq!(
        std::fs::metadata(&trace_file).unwrap().len(),
        trace["bytes"].as_u64().unwrap()
    );

    // Latencies: counted for the calls caseload made itself (SQLite's
    // through the VFS), percentiles in order.
    for stage in run["stages"].as_array().unwrap() {
        for ch in CHANNELS {
            let f = &stage["channels"][ch];
            for (lat, ops) in [
                ("read_latency", "read_ops"),
                ("write_latency", "write_ops"),
                ("sync_latency", "fsyncs"),
            ] {
                let l = &f[lat];
                let n = l["ops"].as_u64().unwrap();
                let total: u64 = l["buckets"]
                    .as_object()
                    .unwrap()
                    .values()
                    .map(|v| v.as_u64().unwrap())
                    .sum();
                assert_eq!(n, total, "{} {ch} {lat}", stage["name"]);
                // SQLite and caseload's own calls are all timed here.
                assert_eq!(n, f[ops].as_u64().unwrap(), "{} {ch} {lat}", stage["name"]);
                if n > 0 {
                    let p = |k: &str| l[k].as_f64().unwrap();
                    assert!(
                        p("p50_us") <= p("p95_us") && p("p95_us") <= p("p99_us"),
                        "{l}"
                    );
                }
            }
        }
    }
    let ev = &run["stages"][2]["channels"]["evidence"]["read_latency"];
    assert!(
        ev["ops"].as_u64().unwrap() > 0,
        "file-hash reads evidence: {ev}"
    );

    // Export: one iolog per channel, the replay files under the output.
    let out_dir = work.path().join("fio");
    let export = common::run_ok(
        common::caseload()
            .args(["export", "--format", "fio-iolog", "--case"])
            .arg(work.path().join("case"))
            .arg("--out")
            .arg(&out_dir),
    );
    let text = String::from_utf8_lossy(&export.stdout);
    assert!(!text.contains("differs"), "{text}");
    for ch in CHANNELS {
        let log = std::fs::read_to_string(out_dir.join(format!("{ch}.iolog"))).unwrap();
        let mut lines = log.lines();
        assert_eq!(lines.next(), Some("fio version 3 iolog"));
        let mut last = 0u64;
        for l in lines {
            let fields: Vec<&str> = l.split(' ').collect();
            assert!(fields.len() == 3 || fields.len() == 5, "{ch}: {l}");
            let t: u64 = fields[0].parse().unwrap();
            assert!(t >= last, "{ch}: timestamps go back at {l}");
            last = t;
            assert!(
                ["add", "open", "close", "read", "write", "sync"].contains(&fields[2]),
                "{ch}: {l}"
            );
        }
    }
    // Files the run created are replayed under the output, never in the case.
    let case_log = std::fs::read_to_string(out_dir.join("case.iolog")).unwrap();
    assert!(case_log.contains(&out_dir.join("files/case/").display().to_string()));
    assert!(!case_log.contains(&work.path().join("case/").display().to_string()));

    if !common::have_tool("fio replay", "fio") {
        return;
    }
    let fio = std::process::Command::new("fio")
        .args(["--output-format=json", "--replay_no_stall=1"])
        .arg(out_dir.join("replay.fio"))
        .output()
        .unwrap();
    assert!(
        fio.status.success(),
        "fio: {}",
        String::from_utf8_lossy(&fio.stderr)
    );
    // fio may print notices before its JSON.
    let stdout = String::from_utf8_lossy(&fio.stdout);
    let json_start = stdout.find('{').unwrap();
    let fio: Value = serde_json::from_str(&stdout[json_start..]).unwrap();
    let mut jobs = 0;
    for job in fio["jobs"].as_array().unwrap() {
        let ch = job["jobname"].as_str().unwrap();
        assert_eq!(job["error"], 0, "{ch}");
        let want = &run["totals"]["channels"][ch];
        assert_eq!(
            job["read"]["io_bytes"].as_u64().unwrap(),
            want["bytes_read"].as_u64().unwrap(),
            "{ch}: bytes fio read against the run's"
        );
        assert_eq!(
            job["write"]["io_bytes"].as_u64().unwrap(),
            want["bytes_written"].as_u64().unwrap(),
            "{ch}: bytes fio wrote against the run's"
        );
        jobs += 1;
    }
    assert_eq!(jobs, 4, "one fio job per channel");
    assert_eq!(
        common::md5_hex(&std::fs::read(&image).unwrap()),
        before,
        "evidence changed"
    );
}

#[test]
fn bad_trace_exports_are_clear_errors() {
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "2"],
    );
    let case = work.path().join("case");
    std::fs::create_dir_all(&case).unwrap();
    // An untraced run cannot be exported as iologs.
    common::run_ok(&mut common::stage_run("filesystem", &image, &case, &[]));
    let err = export_fails(&case, Some(&work.path().join("fio")));
    assert!(err.contains("--trace"), "{err}");
    // A damaged trace names its line.
    common::run_ok(
        common::stage_run("filesystem", &image, &case, &[]).args(["--trace", "--force"]),
    );
    let trace = case.join("trace.csv");
    let mut text = std::fs::read_to_string(&trace).unwrap();
    text.push_str("12,0,1,case,1,teleport,0,0,,,\n");
    std::fs::write(&trace, text).unwrap();
    let err = export_fails(&case, Some(&work.path().join("fio")));
    assert!(err.contains("teleport") && err.contains("line"), "{err}");
    let err = export_fails(&case, None);
    assert!(err.contains("--out"), "{err}");
}

/// `export --format fio-iolog` that must fail: its stderr.
fn export_fails(case: &Path, out_dir: Option<&Path>) -> String {
    let mut cmd = common::caseload();
    cmd.args(["export", "--format", "fio-iolog", "--case"])
        .arg(case);
    if let Some(d) = out_dir {
        cmd.arg("--out").arg(d);
    }
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A case channel too small for the trace: the run's results and run.json
/// stand, the incomplete trace is removed and the failure said. Needs root
/// for a small tmpfs of the test's own.
#[test]
fn a_trace_on_a_full_case_channel_fails_cleanly_and_keeps_the_results() {
    let work = tempfile::tempdir().unwrap();
    let small = work.path().join("small");
    let Some(_mounted) = common::small_tmpfs("full-channel trace", &small, "64k") else {
        return;
    };
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "4"],
    );
    // file-hash in 512-byte runs: a trace of about 250 KB.
    let out = traced_cmd(&image, work.path(), &small, "filesystem,file-hash")
        .args(["--read-run", "512"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a lost trace is a failed run");
    assert!(err.contains("trace is incomplete"), "{err}");
    let run: Value =
        serde_json::from_slice(&std::fs::read(small.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["status"], "completed-with-errors");
    assert!(run["trace"]["error"].as_str().is_some(), "{}", run["trace"]);
    assert_eq!(run["trace"]["file"], "");
    assert!(!small.join("trace.csv").exists());
    for s in run["stages"].as_array().unwrap() {
        assert_eq!(s["status"], "completed", "{}", s["name"]);
    }
    // The results are in the case database.
    assert!(run["stages"][1]["summary"]["items"].as_u64().unwrap() > 0);
}
