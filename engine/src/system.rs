//! What the machine is and where each channel sits: CPU, memory, kernel, and
//! per directory the mount, file system, mount options and block device
//! (model, rotational flag, I/O scheduler, device-mapper name so that an
//! encrypted volume is visible). Read from `/proc` and `/sys` on Linux,
//! from the volume APIs and the environment on Windows; anything that
//! cannot be read is left empty rather than guessed.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The machine a run happened on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SystemContext {
    /// Host name.
    pub hostname: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Logical CPUs available to this process.
    pub logical_cpus: usize,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// Kernel release.
    pub kernel: String,
    /// Operating system (PRETTY_NAME of os-release).
    pub os: String,
    /// The CPUs this process may run on (its affinity), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus_allowed: Vec<usize>,
    /// The CPU time its cgroup allows, in CPUs (a CFS quota: `cpu.max`,
    /// or v1's `cpu.cfs_quota_us` / `cpu.cfs_period_us`); absent without
    /// a quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<f64>,
    /// Which implementation of each hot kernel ran (MD5, SHA-1, lanes,
    /// inflate, ...), and how it was chosen (`kernels`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<crate::kernels::KernelChoice>,
}

impl SystemContext {
    /// Read the current machine's context.
    pub fn current() -> Self {
        #[cfg(windows)]
        return Self::current_windows();
        #[cfg(not(windows))]
        Self::current_linux()
    }

    /// Windows: the name, processor and memory from the environment and
    /// `GlobalMemoryStatusEx`.
    #[cfg(windows)]
    fn current_windows() -> Self {
        let env = |k: &str| std::env::var(k).unwrap_or_default();
        SystemContext {
            hostname: env("COMPUTERNAME"),
            cpu_model: env("PROCESSOR_IDENTIFIER"),
            logical_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes: crate::os::physical_memory().unwrap_or(0),
            kernel: String::new(),
            os: format!("Windows ({})", env("OS")),
            cpus_allowed: cpus_allowed(),
            cpu_quota: None,
            kernels: crate::kernels::all(),
        }
    }

    #[cfg(not(windows))]
    fn current_linux() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .and_then(|r| r.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_default();
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024);
        let os = std::fs::read_to_string("/etc/os-release")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_default();
        SystemContext {
            hostname: read_trimmed("/proc/sys/kernel/hostname"),
            cpu_model,
            logical_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes,
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            os,
            cpus_allowed: cpus_allowed(),
            cpu_quota: cpu_quota(),
            kernels: crate::kernels::all(),
        }
    }
}

/// The CPUs this process may run on (its affinity mask).
pub fn cpus_allowed() -> Vec<usize> {
    crate::os::cpus_allowed()
}

/// Limit this process (and the threads and processes it starts after) to
/// the first `n` of the CPUs it may use now; returns them.
pub fn restrict_cpus(n: usize) -> std::io::Result<Vec<usize>> {
    let allowed = cpus_allowed();
    if n == 0 || n > allowed.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{n} CPUs asked, {} allowed ({allowed:?})", allowed.len()),
        ));
    }
    crate::os::set_cpus(&allowed[..n])?;
    Ok(allowed[..n].to_vec())
}

/// Where program `name` is on `PATH`, if it is (`name.exe` on Windows).
pub fn program_on_path(name: &str) -> Option<PathBuf> {
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(&file))
            .find(|c| c.is_file())
    })
}

/// The CPU quota of this process's cgroup, in CPUs, if it has one.
pub fn cpu_quota() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            let max = read_opt(Path::new("/sys/fs/cgroup").join(path).join("cpu.max"))?;
            let (quota, period) = max.split_once(' ')?;
            let (q, p) = (quota.parse::<f64>().ok()?, period.parse::<f64>().ok()?);
            return (p > 0.0).then_some(q / p);
        }
        if controllers.split(',').any(|c| c == "cpu") {
            let dir = Path::new("/sys/fs/cgroup/cpu").join(path);
            let q: i64 = read_opt(dir.join("cpu.cfs_quota_us"))?.parse().ok()?;
            let p: i64 = read_opt(dir.join("cpu.cfs_period_us"))?.parse().ok()?;
            return (q > 0 && p > 0).then(|| q as f64 / p as f64);
        }
    }
    None
}

