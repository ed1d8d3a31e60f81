//! Linux (and other Unix) implementations of [`super`]'s functions.

use super::FileAt;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

impl FileAt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        FileExt::write_at(self, buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }
}

/// Drop `len` bytes of `file`'s cached pages from `offset` (0 and 0: the
/// whole file), writing them back first when `writeback`
/// (`sync_file_range`, then `posix_fadvise(DONTNEED)`); whether the kernel
/// took the advice.
pub fn drop_cached_range(file: &File, offset: u64, len: u64, writeback: bool) -> bool {
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return false;
    };
    if writeback && start_writeback(file, offset, len, true).is_err() {
        return false;
    }
    // SAFETY: a valid descriptor; DONTNEED only drops clean cached pages.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), off, n, libc::POSIX_FADV_DONTNEED) == 0 }
}

/// Start writing back `file`'s dirty pages in `len` bytes from `offset`
/// (0: to the end), and wait for them when `wait`, with no device cache
/// flush and no metadata (`sync_file_range`). Elsewhere than Linux a
/// waiting writeback is an fdatasync (the nearest call) and a started one
/// nothing (the kernel writes back on its own).
pub fn start_writeback(file: &File, offset: u64, len: u64, wait: bool) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "writeback range past the largest offset",
            ));
        };
        let flags = if wait {
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER
        } else {
            libc::SYNC_FILE_RANGE_WRITE
        };
        // SAFETY: a valid descriptor; sync_file_range only writes back.
        if unsafe { libc::sync_file_range(file.as_raw_fd(), off, n, flags) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (offset, len);
        if wait { file.sync_data() } else { Ok(()) }
    }
}

/// Write back every dirty page of every file system (`sync(2)`); true.
pub fn sync_everything() -> bool {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    true
}

/// Flush the data and metadata of every file on the file system holding
/// `dir` (`syncfs(2)`).
pub fn sync_file_system(dir: &Path) -> io::Result<()> {
    let d = File::open(dir)?;
    // SAFETY: a valid open descriptor; syncfs only flushes.
    if unsafe { libc::syncfs(d.as_raw_fd()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A file's identity, the same for every handle and path to it: its
/// device and inode.
pub fn file_identity(file: &File) -> io::Result<(u64, u64)> {
    let m = file.metadata()?;
    Ok((m.dev(), m.ino()))
}

/// The device (file system) holding `path`, to tell whether two paths
/// share one.
pub fn device_of(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.dev())
}

/// Open `path` read-only bypassing the page cache (`O_DIRECT`): reads must
/// then be aligned to the device's logical block in offset, length and
/// buffer address.
pub fn open_unbuffered(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

/// Open `path` for reading and writing bypassing the page cache
/// (`O_DIRECT`), as [`open_unbuffered`]: aligned transfers only.
pub fn open_unbuffered_read_write(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

/// Reserve `len` bytes for `file` on its device (`posix_fallocate`); the
/// file grows to `len` if shorter.
pub fn preallocate(file: &File, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len).unwrap_or(libc::off_t::MAX);
    // SAFETY: a valid descriptor we own; posix_fallocate only allocates.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) } {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Free bytes for an unprivileged user on the file system holding `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a zeroed statvfs is a valid out-struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid NUL-terminated path and a properly sized out-struct.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// Whether `dir` is on a memory file system (tmpfs, ramfs), whose pages
/// no model can drop: they are the files themselves.
pub fn on_memory_fs(dir: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: a zeroed statfs is a valid out-struct.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: a valid NUL-terminated path and the out-struct.
        if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
            return false;
        }
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        const RAMFS_MAGIC: i64 = 0x8584_58f6;
        matches!(st.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        false
    }
}

/// Which pages of `len` bytes of `file` from `offset` (a multiple of 4096)
/// the kernel holds (`mincore` over a read-only shared mapping, which
/// faults nothing in); nothing past the file's end.
pub fn resident_range(file: &File, offset: u64, len: u64) -> io::Result<Vec<bool>> {
    const PAGE: usize = 4096;
    let size = file.metadata()?.len();
    let len = len.min(size.saturating_sub(offset));
    let (Ok(len), Ok(at)) = (usize::try_from(len), libc::off_t::try_from(offset)) else {
        return Err(io::Error::other("range too large to map"));
    };
    if len == 0 {
        return Ok(Vec::new());
    }
    let pages = len.div_ceil(PAGE);
    // SAFETY: a read-only shared mapping of an open regular file; it is
    // never read through, only asked about, and unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            at,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; pages];
    // SAFETY: `addr` maps `len` bytes; `vec` has one byte per page.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr().cast()) };
    let err = io::Error::last_os_error();
    // SAFETY: the mapping made above, of `len` bytes.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(err);
    }
    Ok(vec.into_iter().map(|b| b & 1 == 1).collect())
}

/// CPU time of the whole process so far: user and system, all threads
/// (`getrusage(RUSAGE_SELF)`); zero where refused.
pub fn process_cpu_times() -> (Duration, Duration) {
    // SAFETY: a zeroed rusage is a valid out-struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    (tv(usage.ru_utime), tv(usage.ru_stime))
}

/// The CPUs this process may run on (its affinity mask).
pub fn cpus_allowed() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: sched_getaffinity fills the set for this process.
        if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `set` is initialised and the index is below CPU_SETSIZE.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    }
    #[cfg(not(target_os = "linux"))]
    {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
    }
}

