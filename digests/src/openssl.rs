//! OpenSSL's MD5, SHA-1 and SHA-256 compression functions, from the
//! system's `libcrypto` loaded at run time.
//!
//! Why: OpenSSL's hand-scheduled assembly is what `md5sum`'s peers
//! (`openssl md5`, and most tools an examiner compares against) run, and
//! on some CPUs it is the fastest MD5 there is (on an AMD EPYC, 800 MB/s
//! where the AVX-512 function did 450). Loading it at run time rather
//! than linking it keeps the build free of OpenSSL: no headers, no
//! vendored build, nothing for the Windows cross-build or the fuzzer, and
//! a machine without `libcrypto` simply lacks this candidate.
//!
//! Only the public, documented (deprecated in 3.0 but exported by 1.1 and
//! 3.x alike) `MD5_Update`, `SHA1_Update` and `SHA256_Update` are called,
//! on contexts whose layout `md5.h` and `sha.h` publish. Given a context
//! with nothing pending and whole blocks, each compresses the blocks
//! straight from the caller's memory into the context's chaining values,
//! which are copied back out. Every result is checked against the Rust
//! reference before the candidate is timed (`select`), so a library with
//! another layout is caught, not trusted.

#![allow(unsafe_code)]

#[cfg(target_os = "linux")]
use std::ffi::{CStr, c_char};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

/// `MD5_CTX` (`openssl/md5.h`): `MD5_LONG` is a 32-bit `unsigned int`.
#[repr(C)]
struct Md5Ctx {
    h: [u32; 4],
    nl: u32,
    nh: u32,
    data: [u32; 16],
    num: u32,
}

/// `SHA_CTX` (`openssl/sha.h`).
#[repr(C)]
struct Sha1Ctx {
    h: [u32; 5],
    nl: u32,
    nh: u32,
    data: [u32; 16],
    num: u32,
}

/// `SHA256_CTX` (`openssl/sha.h`).
#[repr(C)]
struct Sha256Ctx {
    h: [u32; 8],
    nl: u32,
    nh: u32,
    data: [u32; 16],
    num: u32,
    md_len: u32,
}

type Update<C> = unsafe extern "C" fn(*mut C, *const c_void, usize) -> c_int;

/// The functions found in the library.
struct Libcrypto {
    md5: Update<Md5Ctx>,
    sha1: Update<Sha1Ctx>,
    sha256: Update<Sha256Ctx>,
    version: String,
}

/// The library's sonames, newest first (1.1's contexts have the same
/// layout).
#[cfg(target_os = "linux")]
const SONAMES: [&CStr; 2] = [c"libcrypto.so.3", c"libcrypto.so.1.1"];

static LIBCRYPTO: OnceLock<Result<Libcrypto, String>> = OnceLock::new();

fn libcrypto() -> Result<&'static Libcrypto, &'static str> {
    LIBCRYPTO.get_or_init(load).as_ref().map_err(String::as_str)
}

