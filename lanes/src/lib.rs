//! MD5 and SHA-1 of many messages at once: [`Lanes`].
//!
//! Why: one MD5 is a single dependency chain (see `caseload-digests`), so a
//! core hashes one message at ~600 MiB/s however wide its registers are;
//! SHA-1 with the SHA extensions manages ~1.1 GiB/s. The chains of
//! different messages are independent, so sixteen of them fit the sixteen
//! 32-bit lanes of an AVX-512 register and run the same steps side by
//! side: a core hashes a stream of small files (carved items) several
//! times faster than one message at a time. Both digests are computed in
//! one pass over each block.
//!
//! [`Lanes`] keeps sixteen messages in flight and refills a lane as soon
//! as its message ends, so lanes stay busy when lengths differ. It only
//! computes once every lane is taken (or when it holds more bytes than
//! its caller allows, or at [`Lanes::finish`]), and hands back digests as
//! messages end, with the caller's tag.
//!
//! Whether the lanes win is measured, not assumed, separately for MD5 and
//! SHA-1 ([`kernels`]): sixteen lanes against one message at a time with
//! the MD5 and SHA-1 `caseload-digests` chose, on sixteen 4 KiB messages
//! at first use. (SHA-1 one at a time on the SHA extensions can beat
//! sixteen SHA-1 lanes; on a CPU whose AVX-512 is split into halves the
//! MD5 lanes may lose.) A digest the lanes do not compute is computed one
//! message at a time as the message arrives; without AVX-512 (F and BW)
//! every message is. `CASELOAD_KERNEL_MD5_LANES` and
//! `CASELOAD_KERNEL_SHA1_LANES` (`avx512-16` or `one-by-one`) force a
//! choice.

use caseload_digests::Digest as _;
use caseload_digests::select::{self, Candidate, How, KernelChoice};
use std::sync::OnceLock;
use std::time::Duration;

/// Messages hashed side by side.
pub const LANES: usize = 16;

/// The digests of one message (those asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digests {
    /// MD5.
    pub md5: Option<[u8; 16]>,
    /// SHA-1.
    pub sha1: Option<[u8; 20]>,
}

use caseload_digests::{INIT as MD5_INIT, SHA1_INIT};

/// A message in a lane: its whole 64-byte blocks, then its padded tail.
struct Slot<T> {
    tag: T,
    message: Vec<u8>,
    /// The last partial block with the padding, one or two blocks: as MD5
    /// pads (little-endian length) and as SHA-1 pads (big-endian length).
    md5_tail: [[u8; 64]; 2],
    sha1_tail: [[u8; 64]; 2],
    tail_blocks: usize,
    /// Blocks of the message compressed so far (whole blocks, then tail).
    done: usize,
    /// The digests not computed in the lanes, computed on arrival.
    single: Digests,
}

impl<T> Slot<T> {
    fn new(tag: T, message: Vec<u8>, single: Digests) -> Self {
        let whole = message.len() / 64 * 64;
        let rest = &message[whole..];
        let mut md5_tail = [[0u8; 64]; 2];
        let bytes = md5_tail.as_flattened_mut();
        bytes[..rest.len()].copy_from_slice(rest);
        bytes[rest.len()] = 0x80;
        // The 8-byte length must fit after the 0x80 marker in this block,
        // else padding spills into a second one.
        let tail_blocks = if rest.len() < 56 { 1 } else { 2 };
        let end = tail_blocks * 64;
        let bits = (message.len() as u64).wrapping_mul(8);
        let mut sha1_tail = md5_tail;
        md5_tail.as_flattened_mut()[end - 8..end].copy_from_slice(&bits.to_le_bytes());
        sha1_tail.as_flattened_mut()[end - 8..end].copy_from_slice(&bits.to_be_bytes());
        Slot {
            tag,
            message,
            md5_tail,
            sha1_tail,
            tail_blocks,
            done: 0,
            single,
        }
    }

    fn whole(&self) -> usize {
        self.message.len() / 64
    }

