//! A small bounded cache of fixed-size chunks of some byte space (the FAT,
//! the NTFS cluster bitmap, metadata blocks of the source), so lookups that
//! hop around a structure do not re-read it from the evidence each time,
//! while memory stays fixed whatever the structure's size.

use std::io;
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Inner {
    /// Cached chunks: (index, bytes). Few enough that a scan beats hashing.
    chunks: Vec<(u64, Arc<[u8]>)>,
    /// Slot used last: most lookups hit the same chunk again.
    last: usize,
    /// Slot replaced next once full (oldest first).
    victim: usize,
}

/// Chunks of `chunk` bytes, at most `max` of them kept (oldest dropped).
pub(crate) struct ChunkCache {
    chunk: u64,
    max: usize,
    inner: Mutex<Inner>,
}

impl ChunkCache {
    pub(crate) fn new(chunk: u64, max: usize) -> Self {
        Self {
            chunk,
            max: max.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Chunk `idx`, loading it with `load(idx)` if it is not cached.
    pub(crate) fn get(
        &self,
        idx: u64,
        load: impl FnOnce(u64) -> io::Result<Vec<u8>>,
    ) -> io::Result<Arc<[u8]>> {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = match inner.chunks.get(inner.last) {
            Some((i, _)) if *i == idx => inner.last,
            _ => match inner.chunks.iter().position(|(i, _)| *i == idx) {
                Some(s) => s,
                None => {
                    let data: Arc<[u8]> = load(idx)?.into();
                    if inner.chunks.len() < self.max {
                        inner.chunks.push((idx, data));
                        inner.chunks.len() - 1
                    } else {
                        let v = inner.victim;
                        inner.chunks[v] = (idx, data);
                        inner.victim = (v + 1) % self.max;
                        v
                    }
                }
            },
        };
        inner.last = slot;
        Ok(inner.chunks[slot].1.clone())
    }

    /// Size of a chunk in bytes.
    pub(crate) fn chunk_size(&self) -> u64 {
        self.chunk
    }

    /// Copies bytes starting at `pos` into `out`, loading missing chunks
    /// with `load(index)` (which may return a chunk shorter than the chunk
    /// size at the end of the space). Returns how many bytes were copied:
    /// fewer than `out.len()` only where a short chunk ends the space.
    pub(crate) fn read(
        &self,
        pos: u64,
        out: &mut [u8],
        mut load: impl FnMut(u64) -> io::Result<Vec<u8>>,
    ) -> io::Result<usize> {
        let mut done = 0usize;
        while done < out.len() {
            let at = pos + done as u64;
            let idx = at / self.chunk;
            let chunk = self.get(idx, &mut load)?;
            let within = usize::try_from(at - idx * self.chunk).unwrap_or(usize::MAX);
            let avail = chunk.get(within..).unwrap_or(&[]);
            let n = avail.len().min(out.len() - done);
            if n == 0 {
                break;
            }
            out[done..done + n].copy_from_slice(&avail[..n]);
            done += n;
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_span_chunks_and_stop_at_a_short_one() {
        let space: Vec<u8> = (0..=249u8).collect();
        let loads = std::cell::Cell::new(0);
        let cache = ChunkCache::new(100, 2);
        let load = |i: u64| {
            loads.set(loads.get() + 1);
            let s = usize::try_from(i * 100).unwrap();
            Ok(space[s..(s + 100).min(space.len())].to_vec())
        };
        let mut out = [0u8; 30];
        assert_eq!(cache.read(90, &mut out, load).unwrap(), 30);
        assert_eq!(out[0], 90);
        assert_eq!(out[29], 119);
        assert_eq!(loads.get(), 2);
        assert_eq!(cache.read(95, &mut out[..5], load).unwrap(), 5);
        assert_eq!(loads.get(), 2);
        assert_eq!(cache.read(240, &mut out, load).unwrap(), 10);
        assert_eq!(loads.get(), 3);
        // Only two chunks are kept: chunk 0 was dropped and is loaded again.
        cache.read(0, &mut out[..1], load).unwrap();
        assert_eq!(loads.get(), 4);
    }
}