#[cfg(target_os = "linux")]
fn load() -> Result<Libcrypto, String> {
    for soname in SONAMES {
        // SAFETY: dlopen with a valid C string; the handle is kept for the
        // life of the process (never closed), so the symbols stay valid.
        let handle = unsafe { libc::dlopen(soname.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            continue;
        }
        let symbol = |name: &CStr| {
            // SAFETY: a valid handle and C string.
            let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
            (!p.is_null()).then_some(p)
        };
        let (Some(md5), Some(sha1), Some(sha256)) = (
            symbol(c"MD5_Update"),
            symbol(c"SHA1_Update"),
            symbol(c"SHA256_Update"),
        ) else {
            return Err(format!(
                "{} lacks MD5_Update, SHA1_Update or SHA256_Update",
                soname.to_string_lossy()
            ));
        };
        let version = symbol(c"OpenSSL_version")
            .map(|p| {
                // SAFETY: `const char *OpenSSL_version(int t)`, 0 =
                // OPENSSL_VERSION, a static string.
                let f: unsafe extern "C" fn(c_int) -> *const c_char =
                    unsafe { std::mem::transmute(p) };
                let s = unsafe { f(0) };
                if s.is_null() {
                    String::new()
                } else {
                    // SAFETY: a NUL-terminated static string.
                    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
                }
            })
            .unwrap_or_else(|| soname.to_string_lossy().into_owned());
        // SAFETY: the symbols have these C signatures (md5.h, sha.h).
        return Ok(unsafe {
            Libcrypto {
                md5: std::mem::transmute::<*mut c_void, Update<Md5Ctx>>(md5),
                sha1: std::mem::transmute::<*mut c_void, Update<Sha1Ctx>>(sha1),
                sha256: std::mem::transmute::<*mut c_void, Update<Sha256Ctx>>(sha256),
                version,
            }
        });
    }
    Err("no libcrypto.so.3 or libcrypto.so.1.1 on this system".into())
}

#[cfg(not(target_os = "linux"))]
fn load() -> Result<Libcrypto, String> {
    Err("loaded from the system's libcrypto on Linux only".into())
}

/// OpenSSL's version string, or why it is not loaded.
pub(crate) fn version() -> Result<&'static str, &'static str> {
    libcrypto().map(|l| l.version.as_str())
}

/// A candidate's function, or why there is none.
pub(crate) fn md5() -> Result<crate::select::Compress<[u32; 4]>, String> {
    libcrypto()
        .map(|_| md5_compress as _)
        .map_err(str::to_owned)
}

/// A candidate's function, or why there is none.
pub(crate) fn sha1() -> Result<crate::select::Compress<[u32; 5]>, String> {
    libcrypto()
        .map(|_| sha1_compress as _)
        .map_err(str::to_owned)
}

/// A candidate's function, or why there is none.
pub(crate) fn sha256() -> Result<crate::select::Compress<[u32; 8]>, String> {
    libcrypto()
        .map(|_| sha256_compress as _)
        .map_err(str::to_owned)
}

/// Feed whole blocks to an `*_Update` with nothing pending: it compresses
/// them in place, without copying, into the context's chaining values.
fn update<C>(f: Update<C>, ctx: &mut C, blocks: &[[u8; 64]]) {
    let bytes = blocks.as_flattened();
    // SAFETY: `ctx` is a valid, initialised context of the layout the
    // function expects; the data pointer and length describe `bytes`.
    unsafe { f(ctx, bytes.as_ptr().cast(), bytes.len()) };
}

fn md5_compress(state: &mut [u32; 4], blocks: &[[u8; 64]]) {
    match libcrypto() {
        Ok(lib) => {
            let mut ctx = Md5Ctx {
                h: *state,
                nl: 0,
                nh: 0,
                data: [0; 16],
                num: 0,
            };
            update(lib.md5, &mut ctx, blocks);
            *state = ctx.h;
        }
        // Only chosen once loaded; were it not, the reference is right.
        Err(_) => crate::md5_soft_compress(state, blocks),
    }
}

fn sha1_compress(state: &mut [u32; 5], blocks: &[[u8; 64]]) {
    match libcrypto() {
        Ok(lib) => {
            let mut ctx = Sha1Ctx {
                h: *state,
                nl: 0,
                nh: 0,
                data: [0; 16],
                num: 0,
            };
            update(lib.sha1, &mut ctx, blocks);
            *state = ctx.h;
        }
        Err(_) => sha1::block_api::compress(state, blocks),
    }
}

fn sha256_compress(state: &mut [u32; 8], blocks: &[[u8; 64]]) {
    match libcrypto() {
        Ok(lib) => {
            let mut ctx = Sha256Ctx {
                h: *state,
                nl: 0,
                nh: 0,
                data: [0; 16],
                num: 0,
                md_len: 32,
            };
            update(lib.sha256, &mut ctx, blocks);
            *state = ctx.h;
        }
        Err(_) => sha2::block_api::compress256(state, blocks),
    }
}
