//! The file allocation table: entry lookup through a bounded cache, and
//! cluster-chain walking that survives loops, out-of-range and free links.

use std::collections::BTreeMap;
use std::io;

use crate::cache::ChunkCache;

use crate::detect::FsKind;
use crate::read::{ReadAt, read_full};

/// What one FAT entry says about the cluster after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// The cluster is free (entry 0).
    Free,
    /// The chain continues at this cluster.
    Next(u32),
    /// End of chain.
    Eof,
    /// The cluster is marked bad.
    Bad,
    /// The entry holds a value that is no cluster (1, or past the last
    /// cluster without being an end or bad marker).
    Invalid(u32),
}

/// FAT bytes are cached in chunks of this size.
const CHUNK: u64 = 64 * 1024;
/// At most this many chunks (4 MiB) are cached, whatever the FAT size.
const MAX_CHUNKS: usize = 64;

/// Read access to one copy of the FAT.
pub(crate) struct FatTable {
    kind: FsKind,
    /// Absolute offset of the FAT copy in use on the source.
    offset: u64,
    /// Bytes in one FAT copy.
    bytes: u64,
    last_cluster: u32,
    cache: ChunkCache,
}

impl FatTable {
    pub(crate) fn new(kind: FsKind, offset: u64, bytes: u64, last_cluster: u32) -> Self {
        Self {
            kind,
            offset,
            bytes,
            last_cluster,
            cache: ChunkCache::new(CHUNK, MAX_CHUNKS),
        }
    }

    pub(crate) fn last_cluster(&self) -> u32 {
        self.last_cluster
    }

    /// Copies FAT bytes `[pos, pos + out.len())` into `out` through the cache;
    /// bytes past the FAT or the source read as zero.
    fn fat_bytes<R: ReadAt + ?Sized>(&self, src: &R, pos: u64, out: &mut [u8]) -> io::Result<()> {
        let n = self.cache.read(pos, out, |idx| {
            let start = idx * CHUNK;
            let len = CHUNK.min(self.bytes.saturating_sub(start));
            let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
            // A FAT cut short by the end of the source reads as free entries.
            read_full(src, &mut buf, self.offset + start)?;
            Ok(buf)
        })?;
        out[n..].fill(0);
        Ok(())
    }

    /// The raw FAT entry of `cluster`.
    pub(crate) fn raw<R: ReadAt + ?Sized>(&self, src: &R, cluster: u32) -> io::Result<u32> {
        let c = u64::from(cluster);
        Ok(match self.kind {
            FsKind::Fat12 => {
                let mut b = [0u8; 2];
                self.fat_bytes(src, c + c / 2, &mut b)?;
                let v = u16::from_le_bytes(b);
                u32::from(if c & 1 == 1 { v >> 4 } else { v & 0x0FFF })
            }
            FsKind::Fat16 => {
                let mut b = [0u8; 2];
                self.fat_bytes(src, c * 2, &mut b)?;
                u32::from(u16::from_le_bytes(b))
            }
            _ => {
                let mut b = [0u8; 4];
                self.fat_bytes(src, c * 4, &mut b)?;
                u32::from_le_bytes(b) & 0x0FFF_FFFF
            }
        })
    }

    /// Classifies a raw entry value.
    pub(crate) fn classify(&self, v: u32) -> Link {
        let (eof, bad) = match self.kind {
            FsKind::Fat12 => (0xFF8, 0xFF7),
            FsKind::Fat16 => (0xFFF8, 0xFFF7),
            _ => (0x0FFF_FFF8, 0x0FFF_FFF7),
        };
        if v == 0 {
            Link::Free
        } else if v >= eof {
            Link::Eof
        } else if v == bad {
            Link::Bad
        } else if v < 2 || v > self.last_cluster {
            Link::Invalid(v)
        } else {
            Link::Next(v)
        }
    }

    /// Whether a value read from a directory entry as a start cluster is an
    /// end-of-chain marker (TSK accepts those as "no cluster").
    pub(crate) fn is_eof_value(&self, v: u32) -> bool {
        matches!(self.classify(v), Link::Eof)
    }

