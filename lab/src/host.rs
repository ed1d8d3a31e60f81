//! What a lab asks of the host: loop devices, file systems, mounts and
//! cgroups. Each function does one thing and checks, before undoing
//! anything, that the thing is the one the lab made (a loop device still
//! backed by the lab's file, a mount of the lab's device at the lab's
//! directory, a cgroup at the lab's path), so nothing else is touched.
//!
//! Loop devices, mkfs and mount use the system's util-linux and e2fsprogs
//! commands (`losetup`, `mkfs.*`, `mount`, `umount`), as `initdb` is used
//! for PostgreSQL: they are part of every Linux system the lab runs on.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors from the host.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A command failed.
    #[error("`{command}` failed: {message}")]
    Command {
        /// The command line.
        command: String,
        /// Its error output or the reason it did not start.
        message: String,
    },
    /// A file operation failed.
    #[error("{what} `{}`: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Something the lab needs is missing.
    #[error("{0}")]
    Unavailable(String),
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> HostError + 'a {
    move |source| HostError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Run a command, returning its standard output.
pub fn run(program: &str, args: &[&str]) -> Result<String, HostError> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| HostError::Command {
            command: command.clone(),
            message: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(HostError::Command {
            command,
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    caseload_engine::os::is_superuser()
}

/// Create `dir` readable by its owner only (mode 700 on Unix; on other
/// systems the directory inherits its parent's access rules).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(dir)
    }
    #[cfg(not(unix))]
    std::fs::create_dir(dir)
}

/// Create the new file `path` readable by its owner only (mode 600 on
/// Unix), for writing.
pub fn create_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)
}

/// Set `path`'s Unix mode; elsewhere only the read-only flag follows the
/// mode's write bits.
pub fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let mut p = std::fs::metadata(path)?.permissions();
        p.set_readonly(mode & 0o222 == 0);
        std::fs::set_permissions(path, p)
    }
}

/// Ask process `pid` to end (`SIGTERM`), or end it (`SIGKILL`) when
/// `kill`. The caller has checked that `pid` is a process the lab started.
pub fn end_process(pid: u32, kill: bool) {
    #[cfg(unix)]
    caseload_engine::os::send_signal(pid, if kill { libc::SIGKILL } else { libc::SIGTERM }, false);
    #[cfg(not(unix))]
    let _ = (pid, kill);
}

/// Make `cmd`, when spawned, a session leader of its own (`setsid`): it
/// outlives the terminal and process group of the command that starts it.
pub fn detach_on_spawn(cmd: &mut std::process::Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe; nothing else runs between
        // fork and exec here.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
    }
    #[cfg(not(unix))]
    let _ = cmd;
}

/// A loop device the lab attached.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoopDevice {
    /// `/dev/loopN`.
    pub path: PathBuf,
    /// `MAJ:MIN`.
    pub majmin: String,
    /// The file behind it.
    pub backing: PathBuf,
    /// Whether it does direct I/O on its backing file.
    pub direct_io: bool,
}

fn sys_block(dev: &Path) -> Option<PathBuf> {
    Some(Path::new("/sys/block").join(dev.file_name()?))
}

/// Attach `backing` to a free loop device, with direct I/O when the
/// backing file allows it (so its pages are not cached a second time).
pub fn loop_attach(backing: &Path) -> Result<LoopDevice, HostError> {
    if !Path::new("/dev/loop-control").exists() {
        return Err(HostError::Unavailable(
            "no loop devices on this machine (/dev/loop-control is missing)".into(),
        ));
    }
    let file = backing.to_string_lossy().into_owned();
    let attach = |direct: bool| {
        let mut args = vec!["--find", "--show"];
        if direct {
            args.push("--direct-io=on");
        }
        args.push(&file);
        run("losetup", &args)
    };
    let path = PathBuf::from(attach(true).map_err(|e| {
        if e.to_string().contains("No free") || e.to_string().contains("could not find") {
            HostError::Unavailable(format!("no free loop device for `{file}`: {e}"))
        } else {
            e
        }
    })?);
    let sys = sys_block(&path)
        .ok_or_else(|| HostError::Unavailable(format!("losetup printed `{}`", path.display())))?;
    let majmin = std::fs::read_to_string(sys.join("dev"))
        .map_err(io("reading the device number of", &path))?
        .trim()
        .to_string();
    let direct_io = std::fs::read_to_string(sys.join("loop/dio"))
        .map(|s| s.trim() == "1")
        .unwrap_or(false);
    Ok(LoopDevice {
        path,
        majmin,
        backing: backing.to_path_buf(),
        direct_io,
    })
}

