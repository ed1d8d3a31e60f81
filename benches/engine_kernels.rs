//! Criterion benches for the engine's per-byte kernels: the image and file
//! hashes (MD5 as caseload-digests and as md-5; MD5 and SHA-1 of sixteen
//! messages at once, caseload-lanes), E01 chunk inflation (through
//! the zlib-rs backend flate2 is built with here), signature identification
//! and entropy.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flate2::{Compression, Decompress, FlushDecompress, write::ZlibEncoder};
use md5::Digest;
use std::hint::black_box;
use std::io::Write;

#[path = "support/disk_like.rs"]
mod disk_like;

/// Disk-like content, no planted headers.
fn sample(len: usize) -> Vec<u8> {
    disk_like::disk_like(len, &[])
}

fn hashes(c: &mut Criterion) {
    let data = sample(1 << 20);
    let mut g = c.benchmark_group("hash-1MiB");
    g.throughput(Throughput::Bytes(data.len() as u64));
    // The engine's MD5 (assembly compression function) beside md-5's Rust
    // one, which is what it replaced.
    g.bench_function("md5", |b| {
        b.iter(|| caseload_digests::Md5::digest(black_box(&data)))
    });
    g.bench_function("md5 (md-5 crate)", |b| {
        b.iter(|| md5::Md5::digest(black_box(&data)))
    });
    // The same MiB as sixteen 64 KiB messages side by side (the carve
    // sink's way with carved items); the copies in are part of the cost.
    for (name, md5, sha1) in [
        ("md5 lanes 16x64KiB", true, false),
        ("md5+sha1 lanes 16x64KiB", true, true),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut lanes = caseload_lanes::Lanes::new(usize::MAX, md5, sha1);
                let mut n = 0;
                for (i, m) in data.chunks(64 << 10).enumerate() {
                    n += lanes.push(i, m.to_vec()).len();
                }
                n + lanes.finish().len()
            })
        });
    }
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
            // The engine's counter (four interleaved tables).
            let mut h = caseload_engine::signature::ByteHistogram::default();
            h.add(black_box(&data));
            h.entropy()
        })
    });
    g.finish();
}

criterion_group!(benches, hashes, inflate, signatures);
criterion_main!(benches);
