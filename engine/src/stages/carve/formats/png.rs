//! PNG: the signature, then chunks (length, type, data, CRC) from IHDR
//! through IEND. The delimiter walks chunk lengths; the verifier checks
//! every chunk's CRC-32, which a fragment boundary inside a chunk breaks.

use super::{Cut, Delimiter, Gather, Step, Validation, Verdict, Verifier, be32};

/// The format's row in [`super::FORMATS`].
pub const SPEC: super::FormatSpec = super::FormatSpec {
    name: "png",
    extension: "png",
    headers: &[super::Header::exact(b"\x89PNG\r\n\x1a\n")],
    max_size: 64 << 20,
    ends_at_own_header: true,
    identified_as: &["png"],
    delimiter: || Box::new(PngDelimiter::new()),
    verifier: Some(|| Box::new(PngVerifier::new())),
};

const SIGNATURE: &[u8; 8] = b"\x89PNG\r\n\x1a\n";

/// Largest chunk length PNG allows (2^31 - 1).
const MAX_CHUNK: u32 = 0x7FFF_FFFF;

/// Chunk lengths up to this are plausible whatever the image (metadata
/// chunks can outgrow a tiny image's pixels).
const PLAUSIBLE_CHUNK: u64 = 16 << 20;

/// The longest chunk an image with these IHDR fields can need: its
/// filtered scanlines stored without compression (deflate's worst case:
/// 5 bytes per 64 KiB block, plus the zlib wrapper), or
/// [`PLAUSIBLE_CHUNK`], whichever is larger. Why: a fragment or an
/// overwrite after IHDR puts foreign bytes where the next chunk header
/// belongs; text there reads as four letters and a length of hundreds of
/// MB, and without this bound the item would run to the maximum size.
fn chunk_bound(ihdr: &[u8]) -> u64 {
    if ihdr.len() < 13 {
        return u64::from(MAX_CHUNK);
    }
    let width = u64::from(be32(ihdr, 0));
    let height = u64::from(be32(ihdr, 4));
    let channels: u64 = match ihdr[9] {
        0 | 3 => 1,
        4 => 2,
        2 => 3,
        _ => 4,
    };
    let bits = u64::from(ihdr[8]).max(1) * channels;
    let row = 1 + (width.saturating_mul(bits)).div_ceil(8);
    // Interlacing adds at most one filter byte per row of each pass.
    let raw = height
        .saturating_mul(row)
        .saturating_add(height.saturating_mul(7));
    let deflated = raw.saturating_add(raw / 65_535 * 5 + 1024);
    deflated.max(PLAUSIBLE_CHUNK)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Signature,
    /// Length and type of the next chunk.
    Head,
    /// Chunk data plus CRC left to skip.
    Skip(u64),
    Done,
}

/// Walks PNG chunks; shared by the delimiter and the verifier.
#[derive(Debug)]
struct Walker {
    state: State,
    gather: Gather,
    pos: u64,
    chunks: u64,
    current: [u8; 4],
    /// IHDR's data, gathered as it passes.
    ihdr: Vec<u8>,
}

/// What a chunk header said.
enum Head {
    Ok,
    Bad(String),
}

/// Pieces of a chunk handed to the verifier.
enum Piece<'a> {
    /// A chunk header: data length and type.
    Head(u32, [u8; 4]),
    /// Data and CRC bytes, in order.
    Bytes(&'a [u8]),
}

impl Walker {
    fn new() -> Self {
        let mut gather = Gather::default();
        gather.start(8);
        Walker {
            state: State::Signature,
            gather,
            pos: 0,
            chunks: 0,
            current: [0; 4],
            ihdr: Vec::new(),
        }
    }