/// The file a loop device is attached to now, if any.
pub fn loop_backing(dev: &Path) -> Option<PathBuf> {
    let sys = sys_block(dev)?;
    let text = std::fs::read_to_string(sys.join("loop/backing_file")).ok()?;
    Some(PathBuf::from(text.trim().trim_end_matches(" (deleted)")))
}

/// Detach `dev` if it is still attached to `backing` (and only then).
/// Returns whether it was.
pub fn loop_detach(dev: &LoopDevice) -> Result<bool, HostError> {
    match loop_backing(&dev.path) {
        Some(b) if b == dev.backing => {
            run("losetup", &["-d", &dev.path.to_string_lossy()])?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Make a file system of type `fs` on `dev`, fully initialised (no lazy
/// initialisation writing behind the workload's back).
pub fn mkfs(fs: &str, dev: &Path) -> Result<(), HostError> {
    let d = dev.to_string_lossy();
    match fs {
        "ext4" | "ext3" | "ext2" => run(
            &format!("mkfs.{fs}"),
            &[
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
                &d,
            ],
        ),
        "xfs" => run("mkfs.xfs", &["-q", "-f", "-K", &d]),
        other => run(&format!("mkfs.{other}"), &[&d]),
    }
    .map(|_| ())
}

/// One line of `/proc/self/mountinfo`: (mount point, source, fs type).
fn mounts() -> Vec<(PathBuf, String, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split_whitespace().nth(4)?;
            let mut r = right.split_whitespace();
            let fs = r.next()?.to_string();
            let source = r.next()?.to_string();
            Some((PathBuf::from(unescape(point)), source, fs))
        })
        .collect()
}

/// mountinfo escapes spaces and such as `\040`.
fn unescape(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The source mounted at `point`, if something is.
pub fn mounted_at(point: &Path) -> Option<(String, String)> {
    let canonical = std::fs::canonicalize(point).unwrap_or_else(|_| point.to_path_buf());
    mounts()
        .into_iter()
        .rev()
        .find(|(p, _, _)| *p == canonical || p == point)
        .map(|(_, s, f)| (s, f))
}

/// Mount `dev` (a file system of type `fs`) at `point`.
pub fn mount(dev: &Path, fs: &str, options: &str, point: &Path) -> Result<(), HostError> {
    let mut args = vec!["-t", fs];
    if !options.is_empty() {
        args.extend(["-o", options]);
    }
    let d = dev.to_string_lossy();
    let p = point.to_string_lossy();
    args.extend([d.as_ref(), p.as_ref()]);
    run("mount", &args).map(|_| ())
}

/// Unmount `point` if `source` is what is mounted there. Returns whether
/// it was.
pub fn umount_if(point: &Path, source: &str) -> Result<bool, HostError> {
    match mounted_at(point) {
        Some((s, _)) if s == source => {
            run("umount", &[&point.to_string_lossy()])?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Which cgroup interface the machine has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// The unified hierarchy with the `io` controller.
    V2,
    /// Separate hierarchies (`blkio`, `memory`, `cpuset`).
    V1,
}

/// A cgroup the lab made, in one hierarchy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cgroup {
    /// Its directory.
    pub path: PathBuf,
    /// The controller it is for (`blkio`, `memory`, `cpuset`, or `unified`).
    pub controller: String,
}

/// Where this process sits in `controller`'s hierarchy (v1), or in the
/// unified one (`""`).
fn own_cgroup(controller: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let _id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        let matches = if controller.is_empty() {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == controller)
        };
        matches.then(|| path.to_string())
    })
}

fn is_cgroup2(dir: &Path) -> bool {
    dir.join("cgroup.controllers").exists()
}

/// The cgroup interface to throttle block I/O with, and the directory
/// under which the lab's cgroups go for `controller` (beneath the cgroup
/// this process is in, so whatever limits apply to it apply to the lab's
/// runs too).
pub fn cgroup_parent(controller: &str) -> Result<(CgroupVersion, PathBuf), HostError> {
    let root = Path::new("/sys/fs/cgroup");
    if is_cgroup2(root) {
        let own = own_cgroup("").unwrap_or_default();
        let dir = root.join(own.trim_start_matches('/'));
        let wanted = match controller {
            "blkio" => "io",
            other => other,
        };
        let available = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        if !available.split_whitespace().any(|c| c == wanted) {
            return Err(HostError::Unavailable(format!(
                "the `{wanted}` controller is not enabled in {} (cgroup v2)",
                dir.display()
            )));
        }
        return Ok((CgroupVersion::V2, dir));
    }
    let hierarchy = root.join(controller);
    if !hierarchy.join("cgroup.procs").exists() {
        return Err(HostError::Unavailable(format!(
            "no `{controller}` cgroup controller (neither cgroup v2 at /sys/fs/cgroup nor v1 at {})",
            hierarchy.display()
        )));
    }
    let own = own_cgroup(controller).unwrap_or_default();
    Ok((
        CgroupVersion::V1,
        hierarchy.join(own.trim_start_matches('/')),
    ))
}

/// Create the lab's cgroup `name` for `controller`.
pub fn cgroup_create(controller: &str, name: &str) -> Result<(CgroupVersion, Cgroup), HostError> {
    let (version, parent) = cgroup_parent(controller)?;
    let path = parent.join(name);
    if path.exists() {
        return Err(HostError::Unavailable(format!(
            "cgroup {} already exists (a lab left behind? `caseload lab down` removes it)",
            path.display()
        )));
    }
    if version == CgroupVersion::V2 {
        // Children need the controller enabled in the parent's subtree.
        let wanted = if controller == "blkio" {
            "io"
        } else {
            controller
        };
        let control = parent.join("cgroup.subtree_control");
        let enabled = std::fs::read_to_string(&control).unwrap_or_default();
        if !enabled.split_whitespace().any(|c| c == wanted) {
            std::fs::write(&control, format!("+{wanted}"))
                .map_err(io("enabling a controller in", &control))?;
        }
    }
    std::fs::create_dir(&path).map_err(io("creating cgroup", &path))?;
    if version == CgroupVersion::V1 && controller == "cpuset" {
        // A v1 cpuset starts empty: give it the parent's memory nodes.
        let mems = std::fs::read_to_string(parent.join("cpuset.mems")).unwrap_or_default();
        write_file(&path.join("cpuset.mems"), mems.trim())?;
    }
    Ok((
        version,
        Cgroup {
            path,
            controller: if version == CgroupVersion::V2 {
                "unified".into()
            } else {
                controller.into()
            },
        },
    ))
}

/// Write `value` to a control file.
pub fn write_file(path: &Path, value: &str) -> Result<(), HostError> {
    std::fs::write(path, value).map_err(io("writing", path))
}

/// Limit block I/O on device `majmin` in `cg`.
pub fn throttle(
    version: CgroupVersion,
    cg: &Cgroup,
    majmin: &str,
    t: &crate::model::Throttle,
) -> Result<(), HostError> {
    match version {
        CgroupVersion::V2 => {
            let mut line = majmin.to_string();
            for (key, v) in [
                ("rbps", t.read_bps),
                ("wbps", t.write_bps),
                ("riops", t.read_iops),
                ("wiops", t.write_iops),
            ] {
                if v > 0 {
                    line.push_str(&format!(" {key}={v}"));
                }
            }
            write_file(&cg.path.join("io.max"), &line)
        }
        CgroupVersion::V1 => {
            for (file, v) in [
                ("blkio.throttle.read_bps_device", t.read_bps),
                ("blkio.throttle.write_bps_device", t.write_bps),
                ("blkio.throttle.read_iops_device", t.read_iops),
                ("blkio.throttle.write_iops_device", t.write_iops),
            ] {
                if v > 0 {
                    write_file(&cg.path.join(file), &format!("{majmin} {v}"))?;
                }
            }
            Ok(())
        }
    }
}

/// CFS bandwidth period of a CPU quota: 100 ms, the kernel's default.
const CPU_PERIOD_US: u64 = 100_000;

/// Limit the CPU time of the processes in `cg` to `cpus` CPUs' worth (a
/// CFS quota per 100 ms period: `cpu.max`, or v1's `cpu.cfs_quota_us`).
pub fn cpu_quota(version: CgroupVersion, cg: &Cgroup, cpus: f64) -> Result<(), HostError> {
    let quota = ((cpus * CPU_PERIOD_US as f64).round() as u64).max(1_000);
    match version {
        CgroupVersion::V2 => write_file(
            &cg.path.join("cpu.max"),
            &format!("{quota} {CPU_PERIOD_US}"),
        ),
        CgroupVersion::V1 => {
            write_file(
                &cg.path.join("cpu.cfs_period_us"),
                &CPU_PERIOD_US.to_string(),
            )?;
            write_file(&cg.path.join("cpu.cfs_quota_us"), &quota.to_string())
        }
    }
}

/// Make `cmd`, when spawned, write its own pid into each of `files` (the
/// `cgroup.procs` of cgroups this project made) before it runs, as
/// `cgexec` does: only the new process moves, into cgroups beneath the
/// one caseload runs in.
#[cfg(not(unix))]
pub fn join_on_exec(_cmd: &mut std::process::Command, files: &[PathBuf]) -> Result<(), HostError> {
    if files.is_empty() {
        return Ok(());
    }
    Err(HostError::Unavailable("joining cgroups needs Linux".into()))
}

/// Make `cmd`, when spawned, write its own pid into each of `files` (the
/// `cgroup.procs` of cgroups this project made) before it runs, as
/// `cgexec` does: only the new process moves, into cgroups beneath the
/// one caseload runs in.
#[cfg(unix)]
pub fn join_on_exec(cmd: &mut std::process::Command, files: &[PathBuf]) -> Result<(), HostError> {
    use std::os::unix::process::CommandExt;
    let files: Vec<std::ffi::CString> = files
        .iter()
        .map(|p| {
            std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
                .map_err(|_| HostError::Unavailable(format!("cgroup path {}", p.display())))
        })
        .collect::<Result<_, _>>()?;
    if files.is_empty() {
        return Ok(());
    }
    // SAFETY: the closure runs in the child between fork and exec; it only
    // calls async-signal-safe functions (getpid, open, write, close) on
    // memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let pid = libc::getpid();
            let mut digits = [0u8; 12];
            let mut n = pid as u32;
            let mut i = digits.len();
            loop {
                i -= 1;
                digits[i] = b'0' + (n % 10) as u8;
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            for f in &files {
                let fd = libc::open(f.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let w = libc::write(fd, digits[i..].as_ptr().cast(), digits.len() - i);
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                if w < 0 {
                    return Err(e);
                }
            }
            Ok(())
        });
    }
    Ok(())
}

