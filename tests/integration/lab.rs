//! `caseload lab`: modelled devices on loop devices, checked by probing
//! them against their models' figures; `lab down` leaves nothing of the
//! lab's behind; a slower database device shows in the database channel's
//! blocked time and nowhere else; a lab that fails half way is cleaned up.
//!
//! Needs root, loop devices and FUSE (CI runs as root); skipped with a
//! notice otherwise.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why the lab tests cannot run here, if they cannot.
fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no loop devices".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".into());
    }
    for tool in ["losetup", "mkfs.ext4", "mount", "umount"] {
        if !common::have_tool("lab", tool) {
            return Some(format!("no `{tool}`"));
        }
    }
    None
}

/// A lab under test: its own lab directory, a unique name, and `lab down`
/// on drop (also when the test fails).
struct TestLab {
    dir: tempfile::TempDir,
    name: String,
}

impl TestLab {
    fn new(tag: &str) -> Self {
        TestLab {
            dir: tempfile::tempdir().unwrap(),
            name: format!("t{}-{tag}", std::process::id()),
        }
    }

    fn cmd(&self) -> Command {
        let mut c = common::caseload();
        c.env("CASELOAD_LAB_DIR", self.dir.path().join("labs"));
        c
    }

    /// Write a lab file mapping `channels` (channel, device) over `devices`
    /// (name, model, size).
    fn file(&self, devices: &[(&str, &str, &str)], channels: &[(&str, &str)]) -> PathBuf {
        let mut text = format!("name = \"{}\"\ndescription = \"test lab\"\n", self.name);
        for (name, model, size) in devices {
            text.push_str(&format!(
                "[devices.{name}]\nmodel = \"{model}\"\nsize = \"{size}\"\n"
            ));
        }
        text.push_str("[channels]\n");
        for (c, d) in channels {
            text.push_str(&format!("{c} = \"{d}\"\n"));
        }
        let path = self.dir.path().join(format!("{}.toml", self.name));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn up(&self, file: &Path, evidence: &[&Path]) -> serde_json::Value {
        let mut c = self.cmd();
        c.args(["lab", "up", "--json"]).arg(file);
        for e in evidence {
            c.arg("--evidence").arg(e);
        }
        let out = common::run_ok(&mut c);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `lab down`, which must succeed and leave nothing of the lab's.
    fn down_ok(&self) {
        let down = self.down();
        assert!(
            down.status.success(),
            "{}",
            String::from_utf8_lossy(&down.stderr)
        );
        assert_nothing_left(self);
    }

    /// An image-hash run of `x.dd` in lab `name`.
    fn image_hash_in(&self, name: &str) -> std::process::Output {
        self.cmd()
            .args(["run", "--stages", "image-hash", "--evidence", "x.dd"])
            .args(["--lab", name])
            .output()
            .unwrap()
    }

    fn down(&self) -> std::process::Output {
        self.cmd()
            .args(["lab", "down", &self.name])
            .output()
            .unwrap()
    }
}

impl Drop for TestLab {
    fn drop(&mut self) {
        let _ = self.down();
    }
}

/// Loop devices whose backing file lies under `dir`.
fn loops_backed_under(dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/sys/block").unwrap().flatten() {
        let b = e.path().join("loop/backing_file");
        if let Ok(t) = std::fs::read_to_string(b)
            && t.contains(dir)
        {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

/// Mount points under `dir`.
fn mounts_under(dir: &Path) -> Vec<String> {
    let d = dir.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4).map(str::to_string))
        .filter(|p| p.starts_with(&d))
        .collect()
}

/// Cgroups named after the lab, anywhere under /sys/fs/cgroup.
fn cgroups_named(name: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, name: &str, depth: usize, out: &mut Vec<PathBuf>) {
        if depth > 6 {
            return;
        }
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if e.file_name().to_string_lossy() == name {
                out.push(p.clone());
            }
            walk(&p, name, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), name, 0, &mut out);
    out
}

/// Processes whose command line names the lab.
fn processes_of(name: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(c) = std::fs::read(e.path().join("cmdline"))
            && c.split(|&b| b == 0).any(|a| a == name.as_bytes())
        {
            out.push(pid);
        }
    }
    out
}

