//! MD5, SHA-1, SHA-256 and Adler-32 for caseload's hot paths (image hash,
//! file hash, carving, corpus generation, E01 reading and writing), each
//! running the implementation that a measurement at first use found
//! fastest on this CPU, behind the RustCrypto `Digest` traits.
//!
//! Why a crate of its own: the image hash of a whole disk runs exactly as
//! fast as one core does MD5 (one long dependency chain per 64-byte
//! block), so its speed is set by instruction choice alone, and the best
//! choice differs between CPUs: the AVX-512 function below was 18% faster
//! than the assembly routine on a Xeon and 1.8 times slower than OpenSSL
//! on an AMD EPYC. So each kernel has candidates, checked against the
//! reference and timed on 32 KiB in cache at first use (about a
//! millisecond each; [`select`]), and the fastest runs. [`kernels`]
//! reports every choice (run.json's `system.kernels`, `caseload doctor`);
//! `CASELOAD_KERNEL_MD5=NAME` (and `_SHA1`, `_SHA256`, `_ADLER32`) forces
//! one, and [`select::check_forced`] refuses a name this CPU cannot run
//! rather than let it crash on an illegal instruction.
//!
//! The candidates, and why each stays:
//!
//! | kernel | candidate | what it is |
//! |---|---|---|
//! | MD5 | `avx512` | this crate's function: `vpternlogd` makes every step four one-cycle instructions on the chain (AVX-512 F+VL) |
//! | MD5 | `asm` | the `md5-asm` crate's x86 assembly (not on Windows: it does not build there) |
//! | MD5 | `rust` | the `md-5` crate's Rust, everywhere; also the reference |
//! | MD5, SHA-1, SHA-256 | `openssl` | the system's `libcrypto`, loaded at run time ([`openssl`](crate::openssl) says why not linked) |
//! | SHA-1, SHA-256 | `rustcrypto` | the `sha1`/`sha2` crates, which use the SHA extensions where the CPU has them; also the reference |
//! | Adler-32 | `zlib-rs` | zlib-rs's SIMD Adler-32 |
//! | Adler-32 | `adler2` | the `adler2` crate (scalar, four sums at once) |
//!
//! Considered and left: the `openssl` crate (it links OpenSSL at build
//! time: headers on every build machine, a vendored OpenSSL for the
//! Windows cross-build and the fuzzer, for the same functions loaded
//! here); `ring` (no MD5, SHA-1 only through its legacy API, and its SHA
//! code is OpenSSL's); `sha1-asm` (x86 assembly slower than the SHA
//! extensions where they exist and than OpenSSL's AVX2 code where they
//! do not). Many independent messages (carved items) go faster side by
//! side: `caseload-lanes`, which makes its own measured choice.

pub use digest::{self, Digest};

pub mod select;

mod openssl;

use digest::consts::{U16, U20, U32};
use digest::{FixedOutput, FixedOutputReset, HashMarker, Output, OutputSizeUser, Reset, Update};
use select::{Chosen, Compress, Implementation, KernelChoice};
use std::sync::OnceLock;

/// The initial chaining values of RFC 1321, section 3.3 (also for
/// `caseload-lanes`).
#[doc(hidden)]
pub const INIT: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// FIPS 180-4 section 5.3.1: SHA-1's initial state.
#[doc(hidden)]
pub const SHA1_INIT: [u32; 5] = [
    0x6745_2301,
    0xefcd_ab89,
    0x98ba_dcfe,
    0x1032_5476,
    0xc3d2_e1f0,
];

/// FIPS 180-4 section 5.3.3: SHA-256's initial state.
const SHA256_INIT: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

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
mod md5_avx512;

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

/// The environment variables that force a choice.
const MD5_ENV: &str = "CASELOAD_KERNEL_MD5";
const SHA1_ENV: &str = "CASELOAD_KERNEL_SHA1";
const SHA256_ENV: &str = "CASELOAD_KERNEL_SHA256";
const ADLER32_ENV: &str = "CASELOAD_KERNEL_ADLER32";

/// md-5's Rust compression function: the reference every MD5 candidate is
/// checked against.
pub(crate) fn md5_soft_compress(state: &mut [u32; 4], blocks: &[[u8; 64]]) {
    md5_soft::block_api::compress(state, blocks);
}