    pub(crate) fn link<R: ReadAt + ?Sized>(&self, src: &R, cluster: u32) -> io::Result<Link> {
        Ok(self.classify(self.raw(src, cluster)?))
    }

    /// Whether `cluster` is allocated (its entry is not 0). Bad clusters count
    /// as allocated, as in TSK.
    pub(crate) fn is_allocated<R: ReadAt + ?Sized>(
        &self,
        src: &R,
        cluster: u32,
    ) -> io::Result<bool> {
        Ok(self.raw(src, cluster)? != 0)
    }

    /// Calls `f(first, count)` for each run of consecutive free clusters, in
    /// cluster order.
    pub(crate) fn free_runs<R: ReadAt + ?Sized>(
        &self,
        src: &R,
        mut f: impl FnMut(u32, u32),
    ) -> io::Result<()> {
        let mut run: Option<(u32, u32)> = None;
        for c in 2..=self.last_cluster {
            if self.raw(src, c)? == 0 {
                run = match run {
                    Some((s, n)) => Some((s, n + 1)),
                    None => Some((c, 1)),
                };
            } else if let Some((s, n)) = run.take() {
                f(s, n);
            }
        }
        if let Some((s, n)) = run {
            f(s, n);
        }
        Ok(())
    }
}

/// Why a chain walk stopped before reaching an end-of-chain marker or the
/// number of clusters asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChainStop {
    /// Reached the end-of-chain marker.
    Eof,
    /// Collected the clusters asked for.
    Enough,
    /// The chain came back to a cluster it already used.
    Loop { at: u32, to: u32 },
    /// A link pointed outside the cluster range.
    OutOfRange { at: u32, value: u32 },
    /// A link pointed at a free cluster, or the chain reached a free or bad
    /// cluster.
    Broken { at: u32, link: Link },
    /// The FAT could not be read.
    Io(String),
}

/// A walked chain: runs of consecutive clusters `(first, count)` in file
/// order, and why the walk stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chain {
    pub runs: Vec<(u32, u32)>,
    pub stop: ChainStop,
}

impl Chain {
    pub(crate) fn clusters(&self) -> u64 {
        self.runs.iter().map(|&(_, n)| u64::from(n)).sum()
    }
}

/// Set of clusters already in a chain, stored as intervals so that memory
/// follows the number of fragments, not the number of clusters.
#[derive(Default)]
struct Seen(BTreeMap<u32, u32>);

impl Seen {
    fn contains(&self, c: u32) -> bool {
        self.0
            .range(..=c)
            .next_back()
            .is_some_and(|(_, &end)| c <= end)
    }

    fn insert(&mut self, c: u32) {
        let prev = self
            .0
            .range(..=c)
            .next_back()
            .map(|(&s, &e)| (s, e))
            .filter(|&(_, e)| e.checked_add(1) == Some(c));
        let next_end = c.checked_add(1).and_then(|n| self.0.get(&n).copied());
        match (prev, next_end) {
            (Some((s, _)), Some(ne)) => {
                self.0.remove(&(c + 1));
                self.0.insert(s, ne);
            }
            (Some((s, _)), None) => {
                self.0.insert(s, c);
            }
            (None, Some(ne)) => {
                self.0.remove(&(c + 1));
                self.0.insert(c, ne);
            }
            (None, None) => {
                self.0.insert(c, c);
            }
        }
    }
}

