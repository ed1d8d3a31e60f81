//! `trace import`, `replay` and `trace compare` against ground truth: a
//! traced caseload run's own trace.csv, strace of the same run, the real
//! Process Monitor captures in `../shared/real-traces` (skipped with a
//! notice when absent), and the bytes each channel really moved.

use crate::common;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A traced run of a small corpus on a layout with one directory per
/// channel: (the corpus image, the layout's root).
fn traced_run(work: &Path, under_strace: bool) -> Option<(PathBuf, PathBuf)> {
    if under_strace && !common::have_tool("strace_of_a_traced_run", "strace") {
        return None;
    }
    let (image, _) = common::corpus(&work.join("corpus"), &["--size", "32MiB", "--seed", "5"]);
    let root = work.join("run");
    for d in ["db", "case", "tmp"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let mut cmd = if under_strace {
        let mut c = std::process::Command::new("strace");
        c.args([
            "-f",
            "-ttt",
            "-T",
            "-y",
            "-e",
            "trace=desc,file,process",
            "-o",
        ])
        .arg(work.join("strace.txt"))
        .arg("--")
        .arg(common::caseload_bin());
        c
    } else {
        common::caseload()
    };
    cmd.args([
        "run",
        "--stages",
        "filesystem,file-hash,index,carve",
        "--cache",
        "warm",
        "--trace",
    ])
    .arg("--evidence")
    .arg(&image)
    .arg("--database")
    .arg(root.join("db"))
    .arg("--case")
    .arg(root.join("case"))
    .arg("--temp")
    .arg(root.join("tmp"));
    common::run_ok(&mut cmd);
    Some((image, root))
}

/// `caseload trace import ... --json`: the report.
fn import(file: &Path, out: &Path, extra: &[&str]) -> Value {
    let o = common::run_ok(
        common::caseload()
            .args(["trace", "import"])
            .arg(file)
            .arg("--out")
            .arg(out)
            .arg("--json")
            .args(extra),
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// (reads, bytes read, writes, bytes written, syncs) of a channel in an
/// import report.
fn moved(report: &Value, channel: &str) -> [u64; 5] {
    let c = &report["channels"][channel];
    [
        c["read"]["events"].as_u64().unwrap_or(0),
        c["read"]["bytes"].as_u64().unwrap_or(0),
        c["write"]["events"].as_u64().unwrap_or(0),
        c["write"]["bytes"].as_u64().unwrap_or(0),
        c["syncs"].as_u64().unwrap_or(0),
    ]
}

#[test]
fn strace_of_a_traced_run_imports_to_its_trace_csv_per_channel() {
    let work = tempfile::tempdir().unwrap();
    let Some((image, root)) = traced_run(work.path(), true) else {
        return;
    };
    let own = import(
        &root.join("case/trace.csv"),
        &work.path().join("own.trace"),
        &[],
    );
    let map = |dir: &str, ch: &str| format!("{}={ch}", root.join(dir).display());
    let evidence_dir = image.parent().unwrap().display().to_string();
    let traced = import(
        &work.path().join("strace.txt"),
        &work.path().join("strace.trace"),
        &[
            "--map",
            &map("db", "database"),
            "--map",
            &map("case", "case"),
            "--map",
            &map("tmp", "temp"),
            "--map",
            &format!("{evidence_dir}=evidence"),
            // caseload's own bookkeeping (the instrument, its report, the
            // layout's writability probes) and SQLite's shared-memory
            // file, which its unix VFS extends itself, outside xWrite.
            "--exclude",
            "trace.csv",
            "--exclude",
            "run.json*",
            "--exclude",
            "run.progress*",
            "--exclude",
            ".caseload-probe-*",
            "--exclude",
            "*-shm",
        ],
    );
    assert_eq!(traced["format"], "strace");
    for channel in ["database", "case", "temp"] {
        assert_eq!(
            moved(&traced, channel),
            moved(&own, channel),
            "{channel}: strace against trace.csv"
        );
    }
    // The evidence: strace also saw the two 8-byte signature reads made
    // before the trace begins (the preflight's and the opening's).
    let (s, o) = (moved(&traced, "evidence"), moved(&own, "evidence"));
    assert_eq!(
        [s[0] - 2, s[1] - 16, s[2], s[3], s[4]],
        o,
        "evidence: strace {s:?} trace.csv {o:?}"
    );
    assert!(o[1] > 20 << 20, "the run read the evidence: {o:?}");
    // The tracer's cost was measured and recorded for the replay.
    let text = std::fs::read_to_string(work.path().join("strace.trace")).unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("# tracer-overhead-ns ")),
        "{}",
        &text[..300]
    );
}

#[test]
fn a_replay_moves_exactly_the_trace_bytes_and_leaves_the_evidence_alone() {
    let work = tempfile::tempdir().unwrap();
    let Some((image, root)) = traced_run(work.path(), false) else {
        return;
    };
    let before = common::md5_hex(&std::fs::read(&image).unwrap());
    let own = import(
        &root.join("case/trace.csv"),
        &work.path().join("own.trace"),
        &[],
    );
    let replay = work.path().join("replay");
    for d in ["db", "case", "tmp"] {
        std::fs::create_dir_all(replay.join(d)).unwrap();
    }
    let trace = root.join("case/trace.csv");
    let replay_cmd = |extra: &[&str]| replay_command(&trace, &replay, extra);
    let out = common::run_ok(&mut replay_cmd(&[]));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["status"], "completed", "{}", run["stages"]);
    // The traced run's stages are the replay's.
    let names: Vec<&str> = run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["filesystem", "file-hash", "index", "carve"]);
    for channel in ["evidence", "database", "case", "temp"] {
        let t = &run["totals"]["channels"][channel];
        let m = moved(&own, channel);
        assert_eq!(
            t["bytes_read"].as_u64().unwrap_or(0),
            m[1],
            "{channel} bytes read"
        );
        assert_eq!(
            t["bytes_written"].as_u64().unwrap_or(0),
            m[3],
            "{channel} bytes written"
        );
    }
    assert_eq!(
        common::md5_hex(&std::fs::read(&image).unwrap()),
        before,
        "the evidence changed"
    );
    // It read the evidence in place: no stand-in was made.
    assert!(!replay.join("case/replay").join("image.dd").exists());
    // run.json is where the case channel is; a second replay needs --force.
    assert!(replay.join("case/run.json").exists());
    // A replay's run.json is a recorded run for predict (and so advise):
    // the same devices on both sides give back the replay's own stages.
    let same = common::run_ok(
        common::caseload()
            .args(["predict", "--json", "--run"])
            .arg(replay.join("case/run.json"))
            .args(["--from", "ftk4-base", "--devices", "ftk4-base"]),
    );
    let same: Value = serde_json::from_slice(&same.stdout).unwrap();
    let predicted: Vec<&str> = same["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(predicted, names, "predict's stages are the replay's");
    for (p, r) in same["stages"]
        .as_array()
        .unwrap()
        .iter()
        .zip(run["stages"].as_array().unwrap())
    {
        let (ps, rs) = (
            p["predicted_s"].as_f64().unwrap(),
            r["wall_seconds"].as_f64().unwrap(),
        );
        assert!((ps - rs).abs() < 1e-6, "{}: {ps} against {rs}", p["name"]);
    }
    let faster = common::run_ok(
        common::caseload()
            .args(["predict", "--json", "--run"])
            .arg(replay.join("case/run.json"))
            .args(["--from", "ftk4-base", "--devices", "ftk4-high-end"]),
    );
    let faster: Value = serde_json::from_slice(&faster.stdout).unwrap();
    let total = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    assert!(
        total(&faster, "predicted_total_s") <= total(&same, "predicted_total_s"),
        "faster devices predict no slower: {faster}"
    );
    let again = replay_cmd(&[]).output().unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    common::run_ok(&mut replay_cmd(&["--force", "--think-scale", "0"]));
    // A stand-in for evidence: one given that is smaller than the trace
    // reads is refused, naming both sizes.
    let small = work.path().join("small.dd");
    std::fs::write(&small, vec![0u8; 4096]).unwrap();
    let refused = replay_cmd(&["--force", "--evidence", small.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("holds 4096 bytes, but the trace reads"),
        "{err}"
    );
}

/// A real capture: its name, the PML and the CSV export of the same events.
type Capture = (&'static str, Vec<u8>, Vec<u8>);

/// The shared real captures, decompressed.
fn real_captures(test: &str) -> Option<Vec<Capture>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/real-traces/procmon");
    if !dir.is_dir() {
        eprintln!("SKIPPED {test}: ../shared/real-traces absent");
        return None;
    }
    let inflate = |name: &str| {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::ZlibDecoder::new(std::fs::File::open(dir.join(name)).unwrap())
            .read_to_end(&mut out)
            .unwrap();
        out
    };
    Some(
        [
            ("tests64", "CompressedLogfileTests64bitUTC"),
            ("utc64", "CompressedLogFileUTC64Filesystem"),
            ("utc32", "CompressedLogFileUTC32Filesystem"),
        ]
        .into_iter()
        .map(|(n, f)| (n, inflate(&format!("{f}PML")), inflate(&format!("{f}CSV"))))
        .collect(),
    )
}

#[test]
fn process_monitor_pml_and_csv_import_alike_and_replay_their_bytes() {
    let Some(captures) = real_captures("process_monitor_pml_and_csv_import_alike") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    for (name, pml, csv) in captures {
        let (p, c) = (
            work.path().join(format!("{name}.pml")),
            work.path().join(format!("{name}.csv")),
        );
        std::fs::write(&p, &pml).unwrap();
        std::fs::write(&c, &csv).unwrap();
        let maps = ["--map", "C:\\=case", "--map", "\\\\localhost\\C$=case"];
        let from_pml = import(&p, &work.path().join(format!("{name}.pml.trace")), &maps);
        let from_csv = import(&c, &work.path().join(format!("{name}.csv.trace")), &maps);
        assert_eq!(from_pml["format"], "procmon-pml");
        assert_eq!(from_csv["format"], "procmon-csv");
        assert_eq!(from_pml["events"], from_csv["events"], "{name}");
        assert_eq!(moved(&from_pml, "case"), moved(&from_csv, "case"), "{name}");
        assert_eq!(
            from_pml["channels"]["case"]["files"],
            from_csv["channels"]["case"]["files"]
        );
        // The other operations too, but for the 24 QueryCaseSensitive-
        // Information events of utc64, which the Process Monitor that
        // exported its CSV printed as `<Unknown>` (not replayed).
        let others = |r: &Value| r["channels"]["case"]["other_ops"].as_u64().unwrap_or(0);
        let known = if name == "utc64" { 24 } else { 0 };
        assert_eq!(others(&from_pml), others(&from_csv) + known, "{name}");
        // Paging I/O is left out and counted, with its bytes.
        let paging = |r: &Value| {
            r["left_out"]
                .as_object()
                .unwrap()
                .iter()
                .find(|(k, _)| k.starts_with("paging I/O"))
                .map_or(0, |(_, v)| v["bytes"].as_u64().unwrap())
        };
        assert_eq!(paging(&from_pml), paging(&from_csv), "{name}");
        // The README's figures: paging WriteFile bytes of utc64, and the
        // reads and writes of tests64 split by paging.
        match name {
            "utc64" => assert_eq!(paging(&from_pml), 159_952_896),
            "tests64" => assert_eq!(paging(&from_pml), 3_624_008),
            _ => {}
        }
        if moved(&from_pml, "case")[0] + moved(&from_pml, "case")[2] == 0 {
            continue;
        }
        // Replayed as fast as the device goes: exactly the bytes imported.
        let dirs = work.path().join(format!("{name}-replay"));
        for d in ["db", "case", "tmp"] {
            std::fs::create_dir_all(dirs.join(d)).unwrap();
        }
        let out = common::run_ok(&mut replay_command(
            &work.path().join(format!("{name}.pml.trace")),
            &dirs,
            &["--think-scale", "0"],
        ));
        let run: Value = serde_json::from_slice(&out.stdout).unwrap();
        let t = &run["totals"]["channels"]["case"];
        let m = moved(&from_pml, "case");
        assert_eq!(
            t["bytes_read"].as_u64().unwrap_or(0),
            m[1],
            "{name}: bytes read"
        );
        assert_eq!(
            t["bytes_written"].as_u64().unwrap_or(0),
            m[3],
            "{name}: bytes written"
        );
        assert!(run["threads"].as_u64().unwrap() >= 1);
    }
}

/// A command that must fail: its stderr.
fn fails(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        !out.status.success(),
        "succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_traces_are_refused_naming_where_and_nothing_is_written() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let out = w.join("out.trace");
    let import_cmd = |file: &Path, extra: &[&str]| {
        let mut c = common::caseload();
        c.args(["trace", "import"])
            .arg(file)
            .arg("--out")
            .arg(&out)
            .args(extra);
        c
    };
    // strace output cut mid-line.
    let strace = w.join("cut.strace");
    std::fs::write(
        &strace,
        "10 1.000000 openat(AT_FDCWD, \"/ev/a.dd\", O_RDONLY) = 3</ev/a.dd> <0.000010>\n10 1.000100 read(3</ev/a.dd>, \"\"..., 4096) = 4096 <0.000010>\n10 1.000200 read(3</ev/a.dd>, \"\"..., 40",
    )
    .unwrap();
    let err = fails(&mut import_cmd(
        &strace,
        &["--map", "/ev=evidence", "--tracer-overhead", "none"],
    ));
    assert!(
        err.contains("line 3") && err.contains("incomplete"),
        "{err}"
    );
    assert!(!out.exists(), "a refused import left a trace");
    // With --partial: what came before, and said.
    let o = common::run_ok(&mut import_cmd(
        &strace,
        &[
            "--map",
            "/ev=evidence",
            "--tracer-overhead",
            "none",
            "--partial",
        ],
    ));
    assert!(String::from_utf8_lossy(&o.stdout).contains("PARTIAL"));
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains(",read,0,4096,")
    );
    std::fs::remove_file(&out).unwrap();
    // Paths that map to no channel: refused, listing where the bytes went.
    let err = fails(&mut import_cmd(
        &strace,
        &[
            "--map",
            "/elsewhere=evidence",
            "--tracer-overhead",
            "none",
            "--partial",
        ],
    ));
    assert!(
        err.contains("no operation of the trace maps to a channel") && err.contains("/ev ("),
        "{err}"
    );
    assert!(!out.exists());
    // A CSV without a column the import needs names it.
    let csv = w.join("cols.csv");
    std::fs::write(&csv, "\"Time of Day\",\"Process Name\",\"PID\",\"Operation\",\"Result\",\"Detail\"\r\n\"1:00:00.0000000 AM\",\"a.exe\",\"1\",\"ReadFile\",\"SUCCESS\",\"Offset: 0, Length: 1\"\r\n").unwrap();
    let err = fails(&mut import_cmd(
        &csv,
        &["--format", "procmon-csv", "--map", "C:\\=case"],
    ));
    assert!(err.contains("Path"), "{err}");
    // A PML cut short: refused at a byte offset.
    if let Some(captures) = real_captures("bad_traces_are_refused (PML part)") {
        let pml = &captures[0].1;
        let cut = w.join("cut.pml");
        std::fs::write(&cut, &pml[..pml.len() / 2]).unwrap();
        let err = fails(&mut import_cmd(&cut, &["--map", "C:\\=case"]));
        assert!(err.contains("procmon-pml byte "), "{err}");
        assert!(!out.exists());
    }
    // Something that is no trace at all.
    let junk = w.join("junk.bin");
    std::fs::write(&junk, b"\x00\x01\x02 not a trace").unwrap();
    let err = fails(&mut import_cmd(&junk, &["--map", "C:\\=case"]));
    assert!(err.contains("give --format"), "{err}");
}

