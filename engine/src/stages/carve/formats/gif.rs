//! GIF: header, logical screen descriptor, colour table, then blocks
//! (extensions and images as chains of length-prefixed sub-blocks) up to
//! the trailer byte. The delimiter follows the blocks; the verifier decodes
//! each image's LZW code stream and checks it yields exactly the image's
//! pixels, which data from elsewhere after a fragment boundary does not.

use super::{Cut, Delimiter, Gather, Step, Validation, Verdict, Verifier, le16};

/// The format's row in [`super::FORMATS`].
pub const SPEC: super::FormatSpec = super::FormatSpec {
    name: "gif",
    extension: "gif",
    headers: &[
        super::Header::exact(b"GIF87a"),
        super::Header::exact(b"GIF89a"),
    ],
    max_size: 64 << 20,
    ends_at_own_header: true,
    identified_as: &["gif"],
    delimiter: || Box::new(GifDelimiter::new()),
    verifier: Some(|| Box::new(GifVerifier::new())),
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Header,
    /// Global colour table bytes to skip.
    Table(u32),
    Introducer,
    ExtLabel,
    ImageDescriptor,
    /// A local colour table to skip, then the LZW minimum code size.
    LocalTable(u32),
    CodeSize,
    /// At a sub-block length byte (`image` when the blocks hold LZW data).
    SubLen {
        image: bool,
    },
    SubData {
        left: u8,
        image: bool,
    },
    Done,
}

/// Events for the verifier.
enum Event<'a> {
    /// An image starts: width, height, LZW minimum code size.
    Image(u16, u16, u8),
    /// LZW data bytes of the current image.
    Data(&'a [u8]),
    /// The current image's data ended.
    ImageEnd,
}

#[derive(Debug)]
struct Walker {
    state: State,
    gather: Gather,
    pos: u64,
    images: u32,
    blocks: u32,
    image_size: (u16, u16),
    /// The first block began as a GIF block does: an extension with a
    /// defined label or an image with a valid code size.
    known_block: bool,
}

impl Walker {
    fn new() -> Self {
        let mut gather = Gather::default();
        gather.start(13);
        Walker {
            state: State::Header,
            gather,
            pos: 0,
            images: 0,
            blocks: 0,
            image_size: (0, 0),
            known_block: false,
        }
    }

    fn table_len(packed: u8) -> u32 {
        if packed & 0x80 != 0 {
            3 << ((packed & 7) + 1)
        } else {
            0
        }
    }

