//! What the kernel holds of a file (`mincore` over a read-only shared
//! mapping, which faults nothing in), and a watcher that brings the files
//! of a directory the run does not read itself (a private PostgreSQL
//! server's data directory) into the modelled page cache.
//!
//! The server reads and writes its files with its own processes, so the
//! model cannot see each access; it sees what the kernel holds. Every
//! [`WATCH_INTERVAL`] the watcher lists the directory, registers each
//! file, and tells the model which of its pages are resident
//! ([`PageCacheModel::observe`]): pages new since the last look join the
//! LRU at the front, pages the kernel no longer holds leave it, and past
//! the budget the least recently seen go, the server's among them. Files
//! that disappeared (a dropped table, a recycled WAL segment under a new
//! name is the same inode and is followed) are forgotten.

use super::model::{CachedFile, PAGE, PageCacheModel};
use crate::channel::ChannelCounters;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the watcher looks.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// Which pages of `path` the kernel holds (one flag per 4 KiB page); an
/// empty file holds none.
pub fn resident_pages(path: &Path) -> std::io::Result<Vec<bool>> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    resident_range(&file, 0, len)
}

/// Which pages of `len` bytes of `file` from `offset` (a multiple of
/// [`PAGE`]) the kernel holds; nothing past the file's end.
pub fn resident_range(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<Vec<bool>> {
    use std::os::fd::AsRawFd;
    let size = file.metadata()?.len();
    let len = len.min(size.saturating_sub(offset));
    let (Ok(len), Ok(at)) = (usize::try_from(len), libc::off_t::try_from(offset)) else {
        return Err(std::io::Error::other("range too large to map"));
    };
    if len == 0 {
        return Ok(Vec::new());
    }
    let pages = len.div_ceil(PAGE as usize);
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
        return Err(std::io::Error::last_os_error());
    }
    let mut vec = vec![0u8; pages];
    // SAFETY: `addr` maps `len` bytes; `vec` has one byte per page.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = std::io::Error::last_os_error();
    // SAFETY: the mapping made above, of `len` bytes.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(err);
    }
    Ok(vec.into_iter().map(|b| b & 1 == 1).collect())
}

/// Bytes the kernel holds of `path` (0 when it cannot be told).
pub fn resident_bytes(path: &Path) -> u64 {
    resident_pages(path).map_or(0, |p| p.iter().filter(|&&r| r).count() as u64 * PAGE)
}

/// Whether `dir` is on a memory file system (tmpfs, ramfs), whose pages
/// no model can drop: they are the files themselves.
pub fn on_memory_fs(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path and a zeroed out-struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    matches!(st.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC)
}

/// A thread keeping a directory's files in the model, until dropped.
#[derive(Debug)]
pub struct ResidencyWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ResidencyWatch {
    /// Watch each directory (recursively), charging its files to its
    /// channel's counters.
    pub fn start(
        model: Arc<PageCacheModel>,
        dirs: Vec<(PathBuf, Arc<ChannelCounters>)>,
    ) -> std::io::Result<ResidencyWatch> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("cache-residency".into())
            .spawn(move || {
                let mut known: Vec<BTreeMap<PathBuf, CachedFile>> =
                    vec![BTreeMap::new(); dirs.len()];
                while !flag.load(Ordering::Relaxed) {
                    for ((dir, counters), known) in dirs.iter().zip(known.iter_mut()) {
                        look(&model, dir, counters, known);
                    }
                    std::thread::sleep(WATCH_INTERVAL);
                }
            })?;
        Ok(ResidencyWatch {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ResidencyWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One look over `dir`.
fn look(
    model: &PageCacheModel,
    dir: &Path,
    counters: &Arc<ChannelCounters>,
    known: &mut BTreeMap<PathBuf, CachedFile>,
) {
    let mut seen: BTreeMap<PathBuf, CachedFile> = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let id = model.register(&path, &meta, counters);
                if let Ok(resident) = resident_pages(&path) {
                    model.observe(id, &resident);
                }
                seen.insert(path, id);
            }
        }
    }
    for gone in known.keys().filter(|p| !seen.contains_key(*p)) {
        model.removed_file(gone);
    }
    *known = seen;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_pages_are_resident_and_dropped_ones_are_not() {
        let dir = crate::noise::disk_tempdir();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 64 * 4096]).unwrap();
        assert_eq!(resident_bytes(&path), 64 * 4096);
        let f = std::fs::File::open(&path).unwrap();
        f.sync_all().unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(resident_bytes(&path), 0);
        std::fs::write(dir.path().join("empty"), b"").unwrap();
        assert!(
            resident_pages(&dir.path().join("empty"))
                .unwrap()
                .is_empty()
        );
        assert!(resident_pages(&dir.path().join("absent")).is_err());
    }
}
