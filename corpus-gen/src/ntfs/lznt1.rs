//! LZNT1 compression, as NTFS stores compressed streams: each 4096-byte
//! chunk compressed on its own (a 2-byte header, then flag bytes each
//! followed by eight literals or back-references whose offset/length split
//! depends on the position in the chunk), stored raw when compression does
//! not shrink it. Written for compressed corpus files; the decoder the
//! engine uses (`caseload_fs`'s) is the round-trip check.

/// Bytes of one chunk before compression.
pub const CHUNK: usize = 4096;
/// Hash-table size for 3-byte prefixes (a power of two).
const HASH: usize = 1 << 12;

fn split(pos: usize) -> (usize, usize) {
    // (length bits, largest offset) at position `pos` of the chunk, as the
    // decoder computes them: offset bits grow from 4 as `pos - 1` passes
    // each power of two from 16.
    let mut shift = 12;
    let mut x = pos.saturating_sub(1);
    while x >= 0x10 {
        shift -= 1;
        x >>= 1;
    }
    (shift, 1 << (16 - shift))
}

fn hash3(b: &[u8]) -> usize {
    let v = (b[0] as usize) | (b[1] as usize) << 8 | (b[2] as usize) << 16;
    (v.wrapping_mul(2_654_435_761) >> 12) & (HASH - 1)
}

/// Candidates tried per position (a hash chain).
const CHAIN: usize = 16;

/// Compress one chunk (at most [`CHUNK`] bytes) to its stored form,
/// header included.
pub fn compress_chunk(data: &[u8]) -> Vec<u8> {
    debug_assert!(data.len() <= CHUNK && !data.is_empty());
    let mut out = vec![0u8, 0u8];
    // Most recent position of each 3-byte hash, and the previous position
    // with the same hash for each position.
    let mut head = [usize::MAX; HASH];
    let mut prev = [usize::MAX; CHUNK];
    let insert = |p: usize, head: &mut [usize; HASH], prev: &mut [usize; CHUNK]| {
        if p + 3 <= data.len() {
            let h = hash3(&data[p..]);
            prev[p] = head[h];
            head[h] = p;
        }
    };
    let mut pos = 0;
    while pos < data.len() {
        let flag_at = out.len();
        out.push(0);
        let mut bit = 0;
        while bit < 8 && pos < data.len() {
            let (shift, max_off) = split(pos);
            let max_len = ((1usize << shift) - 1) + 3;
            let limit = max_len.min(data.len() - pos);
            let mut best = (0usize, 0usize);
            if pos >= 1 && pos + 3 <= data.len() {
                let mut cand = head[hash3(&data[pos..])];
                let mut tries = 0;
                while cand != usize::MAX && tries < CHAIN && pos - cand <= max_off {
                    let mut n = 0;
                    while n < limit && data[cand + n] == data[pos + n] {
                        n += 1;
                    }
                    if n > best.1 {
                        best = (pos - cand, n);
                        if n == limit {
                            break;
                        }
                    }
                    cand = prev[cand];
                    tries += 1;
                }
            }
            let step = if best.1 >= 3 { best.1 } else { 1 };
            if step > 1 {
                let token = ((best.0 - 1) << shift) | (best.1 - 3);
                out.extend_from_slice(&(token as u16).to_le_bytes());
                out[flag_at] |= 1 << bit;
            } else {
                out.push(data[pos]);
            }
            for p in pos..pos + step {
                insert(p, &mut head, &mut prev);
            }
            pos += step;
            bit += 1;
        }
    }
    let stored = out.len() - 2;
    if stored >= data.len() && data.len() == CHUNK {
        // Not worth it: a raw chunk (only a full chunk may be stored raw).
        let mut raw = Vec::with_capacity(CHUNK + 2);
        raw.extend_from_slice(&(0x3000u16 | (CHUNK as u16 - 1)).to_le_bytes());
        raw.extend_from_slice(data);
        return raw;
    }
    let header = 0x8000u16 | 0x3000 | (stored as u16 - 1);
    out[0..2].copy_from_slice(&header.to_le_bytes());
    out
}

/// Compress a compression unit (several chunks); the result ends where
/// the last chunk ends (readers stop there or at a zero header).
pub fn compress(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 2);
    for chunk in data.chunks(CHUNK) {
        out.extend_from_slice(&compress_chunk(chunk));
    }
    out
}

/// Clusters in an NTFS compression unit (64 KiB with 4 KiB clusters, the
/// only unit Windows uses; the attribute header stores its log2, 4).
pub const UNIT_CLUSTERS: u64 = 16;
/// Bytes of a compression unit.
pub const UNIT_BYTES: usize = UNIT_CLUSTERS as usize * crate::ntfs::CLUSTER;

/// A file's data as a compressed NTFS stream stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Clusters each compression unit occupies: fewer than
    /// [`UNIT_CLUSTERS`] for a compressed unit (the rest of its virtual
    /// clusters are sparse), exactly [`UNIT_CLUSTERS`] for one stored raw.
    pub units: Vec<u8>,
    /// The bytes on disk, unit after unit, each padded with zeros to whole
    /// clusters (so exactly `sum(units)` clusters).
    pub bytes: Vec<u8>,
}

