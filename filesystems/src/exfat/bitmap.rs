//! The allocation bitmap: which heap clusters are in use (exFAT keeps no
//! "free" value in the FAT for contiguous files), stored contiguously
//! from its first cluster and read through the shared bounded cache.

use std::io;

use crate::bitmap::{Bits, CHUNK};
use crate::read::{ReadAt, read_full};

/// Read access to the allocation bitmap.
pub(crate) struct Bitmap {
    /// Absolute offset of the bitmap on the source; `None` when no bitmap
    /// was found, in which case every cluster counts as allocated (nothing
    /// is offered for recovery or carving rather than everything).
    offset: Option<u64>,
    /// Clusters in the heap.
    clusters: u64,
    bits: Bits,
}

impl Bitmap {
    pub(crate) fn new(offset: Option<u64>, clusters: u64) -> Self {
        Self {
            offset,
            clusters,
            bits: Bits::new(clusters.div_ceil(8), clusters),
        }
    }

    /// Whether a bitmap was found.
    pub(crate) fn present(&self) -> bool {
        self.offset.is_some()
    }

    /// Bitmap bytes of chunk `idx`; bytes past the end of the source read
    /// as zero (free), as a FAT cut short does.
    fn load<R: ReadAt + ?Sized>(&self, src: &R, idx: u64) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.bits.chunk_len(idx)];
        if let Some(off) = self.offset {
            read_full(src, &mut buf, off.saturating_add(idx * CHUNK))?;
        }
        Ok(buf)
    }

    /// Whether heap cluster `c` (2-based) is allocated. Clusters outside
    /// the heap count as allocated: no file may claim them and nothing
    /// should be recovered from them.
    pub(crate) fn is_allocated<R: ReadAt + ?Sized>(&self, src: &R, c: u64) -> io::Result<bool> {
        if self.offset.is_none() || c < 2 || c - 2 >= self.clusters {
            return Ok(true);
        }
        self.bits.any_set(c - 2, 1, |idx| self.load(src, idx))
    }

    /// Calls `f(first, count)` for each run of free clusters, in order.
    pub(crate) fn free_runs<R: ReadAt + ?Sized>(
        &self,
        src: &R,
        mut f: impl FnMut(u64, u64),
    ) -> io::Result<()> {
        if self.offset.is_none() {
            return Ok(());
        }
        self.bits
            .clear_runs(|s, n| f(s + 2, n), |idx| self.load(src, idx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_runs_and_lookups_agree() {
        // 20 clusters: 2..=5 used, 6..=9 free, 10 used, 11..=21 free.
        let src = vec![0b0000_1111u8, 0b0000_0001, 0];
        let bm = Bitmap::new(Some(0), 20);
        let mut runs = Vec::new();
        bm.free_runs(&src, |s, n| runs.push((s, n))).unwrap();
        assert_eq!(runs, vec![(6, 4), (11, 11)]);
        assert!(bm.is_allocated(&src, 2).unwrap());
        assert!(!bm.is_allocated(&src, 6).unwrap());
        assert!(bm.is_allocated(&src, 10).unwrap());
        // Outside the heap: allocated.
        assert!(bm.is_allocated(&src, 22).unwrap());
        assert!(bm.is_allocated(&src, 1).unwrap());
        // No bitmap: everything allocated, nothing free.
        let none = Bitmap::new(None, 20);
        assert!(none.is_allocated(&src, 6).unwrap());
        let mut runs = Vec::new();
        none.free_runs(&src, |s, n| runs.push((s, n))).unwrap();
        assert!(runs.is_empty());
    }
}