fn assert_nothing_left(lab: &TestLab) {
    let backing = format!("caseload-lab-{}", lab.name);
    assert!(loops_backed_under(&backing).is_empty(), "loop devices left");
    assert!(
        mounts_under(lab.dir.path()).is_empty(),
        "mounts left: {:?}",
        mounts_under(lab.dir.path())
    );
    assert!(cgroups_named(&backing).is_empty(), "cgroups left");
    assert!(processes_of(&lab.name).is_empty(), "device server left");
    assert!(!Path::new("/dev/shm").join(&backing).exists());
    assert!(!lab.dir.path().join("labs").join(&lab.name).exists());
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// A model's expected figures.
fn expect(model: &str) -> (f64, f64) {
    let m = caseload_workloads::devices::device(model).unwrap();
    (m.expect.seq_read_mb_s, m.expect.random_read_iops_qd1)
}

#[test]
fn modelled_devices_probe_as_their_models_and_down_leaves_nothing() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED modelled_devices_probe_as_their_models: {why}");
        return;
    }
    let _serial = common::lab_lock();
    // Every built-in model on one of the probed channels of some lab.
    let labs: [[&str; 3]; 3] = [
        ["hdd-7200", "sata-ssd", "pcie-ssd"],
        ["cloud-gp3", "raid5-4x7200", "nas-1gbe"],
        ["usb3-hdd", "hdd-10k", "usb-stick"],
    ];
    for (n, models) in labs.iter().enumerate() {
        let lab = TestLab::new(&format!("probe{n}"));
        let file = lab.file(
            &[
                ("a", models[0], "1GiB"),
                ("b", models[1], "1GiB"),
                ("c", models[2], "1GiB"),
            ],
            &[
                ("evidence", "a"),
                ("database", "a"),
                ("case", "b"),
                ("temp", "c"),
            ],
        );
        let status = lab.up(&file, &[]);
        assert_eq!(status["healthy"], true, "{status}");
        // The userspace models take CPU to serve each request: under the
        // rest of the suite's load a probe can fall short, so a model gets
        // up to five probes and is judged by its closest (a device's
        // figures are what it can do, not what a busy machine let it).
        // Never more than 15% faster than its device (a model that flatters
        // a device is wrong whatever the load); up to 35% slower, which the
        // suite's load alone causes: the CPU-heavy RAID-5 model measured
        // 278-315 MB/s sequential against 400 beside the rest of the
        // suite, 341 alone. `caseload lab probe` on a quiet machine is the
        // measurement to quote (docs/lab.md).
        let within = |model: &str, seq: f64, iops: f64| -> bool {
            let (want_seq, want_iops) = expect(model);
            let near = |got: f64, want: f64| got <= 1.15 * want && got >= 0.65 * want;
            if model == "pcie-ssd" {
                // Unthrottled: at least the model's figures.
                seq >= 0.85 * want_seq && iops >= 0.85 * want_iops
            } else {
                near(seq, want_seq) && near(iops, want_iops)
            }
        };
        let mut best: Vec<Option<(f64, f64)>> = vec![None; 3];
        for attempt in 1..=5 {
            let out = common::run_ok(
                lab.cmd()
                    .args([
                        "probe",
                        "--json",
                        "--size",
                        "128MiB",
                        "--seconds",
                        "2",
                        "--lab",
                    ])
                    .arg(&lab.name),
            );
            let probes: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            for (i, (channel, model)) in ["database", "case", "temp"].iter().zip(models).enumerate()
            {
                let p = probes
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["channel"] == *channel)
                    .unwrap();
                assert_eq!(p["direct"], true, "{channel}: {p}");
                let got = (f(&p["seq_read_128k_mb_per_s"]), f(&p["random_read_iops"]));
                let (seq, iops) = expect(model);
                eprintln!(
                    "{model} (probe {attempt}): 128 KiB sequential reads {:.0} MB/s (model {seq}), 4 KiB random reads at QD1 {:.0}/s (model {iops})",
                    got.0, got.1
                );
                let error =
                    |(s, r): (f64, f64)| ((s - seq) / seq).abs().max(((r - iops) / iops).abs());
                // Keep the first probe within the model's figures, else the
                // closest so far.
                let better = match best[i] {
                    None => true,
                    Some(b) if within(model, b.0, b.1) => false,
                    Some(b) => within(model, got.0, got.1) || error(got) < error(b),
                };
                if better {
                    best[i] = Some(got);
                }
            }
            if best
                .iter()
                .zip(models)
                .all(|(b, m)| b.is_some_and(|(s, r)| within(m, s, r)))
            {
                break;
            }
        }
        for (b, model) in best.iter().zip(models) {
            let (got_seq, got_iops) = b.unwrap();
            let (seq, iops) = expect(model);
            assert!(
                within(model, got_seq, got_iops),
                "{model}: {got_seq} MB/s against {seq}, {got_iops}/s against {iops}"
            );
        }
        lab.down_ok();
        if n == 0 {
            // Down again: a plain error, nothing touched.
            let again = lab.down();
            assert!(!again.status.success());
            assert!(
                String::from_utf8_lossy(&again.stderr).contains("is not up"),
                "{}",
                String::from_utf8_lossy(&again.stderr)
            );
        }
    }
}

