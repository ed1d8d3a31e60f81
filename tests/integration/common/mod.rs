//! Helpers shared by the integration tests: locating the binary, the
//! optional real-image folder and the optional external oracle tools.
//!
//! A test that needs something absent says so on stderr and returns early;
//! the suite must pass on a machine without the oracles or the real images.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Path of the `caseload` binary built for this test run.
pub fn caseload_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_caseload"))
}

/// A `Command` for the `caseload` binary.
pub fn caseload() -> Command {
    Command::new(caseload_bin())
}

/// `../shared/real-images` beside the checkout, or `None` with a notice.
///
/// `CASELOAD_REAL_IMAGES` overrides the location.
pub fn real_images(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("CASELOAD_REAL_IMAGES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("shared")
                .join("real-images")
        });
    if dir.join("README.md").is_file() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED {test}: real images not found at {} (set CASELOAD_REAL_IMAGES)",
            dir.display()
        );
        None
    }
}

/// Whether an external oracle tool is on `PATH`; prints a skip notice if not.
pub fn have_tool(test: &str, tool: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|p| p.join(tool).is_file()))
        .unwrap_or(false);
    if !found {
        eprintln!("SKIPPED {test}: external tool `{tool}` is not installed");
    }
    found
}

/// Lower-case hex MD5 of `data` (md-5, independent of the engine's MD5).
pub fn md5_hex(data: &[u8]) -> String {
    use md5::Digest;
    md5::Md5::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `caseload run --stages STAGES` over `image` with every channel in
/// `case`, warm cache, plus `--stage-option` for each option.
pub fn stage_run(stages: &str, image: &Path, case: &Path, options: &[&str]) -> Command {
    let mut cmd = caseload();
    cmd.args(["run", "--stages", stages, "--cache", "warm"])
        .arg("--evidence")
        .arg(image);
    for flag in ["--database", "--case", "--temp"] {
        cmd.arg(flag).arg(case);
    }
    for o in options {
        cmd.args(["--stage-option", o]);
    }
    cmd
}

/// Run `cmd` and return its output, failing the test with its stderr when
/// it did not succeed.
pub fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Generate a corpus with 100 decoys in `dir` (`args`: `--size`, `--seed`,
/// `--profile`...), failing the test if it fails: the raw image's path and
/// the manifest.
///
/// Unless `args` say otherwise the corpus is FAT and dense (`--fs fat
/// --fill 0.72`): the workstation default is a mostly empty NTFS disk
/// (chosen for a 4:1 E01), which holds few items per MiB, and the stage
/// tests want many items in a small image. NTFS tests pass `--fs ntfs`.
pub fn corpus(dir: &Path, args: &[&str]) -> (PathBuf, caseload_corpus::manifest::Manifest) {
    run_ok(
        caseload()
            .arg("corpus")
            .args(args)
            .args(dense_unless_asked(args))
            .args(["--decoys", "100", "--out"])
            .arg(dir),
    );
    let manifest =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    (dir.join("image.dd"), manifest)
}

/// `--fs fat` and `--fill 0.72` where `args` choose no file system, fill,
/// E01 ratio or the suspect profile (see [`corpus`]).
pub fn dense_unless_asked(args: &[&str]) -> Vec<&'static str> {
    let mut extra = Vec::new();
    if !args.contains(&"--fs") {
        extra.extend(["--fs", "fat"]);
    }
    if !args
        .iter()
        .any(|a| ["--fill", "--target-e01-ratio", "suspect"].contains(a))
    {
        extra.extend(["--fill", "0.72"]);
    }
    extra
}

/// Whether PostgreSQL's server binaries are installed (for
/// `--db-engine postgres`); prints a skip notice if not.
pub fn have_postgres(test: &str) -> bool {
    match caseload_engine::casedb::postgres::cluster::find_binaries() {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIPPED {test}: {e}");
            false
        }
    }
}