/// Where a directory (or file) physically lives.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Placement {
    /// The path asked about.
    pub path: PathBuf,
    /// Mount point containing it.
    pub mount_point: String,
    /// File-system type (ext4, xfs, tmpfs, nfs4, fuseblk...).
    pub fs_type: String,
    /// What is mounted (device node, remote share, `tmpfs`...).
    pub mount_source: String,
    /// Mount options (per-mount and per-superblock); on Windows the
    /// volume's cluster size and whether its device takes TRIM.
    pub mount_options: String,
    /// Kernel block device name (`sda`, `nvme0n1`, `dm-0`), if any; on
    /// Windows the volume's device path (`\\.\C:`).
    pub device: Option<String>,
    /// The whole-disk device under it, if it is a partition.
    pub disk: Option<String>,
    /// Device model string, when the kernel exposes one.
    pub model: Option<String>,
    /// Whether the device reports itself rotational (a hard disk); on
    /// Windows whether it incurs a seek penalty, Windows' own SSD test.
    pub rotational: Option<bool>,
    /// Active I/O scheduler.
    pub scheduler: Option<String>,
    /// Device-mapper name and whether it is a dm-crypt (LUKS) mapping.
    pub dm_name: Option<String>,
    /// True when the device is a dm-crypt mapping.
    pub encrypted: bool,
    /// True for network file systems (NFS, SMB/CIFS, sshfs...).
    pub network: bool,
    /// Free bytes on the file system.
    pub free_bytes: Option<u64>,
}

/// This machine's host name (empty when it cannot be read).
pub fn hostname() -> String {
    read_trimmed("/proc/sys/kernel/hostname")
}

