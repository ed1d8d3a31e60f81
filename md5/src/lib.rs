//! MD5 for caseload's hot paths (image hash, file hash, carving, corpus
//! generation, E01 writing), behind the same RustCrypto `Digest` traits as
//! the `md-5` crate so that callers switch by changing only their
//! `Cargo.toml`.
//!
//! Why a crate of its own: MD5 is one long dependency chain per 64-byte
//! block, so its speed is set by instruction choice alone, and the image
//! hash of a whole disk runs exactly as fast as one core can do MD5. The
//! compression function is picked once per process, fastest first:
//!
//! 1. AVX-512 F+VL (`avx512` module): four one-cycle instructions per step,
//!    ~35% faster than `md-5` on this project's Xeon;
//! 2. the assembly routine of `md5-asm` on other x86/x86-64 CPUs, ~15%
//!    faster than `md-5` (it does not build for Windows);
//! 3. the `md-5` crate's Rust function everywhere else.
//!
//! (criterion: `engine_kernels`, group `hash-1MiB`.) Many independent
//! messages (carved items) go faster side by side: `caseload-lanes`. The
//! buffering, padding and length encoding here are the standard ones of
//! RFC 1321.

pub use digest::{self, Digest};

use digest::consts::U16;
use digest::{FixedOutput, FixedOutputReset, HashMarker, Output, OutputSizeUser, Reset, Update};

/// The initial chaining values of RFC 1321, section 3.3 (also for
/// `caseload-lanes`).
#[doc(hidden)]
pub const INIT: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// The 64 steps of RFC 1321 section 3.4 as calls of `$step!(imm, a, b, c,
/// d, i, g, s)`: the ternary-logic immediate of the round function (F 0xCA
/// = b ? c : d; G 0xE4 = d ? b : c; H 0x96 = b ^ c ^ d; I 0x39 = c ^ (b |
/// !d)), the registers in rotation, the step index, the message word and
/// the rotation. One table for this crate's one-message code and the
/// sixteen-lane code of `caseload-lanes`.
#[doc(hidden)]
#[macro_export]
#[rustfmt::skip]
macro_rules! md5_steps {
    ($step:ident, $a:ident, $b:ident, $c:ident, $d:ident) => {
        $step!(0xCA, $a, $b, $c, $d, 0, 0, 7); $step!(0xCA, $d, $a, $b, $c, 1, 1, 12); $step!(0xCA, $c, $d, $a, $b, 2, 2, 17); $step!(0xCA, $b, $c, $d, $a, 3, 3, 22);
        $step!(0xCA, $a, $b, $c, $d, 4, 4, 7); $step!(0xCA, $d, $a, $b, $c, 5, 5, 12); $step!(0xCA, $c, $d, $a, $b, 6, 6, 17); $step!(0xCA, $b, $c, $d, $a, 7, 7, 22);
        $step!(0xCA, $a, $b, $c, $d, 8, 8, 7); $step!(0xCA, $d, $a, $b, $c, 9, 9, 12); $step!(0xCA, $c, $d, $a, $b, 10, 10, 17); $step!(0xCA, $b, $c, $d, $a, 11, 11, 22);
        $step!(0xCA, $a, $b, $c, $d, 12, 12, 7); $step!(0xCA, $d, $a, $b, $c, 13, 13, 12); $step!(0xCA, $c, $d, $a, $b, 14, 14, 17); $step!(0xCA, $b, $c, $d, $a, 15, 15, 22);
        $step!(0xE4, $a, $b, $c, $d, 16, 1, 5); $step!(0xE4, $d, $a, $b, $c, 17, 6, 9); $step!(0xE4, $c, $d, $a, $b, 18, 11, 14); $step!(0xE4, $b, $c, $d, $a, 19, 0, 20);
        $step!(0xE4, $a, $b, $c, $d, 20, 5, 5); $step!(0xE4, $d, $a, $b, $c, 21, 10, 9); $step!(0xE4, $c, $d, $a, $b, 22, 15, 14); $step!(0xE4, $b, $c, $d, $a, 23, 4, 20);
        $step!(0xE4, $a, $b, $c, $d, 24, 9, 5); $step!(0xE4, $d, $a, $b, $c, 25, 14, 9); $step!(0xE4, $c, $d, $a, $b, 26, 3, 14); $step!(0xE4, $b, $c, $d, $a, 27, 8, 20);
        $step!(0xE4, $a, $b, $c, $d, 28, 13, 5); $step!(0xE4, $d, $a, $b, $c, 29, 2, 9); $step!(0xE4, $c, $d, $a, $b, 30, 7, 14); $step!(0xE4, $b, $c, $d, $a, 31, 12, 20);
        $step!(0x96, $a, $b, $c, $d, 32, 5, 4); $step!(0x96, $d, $a, $b, $c, 33, 8, 11); $step!(0x96, $c, $d, $a, $b, 34, 11, 16); $step!(0x96, $b, $c, $d, $a, 35, 14, 23);
        $step!(0x96, $a, $b, $c, $d, 36, 1, 4); $step!(0x96, $d, $a, $b, $c, 37, 4, 11); $step!(0x96, $c, $d, $a, $b, 38, 7, 16); $step!(0x96, $b, $c, $d, $a, 39, 10, 23);
        $step!(0x96, $a, $b, $c, $d, 40, 13, 4); $step!(0x96, $d, $a, $b, $c, 41, 0, 11); $step!(0x96, $c, $d, $a, $b, 42, 3, 16); $step!(0x96, $b, $c, $d, $a, 43, 6, 23);
        $step!(0x96, $a, $b, $c, $d, 44, 9, 4); $step!(0x96, $d, $a, $b, $c, 45, 12, 11); $step!(0x96, $c, $d, $a, $b, 46, 15, 16); $step!(0x96, $b, $c, $d, $a, 47, 2, 23);
        $step!(0x39, $a, $b, $c, $d, 48, 0, 6); $step!(0x39, $d, $a, $b, $c, 49, 7, 10); $step!(0x39, $c, $d, $a, $b, 50, 14, 15); $step!(0x39, $b, $c, $d, $a, 51, 5, 21);
        $step!(0x39, $a, $b, $c, $d, 52, 12, 6); $step!(0x39, $d, $a, $b, $c, 53, 3, 10); $step!(0x39, $c, $d, $a, $b, 54, 10, 15); $step!(0x39, $b, $c, $d, $a, 55, 1, 21);
        $step!(0x39, $a, $b, $c, $d, 56, 8, 6); $step!(0x39, $d, $a, $b, $c, 57, 15, 10); $step!(0x39, $c, $d, $a, $b, 58, 6, 15); $step!(0x39, $b, $c, $d, $a, 59, 13, 21);
        $step!(0x39, $a, $b, $c, $d, 60, 4, 6); $step!(0x39, $d, $a, $b, $c, 61, 11, 10); $step!(0x39, $c, $d, $a, $b, 62, 2, 15); $step!(0x39, $b, $c, $d, $a, 63, 9, 21);
    };
}
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
mod avx512;

