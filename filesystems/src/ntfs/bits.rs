//! Bit sets: a sparse one for "record already seen", and the volume's
//! cluster allocation bitmap read through a bounded cache.

use std::collections::HashMap;
use std::io;

use crate::bitmap::{Bits, CHUNK};
use crate::read::{ReadAt, read_full};

use super::mft::DataRun;

/// A set of record numbers stored as 4096-bit pages allocated on first use,
/// so memory follows the records actually seen, not the MFT size a corrupt
/// `$MFT` may claim.
#[derive(Default)]
pub(crate) struct SparseBits {
    pages: HashMap<u64, Box<[u64; 64]>>,
}

impl SparseBits {
    pub(crate) fn set(&mut self, n: u64) {
        let page = self
            .pages
            .entry(n / 4096)
            .or_insert_with(|| Box::new([0; 64]));
        page[((n % 4096) / 64) as usize] |= 1 << (n % 64);
    }

    pub(crate) fn get(&self, n: u64) -> bool {
        self.pages
            .get(&(n / 4096))
            .is_some_and(|p| p[((n % 4096) / 64) as usize] & (1 << (n % 64)) != 0)
    }
}

/// Reads `buf.len()` bytes at logical offset `pos` of a non-resident
/// attribute, calling `phys(dst, absolute offset)` for stored runs and
/// zero-filling sparse ones. Fails if the runs end before `buf` is full.
pub(crate) fn read_logical(
    runs: &[DataRun],
    cluster_size: u64,
    base: u64,
    pos: u64,
    buf: &mut [u8],
    mut phys: impl FnMut(&mut [u8], u64) -> io::Result<()>,
) -> io::Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        let p = pos + done as u64;
        let vcn = p / cluster_size;
        let Some(run) = runs
            .iter()
            .find(|r| vcn >= r.vcn && vcn - r.vcn < r.clusters)
        else {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("offset {p} is past the attribute's runs"),
            ));
        };
        let run_end = (run.vcn + run.clusters) * cluster_size;
        let n = usize::try_from(run_end - p)
            .unwrap_or(usize::MAX)
            .min(buf.len() - done);
        let dst = &mut buf[done..done + n];
        match run.lcn {
            None => dst.fill(0),
            Some(lcn) => phys(
                dst,
                base + lcn * cluster_size + (p - run.vcn * cluster_size),
            )?,
        }
        done += n;
    }
    Ok(())
}

/// Reads exactly `dst.len()` bytes at `at` or fails.
pub(crate) fn read_exact_direct<R: ReadAt + ?Sized>(
    src: &R,
    dst: &mut [u8],
    at: u64,
) -> io::Result<()> {
    let got = read_full(src, dst, at)?;
    if got < dst.len() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("source ends at {}", at + got as u64),
        ));
    }
    Ok(())
}

/// The `$Bitmap` file: one bit per cluster, set when allocated.
pub(crate) struct ClusterBitmap {
    runs: Vec<DataRun>,
    cluster_size: u64,
    base: u64,
    bits: Bits,
}

impl ClusterBitmap {
    pub(crate) fn new(
        runs: Vec<DataRun>,
        bytes: u64,
        cluster_size: u64,
        base: u64,
        clusters: u64,
    ) -> Self {
        Self {
            runs,
            cluster_size,
            base,
            bits: Bits::new(bytes, clusters),
        }
    }

    fn read_chunk<R: ReadAt + ?Sized>(&self, src: &R, idx: u64) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.bits.chunk_len(idx)];
        read_logical(
            &self.runs,
            self.cluster_size,
            self.base,
            idx * CHUNK,
            &mut buf,
            |d, at| read_exact_direct(src, d, at),
        )?;
        Ok(buf)
    }

    /// Whether any of `count` clusters from `first` is allocated. Clusters
    /// past the bitmap count as allocated (nothing says they are free).
    pub(crate) fn any_allocated<R: ReadAt + ?Sized>(
        &self,
        src: &R,
        first: u64,
        count: u64,
    ) -> io::Result<bool> {
        self.bits
            .any_set(first, count, |idx| self.read_chunk(src, idx))
    }

    /// Calls `f(first, count)` for each run of free clusters, in order.
    pub(crate) fn free_runs<R: ReadAt + ?Sized>(
        &self,
        src: &R,
        f: impl FnMut(u64, u64),
    ) -> io::Result<()> {
        self.bits.clear_runs(f, |idx| self.read_chunk(src, idx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_bits_set_and_get() {
        let mut b = SparseBits::default();
        for n in [0, 63, 64, 4095, 4096, 1 << 40] {
            assert!(!b.get(n));
            b.set(n);
            assert!(b.get(n));
        }
        assert!(!b.get(1) && !b.get(4097));
        assert_eq!(b.pages.len(), 3);
    }

    #[test]
    fn bitmap_reports_allocation_and_free_runs() {
        // Bitmap stored at cluster 1 of a 512-byte-cluster "volume":
        // clusters 0-3 allocated, 4-9 free, 10 allocated, 11-15 free.
        let mut disk = vec![0u8; 2048];
        disk[512] = 0b0000_1111;
        disk[513] = 0b0000_0100;
        let runs = vec![DataRun {
            vcn: 0,
            clusters: 1,
            lcn: Some(1),
        }];
        let bm = ClusterBitmap::new(runs, 2, 512, 0, 16);
        assert!(bm.any_allocated(&disk, 0, 1).unwrap());
        assert!(!bm.any_allocated(&disk, 4, 6).unwrap());
        assert!(bm.any_allocated(&disk, 4, 7).unwrap());
        assert!(bm.any_allocated(&disk, 15, 2).unwrap());
        let mut free = Vec::new();
        bm.free_runs(&disk, |s, n| free.push((s, n))).unwrap();
        assert_eq!(free, vec![(4, 6), (11, 5)]);
    }
}