    /// Advance over `data`; calls `head` for each chunk header and
    /// `body` with each run of chunk bytes (type, data and CRC included)
    /// for the verifier. Returns an error with its offset, or the length
    /// once IEND's CRC is passed.
    fn feed(
        &mut self,
        data: &[u8],
        body: &mut dyn FnMut(Piece<'_>),
    ) -> Result<Option<u64>, (u64, String)> {
        let mut i = 0usize;
        while i < data.len() {
            match self.state {
                State::Done => break,
                State::Signature => {
                    if let Some(b) = self.gather.fill(data, &mut i) {
                        if b != SIGNATURE {
                            return Err((0, "not a PNG signature".into()));
                        }
                        self.gather.start(8);
                        self.state = State::Head;
                    }
                }
                State::Head => {
                    let start = i;
                    if let Some(b) = self.gather.fill(data, &mut i) {
                        let len = be32(b, 0);
                        let mut ty = [0u8; 4];
                        ty.copy_from_slice(&b[4..8]);
                        body(Piece::Head(len, ty));
                        match self.check(len, ty) {
                            Head::Ok => {}
                            Head::Bad(msg) => {
                                return Err((self.pos + start as u64, msg));
                            }
                        }
                        self.current = ty;
                        self.chunks += 1;
                        self.state = State::Skip(u64::from(len) + 4);
                    }
                }
                State::Skip(left) => {
                    let take = (left.min((data.len() - i) as u64)) as usize;
                    if self.chunks == 1 && self.ihdr.len() < 13 {
                        let want = (13 - self.ihdr.len()).min(take);
                        self.ihdr.extend_from_slice(&data[i..i + want]);
                    }
                    body(Piece::Bytes(&data[i..i + take]));
                    i += take;
                    let left = left - take as u64;
                    if left > 0 {
                        self.state = State::Skip(left);
                    } else if &self.current == b"IEND" {
                        self.state = State::Done;
                        self.pos += i as u64;
                        return Ok(Some(self.pos));
                    } else {
                        self.gather.start(8);
                        self.state = State::Head;
                    }
                }
            }
        }
        self.pos += i as u64;
        Ok(None)
    }

    fn check(&self, len: u32, ty: [u8; 4]) -> Head {
        if len > MAX_CHUNK {
            return Head::Bad(format!("chunk length {len}"));
        }
        if !ty.iter().all(u8::is_ascii_alphabetic) {
            return Head::Bad(format!("chunk type {:02X?} is not four letters", ty));
        }
        if self.chunks == 0 && (&ty != b"IHDR" || len != 13) {
            return Head::Bad("first chunk is not a 13-byte IHDR".into());
        }
        if self.chunks >= 1 && u64::from(len) > chunk_bound(&self.ihdr) {
            return Head::Bad(format!(
                "chunk length {len} is more than the image's pixels can need"
            ));
        }
        if &ty == b"IEND" && len != 0 {
            return Head::Bad("IEND with data".into());
        }
        Head::Ok
    }
}

/// The PNG delimiter.
#[derive(Debug)]
pub struct PngDelimiter {
    walker: Walker,
}

impl PngDelimiter {
    /// A delimiter for an item starting at the PNG signature.
    pub fn new() -> Self {
        PngDelimiter {
            walker: Walker::new(),
        }
    }
}

impl Default for PngDelimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl Delimiter for PngDelimiter {
    fn feed(&mut self, data: &[u8]) -> Step {
        let walked = self.walker.feed(data, &mut |_| {});
        Step::from_walk(walked, self.accepted())
    }

    fn finish(&mut self, cut: Cut, fed: u64) -> Step {
        let why = match cut {
            Cut::RangeEnd => "the scanned range ends before IEND",
            Cut::MaxSize => "no IEND within the maximum size",
            Cut::NextHeader => "another PNG signature begins before IEND",
        };
        Step::cut_short(self.accepted(), fed, why)
    }

    fn accepted(&self) -> bool {
        // The IHDR header was read (a second chunk has begun).
        self.walker.chunks >= 2 || self.walker.state == State::Done
    }
}

/// The PNG verifier: chunk CRCs and IHDR fields.
pub struct PngVerifier {
    walker: Walker,
    crc: Crc,
    problem: Option<String>,
}

/// CRC state of the current chunk: type and data are hashed, the four
/// bytes after the data (the stored CRC) are compared.
struct Crc {
    hasher: crc32fast::Hasher,
    /// Data bytes of the current chunk still to come.
    data_left: u64,
    stored: Vec<u8>,
    ihdr: Vec<u8>,
    chunk: u64,
    bad: Option<String>,
}

impl Crc {
    fn take(&mut self, piece: Piece<'_>) {
        match piece {
            Piece::Head(len, ty) => {
                self.hasher = crc32fast::Hasher::new();
                self.hasher.update(&ty);
                self.data_left = u64::from(len);
                self.stored.clear();
                self.chunk += 1;
            }
            Piece::Bytes(b) => {
                let data_take = (self.data_left.min(b.len() as u64)) as usize;
                let (data, crc) = b.split_at(data_take);
                self.hasher.update(data);
                self.data_left -= data_take as u64;
                if self.chunk == 1 && self.ihdr.len() < 13 {
                    let n = data.len().min(13 - self.ihdr.len());
                    self.ihdr.extend_from_slice(&data[..n]);
                }
                let room = 4usize.saturating_sub(self.stored.len());
                self.stored.extend_from_slice(&crc[..crc.len().min(room)]);
                if self.stored.len() == 4 && self.data_left == 0 && self.bad.is_none() {
                    let h = std::mem::replace(&mut self.hasher, crc32fast::Hasher::new());
                    if be32(&self.stored, 0) != h.finalize() {
                        self.bad = Some(format!("CRC mismatch in chunk {}", self.chunk));
                    }
                    // Compared once: further bytes belong to the next chunk.
                    self.stored.push(0);
                }
            }
        }
    }
}

impl PngVerifier {
    /// A verifier for one item.
    pub fn new() -> Self {
        PngVerifier {
            walker: Walker::new(),
            crc: Crc {
                hasher: crc32fast::Hasher::new(),
                data_left: 0,
                stored: Vec::new(),
                ihdr: Vec::new(),
                chunk: 0,
                bad: None,
            },
            problem: None,
        }
    }
}

impl Default for PngVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Verifier for PngVerifier {
    fn update(&mut self, data: &[u8]) {
        if self.problem.is_some() || self.walker.state == State::Done {
            return;
        }
        let crc = &mut self.crc;
        if let Err((_, m)) = self.walker.feed(data, &mut |b| crc.take(b)) {
            self.problem = Some(m);
        }
    }