/// The sine-derived constants of RFC 1321, section 3.4, in step order
/// (also for the many-message kernels of `caseload-lanes`).
#[doc(hidden)]
pub const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// A compression function: whole blocks into the chaining state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    Avx512,
    #[cfg(all(any(target_arch = "x86_64", target_arch = "x86"), not(windows)))]
    Asm,
    #[cfg(not(all(any(target_arch = "x86_64", target_arch = "x86"), not(windows))))]
    Soft,
}

impl Backend {
    /// The fastest backend this CPU runs (feature detection is cached by std).
    fn best() -> Backend {
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
            return Backend::Avx512;
        }
        #[cfg(all(any(target_arch = "x86_64", target_arch = "x86"), not(windows)))]
        return Backend::Asm;
        #[cfg(not(all(any(target_arch = "x86_64", target_arch = "x86"), not(windows))))]
        return Backend::Soft;
    }

    /// Every backend this CPU runs, for the tests to compare.
    #[cfg(test)]
    fn available() -> Vec<Backend> {
        let mut all = Vec::new();
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
            all.push(Backend::Avx512);
        }
        #[cfg(all(any(target_arch = "x86_64", target_arch = "x86"), not(windows)))]
        all.push(Backend::Asm);
        #[cfg(not(all(any(target_arch = "x86_64", target_arch = "x86"), not(windows))))]
        all.push(Backend::Soft);
        all
    }

    #[inline]
    fn compress(self, state: &mut [u32; 4], blocks: &[[u8; 64]]) {
        match self {
            // SAFETY: `best`/`available` return Avx512 only when the CPU
            // has AVX-512 F and VL.
            #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
            Backend::Avx512 => unsafe { avx512::compress(state, blocks) },
            #[cfg(all(any(target_arch = "x86_64", target_arch = "x86"), not(windows)))]
            Backend::Asm => md5_asm::compress(state, blocks),
            #[cfg(not(all(any(target_arch = "x86_64", target_arch = "x86"), not(windows))))]
            Backend::Soft => md5_soft::block_api::compress(state, blocks),
        }
    }
}