/// Limit this process (and the threads and processes it starts after) to
/// `cpus`.
pub fn set_cpus(cpus: &[usize]) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            if c >= libc::CPU_SETSIZE as usize {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("CPU {c}"),
                ));
            }
            // SAFETY: the index is below CPU_SETSIZE, checked above.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        // SAFETY: a valid set of the size passed, for this process.
        if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpus;
        Err(super::unsupported("setting CPU affinity"))
    }
}

/// Whether process `pid` exists (signal 0; a process we may not signal
/// exists too).
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether caseload runs with the superuser's rights (root).
pub fn is_superuser() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A path's bytes as the OS holds them (any bytes on Unix).
pub fn path_bytes(path: &Path) -> std::borrow::Cow<'_, [u8]> {
    std::borrow::Cow::Borrowed(path.as_os_str().as_bytes())
}

/// A path from the bytes a C library gave (SQLite's file names).
pub fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

/// Lower the calling thread's scheduling priority a step (nice + 5 on
/// Linux, which keeps nice values per thread); false where refused.
pub fn lower_thread_priority() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions; getpriority/setpriority on
        // our own thread id read and change only that thread's nice value.
        unsafe {
            let tid = libc::gettid() as libc::id_t;
            let current = libc::getpriority(libc::PRIO_PROCESS, tid);
            libc::setpriority(libc::PRIO_PROCESS, tid, (current + 5).min(19)) == 0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Make the calling thread's sleeps end when asked (Linux's timer slack
/// to 1 ns; by default a sleep may end up to 50 µs late, which a replay
/// of thousands of short think times would add up); false where refused.
pub fn precise_sleeps() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_TIMERSLACK changes only the calling thread's slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Start `cmd` as the leader of a process group of its own: a Ctrl-C at
/// the terminal reaches caseload, which passes it on in order.
pub fn own_process_group(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
}

/// Send `signal` to process `pid`, or to its process group as well when
/// `group` (it leads one); whether it was sent. The caller knows the
/// process as one caseload started.
pub fn send_signal(pid: u32, signal: libc::c_int, group: bool) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    let target = if group { -pid } else { pid };
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(target, signal) == 0 }
}

/// Ask the process group led by `leader` to stop (`SIGINT`), or end it
/// (`SIGKILL`) when `hard`; whether the signal was sent.
pub fn stop_process_group(leader: u32, hard: bool) -> bool {
    send_signal(
        leader,
        if hard { libc::SIGKILL } else { libc::SIGINT },
        true,
    )
}

/// The signal that ended a process, if one did.
pub fn exit_signal(status: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

/// Make a directory's entries durable (`fsync` on the directory).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The process's I/O so far from `/proc/self/io`: bytes and calls through
/// `read`/`write`-like system calls (`rchar`, `wchar`, `syscr`, `syscw`,
/// page-cache hits included), and the bytes that reached or will reach
/// storage (`read_bytes`, `write_bytes`).
pub fn process_io() -> Option<super::ProcessIoCounters> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(super::ProcessIoCounters {
        read_bytes: field("rchar")?,
        write_bytes: field("wchar")?,
        read_ops: field("syscr")?,
        write_ops: field("syscw")?,
        storage_read_bytes: field("read_bytes"),
        storage_write_bytes: field("write_bytes"),
    })
}