#[test]
fn trace_compare_gives_lru_hits_the_page_cache_model_agrees_with() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // A trace whose re-reads have known distances: 64 MiB of evidence read
    // twice over, then its first quarter a third time.
    let trace = w.join("loop.trace");
    let mut text = String::from(
        "# caseload-trace 2\n0,0,1,,0,thread,0,0,,tool:1:1,\n0,0,1,evidence,1,add,0,0,,ev.dd,\n",
    );
    let mut t = 1000u64;
    let chunk = 1u64 << 20;
    let mut reads = Vec::new();
    for pass in 0..3 {
        let n = if pass == 2 { 16 } else { 64 };
        for i in 0..n {
            reads.push(i * chunk);
        }
    }
    for off in reads {
        text.push_str(&format!("{t},1000,1,evidence,1,read,{off},{chunk},,,\n"));
        t += 2000;
    }
    std::fs::write(&trace, text).unwrap();
    // Two workstations: one whose cache (about 34 MiB at this scale) is
    // smaller than the loop, where LRU misses every re-read, and one
    // (about 126 MiB) that holds it all.
    let o = common::run_ok(
        common::caseload()
            .args(["trace", "compare"])
            .arg(&trace)
            .arg(&trace)
            .args(["--ram", "8GB,16GB", "--scale-from", "6GB", "--json"]),
    );
    let cmp: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(cmp["schema"], "caseload-trace-compare");
    let schema: Value = serde_json::from_slice(
        &std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/trace-compare.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&cmp)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let mut broken = cmp.clone();
    broken["a"]["figures"]["reuse"]["hit_ratios"][0][1] = 2.0.into();
    assert!(
        !validator.is_valid(&broken),
        "the schema lets a hit ratio of 2 through"
    );
    let hits: Vec<f64> = (0..2)
        .map(|i| {
            cmp["a"]["figures"]["reuse"]["hit_ratios"][i][1]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert!(
        hits[0] < 0.05 && (hits[1] - 80.0 / 144.0).abs() < 1e-9,
        "{hits:?}"
    );
    if cfg!(windows) {
        return;
    }
    // The same trace replayed with each memory: the model's hits.
    for (ram, hit) in ["8GB", "16GB"].into_iter().zip(hits) {
        let r = w.join(format!("r{ram}"));
        for d in ["db", "case", "tmp"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        let out = common::run_ok(
            common::caseload()
                .arg("replay")
                .arg(&trace)
                .arg("--database")
                .arg(r.join("db"))
                .arg("--case")
                .arg(r.join("case"))
                .arg("--temp")
                .arg(r.join("tmp"))
                .args([
                    "--think-scale",
                    "0",
                    "--ram",
                    ram,
                    "--scale-from",
                    "6GB",
                    "--json",
                ]),
        );
        let run: Value = serde_json::from_slice(&out.stdout).unwrap();
        let ev = &run["totals"]["channels"]["evidence"];
        let (h, m) = (
            ev["cache_hit_bytes"].as_f64().unwrap_or(0.0),
            ev["cache_miss_bytes"].as_f64().unwrap_or(0.0),
        );
        assert!(h + m > 0.0, "the modelled page cache saw no reads: {ev}");
        let modelled = h / (h + m);
        assert!(
            (modelled - hit).abs() <= 0.10,
            "--ram {ram}: page-cache model {modelled:.3} against reuse distance {hit:.3}"
        );
    }
}

/// Replay `trace` on three fresh folders under `w`, warm: run.json.
fn replay_here(trace: &Path, w: &Path) -> Value {
    for d in ["db", "case", "tmp"] {
        let _ = std::fs::remove_dir_all(w.join(d));
        std::fs::create_dir_all(w.join(d)).unwrap();
    }
    let o = common::run_ok(&mut replay_command(trace, w, &["--force"]));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `caseload replay TRACE` on the folders `db`, `case` and `tmp` under
/// `w`, warm, with JSON output and `extra` arguments.
fn replay_command(trace: &Path, w: &Path, extra: &[&str]) -> std::process::Command {
    let mut c = common::caseload();
    c.arg("replay")
        .arg(trace)
        .arg("--database")
        .arg(w.join("db"))
        .arg("--case")
        .arg(w.join("case"))
        .arg("--temp")
        .arg(w.join("tmp"))
        .args(["--cache", "warm", "--json"])
        .args(extra);
    c
}

#[test]
fn a_receive_waits_in_a_replay_for_the_send_that_supplied_it() {
    // Thread 2 waits 300 ms for thread 1's message, then writes. Paired,
    // its write comes 300 ms into the replay; on a stream no one sends
    // on, its wait is nothing the replay reproduces, and the write comes
    // at once.
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let wall = |stream: &str| {
        let trace = w.join("ipc.trace");
        std::fs::write(
            &trace,
            format!(
                "# caseload-trace 2\n\
                 0,0,1,,0,thread,0,0,,a:1:1,\n\
                 0,0,2,,0,thread,0,0,,a:1:2,\n\
                 0,0,1,case,1,add,0,0,,f.db,\n\
                 0,10,1,case,1,create,0,0,,,\n\
                 100,1000,1,case,1,write,0,4096,,,\n\
                 300000000,1000,1,,0,send,0,8,,unix:1>2,\n\
                 0,300001000,2,,0,recv,0,8,,{stream},\n\
                 300500000,1000,2,case,1,write,4096,4096,,,\n"
            ),
        )
        .unwrap();
        let run = replay_here(&trace, w);
        assert_eq!(run["totals"]["channels"]["case"]["bytes_written"], 8192);
        run["totals"]["wall_seconds"].as_f64().unwrap()
    };
    let paired = wall("unix:1>2");
    let unpaired = wall("unix:9>9");
    assert!(
        paired >= 0.25,
        "the write waited for the message: {paired} s"
    );
    assert!(unpaired < 0.15, "nothing to wait for: {unpaired} s");
}

#[test]
fn what_followed_a_timer_the_plain_run_never_saw_run_out_is_left_out() {
    // Thread 1 writes, starts writeback of the file and waits for it,
    // naps 500 ms (a timer that ran out), then writes again and wakes
    // thread 2, which writes. Traced under a tracer, the plain run lasted
    // 100 ms: the nap never ran out in it, so neither write after it
    // happened. Without the plain length all three are replayed, after
    // the nap.
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let run = |plain: &str| {
        let trace = w.join("timer.trace");
        std::fs::write(
            &trace,
            format!(
                "# caseload-trace 2\n\
                 {plain}\
                 0,0,1,,0,thread,0,0,,a:1:1,\n\
                 0,0,2,,0,thread,0,0,,a:1:2,\n\
                 0,0,1,case,1,add,0,0,,f.db,\n\
                 0,10,1,case,1,create,0,0,,,\n\
                 100,1000,1,case,1,write,0,4096,,,\n\
                 2000,1000,1,case,1,writeback,0,0,wait,,\n\
                 5000,500000000,1,,0,timer,0,0,,,\n\
                 500010000,1000,1,case,1,write,4096,4096,,,\n\
                 500020000,1000,1,,0,send,0,1,,pipe:7,\n\
                 0,500030000,2,,0,recv,0,1,,pipe:7,\n\
                 500040000,1000,2,case,1,write,8192,4096,,,\n"
            ),
        )
        .unwrap();
        let run = replay_here(&trace, w);
        assert_eq!(run["totals"]["recorded"]["errors"], 0, "{run}");
        let case = &run["totals"]["channels"]["case"];
        // The writeback is no sync.
        assert_eq!(case["fsyncs"].as_u64().unwrap_or(0), 0, "{case}");
        (
            case["bytes_written"].as_u64().unwrap(),
            run["totals"]["wall_seconds"].as_f64().unwrap(),
        )
    };
    let (kept, wall) = run("");
    assert_eq!(kept, 12288);
    assert!(wall >= 0.45, "the nap was waited out: {wall} s");
    let (kept, wall) = run("# plain-ns 100000000\n");
    assert_eq!(kept, 4096, "the writes after the nap are left out");
    assert!(wall < 0.3, "{wall} s");
}

#[test]
fn strace_of_threads_talking_imports_their_messages() {
    // The system's interpreter itself (a version manager's `python3` is
    // a script that starts processes of its own, talking through pipes).
    let python = Path::new("/usr/bin/python3");
    if !common::have_tool("strace_of_threads_talking", "strace") {
        return;
    }
    if !python.exists() {
        eprintln!("strace_of_threads_talking: SKIPPED: /usr/bin/python3 is not installed");
        return;
    }
    // A client and a server thread on a socket pair, five round trips,
    // the server writing a file for each query; then a pipe.
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let out = w.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let script = r#"
import os, socket, sys, threading
out = sys.argv[1]
a, b = socket.socketpair()
r, w = os.pipe()
def server():
    for i in range(5):
        q = b.recv(100)
        with open(os.path.join(out, "f%d" % i), "wb") as f:
            f.write(q * 100)
        b.send(b"ok" + q)
    os.write(w, b"done\n")
t = threading.Thread(target=server)
t.start()
for i in range(5):
    a.send(b"query%d" % i)
    a.recv(100)
os.read(r, 100)
t.join()
"#;
    let strace = w.join("talk.strace");
    common::run_ok(
        std::process::Command::new("strace")
            .args([
                "-f",
                "-ttt",
                "-T",
                "-yy",
                "-e",
                "trace=desc,file,process,network,futex",
                "-o",
            ])
            .arg(&strace)
            .arg(python)
            .args(["-c", script])
            .arg(&out),
    );
    let trace = w.join("talk.trace");
    let map = format!("{}=case", out.display());
    let report = import(
        &strace,
        &trace,
        &["--map", &map, "--tracer-overhead", "none"],
    );
    let m = &report["messages"];
    // 5 queries of 6 bytes, 5 answers of 8, and 5 bytes on the pipe.
    assert_eq!(m["sent"]["bytes"], 75, "{report}");
    assert_eq!(m["received"]["bytes"], 75, "{report}");
    assert_eq!(m["sent"]["events"], 11, "{report}");
    assert_eq!(m["received"]["events"], 11, "{report}");
    // Two directions of the socket and the pipe carried bytes; the rest
    // are wake-ups (the thread's start and end).
    let text = std::fs::read_to_string(&trace).unwrap();
    let carried: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() > 9 && (f[5] == "send" || f[5] == "recv") && f[7] != "0").then(|| f[9])
        })
        .collect();
    assert_eq!(carried.len(), 3, "{carried:?}");
    assert!(
        carried.iter().any(|s| s.starts_with("pipe:")),
        "{carried:?}"
    );
    assert!(m["streams"].as_u64().unwrap() >= 3, "{report}");
    let recvs = text
        .lines()
        .filter(|l| l.contains(",recv,") && !l.contains(",recv,0,0,"))
        .count();
    assert_eq!(recvs, 11);
    // Replayed: the server's files are written, each after its query.
    let run = replay_here(&trace, w);
    assert_eq!(run["totals"]["channels"]["case"]["bytes_written"], 3000);
}

