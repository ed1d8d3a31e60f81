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

use crate::K;

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
        md5_steps!(step, a, b, c, d);
        a = _mm_add_epi32(a, aa); b = _mm_add_epi32(b, bb); c = _mm_add_epi32(c, cc); d = _mm_add_epi32(d, dd);
    }
    state[0] = _mm_cvtsi128_si32(a) as u32;
    state[1] = _mm_cvtsi128_si32(b) as u32;
    state[2] = _mm_cvtsi128_si32(c) as u32;
    state[3] = _mm_cvtsi128_si32(d) as u32;
}

/// [`compress`] behind its feature check, as a safe function pointer for
/// the measured choice (the check is a cached load; the reference runs
/// where the CPU lacks the features, which the choice never lets happen).
pub(crate) fn compress_checked(state: &mut [u32; 4], blocks: &[[u8; 64]]) {
    if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
        // SAFETY: the CPU has AVX-512 F and VL.
        unsafe { compress(state, blocks) }
    } else {
        crate::md5_soft_compress(state, blocks);
    }
}
