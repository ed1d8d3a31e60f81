//! What the kernel holds of a file (`mincore` over a read-only shared
//! mapping, which faults nothing in), and whether a directory is on a
//! memory file system (whose pages cannot be dropped). Used by the model
//! (what a drop left behind) and by the watcher (`watch.rs`).

use std::path::Path;

/// The kernel's page size (the modelled page cache's smallest granule).
pub const PAGE: u64 = 4096;

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