/// Sum over stages of the database channel's blocked seconds.
fn database_blocked(run: &serde_json::Value) -> (f64, f64) {
    let mut db = 0.0;
    let mut other = 0.0;
    for s in run["stages"].as_array().unwrap() {
        for (c, v) in s["channels"].as_object().unwrap() {
            let b = f(&v["blocked_seconds"]);
            if c == "database" {
                db += b;
            } else {
                other += b;
            }
        }
    }
    (db, other)
}

#[test]
fn a_slower_database_device_shows_in_the_database_channel() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED a_slower_database_device_shows: {why}");
        return;
    }
    let _serial = common::lab_lock();
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "48MiB", "--seed", "9"],
    );
    let mut blocked = Vec::new();
    for db_model in ["pcie-ssd", "hdd-7200"] {
        let lab = TestLab::new(if db_model == "pcie-ssd" {
            "fastdb"
        } else {
            "slowdb"
        });
        let file = lab.file(
            &[("data", "pcie-ssd", "512MiB"), ("db", db_model, "512MiB")],
            &[
                ("evidence", "data"),
                ("case", "data"),
                ("temp", "data"),
                ("database", "db"),
            ],
        );
        lab.up(&file, &[&image]);
        // Every row its own synchronous transaction, so the database's
        // syncs are the device's to pay.
        let out = common::run_ok(
            lab.cmd()
                .args(["run", "--stages", "filesystem,file-hash", "--json"])
                .args([
                    "--synchronous",
                    "full",
                    "--batch-size",
                    "1",
                    "--threads",
                    "1",
                ])
                .args(["--evidence", "image.dd", "--lab"])
                .arg(&lab.name),
        );
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(run["status"], "completed");
        // The run read the lab's copy of the evidence.
        let files = run["evidence"]["files"][0].as_str().unwrap().to_string();
        assert!(files.contains(&lab.name), "{files}");
        blocked.push(database_blocked(&run));
        lab.down_ok();
    }
    let ((fast_db, fast_other), (slow_db, slow_other)) = (blocked[0], blocked[1]);
    eprintln!(
        "database blocked: pcie {fast_db:.3} s, hdd {slow_db:.3} s; other channels {fast_other:.3} s, {slow_other:.3} s"
    );
    assert!(
        slow_db >= 5.0 * fast_db && slow_db - fast_db >= 0.5,
        "database blocked {fast_db} s on pcie-ssd, {slow_db} s on hdd-7200"
    );
    // The other channels sat on the same model in both.
    assert!(
        slow_other <= 3.0 * fast_other + 0.2,
        "{fast_other} against {slow_other}"
    );
}