/// Fail the test if any PostgreSQL process still works in a data
/// directory under `dir` (every test that starts a server must stop it).
pub fn assert_no_server_left(dir: &Path) {
    let mut left = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if e.file_name()
            .to_str()
            .is_some_and(|n| n.parse::<u32>().is_ok())
            && let Ok(cwd) = std::fs::read_link(e.path().join("cwd"))
            && let Ok(root) = std::fs::canonicalize(dir)
            && cwd.starts_with(&root)
        {
            let cmd = std::fs::read_to_string(e.path().join("cmdline")).unwrap_or_default();
            if cmd.starts_with("postgres") || cmd.contains("/postgres") {
                left.push(format!(
                    "{} {}",
                    e.file_name().to_string_lossy(),
                    cmd.replace('\0', " ")
                ));
            }
        }
    }
    assert!(left.is_empty(), "server processes left running: {left:#?}");
}

/// A temporary directory PostgreSQL (running as an unprivileged account
/// when the tests run as root) can reach and own a data directory in.
pub fn pg_tempdir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("caseload-pg-")
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Render `html` (a comparison's report.html) in headless chromium and
/// check that the screenshot shows the stacked stage bars in their colours;
/// skipped with a notice without chromium.
pub fn assert_stage_chart_renders(test: &str, html: &Path) {
    if !have_tool(test, "chromium") {
        return;
    }
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let png_path = tmp.path().join("shot.png");
    let out = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!(
            "--user-data-dir={}",
            tmp.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", png_path.display()))
        .arg("--window-size=1280,1600")
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(
        png_path.is_file(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert!(
        info.width >= 1000 && info.height >= 1000,
        "{}x{}",
        info.width,
        info.height
    );
    let pixel = |x: u32, y: u32| -> [u8; 3] {
        let i = (y as usize * info.line_size) + x as usize * channels;
        if channels >= 3 {
            [buf[i], buf[i + 1], buf[i + 2]]
        } else {
            [buf[i]; 3]
        }
    };
    // The stage colours of the stacked bars (the first three of the
    // chart's palette), exactly as the SVG fills them.
    let stage_colours: [[u8; 3]; 3] = [[78, 121, 167], [242, 142, 43], [89, 161, 79]];
    let mut distinct = std::collections::HashSet::new();
    let mut non_white = 0usize;
    let mut bar_pixels = [0usize; 3];
    for y in 0..info.height {
        for x in 0..info.width {
            let p = pixel(x, y);
            distinct.insert(p);
            if p != [255, 255, 255] {
                non_white += 1;
            }
            for (k, c) in stage_colours.iter().enumerate() {
                if p.iter().zip(c).all(|(a, b)| a.abs_diff(*b) <= 6) {
                    bar_pixels[k] += 1;
                }
            }
        }
    }
    let total = (info.width * info.height) as usize;
    eprintln!(
        "{test}: {} distinct colours, {non_white} of {total} pixels not white, stage bar pixels {bar_pixels:?}",
        distinct.len()
    );
    assert!(distinct.len() >= 50, "{} distinct colours", distinct.len());
    assert!(
        non_white * 50 >= total,
        "{non_white} of {total} pixels not white"
    );
    // Each stage's bar segments are drawn (a legend swatch alone is 196
    // pixels; a bar segment of the smallest stage may be thin, so only
    // the two larger stages must clearly exceed a swatch).
    assert!(bar_pixels.iter().all(|&n| n >= 100), "{bar_pixels:?}");
    assert!(
        bar_pixels.iter().filter(|&&n| n >= 1000).count() >= 2,
        "{bar_pixels:?}"
    );
}

/// Held by every test that serves modelled devices (`caseload lab`): their
/// device servers are userspace and need the CPU, so two labs at once
/// would each measure the other's load. Tests that start several
/// workers at once (`caseload cluster`) hold it too: a lab probe beside
/// four busy workers measures them. Poisoning is ignored (a failed test
/// must not fail the next).
pub fn lab_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A tmpfs of `size` (mount's syntax: `64k`, `2m`) mounted on `dir` for
/// the test, unmounted when the guard drops; `None` (with a skip notice
/// naming `test`) without root or where mounting is not allowed.
pub fn small_tmpfs(test: &str, dir: &Path, size: &str) -> Option<Tmpfs> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED {test}: needs root to mount a small tmpfs");
        return None;
    }
    std::fs::create_dir_all(dir).unwrap();
    let mounted = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size}"),
            "caseload-test",
        ])
        .arg(dir)
        .status()
        .unwrap();
    if !mounted.success() {
        eprintln!("SKIPPED {test}: cannot mount tmpfs here");
        return None;
    }
    Some(Tmpfs(dir.to_path_buf()))
}

