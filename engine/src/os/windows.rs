//! Windows implementations of [`super`]'s functions (Win32 through
//! `windows-sys`). Where Windows has no equivalent the function says so
//! by its result: a `false`, a `None` or an `Unsupported` error.

use super::FileAt;
use std::fs::File;
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::FileExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::{Path, PathBuf};
use std::time::Duration;
use windows_sys::Win32::Foundation::{CloseHandle, FILETIME, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::Storage::FileSystem as fs;
use windows_sys::Win32::System::Threading as th;

impl FileAt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.seek_read(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.seek_write(buf, offset)
    }
}

fn wide(path: &Path) -> Vec<u16> {
    path.as_os_str().encode_wide().chain(Some(0)).collect()
}

fn handle(file: &File) -> HANDLE {
    file.as_raw_handle() as HANDLE
}

/// The root of the volume holding `path` (`C:\`, `\\server\share\`).
pub fn volume_root(path: &Path) -> Option<PathBuf> {
    let w = wide(path);
    let mut out = vec![0u16; 32 * 1024];
    // SAFETY: a NUL-terminated path and an out-buffer of the length given.
    let ok = unsafe { fs::GetVolumePathNameW(w.as_ptr(), out.as_mut_ptr(), out.len() as u32) };
    if ok == 0 {
        return None;
    }
    let n = out.iter().position(|&c| c == 0).unwrap_or(out.len());
    Some(PathBuf::from(String::from_utf16_lossy(&out[..n])))
}

/// The volume holding `path`: its serial number, file system name (NTFS,
/// FAT32, ReFS) and label.
pub fn volume_info(path: &Path) -> Option<(u32, String, String)> {
    let root = wide(&volume_root(path)?);
    let mut label = [0u16; 261];
    let mut fs_name = [0u16; 261];
    let mut serial = 0u32;
    let (mut max_len, mut flags) = (0u32, 0u32);
    // SAFETY: a NUL-terminated root and out-buffers of the lengths given.
    let ok = unsafe {
        fs::GetVolumeInformationW(
            root.as_ptr(),
            label.as_mut_ptr(),
            label.len() as u32,
            &mut serial,
            &mut max_len,
            &mut flags,
            fs_name.as_mut_ptr(),
            fs_name.len() as u32,
        )
    };
    if ok == 0 {
        return None;
    }
    let text = |b: &[u16]| {
        let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf16_lossy(&b[..n])
    };
    Some((serial, text(&fs_name), text(&label)))
}

/// Windows has no call that drops a range of one file's cached pages; the
/// pages are written back (`FlushFileBuffers`) when `writeback`, and the
/// answer is false: not dropped.
pub fn drop_cached_range(file: &File, _offset: u64, _len: u64, writeback: bool) -> bool {
    if writeback {
        let _ = start_writeback(file, 0, 0, true);
    }
    false
}

/// Windows has no call that starts writeback of a file's range without
/// flushing the device's cache: a started writeback is left to the cache
/// manager's lazy writer, which writes back on its own (nothing done), and
/// a waited one is a `FlushFileBuffers`, the nearest call.
pub fn start_writeback(file: &File, _offset: u64, _len: u64, wait: bool) -> io::Result<()> {
    if wait { file.sync_data() } else { Ok(()) }
}

/// Windows has no `sync()`; flushing a volume needs a handle to the
/// volume itself (administrators only), so nothing is done: false.
pub fn sync_everything() -> bool {
    false
}