/// CPU seconds (user and system) process `pid` has used.
fn cpu_seconds(pid: u64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which ends at the last ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

const MARKER: &[u8; 64] = b"caseload plain-text marker: this line must not reach the media!\n";

/// Write `mib` MiB of the marker to `dir`, sync it, drop it from the page
/// cache and read it back through the device; returns the server's CPU
/// seconds for the round trip.
fn write_and_read_back(dir: &Path, mib: usize, server: u64) -> f64 {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let path = dir.join("marker.txt");
    let before = cpu_seconds(server);
    let mut f = std::fs::File::create(&path).unwrap();
    let block: Vec<u8> = MARKER.repeat(1 << 14);
    for _ in 0..mib {
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
    // SAFETY: the descriptor is open; fadvise only drops cached pages.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    drop(f);
    let mut back = Vec::new();
    std::fs::File::open(&path)
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    let after = cpu_seconds(server);
    assert_eq!(back.len(), mib << 20, "{}", path.display());
    assert!(
        back.chunks(64).all(|c| c == MARKER),
        "{} read back different bytes",
        path.display()
    );
    after - before
}

fn holds_marker(file: &Path) -> bool {
    let bytes = std::fs::read(file).unwrap();
    bytes.windows(MARKER.len()).step_by(1).any(|w| w == MARKER)
}

#[test]
fn an_encrypted_device_holds_no_plain_text_and_a_lost_key_stops_runs() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED an_encrypted_device_holds_no_plain_text: {why}");
        return;
    }
    let _serial = common::lab_lock();
    let lab = TestLab::new("crypt");
    let file = lab.file(
        &[
            ("plain", "pcie-ssd", "160MiB"),
            ("luks", "pcie-ssd", "160MiB"),
            ("sed", "pcie-ssd", "160MiB"),
        ],
        &[
            ("evidence", "plain"),
            ("database", "plain"),
            ("case", "luks"),
            ("temp", "sed"),
        ],
    );
    // All three through the device server, so that they differ only in
    // the layer.
    let text = std::fs::read_to_string(&file).unwrap();
    let text = text
        .replace(
            "[devices.plain]\nmodel = \"pcie-ssd\"\nsize = \"160MiB\"\n",
            "[devices.plain]\nmodel = \"pcie-ssd\"\nsize = \"160MiB\"\nserved = true\n",
        )
        .replace(
            "[devices.luks]\nmodel = \"pcie-ssd\"\nsize = \"160MiB\"\n",
            "[devices.luks]\nmodel = \"pcie-ssd\"\nsize = \"160MiB\"\nencrypt = \"luks-aes-xts\"\n",
        )
        .replace(
            "[devices.sed]\nmodel = \"pcie-ssd\"\nsize = \"160MiB\"\n",
            "[devices.sed]\nmodel = \"pcie-ssd\"\nsize = \"160MiB\"\nencrypt = \"sed\"\nserved = true\n",
        );
    std::fs::write(&file, &text).unwrap();
    lab.up(&file, &[]);
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            lab.dir
                .path()
                .join("labs")
                .join(&lab.name)
                .join("state.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let server = record["daemon"]["pid"].as_u64().unwrap();
    let channel = |c: &str| PathBuf::from(record["channel_dirs"][c].as_str().unwrap());
    let mut cpu = std::collections::BTreeMap::new();
    for (device, ch) in [("plain", "evidence"), ("sed", "temp"), ("luks", "case")] {
        cpu.insert(device, write_and_read_back(&channel(ch), 48, server));
    }
    let backing = Path::new("/dev/shm").join(format!("caseload-lab-{}", lab.name));
    assert!(holds_marker(&backing.join("plain.img")), "the plain device");
    assert!(
        holds_marker(&backing.join("sed.img")),
        "the drive's own encryption is not the host's"
    );
    assert!(
        !holds_marker(&backing.join("luks.img")),
        "plain text on the encrypted device's backing file"
    );
    // What the layer cost the host.
    let status = common::run_ok(lab.cmd().args(["lab", "status", "--json", &lab.name]));
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let served = &status["server"]["served"]["devices"];
    let cipher = |d: &str| f(&served[format!("{d}.img")]["cipher_cpu_seconds"]);
    eprintln!(
        "server CPU: plain {:.3} s, sed {:.3} s, luks {:.3} s (cipher {:.3} s)",
        cpu["plain"],
        cpu["sed"],
        cpu["luks"],
        cipher("luks")
    );
    assert!(cipher("luks") > 0.0, "{served}");
    assert_eq!(cipher("plain"), 0.0);
    assert_eq!(cipher("sed"), 0.0);
    assert!(
        cpu["sed"] <= 1.5 * cpu["plain"] + 0.05,
        "the self-encrypting drive took host CPU: {cpu:?}"
    );
    // The server's CPU per device is read in 10 ms ticks while other tests
    // load the machine: the whole server's time with LUKS is not below
    // plain's beyond that noise (the cipher's own seconds, above, are the
    // layer's cost).
    assert!(cpu["luks"] + 0.05 > cpu["plain"], "{cpu:?}");
    // A key lost between `lab up` and a run: status names it, runs refuse.
    let key = lab
        .dir
        .path()
        .join("labs")
        .join(&lab.name)
        .join("keys/luks.key");
    std::fs::remove_file(&key).unwrap();
    let out = lab
        .cmd()
        .args(["lab", "status", &lab.name])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("luks.key"));
    let out = lab.image_hash_in(&lab.name);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("luks.key") && err.contains("cannot be decrypted"),
        "{err}"
    );
    lab.down_ok();
}