    /// The blocks left in the current part (whole blocks, or the tail as
    /// MD5 and as SHA-1 pad it).
    fn part(&self) -> Part<'_> {
        let whole = self.whole();
        if self.done < whole {
            let blocks = &self.message.as_chunks::<64>().0[self.done..];
            (blocks, blocks)
        } else {
            let range = self.done - whole..self.tail_blocks;
            (&self.md5_tail[range.clone()], &self.sha1_tail[range])
        }
    }

    fn finished(&self) -> bool {
        self.done == self.whole() + self.tail_blocks
    }
}

/// A lane's next blocks as MD5 and as SHA-1 see them (the same blocks,
/// but for the length field of a tail).
type Part<'a> = (&'a [[u8; 64]], &'a [[u8; 64]]);

/// Chaining states of the sixteen lanes, one row per state word, one
/// column per lane.
#[derive(Clone, Copy)]
struct States {
    md5: [[u32; LANES]; 4],
    sha1: [[u32; LANES]; 5],
}

/// Sixteen messages in flight; see the crate documentation.
pub struct Lanes<T> {
    slots: [Option<Slot<T>>; LANES],
    states: Box<States>,
    want_md5: bool,
    want_sha1: bool,
    /// Which of the wanted digests the lanes compute.
    lane_md5: bool,
    lane_sha1: bool,
    /// Bytes of the messages held.
    held: usize,
    /// Compute once more than this many bytes are held.
    max_held: usize,
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
            .field("lane_md5", &self.lane_md5)
            .field("lane_sha1", &self.lane_sha1)
            .finish()
    }
}

impl<T> Lanes<T> {
    /// Lanes computing MD5 and/or SHA-1 that compute early rather than
    /// hold more than `max_held` bytes of messages (the caller's memory
    /// bound; the longest message pushed is held whatever the bound).
    pub fn new(max_held: usize, md5: bool, sha1: bool) -> Self {
        let choice = choice();
        Self::with_lanes(max_held, md5, sha1, choice.md5, choice.sha1)
    }