/// The volume holding `path` opened as a device (`\\.\C:`, returned
/// too) with `access` (0: queries only), closed when dropped. Volumes
/// mounted on a drive letter only.
fn open_volume(path: &Path, access: u32) -> io::Result<(String, OwnedHandle)> {
    let root = volume_root(path).ok_or_else(io::Error::last_os_error)?;
    let letter = root.to_string_lossy().trim_end_matches('\\').to_string();
    if letter.len() != 2 || !letter.ends_with(':') {
        return Err(super::unsupported(&format!(
            "opening the volume `{}` (not a drive letter)",
            root.display()
        )));
    }
    let device = format!(r"\\.\{letter}");
    let name = wide(Path::new(&device));
    // SAFETY: a NUL-terminated device name; the handle is owned below.
    let h = unsafe {
        fs::CreateFileW(
            name.as_ptr(),
            access,
            fs::FILE_SHARE_READ | fs::FILE_SHARE_WRITE,
            std::ptr::null(),
            fs::OPEN_EXISTING,
            0,
            std::ptr::null_mut(),
        )
    };
    if h == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle just opened, owned by nothing else.
    Ok((device, unsafe { OwnedHandle::from_raw_handle(h) }))
}

/// Flush the volume holding `dir` (`FlushFileBuffers` on the volume's
/// handle, `\\.\C:`), which needs administrator rights.
pub fn sync_file_system(dir: &Path) -> io::Result<()> {
    const GENERIC_WRITE: u32 = 0x4000_0000;
    let (_, volume) = open_volume(dir, GENERIC_WRITE)?;
    // SAFETY: a valid volume handle.
    if unsafe { fs::FlushFileBuffers(volume.as_raw_handle()) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A file's identity: its volume's serial number and its file index.
pub fn file_identity(file: &File) -> io::Result<(u64, u64)> {
    // SAFETY: a zeroed struct is a valid out-parameter.
    let mut info: fs::BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a valid handle and the out-struct.
    if unsafe { fs::GetFileInformationByHandle(handle(file), &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((
        u64::from(info.dwVolumeSerialNumber),
        (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow),
    ))
}

/// The volume holding `path` (its serial number).
pub fn device_of(path: &Path) -> Option<u64> {
    volume_info(path).map(|(serial, _, _)| u64::from(serial))
}

/// Open `path` read-only with `FILE_FLAG_NO_BUFFERING` (no cache manager):
/// reads must be aligned to the volume's sector size in offset, length and
/// buffer address.
pub fn open_unbuffered(path: &Path) -> io::Result<File> {
    use std::os::windows::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(fs::FILE_FLAG_NO_BUFFERING)
        .open(path)
}

/// Open `path` for reading and writing with `FILE_FLAG_NO_BUFFERING`, as
/// [`open_unbuffered`]: aligned transfers only.
pub fn open_unbuffered_read_write(path: &Path) -> io::Result<File> {
    use std::os::windows::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(fs::FILE_FLAG_NO_BUFFERING)
        .open(path)
}

/// Reserve `len` bytes for `file` by writing zeros up to `len` where it
/// is shorter. Windows has no `posix_fallocate`, and a longer end of file
/// alone is sparse wherever the volume allows (Wine on Linux), which
/// reserves nothing; the callers reserve little (a report's room).
pub fn preallocate(file: &File, len: u64) -> io::Result<()> {
    let zeros = [0u8; 64 << 10];
    let mut at = file.metadata()?.len();
    while at < len {
        let n = (len - at).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// Free bytes for this user on the volume holding `path`
/// (`GetDiskFreeSpaceExW`, quotas included).
pub fn free_bytes(path: &Path) -> Option<u64> {
    let w = wide(path);
    let (mut avail, mut total, mut free) = (0u64, 0u64, 0u64);
    // SAFETY: a NUL-terminated path and three out-integers.
    let ok = unsafe { fs::GetDiskFreeSpaceExW(w.as_ptr(), &mut avail, &mut total, &mut free) };
    (ok != 0).then_some(avail)
}

/// Windows has no memory file system caseload could write to.
pub fn on_memory_fs(_dir: &Path) -> bool {
    false
}

/// Windows cannot tell which pages of a file are cached.
pub fn resident_range(_file: &File, _offset: u64, _len: u64) -> io::Result<Vec<bool>> {
    Err(super::unsupported(
        "asking which of a file's pages are cached",
    ))
}

fn filetime(t: FILETIME) -> Duration {
    let hundreds = (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime);
    Duration::from_nanos(hundreds.saturating_mul(100))
}

/// CPU time of the whole process so far: user and kernel, all threads
/// (`GetProcessTimes`); zero where refused.
pub fn process_cpu_times() -> (Duration, Duration) {
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: the pseudo-handle of this process and four out-structs.
    let ok = unsafe {
        th::GetProcessTimes(
            th::GetCurrentProcess(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    };
    if ok == 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    (filetime(user), filetime(kernel))
}

/// The process's working set now and its peak so far
/// (`GetProcessMemoryInfo`).
pub fn working_set() -> Option<(u64, u64)> {
    use windows_sys::Win32::System::ProcessStatus as ps;
    // SAFETY: a zeroed struct is a valid out-parameter.
    let mut m: ps::PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<ps::PROCESS_MEMORY_COUNTERS>() as u32;
    m.cb = size;
    // SAFETY: the pseudo-handle of this process and the out-struct of `size`.
    let ok = unsafe { ps::K32GetProcessMemoryInfo(th::GetCurrentProcess(), &mut m, size) };
    (ok != 0).then_some((m.WorkingSetSize as u64, m.PeakWorkingSetSize as u64))
}

/// Physical memory installed (`GlobalMemoryStatusEx`).
pub fn physical_memory() -> Option<u64> {
    use windows_sys::Win32::System::SystemInformation as si;
    // SAFETY: a zeroed struct is a valid out-parameter.
    let mut m: si::MEMORYSTATUSEX = unsafe { std::mem::zeroed() };
    m.dwLength = std::mem::size_of::<si::MEMORYSTATUSEX>() as u32;
    // SAFETY: the out-struct with its length set.
    (unsafe { si::GlobalMemoryStatusEx(&mut m) } != 0).then_some(m.ullTotalPhys)
}

fn affinity() -> Option<usize> {
    let (mut process, mut system) = (0usize, 0usize);
    // SAFETY: the pseudo-handle of this process and two out-masks.
    let ok =
        unsafe { th::GetProcessAffinityMask(th::GetCurrentProcess(), &mut process, &mut system) };
    (ok != 0).then_some(process)
}

/// The CPUs this process may run on (its affinity mask; the first
/// processor group).
pub fn cpus_allowed() -> Vec<usize> {
    let Some(mask) = affinity() else {
        return Vec::new();
    };
    (0..usize::BITS as usize)
        .filter(|&c| mask >> c & 1 == 1)
        .collect()
}

/// Limit this process (and the processes it starts after) to `cpus`
/// (`SetProcessAffinityMask`).
pub fn set_cpus(cpus: &[usize]) -> io::Result<()> {
    let mut mask = 0usize;
    for &c in cpus {
        if c >= usize::BITS as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {c}"),
            ));
        }
        mask |= 1 << c;
    }
    // SAFETY: the pseudo-handle of this process and a mask.
    if unsafe { th::SetProcessAffinityMask(th::GetCurrentProcess(), mask) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether process `pid` still runs (its exit code is `STILL_ACTIVE`).
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: OpenProcess returns null or a handle closed below.
    let h = unsafe { th::OpenProcess(th::PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if h.is_null() {
        // Access denied means it exists.
        return io::Error::last_os_error().raw_os_error() == Some(5);
    }
    let mut code = 0u32;
    // SAFETY: a valid process handle and an out-integer.
    let ok = unsafe { th::GetExitCodeProcess(h, &mut code) };
    // SAFETY: the handle opened above.
    unsafe { CloseHandle(h) };
    ok != 0 && code == windows_sys::Win32::Foundation::STILL_ACTIVE as u32
}

/// Windows has no root: PostgreSQL's refusal of root concerns Unix.
pub fn is_superuser() -> bool {
    false
}

/// A path as UTF-8 bytes (unpaired surrogates replaced).
pub fn path_bytes(path: &Path) -> std::borrow::Cow<'_, [u8]> {
    match path.to_string_lossy() {
        std::borrow::Cow::Borrowed(s) => std::borrow::Cow::Borrowed(s.as_bytes()),
        std::borrow::Cow::Owned(s) => std::borrow::Cow::Owned(s.into_bytes()),
    }
}

/// A path from the UTF-8 bytes a C library gave (SQLite's Windows VFS
/// names files in UTF-8).
pub fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}

/// Run the calling thread one step below normal priority
/// (`THREAD_PRIORITY_BELOW_NORMAL`); false where refused.
pub fn lower_thread_priority() -> bool {
    // SAFETY: the pseudo-handle of the calling thread.
    unsafe { th::SetThreadPriority(th::GetCurrentThread(), th::THREAD_PRIORITY_BELOW_NORMAL) != 0 }
}

/// Precise sleeps: Windows' timer resolution is process-wide and left as
/// it is (the replay's waits end by spinning instead); false.
pub fn precise_sleeps() -> bool {
    false
}

/// Start `cmd` in a process group of its own (`CREATE_NEW_PROCESS_GROUP`),
/// so that a console Ctrl-Break can be sent to it alone.
pub fn own_process_group(cmd: &mut std::process::Command) {
    use std::os::windows::process::CommandExt;
    cmd.creation_flags(0x0000_0200);
}

/// Ask the process group led by `leader` to stop (a Ctrl-Break console
/// event, which caseload handles as a Ctrl-C), or end the leader
/// (`TerminateProcess`) when `hard`; whether it was done.
pub fn stop_process_group(leader: u32, hard: bool) -> bool {
    if !hard {
        use windows_sys::Win32::System::Console::{CTRL_BREAK_EVENT, GenerateConsoleCtrlEvent};
        // SAFETY: no memory is involved.
        return unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, leader) } != 0;
    }
    // SAFETY: OpenProcess returns null or a handle closed below.
    let h = unsafe { th::OpenProcess(th::PROCESS_TERMINATE, 0, leader) };
    if h.is_null() {
        return false;
    }
    // SAFETY: a valid process handle.
    let ok = unsafe { th::TerminateProcess(h, 1) } != 0;
    // SAFETY: the handle opened above.
    unsafe { CloseHandle(h) };
    ok
}

/// Windows ends processes with exit codes, not signals.
pub fn exit_signal(_status: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// Windows has no directory fsync: NTFS journals a directory's entries
/// itself, and `FlushFileBuffers` refuses a directory handle. The
/// directory is checked to exist; nothing is flushed.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    if std::fs::metadata(dir)?.is_dir() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            dir.display().to_string(),
        ))
    }
}

#[link(name = "ntdll")]
unsafe extern "system" {
    /// ntdll's system-information setter; class 80 is
    /// `SystemMemoryListInformation`, whose commands manage the memory
    /// manager's page lists (as Sysinternals' RAMMap does).
    fn NtSetSystemInformation(class: i32, info: *const core::ffi::c_void, len: u32) -> i32;
}

/// Enable privilege `name` in this process's token (it must hold it:
/// administrators hold SeProfileSingleProcessPrivilege, disabled).
fn enable_privilege(name: windows_sys::core::PCWSTR) -> io::Result<()> {
    use windows_sys::Win32::Foundation::{ERROR_NOT_ALL_ASSIGNED, GetLastError, LUID};
    use windows_sys::Win32::Security as sec;
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: this process's pseudo-handle and an out-handle closed below.
    if unsafe {
        th::OpenProcessToken(
            th::GetCurrentProcess(),
            sec::TOKEN_ADJUST_PRIVILEGES | sec::TOKEN_QUERY,
            &mut token,
        )
    } == 0
    {
        return Err(io::Error::last_os_error());
    }
    let mut luid = LUID {
        LowPart: 0,
        HighPart: 0,
    };
    // SAFETY: a NUL-terminated privilege name and an out-LUID.
    let result = if unsafe { sec::LookupPrivilegeValueW(std::ptr::null(), name, &mut luid) } == 0 {
        Err(io::Error::last_os_error())
    } else {
        let tp = sec::TOKEN_PRIVILEGES {
            PrivilegeCount: 1,
            Privileges: [sec::LUID_AND_ATTRIBUTES {
                Luid: luid,
                Attributes: sec::SE_PRIVILEGE_ENABLED,
            }],
        };
        // SAFETY: a token opened for adjusting and one privilege.
        let ok = unsafe {
            sec::AdjustTokenPrivileges(token, 0, &tp, 0, std::ptr::null_mut(), std::ptr::null_mut())
        };
        // AdjustTokenPrivileges succeeds without assigning a privilege the
        // token lacks; the last error says so.
        // SAFETY: reads this thread's last error.
        let last = unsafe { GetLastError() };
        if ok == 0 {
            Err(io::Error::last_os_error())
        } else if last == ERROR_NOT_ALL_ASSIGNED {
            Err(io::Error::from_raw_os_error(last as i32))
        } else {
            Ok(())
        }
    };
    // SAFETY: the token opened above.
    unsafe { CloseHandle(token) };
    result
}

/// Empty the file cache as RAMMap's "Empty Standby List" does: write the
/// modified page list to disk, then purge the standby list (the clean
/// cached pages of every file). Needs SeProfileSingleProcessPrivilege,
/// which administrators hold.
pub fn purge_standby_list() -> io::Result<()> {
    if under_wine() {
        // Wine accepts the call and does nothing: Linux's page cache is
        // Linux's to drop.
        return Err(super::unsupported(
            "emptying the standby list under Wine (which accepts the call and drops nothing)",
        ));
    }
    enable_privilege(windows_sys::Win32::Security::SE_PROF_SINGLE_PROCESS_NAME)?;
    const SYSTEM_MEMORY_LIST_INFORMATION: i32 = 80;
    for command in [
        3u32, /* flush modified list */
        4,    /* purge standby list */
    ] {
        // SAFETY: a 4-byte command for the class, read and not kept.
        let status = unsafe {
            NtSetSystemInformation(
                SYSTEM_MEMORY_LIST_INFORMATION,
                (&raw const command).cast(),
                4,
            )
        };
        if status != 0 {
            return Err(io::Error::other(format!(
                "NtSetSystemInformation(SystemMemoryListInformation, {command}) returned NTSTATUS {status:#010x}"
            )));
        }
    }
    Ok(())
}

/// The cluster size of the volume holding `path` (`GetDiskFreeSpaceW`:
/// sectors per cluster times bytes per sector).
pub fn cluster_bytes(path: &Path) -> Option<u64> {
    let root = wide(&volume_root(path)?);
    let (mut spc, mut bps, mut free, mut total) = (0u32, 0u32, 0u32, 0u32);
    // SAFETY: a NUL-terminated root and four out-integers.
    let ok =
        unsafe { fs::GetDiskFreeSpaceW(root.as_ptr(), &mut spc, &mut bps, &mut free, &mut total) };
    (ok != 0).then(|| u64::from(spc) * u64::from(bps))
}

/// What the storage stack says of the device under a volume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageDevice {
    /// `\\.\C:`, the volume's device path.
    pub device: String,
    /// Vendor and product strings.
    pub model: Option<String>,
    /// Whether reads pay a seek (a rotating disk): Windows' own test for
    /// "is this an SSD".
    pub seek_penalty: Option<bool>,
    /// Whether the device accepts TRIM.
    pub trim: Option<bool>,
}