/// Processes in a cgroup.
pub fn cgroup_pids(cg: &Cgroup) -> Vec<u32> {
    std::fs::read_to_string(cg.path.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Remove the lab's cgroup if it is there and empty. Returns whether it
/// was removed; a cgroup with processes in it is an error naming them.
pub fn cgroup_remove(cg: &Cgroup) -> Result<bool, HostError> {
    if !cg.path.exists() {
        return Ok(false);
    }
    let pids = cgroup_pids(cg);
    if !pids.is_empty() {
        return Err(HostError::Unavailable(format!(
            "cgroup {} still has processes {:?} (a run still going?)",
            cg.path.display(),
            pids
        )));
    }
    std::fs::remove_dir(&cg.path).map_err(io("removing cgroup", &cg.path))?;
    Ok(true)
}

/// Free bytes of the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    caseload_engine::os::free_bytes(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_names_are_unescaped() {
        assert_eq!(unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape(r"/x\\y"), r"/x\\y");
        assert_eq!(unescape("/plain"), "/plain");
    }

    #[test]
    fn this_process_has_a_place_in_the_cgroup_tree() {
        // Either v2 or v1 with at least one hierarchy: the lookup never
        // panics and names a path under /sys/fs/cgroup when it succeeds.
        if let Ok((_, dir)) = cgroup_parent("blkio") {
            assert!(dir.starts_with("/sys/fs/cgroup"), "{}", dir.display());
        }
    }
}