/// Lay `data` out as Windows stores a compressed file: each 64 KiB unit
/// compressed on its own and kept compressed when that saves at least one
/// cluster, else stored raw in all sixteen.
pub fn store(data: &[u8]) -> Stored {
    let cluster = crate::ntfs::CLUSTER;
    let mut units = Vec::with_capacity(data.len().div_ceil(UNIT_BYTES));
    let mut bytes = Vec::with_capacity(data.len() / 2);
    for unit in data.chunks(UNIT_BYTES) {
        let packed = compress(unit);
        let n = packed.len().div_ceil(cluster);
        if n < UNIT_CLUSTERS as usize {
            bytes.extend_from_slice(&packed);
            units.push(n as u8);
            bytes.resize(bytes.len().div_ceil(cluster) * cluster, 0);
        } else {
            bytes.extend_from_slice(unit);
            units.push(UNIT_CLUSTERS as u8);
            bytes.resize(bytes.len() + (UNIT_BYTES - unit.len()), 0);
        }
    }
    Stored { units, bytes }
}

/// The run list of a compressed stream whose stored clusters start at
/// `lcn` and are contiguous: per unit its clusters, then the unit's
/// sparse rest (raw units run on into the next).
pub fn unit_runs(lcn: u64, units: &[u8]) -> Vec<super::record::DataRun> {
    use super::record::DataRun;
    let mut runs: Vec<DataRun> = Vec::new();
    let mut at = lcn;
    for &n in units {
        let n = n as u64;
        match runs.last_mut() {
            // A raw unit continues the previous data run.
            Some(r) if r.lcn.map(|l| l + r.len) == Some(at) => r.len += n,
            _ if n > 0 => runs.push(DataRun {
                lcn: Some(at),
                len: n,
            }),
            _ => {}
        }
        at += n;
        if n < UNIT_CLUSTERS {
            runs.push(DataRun {
                lcn: None,
                len: UNIT_CLUSTERS - n,
            });
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_stream_reads_back_unit_by_unit() {
        let mut text = Vec::new();
        let mut r = crate::rng::Rng::new(11);
        crate::words::fill_text(&mut r, &mut text, 2 * UNIT_BYTES);
        text.truncate(2 * UNIT_BYTES);
        let mut rnd = vec![0u8; UNIT_BYTES];
        r.fill(&mut rnd);
        text.extend_from_slice(&rnd);
        text.extend_from_slice(b"tail");
        let s = store(&text);
        assert_eq!(s.units.len(), text.len().div_ceil(UNIT_BYTES));
        let clusters: usize = s.units.iter().map(|&n| n as usize).sum();
        assert_eq!(s.bytes.len(), clusters * crate::ntfs::CLUSTER);
        // Text units shrink, the random unit is raw.
        assert!(s.units[0] < 16 && s.units[1] < 16, "{:?}", s.units);
        assert_eq!(s.units[2], 16, "{:?}", s.units);
        assert_eq!(s.units[3], 1, "{:?}", s.units);
        // Decode as a reader does: unit by unit from the stored clusters.
        let mut back = Vec::new();
        let mut at = 0;
        for (u, &n) in s.units.iter().enumerate() {
            let len = n as usize * crate::ntfs::CLUSTER;
            let want = (text.len() - u * UNIT_BYTES).min(UNIT_BYTES);
            let part = &s.bytes[at..at + len];
            if n as u64 == UNIT_CLUSTERS {
                back.extend_from_slice(&part[..want]);
            } else {
                let mut out = Vec::new();
                caseload_fs::lznt1::decompress(part, &mut out, want).unwrap();
                back.extend_from_slice(&out);
            }
            at += len;
        }
        assert_eq!(back, text);
        // Runs: data then sparse per compressed unit, raw units merged.
        let runs = unit_runs(100, &s.units);
        let vcns: u64 = runs.iter().map(|r| r.len).sum();
        assert_eq!(vcns, s.units.len() as u64 * UNIT_CLUSTERS);
        let data: u64 = runs.iter().filter(|r| r.lcn.is_some()).map(|r| r.len).sum();
        assert_eq!(data as usize, clusters);
        assert_eq!(runs[0].lcn, Some(100));
        assert_eq!(runs[1].lcn, None);
    }

    fn round_trip(data: &[u8]) -> usize {
        let packed = compress(data);
        let mut back = Vec::new();
        caseload_fs::lznt1::decompress(&packed, &mut back, data.len()).unwrap();
        assert_eq!(back, data);
        packed.len()
    }

    #[test]
    fn text_shrinks_and_decodes_back() {
        let mut text = Vec::new();
        let mut r = crate::rng::Rng::new(5);
        crate::words::fill_text(&mut r, &mut text, 40_000);
        let n = round_trip(&text);
        assert!(n < text.len() * 2 / 3, "{n} of {}", text.len());
    }

    #[test]
    fn random_data_is_stored_raw_and_runs_collapse() {
        let mut rnd = vec![0u8; 3 * CHUNK + 100];
        crate::rng::Rng::new(9).fill(&mut rnd);
        round_trip(&rnd);
        assert!(round_trip(&vec![0u8; 2 * CHUNK]) < 64);
        round_trip(b"abcabcabcabcabc");
        round_trip(b"a");
    }
}