    /// Advance; `Ok(Some(len))` at the trailer.
    fn feed(
        &mut self,
        data: &[u8],
        on: &mut dyn FnMut(Event<'_>),
    ) -> Result<Option<u64>, (u64, String)> {
        let mut i = 0usize;
        while i < data.len() {
            let at = self.pos + i as u64;
            match self.state {
                State::Done => break,
                State::Header => {
                    if let Some(b) = self.gather.fill(data, &mut i) {
                        if !(b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a")) {
                            return Err((0, "not a GIF header".into()));
                        }
                        if le16(b, 6) == 0 || le16(b, 8) == 0 {
                            return Err((6, "zero logical screen size".into()));
                        }
                        self.state = State::Table(Self::table_len(b[10]));
                    }
                }
                State::Table(left) | State::LocalTable(left) => {
                    let take = (left as usize).min(data.len() - i);
                    i += take;
                    let left = left - take as u32;
                    self.state = match (self.state, left) {
                        (State::Table(_), 0) => State::Introducer,
                        (State::Table(_), l) => State::Table(l),
                        (_, 0) => State::CodeSize,
                        (_, l) => State::LocalTable(l),
                    };
                }
                State::Introducer => {
                    let b = data[i];
                    i += 1;
                    match b {
                        0x21 => self.state = State::ExtLabel,
                        0x2C => {
                            self.gather.start(9);
                            self.state = State::ImageDescriptor;
                        }
                        0x3B => {
                            if self.images == 0 {
                                return Err((at, "trailer before any image".into()));
                            }
                            self.state = State::Done;
                            self.pos += i as u64;
                            return Ok(Some(self.pos));
                        }
                        _ => return Err((at, format!("block introducer 0x{b:02X}"))),
                    }
                }
                State::ExtLabel => {
                    // Graphic control, comment, plain text, application.
                    if matches!(data[i], 0xF9 | 0xFE | 0x01 | 0xFF) {
                        self.known_block = true;
                    }
                    i += 1;
                    self.state = State::SubLen { image: false };
                }
                State::ImageDescriptor => {
                    if let Some(b) = self.gather.fill(data, &mut i) {
                        let (w, h) = (le16(b, 4), le16(b, 6));
                        if w == 0 || h == 0 {
                            return Err((at, "zero image size".into()));
                        }
                        self.image_size = (w, h);
                        self.state = State::LocalTable(Self::table_len(b[8]));
                    }
                }
                State::CodeSize => {
                    let c = data[i];
                    i += 1;
                    if !(2..=11).contains(&c) {
                        return Err((at, format!("LZW minimum code size {c}")));
                    }
                    self.known_block = true;
                    on(Event::Image(self.image_size.0, self.image_size.1, c));
                    self.images += 1;
                    self.state = State::SubLen { image: true };
                }
                State::SubLen { image } => {
                    let n = data[i];
                    i += 1;
                    if n == 0 {
                        if image {
                            on(Event::ImageEnd);
                        }
                        self.blocks += 1;
                        self.state = State::Introducer;
                    } else {
                        self.state = State::SubData { left: n, image };
                    }
                }
                State::SubData { left, image } => {
                    let take = usize::from(left).min(data.len() - i);
                    if image {
                        on(Event::Data(&data[i..i + take]));
                    }
                    i += take;
                    let left = left - take as u8;
                    self.state = if left == 0 {
                        State::SubLen { image }
                    } else {
                        State::SubData { left, image }
                    };
                }
            }
        }
        self.pos += i as u64;
        Ok(None)
    }
}

/// The GIF delimiter.
#[derive(Debug)]
pub struct GifDelimiter {
    walker: Walker,
}

impl GifDelimiter {
    /// A delimiter for an item starting at `GIF87a`/`GIF89a`.
    pub fn new() -> Self {
        GifDelimiter {
            walker: Walker::new(),
        }
    }
}

impl Default for GifDelimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl Delimiter for GifDelimiter {
    fn feed(&mut self, data: &[u8]) -> Step {
        let walked = self.walker.feed(data, &mut |_| {});
        Step::from_walk(walked, self.accepted())
    }

    fn finish(&mut self, cut: Cut, fed: u64) -> Step {
        let why = match cut {
            Cut::RangeEnd => "the scanned range ends before the trailer",
            Cut::MaxSize => "no trailer within the maximum size",
            Cut::NextHeader => "another GIF header begins before the trailer",
        };
        Step::cut_short(self.accepted(), fed, why)
    }

    fn accepted(&self) -> bool {
        // The header, screen descriptor and colour table led to a block
        // that starts as GIF blocks do (text that merely says `GIF89a`
        // fails at the introducer or label). Waiting for the first block
        // to end would not do: a comment can run for hundreds of KiB.
        self.walker.known_block || self.walker.blocks >= 1 || self.walker.state == State::Done
    }
}

/// LZW decoding state of one image: only code validity and the count of
/// pixels produced are tracked (no dictionary strings are built; each
/// entry's length is enough).
struct Lzw {
    min_size: u8,
    size: u32,
    next: u32,
    prev: Option<u32>,
    /// Length of each dictionary entry's string.
    lengths: Vec<u32>,
    acc: u32,
    nbits: u32,
    pixels: u64,
    expected: u64,
    ended: bool,
}

impl Lzw {
    fn new(width: u16, height: u16, min_size: u8) -> Self {
        let mut l = Lzw {
            min_size,
            size: 0,
            next: 0,
            prev: None,
            lengths: vec![1; 4096],
            acc: 0,
            nbits: 0,
            pixels: 0,
            expected: u64::from(width) * u64::from(height),
            ended: false,
        };
        l.reset();
        l
    }

