//! A rotated log as `logrotate` leaves it (`syslog.2.gz`): one gzip
//! member (RFC 1952) of exactly the size asked for.
//!
//! Deflate cannot be told to stop at a byte count, so the member is built
//! in two parts: the log's head is compressed and sync-flushed every
//! [`CHUNK`] bytes of input (each flush ends on a byte boundary with every
//! block non-final), the stream is cut at the last flush that leaves room,
//! and the rest of the room is filled with the log's next bytes as stored
//! blocks, the last one final. RFC 1951 lets blocks of any type follow one
//! another, so `gzip -t`, `zcat` and every inflater read it whole; the
//! stored tail is at most one chunk's compressed size (a few KiB).

use super::text;
use crate::rng::Rng;
use flate2::{Compress, Compression, FlushCompress};

/// Input between two sync flushes: where the compressed stream may be cut.
const CHUNK: usize = 8 << 10;
/// gzip's fixed header (no name, no extra field) and trailer (CRC-32, size).
const HEADER: usize = 10;
const TRAILER: usize = 8;
/// A stored block's header byte plus LEN and NLEN.
pub(super) const STORED_HEAD: usize = 5;
/// Most bytes one stored block holds.
pub(super) const STORED_MAX: usize = 65_535;
/// Planted tokens lie in the log's first bytes, which every member of at
/// least [`MIN_SIZE`] bytes holds.
const KEYWORD_SPAN: usize = 512;
/// Smallest member generated: header, trailer and one stored block of the
/// keyword span.
pub const MIN_SIZE: u64 = (HEADER + TRAILER + STORED_HEAD + KEYWORD_SPAN) as u64;

/// A gzip member of exactly `size` bytes (at least [`MIN_SIZE`]) whose
/// content is a log dated up to `when`, with `keywords` in its first
/// [`KEYWORD_SPAN`] bytes of text (compressed, so a raw search of the file
/// finds them only where they fall in the stored tail).
pub fn rotated_log(rng: &mut Rng, size: usize, keywords: &[String], when: u64) -> Vec<u8> {
    let size = size.max(MIN_SIZE as usize);
    let room = size - HEADER - TRAILER;
    // Logs compress about 4:1 at level 6; draw twice that and more as
    // needed (a log that compressed worse than 1:1 would still fit: the
    // stored tail takes what compression left).
    let mut log = text::syslog(rng, (room * 8).max(KEYWORD_SPAN * 2), &[], &[], when);
    let head = log.len().min(KEYWORD_SPAN);
    text::place(rng, &mut log[..head], 0, keywords, &[]);

    let (deflated, used) = deflate_head(&log, room);
    let mut out = Vec::with_capacity(size);
    // ID1 ID2, deflate, no flags, no time (as `gzip -n`), fast level, Unix.
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]);
    out.extend_from_slice(&deflated);
    let (stored, blocks) = stored_payload(room - deflated.len());
    let mut tail = log[used.min(log.len())..(used + stored).min(log.len())].to_vec();
    // A log that compressed worse than 8:1 drew too few lines: the member
    // stays exact with empty lines.
    tail.resize(stored, b'\n');
    push_stored(&mut out, &tail, blocks);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&log[..used]);
    crc.update(&tail);
    push_trailer(&mut out, crc.finalize(), used + stored);
    out
}

/// Stored blocks holding `n` bytes (at least one).
pub(super) fn stored_blocks(n: usize) -> usize {
    n.div_ceil(STORED_MAX).max(1)
}

/// Append `data` as `blocks` stored deflate blocks, spread evenly (each at
/// most [`STORED_MAX`] bytes when `blocks` ≥ [`stored_blocks`] of it), the
/// last one final.
pub(super) fn push_stored(out: &mut Vec<u8>, data: &[u8], blocks: usize) {
    let mut left = data;
    for b in (1..=blocks).rev() {
        let (now, rest) = left.split_at(left.len().div_ceil(b));
        let n = now.len() as u16;
        out.push(u8::from(b == 1));
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(!n).to_le_bytes());
        out.extend_from_slice(now);
        left = rest;
    }
}

/// Append gzip's trailer: the content's CRC-32 and its length mod 2^32.
pub(super) fn push_trailer(out: &mut Vec<u8>, crc: u32, len: usize) {
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&(len as u32).to_le_bytes());
}

/// The bytes of stored-block data, and the blocks holding them, that fill
/// `room` exactly with the blocks' headers (at least one block; `room` ≥
/// [`STORED_HEAD`]).
fn stored_payload(room: usize) -> (usize, usize) {
    let blocks = room.div_ceil(STORED_MAX + STORED_HEAD).max(1);
    (room - blocks * STORED_HEAD, blocks)
}

/// Compress `log`'s head, flushing every [`CHUNK`] bytes of input, and cut
/// at the last flush whose output leaves at least a stored block's header
/// of `room`. Returns the compressed bytes and
/// how much of `log` they hold.
fn deflate_head(log: &[u8], room: usize) -> (Vec<u8>, usize) {
    let limit = room.saturating_sub(STORED_HEAD);
    let mut z = Compress::new(Compression::default(), false);
    let mut out: Vec<u8> = Vec::with_capacity(room + 1024);
    let mut cut = (0usize, 0usize);
    for piece in log.chunks(CHUNK) {
        let before_in = z.total_in() as usize;
        // A sync flush of a chunk never needs more than the chunk plus
        // deflate's worst-case overhead.
        out.reserve(piece.len() + piece.len() / 8 + 64);
        let mut fed = 0;
        loop {
            let prev = z.total_in() as usize;
            if z.compress_vec(&piece[fed..], &mut out, FlushCompress::Sync)
                .is_err()
            {
                return (out[..cut.0].to_vec(), cut.1);
            }
            fed += z.total_in() as usize - prev;
            if fed == piece.len() && out.len() < out.capacity() {
                break;
            }
            out.reserve(4096);
        }
        if out.len() > limit {
            break;
        }
        cut = (out.len(), before_in + piece.len());
    }
    out.truncate(cut.0);
    (out, cut.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read;

    fn inflate(gz: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        GzDecoder::new(gz).read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn members_are_exact_and_inflate_to_a_log() {
        for (i, size) in [MIN_SIZE as usize, 600, 4_000, 70_000, 300_000, 2 << 20]
            .into_iter()
            .enumerate()
        {
            let mut rng = Rng::new(i as u64 + 7);
            let kw = vec!["zqxplantedtoken".to_string()];
            let gz = rotated_log(&mut rng, size, &kw, 1_000_000_000);
            assert_eq!(gz.len(), size);
            let text = inflate(&gz);
            // Mostly compressed: the content is several times the member.
            if size >= 70_000 {
                assert!(text.len() > size * 2, "{size}: {} bytes", text.len());
            }
            let s = String::from_utf8(text).unwrap();
            assert!(s.contains("zqxplantedtoken"), "{size}");
            assert!(s.lines().count() > 1);
        }
    }

    #[test]
    fn the_same_key_gives_the_same_member() {
        let a = rotated_log(&mut Rng::new(3), 50_000, &[], 5);
        let b = rotated_log(&mut Rng::new(3), 50_000, &[], 5);
        assert_eq!(a, b);
    }

    #[test]
    fn stored_blocks_fill_any_room() {
        for room in [5, 6, 65_540, 65_541, 131_080, 200_000] {
            let (data, blocks) = stored_payload(room);
            assert_eq!(data + blocks * STORED_HEAD, room, "{room}");
            assert!(data <= blocks * STORED_MAX, "{room}");
        }
    }
}