fn read_trimmed(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn read_opt(path: impl AsRef<Path>) -> Option<String> {
    let s = read_trimmed(path);
    (!s.is_empty()).then_some(s)
}

/// Describe where `path` lives.
pub fn placement(path: &Path) -> Placement {
    #[cfg_attr(not(windows), allow(unused_mut))]
    let mut out = Placement {
        path: path.to_path_buf(),
        ..Placement::default()
    };
    #[cfg(windows)]
    {
        out.free_bytes = crate::os::free_bytes(path);
        if let Some(root) = crate::os::volume_root(path) {
            out.mount_point = root.to_string_lossy().into_owned();
            out.network =
                out.mount_point.starts_with(r"\\") && !out.mount_point.starts_with(r"\\?\");
        }
        if let Some((serial, fs, label)) = crate::os::volume_info(path) {
            out.fs_type = fs;
            out.mount_source = format!("{label} (volume {serial:08X})");
        }
        if let Some(c) = crate::os::cluster_bytes(path) {
            out.mount_options = format!("cluster={c}");
        }
        if let Some(d) = crate::os::storage_device(path) {
            out.device = Some(d.device);
            out.model = d.model;
            // Windows decides "SSD or not" by the seek penalty.
            out.rotational = d.seek_penalty;
            if let Some(trim) = d.trim {
                let sep = if out.mount_options.is_empty() {
                    ""
                } else {
                    ","
                };
                out.mount_options.push_str(&format!("{sep}trim={trim}"));
            }
        }
        out
    }
    #[cfg(not(windows))]
    linux_placement(path, out)
}

#[cfg(not(windows))]
fn linux_placement(path: &Path, mut out: Placement) -> Placement {
    let Some(dev) = crate::os::device_of(path) else {
        return out;
    };
    let (major, minor) = (libc_major(dev), libc_minor(dev));
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // Several mounts can share a device (bind mounts); the longest mount
    // point that prefixes the canonical path is the one in effect.
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut best: Option<(usize, MountLine)> = None;
    for line in mountinfo.lines() {
        let Some(m) = parse_mountinfo(line) else {
            continue;
        };
        if m.major != major || m.minor != minor {
            continue;
        }
        if !canonical.starts_with(&m.mount_point) {
            continue;
        }
        let len = m.mount_point.len();
        if best.as_ref().is_none_or(|(l, _)| len > *l) {
            best = Some((len, m));
        }
    }
    if let Some((_, m)) = best {
        out.mount_point = m.mount_point;
        out.network = matches!(
            m.fs_type.as_str(),
            "nfs" | "nfs4" | "cifs" | "smb3" | "smbfs" | "fuse.sshfs" | "9p" | "ceph" | "glusterfs"
        );
        out.fs_type = m.fs_type;
        out.mount_source = m.source;
        out.mount_options = if m.super_options.is_empty() {
            m.options
        } else {
            format!("{},{}", m.options, m.super_options)
        };
    }
    out.free_bytes = crate::os::free_bytes(path);
    if major == 0 {
        // Anonymous device: tmpfs, overlay, network file systems.
        return out;
    }
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let Ok(real) = std::fs::canonicalize(&sys) else {
        return out;
    };
    let name = real.file_name().map(|n| n.to_string_lossy().into_owned());
    out.device = name.clone();
    // A partition's queue settings live on its parent disk.
    let disk_dir = if real.join("partition").exists() {
        real.parent().map(Path::to_path_buf).unwrap_or(real.clone())
    } else {
        real.clone()
    };
    out.disk = disk_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    out.rotational = read_opt(disk_dir.join("queue/rotational")).map(|v| v == "1");
    out.scheduler = read_opt(disk_dir.join("queue/scheduler")).map(|s| {
        // "mq-deadline [none]" -> the bracketed one is active.
        s.split_whitespace()
            .find(|w| w.starts_with('['))
            .map(|w| w.trim_matches(['[', ']']).to_string())
            .unwrap_or(s)
    });
    out.model =
        read_opt(disk_dir.join("device/model")).or_else(|| read_opt(disk_dir.join("device/name")));
    if let Some(dm) = read_opt(real.join("dm/name")) {
        out.dm_name = Some(dm);
        out.encrypted = read_opt(real.join("dm/uuid")).is_some_and(|u| u.starts_with("CRYPT-"));
    }
    out
}

/// The kernel's largest read-ahead window, in bytes, for files on device
/// `dev` (`st_dev`): the backing device's `read_ahead_kb` (a partition's
/// is its disk's; anonymous devices such as FUSE and overlay file systems
/// have one of their own), else the kernel's default of 128 KiB.
pub fn read_ahead_bytes(dev: u64) -> u64 {
    #[cfg(windows)]
    {
        // Windows' cache manager reads ahead by its own heuristics; 128
        // KiB stands for them as for a device Linux knows nothing of.
        let _ = dev;
        128 << 10
    }
    #[cfg(not(windows))]
    linux_read_ahead_bytes(dev)
}

#[cfg(not(windows))]
fn linux_read_ahead_bytes(dev: u64) -> u64 {
    let (major, minor) = (libc_major(dev), libc_minor(dev));
    let bdi = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
    let disk = format!("/sys/dev/block/{major}:{minor}/../queue/read_ahead_kb");
    [bdi, disk]
        .iter()
        .find_map(|p| read_opt(p)?.parse::<u64>().ok())
        .map_or(128 << 10, |kb| kb << 10)
}

#[cfg(not(windows))]
fn libc_major(dev: u64) -> u32 {
    libc::major(dev as libc::dev_t)
}

#[cfg(not(windows))]
fn libc_minor(dev: u64) -> u32 {
    libc::minor(dev as libc::dev_t)
}

#[cfg(not(windows))]
struct MountLine {
    major: u32,
    minor: u32,
    mount_point: String,
    options: String,
    fs_type: String,
    source: String,
    super_options: String,
}

/// One line of /proc/self/mountinfo (see proc(5)).
#[cfg(not(windows))]
fn parse_mountinfo(line: &str) -> Option<MountLine> {
    let (left, right) = line.split_once(" - ")?;
    let f: Vec<&str> = left.split(' ').collect();
    let (major, minor) = f.get(2)?.split_once(':')?;
    let r: Vec<&str> = right.split(' ').collect();
    Some(MountLine {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        mount_point: unescape_mount(f.get(4)?),
        options: f.get(5)?.to_string(),
        fs_type: r.first()?.to_string(),
        source: unescape_mount(r.get(1).unwrap_or(&"")),
        super_options: r.get(2).unwrap_or(&"").to_string(),
    })
}

/// mountinfo escapes space, tab, newline and backslash as octal.
#[cfg(not(windows))]
fn unescape_mount(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(not(windows))]
    #[test]
    fn mountinfo_lines_parse() {
        let line =
            "36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 - ext3 /dev/root rw,errors=continue";
        let m = parse_mountinfo(line).unwrap();
        assert_eq!((m.major, m.minor), (98, 0));
        assert_eq!(m.mount_point, "/mnt two");
        assert_eq!(m.fs_type, "ext3");
        assert_eq!(m.source, "/dev/root");
        assert_eq!(m.options, "rw,noatime");
        assert_eq!(m.super_options, "rw,errors=continue");
    }

    #[test]
    fn the_current_directory_has_a_placement() {
        let p = placement(Path::new("."));
        assert!(!p.mount_point.is_empty());
        assert!(!p.fs_type.is_empty());
        let sys = SystemContext::current();
        assert!(sys.logical_cpus >= 1);
        assert!(sys.memory_bytes > 0);
        assert!(!sys.kernel.is_empty());
    }
}