    /// As [`Lanes::new`], with the lanes computing MD5 and SHA-1 as told
    /// (where the CPU runs them) instead of as measured: for tests that
    /// hold every combination to the reference.
    #[doc(hidden)]
    pub fn with_lanes(
        max_held: usize,
        md5: bool,
        sha1: bool,
        lane_md5: bool,
        lane_sha1: bool,
    ) -> Self {
        let wide = wide();
        Lanes {
            slots: Default::default(),
            states: Box::new(States {
                md5: [[0; LANES]; 4],
                sha1: [[0; LANES]; 5],
            }),
            want_md5: md5,
            want_sha1: sha1,
            lane_md5: md5 && lane_md5 && wide,
            lane_sha1: sha1 && lane_sha1 && wide,
            held: 0,
            max_held,
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
    pub fn push(&mut self, tag: T, message: Vec<u8>) -> Vec<(T, Digests)> {
        let single = Digests {
            md5: (self.want_md5 && !self.lane_md5)
                .then(|| caseload_digests::Md5::digest(&message).into()),
            sha1: (self.want_sha1 && !self.lane_sha1)
                .then(|| caseload_digests::Sha1::digest(&message).into()),
        };
        if !self.lane_md5 && !self.lane_sha1 {
            self.recycle(message);
            return vec![(tag, single)];
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
        for (row, init) in self.states.md5.iter_mut().zip(MD5_INIT) {
            row[lane] = init;
        }
        for (row, init) in self.states.sha1.iter_mut().zip(SHA1_INIT) {
            row[lane] = init;
        }
        self.held += message.len();
        self.slots[lane] = Some(Slot::new(tag, message, single));
        self.collect(&mut out);
        out
    }

    /// Hash every message held; returns their tags and digests.
    pub fn finish(&mut self) -> Vec<(T, Digests)> {
        let mut out = Vec::new();
        while self.slots.iter().any(Option::is_some) {
            self.run(&mut out);
        }
        out
    }

    /// Compress until at least one message ends, and hand it back.
    fn run(&mut self, out: &mut Vec<(T, Digests)>) {
        let count = self
            .slots
            .iter()
            .flatten()
            .map(|s| s.part().0.len())
            .min()
            .unwrap_or(0);
        if count > 0 {
            let mut parts: [Part<'_>; LANES] = [(&[], &[]); LANES];
            for (p, slot) in parts.iter_mut().zip(&self.slots) {
                if let Some(s) = slot {
                    let (m, h) = s.part();
                    *p = (&m[..count], &h[..count]);
                }
            }
            #[cfg(target_arch = "x86_64")]
            // SAFETY: nothing is held unless a digest is computed in the
            // lanes, which `with_lanes` allows only where `wide()`: the
            // CPU has AVX-512 F and BW.
            unsafe {
                avx512::rounds(
                    &mut self.states,
                    &parts,
                    count,
                    self.lane_md5,
                    self.lane_sha1,
                );
            }
            for s in self.slots.iter_mut().flatten() {
                s.done += count;
            }
        }
        self.collect(out);
    }

    /// Hand back the messages that ended and free their lanes.
    fn collect(&mut self, out: &mut Vec<(T, Digests)>) {
        for lane in 0..LANES {
            if self.slots[lane].as_ref().is_some_and(Slot::finished)
                && let Some(slot) = self.slots[lane].take()
            {
                let mut md5 = [0u8; 16];
                for (chunk, row) in md5.chunks_exact_mut(4).zip(&self.states.md5) {
                    chunk.copy_from_slice(&row[lane].to_le_bytes());
                }
                let mut sha1 = [0u8; 20];
                for (chunk, row) in sha1.chunks_exact_mut(4).zip(&self.states.sha1) {
                    chunk.copy_from_slice(&row[lane].to_be_bytes());
                }
                let digests = Digests {
                    md5: if self.lane_md5 {
                        Some(md5)
                    } else {
                        slot.single.md5
                    },
                    sha1: if self.lane_sha1 {
                        Some(sha1)
                    } else {
                        slot.single.sha1
                    },
                };
                self.held -= slot.message.len();
                out.push((slot.tag, digests));
                self.recycle(slot.message);
            }
        }
    }
}

/// Which digests the lanes compute, as measured or forced.
struct Choice {
    md5: bool,
    sha1: bool,
    records: [KernelChoice; 2],
}

/// The names the environment variables take.
const LANES_NAME: &str = "avx512-16";
const SINGLE_NAME: &str = "one-by-one";

fn choice() -> &'static Choice {
    static CHOICE: OnceLock<Choice> = OnceLock::new();
    CHOICE.get_or_init(|| {
        let md5 = choose("md5-lanes", "CASELOAD_KERNEL_MD5_LANES", true, false);
        let sha1 = choose("sha1-lanes", "CASELOAD_KERNEL_SHA1_LANES", false, true);
        Choice {
            md5: md5.chosen == LANES_NAME,
            sha1: sha1.chosen == LANES_NAME,
            records: [md5, sha1],
        }
    })
}

/// Every choice of this crate (for run.json's `system.kernels`).
pub fn kernels() -> Vec<KernelChoice> {
    choice().records.to_vec()
}

/// Time sixteen 4 KiB messages through the lanes and one at a time, for
/// one digest, and choose.
fn choose(kernel: &str, env: &str, md5: bool, sha1: bool) -> KernelChoice {
    const MESSAGE: usize = 4096;
    let messages: Vec<Vec<u8>> = (0..LANES)
        .map(|i| select::noise(MESSAGE, 0x9e37_79b9_7f4a_7c15 ^ i as u64))
        .collect();
    let time = |lanes: bool| {
        let mut best = Duration::MAX;
        for _ in 0..5 {
            let mut l = Lanes::with_lanes(usize::MAX, md5, sha1, lanes, lanes);
            let batch = messages.clone();
            best = best.min(select::time(|| {
                for (tag, m) in batch.into_iter().enumerate() {
                    std::hint::black_box(l.push(tag, m));
                }
                std::hint::black_box(l.finish());
            }));
        }
        best
    };
    let mb_s = |d: Duration| {
        Some(((LANES * MESSAGE) as f64 / d.as_secs_f64().max(1e-9) / 1e6 * 10.0).round() / 10.0)
    };
    let single = time(false);
    let mut candidates = vec![
        Candidate {
            name: LANES_NAME.into(),
            available: wide(),
            mb_s: None,
            note: (!wide()).then(|| "this CPU lacks AVX-512 F+BW".into()),
        },
        Candidate {
            name: SINGLE_NAME.into(),
            available: true,
            mb_s: mb_s(single),
            note: None,
        },
    ];
    let mut chosen = SINGLE_NAME;
    let mut how = How::Only;
    if wide() {
        let lanes = time(true);
        candidates[0].mb_s = mb_s(lanes);
        how = How::Measured;
        if lanes < single {
            chosen = LANES_NAME;
        }
    }
    if let Some(forced) = select::forced(env)
        && let Some(c) = candidates.iter().find(|c| c.name == forced && c.available)
    {
        chosen = if c.name == LANES_NAME {
            LANES_NAME
        } else {
            SINGLE_NAME
        };
        how = How::Forced;
    }
    KernelChoice {
        kernel: kernel.into(),
        chosen: chosen.into(),
        how,
        candidates,
        env: Some(env.into()),
        note: Some("one-by-one runs the md5/sha1 kernel chosen for one message".into()),
    }
}

/// Whether this CPU runs the sixteen-lane code.
fn wide() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    #![allow(unsafe_op_in_unsafe_fn)]

    use super::{LANES, Part, States};
    use caseload_digests::{K, md5_steps};
    use core::arch::x86_64::*;

    /// Sixteen blocks side by side, one per lane, 64-byte aligned so each
    /// copy in is one store.
    #[repr(C, align(64))]
    struct Blocks([[u8; 64]; LANES]);

    impl Blocks {
        /// Copy block `i` of each lane's part in (idle lanes keep what
        /// they had: their states are never read).
        fn fill(&mut self, parts: impl Iterator<Item = Option<[u8; 64]>>) {
            for (dst, src) in self.0.iter_mut().zip(parts) {
                if let Some(src) = src {
                    *dst = src;
                }
            }
        }

        /// Word `j` of every lane (little-endian).
        #[target_feature(enable = "avx512f")]
        unsafe fn words(&self) -> [__m512i; 16] {
            // Word j of lane l is at byte 64 l + 4 j.
            let lanes = _mm512_setr_epi32(
                0, 64, 128, 192, 256, 320, 384, 448, 512, 576, 640, 704, 768, 832, 896, 960,
            );
            let base: *const i32 = self.0.as_ptr().cast();
            core::array::from_fn(|j| {
                let offsets = _mm512_add_epi32(lanes, _mm512_set1_epi32(4 * j as i32));
                _mm512_i32gather_epi32::<1>(offsets, base)
            })
        }
    }

    /// Compress `count` blocks of each lane's parts (MD5's view, SHA-1's
    /// view: they differ only in a tail's length field; an empty part is
    /// an idle lane).
    ///
    /// # Safety
    /// The CPU must support AVX-512 F and BW.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn rounds(
        states: &mut States,
        parts: &[Part<'_>; LANES],
        count: usize,
        md5: bool,
        sha1: bool,
    ) {
        let same = parts.iter().all(|(m, s)| std::ptr::eq(*m, *s));
        let mut blocks = Blocks([[0; 64]; LANES]);
        let mut sha1_blocks = Blocks([[0; 64]; LANES]);
        for i in 0..count {
            blocks.fill(parts.iter().map(|(m, _)| m.get(i).copied()));
            let words = blocks.words();
            if md5 {
                md5_block(&mut states.md5, &words);
            }
            if sha1 {
                if same {
                    sha1_block(&mut states.sha1, &words);
                } else {
                    sha1_blocks.fill(parts.iter().map(|(_, s)| s.get(i).copied()));
                    sha1_block(&mut states.sha1, &sha1_blocks.words());
                }
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn load<const N: usize>(rows: &[[u32; LANES]; N]) -> [__m512i; N] {
        core::array::from_fn(|r| _mm512_loadu_si512(rows[r].as_ptr().cast()))
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn store<const N: usize>(rows: &mut [[u32; LANES]; N], v: [__m512i; N]) {
        for (row, v) in rows.iter_mut().zip(v) {
            _mm512_storeu_si512(row.as_mut_ptr().cast(), v);
        }
    }

    /// One block of each lane into the MD5 states: the steps of
    /// `caseload-digests`'s one-message kernel, on sixteen lanes.
    #[target_feature(enable = "avx512f")]
    unsafe fn md5_block(state: &mut [[u32; LANES]; 4], m: &[__m512i; 16]) {
        let [mut a, mut b, mut c, mut d] = load(state);
        let (aa, bb, cc, dd) = (a, b, c, d);
        macro_rules! step {
            ($imm:literal, $a:ident, $b:ident, $c:ident, $d:ident, $i:literal, $g:literal, $s:literal) => {
                let t =
                    _mm512_add_epi32($a, _mm512_add_epi32(m[$g], _mm512_set1_epi32(K[$i] as i32)));
                let f = _mm512_ternarylogic_epi32::<$imm>($b, $c, $d);
                $a = _mm512_add_epi32(_mm512_rol_epi32::<$s>(_mm512_add_epi32(t, f)), $b);
            };
        }
        md5_steps!(step, a, b, c, d);
        let add = _mm512_add_epi32;
        store(state, [add(a, aa), add(b, bb), add(c, cc), add(d, dd)]);
    }

    /// One block of each lane into the SHA-1 states (FIPS 180-4 section
    /// 6.1.2): the message schedule in a ring of sixteen registers, the
    /// round functions as ternary logic (Ch 0xCA, Parity 0x96, Maj 0xE8).
    #[target_feature(enable = "avx512f,avx512bw")]
    #[rustfmt::skip]
    unsafe fn sha1_block(state: &mut [[u32; LANES]; 5], le_words: &[__m512i; 16]) {
        // SHA-1 reads its words big-endian.
        let swap = _mm512_set4_epi32(0x0c0d_0e0f, 0x0809_0a0b, 0x0405_0607, 0x0001_0203);
        let mut w: [__m512i; 16] = core::array::from_fn(|j| _mm512_shuffle_epi8(le_words[j], swap));
        let [mut a, mut b, mut c, mut d, mut e] = load(state);
        let saved = [a, b, c, d, e];
        let (k0, k1, k2, k3) = (
            _mm512_set1_epi32(0x5a82_7999),
            _mm512_set1_epi32(0x6ed9_eba1),
            _mm512_set1_epi32(0x8f1b_bcdcu32 as i32),
            _mm512_set1_epi32(0xca62_c1d6u32 as i32),
        );
        macro_rules! sched {
            ($w:ident, $t:literal, $t3:literal, $t8:literal, $t14:literal) => {
                $w[$t] = _mm512_rol_epi32::<1>(_mm512_xor_si512(
                    _mm512_ternarylogic_epi32::<0x96>($w[$t3], $w[$t8], $w[$t14]),
                    $w[$t],
                ));
            };
        }
        macro_rules! round {
            ($imm:literal, $k:ident, $a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $w:expr) => {
                let f = _mm512_ternarylogic_epi32::<$imm>($b, $c, $d);
                $e = _mm512_add_epi32(
                    _mm512_add_epi32($e, _mm512_rol_epi32::<5>($a)),
                    _mm512_add_epi32(f, _mm512_add_epi32($k, $w)),
                );
                $b = _mm512_rol_epi32::<30>($b);
            };
        }
            round!(0xCA, k0, a, b, c, d, e, w[0]); round!(0xCA, k0, e, a, b, c, d, w[1]); round!(0xCA, k0, d, e, a, b, c, w[2]); round!(0xCA, k0, c, d, e, a, b, w[3]); round!(0xCA, k0, b, c, d, e, a, w[4]);
            round!(0xCA, k0, a, b, c, d, e, w[5]); round!(0xCA, k0, e, a, b, c, d, w[6]); round!(0xCA, k0, d, e, a, b, c, w[7]); round!(0xCA, k0, c, d, e, a, b, w[8]); round!(0xCA, k0, b, c, d, e, a, w[9]);
            round!(0xCA, k0, a, b, c, d, e, w[10]); round!(0xCA, k0, e, a, b, c, d, w[11]); round!(0xCA, k0, d, e, a, b, c, w[12]); round!(0xCA, k0, c, d, e, a, b, w[13]); round!(0xCA, k0, b, c, d, e, a, w[14]);
            round!(0xCA, k0, a, b, c, d, e, w[15]); sched!(w, 0, 13, 8, 2); round!(0xCA, k0, e, a, b, c, d, w[0]); sched!(w, 1, 14, 9, 3); round!(0xCA, k0, d, e, a, b, c, w[1]); sched!(w, 2, 15, 10, 4); round!(0xCA, k0, c, d, e, a, b, w[2]); sched!(w, 3, 0, 11, 5); round!(0xCA, k0, b, c, d, e, a, w[3]);
            sched!(w, 4, 1, 12, 6); round!(0x96, k1, a, b, c, d, e, w[4]); sched!(w, 5, 2, 13, 7); round!(0x96, k1, e, a, b, c, d, w[5]); sched!(w, 6, 3, 14, 8); round!(0x96, k1, d, e, a, b, c, w[6]); sched!(w, 7, 4, 15, 9); round!(0x96, k1, c, d, e, a, b, w[7]); sched!(w, 8, 5, 0, 10); round!(0x96, k1, b, c, d, e, a, w[8]);
            sched!(w, 9, 6, 1, 11); round!(0x96, k1, a, b, c, d, e, w[9]); sched!(w, 10, 7, 2, 12); round!(0x96, k1, e, a, b, c, d, w[10]); sched!(w, 11, 8, 3, 13); round!(0x96, k1, d, e, a, b, c, w[11]); sched!(w, 12, 9, 4, 14); round!(0x96, k1, c, d, e, a, b, w[12]); sched!(w, 13, 10, 5, 15); round!(0x96, k1, b, c, d, e, a, w[13]);
            sched!(w, 14, 11, 6, 0); round!(0x96, k1, a, b, c, d, e, w[14]); sched!(w, 15, 12, 7, 1); round!(0x96, k1, e, a, b, c, d, w[15]); sched!(w, 0, 13, 8, 2); round!(0x96, k1, d, e, a, b, c, w[0]); sched!(w, 1, 14, 9, 3); round!(0x96, k1, c, d, e, a, b, w[1]); sched!(w, 2, 15, 10, 4); round!(0x96, k1, b, c, d, e, a, w[2]);
            sched!(w, 3, 0, 11, 5); round!(0x96, k1, a, b, c, d, e, w[3]); sched!(w, 4, 1, 12, 6); round!(0x96, k1, e, a, b, c, d, w[4]); sched!(w, 5, 2, 13, 7); round!(0x96, k1, d, e, a, b, c, w[5]); sched!(w, 6, 3, 14, 8); round!(0x96, k1, c, d, e, a, b, w[6]); sched!(w, 7, 4, 15, 9); round!(0x96, k1, b, c, d, e, a, w[7]);
            sched!(w, 8, 5, 0, 10); round!(0xE8, k2, a, b, c, d, e, w[8]); sched!(w, 9, 6, 1, 11); round!(0xE8, k2, e, a, b, c, d, w[9]); sched!(w, 10, 7, 2, 12); round!(0xE8, k2, d, e, a, b, c, w[10]); sched!(w, 11, 8, 3, 13); round!(0xE8, k2, c, d, e, a, b, w[11]); sched!(w, 12, 9, 4, 14); round!(0xE8, k2, b, c, d, e, a, w[12]);
            sched!(w, 13, 10, 5, 15); round!(0xE8, k2, a, b, c, d, e, w[13]); sched!(w, 14, 11, 6, 0); round!(0xE8, k2, e, a, b, c, d, w[14]); sched!(w, 15, 12, 7, 1); round!(0xE8, k2, d, e, a, b, c, w[15]); sched!(w, 0, 13, 8, 2); round!(0xE8, k2, c, d, e, a, b, w[0]); sched!(w, 1, 14, 9, 3); round!(0xE8, k2, b, c, d, e, a, w[1]);
            sched!(w, 2, 15, 10, 4); round!(0xE8, k2, a, b, c, d, e, w[2]); sched!(w, 3, 0, 11, 5); round!(0xE8, k2, e, a, b, c, d, w[3]); sched!(w, 4, 1, 12, 6); round!(0xE8, k2, d, e, a, b, c, w[4]); sched!(w, 5, 2, 13, 7); round!(0xE8, k2, c, d, e, a, b, w[5]); sched!(w, 6, 3, 14, 8); round!(0xE8, k2, b, c, d, e, a, w[6]);
            sched!(w, 7, 4, 15, 9); round!(0xE8, k2, a, b, c, d, e, w[7]); sched!(w, 8, 5, 0, 10); round!(0xE8, k2, e, a, b, c, d, w[8]); sched!(w, 9, 6, 1, 11); round!(0xE8, k2, d, e, a, b, c, w[9]); sched!(w, 10, 7, 2, 12); round!(0xE8, k2, c, d, e, a, b, w[10]); sched!(w, 11, 8, 3, 13); round!(0xE8, k2, b, c, d, e, a, w[11]);
            sched!(w, 12, 9, 4, 14); round!(0x96, k3, a, b, c, d, e, w[12]); sched!(w, 13, 10, 5, 15); round!(0x96, k3, e, a, b, c, d, w[13]); sched!(w, 14, 11, 6, 0); round!(0x96, k3, d, e, a, b, c, w[14]); sched!(w, 15, 12, 7, 1); round!(0x96, k3, c, d, e, a, b, w[15]); sched!(w, 0, 13, 8, 2); round!(0x96, k3, b, c, d, e, a, w[0]);
            sched!(w, 1, 14, 9, 3); round!(0x96, k3, a, b, c, d, e, w[1]); sched!(w, 2, 15, 10, 4); round!(0x96, k3, e, a, b, c, d, w[2]); sched!(w, 3, 0, 11, 5); round!(0x96, k3, d, e, a, b, c, w[3]); sched!(w, 4, 1, 12, 6); round!(0x96, k3, c, d, e, a, b, w[4]); sched!(w, 5, 2, 13, 7); round!(0x96, k3, b, c, d, e, a, w[5]);
            sched!(w, 6, 3, 14, 8); round!(0x96, k3, a, b, c, d, e, w[6]); sched!(w, 7, 4, 15, 9); round!(0x96, k3, e, a, b, c, d, w[7]); sched!(w, 8, 5, 0, 10); round!(0x96, k3, d, e, a, b, c, w[8]); sched!(w, 9, 6, 1, 11); round!(0x96, k3, c, d, e, a, b, w[9]); sched!(w, 10, 7, 2, 12); round!(0x96, k3, b, c, d, e, a, w[10]);
            sched!(w, 11, 8, 3, 13); round!(0x96, k3, a, b, c, d, e, w[11]); sched!(w, 12, 9, 4, 14); round!(0x96, k3, e, a, b, c, d, w[12]); sched!(w, 13, 10, 5, 15); round!(0x96, k3, d, e, a, b, c, w[13]); sched!(w, 14, 11, 6, 0); round!(0x96, k3, c, d, e, a, b, w[14]); sched!(w, 15, 12, 7, 1); round!(0x96, k3, b, c, d, e, a, w[15]);
        let add = _mm512_add_epi32;
        store(state, [add(a, saved[0]), add(b, saved[1]), add(c, saved[2]), add(d, saved[3]), add(e, saved[4])]);
    }
}
