//! External sort of fixed-size hash records, so that an import of any size
//! runs in a fixed memory budget: records collect in memory, are sorted (in
//! parallel) and spilled as runs to the temp channel when the budget is
//! reached, and come back merged in key order.
//!
//! Why sort at all: appending keys in order to a SQLite B-tree touches each
//! page once and leaves pages full, while inserting 100 million random keys
//! would rewrite pages at random across a tree far larger than memory.

use super::HashSetError;
use crate::channel::{Channel, ChannelFile};
use rayon::slice::ParallelSliceMut;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufWriter, Write};

/// A hash and where it came from (source index and line, so duplicates can
/// name both lines and the order of equal hashes is fixed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Rec<const N: usize> {
    /// The digest.
    pub hash: [u8; N],
    /// [`pos`] of the line it came from.
    pub pos: u64,
}

/// Bits of a record position that hold the line number; the source index
/// sits above them.
pub(crate) const LINE_BITS: u32 = 44;

/// Pack a source index and a line number.
pub(crate) fn pos(source: usize, line: u64) -> u64 {
    ((source as u64) << LINE_BITS) | (line & ((1u64 << LINE_BITS) - 1))
}

/// Unpack a position into (source index, line).
pub(crate) fn unpos(pos: u64) -> (usize, u64) {
    (
        usize::try_from(pos >> LINE_BITS).unwrap_or(usize::MAX),
        pos & ((1u64 << LINE_BITS) - 1),
    )
}

/// Records of one digest length, in memory and in spilled runs.
pub(crate) struct Sorter<const N: usize> {
    buf: Vec<Rec<N>>,
    capacity: usize,
    runs: Vec<Run>,
    temp: Channel,
    tag: String,
    pub(crate) total: u64,
}

/// A spilled run; its file is removed when dropped.
struct Run {
    file: ChannelFile,
    records: u64,
    temp: Channel,
    name: String,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.temp.remove_file(&self.name);
    }
}

impl<const N: usize> Sorter<N> {
    const REC: usize = N + 8;

    /// A sorter holding at most `budget` bytes of records in memory, and
    /// spilling to files named after `tag` on `temp`.
    pub(crate) fn new(budget: usize, temp: &Channel, tag: &str) -> Self {
        let capacity = (budget / std::mem::size_of::<Rec<N>>()).max(1024);
        Sorter {
            buf: Vec::new(),
            capacity,
            runs: Vec::new(),
            temp: temp.clone(),
            tag: tag.to_string(),
            total: 0,
        }
    }

    /// Bytes of records held in memory.
    pub(crate) fn memory(&self) -> usize {
        self.buf.len() * std::mem::size_of::<Rec<N>>()
    }

    /// Add a record. The caller spills when the shared budget is reached.
    pub(crate) fn push(&mut self, hash: &[u8], pos: u64) {
        if self.buf.capacity() == 0 {
            // Reserved once: the pages are only touched as records arrive,
            // so resident memory follows the records, and the vector never
            // reallocates (which would briefly double it).
            self.buf.reserve_exact(self.capacity);
        }
        let mut h = [0u8; N];
        h.copy_from_slice(&hash[..N]);
        self.buf.push(Rec { hash: h, pos });
        self.total += 1;
    }

    /// Whether the in-memory buffer is full.
    pub(crate) fn full(&self) -> bool {
        self.buf.len() >= self.capacity
    }

    /// Sort the in-memory records and write them out as a run.
    pub(crate) fn spill(&mut self) -> Result<(), HashSetError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.buf.par_sort_unstable();
        let name = format!("{}-{}.run", self.tag, self.runs.len());
        let file = self.temp.create(&name)?;
        let path = file.path().to_path_buf();
        let io = |source: std::io::Error| HashSetError::Io {
            path: path.clone(),
            source,
        };
        let run = Run {
            records: self.buf.len() as u64,
            file: self.temp.open(&name)?,
            temp: self.temp.clone(),
            name: name.clone(),
        };
        let mut w = BufWriter::with_capacity(1 << 20, file);
        for r in &self.buf {
            w.write_all(&r.hash).map_err(io)?;
            w.write_all(&r.pos.to_le_bytes()).map_err(io)?;
        }
        w.flush().map_err(io)?;
        drop(w);
        self.runs.push(run);
        self.buf.clear();
        Ok(())
    }

    /// All records in order.
    pub(crate) fn into_merged(mut self) -> Result<Merged<N>, HashSetError> {
        self.buf.par_sort_unstable();
        let buf = std::mem::take(&mut self.buf);
        let runs = std::mem::take(&mut self.runs);
        // One read buffer per run: together about a quarter of the sort
        // budget, and never under 64 KiB each.
        let block_records = if runs.is_empty() {
            0
        } else {
            ((self.capacity * std::mem::size_of::<Rec<N>>() / 4 / runs.len()) / Self::REC)
                .max(65_536 / Self::REC)
        };
        let mut readers = Vec::with_capacity(runs.len());
        for run in runs {
            readers.push(RunReader::new(run, block_records));
        }
        let mut heap = BinaryHeap::with_capacity(readers.len() + 1);
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(rec) = r.next()? {
                heap.push(Reverse((rec, i)));
            }
        }
        let mut memory = buf.into_iter();
        if let Some(rec) = memory.next() {
            heap.push(Reverse((rec, usize::MAX)));
        }
        Ok(Merged {
            total: self.total,
            readers,
            memory,
            heap,
        })
    }
}

