//! Files compressed as macOS compresses them with `ditto --hfsCompression`
//! or afsctool: decmpfs type 4, the file cut into 64 KiB blocks, each
//! zlib-compressed (or stored behind a 0xFF byte where zlib does not
//! shrink it), the blocks and their table held as resource 1 of type
//! `cmpf` in a classic resource fork, the `com.apple.ResourceFork`
//! attribute's data stream. The inode has no data stream of its own, the
//! `UF_COMPRESSED` BSD flag and `INODE_HAS_RSRC_FORK`, and a
//! `com.apple.decmpfs` attribute holding the 16-byte header (`fpmc`, the
//! type, the uncompressed size).
//!
//! The whole resource-fork wrapper is written (header, the resource's
//! length, the map naming `cmpf` 1): macOS reads a type-4 fork through
//! its resource-fork reader, while TSK and apfsck read only the data
//! offset and the block table.

use std::io::Write;

/// Bytes of the file each block holds (the last: what is left).
pub const BLOCK_BYTES: usize = 65536;
/// decmpfs compression type: zlib in the resource fork.
pub const TYPE_ZLIB_FORK: u32 = 4;
/// The attribute holding the header.
pub const DECMPFS: &str = "com.apple.decmpfs";
/// The attribute whose data stream is the resource fork.
pub const RESOURCE_FORK: &str = "com.apple.ResourceFork";
/// BSD flag of a compressed file (`UF_COMPRESSED`).
pub const UF_COMPRESSED: u32 = 0x20;
/// zlib level (afsctool's default; Apple's tools use the same).
const LEVEL: u32 = 5;
/// Where the resource data starts in the fork (after the 256-byte
/// header, as the Resource Manager writes it).
const DATA_OFFSET: usize = 0x100;
/// Bytes of the resource map: its header (28), one type (10), one
/// reference (12).
const MAP_LEN: usize = 50;

/// The `com.apple.decmpfs` attribute's value for a file of `size` bytes.
pub fn header(size: u64) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[..4].copy_from_slice(b"fpmc");
    h[4..8].copy_from_slice(&TYPE_ZLIB_FORK.to_le_bytes());
    h[8..].copy_from_slice(&size.to_le_bytes());
    h
}

/// The resource fork holding `bytes` compressed.
pub fn fork(bytes: &[u8]) -> Vec<u8> {
    let blocks: Vec<Vec<u8>> = bytes.chunks(BLOCK_BYTES).map(block).collect();
    // The `cmpf` resource: block count, (offset, length) pairs counted
    // from the count, the blocks.
    let table = 4 + 8 * blocks.len();
    let mut res = Vec::with_capacity(table + blocks.iter().map(Vec::len).sum::<usize>());
    res.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
    let mut at = table;
    for b in &blocks {
        res.extend_from_slice(&(at as u32).to_le_bytes());
        res.extend_from_slice(&(b.len() as u32).to_le_bytes());
        at += b.len();
    }
    for b in &blocks {
        res.extend_from_slice(b);
    }
    // The fork: header, the resource's length and bytes, the map.
    let data_len = 4 + res.len();
    let map_offset = DATA_OFFSET + data_len;
    let mut head = [0u8; 16];
    for (i, v) in [DATA_OFFSET, map_offset, data_len, MAP_LEN]
        .into_iter()
        .enumerate()
    {
        head[4 * i..4 * i + 4].copy_from_slice(&(v as u32).to_be_bytes());
    }
    let mut out = Vec::with_capacity(map_offset + MAP_LEN);
    out.extend_from_slice(&head);
    out.resize(DATA_OFFSET, 0);
    out.extend_from_slice(&(res.len() as u32).to_be_bytes());
    out.extend_from_slice(&res);
    // The map: a copy of the header, next-map handle and file reference
    // (0), attributes (0), the type list at 28 and the name list at its
    // end (50); one type, `cmpf`, one resource, its references at 10
    // bytes into the type list; resource 1, no name, its data at 0.
    out.extend_from_slice(&head);
    out.extend_from_slice(&[0u8; 8]);
    out.extend_from_slice(&28u16.to_be_bytes());
    out.extend_from_slice(&(MAP_LEN as u16).to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(b"cmpf");
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&10u16.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&0xFFFFu16.to_be_bytes());
    out.extend_from_slice(&[0u8; 8]);
    debug_assert_eq!(out.len(), map_offset + MAP_LEN);
    out
}

/// One block: zlib where that is shorter than the block, else stored
/// after 0xFF (what TSK and macOS read as uncompressed).
fn block(chunk: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(chunk.len() / 2),
        flate2::Compression::new(LEVEL),
    );
    // Writing to a Vec cannot fail.
    let packed = z.write_all(chunk).and_then(|()| z.finish()).ok();
    match packed {
        Some(p) if p.len() < chunk.len() => p,
        _ => {
            let mut s = Vec::with_capacity(chunk.len() + 1);
            s.push(0xFF);
            s.extend_from_slice(chunk);
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The fork read back as TSK reads it: the big-endian data offset, 4
    /// bytes on the block count and table, each block zlib or stored.
    fn read_back(fork: &[u8], size: usize) -> Vec<u8> {
        let be = |o: usize| u32::from_be_bytes(fork[o..o + 4].try_into().unwrap()) as usize;
        let le = |o: usize| u32::from_le_bytes(fork[o..o + 4].try_into().unwrap()) as usize;
        let data = be(0) + 4;
        assert_eq!(be(0x100), be(8) - 4, "the resource's length");
        assert_eq!(&fork[be(4) + 30..be(4) + 34], b"cmpf");
        let mut out = Vec::new();
        for i in 0..le(data) {
            let (off, len) = (le(data + 4 + 8 * i), le(data + 8 + 8 * i));
            let b = &fork[data + off..data + off + len];
            if b[0] == 0xFF {
                out.extend_from_slice(&b[1..]);
            } else {
                flate2::read::ZlibDecoder::new(b)
                    .read_to_end(&mut out)
                    .unwrap();
            }
        }
        assert_eq!(out.len(), size);
        out
    }

    #[test]
    fn forks_read_back_as_tsk_reads_them() {
        let text: Vec<u8> = b"the quick brown fox jumps over the lazy dog\n"
            .iter()
            .copied()
            .cycle()
            .take(200_000)
            .collect();
        let f = fork(&text);
        assert!(f.len() < text.len() / 4);
        assert_eq!(read_back(&f, text.len()), text);
        // Incompressible blocks are stored.
        let mut rng = crate::rng::Rng::new(7);
        let noise: Vec<u8> = (0..70_000).map(|_| rng.next_u64() as u8).collect();
        let f = fork(&noise);
        assert!(f.len() > noise.len(), "stored, not compressed");
        assert_eq!(read_back(&f, noise.len()), noise);
        assert_eq!(&header(5)[..8], b"fpmc\x04\0\0\0");
    }
}
