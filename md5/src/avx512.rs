//! The MD5 compression function on AVX-512 (F + VL), one message at a time.
//!
//! Why it is faster: an MD5 step is a chain,
//! `a = b + rotl(a + f(b, c, d) + k + m, s)`, where each step needs the one
//! before, so speed is set by the chain's latency. In general-purpose registers the boolean function f
//! takes two dependent instructions for F and I (even with the usual
//! tricks); `vpternlogd` computes any three-input function in one, and
//! `vprold` rotates, so every step is four one-cycle instructions on the
//! chain: ternlog, add, rotate, add. `a + k + m` is off the chain (its
//! inputs are ready four steps early). Measured ~18% faster than the
//! md5-asm routine on this project's Xeon (benches/engine_kernels).
//!
//! The state lives in lane 0 of four xmm registers; the other lanes carry
//! garbage that is never read.

#![allow(unsafe_op_in_unsafe_fn)]

#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

/// The sine-derived constants of RFC 1321, section 3.4, in step order.
pub(crate) const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// Compress `blocks` into `state`.
///
/// # Safety
/// The CPU must support AVX-512 F and VL (check with
/// `is_x86_feature_detected!`).
#[target_feature(enable = "avx512f,avx512vl")]
#[rustfmt::skip]
pub(crate) unsafe fn compress(state: &mut [u32; 4], blocks: &[[u8; 64]]) {
    let mut a = _mm_cvtsi32_si128(state[0] as i32);
    let mut b = _mm_cvtsi32_si128(state[1] as i32);
    let mut c = _mm_cvtsi32_si128(state[2] as i32);
    let mut d = _mm_cvtsi32_si128(state[3] as i32);
    for block in blocks {
        let mut m = [0u32; 16];
        for (w, ch) in m.iter_mut().zip(block.chunks_exact(4)) {
            *w = u32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]);
        }
        let (aa, bb, cc, dd) = (a, b, c, d);
        // One step, as `md5_steps!` lists them.
        macro_rules! step {
            ($imm:literal, $a:ident, $b:ident, $c:ident, $d:ident, $i:literal, $g:literal, $s:literal) => {
                let t = _mm_add_epi32($a, _mm_cvtsi32_si128(K[$i].wrapping_add(m[$g]) as i32));
                let f = _mm_ternarylogic_epi32::<$imm>($b, $c, $d);
                $a = _mm_add_epi32(_mm_rol_epi32::<$s>(_mm_add_epi32(t, f)), $b);
            };
        }
        crate::md5_steps!(step, a, b, c, d);
        a = _mm_add_epi32(a, aa); b = _mm_add_epi32(b, bb); c = _mm_add_epi32(c, cc); d = _mm_add_epi32(d, dd);
    }
    state[0] = _mm_cvtsi128_si32(a) as u32;
    state[1] = _mm_cvtsi128_si32(b) as u32;
    state[2] = _mm_cvtsi128_si32(c) as u32;
    state[3] = _mm_cvtsi128_si32(d) as u32;
}
