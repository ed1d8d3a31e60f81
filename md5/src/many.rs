//! MD5 of many messages at once: [`Lanes`].
//!
//! Why: one MD5 is a single dependency chain (see `avx512`), so a core
//! hashes one message at ~600 MiB/s however wide its registers are. The
//! chains of different messages are independent, so sixteen of them fit
//! the sixteen 32-bit lanes of an AVX-512 register and run the same
//! four-instruction steps side by side: a core hashes a stream of small
//! files (carved items) several times faster than one message at a time.
//!
//! [`Lanes`] keeps sixteen messages in flight and refills a lane as soon
//! as its message ends, so lanes stay busy when lengths differ. It only
//! computes once every lane is taken (or when it holds more bytes than
//! its caller allows, or at [`Lanes::finish`]), and hands back digests as
//! messages end, with the caller's tag. Without AVX-512 every message is
//! hashed on its own as it arrives, with the crate's best backend.

use crate::INIT;

/// Messages hashed side by side.
pub const LANES: usize = 16;

/// A message in a lane: its whole 64-byte blocks, then its padded tail.
struct Slot<T> {
    tag: T,
    message: Vec<u8>,
    /// The last partial block with the RFC 1321 padding: one or two blocks.
    tail: [[u8; 64]; 2],
    tail_blocks: usize,
    /// Blocks of the message compressed so far (whole blocks, then tail).
    done: usize,
}

impl<T> Slot<T> {
    fn new(tag: T, message: Vec<u8>) -> Self {
        let whole = message.len() / 64 * 64;
        let rest = &message[whole..];
        let mut tail = [[0u8; 64]; 2];
        let bytes = tail.as_flattened_mut();
        bytes[..rest.len()].copy_from_slice(rest);
        bytes[rest.len()] = 0x80;
        // The 8-byte length must fit after the 0x80 marker in this block,
        // else padding spills into a second one.
        let tail_blocks = if rest.len() < 56 { 1 } else { 2 };
        let bits = (message.len() as u64).wrapping_mul(8);
        bytes[tail_blocks * 64 - 8..tail_blocks * 64].copy_from_slice(&bits.to_le_bytes());
        Slot {
            tag,
            message,
            tail,
            tail_blocks,
            done: 0,
        }
    }

    fn whole(&self) -> usize {
        self.message.len() / 64
    }

    /// The blocks left in the current part (whole blocks or tail).
    fn part(&self) -> &[[u8; 64]] {
        let whole = self.whole();
        if self.done < whole {
            &self.message.as_chunks::<64>().0[self.done..]
        } else {
            &self.tail[self.done - whole..self.tail_blocks]
        }
    }

    fn finished(&self) -> bool {
        self.done == self.whole() + self.tail_blocks
    }
}

/// Chaining states of the sixteen lanes: `a`, `b`, `c`, `d` rows, one
/// column per lane.
type States = [[u32; LANES]; 4];

/// Sixteen MD5s in flight; see the module documentation.
pub struct Lanes<T> {
    slots: [Option<Slot<T>>; LANES],
    states: Box<States>,
    /// Bytes of the messages held.
    held: usize,
    /// Compute once more than this many bytes are held.
    max_held: usize,
    wide: bool,
    /// Buffers of hashed messages, emptied, for [`Lanes::buffer`]; their
    /// capacity is at most `max_held` in all.
    pool: Vec<Vec<u8>>,
    pooled: usize,
}

impl<T> std::fmt::Debug for Lanes<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("messages", &self.slots.iter().flatten().count())
            .field("held", &self.held)
            .field("wide", &self.wide)
            .finish()
    }
}

impl<T> Lanes<T> {
    /// Lanes that compute early rather than hold more than `max_held`
    /// bytes of messages (the caller's memory bound; the longest message
    /// pushed is held whatever the bound).
    pub fn new(max_held: usize) -> Self {
        Lanes {
            slots: Default::default(),
            states: Box::new([[0; LANES]; 4]),
            held: 0,
            max_held,
            wide: wide(),
            pool: Vec::new(),
            pooled: 0,
        }
    }

    /// An empty buffer to build the next message in: one of an earlier
    /// message when there is one, so that a caller building messages
    /// piece by piece does not grow (and copy) a new buffer each time.
    pub fn buffer(&mut self) -> Vec<u8> {
        let b = self.pool.pop().unwrap_or_default();
        self.pooled -= b.capacity();
        b
    }

    fn recycle(&mut self, mut message: Vec<u8>) {
        if self.pooled + message.capacity() <= self.max_held && self.pool.len() < 2 * LANES {
            message.clear();
            self.pooled += message.capacity();
            self.pool.push(message);
        }
    }

    /// Add a message; returns the tags and digests of the messages that
    /// ended meanwhile (any earlier ones, in no particular order).
    pub fn push(&mut self, tag: T, message: Vec<u8>) -> Vec<(T, [u8; 16])> {
        if !self.wide {
            let digest = one(&message);
            self.recycle(message);
            return vec![(tag, digest)];
        }
        let mut out = Vec::new();
        // Compute until a lane is free and the bound allows one more.
        while self.slots.iter().all(Option::is_some)
            || (self.held > 0 && self.held + message.len() > self.max_held)
        {
            self.run(&mut out);
        }
        let Some(lane) = self.slots.iter().position(Option::is_none) else {
            unreachable!("run() frees at least one lane");
        };
        for (row, init) in self.states.iter_mut().zip(INIT) {
            row[lane] = init;
        }
        self.held += message.len();
        self.slots[lane] = Some(Slot::new(tag, message));
        self.collect(&mut out);
        out
    }

