//! Every digest must equal its reference (RFC 1321 and the md-5 crate; the
//! sha1, sha2 and adler2 crates) for every length and every way of
//! splitting the input into `update` calls, whichever implementation the
//! first-use measurement chose, and every implementation that runs here
//! on the edge lengths.

use caseload_digests::{Digest, Md5, Sha1, Sha256};

fn reference(data: &[u8]) -> [u8; 16] {
    md5_soft::Md5::digest(data).into()
}

fn ours(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

/// Deterministic bytes that are not a repeating pattern.
fn sample(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn rfc1321_test_suite() {
    let suite: [(&str, &str); 7] = [
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("a", "0cc175b9c0f1b6a831c399e269772661"),
        ("abc", "900150983cd24fb0d6963f7d28e17f72"),
        ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        (
            "abcdefghijklmnopqrstuvwxyz",
            "c3fcd3d76192e4007dfb496cca67e13b",
        ),
        (
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            "d174ab98d277d9f5a5611c2c9f419d9f",
        ),
        (
            "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
            "57edf4a22be3c955ac49da2e2107b67a",
        ),
    ];
    for (input, want) in suite {
        assert_eq!(hex(&ours(input.as_bytes())), want, "MD5({input:?})");
    }
}

#[test]
fn every_length_around_the_padding_boundaries() {
    let data = sample(1100);
    for len in 0..=data.len() {
        assert_eq!(ours(&data[..len]), reference(&data[..len]), "length {len}");
    }
}

#[test]
fn every_split_point_gives_the_same_digest() {
    for len in [55usize, 56, 63, 64, 65, 127, 128, 129, 300] {
        let data = sample(len);
        let want = reference(&data);
        for a in 0..=len {
            for b in a..=len.min(a + 70) {
                let mut h = Md5::new();
                h.update(&data[..a]);
                h.update(&data[a..b]);
                h.update(&data[b..]);
                assert_eq!(
                    <[u8; 16]>::from(h.finalize()),
                    want,
                    "len {len} split {a}/{b}"
                );
            }
        }
    }
}

#[test]
fn large_input_in_uneven_pieces_and_reset() {
    let data = sample(3 << 20);
    let want = reference(&data);
    let mut h = Md5::new();
    let mut at = 0;
    let mut step = 1;
    while at < data.len() {
        let end = (at + step).min(data.len());
        h.update(&data[at..end]);
        at = end;
        step = step * 7 % 100_003 + 1;
    }
    let clone = h.clone();
    assert_eq!(<[u8; 16]>::from(h.finalize_reset()), want);
    assert_eq!(<[u8; 16]>::from(clone.finalize()), want);
    // After a reset the hasher starts over.
    h.update(b"abc");
    assert_eq!(hex(&h.finalize()), "900150983cd24fb0d6963f7d28e17f72");
}

/// The reference digest of `data` for a kernel.
fn reference_of(kernel: &str, data: &[u8]) -> Vec<u8> {
    match kernel {
        "md5" => md5_soft::Md5::digest(data).to_vec(),
        "sha1" => sha1::Sha1::digest(data).to_vec(),
        "sha256" => sha2::Sha256::digest(data).to_vec(),
        "adler32" => adler2::adler32_slice(data).to_be_bytes().to_vec(),
        other => panic!("no reference for {other}"),
    }
}

#[test]
fn every_implementation_on_the_edge_lengths() {
    let data = sample((1 << 20) + 3);
    let lengths = [
        0usize,
        1,
        55,
        56,
        63,
        64,
        65,
        119,
        120,
        128,
        4096,
        (1 << 20) + 3,
    ];
    let mut ran = 0;
    for kernel in caseload_digests::kernels() {
        assert!(
            kernel.candidates.iter().filter(|c| c.available).count() >= 1,
            "{kernel:?}"
        );
        for candidate in kernel.candidates.iter().filter(|c| c.available) {
            for len in lengths {
                let got =
                    caseload_digests::digest_with(&kernel.kernel, &candidate.name, &data[..len])
                        .unwrap_or_else(|| {
                            panic!(
                                "{} {} is available but gave nothing",
                                kernel.kernel, candidate.name
                            )
                        });
                assert_eq!(
                    hex(&got),
                    hex(&reference_of(&kernel.kernel, &data[..len])),
                    "{} by {}, {len} bytes",
                    kernel.kernel,
                    candidate.name
                );
                ran += 1;
            }
        }
    }
    // Every CPU has md5's, sha1's and sha256's portable code and both
    // portable adler32s (OpenSSL and the x86 kernels come on top: an
    // aarch64 Linux without libcrypto has exactly these five).
    assert!(ran >= 5 * lengths.len(), "{ran}");
}

#[test]
fn the_chosen_sha_digests_equal_the_reference_however_split() {
    let data = sample(5000);
    for len in [0usize, 1, 55, 56, 63, 64, 65, 1000, 5000] {
        let d = &data[..len];
        assert_eq!(
            Sha1::digest(d).to_vec(),
            reference_of("sha1", d),
            "sha1 {len}"
        );
        assert_eq!(
            Sha256::digest(d).to_vec(),
            reference_of("sha256", d),
            "sha256 {len}"
        );
        assert_eq!(
            caseload_digests::adler32(d).to_be_bytes().to_vec(),
            reference_of("adler32", d),
            "adler32 {len}"
        );
        let mut h = Sha1::new();
        let mut g = Sha256::new();
        for piece in d.chunks(37) {
            h.update(piece);
            g.update(piece);
        }
        assert_eq!(h.finalize().to_vec(), reference_of("sha1", d));
        assert_eq!(g.finalize().to_vec(), reference_of("sha256", d));
    }
}
