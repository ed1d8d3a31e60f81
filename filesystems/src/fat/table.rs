//! The file allocation table: entry lookup through a bounded cache, and
//! cluster-chain walking that survives loops, out-of-range and free links.

use std::collections::BTreeMap;
use std::io;

use std::sync::Arc;

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

/// Read access to one copy of the FAT. exFAT's FAT (`FsKind::ExFat`) is read
/// with FAT32's arithmetic: 32-bit entries masked to 28 bits, as TSK reads
/// it, so its end-of-chain (0xFFFFFFFF) and bad (0xFFFFFFF7) values classify
/// as FAT32's do.
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
    /// FAT bytes of chunk `idx`; a FAT cut short by the end of the source
    /// reads as free entries.
    fn load_chunk<R: ReadAt + ?Sized>(&self, src: &R, idx: u64) -> io::Result<Vec<u8>> {
        let start = idx * CHUNK;
        let len = CHUNK.min(self.bytes.saturating_sub(start));
        let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
        read_full(src, &mut buf, self.offset + start)?;
        Ok(buf)
    }

    fn fat_bytes<R: ReadAt + ?Sized>(&self, src: &R, pos: u64, out: &mut [u8]) -> io::Result<()> {
        let n = self.cache.read(pos, out, |idx| self.load_chunk(src, idx))?;
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

    /// A reader of entries that keeps hold of the FAT chunk it last used,
    /// for loops over many entries (chains, free-space scans).
    pub(crate) fn cursor<'a, R: ReadAt + ?Sized>(&'a self, src: &'a R) -> Cursor<'a, R> {
        Cursor {
            fat: self,
            src,
            idx: u64::MAX,
            chunk: None,
        }
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
        let mut cur = self.cursor(src);
        for c in 2..=self.last_cluster {
            if cur.raw(c)? == 0 {
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

/// See [`FatTable::cursor`].
pub(crate) struct Cursor<'a, R: ?Sized> {
    fat: &'a FatTable,
    src: &'a R,
    idx: u64,
    chunk: Option<Arc<[u8]>>,
}

impl<R: ReadAt + ?Sized> Cursor<'_, R> {
    /// The raw FAT entry of `cluster`.
    pub(crate) fn raw(&mut self, cluster: u32) -> io::Result<u32> {
        let c = u64::from(cluster);
        let (pos, width) = match self.fat.kind {
            FsKind::Fat12 => (c + c / 2, 2),
            FsKind::Fat16 => (c * 2, 2),
            _ => (c * 4, 4),
        };
        let size = self.fat.cache.chunk_size();
        let idx = pos / size;
        let within = usize::try_from(pos % size).unwrap_or(usize::MAX);
        if within + width > usize::try_from(size).unwrap_or(usize::MAX) {
            // A FAT12 entry straddling two chunks.
            return self.fat.raw(self.src, cluster);
        }
        if self.idx != idx || self.chunk.is_none() {
            let (fat, src) = (self.fat, self.src);
            self.chunk = Some(fat.cache.get(idx, |i| fat.load_chunk(src, i))?);
            self.idx = idx;
        }
        let chunk = self.chunk.as_deref().unwrap_or(&[]);
        let mut b = [0u8; 4];
        for (k, byte) in b.iter_mut().take(width).enumerate() {
            // Bytes past a FAT cut short by the end of the source read as 0.
            *byte = chunk.get(within + k).copied().unwrap_or(0);
        }
        let v = u32::from_le_bytes(b);
        Ok(match self.fat.kind {
            FsKind::Fat12 if c & 1 == 1 => (v >> 4) & 0x0FFF,
            FsKind::Fat12 => v & 0x0FFF,
            FsKind::Fat16 => v & 0xFFFF,
            _ => v & 0x0FFF_FFFF,
        })
    }

    pub(crate) fn link(&mut self, cluster: u32) -> io::Result<Link> {
        Ok(self.fat.classify(self.raw(cluster)?))
    }

    pub(crate) fn is_allocated(&mut self, cluster: u32) -> io::Result<bool> {
        Ok(self.raw(cluster)? != 0)
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
/// follows the number of fragments, not the number of clusters. The
/// interval being extended and the highest cluster seen are kept aside, so
/// the common case (a chain running upwards) never touches the tree.
#[derive(Default)]
struct Seen {
    done: BTreeMap<u32, u32>,
    /// The interval currently growing, not yet in `done`.
    open: Option<(u32, u32)>,
    max: u32,
}

impl Seen {
    fn contains(&self, c: u32) -> bool {
        if self.open.is_none() || c > self.max {
            return false;
        }
        if self.open.is_some_and(|(s, e)| (s..=e).contains(&c)) {
            return true;
        }
        self.done
            .range(..=c)
            .next_back()
            .is_some_and(|(_, &end)| c <= end)
    }

    /// Adds a cluster not yet in the set.
    fn insert(&mut self, c: u32) {
        self.max = if self.open.is_none() {
            c
        } else {
            self.max.max(c)
        };
        match self.open {
            Some((s, e)) if e.checked_add(1) == Some(c) => self.open = Some((s, c)),
            Some((s, e)) => {
                self.done.insert(s, e);
                self.open = Some((c, c));
            }
            None => self.open = Some((c, c)),
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
    let mut fat_cursor = fat.cursor(src);
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
        let link = match fat_cursor.link(cur) {
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
    fn seen_tracks_runs_and_jumps() {
        let mut s = Seen::default();
        for c in [5, 6, 7, 10, 11, 2, 3] {
            assert!(!s.contains(c));
            s.insert(c);
        }
        for c in [2, 3, 5, 6, 7, 10, 11] {
            assert!(s.contains(c), "{c}");
        }
        for c in [1, 4, 8, 9, 12, u32::MAX] {
            assert!(!s.contains(c), "{c}");
        }
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