    /// Hash every message held; returns their tags and digests.
    pub fn finish(&mut self) -> Vec<(T, [u8; 16])> {
        let mut out = Vec::new();
        while self.slots.iter().any(Option::is_some) {
            self.run(&mut out);
        }
        out
    }

    /// Compress until at least one message ends, and hand it back.
    fn run(&mut self, out: &mut Vec<(T, [u8; 16])>) {
        let count = self
            .slots
            .iter()
            .flatten()
            .map(|s| s.part().len())
            .min()
            .unwrap_or(0);
        if count > 0 {
            let parts: [&[[u8; 64]]; LANES] = std::array::from_fn(|l| match &self.slots[l] {
                Some(s) => &s.part()[..count],
                None => &[],
            });
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `wide` is set only when the CPU has AVX-512 F.
            unsafe {
                avx512::rounds(&mut self.states, &parts, count);
            }
            #[cfg(not(target_arch = "x86_64"))]
            for (l, part) in parts.iter().enumerate() {
                let mut st = [0u32; 4];
                for (s, row) in st.iter_mut().zip(self.states.iter()) {
                    *s = row[l];
                }
                crate::compress(&mut st, part);
                for (s, row) in st.iter().zip(self.states.iter_mut()) {
                    row[l] = *s;
                }
            }
            for s in self.slots.iter_mut().flatten() {
                s.done += count;
            }
        }
        self.collect(out);
    }

    /// Hand back the messages that ended and free their lanes.
    fn collect(&mut self, out: &mut Vec<(T, [u8; 16])>) {
        for lane in 0..LANES {
            if self.slots[lane].as_ref().is_some_and(Slot::finished)
                && let Some(slot) = self.slots[lane].take()
            {
                let mut digest = [0u8; 16];
                for (chunk, row) in digest.chunks_exact_mut(4).zip(self.states.iter()) {
                    chunk.copy_from_slice(&row[lane].to_le_bytes());
                }
                self.held -= slot.message.len();
                out.push((slot.tag, digest));
                self.recycle(slot.message);
            }
        }
    }
}

/// One message with the crate's best single-message backend.
fn one(message: &[u8]) -> [u8; 16] {
    use digest::Digest;
    crate::Md5::digest(message).into()
}

/// Whether this CPU runs the sixteen-lane code.
fn wide() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    #![allow(unsafe_op_in_unsafe_fn)]

    use super::{LANES, States};
    use crate::avx512::K;
    use core::arch::x86_64::*;

    /// Sixteen blocks side by side, one per lane, 64-byte aligned so each
    /// copy in is one store.
    #[repr(C, align(64))]
    struct Blocks([[u8; 64]; LANES]);

    /// Compress `count` blocks of each lane's `parts` (an empty part is an
    /// idle lane: its state changes and is never read).
    ///
    /// # Safety
    /// The CPU must support AVX-512 F.
    #[target_feature(enable = "avx512f")]
    #[rustfmt::skip]
    pub(super) unsafe fn rounds(states: &mut States, parts: &[&[[u8; 64]]; LANES], count: usize) {
        let load = |row: &[u32; LANES]| _mm512_loadu_si512(row.as_ptr().cast());
        let (mut a, mut b, mut c, mut d) =
            (load(&states[0]), load(&states[1]), load(&states[2]), load(&states[3]));
        let mut blocks = Blocks([[0; 64]; LANES]);
        // Word j of lane l is at byte 64 l + 4 j of `blocks`.
        let lane_offsets = _mm512_setr_epi32(0, 64, 128, 192, 256, 320, 384, 448,
            512, 576, 640, 704, 768, 832, 896, 960);
        for i in 0..count {
            for (dst, part) in blocks.0.iter_mut().zip(parts) {
                if let Some(src) = part.get(i) {
                    *dst = *src;
                }
            }
            let base: *const u8 = blocks.0.as_ptr().cast();
            let m: [__m512i; 16] = core::array::from_fn(|j| {
                let offsets = _mm512_add_epi32(lane_offsets, _mm512_set1_epi32(4 * j as i32));
                _mm512_i32gather_epi32::<1>(offsets, base.cast())
            });
            let (aa, bb, cc, dd) = (a, b, c, d);
            // The steps of `avx512::compress`, on sixteen lanes.
            macro_rules! step {
                ($imm:literal, $a:ident, $b:ident, $c:ident, $d:ident, $i:literal, $g:literal, $s:literal) => {
                    let t = _mm512_add_epi32($a, _mm512_add_epi32(m[$g], _mm512_set1_epi32(K[$i] as i32)));
                    let f = _mm512_ternarylogic_epi32::<$imm>($b, $c, $d);
                    $a = _mm512_add_epi32(_mm512_rol_epi32::<$s>(_mm512_add_epi32(t, f)), $b);
                };
            }
            crate::md5_steps!(step, a, b, c, d);
            a = _mm512_add_epi32(a, aa); b = _mm512_add_epi32(b, bb); c = _mm512_add_epi32(c, cc); d = _mm512_add_epi32(d, dd);
        }
        for (row, v) in states.iter_mut().zip([a, b, c, d]) {
            _mm512_storeu_si512(row.as_mut_ptr().cast(), v);
        }
    }
}
