//! The chunk index: where each chunk's stored bytes are, read table by
//! table when first needed and kept in a small cache, so that memory stays
//! bounded whatever the image size (a terabyte image has about two thousand
//! tables of 16,375 entries; the index holds one small record per table and
//! at most [`CACHED_TABLES`] tables' entries).
//!
//! A table is read from its primary copy (v1 `table`) and, when that copy's
//! entries fail their Adler-32, from its mirror (v1 `table2`); when neither
//! verifies the primary's entries are used anyway, as libewf does, because
//! each chunk carries its own check (zlib's Adler-32 or the stored one) and
//! a damaged entry then shows as that chunk's error with its sectors.

use super::format::{SegmentRead, read_exact};
use std::sync::{Arc, Mutex};

/// Tables whose entries are held at once.
const CACHED_TABLES: usize = 16;

/// Most entries one table may declare (EnCase writes 16,375 at most; the
/// bound keeps a hostile count from asking for gigabytes).
pub(super) const MAX_TABLE_ENTRIES: u32 = 1 << 22;

/// How one chunk is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stored {
    /// zlib data (its own Adler-32 checks it).
    Compressed,
    /// The chunk's bytes as they are, followed by an Adler-32 when `checked`.
    Plain {
        /// An Adler-32 follows the data.
        checked: bool,
    },
    /// EWF v2 pattern fill: the chunk is this 8-byte value repeated.
    Pattern(u64),
}

/// One chunk's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ChunkEntry {
    /// Segment index (0-based).
    pub segment: usize,
    /// Byte offset of its stored data in the segment.
    pub offset: u64,
    /// Bytes stored for it: exact in v2; in v1 an upper bound (up to the
    /// next chunk or the end of the section holding it).
    pub size: u64,
    /// How it is stored.
    pub stored: Stored,
}

/// One copy of a table's entries in a segment.
#[derive(Debug, Clone, Copy)]
pub(super) struct TableCopy {
    /// Where the entries start.
    pub entries_at: u64,
    /// v1: what entry offsets are relative to (EnCase 6's table base).
    pub base: u64,
    /// Whether an Adler-32 of the entries follows them.
    pub checksummed: bool,
}

/// The entry format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EntryFormat {
    /// 4 bytes: bit 31 compressed, 31 bits of offset from the table base.
    V1,
    /// 16 bytes: 64-bit offset (or fill pattern), 32-bit size, 32-bit flags.
    V2,
}

/// One table: which chunks it places and where its copies are.
#[derive(Debug, Clone)]
pub(super) struct TableRef {
    /// Segment index (0-based) holding the table and its chunks.
    pub segment: usize,
    /// The first chunk it places.
    pub first: u64,
    /// How many.
    pub count: u32,
    /// Primary copy, then any mirror.
    pub copies: Vec<TableCopy>,
    /// Its entry format.
    pub format: EntryFormat,
}

/// The chunk index of an EWF set.
pub(super) struct ChunkIndex {
    tables: Vec<TableRef>,
    /// Per segment: the offsets where sections start, sorted, and the
    /// file's length last. A v1 chunk's stored bytes end at the next
    /// chunk or, for a table's last chunk, at the next section.
    bounds: Vec<Vec<u64>>,
    total: u64,
    cache: Mutex<Vec<(usize, Arc<[ChunkEntry]>)>>,
}

impl std::fmt::Debug for ChunkIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkIndex")
            .field("tables", &self.tables.len())
            .field("chunks", &self.total)
            .finish_non_exhaustive()
    }
}

impl ChunkIndex {
    /// An index over `tables` (in chunk order, contiguous from chunk 0).
    pub fn new(tables: Vec<TableRef>, mut bounds: Vec<Vec<u64>>) -> Self {
        for b in &mut bounds {
            b.sort_unstable();
            b.dedup();
        }
        let total = tables.last().map_or(0, |t| t.first + u64::from(t.count));
        ChunkIndex {
            tables,
            bounds,
            total,
            cache: Mutex::new(Vec::with_capacity(CACHED_TABLES)),
        }
    }

    /// Chunks the tables place.
    pub fn chunk_count(&self) -> u64 {
        self.total
    }

    /// Where chunk `chunk` is stored, reading its table when not cached.
    pub fn entry<S: SegmentRead>(&self, chunk: u64, segments: &[S]) -> Result<ChunkEntry, String> {
        let t = self.tables.partition_point(|t| t.first <= chunk);
        let table_index = t
            .checked_sub(1)
            .filter(|&i| chunk - self.tables[i].first < u64::from(self.tables[i].count))
            .ok_or_else(|| {
                "no chunk table lists it: a segment is missing or truncated".to_string()
            })?;
        let entries = self.table(table_index, segments)?;
        let i = usize::try_from(chunk - self.tables[table_index].first)
            .map_err(|_| "index overflow".to_string())?;
        entries
            .get(i)
            .copied()
            .ok_or_else(|| "table is shorter than its count".to_string())
    }