/// Follows the chain from `start` collecting at most `max` clusters.
pub(crate) fn walk_chain<R: ReadAt + ?Sized>(
    fat: &FatTable,
    src: &R,
    start: u32,
    max: u64,
) -> Chain {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    let mut seen = Seen::default();
    let mut count = 0u64;
    let mut cur = start;
    if max == 0 {
        return Chain {
            runs,
            stop: ChainStop::Enough,
        };
    }
    if cur < 2 || cur > fat.last_cluster() {
        return Chain {
            runs,
            stop: ChainStop::OutOfRange { at: 0, value: cur },
        };
    }
    loop {
        seen.insert(cur);
        match runs.last_mut() {
            Some((s, n)) if u64::from(*s) + u64::from(*n) == u64::from(cur) => *n += 1,
            _ => runs.push((cur, 1)),
        }
        count += 1;
        if count >= max {
            return Chain {
                runs,
                stop: ChainStop::Enough,
            };
        }
        let link = match fat.link(src, cur) {
            Ok(l) => l,
            Err(e) => {
                return Chain {
                    runs,
                    stop: ChainStop::Io(e.to_string()),
                };
            }
        };
        let stop = match link {
            Link::Next(n) if seen.contains(n) => ChainStop::Loop { at: cur, to: n },
            Link::Next(n) => {
                cur = n;
                continue;
            }
            Link::Eof => ChainStop::Eof,
            Link::Invalid(v) => ChainStop::OutOfRange { at: cur, value: v },
            l @ (Link::Free | Link::Bad) => ChainStop::Broken { at: cur, link: l },
        };
        return Chain { runs, stop };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fat16(entries: &[u16]) -> Vec<u8> {
        entries.iter().flat_map(|e| e.to_le_bytes()).collect()
    }

    #[test]
    fn seen_merges_intervals() {
        let mut s = Seen::default();
        for c in [5, 7, 6, 10, 9, 2] {
            s.insert(c);
        }
        assert_eq!(s.0.len(), 3);
        assert!(s.contains(6) && s.contains(10) && s.contains(2));
        assert!(!s.contains(8) && !s.contains(3) && !s.contains(11));
    }

    #[test]
    fn chains_stop_on_eof_loop_range_and_free() {
        // Cluster: 2->3->4->EOF, 5->6->5 (loop), 7->0x1234 (range), 8->9, 9 free.
        let src = fat16(&[
            0xFFF8, 0xFFFF, 3, 4, 0xFFFF, 6, 5, 0x1234, 9, 0, 0xFFF7, 0, 0, 0, 0, 0,
        ]);
        let fat = FatTable::new(FsKind::Fat16, 0, src.len() as u64, 15);
        let c = walk_chain(&fat, &src, 2, 100);
        assert_eq!(c.runs, vec![(2, 3)]);
        assert_eq!(c.stop, ChainStop::Eof);
        let c = walk_chain(&fat, &src, 5, 100);
        assert_eq!(c.runs, vec![(5, 2)]);
        assert_eq!(c.stop, ChainStop::Loop { at: 6, to: 5 });
        let c = walk_chain(&fat, &src, 7, 100);
        assert_eq!(
            c.stop,
            ChainStop::OutOfRange {
                at: 7,
                value: 0x1234
            }
        );
        let c = walk_chain(&fat, &src, 8, 100);
        assert_eq!(c.runs, vec![(8, 2)]);
        assert!(matches!(
            c.stop,
            ChainStop::Broken {
                at: 9,
                link: Link::Free
            }
        ));
        let c = walk_chain(&fat, &src, 2, 2);
        assert_eq!((c.runs, c.stop), (vec![(2, 2)], ChainStop::Enough));
        let mut free = Vec::new();
        fat.free_runs(&src, |s, n| free.push((s, n))).unwrap();
        assert_eq!(free, vec![(9, 1), (11, 5)]);
    }

    #[test]
    fn fat12_entries_unpack_across_chunk_boundaries() {
        // Pack 12-bit entries: 2->3, 3->EOF, and entry 43690 far into the table.
        let mut fat = vec![0u8; 70_000];
        let put = |fat: &mut Vec<u8>, c: usize, v: u16| {
            let off = c + c / 2;
            let cur = u16::from_le_bytes([fat[off], fat[off + 1]]);
            let new = if c & 1 == 1 {
                (cur & 0x000F) | (v << 4)
            } else {
                (cur & 0xF000) | (v & 0x0FFF)
            };
            fat[off..off + 2].copy_from_slice(&new.to_le_bytes());
        };
        put(&mut fat, 2, 3);
        put(&mut fat, 3, 0xFFF);
        // Entry 43690 starts at byte 65535: its two bytes straddle chunks.
        put(&mut fat, 43690, 0xABC);
        let t = FatTable::new(FsKind::Fat12, 0, fat.len() as u64, 4084);
        assert_eq!(t.raw(&fat, 2).unwrap(), 3);
        assert_eq!(t.link(&fat, 3).unwrap(), Link::Eof);
        assert_eq!(t.raw(&fat, 43690).unwrap(), 0xABC);
    }
}
