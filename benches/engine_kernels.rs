//! Criterion benches for the engine's per-byte kernels: the image and file
//! hashes (MD5 as caseload-md5 and as md-5), E01 chunk inflation (through
//! the zlib-rs backend flate2 is built with here), signature identification
//! and entropy.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flate2::{Compression, Decompress, FlushDecompress, write::ZlibEncoder};
use md5::Digest;
use std::hint::black_box;
use std::io::Write;

/// Mixed content like a disk: text-like runs, random runs and zeros.
fn sample(len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let words: [&[u8]; 8] = [
        b"the ",
        b"evidence ",
        b"of ",
        b"storage ",
        b"case ",
        b"stage ",
        b"and ",
        b"file ",
    ];
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        match next() % 4 {
            0 | 1 => {
                for _ in 0..512 {
                    out.extend_from_slice(words[(next() % 8) as usize]);
                }
            }
            2 => out.extend((0..4096).map(|_| next() as u8)),
            _ => out.extend(std::iter::repeat_n(0u8, 4096)),
        }
    }
    out.truncate(len);
    out
}

fn hashes(c: &mut Criterion) {
    let data = sample(1 << 20);
    let mut g = c.benchmark_group("hash-1MiB");
    g.throughput(Throughput::Bytes(data.len() as u64));
    // The engine's MD5 (assembly compression function) beside md-5's Rust
    // one, which is what it replaced.
    g.bench_function("md5", |b| {
        b.iter(|| caseload_md5::Md5::digest(black_box(&data)))
    });
    g.bench_function("md5 (md-5 crate)", |b| {
        b.iter(|| md5::Md5::digest(black_box(&data)))
    });
    g.bench_function("sha1", |b| b.iter(|| sha1::Sha1::digest(black_box(&data))));
    g.bench_function("sha256", |b| {
        b.iter(|| sha2::Sha256::digest(black_box(&data)))
    });
    g.finish();
}

fn inflate(c: &mut Criterion) {
    let data = sample(64 * 32 * 1024);
    let chunks: Vec<Vec<u8>> = data
        .chunks(32 * 1024)
        .map(|chunk| {
            let mut e = ZlibEncoder::new(Vec::new(), Compression::fast());
            e.write_all(chunk).unwrap();
            e.finish().unwrap()
        })
        .collect();
    let mut g = c.benchmark_group("inflate-e01-chunks");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("zlib-rs 32KiB chunks", |b| {
        let mut out = vec![0u8; 32 * 1024];
        let mut d = Decompress::new(true);
        b.iter(|| {
            for chunk in &chunks {
                d.reset(true);
                d.decompress(black_box(chunk), &mut out, FlushDecompress::Finish)
                    .unwrap();
            }
        })
    });
    g.finish();
}

fn signatures(c: &mut Criterion) {
    let data = sample(1 << 20);
    let head = &data[..4096];
    c.bench_function("signature-identify-4KiB", |b| {
        b.iter(|| caseload_engine::signature::identify(black_box(head)))
    });
    let mut g = c.benchmark_group("entropy-1MiB");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("histogram+entropy", |b| {
        b.iter(|| {
            let mut h = [0u64; 256];
            for &x in black_box(&data) {
                h[usize::from(x)] += 1;
            }
            caseload_engine::signature::entropy(&h)
        })
    });
    g.finish();
}

criterion_group!(benches, hashes, inflate, signatures);
criterion_main!(benches);
