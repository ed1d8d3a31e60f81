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

#[cfg(test)]
mod tests {
    use super::*;

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