/// Compress whole blocks into the chaining state with the best backend.
#[inline]
fn compress(state: &mut [u32; 4], blocks: &[[u8; 64]]) {
    Backend::best().compress(state, blocks);
}

/// An MD5 hasher: `Md5::new()`, `update`, `finalize`, or `Md5::digest(data)`.
#[derive(Clone)]
pub struct Md5 {
    state: [u32; 4],
    /// Bytes fed so far (the length field of the padding is this mod 2^64, in bits).
    length: u64,
    /// A partial block waiting for more input: `pending[..pending_len]`.
    pending: [u8; 64],
    pending_len: usize,
}

impl Default for Md5 {
    fn default() -> Self {
        Md5 {
            state: INIT,
            length: 0,
            pending: [0; 64],
            pending_len: 0,
        }
    }
}

impl std::fmt::Debug for Md5 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The state is secret-ish and meaningless to a reader; show progress only.
        f.debug_struct("Md5").field("length", &self.length).finish()
    }
}

impl HashMarker for Md5 {}

impl OutputSizeUser for Md5 {
    type OutputSize = U16;
}

impl Update for Md5 {
    fn update(&mut self, mut data: &[u8]) {
        self.length = self.length.wrapping_add(data.len() as u64);
        if self.pending_len > 0 {
            let take = (64 - self.pending_len).min(data.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&data[..take]);
            self.pending_len += take;
            data = &data[take..];
            if self.pending_len < 64 {
                return;
            }
            let block = self.pending;
            compress(&mut self.state, &[block]);
            self.pending_len = 0;
        }
        let (blocks, rest) = data.as_chunks::<64>();
        if !blocks.is_empty() {
            compress(&mut self.state, blocks);
        }
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }
}

impl Md5 {
    /// Pad (RFC 1321 section 3.1-3.2), compress the last block(s) and write
    /// the little-endian state into `out`.
    fn finish(&mut self, out: &mut [u8]) {
        let bits = self.length.wrapping_mul(8);
        let mut tail = [0u8; 128];
        tail[..self.pending_len].copy_from_slice(&self.pending[..self.pending_len]);
        tail[self.pending_len] = 0x80;
        // The 8-byte length must fit after the 0x80 marker in this block,
        // else padding spills into a second one.
        let total = if self.pending_len < 56 { 64 } else { 128 };
        tail[total - 8..total].copy_from_slice(&bits.to_le_bytes());
        let (blocks, _) = tail[..total].as_chunks::<64>();
        compress(&mut self.state, blocks);
        for (word, chunk) in self.state.iter().zip(out.chunks_exact_mut(4)) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
    }
}

impl FixedOutput for Md5 {
    fn finalize_into(mut self, out: &mut Output<Self>) {
        self.finish(out);
    }
}

impl Reset for Md5 {
    fn reset(&mut self) {
        *self = Md5::default();
    }
}

impl FixedOutputReset for Md5 {
    fn finalize_into_reset(&mut self, out: &mut Output<Self>) {
        self.finish(out);
        Reset::reset(self);
    }
}

#[cfg(test)]
mod tests {
    use super::Backend;

    /// Every backend the CPU runs gives md-5's chaining state on the same
    /// blocks, one at a time and many at once.
    #[test]
    fn every_backend_matches_md5_soft() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let blocks: Vec<[u8; 64]> = (0..257)
            .map(|_| {
                let mut b = [0u8; 64];
                for byte in &mut b {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *byte = x as u8;
                }
                b
            })
            .collect();
        let mut want = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
        md5_soft::block_api::compress(&mut want, &blocks);
        let backends = Backend::available();
        assert!(!backends.is_empty());
        for backend in backends {
            let mut all = super::INIT;
            backend.compress(&mut all, &blocks);
            assert_eq!(all, want, "{backend:?}, all blocks at once");
            let mut one = super::INIT;
            for block in &blocks {
                backend.compress(&mut one, std::slice::from_ref(block));
            }
            assert_eq!(one, want, "{backend:?}, block by block");
        }
    }
}