/// A tmpfs mounted by [`small_tmpfs`]; unmounted on drop, also when the
/// test fails.
pub struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// `caseload run --stages STAGES` over `image` with the database, case
/// and temp channels in `root/db`, `root/case` and `root/temp` (made
/// here), warm cache, two threads.
pub fn channels_run(stages: &str, image: &Path, root: &Path) -> Command {
    let mut cmd = caseload();
    cmd.args([
        "run",
        "--stages",
        stages,
        "--cache",
        "warm",
        "--threads",
        "2",
    ])
    .arg("--evidence")
    .arg(image);
    for (flag, sub) in [("--database", "db"), ("--case", "case"), ("--temp", "temp")] {
        let d = root.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        cmd.arg(flag).arg(d);
    }
    cmd
}

/// A case's run.json.
pub fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
}

/// `caseload export --format FORMAT --case CASE EXTRA...`'s output.
pub fn export(case: &Path, format: &str, extra: &[&str]) -> Vec<u8> {
    run_ok(
        caseload()
            .args(["export", "--format", format, "--case"])
            .arg(case)
            .args(extra),
    )
    .stdout
}

/// `caseload search --json --case CASE QUERY EXTRA...`'s output.
pub fn search_json(case: &Path, query: &str, extra: &[&str]) -> Vec<u8> {
    run_ok(
        caseload()
            .args(["search", "--json", "--case"])
            .arg(case)
            .arg(query)
            .args(extra),
    )
    .stdout
}

/// Why a lab cannot be built here (root, loop devices and FUSE are
/// needed), or `None` when it can.
pub fn lab_unavailable() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root");
    }
    if !Path::new("/dev/loop-control").exists() || !Path::new("/dev/fuse").exists() {
        return Some("no loop devices or no /dev/fuse");
    }
    None
}

/// `caseload study ftk4 --labs LABS --out DIR/study --evidence IMAGE.dd
/// --hashset known=NSRLFile.txt` on a corpus directory, with the labs'
/// mounts and backing files under `dir` and `extra` arguments; asserts it
/// succeeded and returns the study's directory.
pub fn study_ftk4_dd(dir: &Path, labs: &str, corpus: &Path, extra: &[&str]) -> PathBuf {
    let backing = dir.join("backing");
    std::fs::create_dir_all(&backing).unwrap();
    let out_dir = dir.join("study");
    run_ok(
        caseload()
            .env("CASELOAD_LAB_DIR", dir.join("labs"))
            .env("CASELOAD_LAB_BACKING", &backing)
            .args(["study", "ftk4"])
            .args(extra)
            .args(["--labs", labs, "--out"])
            .arg(&out_dir)
            .arg("--evidence")
            .arg(corpus.join("image.dd"))
            .arg("--hashset")
            .arg(format!("known={}", corpus.join("NSRLFile.txt").display())),
    );
    out_dir
}

/// A small lab of the FTK 4 study's shape in `dir` (its `system` device
/// takes temp, `data` evidence and case, `database` the database; 256 MiB
/// each, `data` `data_size`), named `name`: the file's path.
pub fn small_lab_file(
    dir: &Path,
    name: &str,
    [system, data, database]: [&str; 3],
    data_size: &str,
) -> String {
    let text = format!(
        "name = \"{name}\"\ndescription = \"test copy of the FTK 4 study's shape\"\n\
         [devices.system]\nmodel = \"{system}\"\nsize = \"256MiB\"\n\
         [devices.data]\nmodel = \"{data}\"\nsize = \"{data_size}\"\n\
         [devices.database]\nmodel = \"{database}\"\nsize = \"256MiB\"\n\
         [channels]\ntemp = \"system\"\nevidence = \"data\"\ncase = \"data\"\ndatabase = \"database\"\n"
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}
