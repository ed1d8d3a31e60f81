//! What differs between operating systems, in one room: positioned file
//! I/O, asking the OS to drop or write back a file's cached pages, syncing
//! a whole file system, file identity, process figures (CPU time, peak
//! memory, I/O), CPU affinity, free space and whether a process lives.
//!
//! Why one room: caseload runs on Linux (the lab, cgroups, FUSE, network
//! namespaces) and on the Windows workstation a lab processes on. Every
//! other module calls these functions and never `libc` or the Win32 API
//! for these jobs, so a port touches this module and the few Linux-only
//! features that refuse elsewhere, not the stages. Each function says what
//! it does on each system and how an unavailable feature shows (a `false`,
//! a `None` or an `Unsupported` error), never a silent success.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;

use std::fs::File;
use std::io;

/// Positioned reads and writes that leave no shared file cursor behind on
/// Linux (`pread`/`pwrite`). On Windows they are `ReadFile`/`WriteFile`
/// with an offset, which also move the handle's cursor: caseload never
/// mixes them with cursor I/O on one handle.
pub trait FileAt {
    /// Read up to `buf.len()` bytes at `offset`; the count read (0 at EOF).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Write some of `buf` at `offset`; the count written.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// Fill `buf` from `offset`; an `UnexpectedEof` error if the file ends
    /// first.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    /// Write all of `buf` at `offset`.
    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, offset) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// An error for a feature this operating system build lacks, naming it.
pub fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what} is not available on {}", std::env::consts::OS),
    )
}

/// The identity of the file at `path` (see `file_identity`).
pub fn path_identity(path: &std::path::Path) -> io::Result<(u64, u64)> {
    file_identity(&File::open(path)?)
}

/// Whether the whole file's cached pages could be dropped (see
/// [`drop_cached_range`]).
pub fn drop_cached(file: &File) -> bool {
    drop_cached_range(file, 0, 0, false)
}

/// Drop the cached pages of the file at `path`; false where it cannot be
/// opened or the OS refuses.
pub fn drop_cached_path(path: &std::path::Path) -> bool {
    File::open(path).is_ok_and(|f| drop_cached(&f))
}

/// `path` made absolute with links resolved (`canonicalize`). Where the
/// system cannot resolve an existing path (Wine's final-path call fails on
/// paths past 260 characters), the absolute path as given stands in.
pub fn resolve(path: &std::path::Path) -> io::Result<std::path::PathBuf> {
    match std::fs::canonicalize(path) {
        Ok(p) => Ok(p),
        Err(e) if e.kind() != io::ErrorKind::NotFound && std::fs::metadata(path).is_ok() => {
            std::path::absolute(path)
        }
        Err(e) => Err(e),
    }
}

/// A process's I/O counters as the system keeps them (`process_io`): what
/// it asked of the system, whatever the channel, cache hits included, and
/// where the system tells it (Linux), what reached storage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessIoCounters {
    /// Bytes read by system calls (Linux `rchar`, Windows
    /// `ReadTransferCount`).
    pub read_bytes: u64,
    /// Bytes written by system calls (`wchar`, `WriteTransferCount`).
    pub write_bytes: u64,
    /// Read calls (`syscr`, `ReadOperationCount`).
    pub read_ops: u64,
    /// Write calls (`syscw`, `WriteOperationCount`).
    pub write_ops: u64,
    /// Bytes fetched from storage (Linux `read_bytes`; absent on Windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_read_bytes: Option<u64>,
    /// Bytes sent or dirtied for storage (Linux `write_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_write_bytes: Option<u64>,
}

impl ProcessIoCounters {
    /// The counts from `earlier` to these.
    pub fn since(&self, earlier: &ProcessIoCounters) -> ProcessIoCounters {
        let less = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        ProcessIoCounters {
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            read_ops: self.read_ops.saturating_sub(earlier.read_ops),
            write_ops: self.write_ops.saturating_sub(earlier.write_ops),
            storage_read_bytes: less(self.storage_read_bytes, earlier.storage_read_bytes),
            storage_write_bytes: less(self.storage_write_bytes, earlier.storage_write_bytes),
        }
    }
}