    fn clear_code(&self) -> u32 {
        1 << self.min_size
    }

    fn reset(&mut self) {
        self.size = u32::from(self.min_size) + 1;
        self.next = self.clear_code() + 2;
        self.prev = None;
    }

    fn data(&mut self, bytes: &[u8]) -> Result<(), String> {
        for &b in bytes {
            if self.ended {
                // Bytes after the end code are tolerated padding.
                continue;
            }
            self.acc |= u32::from(b) << self.nbits;
            self.nbits += 8;
            while self.nbits >= self.size && !self.ended {
                let code = self.acc & ((1 << self.size) - 1);
                self.acc >>= self.size;
                self.nbits -= self.size;
                self.code(code)?;
            }
        }
        Ok(())
    }

    fn code(&mut self, code: u32) -> Result<(), String> {
        let clear = self.clear_code();
        if code == clear {
            self.reset();
            return Ok(());
        }
        if code == clear + 1 {
            self.ended = true;
            return Ok(());
        }
        let len = match self.prev {
            None => {
                if code >= clear {
                    return Err(format!("LZW code {code} before any literal"));
                }
                1
            }
            Some(prev) => {
                let plen = self.lengths[prev as usize];
                let len = if code < self.next {
                    self.lengths[code as usize]
                } else if code == self.next {
                    plen + 1
                } else {
                    return Err(format!("LZW code {code} beyond the table ({})", self.next));
                };
                if self.next < 4096 {
                    self.lengths[self.next as usize] = plen + 1;
                    self.next += 1;
                    if self.next == (1 << self.size) && self.size < 12 {
                        self.size += 1;
                    }
                }
                len
            }
        };
        self.pixels += u64::from(len);
        self.prev = Some(code);
        if self.pixels > self.expected {
            return Err(format!(
                "image data holds more than its {} pixels",
                self.expected
            ));
        }
        Ok(())
    }
}

/// The GIF verifier: decodes every image's LZW stream.
pub struct GifVerifier {
    walker: Walker,
    lzw: Option<Lzw>,
    problem: Option<String>,
}

impl GifVerifier {
    /// A verifier for one item.
    pub fn new() -> Self {
        GifVerifier {
            walker: Walker::new(),
            lzw: None,
            problem: None,
        }
    }
}

impl Default for GifVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Verifier for GifVerifier {
    fn update(&mut self, data: &[u8]) {
        if self.problem.is_some() || self.walker.state == State::Done {
            return;
        }
        let (lzw, problem) = (&mut self.lzw, &mut self.problem);
        let mut on = |e: Event<'_>| match e {
            Event::Image(w, h, c) => *lzw = Some(Lzw::new(w, h, c)),
            Event::Data(b) => {
                if let Some(l) = lzw.as_mut()
                    && let Err(e) = l.data(b)
                {
                    problem.get_or_insert(e);
                }
            }
            Event::ImageEnd => {
                if let Some(l) = lzw.take()
                    && l.pixels < l.expected
                {
                    problem.get_or_insert(format!(
                        "image data holds {} of its {} pixels",
                        l.pixels, l.expected
                    ));
                }
            }
        };
        if self.walker.feed(data, &mut on).is_err() {
            // Structure errors are the delimiter's to report.
            self.walker.state = State::Done;
            self.lzw = None;
        }
    }

