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
