//! A cluster allocation bitmap (one bit per cluster, set when allocated)
//! read through a bounded cache: the bit logic NTFS's `$Bitmap` and
//! exFAT's allocation bitmap share. Where the bytes are is the caller's:
//! each call takes a loader of 64 KiB chunks.

use std::io;

use crate::cache::ChunkCache;

/// Bitmap bytes are loaded in chunks of this size.
pub(crate) const CHUNK: u64 = 64 * 1024;
/// At most this many chunks (4 MiB, 32 Gi clusters' worth) are cached.
const MAX_CHUNKS: usize = 64;

/// The bits of a bitmap of `bytes` bytes describing `bits` clusters.
pub(crate) struct Bits {
    bytes: u64,
    bits: u64,
    cache: ChunkCache,
}

impl Bits {
    pub(crate) fn new(bytes: u64, bits: u64) -> Self {
        Self {
            bytes,
            bits,
            cache: ChunkCache::new(CHUNK, MAX_CHUNKS),
        }
    }

    /// Bytes in chunk `idx` (the last one may be short).
    pub(crate) fn chunk_len(&self, idx: u64) -> usize {
        usize::try_from(CHUNK.min(self.bytes.saturating_sub(idx * CHUNK))).unwrap_or(0)
    }

    /// Whether any of `count` bits from `first` is set. Bits past the
    /// bitmap or the clusters count as set (nothing says they are free).
    pub(crate) fn any_set(
        &self,
        first: u64,
        count: u64,
        mut load: impl FnMut(u64) -> io::Result<Vec<u8>>,
    ) -> io::Result<bool> {
        let end = first.saturating_add(count);
        if end > self.bytes.saturating_mul(8) || end > self.bits {
            return Ok(true);
        }
        let mut c = first;
        let mut byte = [0u8; 1];
        while c < end {
            let got = self.cache.read(c / 8, &mut byte, &mut load)?;
            if got == 0 {
                return Ok(true);
            }
            let b = byte[0];
            // Whole zero bytes can be skipped eight clusters at a time.
            if c.is_multiple_of(8) && end - c >= 8 {
                if b != 0 {
                    return Ok(true);
                }
                c += 8;
                continue;
            }
            if b & (1 << (c % 8)) != 0 {
                return Ok(true);
            }
            c += 1;
        }
        Ok(false)
    }

    /// Calls `f(first, count)` for each run of clear bits, in order.
    pub(crate) fn clear_runs(
        &self,
        mut f: impl FnMut(u64, u64),
        mut load: impl FnMut(u64) -> io::Result<Vec<u8>>,
    ) -> io::Result<()> {
        let limit = self.bits.min(self.bytes.saturating_mul(8));
        let mut run: Option<(u64, u64)> = None;
        for idx in 0..self.bytes.div_ceil(CHUNK) {
            let chunk = load(idx)?;
            for (i, &b) in chunk.iter().enumerate() {
                let first = (idx * CHUNK + i as u64) * 8;
                if first >= limit {
                    break;
                }
                if b == 0xFF && first + 8 <= limit {
                    if let Some((s, n)) = run.take() {
                        f(s, n);
                    }
                    continue;
                }
                for bit in 0..8u64 {
                    let c = first + bit;
                    if c >= limit {
                        break;
                    }
                    if b & (1 << bit) == 0 {
                        run = Some(match run {
                            Some((s, n)) => (s, n + 1),
                            None => (c, 1),
                        });
                    } else if let Some((s, n)) = run.take() {
                        f(s, n);
                    }
                }
            }
        }
        if let Some((s, n)) = run {
            f(s, n);
        }
        Ok(())
    }
}
