//! Sequential consumption of evidence with parallel reading: worker threads
//! read (and, for E01, inflate) consecutive blocks at once, and the consumer
//! receives them strictly in order. At most `in_flight` blocks exist at any
//! time, so memory is bounded whatever the image size. A consumer done with a
//! block's bytes may hand them back with [`BlockStream::recycle`]: reusing
//! buffers spares the allocator's zeroing and page faults, which showed up
//! as ~4% of the image-hash stage's CPU on E01.

use super::{EvidenceSource, SourceError};
use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

/// How to stream.
#[derive(Debug, Clone, Copy)]
pub struct StreamOptions {
    /// Bytes per block (rounded up to the source's damage unit).
    pub block_size: usize,
    /// Reader threads.
    pub readers: usize,
    /// Blocks read ahead of the consumer at most.
    pub in_flight: usize,
}

impl StreamOptions {
    /// Defaults for a source: one reader for raw (the kernel does the work),
    /// one per thread for E01 (inflate is the work).
    pub fn for_source(source: &dyn EvidenceSource, threads: usize) -> Self {
        let compressed = source.info().chunk_size.is_some();
        let readers = if compressed { threads.max(1) } else { 1 };
        StreamOptions {
            // Blocks of the source's read size are read as asked.
            block_size: usize::try_from(source.read_size().max(1 << 20)).unwrap_or(1 << 20),
            readers,
            in_flight: (readers * 4).max(4),
        }
    }
}

/// One block of media, in order. Damaged units inside it are zero-filled and
/// listed in `errors`.
#[derive(Debug)]
pub struct Block {
    /// Media offset of `data[0]`.
    pub offset: u64,
    /// The bytes.
    pub data: Vec<u8>,
    /// Damage found while reading this block.
    pub errors: Vec<SourceError>,
}

/// An iterator over the blocks of a media range, read in parallel.
pub struct BlockStream {
    results: Receiver<(u64, Block)>,
    permits: Option<Sender<()>>,
    pending: BTreeMap<u64, Block>,
    next: u64,
    count: u64,
    workers: Vec<JoinHandle<()>>,
    /// Buffers handed back by the consumer, taken by the workers.
    spare: Sender<Vec<u8>>,
}

impl BlockStream {
    /// Stream `range` of `source`.
    pub fn new(source: Arc<dyn EvidenceSource>, range: Range<u64>, options: StreamOptions) -> Self {
        let unit = source.damage_unit().max(1);
        let block = (options.block_size.max(1) as u64).div_ceil(unit) * unit;
        let range = range.start.min(source.size())..range.end.min(source.size());
        let count = (range.end.saturating_sub(range.start)).div_ceil(block);
        // The whole range is read, in order.
        source.hint(range.start, range.end.saturating_sub(range.start));
        let in_flight = options.in_flight.max(1);
        let (permit_tx, permit_rx) = bounded::<()>(in_flight);
        for _ in 0..in_flight {
            // Cannot fail: the channel has exactly this capacity.
            let _ = permit_tx.send(());
        }
        let (result_tx, result_rx) = unbounded();
        let (spare_tx, spare_rx) = bounded::<Vec<u8>>(in_flight);
        let claim = Arc::new(AtomicU64::new(0));
        let workers = (0..options.readers.max(1))
            .map(|_| {
                let source = Arc::clone(&source);
                let permits = permit_rx.clone();
                let results = result_tx.clone();
                let claim = Arc::clone(&claim);
                let spare = spare_rx.clone();
                let range = range.clone();
                std::thread::spawn(move || {
                    // Readers feed a consumer that is the pace-setter.
                    crate::thread_priority::become_helper();
                    while permits.recv().is_ok() {
                        let index = claim.fetch_add(1, Ordering::Relaxed);
                        if index >= count {
                            break;
                        }
                        let offset = range.start + index * block;
                        let len = block.min(range.end - offset);
                        let buffer = spare.try_recv().unwrap_or_default();
                        let block = read_block(source.as_ref(), offset, len, unit, buffer);
                        if results.send((index, block)).is_err() {
                            break;
                        }
                    }
                })
            })
            .collect();
        BlockStream {
            results: result_rx,
            permits: Some(permit_tx),
            pending: BTreeMap::new(),
            next: 0,
            count,
            workers,
            spare: spare_tx,
        }
    }

    /// Hand back the bytes of a block the consumer is done with, for a
    /// worker to read a later block into. Extra buffers are dropped.
    pub fn recycle(&self, data: Vec<u8>) {
        let _ = self.spare.try_send(data);
    }