/// Run fio's sequential `rw` of `size` in 8 KiB requests in `dir`: MB/s.
fn fio_mb_s(dir: &Path, rw: &str, size: &str) -> f64 {
    let out = common::run_ok(
        Command::new("fio")
            .args(["--name=seq", "--ioengine=psync", "--bs=8k", "--end_fsync=1"])
            .arg(format!("--rw={rw}"))
            .arg(format!("--size={size}"))
            .arg(format!("--directory={}", dir.display()))
            .args(["--invalidate=1", "--output-format=json"]),
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let side = if rw == "write" { "write" } else { "read" };
    f(&j["jobs"][0][side]["bw_bytes"]) / 1e6
}

#[test]
fn bench_storage_agrees_with_fio_on_a_modelled_disk() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED bench_storage_agrees_with_fio: {why}");
        return;
    }
    if !common::have_tool("bench_storage_agrees_with_fio", "fio") {
        return;
    }
    let _serial = common::lab_lock();
    let lab = TestLab::new("bench");
    let file = lab.file(
        &[("disk", "hdd-7200", "512MiB")],
        &[
            ("evidence", "disk"),
            ("database", "disk"),
            ("case", "disk"),
            ("temp", "disk"),
        ],
    );
    lab.up(&file, &[]);
    // Medians of three runs of each tool: one run of either varies by a
    // tenth on the modelled disk.
    let mid = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[1]
    };
    let runs: Vec<serde_json::Value> = (0..3)
        .map(|_| {
            let out = common::run_ok(
                lab.cmd()
                    .args(["bench-storage", "--channel", "case", "--tests", "bonnie"])
                    .args(["--size", "96MiB", "--bonnie-files", "200"])
                    .args(["--bonnie-seeks", "150", "--json", "--lab", &lab.name]),
            );
            serde_json::from_slice(&out.stdout).unwrap()
        })
        .collect();
    let ours = &runs[0];
    assert_eq!(ours["schema_version"], 1);
    assert_eq!(ours["target"]["lab"], lab.name.as_str());
    let b = &ours["bonnie"];
    let figure = |k: &str| mid(runs.iter().map(|r| f(&r["bonnie"][k])).collect());
    let case = lab
        .dir
        .path()
        .join("labs")
        .join(&lab.name)
        .join("mnt/disk/case");
    let fio = |rw: &str| mid((0..3).map(|_| fio_mb_s(&case, rw, "96m")).collect());
    let (fio_w, fio_r) = (fio("write"), fio("read"));
    let (w, r) = (figure("seq_write_mb_s"), figure("seq_read_mb_s"));
    eprintln!(
        "hdd-7200 model: sequential write {w:.1} MB/s (fio {fio_w:.1}), read {r:.1} (fio {fio_r:.1}); seeks {:.0}/s",
        f(&b["seeks_per_s"])
    );
    for (ours, theirs, what) in [(w, fio_w, "write"), (r, fio_r, "read")] {
        assert!(
            (ours / theirs - 1.0).abs() <= 0.15,
            "sequential {what}: caseload {ours:.1} MB/s, fio {theirs:.1} MB/s"
        );
    }
    // The model's figures, not the host's: a 7200 rpm disk seeks a few
    // hundred times a second at most.
    let (seq, iops) = expect("hdd-7200");
    assert!(r < 1.5 * seq, "{r} MB/s read on a {seq} MB/s disk");
    assert!(f(&b["seeks_per_s"]) < 4.0 * iops, "{b}");
    // Nothing of caseload's left in the channel (fio's file is fio's).
    let left: Vec<String> = std::fs::read_dir(&case)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("caseload"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    lab.down_ok();
}