fn md5_candidates() -> Vec<Implementation<[u32; 4]>> {
    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    let avx512: Result<Compress<[u32; 4]>, String> =
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
            Ok(md5_avx512::compress_checked)
        } else {
            Err("this CPU lacks AVX-512 F+VL".into())
        };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "x86")))]
    let avx512: Result<Compress<[u32; 4]>, String> = Err("x86 only".into());
    #[cfg(all(any(target_arch = "x86_64", target_arch = "x86"), not(windows)))]
    let asm: Result<Compress<[u32; 4]>, String> = Ok(md5_asm::compress);
    #[cfg(not(all(any(target_arch = "x86_64", target_arch = "x86"), not(windows))))]
    let asm: Result<Compress<[u32; 4]>, String> =
        Err("md5-asm builds for x86 outside Windows only".into());
    vec![
        Implementation {
            name: "avx512",
            run: avx512,
        },
        Implementation {
            name: "asm",
            run: asm,
        },
        Implementation {
            name: "rust",
            run: Ok(md5_soft_compress),
        },
        Implementation {
            name: "openssl",
            run: openssl::md5(),
        },
    ]
}

fn md5_kernel() -> &'static Chosen<[u32; 4]> {
    static CHOSEN: OnceLock<Chosen<[u32; 4]>> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        select::choose_block("md5", MD5_ENV, INIT, md5_soft_compress, md5_candidates())
    })
}

fn sha1_candidates() -> Vec<Implementation<[u32; 5]>> {
    vec![
        Implementation {
            name: "rustcrypto",
            run: Ok(sha1::block_api::compress),
        },
        Implementation {
            name: "openssl",
            run: openssl::sha1(),
        },
    ]
}

fn sha256_candidates() -> Vec<Implementation<[u32; 8]>> {
    vec![
        Implementation {
            name: "rustcrypto",
            run: Ok(sha2::block_api::compress256),
        },
        Implementation {
            name: "openssl",
            run: openssl::sha256(),
        },
    ]
}

fn sha1_kernel() -> &'static Chosen<[u32; 5]> {
    static CHOSEN: OnceLock<Chosen<[u32; 5]>> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        let mut chosen = select::choose_block(
            "sha1",
            SHA1_ENV,
            SHA1_INIT,
            sha1::block_api::compress,
            sha1_candidates(),
        );
        chosen.record.note = Some(rustcrypto_note());
        chosen
    })
}

fn sha256_kernel() -> &'static Chosen<[u32; 8]> {
    static CHOSEN: OnceLock<Chosen<[u32; 8]>> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        let mut chosen = select::choose_block(
            "sha256",
            SHA256_ENV,
            SHA256_INIT,
            sha2::block_api::compress256,
            sha256_candidates(),
        );
        chosen.record.note = Some(rustcrypto_note());
        chosen
    })
}

/// What the RustCrypto SHA crates run on this CPU (they choose by feature).
fn rustcrypto_note() -> String {
    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    let shani = std::is_x86_feature_detected!("sha") && std::is_x86_feature_detected!("sse4.1");
    #[cfg(not(any(target_arch = "x86_64", target_arch = "x86")))]
    let shani = false;
    if shani {
        "rustcrypto runs the x86 SHA extensions on this CPU".into()
    } else {
        "rustcrypto runs its portable code on this CPU (no x86 SHA extensions)".into()
    }
}

/// Adler-32 as a block kernel over the running `(a, b)` sums is awkward;
/// it is chosen on whole buffers instead.
type Adler32 = fn(u32, &[u8]) -> u32;

fn adler32_zlib_rs(start: u32, data: &[u8]) -> u32 {
    zlib_rs::adler32::adler32(start, data)
}

fn adler32_adler2(start: u32, data: &[u8]) -> u32 {
    let mut h = adler2::Adler32::from_checksum(start);
    h.write_slice(data);
    h.checksum()
}

fn adler32_kernel() -> &'static (Adler32, KernelChoice) {
    static CHOSEN: OnceLock<(Adler32, KernelChoice)> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        // As a block kernel over one word of state: the running checksum.
        let zlib: Compress<[u32; 1]> =
            |s, blocks| s[0] = adler32_zlib_rs(s[0], blocks.as_flattened());
        let adler: Compress<[u32; 1]> =
            |s, blocks| s[0] = adler32_adler2(s[0], blocks.as_flattened());
        let chosen = select::choose_block(
            "adler32",
            ADLER32_ENV,
            [1],
            adler,
            vec![
                Implementation {
                    name: "zlib-rs",
                    run: Ok(zlib),
                },
                Implementation {
                    name: "adler2",
                    run: Ok(adler),
                },
            ],
        );
        let f: Adler32 = if chosen.record.chosen == "zlib-rs" {
            adler32_zlib_rs
        } else {
            adler32_adler2
        };
        (f, chosen.record)
    })
}

