//! What the kernel holds of a file (`mincore` over a read-only shared
//! mapping, which faults nothing in), and whether a directory is on a
//! memory file system (whose pages cannot be dropped). Used by the model
//! (what a drop left behind) and by the watcher (`watch.rs`).

pub use crate::os::{on_memory_fs, resident_range};
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

/// Bytes the kernel holds of `path` (0 when it cannot be told).
pub fn resident_bytes(path: &Path) -> u64 {
    resident_pages(path).map_or(0, |p| p.iter().filter(|&&r| r).count() as u64 * PAGE)
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
        crate::os::drop_cached(&f);
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