    fn finish(self: Box<Self>, _len: u64) -> Option<Verdict> {
        if let Some(p) = self.problem {
            return Some(Verdict::new(Validation::Invalid, p));
        }
        (self.walker.state == State::Done && self.walker.images > 0).then(Verdict::valid)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{end_of, verify};
    use super::*;

    /// A 2x2 GIF with a 2-colour table, from a real encoder (the `gif`
    /// crate used by the corpus generator writes the same structure).
    fn tiny_gif() -> Vec<u8> {
        let mut g = b"GIF89a\x02\x00\x02\x00\x80\x00\x00".to_vec();
        g.extend_from_slice(&[0, 0, 0, 255, 255, 255]);
        // Comment extension.
        g.extend_from_slice(b"\x21\xFE\x03abc\x00");
        // Image descriptor 2x2, no local table.
        g.extend_from_slice(&[0x2C, 0, 0, 0, 0, 2, 0, 2, 0, 0]);
        // LZW min size 2: clear(4) 0 1 0 1 end(5) as 3-bit codes.
        // codes: 4,0,1,0,1,5 -> bits LSB first (3 bits each, code size
        // grows to 4 bits when next reaches 8; it stays 3 here: next goes
        // 6,7,8 after 3 codes -> size 4 for the 4th code onwards).
        g.push(2);
        let codes: [(u32, u32); 6] = [(4, 3), (0, 3), (1, 3), (0, 3), (1, 4), (5, 4)];
        let (mut acc, mut n, mut bytes) = (0u32, 0u32, Vec::new());
        for (c, s) in codes {
            acc |= c << n;
            n += s;
            while n >= 8 {
                bytes.push(acc as u8);
                acc >>= 8;
                n -= 8;
            }
        }
        if n > 0 {
            bytes.push(acc as u8);
        }
        g.push(bytes.len() as u8);
        g.extend_from_slice(&bytes);
        g.push(0);
        g.push(0x3B);
        g
    }

    #[test]
    fn a_long_comment_first_does_not_delay_acceptance() {
        let g = tiny_gif();
        let at = g.windows(2).position(|w| w == b"\x21\xFE").unwrap();
        let mut data = g[..at].to_vec();
        data.extend_from_slice(b"\x21\xFE");
        for _ in 0..800 {
            data.push(255);
            data.extend(std::iter::repeat_n(b'c', 255));
        }
        data.push(0);
        let tail = at + 2 + 5;
        data.extend_from_slice(&g[tail..]);
        let mut d = GifDelimiter::new();
        assert_eq!(d.feed(&data[..at + 3]), Step::More);
        assert!(d.accepted());
        let (len, v) = end_of(&mut GifDelimiter::new(), &data, 1000);
        assert_eq!((len, v), (data.len() as u64, Validation::Valid));
        // Text naming the format is not a GIF.
        let mut d = GifDelimiter::new();
        let text = b"GIF89a images are smaller! they say";
        assert!(!matches!(d.feed(text), Step::More) || !d.accepted());
    }

    #[test]
    fn blocks_are_followed_to_the_trailer() {
        let g = tiny_gif();
        let mut data = g.clone();
        data.extend_from_slice(b"\x3B\x3Bafter");
        for chunk in [1, 2, 5, 100] {
            let (len, v) = end_of(&mut GifDelimiter::new(), &data, chunk);
            assert_eq!(
                (len, v),
                (g.len() as u64, Validation::Valid),
                "chunk {chunk}"
            );
            assert_eq!(
                verify(Box::new(GifVerifier::new()), &g, chunk),
                Some(Verdict::valid())
            );
        }
    }

    #[test]
    fn garbage_is_rejected_or_invalid() {
        let mut d = GifDelimiter::new();
        assert_eq!(d.feed(b"GIF89a\x00\x00\x01\x00\x00\x00\x00"), Step::Reject);
        let g = tiny_gif();
        let mut bad = g[..g.len() - 1].to_vec();
        bad.push(0x77);
        let (_, v) = end_of(&mut GifDelimiter::new(), &bad, 3);
        assert_eq!(v, Validation::Invalid);
        // Corrupt LZW data: a code beyond the table.
        let mut lzw = g.clone();
        let at = lzw.len() - 4;
        lzw[at] = 0xFF;
        let v = verify(Box::new(GifVerifier::new()), &lzw, 7).unwrap();
        assert_eq!(v.validation, Validation::Invalid, "{v:?}");
    }
}