    /// Number of blocks the stream will yield.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether the stream yields nothing.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Read one block into `data` (a recycled buffer or a new one); on failure,
/// retry unit by unit so that only the damaged units are lost (zero-filled)
/// and each is reported with its sectors. Every byte kept is either read or
/// zero-filled here, so nothing of a recycled buffer's old content remains.
/// Also the read of the carve stage's own pipeline.
pub(crate) fn read_block(
    source: &dyn EvidenceSource,
    offset: u64,
    len: u64,
    unit: u64,
    mut data: Vec<u8>,
) -> Block {
    let size = usize::try_from(len).unwrap_or(0);
    data.resize(size, 0);
    let mut errors = Vec::new();
    match source.read_at(&mut data, offset) {
        Ok(n) if n == size => {}
        Ok(n) => data.truncate(n),
        Err(_) => {
            let mut pos = 0usize;
            while pos < size {
                let step = usize::try_from(unit).unwrap_or(size).min(size - pos);
                match source.read_at(&mut data[pos..pos + step], offset + pos as u64) {
                    Ok(n) if n == step => {}
                    Ok(n) => {
                        data.truncate(pos + n);
                        break;
                    }
                    Err(e) => {
                        data[pos..pos + step].fill(0);
                        errors.push(e);
                    }
                }
                pos += step;
            }
        }
    }
    Block {
        offset,
        data,
        errors,
    }
}

impl Iterator for BlockStream {
    type Item = Block;

    fn next(&mut self) -> Option<Block> {
        if self.next >= self.count {
            return None;
        }
        loop {
            if let Some(block) = self.pending.remove(&self.next) {
                self.next += 1;
                if let Some(permits) = &self.permits {
                    let _ = permits.send(());
                }
                return Some(block);
            }
            match self.results.recv() {
                Ok((index, block)) => {
                    self.pending.insert(index, block);
                }
                // Every worker is gone without delivering: cannot happen
                // unless a worker panicked; end the stream rather than hang.
                Err(_) => return None,
            }
        }
    }
}

impl Drop for BlockStream {
    fn drop(&mut self) {
        // Closing the permit channel wakes and stops idle workers.
        self.permits = None;
        while self.results.try_recv().is_ok() {}
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{Channel, ChannelKind};
    use crate::source::RawSource;

    /// A raw source over `data` in a new temporary directory (kept alive by
    /// the returned guard).
    fn raw_source(data: &[u8]) -> (tempfile::TempDir, Arc<dyn EvidenceSource>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.dd"), data).unwrap();
        let ch = Channel::new(ChannelKind::Evidence, dir.path(), Vec::new());
        let src = Arc::new(
            RawSource::open(
                &dir.path().join("x.dd"),
                &ch,
                crate::source::ReadOptions::default(),
            )
            .unwrap(),
        );
        (dir, src)
    }

    #[test]
    fn blocks_arrive_in_order_with_every_byte() {
        let data: Vec<u8> = (0..1_000_003u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
            .collect();
        let (_dir, src) = raw_source(&data);
        let opts = StreamOptions {
            block_size: 4096,
            readers: 3,
            in_flight: 5,
        };
        let mut joined = Vec::new();
        let mut expected_offset = 0;
        for block in BlockStream::new(src, 0..u64::MAX, opts) {
            assert_eq!(block.offset, expected_offset);
            assert!(block.errors.is_empty());
            expected_offset += block.data.len() as u64;
            joined.extend_from_slice(&block.data);
        }
        assert_eq!(joined, data);
    }

    #[test]
    fn recycled_buffers_never_show_their_old_bytes() {
        // Not a multiple of the block size: the last block is short.
        let data: Vec<u8> = (0..100_003u32).map(|i| (i % 251) as u8).collect();
        let (_dir, src) = raw_source(&data);
        let opts = StreamOptions {
            block_size: 4096,
            readers: 2,
            in_flight: 3,
        };
        let mut stream = BlockStream::new(src, 0..u64::MAX, opts);
        let mut joined = Vec::new();
        while let Some(block) = stream.next() {
            joined.extend_from_slice(&block.data);
            // Poison the buffer and hand it back, larger than a block.
            let mut poisoned = block.data;
            poisoned.clear();
            poisoned.resize(9000, 0xEE);
            stream.recycle(poisoned);
        }
        assert_eq!(joined, data);
    }

    #[test]
    fn dropping_a_stream_early_stops_its_workers() {
        let (_dir, src) = raw_source(&vec![1u8; 1 << 20]);
        let opts = StreamOptions {
            block_size: 512,
            readers: 2,
            in_flight: 2,
        };
        let mut stream = BlockStream::new(src, 0..u64::MAX, opts);
        assert!(stream.next().is_some());
        drop(stream);
    }
}