#[test]
fn a_channel_on_a_shaped_share_pays_its_round_trips_and_a_dropped_share_is_named() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED a_channel_on_a_shaped_share: {why}");
        return;
    }
    let missing = caseload_lab::share::missing_tools();
    if !missing.is_empty() {
        eprintln!(
            "SKIPPED a_channel_on_a_shaped_share: no {}",
            missing.join(", ")
        );
        return;
    }
    let _serial = common::lab_lock();
    let lab = TestLab::new("share");
    let file = lab.file(
        &[
            ("nas", "pcie-ssd", "512MiB"),
            ("local", "pcie-ssd", "256MiB"),
        ],
        &[
            ("evidence", "local"),
            ("database", "local"),
            ("case", "nas"),
            ("temp", "local"),
        ],
    );
    // A slow link, so that its round trips stand out: 2 ms, 50 MB/s.
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "[devices.nas]\nmodel = \"pcie-ssd\"\nsize = \"512MiB\"\n",
        "[devices.nas]\nmodel = \"pcie-ssd\"\nsize = \"512MiB\"\nshare = { link_mb_s = 50, rtt_us = 2000, op_us = 0 }\n",
    );
    std::fs::write(&file, text).unwrap();
    lab.up(&file, &[]);
    let labdir = lab.dir.path().join("labs").join(&lab.name);
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(labdir.join("state.json")).unwrap()).unwrap();
    let channel = |c: &str| PathBuf::from(record["channel_dirs"][c].as_str().unwrap());
    assert!(channel("case").starts_with(labdir.join("mnt/nas-share")));
    // Small files created, synced and looked up: each costs the share at
    // least a round trip; the local channel none.
    let small = |dir: &Path| {
        let t = std::time::Instant::now();
        for i in 0..40 {
            let p = dir.join(format!("small-{i}"));
            std::fs::write(&p, [7u8; 4096]).unwrap();
            std::fs::File::open(&p).unwrap().sync_all().unwrap();
        }
        t.elapsed().as_secs_f64()
    };
    let (share_s, local_s) = (small(&channel("case")), small(&channel("temp")));
    eprintln!("40 small files: share {share_s:.3} s, local {local_s:.3} s");
    assert!(
        share_s >= 40.0 * 0.002,
        "{share_s} s for 40 files over 2 ms round trips"
    );
    assert!(
        share_s > local_s + 40.0 * 0.002,
        "{share_s} against {local_s}"
    );
    // A large file moves at the link's rate at most.
    let t = std::time::Instant::now();
    let big = channel("case").join("big.bin");
    std::fs::write(&big, vec![3u8; 16 << 20]).unwrap();
    std::fs::File::open(&big).unwrap().sync_all().unwrap();
    let big_s = t.elapsed().as_secs_f64();
    eprintln!("16 MiB over the share: {big_s:.3} s");
    assert!(
        big_s >= 0.8 * (16 << 20) as f64 / 50e6,
        "{big_s} s at 50 MB/s"
    );
    // It is on the server's device.
    let on_server = labdir.join("mnt/nas/case/big.bin");
    assert_eq!(std::fs::metadata(&on_server).unwrap().len(), 16 << 20);
    // The share drops: the server stops. A run on the channel fails with
    // an error naming the share's path; what was written stays.
    let pid = record["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "nas")
        .unwrap()["share"]["server_pid"]
        .as_u64()
        .unwrap();
    // SAFETY: kill has no memory-safety preconditions; the pid is the
    // share server this test's lab started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = lab
        .cmd()
        .args(["bench-storage", "--channel", "case", "--tests", "bonnie"])
        .args(["--size", "1MiB", "--bonnie-files", "10", "--lab", &lab.name])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nas-share"), "{err}");
    assert_eq!(std::fs::metadata(&on_server).unwrap().len(), 16 << 20);
    let status = lab
        .cmd()
        .args(["lab", "status", &lab.name])
        .output()
        .unwrap();
    assert!(!status.status.success());
    lab.down_ok();
    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&netns.stdout).contains(&lab.name),
        "namespace left"
    );
}

