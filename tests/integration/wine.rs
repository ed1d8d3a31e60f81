//! The Windows build (`caseload.exe`, cross-built for
//! `x86_64-pc-windows-gnu`) under Wine, against the Linux build of this
//! test run as the oracle: the quickstart end to end, corpora byte for byte,
//! a case's exports and search results, an E01 that `ewfverify` accepts, a
//! layout on a drive letter, and the Linux-only commands refused.
//!
//! The executable is `CASELOAD_WINDOWS_EXE`, else
//! `target/x86_64-pc-windows-gnu/release/caseload.exe` (`.ci/run` builds it
//! first; by hand: `cargo build --release --target x86_64-pc-windows-gnu
//! --bin caseload`). Each test says SKIPPED when Wine or the executable is
//! missing. Debian 12's Wine 8 lacks `bcryptprimitives.dll`, which Rust's
//! standard library loads on Windows 10 and later; the tests build
//! `tests/wine/bcryptprimitives.c` beside the executable when it is not
//! there (see that file).

use crate::common;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

struct Wine {
    wine: PathBuf,
    exe: PathBuf,
    prefix: PathBuf,
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// Wine and the Windows executable, the prefix made once; or why not.
fn setup() -> Result<Wine, String> {
    let wine = ["/usr/lib/wine/wine64", "/usr/bin/wine64", "/usr/bin/wine"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or("Wine is not installed (Debian: apt-get install wine64)")?;
    let exe = std::env::var_os("CASELOAD_WINDOWS_EXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("x86_64-pc-windows-gnu/release/caseload.exe"));
    if !exe.is_file() {
        return Err(format!(
            "no Windows build at {} (cargo build --release --target x86_64-pc-windows-gnu --bin caseload)",
            exe.display()
        ));
    }
    let dll = exe.with_file_name("bcryptprimitives.dll");
    if !dll.is_file() {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wine/bcryptprimitives.c");
        let built = Command::new("x86_64-w64-mingw32-gcc")
            .args(["-O2", "-shared", "-o"])
            .arg(&dll)
            .arg(&source)
            .arg("-ladvapi32")
            .status()
            .map_err(|e| {
                format!("building bcryptprimitives.dll for Wine: x86_64-w64-mingw32-gcc: {e}")
            })?;
        if !built.success() {
            return Err(format!("building {} failed", dll.display()));
        }
    }
    let prefix = target_dir().join("wine-prefix");
    let w = Wine { wine, exe, prefix };
    // The first start makes the prefix (about ten seconds).
    let out = try_output(w.command().arg("--version")).map_err(|e| e.to_string())?;
    if !out.status.success() || !String::from_utf8_lossy(&out.stdout).starts_with("caseload ") {
        return Err(format!(
            "caseload.exe --version under Wine failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // The tests start many short clients, some at once; the wineserver
    // Wine starts by itself exits seconds after its last client, and a
    // client that connects as it exits dies. Keep one for a minute past
    // the last client instead (it detaches; it is gone a minute after the
    // tests). The one `--version` started holds the prefix's lock until it
    // exits (`-w` waits for that), else the new one could not start.
    let server = w.wine.with_file_name("wineserver");
    if server.is_file() {
        let quiet = |args: &[&str]| {
            Command::new(&server)
                .args(args)
                .env("WINEPREFIX", &w.prefix)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
        };
        let _ = quiet(&["-w"]);
        match quiet(&["-p60"]) {
            Ok(s) if s.success() => {}
            other => eprintln!(
                "NOTICE: a persistent wineserver did not start ({other:?}); clients that find \
                 the server exiting are tried again"
            ),
        }
        // The first client of a new server starts the prefix's services
        // (explorer, rpcss, ...), which inherit that client's standard
        // streams and live as long as the server: a test reading its
        // client's output to the end would wait the server's minute out.
        // Start them here, on no streams.
        let _ = w
            .command()
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
    Ok(w)
}

/// Wine and the executable, or `None` with a notice naming `test`.
fn wine(test: &str) -> Option<&'static Wine> {
    static WINE: OnceLock<Result<Wine, String>> = OnceLock::new();
    match WINE.get_or_init(setup) {
        Ok(w) => Some(w),
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

impl Wine {
    /// `caseload.exe` under Wine, quiet, in its own prefix.
    fn command(&self) -> Command {
        let mut c = Command::new(&self.wine);
        c.arg(&self.exe)
            .env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", "-all")
            // No Mono or Gecko installer prompts when the prefix is made.
            .env("WINEDLLOVERRIDES", "mscoree,mshtml=");
        c
    }

    fn run_ok(&self, args: &[&str]) -> Output {
        let out = output(self.command().args(args));
        assert!(
            out.status.success(),
            "caseload.exe {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

/// Runs `cmd` to its end. A Wine client that cannot reach the prefix's
/// wineserver (it was exiting as the client connected: "wine client
/// error: ... Connection reset by peer") never started caseload.exe, so
/// the command is tried again, at most twice, saying so.
fn output(cmd: &mut Command) -> Output {
    try_output(cmd).unwrap()
}

/// [`output`], or why the command could not be started.
fn try_output(cmd: &mut Command) -> std::io::Result<Output> {
    let mut tries = 0;
    loop {
        let out = cmd.output()?;
        let lost = String::from_utf8_lossy(&out.stderr).contains("wine client error");
        if !lost || tries == 2 {
            return Ok(out);
        }
        tries += 1;
        eprintln!("the wineserver went away as {cmd:?} started; trying again");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// A Linux path as Windows programs under Wine see it (drive Z: is /).
fn win(p: &Path) -> String {
    format!("Z:{}", p.display()).replace('/', "\\")
}

#[test]
fn the_quickstart_runs_end_to_end_under_wine() {
    let Some(w) = wine("the_quickstart_runs_end_to_end_under_wine") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("qs");
    let out = w.run_ok(&["quickstart", "--size", "48MiB", "--dir", &win(&dir)]);
    let text = String::from_utf8_lossy(&out.stdout);
    for stage in [
        "image-hash",
        "filesystem",
        "file-hash",
        "index",
        "carve",
        "kff",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(stage) && l.contains("completed")),
            "{stage} did not complete:\n{text}"
        );
    }
    let report = common::run_json(&dir.join("case"));
    assert!(
        report["system"]["os"]
            .as_str()
            .is_some_and(|o| o.starts_with("Windows")),
        "{}",
        report["system"]
    );
    assert_eq!(report["status"], "completed", "{report}");
    // Cold by default: Windows' way, honoured or saying why not.
    let cache = &report["cache"];
    // Under Wine the purge is a stub that claims success: not honoured,
    // and said so.
    assert_eq!(cache["method"], "standby_purge", "{cache}");
    assert_eq!(cache["honoured"], false, "{cache}");
    assert!(
        cache["note"].as_str().is_some_and(|n| n.contains("Wine")),
        "{cache}"
    );
}

/// Every keyword token a manifest plants.
fn planted_tokens(manifest: &serde_json::Value, out: &mut Vec<String>) {
    match manifest {
        serde_json::Value::Object(m) => {
            if let Some(t) = m.get("token").and_then(|t| t.as_str()) {
                out.push(t.to_string());
            }
            m.values().for_each(|v| planted_tokens(v, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| planted_tokens(v, out)),
        _ => {}
    }
}

/// `run` of `image` by `cmd` (either build) with the corpus's hash sets,
/// channels in `case`.
fn run_case(mut cmd: Command, corpus: &Path, case: &Path, path: fn(&Path) -> String) {
    std::fs::create_dir_all(case).unwrap();
    cmd.args(["run", "--cache", "warm", "--threads", "2", "--evidence"])
        .arg(path(&corpus.join("image.dd")))
        .arg("--kff-library")
        .arg(path(&case.join("kff.sqlite")));
    for spec in ["known=NSRLFile.txt", "notable=notable.md5"] {
        let (cat, file) = spec.split_once('=').unwrap();
        cmd.arg("--hashset")
            .arg(format!("{cat}={}", path(&corpus.join(file))));
    }
    for flag in ["--database", "--case", "--temp"] {
        cmd.arg(flag).arg(path(case));
    }
    let out = output(&mut cmd);
    assert!(
        out.status.success(),
        "run of {}: {}",
        corpus.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn windows_and_linux_builds_make_identical_corpora_exports_and_searches() {
    let Some(w) = wine("windows_and_linux_builds_make_identical_corpora_exports_and_searches")
    else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    for (seed, fs) in [("11", "fat"), ("11", "ntfs"), ("12", "fat"), ("12", "ntfs")] {
        let size = if fs == "ntfs" { "80MiB" } else { "48MiB" };
        let args = [
            "--size", size, "--seed", seed, "--fs", fs, "--decoys", "100",
        ];
        let linux = work.path().join(format!("linux-{fs}-{seed}"));
        let windows = work.path().join(format!("windows-{fs}-{seed}"));
        common::run_ok(
            common::caseload()
                .arg("corpus")
                .args(args)
                .arg("--out")
                .arg(&linux),
        );
        let mut wargs = vec!["corpus"];
        wargs.extend(args);
        let out_dir = win(&windows);
        wargs.extend(["--out", &out_dir]);
        w.run_ok(&wargs);
        for file in ["image.dd", "manifest.json", "NSRLFile.txt", "notable.md5"] {
            let (a, b) = (
                std::fs::read(linux.join(file)).unwrap(),
                std::fs::read(windows.join(file)).unwrap(),
            );
            assert!(
                a == b,
                "{fs} seed {seed}: {file} differs between the Linux and Windows builds"
            );
        }
        // One evidence, a case from each build.
        let (lcase, wcase) = (linux.join("case"), windows.join("case"));
        run_case(common::caseload(), &linux, &lcase, |p| {
            p.display().to_string()
        });
        let mut cmd = w.command();
        cmd.env("RUST_BACKTRACE", "0");
        run_case(cmd, &linux, &wcase, win);
        for format in ["bodyfile", "csv"] {
            let a = common::export(&lcase, format, &[]);
            let b = w
                .run_ok(&["export", "--format", format, "--case", &win(&wcase)])
                .stdout;
            assert!(!a.is_empty(), "{fs} seed {seed}: empty {format}");
            assert!(
                a == b,
                "{fs} seed {seed}: the {format} export differs between the builds"
            );
        }
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(linux.join("manifest.json")).unwrap()).unwrap();
        let mut tokens = Vec::new();
        planted_tokens(&manifest, &mut tokens);
        tokens.sort();
        tokens.dedup();
        assert!(!tokens.is_empty(), "{fs} seed {seed}: no planted keywords");
        let mut found = 0;
        for q in tokens.iter().take(4) {
            let a = common::search_json(&lcase, q, &[]);
            let items: serde_json::Value = serde_json::from_slice(&a).unwrap();
            found += items.as_array().map_or(0, Vec::len);
            let b = w
                .run_ok(&["search", "--json", "--case", &win(&wcase), q])
                .stdout;
            assert!(
                a == b,
                "{fs} seed {seed}: search `{q}` differs between the builds:\n{}\n{}",
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b)
            );
        }
        assert!(found > 0, "{fs} seed {seed}: no planted keyword was found");
    }
}

#[test]
fn convert_under_wine_writes_an_e01_that_ewfverify_accepts() {
    let test = "convert_under_wine_writes_an_e01_that_ewfverify_accepts";
    let Some(w) = wine(test) else {
        return;
    };
    if !common::have_tool(test, "ewfverify") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(work.path(), &["--size", "32MiB", "--seed", "5"]);
    let e01 = work.path().join("out");
    w.run_ok(&["convert", "--to", "e01", "--out", &win(&e01), &win(&image)]);
    let out = Command::new("ewfverify")
        .arg("-q")
        .arg(e01.with_extension("E01"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ewfverify: {text}");
    let md5 = common::md5_hex(&std::fs::read(&image).unwrap());
    assert!(
        text.contains(&md5),
        "ewfverify did not report the image's MD5 {md5}:\n{text}"
    );
}

/// Removes the drive letter it made in the prefix, also on failure.
struct DriveLetter(PathBuf);

impl Wine {
    /// Map drive `letter` to `dir` (Wine's drives are links in the
    /// prefix's dosdevices) until the guard drops.
    fn drive(&self, letter: char, dir: &Path) -> DriveLetter {
        let link = self.prefix.join("dosdevices").join(format!("{letter}:"));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(dir, &link).unwrap();
        DriveLetter(link)
    }
}

impl Drop for DriveLetter {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_layout_on_a_drive_letter_writes_to_that_drive() {
    let Some(w) = wine("a_layout_on_a_drive_letter_writes_to_that_drive") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let drive = work.path().join("drive");
    for d in ["db", "case", "temp"] {
        std::fs::create_dir_all(drive.join(d)).unwrap();
    }
    let _guard = w.drive('q', &drive);
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "3"],
    );
    let layout = work.path().join("q.toml");
    std::fs::write(
        &layout,
        format!(
            "name = \"q-drive\"\ndescription = \"the channels on drive Q:\"\n\n[channels]\nevidence = '{}'\ndatabase = 'Q:\\db'\ncase = 'Q:\\case'\ntemp = 'Q:\\temp'\n",
            win(image.parent().unwrap())
        ),
    )
    .unwrap();
    w.run_ok(&[
        "run",
        "--stages",
        "filesystem,file-hash",
        "--cache",
        "warm",
        "--layout",
        &win(&layout),
        "--evidence",
        &win(&image),
    ]);
    let report = common::run_json(&drive.join("case"));
    assert_eq!(report["status"], "completed", "{report}");
    assert!(
        std::fs::read_dir(drive.join("db"))
            .unwrap()
            .next()
            .is_some(),
        "nothing written on Q:\\db"
    );
    // A case directory past Windows' 260-character MAX_PATH, given without
    // the `\\?\` prefix: it works (Rust's standard library hands long paths
    // to Windows in their `\\?\` form).
    let deep: PathBuf = (0..12)
        .map(|i| format!("folder-{i:02}-of-a-deep-case-tree"))
        .collect();
    let long_case = drive.join("long").join(&deep);
    std::fs::create_dir_all(&long_case).unwrap();
    let long_win = format!("Q:\\long\\{}", deep.display()).replace('/', "\\");
    assert!(long_win.len() > 260, "{}", long_win.len());
    w.run_ok(&[
        "run",
        "--stages",
        "filesystem",
        "--cache",
        "warm",
        "--layout",
        &win(&layout),
        "--case",
        &long_win,
        "--force",
        "--evidence",
        &win(&image),
    ]);
    assert_eq!(common::run_json(&long_case)["status"], "completed");
    // A share that cannot be reached: refused before anything runs, the
    // path named.
    let out = output(
        w.command()
            .args([
                "run",
                "--stages",
                "filesystem",
                "--cache",
                "warm",
                "--layout",
            ])
            .arg(win(&layout))
            .args([
                "--case",
                r"\\caseload-no-such-server\share\case",
                "--force",
                "--evidence",
            ])
            .arg(win(&image)),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("caseload-no-such-server"), "{err}");
}

#[test]
fn linux_only_commands_refuse_under_windows_naming_linux() {
    let Some(w) = wine("linux_only_commands_refuse_under_windows_naming_linux") else {
        return;
    };
    let out = output(w.command().args(["lab", "up", "ftk4-base"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("needs Linux"), "lab up: {err}");
    let work = tempfile::tempdir().unwrap();
    let out = output(
        w.command()
            .args(["run", "--ram", "8GB", "--evidence"])
            .arg(win(&work.path().join("absent.dd"))),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("Windows cannot"), "--ram: {err}");
}

/// A small tmpfs mapped to a drive letter, a corpus beside it: both
/// removed when dropped (fields drop in order: drive, mount, directory).
struct TmpfsDrive {
    _drive: DriveLetter,
    _mount: common::Tmpfs,
    letter: char,
    dir: PathBuf,
    image: PathBuf,
    work: tempfile::TempDir,
}

impl Wine {
    /// A `size` tmpfs (read-only when `read_only`, as a write-protected
    /// volume is) as drive `letter`, and a 32 MiB corpus of `seed`; `None`
    /// with a notice naming `test` where it cannot be mounted.
    fn tmpfs_drive(
        &self,
        test: &str,
        letter: char,
        size: &str,
        seed: &str,
        read_only: bool,
    ) -> Option<TmpfsDrive> {
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("drive");
        let mount = common::small_tmpfs(test, &dir, size)?;
        if read_only {
            let remounted = Command::new("mount")
                .args(["-o", "remount,ro"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(remounted.success());
        }
        let drive = self.drive(letter, &dir);
        let (image, _) = common::corpus(
            &work.path().join("corpus"),
            &["--size", "32MiB", "--seed", seed],
        );
        Some(TmpfsDrive {
            _drive: drive,
            _mount: mount,
            letter,
            dir,
            image,
            work,
        })
    }

    /// `caseload.exe run` of the drive's corpus with the case channel at
    /// the drive's root and the database and temp channels beside the
    /// corpus.
    fn run_with_case_on(&self, d: &TmpfsDrive, extra: &[&str]) -> Output {
        let elsewhere = d.work.path().join("db");
        std::fs::create_dir_all(&elsewhere).unwrap();
        output(
            self.command()
                .args(["run", "--cache", "warm"])
                .args(extra)
                .arg("--evidence")
                .arg(win(&d.image))
                .arg("--case")
                .arg(format!("{}:\\", d.letter))
                .arg("--database")
                .arg(win(&elsewhere))
                .arg("--temp")
                .arg(win(&elsewhere)),
        )
    }
}

#[test]
fn a_full_drive_stops_the_run_under_wine_with_its_report_kept() {
    let test = "a_full_drive_stops_the_run_under_wine_with_its_report_kept";
    let Some(w) = wine(test) else {
        return;
    };
    let Some(drive) = w.tmpfs_drive(test, 's', "3m", "11", false) else {
        return;
    };
    let out = w.run_with_case_on(&drive, &["--no-room-check"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("the case channel failed"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let report = common::run_json(&drive.dir);
    assert_eq!(report["status"], "failed", "{report}");
    assert!(
        report["channel_fault"]["error"].as_str().is_some(),
        "{report}"
    );
}

/// A Linux PostgreSQL server on a loopback port (a data directory path too
/// long for a Unix socket), stopped when dropped, and its URL.
fn tcp_server(dir: &Path) -> (caseload_engine::casedb::postgres::cluster::Cluster, String) {
    use caseload_engine::casedb::postgres::cluster::{Cluster, Endpoint, server_user};
    let deep = dir.join("a-data-directory-path-long-enough-that-postgres-listens-on-tcp");
    std::fs::create_dir_all(&deep).unwrap();
    let user = server_user(None).unwrap();
    let server = Cluster::create(&deep, &[], user.as_ref()).unwrap();
    let Endpoint::Tcp(port) = *server.endpoint() else {
        panic!("the server listens on a socket: {:?}", server.endpoint());
    };
    (
        server,
        format!("postgres://caseload@127.0.0.1:{port}/postgres"),
    )
}

#[test]
fn plan_worker_and_report_under_wine_share_a_case_with_a_linux_server() {
    let test = "plan_worker_and_report_under_wine_share_a_case_with_a_linux_server";
    let Some(w) = wine(test) else {
        return;
    };
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(&work.path().join("ev"), &["--size", "32MiB", "--seed", "5"]);
    let (_server, url) = tcp_server(work.path());
    let shared = work.path().join("shared");
    let channel_args = |root: &Path| -> Vec<String> {
        [("--database", "db"), ("--case", "case"), ("--temp", "tmp")]
            .iter()
            .flat_map(|(flag, sub)| {
                std::fs::create_dir_all(root.join(sub)).unwrap();
                [flag.to_string(), win(&root.join(sub))]
            })
            .collect()
    };
    let stages = "filesystem,file-hash";
    let mut plan = vec![
        "plan",
        "--db-url",
        &url,
        "--stages",
        stages,
        "--batch-files",
        "20",
    ];
    let evidence = win(&image);
    plan.extend(["--evidence", &evidence]);
    let shared_args = channel_args(&shared);
    plan.extend(shared_args.iter().map(String::as_str));
    w.run_ok(&plan);
    let mut worker = vec![
        "worker",
        "--json",
        "--threads",
        "1",
        "--db-url",
        &url,
        "--id",
        "w1",
    ];
    worker.extend(shared_args.iter().map(String::as_str));
    let out = w.run_ok(&worker);
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(done["finished"].as_bool().unwrap(), "{done}");
    let case = shared.join("case");
    w.run_ok(&["report", "--db-url", &url, "--out", &win(&case)]);
    assert_eq!(common::run_json(&case)["status"], "completed");
    // The same listing as a single run of the Linux build.
    let single = work.path().join("single");
    let mut cmd = common::caseload();
    cmd.args(["run", "--cache", "warm", "--stages", stages])
        .arg("--evidence")
        .arg(&image);
    for (flag, sub) in [("--database", "db"), ("--case", "case"), ("--temp", "tmp")] {
        std::fs::create_dir_all(single.join(sub)).unwrap();
        cmd.arg(flag).arg(single.join(sub));
    }
    common::run_ok(&mut cmd);
    assert!(
        common::export(&single.join("case"), "bodyfile", &[])
            == common::export(&case, "bodyfile", &["--db-url", &url]),
        "the bodyfile of the case the Windows worker made differs from a Linux run's"
    );
}

#[test]
fn a_read_only_drive_is_refused_before_the_run_naming_it() {
    let test = "a_read_only_drive_is_refused_before_the_run_naming_it";
    let Some(w) = wine(test) else {
        return;
    };
    let Some(drive) = w.tmpfs_drive(test, 'r', "4m", "4", true) else {
        return;
    };
    let out = w.run_with_case_on(&drive, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("case channel") && err.contains("R:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read_dir(&drive.dir).unwrap().count(), 0);
}

#[test]
fn trace_import_and_replay_under_wine_match_linux() {
    let test = "trace_import_and_replay_under_wine_match_linux";
    let Some(w) = wine(test) else {
        return;
    };
    // A lab records a suite on one workstation and replays it on another:
    // a Process Monitor CSV imported by the Windows build gives the trace
    // the Linux build gives, and replays with the trace's bytes.
    let work = tempfile::tempdir().unwrap();
    let csv = work.path().join("job.csv");
    std::fs::write(
        &csv,
        "\u{feff}\"Time of Day\",\"Process Name\",\"PID\",\"Operation\",\"Path\",\"Result\",\"Detail\",\"TID\",\"Duration\"\r\n\
         \"1:00:00.0000000 PM\",\"FTK.exe\",\"10\",\"CreateFile\",\"F:\\image.dd\",\"SUCCESS\",\"Desired Access: Generic Read, Disposition: Open, Options: , Attributes: n/a, ShareMode: Read, AllocationSize: n/a, OpenResult: Opened\",\"11\",\"0.0000100\"\r\n\
         \"1:00:00.0001000 PM\",\"FTK.exe\",\"10\",\"ReadFile\",\"F:\\image.dd\",\"SUCCESS\",\"Offset: 0, Length: 65,536, Priority: Normal\",\"11\",\"0.0000500\"\r\n\
         \"1:00:00.0002000 PM\",\"FTK.exe\",\"10\",\"CreateFile\",\"G:\\case\\items.db\",\"SUCCESS\",\"Desired Access: Generic Write, Disposition: OverwriteIf, Options: , Attributes: N, ShareMode: None, AllocationSize: 0, OpenResult: Created\",\"12\",\"0.0000100\"\r\n\
         \"1:00:00.0003000 PM\",\"FTK.exe\",\"10\",\"WriteFile\",\"G:\\case\\items.db\",\"SUCCESS\",\"Offset: 0, Length: 8,192, Priority: Normal\",\"12\",\"0.0000300\"\r\n\
         \"1:00:00.0004000 PM\",\"FTK.exe\",\"10\",\"FlushBuffersFile\",\"G:\\case\\items.db\",\"SUCCESS\",\"\",\"12\",\"0.0010000\"\r\n\
         \"1:00:00.0005000 PM\",\"FTK.exe\",\"10\",\"CloseFile\",\"G:\\case\\items.db\",\"SUCCESS\",\"\",\"12\",\"0.0000100\"\r\n",
    )
    .unwrap();
    let maps = ["--map", "F:\\=evidence", "--map", "G:\\case=database"];
    let linux = work.path().join("linux.trace");
    common::run_ok(
        common::caseload()
            .args(["trace", "import"])
            .arg(&csv)
            .arg("--out")
            .arg(&linux)
            .args(maps),
    );
    let windows = work.path().join("windows.trace");
    let mut args = vec!["trace", "import"];
    let (csv_w, windows_w) = (win(&csv), win(&windows));
    args.extend([csv_w.as_str(), "--out", windows_w.as_str()]);
    args.extend(maps);
    w.run_ok(&args);
    let strip_source = |t: String| {
        t.lines()
            .filter(|l| !l.starts_with("# source "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        strip_source(std::fs::read_to_string(&windows).unwrap()),
        strip_source(std::fs::read_to_string(&linux).unwrap())
    );
    // Replayed by the Windows build: the trace's bytes on each channel.
    let dirs: Vec<PathBuf> = ["db", "case", "tmp"]
        .iter()
        .map(|d| work.path().join(d))
        .collect();
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    let (db, case, tmp) = (win(&dirs[0]), win(&dirs[1]), win(&dirs[2]));
    let out = w.run_ok(&[
        "replay",
        &windows_w,
        "--database",
        &db,
        "--case",
        &case,
        "--temp",
        &tmp,
        "--cache",
        "warm",
        "--json",
    ]);
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["totals"]["channels"]["evidence"]["bytes_read"], 65536);
    assert_eq!(run["totals"]["channels"]["database"]["bytes_written"], 8192);
    assert_eq!(run["totals"]["channels"]["database"]["fsyncs"], 1);
}