#[test]
fn a_trace_logged_out_of_time_order_still_replays() {
    // Two threads on one file whose logged order disagrees with their
    // clocks (Process Monitor logs a thread's calls as they complete): a
    // replay that waited on the clocks alone would wait in a circle.
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let trace = w.join("crossed.trace");
    std::fs::write(
        &trace,
        "# caseload-trace 2\n\
         0,0,1,,0,thread,0,0,,a:1:1,\n\
         0,0,2,,0,thread,0,0,,a:1:2,\n\
         0,0,1,case,1,add,0,0,,f.db,\n\
         0,10,1,case,1,create,0,0,,,\n\
         500,0,1,case,1,write,0,4096,,,\n\
         100,0,1,case,1,write,4096,4096,,,\n\
         200,0,2,case,1,write,8192,4096,,,\n\
         600,0,2,case,1,read,0,4096,,,\n\
         50,0,2,case,1,read,4096,4096,,,\n",
    )
    .unwrap();
    for d in ["db", "case", "tmp"] {
        std::fs::create_dir_all(w.join(d)).unwrap();
    }
    let mut cmd = replay_command(&trace, w, &[]);
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the replay waited forever");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["totals"]["channels"]["case"]["bytes_written"], 12288);
    assert_eq!(run["totals"]["channels"]["case"]["bytes_read"], 8192);
}