#[test]
fn a_lab_that_fails_half_way_is_removed_and_bad_files_are_refused() {
    let lab = TestLab::new("bad");
    // A model file with an impossible figure: named, with its key.
    let model = lab.dir.path().join("bad-disk.toml");
    let good = caseload_workloads::devices::DEVICES[0].1;
    std::fs::write(&model, good.replace("rpm = 7200", "rpm = -5")).unwrap();
    let file = lab.file(
        &[("d", model.to_str().unwrap(), "256MiB")],
        &[
            ("evidence", "d"),
            ("database", "d"),
            ("case", "d"),
            ("temp", "d"),
        ],
    );
    let out = lab.cmd().args(["lab", "up"]).arg(&file).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rotating.rpm") && err.contains("bad-disk.toml"),
        "{err}"
    );
    // A lab that is not up.
    let out = lab.image_hash_in("no-such-lab");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not up"));

    if let Some(why) = unavailable() {
        eprintln!("SKIPPED a_lab_that_fails_half_way: {why}");
        return;
    }
    let _serial = common::lab_lock();
    // A file system no mkfs exists for: up fails after backing files,
    // device server and loop devices were made, and removes them all.
    let file = lab.file(
        &[("d", "hdd-7200", "256MiB")],
        &[
            ("evidence", "d"),
            ("database", "d"),
            ("case", "d"),
            ("temp", "d"),
        ],
    );
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("size = \"256MiB\"", "size = \"256MiB\"\nfs = \"nosuchfs\"");
    std::fs::write(&file, text).unwrap();
    let out = lab.cmd().args(["lab", "up"]).arg(&file).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mkfs.nosuchfs"), "{err}");
    assert_nothing_left(&lab);
}