    fn table<S: SegmentRead>(
        &self,
        index: usize,
        segments: &[S],
    ) -> Result<Arc<[ChunkEntry]>, String> {
        {
            // A poisoned lock only means another thread panicked while
            // holding it; the cache's contents are still whole entries.
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(pos) = cache.iter().position(|(i, _)| *i == index) {
                // Most lookups hit the front (chunks are read in order):
                // move a table there only when it is not already.
                if pos > 0 {
                    let hit = cache.remove(pos);
                    cache.insert(0, hit);
                }
                return Ok(Arc::clone(&cache[0].1));
            }
        }
        let loaded: Arc<[ChunkEntry]> = self.load(index, segments)?.into();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if !cache.iter().any(|(i, _)| *i == index) {
            cache.insert(0, (index, Arc::clone(&loaded)));
            cache.truncate(CACHED_TABLES);
        }
        Ok(loaded)
    }

    fn load<S: SegmentRead>(
        &self,
        index: usize,
        segments: &[S],
    ) -> Result<Vec<ChunkEntry>, String> {
        let table = &self.tables[index];
        let seg: &dyn SegmentRead = segments
            .get(table.segment)
            .ok_or_else(|| format!("table names segment {} which is absent", table.segment + 1))?;
        let width: u64 = match table.format {
            EntryFormat::V1 => 4,
            EntryFormat::V2 => 16,
        };
        let bytes = u64::from(table.count) * width;
        let mut first_error = None;
        let mut unverified = None;
        for copy in &table.copies {
            let with_sum = bytes + if copy.checksummed { 4 } else { 0 };
            match read_exact(
                seg,
                table.segment + 1,
                copy.entries_at,
                with_sum,
                "chunk table",
            ) {
                Ok(raw) => {
                    let (entries, sum) = raw.split_at(bytes as usize);
                    let ok = sum.len() < 4
                        || u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]])
                            == caseload_digests::adler32(entries);
                    if ok {
                        return Ok(self.decode(table, copy, entries));
                    }
                    if unverified.is_none() {
                        unverified = Some((*copy, raw));
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match unverified {
            Some((copy, raw)) => Ok(self.decode(table, &copy, &raw[..bytes as usize])),
            None => Err(first_error.unwrap_or_else(|| "table has no copy".into())),
        }
    }

    fn decode(&self, table: &TableRef, copy: &TableCopy, raw: &[u8]) -> Vec<ChunkEntry> {
        match table.format {
            EntryFormat::V1 => {
                let places: Vec<(u64, bool)> = raw
                    .chunks_exact(4)
                    .map(|e| {
                        let v = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
                        (
                            copy.base.saturating_add(u64::from(v & 0x7fff_ffff)),
                            v >> 31 == 1,
                        )
                    })
                    .collect();
                places
                    .iter()
                    .enumerate()
                    .map(|(i, &(offset, compressed))| {
                        let end = places
                            .get(i + 1)
                            .map(|&(next, _)| next)
                            .filter(|&next| next > offset)
                            .unwrap_or_else(|| self.region_end(table.segment, offset));
                        ChunkEntry {
                            segment: table.segment,
                            offset,
                            size: end.saturating_sub(offset),
                            stored: if compressed {
                                Stored::Compressed
                            } else {
                                Stored::Plain { checked: true }
                            },
                        }
                    })
                    .collect()
            }
            EntryFormat::V2 => raw
                .chunks_exact(16)
                .map(|e| {
                    let field =
                        u64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
                    let size = u32::from_le_bytes([e[8], e[9], e[10], e[11]]);
                    let flags = u32::from_le_bytes([e[12], e[13], e[14], e[15]]);
                    let stored = match (flags & 1 != 0, flags & 4 != 0) {
                        (true, true) => Stored::Pattern(field),
                        (true, false) => Stored::Compressed,
                        (false, _) => Stored::Plain {
                            checked: flags & 2 != 0,
                        },
                    };
                    ChunkEntry {
                        segment: table.segment,
                        offset: if matches!(stored, Stored::Pattern(_)) {
                            0
                        } else {
                            field
                        },
                        size: u64::from(size),
                        stored,
                    }
                })
                .collect(),
        }
    }

    /// The first section start after `offset` in `segment` (or its end).
    fn region_end(&self, segment: usize, offset: u64) -> u64 {
        let Some(b) = self.bounds.get(segment) else {
            return offset;
        };
        let i = b.partition_point(|&s| s <= offset);
        b.get(i).copied().unwrap_or(offset)
    }
}