/// The Adler-32 of `data` (RFC 1950), with the implementation chosen for
/// this CPU.
pub fn adler32(data: &[u8]) -> u32 {
    (adler32_kernel().0)(1, data)
}

/// Every kernel of this crate: which implementation runs, how it was
/// chosen, and what each candidate measured. Measures any not yet chosen
/// (a millisecond or so each).
pub fn kernels() -> Vec<KernelChoice> {
    let mut md5 = md5_kernel().record.clone();
    if let Ok(v) = openssl::version() {
        md5.note = Some(format!("openssl candidate: {v}"));
    }
    vec![
        md5,
        sha1_kernel().record.clone(),
        sha256_kernel().record.clone(),
        adler32_kernel().1.clone(),
    ]
}

/// The digest of `data` by one named implementation of `kernel` (`md5`,
/// `sha1`, `sha256`, `adler32` big-endian), whatever the measured choice:
/// for tests that hold every implementation to the reference. `None` when
/// the implementation does not run here.
#[doc(hidden)]
pub fn digest_with(kernel: &str, implementation: &str, data: &[u8]) -> Option<Vec<u8>> {
    fn pick<S>(impls: Vec<Implementation<S>>, name: &str) -> Option<Compress<S>> {
        impls.into_iter().find(|i| i.name == name)?.run.ok()
    }
    fn run<S: Copy + IntoIterator<Item = u32>>(
        init: S,
        f: Compress<S>,
        data: &[u8],
        big: bool,
    ) -> Vec<u8> {
        let mut b = Blocks::new(init, f);
        b.update(data);
        b.pad(big);
        b.state
            .into_iter()
            .flat_map(|w| {
                if big {
                    w.to_be_bytes()
                } else {
                    w.to_le_bytes()
                }
            })
            .collect()
    }
    match kernel {
        "md5" => Some(run(
            INIT,
            pick(md5_candidates(), implementation)?,
            data,
            false,
        )),
        "sha1" => Some(run(
            SHA1_INIT,
            pick(sha1_candidates(), implementation)?,
            data,
            true,
        )),
        "sha256" => Some(run(
            SHA256_INIT,
            pick(sha256_candidates(), implementation)?,
            data,
            true,
        )),
        "adler32" => {
            let f: Adler32 = match implementation {
                "zlib-rs" => adler32_zlib_rs,
                "adler2" => adler32_adler2,
                _ => return None,
            };
            Some(f(1, data).to_be_bytes().to_vec())
        }
        _ => None,
    }
}

/// A block hash's running state: chaining values, length and a partial
/// block, the padding of RFC 1321 / FIPS 180-4 (they differ only in the
/// length's byte order).
#[derive(Clone)]
struct Blocks<S> {
    state: S,
    compress: Compress<S>,
    /// Bytes fed so far (the length field of the padding is this mod 2^64, in bits).
    length: u64,
    /// A partial block waiting for more input: `pending[..pending_len]`.
    pending: [u8; 64],
    pending_len: usize,
}

impl<S: Copy> Blocks<S> {
    fn new(state: S, compress: Compress<S>) -> Self {
        Blocks {
            state,
            compress,
            length: 0,
            pending: [0; 64],
            pending_len: 0,
        }
    }

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
            (self.compress)(&mut self.state, &[block]);
            self.pending_len = 0;
        }
        let (blocks, rest) = data.as_chunks::<64>();
        if !blocks.is_empty() {
            (self.compress)(&mut self.state, blocks);
        }
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    /// Pad, with the bit length in little-endian (MD5) or big-endian (SHA)
    /// order, and compress the last block(s).
    fn pad(&mut self, big_endian: bool) {
        let bits = self.length.wrapping_mul(8);
        let mut tail = [0u8; 128];
        tail[..self.pending_len].copy_from_slice(&self.pending[..self.pending_len]);
        tail[self.pending_len] = 0x80;
        // The 8-byte length must fit after the 0x80 marker in this block,
        // else padding spills into a second one.
        let total = if self.pending_len < 56 { 64 } else { 128 };
        tail[total - 8..total].copy_from_slice(&if big_endian {
            bits.to_be_bytes()
        } else {
            bits.to_le_bytes()
        });
        let (blocks, _) = tail[..total].as_chunks::<64>();
        (self.compress)(&mut self.state, blocks);
    }
}