#[test]
fn a_trace_is_a_workload_for_compare() {
    // The Linux build's own trace of a small run, compared on two layouts
    // as `--workload trace:FILE`: each run of the matrix is the trace
    // replayed, its stages the traced run's.
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let Some((image, root)) = traced_run(w, false) else {
        return;
    };
    let mut layouts = Vec::new();
    for name in ["a", "b"] {
        let dir = w.join(name);
        for d in ["db", "case", "temp"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let file = w.join(format!("{name}.toml"));
        std::fs::write(
            &file,
            format!(
                "[channels]\ndatabase = \"{0}/db\"\ncase = \"{0}/case\"\ntemp = \"{0}/temp\"\n",
                dir.display()
            ),
        )
        .unwrap();
        layouts.push(file);
    }
    let out_dir = w.join("cmp");
    let mut cmd = common::caseload();
    cmd.arg("compare")
        .arg("--evidence")
        .arg(&image)
        .arg("--workload")
        .arg(format!("trace:{}", root.join("case/trace.csv").display()))
        .args(["--repeat", "1", "--out"])
        .arg(&out_dir);
    for l in &layouts {
        cmd.arg("--layout").arg(l);
    }
    common::run_ok(&mut cmd);
    let doc: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("compare.json")).unwrap()).unwrap();
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        assert_eq!(r["status"], "completed", "{r}");
    }
    let stages: Vec<&str> = doc["summary"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["filesystem", "file-hash", "index", "carve"]);
    assert!(
        doc["workload"].to_string().contains("trace:"),
        "{}",
        doc["workload"]
    );
}