    fn finish(self: Box<Self>, _len: u64) -> Option<Verdict> {
        if self.problem.is_some() || self.walker.state != State::Done {
            // Structure problems and cuts are the delimiter's to report.
            return self.crc.bad.map(|b| Verdict::new(Validation::Invalid, b));
        }
        if let Some(b) = self.crc.bad {
            return Some(Verdict::new(Validation::Invalid, b));
        }
        let h = &self.crc.ihdr;
        if h.len() == 13 {
            let (w, ht, depth, colour) = (be32(h, 0), be32(h, 4), h[8], h[9]);
            let ok_depth = match colour {
                0 => matches!(depth, 1 | 2 | 4 | 8 | 16),
                3 => matches!(depth, 1 | 2 | 4 | 8),
                2 | 4 | 6 => matches!(depth, 8 | 16),
                _ => false,
            };
            if w == 0 || ht == 0 || !ok_depth || h[10] != 0 || h[11] != 0 || h[12] > 1 {
                return Some(Verdict::new(Validation::Invalid, "impossible IHDR fields"));
            }
        }
        Some(Verdict::valid())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(ty: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut c = (data.len() as u32).to_be_bytes().to_vec();
        c.extend_from_slice(ty);
        c.extend_from_slice(data);
        let mut h = crc32fast::Hasher::new();
        h.update(ty);
        h.update(data);
        c.extend_from_slice(&h.finalize().to_be_bytes());
        c
    }

    fn head(width: u32, height: u32) -> Vec<u8> {
        let mut ihdr = width.to_be_bytes().to_vec();
        ihdr.extend_from_slice(&height.to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
        let mut png = SIGNATURE.to_vec();
        png.extend(chunk(b"IHDR", &ihdr));
        png
    }

    #[test]
    fn a_whole_png_ends_after_iend() {
        let mut png = head(4, 4);
        png.extend(chunk(b"IDAT", &[0u8; 100]));
        png.extend(chunk(b"IEND", b""));
        let mut d = PngDelimiter::new();
        match d.feed(&png) {
            Step::End { len, verdict } => {
                assert_eq!(len, png.len() as u64);
                assert_eq!(verdict.validation, Validation::Valid);
            }
            _ => panic!("a whole PNG must end"),
        }
    }

    /// Text over the rest of a PNG reads as a chunk of four letters and a
    /// huge length: the item ends there as invalid instead of running on.
    #[test]
    fn text_after_ihdr_ends_the_item_at_the_implausible_chunk() {
        let mut png = head(640, 480);
        png.extend(chunk(b"IDAT", &[0u8; 100]));
        let at = png.len() as u64;
        png.extend_from_slice(b"the quick brown fox jumps over the lazy dog");
        let mut d = PngDelimiter::new();
        match d.feed(&png) {
            Step::End { len, verdict } => {
                assert_eq!(len, at);
                assert_eq!(verdict.validation, Validation::Invalid);
            }
            _ => panic!("an implausible chunk length must end the item"),
        }
        // A big image may have a big chunk: 8000x8000 RGB allows ~192 MB.
        assert!(chunk_bound(&head(8000, 8000)[16..29]) > 190_000_000);
        assert_eq!(chunk_bound(&head(16, 16)[16..29]), PLAUSIBLE_CHUNK);
    }
}