/// A hasher type over [`Blocks`] with the RustCrypto traits.
macro_rules! block_hasher {
    ($(#[$doc:meta])* $name:ident, $words:literal, $size:ty, $init:expr, $kernel:ident, $big:literal) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(Blocks<[u32; $words]>);

        impl Default for $name {
            fn default() -> Self {
                $name(Blocks::new($init, $kernel().compress))
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                // The state is meaningless to a reader; show progress only.
                f.debug_struct(stringify!($name)).field("length", &self.0.length).finish()
            }
        }

        impl HashMarker for $name {}

        impl OutputSizeUser for $name {
            type OutputSize = $size;
        }

        impl Update for $name {
            fn update(&mut self, data: &[u8]) {
                self.0.update(data);
            }
        }

        impl $name {
            fn finish(&mut self, out: &mut [u8]) {
                self.0.pad($big);
                for (word, chunk) in self.0.state.iter().zip(out.chunks_exact_mut(4)) {
                    chunk.copy_from_slice(&if $big { word.to_be_bytes() } else { word.to_le_bytes() });
                }
            }
        }

        impl FixedOutput for $name {
            fn finalize_into(mut self, out: &mut Output<Self>) {
                self.finish(out);
            }
        }

        impl Reset for $name {
            fn reset(&mut self) {
                *self = $name::default();
            }
        }

        impl FixedOutputReset for $name {
            fn finalize_into_reset(&mut self, out: &mut Output<Self>) {
                self.finish(out);
                Reset::reset(self);
            }
        }
    };
}

block_hasher!(
    /// An MD5 hasher: `Md5::new()`, `update`, `finalize`, or `Md5::digest(data)`.
    Md5, 4, U16, INIT, md5_kernel, false
);
block_hasher!(
    /// A SHA-1 hasher, as [`Md5`].
    Sha1, 5, U20, SHA1_INIT, sha1_kernel, true
);
block_hasher!(
    /// A SHA-256 hasher, as [`Md5`].
    Sha256, 8, U32, SHA256_INIT, sha256_kernel, true
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every candidate of every kernel that runs here gives the
    /// reference's state on the same blocks, all at once and one by one.
    #[test]
    fn every_candidate_matches_the_reference() {
        fn check<S: Copy + PartialEq + std::fmt::Debug>(
            init: S,
            reference: Compress<S>,
            impls: Vec<Implementation<S>>,
        ) {
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
            let mut want = init;
            reference(&mut want, &blocks);
            for imp in impls {
                let Ok(f) = imp.run else { continue };
                let mut all = init;
                f(&mut all, &blocks);
                assert_eq!(all, want, "{}, all blocks at once", imp.name);
                let mut one = init;
                for block in &blocks {
                    f(&mut one, std::slice::from_ref(block));
                }
                assert_eq!(one, want, "{}, block by block", imp.name);
            }
        }
        check(INIT, md5_soft_compress, md5_candidates());
        check(SHA1_INIT, sha1::block_api::compress, sha1_candidates());
        check(
            SHA256_INIT,
            sha2::block_api::compress256,
            sha256_candidates(),
        );
    }

    #[test]
    fn a_forced_name_the_cpu_lacks_is_refused_with_the_list() {
        let candidates = vec![
            select::Candidate {
                name: "avx512".into(),
                available: false,
                mb_s: None,
                note: Some("this CPU lacks AVX-512 F+VL".into()),
            },
            select::Candidate {
                name: "rust".into(),
                available: true,
                mb_s: Some(500.0),
                note: None,
            },
        ];
        // SAFETY (of set_var): this test alone reads this variable.
        unsafe { std::env::set_var("CASELOAD_TEST_KERNEL_X", "AVX512") };
        let why = select::forced_problem("CASELOAD_TEST_KERNEL_X", &candidates);
        assert_eq!(
            why.as_deref(),
            Some(
                "CASELOAD_TEST_KERNEL_X=avx512: not available here (this CPU lacks AVX-512 F+VL); available: rust"
            )
        );
        unsafe { std::env::set_var("CASELOAD_TEST_KERNEL_X", "sse9") };
        let why = select::forced_problem("CASELOAD_TEST_KERNEL_X", &candidates).unwrap_or_default();
        assert!(
            why.contains("no such implementation; known: avx512, rust"),
            "{why}"
        );
        unsafe { std::env::set_var("CASELOAD_TEST_KERNEL_X", "rust") };
        assert_eq!(
            select::forced_problem("CASELOAD_TEST_KERNEL_X", &candidates),
            None
        );
    }

    #[test]
    fn every_kernel_is_recorded_with_a_runnable_choice() {
        for k in kernels() {
            let chosen = k.candidates.iter().find(|c| c.name == k.chosen);
            assert!(
                chosen.is_some_and(|c| c.available && c.mb_s.is_some_and(|m| m > 0.0)),
                "{k:?}"
            );
        }
    }
}