struct RunReader<const N: usize> {
    run: Run,
    buf: Vec<u8>,
    at: usize,
    len: usize,
    offset: u64,
    left: u64,
}

impl<const N: usize> RunReader<N> {
    fn new(run: Run, block_records: usize) -> Self {
        let left = run.records;
        RunReader {
            run,
            buf: vec![0u8; block_records * (N + 8)],
            at: 0,
            len: 0,
            offset: 0,
            left,
        }
    }

    fn next(&mut self) -> Result<Option<Rec<N>>, HashSetError> {
        if self.left == 0 {
            return Ok(None);
        }
        if self.at == self.len {
            let want = (self.buf.len() as u64).min(self.left * (N as u64 + 8)) as usize;
            let got = self
                .run
                .file
                .read_at(&mut self.buf[..want], self.offset)
                .map_err(|source| HashSetError::Io {
                    path: self.run.file.path().to_path_buf(),
                    source,
                })?;
            if got < want {
                return Err(HashSetError::Io {
                    path: self.run.file.path().to_path_buf(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "sort run is shorter than written",
                    ),
                });
            }
            self.offset += got as u64;
            self.at = 0;
            self.len = got;
        }
        let rec = &self.buf[self.at..self.at + N + 8];
        let mut hash = [0u8; N];
        hash.copy_from_slice(&rec[..N]);
        let mut p = [0u8; 8];
        p.copy_from_slice(&rec[N..]);
        self.at += N + 8;
        self.left -= 1;
        Ok(Some(Rec {
            hash,
            pos: u64::from_le_bytes(p),
        }))
    }
}

/// Records of a sorter in key order.
pub(crate) struct Merged<const N: usize> {
    total: u64,
    readers: Vec<RunReader<N>>,
    memory: std::vec::IntoIter<Rec<N>>,
    heap: BinaryHeap<Reverse<(Rec<N>, usize)>>,
}

impl<const N: usize> Merged<N> {
    /// Records in all.
    pub(crate) fn len(&self) -> u64 {
        self.total
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The next record, or `None` at the end.
    pub(crate) fn next(&mut self) -> Result<Option<Rec<N>>, HashSetError> {
        let Some(Reverse((rec, src))) = self.heap.pop() else {
            return Ok(None);
        };
        let refill = if src == usize::MAX {
            self.memory.next()
        } else {
            match self.readers.get_mut(src) {
                Some(r) => r.next()?,
                None => None,
            }
        };
        if let Some(next) = refill {
            self.heap.push(Reverse((next, src)));
        }
        Ok(Some(rec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::ChannelKind;

    #[test]
    fn spilled_runs_merge_into_one_sorted_stream() {
        let dir = tempfile::tempdir().unwrap();
        let temp = Channel::new(ChannelKind::Temp, dir.path(), Vec::new());
        // A budget of 1024 records: 10 000 records make several runs.
        let mut s: Sorter<4> = Sorter::new(1024 * std::mem::size_of::<Rec<4>>(), &temp, "t");
        let mut x: u32 = 12345;
        let mut all = Vec::new();
        for line in 0..10_000u64 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let h = (x % 5000).to_be_bytes();
            s.push(&h, pos(1, line));
            all.push(Rec {
                hash: h,
                pos: pos(1, line),
            });
            if s.full() {
                s.spill().unwrap();
            }
        }
        assert!(s.runs.len() >= 9);
        let before = temp.snapshot();
        let mut m = s.into_merged().unwrap();
        let mut got = Vec::new();
        while let Some(r) = m.next().unwrap() {
            got.push(r);
        }
        all.sort();
        assert_eq!(got, all);
        // The runs were read back through the temp channel...
        assert!(temp.snapshot().since(&before).bytes_read >= 9 * 1024 * 12);
        drop(m);
        // ...and removed.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(unpos(pos(3, 77)), (3, 77));
    }
}