/// Ask the device under the volume holding `path`
/// (`IOCTL_STORAGE_QUERY_PROPERTY`, which needs no privilege).
pub fn storage_device(path: &Path) -> Option<StorageDevice> {
    let (device, volume) = open_volume(path, 0).ok()?;
    let h = volume.as_raw_handle();
    let query = |property: u32| -> Option<Vec<u8>> {
        const IOCTL_STORAGE_QUERY_PROPERTY: u32 = 0x002D_1400;
        // STORAGE_PROPERTY_QUERY: PropertyId, QueryType (standard), one
        // byte of parameters, padded.
        let mut input = [0u8; 12];
        input[..4].copy_from_slice(&property.to_le_bytes());
        let mut out = vec![0u8; 1024];
        let mut got = 0u32;
        // SAFETY: a valid device handle, buffers of the lengths given.
        let ok = unsafe {
            windows_sys::Win32::System::IO::DeviceIoControl(
                h,
                IOCTL_STORAGE_QUERY_PROPERTY,
                input.as_ptr().cast(),
                input.len() as u32,
                out.as_mut_ptr().cast(),
                out.len() as u32,
                &mut got,
                std::ptr::null_mut(),
            )
        };
        (ok != 0).then(|| {
            out.truncate(got as usize);
            out
        })
    };
    let u32_at = |b: &[u8], at: usize| {
        b.get(at..at + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    };
    // A NUL-terminated string at an offset the descriptor gives, checked
    // against what the device returned.
    let string_at = |b: &[u8], field: usize| -> Option<String> {
        let at = u32_at(b, field)? as usize;
        let rest = b.get(at..).filter(|_| at != 0)?;
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        let s = String::from_utf8_lossy(&rest[..end]).trim().to_string();
        (!s.is_empty()).then_some(s)
    };
    // StorageDeviceProperty: STORAGE_DEVICE_DESCRIPTOR, vendor at 12,
    // product at 16.
    let model = query(0).and_then(|b| {
        let parts: Vec<String> = [12, 16].iter().filter_map(|&f| string_at(&b, f)).collect();
        (!parts.is_empty()).then(|| parts.join(" "))
    });
    // StorageDeviceSeekPenaltyProperty and StorageDeviceTrimProperty:
    // Version, Size, then one BOOLEAN.
    let flag = |property: u32| query(property).and_then(|b| b.get(8).map(|&v| v != 0));
    let seek_penalty = flag(7);
    let trim = flag(8);
    Some(StorageDevice {
        device,
        model,
        seek_penalty,
        trim,
    })
}

/// The process's I/O so far (`GetProcessIoCounters`): bytes and calls of
/// `ReadFile`/`WriteFile` and the like through the I/O manager (files,
/// devices and pipes; cache-manager hits included). Windows does not say
/// which bytes reached storage.
pub fn process_io() -> Option<super::ProcessIoCounters> {
    if under_wine() {
        // Wine's counters stay at zero.
        return None;
    }
    // SAFETY: a zeroed struct is a valid out-parameter.
    let mut io: th::IO_COUNTERS = unsafe { std::mem::zeroed() };
    // SAFETY: this process's pseudo-handle and the out-struct.
    let ok = unsafe { th::GetProcessIoCounters(th::GetCurrentProcess(), &mut io) };
    (ok != 0).then_some(super::ProcessIoCounters {
        read_bytes: io.ReadTransferCount,
        write_bytes: io.WriteTransferCount,
        read_ops: io.ReadOperationCount,
        write_ops: io.WriteOperationCount,
        storage_read_bytes: None,
        storage_write_bytes: None,
    })
}

/// Whether this runs under Wine (its ntdll exports `wine_get_version`),
/// whose answers to some calls are stubs: figures from them are left out
/// rather than reported as measured.
pub fn under_wine() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
    let ntdll = wide(Path::new("ntdll.dll"));
    // SAFETY: a NUL-terminated module name; ntdll is always loaded.
    let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
    // SAFETY: a module handle and a NUL-terminated export name.
    !module.is_null()
        && unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) }.is_some()
}
